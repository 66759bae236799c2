"""The structured results of the MCP tools (their ``outputSchema``), and how a model reads them.

Each tool answers ``structuredContent`` shaped by one of these models and a short text
rendering for models that read only text. Some clients (Claude Code, Codex) hand the model
only the structured content, so whatever the model must be told — a claim's verdict, a
yield, a nudge, a refusal — is in it too, as a short ``advice``; null fields are left out
(:func:`structured`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from hubbub.mcp.desk import Desk, Floor
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.ids import iso_to_ms
from hubbub.protocol.transcript import said

OLD_AFTER_S: Final = 60
"""A message older than this when returned carries its ``age_s`` (a replay, a catch-up)."""


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True)


class FloorState(_Model):
    """Who holds the floor on a message (``holder`` null: nobody claimed it)."""

    holder: str | None = None
    started_at: int | None = None
    yielded_to: str | None = Field(
        default=None, description="set when you claimed this message and yielded to this id"
    )


class Message(_Model):
    """One message as ``listen`` and ``history`` return it."""

    id: str
    seq: int | None = None
    sender: str = Field(alias="from")
    sender_kind: str | None = Field(default=None, description="human, agent, service or server")
    to: list[str] | None = None
    channel: str | None = Field(default=None, description="null for a direct message")
    kind: str = "chat"
    text: str = ""
    ts: str = ""
    reply_to: str | None = None
    addressed_to_you: bool = False
    floor: FloorState | None = None
    payload: dict[str, Any] | None = Field(
        default=None, description="the payload of a non-chat message (proposals, answers)"
    )
    age_s: int | None = Field(
        default=None, description="seconds since it was sent, when that is over a minute"
    )
    repeated: bool | None = Field(
        default=None,
        description="true: an earlier listen returned it too late for your client; skip it "
        "if you handled it already",
    )


class Present(_Model):
    """A participant and its presence."""

    id: str
    kind: str | None = None
    presence: str | None = None
    wake_at: str | None = None


class YieldNote(_Model):
    """The gateway told you to yield: ``winner`` answers ``message_id``."""

    message_id: str
    winner: str
    channel: str | None = None


class Listened(_Model):
    messages: list[Message]
    nudge: bool = Field(description="true when nothing arrived before the timeout")
    present: list[Present] | None = Field(default=None, description="who is online (on a nudge)")
    yields: list[YieldNote] = Field(default_factory=list)
    advice: str | None = Field(default=None, description="what to do now")


class Sent(_Model):
    id: str
    seq: int | None = None
    channel: str | None = None
    to: list[str] | None = None
    ts: str = ""
    advice: str | None = Field(default=None, description="what to do now")


class Joined(_Model):
    channel: str
    members: list[str]


class Left(_Model):
    channel: str


class Claim(_Model):
    message_id: str
    channel: str
    granted: bool
    yielded_to: str | None = None
    advice: str | None = Field(default=None, description="what to do now")


class Who(_Model):
    channel: str | None = None
    participants: list[Present]


class ChannelInfo(_Model):
    name: str
    members: int
    joined: bool


class Channels(_Model):
    channels: list[ChannelInfo]


class History(_Model):
    channel: str
    messages: list[Message]
    has_more: bool = False


class Scheduled(_Model):
    seconds: float
    channel: str | None = None
    payload: str
    advice: str | None = Field(default=None, description="what to do now")


class Slept(_Model):
    seconds: float
    mode: str
    advice: str | None = Field(default=None, description="what to do now")


class ToolInfo(_Model):
    name: str
    description: str | None = None
    input_schema: dict[str, Any] | None = None


class ParticipantTools(_Model):
    participant: str
    tools: list[ToolInfo]
    error: str | None = None


class Tools(_Model):
    participants: list[ParticipantTools]


class Called(_Model):
    status: str = Field(description="'done', or 'proposed' (waiting for approval)")
    participant: str
    tool: str
    proposal_id: str | None = None
    is_error: bool = False
    text: str | None = None
    structured: dict[str, Any] | None = None
    advice: str | None = Field(default=None, description="what to do now")


class Proposal(_Model):
    id: str
    sender: str = Field(alias="from")
    to: list[str] | None = None
    channel: str | None = None
    method: str | None = None
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    may_approve: bool = Field(
        default=False, description="whether your capabilities let you fulfil it"
    )


class Proposals(_Model):
    proposals: list[Proposal]


class Decided(_Model):
    proposal_id: str
    approved: bool
    is_error: bool = False
    text: str | None = None


def structured(model: BaseModel) -> dict[str, Any]:
    """A result's ``structuredContent``: the model as JSON, null fields left out."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def age_of(desk: Desk, env: Envelope) -> int | None:
    """Seconds since ``env`` was sent, when over :data:`OLD_AFTER_S` (else None)."""
    if not env.ts:
        return None
    try:
        age = (desk.wall_ms() - iso_to_ms(env.ts)) // 1000
    except ValueError:
        return None
    return age if age > OLD_AFTER_S else None


_KEEP_PAYLOAD: Final = frozenset({"mcp/proposal", "mcp/response", "mcp/reject", "mcp/request"})
"""Non-chat kinds whose payload a model may act on (the rest become a one-line note)."""


def message_of(desk: Desk, env: Envelope, repeated: bool = False) -> Message:
    """An envelope as a :class:`Message`, with its floor, whether it addresses the desk, its
    age when old and whether it may repeat an earlier listen."""
    text = env.payload.get("text")
    cids = env.correlation_ids()
    floor: Floor | None = desk.floor(env.id) if env.id else None
    yielded = desk.yields.get(env.id)
    state = None
    if floor is not None or yielded is not None:
        state = FloorState(
            holder=floor.holder if floor else None,
            started_at=floor.started_at if floor else None,
            yielded_to=yielded.winner if yielded else None,
        )
    return Message.model_validate(
        {
            "id": env.id,
            "seq": env.seq,
            "from": env.from_,
            "sender_kind": desk.kind_of(env.from_),
            "to": env.to,
            "channel": env.channel,
            "kind": env.kind,
            "text": text if isinstance(text, str) and env.kind == "chat" else note_of(env),
            "ts": env.ts,
            "reply_to": cids[0] if cids else None,
            "addressed_to_you": desk.addresses_me(env),
            "floor": state,
            "payload": env.payload if env.kind in _KEEP_PAYLOAD else None,
            "age_s": age_of(desk, env),
            "repeated": True if repeated else None,
        }
    )


_ENDED: Final = {
    "answered": "{holder} answered {msg}",
    "expired": "{holder} held the floor on {msg} and did not answer in time",
    "disconnected": "{holder} left before answering {msg}",
}


def note_of(env: Envelope) -> str:
    """A non-chat record as one line a model reads (``floor/outcome: maths answered m12``),
    or empty when it has nothing to say (it is then left out of ``history``)."""
    p, kind = env.payload, env.kind
    if kind == "floor/outcome":
        msg = str(p.get("msg_id", "?"))
        holder = str(p.get("holder", "?"))
        line = _ENDED.get(str(p.get("reason")), "{holder} held the floor on {msg}")
        yielded = [str(x) for x in p.get("yielded") or []]
        tail = f"; {', '.join(yielded)} yielded" if yielded else ""
        return f"floor/outcome: {line.format(holder=holder, msg=msg)}{tail}"
    params = p.get("params") if isinstance(p.get("params"), dict) else {}
    assert isinstance(params, dict)
    if kind == "mcp/proposal":
        target = ", ".join(env.to or []) or "?"
        return (
            f"mcp/proposal: {env.from_} proposes {target}'s {params.get('name', p.get('method'))}"
        )
    if kind == "mcp/request":
        target = ", ".join(env.to or []) or "?"
        return f"mcp/request: {env.from_} calls {target}'s {params.get('name', p.get('method'))}"
    if kind == "mcp/response":
        result = p.get("result") if isinstance(p.get("result"), dict) else {}
        assert isinstance(result, dict)
        texts = [c.get("text", "") for c in result.get("content", []) if isinstance(c, dict)]
        error = p.get("error")
        if isinstance(error, dict):
            return f"mcp/response from {env.from_}: error {error.get('message')}"
        return f"mcp/response from {env.from_}: {' '.join(t for t in texts if t) or '(no text)'}"
    if kind == "mcp/reject":
        what = ", ".join(env.correlation_ids()) or "a proposal"
        return f"mcp/reject: {env.from_} rejected {what}: {p.get('reason', 'no reason given')}"
    if kind == "mcp/withdraw":
        return f"mcp/withdraw: {env.from_} withdrew a proposal"
    return ""


def present_of(entry: Mapping[str, Any]) -> Present:
    """A roster entry as :class:`Present`."""
    return Present(
        id=str(entry.get("id")),
        kind=entry.get("kind"),
        presence=entry.get("presence"),
        wake_at=entry.get("wake_at"),
    )


def message_line(m: Message) -> str:
    """One message as a model reads it: a header line, the text's further lines quoted
    (:func:`hubbub.protocol.transcript.said`), so no text writes a header of its own."""
    where = m.channel or "DM"
    who = m.sender + (f" ({m.sender_kind})" if m.sender_kind else "")
    body = m.text
    notes = [f"id {m.id}"]
    if m.age_s is not None:
        notes.append(f"sent {_ago(m.age_s)} ago")
    if m.repeated:
        notes.append("may repeat an earlier listen")
    if m.reply_to:
        notes.append(f"reply to {m.reply_to}")
    if m.addressed_to_you:
        notes.append("addressed to you")
    if m.floor is not None:
        if m.floor.yielded_to:
            notes.append(f"you yielded: {m.floor.yielded_to} is answering")
        elif m.floor.holder:
            notes.append(f"floor: {m.floor.holder} is answering")
    seq = f" #{m.seq}" if m.seq is not None else ""
    return said(f"[{where}{seq}] {who}", f"{body}  ({'; '.join(notes)})")


def _ago(seconds: int) -> str:
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 86400:
        return f"{seconds // 3600} h"
    return f"{seconds // 86400} d"
