"""Sleep/wake (document 004): modes, the buffer cap, replacement, clamping, wake and forget."""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from hubbub.engines.sleep import SleepEngine, SleepEntry
from hubbub.engines.timers import TimerQueue
from hubbub.protocol.markers import SLEEP_MODES, SleepMode
from tests.strength import examples

NOW = 1_000_000


def make(**kw: float) -> tuple[TimerQueue, SleepEngine[str]]:
    timers = TimerQueue()
    return timers, SleepEngine[str](timers, scope="sp", **kw)  # type: ignore[arg-type]


def wake_due(timers: TimerQueue, eng: SleepEngine[str], now: float) -> list[SleepEntry[str]]:
    """Pop due wake-ups and wake those sleepers (the gateway's timer loop)."""
    out = []
    for key in timers.pop_due(now):
        _, kind, who = key  # type: ignore[misc]
        assert kind == "wake"
        entry = eng.wake(who)
        assert entry is not None
        out.append(entry)
    return out


# ---------------------------------------------------------------------------- modes


def test_awake_participant_gets_everything() -> None:
    _, eng = make()
    assert eng.verdict("a1", direct=False) == "deliver"
    assert eng.offer("a1", "m", direct=True) == "deliver"
    assert "a1" not in eng and len(eng) == 0


def test_default_mode_drops_channel_buffers_direct() -> None:
    _, eng = make()
    eng.sleep(NOW, "a1", 60)
    assert eng.entry("a1").mode == "default"  # type: ignore[union-attr]
    assert eng.offer("a1", "chan", direct=False) == "drop"
    assert eng.offer("a1", "dm", direct=True) == "buffer"
    assert eng.offer("a1", "mention", direct=True) == "buffer"  # @mentions count as DMs
    assert list(eng.entry("a1").buffer) == ["dm", "mention"]  # type: ignore[union-attr]


def test_buffer_mode_buffers_all() -> None:
    _, eng = make()
    eng.sleep(NOW, "a1", 60, "buffer")
    assert eng.offer("a1", "chan", direct=False) == "buffer"
    assert eng.offer("a1", "dm", direct=True) == "buffer"
    assert list(eng.entry("a1").buffer) == ["chan", "dm"]  # type: ignore[union-attr]


def test_drop_mode_drops_all() -> None:
    _, eng = make()
    eng.sleep(NOW, "a1", 60, "drop")
    assert eng.offer("a1", "chan", direct=False) == "drop"
    assert eng.offer("a1", "dm", direct=True) == "drop"
    entry = eng.entry("a1")
    assert entry is not None and list(entry.buffer) == [] and entry.dropped == 0


def test_sleep_affects_only_the_sleeper() -> None:
    _, eng = make()
    eng.sleep(NOW, "a1", 60, "drop")
    assert eng.offer("a2", "m", direct=False) == "deliver"
    assert eng.sleepers() == [eng.entry("a1")]


# ---------------------------------------------------------------------------- cap


def test_buffer_cap_50_drops_oldest() -> None:
    _, eng = make()
    eng.sleep(NOW, "a1", 60, "buffer")
    for i in range(57):
        assert eng.offer("a1", f"m{i}", direct=i % 2 == 0) == "buffer"
    entry = eng.entry("a1")
    assert entry is not None
    assert list(entry.buffer) == [f"m{i}" for i in range(7, 57)]
    assert entry.dropped == 7


def test_buffer_cap_is_configurable() -> None:
    _, eng = make(max_buffer=2)
    eng.sleep(NOW, "a1", 60)
    for m in ("d1", "d2", "d3"):
        eng.offer("a1", m, direct=True)
    woke = eng.wake("a1")
    assert woke is not None and list(woke.buffer) == ["d2", "d3"] and woke.dropped == 1


# ---------------------------------------------------------------------------- lifecycle


def test_sleep_entry_and_timer() -> None:
    timers, eng = make()
    entry = eng.sleep(NOW, "a1", 2.5, "buffer")
    assert (entry.participant, entry.wake_at, entry.mode, entry.created_ms) == (
        "a1",
        NOW + 2_500,
        "buffer",
        NOW,
    )
    assert eng.timer_key("a1") == ("sp", "wake", "a1")
    assert timers.due_at(eng.timer_key("a1")) == NOW + 2_500


@pytest.mark.parametrize(
    ("seconds", "delay_ms"),
    [
        (0, 0),
        (0.5, 500),
        (3600, 3_600_000),
        (1e7, 3_600_000),
        (1e300, 3_600_000),
        (float("inf"), 3_600_000),
    ],
)
def test_duration_clamped(seconds: float, delay_ms: float) -> None:
    timers, eng = make()
    assert eng.sleep(NOW, "a1", seconds).wake_at == NOW + delay_ms
    assert timers.due_at(eng.timer_key("a1")) == NOW + delay_ms


@pytest.mark.parametrize("seconds", [float("nan"), -3, float("-inf")])
def test_a_nan_or_negative_sleep_is_refused(seconds: float) -> None:
    _, eng = make()
    with pytest.raises(ValueError, match="duration must be"):
        eng.sleep(NOW, "a1", seconds)
    assert "a1" not in eng


def test_clamp_honours_configured_maximum() -> None:
    _, eng = make(max_duration_s=10)
    assert eng.sleep(NOW, "a1", 11).wake_at == NOW + 10_000


def test_wakes_at_due_with_buffer_in_order() -> None:
    timers, eng = make()
    eng.sleep(NOW, "a1", 5)
    eng.sleep(NOW, "a2", 10, "buffer")
    for m in ("first", "second", "third"):
        eng.offer("a1", m, direct=True)
    assert wake_due(timers, eng, NOW + 4_999) == []
    (woke,) = wake_due(timers, eng, NOW + 5_000)
    assert woke.participant == "a1"
    assert list(woke.buffer) == ["first", "second", "third"]
    assert woke.dropped == 0
    assert "a1" not in eng and "a2" in eng
    assert eng.offer("a1", "after", direct=False) == "deliver"
    assert [e.participant for e in wake_due(timers, eng, NOW + 10_000)] == ["a2"]
    assert len(timers) == 0


def test_early_wake_cancels_the_timer() -> None:
    timers, eng = make()
    eng.sleep(NOW, "a1", 60)
    eng.offer("a1", "dm", direct=True)
    woke = eng.wake("a1")  # the sleeper spoke
    assert woke is not None and list(woke.buffer) == ["dm"]
    assert eng.timer_key("a1") not in timers
    assert eng.wake("a1") is None


def test_new_sleep_replaces_and_keeps_buffer() -> None:
    timers, eng = make()
    eng.sleep(NOW, "a1", 60, "buffer")
    eng.offer("a1", "c1", direct=False)
    eng.offer("a1", "d1", direct=True)
    entry = eng.sleep(NOW + 1_000, "a1", 5, "drop")
    assert len(eng) == 1  # one sleep at a time
    assert (entry.mode, entry.wake_at, entry.created_ms) == ("drop", NOW + 6_000, NOW + 1_000)
    assert list(entry.buffer) == ["c1", "d1"]
    assert eng.offer("a1", "d2", direct=True) == "drop"  # the new mode applies
    assert timers.due_at(eng.timer_key("a1")) == NOW + 6_000
    assert wake_due(timers, eng, NOW + 6_000)[0].buffer == deque(["c1", "d1"])
    assert wake_due(timers, eng, NOW + 61_000) == []  # the replaced wake-up never fires


def test_replace_keeps_dropped_count() -> None:
    _, eng = make(max_buffer=1)
    eng.sleep(NOW, "a1", 60, "buffer")
    eng.offer("a1", "x", direct=True)
    eng.offer("a1", "y", direct=True)
    entry = eng.sleep(NOW, "a1", 60, "buffer")
    assert entry.dropped == 1 and list(entry.buffer) == ["y"]
    eng.offer("a1", "z", direct=True)
    assert entry.dropped == 2 and list(entry.buffer) == ["z"]


def test_forget_discards_sleep_and_buffer() -> None:
    timers, eng = make()
    eng.sleep(NOW, "a1", 60, "buffer")
    eng.offer("a1", "m", direct=False)
    assert eng.forget("a1") is True
    assert "a1" not in eng and eng.entry("a1") is None
    assert len(timers) == 0
    assert eng.forget("a1") is False
    # a later sleep starts with an empty buffer
    assert list(eng.sleep(NOW, "a1", 60, "buffer").buffer) == []


def test_sleep_after_wake_starts_fresh() -> None:
    _, eng = make(max_buffer=1)
    eng.sleep(NOW, "a1", 60)
    eng.offer("a1", "a", direct=True)
    eng.offer("a1", "b", direct=True)
    eng.wake("a1")
    entry = eng.sleep(NOW, "a1", 60)
    assert list(entry.buffer) == [] and entry.dropped == 0


# ---------------------------------------------------------------------------- property

PEOPLE = ["a1", "a2"]
CAP = 3


class SleepModel(RuleBasedStateMachine):
    """What a participant receives, against a model of its mode and buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.now = NOW
        self.timers = TimerQueue()
        self.eng: SleepEngine[int] = SleepEngine(self.timers, max_duration_s=60, max_buffer=CAP)
        self.mode: dict[str, SleepMode] = {}
        self.wake_at: dict[str, float] = {}
        self.buffer: dict[str, deque[int]] = {}
        self.dropped: dict[str, int] = {}
        self.received: dict[str, list[int]] = {p: [] for p in PEOPLE}
        self.n = 0

    def woke(self, entry: SleepEntry[int] | None, who: str) -> None:
        assert entry is not None and entry.participant == who
        assert list(entry.buffer) == list(self.buffer[who])  # in order, newest CAP kept
        assert entry.dropped == self.dropped[who]
        assert len(entry.buffer) <= CAP
        self.received[who].extend(entry.buffer)
        for d in (self.mode, self.wake_at, self.buffer, self.dropped):
            del d[who]

    @rule(
        who=st.sampled_from(PEOPLE),
        seconds=st.integers(0, 70) | st.floats(0, 2) | st.just(float("inf")),
        mode=st.sampled_from(SLEEP_MODES),
    )
    def sleep(self, who: str, seconds: float, mode: SleepMode) -> None:
        entry = self.eng.sleep(self.now, who, seconds, mode)
        self.mode[who] = mode
        self.wake_at[who] = self.now + min(max(seconds, 0), 60) * 1000
        self.buffer.setdefault(who, deque(maxlen=CAP))
        self.dropped.setdefault(who, 0)
        assert entry.wake_at == self.wake_at[who]

    @rule(who=st.sampled_from(PEOPLE), direct=st.booleans())
    def message(self, who: str, direct: bool) -> None:
        self.n += 1
        verdict = self.eng.offer(who, self.n, direct=direct)
        mode = self.mode.get(who)
        if mode is None:
            expected = "deliver"
        elif mode == "drop" or (mode == "default" and not direct):
            expected = "drop"
        else:
            expected = "buffer"
        assert verdict == expected
        if verdict == "deliver":
            assert who not in self.mode, "a sleeper received a message before waking"
            self.received[who].append(self.n)
        elif verdict == "buffer":
            if len(self.buffer[who]) == CAP:
                self.dropped[who] += 1
            self.buffer[who].append(self.n)

    @rule(dt=st.integers(0, 30_000))
    def advance(self, dt: int) -> None:
        self.now += dt
        for key in self.timers.pop_due(self.now):
            _, kind, who = key  # type: ignore[misc]
            assert kind == "wake"
            assert self.wake_at[who] <= self.now  # never woken early
            self.woke(self.eng.wake(who), who)
        assert all(due > self.now for due in self.wake_at.values())  # nor late

    @precondition(lambda self: bool(self.mode))
    @rule(data=st.data())
    def speak(self, data: st.DataObject) -> None:
        who = data.draw(st.sampled_from(sorted(self.mode)))
        self.woke(self.eng.wake(who), who)

    @rule(who=st.sampled_from(PEOPLE))
    def disconnect(self, who: str) -> None:
        assert self.eng.forget(who) == (who in self.mode)
        for d in (self.mode, self.wake_at, self.buffer, self.dropped):
            d.pop(who, None)

    @invariant()
    def matches_model(self) -> None:
        assert {e.participant for e in self.eng.sleepers()} == set(self.mode)
        for who in PEOPLE:
            entry = self.eng.entry(who)
            if who not in self.mode:
                assert entry is None
                assert self.eng.timer_key(who) not in self.timers
                continue
            assert entry is not None
            assert entry.mode == self.mode[who]
            assert len(entry.buffer) <= CAP
            assert list(entry.buffer) == list(self.buffer[who])
            assert self.timers.due_at(self.eng.timer_key(who)) == self.wake_at[who]
        for got in self.received.values():
            assert got == sorted(got)  # everything a participant gets arrives in order


TestSleepModel = SleepModel.TestCase
TestSleepModel.settings = settings(max_examples=examples(100), deadline=None)
