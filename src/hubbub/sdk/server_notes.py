"""Deliveries from ``@server`` (``system:gateway``): fired callbacks and wake-ups.

The gateway delivers them as ordinary ``chat`` envelopes so that an LLM reading only text sees
them (documents 001 and 004): ``@@cb-fire@@<payload>`` with ``cb_id`` and ``cb_origin``, and
``@@wake@@`` with ``buffered``. :func:`server_note` recognises them; :func:`csma_check` reads
the CSMA convention's callback payload ``{"csma": "check", "reply_to": <message id>}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hubbub.protocol.envelope import Envelope
from hubbub.protocol.ids import SERVER_ID
from hubbub.protocol.markers import CB_FIRE, WAKE


@dataclass(frozen=True)
class CallbackFired:
    """A callback this participant scheduled (``@@cb:Ns@@payload``) fired."""

    cb_id: str
    payload: str
    channel: str | None
    """The channel of a channel callback (``@@cb:Ns#ch@@``); ``None`` for a DM callback."""
    envelope: Envelope
    origin: str = ""
    """Who scheduled it (``cb_origin``): channel callbacks are seen by every member."""

    def json(self) -> Any:
        """The payload parsed as JSON (``None`` if it is not JSON)."""
        try:
            return json.loads(self.payload)
        except ValueError:
            return None


@dataclass(frozen=True)
class Wake:
    """This participant woke up from ``@@sleep``; ``buffered`` messages follow, in order."""

    buffered: int
    envelope: Envelope


@dataclass(frozen=True)
class CsmaCheck:
    """A CSMA check callback: re-read the channel since ``reply_to`` and decide."""

    reply_to: str
    channel: str | None = None
    seq: int | None = None


def _text(env: Envelope) -> str:
    text = env.payload.get("text")
    return text if isinstance(text, str) else ""


def server_note(env: Envelope) -> CallbackFired | Wake | None:
    """The fired callback or wake-up ``env`` carries, if it is one (from ``@server`` only)."""
    if env.kind != "chat" or env.from_ != SERVER_ID:
        return None
    text = _text(env)
    if text.startswith(CB_FIRE):
        cb_id, origin = env.payload.get("cb_id"), env.payload.get("cb_origin")
        return CallbackFired(
            str(cb_id) if cb_id is not None else "",
            text[len(CB_FIRE) :],
            env.channel,
            env,
            origin if isinstance(origin, str) else "",
        )
    if text.strip() == WAKE:
        buffered = env.payload.get("buffered")
        count = buffered if isinstance(buffered, int) and not isinstance(buffered, bool) else 0
        return Wake(count, env)
    return None


def csma_payload(reply_to: str, channel: str | None = None, seq: int | None = None) -> str:
    """The callback payload of a CSMA check for message ``reply_to`` (compact JSON)."""
    data: dict[str, Any] = {"csma": "check", "reply_to": reply_to}
    if channel is not None:
        data["channel"] = channel
    if seq is not None:
        data["seq"] = seq
    return json.dumps(data, separators=(",", ":"))


def csma_check(fired: CallbackFired) -> CsmaCheck | None:
    """The CSMA check a fired callback carries, if it is one."""
    data = fired.json()
    if not isinstance(data, dict) or data.get("csma") != "check":
        return None
    reply_to = data.get("reply_to")
    if not isinstance(reply_to, str | int) or isinstance(reply_to, bool):
        return None
    channel = data.get("channel")
    seq = data.get("seq")
    return CsmaCheck(
        str(reply_to),
        channel if isinstance(channel, str) else None,
        seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
    )


__all__ = ["CallbackFired", "CsmaCheck", "Wake", "csma_check", "csma_payload", "server_note"]
