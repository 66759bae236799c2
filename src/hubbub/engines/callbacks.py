"""The callback engine (document 001): deferred messages scheduled by ``@@cb:Ns@@`` markers.

Durations are clamped to ``max_duration_s``; a callback over the per-participant or the
per-space pending limit, or the payload limit, is refused. Delivery is best-effort: a
callback that falls due while its origin is offline is dropped. Past the document, a
participant that disconnects keeps its callbacks for ``grace_s`` (a reconnect within the
window keeps them all); after the window they are collected.

A restart is different, because the gateway, not the origin, was away (and so is a
connection cut by the gateway's side, :meth:`CallbackEngine.stranded`): after
:meth:`CallbackEngine.restore` every origin gets the grace window, and its callbacks that
fell due while the gateway was down, or that fall due before the origin reconnects, wait.
:meth:`CallbackEngine.connected` hands them over (late, soonest first) when the origin is
back within the window; at its end they are collected with the rest.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import msgspec

from hubbub.engines.timers import TimerQueue
from hubbub.protocol.markers import clamp_duration

DropReason = Literal["offline", "collected"]


class CallbackRejected(ValueError):
    """A callback that was not scheduled; the message names the limit and the fix."""


class Callback(msgspec.Struct, frozen=True, gc=False):
    """One pending callback (persisted as JSON with these field names).

    A server may hold 100,000 of these for an hour. ``gc=False``: the garbage collector does
    not track them (they hold only strings and numbers, so they can be in no cycle), which
    saves 16 bytes each and keeps full collections from walking every pending callback.
    """

    id: str
    origin: str
    payload: str
    due_ms: float
    created_ms: float
    channel: str | None = None


@dataclass(frozen=True, slots=True)
class Fired:
    """A callback that fell due: deliver it, or it was dropped for ``dropped``."""

    callback: Callback
    dropped: DropReason | None = None


class CallbackEngine:
    """Pending callbacks of one space, armed on a shared timer queue."""

    def __init__(
        self,
        timers: TimerQueue,
        *,
        max_duration_s: float = 3600,
        max_per_agent: int = 50,
        max_per_space: int = 10_000,
        max_payload: int = 500,
        grace_s: float = 30,
        scope: str = "",
    ) -> None:
        self.timers = timers
        self.max_duration_s = max_duration_s
        self.max_per_agent = max_per_agent
        self.max_per_space = max_per_space
        self.max_payload = max_payload
        self.grace_s = grace_s
        self.scope = scope
        self._pending: dict[str, Callback] = {}
        # ids per origin: a list (a few bytes per callback, where a set costs ~45) is fine
        # because an origin has at most max_per_agent of them
        self._by_origin: dict[str, list[str]] = {}
        self._offline: set[str] = set()
        self._restarted: set[str] = set()
        """Offline origins not back since the restart: their due callbacks wait for them."""

    def __len__(self) -> int:
        return len(self._pending)

    def pending(self, origin: str | None = None) -> list[Callback]:
        """Pending callbacks, of one origin or all, soonest first."""
        ids = self._by_origin.get(origin, ()) if origin is not None else self._pending
        return sorted((self._pending[i] for i in ids), key=lambda c: (c.due_ms, c.id))

    def count(self, origin: str) -> int:
        """How many callbacks ``origin`` has pending."""
        return len(self._by_origin.get(origin, ()))

    def timer_key(self, cb_id: str) -> tuple[str, str, str]:
        """The timer-queue key of a callback."""
        return (self.scope, "cb", cb_id)

    def gc_key(self, origin: str) -> tuple[str, str, str]:
        """The timer-queue key of an origin's grace-window end."""
        return (self.scope, "cb-gc", origin)

    def clamp(self, seconds: float) -> float:
        """A requested delay within [0, max_duration_s] (:func:`clamp_duration`); raises
        CallbackRejected for NaN or a negative delay."""
        try:
            return clamp_duration(seconds, self.max_duration_s)
        except ValueError as exc:
            raise CallbackRejected(f"callback not scheduled: {exc}") from None

    def schedule(
        self,
        now: float,
        cb_id: str,
        origin: str,
        seconds: float,
        payload: str,
        channel: str | None = None,
    ) -> Callback:
        """Schedule a callback; raises CallbackRejected over a limit, or for a NaN or
        negative delay (a longer one than ``max_duration_s`` is clamped)."""
        size = len(payload.encode())
        if size > self.max_payload:
            raise CallbackRejected(
                f"callback payload of {size} bytes exceeds the limit of {self.max_payload} "
                "bytes (AGENTCHAT_CB_MAX_PAYLOAD); keep a short key in the payload instead"
            )
        if self.count(origin) >= self.max_per_agent:
            raise CallbackRejected(
                f"you already have {self.max_per_agent} pending callbacks, the limit "
                "(AGENTCHAT_CB_MAX_PER_AGENT); wait for one to fire before scheduling more"
            )
        if len(self._pending) >= self.max_per_space:
            raise CallbackRejected(
                f"this space already holds {self.max_per_space} pending callbacks, the limit "
                "(AGENTCHAT_CB_MAX_PER_SPACE); try again once some have fired"
            )
        delay = self.clamp(seconds)
        cb = Callback(cb_id, origin, payload, now + delay * 1000, now, channel)
        self._add(cb)
        return cb

    def restore(self, now: float, callbacks: Iterable[Callback]) -> None:
        """Reload persisted callbacks after a restart: every origin starts its grace window,
        and its callbacks falling due before it reconnects wait for it."""
        for cb in callbacks:
            self._add(cb)
            self.disconnected(now, cb.origin)
            self._restarted.add(cb.origin)

    def fire(self, cb_id: str) -> Fired | None:
        """A callback's timer fired: remove it and say whether to deliver it.

        None when there is nothing to do: an unknown callback, or one whose origin has not
        reconnected since the restart (it stays pending for :meth:`connected`).
        """
        cb = self._pending.get(cb_id)
        if cb is None or cb.origin in self._restarted:
            return None
        # decide before removing: removing an origin's last callback forgets it was offline
        dropped: DropReason | None = "offline" if cb.origin in self._offline else None
        self._remove(cb)
        return Fired(cb, dropped)

    def disconnected(self, now: float, origin: str) -> None:
        """``origin`` went offline: its callbacks survive for the grace window."""
        self._restarted.discard(origin)
        if origin in self._by_origin:
            self._offline.add(origin)
            self.timers.arm(self.gc_key(origin), now + self.grace_s * 1000)

    def stranded(self, now: float, origin: str) -> None:
        """``origin`` was cut off by the gateway's side (in a cluster: the node it was
        connected through died): as after a restart, its callbacks falling due before it
        reconnects within the grace window wait for it."""
        self.disconnected(now, origin)
        if origin in self._by_origin:
            self._restarted.add(origin)

    def connected(self, now: float, origin: str) -> list[Callback]:
        """``origin`` is back: it keeps its callbacks. Returns, soonest first, those that fell
        due while it was away since a restart: they are no longer pending, deliver them now."""
        self._offline.discard(origin)
        self.timers.cancel(self.gc_key(origin))
        if origin not in self._restarted:
            return []
        self._restarted.discard(origin)
        late = [cb for cb in self.pending(origin) if cb.due_ms <= now]
        for cb in late:
            self._remove(cb)
        return late

    def collect(self, origin: str) -> list[Callback]:
        """The grace window of an offline origin ended: drop all its callbacks."""
        if origin not in self._offline:
            return []
        self._offline.discard(origin)
        self._restarted.discard(origin)
        gone = self.pending(origin)
        for cb in gone:
            self._remove(cb)
        return gone

    def _add(self, cb: Callback) -> None:
        old = self._pending.get(cb.id)
        if old is not None:
            self._remove(old)
        self._pending[cb.id] = cb
        self._by_origin.setdefault(cb.origin, []).append(cb.id)
        self.timers.arm(self.timer_key(cb.id), cb.due_ms)

    def _remove(self, cb: Callback) -> None:
        del self._pending[cb.id]
        ids = self._by_origin[cb.origin]
        ids.remove(cb.id)
        if not ids:
            del self._by_origin[cb.origin]
            self._offline.discard(cb.origin)
            self._restarted.discard(cb.origin)
            self.timers.cancel(self.gc_key(cb.origin))
        self.timers.cancel(self.timer_key(cb.id))
