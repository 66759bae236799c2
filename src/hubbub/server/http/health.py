"""``GET /health``: liveness and a few counts — hubbub's fields and agentchat's (its server's
``/health``), so that either's monitoring reads it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from aiohttp import web

from hubbub import __version__
from hubbub.protocol.ids import Clock
from hubbub.server.gateway import Gateway
from hubbub.server.json_body import json_body
from hubbub.server.state.visibility import sees_channel

HEALTHY: Final = "healthy"
"""``status`` when all is well (agentchat's word); else ``degraded``."""
_ISO = Clock()


def health_handler(
    key: web.AppKey[Gateway],
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The ``GET /health`` handler of the gateway stored under ``key``."""

    async def health(request: web.Request) -> web.Response:
        """Liveness, a few counts, and ``degraded`` with the reason while nothing can be
        stored."""
        router = request.app[key]
        store = router.store
        body: dict[str, object] = {
            "status": healthy_word(router) if store.available else "degraded",
            "version": __version__,
            "spaces": sorted(router.spaces),
            "connections": sum(len(s.online) for s in router.spaces.values()),
            "store": {"available": store.available},
        } | agentchat_health(router)
        if not store.available:
            body["store"] = {
                "available": False,
                "error": store.problem or "the store cannot commit; see the gateway's log",
            }
        return json_body(body)

    return health


def healthy_word(router: Gateway) -> str:
    """``ok`` where a space asks for MEW's word (read from MEW's ``space.yaml``), else
    agentchat's ``healthy``."""
    words = {space.config.health_status for space in router.spaces.values()}
    return "ok" if "ok" in words else HEALTHY


def agentchat_health(router: Gateway) -> dict[str, object]:
    """The other fields of agentchat's ``/health``, its times as ISO-8601 text."""
    now = Clock.now_ms()
    sessions = [s for space in router.spaces.values() for s in space.online.values()]
    channels = [c for space in router.spaces.values() for c in space.channels.values()]
    return {
        "server": router.server_name,
        "uptime_seconds": (now - router.started_at_ms) // 1000,
        "started_at": _ISO.iso(router.started_at_ms),
        "agents": {
            "connected": len(sessions),
            "with_identity": sum(1 for s in sessions if s.verified is not None),
        },
        "channels": {
            "total": len(channels),
            "public": sum(1 for c in channels if sees_channel(c, None)),
        },
        "timestamp": _ISO.iso(now),
    }
