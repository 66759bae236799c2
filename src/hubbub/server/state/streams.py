"""The open streams of a space (MEW v0.4 §3.10): who owns each, who may write, where its
frames go.

Plain state with its rules, no I/O: :class:`SpaceStreams` opens, changes and closes streams
and raises a :class:`ProtocolError` with MEW's error code when a participant may not; the
gateway's stage (``server/core/streams.py``) tells everyone what changed and relays frames.
Streams live in memory on the process that runs the space's pipeline (in cluster mode, the
space's leader): they end with it, as their owners' connections do.
"""

from __future__ import annotations

from typing import Any, Final

from hubbub.protocol.errors import ErrorCode, ProtocolError

MAX_STREAMS_PER_PARTICIPANT: Final = 16
"""Open streams one participant may own at once."""
MAX_STREAMS_PER_SPACE: Final = 256
"""Open streams of one space (every late joiner's welcome lists them all)."""
MAX_STREAM_INFO_BYTES: Final = 4096
"""Largest ``stream/request`` payload kept for late joiners' welcomes."""
SERVER_FIELDS: Final = frozenset({"stream_id", "owner", "authorized_writers", "created"})
"""Fields of a stream's description the gateway decides; a request cannot set them."""


class Stream:
    """One open stream."""

    __slots__ = (
        "channel",
        "created",
        "info",
        "open_id",
        "owner",
        "request_id",
        "stream_id",
        "target",
        "writers",
    )

    def __init__(
        self,
        stream_id: str,
        owner: str,
        request_id: str,
        created: str,
        info: dict[str, Any],
        target: list[str] | None,
        channel: str | None = None,
    ) -> None:
        self.stream_id = stream_id
        self.owner = owner
        self.request_id = request_id
        self.open_id = ""
        """The id of the gateway's ``stream/open`` (a ``stream/close`` may correlate to it)."""
        self.created = created
        self.info = info
        """The request's payload, without the fields the gateway decides."""
        self.target = target
        """Who receives its frames (None: everyone who may hear of the stream)."""
        self.channel = channel
        """The channel it was requested in (a private one's streams reach its members only:
        ``state/visibility.py``); None: a direct message's stream."""
        self.writers: list[str] = [owner]
        """Who may write frames to it: its owner first, then those granted."""

    def describe(self) -> dict[str, Any]:
        """The stream as the welcome's ``active_streams`` lists it (MEW §3.8.1, §3.10.8):
        the request's fields, then the gateway's, which win."""
        return self.info | {
            "stream_id": self.stream_id,
            "owner": self.owner,
            "authorized_writers": list(self.writers),
            "created": self.created,
        }


class SpaceStreams:
    """The open streams of one space, by id."""

    def __init__(self) -> None:
        self._streams: dict[str, Stream] = {}
        self._counter = 0

    def __len__(self) -> int:
        """How many streams are open."""
        return len(self._streams)

    def get(self, stream_id: str) -> Stream | None:
        """The open stream ``stream_id``, or None."""
        return self._streams.get(stream_id)

    def open_streams(self) -> list[Stream]:
        """Every open stream (a welcome lists those its reader may hear of:
        ``state/visibility.py``)."""
        return list(self._streams.values())

    def owned_by(self, pid: str) -> list[Stream]:
        """The streams ``pid`` owns."""
        return [s for s in self._streams.values() if s.owner == pid]

    def written_by(self, pid: str) -> list[Stream]:
        """The streams ``pid`` may write to without owning them."""
        return [s for s in self._streams.values() if pid in s.writers and s.owner != pid]

    def open(
        self,
        owner: str,
        request_id: str,
        created: str,
        payload: dict[str, Any],
        target: list[str] | None,
        size: int,
        channel: str | None = None,
    ) -> Stream:
        """Open a stream for ``owner`` (``size``: the request payload's bytes), within the
        limits, or raise ``stream_limit``."""
        if size > MAX_STREAM_INFO_BYTES:
            raise ProtocolError(
                ErrorCode.STREAM_LIMIT,
                f"stream/request payload of {size} bytes exceeds {MAX_STREAM_INFO_BYTES} bytes "
                "(every late joiner's welcome repeats it): describe the stream in fewer bytes",
            )
        if len(self.owned_by(owner)) >= MAX_STREAMS_PER_PARTICIPANT:
            raise ProtocolError(
                ErrorCode.STREAM_LIMIT,
                f"{owner!r} already owns {MAX_STREAMS_PER_PARTICIPANT} open streams, the most "
                "one participant may: close one (stream/close with its stream_id) first",
            )
        if len(self._streams) >= MAX_STREAMS_PER_SPACE:
            raise ProtocolError(
                ErrorCode.STREAM_LIMIT,
                f"this space has {MAX_STREAMS_PER_SPACE} open streams, the most it may have: "
                "close streams that are done (stream/close) first",
            )
        self._counter += 1
        stream_id = f"stream-{self._counter}"
        info = {k: v for k, v in payload.items() if k not in SERVER_FIELDS}
        stream = Stream(stream_id, owner, request_id, created, info, target, channel)
        self._streams[stream_id] = stream
        return stream

    def close(self, stream: Stream) -> None:
        """End ``stream``."""
        self._streams.pop(stream.stream_id, None)

    def correlated(self, ids: list[str]) -> Stream | None:
        """The open stream whose ``stream/open`` or ``stream/request`` one of ``ids`` names."""
        for stream in self._streams.values():
            if stream.open_id in ids or stream.request_id in ids:
                return stream
        return None

    def owned(self, stream_id: object, pid: str, action: str) -> Stream:
        """The open stream ``stream_id`` when ``pid`` owns it; else ``stream_not_found`` or
        ``unauthorized`` (``action``: what the owner alone may do, for the message)."""
        stream = self._streams.get(stream_id) if isinstance(stream_id, str) else None
        if stream is None:
            raise ProtocolError(
                ErrorCode.STREAM_NOT_FOUND,
                f"Stream {stream_id!r} does not exist (it was closed, or never opened): "
                "payload.stream_id names a stream of a stream/open",
            )
        if stream.owner != pid:
            raise ProtocolError(
                ErrorCode.UNAUTHORIZED,
                f"Only the stream owner can {action} (stream {stream.stream_id} is owned by "
                f"{stream.owner!r})",
            )
        return stream

    @staticmethod
    def grant(stream: Stream, pid: str) -> None:
        """Let ``pid`` write to ``stream`` (again: no change)."""
        if pid not in stream.writers:
            stream.writers.append(pid)

    @staticmethod
    def revoke(stream: Stream, pid: str) -> None:
        """Stop ``pid`` writing to ``stream`` (not a writer: no change); never its owner."""
        if pid == stream.owner:
            raise ProtocolError(
                ErrorCode.INVALID_OPERATION,
                "Owner cannot revoke own write access: transfer the stream "
                "(stream/transfer-ownership) or close it (stream/close)",
            )
        if pid in stream.writers:
            stream.writers.remove(pid)

    @staticmethod
    def transfer(stream: Stream, new_owner: str) -> str:
        """Make ``new_owner`` the owner (and a writer; the previous owner stops writing);
        the previous owner."""
        previous = stream.owner
        stream.owner = new_owner
        if previous in stream.writers:
            stream.writers.remove(previous)
        if new_owner not in stream.writers:
            stream.writers.append(new_owner)
        return previous
