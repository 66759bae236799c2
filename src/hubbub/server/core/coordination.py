"""Wires the coordination engines into the pipeline: floor claims, callbacks, sleep/wake.

The engines decide; this module turns their decisions into envelopes, presence changes,
stored callbacks and activity events, and runs the one timer that serves every deadline: it
sleeps until the earliest due entry (at most ``cb_poll_ms``), never on a fixed tick.

The pipeline consults it at two hooks: :meth:`Coordination.before_send` once a message is
admitted (markers, a sleeping sender's wake; it returns what is left to deliver and the sleep
to apply after it) and the :class:`~hubbub.server.core.delivery.SleepHook` at delivery (what a
sleeping member buffers). What the server itself says (a wake DM, a callback's fire) goes
out through :attr:`Coordination.post`, which the gateway wires to the sequencer: never back
through the routing of the message being handled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Protocol, cast

import msgspec

from hubbub.engines.callbacks import Callback, CallbackRejected
from hubbub.engines.timers import TimerQueue
from hubbub.protocol import addressing
from hubbub.protocol.capabilities import CapabilitySet
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.ids import SERVER_ID, UlidGenerator, is_channel
from hubbub.protocol.markers import (
    CB_FIRE,
    WAKE,
    CallbackMarker,
    Parsed,
    SleepMarker,
    SleepMode,
    parse_markers,
)
from hubbub.server.admission.auth import Identity
from hubbub.server.admission.authorization import channel_access, check_send
from hubbub.server.admission.bans import BanList
from hubbub.server.admission.grants import Grants
from hubbub.server.admission.sender import HttpSender, Sender
from hubbub.server.config import EngineSettings
from hubbub.server.core.delivery import Delivery
from hubbub.server.core.floor_claims import FloorClaims
from hubbub.server.core.space_engines import SpaceEngines
from hubbub.server.state.activity import Activity
from hubbub.server.state.metrics import Metrics
from hubbub.server.state.space import Channel, Session, SpaceState
from hubbub.store.base import Store

log = logging.getLogger("hubbub.engines")

_SERVER_CAPS: tuple[dict[str, Any], ...] = ({"kind": "**"},)


def now_ms() -> float:
    """Wall-clock Unix time in milliseconds (what is persisted and shown)."""
    return time.time() * 1000


class MonotonicClock:
    """The engines' timeline in ms: Unix time when created, then advancing with the monotonic
    clock, so a step of the system clock (NTP, an operator) moves no deadline."""

    __slots__ = ("_base",)

    def __init__(self) -> None:
        self._base = time.time() * 1000 - time.monotonic() * 1000

    def __call__(self) -> float:
        return time.monotonic() * 1000 + self._base


ServerPost = Callable[[HttpSender, Envelope], Envelope]
"""Sends a message from the server: numbered, stored and delivered as any other."""


class CoordinationHost(Protocol):
    """The gateway as coordination uses it (the gateway implements it): the spaces, where
    callbacks are stored, and how envelopes reach participants."""

    @property
    def spaces(self) -> Mapping[str, SpaceState]:
        """The spaces, by id."""
        ...

    @property
    def store(self) -> Store:
        """Where pending callbacks are saved (with the next commit)."""
        ...

    @property
    def activity(self) -> Activity:
        """The feed of what the engines did (claims, yields, callbacks, sleeps)."""
        ...

    @property
    def metrics(self) -> Metrics:
        """Counts refusals."""
        ...

    @property
    def ids(self) -> UlidGenerator:
        """Makes callback ids."""
        ...

    @property
    def bans(self) -> BanList:
        """Who may not use channels (for channel access of claims)."""
        ...

    @property
    def delivery(self) -> Delivery:
        """Writes to sessions: relays, yields, presence, errors."""
        ...

    @property
    def grants(self) -> Grants:
        """Current capabilities: a channel callback posts only while its origin may post."""
        ...


class Coordination:
    """Floor control, callbacks and sleep/wake for every space of a router."""

    def __init__(
        self,
        router: CoordinationHost,
        settings: EngineSettings,
        clock: Callable[[], float] | None = None,
        wall: Callable[[], float] | None = None,
    ) -> None:
        self.router = router
        self.post: ServerPost | None = None
        """Sends the server's own messages (the gateway wires the router's ``post`` in)."""
        self.settings = settings
        self.clock: Callable[[], float] = clock or MonotonicClock()
        """The engines' timeline in ms (durations, the timer); tests inject a manual clock and
        call :meth:`run_due`."""
        self.wall: Callable[[], float] = wall or (now_ms if clock is None else clock)
        """Unix ms now: persisted due times and the ``wake_at`` participants see are converted
        to it (:meth:`to_wall`), and back at a restart (:meth:`from_wall`)."""
        self.timers = TimerQueue()
        self.spaces = {
            sid: SpaceEngines(sp, self.timers, settings) for sid, sp in router.spaces.items()
        }
        self._servers: dict[str, HttpSender] = {
            sid: HttpSender(
                sp,
                Identity(sid, SERVER_ID, "service", "admin", _SERVER_CAPS),
                CapabilitySet(list(_SERVER_CAPS)),
            )
            for sid, sp in router.spaces.items()
        }
        self._handle: asyncio.TimerHandle | None = None
        self._handle_at = float("inf")
        self.floor = FloorClaims(
            router.activity,
            router.delivery,
            router.bans,
            self.spaces,
            lambda: self.clock(),
            self.server_send,
        )
        self._late: dict[Session, list[Callback]] = {}
        """Callbacks that fell due while the gateway restarted, for a session still attaching."""
        self.fire_errors_ms: deque[float] = deque(maxlen=10_000)
        """Actual minus due time of the last 10,000 callback fires (for benchmarks)."""

    def engines(self, space: SpaceState) -> SpaceEngines:
        """The engines of ``space``."""
        return self.spaces[space.id]

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Reload persisted callbacks; their origins get the grace window to reconnect (the
        callbacks due meanwhile wait for them: see :meth:`connected`)."""
        now = self.clock()
        for sid, eng in self.spaces.items():
            rows = await self.router.store.callbacks(sid)
            restored = [self._from_stored(msgspec.json.decode(r, type=Callback)) for r in rows]
            eng.callbacks.restore(now, restored)
            if restored:
                log.info("space %s: %d pending callbacks restored", sid, len(restored))
        self._rearm()

    def stop(self) -> None:
        """Stop the timer (pending callbacks stay persisted); send the relays still queued."""
        self.flush_relays()
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
            self._handle_at = float("inf")

    # ------------------------------------------------------------------ connections

    def connected(self, s: Session) -> None:
        """A participant (re)connected: it keeps its callbacks; those that fell due while the
        gateway restarted are delivered once it is attached (:meth:`attached`)."""
        late = self.spaces[s.space.id].callbacks.connected(self.clock(), s.id)
        if late:
            self._late[s] = late

    def attached(self, s: Session) -> None:
        """``s`` is welcomed and in its channels: deliver its late callbacks, soonest first."""
        late = self._late.pop(s, None)
        if late is None:
            return
        now = self.clock()
        for cb in late:
            self._persist(s.space.id, cb.id, None)
            try:
                self._deliver_callback(s.space, cb, None, now)
            except Exception:
                log.exception("late callback %s failed", cb.id)

    def disconnected(self, s: Session, *, stranded: bool = False) -> None:
        """A participant left: its claims end, its sleep is cancelled, callbacks start grace
        (``stranded``: the gateway's side cut it off, so callbacks falling due wait for it)."""
        for cb in self._late.pop(s, ()):  # left before it was attached: due while offline
            self._persist(s.space.id, cb.id, None)
            self._deliver_callback(s.space, cb, "offline", self.clock())
        eng = self.spaces[s.space.id]
        for rel in eng.floor.disconnected(s.id):
            self.floor.released(s.space, rel)
        if eng.sleep.forget(s.id):
            s.wake_up()  # its channels are left already: only the session's state changes
            self.router.activity.publish("sleep-cancelled", s.space.id, participant=s.id)
        if stranded:
            eng.callbacks.stranded(self.clock(), s.id)
        else:
            eng.callbacks.disconnected(self.clock(), s.id)
        self._rearm()

    # ------------------------------------------------------------------ floor control

    def claim(self, sender: Sender, env: Envelope) -> None:
        """Handle ``floor/responding-to`` (see :meth:`FloorClaims.claim`)."""
        self.floor.claim(sender, env)
        self._rearm()

    @property
    def relays_pending(self) -> bool:
        """Whether claim relays wait for the end of this turn (a message must not pass them)."""
        return self.floor.relays_pending

    def flush_relays(self) -> None:
        """Write the queued claim relays now."""
        self.floor.flush_relays()

    def spoke(self, sender: Sender, env: Envelope) -> None:
        """``sender`` wrote in a channel: the claims it holds there are done."""
        if self.floor.spoke(sender, env):
            self._rearm()

    # ------------------------------------------------------------------ markers and sleep

    def before_send(self, sender: Sender, env: Envelope) -> tuple[bool, SleepMarker | None]:
        """Act on what a message means for the engines, before it is delivered.

        A sleeping sender wakes (unless the message only renews its sleep); ``@@cb`` markers
        schedule callbacks (a refused one answers an error, the rest still goes through).
        A message that is refused as a whole (a sleep over HTTP; an unknown destination was
        refused by admission already) is refused before anything is scheduled. Returns whether
        anything is left to relay, and the sleep to apply after delivery.
        """
        parsed: Parsed | None = None
        if env.kind == "chat":
            text = env.payload.get("text")
            if isinstance(text, str) and "@@" in text:
                parsed = parse_markers(text)
                if not parsed.callbacks and not parsed.sleeps:
                    parsed = None
        if parsed is not None and parsed.sleeps and not isinstance(sender, Session):
            raise ProtocolError(
                ErrorCode.INVALID_ENVELOPE,
                "@@sleep markers need a WebSocket connection: only a connected participant "
                "can sleep",
            )
        renews = parsed is not None and bool(parsed.sleeps)
        if isinstance(sender, Session) and sender.asleep and not renews:
            self.wake(sender, reason="spoke")
        if parsed is None:
            return True, None
        env.payload = {**env.payload, "text": parsed.text}
        for marker in parsed.callbacks:
            self._schedule(sender, marker)
        self._rearm()
        return parsed.relayed, parsed.sleeps[-1] if parsed.sleeps else None

    def _schedule(self, sender: Sender, marker: CallbackMarker) -> None:
        r = self.router
        space = sender.space
        if marker.channel is not None and (
            not is_channel(marker.channel) or marker.channel not in space.channels
        ):
            self._refuse(
                sender,
                f"callback to {marker.channel} not scheduled: no such channel in space "
                f"{space.id!r}",
            )
            return
        eng = self.spaces[space.id]
        now = self.clock()
        try:
            cb = eng.callbacks.schedule(
                now, r.ids.new(int(now)), sender.id, marker.seconds, marker.payload, marker.channel
            )
        except CallbackRejected as exc:
            self._refuse(sender, str(exc))
            return
        self._persist(space.id, cb.id, cb)
        if space.online.get(sender.id) is None:
            # an origin with no connection (an HTTP post) gets the grace window at once: it
            # connects within it to keep its callbacks, or they are collected at its end
            eng.callbacks.disconnected(now, sender.id)
        r.activity.publish(
            "callback-scheduled",
            space.id,
            participant=sender.id,
            cb_id=cb.id,
            due=int(cb.due_ms),
            channel=cb.channel,
        )

    def _persist(self, sid: str, cb_id: str, cb: Callback | None) -> None:
        """Queue saving a pending callback (or, with None, deleting it) with the next commit:
        the message that scheduled it is acknowledged only after that commit."""
        self.router.store.put_callback(
            sid, cb_id, None if cb is None else msgspec.json.encode(self._to_stored(cb))
        )

    def to_wall(self, t: float) -> float:
        """A time of the engines' timeline as Unix ms by the wall clock now."""
        return self.wall() + (t - self.clock())

    def from_wall(self, unix_ms: float) -> float:
        """Unix ms (a persisted due time) on the engines' timeline, re-derived now."""
        return self.clock() + (unix_ms - self.wall())

    def _to_stored(self, cb: Callback) -> Callback:
        return msgspec.structs.replace(
            cb, due_ms=self.to_wall(cb.due_ms), created_ms=self.to_wall(cb.created_ms)
        )

    def _from_stored(self, cb: Callback) -> Callback:
        return msgspec.structs.replace(
            cb, due_ms=self.from_wall(cb.due_ms), created_ms=self.from_wall(cb.created_ms)
        )

    def _refuse(self, sender: Sender, message: str) -> None:
        """Tell the sender a callback was not scheduled (the rest of its message goes on).

        A WebSocket sender gets ``system/error`` at once; an HTTP sender collects the refusal
        for the response of its POST.
        """
        exc = ProtocolError(ErrorCode.CALLBACK_REJECTED, message)
        if isinstance(sender, Session):
            self.router.delivery.error(sender, exc)  # counts it in the metrics too
        else:
            self.router.metrics.errors[exc.code.value] += 1
            sender.refusals.append(exc)

    def sleep(self, s: Session, seconds: float, mode: SleepMode = "default") -> None:
        """Put ``s`` to sleep: out of the fan-out lists, presence ``sleeping`` with ``wake_at``."""
        eng = self.spaces[s.space.id]
        entry = eng.sleep.sleep(self.clock(), s.id, seconds, mode)
        s.fall_asleep(int(self.to_wall(entry.wake_at)))
        self.router.delivery.queue_presence(s.space, "update", s.summary())
        self.router.activity.publish(
            "sleep", s.space.id, participant=s.id, wake_at=s.wake_at, mode=entry.mode
        )
        self._rearm()

    def wake(self, s: Session, reason: str = "timer") -> None:
        """End ``s``'s sleep: the wake DM, then the buffered messages in order, then presence."""
        r = self.router
        entry = self.spaces[s.space.id].sleep.wake(s.id)
        if entry is None:
            return
        s.wake_up()
        buffered = list(entry.buffer)
        wake_env = Envelope(
            kind="chat",
            to=[s.id],
            private=True,
            payload={"text": WAKE, "buffered": len(buffered)},
        )
        self.server_send(s.space, wake_env)

        def deliver_buffered() -> None:  # after the wake DM, before anything sent later
            if s.space.online.get(s.id) is s:
                for env in buffered:
                    r.delivery.deliver_to(s, env)

        r.store.after_commit(deliver_buffered)
        r.delivery.queue_presence(s.space, "update", s.summary())
        r.activity.publish(
            "wake",
            s.space.id,
            participant=s.id,
            reason=reason,
            buffered=len(buffered),
            dropped_oldest=entry.dropped,
        )

    def to_sleepers(self, space: SpaceState, ch: Channel, env: Envelope) -> None:
        """A channel message reached sleeping members: buffer or drop it per their mode."""
        eng = self.spaces[space.id]
        # a channel callback's fire counts as addressed to its origin (it carries cb_origin);
        # the rest is the one addressing rule (protocol/addressing.py: to, @id or @name, reply)
        origin = env.payload.get("cb_origin") if env.from_ == SERVER_ID else None
        addressed = set(addressing.of(env, space.roster_view()).ids)
        for pid in list(ch.sleepers):
            direct = bool(env.to and pid in env.to) or pid == origin or pid in addressed
            eng.sleep.offer(pid, env, direct=direct)

    def to_sleeper(self, s: Session, env: Envelope) -> None:
        """A direct message reached a sleeping participant."""
        self.spaces[s.space.id].sleep.offer(s.id, env, direct=True)

    # ------------------------------------------------------------------ delivery by the server

    def server_send(self, space: SpaceState, env: Envelope) -> Envelope:
        """Send a message from ``@server`` (a DM when it has ``to``, else to its channel)."""
        assert self.post is not None, "the gateway wires Coordination.post"
        return self.post(self._servers[space.id], env)

    # ------------------------------------------------------------------ the timer

    def _rearm(self) -> None:
        due = self.timers.next_due()
        if due is None:
            return
        now = self.clock()
        target = min(due, now + self.settings.cb_poll_ms)
        if self._handle is not None and self._handle_at <= target:
            return
        if self._handle is not None:
            self._handle.cancel()
        loop = asyncio.get_running_loop()
        self._handle = loop.call_later(max(0.0, (target - now) / 1000), self._on_timer)
        self._handle_at = target

    def _on_timer(self) -> None:
        self._handle = None
        self._handle_at = float("inf")
        self.run_due()

    def run_due(self) -> None:
        """Fire every timer due by the clock now (the timer calls this; so can tests)."""
        now = self.clock()
        for key in self.timers.pop_due(now):
            try:
                self._fire(key, now)
            except Exception:
                log.exception("timer %r failed", key)
        self._rearm()

    def _fire(self, key: Hashable, now: float) -> None:
        parts = cast(tuple[str, ...], key)
        sid, what, ident = parts[0], parts[1], parts[2]
        eng = self.spaces.get(sid)
        space = self.router.spaces.get(sid)
        if eng is None or space is None:
            return
        if what == "cb":
            fired = eng.callbacks.fire(ident)
            if fired is not None:
                self._persist(sid, ident, None)
                self._deliver_callback(space, fired.callback, fired.dropped, now)
        elif what == "cb-gc":
            for cb in eng.callbacks.collect(ident):
                self._persist(sid, cb.id, None)
                self.router.activity.publish(
                    "callback-dropped",
                    sid,
                    participant=cb.origin,
                    cb_id=cb.id,
                    reason="collected",
                )
        elif what == "wake":
            s = space.online.get(ident)
            if s is not None:
                self.wake(s)
            else:
                eng.sleep.forget(ident)
        elif what == "floor":
            rel = eng.floor.expire(ident, parts[3])
            if rel is not None:
                self.floor.released(space, rel)
        elif what == "open":
            asker = eng.floor.unclaimed(ident, parts[3])
            if asker is not None:
                self.floor.unclaimed(space, ident, parts[3], asker)

    def _deliver_callback(
        self, space: SpaceState, cb: Callback, dropped: str | None, now: float
    ) -> None:
        r = self.router
        origin = space.online.get(cb.origin)
        if dropped is None and origin is None:
            dropped = "offline"
        if dropped is None and cb.channel is not None:
            ch = space.channels.get(cb.channel)
            if ch is None or cb.origin not in ch.members:
                dropped = "not a member of " + cb.channel
            else:
                dropped = self._may_still_post(space, cb)
        # an asleep origin: its fire is a message from @server addressed to it, so the sleep
        # mode decides (document 004): buffered until the wake, or dropped in drop mode
        asleep: str | None = None
        sleep = self.spaces[space.id].sleep
        entry = sleep.entry(cb.origin) if dropped is None else None
        if entry is not None:
            if sleep.verdict(cb.origin, direct=True) == "drop":
                asleep = f"dropped ({entry.mode} mode)"
                if cb.channel is None:
                    dropped = f"asleep ({entry.mode} mode)"
            else:
                asleep = "buffered"
        if dropped is not None:
            r.activity.publish(
                "callback-dropped", space.id, participant=cb.origin, cb_id=cb.id, reason=dropped
            )
            return
        error = now - cb.due_ms
        payload = {
            "text": CB_FIRE + cb.payload,
            "cb_id": cb.id,
            "cb_origin": cb.origin,
            "late_ms": max(0, round(error)),
        }
        if cb.channel is None:
            env = Envelope(kind="chat", to=[cb.origin], private=True, payload=payload)
        else:
            env = Envelope(kind="chat", channel=cb.channel, payload=payload)
        self.server_send(space, env)
        self.fire_errors_ms.append(error)
        extra: dict[str, Any] = {} if asleep is None else {"asleep": asleep}
        r.activity.publish(
            "callback-fired",
            space.id,
            participant=cb.origin,
            cb_id=cb.id,
            channel=cb.channel,
            late_ms=round(error, 1),
            **extra,
        )

    def _may_still_post(self, space: SpaceState, cb: Callback) -> str | None:
        """Why a channel callback may not post now (None: it may): its origin's current
        capabilities and channel access decide at the fire, as for a message it sent then.
        A refused fire is dropped and its origin, if online, told with ``system/error``."""
        assert cb.channel is not None
        caps = self.router.grants.current(space, cb.origin)
        try:
            channel_access(self.router.bans, space, cb.origin, caps, cb.channel)
            check_send(caps, "chat", {"text": CB_FIRE + cb.payload}, None)
        except ProtocolError as exc:
            reason = f"refused: {exc.code.value}"
            s = space.online.get(cb.origin)
            if s is not None:
                self.router.delivery.error(
                    s,
                    ProtocolError(
                        ErrorCode.CALLBACK_REJECTED,
                        f"your callback {cb.id} to {cb.channel} was dropped when it fell due: "
                        f"you may no longer post there ({exc.message})",
                    ),
                )
            return reason
        return None

    # ------------------------------------------------------------------ observers

    def participant_state(self, space: SpaceState, pid: str) -> dict[str, Any]:
        """Engine state of one participant, for ``GET /participants`` and the dashboard."""
        eng = self.spaces[space.id]
        out: dict[str, Any] = {"pending_callbacks": eng.callbacks.count(pid)}
        entry = eng.sleep.entry(pid)
        if entry is not None:
            out["sleeping"] = {
                "wake_at": int(self.to_wall(entry.wake_at)),
                "mode": entry.mode,
                "buffered": len(entry.buffer),
            }
        claims = [
            {"channel": c.channel, "msg_id": c.msg_id, "expires_at": int(c.expires_at)}
            for c in eng.floor.claims()
            if c.holder == pid
        ]
        if claims:
            out["floor"] = claims
        return out
