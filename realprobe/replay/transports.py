"""Transports that are not recordings: the live network, and routing to the loopback sandbox."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

SANDBOX_FAULT_PREFIX = "/_fault/"


def live_transport(max_connections: int = 100) -> httpx.AsyncHTTPTransport:
    return httpx.AsyncHTTPTransport(
        retries=0,
        limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=50),
    )


class SandboxRouter(httpx.AsyncBaseTransport):
    """Sends each canonical API URL to the sandbox at `<sandbox>/<api-id>/<original path>`.

    Requests keep their canonical URLs everywhere above this transport (adapters, redirect
    policy, cassettes), so a recording made against the sandbox replays whatever port the
    sandbox had. Locations pointing back into the sandbox are mapped back to canonical form.
    """

    def __init__(
        self,
        sandbox_url: str,
        origins: Mapping[str, str],
        inner: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.sandbox = httpx.URL(sandbox_url.rstrip("/"))
        # origin ("https://api.example.com") -> api id
        self.origins = dict(origins)
        self.by_api = {api: origin for origin, api in self.origins.items()}
        self.inner = inner or live_transport()
        self._base_path = self.sandbox.raw_path.decode().split("?")[0].rstrip("/")

    def _origin(self, url: httpx.URL) -> str:
        port = f":{url.port}" if url.port else ""
        return f"{url.scheme}://{url.host}{port}"

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        api = self.origins.get(self._origin(request.url))
        if api is None:
            # not a catalogue API (an LLM endpoint, say): unchanged to the inner transport
            return await self.inner.handle_async_request(request)
        base_path = self._base_path
        target = self.sandbox.copy_with(
            raw_path=(base_path + f"/{api}" + request.url.raw_path.decode()).encode()
        )
        # Swap the URL for the duration of the send instead of building a second Request
        # (that costs ~40 us a call); the canonical URL is back before anyone else looks.
        # The Host header stays the API's own, as a forward proxy would send it.
        canonical = request.url
        request.url = target
        try:
            response = await self.inner.handle_async_request(request)
        finally:
            request.url = canonical
        location = response.headers.get("location")
        if location:
            response.headers["location"] = self._unroute(location, base_path)
        return response

    def _unroute(self, location: str, base_path: str) -> str:
        """`/<api>/path` or `<sandbox>/<api>/path` back to `<origin>/path`."""
        sandbox_origin = self._origin(self.sandbox)
        rest = location
        if rest.startswith(sandbox_origin):
            rest = rest[len(sandbox_origin) :]
        elif "://" in rest:
            return location  # somewhere else entirely: leave it for the redirect policy
        if base_path and rest.startswith(base_path + "/"):
            rest = rest[len(base_path) :]
        parts = rest.split("/", 2)
        if len(parts) >= 2 and parts[1] in self.by_api:
            return self.by_api[parts[1]] + "/" + (parts[2] if len(parts) > 2 else "")
        return location

    async def aclose(self) -> None:
        await self.inner.aclose()


def origin_map(base_urls: Mapping[str, str]) -> dict[str, str]:
    """{api_id: base_url} to {origin: api_id}."""
    out: dict[str, str] = {}
    for api, base in base_urls.items():
        url = httpx.URL(base)
        port = f":{url.port}" if url.port else ""
        out[f"{url.scheme}://{url.host}{port}"] = api
    return out
