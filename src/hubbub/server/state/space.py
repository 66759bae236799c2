"""In-memory state of a space: its channels, members and connected participants."""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import msgspec

from hubbub.protocol.addressing import RosterView
from hubbub.protocol.capabilities import CapabilitySet
from hubbub.protocol.dialects import DIALECTS
from hubbub.protocol.envelope import encode
from hubbub.protocol.ids import Clock
from hubbub.server.config import SpaceConfig
from hubbub.server.state.connection import Connection, FanoutGroup, Members
from hubbub.server.state.message_ids import DAY_MS, MessageIds
from hubbub.server.state.presence_caps import AnnouncedCapabilities
from hubbub.server.state.proposals import ProposalLedger
from hubbub.server.state.streams import SpaceStreams

_ISO = Clock()


class TokenBucket:
    """Messages (or bytes) per second with a burst allowance; ``rate == 0`` disables the
    limit."""

    __slots__ = ("burst", "last", "rate", "tokens")

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = float(max(burst, 1))
        self.tokens = self.burst
        self.last = time.monotonic()

    def take(self, cost: float = 1.0) -> bool:
        """Spend ``cost`` tokens; False (nothing spent) when the participant is over its rate."""
        if self.rate <= 0:
            return True
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= cost:
            self.tokens -= cost
            return True
        return False

    def full(self, now: float) -> bool:
        """Whether the bucket has refilled completely by ``now`` (it is then like a new one)."""
        return self.rate <= 0 or self.tokens + (now - self.last) * self.rate >= self.burst


class RateBuckets:
    """The rate of each (space, participant), kept across reconnects and shared with HTTP.

    Memory is bounded: past ``max_entries`` the full buckets are dropped (a full bucket is
    the same as a new one, so nothing is lost); if too few are full, the oldest go too.
    """

    def __init__(self, rate: float, burst: int, max_entries: int = 50_000) -> None:
        self.rate = rate
        self.burst = burst
        self.max_entries = max_entries
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def __len__(self) -> int:
        """Number of buckets kept."""
        return len(self._buckets)

    def get(self, space: str, pid: str) -> TokenBucket:
        """The bucket of ``pid`` in ``space`` (a new, full one the first time)."""
        key = (space, pid)
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= self.max_entries:
                self._trim()
            bucket = self._buckets[key] = TokenBucket(self.rate, self.burst)
        return bucket

    def keep(self, space: str, pid: str, bucket: TokenBucket) -> None:
        """Keep ``bucket`` as the one of ``pid`` (a connection hands its bucket back)."""
        key = (space, pid)
        if key not in self._buckets and len(self._buckets) >= self.max_entries:
            self._trim()
        self._buckets[key] = bucket

    def _trim(self) -> None:
        now = time.monotonic()
        kept = {k: b for k, b in self._buckets.items() if not b.full(now)}
        target = self.max_entries * 3 // 4
        if len(kept) > target:
            kept = dict(list(kept.items())[len(kept) - target :])
        self._buckets = kept


class Session:
    """A connected, authenticated participant."""

    __slots__ = (
        "_caps",
        "_presence",
        "_status_text",
        "_summary_json",
        "_wake_at",
        "channels",
        "conn",
        "connected_at",
        "id",
        "kind",
        "name",
        "presence_lists",
        "pubkey",
        "rate",
        "resends",
        "role",
        "space",
        "verified",
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
        self.presence_lists = False
        """Reads a run of presence events as one frame with ``participants`` (the hubbub
        SDK); else each participant gets a frame of its own (MEW's clients)."""
        self.resends = False
        """Opted in to resends (its join carried ``resume``): a message equal to one it sent
        under the same id is answered with the original, not delivered again."""
        self.channels: set[str] = set()
        self._presence = "online"
        self._status_text: str | None = None
        self._wake_at: int | None = None
        self._summary_json: msgspec.Raw | None = None
        self.connected_at = time.time()
        space.announced.welcomed(pid)  # its welcome lists who is online, with their lists
        self.name: str | None = None
        """The display name an agentchat client asked for (its id may differ)."""
        self.verified: bool | None = None
        """agentchat clients with a key: whether an admin configured it; None: no key."""
        self.pubkey: str | None = None
        """The public key an agentchat client proved at IDENTIFY."""

    @property
    def caps(self) -> CapabilitySet:
        """What this participant may send (grant and revoke replace it)."""
        return self._caps

    @caps.setter
    def caps(self, value: CapabilitySet) -> None:
        self._caps, self._summary_json = value, None

    @property
    def presence(self) -> str:
        """online, away, busy, listening, sleeping, … (offline once detached or when set)."""
        return self._presence

    @presence.setter
    def presence(self, value: str) -> None:
        self._presence, self._summary_json = value, None

    @property
    def status_text(self) -> str | None:
        """A short free text the participant set with its presence (agentchat ``status_text``)."""
        return self._status_text

    @status_text.setter
    def status_text(self, value: str | None) -> None:
        self._status_text, self._summary_json = value, None

    @property
    def wake_at(self) -> int | None:
        """Unix ms at which a sleeping participant wakes; None while awake."""
        return self._wake_at

    @property
    def asleep(self) -> bool:
        """Whether the participant sleeps: off the fan-out lists, its messages offered to the
        sleep engine (the one test that fan-out, DMs, replay and the router ask)."""
        return self._wake_at is not None

    def fall_asleep(self, wake_at: int) -> None:
        """Sleep until ``wake_at`` (Unix ms): presence ``sleeping``, off its channels' fan-out
        lists (a new sleep while asleep only moves ``wake_at``)."""
        was_awake = self._wake_at is None
        self._wake_at, self._presence = wake_at, "sleeping"
        self._summary_json = None
        if was_awake:
            self._set_listening(False)

    def wake_up(self) -> None:
        """End the sleep: presence ``online``, back on its channels' fan-out lists."""
        if self._wake_at is None:
            return
        self._wake_at, self._presence = None, "online"
        self._summary_json = None
        self._set_listening(True)

    def _set_listening(self, listening: bool) -> None:
        for name in self.channels:
            ch = self.space.channels.get(name)
            if ch is not None:
                ch.set_asleep(self, not listening)

    @property
    def plain_mew(self) -> bool:
        """A client of MEW's own (``MEWClient``, the ``mew`` CLI): its frames are envelopes
        and its join did not ``resume`` (the hubbub SDK's and the web chat's do)."""
        return self.conn.dialect.frames_are_envelopes and not self.resends

    def summary(self) -> dict[str, Any]:
        """Short public description, as in welcome and presence frames (a new dict each
        time: welcomes, which list every participant, use :meth:`summary_json`, kept per
        change; an idle connection does not keep the dict as well)."""
        out: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "presence": self._presence,
            "capabilities": self._caps.capabilities,  # MEW clients track them
            "capabilities_digest": self._caps.digest,  # presence may carry only this
        }
        if self._status_text is not None:
            out["status_text"] = self._status_text
        if self._wake_at is not None:
            out["wake_at"] = _ISO.iso(self._wake_at)
        return out | self.identity()

    def identity(self) -> dict[str, Any]:
        """``name`` (when it differs from the id) and ``verified`` (keyed agentchat clients)."""
        out: dict[str, Any] = {}
        if self.name is not None and self.name != self.id:
            out["name"] = self.name
        if self.verified is not None:
            out["verified"] = self.verified
        return out

    def summary_json(self) -> msgspec.Raw:
        """:meth:`summary` encoded once per change (welcomes list every participant)."""
        if self._summary_json is None:
            self._summary_json = msgspec.Raw(encode(self.summary()))
        return self._summary_json


class Channel:
    """A channel: members split by dialect for fan-out, ``seq`` counters, recent history.

    ``assigned`` is the last ``seq`` given to a message; ``seq`` the last one delivered,
    i.e. committed to the store and fanned out (everything a client can see). A sleeping
    member stays in ``members`` but moves from ``by_dialect`` (the fan-out lists) to
    ``sleepers``, so the fan-out skips it at no cost and the sleep engine decides. A member
    whose join is still reading history is in ``members`` (it may send at once) and in
    ``joining``, and enters the fan-out lists when its ``channel/joined`` goes out.
    A ``private`` channel admits only the participants in ``invited`` (its creator and those
    a member invited).
    Connections with a fan-out group (a cluster node's clients on the leader) are listed by
    group in ``groups`` instead of ``by_dialect``: a fan-out reaches each group in one call.
    """

    __slots__ = (
        "assigned",
        "by_dialect",
        "groups",
        "invited",
        "joining",
        "members",
        "name",
        "private",
        "recent",
        "seq",
        "sleepers",
    )

    def __init__(self, name: str, seq: int, cache_size: int) -> None:
        self.name = name
        self.seq = seq
        self.assigned = seq
        self.joining: set[str] = set()
        self.members: dict[str, Session] = {}
        self.by_dialect: dict[str, dict[str, Connection]] = {d: {} for d in DIALECTS}
        self.groups: dict[str, dict[FanoutGroup, Members]] = {d: {} for d in DIALECTS}
        self.sleepers: dict[str, Session] = {}
        self.recent: deque[tuple[int, bytes]] = deque(maxlen=cache_size)
        self.private = False
        """Invite-only: only ``invited`` participants may join, read or post."""
        self.invited: set[str] = set()

    def add_joining(self, s: Session) -> None:
        """Make ``s`` a member that may send but receives nothing until :meth:`add`."""
        if self.members.get(s.id) is s:
            return
        self.members[s.id] = s
        self.joining.add(s.id)
        s.channels.add(self.name)

    def add(self, s: Session) -> None:
        """Make ``s`` a member that receives the channel's messages."""
        self.members[s.id] = s
        self.joining.discard(s.id)
        if not s.asleep:
            self._listen(s)
        else:
            self.sleepers[s.id] = s
        s.channels.add(self.name)

    def remove(self, s: Session) -> bool:
        """Remove ``s``; True when it was a member."""
        if self.members.get(s.id) is not s:
            return False
        del self.members[s.id]
        self.joining.discard(s.id)
        self._unlisten(s)
        self.sleepers.pop(s.id, None)
        s.channels.discard(self.name)
        return True

    def set_asleep(self, s: Session, asleep: bool) -> None:
        """Move a member out of (or back into) the fan-out lists (:meth:`Session.fall_asleep`
        and :meth:`Session.wake_up` call it for each of their channels)."""
        if self.members.get(s.id) is not s or s.id in self.joining:
            return
        if asleep:
            self._unlisten(s)
            self.sleepers[s.id] = s
        else:
            self.sleepers.pop(s.id, None)
            self._listen(s)

    def _listen(self, s: Session) -> None:
        """Put ``s`` on the fan-out lists (by group when its connection has one)."""
        conn = s.conn
        name = conn.dialect.name
        self._unlisten(s)
        if conn.group is None:
            self.by_dialect[name][s.id] = conn
        else:
            members = self.groups[name].get(conn.group)
            if members is None:
                members = self.groups[name][conn.group] = Members()
            members[s.id] = conn.member
            members.packed = None

    def _unlisten(self, s: Session) -> None:
        """Take participant ``s.id`` off the fan-out lists of its dialect."""
        name = s.conn.dialect.name
        self.by_dialect[name].pop(s.id, None)
        groups = self.groups[name]
        if groups:
            for group, members in list(groups.items()):
                if members.pop(s.id, None) is not None:
                    members.packed = None
                    if not members:
                        del groups[group]

    def cached_after(self, after_seq: int) -> list[tuple[int, bytes]] | None:
        """Messages with ``seq > after_seq`` from the cache, or None if the cache lacks some."""
        if after_seq >= self.seq:
            return []
        if not self.recent or self.recent[0][0] > after_seq + 1:
            return None
        return [m for m in self.recent if m[0] > after_seq]


class SpaceState:
    """One space: configuration, channels, connected sessions, DM numbering."""

    def __init__(
        self, config: SpaceConfig, ids_cap: int = 200_000, ids_window_ms: int = DAY_MS
    ) -> None:
        self.config = config
        self.id = config.space
        self.channels: dict[str, Channel] = {}
        self.online: dict[str, Session] = {}
        self.known: set[str] = set(config.participants)
        self.kinds: dict[str, str] = {}
        """The kind each participant last connected or posted as (kept once it left)."""
        self.names: dict[str, str] = {}
        """The display name each participant last connected with, where it has one other
        than its id (kept once it left: a mention of it still addresses it)."""
        self.dm_seq = 0
        """The last DM ``seq`` delivered (``dm_assigned``: the last one handed out)."""
        self.dm_assigned = 0
        self.dm_marks: dict[str, int] = {}
        """Participant id → the last DM ``seq`` written to its connection (saved in the
        store): DMs after it are replayed when it comes back without a ``resume`` (a new
        process, a gateway restart), so none is lost — a sleeper's buffered DMs included."""
        self.ids = MessageIds(cap=ids_cap, window_ms=ids_window_ms)
        self.pending_presence: list[tuple[str, dict[str, Any], str | None]] = []
        self.announced = AnnouncedCapabilities()
        """Which capability lists presence has announced (it then carries their digests)."""
        self.presence_scheduled = False
        self.proposals = ProposalLedger()
        self.streams = SpaceStreams()
        """MEW's streams open in the space (``server/core/streams.py``)."""

    def met(self, pid: str, kind: str) -> None:
        """``pid`` connected or posted as ``kind``: it is known, and keeps its kind offline."""
        self.known.add(pid)
        self.kinds[pid] = kind

    def named(self, pid: str, name: str | None) -> None:
        """``pid`` connected with display ``name`` (None: none): kept once it left."""
        if name is not None and name != pid:
            self.names[pid] = name
        else:
            self.names.pop(pid, None)

    def roster_view(self) -> RosterView:
        """The space as the addressing rule reads it: every known participant with its display
        name, and who sent a recent message (``ids``)."""
        names: dict[str, str | None] = dict.fromkeys(self.known)
        names.update(self.names)
        for pid, s in self.online.items():
            names[pid] = s.name if s.name != pid else None

        def author_of(msg_id: str) -> str | None:
            ref = self.ids.latest(msg_id)
            return None if ref is None else ref.sender

        return RosterView(names, author_of)

    def kind_of(self, pid: str) -> str:
        """A participant's kind: as connected now, else as it last was, else as configured."""
        s = self.online.get(pid)
        if s is not None:
            return s.kind
        kind = self.kinds.get(pid)
        if kind is not None:
            return kind
        cfg = self.config.participants.get(pid)
        return cfg.kind if cfg else self.config.defaults.kind
