"""The agentchat dialect: the ``type``-keyed frames of documents 000, 001 and 004.

Ids carry ``@`` on this dialect only; timestamps (``ts``, ``started_at``) are Unix ms.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import msgspec

from hubbub.protocol.dialect import Reply
from hubbub.protocol.envelope import (
    Envelope,
    check_payload_depth,
    decode_envelope,
    encode,
    not_json_error,
)
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.hello import KEY_PROVEN, Hello
from hubbub.protocol.ids import SERVER_ID, Clock, iso_to_ms

SERVER_NAME = "@server"
ALREADY_IDENTIFIED = "Already identified"
"""The answer to a second IDENTIFY (or VERIFY_IDENTITY) on a connection: agentchat's words,
exactly, since its clients and tests compare the text; one IDENTIFY per connection."""
CLIENT_TYPES = (
    "IDENTIFY",
    "JOIN",
    "LEAVE",
    "MSG",
    "RESPONDING_TO",
    "LIST_CHANNELS",
    "LIST_AGENTS",
    "CREATE_CHANNEL",
    "INVITE",
    "PING",
    "SET_PRESENCE",
    "VERIFY_IDENTITY",
    "ADMIN_KICK",
    "ADMIN_BAN",
    "ADMIN_UNBAN",
    "TYPING",
    "VERIFY_REQUEST",
    "VERIFY_RESPONSE",
)
UNSUPPORTED: dict[str, str] = {
    **dict.fromkeys(
        ("PROPOSAL", "ACCEPT", "REJECT", "COMPLETE", "DISPUTE"),
        "proposals and escrow (agentchat's marketplace) are not part of hubbub",
    ),
    **dict.fromkeys(
        (
            "DISPUTE_INTENT",
            "DISPUTE_REVEAL",
            "EVIDENCE",
            "ARBITER_ACCEPT",
            "ARBITER_DECLINE",
            "ARBITER_VOTE",
        ),
        "agentcourt disputes (agentchat's marketplace) are not part of hubbub",
    ),
    **dict.fromkeys(
        ("REGISTER_SKILLS", "SEARCH_SKILLS"),
        "the skills directory (agentchat's marketplace) is not part of hubbub",
    ),
    "FILE_CHUNK": "file transfer is not part of hubbub; send a link in a MSG",
    "CAPTCHA_RESPONSE": "hubbub sends no captcha; authenticate with IDENTIFY {name, token}",
    **dict.fromkeys(
        (
            "ADMIN_APPROVE",
            "ADMIN_REVOKE",
            "ADMIN_LIST",
            "ADMIN_MOTD",
            "ADMIN_VERIFY",
            "ADMIN_OPEN_WINDOW",
        ),
        "administer hubbub with admin tokens on the dashboard and HTTP API (docs/dashboard.md)",
    ),
    "SET_NICK": "ids are names in hubbub; reconnect with another IDENTIFY name",
}
"""agentchat client frames hubbub answers with ``ERROR {code:"UNSUPPORTED"}``, and why."""

_FRAME_OF_KIND = {
    "chat": "MSG",
    "channel/join": "JOIN",
    "channel/leave": "LEAVE",
    "channel/create": "CREATE_CHANNEL",
    "channel/invite": "INVITE",
    "chat/typing": "TYPING",
    "identity/verify-request": "VERIFY_REQUEST",
    "identity/verify-response": "VERIFY_RESPONSE",
    "admin/kick": "ADMIN_KICK",
    "admin/ban": "ADMIN_BAN",
    "admin/unban": "ADMIN_UNBAN",
    "channel/list": "LIST_CHANNELS",
    "channel/members": "LIST_AGENTS",
    "floor/responding-to": "RESPONDING_TO",
    "participant/status": "SET_PRESENCE",
    "capability/grant": "capability grant (an admin sends it over MEW or HTTP)",
}
"""How this dialect names the kinds that error messages mention."""
_CODE_ON_WIRE = {
    "unknown_channel": "CHANNEL_NOT_FOUND",
    "invalid_channel": "INVALID_MSG",  # agentchat: INVALID_MSG "Invalid channel name"
    "invalid_envelope": "INVALID_MSG",
    "invalid_json": "INVALID_MSG",
    "unknown_kind": "INVALID_MSG",
    "unknown_participant": "AGENT_NOT_FOUND",
}
"""hubbub's error codes under the names agentchat's clients act on (its daemon skips a
channel for good on ``CHANNEL_NOT_FOUND`` and retries anything else); others upper-cased."""
_SILENT_ERRORS = frozenset(
    {
        ("invalid_claim", None),
        ("unknown_channel", "channel/leave"),
        ("not_invited", "channel/leave"),
    }
)
"""Refusals agentchat's server answers with silence (a bad ``RESPONDING_TO`` is ignored, a
``LEAVE`` of a channel that does not exist too, and a private channel an outsider cannot see
looks to it like one that does not exist), as (error code, ``attempted_kind`` or None for
any): an ``ERROR`` there would be a crash in a client without an error listener."""
_KIND_IN_TEXT = re.compile(r"kind '([a-z/-]+)'|\b([a-z]+/[a-z-]+)\b")


class _Frame(msgspec.Struct, tag_field="type", kw_only=True):
    pass


class _Identify(_Frame, tag="IDENTIFY"):
    name: str
    pubkey: str | None = None
    token: str | None = None
    kind: str | None = None
    space: str = "default"
    channels: list[str] | None = None
    resume: dict[str, int] = msgspec.field(default_factory=dict)
    epoch: str | None = None


class _Join(_Frame, tag="JOIN"):
    channel: str
    after_seq: int | None = None


class _Leave(_Frame, tag="LEAVE"):
    channel: str


class _Msg(_Frame, tag="MSG"):
    to: str
    content: str
    in_reply_to: str | None = None


class _RespondingTo(_Frame, tag="RESPONDING_TO"):
    msg_id: str
    started_at: int | float
    channel: str


class _ListChannels(_Frame, tag="LIST_CHANNELS"):
    pass


class _ListAgents(_Frame, tag="LIST_AGENTS"):
    channel: str


class _CreateChannel(_Frame, tag="CREATE_CHANNEL"):
    channel: str
    invite_only: bool = False


class _Invite(_Frame, tag="INVITE"):
    channel: str
    agent: str


class _VerifyIdentity(_Frame, tag="VERIFY_IDENTITY"):
    challenge_id: str
    signature: str
    timestamp: int | float | str


class _AdminKick(_Frame, tag="ADMIN_KICK"):
    agent_id: str
    admin_key: str | None = None
    reason: str | None = None


class _AdminBan(_Frame, tag="ADMIN_BAN"):
    agent_id: str
    admin_key: str | None = None
    reason: str | None = None


class _AdminUnban(_Frame, tag="ADMIN_UNBAN"):
    agent_id: str
    admin_key: str | None = None


class _Typing(_Frame, tag="TYPING"):
    channel: str


class _VerifyRequest(_Frame, tag="VERIFY_REQUEST"):
    target: str
    nonce: str


class _VerifyResponse(_Frame, tag="VERIFY_RESPONSE"):
    request_id: str
    nonce: str
    sig: str


class _Ping(_Frame, tag="PING"):
    pass


class _SetPresence(_Frame, tag="SET_PRESENCE"):
    status: str
    status_text: str | None = None


_AnyFrame = (
    _Identify
    | _Join
    | _Leave
    | _Msg
    | _RespondingTo
    | _ListChannels
    | _ListAgents
    | _CreateChannel
    | _Invite
    | _Ping
    | _SetPresence
    | _VerifyIdentity
    | _AdminKick
    | _AdminBan
    | _AdminUnban
    | _Typing
    | _VerifyRequest
    | _VerifyResponse
)
_read_json = msgspec.json.Decoder().decode
_read_frame = msgspec.json.Decoder(_AnyFrame).decode
"""A frame read straight into its struct: ``msgspec.convert(raw, _AnyFrame)`` rebuilt the
union's type tree on every call (~28 µs a frame, as much as the rest of the pipeline)."""
_clock = Clock()


def wire_code(code: str) -> str:
    """The ``ERROR`` code agentchat's clients read for hubbub's error ``code``."""
    return _CODE_ON_WIRE.get(code, code.upper())


def is_agentchat_hello(frame: dict[str, Any]) -> bool:
    """Tell whether a first frame selects the agentchat dialect."""
    return frame.get("type") == "IDENTIFY"


def at(pid: str) -> str:
    """A participant id as written on this dialect."""
    return SERVER_NAME if pid == SERVER_ID else "@" + pid


def _bare(name: str) -> str:
    return name[1:] if name.startswith("@") else name


def _name(pid: str) -> str:
    """A participant's display name on this dialect: its id (``server`` for the server)."""
    return "server" if pid == SERVER_ID else pid


def _agent(pid: str, identity: dict[str, Any]) -> dict[str, Any]:
    """A member as ``JOINED`` lists it: ``{id, name, verified}``."""
    return {
        "id": at(pid),
        "name": identity.get("name") or _name(pid),
        "verified": identity.get("verified") is True,
    }


_ts_ms = lru_cache(maxsize=64)(iso_to_ms)
"""``iso_to_ms`` of envelope times: a busy channel's messages share their millisecond, and
each is encoded for this dialect once per message."""


def _ms(env: Envelope) -> int:
    return _ts_ms(env.ts) if env.ts else Clock.now_ms()


def in_frames(message: str) -> str:
    """An error message with the kinds it names written as this dialect's frames."""

    def frame(m: re.Match[str]) -> str:
        kind = m.group(1) or m.group(2)
        return _FRAME_OF_KIND.get(kind, m.group(0))

    return _KIND_IN_TEXT.sub(frame, message)


def is_agentchat_frame(frame: dict[str, Any]) -> bool:
    """Tell whether a frame is one of agentchat's client frames (IDENTIFY or any other)."""
    kind = frame.get("type")
    return isinstance(kind, str) and (kind in CLIENT_TYPES or kind in UNSUPPORTED)


class AgentchatDialect:
    """Codec for agentchat frames."""

    name = "agentchat"
    server_id = SERVER_NAME
    channel_presence = True
    frames_are_envelopes = False
    stream_frames = False

    def parse_hello(self, frame: dict[str, Any]) -> Hello:
        """Read ``{"type":"IDENTIFY","name":...,"token"?:...}``."""
        try:
            ident = msgspec.convert(frame, _Identify)
        except msgspec.ValidationError as exc:
            raise ProtocolError(ErrorCode.INVALID_ENVELOPE, f"invalid IDENTIFY: {exc}") from None
        return Hello(
            participant_id=_bare(ident.name),
            space=ident.space,
            token=ident.token or None,
            kind=ident.kind,
            channels=ident.channels,
            auto_join=ident.channels is None,
            resume=ident.resume,
            epoch=ident.epoch,
            unique_name=True,
            name=ident.name,
            pubkey=ident.pubkey or None,
            key_proven=bool(ident.pubkey) and frame.get(KEY_PROVEN) is True,
        )

    def decode(self, data: bytes | str) -> Envelope | Reply:
        """Map one frame to its canonical envelope."""
        try:
            raw = _read_json(data)
            kind = raw.get("type") if isinstance(raw, dict) else None
            if isinstance(kind, str) and kind in UNSUPPORTED:
                raise ProtocolError(
                    ErrorCode.UNSUPPORTED, f"{kind} is not supported: {UNSUPPORTED[kind]}"
                )
            if isinstance(raw, dict) and kind not in CLIENT_TYPES:
                what = (
                    "the frame is missing its `type`"
                    if "type" not in raw
                    else f"unknown frame type {raw['type']!r} (`$.type`)"
                )
                raise ProtocolError(
                    ErrorCode.UNKNOWN_KIND, f"{what}; expected one of " + ", ".join(CLIENT_TYPES)
                )
            frame = _read_frame(data)
        except (msgspec.DecodeError, ValueError) as exc:  # and UnicodeDecodeError before 0.23
            not_json = not_json_error(data, exc)
            if not_json is not None:
                raise not_json from None
            raise ProtocolError(ErrorCode.INVALID_ENVELOPE, f"invalid frame: {exc}") from None
        except RecursionError:
            raise ProtocolError(
                ErrorCode.INVALID_ENVELOPE, "frame nests objects/arrays too deeply"
            ) from None
        if isinstance(frame, _Msg):
            return self._chat(frame, raw)
        if isinstance(frame, _Join):
            payload: dict[str, Any] = {"channel": frame.channel}
            if frame.after_seq is not None:
                payload["after_seq"] = frame.after_seq
            return Envelope(kind="channel/join", payload=payload)
        if isinstance(frame, _Leave):
            return Envelope(kind="channel/leave", payload={"channel": frame.channel})
        if isinstance(frame, _RespondingTo):
            return Envelope(
                kind="floor/responding-to",
                channel=frame.channel,
                payload={"msg_id": frame.msg_id, "started_at": int(frame.started_at)},
            )
        if isinstance(frame, _ListChannels):
            return Envelope(kind="channel/list")
        if isinstance(frame, _ListAgents):
            return Envelope(kind="channel/members", payload={"channel": frame.channel})
        if isinstance(frame, _CreateChannel):
            created: dict[str, Any] = {"channel": frame.channel}
            if frame.invite_only:
                created["private"] = True
            return Envelope(kind="channel/create", payload=created)
        if isinstance(frame, _Invite):
            return Envelope(
                kind="channel/invite",
                payload={"channel": frame.channel, "participant": _bare(frame.agent)},
            )
        if isinstance(frame, _SetPresence):
            status: dict[str, Any] = {"presence": frame.status}
            if frame.status_text is not None:
                status["status_text"] = frame.status_text
            return Envelope(kind="participant/status", payload=status)
        if isinstance(frame, _AdminKick | _AdminBan | _AdminUnban):
            action = {_AdminKick: "kick", _AdminBan: "ban", _AdminUnban: "unban"}[type(frame)]
            admin: dict[str, Any] = {"participant": _bare(frame.agent_id)}
            if frame.admin_key:
                admin["admin_key"] = frame.admin_key
            reason = getattr(frame, "reason", None)
            if reason:
                admin["reason"] = reason
            return Envelope(kind=f"admin/{action}", payload=admin)
        if isinstance(frame, _VerifyRequest):
            return Envelope(
                kind="identity/verify-request",
                payload={"target": _bare(frame.target), "nonce": frame.nonce},
            )
        if isinstance(frame, _VerifyResponse):
            return Envelope(
                kind="identity/verify-response",
                payload={"request_id": frame.request_id, "nonce": frame.nonce}
                | {"signature": frame.sig},
            )
        if isinstance(frame, _Typing):
            return Envelope(kind="chat/typing", channel=frame.channel)
        if isinstance(frame, _Ping):
            return Reply(encode({"type": "PONG", "ts": Clock.now_ms()}))
        raise ProtocolError(ErrorCode.INVALID_ENVELOPE, ALREADY_IDENTIFIED)

    def _chat(self, frame: _Msg, raw: dict[str, Any]) -> Envelope:
        """``MSG`` → ``chat``; of the fields a client adds only ``sig`` rides along (as
        agentchat's server relays it), besides ``in_reply_to``."""
        payload: dict[str, Any] = {"text": frame.content}
        if "sig" in raw:
            payload["sig"] = raw["sig"]
            check_payload_depth(payload)
        reply_to = [frame.in_reply_to] if frame.in_reply_to else None
        if frame.to.startswith("#"):
            return Envelope(kind="chat", channel=frame.to, correlation_id=reply_to, payload=payload)
        if frame.to.startswith("@"):
            return Envelope(
                kind="chat",
                to=[frame.to[1:]],
                private=True,
                correlation_id=reply_to,
                payload=payload,
            )
        raise ProtocolError(
            ErrorCode.INVALID_ENVELOPE,
            f"MSG target {frame.to!r} must start with '#' (channel) or '@' (participant)",
        )

    def welcome(self, env: Envelope) -> list[bytes]:
        """``WELCOME {agent_id, name, server}``."""
        you = env.payload.get("you", {})
        return [
            encode(
                {
                    "type": "WELCOME",
                    "agent_id": at(you.get("id", "")),
                    "name": you.get("name", you.get("id", "")),
                    "verified": you.get("verified") is True,
                    "server": env.payload.get("server", "hubbub"),
                    "space": env.payload.get("space", "default"),
                    "ts": _ms(env),
                }
            )
        ]

    def encode(self, env: Envelope) -> list[bytes]:
        """Frames for the kinds this dialect can express; ``[]`` for the others."""
        kind = env.kind
        p = env.payload
        if kind == "chat":
            return [encode(self._msg(env))]
        if kind == "system/notice":  # a note from @server, as agentchat shows server notes
            note = msgspec.structs.replace(env, kind="chat", channel=None, payload=dict(p))
            return [encode(self._msg(note))]
        if kind == "system/presence":
            return [encode(f) for f in self._presence(env)]
        if kind == "channel/joined":
            identities = p.get("identities") or {}
            joined: dict[str, Any] = {
                "type": "JOINED",
                "channel": p.get("channel"),
                "agents": [_agent(m, identities.get(m) or {}) for m in p.get("members", [])],
                "ts": _ms(env),
            }
            if "history_reset" in p:  # the resume point meant nothing here: a fresh history
                joined["history_reset"] = p["history_reset"]
            frames = [encode(joined)]
            for raw in p.get("history", []):
                old = decode_envelope(bytes(raw)) if not isinstance(raw, Envelope) else raw
                if old.kind == "chat":
                    frames.append(encode(self._msg(old) | {"replay": True}))
            return frames
        if kind == "channel/invited":
            if env.to != [p.get("participant")]:
                return []  # agentchat answers the inviter nothing
            by = str(p.get("by", ""))
            invitation = {
                "type": "MSG",
                "from": at(by),
                "from_name": _name(by),
                "to": at(str(p.get("participant", ""))),
                "content": f"You have been invited to {p.get('channel')}",
                "ts": _ms(env),
            }
            return [encode(invitation)]
        if kind == "identity/verify-asked":
            asked = {
                "type": "VERIFY_REQUEST",
                "request_id": p.get("request_id"),
                "from": at(str(p.get("from", ""))),
                "nonce": p.get("nonce"),
                "ts": _ms(env),
            }
            return [encode(asked)]
        if kind == "identity/verify-pending":
            pending = {
                "type": "VERIFY_REQUEST",
                "request_id": p.get("request_id"),
                "target": at(str(p.get("target", ""))),
                "status": "pending",
                "ts": _ms(env),
            }
            return [encode(pending)]
        if kind == "identity/verify-result":
            verified = p.get("verified") is True
            result: dict[str, Any] = {
                "type": "VERIFY_SUCCESS" if verified else "VERIFY_FAILED",
                "request_id": p.get("request_id"),
            }
            if "target" in p:
                result["agent" if verified else "target"] = at(str(p["target"]))
            for key in ("pubkey", "reason"):
                if key in p:
                    result[key] = p[key]
            return [encode(result | {"verified": verified, "ts": _ms(env)})]
        if kind == "chat/typing":
            typing = {
                "type": "TYPING",
                "from": at(env.from_),
                "from_name": _name(env.from_),
                "channel": env.channel,
                "ts": _ms(env),
            }
            return [encode(typing)]
        if kind == "admin/result":
            result = {
                "type": "ADMIN_RESULT",
                "action": p.get("action"),
                "success": p.get("success", True),
                "agentId": at(str(p.get("id", ""))),
                "ts": _ms(env),
            }
            return [encode(result)]
        if kind == "system/kicked":
            told = {
                "type": "BANNED" if p.get("banned") else "KICKED",
                "reason": p.get("reason", ""),
                "ts": _ms(env),
            }
            return [encode(told)]
        if kind == "channel/left":
            return [encode({"type": "LEFT", "channel": p.get("channel"), "ts": _ms(env)})]
        if kind == "channel/list-response":
            return [
                encode(
                    {
                        "type": "CHANNELS",
                        "list": [
                            {"name": c["name"], "agents": c.get("members", 0)}
                            for c in p.get("channels", [])
                        ],
                        "ts": _ms(env),
                    }
                )
            ]
        if kind == "channel/members-response":
            people = p.get("participants") or [{"id": m} for m in p.get("members", [])]
            return [
                encode(
                    {
                        "type": "AGENTS",
                        "channel": p.get("channel"),
                        "list": [
                            {
                                "id": at(str(m.get("id", ""))),
                                "name": m.get("name") or _name(str(m.get("id", ""))),
                                "verified": m.get("verified") is True,
                                "presence": m.get("presence", "online"),
                                "status_text": m.get("status_text"),
                            }
                            for m in people
                        ],
                        "ts": _ms(env),
                    }
                )
            ]
        if kind == "system/error":
            code = p.get("error")
            if (code, None) in _SILENT_ERRORS or (code, p.get("attempted_kind")) in _SILENT_ERRORS:
                return []
            frame = {
                "type": "ERROR",
                "code": wire_code(str(p.get("error", "internal_error"))),
                "message": in_frames(str(p.get("message", ""))),
                "ts": _ms(env),
            }
            return [encode(frame)]
        if kind == "system/session-displaced":
            return [
                encode(
                    {
                        "type": "SESSION_DISPLACED",
                        "reason": p.get("reason", ""),
                        "new_ip": p.get("new_ip", "unknown"),
                        "ts": _ms(env),
                    }
                )
            ]
        if kind == "floor/responding-to":
            return [
                encode(
                    {
                        "type": "RESPONDING_TO",
                        "msg_id": p.get("msg_id"),
                        "from": at(env.from_),
                        "started_at": p.get("started_at"),
                        "channel": env.channel,
                        "ts": _ms(env),
                    }
                )
            ]
        if kind == "floor/claimed":
            return [
                encode(
                    {
                        "type": "FLOOR_CLAIMED",
                        "msg_id": p.get("msg_id"),
                        "agent": at(str(p.get("holder", ""))),
                        "holder": at(str(p.get("holder", ""))),
                        "holder_name": p.get("holder_name") or _name(str(p.get("holder", ""))),
                        "started_at": p.get("started_at"),
                        "expires_at": p.get("expires_at"),
                        "channel": env.channel,
                        "ts": _ms(env),
                    }
                )
            ]
        if kind == "floor/yield":
            winner = at(str(p.get("winner", "")))
            return [
                encode(
                    {
                        "type": "YIELD",
                        "msg_id": p.get("msg_id"),
                        "winner": winner,
                        "holder": winner,
                        "holder_started_at": p.get("winner_started_at"),
                        "reason": p.get("reason", ""),
                        "channel": env.channel or p.get("channel"),
                        "ts": _ms(env),
                    }
                )
            ]
        return []

    def _msg(self, env: Envelope) -> dict[str, Any]:
        to = env.channel if env.channel else at(env.to[0]) if env.to else ""
        p = env.payload
        frame: dict[str, Any] = {
            "type": "MSG",
            "from": at(env.from_),
            "from_name": p.get("from_name") or _name(env.from_),
            "to": to,
            "content": p.get("text", ""),
            "msg_id": env.id,
            "ts": _ms(env),
            "verified": p.get("verified") is True,
        }
        if "sig" in p:  # of what a client adds to a message only its signature is relayed
            frame["sig"] = p["sig"]
        if env.seq is not None:
            frame["seq"] = env.seq
        reply_to = env.correlation_ids()
        if reply_to:
            frame["in_reply_to"] = reply_to[0]
        for extra in ("cb_id", "late_ms", "buffered"):
            if extra in p:
                frame[extra] = p[extra]
        origin = env.payload.get("cb_origin")
        if isinstance(origin, str):
            frame["cb_origin"] = at(origin)  # an id like every other one here: "@bot"
        return frame

    def _presence(self, env: Envelope) -> list[dict[str, Any]]:
        p = env.payload
        event = p.get("event")
        people = p.get("participants") or ([p["participant"]] if "participant" in p else [])
        ts = _ms(env)
        out: list[dict[str, Any]] = []
        for person in people:
            pid = at(str(person.get("id", "")))
            if event in ("join", "leave") and "channel" in p:
                out.append(
                    {
                        "type": "AGENT_JOINED" if event == "join" else "AGENT_LEFT",
                        "channel": p["channel"],
                        "agent": pid,
                        "name": person.get("name") or _name(str(person.get("id", ""))),
                        "verified": person.get("verified") is True,
                        "ts": ts,
                    }
                )
            elif event == "update":
                presence = person.get("presence", "online")
                frame: dict[str, Any] = {"type": "PRESENCE", "agent": pid, "presence": presence}
                if isinstance(person.get("wake_at"), str):
                    frame["wake_at"] = iso_to_ms(person["wake_at"])
                out.append(frame | {"ts": ts})
                out.append(
                    {
                        "type": "PRESENCE_CHANGED",
                        "agent_id": pid,
                        "name": person.get("name") or _name(str(person.get("id", ""))),
                        "presence": presence,
                        "status": presence,
                        "status_text": person.get("status_text"),
                        "ts": ts,
                    }
                )
        return out
