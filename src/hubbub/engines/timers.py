"""One timer queue for every deadline of the engines: a min-heap by due time."""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable
from typing import Any


class _Keys(list[Hashable]):
    """Several keys armed for the same due time, in arming order (a key is never a list)."""

    __slots__ = ()


_NONE: Any = object()


class TimerQueue:
    """Due times (ms) keyed by any hashable; re-arming a key replaces its due time.

    The heap holds plain due times, each once, and ``_at`` maps a due time to the key armed
    for it (or a :class:`_Keys` list when several are). A pending callback therefore costs the
    queue two dict slots and one heap slot, not a ``(due, counter, key)`` tuple per entry, and
    keys are never compared, so they may be of any mix of types. Cancelling or re-arming leaves
    the old entry behind (stale: skipped when its time comes); the structure is rebuilt when
    stale entries outnumber live ones.
    """

    __slots__ = ("_at", "_due", "_heap", "_stale")

    def __init__(self) -> None:
        self._heap: list[float] = []
        self._at: dict[float, Any] = {}
        self._due: dict[Hashable, float] = {}
        self._stale = 0

    def __len__(self) -> int:
        return len(self._due)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._due

    def arm(self, key: Hashable, due_ms: float) -> None:
        """Fire ``key`` at ``due_ms`` (replacing any earlier arming of the same key)."""
        old = self._due.get(key, _NONE)
        if old is not _NONE:
            if old == due_ms:
                return  # armed for that time already
            self._stale += 1
        self._due[key] = due_ms
        at = self._at
        slot = at.get(due_ms, _NONE)
        if slot is _NONE:
            at[due_ms] = key
            heapq.heappush(self._heap, due_ms)
        elif type(slot) is _Keys:
            slot.append(key)
        else:
            at[due_ms] = _Keys((slot, key))
        if self._stale > len(self._due) + 64:
            self._compact()

    def cancel(self, key: Hashable) -> bool:
        """Forget ``key``; True when it was armed."""
        if self._due.pop(key, _NONE) is _NONE:
            return False
        self._stale += 1
        if self._stale > len(self._due) + 64:
            self._compact()
        return True

    def due_at(self, key: Hashable) -> float | None:
        """When ``key`` fires, or None."""
        return self._due.get(key)

    def next_due(self) -> float | None:
        """The earliest due time, or None when nothing is armed."""
        heap, at, due = self._heap, self._at, self._due
        while heap:
            t = heap[0]
            slot = at[t]
            keys: Iterable[Hashable] = slot if type(slot) is _Keys else (slot,)
            if any(due.get(k, _NONE) == t for k in keys):
                return t
            heapq.heappop(heap)  # only cancelled or re-armed keys left at this time
            del at[t]
            self._stale -= len(slot) if type(slot) is _Keys else 1
        return None

    def pop_due(self, now_ms: float) -> list[Hashable]:
        """Remove and return every key due at or before ``now_ms``, earliest first."""
        out: list[Hashable] = []
        heap, at, due = self._heap, self._at, self._due
        while heap and heap[0] <= now_ms:
            t = heapq.heappop(heap)
            slot = at.pop(t)
            for k in slot if type(slot) is _Keys else (slot,):
                if due.get(k, _NONE) == t:
                    del due[k]
                    out.append(k)
                else:
                    self._stale -= 1
        return out

    def _compact(self) -> None:
        at: dict[float, Any] = {}
        for key, t in self._due.items():
            slot = at.get(t, _NONE)
            if slot is _NONE:
                at[t] = key
            elif type(slot) is _Keys:
                slot.append(key)
            else:
                at[t] = _Keys((slot, key))
        self._at = at
        self._heap = list(at)
        heapq.heapify(self._heap)
        self._stale = 0
