"""The offline scripted model: deterministic rules, the script file, pacing, cancellation."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from hubbub.llm import Message, OfflineModel, OfflineScript, TextDelta, ToolCall, ToolSpec
from hubbub.llm.offline import ScriptError, expressions

NUMBERS = {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
           "required": ["x", "y"]}  # fmt: skip
MULTIPLY = ToolSpec("calc__multiply", "Multiply.", NUMBERS, "calc/multiply")
ADD = ToolSpec("calc__add", "Add.", NUMBERS, "calc/add")
EXAMPLE_SCRIPT = Path(__file__).parents[2] / "examples" / "offline-script.yaml"


def test_arithmetic_calls_the_tool_named_after_the_operation() -> None:
    model = OfflineModel()
    completion = model.answer([Message.user("alice: what is 12*7")], [ADD, MULTIPLY])
    assert completion.tool_calls == (ToolCall("offline-1", "calc__multiply", {"x": 12, "y": 7}),)
    assert completion.finish_reason == "tool_calls"
    assert completion.text == "I will use calc/multiply."


def test_after_the_tool_results_it_answers_from_them() -> None:
    model = OfflineModel()
    question = Message.user("alice: what is 12 times 7 and 3 plus 4?")
    first = model.answer([question], [ADD, MULTIPLY])
    assert [c.name for c in first.tool_calls] == ["calc__multiply", "calc__add"]
    results = [Message.tool_result(first.tool_calls[0], "84"),
               Message.tool_result(first.tool_calls[1], "boom", is_error=True)]  # fmt: skip
    answer = model.answer([question, first.message(), *results], [ADD, MULTIPLY])
    assert answer.text == "12 * 7 = 84; I could not compute 3 + 4: boom."
    assert answer.tool_calls == ()


def test_without_a_matching_tool_it_computes_directly() -> None:
    model = OfflineModel()
    assert model.answer([Message.user("bob: 10 / 4?")], [ADD]).text == "10 / 4 = 2.5."
    assert model.answer([Message.user("bob: 1 / 0")]).text == (
        "1 / 0 cannot be computed: division by zero."
    )


def test_expressions_are_found_in_text() -> None:
    found = expressions("what is 12*7, 3 x 4, 2.5 minus 1 and 8÷2? not 2024-01")
    assert [e.label() for e in found] == ["12 * 7", "3 * 4", "2.5 - 1", "8 / 2", "2024 - 1"]


def test_greetings_and_the_default_reply() -> None:
    model = OfflineModel()
    assert model.answer([Message.user("carol: hey @bot")]).text == "Hello carol! How can I help?"
    assert model.answer([Message.user("carol: tell me a story")]).text.startswith(
        "Sorry carol, I am the offline scripted model"
    )


def test_classification_prompts_get_a_json_verdict() -> None:
    model = OfflineModel()

    def verdict(text: str, tools: str = "calc/multiply, calc/add") -> dict[str, object]:
        prompt = (
            f"You are bot.\nYour tools: {tools}\nRecent conversation:\n(nothing yet)\n"
            f"New message from alice: {text}\n\nAnswer with should_respond JSON"
        )
        result = json.loads(model.answer([Message.user(prompt)]).text)
        assert isinstance(result, dict)
        return result

    assert verdict("what is 12*7") == {
        "should_respond": True, "confidence": 0.9,
        "reason": "arithmetic that my tools can compute",
    }  # fmt: skip
    assert verdict("can you multiply things?")["should_respond"] is True
    assert verdict("what's the weather?") == {
        "should_respond": False, "confidence": 0.4,
        "reason": "a question, but not about anything my tools cover",
    }  # fmt: skip
    assert verdict("I had pasta for lunch.")["confidence"] == 0.1
    assert verdict("what is 12*7", tools="none")["should_respond"] is False


def test_script_rules_reply_or_call_tools(tmp_path: Path) -> None:
    path = tmp_path / "script.yaml"
    path.write_text(
        """
default_reply: "No idea, {sender}."
rules:
  - match: "\\\\bping\\\\b"
    reply: "pong, {sender}"
  - match: "weather in (?P<city>[A-Za-z]+)"
    tool: weather/forecast
    arguments: {city: "{city}", days: 1}
    then: "Forecast for {city}: {result}"
"""
    )
    model = OfflineModel(OfflineScript.load(path))
    assert model.answer([Message.user("dan: PING")]).text == "pong, dan"
    assert model.answer([Message.user("dan: ???")]).text == "No idea, dan."
    forecast = ToolSpec("weather__forecast", "", {"type": "object"}, "weather/forecast")
    ask = Message.user("dan: what's the weather in Paris")
    first = model.answer([ask], [forecast])
    assert first.tool_calls[0].name == "weather__forecast"
    assert first.tool_calls[0].arguments == {"city": "Paris", "days": 1}
    result = Message.tool_result(first.tool_calls[0], "sunny")
    then = model.answer([ask, first.message(), result], [forecast])
    assert then.text == "Forecast for Paris: sunny"
    assert model.answer([ask]).text == (
        "I would use weather/forecast, but no participant offers it now."
    )


def test_the_example_script_loads() -> None:
    script = OfflineScript.load(EXAMPLE_SCRIPT)
    assert script.rules
    model = OfflineModel(script)
    assert "hubbub" in model.answer([Message.user("eve: what is hubbub?")]).text.lower()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rules: [{match: x, reply: y, colour: red}]", "unknown key 'colour'"),
        ("rules: [{mtch: x, reply: y}]", "did you mean 'match'"),
        ("rules: [{match: '(', reply: y}]", "not a valid regular expression"),
        ("rules: [{match: x}]", "give exactly one of 'reply' or 'tool'"),
        ("rules: {a: 1}", "'rules' must be a list"),
        ("defaults: 1", "unknown key 'defaults'"),
    ],
)
def test_bad_scripts_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ScriptError, match=message):
        OfflineScript.load(path)


async def test_latency_and_token_rate_pace_the_stream() -> None:
    model = OfflineModel(latency_s=0.1, tokens_per_s=50)
    started = time.monotonic()
    deltas: list[str] = []
    async for event in model.stream([Message.user("x: hello")]):
        if isinstance(event, TextDelta):
            deltas.append(event.text)
    elapsed = time.monotonic() - started
    assert "".join(deltas) == "Hello x! How can I help?"
    assert len(deltas) == 6
    assert 0.1 + 6 / 50 <= elapsed < 1.0


async def test_cancellation_interrupts_the_simulated_latency() -> None:
    model = OfflineModel(latency_s=10)
    task = asyncio.create_task(model.complete([Message.user("x: hello")]))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)  # not the 10 s latency
    assert model.calls == 0


def test_negative_pacing_is_refused() -> None:
    with pytest.raises(ValueError, match="latency_s and tokens_per_s must be >= 0"):
        OfflineModel(latency_s=-1)


def _skilled_verdict(model: OfflineModel, text: str, skills: str) -> dict[str, object]:
    prompt = (
        f"You are bot.\nYour skills: {skills}\nYour tools: calc/multiply, calc/add\n"
        f"Recent conversation:\n(nothing yet)\nNew message from alice: {text}\n\n"
        "Answer with should_respond JSON"
    )
    result = json.loads(model.answer([Message.user(prompt)]).text)
    assert isinstance(result, dict)
    return result


def test_a_skilled_agent_without_a_rule_for_a_question_does_not_claim_it() -> None:
    chef = OfflineModel(
        OfflineScript.from_mapping(
            {"rules": [{"match": r"\bpasta\b", "reply": "Boil it 9 minutes."}]}
        )
    )
    assert _skilled_verdict(chef, "how long do I cook pasta?", "cooking")["should_respond"]
    refused = _skilled_verdict(chef, "what should I cook with leeks?", "cooking")
    assert refused == {
        "should_respond": False, "confidence": 0.3,
        "reason": "about cooking, but no rule of mine answers it",
    }  # fmt: skip
    assert not _skilled_verdict(chef, "what is 6*7?", "cooking")["should_respond"]
    maths = OfflineModel()
    assert _skilled_verdict(maths, "what is 6*7?", "math")["should_respond"]
    assert not _skilled_verdict(maths, "is zero a natural number?", "math")["should_respond"]


def test_a_follow_up_uses_the_previous_answer() -> None:
    model = OfflineModel()
    first = [Message.user("alice: what is 6*7?")]
    answer = model.answer(first)
    assert answer.text == "6 * 7 = 42."
    talk = [*first, Message.assistant(answer.text), Message.user("alice: @maths and times 2?")]
    assert model.answer(talk).text == "42 * 2 = 84."
    # with a tool offered, the follow-up is a tool call, and its result answers it
    call = model.answer(talk, [ADD, MULTIPLY])
    assert call.tool_calls == (ToolCall("offline-1", "calc__multiply", {"x": 42, "y": 2}),)
    result = Message.tool_result(call.tool_calls[0], "84")
    done = model.answer([*talk, call.message(), result], [ADD, MULTIPLY])
    assert done.text == "42 * 2 = 84."
    # with nothing before it to build on, a follow-up is not arithmetic
    assert model.answer([Message.user("alice: and times 2?")]).text.startswith("Sorry alice")
