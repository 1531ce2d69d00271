"""Redirects to host names that resolve to non-public addresses are refused (SSRF guard).

The transport is httpx.MockTransport and the resolver is injected: no socket, no DNS.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from realprobe import ErrorCode, HttpClient, SyncHttpClient
from realprobe.adapters.http import Fetched, FetchFailure

TABLE = {"metadata.internal.example": ["169.254.169.254"], "api.moved.example": ["93.184.216.34"]}


def handler(request: httpx.Request) -> httpx.Response:
    if request.url.host == "api.origin.example":
        target = request.url.params.get("to", "")
        return httpx.Response(301, headers={"Location": f"http://{target}/v1/data"})
    return httpx.Response(200, json={"ok": True, "host": request.url.host})


async def resolve(host: str) -> list[str]:
    return TABLE.get(host, [])


def fetch_async(to: str) -> Fetched | FetchFailure:
    async def go() -> Fetched | FetchFailure:
        client = HttpClient(httpx.MockTransport(handler), resolver=resolve)
        try:
            return await client.fetch("GET", "https://api.origin.example/", params={"to": to})
        except FetchFailure as exc:
            return exc
        finally:
            await client.aclose()

    return asyncio.run(go())


def fetch_sync(to: str) -> Fetched | FetchFailure:
    with SyncHttpClient(
        httpx.MockTransport(handler), resolver=lambda h: TABLE.get(h, [])
    ) as client:
        try:
            return client.fetch("GET", "https://api.origin.example/", params={"to": to})
        except FetchFailure as exc:
            return exc


@pytest.mark.parametrize("fetch", [fetch_async, fetch_sync], ids=["async", "sync"])
def test_name_resolving_to_link_local_is_refused(fetch) -> None:  # type: ignore[no-untyped-def]
    out = fetch("metadata.internal.example")
    assert isinstance(out, FetchFailure)
    assert out.code is ErrorCode.OPERATION_FAILED
    assert "169.254.169.254" in out.message
    assert out.redirects and "metadata.internal.example" in out.redirects[0]


@pytest.mark.parametrize("fetch", [fetch_async, fetch_sync], ids=["async", "sync"])
def test_name_resolving_to_public_address_is_followed(fetch) -> None:  # type: ignore[no-untyped-def]
    out = fetch("api.moved.example")
    assert not isinstance(out, FetchFailure), out
    assert out.status == 200 and b"api.moved.example" in out.body
    assert out.redirects == ["301 http://api.moved.example/v1/data"]
