"""The admin kill switch: disconnect or ban a participant, also a sleeping one
(:mod:`hubbub.server.core.moderation` does it; this module is its HTTP surface).

Bans are per space and saved in the store (:mod:`hubbub.server.admission.bans`), so a restart keeps
them; only an unban lifts one. A banned id is refused at connect (``banned``, close 1008) and
on ``POST /participants/{id}/messages`` (403).
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from aiohttp import web

from hubbub.protocol.errors import ProtocolError
from hubbub.protocol.ids import is_participant_id
from hubbub.server.admission.keys import KeyBindings
from hubbub.server.core.moderation import Moderation
from hubbub.server.http.access import Directory, Viewer, as_viewer
from hubbub.server.http.params import page_limit
from hubbub.server.json_body import json_body

KEYS_PAGE = 100
"""Names in a page of ``GET /admin/keys`` unless ``limit`` asks for fewer or more."""
KEYS_PAGE_MAX = 1000
"""Most names in one page of ``GET /admin/keys``."""


class AdminGateway(Directory, Protocol):
    """The gateway as the kill switch uses it (the gateway implements it)."""

    @property
    def keys(self) -> KeyBindings:
        """agentchat keys and the names they took on first use."""
        ...

    @property
    def moderation(self) -> Moderation:
        """Kick, ban and unban (shared with agentchat's ADMIN_* frames)."""
        ...

    async def durable(self) -> None:
        """Wait until everything done so far is stored."""
        ...


GatewayT = TypeVar("GatewayT", bound=AdminGateway)


def add_admin_routes(app: web.Application, key: web.AppKey[GatewayT]) -> None:
    """Register ``POST /admin/participants/{id}/disconnect|ban|unban``, ``GET /admin/bans``,
    ``GET /admin/keys`` and ``POST /admin/keys/{name}/forget``."""

    def handler(action: str) -> Any:
        async def run(request: web.Request, router: GatewayT, viewer: Viewer) -> web.Response:
            pid = request.match_info["pid"]
            if not is_participant_id(pid):
                return json_body(
                    {"error": "invalid_id", "message": f"{pid!r} is not a legal participant id"},
                    status=400,
                )
            space = viewer.space
            if action == "disconnect":
                out = router.moderation.kick(space, pid, viewer.id)
                if not out["disconnected"]:
                    return json_body(
                        {
                            "error": "not_connected",
                            "message": f"participant {pid!r} is not connected to space "
                            f"{space.id!r}; nothing to disconnect (ban it to keep it out)",
                        },
                        status=404,
                    )
            elif action == "ban":
                out = router.moderation.ban(space, pid, viewer.id)
            else:
                out = router.moderation.unban(space, pid, viewer.id)
            await router.durable()  # the answer promises the ban is stored
            return json_body(out)

        return as_viewer(key, "admin", run)

    async def bans(request: web.Request, router: GatewayT, viewer: Viewer) -> web.Response:
        sid = viewer.space.id
        return json_body({"space": sid, "banned": router.bans.banned(sid)})

    async def keys(request: web.Request, router: GatewayT, viewer: Viewer) -> web.Response:
        sid = viewer.space.id
        try:
            limit = page_limit(request, KEYS_PAGE, KEYS_PAGE_MAX)
        except ProtocolError as exc:
            return json_body(exc.payload(), status=400)
        after = request.query.get("after") or None
        rows, has_more = router.keys.page(sid, after, limit)
        return json_body(
            {
                "space": sid,
                "bound": [{"name": n, "pubkey": pem} for n, pem in rows],
                "has_more": has_more,
                "next_after": rows[-1][0] if rows else after,
                "total": router.keys.count(sid),
            }
        )

    async def forget(request: web.Request, router: GatewayT, viewer: Viewer) -> web.Response:
        name = request.match_info["name"]
        sid = viewer.space.id
        pem = router.keys.forget(sid, name)
        if pem is None:
            return json_body(
                {
                    "error": "not_bound",
                    "message": f"no key took the name {name!r} on first use in space {sid!r}; "
                    "GET /admin/keys lists the names bound (keys in space.yaml are changed "
                    "there)",
                },
                status=404,
            )
        await router.durable()  # the answer promises the binding is gone for good
        return json_body({"space": sid, "name": name, "forgotten": True, "pubkey": pem})

    for action in ("disconnect", "ban", "unban"):
        app.router.add_post(f"/admin/participants/{{pid}}/{action}", handler(action))
    app.router.add_get("/admin/bans", as_viewer(key, "admin", bans))
    app.router.add_get("/admin/keys", as_viewer(key, "admin", keys))
    app.router.add_post("/admin/keys/{name}/forget", as_viewer(key, "admin", forget))
