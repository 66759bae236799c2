"""A live gateway whose engines run on a manual clock: tests advance it, never sleep."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hubbub.server.config import EngineSettings, SpaceConfig
from tests.conftest import RunningGateway, WsClient, start_gateway, stop_gateway


class ManualClock:
    """Wall-clock Unix ms plus a jump that tests control: timers in these tests are long
    (30 s and more), so one falls due only when a test advances the clock past it."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() * 1000 + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds * 1000


class EngineGateway(RunningGateway):
    """A gateway with a manual engine clock."""

    clock: ManualClock

    @staticmethod
    async def synced(client: WsClient) -> None:
        """Wait until the gateway has handled everything ``client`` sent so far."""
        await client.send({"kind": "channel/list"})
        await client.expect("channel/list-response")

    def tick(self, seconds: float) -> None:
        """Move the engines' clock forward and fire what fell due."""
        self.clock.advance(seconds)
        self.router.coordination.run_due()


async def start_engine_gateway(
    data_dir: Path,
    clock: ManualClock | None = None,
    spaces: list[SpaceConfig] | None = None,
    **settings: object,
) -> EngineGateway:
    """A gateway on a manual clock with the given engine settings (and spaces)."""
    clock = clock or ManualClock()
    gw = await start_gateway(
        data_dir,
        spaces=spaces,
        engines=EngineSettings(**settings),  # type: ignore[arg-type]
        clock=clock,
    )
    gw.__class__ = EngineGateway
    gw.clock = clock  # type: ignore[attr-defined]
    return gw  # type: ignore[return-value]


@pytest.fixture
async def egw(tmp_path: Path) -> AsyncIterator[EngineGateway]:
    """An open-mode gateway whose engine timers fire only on ``egw.tick(seconds)``."""
    gw = await start_engine_gateway(tmp_path)
    yield gw
    await stop_gateway(gw)
