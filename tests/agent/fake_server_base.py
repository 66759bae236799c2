"""What the fake model servers share: a real aiohttp server on a free port that notices
the moment a client disconnects."""

from __future__ import annotations

import asyncio
from typing import Any, Self

from aiohttp import web


class FakeModelServer:
    """Base of the fake providers: ``async with Server() as s: s.base_url``."""

    path = "/"

    def __init__(self, model: str) -> None:
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.streaming = asyncio.Event()
        """Set when a hanging reply has sent its first chunks."""
        self.disconnected = asyncio.Event()
        self.disconnected_at: float | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Answer one request (each fake provider implements its API here)."""
        raise web.HTTPNotFound()

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_post(self.path, self.handle)
        # handler_cancellation: the handler is cancelled the moment the client disconnects
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()
