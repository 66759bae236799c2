"""Messages addressed to someone absent: the sender is told, the message is kept for them.

The addressing rule (:mod:`hubbub.protocol.addressing`: ``to``, ``@id`` or ``@display name``,
a reply's author) names a known participant that is not connected, or is asleep. Nobody
stands in for it (the SDK's agents keep it in their roster as offline), and the gateway:

- tells the sender with a ``system/notice`` (``notice: "addressee_absent"``, correlated with
  the message; agentchat: a ``MSG`` from ``@server``): "travel is offline; it will see this
  when it reconnects", or "travel is asleep, wakes in 40 s";
- keeps a channel message for an offline addressee as DMs are kept for the offline: it is
  written to the participant when it next connects, before the channel's ``channel/joined``
  of a join that does not resume the channel (a resumed one gets it from the resume), at most
  ``sleep_max_buffer`` (50) per participant, the oldest dropped first, in this process's
  memory. A sleeper's copy is the sleep engine's (buffered as a direct message).
"""

from __future__ import annotations

from collections import deque
from typing import Final

from hubbub.protocol import addressing
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.ids import SERVER_ID
from hubbub.server.core.delivery import Delivery
from hubbub.server.state.space import Session, SpaceState

NOTICE: Final = "system/notice"
ABSENT: Final = "addressee_absent"


class Absent:
    """The absent-addressee notes and the channel messages kept for offline addressees."""

    def __init__(self, delivery: Delivery, kept: int = 50) -> None:
        self.delivery = delivery
        self.kept = kept
        self._held: dict[tuple[str, str], deque[Envelope]] = {}

    def posted(self, sender: Session, env: Envelope) -> None:
        """A channel chat from ``sender`` was delivered: note and keep it for whom it
        addresses that is offline or asleep."""
        space = sender.space
        if env.kind != "chat" or env.channel is None or sender.id == SERVER_ID:
            return
        if not addressing.may_address(env):
            return
        ids = addressing.of(env, space.roster_view()).ids
        absent = [p for p in ids if p in space.known and _absent(space, p)]
        if not absent:
            return
        lines: list[str] = []
        who: list[dict[str, object]] = []
        for pid in absent:
            s = space.online.get(pid)
            if s is None:
                self._hold(space, pid, env)
                lines.append(f"{pid} is offline; it will see this when it reconnects")
                who.append({"id": pid, "presence": "offline"})
            else:
                wake = s.wake_at or 0
                secs = max(0, round((wake - self.delivery.clock.now_ms()) / 1000))
                lines.append(f"{pid} is asleep, wakes in {secs} s; it will see this then")
                who.append({"id": pid, "presence": "sleeping", "wakes_in_s": secs})
        note = self.delivery.server_env(
            NOTICE,
            {"notice": ABSENT, "text": "; ".join(lines), "participants": who, "msg_id": env.id},
            to=[sender.id],
            channel=env.channel,
            correlation_id=[env.id] if env.id else None,
        )
        if space.online.get(sender.id) is sender:
            self.delivery.send(sender, note)

    def _hold(self, space: SpaceState, pid: str, env: Envelope) -> None:
        held = self._held.get((space.id, pid))
        if held is None:
            held = self._held[(space.id, pid)] = deque(maxlen=self.kept)
        held.append(env)

    def deliver_held(self, s: Session, channel: str) -> None:
        """Write to ``s``, now connecting, the messages of ``channel`` kept for it."""
        key = (s.space.id, s.id)
        held = self._held.get(key)
        if not held:
            return
        mine = [e for e in held if e.channel == channel]
        rest = deque((e for e in held if e.channel != channel), maxlen=self.kept)
        if rest:
            self._held[key] = rest
        else:
            del self._held[key]
        for env in mine:
            self.delivery.send(s, env)

    def forget(self, s: Session) -> None:
        """``s`` connected and joined what it joins: what is still kept for it is not for it."""
        self._held.pop((s.space.id, s.id), None)


def _absent(space: SpaceState, pid: str) -> bool:
    s = space.online.get(pid)
    return s is None or s.asleep
