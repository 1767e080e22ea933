"""COS (placeholder until the COS backend lands)."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from ..clock import Clock
from ..config import EmulatorConfig
from ..iam import Iam
from ..runtime.faults import Faults


class Cos:
    def __init__(self, root: Path, iam: Iam, config: EmulatorConfig, clock: Clock, faults: Faults) -> None:
        self.root = root

    async def handle(self, request: web.Request, bucket: str, region: str) -> web.StreamResponse:
        return web.Response(status=501)

    async def handle_service(self, request: web.Request) -> web.StreamResponse:
        return web.Response(status=501)

    def reset(self) -> None:
        pass

    def close(self) -> None:
        pass
