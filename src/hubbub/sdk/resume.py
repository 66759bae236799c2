"""The client's resume bookkeeping, sans-I/O: what was delivered, and what to ask for again.

:class:`ResumeState` remembers the last ``seq`` delivered per channel and which DM ``seq``\\ s
were delivered, writes the ``resume`` map of the next join frame, and says of every sequenced
envelope that arrives whether it is new (deliver it), a duplicate (drop it) or part of a
channel whose resume is still being paged (hold it until the gap is filled). It never reads a
socket or a clock: the :class:`~hubbub.sdk.Client` feeds it what arrived and acts on the
answers, so the rules are tested without a gateway (``tests/sdk/test_resume.py``).

The contract: a sequence of connections, each resumed from the points this state wrote,
delivers every message of a joined channel and every DM once and in ``seq`` order, as long as
the gateway keeps the same history (``epoch``). A new epoch resets the DM resume point; a
channel whose point the gateway no longer has comes back with ``history_reset`` and is
reloaded from what the gateway sends.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

import msgspec

from hubbub.protocol.envelope import Envelope
from hubbub.protocol.ids import DM_STREAM

log = logging.getLogger("hubbub.sdk.client")

HISTORY_PAGE: Final = 1000
"""Messages asked for per ``history/request`` while paging a resume that was cut short."""
DM_RECENT: Final = 4096
"""DM ``seq``\\ s remembered to drop a DM delivered twice (DMs may arrive out of order)."""


class Verdict(StrEnum):
    """What to do with a sequenced envelope that arrived."""

    DELIVER = "deliver"
    """New: hand it to the application."""
    DUPLICATE = "duplicate"
    """Delivered before (a replay after a resume): drop it."""
    HELD = "held"
    """Its channel's resume is being paged: kept until the gap is filled (see :meth:`paged`)."""


@dataclass
class Joined:
    """What a ``channel/joined`` asks of the client, besides delivering the envelope itself."""

    missed: list[Envelope] = field(default_factory=list)
    """Messages sent while the client was away, oldest first (each through :meth:`replayed`)."""
    reset: bool = False
    """The gateway did not have the resume point: the channel is reloaded from ``missed``."""
    more: bool = False
    """Not all missed messages fit: after replaying them, ask for the next :meth:`page`."""


class ResumeState:
    """Resume points per channel and for the DM stream, and the pages of a cut-off resume."""

    def __init__(self) -> None:
        self.last_seq: dict[str, int] = {}
        """Highest ``seq`` delivered per joined channel: the resume point."""
        self.epoch: str | None = None
        """The gateway's history epoch (from the welcome); resume points belong to it."""
        self.duplicates_dropped = 0
        """Envelopes received twice and not delivered again."""
        self._resumed: set[str] = set()
        self._dm_floor: int | None = None
        self._dm_max: int | None = None
        self._dm_recent: set[int] = set()
        self._dm_order: deque[int] = deque()
        self._paging: dict[str, list[Envelope]] = {}
        self._page_ids: dict[str, str] = {}

    # ------------------------------------------------------------------ connecting

    def join_points(self, channels: list[str]) -> dict[str, int]:
        """The ``resume`` map of the next join frame for ``channels`` (the DM stream under
        ``DM_STREAM``); starts a new connection's bookkeeping (paging of the last one ends)."""
        self._resumed = {ch for ch in channels if ch in self.last_seq}
        points = {ch: self.last_seq[ch] for ch in channels if ch in self._resumed}
        if self._dm_max is not None:
            points[DM_STREAM] = self._dm_max
            self._dm_floor = self._dm_max
            self._dm_recent.clear()
            self._dm_order.clear()
        self._paging.clear()
        self._page_ids.clear()
        return points

    def welcomed(self, payload: Mapping[str, Any]) -> None:
        """Take the welcome's ``epoch`` and ``dm_seq`` (the DM resume point of a first join)."""
        epoch = payload.get("epoch")
        if isinstance(epoch, str):
            if self.epoch is not None and epoch != self.epoch:
                # another history (a wiped or replaced store): our DM resume point means
                # nothing there; start from the gateway's present
                self._dm_max = self._dm_floor = None
                self._dm_recent.clear()
                self._dm_order.clear()
            self.epoch = epoch
        dm_seq = payload.get("dm_seq")
        if self._dm_max is None and isinstance(dm_seq, int):
            self._dm_max = dm_seq  # DMs after this point are resumed after a drop

    def joined(self, channel: str, payload: Mapping[str, Any]) -> Joined:
        """A ``channel/joined`` arrived: a fresh join starts at its ``seq``; a resumed one
        brings what was missed (and maybe a reset, or a page still to ask for)."""
        out = Joined()
        if channel in self._resumed:
            self._resumed.discard(channel)
            if payload.get("history_reset") is not None:
                # our resume point does not exist in the gateway's history: reload from what
                # it sends instead of skipping everything up to the old seq
                self.last_seq[channel] = 0
                out.reset = True
            out.missed = _envelopes(payload.get("history", []), channel)
        else:
            seq = payload.get("seq")
            self.last_seq[channel] = seq if isinstance(seq, int) else 0
        if payload.get("has_more"):
            self._hold(channel)
            out.more = True
        return out

    def left(self, channel: str) -> None:
        """The client left ``channel``: no resume point for it any more."""
        self.last_seq.pop(channel, None)

    # ------------------------------------------------------------------ receiving

    def accept(self, env: Envelope) -> Verdict:
        """The verdict on a live envelope with a ``seq`` (a channel message or a DM)."""
        seq = env.seq
        if seq is None:
            return Verdict.DELIVER
        channel = env.channel
        if channel is None:
            return Verdict.DELIVER if self._fresh_dm(seq) else self._duplicate()
        if channel in self._paging:
            self._paging[channel].append(env)
            return Verdict.HELD
        if channel in self.last_seq:
            if seq <= self.last_seq[channel]:
                return self._duplicate()
            self.last_seq[channel] = seq
        return Verdict.DELIVER

    def replayed(self, channel: str, env: Envelope) -> Verdict:
        """The verdict on a message of ``channel`` that a resume or a history page brought."""
        seq = env.seq
        if seq is None:
            return Verdict.DUPLICATE  # not a stored message: nothing to deliver again
        if seq <= self.last_seq.get(channel, 0):
            return self._duplicate()
        self.last_seq[channel] = seq
        return Verdict.DELIVER

    # ------------------------------------------------------------------ paging a resume

    def page(self, channel: str, request_id: str) -> dict[str, Any]:
        """The payload of the ``history/request`` (sent with ``request_id``) for the next page
        of ``channel``'s resume."""
        self._page_ids[channel] = request_id
        return {
            "channel": channel,
            "after_seq": self.last_seq.get(channel, 0),
            "limit": HISTORY_PAGE,
        }

    def is_paging(self, channel: str) -> bool:
        """Whether ``channel``'s resume is being paged (its live messages are held)."""
        return channel in self._paging

    def paged(self, channel: str, payload: Mapping[str, Any]) -> tuple[list[Envelope], bool]:
        """A page arrived: its messages (each through :meth:`replayed`) and whether another
        page is due (else :meth:`filled` ends the paging)."""
        more = bool(payload.get("has_more"))
        if more:
            self._hold(channel)
        return _envelopes(payload.get("messages", []), channel), more

    def filled(self, channel: str) -> list[Envelope]:
        """The gap of ``channel`` is filled (or can no longer be): the held live messages,
        each through :meth:`replayed`."""
        self._page_ids.pop(channel, None)
        return self._paging.pop(channel, [])

    def page_refused(self, correlation_ids: list[str]) -> list[str]:
        """The channels whose page request a ``system/error`` with these ids refused."""
        return [ch for ch, rid in self._page_ids.items() if rid in correlation_ids]

    # ------------------------------------------------------------------ internals

    def _hold(self, channel: str) -> None:
        self._paging.setdefault(channel, [])

    def _duplicate(self) -> Verdict:
        self.duplicates_dropped += 1
        return Verdict.DUPLICATE

    def _fresh_dm(self, seq: int) -> bool:
        if self._dm_floor is not None and seq <= self._dm_floor:
            return False
        if seq in self._dm_recent:
            return False
        self._dm_recent.add(seq)
        self._dm_order.append(seq)
        if len(self._dm_order) > DM_RECENT:
            self._dm_recent.discard(self._dm_order.popleft())
        if self._dm_max is None or seq > self._dm_max:
            self._dm_max = seq
        return True


def _envelopes(items: Any, channel: str) -> list[Envelope]:
    out: list[Envelope] = []
    for item in items if isinstance(items, list) else []:
        try:
            out.append(msgspec.convert(item, Envelope))
        except msgspec.ValidationError:
            log.warning("bad history entry in %s", channel)
    return out


__all__ = ["DM_RECENT", "HISTORY_PAGE", "Joined", "ResumeState", "Verdict"]
