"""The router: one frame's way through the pipeline, synchronously.

    frame ─▶ Admission.check_frame ─▶ dialect.decode ─┬▶ Streams.frame (a stream's raw data)
                                                      └▶ Admission.admit ─▶ Destination
          ─▶ Coordination.before_send (markers, wake)        ─ the engines' first hook
          ─▶ Requests.handle                                 ─ a kind the gateway answers
           | Sequencer.accept ─(group commit)─▶ Delivery      ─ a message: numbered, stored,
                                   └▶ SleepHook (sleepers)    ─ the engines' second hook

Nothing here awaits: a message is admitted, numbered and queued for storage in one step,
and delivered from the store's commit callback. Only history reads (joins, pages, replays)
run as background tasks, in :mod:`~hubbub.server.core.sequencer` and
:mod:`~hubbub.server.core.requests`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from hubbub.protocol import addressing
from hubbub.protocol.dialect import Reply
from hubbub.protocol.envelope import PROTOCOL, Envelope
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.ids import Clock, UlidGenerator
from hubbub.protocol.kinds import KINDS, application_kind
from hubbub.protocol.markers import SleepMarker
from hubbub.protocol.streams import StreamFrame
from hubbub.server.admission.admit import PRESENCE, REQUEST, Admission, Destination
from hubbub.server.admission.sender import HttpSender, Sender, stamp_sender
from hubbub.server.core.coordination import Coordination
from hubbub.server.core.delivery import Delivery
from hubbub.server.core.events import Events
from hubbub.server.core.requests import Requests
from hubbub.server.core.sequencer import After, Sequencer
from hubbub.server.core.sessions import Sessions
from hubbub.server.core.streams import Streams
from hubbub.server.state.connection import ws_text_frame
from hubbub.server.state.metrics import Metrics
from hubbub.server.state.space import Session
from hubbub.store.base import Store

log = logging.getLogger("hubbub.router")

_ENGINES_SEE = frozenset({"markers", "wake"})
"""Kind-table ``engines`` values of the kinds whose sending wakes a sleeping sender."""


class Router:
    """Takes each frame through admission, the engines' hook, and requests or sequencing."""

    def __init__(
        self,
        admission: Admission,
        sequencer: Sequencer,
        requests: Requests,
        sessions: Sessions,
        streams: Streams,
        delivery: Delivery,
        coordination: Coordination,
        events: Events,
        store: Store,
        metrics: Metrics,
        clock: Clock,
        ids: UlidGenerator,
    ) -> None:
        self.admission = admission
        self.sequencer = sequencer
        self.requests = requests
        self.sessions = sessions
        self.streams = streams
        self.delivery = delivery
        self.coordination = coordination
        self.floor = coordination.floor
        self.events = events
        self.store = store
        self.metrics = metrics
        self.clock = clock
        self.ids = ids

    def receive(self, s: Session, data: str | bytes) -> None:
        """Handle one frame from a connected participant; errors go back to it only."""
        self.metrics.messages_in += 1
        try:
            size = self.admission.check_frame(s, data)
        except ProtocolError as exc:
            self.delivery.error(s, exc)
            return
        try:
            env = s.conn.dialect.decode(data)
            if isinstance(env, Reply):
                s.conn.send(ws_text_frame(env.data))
                return
            if isinstance(env, StreamFrame):
                self.streams.frame(s, env)
                return
            self.route(s, env, frame_len=size)
        except ProtocolError as exc:
            self.delivery.error(s, exc)
        except Exception:
            log.exception("internal error handling a frame from %s", s.id)
            self.delivery.error(
                s, ProtocolError(ErrorCode.INTERNAL, "internal error; the frame was dropped")
            )

    def route(self, sender: Sender, env: Envelope, frame_len: int = 0) -> Envelope:
        """Admit and stamp one envelope of a participant, consult the engines' hook, then
        answer it (a request) or sequence it (a message); return it as accepted."""
        dest = self.admission.admit(sender, env, frame_len)
        if dest.original is not None:
            return self.sequencer.resent(sender, env, dest.original)
        client_id = env.id or None
        now = self._stamp(sender, env, client_id)
        kind = env.kind
        sees = KINDS[kind].engines if kind in KINDS else application_kind(kind).engines
        sleep: SleepMarker | None = None
        try:
            if (sender.asleep and sees in _ENGINES_SEE) or (
                sees == "markers" and "@@" in env.payload["text"]
            ):
                relay, sleep = self.coordination.before_send(sender, env)
                if not relay:
                    after = self._after_delivery(sender, env, sleep, watched=False)
                    if after is not None:  # in order with what arrived before it
                        self.store.after_commit(after)
                    return env
            if dest.place == REQUEST:
                self.requests.handle(sender, env, now)
                return env
            if kind == "participant/status" and "presence" in env.payload:
                p = env.payload
                self.sessions.set_presence(sender, p["presence"], p.get("status_text"))
                if dest.place == PRESENCE:
                    return env  # a bare presence change: the presence broadcast is its delivery
            self._sequence(sender, env, dest, now, self._after_delivery(sender, env, sleep))
            addressed = dest.channel is not None and addressing.may_address(env)
            if isinstance(sender, Session) and addressed:
                absent, author = self.sessions.absent, sender
                self.store.after_commit(lambda: absent.posted(author, env))  # after its echo
            if sees == "markers" and dest.channel is not None:
                self.coordination.spoke(sender, env)
        except ProtocolError as exc:
            # docs/protocol.md: an error quotes the offending frame's id when it had one
            if exc.correlation_id is None:
                exc.correlation_id = client_id
            raise
        return env

    def post(self, sender: HttpSender, env: Envelope) -> Envelope:
        """Send a message of the server itself (a wake DM, a callback's fire): numbered,
        stored and delivered as a participant's, without a participant's admission."""
        self.admission.require_store()
        now = self._stamp(sender, env, None)
        dest = self.admission.destination(sender, env)
        self._sequence(sender, env, dest, now, self._after_delivery(sender, env, None))
        return env

    def _stamp(self, sender: Sender, env: Envelope, client_id: str | None) -> int:
        """Fill in what the server decides of an accepted envelope; the time it did."""
        now = self.clock.now_ms()
        env.protocol = PROTOCOL
        env.from_ = sender.id
        env.id = client_id or self.ids.new(now)
        env.ts = self.clock.iso(now)
        env.seq = None
        if env.kind == "chat":
            stamp_sender(env.payload, sender)
        return now

    def _sequence(
        self, sender: Sender, env: Envelope, dest: Destination, now: int, after: After
    ) -> None:
        """Hand a message to the sequencer, after everything that must reach its
        recipients before it (presence of its sender, floor relays)."""
        space = sender.space
        if space.pending_presence:
            # nobody may hear from a participant before hearing that it joined
            self.delivery.flush_presence(space)
        extra: list[str] = []
        if env.kind.startswith("mcp/"):
            extra = space.proposals.observe(env, dest.channel.name if dest.channel else None)
        if dest.channel is not None and self.floor.relays_pending:
            self.floor.flush_relays()  # claims handled earlier go out first
        self.sequencer.accept(sender, dest, env, now, extra, after)

    def _after_delivery(
        self, sender: Sender, env: Envelope, sleep: SleepMarker | None, watched: bool = True
    ) -> Callable[[], None] | None:
        """What follows a message's delivery: its observers, the sender's sleep."""
        watched = watched and self.events.wants(env)
        if not watched and sleep is None:
            return None
        space = sender.space
        events, coordination = self.events, self.coordination

        def after() -> None:
            if watched:
                events.routed(space, env)
            if (
                sleep is not None
                and isinstance(sender, Session)
                and space.online.get(sender.id) is sender
            ):
                coordination.sleep(sender, sleep.seconds, sleep.mode)

        return after
