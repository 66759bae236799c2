"""The kind table: every kind the protocol knows, who sends it and what the gateway does with it.

One row per kind, the only place these rules are written. The gateway's admission reads
``sender`` (who may send it), its sequencer ``stored`` (numbered, stored, echoed; a resend of
its id repeats it), its router ``request`` (answered by the gateway's own request handlers
instead of being delivered) and the coordination hook ``engines`` (what the engines look at:
``"markers"`` for ``@@`` markers and floor release, ``"wake"`` for a sleeping sender's wake,
``"claim"`` for a floor claim, ``""`` nothing). The sets that clients and the SDK use
(:data:`CLIENT_KINDS`, :data:`STORED_KINDS`, …) are derived from the table. A kind outside
the table and outside ``system/`` is an application kind (:func:`kind_spec`): any kind a
sender's capabilities allow is routed, as MEW's gateway does.
"""

from __future__ import annotations

from typing import Final, Literal, NamedTuple

Sender = Literal["client", "server"]
EngineInterest = Literal["markers", "wake", "claim", ""]


class KindSpec(NamedTuple):
    """How the gateway treats one kind."""

    name: str
    sender: Sender
    """``client``: a participant may send it; ``server``: only the gateway sends it."""
    stored: bool = False
    """Numbered in its channel or the DM stream, stored, and echoed to its sender."""
    request: bool = False
    """Answered or acted on by the gateway itself (a request handler), never fanned out as is."""
    engines: EngineInterest = ""
    """What the coordination engines do with it before it is sequenced."""
    standard: bool = True
    """Part of MEW v0.4 (else a hubbub or agentchat extension)."""


def _client(name: str, **kw: object) -> KindSpec:
    return KindSpec(name, "client", **kw)  # type: ignore[arg-type]


def _server(name: str, standard: bool = False, stored: bool = False) -> KindSpec:
    return KindSpec(name, "server", stored=stored, standard=standard)


_TABLE: Final = (
    # messages: stored, sequenced, delivered; a sleeping sender wakes
    _client("chat", stored=True, engines="markers"),
    _client("chat/acknowledge", stored=True, engines="wake"),
    _client("chat/cancel", stored=True, engines="wake"),
    _client("mcp/request", stored=True, engines="wake"),
    _client("mcp/response", stored=True, engines="wake"),
    _client("mcp/proposal", stored=True, engines="wake"),
    _client("mcp/withdraw", stored=True, engines="wake"),
    _client("mcp/reject", stored=True, engines="wake"),
    _client("reasoning/start", stored=True, engines="wake"),
    _client("reasoning/thought", stored=True, engines="wake"),
    _client("reasoning/conclusion", stored=True, engines="wake"),
    _client("reasoning/cancel", stored=True, engines="wake"),
    _client("capability/grant-ack", stored=True, engines="wake"),
    _client("participant/pause", stored=True, engines="wake"),
    _client("participant/resume", stored=True, engines="wake"),
    _client("participant/status", stored=True, engines="wake"),
    _client("participant/request-status", stored=True, engines="wake"),
    # standard kinds the gateway acts on (a grant or revoke is then stored as a DM)
    _client("capability/grant", stored=True, request=True),
    _client("capability/revoke", stored=True, request=True),
    _client("system/heartbeat", request=True),
    # MEW's streams: the gateway opens, changes and ends them (server/core/streams.py); a
    # request and a close are also stored and relayed like a message
    _client("stream/request", stored=True, request=True),
    _client("stream/close", stored=True, request=True),
    _client("stream/grant-write", request=True),
    _client("stream/revoke-write", request=True),
    _client("stream/transfer-ownership", request=True),
    _client("space/invite", request=True),  # answered to the inviter alone: it holds a token
    # hubbub's control kinds: answered by the gateway
    _client("channel/join", request=True, standard=False),
    _client("channel/leave", request=True, standard=False),
    _client("channel/create", request=True, standard=False),
    _client("channel/invite", request=True, standard=False),
    _client("chat/typing", request=True, standard=False),
    _client("identity/verify-request", request=True, standard=False),
    _client("identity/verify-response", request=True, standard=False),
    _client("admin/kick", request=True, standard=False),
    _client("admin/ban", request=True, standard=False),
    _client("admin/unban", request=True, standard=False),
    _client("channel/list", request=True, standard=False),
    _client("channel/members", request=True, standard=False),
    _client("history/request", request=True, standard=False),
    _client("mcp/cursor", request=True, standard=False),  # an MCP listen cursor: read, save
    _client("floor/responding-to", request=True, engines="claim", standard=False),
    # sent only by the server
    _server("system/welcome", standard=True),
    _server("system/presence", standard=True),
    _server("system/error", standard=True),
    _server("channel/joined"),
    _server("channel/left"),
    _server("channel/created"),
    _server("channel/invited"),
    _server("admin/result"),
    _server("identity/verify-asked"),
    _server("identity/verify-pending"),
    _server("identity/verify-result"),
    _server("system/kicked"),
    _server("channel/list-response"),
    _server("channel/members-response"),
    _server("history/response"),
    _server("mcp/cursor-state"),
    _server("floor/yield"),
    _server("floor/claimed"),
    _server("floor/outcome", stored=True),  # in the channel's history: who answered, who yielded
    _server("system/session-displaced"),
    _server("system/notice"),  # a note to a sender (an addressee is offline or asleep)
)

KINDS: Final[dict[str, KindSpec]] = {spec.name: spec for spec in _TABLE}
"""Every kind, by name."""

PARTICIPANT_CONTROL_KINDS: Final = frozenset(
    {
        "participant/pause",
        "participant/resume",
        "participant/forget",
        "participant/clear",
        "participant/restart",
        "participant/shutdown",
        "participant/compact",
    }
)
"""MEW v0.4's participant controls: a ``MEWParticipant`` obeys them from any sender. Sent to
another participant they need the admin role or a capability that names them
(:func:`hubbub.server.admission.authorization.check_guarded`); ``participant/status``,
``request-status`` and ``compact-done`` only report or ask."""

HANDSHAKE_KINDS: Final = frozenset({"system/join"})
"""Kinds that only open a connection (MEW's join envelope): refused once connected."""
RESERVED_KINDS: Final = {
    "system/register": "system/register is reserved for the gateway. Use capability/grant instead.",
}
"""Kinds MEW's gateway refuses with ``invalid_request`` and these words (its WebSocket and
HTTP alike; over HTTP it also tells the sender's connection): hubbub does the same."""

STANDARD_KINDS: Final = frozenset(s.name for s in _TABLE if s.sender == "client" and s.standard)
"""Kinds of MEW v0.4 that a client sends and the gateway routes."""
CONTROL_KINDS: Final = frozenset(s.name for s in _TABLE if s.sender == "client" and not s.standard)
"""Kinds a client sends that the gateway itself answers or acts on (hubbub's extensions)."""
SERVER_KINDS: Final = frozenset(s.name for s in _TABLE if s.sender == "server")
"""Kinds only the server may send."""
CLIENT_KINDS: Final = STANDARD_KINDS | CONTROL_KINDS
"""Kinds a client may send."""
STORED_KINDS: Final = frozenset(s.name for s in _TABLE if s.stored)
"""Kinds the gateway stores and echoes to their sender: their ``id`` names a message that a
resend can repeat (control kinds and heartbeats are answered, not stored)."""
REQUEST_KINDS: Final = frozenset(s.name for s in _TABLE if s.request)
"""Kinds answered by the gateway's request handlers."""

GATEWAY_PREFIX: Final = "system/"
"""Kinds under it belong to the gateway: a client sends only those of the table."""
MAX_KIND_LEN: Final = 64
"""Longest kind name of a kind outside the table."""


def application_kind(name: str) -> KindSpec:
    """The row of a kind outside the table (MEW's ``participant/compact``, ``space/kick``, an
    application's own): stored and delivered like ``chat``, a sleeping sender wakes."""
    return KindSpec(name, "client", stored=True, engines="wake", standard=False)


def kind_spec(name: str) -> KindSpec | None:
    """How the gateway treats ``name``: its row, an application kind's, or None (a
    ``system/`` kind outside the table, or a name that is not a kind)."""
    spec = KINDS.get(name)
    if spec is not None:
        return spec
    if (
        name.startswith(GATEWAY_PREFIX)
        or name in HANDSHAKE_KINDS
        or not 0 < len(name) <= MAX_KIND_LEN
        or not name.isprintable()
        or " " in name
    ):
        return None
    return application_kind(name)
