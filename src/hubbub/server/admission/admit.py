"""Admission: the first stage of the pipeline, where a frame is accepted or refused.

One pass over one envelope decides everything a participant can get wrong — the frame's size
and the sender's rate (:meth:`Admission.check_frame`; a MEW stream data frame spends the
sender's stream allowance instead, frames/s and bytes/s, apart from its message rate), then
the kind (from the kind table), the payload's size, the sender's capabilities, the message
id, the proposal rules, a resend (the same message under the same id from a sender that
opted in to resends), whether the store can take it, and where it goes (channel access and
bans, or the recipients of a direct message) — and resolves the destination once
(:meth:`Admission.admit`). What it returns is all the later stages need: nothing after
admission refuses a message for what its sender wrote. The same checks serve the WebSocket
and HTTP (``check_rate``, ``channel_for``).
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from hubbub.protocol.envelope import Envelope, content_digest, encode
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.ids import (
    DEFAULT_CHANNEL,
    DM_STREAM,
    GATEWAY_ADDRESSES,
    is_participant_id,
    reserved_id_error,
)
from hubbub.protocol.kinds import HANDSHAKE_KINDS, MAX_KIND_LEN, RESERVED_KINDS, kind_spec
from hubbub.protocol.streams import is_stream_frame
from hubbub.server.admission.authorization import channel_access, check_guarded, check_send
from hubbub.server.admission.bans import BanList
from hubbub.server.admission.names import NameGuard
from hubbub.server.admission.sender import Sender
from hubbub.server.config import Limits
from hubbub.server.state.space import Channel, RateBuckets, Session, SpaceState
from hubbub.store.base import MessageRef, Store

MAX_ID_LEN: Final = 128
"""Longest client-chosen message id (MEW ids are UUIDs or ULIDs; 128 leaves room)."""
REQUEST: Final = "request"
"""The place of a kind the gateway answers itself (see :mod:`hubbub.server.core.requests`)."""
PRESENCE: Final = "presence"
"""The place of a bare presence change: its presence broadcast is its delivery."""
PRESENCE_FIELDS: Final = frozenset({"presence", "status_text"})


class Destination(NamedTuple):
    """Where an admitted envelope goes, resolved once."""

    place: str
    """A channel's name, :data:`DM_STREAM`, :data:`REQUEST` or :data:`PRESENCE`."""
    channel: Channel | None = None
    """The channel, for a channel message."""
    to: list[str] | None = None
    """The recipients of a direct message, once each, all known."""
    original: MessageRef | None = None
    """A resend of a message already accepted: answered with this original."""
    digest: int = 0
    """The message's :func:`content_digest` when its sender opted in to resends, else 0."""


def _bare_presence(payload: dict[str, Any]) -> bool:
    """Whether a ``participant/status`` payload only sets presence (and status text)."""
    return "presence" in payload and payload.keys() <= PRESENCE_FIELDS


class Admission:
    """Decides whether a participant's envelope is accepted, and where it goes."""

    def __init__(self, limits: Limits, store: Store, bans: BanList, rates: RateBuckets) -> None:
        self.limits = limits
        self.store = store
        self.bans = bans
        self.rates = rates
        """Each participant's rate, shared by its connections (also across reconnects) and
        its HTTP posts."""
        self._channels: dict[Channel, Destination] = {}
        on = limits.rate_per_s > 0  # rate limiting off turns every rate limit off
        self.connections = RateBuckets(limits.rate_per_s if on else 0, limits.rate_burst)
        """Each HTTP connection's rate, whatever ids it posts as."""
        self.addresses = RateBuckets(
            limits.rate_per_address_s if on else 0, limits.rate_per_address_burst
        )
        """Each source address's rate: all its ids, connections and posts together."""
        self.stream_bytes_burst = max(limits.stream_bytes_burst, limits.max_frame_bytes)
        """The byte allowance's burst: a frame of the largest size passes a full one."""
        self.stream_frames = RateBuckets(
            limits.stream_rate_per_s if on else 0, limits.stream_rate_burst
        )
        """Each participant's stream data frames/s (kept across reconnects, as its rate)."""
        self.stream_bytes = RateBuckets(
            limits.stream_bytes_per_s if on else 0, self.stream_bytes_burst
        )
        """Each participant's stream data bytes/s."""
        self.names = NameGuard(limits.allow_lookalike_names)
        """New ids and channel names that look like existing ones (admission/names.py)."""

    # ------------------------------------------------------------------ names

    def check_name(self, space: SpaceState, name: str, *, key_name: bool = False) -> None:
        """Refuse a name a participant takes in ``space`` — its id (a join on either dialect,
        ``/mcp``, an HTTP post) or, with ``key_name``, the name an agentchat key takes — when
        it reads as the gateway's own name or looks like an id or key's name the space has;
        else remember it. Every way of taking a name asks this."""
        reserved = reserved_id_error(name)
        if reserved is not None:
            raise ProtocolError(ErrorCode.INVALID_ID, reserved)
        self.names.check_id(space.id, space.known, name, key_name=key_name)

    # ------------------------------------------------------------------ the frame

    def check_frame(self, s: Session, data: str | bytes) -> int:
        """The frame's size in bytes, once its size and its sender's rate (for a stream data
        frame: its stream allowance) are allowed (and its connection was not replaced by a
        newer one of the same id)."""
        if s.space.online.get(s.id) is not s:
            raise ProtocolError(
                ErrorCode.SESSION_DISPLACED,
                f"this connection was replaced by a newer one of {s.id!r}; nothing it sends is "
                "accepted: close it, or give each process its own participant id",
            )
        size = len(data)
        limit = self.limits.max_frame_bytes
        if size * 4 > limit and isinstance(data, str):
            size = len(data.encode())
        if size > limit:
            raise ProtocolError(
                ErrorCode.FRAME_TOO_LARGE,
                f"frame of {size} bytes exceeds the limit of {limit} bytes "
                "(limits.max_frame_bytes); split the content or raise the limit",
            )
        if s.conn.dialect.stream_frames and is_stream_frame(data):
            self._check_stream_allowance(s, data)
            return size
        if not s.rate.take():
            raise self.rate_error()
        self._check_address(s.conn.peer)
        return size

    def _check_stream_allowance(self, s: Session, data: str | bytes) -> None:
        """Spend one frame and the frame's bytes of the sender's stream allowance."""
        lim = self.limits
        if not self.stream_frames.get(s.space.id, s.id).take():
            raise ProtocolError(
                ErrorCode.RATE_LIMITED,
                f"stream frame rate exceeded: at most {lim.stream_rate_per_s:g} stream data "
                f"frames/s (burst {lim.stream_rate_burst}) per participant, apart from its "
                "message rate (limits.stream_rate_per_s, limits.stream_rate_burst); this "
                "frame was refused and relayed to nobody: send more data per frame, or resend "
                "it later",
            )
        size = len(data) if isinstance(data, bytes) or data.isascii() else len(data.encode())
        if not self.stream_bytes.get(s.space.id, s.id).take(size):
            raise ProtocolError(
                ErrorCode.RATE_LIMITED,
                f"stream data rate exceeded: at most {lim.stream_bytes_per_s:g} bytes/s of "
                f"stream frames (burst {self.stream_bytes_burst}) per participant "
                "(limits.stream_bytes_per_s, limits.stream_bytes_burst); this frame of "
                f"{size} bytes was refused and relayed to nobody: resend it later",
            )

    def rate_error(self) -> ProtocolError:
        """The refusal of a message over its sender's rate."""
        return ProtocolError(
            ErrorCode.RATE_LIMITED,
            f"rate limit exceeded: at most {self.limits.rate_per_s:g} messages/s "
            f"(burst {self.limits.rate_burst}; limits.rate_per_s, limits.rate_burst); this "
            "message was refused, resend it later",
        )

    def check_rate(
        self, space: SpaceState, pid: str, address: str = "", connection: str = ""
    ) -> None:
        """Spend one message of ``pid``'s rate (HTTP posts share it with the WebSocket), of
        the HTTP ``connection``'s and of the source ``address``'s."""
        online = space.online.get(pid)
        bucket = online.rate if online is not None else self.rates.get(space.id, pid)
        if not bucket.take():
            raise self.rate_error()
        if connection and not self.connections.get("", connection).take():
            raise ProtocolError(
                ErrorCode.RATE_LIMITED,
                f"rate limit exceeded per connection: at most {self.limits.rate_per_s:g} "
                f"messages/s (burst {self.limits.rate_burst}) on one HTTP connection, whatever "
                "ids it posts as (limits.rate_per_s); this message was refused, resend it later",
            )
        self._check_address(address)

    def _check_address(self, address: str) -> None:
        """Spend one message of the source address's rate."""
        if address and not self.addresses.get("", address).take():
            raise ProtocolError(
                ErrorCode.RATE_LIMITED,
                f"rate limit exceeded for your address {address}: at most "
                f"{self.limits.rate_per_address_s:g} messages/s (burst "
                f"{self.limits.rate_per_address_burst}) from one address, all its ids and "
                "connections together (limits.rate_per_address_s); this message was refused, "
                "resend it later",
            )

    # ------------------------------------------------------------------ the envelope

    def admit(self, sender: Sender, env: Envelope, frame_len: int = 0) -> Destination:
        """Check everything about ``env`` its sender decides; where it goes, or raise."""
        kind = env.kind
        client_id = env.id or None
        spec = kind_spec(kind)
        reserved = RESERVED_KINDS.get(kind)
        if reserved is not None:
            raise ProtocolError(ErrorCode.INVALID_REQUEST, reserved, correlation_id=client_id)
        if spec is None or spec.sender != "client":
            if spec is not None or kind in HANDSHAKE_KINDS:
                raise ProtocolError(
                    ErrorCode.UNKNOWN_KIND,
                    f"kind {kind!r} is sent only by the server",
                    correlation_id=client_id,
                )
            raise ProtocolError(
                ErrorCode.UNKNOWN_KIND,
                f"unknown kind {kind!r}: a kind is 1-{MAX_KIND_LEN} printable characters without "
                "spaces, and system/ kinds are the gateway's own (docs/protocol.md lists them)",
                correlation_id=client_id,
            )
        if frame_len > self.limits.max_payload_bytes:
            psize = len(encode(env.payload))
            if psize > self.limits.max_payload_bytes:
                raise ProtocolError(
                    ErrorCode.PAYLOAD_TOO_LARGE,
                    f"payload of {psize} bytes exceeds the limit of "
                    f"{self.limits.max_payload_bytes} bytes (limits.max_payload_bytes)",
                    correlation_id=client_id,
                )
        check_guarded(sender.space, sender.id, sender.role, sender.caps, env)
        check_send(sender.caps, kind, env.payload, client_id)  # one budgeted check
        if kind == "chat" and not isinstance(env.payload.get("text"), str):
            raise ProtocolError(
                ErrorCode.INVALID_ENVELOPE,
                "chat payload needs 'text' (a string)",
                correlation_id=client_id,
            )
        if client_id is not None and (len(client_id) > MAX_ID_LEN or not client_id.isprintable()):
            raise ProtocolError(
                ErrorCode.INVALID_ID,
                f"message id must be 1-{MAX_ID_LEN} printable characters (a ULID or UUID); "
                "leave it out and the gateway assigns one",
            )
        if isinstance(env.correlation_id, str):
            env.correlation_id = [env.correlation_id]
        if kind.startswith("mcp/"):  # proposal rules
            ledger = sender.space.proposals
            ledger.check(env, sender.id)
            ledger.check_room(
                env,
                sender.id,
                self.limits.max_pending_proposals_per_participant,
                self.limits.max_pending_proposals,
            )
            ledger.check_seen(env, sender.id, lambda ch: self._reads(sender, ch))
        digest = 0
        if spec.stored:
            if client_id is not None and sender.resends:
                digest = content_digest(env)
                ref = sender.space.ids.get(sender.id, client_id)
                if ref is not None and ref.digest == digest:
                    return Destination(ref.place, original=ref)
            self.require_store(client_id)
        if spec.request:
            return Destination(REQUEST)
        if kind == "participant/status" and _bare_presence(env.payload):
            return Destination(PRESENCE)
        try:
            dest = self.destination(sender, env)
        except ProtocolError as exc:
            # docs/protocol.md: an error quotes the offending frame's id when it had one
            if exc.correlation_id is None:
                exc.correlation_id = client_id
            raise
        return dest._replace(digest=digest) if digest else dest

    def require_store(self, client_id: str | None = None) -> None:
        """Refuse a message to store while the store is unreachable (nothing is accepted)."""
        if not self.store.available:
            raise ProtocolError(
                ErrorCode.UNAVAILABLE,
                "the gateway cannot store messages right now (its store is unreachable); "
                "nothing was accepted: send it again in a few seconds",
                correlation_id=client_id,
            )

    # ------------------------------------------------------------------ destinations

    def destination(self, sender: Sender, env: Envelope) -> Destination:
        """Where ``env`` goes: a direct message's recipients, or the channel (``#general``
        by default) with its ``to`` checked."""
        if env.private:
            return Destination(DM_STREAM, None, self.dm_recipients(sender, env.to))
        name = DEFAULT_CHANNEL if env.channel is None else env.channel
        ch = channel_access(self.bans, sender.space, sender.id, sender.caps, name)
        if env.to is not None:
            if not env.to:
                raise ProtocolError(
                    ErrorCode.INVALID_ENVELOPE,
                    "'to' must name at least one recipient, or be left out",
                )
            self._check_recipients(sender.space, env.to)
        dest = self._channels.get(ch)
        if dest is None:  # one per channel, made once (this is the hot path)
            dest = self._channels[ch] = Destination(ch.name, ch)
        return dest

    def dm_recipients(self, sender: Sender, to: list[str] | None) -> list[str]:
        """The recipients of a DM, once each, all known."""
        unique = list(dict.fromkeys(to or []))
        if not unique:
            raise ProtocolError(ErrorCode.INVALID_ENVELOPE, "'to' must name at least one recipient")
        self._check_recipients(sender.space, unique)
        return unique

    def channel_for(self, sender: Sender, name: Any, *, member: bool = True) -> Channel:
        """The channel ``sender`` may use (``member=False``: may join); see authorization.py."""
        return channel_access(
            self.bans, sender.space, sender.id, sender.caps, name, joining=not member
        )

    def _reads(self, sender: Sender, name: str) -> bool:
        """Whether ``sender`` may read channel ``name`` (the rule of :meth:`channel_for`)."""
        try:
            self.channel_for(sender, name)
        except ProtocolError:
            return False
        return True

    def _check_recipients(self, space: SpaceState, to: list[str]) -> None:
        for pid in to:
            if pid in GATEWAY_ADDRESSES:
                continue  # the gateway itself (MEW: to: ["gateway"])
            if not is_participant_id(pid):
                raise ProtocolError(
                    ErrorCode.INVALID_ID, f"recipient {pid!r} is not a legal participant id"
                )
            if pid not in space.known:
                raise ProtocolError(
                    ErrorCode.UNKNOWN_PARTICIPANT,
                    f"no participant {pid!r} in space {space.id!r}; "
                    "check the id (GET /participants lists them)",
                )
