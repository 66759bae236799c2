"""The default store: one SQLite file in WAL mode, written by group commits on one thread."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from hubbub.store.base import DM_STREAM, Store, StoredMessage

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
"""


class SqliteStore(Store):
    """SQLite behind a single worker thread, so reads see every earlier write in order.

    ``append`` only queues; the queue is committed as one transaction whenever the previous
    commit has finished (group commit), so throughput does not depend on fsync latency.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db: sqlite3.Connection | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hubbub-sqlite")
        self._pending_msgs: list[tuple[str, str, int, bytes]] = []
        self._pending_dms: list[tuple[str, int, list[str], bytes]] = []
        self._pending_rows: list[tuple[str, tuple[Any, ...]]] = []
        """Single-row saves and deletions (callbacks, DM marks, bans, capabilities), in order."""
        self._commit_task: asyncio.Task[None] | None = None
        self.commits = 0

    async def open(self) -> None:
        """Create the file and tables; WAL mode, synchronous=NORMAL."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        await self._run(self._open_sync)

    def _open_sync(self) -> None:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(_SCHEMA)
        self._db = db

    async def close(self) -> None:
        """Commit what is queued, close the file and stop the worker thread."""
        await self.flush()
        if self._db is not None:
            await self._run(self._db.close)
            self._db = None
        self._pool.shutdown(wait=True)

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def append(self, space: str, channel: str, seq: int, data: bytes) -> None:
        """Queue a channel message for the next group commit."""
        self._pending_msgs.append((space, channel, seq, data))
        self._kick()

    def append_dm(self, space: str, seq: int, parties: list[str], data: bytes) -> None:
        """Queue a direct message for the next group commit."""
        self._pending_dms.append((space, seq, parties, data))
        self._kick()

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
        if seq is None:
            self._queue_row("DELETE FROM dm_marks WHERE space=? AND id=?", space, participant)
        else:
            self._queue_row(
                "INSERT OR REPLACE INTO dm_marks (space, id, seq) VALUES (?,?,?)",
                space,
                participant,
                seq,
            )

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

    def _queue_row(self, sql: str, *params: Any) -> None:
        """Queue one single-row statement for the next commit."""
        self._pending_rows.append((sql, params))
        self._kick()

    def _kick(self) -> None:
        if self._commit_task is None or self._commit_task.done():
            self._commit_task = asyncio.get_running_loop().create_task(self._commit_loop())

    async def _commit_loop(self) -> None:
        while self._pending_work():
            msgs, self._pending_msgs = self._pending_msgs, []
            dms, self._pending_dms = self._pending_dms, []
            rows, self._pending_rows = self._pending_rows, []
            await self._run(self._commit_sync, msgs, dms, rows)

    def _pending_work(self) -> bool:
        return bool(self._pending_msgs or self._pending_dms or self._pending_rows)

    def _commit_sync(
        self,
        msgs: list[tuple[str, str, int, bytes]],
        dms: list[tuple[str, int, list[str], bytes]],
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
            db.execute("ROLLBACK")
            raise
        self.commits += 1

    async def flush(self) -> None:
        """Wait until every queued write is committed."""
        while self._commit_task is not None and not self._commit_task.done():
            await asyncio.shield(self._commit_task)
        if self._pending_work():
            self._kick()
            await self.flush()

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
        db = self._db
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
        db = self._db
        assert db is not None, "store is not open"
        rows = db.execute(
            "SELECT d.seq, d.data FROM dm_parties p JOIN dms d ON d.space=p.space AND d.seq=p.seq"
            " WHERE p.space=? AND p.participant=? AND p.seq>? ORDER BY p.seq ASC LIMIT ?",
            (space, participant, after, limit),
        ).fetchall()
        return [StoredMessage(int(s), bytes(d)) for s, d in rows]

    async def last_seqs(self, space: str) -> dict[str, int]:
        """Highest seq per channel, read at startup to continue numbering."""
        await self.flush()
        return dict(await self._run(self._last_seqs_sync, space))

    def _last_seqs_sync(self, space: str) -> dict[str, int]:
        db = self._db
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
            lambda: self._db.execute(  # type: ignore[union-attr]
                "SELECT channel FROM channels WHERE space=? ORDER BY created", (space,)
            ).fetchall()
        )
        return [str(r[0]) for r in rows]

    async def save_channel(self, space: str, channel: str) -> None:
        """Remember a created channel."""
        import time

        await self._run(
            lambda: self._db.execute(  # type: ignore[union-attr]
                "INSERT OR IGNORE INTO channels (space, channel, created) VALUES (?,?,?)",
                (space, channel, time.time_ns()),
            )
        )

    async def callbacks(self, space: str) -> list[bytes]:
        """Every pending callback saved for a space."""
        await self.flush()
        rows = await self._run(
            lambda: self._db.execute(  # type: ignore[union-attr]
                "SELECT data FROM callbacks WHERE space=? ORDER BY id", (space,)
            ).fetchall()
        )
        return [bytes(r[0]) for r in rows]

    async def bans(self, space: str) -> list[str]:
        """The participant ids banned from a space, sorted."""
        await self.flush()
        rows = await self._run(
            lambda: self._db.execute(  # type: ignore[union-attr]
                "SELECT id FROM bans WHERE space=? ORDER BY id", (space,)
            ).fetchall()
        )
        return [str(r[0]) for r in rows]

    async def dm_marks(self, space: str) -> dict[str, int]:
        """The saved DM marks of a space."""
        await self.flush()
        rows = await self._run(
            lambda: self._db.execute(  # type: ignore[union-attr]
                "SELECT id, seq FROM dm_marks WHERE space=?", (space,)
            ).fetchall()
        )
        return {str(r[0]): int(r[1]) for r in rows}

    async def capabilities(self, space: str) -> dict[str, list[dict[str, Any]]]:
        """The saved capabilities of a space."""
        await self.flush()
        rows = await self._run(
            lambda: self._db.execute(  # type: ignore[union-attr]
                "SELECT id, data FROM capabilities WHERE space=?", (space,)
            ).fetchall()
        )
        return {str(r[0]): json.loads(r[1]) for r in rows}
