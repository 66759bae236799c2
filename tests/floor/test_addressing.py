"""Addressing in conversation: real agents on a real gateway, asked by a person.

- a reply to an agent's answer is that agent's alone: it answers at once (no CSMA), with the
  conversation it replies to in its model's prompt; the others ignore it;
- ``@Display Name`` addresses the participant with that display name, and only it;
- ``@agent`` while that agent is offline: nobody stands in, the sender is told, and the agent
  gets the message when it connects again;
- a mention inside a burst of unaddressed messages is handed to its agent before the
  classifications queued ahead of it finish.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence

from hubbub.llm.base import Message, StreamEvent, ToolSpec
from hubbub.llm.offline import CLASSIFY_MARKER
from hubbub.sdk import Agent
from tests.agent.conftest import MakeAgent
from tests.agent.test_agent import say
from tests.conftest import RunningGateway
from tests.floor.conftest import SlowAnswers, collect
from tests.floor.test_agents import FAST, answers, kinds
from tests.sdk.conftest import MakeParticipant
from tests.timing import WAIT


class Recording(SlowAnswers):
    """The floor's offline model (answers ``question``s), keeping every prompt it was given."""

    def __init__(self) -> None:
        super().__init__(0.0)
        self.prompts: list[str] = []

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> AsyncGenerator[StreamEvent, None]:
        """Record the conversation, then answer as the offline model does."""
        self.prompts.append("\n".join(m.content for m in messages))
        async for event in super().stream(messages, tools):
            yield event


def _rules(agent: Agent, msg_id: str) -> list[str]:
    return [r.decision.rule for r in agent.decisions if r.envelope.id == msg_id]


async def test_a_reply_to_an_agents_answer_is_answered_by_that_agent_alone_with_context(
    gw: RunningGateway, participant: MakeParticipant, agent: MakeAgent
) -> None:
    slow = {**FAST, "csma_min_ms": 5000, "csma_max_ms": 8000}  # the default floor's waits
    bots = [await agent(f"bot{i}", model=Recording(), **slow) for i in range(3)]
    alice = await participant("alice", kind="human")
    stream = alice.client.messages()
    question = await say(alice.client, stream, "@bot1 question: dinner for 4?")
    first = await collect(gw, bots, alice.client, stream, answers(question))
    assert [a.from_ for a in first] == ["bot1"]
    answer = first[0]
    reply = await say(
        alice.client, stream, "thanks! could you make that question for 6 instead?",
        correlation_id=[answer.id],
    )  # fmt: skip
    replies = await collect(gw, bots, alice.client, stream, answers(reply))
    assert [r.from_ for r in replies] == ["bot1"]
    assert kinds(bots[1], reply.id) == ["exempt"]  # at once: no CSMA wait, no claim
    assert _rules(bots[1], reply.id) == ["reply"]
    for other in (bots[0], bots[2]):
        assert _rules(other, reply.id) == ["addressed_to_others"]
        assert kinds(other, reply.id) == []
    prompt = bots[1].model.prompts[-1]  # type: ignore[attr-defined]
    assert "alice: thanks! could you make that question for 6 instead?" in prompt
    assert "@bot1 question: dinner for 4?" in prompt and answer.payload["text"] in prompt


async def test_a_display_name_mention_is_answered_by_that_agent_alone(
    gw: RunningGateway, participant: MakeParticipant, agent: MakeAgent
) -> None:
    slow = {**FAST, "csma_min_ms": 5000, "csma_max_ms": 8000}
    coder = await agent("coder", name="Ada", model=Recording(), **slow)
    travel = await agent("travel", name="Phileas", model=Recording(), **slow)
    alice = await participant("alice", kind="human")
    stream = alice.client.messages()
    question = await say(alice.client, stream, "@Ada could you look at this question?")
    replies = await collect(gw, [coder, travel], alice.client, stream, answers(question))
    assert [r.from_ for r in replies] == ["coder"]
    assert _rules(coder, question.id) == ["mention"]
    assert kinds(coder, question.id) == ["exempt"]
    assert _rules(travel, question.id) == ["addressed_to_others"]
    assert travel.model.calls == 0  # type: ignore[attr-defined]  # not even classified


async def test_a_mention_of_an_offline_agent_has_no_stand_in_and_reaches_it_when_it_is_back(
    gw: RunningGateway, participant: MakeParticipant, agent: MakeAgent
) -> None:
    slow = {**FAST, "csma_min_ms": 5000, "csma_max_ms": 8000}
    maths = await agent("maths", model=Recording(), **slow)
    travel = await agent("travel", model=Recording(), **slow)
    alice = await participant("alice", kind="human")
    gone = alice.client.expect("system/presence", lambda e: e.payload.get("event") == "leave")
    await travel.stop()
    async with asyncio.timeout(WAIT):
        await gone
    stream = alice.client.messages()
    question = await say(alice.client, stream, "@travel question: a train to Lyon?")
    seen = await collect(gw, [maths], alice.client, stream, lambda e: True)
    assert [e for e in seen if answers(question)(e)] == []  # nobody stands in
    assert _rules(maths, question.id) == ["addressed_to_others"]
    notes = [e for e in seen if e.kind == "system/notice"]
    assert [n.payload["text"] for n in notes] == [
        "travel is offline; it will see this when it reconnects"
    ]
    assert notes[0].correlation_ids() == [question.id] and notes[0].to == ["alice"]
    back = await agent("travel", model=Recording(), **slow)  # a new process: no resume
    replies = await collect(gw, [maths, back], alice.client, stream, answers(question))
    assert [r.from_ for r in replies] == ["travel"]
    assert _rules(back, question.id) == ["mention"]


class GatedClassifier(SlowAnswers):
    """The floor's offline model, whose classifications wait for ``gate`` (no clock); counts
    how many wait at once."""

    def __init__(self) -> None:
        super().__init__(0.0)
        self.gate = asyncio.Event()
        self.waiting = 0
        self.peak = 0

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> AsyncGenerator[StreamEvent, None]:
        """Hold a classification until the gate opens; answer at once."""
        last = next((m.content for m in reversed(messages) if m.role == "user"), "")
        if CLASSIFY_MARKER in last:
            self.waiting += 1
            self.peak = max(self.peak, self.waiting)
            try:
                await self.gate.wait()
            finally:
                self.waiting -= 1
        async for event in super().stream(messages, tools):
            yield event


async def test_a_mention_in_a_burst_is_handed_on_before_the_queued_classifications_finish(
    gw: RunningGateway, participant: MakeParticipant, agent: MakeAgent
) -> None:
    model = GatedClassifier()
    bot = await agent("bot", model=model, **FAST)
    alice = await participant("alice", kind="human")
    stream = alice.client.messages()
    for i in range(8):
        await say(alice.client, stream, f"just chatting, message {i}")
    mention = await say(alice.client, stream, "@bot question: are you there?")
    async with asyncio.timeout(WAIT):  # answered while every classification still waits
        async for env in stream:
            if answers(mention)(env):
                break
    assert model.waiting == 4 and model.peak == 4  # classified alongside, at most 4 at once
    assert _rules(bot, mention.id) == ["mention"]
    model.gate.set()
    await collect(gw, [bot], alice.client, stream, lambda e: False)
    decided = [r.envelope.payload["text"] for r in bot.decisions if r.decision.rule == "classifier"]
    assert decided == [f"just chatting, message {i}" for i in range(8)]  # in arrival order
