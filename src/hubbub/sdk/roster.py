"""Who is in the space, as a client learns it from the welcome and presence frames.

Sans-I/O: the client hands it the payloads; it keeps one summary per participant, with the
capability list filled in where a presence carried only its ``capabilities_digest`` (the
gateway sends a list once, then its digest). Participants that left stay *known* (marked
``offline``): a message that mentions one is still addressed to it, so nobody stands in for
it (:mod:`hubbub.protocol.addressing`). The authors of recent messages are kept too (whom a
reply is addressed to).
"""

from __future__ import annotations

from typing import Any, Final

from hubbub.protocol.addressing import Authors, RosterView
from hubbub.protocol.envelope import Envelope

LISTS_KEPT: Final = 1024
"""Capability lists a client remembers by digest (the oldest is forgotten first)."""
OFFLINE_KEPT: Final = 10_000
"""Participants that left a client remembers (the earliest to leave is forgotten first)."""


class Roster:
    """Participants in the space by id: those online, with their capability lists, and those
    that left (``offline``); and who wrote the recent messages."""

    def __init__(self) -> None:
        self.online: dict[str, dict[str, Any]] = {}
        """Participant summaries by id (replaced as a whole by each welcome)."""
        self.offline: dict[str, dict[str, Any]] = {}
        """Participants seen online that left since, by id (their last summary, ``presence``
        ``offline``)."""
        self.authors = Authors()
        """Who wrote the recent messages the client received, by message id."""
        self._lists_by_digest: dict[str, list[Any]] = {}

    def welcomed(self, payload: dict[str, Any]) -> None:
        """A ``system/welcome``: everyone it lists, and no one else, is online."""
        online = {
            p["id"]: self._with_capabilities(p)
            for p in payload.get("participants", [])
            if isinstance(p, dict) and isinstance(p.get("id"), str)
        }
        for pid, entry in self.online.items():
            if pid not in online:
                self._left(entry)
        for pid in online:
            self.offline.pop(pid, None)
        self.online = online

    def presence(self, payload: dict[str, Any]) -> None:
        """A space-wide ``system/presence``: participants joined, changed or left."""
        if payload.get("channel") is not None:
            return
        entries = payload.get("participants") or [payload.get("participant")]
        event = payload.get("event")
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
                continue
            if event == "leave":
                gone = self.online.pop(entry["id"], None)
                self._left({**(gone or {}), **entry})
            else:
                self.offline.pop(entry["id"], None)
                self.online[entry["id"]] = self._with_capabilities(entry)

    def heard(self, env: Envelope) -> None:
        """A chat message arrived: remember who wrote it (a reply to it is addressed to them)."""
        if env.kind == "chat":
            self.authors.heard(env)

    def names(self) -> dict[str, str | None]:
        """Every known participant, online or not: id → display name (None: none given)."""
        out: dict[str, str | None] = {}
        for entries in (self.offline, self.online):
            for pid, entry in entries.items():
                name = entry.get("name")
                out[pid] = name if isinstance(name, str) and name else None
        return out

    def kinds(self) -> dict[str, str]:
        """The kind of every known participant that announced one."""
        out: dict[str, str] = {}
        for entries in (self.offline, self.online):
            for pid, entry in entries.items():
                kind = entry.get("kind")
                if isinstance(kind, str):
                    out[pid] = kind
        return out

    def view(self) -> RosterView:
        """The space as the addressing rule reads it (names, kinds, message authors)."""
        return RosterView(self.names(), self.authors.author_of, self.kinds())

    def _left(self, entry: dict[str, Any]) -> None:
        pid = entry.get("id")
        if not isinstance(pid, str):
            return
        self.offline.pop(pid, None)
        self.offline[pid] = {**entry, "presence": "offline"}
        if len(self.offline) > OFFLINE_KEPT:
            self.offline.pop(next(iter(self.offline)))

    def _with_capabilities(self, entry: dict[str, Any]) -> dict[str, Any]:
        """A participant summary with its capability list: as sent, or the one seen before
        under its ``capabilities_digest``."""
        digest = entry.get("capabilities_digest")
        if not isinstance(digest, str):
            return entry
        caps = entry.get("capabilities")
        if isinstance(caps, list):
            if len(self._lists_by_digest) >= LISTS_KEPT:
                self._lists_by_digest.pop(next(iter(self._lists_by_digest)))
            self._lists_by_digest[digest] = caps
            return entry
        known = self._lists_by_digest.get(digest)
        return entry if known is None else {**entry, "capabilities": known}
