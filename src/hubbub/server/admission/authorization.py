"""Who may use a channel and who may change capabilities: one rule for WebSocket and HTTP.

**Channel access** (:func:`channel_access`). A participant may use channel ``#c`` (post into
it, read its history, leave it) when it is not banned, ``#c`` exists, and either

- its WebSocket connection is a member of ``#c`` (it passed this same check when it joined,
  and a grant or revoke that takes the right away ends the membership at once), or
- it may join ``#c`` (``#general``, the space's own channel, always; another channel when a
  capability allows ``channel/join`` with ``{"channel": "#c"}``) and it
  has no WebSocket connection: an HTTP request of a participant that is not connected acts
  as a one-time join.

A connected participant must join over its connection first (``not_in_channel``), exactly as
on the WebSocket. Joining (and listing a channel's members) needs the join right only.

A **private** (invite-only) channel adds one condition before all of these: ``pid`` is among
its invited participants (``not_invited`` otherwise, for joins, posts, history and member
lists alike; an unauthenticated reader is never invited). Who may *see* a private channel
(listings, presence, welcomes, streams, the dashboard) is the one rule of
:mod:`hubbub.server.state.visibility`, which this check asks too.

**Changing capabilities** (:func:`check_grant`). ``capability/grant`` and ``capability/revoke``
need, besides a capability for the kind, a role listed in the space's ``grant_roles``
(``[admin]`` by default), and a grant may only hand out what the granter's own capabilities
cover. A revoke must remove something (:func:`changed_capabilities`): one that would remove
nothing is refused and says what the recipient holds instead.

**Sending** (:func:`check_send`): an envelope is refused when no capability matches it, or
when matching it ran past the CPU budget of one envelope (``MATCH_BUDGET_S``). A
``channel/join`` is judged by channel access alone (:func:`may_join`), on both dialects.

**Guarded kinds** (:func:`check_guarded`): ``space/invite``, and a participant control
(``participant/shutdown``, ``clear``, ``restart``, ``pause``, …
:data:`PARTICIPANT_CONTROL_KINDS`) addressed to anyone but its sender — a ``to`` naming
another participant, or no ``to`` at all — need, besides a capability for the kind, the
``admin`` role or a capability that *names* the kind (:func:`names_kind`:
``participant/shutdown``, ``participant/*``, ``space/invite``; ``**``, ``*`` and the human
default ``!capability/*`` do not). An open space (loopback, anyone may take any id; MEW's
``space.yaml``) leaves it to the capabilities alone, as MEW does. What an invite or a grant
gives never exceeds the sender's own capabilities (:func:`check_within`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from hubbub.protocol.capabilities import (
    MATCH_BUDGET_S,
    Capability,
    CapabilityError,
    CapabilitySet,
    names_kind,
    uncovered,
)
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.ids import DEFAULT_CHANNEL, GATEWAY_ADDRESSES, is_channel
from hubbub.protocol.kinds import PARTICIPANT_CONTROL_KINDS
from hubbub.server.admission.bans import BanList
from hubbub.server.state.space import Channel, SpaceState
from hubbub.server.state.visibility import sees_channel


def check_send(
    caps: CapabilitySet, kind: str, payload: Mapping[str, Any], correlation_id: str | None
) -> None:
    """Raise ``capability_violation`` unless ``caps`` allow an envelope of ``kind``/``payload``.
    ``channel/join`` is left to :func:`channel_access`, which asks :func:`may_join` (``#general``
    always), so that both dialects and every door join by that one rule."""
    if kind == "channel/join":
        return
    verdict = caps.verdict(kind, payload)
    if verdict == "allowed":
        return
    if verdict == "too_costly":
        message = (
            f"checking your capabilities against this {kind!r} envelope ran past its "
            f"{MATCH_BUDGET_S * 1000:.0f} ms budget, so it is refused; send a shorter payload, "
            "or ask an admin for simpler capability patterns (fewer /regex/ entries)"
        )
    else:
        message = (
            f"you may not send kind {kind!r} with this payload; ask an admin for a capability/grant"
        )
    raise ProtocolError(
        ErrorCode.CAPABILITY_VIOLATION,
        message,
        correlation_id=correlation_id,
        extra={"attempted_kind": kind, "your_capabilities": caps.capabilities},
    )


INVITE_KIND = "space/invite"


def check_guarded(
    space: SpaceState, pid: str, role: str, caps: CapabilitySet, env: Envelope
) -> None:
    """Raise ``capability_violation`` when ``env`` is a ``space/invite``, or a participant
    control to someone else, and ``pid`` has neither the admin role nor a capability that
    names the kind (an open space: never)."""
    kind = env.kind
    if kind == INVITE_KIND:
        what = "space/invite adds a participant to the space"
        tail = ""
    elif kind in PARTICIPANT_CONTROL_KINDS:
        others = [t for t in env.to or () if t != pid and t not in GATEWAY_ADDRESSES]
        if env.to and not others:
            return  # to itself alone: its capabilities decide
        what = f"{kind} to {repr(others[0]) if others else 'everyone'} controls another participant"
        tail = ". Sent to yourself alone it needs only a capability for the kind"
    else:
        return
    if space.config.open or role == "admin" or names_kind(caps.capabilities, kind, env.payload):
        return
    raise ProtocolError(
        ErrorCode.CAPABILITY_VIOLATION,
        f"{what}: it needs the admin role or a capability that names it (ask an admin to "
        f"grant {{kind: {kind}}}); a broad pattern such as '**' or '!capability/*' is not "
        f"enough{tail}",
        correlation_id=env.id or None,
        extra={"attempted_kind": kind, "your_capabilities": caps.capabilities},
    )


def check_within(
    caps: CapabilitySet, wanted: Sequence[Mapping[str, Any]], kind: str, note: str = ""
) -> None:
    """Raise ``capability_violation`` unless ``caps`` cover every entry of ``wanted``: what a
    grant hands out, or what an invite gives its invitee (``note``: where ``wanted`` came
    from), never exceeds the sender's own."""
    beyond = uncovered(caps.capabilities, wanted)
    if not beyond:
        return
    if kind == INVITE_KIND:
        rule = "an invitee never gets more than its inviter holds"
        fix = f"list initial_capabilities within your own{note}"
    else:
        rule = "a grant never exceeds the granter's capabilities"
        fix = "grant a narrower pattern"
    raise ProtocolError(
        ErrorCode.CAPABILITY_VIOLATION,
        f"you may not give {_brief(beyond[0])} with {kind}: your own capabilities do not "
        f"cover it ({rule}); {fix}",
        extra={"attempted_kind": kind, "your_capabilities": caps.capabilities},
    )


def may_join(caps: CapabilitySet, name: str) -> bool:
    """Whether ``caps`` allow joining channel ``name``: the space's own channel
    (:data:`DEFAULT_CHANNEL`) always, as being in a MEW space means being in it."""
    return name == DEFAULT_CHANNEL or caps.allows("channel/join", {"channel": name})


def invalid_channel(name: object) -> ProtocolError:
    """The refusal of a channel name that is not one (agentchat's wording first: its dialect
    writes the code as ``INVALID_MSG``, as agentchat's server does)."""
    return ProtocolError(
        ErrorCode.INVALID_CHANNEL,
        f"Invalid channel name {name!r}: write '#' then 1-31 of [A-Za-z0-9_-], e.g. '#general'",
    )


def channel_access(
    bans: BanList,
    space: SpaceState,
    pid: str | None,
    caps: CapabilitySet,
    name: object,
    *,
    joining: bool = False,
) -> Channel:
    """The channel ``name`` if ``pid`` may use it (or, ``joining``, join it); raise otherwise.

    ``pid`` is None for an unauthenticated reader of an open space (only ``caps`` count).
    """
    if pid is not None:
        bans.check(space.id, pid)
    # a channel's name was checked when it was made: the pattern is matched only on a miss
    ch = space.channels.get(name) if isinstance(name, str) else None
    if ch is None or not isinstance(name, str):
        if not isinstance(name, str) or not is_channel(name):
            raise invalid_channel(name)
        raise ProtocolError(
            ErrorCode.UNKNOWN_CHANNEL,
            f"channel {name} does not exist in space {space.id!r}; "
            "create it with channel/create (needs the capability)",
        )
    if not sees_channel(ch, pid):
        raise ProtocolError(
            ErrorCode.NOT_INVITED,
            f"channel {name} is invite-only and you are not invited: "
            "ask one of its members to invite you (INVITE / channel/invite)",
        )
    if not joining and pid is not None and pid in ch.members:
        return ch
    if not may_join(caps, name):
        raise ProtocolError(
            ErrorCode.CAPABILITY_VIOLATION,
            f"you may not join {name} (no channel/join capability for it), so you may not read "
            "or post there either; ask an admin for a capability/grant",
            extra={"attempted_kind": "channel/join", "your_capabilities": caps.capabilities},
        )
    if not joining and pid is not None and pid in space.online:
        raise ProtocolError(
            ErrorCode.NOT_IN_CHANNEL,
            f"you are not a member of {name}: your WebSocket connection must join it first; "
            "send channel/join first",
        )
    return ch


def check_grant(
    space: SpaceState,
    pid: str,
    role: str,
    caps: CapabilitySet,
    kind: str,
    changes: Sequence[Mapping[str, Any]],
) -> None:
    """Raise unless ``pid`` (with ``role`` and ``caps``) may send ``kind`` with ``changes``."""
    roles = space.config.grant_roles
    if role not in roles:
        raise ProtocolError(
            ErrorCode.CAPABILITY_VIOLATION,
            f"{kind} needs a role listed in grant_roles of space {space.id!r} "
            f"({', '.join(roles) or 'none'}); participant {pid!r} has role {role!r}: "
            "ask an admin of the space",
            extra={"attempted_kind": kind, "your_capabilities": caps.capabilities},
        )
    if kind == "capability/grant":
        check_within(caps, changes, kind)


def changed_capabilities(
    recipient: str, current: CapabilitySet, kind: str, changes: Sequence[Capability]
) -> CapabilitySet:
    """``recipient``'s capabilities after the grant or revoke ``kind`` of ``changes``; raise when
    the result is past the size limits, or when a revoked entry would remove nothing."""
    try:
        if kind == "capability/grant":
            return current.granted(changes)
        idle = current.removing_nothing(changes)
        if idle:
            raise ProtocolError(
                ErrorCode.NOTHING_REVOKED,
                f"capability/revoke removes nothing: {recipient!r} holds no entry equal to "
                f"{', '.join(_brief(entry) for entry in idle)} (a revoke removes held entries "
                f"with the same written pattern, see docs/capabilities.md); {recipient!r} holds "
                f"{[_brief(entry) for entry in current.capabilities]}: revoke those entries",
                extra={"removes_nothing": idle, "recipient_capabilities": current.capabilities},
            )
        return current.revoked(changes)
    except CapabilityError as exc:
        raise ProtocolError(ErrorCode.INVALID_ENVELOPE, f"{kind}: {exc}") from None


def _brief(entry: Mapping[str, Any]) -> str:
    """A capability entry as compact JSON, cut to a readable length."""
    text = json.dumps(dict(entry), separators=(",", ":"), ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."
