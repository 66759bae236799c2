"""The callback engine (document 001): limits, firing at due, offline drop, grace, restore."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from hubbub.engines.callbacks import Callback, CallbackEngine, CallbackRejected, Fired
from hubbub.engines.timers import TimerQueue
from tests.strength import examples

NOW = 1_000_000


def make(**kw: float) -> tuple[TimerQueue, CallbackEngine]:
    timers = TimerQueue()
    return timers, CallbackEngine(timers, scope="sp", **kw)  # type: ignore[arg-type]


@dataclass
class Run:
    """The outcome of running the timers up to some time, as the gateway does."""

    fired: list[Fired]
    collected: list[Callback]


def run(timers: TimerQueue, engine: CallbackEngine, now: float) -> Run:
    """Pop every due key and hand it to the engine (the gateway's timer loop)."""
    out = Run([], [])
    for key in timers.pop_due(now):
        _, kind, ident = key  # type: ignore[misc]
        if kind == "cb":
            fired = engine.fire(ident)
            if fired is not None:
                out.fired.append(fired)
        else:
            assert kind == "cb-gc"
            out.collected.extend(engine.collect(ident))
    return out


# ---------------------------------------------------------------------------- scheduling


def test_schedule_dm_and_channel_callbacks() -> None:
    timers, eng = make()
    dm = eng.schedule(NOW, "c1", "a1", 2.5, "check")
    ch = eng.schedule(NOW, "c2", "a1", 1, "standup", "#ops")
    assert dm == Callback("c1", "a1", "check", NOW + 2_500, NOW, None)
    assert ch == Callback("c2", "a1", "standup", NOW + 1_000, NOW, "#ops")
    assert len(eng) == 2 and eng.count("a1") == 2 and eng.count("a2") == 0
    assert eng.pending() == [ch, dm]  # soonest first
    assert eng.pending("a1") == [ch, dm]
    assert eng.pending("a2") == []
    assert timers.due_at(eng.timer_key("c1")) == NOW + 2_500
    assert eng.timer_key("c1") == ("sp", "cb", "c1")


@pytest.mark.parametrize(
    ("seconds", "delay_ms"),
    [
        (0, 0),
        (-0.0, 0),
        (0.001, 1),
        (3600, 3_600_000),
        (3600.5, 3_600_000),
        (1e9, 3_600_000),
        (1e300, 3_600_000),
        (float("inf"), 3_600_000),
    ],
)
def test_duration_clamped(seconds: float, delay_ms: float) -> None:
    _, eng = make()
    cb = eng.schedule(NOW, "c", "a1", seconds, "x")
    assert cb.due_ms == NOW + delay_ms


@pytest.mark.parametrize("seconds", [float("nan"), -5, -0.001, float("-inf")])
def test_a_nan_or_negative_delay_is_refused(seconds: float) -> None:
    _, eng = make()
    with pytest.raises(CallbackRejected, match="duration must be"):
        eng.schedule(NOW, "c", "a1", seconds, "x")
    assert len(eng) == 0


def test_clamp_honours_configured_maximum() -> None:
    _, eng = make(max_duration_s=10)
    assert eng.clamp(11) == 10
    assert eng.clamp(9.5) == 9.5
    assert eng.clamp(float("inf")) == 10
    assert eng.schedule(NOW, "c", "a1", 60, "x").due_ms == NOW + 10_000


@pytest.mark.parametrize(
    ("payload", "ok"),
    [
        ("a" * 500, True),
        ("a" * 501, False),
        ("é" * 250, True),  # 2 bytes each: exactly 500 bytes
        ("é" * 250 + "a", False),
        ("€" * 166, True),  # 3 bytes each: 498
        ("€" * 167, False),  # 501 bytes although only 167 characters
        ("🙂" * 125, True),  # 4 bytes each: 500
        ("🙂" * 126, False),
        ("", True),
    ],
)
def test_payload_limit_counts_utf8_bytes(payload: str, ok: bool) -> None:
    timers, eng = make()
    if ok:
        eng.schedule(NOW, "c", "a1", 1, payload)
        assert len(eng) == 1
        return
    with pytest.raises(CallbackRejected, match=r"bytes.*AGENTCHAT_CB_MAX_PAYLOAD"):
        eng.schedule(NOW, "c", "a1", 1, payload)
    assert len(eng) == 0 and len(timers) == 0


def test_payload_limit_is_configurable() -> None:
    _, eng = make(max_payload=4)
    eng.schedule(NOW, "c1", "a1", 1, "éé")
    with pytest.raises(CallbackRejected, match="limit of 4 bytes"):
        eng.schedule(NOW, "c2", "a1", 1, "ééa")


def test_pending_limit_per_agent() -> None:
    timers, eng = make(max_per_agent=3)
    for i in range(3):
        eng.schedule(NOW, f"a{i}", "a1", 10 + i, "x")
    with pytest.raises(CallbackRejected, match=r"3 pending.*AGENTCHAT_CB_MAX_PER_AGENT"):
        eng.schedule(NOW, "a3", "a1", 1, "x")
    assert eng.count("a1") == 3 and len(timers) == 3
    eng.schedule(NOW, "b0", "a2", 100, "x")  # another agent has its own allowance
    # once one fires, there is room again
    assert [f.callback.id for f in run(timers, eng, NOW + 10_000).fired] == ["a0"]
    eng.schedule(NOW + 10_000, "a3", "a1", 1, "x")
    assert eng.count("a1") == 3


def test_default_limits_match_the_document() -> None:
    _, eng = make()
    assert (eng.max_duration_s, eng.max_per_agent, eng.max_payload, eng.grace_s) == (
        3600,
        50,
        500,
        30,
    )
    for i in range(50):
        eng.schedule(NOW, f"c{i}", "a1", 1, "x")
    with pytest.raises(CallbackRejected):
        eng.schedule(NOW, "c50", "a1", 1, "x")


@given(
    st.lists(st.tuples(st.integers(0, 30), st.floats(0, 3600, allow_nan=False)), max_size=200),
    st.integers(1, 40),
    st.integers(1, 8),
)
def test_no_schedule_passes_the_per_space_and_per_agent_caps(
    requests: list[tuple[int, float]], per_space: int, per_agent: int
) -> None:
    """Issue 21 item 10: throw-away origins cannot pile up callbacks past the space's cap."""
    timers, eng = make(max_per_space=per_space, max_per_agent=per_agent)
    for n, (origin, seconds) in enumerate(requests):
        full = len(eng) >= per_space or eng.count(f"o{origin}") >= per_agent
        try:
            eng.schedule(NOW, f"c{n}", f"o{origin}", seconds, "x")
        except CallbackRejected as exc:
            assert full
            mine = eng.count(f"o{origin}") >= per_agent  # the participant's own limit first
            assert ("PER_AGENT" if mine else "AGENTCHAT_CB_MAX_PER_SPACE") in str(exc)
        else:
            assert not full
        assert len(eng) <= per_space and len(timers) == len(eng)


def test_the_space_cap_is_named_and_frees_as_callbacks_fire() -> None:
    timers, eng = make(max_per_space=2)
    eng.schedule(NOW, "a", "x1", 1, "p")
    eng.schedule(NOW, "b", "x2", 5, "p")
    with pytest.raises(CallbackRejected, match=r"space already holds 2 pending callbacks"):
        eng.schedule(NOW, "c", "x3", 1, "p")
    run(timers, eng, NOW + 1_000)
    eng.schedule(NOW + 1_000, "c", "x3", 1, "p")
    assert len(eng) == 2


# ---------------------------------------------------------------------------- firing


def test_fires_at_due_time_not_before() -> None:
    timers, eng = make()
    eng.schedule(NOW, "late", "a1", 3, "third")
    eng.schedule(NOW, "early", "a1", 1.5, "first")
    eng.schedule(NOW, "mid", "a2", 2, "second", "#ops")
    assert timers.next_due() == NOW + 1_500
    assert run(timers, eng, NOW + 1_499).fired == []
    r = run(timers, eng, NOW + 1_500)
    assert r.fired == [Fired(Callback("early", "a1", "first", NOW + 1_500, NOW))]
    assert timers.next_due() == NOW + 2_000
    r = run(timers, eng, NOW + 10_000)
    assert [(f.callback.id, f.dropped) for f in r.fired] == [("mid", None), ("late", None)]
    assert r.fired[0].callback.channel == "#ops"
    assert len(eng) == 0 and len(timers) == 0
    assert eng.fire("early") is None  # never twice


def test_zero_delay_fires_on_the_next_run() -> None:
    timers, eng = make()
    eng.schedule(NOW, "c", "a1", 0, "now")
    assert [f.callback.id for f in run(timers, eng, NOW).fired] == ["c"]


def test_fire_unknown_is_none() -> None:
    _, eng = make()
    assert eng.fire("nope") is None


# ---------------------------------------------------------------------------- offline / grace


def test_offline_origin_callback_dropped_within_grace() -> None:
    timers, eng = make(grace_s=30)
    eng.schedule(NOW, "c1", "a1", 5, "x")
    eng.schedule(NOW, "c2", "a2", 5, "y")
    eng.disconnected(NOW + 1_000, "a1")
    r = run(timers, eng, NOW + 5_000)
    assert sorted((f.callback.id, f.dropped) for f in r.fired) == [
        ("c1", "offline"),
        ("c2", None),
    ]
    assert r.collected == []
    assert len(eng) == 0
    assert len(timers) == 0  # the grace timer went with the last callback


def test_reconnect_within_grace_keeps_callbacks() -> None:
    timers, eng = make(grace_s=30)
    eng.schedule(NOW, "c1", "a1", 100, "x")
    eng.schedule(NOW, "c2", "a1", 200, "y")
    eng.disconnected(NOW, "a1")
    assert timers.due_at(eng.gc_key("a1")) == NOW + 30_000
    assert run(timers, eng, NOW + 29_999) == Run([], [])
    assert eng.connected(NOW + 29_999, "a1") == []  # nothing held after an ordinary disconnect
    assert eng.gc_key("a1") not in timers
    assert run(timers, eng, NOW + 99_999) == Run([], [])
    assert eng.count("a1") == 2
    r = run(timers, eng, NOW + 200_000)
    assert [(f.callback.id, f.dropped) for f in r.fired] == [("c1", None), ("c2", None)]


def test_after_grace_callbacks_are_collected() -> None:
    timers, eng = make(grace_s=30)
    eng.schedule(NOW, "c1", "a1", 100, "x")
    eng.schedule(NOW, "c2", "a1", 200, "y")
    eng.schedule(NOW, "c3", "a2", 100, "z")
    eng.disconnected(NOW + 10, "a1")
    r = run(timers, eng, NOW + 30_010)
    assert r.fired == []
    assert [c.id for c in r.collected] == ["c1", "c2"]
    assert eng.count("a1") == 0 and eng.count("a2") == 1
    assert eng.timer_key("c1") not in timers and eng.timer_key("c2") not in timers
    assert [f.callback.id for f in run(timers, eng, NOW + 10**9).fired] == ["c3"]


def test_collect_of_online_origin_does_nothing() -> None:
    _, eng = make()
    eng.schedule(NOW, "c1", "a1", 100, "x")
    assert eng.collect("a1") == []
    eng.disconnected(NOW, "a1")
    assert eng.connected(NOW, "a1") == []
    assert eng.collect("a1") == []  # a stale grace end after a reconnect
    assert eng.count("a1") == 1


def test_disconnect_without_callbacks_arms_nothing() -> None:
    timers, eng = make()
    eng.disconnected(NOW, "a1")
    assert len(timers) == 0


def test_second_disconnect_restarts_the_grace_window() -> None:
    timers, eng = make(grace_s=30)
    eng.schedule(NOW, "c1", "a1", 1_000, "x")
    eng.disconnected(NOW, "a1")
    assert eng.connected(NOW + 10_000, "a1") == []
    eng.disconnected(NOW + 20_000, "a1")
    assert run(timers, eng, NOW + 30_000).collected == []
    assert [c.id for c in run(timers, eng, NOW + 50_000).collected] == ["c1"]


# ---------------------------------------------------------------------------- restart


def test_restore_after_restart() -> None:
    _, eng = make(grace_s=30)
    eng.schedule(NOW, "c1", "a1", 60, "one")
    eng.schedule(NOW, "c2", "a2", 60, "two", "#ops")
    eng.schedule(NOW, "c3", "a3", 5, "three")
    saved = eng.pending()

    later = NOW + 10_000  # the server restarts 10 s later with a fresh queue
    timers2, eng2 = make(grace_s=30)
    eng2.restore(later, saved)
    assert eng2.pending() == saved
    assert timers2.due_at(eng2.timer_key("c1")) == NOW + 60_000  # the original due times
    assert eng2.connected(later, "a1") == []  # a1 comes back within the window: nothing late
    # c3 fell due while the server was down: it waits for a3 instead of being dropped
    assert run(timers2, eng2, later) == Run([], [])
    assert eng2.count("a3") == 1
    r = run(timers2, eng2, later + 30_000)
    assert sorted(c.id for c in r.collected) == ["c2", "c3"]  # a2 and a3 never came back
    r = run(timers2, eng2, NOW + 60_000)
    assert [(f.callback.id, f.dropped) for f in r.fired] == [("c1", None)]
    assert len(eng2) == 0 and len(timers2) == 0


def test_owner_back_within_the_restart_window_gets_late_callbacks_in_due_order() -> None:
    _, eng = make(grace_s=30)
    eng.schedule(NOW, "c1", "a1", 20, "second")
    eng.schedule(NOW, "c2", "a1", 10, "first")
    eng.schedule(NOW, "c3", "a1", 50, "during the window")
    eng.schedule(NOW, "c4", "a1", 90, "after the window")
    eng.schedule(NOW, "c5", "a2", 5, "other owner")
    restart = NOW + 40_000  # the gateway was down from NOW to 40 s later
    timers, eng2 = make(grace_s=30)
    eng2.restore(restart, eng.pending())
    assert run(timers, eng2, restart) == Run([], [])  # c1, c2, c5 wait
    assert run(timers, eng2, NOW + 55_000) == Run([], [])  # c3 fell due: it waits too
    late = eng2.connected(NOW + 60_000, "a1")  # a1 is back 20 s into the window
    assert [c.id for c in late] == ["c2", "c1", "c3"]  # due order
    assert eng2.pending("a1") == [eng.pending("a1")[-1]]  # c4 stays pending, on time
    assert eng2.connected(NOW + 61_000, "a1") == []  # given once
    r = run(timers, eng2, restart + 30_000)
    assert [c.id for c in r.collected] == ["c5"]  # a2 did not come back
    r = run(timers, eng2, NOW + 90_000)
    assert [(f.callback.id, f.dropped) for f in r.fired] == [("c4", None)]
    assert len(eng2) == 0 and len(timers) == 0


def test_an_ordinary_disconnect_after_the_restart_drops_as_before() -> None:
    timers, eng = make(grace_s=30)
    eng.restore(NOW, [Callback("c1", "a1", "x", NOW + 20_000, NOW - 1)])
    assert eng.connected(NOW + 1_000, "a1") == []
    eng.disconnected(NOW + 2_000, "a1")  # the owner, not the gateway, is away now
    r = run(timers, eng, NOW + 20_000)
    assert [(f.callback.id, f.dropped) for f in r.fired] == [("c1", "offline")]
    assert eng.connected(NOW + 21_000, "a1") == []


def test_owner_back_after_the_restart_window_gets_nothing() -> None:
    timers, eng = make(grace_s=30)
    eng.restore(NOW, [Callback("c1", "a1", "x", NOW - 5_000, NOW - 60_000)])
    r = run(timers, eng, NOW + 30_000)
    assert r.fired == [] and [c.id for c in r.collected] == ["c1"]
    assert eng.connected(NOW + 30_001, "a1") == []


def _ms_around(lo_s: int, hi_s: int) -> st.SearchStrategy[int]:
    """Milliseconds on a 5 s grid give or take 1 ms, so that due times, reconnects and the
    window's end often coincide or miss each other by one millisecond; or anywhere between."""
    grid = st.builds(
        lambda k, d: k * 5_000 + d, st.integers(lo_s // 5, hi_s // 5), st.sampled_from([-1, 0, 1])
    )
    return grid | st.integers(lo_s * 1000, hi_s * 1000)


@settings(max_examples=examples(500), deadline=None)
@given(
    restart=st.integers(NOW, NOW + 10**7),
    dues=st.lists(
        st.tuples(st.sampled_from(["a1", "a2", "a3"]), _ms_around(-120, 60)),
        min_size=1,
        max_size=10,
    ),
    back=st.fixed_dictionaries(
        {a: st.none() | _ms_around(0, 45).map(abs) for a in ["a1", "a2", "a3"]}
    ),
    stops=st.lists(_ms_around(0, 90).map(abs), max_size=5),
)
def test_each_restored_callback_is_delivered_or_dropped_exactly_once(
    restart: int, dues: list[tuple[str, int]], back: dict[str, int | None], stops: list[int]
) -> None:
    """For any restart time, due times and reconnect times: an owner back within the window
    gets each callback once, never before it is due (at once when it is already late); an
    owner not back loses each callback once, at the end of the window; never both."""
    grace_ms = 30_000
    saved = [
        Callback(f"c{i}", who, "p", restart + d, restart - 200_000)
        for i, (who, d) in enumerate(dues)
    ]
    timers, eng = make(grace_s=grace_ms / 1000)
    eng.restore(restart, saved)
    delivered: dict[str, list[float]] = {cb.id: [] for cb in saved}
    dropped: dict[str, list[float]] = {cb.id: [] for cb in saved}
    returns = [(restart + b, who) for who, b in back.items() if b is not None]
    times = {restart, restart + grace_ms, restart + 200_000, *(at for at, _ in returns)}
    times |= {restart + t for t in stops} | {cb.due_ms for cb in saved if cb.due_ms > restart}
    for t in sorted(times):
        r = run(timers, eng, t)
        for f in r.fired:
            (dropped if f.dropped else delivered)[f.callback.id].append(t)
        for cb in r.collected:
            dropped[cb.id].append(t)
        for at, who in returns:
            if at == t:
                late = eng.connected(t, who)
                assert all(c.origin == who and c.due_ms <= t for c in late)
                assert late == sorted(late, key=lambda c: (c.due_ms, c.id))
                for cb in late:
                    delivered[cb.id].append(t)
    for cb in saved:
        b = back[cb.origin]
        if b is not None and b < grace_ms:
            assert delivered[cb.id] == [max(cb.due_ms, restart + b)], cb
            assert dropped[cb.id] == [], cb
        else:
            assert dropped[cb.id] == [restart + grace_ms], cb
            assert delivered[cb.id] == [], cb
    assert len(eng) == 0 and len(timers) == 0


# ---------------------------------------------------------------------------- property

AGENTS = ["a1", "a2", "a3"]
GRACE_S = 5
MAX_S = 20


class CallbackModel(RuleBasedStateMachine):
    """Every scheduled callback ends exactly once, across disconnects and restarts: delivered
    (on time, or late to an owner back within a restart's window), dropped offline, or
    collected."""

    def __init__(self) -> None:
        super().__init__()
        self.now = NOW
        self.timers, self.eng = self.fresh_engine()
        self.online = set(AGENTS)
        self.offline_since: dict[str, float] = {}
        self.restarted: set[str] = set()
        """Offline since the last restart (not reconnected since): due callbacks wait."""
        self.scheduled: dict[str, Callback] = {}
        self.ends: dict[str, list[str]] = {}
        self.n = 0

    @staticmethod
    def fresh_engine() -> tuple[TimerQueue, CallbackEngine]:
        timers = TimerQueue()
        eng = CallbackEngine(
            timers, max_duration_s=MAX_S, max_per_agent=4, max_payload=8, grace_s=GRACE_S
        )
        return timers, eng

    def pending_of(self, who: str) -> int:
        return sum(1 for i, cb in self.scheduled.items() if cb.origin == who and not self.ends[i])

    @precondition(lambda self: bool(self.online))
    @rule(
        data=st.data(),
        seconds=st.integers(0, MAX_S + 5) | st.floats(0, 3) | st.just(1e300),
        payload=st.text(max_size=6),
        channel=st.none() | st.just("#ops"),
    )
    def schedule(
        self, data: st.DataObject, seconds: float, payload: str, channel: str | None
    ) -> None:
        who = data.draw(st.sampled_from(sorted(self.online)))
        self.n += 1
        cb_id = f"cb{self.n}"
        over = len(payload.encode()) > 8 or self.pending_of(who) >= 4
        try:
            cb = self.eng.schedule(self.now, cb_id, who, seconds, payload, channel)
        except CallbackRejected:
            assert over
            return
        assert not over
        assert cb.due_ms == self.now + min(max(seconds, 0), MAX_S) * 1000
        self.scheduled[cb_id] = cb
        self.ends[cb_id] = []

    @precondition(lambda self: bool(self.online))
    @rule(data=st.data())
    def disconnect(self, data: st.DataObject) -> None:
        who = data.draw(st.sampled_from(sorted(self.online)))
        self.online.discard(who)
        self.offline_since[who] = self.now
        self.eng.disconnected(self.now, who)

    @precondition(lambda self: len(self.online) < len(AGENTS))
    @rule(data=st.data())
    def connect(self, data: st.DataObject) -> None:
        who = data.draw(st.sampled_from(sorted(set(AGENTS) - self.online)))
        self.online.add(who)
        del self.offline_since[who]
        before = self.pending_of(who)
        expected = sorted(
            (
                cb
                for i, cb in self.scheduled.items()
                if cb.origin == who and not self.ends[i] and cb.due_ms <= self.now
            ),
            key=lambda c: (c.due_ms, c.id),
        )
        late = self.eng.connected(self.now, who)
        if who in self.restarted:  # back within a restart's window: the late ones, in order
            self.restarted.discard(who)
            assert late == expected
        else:  # an ordinary reconnect: nothing was held
            assert late == []
        for cb in late:
            self.ends[cb.id].append("delivered late")
        assert self.eng.count(who) == before - len(late)  # and keeps every other callback

    @rule()
    def restart(self) -> None:
        """The gateway restarts: a fresh engine restores the pending callbacks."""
        saved = self.eng.pending()
        self.timers, self.eng = self.fresh_engine()
        self.eng.restore(self.now, saved)
        self.online.clear()
        self.offline_since = dict.fromkeys(AGENTS, self.now)
        self.restarted = set(AGENTS)

    @rule(who=st.sampled_from(AGENTS))
    def stray_collect(self, who: str) -> None:
        """A grace end for an origin that is online collects nothing."""
        if who in self.online:
            assert self.eng.collect(who) == []

    @rule(dt=st.integers(0, 8_000) | st.sampled_from([1, 999, 1_000, 1_001, GRACE_S * 1000]))
    def advance(self, dt: int) -> None:
        self.now += dt
        for key in self.timers.pop_due(self.now):
            _, kind, ident = key  # type: ignore[misc]
            if kind == "cb":
                fired = self.eng.fire(ident)
                if fired is None:
                    if ident in self.scheduled and not self.ends[ident]:  # held, not lost
                        assert self.scheduled[ident].origin in self.restarted
                    continue
                cb = fired.callback
                assert cb == self.scheduled[ident]
                assert cb.due_ms <= self.now
                if fired.dropped is None:
                    assert cb.origin in self.online, "delivered to an offline origin"
                    self.ends[ident].append("delivered")
                else:
                    assert fired.dropped == "offline"
                    assert cb.origin not in self.online
                    assert cb.origin not in self.restarted, "dropped while the gateway was away"
                    self.ends[ident].append("offline")
            else:
                assert kind == "cb-gc"
                assert ident not in self.online
                assert self.now >= self.offline_since[ident] + GRACE_S * 1000
                for cb in self.eng.collect(ident):
                    assert cb.origin == ident
                    self.ends[cb.id].append("collected")
        # nothing overdue is left behind: due callbacks ended (or wait for an owner away since
        # a restart), expired grace windows collected
        for cb in self.eng.pending():
            assert cb.due_ms > self.now or cb.origin in self.restarted
            since = self.offline_since.get(cb.origin)
            assert since is None or self.now < since + GRACE_S * 1000

    @invariant()
    def each_callback_ends_at_most_once(self) -> None:
        for i, ends in self.ends.items():
            assert len(ends) <= 1, f"{i} ended {ends}"
        waiting = {i for i, ends in self.ends.items() if not ends}
        assert {cb.id for cb in self.eng.pending()} == waiting
        for who in AGENTS:
            assert self.eng.count(who) == self.pending_of(who)

    def teardown(self) -> None:
        self.advance((MAX_S + GRACE_S) * 1000 + 1)
        for i, ends in self.ends.items():
            assert len(ends) == 1, f"{i} ended {ends}"
        assert len(self.eng) == 0 and len(self.timers) == 0


TestCallbackModel = CallbackModel.TestCase
TestCallbackModel.settings = settings(max_examples=examples(100), deadline=None)


def test_a_stranded_owner_keeps_callbacks_that_fall_due_until_it_is_back() -> None:
    """A cluster node died under the owner: like a restart, nothing falls due into the void."""
    timers, eng = make(grace_s=30)
    eng.schedule(NOW, "c1", "a1", 5, "due while stranded")
    eng.schedule(NOW, "c2", "a1", 60, "due after the return")
    eng.stranded(NOW + 1_000, "a1")
    assert run(timers, eng, NOW + 10_000) == Run([], [])  # c1 fell due: it waits
    late = eng.connected(NOW + 12_000, "a1")
    assert [c.id for c in late] == ["c1"]
    r = run(timers, eng, NOW + 60_000)
    assert [(f.callback.id, f.dropped) for f in r.fired] == [("c2", None)]


def test_a_stranded_owner_that_never_returns_is_collected_after_the_window() -> None:
    timers, eng = make(grace_s=30)
    eng.schedule(NOW, "c1", "a1", 5, "x")
    eng.stranded(NOW, "a1")
    r = run(timers, eng, NOW + 31_000)
    assert [c.id for c in r.collected] == ["c1"]
    assert len(eng) == 0 and len(timers) == 0
