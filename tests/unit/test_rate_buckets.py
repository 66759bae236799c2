"""Rate buckets per participant: the same bucket comes back, memory stays bounded."""

from __future__ import annotations

from hubbub.server.state.space import RateBuckets

SLOW = 0.001
"""Refill rate low enough that a spent bucket stays spent for the whole test."""


def test_the_same_participant_gets_the_same_bucket() -> None:
    rates = RateBuckets(SLOW, 2)
    first = rates.get("s", "bot")
    assert first.take() and first.take() and not first.take()
    assert rates.get("s", "bot") is first
    assert rates.get("t", "bot") is not first  # another space, another participant
    assert not rates.get("s", "bot").take()


def test_full_buckets_go_first_when_memory_is_full() -> None:
    rates = RateBuckets(SLOW, 1, max_entries=8)
    for n in range(8):
        bucket = rates.get("s", f"p{n}")
        if n % 2:
            bucket.take()  # spent: must be kept
    rates.get("s", "new")
    assert len(rates) == 5
    for n in (1, 3, 5, 7):
        assert not rates.get("s", f"p{n}").take(), "a spent bucket was dropped"


def test_past_the_bound_the_oldest_spent_buckets_go() -> None:
    rates = RateBuckets(SLOW, 1, max_entries=8)
    for n in range(8):
        rates.get("s", f"p{n}").take()
    rates.get("s", "new")
    assert len(rates) == 7  # 3/4 of the bound kept, then the new one
    assert not rates.get("s", "p7").take()  # the newest spent ones are kept
    assert rates.get("s", "p0").take()  # the oldest was dropped: a new, full bucket


def test_a_bucket_spends_a_cost_or_nothing() -> None:
    """A byte allowance: a frame costs its size; one that does not fit spends nothing."""
    bucket = RateBuckets(SLOW, 4096).get("s", "writer")
    assert bucket.take(4000)
    assert not bucket.take(200)  # 96 left: refused, nothing spent
    assert bucket.take(96) and not bucket.take(1)
