"""The shared timer queue: a min-heap of due times keyed by any hashable."""

from __future__ import annotations

from collections.abc import Hashable

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from hubbub.engines.timers import TimerQueue
from tests.strength import examples


def test_empty_queue() -> None:
    q = TimerQueue()
    assert len(q) == 0
    assert q.next_due() is None
    assert q.pop_due(10**12) == []
    assert q.due_at("x") is None
    assert "x" not in q
    assert q.cancel("x") is False


def test_pop_due_returns_due_keys_earliest_first() -> None:
    q = TimerQueue()
    q.arm("c", 30)
    q.arm("a", 10)
    q.arm("b", 20)
    q.arm("d", 40)
    assert q.next_due() == 10
    assert q.pop_due(9.999) == []
    assert q.pop_due(30) == ["a", "b", "c"]  # due exactly now counts
    assert len(q) == 1
    assert q.next_due() == 40
    assert q.pop_due(30) == []  # each key is returned once
    assert q.pop_due(1000) == ["d"]
    assert q.next_due() is None


def test_rearm_replaces_due_time() -> None:
    q = TimerQueue()
    q.arm("k", 10)
    q.arm("k", 50)
    assert len(q) == 1
    assert q.due_at("k") == 50
    assert q.next_due() == 50
    assert q.pop_due(20) == []  # the stale earlier arming does not fire
    assert q.pop_due(50) == ["k"]
    assert q.pop_due(10**6) == []


def test_rearm_earlier() -> None:
    q = TimerQueue()
    q.arm("k", 50)
    q.arm("k", 10)
    assert q.next_due() == 10
    assert q.pop_due(10) == ["k"]
    assert q.pop_due(100) == []  # the stale later arming does not fire either
    assert len(q) == 0


def test_cancel() -> None:
    q = TimerQueue()
    q.arm("a", 10)
    q.arm("b", 20)
    assert q.cancel("a") is True
    assert q.cancel("a") is False
    assert "a" not in q and "b" in q
    assert q.next_due() == 20
    assert q.pop_due(100) == ["b"]


def test_cancel_then_rearm_same_time() -> None:
    q = TimerQueue()
    q.arm("a", 10)
    q.cancel("a")
    q.arm("a", 10)
    assert q.pop_due(10) == ["a"]  # once, although two heap entries carry the same time
    assert q.pop_due(10) == []


def test_keys_of_mixed_types_never_compared() -> None:
    q = TimerQueue()
    keys: list[Hashable] = [("s", "cb", "1"), "plain", 7, ("s", "wake", "x"), frozenset({1})]
    for k in keys:
        q.arm(k, 5)  # equal due times: the heap must not compare the keys themselves
    assert sorted(map(repr, q.pop_due(5))) == sorted(map(repr, keys))


def test_many_rearms_stay_correct_and_bounded() -> None:
    q = TimerQueue()
    for i in range(10_000):
        q.arm("hot", i)
    q.arm("cold", 5_000.5)
    assert len(q) == 2
    assert len(q._heap) <= 2 * len(q) + 65  # stale entries are compacted away
    assert q.next_due() == 5_000.5
    assert q.pop_due(9_998) == ["cold"]
    assert q.pop_due(9_999) == ["hot"]


# ---------------------------------------------------------------------------- model check

_KEYS: list[Hashable] = ["a", "b", ("s", "cb", "1"), ("s", "wake", "p"), 3]


class TimerModel(RuleBasedStateMachine):
    """The queue against a dict of key → due time."""

    def __init__(self) -> None:
        super().__init__()
        self.q = TimerQueue()
        self.model: dict[Hashable, float] = {}

    @rule(key=st.sampled_from(_KEYS), due=st.integers(0, 100) | st.floats(0, 100))
    def arm(self, key: Hashable, due: float) -> None:
        self.q.arm(key, due)
        self.model[key] = due

    @rule(key=st.sampled_from(_KEYS))
    def cancel(self, key: Hashable) -> None:
        assert self.q.cancel(key) == (key in self.model)
        self.model.pop(key, None)

    @rule(now=st.integers(-1, 110) | st.floats(-1, 110))
    def pop_due(self, now: float) -> None:
        got = self.q.pop_due(now)
        expected = {k for k, due in self.model.items() if due <= now}
        assert len(got) == len(set(map(repr, got)))  # each key once
        assert {repr(k) for k in got} == {repr(k) for k in expected}
        dues = [self.model[k] for k in got]
        assert dues == sorted(dues)  # earliest first
        for k in expected:
            del self.model[k]

    @precondition(lambda self: bool(self.model))
    @rule()
    def pop_earliest(self) -> None:
        due = self.q.next_due()
        assert due is not None
        got = self.q.pop_due(due)
        assert got
        assert all(self.model.pop(k) == due for k in got)

    @rule()
    def next_due(self) -> None:
        # a rule, not an invariant: next_due discards stale heap entries, and checking it
        # after every step would hide bugs that only show while stale entries remain
        assert self.q.next_due() == (min(self.model.values()) if self.model else None)

    @invariant()
    def matches_model(self) -> None:
        assert len(self.q) == len(self.model)
        for k in _KEYS:
            assert (k in self.q) == (k in self.model)
            assert self.q.due_at(k) == self.model.get(k)


TestTimerModel = TimerModel.TestCase
TestTimerModel.settings = settings(max_examples=examples(100), deadline=None)
