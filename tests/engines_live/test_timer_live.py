"""The real timer path: ``Coordination._rearm`` arms one ``loop.call_later`` for the earliest
due entry, capped by ``AGENTCHAT_CB_POLL_MS``. The tests read the armed handle's due time
(``handle.when() - loop.time()``) against the injected clock; none of them waits for it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hubbub.server.core.coordination import Coordination
from tests.conftest import stop_gateway
from tests.engines_live.conftest import EngineGateway, ManualClock, start_engine_gateway

SLACK = 0.2
"""Seconds of loop time that may pass between arming a handle and reading it."""


def _coord(gw: EngineGateway) -> Coordination:
    return gw.router.coordination


def _schedule(gw: EngineGateway, cb_id: str, seconds: float) -> None:
    """Schedule a callback straight in the engine, then let the gateway re-arm its timer."""
    coord = _coord(gw)
    coord.spaces["default"].callbacks.schedule(coord.clock(), cb_id, "bot", seconds, "p")
    coord._rearm()


def _left(coord: Coordination) -> float:
    """Seconds of loop time until the armed handle runs."""
    handle = coord._handle
    assert handle is not None, "no timer armed"
    return handle.when() - asyncio.get_running_loop().time()


def _near(value: float, expected: float) -> bool:
    return expected - SLACK <= value <= expected + 1e-6


async def test_nothing_pending_arms_nothing(egw: EngineGateway) -> None:
    await egw.mew("bot")
    assert _coord(egw)._handle is None


async def test_handle_is_armed_for_the_due_time_under_the_cap(tmp_path: Path) -> None:
    gw = await start_engine_gateway(tmp_path, cb_poll_ms=60_000)
    try:
        coord = _coord(gw)
        _schedule(gw, "cb-20", 20)
        assert _near(_left(coord), 20)
        assert _near((coord._handle_at - coord.clock()) / 1000, 20)
        _schedule(gw, "cb-5", 5)  # an earlier entry re-arms the one timer
        first = coord._handle
        assert _near(_left(coord), 5)
        _schedule(gw, "cb-10", 10)  # a later one does not
        assert coord._handle is first and _near(_left(coord), 5)
    finally:
        await stop_gateway(gw)


@pytest.mark.parametrize("poll_ms", [1_000, 250])
async def test_a_far_deadline_is_capped_by_the_poll_interval(tmp_path: Path, poll_ms: int) -> None:
    gw = await start_engine_gateway(tmp_path, cb_poll_ms=poll_ms)
    try:
        _schedule(gw, "cb-far", 3_000)
        assert _near(_left(_coord(gw)), poll_ms / 1000)
    finally:
        await stop_gateway(gw)


@pytest.mark.parametrize("offset_s", [-7_200, 0, 86_400])
async def test_the_delay_comes_from_the_injected_clock(tmp_path: Path, offset_s: float) -> None:
    clock = ManualClock()
    clock.advance(offset_s)  # the engines' clock is hours away from the wall clock
    gw = await start_engine_gateway(tmp_path, clock, cb_poll_ms=60_000)
    try:
        _schedule(gw, "cb", 12.5)
        assert _near(_left(_coord(gw)), 12.5)
    finally:
        await stop_gateway(gw)


async def test_when_the_handle_runs_it_fires_what_is_due_and_rearms(tmp_path: Path) -> None:
    gw = await start_engine_gateway(tmp_path, cb_poll_ms=1_000)
    try:
        coord = _coord(gw)
        _schedule(gw, "cb-a", 30)
        _schedule(gw, "cb-b", 90)
        assert _near(_left(coord), 1)
        gw.clock.advance(1)
        coord._on_timer()  # what the armed handle runs: nothing due yet, re-armed at the cap
        assert coord.spaces["default"].callbacks.count("bot") == 2
        assert _near(_left(coord), 1)
        gw.clock.advance(29.5)
        coord._on_timer()  # past cb-a's due time: it fires once, the cap applies again
        assert [c.id for c in coord.spaces["default"].callbacks.pending("bot")] == ["cb-b"]
        assert _near(_left(coord), 1)
        gw.clock.advance(59)
        coord._on_timer()  # 0.5 s before cb-b: armed for exactly that
        assert _near(_left(coord), 0.5)
        gw.clock.advance(0.5)
        coord._on_timer()
        assert coord.spaces["default"].callbacks.count("bot") == 0
        assert coord._handle is None  # nothing left: nothing wakes up
        outcomes = [
            (e["event"], e["cb_id"])
            for e in gw.router.activity.recent
            if e["event"] in ("callback-fired", "callback-dropped")
        ]
        assert outcomes == [("callback-dropped", "cb-a"), ("callback-dropped", "cb-b")]
    finally:
        await stop_gateway(gw)


async def test_claims_and_wakeups_share_the_timer(tmp_path: Path) -> None:
    gw = await start_engine_gateway(tmp_path, cb_poll_ms=60_000, respond_ttl_ms=45_000)
    try:
        coord = _coord(gw)
        eng = coord.spaces["default"]
        eng.sleep.sleep(coord.clock(), "bot", 30)
        coord._rearm()
        assert _near(_left(coord), 30)
        eng.floor.claim(coord.clock(), "#general", "m1", "bot", 0, msg_ts=0)
        coord._rearm()
        assert _near(_left(coord), 30)  # the claim expires after 45 s: later
        eng.callbacks.schedule(coord.clock(), "cb", "bot", 2, "p")
        coord._rearm()
        assert _near(_left(coord), 2)
    finally:
        await stop_gateway(gw)
