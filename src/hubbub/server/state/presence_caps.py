"""Presence names a participant's capabilities by digest once everyone listening has the list.

Every participant summary carries ``capabilities`` and ``capabilities_digest`` (a hash of the
list, :attr:`CapabilitySet.digest`). A welcome lists every online participant in full, so a new
connection knows the lists of those online. A presence event then carries the full list only
when some listener may not know it: the first time the participant's current list is
announced, and again once someone has connected since that announcement (who may have come
while the participant was away). Otherwise, and always on ``leave``, it carries the digest
alone. A participant reconnecting in a loop with a large list therefore costs each listener a
few hundred bytes per reconnect, not the list (issue 21, item 11).

The rule is conservative: it may send a list again that every listener already has, never
leave one out that a listener lacks.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Final

ANNOUNCED_MAX: Final = 10_000
"""Participants per space whose last announced list is remembered (beyond: sent in full)."""


class AnnouncedCapabilities:
    """One space's record of which capability list was announced for whom, and when."""

    __slots__ = ("_announced", "_last", "_last_other", "_welcomes")

    def __init__(self) -> None:
        """An empty record: the first presence of everyone carries its list."""
        self._announced: OrderedDict[str, tuple[str, int]] = OrderedDict()
        self._welcomes = 0
        self._last: tuple[int, str] = (0, "")
        """The newest welcome: its number and the participant it went to."""
        self._last_other = 0
        """The number of the newest welcome to a participant other than ``_last``'s."""

    def welcomed(self, pid: str) -> None:
        """Count a welcome to ``pid`` (it lists the participants online, with their lists)."""
        self._welcomes += 1
        if self._last[1] != pid:
            self._last_other = self._last[0]
        self._last = (self._welcomes, pid)

    def _newest_welcome_except(self, pid: str) -> int:
        return self._last[0] if self._last[1] != pid else self._last_other

    def presence_entry(
        self, event: str, entry: dict[str, Any], channel: str | None = None
    ) -> dict[str, Any]:
        """``entry`` (a participant summary, not changed) as presence ``event`` should carry it:
        with its capability list, or with the digest alone. Only a space-wide event (no
        ``channel``: everyone online hears it) counts as announcing the list."""
        digest = entry.get("capabilities_digest")
        pid = entry.get("id")
        if "capabilities" not in entry or not isinstance(digest, str) or not isinstance(pid, str):
            return entry
        if event != "leave":
            seen = self._announced.get(pid)
            if seen is None or seen[0] != digest or self._newest_welcome_except(pid) > seen[1]:
                if channel is not None:
                    return entry
                self._announced[pid] = (digest, self._welcomes)
                self._announced.move_to_end(pid)
                if len(self._announced) > ANNOUNCED_MAX:
                    self._announced.popitem(last=False)
                return entry
        return {key: value for key, value in entry.items() if key != "capabilities"}
