"""The default store: one SQLite file in WAL mode, written by group commits on one thread."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec

from hubbub.store.base import (
    DM_STREAM,
    Durability,
    GroupCommit,
    MessageRef,
    Store,
    StoredMessage,
    StoreError,
)
from hubbub.store.retry import retry_pauses

log = logging.getLogger("hubbub.store")

_CHECKPOINT_EVERY = 200
"""Inline commits between two WAL checkpoints (each on the worker thread)."""
_CACHE_KIB = 512
"""Page cache of each connection. The writer appends at the right edge of each table, so a
few hundred KiB hold its working set; SQLite's default (2 MB each) only made a long-running
gateway's memory climb for minutes while it filled (the soak: +0.8 MiB in minutes 1-2)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    space TEXT NOT NULL, channel TEXT NOT NULL, seq INTEGER NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (space, channel, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS dms (
    space TEXT NOT NULL, seq INTEGER NOT NULL, parties TEXT NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (space, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS dm_parties (
    space TEXT NOT NULL, participant TEXT NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (space, participant, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS callbacks (
    space TEXT NOT NULL, id TEXT NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (space, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS dm_marks (
    space TEXT NOT NULL, id TEXT NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (space, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS bans (
    space TEXT NOT NULL, id TEXT NOT NULL,
    PRIMARY KEY (space, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS capabilities (
    space TEXT NOT NULL, id TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (space, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS channels (
    space TEXT NOT NULL, channel TEXT NOT NULL, created INTEGER NOT NULL,
    PRIMARY KEY (space, channel)
);
DROP TABLE IF EXISTS msg_ids;
CREATE TABLE IF NOT EXISTS ref_batches (
    space TEXT NOT NULL, ts INTEGER NOT NULL, refs BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS ref_batches_by_time ON ref_batches (space, ts);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY, value TEXT NOT NULL
);
"""

_REFS_BEFORE_BATCHES = "msg_refs"
"""The id records' table before they were stored a commit's batch per row (one B-tree insert
per message cost as much as the message's own row): read into ``ref_batches`` and dropped
when such a file is opened."""

_REFS_PER_ROW = 64
"""Id records per ``ref_batches`` row at most: pruning drops whole rows, so this bounds what
it leaves behind (a burst can commit thousands of messages at once)."""

_encode_refs = msgspec.msgpack.Encoder().encode
_decode_refs = msgspec.msgpack.Decoder(list[MessageRef]).decode

_RECORDS_TABLE = """CREATE TABLE IF NOT EXISTS records (
    space TEXT NOT NULL, tbl TEXT NOT NULL, key TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (space, tbl, key)
) WITHOUT ROWID"""
"""Created with the first record saved, so that a history without records keeps its layout."""

_SYNCHRONOUS: dict[str, str] = {"process": "NORMAL", "power": "FULL"}
CLOSE_WAIT_S = 10
"""How long a stopping gateway waits for failing commits (a full disk) before it stops."""


def explain(path: Path, exc: Exception) -> Exception:
    """``exc`` as a :class:`StoreError` naming the problem with ``path`` and the fix, when it
    is one a user must act on (a damaged file, a full disk, no permission); else ``exc``."""
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(exc, sqlite3.Error) or code is None:
        return exc
    files = f"{path} (and its -wal and -shm files)"
    primary = code & 0xFF
    if primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        why = (
            f"the history file {path} is damaged ({exc}): move {files} aside to start with "
            f"an empty history, or salvage what is readable with `mkdir recovered && sqlite3 "
            f"{path} .recover | sqlite3 recovered/hubbub.db` and start with --data-dir recovered"
        )
    elif primary == sqlite3.SQLITE_FULL:
        why = (
            f"the disk holding {path} is full ({exc}): free space there (or move the "
            "history elsewhere with --data-dir); nothing new is stored until then"
        )
    elif primary in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM):
        why = (
            f"cannot write the history file {path} ({exc}): make {files} and its directory "
            "writable by this user, or choose another --data-dir"
        )
    elif primary == sqlite3.SQLITE_IOERR:
        why = (
            f"reading or writing the history file {path} failed ({exc}): the disk may be "
            "full or failing; free space there, check it (dmesg), or choose another --data-dir"
        )
    else:
        return exc
    return StoreError(why)


_INSERT_REFS = "INSERT INTO ref_batches (space, ts, refs) VALUES (?,?,?)"


def _ref_rows(by_space: dict[str, list[MessageRef]]) -> list[tuple[str, int, bytes]]:
    """The ``ref_batches`` rows of id records by space: at most ``_REFS_PER_ROW`` records a
    row, each row with its newest record's time (pruning goes by it)."""
    rows: list[tuple[str, int, bytes]] = []
    for space, refs in by_space.items():
        parts = (
            [refs]
            if len(refs) <= _REFS_PER_ROW
            else [refs[i : i + _REFS_PER_ROW] for i in range(0, len(refs), _REFS_PER_ROW)]
        )
        rows.extend((space, max(r.ts_ms for r in part), _encode_refs(part)) for part in parts)
    return rows


def _adopt_old_refs(db: sqlite3.Connection) -> None:
    """Move the id records of a file written before ``ref_batches`` into it."""
    found = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (_REFS_BEFORE_BATCHES,)
    ).fetchone()
    if found is None:
        return
    by_space: dict[str, list[MessageRef]] = {}
    for space, *ref in db.execute(
        "SELECT space, id, sender, place, seq, ts, digest FROM msg_refs ORDER BY ts, seq"
    ):
        by_space.setdefault(str(space), []).append(MessageRef(*ref))
    db.execute("BEGIN")
    db.executemany(_INSERT_REFS, _ref_rows(by_space))
    db.execute(f"DROP TABLE {_REFS_BEFORE_BATCHES}")
    db.execute("COMMIT")


class SqliteStore(Store):
    """SQLite behind a single worker thread, so reads see every earlier write in order.

    ``append`` only queues; the queue is committed as one transaction whenever the previous
    commit has finished (group commit), so throughput does not depend on fsync latency.
    Callbacks given to :meth:`after_commit` run once the commit holding everything queued
    before them has succeeded; a failed commit is retried (with a growing pause) and nothing
    behind it is acknowledged meanwhile.
    """

    def __init__(self, path: str | Path, durability: Durability = "process") -> None:
        if durability not in _SYNCHRONOUS:
            raise ValueError(f"durability {durability!r} is not one of {', '.join(_SYNCHRONOUS)}")
        self.path = Path(path)
        self.durability = durability
        self._db: sqlite3.Connection | None = None
        """The writer. ``process`` durability commits on the event loop's thread (a commit
        without fsync takes tens of µs: cheaper than two thread switches); ``power``
        durability commits on the worker thread (an fsync per commit)."""
        self._rdb: sqlite3.Connection | None = None
        """The reader, used on the worker thread only: history reads and WAL checkpoints."""
        self._checkpointing = False
        self._since_checkpoint = 0
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hubbub-sqlite")
        self._pending_msgs: list[tuple[str, str, int, bytes]] = []
        self._pending_dms: list[tuple[str, int, list[str], bytes]] = []
        self._pending_refs: dict[str, list[MessageRef]] = {}
        """Id records by space: each space's become one ``ref_batches`` row of the commit."""
        self._pending_marks: dict[tuple[str, str], int | None] = {}
        """DM marks by (space, participant): the latest value of a batch wins."""
        self._pending_rows: list[tuple[str, tuple[Any, ...]]] = []
        """Single-row saves and deletions (callbacks, bans, capabilities, channels), in order."""
        self._group = GroupCommit(
            self._take_batch, self._commit_batch, self._pending_work, gather=True
        )
        self._kick = self._group.kick
        """Make sure a commit follows what was just queued."""
        self._records_table = False
        """Whether this run queued creating the ``records`` table (see :data:`_RECORDS_TABLE`)."""
        self._epoch = ""
        self.commits = 0
        self.failed_commits = 0

    async def open(self) -> None:
        """Create the file and tables; WAL mode, synchronous per the durability setting."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        await self._run(self._open_sync)

    def _open_sync(self) -> None:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA cache_size=-{_CACHE_KIB}")
        db.execute(f"PRAGMA synchronous={_SYNCHRONOUS[self.durability]}")
        if self.durability == "process":
            # the WAL is checkpointed (with its fsyncs) on the worker thread, never by a commit
            db.execute("PRAGMA wal_autocheckpoint=0")
        db.executescript(_SCHEMA)
        _adopt_old_refs(db)
        self._rdb = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._rdb.execute(f"PRAGMA cache_size=-{_CACHE_KIB}")
        row = db.execute("SELECT value FROM meta WHERE key='epoch'").fetchone()
        if row is None:
            epoch = uuid.uuid4().hex
            db.execute("INSERT INTO meta (key, value) VALUES ('epoch', ?)", (epoch,))
        else:
            epoch = str(row[0])
        self._epoch = epoch
        self._db = db

    async def epoch(self) -> str:
        """The history's identity, made when the file was created."""
        return self._epoch

    async def close(self) -> None:
        """Commit what is queued (waiting at most ``CLOSE_WAIT_S`` while commits fail), close
        the file and stop the worker thread."""
        stored = await self._flush_before_close()
        if self._db is not None:
            if self.durability == "process" and stored:
                await self._run(self._checkpoint_sync)
            await self._run(self._db.close)
            self._db = None
        if self._rdb is not None:
            await self._run(self._rdb.close)
            self._rdb = None
        self._pool.shutdown(wait=True)

    async def _flush_before_close(self) -> bool:
        """Wait for what is queued; False if commits kept failing for ``CLOSE_WAIT_S``."""
        try:
            await asyncio.wait_for(self.flush(), CLOSE_WAIT_S)
            return True
        except TimeoutError:
            log.warning(
                "stopping without the last writes: they could not be stored within %d s "
                "(%s); none of them was acknowledged",
                CLOSE_WAIT_S,
                self.problem,
            )
            await self._group.cancel()
            return False

    async def _run(self, fn: Any, *args: Any) -> Any:
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)
        except sqlite3.Error as exc:
            raise explain(self.path, exc) from exc

    def append(
        self, space: str, channel: str, seq: int, data: bytes, ref: MessageRef | None = None
    ) -> None:
        """Queue a channel message for the next group commit."""
        self._pending_msgs.append((space, channel, seq, data))
        if ref is not None:
            self._queue_ref(space, ref)
        self._kick()

    def append_dm(
        self, space: str, seq: int, parties: list[str], data: bytes, ref: MessageRef | None = None
    ) -> None:
        """Queue a direct message for the next group commit."""
        self._pending_dms.append((space, seq, parties, data))
        if ref is not None:
            self._queue_ref(space, ref)
        self._kick()

    def _queue_ref(self, space: str, ref: MessageRef) -> None:
        refs = self._pending_refs.get(space)
        if refs is None:
            self._pending_refs[space] = [ref]
        else:
            refs.append(ref)

    def is_last_callback(self, fn: Callable[[], None]) -> bool:
        """Whether ``fn`` is the callback registered last, not yet taken by a commit."""
        return self._group.is_last(fn)

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` after the commit that holds everything queued so far."""
        self._group.after_commit(fn)

    def forget_refs(self, space: str, before_ms: int) -> None:
        """Queue dropping id records older than ``before_ms`` (a batch goes with its newest)."""
        self._queue_row("DELETE FROM ref_batches WHERE space=? AND ts<?", space, before_ms)

    async def message_refs(self, space: str, since_ms: int, limit: int) -> list[MessageRef]:
        """Id records since ``since_ms``, oldest first (the newest ``limit``), the latest per
        (sender, id)."""
        await self.flush()
        return list(await self._run(self._refs_sync, space, since_ms, limit))

    def _refs_sync(self, space: str, since_ms: int, limit: int) -> list[MessageRef]:
        db = self._rdb
        assert db is not None, "store is not open"
        newest_first: list[MessageRef] = []
        seen: set[tuple[str, str]] = set()
        rows = db.execute(
            "SELECT refs FROM ref_batches WHERE space=? AND ts>=? ORDER BY ts DESC, rowid DESC",
            (space, since_ms),
        )
        for (blob,) in rows:
            for ref in reversed(_decode_refs(blob)):
                key = (ref.sender, ref.id)
                if ref.ts_ms < since_ms or key in seen:
                    continue
                seen.add(key)
                newest_first.append(ref)
                if len(newest_first) >= limit:
                    newest_first.reverse()
                    return newest_first
        newest_first.reverse()
        return newest_first

    def put_callback(self, space: str, cb_id: str, data: bytes | None) -> None:
        """Queue saving (or, with None, deleting) a pending callback for the next commit."""
        if data is None:
            self._queue_row("DELETE FROM callbacks WHERE space=? AND id=?", space, cb_id)
        else:
            self._queue_row(
                "INSERT OR REPLACE INTO callbacks (space, id, data) VALUES (?,?,?)",
                space,
                cb_id,
                data,
            )

    def put_dm_mark(self, space: str, participant: str, seq: int | None) -> None:
        """Queue saving (or, with None, deleting) a participant's DM mark."""
        self._pending_marks[(space, participant)] = seq
        self._kick()

    def put_ban(self, space: str, participant: str, banned: bool) -> None:
        """Queue saving (or lifting) a ban for the next commit."""
        if banned:
            self._queue_row(
                "INSERT OR IGNORE INTO bans (space, id) VALUES (?,?)", space, participant
            )
        else:
            self._queue_row("DELETE FROM bans WHERE space=? AND id=?", space, participant)

    def put_capabilities(
        self, space: str, participant: str, capabilities: list[dict[str, Any]] | None
    ) -> None:
        """Queue saving (or, with None, forgetting) a participant's capabilities."""
        if capabilities is None:
            self._queue_row("DELETE FROM capabilities WHERE space=? AND id=?", space, participant)
        else:
            self._queue_row(
                "INSERT OR REPLACE INTO capabilities (space, id, data) VALUES (?,?,?)",
                space,
                participant,
                json.dumps(capabilities, separators=(",", ":")),
            )

    def put_record(self, space: str, table: str, key: str, data: Any | None) -> None:
        """Queue saving (or, with None, deleting) a record."""
        if not self._records_table:
            self._records_table = True
            self._queue_row(_RECORDS_TABLE)
        if data is None:
            self._queue_row(
                "DELETE FROM records WHERE space=? AND tbl=? AND key=?", space, table, key
            )
        else:
            self._queue_row(
                "INSERT OR REPLACE INTO records (space, tbl, key, data) VALUES (?,?,?,?)",
                space,
                table,
                key,
                json.dumps(data, separators=(",", ":")),
            )

    async def records(self, space: str, table: str) -> dict[str, Any]:
        """The saved records of ``table`` in a space."""
        await self.flush()
        rows = await self._run(self._records_sync, space, table)
        return {str(r[0]): json.loads(r[1]) for r in rows}

    def _records_sync(self, space: str, table: str) -> list[Any]:
        db = self._rdb
        assert db is not None, "store is not open"
        exists = db.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='records'"
        ).fetchone()
        if exists is None:
            return []  # no record was ever saved
        return db.execute(
            "SELECT key, data FROM records WHERE space=? AND tbl=?", (space, table)
        ).fetchall()

    def _queue_row(self, sql: str, *params: Any) -> None:
        """Queue one single-row statement for the next commit."""
        self._pending_rows.append((sql, params))
        self._kick()

    def _take_batch(self) -> tuple[Any, ...] | None:
        """Everything queued since the last commit, as one batch (None: nothing)."""
        batch = (
            self._pending_msgs,
            self._pending_dms,
            self._pending_refs,
            self._pending_marks,
            self._pending_rows,
        )
        self._pending_msgs, self._pending_dms, self._pending_refs = [], [], {}
        self._pending_marks, self._pending_rows = {}, []
        return batch if any(batch) else None

    async def _commit_batch(self, batch: tuple[Any, ...]) -> bool:
        await self._commit_until_done(batch)
        return True

    async def _commit_until_done(self, batch: tuple[Any, ...]) -> None:
        """Commit one batch; on failure (disk full, I/O error) log and try again, so that
        nothing queued after it is acknowledged before it is stored."""
        pauses = retry_pauses()
        while True:
            try:
                if self.durability == "process":
                    self._commit_sync(*batch)
                    self._after_inline_commit()
                else:
                    await self._run(self._commit_sync, *batch)
                self.available, self.problem = True, None
                return
            except Exception as exc:
                self.failed_commits += 1
                self.available, self.problem = False, str(explain(self.path, exc))
                pause = next(pauses)
                log.error(
                    "commit failed: %s; retrying in %.2fs, nothing is acknowledged "
                    "until it succeeds",
                    self.problem,
                    pause,
                )
                await asyncio.sleep(pause)

    def _after_inline_commit(self) -> None:
        """Checkpoint the WAL on the worker thread every ``_CHECKPOINT_EVERY`` commits."""
        self._since_checkpoint += 1
        if self._since_checkpoint >= _CHECKPOINT_EVERY and not self._checkpointing:
            self._since_checkpoint = 0
            self._checkpointing = True
            task = asyncio.get_running_loop().create_task(self._run(self._checkpoint_sync))
            task.add_done_callback(self._checkpointed)

    def _checkpointed(self, task: asyncio.Task[Any]) -> None:
        self._checkpointing = False
        if not task.cancelled() and task.exception() is not None:
            log.warning("WAL checkpoint failed: %s (retried later)", task.exception())

    def _checkpoint_sync(self) -> None:
        """Copy the WAL into the database file without blocking the writer."""
        db = self._rdb
        if db is not None:
            db.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def _pending_work(self) -> bool:
        return bool(
            self._pending_msgs
            or self._pending_dms
            or self._pending_rows
            or self._pending_refs
            or self._pending_marks
        )

    def _commit_sync(
        self,
        msgs: list[tuple[str, str, int, bytes]],
        dms: list[tuple[str, int, list[str], bytes]],
        refs: dict[str, list[MessageRef]],
        marks: dict[tuple[str, str], int | None],
        rows: list[tuple[str, tuple[Any, ...]]],
    ) -> None:
        db = self._db
        assert db is not None, "store is not open"
        db.execute("BEGIN")
        try:
            db.executemany(
                "INSERT OR REPLACE INTO messages (space, channel, seq, data) VALUES (?,?,?,?)",
                msgs,
            )
            db.executemany(_INSERT_REFS, _ref_rows(refs))
            for (space, pid), mark in marks.items():
                if mark is None:
                    db.execute("DELETE FROM dm_marks WHERE space=? AND id=?", (space, pid))
                else:
                    db.execute(
                        "INSERT OR REPLACE INTO dm_marks (space, id, seq) VALUES (?,?,?)",
                        (space, pid, mark),
                    )
            for space, seq, parties, data in dms:
                db.execute(
                    "INSERT OR REPLACE INTO dms (space, seq, parties, data) VALUES (?,?,?,?)",
                    (space, seq, json.dumps(parties), data),
                )
                db.executemany(
                    "INSERT OR IGNORE INTO dm_parties (space, participant, seq) VALUES (?,?,?)",
                    [(space, p, seq) for p in set(parties)],
                )
            for sql, params in rows:
                db.execute(sql, params)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:  # SQLite has already rolled back after a full disk or I/O error
                db.execute("ROLLBACK")
            raise
        self.commits += 1

    async def flush(self) -> None:
        """Wait until every queued write is committed (and its callbacks have run)."""
        await self._group.flush()

    async def history(
        self,
        space: str,
        channel: str,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int = 50,
    ) -> list[StoredMessage]:
        """Read a page of channel history (after pending writes are committed)."""
        await self.flush()
        return list(
            await self._run(self._history_sync, space, channel, after_seq, before_seq, limit)
        )

    def _history_sync(
        self, space: str, channel: str, after: int | None, before: int | None, limit: int
    ) -> list[StoredMessage]:
        db = self._rdb
        assert db is not None, "store is not open"
        upper = before if before is not None else 2**62
        if after is not None:
            rows = db.execute(
                "SELECT seq, data FROM messages WHERE space=? AND channel=? AND seq>? AND seq<?"
                " ORDER BY seq ASC LIMIT ?",
                (space, channel, after, upper, limit),
            ).fetchall()
        else:
            rows = db.execute(
                "SELECT seq, data FROM messages WHERE space=? AND channel=? AND seq<?"
                " ORDER BY seq DESC LIMIT ?",
                (space, channel, upper, limit),
            ).fetchall()
            rows.reverse()
        return [StoredMessage(int(s), bytes(d)) for s, d in rows]

    async def dm_history(
        self, space: str, participant: str, *, after_seq: int, limit: int
    ) -> list[StoredMessage]:
        """Direct messages involving ``participant`` after ``after_seq``."""
        await self.flush()
        return list(await self._run(self._dm_sync, space, participant, after_seq, limit))

    def _dm_sync(self, space: str, participant: str, after: int, limit: int) -> list[StoredMessage]:
        db = self._rdb
        assert db is not None, "store is not open"
        rows = db.execute(
            "SELECT d.seq, d.data FROM dm_parties p JOIN dms d ON d.space=p.space AND d.seq=p.seq"
            " WHERE p.space=? AND p.participant=? AND p.seq>? ORDER BY p.seq ASC LIMIT ?",
            (space, participant, after, limit),
        ).fetchall()
        return [StoredMessage(int(s), bytes(d)) for s, d in rows]

    async def dm_history_before(
        self, space: str, participant: str, *, before_seq: int | None, limit: int
    ) -> list[StoredMessage]:
        """The last ``limit`` direct messages involving ``participant`` before ``before_seq``."""
        await self.flush()
        upper = before_seq if before_seq is not None else 2**62
        return list(await self._run(self._dm_before_sync, space, participant, upper, limit))

    def _dm_before_sync(
        self, space: str, participant: str, before: int, limit: int
    ) -> list[StoredMessage]:
        db = self._rdb
        assert db is not None, "store is not open"
        rows = db.execute(
            "SELECT d.seq, d.data FROM dm_parties p JOIN dms d ON d.space=p.space AND d.seq=p.seq"
            " WHERE p.space=? AND p.participant=? AND p.seq<? ORDER BY p.seq DESC LIMIT ?",
            (space, participant, before, max(limit, 0)),
        ).fetchall()
        rows.reverse()
        return [StoredMessage(int(s), bytes(d)) for s, d in rows]

    async def last_seqs(self, space: str) -> dict[str, int]:
        """Highest seq per channel, read at startup to continue numbering."""
        await self.flush()
        return dict(await self._run(self._last_seqs_sync, space))

    def _last_seqs_sync(self, space: str) -> dict[str, int]:
        db = self._rdb
        assert db is not None, "store is not open"
        out = {
            str(ch): int(s)
            for ch, s in db.execute(
                "SELECT channel, MAX(seq) FROM messages WHERE space=? GROUP BY channel", (space,)
            )
        }
        (dm,) = db.execute("SELECT MAX(seq) FROM dms WHERE space=?", (space,)).fetchone()
        if dm is not None:
            out[DM_STREAM] = int(dm)
        return out

    async def channels(self, space: str) -> list[str]:
        """Channels created at run time."""
        rows = await self._run(
            lambda: self._rdb.execute(  # type: ignore[union-attr]
                "SELECT channel FROM channels WHERE space=? ORDER BY created", (space,)
            ).fetchall()
        )
        return [str(r[0]) for r in rows]

    def put_channel(self, space: str, channel: str) -> None:
        """Queue remembering a created channel for the next commit."""
        self._queue_row(
            "INSERT OR IGNORE INTO channels (space, channel, created) VALUES (?,?,?)",
            space,
            channel,
            time.time_ns(),
        )

    async def callbacks(self, space: str) -> list[bytes]:
        """Every pending callback saved for a space."""
        await self.flush()
        rows = await self._run(
            lambda: self._rdb.execute(  # type: ignore[union-attr]
                "SELECT data FROM callbacks WHERE space=? ORDER BY id", (space,)
            ).fetchall()
        )
        return [bytes(r[0]) for r in rows]

    async def bans(self, space: str) -> list[str]:
        """The participant ids banned from a space, sorted."""
        await self.flush()
        rows = await self._run(
            lambda: self._rdb.execute(  # type: ignore[union-attr]
                "SELECT id FROM bans WHERE space=? ORDER BY id", (space,)
            ).fetchall()
        )
        return [str(r[0]) for r in rows]

    async def dm_marks(self, space: str) -> dict[str, int]:
        """The saved DM marks of a space."""
        await self.flush()
        rows = await self._run(
            lambda: self._rdb.execute(  # type: ignore[union-attr]
                "SELECT id, seq FROM dm_marks WHERE space=?", (space,)
            ).fetchall()
        )
        return {str(r[0]): int(r[1]) for r in rows}

    async def capabilities(self, space: str) -> dict[str, list[dict[str, Any]]]:
        """The saved capabilities of a space."""
        await self.flush()
        rows = await self._run(
            lambda: self._rdb.execute(  # type: ignore[union-attr]
                "SELECT id, data FROM capabilities WHERE space=?", (space,)
            ).fetchall()
        )
        return {str(r[0]): json.loads(r[1]) for r in rows}
