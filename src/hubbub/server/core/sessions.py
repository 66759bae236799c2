"""Sessions: who is connected — authenticate a hello, attach its connection, welcome it,
join its channels, replay its missed DMs; detach it; its presence and capabilities."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from hubbub.protocol.addressing import display_name_error
from hubbub.protocol.capabilities import CapabilitySet
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.hello import Hello
from hubbub.protocol.ids import DM_STREAM
from hubbub.server.admission.admit import Admission
from hubbub.server.admission.auth import Authenticator, Identity
from hubbub.server.admission.authorization import may_join
from hubbub.server.admission.bans import BanList
from hubbub.server.admission.grants import Grants
from hubbub.server.admission.keys import KeyBindings
from hubbub.server.admission.names import looks_like
from hubbub.server.admission.sender import Sender
from hubbub.server.config import AUTO_JOIN_MAX, Limits
from hubbub.server.core.absent import Absent
from hubbub.server.core.coordination import Coordination
from hubbub.server.core.delivery import Delivery
from hubbub.server.core.sequencer import Sequencer, clamp_seq
from hubbub.server.core.streams import Streams
from hubbub.server.state.connection import CLOSE_REPLACED, Connection
from hubbub.server.state.metrics import Metrics
from hubbub.server.state.space import RateBuckets, Session, SpaceState
from hubbub.server.state.visibility import active_streams, sees_channel

SETTABLE_PRESENCE: Final = ("online", "away", "busy", "listening", "offline")
"""Presence values a participant may set itself (agentchat's set; ``sleeping`` is the server's)."""
MAX_STATUS_TEXT: Final = 100
"""agentchat's limit on ``status_text``."""


class Sessions:
    """The connected participants of every space, from hello to goodbye."""

    def __init__(
        self,
        spaces: Mapping[str, SpaceState],
        auth: Authenticator,
        bans: BanList,
        grants: Grants,
        rates: RateBuckets,
        limits: Limits,
        metrics: Metrics,
        admission: Admission,
        keys: KeyBindings,
        sequencer: Sequencer,
        delivery: Delivery,
        coordination: Coordination,
        streams: Streams,
        server_name: str,
        shutting_down: Callable[[], bool],
    ) -> None:
        self.spaces = spaces
        self.auth = auth
        self.bans = bans
        self.grants = grants
        self.rates = rates
        self.limits = limits
        self.metrics = metrics
        self.admission = admission
        self.keys = keys
        self.sequencer = sequencer
        self.delivery = delivery
        self.coordination = coordination
        self.streams = streams
        self.server_name = server_name
        self.shutting_down = shutting_down
        self.absent = Absent(delivery, coordination.settings.sleep_max_buffer)
        """Notes to senders about absent addressees, and what is kept for the offline."""

    # ------------------------------------------------------------------ connect

    def authenticate(self, hello: Hello, address: str = "") -> Identity:
        """Check the hello (from client ``address``): its token, key and id; raises
        ProtocolError on refusal."""
        cfg = self.auth.spaces.get(hello.space)
        if cfg is not None and hello.pubkey is not None and not hello.token:
            keyed_space = self.spaces[cfg.space]
            ident = self.keys.keyed(
                cfg,
                hello,
                lambda name: self.admission.check_name(keyed_space, name, key_name=True),
                address,
            )
        else:
            ident = self.auth.authenticate(hello)
            if not ident.by_token:
                ident = self.keys.keyless(self.auth.spaces[ident.space], hello, ident)
        space = self.spaces[ident.space]
        if hello.unique_name and not ident.by_token and ident.id in space.online:
            free = self.keys.free_id(space.id, ident.id, space.online)
            ident = Identity(
                ident.space, free, ident.kind, ident.role, ident.capabilities, name=ident.name
            )
        self.bans.check(ident.space, ident.id)  # admin kill switch: a banned id is refused
        self.admission.check_name(space, ident.id)  # every door's rule for names
        if hello.display_name is not None and ident.name is None:
            self._check_display_name(space, ident.id, hello.display_name)
        return ident

    def _check_display_name(self, space: SpaceState, pid: str, name: str) -> None:
        """Refuse a MEW join's display ``name`` that is not legal, or that another participant
        online in ``space`` has as its name or id (case and look-alikes aside): a display
        name addresses one participant (``@Ada``), so it is unique in the space."""
        error = display_name_error(name)
        if error is not None:
            raise ProtocolError(ErrorCode.INVALID_ID, f"{error} (or leave 'name' out)")
        for other in space.online.values():
            if other.id == pid:
                continue  # its own earlier connection, about to be replaced
            if looks_like(name, other.id) or (other.name and looks_like(name, other.name)):
                raise ProtocolError(
                    ErrorCode.INVALID_ID,
                    f"display name {name!r} is taken in space {space.id!r} by {other.id!r}: "
                    "pick another 'name', or leave it out to be known by your id",
                )

    async def attach(self, ident: Identity, conn: Connection, hello: Hello) -> Session:
        """Register a connection, send the welcome, join its channels, replay missed DMs."""
        space = self.spaces[ident.space]
        caps = self.grants.current(space, ident.id, ident.capability_set())
        rate = self.rates.get(space.id, ident.id)  # a reconnect continues the same bucket
        s = Session(ident.id, ident.kind, ident.role, space, conn, caps, rate)
        s.name, s.verified, s.pubkey = ident.name, ident.verified, ident.pubkey
        if s.name is None:
            s.name = hello.display_name  # a MEW join's, checked by authenticate
        s.resends = hello.resends
        s.presence_lists = hello.presence_lists
        old = space.online.get(ident.id)
        if old is not None:
            self._displace(old, conn.peer)
        space.online[s.id] = s
        space.met(s.id, s.kind)
        space.named(s.id, s.name)
        self.coordination.connected(s)
        self.metrics.connections[conn.dialect.name] += 1
        # DMs up to here come from the store, later ones arrive live: none twice, none lost
        replay_upto = space.dm_seq
        try:
            reset = hello.epoch is not None and hello.epoch != self.sequencer.epoch
            wanted = hello.channels if hello.channels is not None else ["#general"]
            if hello.auto_join:
                wanted = self._auto_join_channels(s)
            self.delivery.send(s, self._welcome(s, wanted))
            for name in wanted:
                try:
                    # a plain MEW join in open mode sees the space, whatever it may send
                    if hello.channels is not None or not space.config.open:
                        ch = self.admission.channel_for(s, name, member=False)
                    else:
                        ch = space.channels[name]
                    if name not in hello.resume:  # a resume brings what was kept for it
                        self.absent.deliver_held(s, name)
                    if hello.auto_join and name not in hello.resume:
                        ch.add(s)  # silent, as agentchat's: history comes with a JOIN
                        continue
                    after = None if reset else hello.resume.get(name)
                    await self.sequencer.join(
                        s, ch, after, announce=False, reset="epoch" if reset else None
                    )
                except ProtocolError as exc:
                    self.delivery.error(s, exc)
            self.absent.forget(s)
            entry = s.summary() | {"channels": sorted(s.channels)}
            self.delivery.queue_presence(space, "join", entry)
            mark = space.dm_marks.get(s.id)
            if DM_STREAM in hello.resume and not reset:  # the client says where it stopped
                mark = clamp_seq(hello.resume[DM_STREAM])
            if mark is None:
                self.sequencer.marks.advance(s, replay_upto)  # new here: DMs from now on
            elif mark < replay_upto:
                await self.sequencer.replay_dms(s, mark, replay_upto)
        except BaseException:
            self.detach(s)  # never leave a half-attached session "online"
            raise
        self.coordination.attached(s)  # callbacks that fell due while the gateway restarted
        return s

    def _displace(self, old: Session, new_ip: str) -> None:
        """Tell an older connection of the same id that a newer one replaces it, then close
        it; a MEW client's is left open instead, detached (admission refuses its frames):
        ``MEWClient`` reconnects after any close, and two processes with one id would
        displace each other forever. MEW's own gateway leaves the older socket open too."""
        # agentchat's clients look for "Another connection" (its test/session-conflict.test.js)
        reason = (
            "Another connection took this identity: replaced by a new connection with the same id"
        )
        displaced = self.delivery.server_env(
            "system/session-displaced", {"reason": reason, "new_ip": new_ip}, to=[old.id]
        )
        self.delivery.send(old, displaced)
        if not old.plain_mew:
            old.conn.close(CLOSE_REPLACED, reason)
        self.detach(old, replaced=True)

    def _auto_join_channels(self, s: Session) -> list[str]:
        """The channels joined on connect when the hello asks for auto-join: the space's
        ``agentchat_auto_join`` list, or else every channel; only those ``s`` may join
        (:func:`may_join`: ``#general`` always, as for a MEW client)."""
        space = s.space
        listed = space.config.agentchat_auto_join
        names = list(space.channels) if listed is None else listed
        allowed = [
            n
            for n in names
            if n in space.channels and sees_channel(space.channels[n], s.id) and may_join(s.caps, n)
        ]
        return allowed[:AUTO_JOIN_MAX]

    def welcome_again(self, s: Session) -> None:
        """Send a connected ``s`` its welcome again, with its capabilities now (MEW §3.6.1:
        after a grant)."""
        if s.space.online.get(s.id) is s:
            self.delivery.send(s, self._welcome(s, sorted(s.channels)))

    def _welcome(self, s: Session, first: Sequence[str]) -> Envelope:
        """The welcome: at most ``limits.welcome_channels`` channels, those in ``first`` (the
        ones the participant asked to join) first, and ``channels_total``."""
        space = s.space
        channels = space.channels
        most = self.limits.welcome_channels
        seen = [
            n for n in dict.fromkeys(first) if n in channels and sees_channel(channels[n], s.id)
        ]
        names = seen[:most]
        if len(names) < most:
            own = set(names)
            rest = (n for n, c in channels.items() if n not in own and sees_channel(c, s.id))
            names.extend(itertools.islice(rest, most - len(names)))
        hidden = sum(1 for c in channels.values() if not sees_channel(c, s.id))
        return self.delivery.server_env(
            "system/welcome",
            {
                "you": {"id": s.id, "kind": s.kind, "capabilities": s.caps.capabilities}
                | s.identity(),
                "participants": [o.summary_json() for o in space.online.values()],
                "channels": [
                    {"name": n, "members": len(channels[n].members), "seq": channels[n].seq}
                    for n in names
                ],
                "channels_total": len(channels) - hidden,
                "space": space.id,
                "server": self.server_name,
                "dm_seq": space.dm_seq,
                "epoch": self.sequencer.epoch,
                "active_streams": active_streams(space, s.id),
                "max_duration_s": self.coordination.settings.cb_max_duration_s,
            },
            to=[s.id],
        )

    # ------------------------------------------------------------------ disconnect

    def detach(self, s: Session, *, stranded: bool = False, replaced: bool = False) -> None:
        """Forget a session: leave its channels, announce it offline (``stranded``: cut off
        by the gateway's side, not by the participant — see Coordination.disconnected), end
        its streams unless a newer connection of its id ``replaced`` it."""
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
        if not self.shutting_down():
            self.coordination.disconnected(s, stranded=stranded)
            if not replaced:
                self.streams.left(space, s.id)
        s.presence = "offline"
        self.delivery.queue_presence(space, "leave", s.summary() | {"channels": channels})

    def on_overflow(self, conn: Connection) -> None:
        """A connection's send buffer overflowed: detach its session after this fan-out."""
        self.metrics.slow_consumer_disconnects += 1
        for space in self.spaces.values():
            for s in space.online.values():
                if s.conn is conn:
                    asyncio.get_running_loop().call_soon(self.detach, s)
                    return

    # ------------------------------------------------------------------ presence, capabilities

    def set_presence(self, sender: Sender, presence: object, status_text: object = None) -> None:
        """A participant sets its presence (and status text); everyone in the space hears it."""
        if presence not in SETTABLE_PRESENCE:
            raise ProtocolError(
                ErrorCode.INVALID_ENVELOPE,
                f"Invalid presence status {presence!r}: a participant sets one of "
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
            self.delivery.queue_presence(sender.space, "update", sender.summary())

    def set_capabilities(self, space: SpaceState, pid: str, caps: CapabilitySet) -> None:
        """Replace ``pid``'s capabilities; a connected participant's presence says so and it
        leaves the channels it may no longer join."""
        self.grants.set(space, pid, caps)
        target = space.online.get(pid)
        if target is not None:
            self.delivery.queue_presence(space, "update", target.summary())

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
            self.delivery.send(s, left)
            self.delivery.queue_presence(s.space, "leave", s.summary(), channel=name)
