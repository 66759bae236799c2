"""An in-process store: for unit tests and throwaway servers (``--store memory``)."""

from __future__ import annotations

import asyncio
import bisect
import copy
import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from hubbub.store.base import DM_STREAM, MessageRef, Store, StoredMessage


class MemoryStore(Store):
    """Keeps everything in dictionaries; nothing survives the process."""

    def __init__(self) -> None:
        self._msgs: dict[tuple[str, str], list[StoredMessage]] = defaultdict(list)
        self._dms: dict[str, list[tuple[StoredMessage, frozenset[str]]]] = defaultdict(list)
        self._channels: dict[str, list[str]] = defaultdict(list)
        self._callbacks: dict[str, dict[str, bytes]] = defaultdict(dict)
        self._bans: dict[str, set[str]] = defaultdict(set)
        self._marks: dict[str, dict[str, int]] = defaultdict(dict)
        self._refs: dict[str, dict[tuple[str, str], MessageRef]] = defaultdict(dict)
        self._epoch = uuid.uuid4().hex
        self._caps: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(dict)
        self._records: dict[tuple[str, str], dict[str, Any]] = {}

    async def open(self) -> None:
        """Nothing to open."""

    async def close(self) -> None:
        """Nothing to release."""

    def append(
        self, space: str, channel: str, seq: int, data: bytes, ref: MessageRef | None = None
    ) -> None:
        """Store a channel message at once."""
        self._msgs[(space, channel)].append(StoredMessage(seq, data))
        if ref is not None:
            self._refs[space][(ref.sender, ref.id)] = ref

    def append_dm(
        self, space: str, seq: int, parties: list[str], data: bytes, ref: MessageRef | None = None
    ) -> None:
        """Store a direct message at once."""
        self._dms[space].append((StoredMessage(seq, data), frozenset(parties)))
        if ref is not None:
            self._refs[space][(ref.sender, ref.id)] = ref

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Writes are immediate: run ``fn`` soon, in order with the other callbacks."""
        asyncio.get_running_loop().call_soon(fn)

    async def epoch(self) -> str:
        """A new identity per process: nothing survives it."""
        return self._epoch

    async def message_refs(self, space: str, since_ms: int, limit: int) -> list[MessageRef]:
        """Id records since ``since_ms``, oldest first."""
        refs = sorted(
            (r for r in self._refs[space].values() if r.ts_ms >= since_ms), key=lambda r: r.ts_ms
        )
        return refs[-limit:] if limit else []

    def forget_refs(self, space: str, before_ms: int) -> None:
        """Drop id records older than ``before_ms``."""
        refs = self._refs[space]
        for key in [k for k, r in refs.items() if r.ts_ms < before_ms]:
            del refs[key]

    async def flush(self) -> None:
        """Writes are immediate."""

    async def history(
        self,
        space: str,
        channel: str,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int = 50,
    ) -> list[StoredMessage]:
        """Slice the channel's list by seq."""
        msgs = self._msgs.get((space, channel), [])
        seqs = [m.seq for m in msgs]
        if after_seq is not None:
            start = bisect.bisect_right(seqs, after_seq)
            end = len(msgs) if before_seq is None else bisect.bisect_left(seqs, before_seq)
            return msgs[start:end][:limit]
        end = len(msgs) if before_seq is None else bisect.bisect_left(seqs, before_seq)
        return msgs[max(0, end - limit) : end]

    async def dm_history(
        self, space: str, participant: str, *, after_seq: int, limit: int
    ) -> list[StoredMessage]:
        """Filter the space's DMs by party."""
        out = [
            m
            for m, parties in self._dms.get(space, [])
            if m.seq > after_seq and participant in parties
        ]
        return out[:limit]

    async def dm_history_before(
        self, space: str, participant: str, *, before_seq: int | None, limit: int
    ) -> list[StoredMessage]:
        """Filter the space's DMs by party and seq, keep the last ``limit``."""
        if limit <= 0:
            return []
        out = [
            m
            for m, parties in self._dms.get(space, [])
            if (before_seq is None or m.seq < before_seq) and participant in parties
        ]
        return out[-limit:]

    async def last_seqs(self, space: str) -> dict[str, int]:
        """Highest seq per channel."""
        out = {ch: msgs[-1].seq for (sp, ch), msgs in self._msgs.items() if sp == space and msgs}
        if self._dms.get(space):
            out[DM_STREAM] = self._dms[space][-1][0].seq
        return out

    async def channels(self, space: str) -> list[str]:
        """Channels created at run time."""
        return list(self._channels.get(space, []))

    def put_channel(self, space: str, channel: str) -> None:
        """Remember a created channel."""
        if channel not in self._channels[space]:
            self._channels[space].append(channel)

    def put_callback(self, space: str, cb_id: str, data: bytes | None) -> None:
        """Save or delete a pending callback at once."""
        if data is None:
            self._callbacks[space].pop(cb_id, None)
        else:
            self._callbacks[space][cb_id] = data

    async def callbacks(self, space: str) -> list[bytes]:
        """Every pending callback saved for a space."""
        return list(self._callbacks[space].values())

    def put_ban(self, space: str, participant: str, banned: bool) -> None:
        """Save a ban, or lift it, at once."""
        if banned:
            self._bans[space].add(participant)
        else:
            self._bans[space].discard(participant)

    async def bans(self, space: str) -> list[str]:
        """The participant ids banned from a space, sorted."""
        return sorted(self._bans[space])

    def put_dm_mark(self, space: str, participant: str, seq: int | None) -> None:
        """Save (or, with None, forget) a participant's DM mark at once."""
        if seq is None:
            self._marks[space].pop(participant, None)
        else:
            self._marks[space][participant] = seq

    async def dm_marks(self, space: str) -> dict[str, int]:
        """The saved DM marks of a space."""
        return dict(self._marks[space])

    def put_capabilities(
        self, space: str, participant: str, capabilities: list[dict[str, Any]] | None
    ) -> None:
        """Save (or, with None, forget) a participant's capabilities at once."""
        if capabilities is None:
            self._caps[space].pop(participant, None)
        else:
            self._caps[space][participant] = copy.deepcopy(capabilities)

    async def capabilities(self, space: str) -> dict[str, list[dict[str, Any]]]:
        """The saved capabilities of a space."""
        return copy.deepcopy(self._caps[space])

    def put_record(self, space: str, table: str, key: str, data: Any | None) -> None:
        """Save (or, with None, delete) a record at once."""
        rows = self._records.setdefault((space, table), {})
        if data is None:
            rows.pop(key, None)
        else:
            rows[key] = copy.deepcopy(data)

    async def records(self, space: str, table: str) -> dict[str, Any]:
        """The saved records of ``table`` in a space."""
        return copy.deepcopy(self._records.get((space, table), {}))
