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

**Changing capabilities** (:func:`check_grant`). ``capability/grant`` and ``capability/revoke``
need, besides a capability for the kind, a role listed in the space's ``grant_roles``
(``[admin]`` by default), and a grant may only hand out what the granter's own capabilities
cover.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hubbub.protocol.capabilities import CapabilitySet, uncovered
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.ids import DEFAULT_CHANNEL, is_channel
from hubbub.server.admission.bans import BanList
from hubbub.server.state.space import Channel, SpaceState


def may_join(caps: CapabilitySet, name: str) -> bool:
    """Whether ``caps`` allow joining channel ``name``: the space's own channel
    (:data:`DEFAULT_CHANNEL`) always, as being in a MEW space means being in it."""
    return name == DEFAULT_CHANNEL or caps.allows("channel/join", {"channel": name})


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
    if not isinstance(name, str) or not is_channel(name):
        raise ProtocolError(
            ErrorCode.INVALID_CHANNEL,
            f"{name!r} is not a channel name: write '#' then 1-31 of [A-Za-z0-9_-]",
        )
    ch = space.channels.get(name)
    if ch is None:
        raise ProtocolError(
            ErrorCode.UNKNOWN_CHANNEL,
            f"channel {name} does not exist in space {space.id!r}; "
            "create it with channel/create (needs the capability)",
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
    if kind != "capability/grant":
        return
    beyond = uncovered(caps.capabilities, changes)
    if beyond:
        raise ProtocolError(
            ErrorCode.CAPABILITY_VIOLATION,
            f"you may not grant {dict(beyond[0])}: your own capabilities do not cover it "
            "(a grant never exceeds the granter's capabilities); grant a narrower pattern",
            extra={"attempted_kind": kind, "your_capabilities": caps.capabilities},
        )
