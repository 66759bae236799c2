"""Document 003's ReAct steps as overridable methods, on a real gateway with the offline model:
``reason()`` returns a ``Thought``, ``act()`` runs one of its tool calls; a subclass that
overrides either changes what the agent does."""

from __future__ import annotations

from collections.abc import Sequence

from hubbub.llm.base import Message, ToolCall
from hubbub.sdk import Agent, Thought, Turn
from tests.agent.conftest import MakeAgent, calculator
from tests.agent.test_agent import say, until_answer
from tests.sdk.conftest import MakeParticipant


class ChecksFirst(Agent):
    """Always asks the calculator for 40 + 2 before thinking for itself; keeps every turn's
    thoughts as ``reason`` saw them."""

    seen: list[list[Thought]]

    async def reason(self, turn: Turn, history: Sequence[Message]) -> Thought:
        if not turn.thoughts:
            call = ToolCall("check-1", "calculator/add", {"a": 40, "b": 2})
            thought = Thought("Let me check with the calculator first.", (call,))
        else:
            thought = await super().reason(turn, history)
        self.seen = [*getattr(self, "seen", []), [*turn.thoughts, thought]]
        return thought


class Cached(Agent):
    """Answers multiplications from a cache instead of calling the calculator."""

    async def act(self, turn: Turn, call: ToolCall) -> Message:
        if self.label(call.name) == "calculator/multiply":
            a, b = call.arguments["a"], call.arguments["b"]
            return Message.tool_result(call, f"{a * b} (cached)")
        return await super().act(turn, call)


async def test_overriding_reason_changes_what_the_agent_does(
    participant: MakeParticipant, agent: MakeAgent
) -> None:
    _, calls = await calculator(participant)
    bot = await agent("assistant", cls=ChecksFirst)
    await bot.wait_for_tools("calculator")
    human = await participant("alice", kind="human")
    stream = human.client.messages()
    await say(human.client, stream, "hello @assistant")
    events = await until_answer(stream, "assistant")
    plan = next(e for e in events if e.kind == "reasoning/thought")
    assert plan.payload == {
        "message": "Let me check with the calculator first.",
        "actions": [{"tool": "calculator/add", "arguments": {"a": 40, "b": 2}}],
    }
    assert calls == ["add 40 2"]  # a greeting alone calls no tool
    assert events[-1].payload["text"] == "The tools answered: 42"
    seen = bot.seen  # type: ignore[attr-defined]
    first, second = seen[0][-1], seen[1][-1]
    assert (first.action, first.action_input) == ("calculator/add", {"a": 40, "b": 2})
    assert first.completion is None and not first.final
    assert second.final and second.action == "respond" and second.completion is not None
    assert seen[1][0] is first  # turn.thoughts: the earlier thoughts of the turn


async def test_overriding_act_changes_how_actions_run(
    participant: MakeParticipant, agent: MakeAgent
) -> None:
    _, calls = await calculator(participant)
    bot = await agent("assistant", cls=Cached)
    await bot.wait_for_tools("calculator")
    human = await participant("alice", kind="human")
    stream = human.client.messages()
    await say(human.client, stream, "what is 12*7 and 3+4")
    *_, answer = await until_answer(stream, "assistant")
    assert answer.payload["text"] == "12 * 7 = 84 (cached); 3 + 4 = 7."
    assert calls == ["add 3 4"]  # multiply never reached the calculator
