"""What each message an agent hands to its runtime becomes when its turn begins.

The runtime (:mod:`hubbub.sdk.runtime`) queues plain messages; the agent needs more about
each one once its turn starts: the envelope it answers (where the answer goes), the ids the
answer correlates to, and the floor-control batch it belongs to. :class:`TurnInbox` keeps
those, by message id, from the moment the message is handed over until its turn begins
(:meth:`TurnInbox.begin`) or it is refused (:meth:`TurnInbox.forget`). No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from hubbub.protocol.envelope import Envelope
from hubbub.sdk.react import Turn
from hubbub.sdk.runtime import AgentMessage


@dataclass(frozen=True, slots=True)
class _Waiting:
    trigger: Envelope
    answers: list[str] | None
    floor_key: str | None


class TurnInbox:
    """Messages handed to the runtime whose turn has not begun, by message id."""

    def __init__(self) -> None:
        self._waiting: dict[str, _Waiting] = {}

    def __len__(self) -> int:
        """How many wait for their turn."""
        return len(self._waiting)

    def expect(
        self,
        message_id: str,
        trigger: Envelope,
        answers: list[str] | None = None,
        floor_key: str | None = None,
    ) -> None:
        """Message ``message_id`` answers ``trigger``; its answer correlates to ``answers``
        (None: the trigger's id) and belongs to the floor batch ``floor_key``, if any."""
        self._waiting[message_id] = _Waiting(trigger, answers, floor_key)

    def forget(self, message_id: str) -> None:
        """The message was refused (the inbox was full): it gets no turn."""
        self._waiting.pop(message_id, None)

    def begin(self, message: AgentMessage) -> Turn:
        """The turn that answers ``message`` (a bare one for a message never expected)."""
        waiting = self._waiting.pop(message.id, None)
        if waiting is None:
            return Turn(Envelope(kind="chat", id=message.id), message.content)
        turn = Turn(waiting.trigger, message.content, answers=waiting.answers)
        turn.floor_key = waiting.floor_key
        return turn

    def clear(self) -> None:
        """Forget every waiting message (the agent stops)."""
        self._waiting.clear()


__all__ = ["TurnInbox"]
