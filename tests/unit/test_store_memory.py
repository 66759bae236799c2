"""The SQLite store: its own memory is warm within the first minute of a busy gateway, and
its id records (read back after a restart, also from a file of an older layout)."""

from __future__ import annotations

import asyncio
import sqlite3
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


async def test_a_file_with_the_old_id_table_keeps_its_records(tmp_path: Path) -> None:
    """A history written before id records were stored a batch per row is read once into the
    new table; the records (the latest per sender and id) and the resend window survive."""
    path = tmp_path / "h.db"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE msg_refs (space TEXT NOT NULL, id TEXT NOT NULL, sender TEXT NOT NULL,"
            " place TEXT NOT NULL, seq INTEGER NOT NULL, ts INTEGER NOT NULL,"
            " digest INTEGER NOT NULL, PRIMARY KEY (space, sender, id)) WITHOUT ROWID"
        )
        db.executemany(
            "INSERT INTO msg_refs VALUES (?,?,?,?,?,?,?)",
            [
                ("s", "m-1", "alice", "#general", 1, 10, 7),
                ("s", "m-2", "bob", "#general", 2, 20, 0),
                ("t", "m-1", "carol", "@dm", 1, 15, 0),
            ],
        )
    store = SqliteStore(path)
    await store.open()
    try:
        assert await store.message_refs("s", 0, 100) == [
            MessageRef("m-1", "alice", "#general", 1, 10, 7),
            MessageRef("m-2", "bob", "#general", 2, 20, 0),
        ]
        assert await store.message_refs("s", 15, 100) == [
            MessageRef("m-2", "bob", "#general", 2, 20, 0)
        ]
        assert await store.message_refs("t", 0, 1) == [MessageRef("m-1", "carol", "@dm", 1, 15)]
        store.append("s", "#general", 3, b"x", MessageRef("m-3", "alice", "#general", 3, 30))
        assert [r.id for r in await store.message_refs("s", 0, 2)] == ["m-2", "m-3"]
    finally:
        await store.close()
    with sqlite3.connect(path) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "msg_refs" not in tables
