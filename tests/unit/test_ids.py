"""Ids: legal participant ids and channels, monotonic ULIDs, timestamps."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hubbub.protocol.ids import (
    Clock,
    UlidGenerator,
    is_channel,
    is_participant_id,
    iso_to_ms,
    ulid_time_ms,
)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("alice", True),
        ("a.b-c_d", True),
        ("x" * 32, True),
        ("x" * 33, False),
        ("", False),
        ("bad/id", False),
        ("bad id", False),
        ("@alice", False),
        (5, False),
    ],
)
def test_participant_ids(value: object, ok: bool) -> None:
    assert is_participant_id(value) is ok


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("#general", True),
        ("#a", True),
        ("#" + "x" * 31, True),
        ("#" + "x" * 32, False),
        ("general", False),
        ("#", False),
        ("#no.dots", False),
        ("#sp ace", False),
    ],
)
def test_channel_names(value: str, ok: bool) -> None:
    assert is_channel(value) is ok


@given(st.lists(st.integers(min_value=1_600_000_000_000, max_value=2_000_000_000_000), min_size=2))
def test_ulids_are_strictly_increasing_even_when_the_clock_goes_back(times: list[int]) -> None:
    gen = UlidGenerator()
    ids = [gen.new(t) for t in times]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert all(len(i) == 26 for i in ids)
    assert ulid_time_ms(ids[0]) == times[0]


@given(st.integers(min_value=0, max_value=4_102_444_800_000))
def test_iso_round_trip(ms: int) -> None:
    assert iso_to_ms(Clock().iso(ms)) == ms


def test_ulids_stay_increasing_when_the_low_random_bits_carry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # random bits that overflow their low 40 bits after two ids in the same millisecond
    start = ((1 << 41) - 2) << 1  # the generator shifts the 80 random bits right by one
    monkeypatch.setattr("hubbub.protocol.ids.os.urandom", lambda n: start.to_bytes(n, "big"))
    gen = UlidGenerator()
    ids = [gen.new(1_764_000_000_000) for _ in range(4)]
    assert ids == sorted(ids) and len(set(ids)) == 4
    assert [i[10:18] != ids[0][10:18] for i in ids] == [False, False, True, True]  # high bits


@given(st.lists(st.integers(min_value=0, max_value=4_102_444_800_000), min_size=1))
def test_one_clock_formats_every_time_as_a_fresh_one_does(times: list[int]) -> None:
    clock = Clock()
    assert [clock.iso(ms) for ms in times] == [Clock().iso(ms) for ms in times]
