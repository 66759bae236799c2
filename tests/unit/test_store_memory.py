"""The SQLite store's own memory is warm within the first minute of a busy gateway."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hubbub.protocol.ids import UlidGenerator
from hubbub.server.memory_report import sqlite_bytes
from hubbub.store import SqliteStore
from hubbub.store.base import MessageRef
from hubbub.store.memory import MemoryStore

T0 = 1_800_000_000_000
DATA = b'{"protocol":"mew/v0.4","kind":"chat","channel":"#general","payload":{"text":"%s"}}'


def test_the_page_caches_stop_growing_after_the_first_1500_messages(tmp_path: Path) -> None:
    """50 msg/s for the soak's first 30 s, then 2.5 more minutes: SQLite grows < 128 KiB."""

    async def run() -> tuple[int, int]:
        store = SqliteStore(tmp_path / "h.db")
        await store.open()
        ulids = UlidGenerator()
        sizes = []
        for seq in range(1, 9001):
            ts = T0 + 20 * seq
            text = f"message {seq} " + "x" * 120
            ref = MessageRef(ulids.new(ts), "sender", "#general", seq, ts)
            store.append("default", "#general", seq, DATA % text.encode(), ref)
            if seq % 5 == 0:
                await store.flush()  # commits of a few messages each, as under load
            if seq in (1500, 9000):
                used = sqlite_bytes()
                assert used is not None, "libsqlite3 not found: the memory figure is missing"
                sizes.append(used)
        history = await store.history("default", "#general", limit=1000)
        assert [m.seq for m in history] == list(range(8001, 9001))
        await store.close()
        return sizes[0], sizes[1]

    warm, later = asyncio.run(run())
    assert later - warm < 128 * 1024, f"SQLite grew {(later - warm) / 1024:.0f} KiB"


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_id_records_are_per_sender_and_the_latest_wins(kind: str, tmp_path: Path) -> None:
    store = MemoryStore() if kind == "memory" else SqliteStore(tmp_path / "h.db")
    await store.open()
    try:
        first = MessageRef("ts-agent-1", "agent", "#general", 1, 5, 11)
        other = MessageRef("ts-agent-1", "bob", "#general", 2, 6)
        again = MessageRef("ts-agent-1", "agent", "#general", 3, 7, 33)
        for seq, ref in enumerate((first, other, again), start=1):
            store.append("s", "#general", seq, b"x", ref)
        assert await store.message_refs("s", 0, 100) == [other, again]
    finally:
        await store.close()
