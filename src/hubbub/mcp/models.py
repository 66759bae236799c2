"""The structured results of the MCP tools (their ``outputSchema``), and how a model reads them.

Each tool answers ``structuredContent`` shaped by one of these models and a short text
rendering for models that read only text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from hubbub.mcp.desk import Desk, Floor
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.transcript import said


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


class Sent(_Model):
    id: str
    seq: int | None = None
    channel: str | None = None
    to: list[str] | None = None
    ts: str = ""


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


class Slept(_Model):
    seconds: float
    mode: str


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


def message_of(desk: Desk, env: Envelope) -> Message:
    """An envelope as a :class:`Message`, with its floor and whether it addresses the desk."""
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
            "text": text if isinstance(text, str) else "",
            "ts": env.ts,
            "reply_to": cids[0] if cids else None,
            "addressed_to_you": desk.addresses_me(env),
            "floor": state,
            "payload": None if env.kind == "chat" else env.payload,
        }
    )


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
    body = m.text if m.kind == "chat" else f"{m.kind} {m.payload}"
    notes = [f"id {m.id}"]
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
