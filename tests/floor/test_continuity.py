"""Continuity in a conversation: a person's unaddressed follow-up goes to the agent that just
answered them, alone, although another agent's skills cover it as well (real gateway, real
offline-model agents; :func:`~tests.floor.conftest.collect` proves "no second answer" without
sleeping)."""

from __future__ import annotations

import random

from tests.agent.conftest import MakeAgent
from tests.agent.test_agent import say
from tests.conftest import RunningGateway
from tests.floor.conftest import collect
from tests.floor.test_agents import answers
from tests.sdk.conftest import MakeParticipant

CSMA = {"csma_min_ms": 0, "csma_max_ms": 300, "settle_ms": 0, "rate_limit_per_minute": 0}


async def test_a_follow_up_goes_to_the_agent_that_answered(
    gw: RunningGateway, participant: MakeParticipant, agent: MakeAgent
) -> None:
    maths = await agent("maths", skills=["math"], rng=random.Random(1), **CSMA)
    numbers = await agent("numbers", skills=["math"], rng=random.Random(2), **CSMA)
    chef = await agent("chef", skills=["cooking"], rng=random.Random(3), **CSMA)
    cast = [maths, numbers, chef]
    ann = await participant("ann", kind="human")
    stream = ann.client.messages()
    firsts: list[str] = []
    for k in range(6):
        question = await say(ann.client, stream, f"what is {k + 2}*7?", channel="#general")
        (first,) = await collect(gw, cast, ann.client, stream, answers(question))
        assert first.from_ in ("maths", "numbers")
        firsts.append(first.from_)
        follow_up = await say(ann.client, stream, f"and what about {k + 2}*8?", channel="#general")
        again = await collect(gw, cast, ann.client, stream, answers(follow_up))
        assert [e.from_ for e in again] == [first.from_], f"round {k}: {firsts}"
    stream.close()


async def test_continuity_off_lets_anyone_take_the_follow_up(
    gw: RunningGateway, participant: MakeParticipant, agent: MakeAgent
) -> None:
    # with continuity_s 0 the follow-ups are shared out as any question: not always the same
    cast = [
        await agent(pid, skills=["math"], rng=random.Random(i), continuity_s=0, **CSMA)
        for i, pid in enumerate(("maths", "numbers"))
    ]
    ann = await participant("ann", kind="human")
    stream = ann.client.messages()
    same = 0
    for k in range(8):
        question = await say(ann.client, stream, f"what is {k + 2}*7?", channel="#general")
        (first,) = await collect(gw, cast, ann.client, stream, answers(question))
        follow_up = await say(ann.client, stream, f"and what about {k + 2}*8?", channel="#general")
        (again,) = await collect(gw, cast, ann.client, stream, answers(follow_up))
        same += again.from_ == first.from_
    assert same < 8
    stream.close()
