"""Agent fixtures: the SDK's real gateway and participants, plus a factory of started agents."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from hubbub.sdk import Agent, Participant
from tests.conftest import RunningGateway
from tests.sdk.conftest import MakeParticipant, client, participant

__all__ = ["client", "participant"]

MakeAgent = Callable[..., Awaitable[Agent]]


@pytest.fixture
async def agent(gw: RunningGateway) -> AsyncIterator[MakeAgent]:
    """``await agent("id", **config)``: a started offline-model Agent (or ``cls``, a subclass),
    stopped at teardown. Its CSMA delay is 0 unless ``config`` sets one: a person's
    unaddressed question goes through floor control (``coordination.humans: coordinate``),
    and tests of other things need not wait the 2-8 s of the default delay."""
    made: list[Agent] = []

    async def make(
        pid: str = "assistant", *, start: bool = True, cls: type[Agent] = Agent, **config: Any
    ) -> Agent:
        fields: dict[str, Any] = {
            "gateway": gw.url,
            "provider": "offline",
            "discovery_timeout": 2.0,
            "discovery_retry_delay": 0.05,
            "csma_min_ms": 0,
            "csma_max_ms": config.get("csma_min_ms", 0),
            **config,
        }
        a = cls(participant_id=pid, **fields)
        made.append(a)
        if start:
            await a.start()
        return a

    yield make
    for a in reversed(made):
        await a.stop()


async def calculator(
    make: MakeParticipant, pid: str = "calculator"
) -> tuple[Participant, list[str]]:
    """A service offering add, multiply and divide; returns it and a log of the calls it ran."""
    calc = await make(pid, connect=False, kind="service")
    calls: list[str] = []

    @calc.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        calls.append(f"add {a} {b}")
        return a + b

    @calc.tool
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        calls.append(f"multiply {a} {b}")
        return a * b

    @calc.tool
    def divide(a: float, b: float) -> float:
        """Divide a by b."""
        calls.append(f"divide {a} {b}")
        return a / b

    await calc.connect()
    return calc, calls
