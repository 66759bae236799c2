"""Sent envelopes the gateway has not acknowledged yet, so a reconnect can resend them.

The gateway acknowledges a stored message by delivering it back to its sender (the echo),
and refuses one with a ``system/error`` naming its id. Until one of the two arrives, the
message may or may not have landed: after a reconnect the client sends it again under the
same ``id`` and the gateway, which remembers ids, answers a resend with the original instead
of delivering it twice (docs/reliability.md). So ``send`` across a gateway crash delivers
exactly once.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict

from hubbub.protocol.envelope import STORED_KINDS, Envelope
from hubbub.protocol.markers import parse_markers

log = logging.getLogger("hubbub.sdk.outbox")


LIMIT = 10_000
"""Unacknowledged envelopes kept at most; past it the oldest is given up (and logged)."""


def is_acknowledged(env: Envelope) -> bool:
    """Whether the gateway answers ``env`` with an echo (stored messages do; a chat that is
    only ``@@`` markers is acted on and not relayed, so nothing comes back)."""
    if env.kind not in STORED_KINDS:
        return False
    if env.kind == "chat":
        text = env.payload.get("text")
        if isinstance(text, str) and "@@" in text and not parse_markers(text).relayed:
            return False
    return True


class Outbox:
    """Envelopes sent and not yet acknowledged, in the order they were sent."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self._waiting: OrderedDict[str, tuple[Envelope, asyncio.Future[Envelope]]] = OrderedDict()
        self.resent = 0
        """Envelopes sent again after a reconnect."""

    def __len__(self) -> int:
        return len(self._waiting)

    def track(self, env: Envelope) -> asyncio.Future[Envelope]:
        """Remember ``env`` until its echo; the future resolves with the echoed envelope."""
        known = self._waiting.get(env.id)
        if known is not None:
            return known[1]
        future: asyncio.Future[Envelope] = asyncio.get_running_loop().create_future()
        self._waiting[env.id] = (env, future)
        if len(self._waiting) > self.limit:
            _, (old, old_future) = self._waiting.popitem(last=False)
            log.warning("giving up on resending %s (%s): over %d unacknowledged", old.id,
                        old.kind, self.limit)  # fmt: skip
            if not old_future.done():
                old_future.cancel()
        return future

    def acknowledged(self, env: Envelope) -> None:
        """``env`` came back from the gateway: if it is one of ours, it is stored."""
        entry = self._waiting.pop(env.id, None)
        if entry is not None and not entry[1].done():
            entry[1].set_result(env)

    def refused(self, msg_id: str, error: BaseException) -> None:
        """The gateway refused the envelope with this id: never resend it."""
        entry = self._waiting.pop(msg_id, None)
        if entry is not None and not entry[1].done():
            entry[1].set_exception(error)
            entry[1].exception()  # retrieved: nobody may be awaiting it

    def pending(self) -> list[Envelope]:
        """What to send again after a reconnect, oldest first."""
        return [env for env, _ in self._waiting.values()]
