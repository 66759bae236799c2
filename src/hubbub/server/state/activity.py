"""The gateway's activity feed: what happened, for observers (the dashboard), newest last."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

Event = dict[str, Any]


class Activity:
    """A bounded ring of recent events and live subscribers; publishing never blocks."""

    def __init__(self, keep: int = 1000, queue_size: int = 10_000) -> None:
        self.recent: deque[Event] = deque(maxlen=keep)
        self.queue_size = queue_size
        self._subscribers: set[asyncio.Queue[Event]] = set()

    @property
    def watched(self) -> bool:
        """Whether anyone is subscribed (hot paths publish only then)."""
        return bool(self._subscribers)

    def publish(self, event: str, space: str, **fields: Any) -> None:
        """Record one event and hand it to every subscriber (a full subscriber loses it)."""
        item: Event = {"event": event, "space": space, "ts": int(time.time() * 1000), **fields}
        self.recent.append(item)
        for queue in self._subscribers:
            if queue.full():
                continue
            queue.put_nowait(item)

    def subscribe(self) -> asyncio.Queue[Event]:
        """A queue that receives every event published from now on."""
        queue: asyncio.Queue[Event] = asyncio.Queue(self.queue_size)
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Event]) -> None:
        """Stop delivering to ``queue``."""
        self._subscribers.discard(queue)
