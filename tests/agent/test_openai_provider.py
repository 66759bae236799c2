"""The openai-compatible provider through the official ``openai`` SDK against a real local
HTTP server: streaming, tool-call deltas, message conversion, errors, cancellation, and an
agent end to end."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator

import pytest

from hubbub.llm import LLMError, Message, TextDelta, ToolCall, ToolCallEvent, ToolSpec
from hubbub.llm.base import Done, StreamEvent
from hubbub.llm.openai_compat import OpenAICompatible, to_openai_messages, to_openai_tools
from tests.agent.conftest import MakeAgent, calculator
from tests.agent.fake_openai_server import FakeOpenAIServer, Reply
from tests.sdk.conftest import MakeParticipant

MULTIPLY = ToolSpec(
    name="calculator__multiply",
    description="calculator/multiply: Multiply two integers.",
    parameters={"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
    display_name="calculator/multiply",
)


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAIServer]:
    async with FakeOpenAIServer() as s:
        yield s


@pytest.fixture
async def model(server: FakeOpenAIServer) -> AsyncIterator[OpenAICompatible]:
    m = OpenAICompatible("fake-model", base_url=server.base_url, api_key="sk-test", max_retries=0)
    yield m
    await m.aclose()


async def events_of(model: OpenAICompatible, messages: list[Message]) -> list[StreamEvent]:
    async with contextlib.aclosing(model.stream(messages, [MULTIPLY])) as stream:
        return [e async for e in stream]


async def test_streams_text_in_deltas(server: FakeOpenAIServer, model: OpenAICompatible) -> None:
    server.replies.append(Reply(text="Hello there, alice!", chunk_size=4))
    events = await events_of(model, [Message.user("alice: hi")])
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert deltas == ["Hell", "o th", "ere,", " ali", "ce!"]
    done = events[-1]
    assert isinstance(done, Done)
    assert done.completion.text == "Hello there, alice!"
    assert done.completion.finish_reason == "stop" and done.completion.model == "fake-model"
    assert done.completion.tool_calls == ()


async def test_assembles_tool_calls_from_deltas(
    server: FakeOpenAIServer, model: OpenAICompatible
) -> None:
    server.replies.append(
        Reply(
            text="Let me compute.",
            tool_calls=[
                ("call_1", "calculator__multiply", '{"a": 12, "b": 7}'),
                ("call_2", "calculator__add", '{"a": 3, "b": 4}'),
            ],
            chunk_size=2,
        )
    )
    events = await events_of(model, [Message.user("alice: what is 12*7 and 3+4")])
    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    assert calls == [
        ToolCall("call_1", "calculator__multiply", {"a": 12, "b": 7}),
        ToolCall("call_2", "calculator__add", {"a": 3, "b": 4}),
    ]
    done = events[-1]
    assert isinstance(done, Done)
    assert done.completion.finish_reason == "tool_calls"
    assert done.completion.tool_calls == tuple(calls)
    assert done.completion.text == "Let me compute."


async def test_bad_tool_arguments_are_reported_not_raised(
    server: FakeOpenAIServer, model: OpenAICompatible
) -> None:
    server.replies.append(Reply(tool_calls=[("c1", "calculator__multiply", '{"a": 12,')]))
    completion = await model.complete([Message.user("x")], [MULTIPLY])
    (call,) = completion.tool_calls
    assert call.arguments == {} and call.error is not None
    assert call.error.startswith("the arguments are not valid JSON")


async def test_sends_the_conversation_and_tools_in_openai_form(
    server: FakeOpenAIServer, model: OpenAICompatible
) -> None:
    call = ToolCall("call_1", "calculator__multiply", {"a": 12, "b": 7})
    conversation = [
        Message.system("You are a bot."),
        Message.user("alice: what is 12*7"),
        Message.assistant("", [call]),
        Message.tool_result(call, "84"),
    ]
    await model.complete(conversation, [MULTIPLY])
    body = server.requests[-1]
    assert body["model"] == "fake-model" and body["stream"] is True
    assert body["messages"] == [
        {"role": "system", "content": "You are a bot."},
        {"role": "user", "content": "alice: what is 12*7"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "calculator__multiply", "arguments": '{"a": 12, "b": 7}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "84"},
    ]
    assert body["tools"] == to_openai_tools([MULTIPLY])
    assert body["tools"][0]["function"]["name"] == "calculator__multiply"
    assert server.headers[-1]["authorization"] == "Bearer sk-test"
    assert "temperature" not in body and "max_tokens" not in body
    assert to_openai_messages(conversation) == body["messages"]


async def test_cancelling_closes_the_http_request(
    server: FakeOpenAIServer, model: OpenAICompatible
) -> None:
    server.replies.append(Reply(text="This will take a while", hang=True))
    task = asyncio.create_task(model.complete([Message.user("alice: write an essay")]))
    await asyncio.wait_for(server.streaming.wait(), 5)
    await asyncio.sleep(0.05)  # the client is now blocked reading the open stream
    cancelled_at = time.monotonic()
    task.cancel()
    await asyncio.wait_for(server.disconnected.wait(), 2)
    assert server.disconnected_at is not None
    latency = server.disconnected_at - cancelled_at
    print(f"openai-compatible: the server saw the disconnect {latency * 1000:.2f} ms after cancel")
    # the server would stream forever (hang=True): seeing the disconnect at all is the
    # behaviour; how fast is printed (a timed bound fails on a loaded machine)
    assert latency >= 0
    with pytest.raises(asyncio.CancelledError):
        await task
    # the model is still usable afterwards
    server.replies.append(Reply(text="fine"))
    assert (await model.complete([Message.user("again")])).text == "fine"


async def test_http_errors_become_llm_errors_with_a_hint(
    server: FakeOpenAIServer, model: OpenAICompatible
) -> None:
    server.replies.append(Reply(status=401, error="Incorrect API key provided"))
    with pytest.raises(LLMError, match=r"answered 401: .*Incorrect API key.*OPENAI_API_KEY") as e:
        await model.complete([Message.user("x")])
    assert e.value.status == 401 and e.value.provider == "openai"
    server.replies.append(Reply(status=404, error="model 'fake-model' not found"))
    with pytest.raises(LLMError, match="is model 'fake-model' served there"):
        await model.complete([Message.user("x")])


async def test_an_unreachable_server_is_a_clear_error() -> None:
    async with FakeOpenAIServer() as gone:
        url = gone.base_url
    model = OpenAICompatible("m", base_url=url, api_key="k", max_retries=0, timeout=2)
    with pytest.raises(LLMError, match=r"could not reach the model server at http://127\.0\.0\.1"):
        await model.complete([Message.user("x")])
    await model.aclose()


async def test_temperature_and_max_tokens_are_sent_when_set(server: FakeOpenAIServer) -> None:
    model = OpenAICompatible(
        "m", base_url=server.base_url, api_key="k", temperature=0.2, max_tokens=50
    )
    await model.complete([Message.user("x")])
    assert server.requests[-1]["temperature"] == 0.2 and server.requests[-1]["max_tokens"] == 50
    await model.aclose()


async def test_an_agent_answers_through_the_openai_provider(
    server: FakeOpenAIServer, participant: MakeParticipant, agent: MakeAgent
) -> None:
    """The whole stack: gateway, discovery, the official openai client, tool call, answer."""
    _, calls = await calculator(participant)
    server.replies.extend(
        [
            Reply(
                text="I'll multiply.",
                tool_calls=[("call_9", "calculator__multiply", json.dumps({"a": 12, "b": 7}))],
            ),
            Reply(text="12 times 7 is 84."),
        ]
    )
    bot = await agent("assistant", provider="openai", base_url=server.base_url, api_key="k")
    await bot.wait_for_tools("calculator")
    human = await participant("alice", kind="human")
    answered = human.client.expect("chat", lambda e: e.from_ == "assistant")
    await human.chat("@assistant what is 12*7?")
    answer = await asyncio.wait_for(answered, 5)
    assert answer.payload["text"] == "12 times 7 is 84."
    assert calls == ["multiply 12 7"]
    first, second = server.requests
    assert {t["function"]["name"] for t in first["tools"]} == {
        "calculator__add",
        "calculator__multiply",
        "calculator__divide",
    }
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_9", "content": "84"}
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "calculator__multiply"
