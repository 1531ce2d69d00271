"""Every client records the request body it sent: a `json=` POST through httpx, requests and
aiohttp (and aiohttp's plain form `data=`, and bodies sent from a file or in chunks by a
generator) is kept in the cassette as the bytes that went out, and a replay under a body
matcher misses a request with a different body."""

from __future__ import annotations

import asyncio
import http.server
import io
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
import requests

from realprobe import load_cassette, use_cassette
from realprobe.cassettes.core import CassetteMiss


class _Echo(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str, bytes]]

    def do_POST(self) -> None:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while size := int(self.rfile.readline().strip(), 16):
                data += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
        else:
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).seen.append((self.headers.get("Content-Type", ""), data))
        body = json.dumps({"n": len(type(self).seen)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def echo() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
    seen: list[tuple[str, bytes]] = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                          type("H", (_Echo,), {"seen": seen}))
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_port}/search", seen
    srv.shutdown()
    srv.server_close()


def _httpx(url: str, payload: dict[str, Any]) -> int:
    with httpx.Client() as client:
        return int(client.post(url, json=payload).json()["n"])


def _requests(url: str, payload: dict[str, Any]) -> int:
    return int(requests.post(url, json=payload, timeout=10).json()["n"])


def _aiohttp(url: str, payload: dict[str, Any]) -> int:
    async def go() -> int:
        async with aiohttp.ClientSession() as session, session.post(url, json=payload) as r:
            return int((await r.json())["n"])

    return asyncio.run(go())


def _aiohttp_form(url: str, payload: dict[str, Any]) -> int:
    async def go() -> int:
        form = {k: str(v) for k, v in payload.items()}
        async with aiohttp.ClientSession() as session, session.post(url, data=form) as r:
            return int((await r.json())["n"])

    return asyncio.run(go())


def _chunks(payload: dict[str, Any]) -> Iterator[bytes]:
    raw = json.dumps(payload).encode()
    yield raw[:5]
    yield raw[5:]


def _requests_chunks(url: str, payload: dict[str, Any]) -> int:
    return int(requests.post(url, data=_chunks(payload), timeout=10).json()["n"])


def _requests_file(url: str, payload: dict[str, Any]) -> int:
    raw = io.BytesIO(json.dumps(payload).encode())
    return int(requests.post(url, data=raw, timeout=10).json()["n"])


def _httpx_chunks(url: str, payload: dict[str, Any]) -> int:
    with httpx.Client() as client:
        return int(client.post(url, content=_chunks(payload)).json()["n"])


def _aiohttp_chunks(url: str, payload: dict[str, Any]) -> int:
    async def go() -> int:
        async def gen() -> AsyncIterator[bytes]:
            for chunk in _chunks(payload):
                yield chunk

        async with aiohttp.ClientSession() as session, session.post(url, data=gen()) as r:
            return int((await r.json())["n"])

    return asyncio.run(go())


def _aiohttp_file(url: str, payload: dict[str, Any]) -> int:
    async def go() -> int:
        raw = io.BytesIO(json.dumps(payload).encode())
        async with aiohttp.ClientSession() as session, session.post(url, data=raw) as r:
            return int((await r.json())["n"])

    return asyncio.run(go())


CLIENTS: dict[str, Callable[[str, dict[str, Any]], int]] = {
    "httpx": _httpx, "requests": _requests, "aiohttp": _aiohttp,
    "aiohttp-form": _aiohttp_form, "requests-chunks": _requests_chunks,
    "requests-file": _requests_file, "httpx-chunks": _httpx_chunks,
    "aiohttp-chunks": _aiohttp_chunks, "aiohttp-file": _aiohttp_file,
}


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_each_client_records_its_body_and_a_body_matcher_tells_bodies_apart(
    client: str, echo: tuple[str, list[tuple[str, bytes]]], tmp_path: Path,
) -> None:
    url, seen = echo
    send = CLIENTS[client]
    path = tmp_path / "bodies.yaml"
    with use_cassette(path, record_mode="once", scrub=False):
        assert send(url, {"q": "alpha", "page": 1}) == 1
    sent_type, sent = seen[0]
    recorded = load_cassette(path).calls
    assert len(recorded) == 1
    assert recorded[0].request_body == sent and sent  # the bytes that went out, not null
    if client == "aiohttp-form":
        assert sent == b"q=alpha&page=1"
        assert sent_type == "application/x-www-form-urlencoded"
    else:
        assert json.loads(sent) == {"q": "alpha", "page": 1}
        assert sent_type == "application/json" or "-" in client  # raw bytes: no JSON type
    with use_cassette(path, record_mode="none", match_on=("method", "uri", "body")):
        assert send(url, {"q": "alpha", "page": 1}) == 1
    with (use_cassette(path, record_mode="none", match_on=("method", "uri", "body")),
          pytest.raises(CassetteMiss)):
        send(url, {"q": "beta", "page": 1})
    assert len(seen) == 1  # nothing replayed went out
