"""The clients hand requests straight to their httpx transport: what goes out must be what an
`httpx.Client` with the same settings would have sent, and answers leave no state behind."""

from __future__ import annotations

import httpx
import pytest

from realprobe import ClientConfig, ErrorCode, HttpClient, SyncHttpClient
from realprobe.adapters.http import FetchFailure

CASES = [
    ("GET", "http://api.example/v1/x?q=1", {"Accept": "application/json"}),
    ("POST", "http://api.example:8080/x", {"X-Key": "v"}),  # bodiless POST: Content-Length 0
    ("PUT", "http://api.example/x", {"Host": "other", "Accept-Encoding": "br"}),
    ("GET", "http://api.example/x", None),
    ("GET", "http://user:pa%20ss@api.example/x", None),  # Basic auth from the URL
]


class Echo(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Answers every request with a cookie, keeping what it was sent."""

    def __init__(self) -> None:
        self.seen: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        return httpx.Response(200, headers={"Set-Cookie": "sid=1; Path=/"}, content=b"{}")

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return self.handle_request(request)


def _as_httpx_client_sends(config: ClientConfig) -> list[httpx.Request]:
    """What a fresh `httpx.Client` with realprobe's settings sends for each case."""
    echo = Echo()
    for method, url, headers in CASES:
        with httpx.Client(transport=echo, headers={"User-Agent": config.user_agent,
                                                   "Accept-Encoding": "gzip, deflate"}) as c:
            c.request(method, url, headers=headers)
    return echo.seen


def _wire(requests: list[httpx.Request]) -> list[tuple[object, ...]]:
    return [(r.method, str(r.url), r.headers.raw, r.read()) for r in requests]


def test_sync_requests_match_httpx_client_and_carry_no_cookies() -> None:
    echo, config = Echo(), ClientConfig()
    with SyncHttpClient(echo, config=config) as client:
        for _ in range(2):  # the second round: prepared headers reused, cookie not sent
            for method, url, headers in CASES:
                assert client.fetch(method, url, headers=headers).status == 200
    expected = _wire(_as_httpx_client_sends(config))
    assert _wire(echo.seen) == expected * 2
    assert all("cookie" not in r.headers for r in echo.seen)


async def test_async_requests_match_httpx_client() -> None:
    echo, config = Echo(), ClientConfig(user_agent="probe-test/1")
    client = HttpClient(echo, config=config)
    for method, url, headers in CASES:
        assert (await client.fetch(method, url, headers=headers)).status == 200
    await client.aclose()
    assert _wire(echo.seen) == _wire(_as_httpx_client_sends(config))
    with pytest.raises(FetchFailure) as failed:  # a closed client sends nothing
        await client.fetch("GET", "http://api.example/x")
    assert failed.value.code is ErrorCode.OPERATION_FAILED and len(echo.seen) == len(CASES)
