"""The desk: one MCP session's view of its participant, built from the envelopes it receives.

Every envelope the gateway sends the participant goes through :meth:`Desk.receive` (the
seat adapters call it, in order). The desk keeps what the tools read:

- the **inbox** of messages not yet returned by ``listen``, with the last ``seq`` returned
  per channel and the DM ``seq``s seen, so a message is returned once and never skipped
  (a resend after a reconnect is dropped here too);
- who is online comes from the seat (its connection tracks it already);
- the **floor**: who holds each message (``floor/claimed``, relayed claims) and the
  ``floor/yield``s this participant received;
- the **proposals** pending in its channels, and the answers to its requests.

The desk also keeps where ``listen`` stopped (:meth:`Desk.cursor`) and hands it to
``on_cursor`` each time ``listen`` returns messages and each time the participant joins or
leaves a channel (:meth:`Desk.checkpoint`); a desk made with a ``resume`` cursor
(``/mcp``'s next session after a gateway restart) takes the history its channels' joins
bring after those points as news, and pages the rest (:meth:`Desk.catch_up`).

``listen``'s waits (the settle window, the jittered nudge, the progress tick) come from its
:class:`~hubbub.mcp.settings.ListenSettings` (the jitter's random source is injected), so
tests drive it with short settings instead of waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from hubbub.mcp.cursor import ListenCursor
from hubbub.mcp.seat import Seat, SeatClosed
from hubbub.mcp.settings import ListenSettings
from hubbub.protocol import addressing
from hubbub.protocol.addressing import Authors, RosterView, names_of
from hubbub.protocol.agentchat import SERVER_NAME
from hubbub.protocol.capabilities import CapabilitySet
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.ids import SERVER_ID
from hubbub.protocol.markers import MAX_DURATION_S, max_duration_of

LISTENED_KINDS = frozenset({"chat", "mcp/proposal", "mcp/reject", "mcp/withdraw"})
"""Kinds ``listen`` returns (with their ``seq``); ``mcp/response`` too when it answers one of
this participant's proposals."""
CATCH_UP_PAGE = 1000
"""Messages asked for per ``history/request`` while a resumed channel's gap is paged."""
REMEMBERED = 256
"""How many recent messages the desk remembers (id → channel, to claim them)."""
_DM_SEEN = 512
SAFE_SHARE = 0.75
"""A listen ends within this share of the client's (likely) request timeout."""
MIN_CLIENT_TIMEOUT_S = 1.0
"""A listen replaced sooner than this says nothing of its client's timeout (a slip, a
parallel call)."""
SERVER_IDS = frozenset({SERVER_ID, SERVER_NAME})
"""The server's names: its id, and how the agentchat dialect calls it."""


class DeskError(Exception):
    """The gateway refused what a tool sent; the message says why and what to do."""


@dataclass(slots=True)
class Floor:
    """Who holds the floor on one message (``None``: nobody claimed it yet)."""

    holder: str | None = None
    started_at: int | None = None
    claimants: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Yielded:
    """A ``floor/yield`` this participant received: ``winner`` answers ``msg_id``."""

    msg_id: str
    winner: str
    channel: str | None


@dataclass(slots=True)
class ListenResult:
    """What one ``listen`` returns: messages, or a nudge, and the yields since the last."""

    messages: list[Envelope]
    yields: list[Yielded]
    nudge: bool
    repeated: list[str] = field(default_factory=list)
    """Ids of messages an earlier listen returned already, too late for its client."""
    superseded: bool = False
    """A newer listen of the same session replaced this one (its client gave up on it)."""


_Waiter = tuple[Callable[[Envelope], bool], asyncio.Future[Envelope]]


class Desk:
    """One participant's state for the MCP tools; fed by :meth:`receive`."""

    def __init__(
        self,
        seat: Seat,
        participant_id: str,
        settings: ListenSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        resume: ListenCursor | None = None,
        on_cursor: Callable[[ListenCursor], Awaitable[None]] | None = None,
    ) -> None:
        self.seat = seat
        self.me = participant_id
        self.kind = "agent"
        self.space = "default"
        self.settings = settings or ListenSettings()
        self.clock = clock
        self.wall_ms = wall_ms
        self.capabilities = CapabilitySet([])
        self.channels: list[str] = []
        self.last_seq: dict[str, int] = {}
        self._dm_seen: set[int] = set()
        self._dm_order: deque[int] = deque()
        self.inbox: deque[Envelope] = deque()
        self.recent: OrderedDict[str, str | None] = OrderedDict()
        self.authors = Authors()
        """Who wrote the recent chat messages (a reply to one is addressed to its author)."""
        self.floors: dict[str, Floor] = {}
        self.yields: dict[str, Yielded] = {}
        self._unreported_yields: list[Yielded] = []
        self.proposals: OrderedDict[str, Envelope] = OrderedDict()
        self.my_proposals: set[str] = set()
        self._waiters: list[_Waiter] = []
        self._arrived = asyncio.Event()
        self.watchers: list[Callable[[Envelope], None]] = []
        self.closed: str | None = None
        self.welcomed = asyncio.Event()
        self.epoch: str | None = None
        self.max_duration_s = MAX_DURATION_S
        """The longest callback delay and sleep (the welcome's ``max_duration_s``)."""
        self.resume = resume
        self.on_cursor = on_cursor
        """Called with the new cursor each time ``listen`` returns messages (before it
        returns them) and at each :meth:`checkpoint`: ``/mcp`` saves it in the gateway's
        store."""
        self._resuming: dict[str, int] = {}
        self._paging: dict[str, list[Envelope]] = {}
        self._dm_max: int | None = None
        self._dm_start: int | None = None
        self.observed_timeout_s: float | None = None
        """How long this session's client waits for a request at most, as seen: how long a
        listen had run when the client asked again (None until that happened)."""
        self._listen_gen = 0
        self._listening_since: float | None = None
        self._offered: set[str] = set()
        self._last_batch: tuple[object, list[Envelope]] | None = None

    # ------------------------------------------------------------------ input

    def receive(self, env: Envelope) -> None:
        """Take one envelope from the gateway (the seat calls this for each, in order)."""
        if env.seq is not None and env.channel in self._paging:
            self._paging[env.channel].append(env)  # after the gap being paged: held till then
            return
        self._take(env)

    def _take(self, env: Envelope) -> None:
        kind = env.kind
        if kind == "system/welcome":
            self._on_welcome(env)
        elif kind == "channel/joined":
            self._on_joined(env)
        elif kind == "channel/left":
            name = env.payload.get("channel")
            if name in self.channels:
                self.channels.remove(name)
        elif kind == "system/presence":
            self._on_presence(env)
        elif kind == "floor/claimed":
            p = env.payload
            floor = self.floors.setdefault(str(p.get("msg_id")), Floor())
            floor.holder = p.get("holder")
            floor.started_at = p.get("started_at")
        elif kind == "floor/responding-to":
            floor = self.floors.setdefault(str(env.payload.get("msg_id")), Floor())
            if env.from_ not in floor.claimants:
                floor.claimants.append(env.from_)
        elif kind == "floor/yield":
            y = Yielded(str(env.payload.get("msg_id")), str(env.payload.get("winner")), env.channel)
            self.yields[y.msg_id] = y
            self._unreported_yields.append(y)
            floor = self.floors.setdefault(y.msg_id, Floor())
            floor.holder = y.winner
            self._arrived.set()
        elif kind in ("capability/grant", "capability/revoke") and self.me in (env.to or ()):
            caps = env.payload.get("capabilities")
            if isinstance(caps, list):
                self.capabilities = (
                    self.capabilities.granted(caps)
                    if kind == "capability/grant"
                    else self.capabilities.revoked(caps)
                )
        if env.seq is not None and not self._fresh(env):
            return
        self._wake_waiters(env)
        if env.seq is not None or (env.from_ in SERVER_IDS and kind == "chat"):
            self._on_message(env)

    def _on_welcome(self, env: Envelope) -> None:
        you = env.payload.get("you")
        if isinstance(you, dict):
            self.me = str(you.get("id", self.me))
            self.kind = str(you.get("kind", self.kind))
            caps = you.get("capabilities")
            if isinstance(caps, list):
                self.capabilities = CapabilitySet(caps)
        self.space = str(env.payload.get("space", self.space))
        self.max_duration_s = max_duration_of(env.payload)
        epoch = env.payload.get("epoch")
        self.epoch = epoch if isinstance(epoch, str) else None
        dm_seq = env.payload.get("dm_seq")
        self._dm_start = dm_seq if isinstance(dm_seq, int) else None
        r = self.resume
        if r is not None and (r.epoch is None or r.epoch == self.epoch):
            # the gateway replays after these points (another epoch: it starts afresh)
            self._resuming = dict(r.channels)
            if r.dm is not None:
                self._dm_start = r.dm
        self.welcomed.set()

    def _on_joined(self, env: Envelope) -> None:
        name = env.payload.get("channel")
        if not isinstance(name, str):
            return
        if name not in self.channels:
            self.channels.append(name)
        seq = env.payload.get("seq")
        point = self._resuming.pop(name, None)
        if point is not None and env.payload.get("history_reset") is None:
            # a resumed join: its history is what came after the point, i.e. news
            self.last_seq[name] = point
            for missed in _envelopes(env.payload.get("history")):
                self._take(missed)
            if env.payload.get("has_more"):
                self._paging[name] = []  # the rest is paged by catch_up
            return
        if name not in self.last_seq:
            # the first join: its history is context (the history tool), not news
            self.last_seq[name] = seq if isinstance(seq, int) else 0

    def roster(self) -> list[Mapping[str, Any]]:
        """Who is online in the space (summaries), as the connection knows it."""
        return list(self.seat.participants().values())

    def _on_presence(self, env: Envelope) -> None:
        p = env.payload
        if p.get("channel") is not None:
            return
        if p.get("event") == "leave":
            return
        for entry in p.get("participants") or [p.get("participant")]:
            if isinstance(entry, dict) and entry.get("id") == self.me:
                caps = entry.get("capabilities")
                if isinstance(caps, list) and caps != self.capabilities.capabilities:
                    self.capabilities = CapabilitySet(caps)

    def _fresh(self, env: Envelope) -> bool:
        """Whether a stored message is new here (a resend or a resume overlap is not)."""
        seq = env.seq
        assert seq is not None
        if env.channel is not None:
            last = self.last_seq.get(env.channel)
            if last is not None and seq <= last:
                return False
            self.last_seq[env.channel] = seq
            return True
        if seq in self._dm_seen:
            return False
        self._dm_seen.add(seq)
        if self._dm_max is None or seq > self._dm_max:
            self._dm_max = seq
        self._dm_order.append(seq)
        if len(self._dm_order) > _DM_SEEN:
            self._dm_seen.discard(self._dm_order.popleft())
        return True

    async def catch_up(self) -> None:
        """Wait until the join frames' answers have arrived, then page what the resumed
        channels missed beyond their first page (live messages meanwhile are held, then
        taken in order)."""
        await self.sync()
        for name in list(self._paging):
            try:
                while True:
                    after = self.last_seq.get(name, 0)
                    ans = await self.request(
                        Envelope(
                            kind="history/request",
                            payload={"channel": name, "after_seq": after, "limit": CATCH_UP_PAGE},
                        )
                    )
                    for missed in _envelopes(ans.payload.get("messages")):
                        self._take(missed)
                    if not ans.payload.get("has_more") or self.last_seq.get(name, 0) <= after:
                        break
            finally:
                for held in self._paging.pop(name, []):
                    self._take(held)

    def resume_saved(self, cursor: ListenCursor) -> list[str]:
        """Resume from ``cursor``, a saved one read after the joins (``hubbub mcp``): each
        joined channel's messages after its point become news again (:meth:`catch_up` pages
        them; what arrived meanwhile is held, then taken in order). Returns the channels of
        the cursor not joined yet: join each with ``after_seq`` at its point (its history is
        then news too). Nothing when the cursor is of another history epoch."""
        if cursor.epoch is not None and cursor.epoch != self.epoch:
            return []
        later: list[str] = []
        for name, point in cursor.channels.items():
            if name not in self.channels:
                self._resuming[name] = point
                later.append(name)
            elif point < self.last_seq.get(name, 0):
                held = [e for e in self.inbox if e.channel == name]
                self.inbox = deque(e for e in self.inbox if e.channel != name)
                self.last_seq[name] = point
                self._paging[name] = held
        return later

    async def checkpoint(self) -> None:
        """Hand the cursor over now (after a join or a leave: the next session rejoins the
        channels the participant is in)."""
        if self.on_cursor is not None:
            await asyncio.shield(self.on_cursor(self.cursor()))

    def cursor(self, returned: Iterable[Envelope] = ()) -> ListenCursor:
        """Where ``listen`` stands once ``returned`` is returned: per channel, and for the DM
        stream, the last ``seq`` up to which every message was returned (or was not one
        ``listen`` returns)."""
        gone = {id(e) for e in returned}
        first: dict[str | None, int] = {}  # the oldest message still to return, per stream
        for e in self.inbox:
            if e.seq is not None and id(e) not in gone:
                key = e.channel
                first[key] = min(first.get(key, e.seq), e.seq)
        channels = {}
        for name in self.channels:
            if name in first:
                channels[name] = first[name] - 1
            elif name in self.last_seq:
                channels[name] = self.last_seq[name]
        seen = [x for x in (self._dm_max, self._dm_start) if x is not None]
        dm = max(seen) if seen else None
        if None in first:
            dm = first[None] - 1
        return ListenCursor(self.epoch, channels, dm)

    def remember(self, env: Envelope) -> None:
        """Note a message's channel by its id (``claim_floor`` names messages by id)."""
        if env.id:
            self.recent[env.id] = env.channel
            self.recent.move_to_end(env.id)
            if len(self.recent) > REMEMBERED:
                self.recent.popitem(last=False)

    def _on_message(self, env: Envelope) -> None:
        kind = env.kind
        self.remember(env)
        if kind == "chat":
            self.authors.heard(env)
        cids = env.correlation_ids()
        if kind == "mcp/proposal":
            self.proposals[env.id] = env
            if env.from_ == self.me:
                self.my_proposals.add(env.id)
        elif kind in ("mcp/withdraw", "mcp/reject") or (kind == "mcp/request" and cids):
            for cid in cids:
                self.proposals.pop(cid, None)
        for watch in list(self.watchers):
            watch(env)
        if env.from_ == self.me:
            return  # our own echo: the sender knows it already
        listened = kind in LISTENED_KINDS or (
            kind == "mcp/response" and env.payload.get("id") in self.my_proposals
        )
        if listened:
            self.inbox.append(env)
            self._arrived.set()

    # ------------------------------------------------------------------ requests

    def _wake_waiters(self, env: Envelope) -> None:
        for match, future in list(self._waiters):
            if not future.done() and match(env):
                future.set_result(env)

    def expect(self, match: Callable[[Envelope], bool]) -> asyncio.Future[Envelope]:
        """A future for the next envelope for which ``match`` holds (registered at once)."""
        future: asyncio.Future[Envelope] = asyncio.get_running_loop().create_future()
        entry = (match, future)
        self._waiters.append(entry)
        future.add_done_callback(lambda _f: self._waiters.remove(entry))
        return future

    def closed_by(self, reason: str) -> None:
        """The seat lost its connection for good: fail every waiter with ``reason``."""
        self.closed = reason
        for _match, future in list(self._waiters):
            if not future.done():
                future.set_exception(SeatClosed(reason))
        self._arrived.set()

    async def request(
        self,
        env: Envelope,
        answer: Callable[[Envelope], bool] | None = None,
        timeout: float = 10.0,  # noqa: ASYNC109
    ) -> Envelope:
        """Send ``env`` and return the gateway's answer (by default the envelope correlated to
        it); raises :class:`DeskError` with the gateway's refusal."""
        if not env.id:
            env.id = self.seat.new_id()
        rid = env.id

        def correlated(e: Envelope) -> bool:
            return rid in e.correlation_ids()

        def match(e: Envelope) -> bool:
            if e.kind == "system/error":
                return correlated(e)
            return answer(e) if answer is not None else correlated(e)

        future = self.expect(match)
        try:
            await self.seat.send(env)
            async with asyncio.timeout(timeout):
                got = await future
        except TimeoutError:
            raise DeskError(
                f"the gateway did not answer {env.kind} within {timeout:g}s; try again"
            ) from None
        finally:
            future.cancel()
        if got.kind == "system/error":
            raise DeskError(str(got.payload.get("message") or got.payload.get("error")))
        return got

    async def send_stored(self, env: Envelope, timeout: float = 10.0) -> Envelope:  # noqa: ASYNC109
        """Send a message the gateway stores; return it as stored (its echo, with ``seq``)."""
        if not env.id:
            env.id = self.seat.new_id()
        mid, me = env.id, self.me
        return await self.request(
            env, lambda e: e.id == mid and e.from_ == me and e.seq is not None, timeout
        )

    async def sync(self) -> None:
        """Return once the gateway has handled everything sent before (a refusal of it has
        then arrived): a ``channel/list`` round trip, answered in order."""
        await self.request(Envelope(kind="channel/list"))

    # ------------------------------------------------------------------ listen

    def take_yields(self) -> list[Yielded]:
        """The yields not reported yet (each is reported once)."""
        out, self._unreported_yields = self._unreported_yields, []
        return out

    def yield_reported(self, msg_id: str) -> None:
        """A yield was told to the model already (``claim_floor``'s answer): not again."""
        self._unreported_yields = [y for y in self._unreported_yields if y.msg_id != msg_id]

    def _matching(self, channels: Iterable[str] | None) -> list[Envelope]:
        wanted = None if channels is None else set(channels)
        return [e for e in self.inbox if wanted is None or e.channel is None or e.channel in wanted]

    async def listen(
        self,
        channels: list[str] | None,
        timeout_s: float | None,
        progress: Callable[[float, str], Awaitable[None]] | None = None,
        request: object = None,
    ) -> ListenResult:
        """Wait for messages (then the settle window), or return a nudge after the jittered
        timeout, within the client's likely request timeout. Messages leave the inbox only
        when returned in time: a cancelled listen loses none, and a batch returned after the
        client most likely gave up stays, offered again (``repeated``) by the next listen.
        ``request`` names the MCP request, for :meth:`reoffer`."""
        start = self.clock()
        if self._listening_since is not None:
            # a listen still runs: its client gave up on it and asks again. It steps aside,
            # and the time it ran is this client's request timeout, at most
            waited = start - self._listening_since
            if waited >= MIN_CLIENT_TIMEOUT_S:
                seen = self.observed_timeout_s
                self.observed_timeout_s = waited if seen is None else min(seen, waited)
        self._listen_gen += 1
        gen = self._listen_gen
        self._arrived.set()  # wake the older listen so it sees it was replaced
        self._listening_since = start
        try:
            return await self._listen(channels, timeout_s, progress, request, start, gen)
        finally:
            if gen == self._listen_gen:
                self._listening_since = None

    async def _listen(
        self,
        channels: list[str] | None,
        timeout_s: float | None,
        progress: Callable[[float, str], Awaitable[None]] | None,
        request: object,
        start: float,
        gen: int,
    ) -> ListenResult:
        s = self.settings
        # end well within the client's request timeout (the setting, or as seen)
        budget = min(s.max_listen_s, SAFE_SHARE * self.client_timeout_s())
        settle = min(s.settle_s, budget / 2)
        deadline = start + s.nudge_after(timeout_s, budget - settle)
        next_tick = start + s.progress_s
        while not self._matching(channels) and not self._unreported_yields:
            if gen != self._listen_gen:
                return ListenResult([], [], nudge=False, superseded=True)
            if self.closed is not None:
                raise SeatClosed(self.closed)
            now = self.clock()
            if now >= deadline:
                return ListenResult([], self.take_yields(), nudge=True)
            if now >= next_tick and progress is not None:
                await progress(now - start, "listening: no messages yet")
                next_tick = now + s.progress_s
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(min(deadline, next_tick) - now, 0.0)):
                    await self._arrived.wait()
        if gen != self._listen_gen:
            return ListenResult([], [], nudge=False, superseded=True)
        if self._matching(channels) and settle > 0:
            # the settle window: let a burst finish (ending within the budget)
            await asyncio.sleep(max(min(settle, start + budget - self.clock()), 0.0))
            if gen != self._listen_gen:
                return ListenResult([], [], nudge=False, superseded=True)
        taken = self._matching(channels)
        repeated = [e.id for e in taken if e.id in self._offered]
        yields = self.take_yields()
        if self.clock() - start >= self.client_timeout_s():
            # the client most likely gave up already: this batch may never reach it, so
            # it stays queued (and the cursor where it is), offered again next time
            self._offered.update(e.id for e in taken)
            self._unreported_yields[:0] = yields
            return ListenResult(taken, yields, nudge=False, repeated=repeated)
        if taken and self.on_cursor is not None:
            # saved before the messages leave the inbox: a failed save loses none
            await asyncio.shield(self.on_cursor(self.cursor(taken)))
        ids = {id(e) for e in taken}
        self.inbox = deque(e for e in self.inbox if id(e) not in ids)
        self._offered.difference_update(e.id for e in taken)
        self._last_batch = (request, taken) if taken and request is not None else None
        return ListenResult(taken, yields, nudge=False, repeated=repeated)

    def client_timeout_s(self) -> float:
        """When this session's client most likely gave up on a request: the setting, or
        what was seen of it if shorter."""
        seen = self.observed_timeout_s
        limit = self.settings.client_timeout_s
        return limit if seen is None else min(limit, seen)

    async def reoffer(self, request: object) -> bool:
        """The client cancelled ``request`` (a listen) after its batch was returned: queue
        that batch again, offered as ``repeated`` by the next listen. False when the last
        batch was not that request's."""
        batch = self._last_batch
        if batch is None or batch[0] != request:
            return False
        self._last_batch = None
        queued = {id(e) for e in self.inbox}
        back = [e for e in batch[1] if id(e) not in queued]
        self.inbox.extendleft(reversed(back))
        self._offered.update(e.id for e in back)
        self._arrived.set()
        await self.checkpoint()  # the cursor goes back before them
        return True

    # ------------------------------------------------------------------ views

    def floor(self, msg_id: str) -> Floor | None:
        """The floor of a message as last heard (None: nobody claimed it)."""
        return self.floors.get(msg_id)

    def addresses_me(self, env: Envelope) -> bool:
        """Whether ``env`` addresses this participant (a DM to it, ``to``, a mention by id or
        display name, or a reply to its message: the one rule, ``protocol/addressing.py``)."""
        if env.channel is None and env.from_ != self.me:
            return True
        names = names_of(self.seat.participants().values())
        names.setdefault(self.me, None)
        view = RosterView(names, self.authors.author_of)
        return self.me in addressing.of(env, view).ids

    def kind_of(self, pid: str) -> str | None:
        """The kind of a participant as the roster knows it."""
        if pid in SERVER_IDS:
            return "server"
        entry = self.seat.participants().get(pid)
        return None if entry is None else entry.get("kind")


def _envelopes(raw: Any) -> list[Envelope]:
    """The stored messages of a ``channel/joined`` history or a ``history/response``."""
    return msgspec.convert(raw if isinstance(raw, list) else [], list[Envelope])
