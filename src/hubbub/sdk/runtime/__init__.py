"""The agent runtime (document 002): one processing sequence per agent, with interruption.

Parts: :class:`MessageBus` (one bounded FIFO inbox per agent), :class:`ActiveSet` (agents
processing now), :class:`LLMHandler` (the tool-calling loop), :class:`ConversationManager`
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
    ConversationManager,
    HistoryError,
    check_history,
    history_problems,
)
from hubbub.sdk.runtime.llm_handler import (
    Aborted,
    CancelOutcome,
    LLMHandler,
    ModelFn,
    Phase,
    ToolFn,
)
from hubbub.sdk.runtime.runtime import AgentRuntime, Reply

__all__ = [
    "DEFAULT_MAX_QUEUE",
    "Aborted",
    "ActiveSet",
    "AgentMessage",
    "AgentRuntime",
    "CancelOutcome",
    "ConversationManager",
    "Delivery",
    "HistoryError",
    "LLMHandler",
    "MessageBus",
    "ModelFn",
    "Phase",
    "QueueFull",
    "Reply",
    "ToolFn",
    "UnknownAgent",
    "check_history",
    "history_problems",
]
