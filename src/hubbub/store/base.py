"""The store interface: channel history by ``seq``, DMs by a per-space DM ``seq``."""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Generic, Literal, NamedTuple, TypeVar

from hubbub.protocol.ids import DM_STREAM

__all__ = [
    "DM_STREAM",
    "Durability",
    "GroupCommit",
    "MessageRef",
    "Store",
    "StoreError",
    "StoredMessage",
]

log = logging.getLogger("hubbub.store")
_Batch = TypeVar("_Batch")

_SCAN_PAGE = 1000
"""Rows read per step where a store pages forward to answer a backward question."""

Durability = Literal["process", "power"]
"""``process``: a commit survives ``kill -9`` of the gateway (SQLite WAL, synchronous=NORMAL);
``power``: it also survives a power loss (synchronous=FULL, an fsync per commit)."""


class StoreError(RuntimeError):
    """The store cannot read or write its storage; the message names the problem and the fix."""


class StoredMessage(NamedTuple):
    """A stored envelope: its sequence number and its canonical (MEW) JSON bytes."""

    seq: int
    data: bytes


class MessageRef(NamedTuple):
    """Who sent a stored message under which id, where it went and when: the record behind
    idempotent resends and correlation, one per (sender, id). ``place`` is a channel or
    DM_STREAM; ``digest`` identifies the message's content (0: its sender did not opt in to
    resends, so nothing is ever a resend of it)."""

    id: str
    sender: str
    place: str
    seq: int
    ts_ms: int
    digest: int = 0


class GroupCommit(Generic[_Batch]):
    """The group commit of a store: everything queued since the last commit is committed in
    one go, then the callbacks queued before it run, in order (acknowledged means durable).

    The store keeps its own queue and says how to take a batch off it (``take``: None when
    nothing is queued) and how to commit one (``commit``: it retries until the batch is
    stored; False when it never will be, and the loop stops, as a fenced Redis store does).
    """

    def __init__(
        self,
        take: Callable[[], _Batch | None],
        commit: Callable[[_Batch], Awaitable[bool]],
        queued: Callable[[], bool],
        *,
        gather: bool = False,
    ) -> None:
        self._take = take
        self._commit = commit
        self._queued = queued
        self._gather = gather
        """Let the event loop run once between a commit's callbacks and the next batch, so
        that frames already waiting join it (for a commit that never awaits, as SQLite's
        inline one)."""
        self.waiters: list[Callable[[], None]] = []
        """Callbacks to run after the commit that holds everything queued before them."""
        self.stopped = False
        """Set once commits will never succeed again: nothing more is committed or run."""
        self._task: asyncio.Task[None] | None = None

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` after the commit that holds everything queued so far."""
        self.waiters.append(fn)
        if self._task is None or self._task.done():
            self.kick()

    def is_last(self, fn: Callable[[], None]) -> bool:
        """Whether ``fn`` is the callback registered last and not yet taken by a commit."""
        waiters = self.waiters
        return bool(waiters) and waiters[-1] is fn

    def kick(self) -> None:
        """Make sure a commit follows what was just queued."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._loop())

    @property
    def pending(self) -> bool:
        """Whether anything waits for a commit."""
        return self._queued() or bool(self.waiters)

    async def _loop(self) -> None:
        while not self.stopped and self.pending:
            batch = self._take()
            waiters, self.waiters = self.waiters, []
            if batch is not None and not await self._commit(batch):
                return
            for fn in waiters:
                try:
                    fn()
                except Exception:
                    log.exception("a callback after a commit failed")
            if self._gather and self.pending:
                await asyncio.sleep(0)

    async def cancel(self) -> None:
        """Stop the commit in progress (a store closing while its commits keep failing)."""
        task = self._task
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def flush(self) -> None:
        """Wait until every queued write is committed and its callbacks have run (or the
        commits stopped)."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)
        if not self.stopped and self.pending:
            self.kick()
            await self.flush()


class Store(ABC):
    """Durable history. ``append*`` never blocks: writes are group-committed; ``flush`` waits."""

    available: bool = True
    """False while commits fail (its server unreachable): the gateway then refuses new
    messages with ``unavailable`` instead of queueing what it cannot acknowledge."""
    problem: str | None = None
    """Why commits fail right now (the disk is full, the file is damaged), for ``/health``;
    None while they succeed."""

    @abstractmethod
    async def open(self) -> None:
        """Open the underlying storage (create tables, files)."""

    @abstractmethod
    async def close(self) -> None:
        """Flush pending writes and release the storage."""

    @abstractmethod
    def append(
        self, space: str, channel: str, seq: int, data: bytes, ref: MessageRef | None = None
    ) -> None:
        """Queue a channel message (and the record of its id) for the next group commit."""

    @abstractmethod
    def append_dm(
        self, space: str, seq: int, parties: list[str], data: bytes, ref: MessageRef | None = None
    ) -> None:
        """Queue a direct message, visible later only to ``parties``."""

    @abstractmethod
    def after_commit(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` on the event loop once everything queued before it is durable.

        Callbacks run in the order they were registered: the gateway delivers and
        acknowledges through this, so nothing is shown before it is stored."""

    def is_last_callback(self, fn: Callable[[], None]) -> bool:
        """Whether ``fn`` is the callback registered last and still waits for a commit that
        also holds everything appended since: work added to it then runs in its place, in
        order (the sequencer delivers a burst of one channel's messages in one go)."""
        return False

    @abstractmethod
    async def flush(self) -> None:
        """Wait until everything appended so far is durable."""

    @abstractmethod
    async def epoch(self) -> str:
        """The history's identity: new whenever the history is created afresh (a new file,
        a wiped store), so a client can tell that its resume points mean nothing here."""

    @abstractmethod
    async def message_refs(self, space: str, since_ms: int, limit: int) -> list[MessageRef]:
        """The records of messages stored since ``since_ms``, oldest first, at most the
        newest ``limit``."""

    @abstractmethod
    def forget_refs(self, space: str, before_ms: int) -> None:
        """Queue dropping the id records older than ``before_ms``."""

    @abstractmethod
    async def history(
        self,
        space: str,
        channel: str,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int = 50,
    ) -> list[StoredMessage]:
        """Channel messages in ascending ``seq``: the first ``limit`` after ``after_seq``, or
        (with only ``before_seq`` or neither) the last ``limit`` before it."""

    @abstractmethod
    async def dm_history(
        self, space: str, participant: str, *, after_seq: int, limit: int
    ) -> list[StoredMessage]:
        """Direct messages involving ``participant`` with ``seq > after_seq``, ascending."""

    async def dm_history_before(
        self, space: str, participant: str, *, before_seq: int | None, limit: int
    ) -> list[StoredMessage]:
        """The last ``limit`` direct messages involving ``participant`` with ``seq < before_seq``
        (or the last ``limit`` of all), ascending.

        This default reads forward through :meth:`dm_history`; a store overrides it with one
        backward query.
        """
        if limit <= 0:
            return []
        last: deque[StoredMessage] = deque(maxlen=limit)
        after = 0
        while True:
            rows = await self.dm_history(space, participant, after_seq=after, limit=_SCAN_PAGE)
            for row in rows:
                if before_seq is not None and row.seq >= before_seq:
                    return list(last)
                last.append(row)
            if len(rows) < _SCAN_PAGE:
                return list(last)
            after = rows[-1].seq

    @abstractmethod
    async def last_seqs(self, space: str) -> dict[str, int]:
        """The highest ``seq`` per channel of a space (and :data:`DM_STREAM` for DMs)."""

    @abstractmethod
    async def channels(self, space: str) -> list[str]:
        """Channels created at run time in a space, in creation order."""

    @abstractmethod
    def put_channel(self, space: str, channel: str) -> None:
        """Queue remembering a channel created at run time."""

    @abstractmethod
    def put_callback(self, space: str, cb_id: str, data: bytes | None) -> None:
        """Queue saving a pending callback (``data``) or deleting it (None)."""

    @abstractmethod
    async def callbacks(self, space: str) -> list[bytes]:
        """Every pending callback saved for a space."""

    @abstractmethod
    def put_dm_mark(self, space: str, participant: str, seq: int | None) -> None:
        """Queue saving the DM ``seq`` a participant had seen when it went offline (None:
        it is online again, forget the mark)."""

    @abstractmethod
    async def dm_marks(self, space: str) -> dict[str, int]:
        """The saved DM marks of a space: participant id → DM ``seq``."""

    @abstractmethod
    def put_ban(self, space: str, participant: str, banned: bool) -> None:
        """Queue saving a ban (``banned``) or lifting it."""

    @abstractmethod
    async def bans(self, space: str) -> list[str]:
        """The participant ids banned from a space, sorted."""

    @abstractmethod
    def put_capabilities(
        self, space: str, participant: str, capabilities: list[dict[str, Any]] | None
    ) -> None:
        """Queue saving a participant's capabilities as grants and revokes left them (None:
        forget them, the space config applies again)."""

    @abstractmethod
    async def capabilities(self, space: str) -> dict[str, list[dict[str, Any]]]:
        """The saved capabilities of a space: participant id → capability list."""

    @abstractmethod
    def put_record(self, space: str, table: str, key: str, data: Any | None) -> None:
        """Queue saving a small JSON record under ``table``/``key`` (None: delete it): key
        bindings, private channels and their invitations."""

    @abstractmethod
    async def records(self, space: str, table: str) -> dict[str, Any]:
        """The saved records of ``table`` in a space: key → JSON value."""
