"""The id index behind idempotent resends: its window (24 h, 10,000 per sender, the space
cap) and its memory (a compact record per id that stops growing once the window is full)."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from hubbub.protocol.ids import UlidGenerator
from hubbub.server.config import ConfigError, Limits
from hubbub.server.state.message_ids import DAY_MS, MessageIds
from hubbub.store.base import DM_STREAM, MessageRef

T0 = 1_800_000_000_000


def _ref(
    i: int, sender: str = "alice", place: str = "#general", ts: int | None = None
) -> MessageRef:
    return MessageRef(f"m-{i}", sender, place, i + 1, T0 + 20 * i if ts is None else ts)


def test_a_record_comes_back_as_it_was_added() -> None:
    ids = MessageIds(cap=1000)
    refs = [
        MessageRef("01JABC", "alice", "#general", 1, T0),
        MessageRef("dm-1", "bob", DM_STREAM, 7, T0 + 1),
        MessageRef("x" * 128, "svc.bot-1", "#ops", 2**40, T0 + 2),
    ]
    for ref in refs:
        ids.add(ref)
    assert [ids.latest(r.id) for r in refs] == refs
    assert ids.latest("unknown") is None and len(ids) == 3


def test_a_sender_keeps_its_newest_10000_ids() -> None:
    ids = MessageIds(cap=200_000)
    for i in range(25_000):
        ids.add(_ref(i))
        if i % 3 == 0:
            ids.add(_ref(100_000 + i, sender="bob"))  # another sender's ids stay
    assert len([i for i in range(25_000) if ids.latest(f"m-{i}")]) == 10_000
    assert ids.latest("m-14999") is None
    assert ids.latest("m-15000") == _ref(15_000)
    assert ids.latest("m-24999") == _ref(24_999)
    assert ids.latest("m-100000") == _ref(100_000, sender="bob")


def test_the_space_keeps_its_newest_cap_ids_over_all_senders() -> None:
    ids = MessageIds(cap=1000)
    for i in range(3000):
        ids.add(_ref(i, sender=f"s{i % 7}", place=f"#c{i % 3}"))
    assert len(ids) == 1000
    assert ids.latest("m-1999") is None
    assert ids.latest("m-2000") == _ref(2000, sender="s5", place="#c2")


def test_ids_older_than_a_day_are_forgotten() -> None:
    ids = MessageIds(cap=1000)
    ids.add(_ref(0, ts=T0))
    ids.add(_ref(1, sender="bob", ts=T0 + 1))
    ids.add(_ref(2, ts=T0 + DAY_MS))  # m-0 is exactly a day old: still in the window
    assert ids.latest("m-0") is not None
    ids.add(_ref(3, ts=T0 + DAY_MS + 1))
    assert ids.latest("m-0") is None and ids.latest("m-1") is not None
    ids.add(_ref(4, sender="carol", ts=T0 + DAY_MS + 2))
    assert ids.latest("m-1") is None and len(ids) == 3


def test_an_id_forgotten_and_used_again_belongs_to_its_new_message() -> None:
    ids = MessageIds(cap=1000, per_sender=2)
    for i in range(3):  # m-0 leaves alice's window
        ids.add(_ref(i))
    assert ids.latest("m-0") is None
    again = MessageRef("m-0", "bob", "#ops", 99, T0 + 100)
    ids.add(again)
    for i in range(3, 1003):  # push everything older than the new m-0 out of the window
        ids.add(_ref(i, sender=f"s{i}"))
    assert len(ids) == 1000
    assert ids.latest("m-0") is None  # the cap reached it in its own turn
    ids2 = MessageIds(cap=1000, per_sender=2)
    for i in range(3):
        ids2.add(_ref(i))
    ids2.add(again)
    ids2.add(_ref(3))
    ids2.add(_ref(4))  # alice's old entries are skipped, bob's new m-0 stays
    assert ids2.latest("m-0") == again


@pytest.mark.slow  # a memory soak: 50,000 senders under tracemalloc
def test_many_short_lived_senders_do_not_pile_up() -> None:
    tracemalloc.start()
    try:
        ids = MessageIds(cap=1000)
        for i in range(50_000):
            ids.add(_ref(i, sender=f"guest-{i}"))
        size = _traced_bytes(ids)
    finally:
        tracemalloc.stop()
    assert len(ids) == 1000
    assert ids.latest("m-49999") == _ref(49_999, sender="guest-49999")
    assert size < 600_000, f"{size} bytes for 1,000 ids of 1,000 senders"  # 1.2 MB before


def _traced_bytes(ids: MessageIds) -> int:
    gc.collect()
    snapshot = tracemalloc.take_snapshot()
    return sum(s.size for s in snapshot.statistics("filename"))


@pytest.mark.slow  # a memory soak under tracemalloc
def test_a_full_window_costs_under_200_bytes_an_id_and_stops_growing() -> None:
    """The soak's sender: once its 10,000 ids are remembered, more messages cost nothing."""
    ulids = UlidGenerator()
    tracemalloc.start()
    try:
        base = _traced_bytes(MessageIds(cap=200_000))
        ids = MessageIds(cap=200_000)
        sizes = []
        for i in range(40_000):  # the id strings are made while tracing, as the router's are
            ts = T0 + 20 * i
            ids.add(MessageRef(ulids.new(ts), "sender", "#general", i + 1, ts))
            if i + 1 in (10_000, 40_000):
                sizes.append(_traced_bytes(ids) - base)
    finally:
        tracemalloc.stop()
    full, later = sizes
    assert full / 10_000 < 200, f"{full / 10_000:.0f} bytes per id"
    assert later / 10_000 < 200, f"{later / 10_000:.0f} bytes per id after 40,000 messages"


def test_ids_are_per_sender_and_a_reuse_replaces_its_senders_record() -> None:
    """A restarted MEW client counts from 1 again; another sender may use the same id."""
    ids = MessageIds(cap=1000)
    first = MessageRef("ts-agent-1", "agent", "#general", 1, T0, digest=7)
    other = MessageRef("ts-agent-1", "bob", "#general", 2, T0 + 1)
    again = MessageRef("ts-agent-1", "agent", "#general", 3, T0 + 2)
    ids.add(first)
    ids.add(other)
    assert ids.get("agent", "ts-agent-1") == first and ids.get("bob", "ts-agent-1") == other
    assert ids.latest("ts-agent-1") == other
    ids.add(again)
    assert ids.get("agent", "ts-agent-1") == again and ids.latest("ts-agent-1") == again
    assert ids.get("bob", "ts-agent-1") == other and len(ids) == 2
    assert ids.get("carol", "ts-agent-1") is None


def test_a_reused_id_outlives_the_entry_it_replaced() -> None:
    ids = MessageIds(cap=1000, per_sender=3)
    ids.add(_ref(0))
    ids.add(MessageRef("m-0", "alice", "#general", 50, T0 + 5))  # reused at once
    for i in range(1, 3):
        ids.add(_ref(i, ts=T0 + 10 + i))
    # the first m-0's entry left alice's window; its replacement is still remembered
    assert ids.latest("m-0") == MessageRef("m-0", "alice", "#general", 50, T0 + 5)
    ids.add(_ref(3, ts=T0 + 20))
    assert ids.latest("m-0") is None and len(ids) == 3


def test_the_store_is_pruned_to_the_window_each_minute_and_each_tenth_of_the_cap() -> None:
    """``prune_due`` names how far the store's records may go: those older than the oldest
    id still in the window, so a resend the window answers is answered after a restart too."""
    ids = MessageIds(cap=1000, window_ms=60_000)
    assert ids.prune_due(T0) == T0 - 60_000  # nothing held: the window's edge
    for i in range(99):
        ids.add(_ref(i, ts=T0 + i))
        assert ids.prune_due(T0 + i) is None  # under a tenth of the cap, within a minute
    ids.add(_ref(99, ts=T0 + 99))
    assert ids.prune_due(T0 + 99) == T0  # the 100th id: everything before m-0 may go
    for i in range(100, 1500):
        ids.add(_ref(i, ts=T0 + i))
    assert ids.prune_due(T0 + 1499) == T0 + 500  # the cap: m-500 is the oldest id kept
    ids.add(_ref(1500, ts=T0 + 30_000))
    assert ids.prune_due(T0 + 30_000) is None
    assert ids.prune_due(T0 + 1499 + 60_000) == T0 + 501  # a minute later, whatever came in
    ids.add(_ref(1501, ts=T0 + 200_000))  # the window is a minute: all older ids leave it
    assert len(ids) == 1
    assert ids.prune_due(T0 + 200_000) == T0 + 200_000


def test_a_resend_window_under_a_minute_is_refused_naming_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"limits\.idempotency_window_s must be at least 60"):
        Limits(idempotency_window_s=5).validate()
