"""Toxics measured on loopback, and the runtime API (/_admin, /_journal) changing them."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest
from loopback_upstream import Upstream as LoopbackUpstream

from realprobe import Catalog, Profile
from realprobe.sandbox.server import SandboxThread
from realprobe.sandbox.setup import parse_toxic, sandbox_for
from realprobe.simulator.toxics import LimitDataToxic


@dataclass
class Reading:
    chunks: list[tuple[float, bytes]] = field(default_factory=list)  # (seconds, bytes)
    end: float = 0.0
    ended: str = "eof"  # eof | reset | complete

    @property
    def data(self) -> bytes:
        return b"".join(c for _, c in self.chunks)


def raw_get(url: str, path: str, *, until_complete: bool = False, limit_s: float = 10) -> Reading:
    """GET over a raw socket, timing every recv, until EOF/reset (or a complete response)."""
    host, port = url.removeprefix("http://").split(":")
    out = Reading()
    with socket.create_connection((host, int(port)), timeout=limit_s) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t0 = time.perf_counter()
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        while True:
            try:
                data = s.recv(65536)
            except ConnectionResetError:
                out.ended = "reset"
                break
            now = time.perf_counter() - t0
            if not data:
                break
            out.chunks.append((now, data))
            if until_complete and _complete(out.data):
                out.ended = "complete"
                break
        out.end = time.perf_counter() - t0
    return out


def _complete(data: bytes) -> bool:
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            return len(body) >= int(v)
    return False


@pytest.fixture
def sandbox(catalog: Catalog) -> Iterator[str]:
    with SandboxThread(sandbox_for(catalog, "calm", latency_scale=0.0)) as url:
        yield url


def put_toxic(url: str, scope: str, name: str, **params: object) -> None:
    r = httpx.put(f"{url}/_admin/toxics/{scope}/{name}", json=params)
    assert r.status_code == 200, r.text


def last_entry(url: str) -> dict[str, object]:
    entries = httpx.get(f"{url}/_journal").json()
    assert entries
    return dict(entries[-1])


def test_bandwidth_within_ten_percent(catalog: Catalog) -> None:
    rate = 40_000.0
    with LoopbackUpstream() as up:
        sb = sandbox_for(catalog, "calm", latency_scale=0.0, upstream=up.url)
        with SandboxThread(sb) as url:
            put_toxic(url, "*", "bandwidth", rate=rate)
            reading = raw_get(url, "/agify/big/80000", until_complete=True)
            entry = last_entry(url)
    assert up.requests == [("GET", "/big/80000")]
    assert reading.ended == "complete" and len(reading.data) > 80000
    assert len(reading.data) == entry["wire_bytes"]
    # the first slice goes out at once; the rest is paced at `rate`
    paced = reading.chunks[-1][0] - reading.chunks[0][0]
    expected = (len(reading.data) - len(reading.chunks[0][1])) / rate
    assert abs(paced - expected) / expected < 0.10, (paced, expected)


def test_slicer_sizes_and_delay(sandbox: str) -> None:
    put_toxic(sandbox, "agify", "slicer", average_size=64, size_variation=0, delay_ms=40)
    reading = raw_get(sandbox, "/agify/?name=harry", until_complete=True)
    sizes = [len(c) for _, c in reading.chunks]
    # a client descheduled for longer than the pause may read two slices at once
    assert len(sizes) >= 3
    assert all(n % 64 == 0 for n in sizes[:-1]), sizes
    gaps = [b[0] - a[0] for a, b in zip(reading.chunks, reading.chunks[1:], strict=False)]
    assert min(gaps) >= 0.03, gaps
    slices = -(-len(reading.data) // 64)
    assert reading.chunks[-1][0] - reading.chunks[0][0] >= 0.04 * (slices - 1) * 0.9
    # variation: slices of 30..70 bytes, not all alike
    put_toxic(sandbox, "agify", "slicer", average_size=50, size_variation=20, delay_ms=30)
    sizes = [len(c) for _, c in raw_get(sandbox, "/agify/?name=x", until_complete=True).chunks]
    assert all(n >= 30 for n in sizes[:-1]), sizes
    assert len(set(sizes[:-1])) > 1


def test_limit_data_byte_count(sandbox: str) -> None:
    put_toxic(sandbox, "*", "limit_data", bytes=150)
    reading = raw_get(sandbox, "/agify/?name=harry")
    assert len(reading.data) == 150 and reading.ended == "eof"
    entry = last_entry(sandbox)
    assert entry["wire_bytes"] == 150 and entry["ended"] == "closed"
    assert entry["toxics"] == ["limit_data"]


def test_timeout_point(sandbox: str) -> None:
    put_toxic(sandbox, "agify_age", "timeout", timeout_ms=400)
    reading = raw_get(sandbox, "/agify/?name=harry")
    assert reading.data == b""
    assert 0.38 <= reading.end < 1.2, reading.end
    # another tool is untouched
    other = raw_get(sandbox, "/genderize/?name=kim", until_complete=True)
    assert other.ended == "complete"


def test_reset_peer_after_bytes(sandbox: str) -> None:
    put_toxic(sandbox, "*", "reset_peer", after_bytes=40)
    reading = raw_get(sandbox, "/agify/?name=harry")
    assert len(reading.data) <= 40
    entry = last_entry(sandbox)
    assert entry["wire_bytes"] == 40 and entry["ended"] == "reset"
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{sandbox}/agify/?name=harry")


def test_slow_close(sandbox: str) -> None:
    put_toxic(sandbox, "*", "slow_close", delay_ms=400)
    reading = raw_get(sandbox, "/agify/?name=harry")
    assert _complete(reading.data)
    # the answer comes whole; the close comes only after the delay
    assert reading.end - reading.chunks[-1][0] >= 0.35, (reading.end, reading.chunks[-1][0])


def test_latency_with_jitter(sandbox: str) -> None:
    put_toxic(sandbox, "*", "latency", latency_ms=150, jitter_ms=50)
    took = []
    for _ in range(6):
        started = time.perf_counter()
        httpx.get(f"{sandbox}/agify/?name=harry")
        took.append(time.perf_counter() - started)
    delays = [e["delay_ms"] for e in httpx.get(f"{sandbox}/_journal").json()]
    assert all(100 <= d <= 200 for d in delays) and len(set(delays)) > 1, delays
    assert all(t >= 0.1 for t in took)


def test_toxicity_zero_never_applies(sandbox: str) -> None:
    put_toxic(sandbox, "*", "limit_data", bytes=10, toxicity=0.0)
    assert httpx.get(f"{sandbox}/agify/?name=harry").json()["name"] == "harry"


def test_runtime_profile_change_takes_effect_on_the_next_request(sandbox: str) -> None:
    assert httpx.get(f"{sandbox}/agify/?name=harry").status_code == 200
    failing = {
        "name": "all-fail",
        "tools": {"agify_age": {"success_rate": 0.0, "errors": {"SERVER_ERROR": 1.0}}},
    }
    assert httpx.put(f"{sandbox}/_admin/profile", json=failing).status_code == 200
    assert httpx.get(f"{sandbox}/agify/?name=harry").status_code >= 500
    assert httpx.get(f"{sandbox}/_admin/profile").json()["name"] == "all-fail"
    assert httpx.delete(f"{sandbox}/_admin/profile").status_code == 200
    assert httpx.get(f"{sandbox}/agify/?name=harry").status_code == 200
    assert httpx.get(f"{sandbox}/_admin").json()["cleared"] is True
    r = httpx.put(f"{sandbox}/_admin/profile?builtin=harsh")
    assert r.status_code == 200 and httpx.get(f"{sandbox}/_admin").json()["profile"] == "harsh"
    # toxics too: set, read back, remove
    put_toxic(sandbox, "agify", "limit_data", bytes=20)
    assert httpx.get(f"{sandbox}/_admin/toxics/agify/limit_data").json()["bytes"] == 20
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{sandbox}/agify/?name=harry")
    assert httpx.delete(f"{sandbox}/_admin/toxics/agify/limit_data").status_code == 200
    assert httpx.put(f"{sandbox}/_admin/profile?builtin=calm").status_code == 200
    assert httpx.get(f"{sandbox}/agify/?name=harry").status_code == 200


def test_seed_reset_replays_the_same_faults(catalog: Catalog) -> None:
    with SandboxThread(sandbox_for(catalog, "harsh", seed=5, latency_scale=0.0)) as url:

        def faults() -> list[str]:
            httpx.delete(f"{url}/_journal")
            for _ in range(12):
                with contextlib.suppress(httpx.TransportError):
                    httpx.get(f"{url}/agify/?name=harry", timeout=0.5)
            return [str(e["fault"]) for e in httpx.get(f"{url}/_journal").json()]

        first = faults()
        assert httpx.put(f"{url}/_admin/seed").json() == {"seed": 5}
        assert faults() == first
        assert httpx.put(f"{url}/_admin/seed", json={"seed": 6}).status_code == 200
        assert faults() != first
        assert httpx.post(f"{url}/_admin/reset").json()["seed"] == 5


def test_bad_admin_input_is_a_clear_400(sandbox: str) -> None:
    r = httpx.put(f"{sandbox}/_admin/toxics/*/x", json={"type": "latencyy"})
    assert r.status_code == 400 and "bandwidth" in r.json()["error"]
    r = httpx.put(f"{sandbox}/_admin/profile", content=b'{"tools": {"a": {"success_rate": 2}}}',
                  headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "success_rate" in r.json()["error"]
    assert httpx.get(f"{sandbox}/_admin/nothing").status_code == 404


def test_profile_toxics_apply_from_the_start(catalog: Catalog) -> None:
    profile = Profile(name="cut", toxics={"agify": [LimitDataToxic(bytes=12)]})
    with SandboxThread(sandbox_for(catalog, profile, latency_scale=0.0)) as url:
        assert len(raw_get(url, "/agify/?name=harry").data) == 12
        assert raw_get(url, "/genderize/?name=kim", until_complete=True).ended == "complete"
    scope, name, toxic = parse_toxic("agify:bandwidth:rate=2000")
    assert (scope, name, toxic.type) == ("agify", "bandwidth", "bandwidth")
