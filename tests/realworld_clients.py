"""Real third-party cassettes replayed through httpx, requests and aiohttp under
`realprobe.use_cassette`, each response compared byte for byte with what that client would
have read live from the recording (its body decoded as the client decodes it).

Used by tests/test_realworld_cassettes.py and bench/realworld_replay.py.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import httpx
import requests

import realprobe
from realprobe import load_cassette
from realprobe.cassettes.cassette import Call
from realprobe.http.decoding import decode_whole

DATA = Path(__file__).resolve().parent / "data"
THIRD_PARTY = DATA / "thirdparty_cassettes"
REALWORLD = DATA / "realworld_cassettes"
CLIENTS = ("httpx", "requests", "aiohttp")
CAP = 50 * 1024 * 1024


def real_files() -> list[Path]:
    """Every shipped real cassette file (third-party test suites, then single recordings)."""
    found = sorted(p for p in THIRD_PARTY.rglob("*") if p.suffix in (".yaml", ".yml", ".json"))
    return found + sorted(REALWORLD.glob("*.yaml"))


def live_body(call: Call) -> bytes:
    """What a client that decodes gzip/deflate reads from this recording."""
    enc = call.header("content-encoding")
    plain = decode_whole(call.body, enc, CAP) if enc and call.body else None
    return plain if plain is not None else call.body


def replayable(call: Call) -> bool:
    """A whole response whose URL a client can send (not a placeholder like <API-URL>)."""
    return (call.status is not None and call.error is None and call.complete
            and call.uri.startswith(("http://", "https://")) and "<" not in call.uri)


def _requests(call: Call) -> tuple[int, bytes]:
    r = requests.request(call.method, call.uri, data=call.request_body,
                         allow_redirects=False)
    return r.status_code, r.content


def _httpx(call: Call) -> tuple[int, bytes]:
    with httpx.Client() as client:
        r = client.request(call.method, call.uri, content=call.request_body)
        return r.status_code, r.content


def _aiohttp(call: Call) -> tuple[int, bytes]:
    async def go() -> tuple[int, bytes]:
        async with aiohttp.ClientSession() as session, session.request(
            call.method, yarl_url(call.uri), data=call.request_body, allow_redirects=False
        ) as r:
            return r.status, await r.read()

    return asyncio.run(go())


def yarl_url(uri: str) -> object:
    import yarl

    return yarl.URL(uri, encoded=True)  # the recorded URL as it is, not re-quoted


SEND = {"httpx": _httpx, "requests": _requests, "aiohttp": _aiohttp}


@dataclass
class Tally:
    tried: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CLIENTS, 0))
    identical: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CLIENTS, 0))
    failures: list[str] = field(default_factory=list)


def replay_file(path: Path, tally: Tally) -> None:
    """The interactions of `path` in recorded order, under one replay-only session per
    client (identical requests get their recordings in order)."""
    calls = [c for c in load_cassette(path).calls if replayable(c)]
    for client in CLIENTS:
        with realprobe.use_cassette(path, record_mode="none", on_exhausted="repeat-last"):
            for call in calls:
                tally.tried[client] += 1
                want = (call.status, live_body(call))
                try:
                    got = SEND[client](call)
                except Exception as exc:  # tallied, and named below
                    got = (-1, f"{type(exc).__name__}: {exc}".encode()[:200])
                if got == want:
                    tally.identical[client] += 1
                else:
                    tally.failures.append(f"{client} {path.name} {call.method} {call.uri}: "
                                          f"{got[0]} {got[1][:80]!r}")
