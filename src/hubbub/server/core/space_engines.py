"""The three coordination engines of one space: floor control, callbacks, sleep/wake."""

from __future__ import annotations

from hubbub.engines.callbacks import CallbackEngine
from hubbub.engines.floor import FloorControl
from hubbub.engines.sleep import SleepEngine
from hubbub.engines.timers import TimerQueue
from hubbub.protocol.envelope import Envelope
from hubbub.server.config import EngineSettings
from hubbub.server.state.space import SpaceState


class SpaceEngines:
    """The three engines of one space, on the router's shared timer queue."""

    def __init__(self, space: SpaceState, timers: TimerQueue, settings: EngineSettings) -> None:
        sid = space.id
        self.floor = FloorControl(
            timers,
            ttl_ms=settings.respond_ttl_ms,
            enabled=settings.respond_enabled,
            max_skew_ms=settings.claim_max_skew_ms,
            scope=sid,
            unclaimed_ms=settings.unclaimed_notice_s * 1000,
        )
        self.callbacks = CallbackEngine(
            timers,
            max_duration_s=settings.cb_max_duration_s,
            max_per_agent=settings.cb_max_per_agent,
            max_per_space=settings.cb_max_per_space,
            max_payload=settings.cb_max_payload,
            grace_s=settings.cb_grace_s,
            scope=sid,
        )
        self.sleep: SleepEngine[Envelope] = SleepEngine(
            timers,
            max_duration_s=settings.cb_max_duration_s,
            max_buffer=settings.sleep_max_buffer,
            scope=sid,
        )
