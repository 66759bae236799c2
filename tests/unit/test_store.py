"""The SQLite store answers exactly like the in-memory reference, and survives reopening."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hubbub.store import MemoryStore, SqliteStore, base
from hubbub.store.base import DM_STREAM, Store
from tests.strength import examples

queries = st.tuples(
    st.sampled_from(["#a", "#b"]),
    st.one_of(st.none(), st.integers(0, 60)),
    st.one_of(st.none(), st.integers(0, 60)),
    st.integers(0, 30),
)


dm_pages = st.tuples(st.one_of(st.none(), st.integers(0, 60)), st.integers(0, 30))


@settings(max_examples=examples(60), deadline=None)
@given(
    appends=st.lists(st.sampled_from(["#a", "#b", "dm"]), max_size=60),
    qs=st.lists(queries, max_size=10),
    dqs=st.lists(dm_pages, max_size=5),
)
def test_sqlite_matches_memory(
    appends: list[str],
    qs: list[tuple[str, int | None, int | None, int]],
    dqs: list[tuple[int | None, int]],
) -> None:
    async def run() -> None:
        with tempfile.TemporaryDirectory() as d:
            mem, sql = MemoryStore(), SqliteStore(Path(d) / "h.db")
            await mem.open()
            await sql.open()
            seqs = {"#a": 0, "#b": 0, "dm": 0}
            for target in appends:
                seqs[target] += 1
                data = f"{target}:{seqs[target]}".encode()
                for store in (mem, sql):
                    if target == "dm":
                        store.append_dm(
                            "s", seqs["dm"], ["x", "y" if seqs["dm"] % 2 else "z"], data
                        )
                    else:
                        store.append("s", target, seqs[target], data)
            for ch, after, before, limit in qs:
                a = await mem.history("s", ch, after_seq=after, before_seq=before, limit=limit)
                b = await sql.history("s", ch, after_seq=after, before_seq=before, limit=limit)
                assert a == b
            for who in ("x", "y", "z"):
                assert await mem.dm_history("s", who, after_seq=0, limit=100) == (
                    await sql.dm_history("s", who, after_seq=0, limit=100)
                )
                for before, limit in dqs:  # backward pages: each store, and the base default
                    page = await mem.dm_history_before("s", who, before_seq=before, limit=limit)
                    assert page == await sql.dm_history_before(
                        "s", who, before_seq=before, limit=limit
                    )
                    assert page == await Store.dm_history_before(
                        sql, "s", who, before_seq=before, limit=limit
                    )
            assert await mem.last_seqs("s") == await sql.last_seqs("s")
            await sql.close()

    asyncio.run(run())


def test_reopen_keeps_everything(tmp_path: Path) -> None:
    async def run() -> None:
        store = SqliteStore(tmp_path / "h.db")
        await store.open()
        for seq in range(1, 2001):
            store.append("s", "#general", seq, b'{"n":%d}' % seq)
        store.append_dm("s", 1, ["a", "b"], b"dm")
        store.put_channel("s", "#new")
        for pid in ("mallory", "trudy", "eve"):
            store.put_ban("s", pid, True)
        store.put_ban("s", "trudy", False)
        await store.close()
        assert store.commits < 2000, "appends are group-committed"

        again = SqliteStore(tmp_path / "h.db")
        await again.open()
        assert await again.last_seqs("s") == {"#general": 2000, DM_STREAM: 1}
        last = await again.history("s", "#general", limit=3)
        assert [m.seq for m in last] == [1998, 1999, 2000]
        assert await again.channels("s") == ["#new"]
        assert await again.bans("s") == ["eve", "mallory"] and await again.bans("t") == []
        await again.close()

    asyncio.run(run())


def test_records_are_saved_replaced_deleted_and_reopened(tmp_path: Path) -> None:
    async def run() -> None:
        mem, sql = MemoryStore(), SqliteStore(tmp_path / "r.db")
        await mem.open()
        await sql.open()
        for store in (mem, sql):
            store.put_record("s", "private", "#ops", {"invited": ["a"]})
            store.put_record("s", "private", "#ops", {"invited": ["a", "b"]})  # replaced
            store.put_record("s", "keys", "alice", "-----BEGIN PUBLIC KEY-----")
            store.put_record("s", "keys", "gone", "x")
            store.put_record("s", "keys", "gone", None)  # deleted
        expected = {"#ops": {"invited": ["a", "b"]}}
        assert await mem.records("s", "private") == await sql.records("s", "private") == expected
        assert await sql.records("s", "keys") == {"alice": "-----BEGIN PUBLIC KEY-----"}
        assert await sql.records("t", "keys") == {}
        await sql.close()
        again = SqliteStore(tmp_path / "r.db")
        await again.open()
        assert await again.records("s", "private") == expected
        await again.close()

    asyncio.run(run())


def test_capabilities_are_saved_replaced_forgotten_and_reopened(tmp_path: Path) -> None:
    async def run() -> None:
        mem, sql = MemoryStore(), SqliteStore(tmp_path / "h.db")
        await mem.open()
        await sql.open()
        narrow = [{"kind": "mcp/request", "payload": {"method": ["tools/list", "!x"]}}]
        for store in (mem, sql):
            store.put_capabilities("s", "bot", [{"kind": "chat"}])
            store.put_capabilities("s", "bot", narrow)  # the latest replaces the earlier
            store.put_capabilities("s", "eve", [])  # everything revoked is kept as such
            store.put_capabilities("s", "tmp", [{"kind": "**"}])
            store.put_capabilities("s", "tmp", None)
        expected = {"bot": narrow, "eve": []}
        assert await mem.capabilities("s") == await sql.capabilities("s") == expected
        assert await sql.capabilities("t") == {}
        await sql.close()
        again = SqliteStore(tmp_path / "h.db")
        await again.open()
        assert await again.capabilities("s") == expected
        await again.close()

    asyncio.run(run())


def test_the_default_backward_dm_page_reads_forward_in_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store without its own backward query still answers it (reading forward, in steps)."""
    monkeypatch.setattr(base, "_SCAN_PAGE", 3)

    async def run() -> None:
        sql = SqliteStore(tmp_path / "h.db")
        await sql.open()
        for seq in range(1, 21):
            sql.append_dm("s", seq, ["x", "y" if seq % 2 else "z"], f"dm:{seq}".encode())
        seqs = [m.seq for m in await Store.dm_history_before(sql, "s", "y", before_seq=16, limit=4)]
        assert seqs == [9, 11, 13, 15]
        last = await Store.dm_history_before(sql, "s", "x", before_seq=None, limit=5)
        assert [m.seq for m in last] == [16, 17, 18, 19, 20]
        assert await Store.dm_history_before(sql, "s", "x", before_seq=1, limit=5) == []
        await sql.close()

    asyncio.run(run())
