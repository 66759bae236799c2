"""The agentchat dialect: the ``type``-keyed frames of documents 000, 001 and 004.

Ids carry ``@`` on this dialect only; timestamps (``ts``, ``started_at``) are Unix ms.
"""

from __future__ import annotations

from typing import Any

import msgspec

from hubbub.protocol.dialect import Reply
from hubbub.protocol.envelope import Envelope, decode_envelope, encode
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.hello import Hello
from hubbub.protocol.ids import Clock, iso_to_ms

SERVER_NAME = "@server"
CLIENT_TYPES = (
    "IDENTIFY",
    "JOIN",
    "LEAVE",
    "MSG",
    "RESPONDING_TO",
    "LIST_CHANNELS",
    "LIST_AGENTS",
    "CREATE_CHANNEL",
    "PING",
    "SET_PRESENCE",
)


class _Frame(msgspec.Struct, tag_field="type", kw_only=True):
    pass


class _Identify(_Frame, tag="IDENTIFY"):
    name: str
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


class _Ping(_Frame, tag="PING"):
    pass


class _SetPresence(_Frame, tag="SET_PRESENCE"):
    status: str


_AnyFrame = (
    _Identify
    | _Join
    | _Leave
    | _Msg
    | _RespondingTo
    | _ListChannels
    | _ListAgents
    | _CreateChannel
    | _Ping
    | _SetPresence
)
_decoder = msgspec.json.Decoder(_AnyFrame)
_clock = Clock()


def is_agentchat_hello(frame: dict[str, Any]) -> bool:
    """Tell whether a first frame selects the agentchat dialect."""
    return frame.get("type") == "IDENTIFY"


def at(pid: str) -> str:
    """A participant id as written on this dialect."""
    return SERVER_NAME if pid == "system:gateway" else "@" + pid


def _bare(name: str) -> str:
    return name[1:] if name.startswith("@") else name


def _ms(env: Envelope) -> int:
    return iso_to_ms(env.ts) if env.ts else Clock.now_ms()


class AgentchatDialect:
    """Codec for agentchat frames."""

    name = "agentchat"
    server_id = SERVER_NAME

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
            channels=ident.channels if ident.channels is not None else [],
            resume=ident.resume,
            epoch=ident.epoch,
            unique_name=True,
        )

    def decode(self, data: bytes | str) -> Envelope | Reply:
        """Map one frame to its canonical envelope."""
        try:
            frame = _decoder.decode(data)
        except msgspec.DecodeError as exc:
            text = str(exc)
            if text.startswith("JSON is malformed") or "truncated" in text:
                raise ProtocolError(
                    ErrorCode.INVALID_JSON, f"frame is not valid JSON: {text}"
                ) from None
            if "`$.type`" in text or "Object missing required field `type`" in text:
                raise ProtocolError(
                    ErrorCode.UNKNOWN_KIND,
                    f"unknown or missing frame type ({text}); expected one of "
                    + ", ".join(CLIENT_TYPES),
                ) from None
            raise ProtocolError(ErrorCode.INVALID_ENVELOPE, f"invalid frame: {text}") from None
        except UnicodeDecodeError as exc:
            raise ProtocolError(
                ErrorCode.INVALID_JSON, f"frame is not valid UTF-8: {exc}"
            ) from None
        except RecursionError:
            raise ProtocolError(
                ErrorCode.INVALID_ENVELOPE, "frame nests objects/arrays too deeply"
            ) from None
        if isinstance(frame, _Msg):
            if frame.to.startswith("#"):
                return Envelope(kind="chat", channel=frame.to, payload={"text": frame.content})
            if frame.to.startswith("@"):
                return Envelope(
                    kind="chat", to=[frame.to[1:]], private=True, payload={"text": frame.content}
                )
            raise ProtocolError(
                ErrorCode.INVALID_ENVELOPE,
                f"MSG target {frame.to!r} must start with '#' (channel) or '@' (participant)",
            )
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
            return Envelope(kind="channel/create", payload={"channel": frame.channel})
        if isinstance(frame, _SetPresence):
            return Envelope(kind="participant/status", payload={"presence": frame.status})
        if isinstance(frame, _Ping):
            return Reply(encode({"type": "PONG", "ts": Clock.now_ms()}))
        raise ProtocolError(ErrorCode.INVALID_ENVELOPE, "already identified; IDENTIFY is sent once")

    def welcome(self, env: Envelope) -> list[bytes]:
        """``WELCOME {agent_id, name, server}``."""
        you = env.payload.get("you", {})
        return [
            encode(
                {
                    "type": "WELCOME",
                    "agent_id": at(you.get("id", "")),
                    "name": you.get("id", ""),
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
        if kind == "system/presence":
            return [encode(f) for f in self._presence(env)]
        if kind == "channel/joined":
            joined: dict[str, Any] = {
                "type": "JOINED",
                "channel": p.get("channel"),
                "agents": [at(m) for m in p.get("members", [])],
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
            return [
                encode(
                    {
                        "type": "AGENTS",
                        "channel": p.get("channel"),
                        "list": [at(m) for m in p.get("members", [])],
                        "ts": _ms(env),
                    }
                )
            ]
        if kind == "system/error":
            frame = {
                "type": "ERROR",
                "code": str(p.get("error", "internal_error")).upper(),
                "message": p.get("message", ""),
                "ts": _ms(env),
            }
            return [encode(frame)]
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
                        "started_at": p.get("started_at"),
                        "expires_at": p.get("expires_at"),
                        "channel": env.channel,
                        "ts": _ms(env),
                    }
                )
            ]
        if kind == "floor/yield":
            return [
                encode(
                    {
                        "type": "YIELD",
                        "msg_id": p.get("msg_id"),
                        "winner": at(str(p.get("winner", ""))),
                        "channel": env.channel or p.get("channel"),
                        "ts": _ms(env),
                    }
                )
            ]
        return []

    def _msg(self, env: Envelope) -> dict[str, Any]:
        to = env.channel if env.channel else at(env.to[0]) if env.to else ""
        frame: dict[str, Any] = {
            "type": "MSG",
            "from": at(env.from_),
            "to": to,
            "content": env.payload.get("text", ""),
            "msg_id": env.id,
            "ts": _ms(env),
        }
        if env.seq is not None:
            frame["seq"] = env.seq
        for extra in ("cb_id", "late_ms", "buffered"):
            if extra in env.payload:
                frame[extra] = env.payload[extra]
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
            if event in ("join", "leave"):
                frame_type = "AGENT_JOINED" if event == "join" else "AGENT_LEFT"
                channels = [p["channel"]] if "channel" in p else person.get("channels", [])
                out.extend(
                    {"type": frame_type, "channel": ch, "agent": pid, "ts": ts} for ch in channels
                )
            elif event == "update":
                frame: dict[str, Any] = {
                    "type": "PRESENCE",
                    "agent": pid,
                    "presence": person.get("presence", "online"),
                    "ts": ts,
                }
                if isinstance(person.get("wake_at"), str):
                    frame["wake_at"] = iso_to_ms(person["wake_at"])
                out.append(frame)
        return out
