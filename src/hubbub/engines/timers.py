"""One timer queue for every deadline of the engines: a min-heap by due time."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable


class TimerQueue:
    """Due times (ms) keyed by any hashable; re-arming a key replaces its due time."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Hashable]] = []
        self._due: dict[Hashable, float] = {}
        self._order = itertools.count()

    def __len__(self) -> int:
        return len(self._due)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._due

    def arm(self, key: Hashable, due_ms: float) -> None:
        """Fire ``key`` at ``due_ms`` (replacing any earlier arming of the same key)."""
        self._due[key] = due_ms
        heapq.heappush(self._heap, (due_ms, next(self._order), key))
        if len(self._heap) > 2 * len(self._due) + 64:
            self._compact()

    def cancel(self, key: Hashable) -> bool:
        """Forget ``key``; True when it was armed."""
        return self._due.pop(key, None) is not None

    def due_at(self, key: Hashable) -> float | None:
        """When ``key`` fires, or None."""
        return self._due.get(key)

    def next_due(self) -> float | None:
        """The earliest due time, or None when nothing is armed."""
        heap = self._heap
        while heap:
            due, _, key = heap[0]
            if self._due.get(key) == due:
                return due
            heapq.heappop(heap)  # cancelled or re-armed: a stale entry
        return None

    def pop_due(self, now_ms: float) -> list[Hashable]:
        """Remove and return every key due at or before ``now_ms``, earliest first."""
        out: list[Hashable] = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            due, _, key = heapq.heappop(heap)
            if self._due.get(key) == due:
                del self._due[key]
                out.append(key)
        return out

    def _compact(self) -> None:
        self._heap = [e for e in self._heap if self._due.get(e[2]) == e[0]]
        heapq.heapify(self._heap)
