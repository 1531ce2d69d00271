"""`tools/list` is answered from its wire form after the first listing: the same answer,
without the SDK validating and shaping the whole listing again."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp import Client
from mcp.types import PaginatedRequestParams

from realprobe import McpService, ServiceOptions, TransportOptions, default_catalog
from realprobe.mcp.rendering import ToolListCache


def _service() -> McpService:
    return McpService(
        default_catalog(), ServiceOptions(transport=TransportOptions(sandbox="http://127.0.0.1:9"))
    )


def test_second_listing_comes_from_the_cache() -> None:
    async def go() -> None:
        service = _service()
        built = 0
        plain = service._on_list_tools

        async def counted(*args: Any) -> Any:
            nonlocal built
            built += 1
            return await plain(*args)

        service.server.add_request_handler("tools/list", PaginatedRequestParams, counted)
        async with service, Client(service.server, cache=None) as client:
            first = await client.list_tools()
            again = await client.list_tools()
            third = await client.list_tools()
        assert first == again == third
        assert len(first.tools) == len(service.tools)
        assert built == 1
        cache = next(m for m in service.server.middleware if isinstance(m, ToolListCache))
        assert len(cache.wire) == 1

    asyncio.run(go())


def test_listing_with_a_cursor_goes_the_whole_way() -> None:
    async def go() -> None:
        service = _service()
        async with service, Client(service.server, cache=None) as client:
            await client.list_tools(cursor="abc")
            await client.list_tools(cursor="abc")
        cache = next(m for m in service.server.middleware if isinstance(m, ToolListCache))
        assert cache.wire == {}

    asyncio.run(go())
