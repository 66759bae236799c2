"""The gateway: wires the parts of one server together and owns their lifecycle.

Built in the order data flows: admission, the sequencer, delivery; the coordination engines
(consulted by the router at its hook, by delivery for sleepers; they post the server's own
messages through the router's :meth:`~hubbub.server.router.Router.post`); sessions and
requests; the router that takes each frame through them. Observers (the dashboard's feed)
subscribe to :class:`~hubbub.server.core.events.Events` here; the pipeline never imports them.
The HTTP surfaces and the cluster use the gateway's public calls below.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from hubbub.protocol.capabilities import CapabilitySet
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.errors import ProtocolError
from hubbub.protocol.hello import Hello
from hubbub.protocol.ids import Clock, UlidGenerator
from hubbub.server.admission.admit import Admission
from hubbub.server.admission.auth import Authenticator, Identity
from hubbub.server.admission.bans import BanList
from hubbub.server.admission.grants import Grants
from hubbub.server.admission.invitations import Invitations
from hubbub.server.admission.keys import KeyBindings
from hubbub.server.admission.sender import Sender
from hubbub.server.admission.space_invites import SpaceInvites
from hubbub.server.config import EngineSettings, Limits, SpaceConfig
from hubbub.server.core.coordination import Coordination
from hubbub.server.core.delivery import Delivery
from hubbub.server.core.dm_marks import DmMarks
from hubbub.server.core.events import Events
from hubbub.server.core.moderation import Moderation
from hubbub.server.core.requests import Requests
from hubbub.server.core.sequencer import Sequencer
from hubbub.server.core.sessions import Sessions
from hubbub.server.core.streams import Streams
from hubbub.server.core.tasks import Tasks
from hubbub.server.heap import HeapTrimmer
from hubbub.server.router import Router
from hubbub.server.state.activity import Activity
from hubbub.server.state.connection import CLOSE_GOING_AWAY, Connection
from hubbub.server.state.metrics import Metrics
from hubbub.server.state.space import RateBuckets, Session, SpaceState
from hubbub.store.base import Store


class Gateway:
    """One server's spaces, store and pipeline, from start to stop."""

    def __init__(
        self,
        spaces: Iterable[SpaceConfig],
        store: Store,
        limits: Limits,
        metrics: Metrics | None = None,
        server_name: str = "hubbub",
        engine_settings: EngineSettings | None = None,
        engine_clock: Callable[[], float] | None = None,
        wall_clock: Callable[[], float] | None = None,
    ) -> None:
        configs = {c.space: c for c in spaces}
        window_ms = round(limits.idempotency_window_s * 1000)
        self.spaces = {
            sid: SpaceState(cfg, limits.idempotency_ids, window_ms) for sid, cfg in configs.items()
        }
        self.auth = Authenticator(configs)
        self.store = store
        self.limits = limits
        self.metrics = metrics or Metrics()
        self.server_name = server_name
        self.started_at_ms = Clock.now_ms()
        """When the gateway started (Unix ms; ``/health``)."""
        self.ids = UlidGenerator()
        self.clock = Clock()
        self.shutting_down = False
        self.activity = Activity()
        """The feed of what happened, for the dashboard."""
        self.heap = HeapTrimmer(self.metrics)
        """Hands the C heap's free memory back once a busy spell ends (idle RSS)."""
        self.events = Events()
        self.bans = BanList(self.store)  # admin kill switch (hubbub.server.admission.bans, admin)
        self.grants = Grants(self.store)
        self.invitations = Invitations(self.store)
        self.keys = KeyBindings(self.store, configs, limits)
        self.rates = RateBuckets(limits.rate_per_s, limits.rate_burst)
        marks = DmMarks(self.store)
        self.delivery = Delivery(
            limits,
            self.metrics,
            self.activity,
            self.clock,
            self.ids,
            lambda: self.shutting_down,
            marks,
            self.events,
        )
        self.tasks = Tasks(self.delivery)
        self.admission = Admission(limits, self.store, self.bans, self.rates)
        self.space_invites = SpaceInvites(self.store, self.auth, self.admission.names)
        self.sequencer = Sequencer(
            self.store, limits, self.metrics, self.delivery, marks, self.tasks, self.clock
        )
        self.coordination = Coordination(
            self, engine_settings or EngineSettings(), engine_clock, wall_clock
        )
        self.delivery.sleepers = self.coordination
        self.streams = Streams(
            self.store, self.admission, self.sequencer, self.delivery, self.clock
        )
        self.sessions = Sessions(
            self.spaces,
            self.auth,
            self.bans,
            self.grants,
            self.rates,
            limits,
            self.metrics,
            self.admission,
            self.keys,
            self.sequencer,
            self.delivery,
            self.coordination,
            self.streams,
            server_name,
            lambda: self.shutting_down,
        )
        self.moderation = Moderation(
            self.bans, self.activity, self.delivery, self.detach, self.space_invites
        )
        requests = Requests(
            limits,
            self.store,
            self.admission,
            self.sequencer,
            self.sessions,
            self.grants,
            self.delivery,
            self.coordination,
            self.tasks,
            self.invitations,
            self.moderation,
            self.auth,
            self.streams,
            self.space_invites,
        )
        self.listen_cursors = requests.cursors
        """Where each MCP participant's listen stopped (kept in the store)."""
        self.router = Router(
            self.admission,
            self.sequencer,
            requests,
            self.sessions,
            self.streams,
            self.delivery,
            self.coordination,
            self.events,
            self.store,
            self.metrics,
            self.clock,
            self.ids,
        )
        self.coordination.post = self.router.post
        self.receive: Callable[[Session, str | bytes], None] = self.router.receive
        """Handle one frame from a connected participant (:meth:`Router.receive`)."""

    @property
    def epoch(self) -> str:
        """The store's history identity, sent in every welcome (see docs/reliability.md)."""
        return self.sequencer.epoch

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Open the store and continue each space where it stopped."""
        self.started_at_ms = Clock.now_ms()
        await self.store.open()
        self.sequencer.epoch = await self.store.epoch()
        for space in self.spaces.values():
            await self.bans.load(space.id)
            await self.keys.load(space.id)
            self.admission.names.add_key_names(space.id, self.keys.bound(space.id))
            await self.grants.load(space)
            await self.sequencer.load(space)
            await self.invitations.load(space)
            await self.space_invites.load(space)
        await self.coordination.start()
        self.heap.start()

    def close_all(self) -> None:
        """Close every connection with 1001 (server shutting down); no presence storm."""
        self.shutting_down = True
        self.coordination.stop()
        self.heap.stop()
        for space in self.spaces.values():
            for s in list(space.online.values()):
                s.conn.close(CLOSE_GOING_AWAY, "server shutting down")

    async def stop(self) -> None:
        """Close every connection with 1001 and flush storage."""
        self.close_all()
        for space in self.spaces.values():
            for s in list(space.online.values()):
                self.sessions.detach(s)
        self.tasks.cancel_all()
        await self.store.close()

    async def durable(self) -> None:
        """Wait until everything routed so far is stored and delivered (an HTTP ``202``)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def settle() -> None:
            if not done.done():
                done.set_result(None)

        self.store.after_commit(settle)
        await done

    def spawn(self, coro: Coroutine[Any, Any, Any], answer: Session | None = None) -> None:
        """Run ``coro`` in the background; its failure is answered to ``answer``."""
        self.tasks.spawn(coro, answer)

    # ------------------------------------------------------------------ the public calls

    def screen_key(self, frame: dict[str, object]) -> ProtocolError | None:
        """Why an IDENTIFY's public key is refused before its challenge (a strict allowlist
        without it), or None; an IDENTIFY with a token authenticates by the token."""
        pubkey, space = frame.get("pubkey"), frame.get("space")
        if not isinstance(pubkey, str) or frame.get("token"):
            return None
        return self.keys.screen(
            self.auth.addressed_space(space if isinstance(space, str) else None), pubkey
        )

    def authenticate(self, hello: Hello, address: str = "") -> Identity:
        """Check the hello (from client ``address``): its token, key and id; raises
        ProtocolError on refusal."""
        return self.sessions.authenticate(hello, address)

    async def attach(self, ident: Identity, conn: Connection, hello: Hello) -> Session:
        """Register a connection, welcome it, join its channels, replay its missed DMs."""
        return await self.sessions.attach(ident, conn, hello)

    def detach(self, s: Session, *, stranded: bool = False) -> None:
        """Forget a session (``stranded``: cut off by the gateway's side)."""
        self.sessions.detach(s, stranded=stranded)

    def on_overflow(self, conn: Connection) -> None:
        """A connection's send buffer overflowed: detach its session after this fan-out."""
        self.sessions.on_overflow(conn)

    def route(self, sender: Sender, env: Envelope, frame_len: int = 0) -> Envelope:
        """Admit and pass on one envelope (an HTTP post); return it as accepted."""
        return self.router.route(sender, env, frame_len)

    def error(self, s: Session, exc: ProtocolError) -> None:
        """Answer a problem to the participant that caused it."""
        self.delivery.error(s, exc)

    def check_rate(
        self, space: SpaceState, pid: str, address: str = "", connection: str = ""
    ) -> None:
        """Spend one message of ``pid``'s rate (HTTP posts share it with the WebSocket), of
        the HTTP connection's and of the source address's."""
        self.admission.check_rate(space, pid, address, connection)

    def capabilities_for(self, ident: Identity) -> CapabilitySet:
        """``ident``'s capabilities now (see :meth:`Grants.current`)."""
        return self.grants.current(self.spaces[ident.space], ident.id, ident.capability_set())
