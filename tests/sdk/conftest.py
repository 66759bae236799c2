"""SDK fixtures: a real gateway (rate limit off) and factories for connected SDK objects."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from hubbub.sdk import Client, Participant
from tests.conftest import RunningGateway

# Short timings so that no test waits longer than it must.
FAST: dict[str, Any] = {
    "reconnect_delay": 0.02,
    "max_reconnect_delay": 0.2,
    "connect_timeout": 5.0,
    "heartbeat_interval": None,
}

# What an agent may send when it must ask a human to run tools for it.
PROPOSER_CAPS: list[dict[str, Any]] = [
    {"kind": "chat"},
    {"kind": ["mcp/proposal", "mcp/withdraw", "mcp/response"]},
    {"kind": "channel/*"},
    {"kind": "history/request"},
    {"kind": "capability/grant-ack"},
]

MakeParticipant = Callable[..., Awaitable[Participant]]
MakeClient = Callable[..., Awaitable[Client]]


async def tool_owner(make: MakeParticipant) -> Participant:
    """``calc``: a service participant with one tool, ``add(a, b)``, connected."""
    calc = await make("calc", connect=False, kind="service")

    @calc.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    await calc.connect()
    return calc


@pytest.fixture
async def participant(gw: RunningGateway) -> AsyncIterator[MakeParticipant]:
    """``await participant("id", **options)``: a connected Participant, closed at teardown."""
    made: list[Participant] = []

    async def make(pid: str, *, connect: bool = True, **options: Any) -> Participant:
        p = Participant(gateway=gw.url, participant_id=pid, **{**FAST, **options})
        made.append(p)
        if connect:
            await p.connect()
        return p

    yield make
    for p in reversed(made):
        await p.disconnect()


@pytest.fixture
async def client(gw: RunningGateway) -> AsyncIterator[MakeClient]:
    """``await client("id", **options)``: a connected Client, closed at teardown."""
    made: list[Client] = []

    async def make(pid: str, *, connect: bool = True, **options: Any) -> Client:
        c = Client(gateway=gw.url, participant_id=pid, **{**FAST, **options})
        made.append(c)
        if connect:
            await c.connect()
        return c

    yield make
    for c in reversed(made):
        await c.disconnect()
