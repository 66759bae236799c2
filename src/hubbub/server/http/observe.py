"""What the dashboard sees: state snapshots of a space, proposals, and activity events.

:class:`ActivityWatcher` subscribes to the pipeline's events (the gateway wires it; the
pipeline never imports this module) and turns deliveries and presence changes into activity
events; the dashboard's event stream calls :func:`snapshot` / :func:`state`. Nothing here
sends to participants. What it reads of the gateway is :class:`Observed`.

Every event, snapshot and state push passes :func:`for_viewer` / :func:`state_for` on its
way to one dashboard: what a viewer sees of a private channel is
:func:`hubbub.server.state.visibility.observer_level` — everything when it is invited, its
existence, members and traffic without text for an admin who is not (as for DMs, whose text
the feed never copies), nothing at all for anyone else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import msgspec

from hubbub import __version__
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.ids import SERVER_ID
from hubbub.server.admission.bans import BanList
from hubbub.server.core.space_engines import SpaceEngines
from hubbub.server.state.activity import Activity, Event
from hubbub.server.state.proposals import Proposal
from hubbub.server.state.space import SpaceState
from hubbub.server.state.visibility import Level, hidden_names, observer_level

TEXT_MAX = 500
"""Longest message text copied into an activity event (the rest is cut with an ellipsis)."""
PAYLOAD_MAX = 1024
"""A proposal payload larger than this (encoded) is not copied into the activity feed or the
board: the dashboard loads it when the proposal is opened (``GET /dashboard/proposals/{id}``)."""
ARGS_PREVIEW = 200
"""Characters of a large proposal's arguments shown on the board until its payload is loaded."""


def _cut(text: str, limit: int = TEXT_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _size(value: Any) -> int:
    try:
        return len(msgspec.json.encode(value))
    except (TypeError, ValueError, OverflowError):
        return PAYLOAD_MAX + 1


def board_entry(p: Proposal) -> dict[str, Any]:
    """An open proposal as the dashboard's board lists it."""
    entry = _proposal_entry(p.env)
    if p.approved_by is not None:
        entry["status"] = "approved"
        entry["approved_by"] = p.approved_by
    return entry


def _outcome_fields(event: str, pid: str, env: Envelope) -> dict[str, Any]:
    """The activity-event fields of what ``env`` meant for proposal ``pid``."""
    if event == "proposal":
        return _proposal_entry(env)
    if event == "proposal-approved":
        return {"id": pid, "participant": env.from_, "to": env.to}
    if event == "proposal-result":
        return {"id": pid, "participant": env.from_} | _outcome(env)
    reason = env.payload.get("reason")
    return {
        "id": pid,
        "participant": env.from_,
        "reason": _cut(str(reason), 300) if reason is not None else None,
    }


def _proposal_entry(env: Envelope) -> dict[str, Any]:
    payload = env.payload
    params = payload.get("params")
    params = params if isinstance(params, dict) else {}
    entry: dict[str, Any] = {
        "id": env.id,
        "participant": env.from_,
        "to": list(env.to or []),
        "channel": env.channel,
        "method": payload.get("method"),
        "tool": params.get("name") if isinstance(params.get("name"), str) else None,
        "arguments": params.get("arguments"),
        "status": "pending",
        "ts": env.ts,
    }
    size = _size(payload)
    if size <= PAYLOAD_MAX:
        entry["payload"] = payload
    else:  # on demand: proposal_payload()
        args = entry.pop("arguments")
        entry["args_preview"] = _cut(msgspec.json.encode(args).decode(), ARGS_PREVIEW)
        entry["payload_omitted"] = True
        entry["payload_bytes"] = size
    return entry


def proposal_payload(
    space: SpaceState, proposal_id: str, viewer: str | None, admin: bool
) -> dict[str, Any] | None:
    """A recent proposal's full payload (what the dashboard loads when it is opened), when
    ``viewer`` may see its channel's text."""
    p = space.proposals.get(proposal_id)
    if p is None or observer_level(space, p.env.channel, viewer, admin) != "all":
        return None
    return {"id": proposal_id, "open": p.open, "payload": p.env.payload}


def _outcome(env: Envelope) -> dict[str, Any]:
    """A short description of an ``mcp/response``: the result's text or the error."""
    payload = env.payload
    error = payload.get("error")
    if isinstance(error, dict):
        return {"ok": False, "error": _cut(str(error.get("message", error)), 300)}
    result = payload.get("result")
    if isinstance(result, dict) and isinstance(result.get("content"), list):
        texts = [
            str(c.get("text"))
            for c in result["content"]
            if isinstance(c, dict) and c.get("type") == "text"
        ]
        failed = bool(result.get("isError"))
        if texts:
            return {"ok": not failed, "result": _cut("\n".join(texts))}
    try:
        text = msgspec.json.encode(result).decode()
    except (TypeError, ValueError, OverflowError):
        text = repr(result)
    return {"ok": True, "result": _cut(text)}


# ---------------------------------------------------------------------- what is observed


class EngineView(Protocol):
    """The coordination engines as the dashboard reads them."""

    @property
    def clock(self) -> Callable[[], float]:
        """Unix ms now, as the engines see it."""
        ...

    def engines(self, space: SpaceState) -> SpaceEngines:
        """The engines of ``space``."""
        ...


class Observed(Protocol):
    """The gateway as the dashboard reads it (the gateway implements it)."""

    @property
    def activity(self) -> Activity:
        """The activity feed."""
        ...

    @property
    def coordination(self) -> EngineView:
        """Floor, callbacks and sleep of every space."""
        ...

    @property
    def bans(self) -> BanList:
        """Who is banned where."""
        ...

    @property
    def server_name(self) -> str:
        """The server's name (in welcomes and snapshots)."""
        ...

    @property
    def spaces(self) -> Mapping[str, SpaceState]:
        """The spaces, by id."""
        ...


# ---------------------------------------------------------------------- pipeline events


class ActivityWatcher:
    """Turns the pipeline's events into activity events (an :class:`~.events.Watcher`)."""

    def __init__(self, gateway: Observed) -> None:
        self.gateway = gateway

    def wants(self, env: Envelope) -> bool:
        """Proposals always (the board tracks them), other messages while someone watches."""
        return self.gateway.activity.watched or env.kind.startswith("mcp/")

    def routed(self, space: SpaceState, env: Envelope) -> None:
        """A message was delivered."""
        routed(self.gateway, space, env)

    def presence(self, space: str, event: str, entry: dict[str, Any], channel: str | None) -> None:
        """A presence change was announced."""
        presence(self.gateway.activity, space, event, entry, channel)


def message_fields(env: Envelope) -> dict[str, Any]:
    """The activity-event fields of one routed message (DM text is not copied)."""
    out: dict[str, Any] = {
        "id": env.id,
        "participant": env.from_,
        "kind": env.kind,
        "channel": env.channel,
        "seq": env.seq,
    }
    if env.to:
        out["to"] = list(env.to)
    text = env.payload.get("text") if env.kind == "chat" else None
    if env.channel is None:
        out["dm"] = True
    elif isinstance(text, str):
        out["text"] = _cut(text)
    elif env.kind.startswith("mcp/") and isinstance(env.payload.get("method"), str):
        out["method"] = env.payload["method"]
    return out


def routed(router: Observed, space: SpaceState, env: Envelope) -> None:
    """A message was delivered: proposals are always recorded, the rest when watched."""
    activity = router.activity
    if env.kind.startswith("mcp/"):
        found = space.proposals.outcome(env)
        if found is not None:
            event, pid = found
            proposal = space.proposals.get(pid)
            where = proposal.env.channel if proposal is not None else env.channel
            fields = _outcome_fields(event, pid, env)
            activity.publish(event, space.id, **({"channel": where} | fields))
            return
    if activity.watched and env.from_ != SERVER_ID:
        activity.publish("message", space.id, **message_fields(env))


_SPACE_EVENTS = {"join": "connect", "leave": "disconnect"}


def presence(
    activity: Activity, space: str, event: str, entry: dict[str, Any], channel: str | None
) -> None:
    """A presence change the router announces: connect, disconnect, join, leave, presence."""
    pid = entry.get("id")
    if channel is not None:
        activity.publish(event, space, participant=pid, channel=channel)
    elif event == "update":
        activity.publish(
            "presence",
            space,
            participant=pid,
            presence=entry.get("presence"),
            wake_at=entry.get("wake_at"),
        )
    else:
        fields: dict[str, Any] = {"participant": pid, "kind": entry.get("kind")}
        if "channels" in entry:
            fields["channels"] = entry["channels"]
        activity.publish(_SPACE_EVENTS.get(event, event), space, **fields)


# ---------------------------------------------------------------------- snapshots


def state(router: Observed, space: SpaceState) -> dict[str, Any]:
    """The live state of a space: channels, participants, sleepers, floor (proposals change
    only through the feed's proposal events: a state push does not repeat them)."""
    eng = router.coordination.engines(space)
    sleeping = {
        e.participant: {
            "wake_at": int(e.wake_at),
            "mode": e.mode,
            "buffered": len(e.buffer),
            "dropped": e.dropped,
        }
        for e in eng.sleep.sleepers()
    }
    callbacks = Counter(cb.origin for cb in eng.callbacks.pending())
    banned = set(router.bans.banned(space.id))
    cfgs = space.config.participants
    participants: list[dict[str, Any]] = []
    for pid in sorted(space.known | set(space.online) | banned):
        s = space.online.get(pid)
        cfg = cfgs.get(pid)
        entry: dict[str, Any] = {
            "id": pid,
            "kind": space.kind_of(pid),
            "role": cfg.role if cfg else "participant",
            "presence": s.presence if s is not None else "offline",
            "online": s is not None,
            "channels": sorted(s.channels) if s is not None else [],
            "pending_callbacks": callbacks.get(pid, 0),
            "banned": pid in banned,
        }
        if s is not None:
            entry["dialect"] = s.conn.dialect.name
        if pid in sleeping:
            entry["sleeping"] = sleeping[pid]
        participants.append(entry)
    floor = [
        {
            "channel": c.channel,
            "msg_id": c.msg_id,
            "holder": c.holder,
            "started_at": c.started_at,
            "expires_at": int(c.expires_at),
            "human": c.human,
        }
        for c in sorted(eng.floor.claims(), key=lambda c: (c.expires_at, c.channel, c.msg_id))
    ]
    channels = [
        {
            "name": ch.name,
            "seq": ch.seq,
            "members": sorted(ch.members),
            "sleeping": sorted(ch.sleepers),
        }
        for ch in space.channels.values()
    ]
    return {
        "space": space.id,
        "now": int(router.coordination.clock()),
        "channels": channels,
        "participants": participants,
        "floor": floor,
        "banned": sorted(banned),
    }


def recent(activity: Activity, space: str) -> list[Event]:
    """The recent activity ring of one space, oldest first."""
    return [e for e in activity.recent if e.get("space") == space]


def snapshot(router: Observed, space: SpaceState, viewer: dict[str, Any]) -> dict[str, Any]:
    """Everything a dashboard needs on connect: state, who is watching, recent activity."""
    return state(router, space) | {
        "proposals": [board_entry(p) for p in space.proposals.open()],
        "server": {"name": router.server_name, "version": __version__},
        "spaces": sorted(router.spaces),
        "viewer": viewer,
        "recent": recent(router.activity, space.id),
    }


# ---------------------------------------------------------------------- one viewer's view

CONTENT_FIELDS = frozenset(
    {"text", "payload", "arguments", "args_preview", "method", "tool", "result", "error", "reason"}
)
"""What an event says of a message's content: left out where the viewer sees only that a
private channel exists (``exists``)."""
HIDDEN_ERROR = "(an error about a channel you cannot see)"
"""An error event's message, for a viewer who may not see a channel it names."""


def for_viewer(space: SpaceState, event: Event, viewer: str | None, admin: bool) -> Event | None:
    """``event`` as one dashboard viewer may see it (None: not at all); see
    :func:`hubbub.server.state.visibility.observer_level`."""
    channel = event.get("channel")
    if isinstance(channel, str):
        level = observer_level(space, channel, viewer, admin)
        if level == "none":
            return None
        if level == "exists":
            event = {k: v for k, v in event.items() if k not in CONTENT_FIELDS}
            event["private"] = True
    names = event.get("channels")
    if isinstance(names, list):
        shown = _shown(space, names, viewer, admin)
        if len(shown) != len(names):
            event = event | {"channels": shown}
    message = event.get("message")
    hides = not admin and event.get("event") == "error" and isinstance(message, str)
    if hides and hidden_names(space, str(message), viewer):  # an admin may know the names
        event = event | {"message": HIDDEN_ERROR}
    return event


def state_for(
    space: SpaceState, st: dict[str, Any], viewer: str | None, admin: bool
) -> dict[str, Any]:
    """A :func:`state` or :func:`snapshot` as one dashboard viewer may see it."""
    out = dict(st)
    channels = []
    for ch in st["channels"]:
        level = _level(space, ch["name"], viewer, admin)
        if level != "none":
            channels.append(ch if level == "all" else ch | {"private": True})
    out["channels"] = channels
    out["participants"] = [
        p | {"channels": _shown(space, p["channels"], viewer, admin)} for p in st["participants"]
    ]
    out["floor"] = [c for c in st["floor"] if _level(space, c["channel"], viewer, admin) != "none"]
    for key in ("proposals", "recent"):
        if key in st:
            seen = (for_viewer(space, e, viewer, admin) for e in st[key])
            out[key] = [e for e in seen if e is not None]
    return out


def _level(space: SpaceState, name: str | None, viewer: str | None, admin: bool) -> Level:
    return observer_level(space, name, viewer, admin)


def _shown(space: SpaceState, names: list[str], viewer: str | None, admin: bool) -> list[str]:
    """The channels of ``names`` the viewer may know of (``all`` or ``exists``)."""
    return [n for n in names if _level(space, n, viewer, admin) != "none"]
