"""Floor claims: ``floor/responding-to`` validated and tracked by the floor engine, relayed
to the channel, the yields and holder changes it causes sent out, and the outcome of each
claim stored in the channel when it ends (``floor/outcome``: who answered, who yielded).

Part of the coordination engines' wiring (:mod:`hubbub.server.core.coordination` owns the
timer and hands claims here).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from hubbub.engines.floor import ClaimRefused, ClaimRejected, Release
from hubbub.protocol import addressing
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.ids import SERVER_ID
from hubbub.server.admission.authorization import channel_access
from hubbub.server.admission.bans import BanList
from hubbub.server.admission.sender import Sender
from hubbub.server.core.delivery import Delivery
from hubbub.server.core.space_engines import SpaceEngines
from hubbub.server.state.activity import Activity
from hubbub.server.state.space import Channel, Session, SpaceState

log = logging.getLogger("hubbub.floor")

OutcomePost = Callable[[SpaceState, Envelope], object]
"""Sends a message of the server to a channel: numbered, stored and delivered."""

NOTICE: Final = "system/notice"
UNCLAIMED: Final = "unclaimed"
"""The ``notice`` of a ``system/notice`` telling an asker that no agent took its question."""


class FloorClaims:
    """The floor claims of every space: validation, relays in bursts, yields."""

    def __init__(
        self,
        activity: Activity,
        delivery: Delivery,
        bans: BanList,
        spaces: Mapping[str, SpaceEngines],
        clock: Callable[[], float],
        post: OutcomePost,
    ) -> None:
        self.activity = activity
        self.delivery = delivery
        self.bans = bans
        self.spaces = spaces
        self.clock = clock
        self.post = post
        self._relays: dict[Channel, list[Envelope]] = {}
        self._relay_handle: asyncio.Handle | None = None

    def claim(self, sender: Sender, env: Envelope) -> None:
        """Handle ``floor/responding-to``: validate, track, relay, and send the yields.

        A claim on a message answered already, or addressed to others, is refused
        (:meth:`FloorControl.refusal <hubbub.engines.floor.FloorControl.refusal>`): over a
        WebSocket (both dialects) with a ``floor/yield`` to the claimant naming who answered or
        whom it is for (``refused``: ``answered``/``addressed``, ``reason``: a sentence), so
        every client stops as on any yield; over HTTP with ``invalid_claim`` and that sentence.
        """
        if not isinstance(sender, Session):
            refused = self._refusal(sender, env)
            raise ProtocolError(
                ErrorCode.INVALID_CLAIM,
                str(refused)
                if refused is not None
                else "floor claims need a WebSocket connection (to get YIELD)",
            )
        if env.channel is None or env.channel.startswith("@"):
            raise ProtocolError(
                ErrorCode.INVALID_CLAIM,
                "a claim needs 'channel' (a '#channel'): floor control applies to channel "
                "messages only (DMs are always answered)",
            )
        ch = channel_access(self.bans, sender.space, sender.id, sender.caps, env.channel)
        msg_id, started_at = env.payload.get("msg_id"), env.payload.get("started_at")
        if not isinstance(msg_id, str) or not msg_id:
            raise ProtocolError(
                ErrorCode.INVALID_CLAIM, "a claim needs 'msg_id': the id of the message answered"
            )
        if not isinstance(started_at, int) or isinstance(started_at, bool):
            raise ProtocolError(
                ErrorCode.INVALID_CLAIM,
                "a claim needs 'started_at': Unix time in ms (an integer) taken before inference",
            )
        eng = self.spaces[sender.space.id]
        env.payload = {"msg_id": msg_id, "started_at": started_at}
        burst = self._relay_handle is not None  # another claim was relayed in this turn
        if not eng.floor.enabled:
            self._relay(ch, env, burst)  # AGENTCHAT_RESPOND_ENABLED=false: relay only
            return
        ref = sender.space.ids.latest(msg_id)  # claims name a recent message of this channel
        msg_ts = (
            ref.ts_ms if ref is not None and ref.place == ch.name and ref.seq <= ch.seq else None
        )
        try:
            out = eng.floor.claim(
                self.clock(),
                ch.name,
                msg_id,
                sender.id,
                started_at,
                msg_ts=msg_ts,
                human=sender.kind == "human",
            )
        except ClaimRefused as exc:
            self._refuse(sender, ch, msg_id, exc)
            return
        except ClaimRejected as exc:
            raise ProtocolError(ErrorCode.INVALID_CLAIM, str(exc)) from None
        space = sender.space
        if out.changed:  # the feed tells the new holder before the yields it causes
            h = out.holder
            self.activity.publish(
                "claim",
                space.id,
                channel=ch.name,
                msg_id=msg_id,
                participant=h.holder,
                started_at=h.started_at,
                expires_at=int(h.expires_at),
            )
        if out.relay:
            self._relay(ch, env, burst)
        for loser in out.yielded:
            target = space.online.get(loser)
            if target is not None:
                self.delivery.deliver_to(
                    target,
                    self.delivery.server_env(
                        "floor/yield",
                        {
                            "msg_id": msg_id,
                            "winner": out.winner,
                            "winner_started_at": out.holder.started_at,
                            "reason": out.reason,
                        },
                        to=[loser],
                        channel=ch.name,
                    ),
                )
            self.activity.publish(
                "yield",
                space.id,
                channel=ch.name,
                msg_id=msg_id,
                participant=loser,
                winner=out.winner,
            )
        if out.changed:
            claimed: dict[str, Any] = {
                "msg_id": msg_id,
                "holder": h.holder,
                "started_at": h.started_at,
                "expires_at": int(h.expires_at),
            }
            holder = space.online.get(h.holder)
            name = holder.identity().get("name") if holder is not None else None
            if name is not None:  # its display name, when it has one (agentchat's holder_name)
                claimed["holder_name"] = name
            self._relay(
                ch, self.delivery.server_env("floor/claimed", claimed, channel=ch.name), burst
            )

    def _refusal(self, sender: Sender, env: Envelope) -> ClaimRefused | None:
        """The refusal a claim from ``sender`` would get on its message (None: none)."""
        msg_id, channel = env.payload.get("msg_id"), env.channel
        eng = self.spaces[sender.space.id]
        if not isinstance(msg_id, str) or not isinstance(channel, str) or not eng.floor.enabled:
            return None
        return eng.floor.refusal(channel, msg_id, sender.id)

    def _refuse(self, sender: Session, ch: Channel, msg_id: str, refused: ClaimRefused) -> None:
        """Tell a claimant its claim is refused: a ``floor/yield`` to whoever answered, or to
        the message's addressee (agentchat: ``YIELD``), with the reason in words."""
        payload: dict[str, Any] = {
            "msg_id": msg_id,
            "winner": refused.winner,
            "reason": str(refused),
            "refused": refused.why,
        }
        if refused.why == "addressed":
            payload["addressees"] = list(refused.by)
        if refused.answer is not None:
            payload["answer"] = refused.answer
        self.delivery.deliver_to(
            sender,
            self.delivery.server_env("floor/yield", payload, to=[sender.id], channel=ch.name),
        )
        self.activity.publish(
            "claim-refused",
            sender.space.id,
            channel=ch.name,
            msg_id=msg_id,
            participant=sender.id,
            reason=refused.why,
            winner=refused.winner,
        )

    def _relay(self, ch: Channel, env: Envelope, burst: bool) -> None:
        """Send an informational floor envelope to ``ch``: at once, or with its burst.

        Claims come in bursts (every agent that saw a message claims it at once); relaying
        each claim, and each change of holder, to every member as it was handled cost one
        write per member per envelope, and delayed the yields of the claims handled after it
        (20 claims in 21 members' channel: 8 ms to the last yield). So only the first claim
        handled in a turn of the event loop is relayed at once; the relays of later claims in
        the same turn (``burst``) follow at the end of the turn, one write per member, in the
        order the claims were handled, after their yields.
        """
        if not burst:
            self.delivery.fanout(ch, env)
        else:
            queued = self._relays.get(ch)
            if queued is None:
                self._relays[ch] = [env]
            else:
                queued.append(env)
        if self._relay_handle is None:
            self._relay_handle = asyncio.get_running_loop().call_soon(self.flush_relays)

    @property
    def relays_pending(self) -> bool:
        """Whether claim relays wait for the end of this turn (a message must not pass them)."""
        return bool(self._relays)

    def flush_relays(self) -> None:
        """Write the queued relays now (the event loop calls this at the end of a turn)."""
        if self._relay_handle is not None:
            self._relay_handle.cancel()
            self._relay_handle = None
        relays, self._relays = self._relays, {}
        for ch, envs in relays.items():
            self.delivery.fanout_all(ch, envs)

    def spoke(self, sender: Sender, env: Envelope) -> bool:
        """``sender`` wrote a chat in a channel: whom it is addressed to is noted (a claim by
        anyone else is refused), the messages it replies to are answered (a claim on them is
        refused), the claims it holds on them end, and a person's open question waits for a
        claim (:meth:`unclaimed`). True: timers changed."""
        if env.channel is None or sender.id == SERVER_ID:
            return False
        eng = self.spaces[sender.space.id]
        space, channel = sender.space, env.channel
        addressees: tuple[str, ...] = ()
        if env.id and addressing.may_address(env):
            addressees = tuple(addressing.of(env, space.roster_view()).ids)
            eng.floor.heard(channel, env.id, addressees)
        reply_to = env.correlation_ids()
        for cid in reply_to:
            ref = space.ids.latest(cid)
            if ref is not None and ref.place == channel and ref.sender != sender.id:
                eng.floor.answered(channel, cid, sender.id, env.id)
        opened = False
        if env.id and not addressees and not reply_to and self._open_question(sender, env):
            opened = eng.floor.asked(self.clock(), channel, env.id, sender.id)
        if not reply_to or not eng.floor.holds(sender.id):
            return opened
        released = eng.floor.spoke(channel, sender.id, reply_to)
        for rel in released:
            self.released(space, rel, answer=env.id)
        return opened or bool(released)

    def _open_question(self, sender: Sender, env: Envelope) -> bool:
        """Whether a person's channel chat is a question an agent there could take: a ``?``
        in its text, and an agent online in the channel (people's chat among themselves, and
        a channel without agents, get no "no agent took this")."""
        text = env.payload.get("text")
        if sender.kind != "human" or not isinstance(text, str) or "?" not in text:
            return False
        ch = sender.space.channels.get(env.channel or "")
        if ch is None:
            return False
        online = sender.space.online
        return any((s := online.get(m)) is not None and s.kind == "agent" for m in ch.members)

    def unclaimed(self, space: SpaceState, channel: str, msg_id: str, asker: str) -> None:
        """Nobody claimed or answered ``asker``'s open question in time: tell the asker (a
        ``system/notice`` correlated with it, not stored), and the feed (``unclaimed``)."""
        eng = self.spaces[space.id]
        after = round(eng.floor.unclaimed_ms / 1000)
        self.activity.publish(
            "unclaimed", space.id, channel=channel, msg_id=msg_id, participant=asker, after_s=after
        )
        s = space.online.get(asker)
        if s is None:
            return
        note = self.delivery.server_env(
            NOTICE,
            {
                "notice": UNCLAIMED,
                "text": f"no agent took this: nobody claimed or answered it within {after} s",
                "msg_id": msg_id,
                "after_s": after,
            },
            to=[asker],
            channel=channel,
            correlation_id=[msg_id],
        )
        self.delivery.send(s, note)

    def released(self, space: SpaceState, rel: Release, answer: str | None = None) -> None:
        """A claim ended: the feed says why, and the channel's history keeps the outcome
        (``answer``: the id of the holder's message that ended it)."""
        c = rel.claim
        self.activity.publish(
            "claim-released",
            space.id,
            channel=c.channel,
            msg_id=c.msg_id,
            participant=c.holder,
            reason=rel.reason,
        )
        payload: dict[str, Any] = {
            "msg_id": c.msg_id,
            "holder": c.holder,
            "reason": rel.reason,
            "yielded": list(rel.yielded),
        }
        if answer is not None:
            payload["answer"] = answer
        outcome = Envelope(
            kind="floor/outcome", channel=c.channel, correlation_id=[c.msg_id], payload=payload
        )
        try:
            self.post(space, outcome)
        except ProtocolError as exc:  # the store is unreachable, or the channel is gone
            log.warning("floor outcome of %s in %s not stored: %s", c.msg_id, c.channel, exc)
