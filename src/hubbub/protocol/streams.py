"""MEW v0.4 stream data frames: ``#<stream_id>#<data>``, raw text beside the envelopes.

A stream is opened by the gateway (``stream/request`` → ``stream/open``); its data then
travels without an envelope, each frame prefixed with the stream's id (MEW §3.10.3). This
module only recognises such a frame; who may write to which stream is the gateway's
(``server/core/streams.py``).
"""

from __future__ import annotations

from typing import Final

from hubbub.protocol.errors import ErrorCode, ProtocolError

STREAM_PREFIX: Final = "#"
"""A frame starting with it is a stream data frame (no JSON value starts with ``#``)."""
MAX_STREAM_ID_LEN: Final = 64
"""Longest stream id looked for between the two ``#`` (the gateway's are ``stream-<n>``)."""


class StreamFrame:
    """One stream data frame as it arrived: relayed as it is, never parsed further."""

    __slots__ = ("data", "stream_id")

    def __init__(self, stream_id: str, data: bytes) -> None:
        self.stream_id = stream_id
        self.data = data
        """The whole frame, ``#<stream_id>#<data>``, as UTF-8 bytes."""


def is_stream_frame(data: bytes | str) -> bool:
    """Whether a frame is a stream data frame (starts with ``#``)."""
    return data[:1] in ("#", b"#")


def parse_stream_frame(data: bytes | str) -> StreamFrame:
    """The stream frame ``data`` is, or a ProtocolError naming the form it must have."""
    raw = data.encode() if isinstance(data, str) else data
    end = raw.find(b"#", 1, MAX_STREAM_ID_LEN + 2)
    if end < 2:
        raise ProtocolError(
            ErrorCode.INVALID_ENVELOPE,
            "a frame starting with '#' is a stream data frame: write "
            f"#<stream_id>#<data> (a stream_id of 1-{MAX_STREAM_ID_LEN} characters from "
            "the gateway's stream/open)",
        )
    try:
        stream_id = raw[1:end].decode()
        if isinstance(data, bytes):
            data.decode()  # relayed as a text frame: it must be text
    except UnicodeDecodeError as exc:
        raise ProtocolError(
            ErrorCode.INVALID_JSON, f"stream frame is not valid UTF-8: {exc}"
        ) from None
    return StreamFrame(stream_id, raw)
