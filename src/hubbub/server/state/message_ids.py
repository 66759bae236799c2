"""The ids of a space's recent messages, per (sender, id): resends and correlation.

A sender that does not know whether its message landed (the connection dropped before the
echo or the ``202``) sends it again with the same ``id``; the gateway finds the original here
(:meth:`MessageIds.get`, by sender and id) and, when the sender opted in to resends and the
message is the same (its digest), answers with it instead of delivering it twice. Ids are a
sender's own: another sender's message with the same id is a message of its own, and a
sender reusing one of its ids (a restarted MEW client counting from 1 again) replaces the
record. :meth:`MessageIds.latest` is the latest message with an id, whoever sent it (what a
claim or a correlation names). The window is bounded three ways: ids older than
``window_ms`` (``limits.idempotency_window_s``, 24 h) are forgotten, a sender's ids beyond its
newest ``per_sender`` (10,000), and the space's beyond its newest ``cap`` (the
``limits.idempotency_ids`` setting). The store keeps the same records (they survive a
restart); :meth:`MessageIds.prune_due` says when and how far its copy is pruned while the
gateway runs, so neither grows without bound.

Every stored message adds a record, so the record's size is this index's memory: about 170
bytes per id — the id string, its dict slot, one int and three list or queue slots (a record object
per id took 330). The int packs the message's ``seq``, place, sender and time; place and
sender are small numbers into name tables. The rare records of a sender whose id another
sender used later (``_shadowed``) and the digests of opted-in senders' messages
(``_digests``) sit in tables of their own, so the common record pays for neither.
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
PRUNE_EVERY_MS = 60_000
"""The store's id records are pruned at least this often while messages come in..."""
PRUNE_EVERY_FRACTION = 10
"""...and whenever a tenth of ``cap`` records were added since the last pruning."""


class _Sender:
    """A sender's remembered ids, oldest first, and its number in the packed records.

    A list read from ``head`` on (a deque costs 624 bytes even for one id, and a space may
    have thousands of senders with a few ids each).
    """

    __slots__ = ("head", "ids", "number", "recs")

    def __init__(self, number: int) -> None:
        self.ids: list[str] = []
        self.recs: list[int] = []
        """The packed record each entry of ``ids`` had: a reused id leaves an old entry."""
        self.head = 0
        self.number = number

    def __len__(self) -> int:
        return len(self.ids) - self.head

    def peek(self) -> tuple[str, int]:
        """The sender's oldest entry: its id and record."""
        return self.ids[self.head], self.recs[self.head]

    def pop_oldest(self) -> tuple[str, int]:
        """Forget the sender's oldest entry and return its id and record."""
        msg_id, rec = self.ids[self.head], self.recs[self.head]
        self.ids[self.head] = ""  # the id string is freed now, not at the next compaction
        self.recs[self.head] = 0
        self.head += 1
        if self.head * 4 > len(self.ids):
            del self.ids[: self.head]
            del self.recs[: self.head]
            self.head = 0
        return msg_id, rec


class MessageIds:
    """Recent message ids of one space, per sender, oldest first."""

    def __init__(self, *, window_ms: int = DAY_MS, per_sender: int = 10_000, cap: int) -> None:
        self.window_ms = window_ms
        self.per_sender = per_sender
        self.cap = cap
        self._sender_bits = (cap + 1).bit_length()
        """A sender keeps its number while it has ids, so there are never more than records."""
        self._sender_mask = (1 << self._sender_bits) - 1
        self._refs: dict[str, int] = {}
        """id → packed record of the latest message with that id: ``seq``, place number,
        sender number, Unix ms (the low bits)."""
        self._shadowed: dict[tuple[str, str], int] = {}
        """(sender, id) → record, for a message whose id another sender used after it."""
        self._digests: dict[int, int] = {}
        """record → digest of the message (senders that opted in to resends only)."""
        self._order: deque[str] = deque()
        """Ids oldest first, each with the packed record it had (``_order_recs``): an entry
        whose record is gone (replaced, or dropped as its sender's oldest) is skipped."""
        self._order_recs: deque[int] = deque()
        self._senders: dict[str, _Sender] = {}
        self._sender_names: list[str] = []
        self._free_numbers: list[int] = []
        self._places: dict[str, int] = {}
        """Place name → number. Never shrinks: a space's channels are never deleted."""
        self._place_names: list[str] = []
        self._prune_at_ms = 0
        """When the store's records are pruned next (at the latest)."""
        self._added_since_prune = 0

    def __len__(self) -> int:
        return len(self._refs) + len(self._shadowed)

    def get(self, sender: str, msg_id: str) -> MessageRef | None:
        """The record of ``sender``'s latest message ``msg_id`` if it is still in the window."""
        rec = self._refs.get(msg_id)
        if rec is None:
            return None
        ref = self._unpack(msg_id, rec)
        if ref.sender == sender:
            return ref
        rec = self._shadowed.get((sender, msg_id)) if self._shadowed else None
        return None if rec is None else self._unpack(msg_id, rec)

    def latest(self, msg_id: str) -> MessageRef | None:
        """The record of the latest message ``msg_id`` of any sender, if still in the window."""
        rec = self._refs.get(msg_id)
        return None if rec is None else self._unpack(msg_id, rec)

    def _unpack(self, msg_id: str, rec: int) -> MessageRef:
        rest = rec >> _TS_BITS + self._sender_bits
        return MessageRef(
            msg_id,
            self._sender_names[rec >> _TS_BITS & self._sender_mask],
            self._place_names[rest & _PLACE_MASK],
            rest >> _PLACE_BITS,
            rec & _TS_MASK,
            self._digests.get(rec, 0) if self._digests else 0,
        )

    def _sender_of(self, rec: int) -> str:
        return self._sender_names[rec >> _TS_BITS & self._sender_mask]

    def add(self, ref: MessageRef) -> None:
        """Remember a new message's id: it replaces its sender's earlier message of that id."""
        msg_id, sender, place, seq, ts_ms, digest = ref
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
        old = refs.get(msg_id)
        if old is not None:
            if self._sender_of(old) != sender:
                self._shadowed[(self._sender_of(old), msg_id)] = old
            else:
                self._digests.pop(old, None)
            if self._shadowed:
                self._drop_shadow(sender, msg_id)
        refs[msg_id] = rec
        if digest:
            self._digests[rec] = digest
        order, recs = self._order, self._order_recs
        order.append(msg_id)
        recs.append(rec)
        who_ids = who.ids
        who_ids.append(msg_id)
        who.recs.append(rec)
        if len(who_ids) - who.head > self.per_sender:
            self._forget(*who.pop_oldest())
        # the window's oldest entries leave it (this runs per stored message: lengths and
        # the common "still held" test are inlined)
        horizon = ts_ms - self.window_ms
        shadowed, cap = self._shadowed, self.cap
        while order:
            oldest, rec = order[0], recs[0]
            if refs.get(oldest) == rec or (shadowed and self._holds(oldest, rec)):
                if len(refs) + len(shadowed) <= cap and rec & _TS_MASK >= horizon:
                    break
                self._forget(oldest, rec)
                self._forget_oldest_of(self._sender_of(rec))
            order.popleft()
            recs.popleft()
        if len(order) > 2 * (len(refs) + len(shadowed)) + 1024:
            self._compact_order()
        self._added_since_prune += 1

    def oldest_ms(self) -> int | None:
        """The time of the oldest record still in the window (None: none is)."""
        return self._order_recs[0] & _TS_MASK if self._order_recs else None

    def prune_due(self, now_ms: int) -> int | None:
        """If the store's copy of the records is due for pruning (a minute since the last
        time, or a tenth of ``cap`` added): the time before which its records may go, those
        older than every record still in the window. Else None."""
        if now_ms < self._prune_at_ms and self._added_since_prune * PRUNE_EVERY_FRACTION < self.cap:
            return None
        self._prune_at_ms = now_ms + PRUNE_EVERY_MS
        self._added_since_prune = 0
        oldest = self.oldest_ms()
        return now_ms - self.window_ms if oldest is None else oldest

    def _holds(self, msg_id: str, rec: int) -> bool:
        """Whether ``rec`` is still the record of its (sender, id)."""
        if self._refs.get(msg_id) == rec:
            return True
        return bool(self._shadowed) and (self._shadowed.get((self._sender_of(rec), msg_id)) == rec)

    def _forget(self, msg_id: str, rec: int) -> None:
        """Drop ``rec`` if it is still the record of its (sender, id)."""
        if self._refs.get(msg_id) == rec:
            del self._refs[msg_id]
        elif self._shadowed:
            key = (self._sender_of(rec), msg_id)
            if self._shadowed.get(key) == rec:
                del self._shadowed[key]
        if self._digests:
            self._digests.pop(rec, None)

    def _drop_shadow(self, sender: str, msg_id: str) -> None:
        rec = self._shadowed.pop((sender, msg_id), None)
        if rec is not None and self._digests:
            self._digests.pop(rec, None)

    def _new_sender(self, sender: str) -> _Sender:
        if self._free_numbers:
            number = self._free_numbers.pop()
            self._sender_names[number] = sender
        else:
            number = len(self._sender_names)
            self._sender_names.append(sender)
        who = self._senders[sender] = _Sender(number)
        return who

    def _forget_oldest_of(self, sender: str) -> None:
        """The sender's oldest record left the window (with any entries of its replaced
        ids before it); a sender without entries frees its number."""
        who = self._senders.get(sender)
        if who is None:
            return
        while who and not self._holds(*who.peek()):
            who.pop_oldest()
        if not who:
            del self._senders[sender]
            self._sender_names[who.number] = ""
            self._free_numbers.append(who.number)

    def _compact_order(self) -> None:
        """Drop the skipped entries (senders past ``per_sender`` leave them behind)."""
        kept = [
            (i, r) for i, r in zip(self._order, self._order_recs, strict=True) if self._holds(i, r)
        ]
        self._order = deque(i for i, _r in kept)
        self._order_recs = deque(r for _i, r in kept)
