"""The ids of a space's recent messages: idempotent resends and ``duplicate_id`` refusals.

A sender that does not know whether its message landed (the connection dropped before the
echo or the ``202``) sends it again with the same ``id``; the gateway recognises it here and
answers with the original instead of delivering it twice. An ``id`` another sender already
used is refused. The window is bounded three ways: ids older than ``window_ms`` (24 h) are
forgotten, a sender's ids beyond its newest ``per_sender`` (10,000), and the space's beyond
its newest ``cap`` (the ``limits.idempotency_ids`` setting).

Every stored message adds a record, so the record's size is this index's memory: about 170
bytes per id — the id string, its dict slot, one int and three list or queue slots (a record object
per id took 330). The int packs the message's ``seq``, place, sender and time; place and
sender are small numbers into name tables.
"""

from __future__ import annotations

from collections import deque

from hubbub.store.base import MessageRef

DAY_MS = 24 * 3600 * 1000
_TS_BITS = 44
"""Unix milliseconds below 2**44: until the year 2527."""
_TS_MASK = (1 << _TS_BITS) - 1
_PLACE_BITS = 32
"""Place numbers: one per channel that had a message, and one for DMs."""
_PLACE_MASK = (1 << _PLACE_BITS) - 1


class _Sender:
    """A sender's remembered ids, oldest first, and its number in the packed records.

    A list read from ``head`` on (a deque costs 624 bytes even for one id, and a space may
    have thousands of senders with a few ids each).
    """

    __slots__ = ("head", "ids", "number")

    def __init__(self, number: int) -> None:
        self.ids: list[str] = []
        self.head = 0
        self.number = number

    def __len__(self) -> int:
        return len(self.ids) - self.head

    def oldest(self) -> str | None:
        """The sender's oldest remembered id."""
        return self.ids[self.head] if self.head < len(self.ids) else None

    def pop_oldest(self) -> str:
        """Forget the sender's oldest id and return it."""
        msg_id = self.ids[self.head]
        self.ids[self.head] = ""  # the id string is freed now, not at the next compaction
        self.head += 1
        if self.head * 4 > len(self.ids):
            del self.ids[: self.head]
            self.head = 0
        return msg_id


class MessageIds:
    """Recent message ids of one space, oldest first."""

    def __init__(self, *, window_ms: int = DAY_MS, per_sender: int = 10_000, cap: int) -> None:
        self.window_ms = window_ms
        self.per_sender = per_sender
        self.cap = cap
        self._sender_bits = (cap + 1).bit_length()
        """A sender keeps its number while it has ids, so there are never more than records."""
        self._sender_mask = (1 << self._sender_bits) - 1
        self._refs: dict[str, int] = {}
        """id → packed record: ``seq``, place number, sender number, Unix ms (the low bits)."""
        self._order: deque[str] = deque()
        """Ids oldest first, each with the packed record it had (``_order_recs``): an entry
        whose id now has another record, or none (dropped as its sender's oldest), is skipped."""
        self._order_recs: deque[int] = deque()
        self._senders: dict[str, _Sender] = {}
        self._sender_names: list[str] = []
        self._free_numbers: list[int] = []
        self._places: dict[str, int] = {}
        """Place name → number. Never shrinks: a space's channels are never deleted."""
        self._place_names: list[str] = []

    def __len__(self) -> int:
        return len(self._refs)

    def get(self, msg_id: str) -> MessageRef | None:
        """The record of ``msg_id`` if it is still in the window."""
        rec = self._refs.get(msg_id)
        if rec is None:
            return None
        rest = rec >> _TS_BITS + self._sender_bits
        return MessageRef(
            msg_id,
            self._sender_names[rec >> _TS_BITS & self._sender_mask],
            self._place_names[rest & _PLACE_MASK],
            rest >> _PLACE_BITS,
            rec & _TS_MASK,
        )

    def add(self, ref: MessageRef) -> None:
        """Remember a new message's id (the caller checked it is not known)."""
        msg_id, sender, place, seq, ts_ms = ref
        if not 0 <= ts_ms <= _TS_MASK:
            raise ValueError(f"message time {ts_ms} is not Unix milliseconds")
        refs = self._refs
        place_number = self._places.get(place)
        if place_number is None:
            place_number = self._places[place] = len(self._place_names)
            self._place_names.append(place)
        who = self._senders.get(sender)
        if who is None:
            who = self._new_sender(sender)
        rec = (
            ((seq << _PLACE_BITS | place_number) << self._sender_bits | who.number) << _TS_BITS
        ) | ts_ms
        refs[msg_id] = rec
        order, recs = self._order, self._order_recs
        order.append(msg_id)
        recs.append(rec)
        who.ids.append(msg_id)
        if len(who) > self.per_sender:
            refs.pop(who.pop_oldest(), None)
        horizon = ts_ms - self.window_ms
        while order:
            oldest, rec = order[0], recs[0]
            if refs.get(oldest) == rec:
                if len(refs) <= self.cap and rec & _TS_MASK >= horizon:
                    break
                del refs[oldest]
                sender_number = rec >> _TS_BITS & self._sender_mask
                self._forget_oldest_of(self._sender_names[sender_number], oldest)
            order.popleft()
            recs.popleft()
        if len(order) > 2 * len(refs) + 1024:
            self._compact_order()

    def _new_sender(self, sender: str) -> _Sender:
        if self._free_numbers:
            number = self._free_numbers.pop()
            self._sender_names[number] = sender
        else:
            number = len(self._sender_names)
            self._sender_names.append(sender)
        who = self._senders[sender] = _Sender(number)
        return who

    def _forget_oldest_of(self, sender: str, msg_id: str) -> None:
        """The sender's oldest id left the window; a sender without ids frees its number."""
        who = self._senders.get(sender)
        if who is None or who.oldest() != msg_id:
            return
        who.pop_oldest()
        if not who:
            del self._senders[sender]
            self._sender_names[who.number] = ""
            self._free_numbers.append(who.number)

    def _compact_order(self) -> None:
        """Drop the skipped entries (senders past ``per_sender`` leave them behind)."""
        refs = self._refs
        kept = [
            (i, r) for i, r in zip(self._order, self._order_recs, strict=True) if refs.get(i) == r
        ]
        self._order = deque(i for i, _r in kept)
        self._order_recs = deque(r for _i, r in kept)
