"""Real Agents (offline model) on a real gateway: CSMA and claims make exactly one agent answer,
a yield cancels the running inference, exempt messages are answered at once without a claim,
callbacks and sleep round-trip through the gateway, idle agents nudge themselves.

CSMA delays here are 0-50 ms (or so) so that no test waits on long timers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from hubbub.errors import RequestTimeout
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.ids import SERVER_ID, iso_to_ms
from hubbub.sdk import Agent, Participant
from hubbub.sdk.server_notes import CallbackFired, Wake
from tests.agent.conftest import MakeAgent
from tests.agent.test_agent import next_from, say
from tests.conftest import RunningGateway
from tests.floor.conftest import SlowAnswers, collect
from tests.sdk.conftest import MakeParticipant

FAST: dict[str, Any] = {"csma_min_ms": 0, "csma_max_ms": 50, "rate_limit_per_minute": 0}
SLOW_CSMA: dict[str, Any] = {"csma_min_ms": 5000, "csma_max_ms": 8000}


async def settled(*agents: Agent, timeout: float = 5.0) -> None:
    """Return once no agent decides, waits or answers any more."""
    for a in agents:
        await a.until_idle(timeout)


def chats_from(sender: str) -> Callable[[Envelope], bool]:
    """Chats that ``sender`` sent."""
    return lambda e: e.from_ == sender and e.kind == "chat"


def answers(question: Envelope) -> Callable[[Envelope], bool]:
    """Chats that answer ``question``."""
    return lambda e: e.kind == "chat" and question.id in e.correlation_ids()


def kinds(agent: Agent, msg_id: str) -> list[str]:
    """What floor control did about ``msg_id``."""
    return [e.kind for e in agent.floor.events if e.msg_id == msg_id]


async def test_an_agent_is_idle_once_nothing_is_decided_waited_on_answered_or_unacked(
    participant: MakeParticipant, agent: MakeAgent
) -> None:
    model = SlowAnswers(0.2)
    fixed = {**FAST, "csma_min_ms": 200, "csma_max_ms": 200}
    bot = await agent("bot", model=model, idle_nudge_s=60, **fixed)
    assert bot.idle  # a pending idle nudge is no work in progress
    await bot.until_idle()
    asker = await participant("asker", kind="service")
    stream = asker.client.messages()
    question = await say(asker.client, stream, "question 0")
    await bot.wait_until(lambda: kinds(bot, question.id) == ["wait"])
    assert not bot.idle and model.started == 0  # waiting out its CSMA delay
    await bot.wait_until(lambda: model.started == 1)
    assert not bot.idle  # answering
    with pytest.raises(RequestTimeout):
        await bot.until_idle(0.01)
    await bot.until_idle()
    assert model.finished == 1 and not bot.busy()
    # its answer was acknowledged: stored, in the history for everyone
    history = await asker.history("#general")
    assert [e.correlation_ids() for e in history if chats_from("bot")(e)] == [[question.id]]


async def test_three_agents_one_question_exactly_one_answers(
    gw: RunningGateway, participant: MakeParticipant, agent: MakeAgent
) -> None:
    bots = [await agent(f"bot{i}", model=SlowAnswers(0.3), **FAST) for i in range(3)]
    asker = await participant("asker", kind="service")
    stream = asker.client.messages()
    question = await say(asker.client, stream, "question 1: who knows?")
    replies = await collect(gw, bots, asker.client, stream, answers(question))
    assert len(replies) == 1
    winner = replies[0].from_
    assert replies[0].payload["text"] == "my answer to asker"
    for bot in bots:
        done = kinds(bot, question.id)
        assert done[0] == "wait"
        if bot.id == winner:
            assert "claim" in done and "yield" not in done
        else:
            assert "skip" in done or "yield" in done, done
    assert sum(b.model.finished for b in bots) == 1  # type: ignore[attr-defined]


async def test_claims_only_all_start_at_once_and_the_losers_yield(
    gw: RunningGateway, participant: MakeParticipant, agent: MakeAgent
) -> None:
    bots = [
        await agent(f"bot{i}", model=SlowAnswers(0.5), coordination="claims", **FAST)
        for i in range(3)
    ]
    asker = await participant("asker", kind="service")
    stream = asker.client.messages()
    question = await say(asker.client, stream, "question 2: anyone?")
    replies = await collect(gw, bots, asker.client, stream, answers(question))
    assert len(replies) == 1
    losers = [b for b in bots if b.id != replies[0].from_]
    assert all("skip" in kinds(b, question.id) or "yield" in kinds(b, question.id) for b in losers)
    assert sum(b.model.finished for b in bots) == 1  # type: ignore[attr-defined]


async def test_a_yield_cancels_the_running_inference_and_nothing_is_sent(
    gw: RunningGateway, participant: MakeParticipant, agent: MakeAgent
) -> None:
    model = SlowAnswers(5.0)
    bot = await agent("bot", model=model, coordination="claims", **FAST)
    asker = await participant("asker", kind="service")
    rival = await participant("aa-rival", kind="agent")  # sorts before "bot": wins a tie
    watch = rival.client.messages()
    stream = asker.client.messages()
    question = await say(asker.client, stream, "question 3: hard one")
    claim = await next_from(watch, "bot", ("floor/responding-to",))
    assert claim.payload["msg_id"] == question.id and claim.channel == "#general"
    assert claim.payload["started_at"] >= iso_to_ms(question.ts)
    await bot.wait_until(lambda: model.started == 1)
    await rival.client.send(
        Envelope(kind="floor/responding-to", channel="#general", payload=claim.payload)
    )
    cancel = await next_from(stream, "bot", ("reasoning/cancel",))
    assert cancel.payload == {"reason": "yielded", "message": "yielded to aa-rival"}
    assert model.cancelled == 1 and model.finished == 0
    assert await collect(gw, [bot], asker.client, stream, chats_from("bot")) == []
    (event,) = [e for e in bot.floor.events if e.kind == "yield"]
    assert event.cancelled and event.winner == "aa-rival"
    # the agent is free again: the next question is answered
    again = await say(asker.client, stream, "question 4: easier")
    model.delay = 0.05
    assert len(await collect(gw, [bot], asker.client, stream, answers(again))) == 1


async def busy_bot_with_asker_and_alice(
    participant: MakeParticipant, agent: MakeAgent
) -> tuple[SlowAnswers, Agent, Participant, Participant]:
    """A claiming bot whose answers take 0.6 s, a service that asks and a person."""
    model = SlowAnswers(0.6)
    bot = await agent("bot", model=model, coordination="claims", **FAST)
    asker = await participant("asker", kind="service")
    human = await participant("alice", kind="human")
    return model, bot, asker, human


async def test_a_dm_that_interrupts_a_claimed_answer_leaves_no_question_unanswered(
    gw: RunningGateway, participant: MakeParticipant, agent: MakeAgent
) -> None:
    model, bot, asker, human = await busy_bot_with_asker_and_alice(participant, agent)
    watch, stream = human.client.messages(), asker.client.messages()
    question = await say(asker.client, stream, "question 5: who takes this one?")
    claim = await next_from(watch, "bot", ("floor/responding-to",))
    await bot.wait_until(lambda: model.started == 1)
    dm = Envelope(kind="chat", to=["bot"], payload={"text": "question 5b: quick one"})
    await human.client.send(dm)  # a person's DM interrupts the claimed answer
    first = await next_from(watch, "bot", ("chat",), 5)
    assert first.to == ["alice"] and first.payload["text"] == "my answer to alice"
    channel = await next_from(stream, "bot", ("chat",), 5)
    assert channel.channel == "#general" and channel.correlation_ids() == [question.id]
    assert channel.payload["text"] == "my answer to asker"
    assert kinds(bot, question.id) == ["wait", "claim", "suspend", "claim"]
    (first_claim, second_claim) = [e for e in bot.floor.events if e.kind == "claim"]
    assert first_claim.detail == second_claim.detail == f"started_at {claim.payload['started_at']}"
    assert await collect(gw, [bot], asker.client, stream, chats_from("bot")) == []


async def test_a_channel_question_that_interrupts_a_dm_answer_leaves_the_dm_answered(
    participant: MakeParticipant, agent: MakeAgent
) -> None:
    model, bot, asker, human = await busy_bot_with_asker_and_alice(participant, agent)
    watch, stream = human.client.messages(), asker.client.messages()
    await human.client.send(
        Envelope(kind="chat", to=["bot"], payload={"text": "question 5c: a long one"})
    )
    await bot.wait_until(lambda: model.started == 1)
    question = await say(asker.client, stream, "question 5d: for the channel")
    channel = await next_from(stream, "bot", ("chat",), 5)
    assert channel.correlation_ids() == [question.id]
    seen = [await next_from(watch, "bot", ("chat",), 5) for _ in range(2)]  # channel, DM
    assert [(e.channel, e.to) for e in seen] == [("#general", None), (None, ["alice"])]
    assert seen[1].payload["text"] == "my answer to alice"
    await settled(bot)
    assert model.cancelled == 1 and model.finished == 2


async def test_csma_only_discards_a_draft_that_makes_the_point_someone_made_meanwhile(
    gw: RunningGateway, participant: MakeParticipant, agent: MakeAgent
) -> None:
    model = SlowAnswers(0.5)
    bot = await agent("bot", model=model, coordination="csma", **FAST)
    asker = await participant("asker", kind="service")
    helper = await participant("helper", kind="service")
    stream = asker.client.messages()
    question = await say(asker.client, stream, "question 15")
    start = await next_from(stream, "bot", ("reasoning/start",))
    await helper.client.send(
        Envelope(kind="chat", correlation_id=[question.id], payload={"text": "My answer to asker!"})
    )
    cancel = await next_from(stream, "bot", ("reasoning/cancel",))
    assert cancel.context == start.id
    assert cancel.payload == {
        "reason": "yielded",
        "message": "helper already made the same point: 100% of my draft was already said",
    }
    assert model.finished == 1  # csma alone does not cancel inference, it drops the draft
    assert await collect(gw, [bot], asker.client, stream, answers(question)) == []
    assert kinds(bot, question.id)[-1] == "discard"


async def test_a_draft_with_a_different_take_is_sent_although_someone_answered_first(
    participant: MakeParticipant, agent: MakeAgent
) -> None:
    model = SlowAnswers(0.5)
    bot = await agent("bot", model=model, coordination="csma", **FAST)
    asker = await participant("asker", kind="service")
    helper = await participant("helper", kind="service")
    stream = asker.client.messages()
    question = await say(asker.client, stream, "question 16")
    await next_from(stream, "bot", ("reasoning/start",))
    await helper.client.send(
        Envelope(kind="chat", correlation_id=[question.id], payload={"text": "no idea, sorry"})
    )
    reply = await next_from(stream, "bot", ("chat",))
    assert reply.payload["text"] == "my answer to asker"
    assert reply.correlation_ids() == [question.id]
    (kept,) = [e for e in bot.floor.events if e.kind == "keep"]
    assert kept.detail == (
        "helper answered meanwhile; mine adds: only 0% of my draft was already said"
    )


async def test_an_agentchat_agents_answer_counts_without_a_correlation_id(
    gw: RunningGateway, participant: MakeParticipant, agent: MakeAgent
) -> None:
    """An agentchat client answers with a plain MSG (no correlation_id): another agent's
    later chat in the channel is compared with the draft all the same."""
    bot = await agent("bot", model=SlowAnswers(0.5), **FAST)
    asker = await participant("asker", kind="service")
    other = await gw.agentchat("chatbot")
    stream = asker.client.messages()
    question = await say(asker.client, stream, "question 17")
    await next_from(stream, "bot", ("floor/responding-to",))  # claimed; the MSG claims nothing
    await other.send({"type": "MSG", "to": "#general", "content": "my answer to asker"})
    cancel = await next_from(stream, "bot", ("reasoning/cancel",))
    assert cancel.payload["message"].startswith("chatbot already made the same point")
    assert await collect(gw, [bot], asker.client, stream, answers(question)) == []
    await other.close()


async def test_a_humans_claim_beats_the_agent(
    participant: MakeParticipant, agent: MakeAgent
) -> None:
    model = SlowAnswers(5.0)
    await agent("bot", model=model, **FAST)
    asker = await participant("asker", kind="service")
    human = await participant("zoe", kind="human")
    watch = human.client.messages()
    stream = asker.client.messages()
    question = await say(asker.client, stream, "question 5: opinions?")
    claim = await next_from(watch, "bot", ("floor/responding-to",))
    later = {"msg_id": question.id, "started_at": claim.payload["started_at"] + 500}
    await human.client.send(Envelope(kind="floor/responding-to", channel="#general",
                                     payload=later))  # fmt: skip
    cancel = await next_from(stream, "bot", ("reasoning/cancel",))
    assert cancel.payload["reason"] == "yielded"
    # the inference, if the YIELD found it already running, was cancelled: none finished
    assert model.finished == 0 and model.started == model.cancelled


async def test_dms_mentions_and_with_humans_exempt_people_are_answered_at_once_without_a_claim(
    gw: RunningGateway, participant: MakeParticipant, agent: MakeAgent
) -> None:
    bot = await agent("bot", model=SlowAnswers(0.05), humans="exempt", **SLOW_CSMA)
    asker = await participant("asker", kind="service")
    human = await participant("alice", kind="human")
    watch = human.client.messages()
    stream = asker.client.messages()
    loop = asyncio.get_running_loop()
    start = loop.time()
    await asker.client.send(Envelope(kind="chat", to=["bot"], payload={"text": "question 6"}))
    dm = await next_from(stream, "bot", ("chat",), 3)
    assert dm.to == ["asker"] and dm.channel is None
    mention = await say(asker.client, stream, "@bot question 7")
    assert answers(mention)(await next_from(stream, "bot", ("chat",), 3))
    from_human = await say(human.client, watch, "question 8 from a person")
    assert answers(from_human)(await next_from(watch, "bot", ("chat",), 3))
    assert loop.time() - start < 3  # no 5-8 s CSMA delay for any of them
    claims = await collect(gw, [bot], human.client, watch, lambda e: e.kind.startswith("floor/"))
    assert claims == []
    assert [e.kind for e in bot.floor.events] == ["exempt"] * 3
    assert [e.detail for e in bot.floor.events] == [
        "a direct message",
        "mentions me",
        "from a human",
    ]


async def test_a_humans_channel_question_is_under_floor_control_by_default(
    gw: RunningGateway, participant: MakeParticipant, agent: MakeAgent
) -> None:
    bots = [await agent(f"bot{i}", model=SlowAnswers(0.2), **FAST) for i in range(2)]
    human = await participant("alice", kind="human")
    stream = human.client.messages()
    question = await say(human.client, stream, "question 9 for the room")
    replies = await collect(gw, bots, human.client, stream, answers(question))
    assert len(replies) == 1


async def test_schedule_callback_round_trip(
    gw: RunningGateway, participant: MakeParticipant, agent: MakeAgent
) -> None:
    bot = await agent("bot", model=SlowAnswers(0.01), **FAST)
    other = await agent("other", model=SlowAnswers(0.01), **FAST)
    fired: list[CallbackFired] = []
    theirs: list[CallbackFired] = []
    bot.on_callback(fired.append)
    other.on_callback(theirs.append)
    watcher = await participant("watcher", kind="human")
    stream = watcher.client.messages()
    await bot.schedule_callback(0.1, "ping")
    await bot.wait_until(lambda: len(fired) == 1)
    note = fired[0]
    assert (note.payload, note.channel, note.origin) == ("ping", None, "bot")
    assert note.envelope.from_ == SERVER_ID and note.cb_id
    await bot.schedule_callback(0.05, '{"task": 1}', channel="#general")
    await bot.wait_until(lambda: len(fired) == 2)
    assert fired[1].channel == "#general" and fired[1].json() == {"task": 1}
    # the channel saw the delivery, the marker chats themselves were never relayed
    seen = await collect(gw, [bot, other], watcher.client, stream, lambda e: e.kind == "chat")
    assert [e.from_ for e in seen] == [SERVER_ID]
    assert theirs == []  # another member's callback is not the other agent's
    assert not any(e.from_ in ("bot", "other") for e in seen)  # no answer turn by itself


async def test_an_agents_note_hooks_can_be_removed(
    gw: RunningGateway, participant: MakeParticipant, agent: MakeAgent
) -> None:
    bot = await agent("bot", model=SlowAnswers(0.01), **FAST)
    kept: list[CallbackFired] = []
    stop = bot.on_callback(lambda note: note.payload == "question time")  # would answer it
    bot.on_callback(kept.append)
    bot.on_wake(kept.append)()
    stop()
    watcher = await participant("watcher", kind="human")
    stream = watcher.client.messages()
    await bot.schedule_callback(0.05, "question time")
    await bot.wait_until(lambda: len(kept) == 1)
    assert await collect(gw, [bot], watcher.client, stream, chats_from("bot")) == []


async def test_a_callback_hook_may_ask_for_a_turn(
    participant: MakeParticipant, agent: MakeAgent
) -> None:
    bot = await agent("bot", model=SlowAnswers(0.01), **FAST)
    bot.on_callback(lambda note: note.payload == "question time")
    watcher = await participant("watcher", kind="human")
    stream = watcher.client.messages()
    await bot.schedule_callback(0.05, "question time")
    reply = await next_from(stream, "bot", ("chat",), 3)
    assert reply.channel == "#general" and reply.payload["text"] == "my answer to server"
    assert reply.correlation_ids() == []


async def test_sleep_then_wake_with_a_buffered_dm(
    participant: MakeParticipant, agent: MakeAgent
) -> None:
    bot = await agent("bot", model=SlowAnswers(0.01), **FAST)
    woke: list[Wake] = []
    bot.on_wake(woke.append)
    asker = await participant("asker", kind="service")
    await bot.wait_for_tools("asker")  # discovery sends tools/list, which would wake it
    stream = asker.client.messages()
    await bot.sleep(0.4, "buffer")
    await asker.client.wait_for(
        "system/presence",
        lambda _e: asker.client.participants.get("bot", {}).get("presence") == "sleeping",
        timeout=3,
    )
    assert bot.floor.asleep
    await asker.client.send(Envelope(kind="chat", to=["bot"], payload={"text": "question 10"}))
    reply = await next_from(stream, "bot", ("chat",), 3)
    assert len(woke) == 1 and woke[0].buffered == 1 and not bot.floor.asleep
    assert reply.to == ["asker"] and reply.payload["text"] == "my answer to asker"


async def test_csma_through_a_server_callback_rereads_the_history(
    gw: RunningGateway, participant: MakeParticipant, agent: MakeAgent
) -> None:
    bot = await agent(
        "bot", model=SlowAnswers(0.01), csma_timer="server", **{**FAST, "csma_max_ms": 100}
    )
    asker = await participant("asker", kind="service")
    stream = asker.client.messages()
    question = await say(asker.client, stream, "question 11")
    assert len(await collect(gw, [bot], asker.client, stream, answers(question))) == 1
    assert "callback" not in kinds(bot, question.id)  # the CSMA check was consumed
    slow = await agent(
        "slowbot",
        model=SlowAnswers(0.01),
        csma_timer="server",
        **{**FAST, "csma_min_ms": 300, "csma_max_ms": 300},
    )
    slow.floor.observe = lambda env: None  # type: ignore[method-assign]  # misses live answers
    helper = await participant("helper", kind="service")
    await bot.stop()
    second = await say(asker.client, stream, "question 12")
    await helper.client.send(
        Envelope(kind="chat", correlation_id=[second.id], payload={"text": "my answer to asker"})
    )
    replies = await collect(gw, [slow], asker.client, stream, answers(second))
    seen = slow.floor.coordinator.seen(second.id).replies
    assert [r.who for r in seen] == ["helper"]  # found by re-reading (observe saw nothing)
    # it claims, and the gateway refuses the claim: the message was answered already
    assert kinds(slow, second.id)[-2:] == ["claim", "yield"]
    (refused,) = [e for e in slow.floor.events if e.kind == "yield"]
    assert refused.winner == "helper"
    assert [e.from_ for e in replies] == ["helper"]


async def test_messages_within_the_settle_window_are_one_turn(
    gw: RunningGateway, participant: MakeParticipant, agent: MakeAgent
) -> None:
    bot = await agent(
        "bot", model=SlowAnswers(0.01), **{**FAST, "csma_min_ms": 400, "csma_max_ms": 400}
    )
    asker = await participant("asker", kind="service")
    stream = asker.client.messages()
    first = await say(asker.client, stream, "question 13")
    second = await say(asker.client, stream, "question 14")
    replies = await collect(gw, [bot], asker.client, stream, chats_from("bot"))
    assert len(replies) == 1
    assert replies[0].correlation_ids() == [first.id, second.id]
    assert kinds(bot, second.id) == ["join"]


async def test_an_idle_agent_nudges_itself(participant: MakeParticipant, agent: MakeAgent) -> None:
    watcher = await participant("watcher", kind="human")
    stream = watcher.client.messages()
    bot = await agent("bot", model=SlowAnswers(0.01), idle_nudge_s=0.2, **FAST)
    reply = await next_from(stream, "bot", ("chat",), 3)
    assert reply.channel == "#general" and reply.correlation_ids() == []
    assert "nudge" in [e.kind for e in bot.floor.events]
