"""The listener's rules as pure functions: connection caps, the gate, the accept-error throttle."""

from __future__ import annotations

import pytest

from hubbub.server.config import ConfigError, Limits
from hubbub.server.listener import Caps, ConnectionGate, Throttle, Verdict, connection_caps


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_caps_default_to_well_below_the_fd_limit() -> None:
    for nofile in (1024, 20_000, 1_048_576):
        caps = connection_caps(Limits(), nofile)
        assert caps.total + caps.refusals < nofile - 200
        assert caps.per_ip == caps.total // 2
        assert caps.refusals >= 64
    assert connection_caps(Limits(), 20_000).total > 10_000
    assert connection_caps(Limits(), 64).total >= 16  # tiny limits still serve someone


def test_configured_caps_win() -> None:
    caps = connection_caps(Limits(max_connections=500, max_connections_per_ip=40), 20_000)
    assert caps == Caps(total=500, per_ip=40, refusals=125)
    assert connection_caps(Limits(max_connections=500), 20_000).per_ip == 250


def test_a_per_ip_cap_above_the_total_is_refused() -> None:
    with pytest.raises(ConfigError, match="max_connections_per_ip"):
        Limits(max_connections=10, max_connections_per_ip=20).validate()
    with pytest.raises(ConfigError, match="header_timeout_s"):
        Limits(header_timeout_s=0).validate()


def test_the_gate_serves_refuses_then_drops() -> None:
    gate = ConnectionGate(Caps(total=3, per_ip=2, refusals=1))
    assert gate.admit("a") is Verdict.SERVE
    assert gate.admit("a") is Verdict.SERVE
    assert gate.admit("a") is Verdict.REFUSE_IP  # answered 503, holds the one refusal slot
    assert gate.admit("a") is Verdict.DROP  # no slot left to answer it: closed at accept
    assert gate.admit("b") is Verdict.SERVE  # another address still gets in
    gate.release("a", Verdict.REFUSE_IP)
    assert gate.admit("c") is Verdict.REFUSE_TOTAL
    gate.release("a", Verdict.SERVE)
    gate.release("c", Verdict.REFUSE_TOTAL)
    assert gate.admit("c") is Verdict.SERVE
    gate.release("a", Verdict.DROP)  # dropped connections were never counted
    assert gate.open == 3 and gate.per_ip == {"a": 1, "b": 1, "c": 1}


def test_the_gate_forgets_an_address_with_no_connections() -> None:
    gate = ConnectionGate(Caps(total=10, per_ip=5, refusals=2))
    for _ in range(3):
        gate.admit("a")
    for _ in range(3):
        gate.release("a", Verdict.SERVE)
    assert gate.open == 0 and gate.per_ip == {}


def test_the_throttle_reports_at_most_once_per_interval_and_loses_nothing() -> None:
    clock = FakeClock()
    throttle = Throttle(1.0, clock)
    assert throttle.hit() == 1  # the first one is reported at once
    reported = 0
    for _ in range(4095):  # asyncio retries accept() up to the backlog in one tick
        reported += throttle.hit()
    assert reported == 0
    assert throttle.due() == 101.0
    clock.now = 100.5
    assert throttle.flush() == 0  # not yet
    clock.now = 101.0
    assert throttle.flush() == 4095
    assert throttle.due() is None
    clock.now = 101.5
    assert throttle.hit() == 0
    clock.now = 102.2
    assert throttle.hit() == 2
    clock.now = 110.0
    assert throttle.flush() == 0
    assert throttle.hit() == 1
