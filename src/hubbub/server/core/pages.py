"""Pages of history bounded by messages and by bytes: the one rule for every answer that
carries stored messages (``channel/joined`` on a join or a resume, ``history/response``,
``GET /channels/{name}/messages``).

A page holds at most ``limit`` messages and at most ``max_bytes`` bytes of them, and always at
least one message (a single message is bounded by ``limits.max_payload_bytes``), so one answer
never builds a frame the size of a channel's history. What did not fit is asked for with the
next page (``has_more``). The store is read in batches sized by the bytes still free, so a
page of large messages never reads many more rows than it sends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from hubbub.store.base import StoredMessage

FIRST_BATCH: Final = 16
"""Rows read first, before the size of a row is known."""
MAX_BATCH: Final = 1000
"""Most rows read from the store at once."""

Forward = Callable[[int, int], Awaitable[list[StoredMessage]]]
"""``(after_seq, n)`` → the first ``n`` stored messages after ``after_seq``, ascending."""
Backward = Callable[[int | None, int], Awaitable[list[StoredMessage]]]
"""``(before_seq, n)`` → the last ``n`` stored messages before ``before_seq`` (None: the end),
ascending."""


class Page:
    """Rows taken into one answer while they fit (``limit`` rows, ``max_bytes`` bytes)."""

    def __init__(self, limit: int, max_bytes: int) -> None:
        self.limit = limit
        self.max_bytes = max_bytes
        self.size = 0
        self.count = 0
        self.full = False
        """A row did not fit: the answer says ``has_more``."""

    def fits(self, data: bytes) -> bool:
        """Take ``data`` into the page if it fits (the first row always does); else the page
        is full."""
        if self.count >= self.limit or (self.count and self.size + len(data) > self.max_bytes):
            self.full = True
            return False
        self.count += 1
        self.size += len(data)
        return True

    def batch(self) -> int:
        """How many rows to read next: about what the free bytes hold, plus one to learn
        whether more exist."""
        if self.count == 0:
            want = FIRST_BATCH
        else:
            free = max(0, self.max_bytes - self.size)
            want = free * self.count // max(1, self.size) + 1
        return max(1, min(want, self.limit - self.count, MAX_BATCH)) + 1


async def forward(
    read: Forward, after_seq: int, limit: int, max_bytes: int
) -> tuple[list[StoredMessage], bool]:
    """The first messages after ``after_seq`` that fit a page, and whether more exist."""
    page = Page(limit, max_bytes)
    out: list[StoredMessage] = []
    while not page.full:
        n = page.batch()
        rows = await read(after_seq, n)
        for row in rows:
            if not page.fits(row.data):
                break
            out.append(row)
        if len(rows) < n and not page.full:
            return out, False
        if rows:
            after_seq = rows[-1].seq
    return out, True


async def backward(
    read: Backward, before_seq: int | None, limit: int, max_bytes: int
) -> tuple[list[StoredMessage], bool]:
    """The last messages before ``before_seq`` (None: the end) that fit a page, ascending,
    and whether older ones exist."""
    page = Page(limit, max_bytes)
    out: list[StoredMessage] = []
    while not page.full:
        n = page.batch()
        rows = await read(before_seq, n)
        for row in reversed(rows):
            if not page.fits(row.data):
                break
            out.append(row)
        if len(rows) < n and not page.full:
            break
        if rows:
            before_seq = rows[0].seq
    out.reverse()
    return out, page.full


__all__ = ["Backward", "Forward", "Page", "backward", "forward"]
