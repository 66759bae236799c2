"""Identifiers: validation of participant ids and channel names, time-sortable message ids."""

from __future__ import annotations

import os
import re
import time
import unicodedata
from datetime import UTC, datetime, timedelta

PARTICIPANT_ID_RE = re.compile(r"[A-Za-z0-9_.-]{1,32}")
CHANNEL_RE = re.compile(r"#[A-Za-z0-9_-]{1,31}")
SPACE_ID_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")

DM_STREAM = "@dm"
"""The key under which direct messages are numbered and resumed (a space-wide DM ``seq``)."""

SERVER_ID = "system:gateway"
"""The server's own identity on the MEW dialect (``@server`` on the agentchat dialect)."""
DEFAULT_CHANNEL = "#general"
"""The space's own channel: every participant of the space is in it (MEW has no channels)."""

GATEWAY_ADDRESSES = frozenset({SERVER_ID, "gateway"})
"""What a ``to`` may name to address the gateway itself (MEW's ``stream/request`` and
``stream/grant-write`` examples write ``to: ["gateway"]``)."""

RESERVED_NAMES = ("server", "system", "gateway")
"""Names that read as the gateway itself: no participant id may look like one of them
(:func:`reserved_id_error`)."""
_LOOK_ALIKES = str.maketrans("013457869i", "oleastbbgl", "_.-")
"""Digits that pass for letters, ``i`` for ``l``; separators dropped."""


def _skeleton(name: str) -> str:
    """``name`` as it reads: NFKC, lower case, look-alikes mapped, ``rn``/``vv`` as m/w."""
    folded = unicodedata.normalize("NFKC", name).lower().translate(_LOOK_ALIKES)
    return folded.replace("rn", "m").replace("vv", "w")


_RESERVED_SKELETONS = {_skeleton(n) for n in (*RESERVED_NAMES, "systemgateway", "gatewayserver")}

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def is_participant_id(value: object) -> bool:
    """Tell whether ``value`` is a legal participant id (1–32 of ``[A-Za-z0-9_.-]``)."""
    return isinstance(value, str) and PARTICIPANT_ID_RE.fullmatch(value) is not None


def reserved_id_error(pid: str) -> str | None:
    """Why ``pid`` may not be a participant's id because it looks like the gateway's own
    name, or None. The rule: after NFKC, lower case, dropping ``_ . -`` and reading
    ``0 1 3 4 5 7 8 6 9 i rn vv`` as ``o l e a s t b b g l m w``, it must not spell
    ``server``, ``system``, ``gateway`` (or ``system-gateway``, ``gateway-server``)."""
    if _skeleton(pid) not in _RESERVED_SKELETONS:
        return None
    return (
        f"participant id {pid!r} is reserved: it reads as the gateway's own name "
        f"({', '.join(RESERVED_NAMES)}; compared ignoring case, '_', '.', '-' and look-alike "
        "digits such as 0 for o, 1 for l, 3 for e); choose another id"
    )


def is_channel(value: object) -> bool:
    """Tell whether ``value`` is a legal channel name (``#`` then 1–31 of ``[A-Za-z0-9_-]``)."""
    return isinstance(value, str) and CHANNEL_RE.fullmatch(value) is not None


def normalize_channel(value: str) -> str:
    """Return ``value`` with a leading ``#`` (URL paths and CLI flags may omit it)."""
    return value if value.startswith("#") else "#" + value


_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]  # 10 bits -> two characters


class UlidGenerator:
    """Monotonic ULIDs: 48-bit millisecond time + 80 bits that increase within one millisecond.

    Ids from one generator sort in creation order, also within the same millisecond. The
    encoded time and the high 40 random bits are kept between calls: within a millisecond
    only the low 40 bits change, so an id costs four table lookups (it is made per message).
    """

    __slots__ = ("_high", "_last_ms", "_last_rand", "_prefix")

    def __init__(self) -> None:
        self._last_ms = -1
        self._last_rand = 0
        self._high = -1
        self._prefix = ""
        """The encoded time and high 40 random bits of ``_last_ms``/``_high``."""

    def new(self, now_ms: int | None = None) -> str:
        """Return a new 26-character ULID, greater than every earlier one from this generator."""
        ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        if ms <= self._last_ms:
            rand = self._last_rand + 1
            if rand >= 1 << 80:  # 2**80 ids in one millisecond: borrow the next millisecond
                self._last_ms += 1
                self._high = -1
                rand = 0
        else:
            rand = int.from_bytes(os.urandom(10), "big") >> 1  # leave room to increment
            self._last_ms = ms
            self._high = -1
        self._last_rand = rand
        high = rand >> 40
        if high != self._high:
            self._high = high
            self._prefix = _encode(self._last_ms, 5) + _encode40(high)
        return self._prefix + _encode40(rand & _LOW_40)


_LOW_40 = (1 << 40) - 1


def _encode(value: int, pairs: int) -> str:
    """Crockford base32 of ``value`` in ``2 * pairs`` characters."""
    out = [_PAIRS[(value >> (10 * i)) & 1023] for i in range(pairs - 1, -1, -1)]
    return "".join(out)


def _encode40(value: int) -> str:
    """Crockford base32 of the low 40 bits of ``value`` in 8 characters."""
    p = _PAIRS
    return p[value >> 30 & 1023] + p[value >> 20 & 1023] + p[value >> 10 & 1023] + p[value & 1023]


def ulid_time_ms(ulid: str) -> int:
    """Return the millisecond timestamp encoded in a ULID."""
    value = 0
    for ch in ulid[:10]:
        value = value * 32 + _CROCKFORD.index(ch)
    return value


class Clock:
    """Wall-clock helpers with an ISO-8601 formatter cached per millisecond (the date and
    time of day per second)."""

    __slots__ = ("_cached_iso", "_cached_ms", "_cached_prefix", "_cached_s")

    def __init__(self) -> None:
        self._cached_ms = -1
        self._cached_iso = ""
        self._cached_s = -1
        self._cached_prefix = ""

    @staticmethod
    def now_ms() -> int:
        """Unix time in milliseconds."""
        return time.time_ns() // 1_000_000

    def iso(self, ms: int) -> str:
        """Format Unix milliseconds as ``2026-11-22T10:00:00.123Z``."""
        if ms == self._cached_ms:
            return self._cached_iso
        s, frac = divmod(ms, 1000)
        if s != self._cached_s:
            self._cached_prefix = datetime.fromtimestamp(s, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.")
            self._cached_s = s
        self._cached_ms = ms
        self._cached_iso = iso = f"{self._cached_prefix}{frac:03d}Z"
        return iso


def iso_to_ms(value: str) -> int:
    """Parse an ISO-8601 timestamp (as written in envelopes) into Unix milliseconds."""
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return (dt - _EPOCH) // timedelta(milliseconds=1)
