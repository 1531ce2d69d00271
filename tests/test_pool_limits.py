"""The live connection pool follows the concurrency asked for: with more calls in flight than
the default pool holds, every call still gets its own connection at once."""

from __future__ import annotations

import asyncio
import contextlib

from realprobe import TransportOptions, default_catalog, make_client
from realprobe.probes.session import client_config

IN_FLIGHT = 120  # more than the default pool of 100


async def _fetch_all(n: int, concurrency: int | None) -> int:
    """The most connections the server saw open at once while `n` fetches were in flight."""
    state = {"open": 0, "max": 0}
    everyone = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state["open"] += 1
        state["max"] = max(state["max"], state["open"])
        if state["open"] >= n:
            everyone.set()
        try:
            await reader.readuntil(b"\r\n\r\n")
            # hold every answer until all calls are connected (or give up: the pool is smaller)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(everyone.wait(), 2.0)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            state["open"] -= 1
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=256)
    port = server.sockets[0].getsockname()[1]
    config = client_config(10.0, concurrency)
    client = make_client(default_catalog(), TransportOptions(), config=config)
    try:
        got = await asyncio.gather(*(
            client.fetch("GET", f"http://127.0.0.1:{port}/x", allow_private=True)
            for _ in range(n)
        ))
        assert all(f.status == 200 for f in got)
    finally:
        await client.aclose()
        server.close()
    return state["max"]


def test_pool_holds_as_many_connections_as_the_concurrency() -> None:
    assert client_config(10.0, 300).pool_limits().max_connections == 300
    assert client_config(10.0, 300).pool_limits().max_keepalive_connections == 300
    assert asyncio.run(_fetch_all(IN_FLIGHT, IN_FLIGHT)) == IN_FLIGHT



def test_each_host_gets_its_own_pool() -> None:
    """One pool per origin: httpcore's pool scans all its connections for each request it
    places, so a shared pool over hundreds of hosts costs quadratic CPU."""
    from realprobe.http.transports import HostPools

    async def go() -> None:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
            writer.close()

        servers = [await asyncio.start_server(handle, "127.0.0.1", 0) for _ in range(2)]
        client = make_client(default_catalog(), TransportOptions(), config=client_config(5.0))
        try:
            for server in servers:
                port = server.sockets[0].getsockname()[1]
                for _ in range(2):
                    got = await client.fetch("GET", f"http://127.0.0.1:{port}/", allow_private=True)
                    assert got.body == b"ok"
            assert isinstance(client.transport, HostPools)
            assert len(client.transport.pools) == 2
        finally:
            await client.aclose()
            for server in servers:
                server.close()

    asyncio.run(go())
