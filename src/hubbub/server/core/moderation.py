"""Moderation: kick, ban and unban a participant — one implementation for the dashboard's
kill switch (``http/admin.py``) and agentchat's ``ADMIN_KICK``/``ADMIN_BAN``/``ADMIN_UNBAN``.

The target hears why before its connection closes: ``system/kicked {reason, banned}``
(agentchat: ``KICKED``/``BANNED {reason}``), and a ban also the ``banned`` error MEW clients
read. Bans are per space and saved in the store (:mod:`hubbub.server.admission.bans`).

A ban reaches down the line of ``space/invite``: banning a participant revokes every invite
it made (used or not, the token authenticates nobody from then on, also after a restart) and
bans those invitees (connected ones are told why and disconnected), then theirs, and so on.
Unbanning the inviter gives none of them back: an admin unbans and re-invites whom it wants.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from hubbub.protocol.errors import ProtocolError
from hubbub.server.admission.bans import BanList
from hubbub.server.admission.space_invites import SpaceInvites
from hubbub.server.core.delivery import Delivery
from hubbub.server.state.activity import Activity
from hubbub.server.state.connection import CLOSE_KICKED
from hubbub.server.state.space import Session, SpaceState

KICKED_REASON: Final = "disconnected by an admin"
BANNED_REASON: Final = "banned by an admin"


class Moderation:
    """Disconnects and bans participants, telling them why and recording it in the feed."""

    def __init__(
        self,
        bans: BanList,
        activity: Activity,
        delivery: Delivery,
        detach: Callable[[Session], None],
        invites: SpaceInvites,
    ) -> None:
        self.bans = bans
        self.activity = activity
        self.delivery = delivery
        self.detach = detach
        self.invites = invites

    def disconnect(
        self, space: SpaceState, pid: str, reason: str = KICKED_REASON, *, banned: bool = False
    ) -> bool:
        """Tell ``pid`` why, close its connection (4001) and detach it at once; False if it
        is not connected. Detaching ends its floor claims and cancels a sleep."""
        s = space.online.get(pid)
        if s is None:
            return False
        told = self.delivery.server_env(
            "system/kicked", {"reason": reason, "banned": banned}, to=[pid]
        )
        self.delivery.send(s, told)
        s.conn.close(CLOSE_KICKED, reason)
        self.detach(s)
        return True

    def kick(
        self, space: SpaceState, pid: str, by: str | None, reason: str | None = None
    ) -> dict[str, Any]:
        """Disconnect a participant (it may reconnect); publishes ``kick``."""
        s = space.online.get(pid)
        if s is None:
            return {"space": space.id, "id": pid, "disconnected": False, "was": "offline"}
        was = s.presence
        self.activity.publish("kick", space.id, participant=pid, by=by, was=was)
        self.disconnect(space, pid, reason or KICKED_REASON)
        return {"space": space.id, "id": pid, "disconnected": True, "was": was}

    def ban(
        self, space: SpaceState, pid: str, by: str | None, reason: str | None = None
    ) -> dict[str, Any]:
        """Ban a participant and disconnect it if connected, revoke the invites it made and
        ban its invitees, theirs, and so on; publishes ``ban`` for each."""
        out = self._ban_one(space, pid, by, reason or BANNED_REASON)
        cascade: list[str] = []
        inviters = [pid]
        while inviters:
            inviter = inviters.pop()
            for invitee in self.invites.invitees(space.id, inviter):
                self.invites.revoke(space, invitee)
                why = f"invited by {inviter!r}, who was banned by an admin"
                self._ban_one(space, invitee, by, why, via=inviter)
                cascade.append(invitee)
                inviters.append(invitee)
        if cascade:
            out["invitees_banned"] = sorted(cascade)
        return out

    def _ban_one(
        self, space: SpaceState, pid: str, by: str | None, reason: str, via: str | None = None
    ) -> dict[str, Any]:
        """Ban one participant and disconnect it if connected (``via``: the banned inviter
        whose invite brought it in)."""
        new = self.bans.ban(space.id, pid)
        s = space.online.get(pid)
        was = s.presence if s is not None else "offline"
        if new or s is not None:
            extra = {} if via is None else {"via": via}
            self.activity.publish(
                "ban",
                space.id,
                participant=pid,
                by=by,
                was=was,
                disconnected=s is not None,
                **extra,
            )
        if s is not None:
            try:
                self.bans.check(space.id, pid)
            except ProtocolError as exc:
                self.delivery.error(s, exc)  # the reason, before the close frame
            self.disconnect(space, pid, reason, banned=True)
        return {
            "space": space.id,
            "id": pid,
            "banned": True,
            "disconnected": s is not None,
            "was": was,
        }

    def unban(self, space: SpaceState, pid: str, by: str | None) -> dict[str, Any]:
        """Lift a ban; publishes ``unban``."""
        lifted = self.bans.unban(space.id, pid)
        if lifted:
            self.activity.publish("unban", space.id, participant=pid, by=by)
        return {"space": space.id, "id": pid, "banned": False, "was_banned": lifted}
