"""Who is online in the space, as a client learns it from the welcome and presence frames.

Sans-I/O: the client hands it the payloads; it keeps one summary per participant, with the
capability list filled in where a presence carried only its ``capabilities_digest`` (the
gateway sends a list once, then its digest).
"""

from __future__ import annotations

from typing import Any, Final

LISTS_KEPT: Final = 1024
"""Capability lists a client remembers by digest (the oldest is forgotten first)."""


class Roster:
    """Participants online in the space, by id, with their capability lists."""

    def __init__(self) -> None:
        self.online: dict[str, dict[str, Any]] = {}
        """Participant summaries by id (replaced as a whole by each welcome)."""
        self._lists_by_digest: dict[str, list[Any]] = {}

    def welcomed(self, payload: dict[str, Any]) -> None:
        """A ``system/welcome``: everyone it lists, and no one else, is online."""
        self.online = {
            p["id"]: self._with_capabilities(p)
            for p in payload.get("participants", [])
            if isinstance(p, dict) and isinstance(p.get("id"), str)
        }

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
                self.online.pop(entry["id"], None)
            else:
                self.online[entry["id"]] = self._with_capabilities(entry)

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
