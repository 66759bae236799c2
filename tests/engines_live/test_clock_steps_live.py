"""Steps of the wall clock move no deadline (issue 21 item 14): timers run on the monotonic
clock, persisted due times are wall-clock Unix ms, re-derived at a restart. Both clocks are
injected (or, for the defaults, ``time.time`` is stepped); nothing waits for a timer."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.conftest import start_gateway, stop_gateway
from tests.engines_live.conftest import EngineGateway, ManualClock


class WallClock:
    """A wall clock (Unix ms) a test steps independently of the engines' monotonic clock."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() * 1000 + self.offset

    def step(self, seconds: float) -> None:
        self.offset += seconds * 1000


def _chat(text: str, channel: str = "#general") -> dict[str, Any]:
    return {"kind": "chat", "channel": channel, "payload": {"text": text}}


def _dm(to: str, text: str) -> dict[str, Any]:
    return {"kind": "chat", "to": [to], "private": True, "payload": {"text": text}}


def _fire(f: dict[str, Any]) -> bool:
    return f.get("kind") == "chat" and "cb_id" in f.get("payload", {})


async def test_a_forward_step_of_the_system_clock_fires_nothing_early(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gw = await start_gateway(tmp_path)  # the default clocks
    try:
        a = await gw.mew("agent-a")
        await a.send(_chat("@@cb:10s@@ten seconds"))
        await a.send(_chat("sync"))
        await a.expect("chat")
        real = time.time
        monkeypatch.setattr(time, "time", lambda: real() + 3600)  # NTP steps +1 h
        gw.router.coordination.run_due()
        await a.silent(_fire)
        assert len(gw.router.coordination.spaces["default"].callbacks) == 1
    finally:
        await stop_gateway(gw)


async def test_a_backward_step_does_not_hold_a_sleepers_dms(tmp_path: Path) -> None:
    mono, wall = ManualClock(), WallClock()
    gw = await start_gateway(tmp_path, clock=mono, wall_clock=wall)
    try:
        sleeper = await gw.mew("sleeper")
        other = await gw.mew("other")
        await sleeper.send(_chat("@@sleep:30s@@"))
        await EngineGateway.synced(sleeper)
        await other.send(_dm("sleeper", "while you slept"))
        await EngineGateway.synced(other)
        wall.step(-3600)  # the system clock steps back an hour
        mono.advance(31)
        gw.router.coordination.run_due()
        wake = await sleeper.next_where(lambda f: f.get("kind") == "chat")
        assert wake["payload"]["text"] == "@@wake@@"
        dm = await sleeper.next_where(lambda f: f.get("kind") == "chat")
        assert dm["payload"]["text"] == "while you slept"
    finally:
        await stop_gateway(gw)


async def test_wake_at_shown_is_wall_clock_time(tmp_path: Path) -> None:
    mono, wall = ManualClock(), WallClock()
    mono.advance(-86_400)  # the monotonic timeline is a day away from the wall clock
    gw = await start_gateway(tmp_path, clock=mono, wall_clock=wall)
    try:
        sleeper = await gw.mew("sleeper")
        await sleeper.send(_chat("@@sleep:60s@@"))
        await EngineGateway.synced(sleeper)
        s = gw.router.spaces["default"].online["sleeper"]
        assert s.wake_at is not None and abs(s.wake_at - (wall() + 60_000)) < 5_000
    finally:
        await stop_gateway(gw)


async def test_persisted_due_times_are_wall_clock_and_re_derived_at_restart(
    tmp_path: Path,
) -> None:
    mono, wall = ManualClock(), WallClock()
    mono.advance(-86_400)
    gw = await start_gateway(tmp_path, clock=mono, wall_clock=wall)
    a = await gw.mew("agent-a")
    await a.send(_chat("@@cb:60s@@after restart"))
    await a.send(_chat("sync"))
    await a.expect("chat")
    await stop_gateway(gw)
    with sqlite3.connect(tmp_path / "hubbub.db") as db:
        ((data,),) = db.execute("SELECT data FROM callbacks").fetchall()
    stored = msgspec.json.decode(data)
    assert abs(stored["due_ms"] - (wall() + 60_000)) < 5_000  # Unix ms, not the timeline's
    # the new process has its own monotonic clock, an hour away from the old one
    mono2 = ManualClock()
    mono2.advance(3600)
    gw = await start_gateway(tmp_path, clock=mono2, wall_clock=wall)
    try:
        a = await gw.mew("agent-a")
        mono2.advance(50)
        gw.router.coordination.run_due()
        await a.silent(_fire)
        mono2.advance(11)
        gw.router.coordination.run_due()
        fire = await a.next_where(_fire)
        assert fire["payload"]["text"] == "@@cb-fire@@after restart"
    finally:
        await stop_gateway(gw)
