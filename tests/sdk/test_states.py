"""The client's connection-state table, edge by edge, and the reconnect schedule."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hubbub.sdk.reconnect import backoff_delay
from hubbub.sdk.states import (
    TRANSITIONS,
    ConnectionState,
    Event,
    IllegalTransition,
    State,
)

ALL_PAIRS = list(itertools.product(State, Event))
LEGAL = [pair for pair in ALL_PAIRS if pair in TRANSITIONS]
ILLEGAL = [pair for pair in ALL_PAIRS if pair not in TRANSITIONS]


@pytest.mark.parametrize(("state", "event"), LEGAL, ids=lambda x: str(x))
def test_every_legal_edge_moves_to_its_target(state: State, event: Event) -> None:
    machine = ConnectionState(state)
    assert machine.handle(event) is TRANSITIONS[(state, event)]
    assert machine.state is TRANSITIONS[(state, event)]


@pytest.mark.parametrize(("state", "event"), ILLEGAL, ids=lambda x: str(x))
def test_every_illegal_edge_is_refused_and_changes_nothing(state: State, event: Event) -> None:
    machine = ConnectionState(state)
    with pytest.raises(IllegalTransition, match=f"{event.value!r} is not allowed in state"):
        machine.handle(event)
    assert machine.state is state


def test_the_table_is_the_documented_path() -> None:
    path = [Event.DIAL, Event.OPENED, Event.JOIN_SENT, Event.WELCOMED]
    machine = ConnectionState()
    seen = [machine.state]
    for event in path:
        seen.append(machine.handle(event))
    assert seen == [
        State.DISCONNECTED,
        State.CONNECTING,
        State.CONNECTED,
        State.JOINED,
        State.READY,
    ]
    # every state but DISCONNECTED can lose its socket, and that always leads back
    for state in State:
        if state is not State.DISCONNECTED:
            assert TRANSITIONS[(state, Event.CLOSED)] is State.DISCONNECTED
    assert len(TRANSITIONS) == 8


@given(st.lists(st.sampled_from(list(Event)), max_size=60))
def test_ready_only_after_the_full_handshake_since_the_last_close(events: list[Event]) -> None:
    machine = ConnectionState()
    since_close: list[Event] = []
    for event in events:
        before = machine.state
        try:
            after = machine.handle(event)
        except IllegalTransition:
            assert machine.state is before
            continue
        since_close = [] if event is Event.CLOSED else [*since_close, event]
        assert after is TRANSITIONS[(before, event)]
        if after is State.READY:
            assert since_close == [Event.DIAL, Event.OPENED, Event.JOIN_SENT, Event.WELCOMED]
        if event is Event.CLOSED:
            assert after is State.DISCONNECTED


@given(
    attempt=st.integers(1, 200),
    base=st.floats(0.001, 10),
    cap=st.floats(0.001, 120),
    jitter=st.floats(0, 1),
    rand=st.floats(0, 1),
)
def test_backoff_stays_within_its_bounds(
    attempt: int, base: float, cap: float, jitter: float, rand: float
) -> None:
    plain = min(cap, base * 2.0 ** min(attempt - 1, 62))
    delay = backoff_delay(attempt, base, cap, jitter, rand)
    assert delay <= plain * (1 + 1e-12)
    assert delay >= plain * (1 - jitter) * (1 - 1e-12)
    assert delay <= cap * (1 + 1e-12)
    assert delay >= 0


@given(attempt=st.integers(1, 100), base=st.floats(0.001, 5), cap=st.floats(5, 60))
def test_backoff_without_jitter_doubles_up_to_the_cap(
    attempt: int, base: float, cap: float
) -> None:
    now = backoff_delay(attempt, base, cap, 0.0, 0.5)
    after = backoff_delay(attempt + 1, base, cap, 0.0, 0.5)
    assert after >= now
    assert after == pytest.approx(min(cap, now * 2)) or now == pytest.approx(cap)
    assert backoff_delay(1, base, cap, 0.0, 0.9) == pytest.approx(min(base, cap))


def test_backoff_counts_attempts_from_one() -> None:
    with pytest.raises(ValueError, match="from 1"):
        backoff_delay(0, 1, 10, 0.5, 0.5)
