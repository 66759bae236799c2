"""Pages of history bounded by messages and bytes (server/core/pages.py), on any history."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from hubbub.server.core import pages
from hubbub.store.base import StoredMessage

sizes = st.lists(st.integers(min_value=1, max_value=300), max_size=60)


def _rows(lengths: list[int]) -> list[StoredMessage]:
    return [StoredMessage(seq=i + 1, data=b"x" * n) for i, n in enumerate(lengths)]


@given(sizes, st.integers(min_value=1, max_value=20), st.integers(min_value=1, max_value=1200))
def test_forward_pages_cover_the_history_once_within_the_bounds(
    lengths: list[int], limit: int, max_bytes: int
) -> None:
    rows = _rows(lengths)
    reads: list[int] = []

    async def read(after: int, n: int) -> list[StoredMessage]:
        reads.append(n)
        return [r for r in rows if r.seq > after][:n]

    async def walk() -> list[int]:
        seen: list[int] = []
        after = 0
        while True:
            page, more = await pages.forward(read, after, limit, max_bytes)
            assert len(page) <= limit
            assert len(page) == 1 or sum(len(r.data) for r in page) <= max_bytes
            seen += [r.seq for r in page]
            if not more:
                return seen
            assert page, "a page that says has_more carries at least one message"
            after = page[-1].seq

    assert asyncio.run(walk()) == [r.seq for r in rows]
    assert all(n <= pages.MAX_BATCH + 1 for n in reads)


@given(sizes, st.integers(min_value=1, max_value=20), st.integers(min_value=1, max_value=1200))
def test_backward_pages_cover_the_history_once_within_the_bounds(
    lengths: list[int], limit: int, max_bytes: int
) -> None:
    rows = _rows(lengths)

    async def read(before: int | None, n: int) -> list[StoredMessage]:
        older = [r for r in rows if before is None or r.seq < before]
        return older[-n:]

    async def walk() -> list[int]:
        seen: list[int] = []
        before: int | None = None
        while True:
            page, more = await pages.backward(read, before, limit, max_bytes)
            assert len(page) <= limit
            assert len(page) == 1 or sum(len(r.data) for r in page) <= max_bytes
            seen = [r.seq for r in page] + seen
            if not more:
                return seen
            before = page[0].seq

    assert asyncio.run(walk()) == [r.seq for r in rows]
