"""The gateway's router: one place that validates, authorizes, stores and fans out envelopes.

Everything here is synchronous except history reads that miss the in-memory cache, so a
message is accepted, numbered, queued for storage and written to every recipient in one step.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec

from hubbub.protocol.capabilities import CapabilityError, CapabilitySet, validate_capabilities
from hubbub.protocol.dialect import Reply
from hubbub.protocol.envelope import (
    CLIENT_KINDS,
    PROTOCOL,
    SERVER_KINDS,
    STORED_KINDS,
    Envelope,
    encode,
)
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.hello import Hello
from hubbub.protocol.ids import Clock, UlidGenerator, is_channel, is_participant_id
from hubbub.protocol.markers import SleepMarker
from hubbub.server import observe  # dashboard
from hubbub.server.activity import Activity
from hubbub.server.auth import Authenticator, Identity
from hubbub.server.authorization import (
    changed_capabilities,
    channel_access,
    check_grant,
    check_send,
    may_join,
)
from hubbub.server.bans import BanList  # admin kill switch
from hubbub.server.config import AUTO_JOIN_MAX, EngineSettings, Limits, SpaceConfig
from hubbub.server.connection import (
    CLOSE_GOING_AWAY,
    CLOSE_REPLACED,
    Connection,
    ws_text_frame,
)
from hubbub.server.coordination import Coordination, now_ms
from hubbub.server.delivery import Delivery
from hubbub.server.metrics import Metrics
from hubbub.server.sender import HttpSender as HttpSender  # re-exported for older imports
from hubbub.server.sender import Sender
from hubbub.server.space import Channel, RateBuckets, Session, SpaceState
from hubbub.store.base import DM_STREAM, MessageRef, Store

log = logging.getLogger("hubbub.router")

SERVER_ID = "system:gateway"
HISTORY_CACHE = 512
SETTABLE_PRESENCE = ("online", "away", "busy", "listening", "offline")
"""Presence values a participant may set itself (agentchat's set; ``sleeping`` is the server's)."""
MAX_STATUS_TEXT = 200
_PRESENCE_FIELDS = frozenset({"presence", "status_text"})
MAX_SEQ = 2**62
"""Sequence numbers sent by clients are clamped to [0, MAX_SEQ] (SQLite integers are 64-bit)."""
MAX_ID_LEN = 128
"""Longest client-chosen message id (MEW ids are UUIDs or ULIDs; 128 leaves room)."""


def _clamp_seq(value: int) -> int:
    return max(0, min(value, MAX_SEQ))


class _StoredId(msgspec.Struct):
    """Only the id of a stored envelope (the rest is skipped, not decoded)."""

    id: str = ""


_read_id = msgspec.json.Decoder(_StoredId).decode


class Router:
    """Routes envelopes between the sessions of every space on this server."""

    def __init__(
        self,
        spaces: Iterable[SpaceConfig],
        store: Store,
        limits: Limits,
        metrics: Metrics | None = None,
        server_name: str = "hubbub",
        engine_settings: EngineSettings | None = None,
        engine_clock: Callable[[], float] | None = None,
    ) -> None:
        configs = {c.space: c for c in spaces}
        self.spaces = {sid: SpaceState(cfg, limits.idempotency_ids) for sid, cfg in configs.items()}
        self.auth = Authenticator(configs)
        self.store = store
        self.limits = limits
        self.metrics = metrics or Metrics()
        self.server_name = server_name
        self.ids = UlidGenerator()
        self.clock = Clock()
        self.capability_overrides: dict[tuple[str, str], CapabilitySet] = {}
        self.epoch = ""
        """The store's history identity, sent in every welcome (see docs/reliability.md)."""
        self._tasks: set[asyncio.Task[Any]] = set()
        self.shutting_down = False
        self.rates = RateBuckets(limits.rate_per_s, limits.rate_burst)
        """Each participant's rate, shared by its connections (also across reconnects) and
        its HTTP posts."""
        self.activity = Activity()
        self.delivery = Delivery(
            limits, self.metrics, self.activity, self.clock, self.ids, lambda: self.shutting_down
        )
        """Writes to the sessions (shared with coordination; see delivery.py)."""
        self.bans = BanList(self.store)  # admin kill switch (hubbub.server.bans, admin)
        self.proposal_board = observe.ProposalBoard()  # dashboard (hubbub.server.observe)
        self.coordination = Coordination(
            self, engine_settings or EngineSettings(), engine_clock or now_ms
        )

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Open the store and continue each channel's numbering where it stopped."""
        await self.store.open()
        self.epoch = await self.store.epoch()
        for space in self.spaces.values():
            await self.bans.load(space.id)
            await self._load_message_ids(space)
            await self._load_capabilities(space)
            seqs = await self.store.last_seqs(space.id)
            names = dict.fromkeys(space.config.channels)  # ordered, O(1) membership
            names.update(dict.fromkeys(await self.store.channels(space.id)))
            for name in names:
                space.channels[name] = Channel(name, seqs.get(name, 0), HISTORY_CACHE)
            space.dm_seq = space.dm_assigned = seqs.get(DM_STREAM, 0)
            await self._load_dm_marks(space)
        await self.coordination.start()

    async def _load_capabilities(self, space: SpaceState) -> None:
        """Read back the capabilities that grants and revokes left (they outlive restarts)."""
        for pid, saved in (await self.store.capabilities(space.id)).items():
            try:
                self.capability_overrides[(space.id, pid)] = CapabilitySet(saved)
            except CapabilityError as exc:
                log.warning("ignoring the saved capabilities of %s in %s: %s", pid, space.id, exc)

    def capabilities_for(self, ident: Identity) -> CapabilitySet:
        """``ident``'s capabilities: as grants and revokes left them, else as configured."""
        saved = self.capability_overrides.get((ident.space, ident.id))
        return saved if saved is not None else ident.capability_set()

    def set_capabilities(self, space: SpaceState, pid: str, caps: CapabilitySet) -> None:
        """Replace ``pid``'s capabilities now and for good (saved; they win over space.yaml)."""
        self.capability_overrides[(space.id, pid)] = caps
        self.store.put_capabilities(space.id, pid, caps.capabilities)
        s = space.online.get(pid)
        if s is not None:
            s.caps = caps

    def leave_channels_not_allowed(self, s: Session) -> None:
        """End ``s``'s memberships of channels its capabilities no longer let it join."""
        for name in sorted(s.channels):
            ch = s.space.channels.get(name)
            if may_join(s.caps, name) or ch is None or not ch.remove(s):
                continue
            reason = "your channel/join capability for it was revoked"
            left = self.delivery.server_env(
                "channel/left", {"channel": name, "reason": reason}, to=[s.id], channel=name
            )
            self._send_env(s, left)
            self._queue_presence(s.space, "leave", s.summary(), channel=name)

    async def _load_dm_marks(self, space: SpaceState) -> None:
        """Read back where each offline participant's DMs stopped (those participants stay
        known, so DMs to them are accepted); a configured participant with no mark yet (never
        connected) gets the DMs sent from now on at its first connect."""
        space.dm_marks = await self.store.dm_marks(space.id)
        space.known.update(space.dm_marks)  # seen before the restart: DMs to them are accepted
        for pid in space.config.participants:
            if pid not in space.dm_marks:
                space.dm_marks[pid] = space.dm_seq
                self.store.put_dm_mark(space.id, pid, space.dm_seq)

    async def _load_message_ids(self, space: SpaceState) -> None:
        """Read back the ids of the last day's messages, so a resend after a restart is still
        recognised (and ids older than the window are pruned from the store)."""
        horizon = self.clock.now_ms() - space.ids.window_ms
        self.store.forget_refs(space.id, horizon)
        for ref in await self.store.message_refs(space.id, horizon, space.ids.cap):
            space.ids.add(ref)

    def close_all(self) -> None:
        """Close every connection with 1001 (server shutting down); no presence storm."""
        self.shutting_down = True
        self.coordination.stop()
        for space in self.spaces.values():
            for s in list(space.online.values()):
                s.conn.close(CLOSE_GOING_AWAY, "server shutting down")

    async def stop(self) -> None:
        """Close every connection with 1001 and flush storage."""
        self.shutting_down = True
        self.coordination.stop()
        for space in self.spaces.values():
            for s in list(space.online.values()):
                s.conn.close(CLOSE_GOING_AWAY, "server shutting down")
                self.detach(s)
        for t in list(self._tasks):
            t.cancel()
        await self.store.close()

    async def durable(self) -> None:
        """Wait until everything routed so far is stored and delivered (an HTTP ``202``)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def settle() -> None:
            if not done.done():
                done.set_result(None)

        self.store.after_commit(settle)
        await done

    def _spawn(self, coro: Any, answer: Session | None = None) -> None:
        """Run ``coro`` in the background; its failure is answered to ``answer``, never lost."""

        async def guarded() -> None:
            try:
                await coro
            except ProtocolError as exc:
                if answer is not None:
                    self.error(answer, exc)
            except Exception:
                log.exception("background task failed")
                if answer is not None:
                    self.error(
                        answer,
                        ProtocolError(ErrorCode.INTERNAL, "internal error; the request failed"),
                    )

        task = asyncio.get_running_loop().create_task(guarded())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ connect / disconnect

    def authenticate(self, hello: Hello) -> Identity:
        """Check the hello's token and id; raises ProtocolError on refusal."""
        ident = self.auth.authenticate(hello)
        space = self.spaces[ident.space]
        if hello.unique_name and not ident.by_token and ident.id in space.online:
            base, n = ident.id[:28], 2
            while f"{base}-{n}" in space.online:
                n += 1
            ident = Identity(ident.space, f"{base}-{n}", ident.kind, ident.role, ident.capabilities)
        self.bans.check(ident.space, ident.id)  # admin kill switch: a banned id is refused
        return ident

    async def attach(self, ident: Identity, conn: Connection, hello: Hello) -> Session:
        """Register a connection, send the welcome, join its channels, replay missed DMs."""
        space = self.spaces[ident.space]
        caps = self.capabilities_for(ident)
        rate = self.rates.get(space.id, ident.id)  # a reconnect continues the same bucket
        s = Session(ident.id, ident.kind, ident.role, space, conn, caps, rate)
        old = space.online.get(ident.id)
        if old is not None:
            self._displace(old)
        space.online[s.id] = s
        space.known.add(s.id)
        self.coordination.connected(s)
        self.metrics.connections[conn.dialect.name] += 1
        # DMs up to here come from the store, later ones arrive live: none twice, none lost
        replay_upto = space.dm_seq
        try:
            reset = hello.epoch is not None and hello.epoch != self.epoch
            wanted = hello.channels if hello.channels is not None else ["#general"]
            if hello.auto_join:
                wanted = self._auto_join_channels(s)
            self._send_env(s, self._welcome(s, wanted))
            for name in wanted:
                try:
                    # a plain MEW join in open mode sees the space, whatever it may send
                    check = hello.channels is not None or not space.config.open
                    if check:
                        self._check_join(s, name)
                    after = None if reset else hello.resume.get(name)
                    await self._join(
                        s,
                        name,
                        after,
                        announce=False,
                        reset="epoch" if reset else None,
                        check=check,
                    )
                except ProtocolError as exc:
                    self.error(s, exc)
            self._queue_presence(space, "join", s.summary() | {"channels": sorted(s.channels)})
            mark = space.dm_marks.get(s.id)
            if DM_STREAM in hello.resume and not reset:  # the client says where it stopped
                mark = _clamp_seq(hello.resume[DM_STREAM])
            if mark is None:
                self._dm_mark(s, replay_upto)  # new here: DMs from now on
            elif mark < replay_upto:
                await self._replay_dms(s, mark, replay_upto)
        except BaseException:
            self.detach(s)  # never leave a half-attached session "online"
            raise
        self.coordination.attached(s)  # callbacks that fell due while the gateway restarted
        return s

    async def _replay_dms(self, s: Session, mark: int, upto: int) -> None:
        """Send ``s`` the DMs it has not seen, ``mark < seq <= upto``, from the store."""
        space = s.space
        while mark < upto:
            rows = await self.store.dm_history(
                space.id, s.id, after_seq=mark, limit=self.limits.history_page_max
            )
            if space.online.get(s.id) is not s:
                return
            rows = [r for r in rows if r.seq <= upto]
            if not rows:
                break
            for row in rows:
                env = msgspec.json.decode(row.data, type=Envelope)
                if s.wake_at is not None:
                    self.coordination.to_sleeper(s, env)
                else:
                    self._send_env(s, env)
            mark = rows[-1].seq
        self._dm_mark(s, upto)

    def _dm_mark(self, s: Session, seq: int) -> None:
        """Note that ``s`` has been written every DM of its own up to ``seq``."""
        space = s.space
        if space.dm_marks.get(s.id, -1) < seq:
            space.dm_marks[s.id] = seq
            self.store.put_dm_mark(space.id, s.id, seq)

    def _displace(self, old: Session) -> None:
        """Tell an older connection of the same id that a newer one replaces it, then close it."""
        reason = "replaced by a new connection with the same id"
        displaced = self.delivery.server_env(
            "system/session-displaced", {"reason": reason}, to=[old.id]
        )
        self._send_env(old, displaced)
        old.conn.close(CLOSE_REPLACED, reason)
        self.detach(old)

    def _auto_join_channels(self, s: Session) -> list[str]:
        """The channels joined on connect when the hello asks for auto-join: the space's
        ``agentchat_auto_join`` list, or else every channel; only those ``s`` may join."""
        space = s.space
        listed = space.config.agentchat_auto_join
        names = list(space.channels) if listed is None else listed
        allowed = [
            n
            for n in names
            if n in space.channels and s.caps.allows("channel/join", {"channel": n})
        ]
        return allowed[:AUTO_JOIN_MAX]

    def detach(self, s: Session, *, stranded: bool = False) -> None:
        """Forget a session: leave its channels, announce it offline (``stranded``: cut off
        by the gateway's side, not by the participant — see Coordination.disconnected)."""
        space = s.space
        if space.online.get(s.id) is not s:
            return
        del space.online[s.id]
        self.rates.keep(space.id, s.id, s.rate)
        self.metrics.connections[s.conn.dialect.name] -= 1
        channels = sorted(s.channels)
        for name in channels:
            ch = space.channels.get(name)
            if ch is not None:
                ch.remove(s)
        if not self.shutting_down:
            self.coordination.disconnected(s, stranded=stranded)
        s.presence = "offline"
        self._queue_presence(space, "leave", s.summary() | {"channels": channels})

    def on_overflow(self, conn: Connection) -> None:
        """A connection's send buffer overflowed: detach its session after this fan-out."""
        self.metrics.slow_consumer_disconnects += 1
        for space in self.spaces.values():
            for s in space.online.values():
                if s.conn is conn:
                    asyncio.get_running_loop().call_soon(self.detach, s)
                    return

    def _welcome(self, s: Session, first: Sequence[str]) -> Envelope:
        """The welcome: at most ``limits.welcome_channels`` channels, those in ``first`` (the
        ones the participant asked to join) first, and ``channels_total``."""
        space = s.space
        channels = space.channels
        most = self.limits.welcome_channels
        names = [n for n in dict.fromkeys(first) if n in channels][:most]
        if len(names) < most:
            own = set(names)
            rest = (n for n in channels if n not in own)
            names.extend(itertools.islice(rest, most - len(names)))
        return self.delivery.server_env(
            "system/welcome",
            {
                "you": {"id": s.id, "kind": s.kind, "capabilities": s.caps.capabilities},
                "participants": [o.summary_json() for o in space.online.values()],
                "channels": [
                    {"name": n, "members": len(channels[n].members), "seq": channels[n].seq}
                    for n in names
                ],
                "channels_total": len(channels),
                "space": space.id,
                "server": self.server_name,
                "dm_seq": space.dm_seq,
                "epoch": self.epoch,
            },
            to=[s.id],
        )

    # ------------------------------------------------------------------ inbound

    def receive(self, s: Session, data: str | bytes) -> None:
        """Handle one frame from a connected participant; errors go back to it only."""
        self.metrics.messages_in += 1
        size = len(data)
        limit = self.limits.max_frame_bytes
        if size * 4 > limit and isinstance(data, str):
            size = len(data.encode())
        if size > limit:
            self.error(
                s,
                ProtocolError(
                    ErrorCode.FRAME_TOO_LARGE,
                    f"frame of {size} bytes exceeds the limit of {limit} bytes "
                    "(limits.max_frame_bytes); split the content or raise the limit",
                ),
            )
            return
        if not s.rate.take():
            self.error(s, self._rate_error())
            return
        try:
            env = s.conn.dialect.decode(data)
            if isinstance(env, Reply):
                s.conn.send(ws_text_frame(env.data))
                return
            self.route(s, env, frame_len=size)
        except ProtocolError as exc:
            self.error(s, exc)
        except Exception:
            log.exception("internal error handling a frame from %s", s.id)
            self.error(
                s, ProtocolError(ErrorCode.INTERNAL, "internal error; the frame was dropped")
            )

    def _rate_error(self) -> ProtocolError:
        return ProtocolError(
            ErrorCode.RATE_LIMITED,
            f"rate limit exceeded: at most {self.limits.rate_per_s:g} messages/s "
            f"(burst {self.limits.rate_burst}); this message was refused, resend it later",
        )

    def check_rate(self, space: SpaceState, pid: str) -> None:
        """Spend one message of ``pid``'s rate (HTTP posts share it with the WebSocket)."""
        online = space.online.get(pid)
        bucket = online.rate if online is not None else self.rates.get(space.id, pid)
        if not bucket.take():
            raise self._rate_error()

    def route(self, sender: Sender, env: Envelope, frame_len: int = 0) -> Envelope:
        """Validate, authorize, stamp and deliver one envelope; return it as delivered."""
        kind = env.kind
        client_id = env.id or None
        if kind not in CLIENT_KINDS:
            if kind in SERVER_KINDS or kind == "system/join":
                raise ProtocolError(
                    ErrorCode.UNKNOWN_KIND,
                    f"kind {kind!r} is sent only by the server",
                    correlation_id=client_id,
                )
            raise ProtocolError(
                ErrorCode.UNKNOWN_KIND,
                f"unknown kind {kind!r}; see docs/protocol.md for the kinds the gateway routes",
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
        check_send(sender.caps, kind, env.payload, client_id)  # issue 21: one budgeted check
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
            sender.space.proposals.check(env, sender.id)
        if client_id is not None and kind in STORED_KINDS:
            ref = sender.space.ids.get(client_id)
            if ref is not None:
                return self._resent(sender, env, ref)
        if kind in STORED_KINDS and not self.store.available:
            raise ProtocolError(
                ErrorCode.UNAVAILABLE,
                "the gateway cannot store messages right now (its store is unreachable); "
                "nothing was accepted: send it again in a few seconds",
                correlation_id=client_id,
            )
        now = self.clock.now_ms()
        env.protocol = PROTOCOL
        env.from_ = sender.id
        env.id = client_id or self.ids.new(now)
        env.ts = self.clock.iso(now)
        env.seq = None
        sleep = None
        try:
            if sender.id != SERVER_ID and (
                (sender.wake_at is not None and kind not in _CONTROL)
                or (kind == "chat" and "@@" in env.payload["text"])
            ):
                relay, sleep = self.coordination.before_send(sender, env)
                if not relay:
                    after = self._after_delivery(sender, env, sleep, watched=False)
                    if after is not None:  # in order with what arrived before it
                        self.store.after_commit(after)
                    return env
            handler = _CONTROL.get(kind)
            if handler is not None:
                handler(self, sender, env)
                return env
            if kind == "participant/status" and "presence" in env.payload:
                self._set_presence(sender, env.payload["presence"], env.payload.get("status_text"))
                if set(env.payload) <= _PRESENCE_FIELDS:
                    return env  # a bare presence change: the presence broadcast is its delivery
            if sender.space.pending_presence:
                # nobody may hear from a participant before hearing that it joined
                self._flush_presence(sender.space)
            extra: list[str] = []
            if kind.startswith("mcp/"):
                extra = sender.space.proposals.observe(env)
            after = self._after_delivery(sender, env, sleep)
            if env.private:
                self._deliver_dm(sender, env, now, extra, after)
            else:
                if env.channel is None:
                    env.channel = "#general"
                self._deliver_channel(sender, env, now, extra, after)
                if kind == "chat":
                    self.coordination.spoke(sender, env)
        except ProtocolError as exc:
            # docs/protocol.md: an error quotes the offending frame's id when it had one
            if exc.correlation_id is None:
                exc.correlation_id = client_id
            raise
        return env

    def _after_delivery(
        self, sender: Sender, env: Envelope, sleep: SleepMarker | None, watched: bool = True
    ) -> Callable[[], None] | None:
        """What follows a message's delivery: the dashboard feed, the sender's sleep."""
        watched = watched and (self.activity.watched or env.kind.startswith("mcp/"))
        if not watched and sleep is None:
            return None
        space = sender.space

        def after() -> None:
            if watched:  # dashboard feed: observe.py
                observe.routed(self, space, env)
            if (
                sleep is not None
                and isinstance(sender, Session)
                and space.online.get(sender.id) is sender
            ):
                self.coordination.sleep(sender, sleep.seconds, sleep.mode)

        return after

    def _resent(self, sender: Sender, env: Envelope, ref: MessageRef) -> Envelope:
        """A message id seen before: the same sender's resend is answered with the original
        (nothing is delivered twice); another sender's reuse of the id is refused."""
        if ref.sender != sender.id:
            raise ProtocolError(
                ErrorCode.DUPLICATE_ID,
                f"message id {ref.id!r} is already taken by another participant's message; "
                "give each message a new unique id (a ULID or UUID) or leave it out",
                correlation_id=ref.id,
            )
        self.metrics.resends += 1
        space = sender.space
        dm = ref.place == DM_STREAM
        delivered = ref.seq <= (space.dm_seq if dm else space.channels[ref.place].seq)
        if delivered and isinstance(sender, Session):
            self._spawn(self._echo_original(sender, ref), answer=sender)
        return Envelope(
            kind=env.kind,
            protocol=PROTOCOL,
            id=ref.id,
            ts=self.clock.iso(ref.ts_ms),
            from_=sender.id,
            channel=None if dm else ref.place,
            seq=ref.seq,
            payload=env.payload,
        )

    async def _echo_original(self, s: Session, ref: MessageRef) -> None:
        """Send a resending participant its original message again (its lost echo)."""
        space = s.space
        if ref.place == DM_STREAM:
            rows = await self.store.dm_history(space.id, s.id, after_seq=ref.seq - 1, limit=1)
        else:
            rows = await self.store.history(space.id, ref.place, after_seq=ref.seq - 1, limit=1)
        if rows and rows[0].seq == ref.seq and space.online.get(s.id) is s:
            self._send_env(s, msgspec.json.decode(rows[0].data, type=Envelope))

    # ------------------------------------------------------------------ delivery

    def check_destination(self, sender: Sender, env: Envelope) -> None:
        """Raise the error delivery would raise for ``env``'s channel or recipients.

        Checked before a message's markers are acted on, so a message refused as a whole
        schedules nothing (and a marker-only message, which is not delivered, is refused too).
        """
        if env.private:
            self._dm_recipients(sender, env)
        else:
            self._destination_channel(sender, env)

    def _destination_channel(self, sender: Sender, env: Envelope) -> Channel:
        """The channel ``env`` goes to (``#general`` by default), with its ``to`` checked."""
        ch = self._channel_for(sender, "#general" if env.channel is None else env.channel)
        if env.to is not None:
            if not env.to:
                raise ProtocolError(
                    ErrorCode.INVALID_ENVELOPE,
                    "'to' must name at least one recipient, or be left out",
                )
            self._check_recipients(sender.space, env.to)
        return ch

    def _dm_recipients(self, sender: Sender, env: Envelope) -> list[str]:
        """The recipients of a DM, once each, all known."""
        to = list(dict.fromkeys(env.to or []))
        if not to:
            raise ProtocolError(ErrorCode.INVALID_ENVELOPE, "'to' must name at least one recipient")
        self._check_recipients(sender.space, to)
        return to

    def _channel_for(self, sender: Sender, name: Any, *, member: bool = True) -> Channel:
        """The channel ``sender`` may use (``member=False``: may join); see authorization.py."""
        return channel_access(
            self.bans, sender.space, sender.id, sender.caps, name, joining=not member
        )

    def _deliver_channel(
        self,
        sender: Sender,
        env: Envelope,
        now: int,
        extra: Sequence[str] = (),
        after: Callable[[], None] | None = None,
    ) -> None:
        """Number a channel message and queue it for storage; it is fanned out once the
        commit holding it is done (acknowledged means durable)."""
        ch = self._destination_channel(sender, env)
        if self.coordination.relays_pending:
            self.coordination.flush_relays()  # claims handled earlier go out first
        space = sender.space
        ch.assigned += 1
        env.seq = ch.assigned
        data = encode(env)
        ref = MessageRef(env.id, sender.id, ch.name, env.seq, now)
        space.ids.add(ref)
        self.store.append(space.id, ch.name, env.seq, data, ref)
        self.store.after_commit(lambda: self._delivered_channel(space, ch, env, data, extra, after))

    def _delivered_channel(
        self,
        space: SpaceState,
        ch: Channel,
        env: Envelope,
        data: bytes,
        extra: Sequence[str],
        after: Callable[[], None] | None,
    ) -> None:
        """A channel message is durable: show it to every member, in ``seq`` order."""
        ch.seq = env.seq or ch.seq
        ch.recent.append((ch.seq, data))
        self._fanout(ch, env, data)
        if ch.sleepers:
            self.coordination.to_sleepers(space, ch, env)
        for pid in extra:
            other = space.online.get(pid)
            if other is not None and pid not in ch.members:
                self._send_env(other, env)
        if after is not None:
            after()

    def _fanout(self, ch: Channel, env: Envelope, data: bytes | None = None) -> None:
        """Write ``env`` to every member of ``ch`` (:meth:`Delivery.fanout`)."""
        self.delivery.fanout(ch, env, data)

    def _check_recipients(self, space: SpaceState, to: list[str]) -> None:
        for pid in to:
            if not is_participant_id(pid):
                raise ProtocolError(
                    ErrorCode.INVALID_ID, f"recipient {pid!r} is not a legal participant id"
                )
            if pid not in space.known and pid != SERVER_ID:
                raise ProtocolError(
                    ErrorCode.UNKNOWN_PARTICIPANT,
                    f"no participant {pid!r} in space {space.id!r}; "
                    "check the id (GET /participants lists them)",
                )

    def _deliver_dm(
        self,
        sender: Sender,
        env: Envelope,
        now: int,
        extra: Sequence[str] = (),
        after: Callable[[], None] | None = None,
    ) -> None:
        """Number a direct message and queue it for storage; it reaches its parties once
        the commit holding it is done."""
        space = sender.space
        to = self._dm_recipients(sender, env)
        env.to = to
        env.channel = None
        space.dm_assigned += 1
        env.seq = space.dm_assigned
        data = encode(env)
        ref = MessageRef(env.id, sender.id, DM_STREAM, env.seq, now)
        space.ids.add(ref)
        self.store.append_dm(space.id, env.seq, [sender.id, *to], data, ref)
        self.store.after_commit(lambda: self._delivered_dm(sender, env, data, extra, after))

    def _delivered_dm(
        self,
        sender: Sender,
        env: Envelope,
        data: bytes,
        extra: Sequence[str],
        after: Callable[[], None] | None,
    ) -> None:
        """A direct message is durable: write it to its online parties (sleepers buffer it;
        the offline get it from the store when they come back)."""
        space = sender.space
        seq = env.seq or 0
        space.dm_seq = seq
        to = env.to or []
        frames: dict[str, bytes] = {"mew": ws_text_frame(data)}
        targets = [space.online[p] for p in to if p in space.online]
        if (
            isinstance(sender, Session)
            and sender.id not in to
            and space.online.get(sender.id) is sender
        ):
            targets.append(sender)
        targets.extend(
            space.online[p] for p in extra if p in space.online and p not in to and p != sender.id
        )
        for s in targets:
            if s.wake_at is not None:
                self.coordination.to_sleeper(s, env)
                continue
            self.delivery.send_shared(s, env, frames)
            if s.id in to or s is sender:
                self._dm_mark(s, seq)
        if after is not None:
            after()

    def deliver_to(self, s: Session, env: Envelope) -> None:
        """Send a stored or server-made envelope to one session in its dialect."""
        self._send_env(s, env)
        if env.channel is None and env.seq is not None:
            self._dm_mark(s, env.seq)  # a DM held for a sleeper, delivered at its wake

    def _send_env(self, s: Session, env: Envelope) -> None:
        """Write ``env`` to ``s`` (:meth:`Delivery.send`)."""
        self.delivery.send(s, env)

    def error(self, s: Session, exc: ProtocolError) -> None:
        """Answer a problem to the participant that caused it."""
        self.delivery.error(s, exc)

    def _reply(self, sender: Sender, req: Envelope, kind: str, payload: dict[str, Any]) -> None:
        """Answer a control frame after what the sender sent before it is delivered, so a
        connection's answers come in the order of its frames."""
        if isinstance(sender, Session):
            answer = self.delivery.server_env(
                kind, payload, to=[sender.id], correlation_id=[req.id]
            )
            self.store.after_commit(lambda: self._send_env(sender, answer))

    # ------------------------------------------------------------------ presence

    def _set_presence(self, sender: Sender, presence: object, status_text: object = None) -> None:
        """A participant sets its presence (and status text); everyone in the space hears it."""
        if presence not in SETTABLE_PRESENCE:
            raise ProtocolError(
                ErrorCode.INVALID_ENVELOPE,
                f"presence {presence!r} cannot be set by a participant: use one of "
                + ", ".join(repr(p) for p in SETTABLE_PRESENCE)
                + " (sleeping comes from @@sleep markers)",
            )
        if status_text is not None and (
            not isinstance(status_text, str) or len(status_text) > MAX_STATUS_TEXT
        ):
            raise ProtocolError(
                ErrorCode.INVALID_ENVELOPE,
                f"status_text must be a string of at most {MAX_STATUS_TEXT} characters",
            )
        if not isinstance(sender, Session):
            raise ProtocolError(ErrorCode.INVALID_ENVELOPE, "presence needs a WebSocket connection")
        if sender.presence != presence or sender.status_text != status_text:
            sender.presence = str(presence)
            sender.status_text = status_text
            self._queue_presence(sender.space, "update", sender.summary())

    def _queue_presence(
        self, space: SpaceState, event: str, entry: dict[str, Any], channel: str | None = None
    ) -> None:
        """Announce a presence change with the next flush (:meth:`Delivery.queue_presence`)."""
        self.delivery.queue_presence(space, event, entry, channel)

    def _flush_presence(self, space: SpaceState) -> None:
        """Send the queued presence changes now (:meth:`Delivery.flush_presence`)."""
        self.delivery.flush_presence(space)

    # ------------------------------------------------------------------ channels and history

    def _check_join(self, s: Session, name: str) -> None:
        self._channel_for(s, name, member=False)

    async def _join(
        self,
        s: Session,
        name: str,
        after_seq: int | None,
        *,
        announce: bool = True,
        reset: str | None = None,
        check: bool = True,
    ) -> None:
        """Add ``s`` to a channel and send ``channel/joined`` with history; no message is lost
        between the history and the live stream (the last step runs without awaiting).

        ``s`` is a member from the first moment (a message it sends right after its join is
        accepted) but receives live messages only from the ``channel/joined`` on. A resume
        point past the channel's end, or ``reset`` (another history epoch), makes this a
        fresh join that says ``history_reset``."""
        ch = self._channel_for(s, name, member=False) if check else s.space.channels[name]
        ch.add_joining(s)
        if after_seq is not None:
            after_seq = _clamp_seq(after_seq)
            if after_seq > ch.seq:
                reset, after_seq = "past_end", None
        collected: list[tuple[int, bytes]] = []
        has_more = False
        cap = self.limits.resume_max
        if after_seq is None:
            n = self.limits.history_on_join
            if ch.seq <= len(ch.recent) or len(ch.recent) >= n:
                after_seq = max(0, ch.seq - n)
            else:
                rows = await self.store.history(s.space.id, name, limit=n)
                collected = [(r.seq, r.data) for r in rows]
                after_seq = collected[-1][0] if collected else 0
        while True:
            if s.space.online.get(s.id) is not s:
                return  # disconnected while reading history
            tail = ch.cached_after(after_seq)
            if tail is not None:
                collected.extend(tail)
                break
            rows = await self.store.history(
                s.space.id, name, after_seq=after_seq, limit=min(cap, self.limits.history_page_max)
            )
            if not rows:
                break
            collected.extend((r.seq, r.data) for r in rows)
            after_seq = rows[-1].seq
            if len(collected) >= cap:
                has_more = after_seq < ch.seq
                break
        if len(collected) > cap:
            collected, has_more = collected[:cap], True
        if s.space.online.get(s.id) is not s or ch.members.get(s.id) is not s:
            return  # disconnected, or left the channel, while the history was read
        # rows committed but not yet fanned out reach the new member live
        collected = [row for row in collected if row[0] <= ch.seq]
        ch.add(s)
        payload: dict[str, Any] = {
            "channel": name,
            "members": list(ch.members),
            "history": [msgspec.Raw(d) for _, d in collected],
            "seq": ch.seq,
        }
        if has_more:
            payload["has_more"] = True
        if reset is not None:
            payload["history_reset"] = {"reason": reset, "epoch": self.epoch}
        self._send_env(
            s, self.delivery.server_env("channel/joined", payload, to=[s.id], channel=name)
        )
        if announce:
            self._queue_presence(s.space, "join", s.summary(), channel=name)


def _on_join(r: Router, sender: Sender, env: Envelope) -> None:
    if not isinstance(sender, Session):
        raise ProtocolError(ErrorCode.INVALID_ENVELOPE, "channel/join needs a WebSocket connection")
    name = env.payload.get("channel")
    after = env.payload.get("after_seq")
    if after is not None and (not isinstance(after, int) or isinstance(after, bool) or after < 0):
        raise ProtocolError(ErrorCode.INVALID_ENVELOPE, "after_seq must be a non-negative integer")
    ch = r._channel_for(sender, name, member=False)
    rejoin = sender.id in ch.members  # answered again (with history), announced only once
    ch.add_joining(sender)  # a message sent right after the join frame is accepted
    r._spawn(r._join(sender, ch.name, after, announce=not rejoin), answer=sender)


def _on_leave(r: Router, sender: Sender, env: Envelope) -> None:
    if not isinstance(sender, Session):
        raise ProtocolError(
            ErrorCode.INVALID_ENVELOPE, "channel/leave needs a WebSocket connection"
        )
    name = env.payload.get("channel")
    ch = r._channel_for(sender, name)
    ch.remove(sender)
    r._reply(sender, env, "channel/left", {"channel": name})
    r._queue_presence(sender.space, "leave", sender.summary(), channel=name)


def _on_create(r: Router, sender: Sender, env: Envelope) -> None:
    name = env.payload.get("channel")
    if not isinstance(name, str) or not is_channel(name):
        raise ProtocolError(
            ErrorCode.INVALID_CHANNEL,
            f"{name!r} is not a channel name: write '#' then 1-31 of [A-Za-z0-9_-]",
        )
    space = sender.space
    if name in space.channels:
        raise ProtocolError(ErrorCode.CHANNEL_EXISTS, f"channel {name} already exists; join it")
    most = r.limits.max_channels
    if len(space.channels) >= most:
        raise ProtocolError(
            ErrorCode.CHANNEL_LIMIT,
            f"space {space.id!r} has {len(space.channels)} channels, the most it may have "
            f"(limits.max_channels = {most}): join an existing channel (channel/list lists "
            "them) or ask the operator to raise HUBBUB_MAX_CHANNELS",
        )
    ch = space.channels[name] = Channel(name, 0, HISTORY_CACHE)
    r.store.put_channel(space.id, name)
    if isinstance(sender, Session):
        ch.add_joining(sender)  # a message sent right after the create frame is accepted

        async def join_when_stored() -> None:
            await r.store.flush()  # the creator hears of the channel once it is durable
            await r._join(sender, name, None)

        r._spawn(join_when_stored(), answer=sender)


def _on_list(r: Router, sender: Sender, env: Envelope) -> None:
    chans = [{"name": c.name, "members": len(c.members)} for c in sender.space.channels.values()]
    r._reply(sender, env, "channel/list-response", {"channels": chans})


def _on_members(r: Router, sender: Sender, env: Envelope) -> None:
    ch = r._channel_for(sender, env.payload.get("channel"), member=False)
    r._reply(
        sender,
        env,
        "channel/members-response",
        {
            "channel": ch.name,
            "members": list(ch.members),
            "participants": [m.summary() for m in ch.members.values()],
        },
    )


def _history_bounds(r: Router, p: dict[str, Any]) -> tuple[int | None, int | None, int]:
    """A history request's ``after_seq``, ``before_seq`` and ``limit``, checked and clamped."""
    after, before, limit = p.get("after_seq"), p.get("before_seq"), p.get("limit", 50)
    for key, val in (("after_seq", after), ("before_seq", before), ("limit", limit)):
        if val is not None and (not isinstance(val, int) or isinstance(val, bool) or val < 0):
            raise ProtocolError(ErrorCode.INVALID_ENVELOPE, f"{key} must be a non-negative integer")
    limit = min(int(limit), r.limits.history_page_max)
    after = None if after is None else _clamp_seq(after)
    before = None if before is None else _clamp_seq(before)
    return after, before, limit


def _on_history(r: Router, sender: Sender, env: Envelope) -> None:
    p = env.payload
    if p.get("channel") == DM_STREAM:
        _on_dm_history(r, sender, env)
        return
    ch = r._channel_for(sender, p.get("channel"))
    after, before, limit = _history_bounds(r, p)

    async def run() -> None:
        rows = await r.store.history(
            sender.space.id, ch.name, after_seq=after, before_seq=before, limit=limit + 1
        )
        has_more = len(rows) > limit
        rows = rows[:limit] if after is not None else rows[-limit:] if limit else []
        r._reply(
            sender,
            env,
            "history/response",
            {
                "channel": ch.name,
                "messages": [msgspec.Raw(x.data) for x in rows],
                "has_more": has_more,
            },
        )

    r._spawn(run(), answer=sender if isinstance(sender, Session) else None)


def _on_dm_history(r: Router, sender: Sender, env: Envelope) -> None:
    """``history/request`` of ``@dm``: a page of the sender's own DMs, by DM ``seq``, as a
    channel's history is paged (``after_seq``: the first ``limit`` after it; otherwise the last
    ``limit`` before ``before_seq`` or the end)."""
    after, before, limit = _history_bounds(r, env.payload)
    space, pid = sender.space.id, sender.id

    async def run() -> None:
        if after is not None:
            rows = await r.store.dm_history(space, pid, after_seq=after, limit=limit + 1)
            rows = [x for x in rows if before is None or x.seq < before]
            has_more = len(rows) > limit
            rows = rows[:limit]
        else:
            rows = await r.store.dm_history_before(space, pid, before_seq=before, limit=limit + 1)
            has_more = len(rows) > limit
            rows = rows[-limit:] if limit else []
        messages = [msgspec.Raw(x.data) for x in rows]
        r._reply(
            sender,
            env,
            "history/response",
            {"channel": DM_STREAM, "messages": messages, "has_more": has_more},
        )

    r._spawn(run(), answer=sender if isinstance(sender, Session) else None)


def _on_heartbeat(r: Router, sender: Sender, env: Envelope) -> None:
    """Heartbeats keep the connection alive; nothing to route."""


def _on_capability(r: Router, sender: Sender, env: Envelope) -> None:
    p = env.payload
    recipient = p.get("recipient") or (env.to[0] if env.to else None)
    space = sender.space
    if not isinstance(recipient, str) or recipient not in space.known:
        raise ProtocolError(
            ErrorCode.UNKNOWN_PARTICIPANT,
            f"{env.kind} needs 'recipient' naming a participant of space {space.id!r}",
        )
    try:
        caps = validate_capabilities(p.get("capabilities"))
    except CapabilityError as exc:
        raise ProtocolError(ErrorCode.INVALID_ENVELOPE, f"{env.kind}: {exc}") from None
    check_grant(space, sender.id, sender.role, sender.caps, env.kind, caps)
    target = space.online.get(recipient)
    key = (space.id, recipient)
    current = r.capability_overrides.get(key)
    if current is None:
        if target is not None:
            current = target.caps
        else:
            cfg = space.config.participants.get(recipient)
            base = cfg.effective_capabilities() if cfg else space.config.open_capabilities()
            current = CapabilitySet(base)
    new = changed_capabilities(recipient, current, env.kind, caps)  # issue 21: limits, no-ops
    r.set_capabilities(space, recipient, new)
    if target is not None:
        r._queue_presence(space, "update", target.summary())  # others track its capabilities
    env.to = [recipient]
    r._deliver_dm(sender, env, r.clock.now_ms())
    if target is not None:
        r.leave_channels_not_allowed(target)


def _on_claim(r: Router, sender: Sender, env: Envelope) -> None:
    r.coordination.claim(sender, env)


_CONTROL = {
    "floor/responding-to": _on_claim,
    "channel/join": _on_join,
    "channel/leave": _on_leave,
    "channel/create": _on_create,
    "channel/list": _on_list,
    "channel/members": _on_members,
    "history/request": _on_history,
    "system/heartbeat": _on_heartbeat,
    "capability/grant": _on_capability,
    "capability/revoke": _on_capability,
}
