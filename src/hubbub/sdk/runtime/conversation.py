"""Each agent's conversation history, with rollback of a pending tool-calling round.

A history is *valid* when a strict provider accepts it: every assistant tool call is answered
by exactly one ``tool`` message right after it (before any other message), and no ``tool``
message answers a call that is not open. :func:`history_problems` lists what breaks that.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from hubbub.errors import HubbubError
from hubbub.llm.base import Message, ToolCall

log = logging.getLogger("hubbub.sdk.runtime")


class HistoryError(HubbubError, ValueError):
    """A history a strict provider would refuse (the message lists every problem)."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("invalid conversation history: " + "; ".join(problems))
        self.problems = list(problems)


def history_problems(messages: Sequence[Message], *, allow_pending: bool = False) -> list[str]:
    """What a strict provider would refuse in ``messages`` (empty when valid).

    With ``allow_pending`` the last assistant message may still wait for some of its results
    (a tool-calling round in progress), as long as nothing but results follows it.
    """
    problems: list[str] = []
    open_calls: dict[str, int] = {}  # call id -> index of its assistant message
    for index, message in enumerate(messages):
        if message.role == "tool":
            call_id = message.tool_call_id
            if call_id is None:
                problems.append(f"message {index}: tool result without a tool_call_id")
            elif call_id not in open_calls:
                problems.append(f"message {index}: orphan tool result for call {call_id!r}")
            else:
                del open_calls[call_id]
            continue
        for call_id, at in open_calls.items():
            problems.append(f"message {at}: tool call {call_id!r} has no result")
        open_calls.clear()
        if message.role == "assistant":
            for call in message.tool_calls:
                if call.id in open_calls:
                    problems.append(f"message {index}: tool call id {call.id!r} used twice")
                open_calls[call.id] = index
    if not allow_pending:
        for call_id, at in open_calls.items():
            problems.append(f"message {at}: tool call {call_id!r} has no result")
    return problems


def check_history(messages: Sequence[Message], *, allow_pending: bool = False) -> None:
    """Raise :class:`HistoryError` unless a strict provider accepts ``messages``."""
    problems = history_problems(messages, allow_pending=allow_pending)
    if problems:
        raise HistoryError(problems)


class Conversations:
    """Per-agent histories of neutral :class:`~hubbub.llm.Message` items."""

    def __init__(self) -> None:
        self._histories: dict[str, list[Message]] = {}
        self._checkpoints: dict[str, int] = {}

    def history(self, agent_id: str) -> list[Message]:
        """A copy of the history of ``agent_id``."""
        return list(self._histories.get(agent_id, ()))

    def append(self, agent_id: str, message: Message) -> None:
        """Add ``message`` at the end of the history of ``agent_id``."""
        self._histories.setdefault(agent_id, []).append(message)

    def replace(self, agent_id: str, messages: Sequence[Message]) -> None:
        """Set the whole history of ``agent_id`` (loading, tests, repair)."""
        self._histories[agent_id] = list(messages)
        self._checkpoints.pop(agent_id, None)

    # ------------------------------------------------------------------ tool rounds

    def checkpoint(self, agent_id: str) -> None:
        """Mark the end of the history as the start of a tool-calling round."""
        self._checkpoints[agent_id] = len(self._histories.get(agent_id, ()))

    def commit(self, agent_id: str) -> None:
        """The round is complete (every result recorded): nothing is pending any more."""
        self._checkpoints.pop(agent_id, None)

    def has_checkpoint(self, agent_id: str) -> bool:
        """Whether a tool-calling round of ``agent_id`` is pending."""
        return agent_id in self._checkpoints

    def get_last_tool_call(self, agent_id: str) -> ToolCall | None:
        """The first unanswered call of the pending round, if any."""
        at = self._checkpoints.get(agent_id)
        history = self._histories.get(agent_id, [])
        if at is None or at >= len(history) or not history[at].tool_calls:
            return None
        answered = {m.tool_call_id for m in history[at + 1 :] if m.role == "tool"}
        return next((c for c in history[at].tool_calls if c.id not in answered), None)

    def rollback_pending_tool_calls(self, agent_id: str) -> list[Message]:
        """Remove the pending round's assistant tool-call message and its (partial) results.

        Everything before the checkpoint is untouched, and messages after it that are not
        part of the round (user messages) are kept. Returns the removed messages.
        """
        at = self._checkpoints.pop(agent_id, None)
        history = self._histories.get(agent_id)
        if at is None or history is None:
            return []
        if at >= len(history) or history[at].role != "assistant" or not history[at].tool_calls:
            log.warning("Tool call reference not found in history (agent %s)", agent_id)
            return self.repair(agent_id)  # keep what is valid, drop orphans
        ids = {call.id for call in history[at].tool_calls}
        removed = [history[at]]
        kept: list[Message] = []
        for message in history[at + 1 :]:
            if message.role == "tool" and message.tool_call_id in ids:
                removed.append(message)
            else:
                kept.append(message)
        self._histories[agent_id] = history[:at] + kept
        return removed

    def remove_tool_call_entry(self, agent_id: str, call_id: str) -> bool:
        """Remove the assistant message carrying call ``call_id``; ``False`` if not found."""
        history = self._histories.get(agent_id, [])
        for index in range(len(history) - 1, -1, -1):
            if any(c.id == call_id for c in history[index].tool_calls):
                del history[index]
                return True
        log.warning("Tool call reference not found in history: %s (agent %s)", call_id, agent_id)
        return False

    def remove_tool_response_entry(self, agent_id: str, call_id: str) -> bool:
        """Remove the tool result answering ``call_id``; ``False`` if not found."""
        history = self._histories.get(agent_id, [])
        for index in range(len(history) - 1, -1, -1):
            if history[index].role == "tool" and history[index].tool_call_id == call_id:
                del history[index]
                return True
        log.warning("Tool call reference not found in history: %s (agent %s)", call_id, agent_id)
        return False

    def repair(self, agent_id: str) -> list[Message]:
        """Make the history valid again: drop unanswered tool-call rounds and orphan results.

        User and system messages are never dropped. Returns the removed messages.
        """
        self._checkpoints.pop(agent_id, None)
        history = self._histories.get(agent_id, [])
        if not history_problems(history):
            return []
        kept: list[Message] = []
        removed: list[Message] = []
        index = 0
        while index < len(history):
            message = history[index]
            if message.role == "assistant" and message.tool_calls:
                end = index + 1
                while end < len(history) and history[end].role == "tool":
                    end += 1
                block = history[index:end]
                if history_problems(block):
                    removed.extend(block)
                else:
                    kept.extend(block)
                index = end
                continue
            if message.role == "tool":
                removed.append(message)
            else:
                kept.append(message)
            index += 1
        self._histories[agent_id] = kept
        return removed


__all__ = ["Conversations", "HistoryError", "check_history", "history_problems"]
