"""The message bus: one bounded FIFO inbox per agent, and the messages it carries."""

from __future__ import annotations

import enum
import itertools
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from hubbub.errors import HubbubError

log = logging.getLogger("hubbub.sdk.runtime")

DEFAULT_MAX_QUEUE: Final = 100
"""How many messages an agent's inbox holds before new ones are rejected."""

_ids = itertools.count(1)


def _next_id() -> str:
    return f"m{next(_ids)}"


@dataclass(frozen=True)
class AgentMessage:
    """One message addressed to one agent; ``content`` is what the model reads."""

    agent_id: str
    content: str
    sender: str = "user"
    id: str = field(default_factory=_next_id)


class Delivery(enum.Enum):
    """What happened to a message the bus accepted."""

    STARTED = "started"
    """The agent was idle: a processing sequence started with this message."""
    INTERRUPTED = "interrupted"
    """The agent's tool-calling loop was interrupted; this message is processed next."""
    QUEUED = "queued"
    """The agent is busy and could not be interrupted; the message waits in its inbox (FIFO)."""


class QueueFull(HubbubError):
    """The agent's inbox is full: the message was rejected, nothing was queued."""

    def __init__(self, message: AgentMessage, limit: int) -> None:
        super().__init__(
            f"message {message.id} from {message.sender} rejected: the inbox of agent "
            f"{message.agent_id!r} is full ({limit} messages waiting); retry later"
        )
        self.message = message
        self.limit = limit


class UnknownAgent(HubbubError, KeyError):
    """A message was sent to an agent the runtime does not host."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown agent"


Router = Callable[[AgentMessage], Delivery]


class MessageBus:
    """Bounded FIFO inboxes, one per agent; :meth:`send` asks the router what to do first."""

    def __init__(self, max_queue: int = DEFAULT_MAX_QUEUE) -> None:
        if max_queue < 1:
            raise ValueError(f"max_queue must be at least 1, not {max_queue}")
        self.max_queue = max_queue
        self._inboxes: dict[str, deque[AgentMessage]] = {}
        self._router: Router | None = None

    def attach(self, router: Router) -> None:
        """Route every :meth:`send` through ``router`` (the runtime checks its active set)."""
        self._router = router

    def send(self, message: AgentMessage) -> Delivery:
        """Deliver ``message``: start, interrupt or queue (raises :class:`QueueFull`)."""
        if self._router is None:
            self.enqueue(message)
            return Delivery.QUEUED
        return self._router(message)

    def enqueue(self, message: AgentMessage) -> None:
        """Append ``message`` to its agent's inbox; raise :class:`QueueFull` when full."""
        inbox = self._inboxes.setdefault(message.agent_id, deque())
        if len(inbox) >= self.max_queue:
            log.warning("Message queue full for agent %s", message.agent_id)
            raise QueueFull(message, self.max_queue)
        inbox.append(message)

    def requeue(self, message: AgentMessage) -> None:
        """Put ``message`` back at the head of its inbox (never rejected: it was accepted)."""
        self._inboxes.setdefault(message.agent_id, deque()).appendleft(message)

    def pop(self, agent_id: str) -> AgentMessage | None:
        """The oldest waiting message of ``agent_id``, removed; ``None`` if there is none."""
        inbox = self._inboxes.get(agent_id)
        return inbox.popleft() if inbox else None

    def pending(self, agent_id: str) -> tuple[AgentMessage, ...]:
        """The waiting messages of ``agent_id``, oldest first."""
        return tuple(self._inboxes.get(agent_id, ()))

    def size(self, agent_id: str) -> int:
        """How many messages wait for ``agent_id``."""
        return len(self._inboxes.get(agent_id, ()))


__all__ = [
    "DEFAULT_MAX_QUEUE",
    "AgentMessage",
    "Delivery",
    "MessageBus",
    "QueueFull",
    "Router",
    "UnknownAgent",
]
