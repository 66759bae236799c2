"""In-memory state of a space: its channels, members and connected participants."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import msgspec

from hubbub.protocol.capabilities import CapabilitySet
from hubbub.protocol.envelope import encode
from hubbub.protocol.ids import Clock
from hubbub.server.config import SpaceConfig
from hubbub.server.connection import Connection
from hubbub.server.proposals import ProposalLedger

_ISO = Clock()


class TokenBucket:
    """Messages per second with a burst allowance; ``rate == 0`` disables the limit."""

    __slots__ = ("burst", "last", "rate", "tokens")

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = float(max(burst, 1))
        self.tokens = self.burst
        self.last = time.monotonic()

    def take(self) -> bool:
        """Spend one token; False when the participant is over its rate."""
        if self.rate <= 0:
            return True
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class Session:
    """A connected, authenticated participant."""

    __slots__ = (
        "_caps",
        "_presence",
        "_summary",
        "_summary_json",
        "_wake_at",
        "channels",
        "conn",
        "connected_at",
        "id",
        "kind",
        "rate",
        "role",
        "space",
    )

    def __init__(
        self,
        pid: str,
        kind: str,
        role: str,
        space: SpaceState,
        conn: Connection,
        caps: CapabilitySet,
        rate: TokenBucket,
    ) -> None:
        self.id = pid
        self.kind = kind
        self.role = role
        self.space = space
        self.conn = conn
        self._caps = caps
        self.rate = rate
        self.channels: set[str] = set()
        self._presence = "online"
        self._wake_at: int | None = None
        self._summary: dict[str, Any] | None = None
        self._summary_json: msgspec.Raw | None = None
        self.connected_at = time.time()

    @property
    def caps(self) -> CapabilitySet:
        """What this participant may send (grant and revoke replace it)."""
        return self._caps

    @caps.setter
    def caps(self, value: CapabilitySet) -> None:
        self._caps, self._summary, self._summary_json = value, None, None

    @property
    def presence(self) -> str:
        """online, away, busy, sleeping, … (offline once detached)."""
        return self._presence

    @presence.setter
    def presence(self, value: str) -> None:
        self._presence, self._summary, self._summary_json = value, None, None

    @property
    def wake_at(self) -> int | None:
        """Unix ms at which a sleeping participant wakes; None while awake."""
        return self._wake_at

    @wake_at.setter
    def wake_at(self, value: int | None) -> None:
        self._wake_at, self._summary, self._summary_json = value, None, None

    def summary(self) -> dict[str, Any]:
        """Short public description, as in welcome and presence frames (do not mutate it).

        Every welcome lists every participant, so the dict is built once per change and
        shared: 5,000 joins would otherwise build 12.5 million of them.
        """
        if self._summary is None:
            out: dict[str, Any] = {
                "id": self.id,
                "kind": self.kind,
                "presence": self._presence,
                "capabilities": self._caps.capabilities,  # MEW clients track them
            }
            if self._wake_at is not None:
                out["wake_at"] = _ISO.iso(self._wake_at)
            self._summary = out
        return self._summary

    def summary_json(self) -> msgspec.Raw:
        """:meth:`summary` encoded once per change (welcomes list every participant)."""
        if self._summary_json is None:
            self._summary_json = msgspec.Raw(encode(self.summary()))
        return self._summary_json


class Channel:
    """A channel: members split by dialect for fan-out, ``seq`` counter, recent history.

    A sleeping member stays in ``members`` but moves from ``by_dialect`` (the fan-out lists)
    to ``sleepers``, so the fan-out skips it at no cost and the sleep engine decides.
    """

    __slots__ = (
        "by_dialect",
        "members",
        "name",
        "recent",
        "recent_id_set",
        "recent_ids",
        "seq",
        "sleepers",
    )

    def __init__(self, name: str, seq: int, cache_size: int, ids_kept: int = 4096) -> None:
        self.name = name
        self.seq = seq
        self.members: dict[str, Session] = {}
        self.by_dialect: dict[str, dict[str, Connection]] = {"mew": {}, "agentchat": {}}
        self.sleepers: dict[str, Session] = {}
        self.recent: deque[tuple[int, bytes]] = deque(maxlen=cache_size)
        self.recent_ids: deque[str] = deque(maxlen=ids_kept)
        self.recent_id_set: set[str] = set()

    def add(self, s: Session) -> None:
        """Make ``s`` a member."""
        self.members[s.id] = s
        if s.wake_at is None:
            self.by_dialect[s.conn.dialect.name][s.id] = s.conn
        else:
            self.sleepers[s.id] = s
        s.channels.add(self.name)

    def remove(self, s: Session) -> bool:
        """Remove ``s``; True when it was a member."""
        if self.members.get(s.id) is not s:
            return False
        del self.members[s.id]
        self.by_dialect[s.conn.dialect.name].pop(s.id, None)
        self.sleepers.pop(s.id, None)
        s.channels.discard(self.name)
        return True

    def set_asleep(self, s: Session, asleep: bool) -> None:
        """Move a member out of (or back into) the fan-out lists."""
        if self.members.get(s.id) is not s:
            return
        if asleep:
            self.by_dialect[s.conn.dialect.name].pop(s.id, None)
            self.sleepers[s.id] = s
        else:
            self.sleepers.pop(s.id, None)
            self.by_dialect[s.conn.dialect.name][s.id] = s.conn

    def remember(self, msg_id: str) -> None:
        """Note a message id of this channel (claims may name only recent messages)."""
        ids = self.recent_ids
        if len(ids) == ids.maxlen:
            self.recent_id_set.discard(ids[0])
        ids.append(msg_id)
        self.recent_id_set.add(msg_id)

    def cached_after(self, after_seq: int) -> list[tuple[int, bytes]] | None:
        """Messages with ``seq > after_seq`` from the cache, or None if the cache lacks some."""
        if after_seq >= self.seq:
            return []
        if not self.recent or self.recent[0][0] > after_seq + 1:
            return None
        return [m for m in self.recent if m[0] > after_seq]


class SpaceState:
    """One space: configuration, channels, connected sessions, DM numbering."""

    def __init__(self, config: SpaceConfig) -> None:
        self.config = config
        self.id = config.space
        self.channels: dict[str, Channel] = {}
        self.online: dict[str, Session] = {}
        self.known: set[str] = set(config.participants)
        self.dm_seq = 0
        self.dm_marks: dict[str, int] = {}
        """Participant id → the DM ``seq`` when it went offline: DMs after it are replayed
        when it comes back without a ``resume`` (a new process), so none is lost."""
        self.pending_presence: list[tuple[str, dict[str, Any], str | None]] = []
        self.presence_scheduled = False
        self.proposals = ProposalLedger()
