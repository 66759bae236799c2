"""A person asks, one agent answers: the demo's cast (maths, travel, chef, coder on the offline
model, and the calculator) on a real gateway, asked by a person.

- addressed means addressed: ``to`` or an @mention is answered by the addressee only; the
  others ignore it (``addressed_to_others``), claim nothing, and are not interrupted;
- a person's unaddressed question is coordinated: exactly one agent answers, the one whose
  skills cover it (``coordination.humans: exempt`` restores "every relevant agent answers");
- nobody is left unanswered: dinner → chef, trains → travel, sums → maths, code → coder; a
  question nobody's skills cover may stay unanswered;
- an agent is interrupted only by what it will act on: the coder's pending proposal survives
  the person's messages to others.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from hubbub.demo.cast import SKILLS, make_agent, make_calculator
from hubbub.llm.offline import OfflineModel, OfflineScript
from hubbub.protocol.envelope import Envelope
from hubbub.sdk import Agent, Participant
from hubbub.sdk.agent import DecisionRecord
from tests.agent.test_agent import next_from, say
from tests.conftest import RunningGateway
from tests.floor.conftest import SlowAnswers, collect
from tests.floor.test_agents import FAST, answers, kinds
from tests.sdk.conftest import MakeParticipant
from tests.timing import WAIT

Cast = Callable[..., Awaitable[list[Agent]]]
CAST_WAIT = 2 * WAIT
"""How long the demo's cast may take to answer (four agents classify every message)."""


@pytest.fixture
async def cast(gw: RunningGateway) -> AsyncIterator[Cast]:
    """``await cast()``: the demo's four agents and its calculator, tools discovered."""
    async with contextlib.AsyncExitStack() as stack:

        async def make(**changes: Any) -> list[Agent]:
            await stack.enter_async_context(make_calculator(gw.url, lambda line: None))
            agents = []
            for name in SKILLS:
                agent = make_agent(name, gw.url, 0.05)
                if changes:
                    agent.config = agent.config.replace(**changes)
                agents.append(await stack.enter_async_context(agent))
            for agent in agents:
                await agent.wait_for_tools("calculator", timeout=10)
            return agents

        yield make


def _answering(*fields: str) -> OfflineModel:
    """An offline model with a rule for each of ``fields`` (regexes; '' for none): the
    offline classifier claims only what a rule answers (arithmetic is built in)."""
    rules = [{"match": rf"\b({f})\b", "reply": "on it, {sender}"} for f in fields if f]
    return OfflineModel(OfflineScript.from_mapping({"rules": rules}))


def _by_id(agents: list[Agent]) -> dict[str, Agent]:
    return {a.id: a for a in agents}


def _decided(agent: Agent, msg_ids: set[str]) -> list[DecisionRecord]:
    return [r for r in agent.decisions if r.envelope.id in msg_ids]


def _of_kind(*kinds: str) -> Callable[[Envelope], bool]:
    return lambda e: e.kind in kinds


def _rules(agent: Agent, msg_id: str) -> list[str]:
    return [r.decision.rule for r in agent.decisions if r.envelope.id == msg_id]


async def _ask(
    gw: RunningGateway, person: Participant, text: str, agents: list[Agent], **fields: Any
) -> tuple[Envelope, list[Envelope], list[Envelope]]:
    """``person`` says ``text`` in #general; the question, its answers, and every floor claim
    on it, once the agents can do nothing more."""
    stream = person.client.messages()
    question = await say(person.client, stream, text, **fields)
    wanted = _of_kind("chat", "floor/responding-to")
    seen = await collect(gw, agents, person.client, stream, wanted, CAST_WAIT)
    replies = [e for e in seen if answers(question)(e)]
    claims = [e for e in seen if e.kind == "floor/responding-to"]
    return question, replies, [c for c in claims if c.payload.get("msg_id") == question.id]


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        ("@maths what is 6*7?", {}),
        ("what is 6*7?", {"to": ["maths"], "channel": "#general"}),
        ("@Maths what is 6*7?", {"to": ["maths"], "channel": "#general"}),
    ],
    ids=["mention", "to", "both"],
)
async def test_a_message_addressed_to_one_agent_is_answered_by_it_alone(
    gw: RunningGateway, participant: MakeParticipant, cast: Cast, text: str, fields: dict[str, Any]
) -> None:
    agents = await cast()
    alice = await participant("alice", kind="human")
    question, replies, claims = await _ask(gw, alice, text, agents, **fields)
    assert [(r.from_, r.payload["text"]) for r in replies] == [("maths", "6 * 7 = 42.")]
    assert claims == []  # the addressee answers without floor control; nobody else claims
    for agent in agents:
        if agent.id == "maths":
            assert _rules(agent, question.id) in (["mention"], ["direct"])
            assert kinds(agent, question.id) == ["exempt"]
        else:
            assert _rules(agent, question.id) == ["addressed_to_others"]
            assert kinds(agent, question.id) == []
            assert agent.model.calls == 0  # type: ignore[attr-defined]  # not even classified


@pytest.mark.parametrize(
    ("text", "who"),
    [
        ("hello everyone, who can help me plan dinner?", "chef"),
        ("are there trains to Lyon tonight?", "travel"),
        ("what is 12*7?", "maths"),
        ("can someone look at a python bug?", "coder"),
    ],
)
async def test_a_persons_unaddressed_question_is_answered_once_by_the_skilled_agent(
    gw: RunningGateway, participant: MakeParticipant, cast: Cast, text: str, who: str
) -> None:
    agents = await cast()
    alice = await participant("alice", kind="human")
    question, replies, _ = await _ask(gw, alice, text, agents)
    assert [r.from_ for r in replies] == [who]
    for agent in agents:
        assert _rules(agent, question.id) == ["classifier"]
        decision = next(r.decision for r in agent.decisions if r.envelope.id == question.id)
        assert decision.respond == (agent.id == who), decision


async def test_a_question_in_nobodys_skills_may_stay_unanswered(
    gw: RunningGateway, participant: MakeParticipant, cast: Cast
) -> None:
    agents = await cast()
    alice = await participant("alice", kind="human")
    question, replies, claims = await _ask(gw, alice, "what is the capital of Peru?", agents)
    assert replies == [] and claims == []
    assert all(_rules(a, question.id) == ["classifier"] for a in agents)


async def test_agents_who_all_want_a_persons_question_coordinate_and_one_answers(
    gw: RunningGateway, participant: MakeParticipant, agent: Callable[..., Awaitable[Agent]]
) -> None:
    bots = [await agent(f"bot{i}", model=SlowAnswers(0.3), **FAST) for i in range(4)]
    alice = await participant("alice", kind="human")
    question, replies, claims = await _ask(gw, alice, "question 10 for the room", bots)
    assert len(replies) == 1
    assert {c.from_ for c in claims} <= {b.id for b in bots} and claims
    assert sum(b.model.finished for b in bots) == 1  # type: ignore[attr-defined]
    for bot in bots:
        assert kinds(bot, question.id)[0] == "wait"  # CSMA, not "exempt"


async def test_with_humans_exempt_every_agent_that_finds_it_relevant_answers_at_once(
    gw: RunningGateway, participant: MakeParticipant, agent: Callable[..., Awaitable[Agent]]
) -> None:
    bots = [
        await agent(f"bot{i}", model=SlowAnswers(0.05), humans="exempt", **FAST) for i in range(3)
    ]
    alice = await participant("alice", kind="human")
    question, replies, claims = await _ask(gw, alice, "question 11 for the room", bots)
    assert sorted(r.from_ for r in replies) == ["bot0", "bot1", "bot2"]
    assert claims == []
    assert all(kinds(b, question.id) == ["exempt"] for b in bots)


async def test_a_person_is_never_yielded_and_their_follow_up_is_not_a_claim(
    gw: RunningGateway, participant: MakeParticipant, agent: Callable[..., Awaitable[Agent]]
) -> None:
    bot = await agent("bot", model=SlowAnswers(0.3), **FAST)
    alice = await participant("alice", kind="human")
    bob = await participant("bob", kind="human")
    stream = alice.client.messages()
    question = await say(alice.client, stream, "question 12: anyone?")
    # another person answering meanwhile neither claims the floor nor stops alice's answer
    await bob.client.send(Envelope(kind="chat", channel="#general", payload={"text": "me neither"}))
    replies = await collect(gw, [bot], alice.client, stream, answers(question))
    assert [r.from_ for r in replies] == ["bot"]
    assert "yield" not in kinds(bot, question.id)


async def test_the_coders_proposal_survives_messages_it_ignores(
    gw: RunningGateway, participant: MakeParticipant, cast: Cast
) -> None:
    agents = await cast()
    coder = _by_id(agents)["coder"]
    alice = await participant("alice", kind="human")
    watch = alice.client.messages()
    await alice.client.send(
        Envelope(kind="chat", to=["coder"], payload={"text": "what is 1234+4321?"})
    )
    proposal = await next_from(watch, "coder", ("mcp/proposal",), 10)
    texts = ("@maths what is 6*7?", "hello everyone, who can help me plan dinner?")
    asked = {(await say(alice.client, watch, text)).id for text in texts}
    # the coder, its turn waiting for the proposal, is never idle: it decides about both
    # messages and answers neither; the barrier is on the others
    await coder.wait_until(lambda: len(_decided(coder, asked)) == 2, CAST_WAIT)
    assert [r.decision.respond for r in _decided(coder, asked)] == [False, False]
    rest = [a for a in agents if a is not coder]
    wanted = _of_kind("chat", "mcp/withdraw")
    others = await collect(gw, rest, alice.client, watch, wanted, CAST_WAIT)
    assert {e.from_ for e in others if e.kind == "chat"} == {"maths", "chef"}
    assert [e for e in others if e.kind == "mcp/withdraw"] == []
    assert coder.runtime.is_processing(coder.id)  # its tool loop still waits for the proposal
    result = await alice.approve(proposal.id, timeout=10)
    assert "5555" in str(result)
    answer = await next_from(watch, "coder", ("chat",), 10)
    assert "5555" in answer.payload["text"] and answer.to == ["alice"]


async def test_a_burst_from_three_people_gets_every_question_answered_once(
    gw: RunningGateway, participant: MakeParticipant, agent: Callable[..., Awaitable[Agent]]
) -> None:
    """Agents with different skills batch the burst differently (settle window); a claim on
    one message of a batch takes only that one, so no question is lost with its batch."""
    skills = [("math",), ("cooking",), ("travel", "code"), ("code",), ("math",)]
    fields = {"math": "", "cooking": "dinner|recipe|bake", "travel": "trains?|hotel",
              "code": "python|function"}  # fmt: skip
    bots = [
        await agent(
            f"bot{i}",
            skills=tags,
            model=_answering(*(fields[t] for t in tags)),
            csma_min_ms=50,
            csma_max_ms=150,
            settle_ms=150,
        )
        for i, tags in enumerate(skills)
    ]
    people = [await participant(p, kind="human") for p in ("alice", "bob", "carol")]
    stream = people[0].client.messages()
    texts = [
        "what is 12*7?", "who can help me plan dinner?", "any trains to Lyon?",
        "can someone look at a python bug?", "what is 3+4?", "a recipe for lunch?",
        "a hotel in Rome?", "why does my function return None?", "what is 9*9?",
        "what should I bake?",
    ]  # fmt: skip
    await asyncio.gather(
        *(
            people[k % 3].client.send(
                Envelope(kind="chat", channel="#general", payload={"text": text})
            )
            for k, text in enumerate(texts)
        )
    )
    seen = await collect(gw, bots, people[0].client, stream, lambda e: e.kind == "chat", CAST_WAIT)
    questions = {e.id: e.payload["text"] for e in seen if e.from_ in ("alice", "bob", "carol")}
    assert sorted(questions.values()) == sorted(texts)
    answered = [cid for e in seen if e.from_.startswith("bot") for cid in e.correlation_ids()]
    assert sorted(answered) == sorted(questions), {
        questions[q]: answered.count(q) for q in questions
    }


async def test_an_addressed_agent_without_a_rule_says_what_it_can_do(
    gw: RunningGateway, participant: MakeParticipant, cast: Cast
) -> None:
    agents = await cast()
    alice = await participant("alice", kind="human")
    _, replies, _ = await _ask(gw, alice, "@chef what is the capital of Peru?", agents)
    assert [(r.from_, r.payload["text"]) for r in replies] == [
        (
            "chef",
            "Sorry alice, I have no rule for that. I am chef, the cooking expert of this "
            "offline demo: ask me about recipes, eggs, pasta, rice, baking and substitutes.",
        )
    ]


async def test_an_open_question_in_a_field_is_answered_from_its_repertoire(
    gw: RunningGateway, participant: MakeParticipant, cast: Cast
) -> None:
    agents = await cast()
    alice = await participant("alice", kind="human")
    _, replies, _ = await _ask(gw, alice, "how long should I boil an egg?", agents)
    assert [(r.from_, r.payload["text"]) for r in replies] == [
        ("chef", "Boil an egg 6 minutes for a soft yolk, 10 for hard, then cool it in cold "
                 "water, alice.")
    ]  # fmt: skip


async def test_a_follow_up_builds_on_the_previous_answer(
    gw: RunningGateway, participant: MakeParticipant, cast: Cast
) -> None:
    agents = await cast()
    alice = await participant("alice", kind="human")
    _, first, _ = await _ask(gw, alice, "@maths what is 6*7?", agents)
    _, second, _ = await _ask(gw, alice, "@maths and times 2?", agents)
    texts = [(r.from_, r.payload["text"]) for r in first + second]
    assert texts == [("maths", "6 * 7 = 42."), ("maths", "42 * 2 = 84.")]
