"""Instance metadata (placeholder until the CVM backend lands)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from ..cloud import Cloud


async def handle(request: web.Request, cloud: Cloud) -> web.StreamResponse:
    return web.Response(status=404)
