"""The agent runtime (document 002): one processing sequence per agent, with interruption.

Parts: :class:`MessageBus` (one bounded FIFO inbox per agent), :class:`ActiveSet` (agents
processing now), :class:`ToolLoop` (the tool-calling loop), :class:`Conversations`
(each agent's history) and :class:`AgentRuntime`, which wires them. Guide: ``docs/runtime.md``.
"""

from hubbub.sdk.runtime.active import ActiveSet
from hubbub.sdk.runtime.bus import (
    DEFAULT_MAX_QUEUE,
    AgentMessage,
    Delivery,
    MessageBus,
    QueueFull,
    UnknownAgent,
)
from hubbub.sdk.runtime.conversation import (
    Conversations,
    HistoryError,
    check_history,
    history_problems,
)
from hubbub.sdk.runtime.runtime import AgentRuntime, Reply
from hubbub.sdk.runtime.tool_loop import (
    Aborted,
    CancelOutcome,
    ModelFn,
    Phase,
    ToolFn,
    ToolLoop,
)

__all__ = [
    "DEFAULT_MAX_QUEUE",
    "Aborted",
    "ActiveSet",
    "AgentMessage",
    "AgentRuntime",
    "CancelOutcome",
    "Conversations",
    "Delivery",
    "HistoryError",
    "MessageBus",
    "ModelFn",
    "Phase",
    "QueueFull",
    "Reply",
    "ToolFn",
    "ToolLoop",
    "UnknownAgent",
    "check_history",
    "history_problems",
]
