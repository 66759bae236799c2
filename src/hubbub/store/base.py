"""The store interface: channel history by ``seq``, DMs by a per-space DM ``seq``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, NamedTuple

from hubbub.protocol.ids import DM_STREAM

__all__ = ["DM_STREAM", "Store", "StoredMessage"]


class StoredMessage(NamedTuple):
    """A stored envelope: its sequence number and its canonical (MEW) JSON bytes."""

    seq: int
    data: bytes


class Store(ABC):
    """Durable history. ``append*`` never blocks: writes are group-committed; ``flush`` waits."""

    @abstractmethod
    async def open(self) -> None:
        """Open the underlying storage (create tables, files)."""

    @abstractmethod
    async def close(self) -> None:
        """Flush pending writes and release the storage."""

    @abstractmethod
    def append(self, space: str, channel: str, seq: int, data: bytes) -> None:
        """Queue a channel message for the next group commit."""

    @abstractmethod
    def append_dm(self, space: str, seq: int, parties: list[str], data: bytes) -> None:
        """Queue a direct message, visible later only to ``parties``."""

    @abstractmethod
    async def flush(self) -> None:
        """Wait until everything appended so far is durable."""

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

    @abstractmethod
    async def last_seqs(self, space: str) -> dict[str, int]:
        """The highest ``seq`` per channel of a space (and :data:`DM_STREAM` for DMs)."""

    @abstractmethod
    async def channels(self, space: str) -> list[str]:
        """Channels created at run time in a space, in creation order."""

    @abstractmethod
    async def save_channel(self, space: str, channel: str) -> None:
        """Remember a channel created at run time."""

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
