"""Streams: MEW v0.4's data streams (§3.10), opened and policed by the gateway.

``stream/request`` is stored in its channel like a message and answered with a
``stream/open`` to everyone in the space who may see that channel (a private channel's
streams reach its members only: :mod:`hubbub.server.state.visibility`); the owner (and the
writers it grants) then send raw ``#<stream_id>#<data>`` frames, relayed as they are to that
audience or to the stream's ``target``. ``stream/grant-write``, ``stream/revoke-write`` and
``stream/transfer-ownership`` change who may write and are acknowledged to the audience
(``stream/write-granted``, ``stream/write-revoked``, ``stream/ownership-transferred``);
``stream/close`` is stored and relayed, and ends the stream it names. A stream belongs to a
connection: only a participant connected now may open one (an HTTP post of a participant
without a connection is refused), and its streams close when it leaves the space, and a
writer's grants end. The rules of a stream are in :mod:`hubbub.server.state.streams`; this
stage acts on them and tells the audience.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hubbub.protocol.envelope import Envelope, encode
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.ids import Clock
from hubbub.protocol.streams import StreamFrame
from hubbub.server.admission.admit import Admission, Destination
from hubbub.server.admission.sender import HttpSender, Sender
from hubbub.server.core.delivery import Delivery
from hubbub.server.core.sequencer import After, Sequencer
from hubbub.server.state.space import Session, SpaceState
from hubbub.server.state.streams import Stream
from hubbub.server.state.visibility import sees_name, stream_audience
from hubbub.store.base import Store

Handler = Callable[[Sender, Envelope, int], None]

OWNER_LEFT = "owner_disconnected"
"""The ``reason`` of the gateway's ``stream/close`` when a stream's owner left the space."""
WRITER_LEFT = "disconnected"
"""The ``reason`` of the gateway's ``stream/write-revoked`` when a writer left the space."""


def _participant(p: dict[str, Any], key: str, kind: str) -> str:
    """The participant id at ``p[key]``, or ``invalid_envelope``."""
    pid = p.get(key)
    if not isinstance(pid, str) or not pid:
        raise ProtocolError(
            ErrorCode.INVALID_ENVELOPE, f"{kind} needs payload.{key} (a participant id)"
        )
    return pid


def _online(space: SpaceState, pid: str, stream: Stream) -> None:
    """``participant_not_found`` unless ``pid`` is connected to ``space``; ``not_invited``
    when it may not see ``stream``'s channel."""
    if pid not in space.online:
        raise ProtocolError(
            ErrorCode.PARTICIPANT_NOT_FOUND,
            f"Participant {pid!r} is not in the space (not connected): a stream's writers "
            "and owner are participants connected now",
        )
    if stream.channel is not None and not sees_name(space, stream.channel, pid):
        raise ProtocolError(
            ErrorCode.NOT_INVITED,
            f"Participant {pid!r} is not invited to {stream.channel}, where this stream was "
            f"requested: invite it first (channel/invite)",
        )


class Streams:
    """Acts on the stream kinds and relays stream data frames."""

    def __init__(
        self,
        store: Store,
        admission: Admission,
        sequencer: Sequencer,
        delivery: Delivery,
        clock: Clock,
    ) -> None:
        self.store = store
        self.admission = admission
        self.sequencer = sequencer
        self.delivery = delivery
        self.clock = clock
        self.handlers: dict[str, Handler] = {
            "stream/request": self.request,
            "stream/close": self.close,
            "stream/grant-write": self.grant_write,
            "stream/revoke-write": self.revoke_write,
            "stream/transfer-ownership": self.transfer_ownership,
        }
        """The request handler of each stream kind (the kind table's stream rows)."""

    # ------------------------------------------------------------------ requests

    def request(self, sender: Sender, env: Envelope, now: int) -> None:
        """``stream/request``: open a stream owned by the sender; the request is stored and
        relayed like a message, then everyone gets the gateway's ``stream/open``."""
        space = sender.space
        p = env.payload
        if isinstance(sender, HttpSender) and sender.id not in space.online:
            raise ProtocolError(
                ErrorCode.INVALID_OPERATION,
                f"stream/request needs a live connection: {sender.id!r} has none, and a "
                "stream belongs to a connection (it closes when that connection does); "
                f"connect over WebSocket as {sender.id!r} first, then request the stream "
                "(over that connection, or over HTTP while it stays connected)",
            )
        dest = self.admission.destination(sender, env)
        channel = dest.channel.name if dest.channel is not None else None
        target = self._target(space, p.get("target"), channel)
        if dest.channel is None and target is None:  # a direct message's stream: its parties
            target = list(dest.to or ())
        created = self.clock.iso(now)
        size = len(encode(p))
        stream = space.streams.open(sender.id, env.id, created, p, target, size, channel)
        payload: dict[str, Any] = {
            "stream_id": stream.stream_id,
            "encoding": "text",
            "owner": stream.owner,
            "authorized_writers": list(stream.writers),
            "created": created,
        }
        if target is not None:
            payload["target"] = target
        opened = self.delivery.server_env(
            "stream/open", payload, to=[sender.id], correlation_id=[env.id]
        )
        stream.open_id = opened.id
        if isinstance(sender, HttpSender):  # its 202 names the stream (as MEW's gateway does)
            sender.answer = {"stream_id": stream.stream_id}
        self._accept(sender, dest, env, now, after=lambda: self._tell(space, stream, opened))

    def close(self, sender: Sender, env: Envelope, now: int) -> None:
        """``stream/close``: stored and relayed like a message; when it names an open stream
        (``payload.stream_id``, or a ``correlation_id`` of its request or ``stream/open``
        from its owner) that stream ends, and only its owner may end it."""
        space = sender.space
        sid = env.payload.get("stream_id")
        stream: Stream | None = None
        if isinstance(sid, str) and space.streams.get(sid) is not None:
            stream = space.streams.owned(sid, sender.id, "close it")
        elif sid is None and env.correlation_id:
            found = space.streams.correlated(env.correlation_ids())
            if found is not None and found.owner == sender.id:
                stream = found
        dest = self.admission.destination(sender, env)
        if stream is not None:
            space.streams.close(stream)
        self._accept(sender, dest, env, now)

    def grant_write(self, sender: Sender, env: Envelope, now: int) -> None:
        """``stream/grant-write {stream_id, participant_id}`` of the owner."""
        space, p = sender.space, env.payload
        stream = space.streams.owned(p.get("stream_id"), sender.id, "grant write access")
        pid = _participant(p, "participant_id", env.kind)
        _online(space, pid, stream)
        space.streams.grant(stream, pid)
        self._ack(space, env, "stream/write-granted", stream, {"participant_id": pid})

    def revoke_write(self, sender: Sender, env: Envelope, now: int) -> None:
        """``stream/revoke-write {stream_id, participant_id}`` of the owner."""
        space, p = sender.space, env.payload
        stream = space.streams.owned(p.get("stream_id"), sender.id, "revoke write access")
        pid = _participant(p, "participant_id", env.kind)
        space.streams.revoke(stream, pid)
        self._ack(space, env, "stream/write-revoked", stream, {"participant_id": pid})

    def transfer_ownership(self, sender: Sender, env: Envelope, now: int) -> None:
        """``stream/transfer-ownership {stream_id, new_owner}`` of the owner."""
        space, p = sender.space, env.payload
        stream = space.streams.owned(p.get("stream_id"), sender.id, "transfer ownership")
        new_owner = _participant(p, "new_owner", env.kind)
        _online(space, new_owner, stream)
        previous = space.streams.transfer(stream, new_owner)
        fields = {"previous_owner": previous, "new_owner": new_owner}
        self._ack(space, env, "stream/ownership-transferred", stream, fields)

    # ------------------------------------------------------------------ frames

    def frame(self, s: Session, frame: StreamFrame) -> None:
        """Relay a data frame of one of the stream's writers, as it arrived, to the stream's
        target or everyone who may hear of it (its writer included, as MEW's gateway does)."""
        space = s.space
        stream = space.streams.get(frame.stream_id)
        if stream is None or s.id not in stream.writers:
            if stream is None:
                why = f"no stream {frame.stream_id!r} is open (stream/request opens one)"
            else:
                why = (
                    f"only its writers ({', '.join(stream.writers)}) may; its owner "
                    f"{stream.owner!r} can grant you stream/grant-write"
                )
            raise ProtocolError(
                ErrorCode.UNAUTHORIZED_STREAM_WRITE,
                f"You are not authorized to write to stream {frame.stream_id}: {why}",
                extra={"stream_id": frame.stream_id},
            )
        data = frame.data
        # after the messages this connection sent before it (nothing of its own is stored)
        self.store.after_commit(
            lambda: self.delivery.stream_frame(stream_audience(space, stream, frames=True), data)
        )

    # ------------------------------------------------------------------ leaving

    def left(self, space: SpaceState, pid: str) -> None:
        """``pid`` left the space: the streams it owns close (``stream/close``, reason
        ``owner_disconnected``) and its grants on others' streams end."""
        for stream in space.streams.owned_by(pid):
            space.streams.close(stream)
            payload = {"stream_id": stream.stream_id, "reason": OWNER_LEFT}
            cid = [stream.open_id] if stream.open_id else None
            self._tell(
                space, stream, self.delivery.server_env("stream/close", payload, correlation_id=cid)
            )
        for stream in space.streams.written_by(pid):
            space.streams.revoke(stream, pid)
            payload = self._state(stream) | {"participant_id": pid, "reason": WRITER_LEFT}
            self._tell(space, stream, self.delivery.server_env("stream/write-revoked", payload))

    # ------------------------------------------------------------------ helpers

    def _accept(
        self, sender: Sender, dest: Destination, env: Envelope, now: int, after: After = None
    ) -> None:
        """Sequence a request that is also a message (as the router sequences messages)."""
        if sender.space.pending_presence:
            # nobody may hear from a participant before hearing that it joined
            self.delivery.flush_presence(sender.space)
        self.sequencer.accept(sender, dest, env, now, after=after)

    @staticmethod
    def _target(space: SpaceState, target: object, channel: str | None) -> list[str] | None:
        """A request's ``target``: None (omitted, null, empty: everyone), else its ids,
        each connected to the space (``target_not_found`` names those that are not) and
        allowed to see ``channel`` (``not_invited`` names those that are not)."""
        if target is None or target == []:
            return None
        if not isinstance(target, list) or not all(isinstance(t, str) for t in target):
            raise ProtocolError(
                ErrorCode.INVALID_ENVELOPE,
                "stream/request payload.target must be a list of participant ids (or left out "
                "for a stream to everyone)",
            )
        ids = list(dict.fromkeys(target))
        missing = [t for t in ids if t not in space.online]
        if missing:
            raise ProtocolError(
                ErrorCode.TARGET_NOT_FOUND,
                "One or more target participants do not exist in space (not connected): "
                + ", ".join(repr(t) for t in missing[:10]),
                extra={"targets": missing},
            )
        outside = [t for t in ids if channel is not None and not sees_name(space, channel, t)]
        if outside:
            raise ProtocolError(
                ErrorCode.NOT_INVITED,
                f"One or more target participants are not invited to {channel}: "
                + ", ".join(repr(t) for t in outside[:10])
                + " (invite them first, channel/invite)",
                extra={"targets": outside},
            )
        return ids

    @staticmethod
    def _state(stream: Stream) -> dict[str, Any]:
        return {"stream_id": stream.stream_id, "authorized_writers": list(stream.writers)}

    def _ack(
        self,
        space: SpaceState,
        req: Envelope,
        kind: str,
        stream: Stream,
        fields: dict[str, Any],
    ) -> None:
        """Tell the stream's audience what ``req`` changed, correlated to it, once what its
        sender sent before it is delivered."""
        payload = self._state(stream) | fields
        reason = req.payload.get("reason")
        if reason is not None:
            payload["reason"] = reason
        env = self.delivery.server_env(kind, payload, correlation_id=[req.id])
        self.store.after_commit(lambda: self._tell(space, stream, env))

    def _tell(self, space: SpaceState, stream: Stream, env: Envelope) -> None:
        """Tell everyone who may hear of ``stream`` (``state/visibility.py``)."""
        self.delivery.to_each(stream_audience(space, stream), env)
