"""The MEW dialect: MEW v0.4 envelopes both ways, after a ``join`` frame."""

from __future__ import annotations

from typing import Any

import msgspec

from hubbub.protocol.dialect import Reply
from hubbub.protocol.envelope import Envelope, decode_envelope, encode
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.hello import Hello
from hubbub.protocol.ids import SERVER_ID
from hubbub.protocol.streams import StreamFrame, is_stream_frame, parse_stream_frame


class _JoinFrame(msgspec.Struct, kw_only=True, rename={"participant_id": "participantId"}):
    type: str = "join"
    participant_id: str | None = None
    space: str = "default"
    token: str | None = None
    kind: str | None = None
    name: str | None = None
    capabilities: list[dict[str, Any]] | None = None
    channels: list[str] | None = None
    resume: dict[str, int] | None = None
    epoch: str | None = None
    presence_lists: bool = False


_ID_ALIASES = ("participant_id", "participant")
"""Other names MEW's clients give the joining participant's id (its CLI: ``participant``)."""


def is_mew_hello(frame: dict[str, Any]) -> bool:
    """Tell whether a first frame selects the MEW dialect."""
    return frame.get("type") == "join" or frame.get("kind") == "system/join"


class MewDialect:
    """Codec for MEW envelopes; every kind is expressible."""

    name = "mew"
    server_id = SERVER_ID
    channel_presence = False
    frames_are_envelopes = True
    stream_frames = True

    def parse_hello(self, frame: dict[str, Any]) -> Hello:
        """Read ``{"type":"join",...}`` or ``{"kind":"system/join","payload":{...}}`` (the
        MEW CLI's ``mew space connect``: ``payload.participant``, ``token``, ``space``)."""
        body = frame.get("payload") if frame.get("kind") == "system/join" else frame
        if not isinstance(body, dict):
            raise ProtocolError(ErrorCode.INVALID_ENVELOPE, "system/join needs a payload object")
        body = dict(body)
        for alias in _ID_ALIASES:
            if alias in body and "participantId" not in body:
                body["participantId"] = body.pop(alias)
        try:
            join = msgspec.convert(body, _JoinFrame)
        except msgspec.ValidationError as exc:
            raise ProtocolError(ErrorCode.INVALID_ENVELOPE, f"invalid join frame: {exc}") from None
        if not join.participant_id:
            raise ProtocolError(
                ErrorCode.INVALID_ID,
                "join frame needs 'participantId' (or, in a system/join payload, "
                "'participant'): 1-32 of [A-Za-z0-9_.-]",
            )
        return Hello(
            participant_id=join.participant_id,
            space=join.space,
            token=join.token or None,
            kind=join.kind,
            capabilities=join.capabilities,
            channels=join.channels,
            resume=join.resume or {},
            epoch=join.epoch,
            resends=join.resume is not None,
            presence_lists=join.presence_lists,
            display_name=join.name,
        )

    def decode(self, data: bytes | str) -> Envelope | Reply | StreamFrame:
        """Parse one envelope, or a stream data frame (``#<stream_id>#<data>``)."""
        if is_stream_frame(data):
            return parse_stream_frame(data)
        return decode_envelope(data)

    def encode(self, env: Envelope) -> list[bytes]:
        """The envelope itself (a displacement, which MEW v0.4 has no kind for, as an error)."""
        if env.kind == "system/session-displaced":
            reason = env.payload.get("reason", "")
            error = {"error": ErrorCode.SESSION_DISPLACED.value, "message": reason}
            env = msgspec.structs.replace(env, kind="system/error", payload=error)
        return [encode(env)]

    def welcome(self, env: Envelope) -> list[bytes]:
        """The welcome envelope itself."""
        return [encode(env)]
