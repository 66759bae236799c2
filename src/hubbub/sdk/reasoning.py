"""An agent's reasoning, reported as events: ``reasoning/start``, ``reasoning/thought``,
``reasoning/conclusion`` and ``reasoning/cancel`` (document 003).

:class:`ReasoningReport` sends them for one agent's turns, to where the turn's answer goes
(:func:`answer_route`): ``reasoning/start`` correlates to what the turn answers, the others
carry its id as ``context``. An agent whose capabilities do not allow ``reasoning/*`` keeps
its reasoning private (warned once).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

from hubbub.errors import HubbubError
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.ids import SERVER_ID
from hubbub.sdk.participant import Participant
from hubbub.sdk.react import Turn

log = logging.getLogger("hubbub.agent")

ECHO_TIMEOUT: Final = 5.0
"""Seconds to wait for the gateway's echo of ``reasoning/start``."""
CANCEL_SEND_TIMEOUT: Final = 1.0
"""Seconds a ``reasoning/cancel`` may take to send (a turn ends either way)."""


def answer_route(trigger: Envelope, me: str, channels: list[str]) -> dict[str, Any]:
    """Where envelopes about ``trigger`` go: its channel, or a DM back to its sender (the
    agent's first channel for a server note or a nudge, else a DM to itself)."""
    if trigger.channel is not None:
        return {"channel": trigger.channel}
    if trigger.from_ in (SERVER_ID, ""):
        return {"channel": channels[0]} if channels else {"to": [me]}
    return {"to": [trigger.from_]}


class ReasoningReport:
    """Sends one agent's ``reasoning/*`` events."""

    def __init__(self, participant: Participant) -> None:
        self.participant = participant
        self._warned = False

    def route(self, trigger: Envelope) -> dict[str, Any]:
        """Where envelopes about ``trigger`` go (:func:`answer_route`)."""
        return answer_route(trigger, self.participant.id, self.participant.client.channels)

    async def start(self, turn: Turn) -> str | None:
        """Send ``reasoning/start`` for ``turn``; its id (the context of the turn's other
        reasoning events), or None when the agent may not send ``reasoning/*``."""
        trigger = turn.trigger
        correlation = turn.correlation() or [trigger.id]
        env = Envelope(
            kind="reasoning/start",
            correlation_id=correlation,
            payload={"message": f"Working on {trigger.from_}'s message"},
            **self.route(trigger),
        )
        me = self.participant.id
        if not self.participant.can_send(env):
            if not self._warned:
                log.warning("%s may not send reasoning/*; its reasoning stays private", me)
                self._warned = True
            return None
        client = self.participant.client
        echo = client.expect(
            "reasoning/start",
            lambda e: e.from_ == me and e.correlation_ids() == correlation,
        )
        try:
            sent = await client.send(env)
            try:
                async with asyncio.timeout(ECHO_TIMEOUT):
                    return (await echo).id
            except TimeoutError:
                log.warning("%s: no echo of reasoning/start; using its client id", me)
                return sent.id
        finally:
            echo.cancel()

    async def send(self, turn: Turn, kind: str, payload: dict[str, Any]) -> None:
        """Send a ``reasoning/thought`` or ``reasoning/conclusion`` (nothing if the turn has
        no ``reasoning/start``)."""
        if turn.reasoning_id is None:
            return
        env = Envelope(
            kind=kind, context=turn.reasoning_id, payload=payload, **self.route(turn.trigger)
        )
        await self.participant.client.send(env)

    async def cancel(self, turn: Turn, reason: str, message: str = "") -> None:
        """Send ``reasoning/cancel`` (``reason``: interrupted, cancelled, yielded, error);
        gives up quietly after :data:`CANCEL_SEND_TIMEOUT`."""
        if turn.reasoning_id is None:
            return
        payload = {"reason": reason, **({"message": message} if message else {})}
        try:
            async with asyncio.timeout(CANCEL_SEND_TIMEOUT):
                await asyncio.shield(self.send(turn, "reasoning/cancel", payload))
        except (TimeoutError, HubbubError, asyncio.CancelledError):
            log.info(
                "%s: could not send reasoning/cancel for %s", self.participant.id, turn.trigger.id
            )


__all__ = ["ReasoningReport", "answer_route"]
