"""What a wire dialect is: a codec at the edge between frames and envelopes (DESIGN §3)."""

from __future__ import annotations

from typing import Any, Protocol

from hubbub.protocol.envelope import Envelope
from hubbub.protocol.hello import Hello
from hubbub.protocol.streams import StreamFrame


class Reply:
    """A frame the codec answers by itself (e.g. ``PING`` → ``PONG``); never routed."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


class Dialect(Protocol):
    """One wire dialect. Nothing behind it knows which dialect a participant speaks."""

    name: str
    channel_presence: bool
    """Membership events go per channel to that channel's other members (agentchat's
    ``AGENT_JOINED``/``AGENT_LEFT``), and presence updates to those sharing a channel with the
    participant, never to itself (``PRESENCE_CHANGED``), instead of to the whole space (MEW's
    ``system/presence``)."""
    frames_are_envelopes: bool
    """Every frame is the envelope's own JSON (``encode(env) == [envelope JSON]`` for all but
    the kinds it rewrites): a channel message's stored bytes are sent as they are."""
    stream_frames: bool
    """It carries MEW's raw stream data frames (``#<stream_id>#<data>``) both ways."""

    def parse_hello(self, frame: dict[str, Any]) -> Hello:
        """Turn the first frame into a Hello, or raise ProtocolError."""
        ...

    def decode(self, data: bytes | str) -> Envelope | Reply | StreamFrame:
        """Turn one incoming frame into an envelope (or a local reply, or a stream's data)."""
        ...

    def encode(self, env: Envelope) -> list[bytes]:
        """Frames for an envelope; empty when the dialect cannot express its kind."""
        ...

    def welcome(self, env: Envelope) -> list[bytes]:
        """Frames for the server's welcome envelope."""
        ...
