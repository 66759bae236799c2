"""Floor fixtures: the agent fixtures (real gateway, offline-model agents), a model whose
answers take a while (so that claims and yields meet a running inference), and
:func:`collect`, the barrier that proves "no second answer" without waiting on the clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Sequence

from hubbub.llm.base import Message, StreamEvent, ToolSpec
from hubbub.llm.offline import CLASSIFY_MARKER, NOVELTY_MARKER, OfflineModel, OfflineScript
from hubbub.protocol.envelope import Envelope
from hubbub.sdk import Agent, Client, Subscription
from tests.agent.conftest import agent, client, participant
from tests.conftest import Door
from tests.timing import WAIT

__all__ = ["SlowAnswers", "agent", "client", "collect", "fence", "participant"]

SCRIPT = OfflineScript.from_mapping(
    {"rules": [{"match": r"\bquestion\b", "reply": "my answer to {sender}"}]}
)


class SlowAnswers(OfflineModel):
    """The offline model, answering questions after ``delay`` seconds (classifying and judging
    drafts at once); counts the inferences it started, finished and had cancelled."""

    def __init__(self, delay: float = 0.3) -> None:
        super().__init__(SCRIPT)
        self.delay = delay
        self.started = 0
        self.finished = 0
        self.cancelled = 0

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> AsyncGenerator[StreamEvent, None]:
        """Classify and judge at once; answer after ``delay``."""
        last = next((m.content for m in reversed(messages) if m.role == "user"), "")
        if CLASSIFY_MARKER not in last and NOVELTY_MARKER not in last:
            self.started += 1
            try:
                await asyncio.sleep(self.delay)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            self.finished += 1
        async for event in super().stream(messages, tools):
            yield event


async def fence(client: Client, stream: Subscription) -> list[Envelope]:
    """Ask the gateway something it answers at once (``channel/list``) on ``client``'s
    connection and return what ``stream`` (one of ``client``'s) received before the answer:
    every frame the gateway wrote to this client before it read the question is among them,
    and the client's handlers have run for each."""
    question = Envelope(kind="channel/list", id=client.new_id())
    answer = client.expect("channel/list-response", lambda e: question.id in e.correlation_ids())
    await client.request(question, answer, "a fence")
    before: list[Envelope] = []
    async with asyncio.timeout(WAIT):
        async for env in stream:
            if env.kind == "channel/list-response" and question.id in env.correlation_ids():
                return before
            before.append(env)
    raise AssertionError(f"{client.id}'s connection closed during a fence")


async def collect(
    gw: Door,
    agents: Sequence[Agent],
    client: Client,
    stream: Subscription,
    where: Callable[[Envelope], bool],
    timeout: float = WAIT,
) -> list[Envelope]:
    """Every envelope matching ``where`` that reaches ``stream`` (``client``'s) until the
    ``agents`` can do nothing more, proven without waiting on the clock.

    A round: every agent is :attr:`~hubbub.sdk.Agent.idle` (no decision, CSMA wait, claim,
    turn or unacknowledged message), a fence on each agent's connection (the gateway has read
    all they sent), the gateway settles (all of it committed and delivered), a second fence on
    each agent's connection and one on ``client``'s (all of it received and handled). Rounds
    repeat until one in which no agent received anything and all are still idle: an agent
    only acts on what it receives (or a timer, and an idle agent has none but its nudge), so
    nothing more will come for what the test did.
    """
    watched = [(a, a.participant.client.messages()) for a in agents]
    out: list[Envelope] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 2 * timeout
    try:
        while True:
            if loop.time() >= deadline:
                raise AssertionError(f"the agents did not quiet down within {2 * timeout:g}s")
            for a, _ in watched:
                await a.until_idle(timeout)
            received = [e for a, s in watched for e in await fence(a.participant.client, s)]
            await gw.settle()
            received += [e for a, s in watched for e in await fence(a.participant.client, s)]
            out += [e for e in await fence(client, stream) if where(e)]
            moved = [e for e in received if e.kind != "system/presence"]
            if not moved and all(a.idle for a, _ in watched):
                return out
    finally:
        for _, s in watched:
            s.close()
