"""The admin kill switch: disconnect or ban a participant, also a sleeping one.

Bans are per space and saved in the store (:mod:`hubbub.server.admission.bans`), so a restart keeps
them; only an unban lifts one. A banned id is refused at connect (``banned``, close 1008) and
on ``POST /participants/{id}/messages`` (403).
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from aiohttp import web

from hubbub.protocol.errors import ProtocolError
from hubbub.protocol.ids import is_participant_id
from hubbub.server.http.access import AccessDenied, Directory, resolve_viewer
from hubbub.server.json_body import json_body
from hubbub.server.state.activity import Activity
from hubbub.server.state.connection import CLOSE_KICKED
from hubbub.server.state.space import Session, SpaceState

KICKED_REASON = "disconnected by an admin"
BANNED_REASON = "banned by an admin"


class AdminGateway(Directory, Protocol):
    """The gateway as the kill switch uses it (the gateway implements it)."""

    @property
    def activity(self) -> Activity:
        """The feed that records each kick, ban and unban."""
        ...

    def detach(self, s: Session) -> None:
        """Forget a session: leave its channels, announce it offline."""
        ...

    def error(self, s: Session, exc: ProtocolError) -> None:
        """Answer a problem to the participant that caused it."""
        ...

    async def durable(self) -> None:
        """Wait until everything done so far is stored."""
        ...


GatewayT = TypeVar("GatewayT", bound=AdminGateway)


def disconnect(
    router: AdminGateway, space: SpaceState, pid: str, reason: str = KICKED_REASON
) -> bool:
    """Close ``pid``'s connection (4001) and detach it at once; False if it is not connected.

    Detaching runs the usual disconnect path: its floor claims end and a sleep is cancelled.
    """
    s = space.online.get(pid)
    if s is None:
        return False
    s.conn.close(CLOSE_KICKED, reason)
    router.detach(s)
    return True


def kick(router: AdminGateway, space: SpaceState, pid: str, by: str | None) -> dict[str, Any]:
    """Disconnect a participant (it may reconnect); publishes ``kick``."""
    s = space.online.get(pid)
    if s is None:
        return {"space": space.id, "id": pid, "disconnected": False, "was": "offline"}
    was = s.presence
    router.activity.publish("kick", space.id, participant=pid, by=by, was=was)
    disconnect(router, space, pid)
    return {"space": space.id, "id": pid, "disconnected": True, "was": was}


def ban(router: AdminGateway, space: SpaceState, pid: str, by: str | None) -> dict[str, Any]:
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


def unban(router: AdminGateway, space: SpaceState, pid: str, by: str | None) -> dict[str, Any]:
    """Lift a ban; publishes ``unban``."""
    lifted = router.bans.unban(space.id, pid)
    if lifted:
        router.activity.publish("unban", space.id, participant=pid, by=by)
    return {"space": space.id, "id": pid, "banned": False, "was_banned": lifted}


def add_admin_routes(app: web.Application, key: web.AppKey[GatewayT]) -> None:
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
                return json_body(
                    {"error": "invalid_id", "message": f"{pid!r} is not a legal participant id"},
                    status=400,
                )
            space = viewer.space
            if action == "disconnect":
                out = kick(router, space, pid, viewer.id)
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
                out = ban(router, space, pid, viewer.id)
            else:
                out = unban(router, space, pid, viewer.id)
            await router.durable()  # the answer promises the ban is stored
            return json_body(out)

        return run

    async def bans(request: web.Request) -> web.Response:
        router = request.app[key]
        try:
            viewer = resolve_viewer(router, request, "admin")
        except AccessDenied as exc:
            return exc.response()
        sid = viewer.space.id
        return json_body({"space": sid, "banned": router.bans.banned(sid)})

    for action in ("disconnect", "ban", "unban"):
        app.router.add_post(f"/admin/participants/{{pid}}/{action}", handler(action))
    app.router.add_get("/admin/bans", bans)
