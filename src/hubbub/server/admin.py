"""The admin kill switch: disconnect or ban a participant, also a sleeping one.

Bans are per space and saved in the store (the SQLite file by default), so a restart keeps
them; only an unban lifts one (with ``--store memory`` they last as long as the process). A
banned id is refused at connect (``banned``, close 1008) and on
``POST /participants/{id}/messages`` (403).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web

from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.ids import is_participant_id
from hubbub.server.access import AccessDenied, resolve_viewer
from hubbub.server.connection import CLOSE_KICKED
from hubbub.server.space import SpaceState

if TYPE_CHECKING:
    from hubbub.server.router import Router
    from hubbub.store.base import Store

KICKED_REASON = "disconnected by an admin"
BANNED_REASON = "banned by an admin"


class BanList:
    """Banned participant ids per space, kept in the store so that a restart keeps them."""

    def __init__(self, store: Store) -> None:
        self._banned: dict[str, set[str]] = {}
        self._store = store

    async def load(self, space: str) -> None:
        """Read the bans of ``space`` saved by an earlier run."""
        self._banned[space] = set(await self._store.bans(space))

    def is_banned(self, space: str, pid: str) -> bool:
        """Whether ``pid`` is banned from ``space``."""
        banned = self._banned.get(space)
        return banned is not None and pid in banned

    def check(self, space: str, pid: str) -> None:
        """Raise ``banned`` if ``pid`` may not connect to or post in ``space``."""
        if self.is_banned(space, pid):
            raise ProtocolError(
                ErrorCode.BANNED,
                f"participant {pid!r} is banned from space {space!r} by an admin; "
                f"ask an admin of the space to unban it (POST /admin/participants/{pid}/unban)",
            )

    def ban(self, space: str, pid: str) -> bool:
        """Ban ``pid``; False when it already was."""
        banned = self._banned.setdefault(space, set())
        if pid in banned:
            return False
        banned.add(pid)
        self._store.put_ban(space, pid, True)
        return True

    def unban(self, space: str, pid: str) -> bool:
        """Lift a ban; False when there was none."""
        banned = self._banned.get(space)
        if banned is None or pid not in banned:
            return False
        banned.discard(pid)
        self._store.put_ban(space, pid, False)
        return True

    def banned(self, space: str) -> list[str]:
        """The banned ids of ``space``, sorted."""
        return sorted(self._banned.get(space, ()))


def disconnect(router: Router, space: SpaceState, pid: str, reason: str = KICKED_REASON) -> bool:
    """Close ``pid``'s connection (4001) and detach it at once; False if it is not connected.

    Detaching runs the usual disconnect path: its floor claims end and a sleep is cancelled.
    """
    s = space.online.get(pid)
    if s is None:
        return False
    s.conn.close(CLOSE_KICKED, reason)
    router.detach(s)
    return True


def kick(router: Router, space: SpaceState, pid: str, by: str | None) -> dict[str, Any]:
    """Disconnect a participant (it may reconnect); publishes ``kick``."""
    s = space.online.get(pid)
    if s is None:
        return {"space": space.id, "id": pid, "disconnected": False, "was": "offline"}
    was = s.presence
    router.activity.publish("kick", space.id, participant=pid, by=by, was=was)
    disconnect(router, space, pid)
    return {"space": space.id, "id": pid, "disconnected": True, "was": was}


def ban(router: Router, space: SpaceState, pid: str, by: str | None) -> dict[str, Any]:
    """Ban a participant and disconnect it if connected; publishes ``ban``."""
    new = router.bans.ban(space.id, pid)
    s = space.online.get(pid)
    was = s.presence if s is not None else "offline"
    if new or s is not None:
        router.activity.publish(
            "ban", space.id, participant=pid, by=by, was=was, disconnected=s is not None
        )
    if s is not None:
        try:
            router.bans.check(space.id, pid)
        except ProtocolError as exc:
            router.error(s, exc)  # the reason, before the close frame
        disconnect(router, space, pid, BANNED_REASON)
    return {
        "space": space.id,
        "id": pid,
        "banned": True,
        "disconnected": s is not None,
        "was": was,
    }


def unban(router: Router, space: SpaceState, pid: str, by: str | None) -> dict[str, Any]:
    """Lift a ban; publishes ``unban``."""
    lifted = router.bans.unban(space.id, pid)
    if lifted:
        router.activity.publish("unban", space.id, participant=pid, by=by)
    return {"space": space.id, "id": pid, "banned": False, "was_banned": lifted}


def add_admin_routes(app: web.Application, key: web.AppKey[Router]) -> None:
    """Register ``POST /admin/participants/{id}/disconnect|ban|unban`` and ``GET /admin/bans``."""

    def handler(action: str) -> Any:
        async def run(request: web.Request) -> web.Response:
            router = request.app[key]
            pid = request.match_info["pid"]
            try:
                viewer = resolve_viewer(router, request, "admin")
            except AccessDenied as exc:
                return exc.response()
            if not is_participant_id(pid):
                return web.json_response(
                    {"error": "invalid_id", "message": f"{pid!r} is not a legal participant id"},
                    status=400,
                )
            space = viewer.space
            if action == "disconnect":
                out = kick(router, space, pid, viewer.id)
                if not out["disconnected"]:
                    return web.json_response(
                        {
                            "error": "not_connected",
                            "message": f"participant {pid!r} is not connected to space "
                            f"{space.id!r}; nothing to disconnect (ban it to keep it out)",
                        },
                        status=404,
                    )
            elif action == "ban":
                out = ban(router, space, pid, viewer.id)
            else:
                out = unban(router, space, pid, viewer.id)
            await router.durable()  # the answer promises the ban is stored
            return web.json_response(out)

        return run

    async def bans(request: web.Request) -> web.Response:
        router = request.app[key]
        try:
            viewer = resolve_viewer(router, request, "admin")
        except AccessDenied as exc:
            return exc.response()
        sid = viewer.space.id
        return web.json_response({"space": sid, "banned": router.bans.banned(sid)})

    for action in ("disconnect", "ban", "unban"):
        app.router.add_post(f"/admin/participants/{{pid}}/{action}", handler(action))
    app.router.add_get("/admin/bans", bans)
