"""The strict-provider history checker and the conversation manager's rollback and repair."""

from __future__ import annotations

import pytest

from hubbub.llm.base import Message, ToolCall
from hubbub.sdk.runtime import Conversations, HistoryError, check_history, history_problems

A = ToolCall("a", "t")
B = ToolCall("b", "t")


def test_valid_histories_pass() -> None:
    check_history([])
    check_history([Message.user("hi"), Message.assistant("hello")])
    check_history(
        [
            Message.user("q"),
            Message.assistant("", [A, B]),
            Message.tool_result(B, "2"),
            Message.tool_result(A, "1"),
            Message.assistant("done"),
            Message.user("again"),
        ]
    )


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([Message.user("q"), Message.tool_result(A, "1")], "orphan tool result for call 'a'"),
        ([Message.assistant("", [A])], "tool call 'a' has no result"),
        (
            [Message.assistant("", [A]), Message.user("x"), Message.tool_result(A, "1")],
            "tool call 'a' has no result",
        ),
        (
            [Message.assistant("", [A]), Message.tool_result(A, "1"), Message.tool_result(A, "1")],
            "orphan tool result for call 'a'",
        ),
        ([Message.assistant("", [A, A])], "tool call id 'a' used twice"),
        ([Message("tool", "x")], "tool result without a tool_call_id"),
    ],
)
def test_invalid_histories_are_refused_with_the_reason(
    messages: list[Message], problem: str
) -> None:
    with pytest.raises(HistoryError) as raised:
        check_history(messages)
    assert any(problem in p for p in raised.value.problems), raised.value.problems
    assert str(raised.value).startswith("invalid conversation history: ")


def test_a_pending_round_is_allowed_only_when_asked() -> None:
    pending = [Message.user("q"), Message.assistant("", [A, B]), Message.tool_result(A, "1")]
    assert history_problems(pending, allow_pending=True) == []
    assert history_problems(pending) == ["message 1: tool call 'b' has no result"]


def test_rollback_removes_the_pending_round_and_keeps_everything_before() -> None:
    conversations = Conversations()
    before = [
        Message.user("q"),
        Message.assistant("", [A]),
        Message.tool_result(A, "1"),
    ]
    conversations.replace("x", before)
    conversations.checkpoint("x")
    conversations.append("x", Message.assistant("thinking", [B, ToolCall("c", "t")]))
    conversations.append("x", Message.tool_result(B, "2"))
    assert conversations.get_last_tool_call("x") == ToolCall("c", "t")
    removed = conversations.rollback_pending_tool_calls("x")
    assert len(removed) == 2
    assert conversations.history("x") == before
    assert conversations.rollback_pending_tool_calls("x") == []  # nothing pending any more


def test_repair_drops_broken_rounds_and_orphans_but_never_user_messages() -> None:
    conversations = Conversations()
    conversations.replace(
        "x",
        [
            Message.user("1"),
            Message.assistant("", [A]),
            Message.user("2"),
            Message.tool_result(B, "orphan"),
            Message.assistant("", [B]),
            Message.tool_result(B, "ok"),
        ],
    )
    removed = conversations.repair("x")
    assert [m.content for m in removed] == ["", "orphan"]
    assert conversations.history("x") == [
        Message.user("1"),
        Message.user("2"),
        Message.assistant("", [B]),
        Message.tool_result(B, "ok"),
    ]
    check_history(conversations.history("x"))
