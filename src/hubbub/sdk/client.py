"""Layer 1 of the SDK: :class:`Client`, a MEW-dialect connection to the gateway.

The client keeps one WebSocket, joins, emits events, reconnects with backoff and **resumes**:
it remembers the last ``seq`` seen per channel (and the last DM ``seq``), asks the gateway for
exactly what came after on reconnect, and drops anything it has already delivered, so a dropped
connection loses nothing and repeats nothing.

```python
async with Client(gateway="ws://127.0.0.1:8080/ws", participant_id="watcher") as client:
    async for envelope in client:
        print(envelope.kind, envelope.payload)
```
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Final, overload

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from hubbub.errors import (
    ConnectionFailed,
    NotConnected,
    RequestTimeout,
)
from hubbub.protocol.envelope import (
    PROTOCOL,
    Envelope,
    decode_envelope,
    encode,
)
from hubbub.protocol.streams import is_stream_frame
from hubbub.sdk.events import (
    ClientEvents,
    Disconnected,
    Failover,
    H,
    Handler,
    Reconnecting,
    Subscription,
)
from hubbub.sdk.handshake import JoinHandshake
from hubbub.sdk.options import ClientOptions
from hubbub.sdk.outbox import Outbox, is_acknowledged
from hubbub.sdk.reconnect import Backoff, Dial, ReconnectPolicy
from hubbub.sdk.resume import ResumeState, Verdict
from hubbub.sdk.roster import Roster
from hubbub.sdk.states import ConnectionState, Event, State
from hubbub.sdk.wire import gateway_error, to_envelope

log = logging.getLogger("hubbub.sdk.client")

_PARTIAL_REFUSALS: Final = frozenset({"callback_rejected"})
"""Errors about a part of a message (a callback marker) while the message itself is sent."""
NO_RECONNECT_CODES: Final = frozenset({1008, 4000, 4001})
"""Close codes after which reconnecting would be wrong: refused, replaced by a newer
connection with the same id, kicked (the web pages' ``FINAL_CLOSE_CODES`` too)."""


class Client:
    """A MEW-dialect connection: state machine, events, reconnect, heartbeat and resume.

    Construct with keyword options (see :class:`~hubbub.sdk.ClientOptions`) or an options
    object, then ``await connect()`` or use ``async with``. Events are delivered to handlers
    registered with :meth:`on` and to every ``async for envelope in client`` loop.
    """

    def __init__(self, options: ClientOptions | None = None, /, **fields: Any) -> None:
        if options is None:
            options = ClientOptions(**fields)
        elif fields:
            options = options.replace(**fields)
        self.options = options
        self.id = options.participant_id
        """This participant's id (as the gateway's welcome confirmed it)."""
        self.channels: list[str] = list(options.channels)
        """Channels this client is a member of (re-joined on reconnect)."""
        self.resume = ResumeState()
        """What was delivered per channel and DM stream, and what to resume from."""
        self.welcome: Envelope | None = None
        """The latest ``system/welcome``."""
        self.roster = Roster()
        """Who is in the space (from the welcome and presence events; those that left are
        kept, offline) and who wrote the recent messages."""
        self.outbox = Outbox()
        """Sent messages not acknowledged yet: sent again, same ids, after a reconnect."""
        self.gateway_url: str | None = None
        """The gateway URL the client is connected to, or was last (``None`` before the first
        connection); reconnect rounds start with it."""
        self._dialing = ""
        self._conn_state = ConnectionState()
        self._ws: ClientConnection | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._first: asyncio.Future[None] | None = None
        self._closing = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self.events = ClientEvents(self.id, self._spawn)
        """Handlers, ``async for`` streams and waiters (:meth:`on`, :meth:`messages`)."""
        self._rand = random.Random()
        self._handshake: JoinHandshake | None = None
        self._reached_ready = False
        self._last_close: tuple[int | None, str] = (None, "")
        self.failure: ConnectionFailed | None = None
        """Why the client stopped for good without ``disconnect()`` (refused, gave up)."""
        self._refused_reconnect = False

    # ------------------------------------------------------------------ properties

    @property
    def participants(self) -> dict[str, dict[str, Any]]:
        """Participants online in the space, by id (from the welcome and presence events)."""
        return self.roster.online

    @property
    def state(self) -> State:
        """The connection state (see :mod:`hubbub.sdk.states`)."""
        return self._conn_state.state

    @property
    def last_seq(self) -> dict[str, int]:
        """Highest ``seq`` delivered per channel: the resume point (see :attr:`resume`)."""
        return self.resume.last_seq

    @property
    def epoch(self) -> str | None:
        """The gateway's history epoch (from the welcome); resume points belong to it."""
        return self.resume.epoch

    @epoch.setter
    def epoch(self, value: str | None) -> None:
        self.resume.epoch = value

    @property
    def duplicates_dropped(self) -> int:
        """Envelopes received twice (e.g. replayed after a resume) and not delivered again."""
        return self.resume.duplicates_dropped

    @property
    def is_ready(self) -> bool:
        """Whether the client is joined and may send."""
        return self._conn_state.state is State.READY

    def new_id(self) -> str:
        """A fresh client-side id for an outgoing envelope (the gateway echoes it in errors):
        128 random bits, so nobody can guess the next id to squat or answer it."""
        return secrets.token_hex(16)

    # ------------------------------------------------------------------ events

    @overload
    def on(self, event: str, handler: None = None) -> Callable[[H], H]: ...

    @overload
    def on(self, event: str, handler: H) -> H: ...

    def on(self, event: str, handler: H | None = None) -> H | Callable[[H], H]:
        """Register ``handler`` for an event; usable as ``@client.on("chat")``.

        Events: ``connected`` (URL), ``disconnected`` (:class:`Disconnected`), ``message``
        (every :class:`Envelope`), ``welcome`` and ``ready`` (the welcome envelope), ``error``
        (an exception), ``reconnecting`` (:class:`Reconnecting`), ``failover``
        (:class:`Failover`, once ready on another gateway URL), and any envelope kind
        (``chat``, ``mcp/request``, ...) with the envelope. Async handlers run as tasks.
        """
        self.events.check(event)
        if handler is None:
            return lambda fn: self.events.on(event, fn)
        return self.events.on(event, handler)

    def off(self, event: str, handler: Handler) -> None:
        """Remove a handler registered with :meth:`on` (no error if it is not registered)."""
        self.events.off(event, handler)

    def _emit(self, event: str, arg: object) -> None:
        self.events.emit(event, arg)

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        """Run ``coro`` as a task owned by the client (cancelled at disconnect)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def messages(self) -> Subscription:
        """A new subscription to every envelope received from now on (``async for``)."""
        return Subscription(self.events)

    def __aiter__(self) -> Subscription:
        """``async for envelope in client``: a new :meth:`messages` subscription."""
        return self.messages()

    def expect(
        self, kind: str | None = None, where: Callable[[Envelope], bool] | None = None
    ) -> asyncio.Future[Envelope]:
        """A future for the next envelope of ``kind`` (any if ``None``) for which ``where``
        holds, registered at once, so an envelope arriving before it is awaited is not missed.
        Cancel the future to stop waiting."""

        def match(env: Envelope) -> bool:
            return (kind is None or env.kind == kind) and (where is None or where(env))

        return self.events.expect(match)

    async def wait_for(
        self,
        kind: str | None = None,
        where: Callable[[Envelope], bool] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> Envelope:
        """The next envelope of ``kind`` (any kind if ``None``) for which ``where`` holds.

        Raises :class:`~hubbub.errors.RequestTimeout` after ``timeout`` seconds. To wait for
        the answer to something you are about to send, take :meth:`expect` before sending.
        """
        future = self.expect(kind, where)
        try:
            async with asyncio.timeout(timeout):
                return await future
        except TimeoutError:
            raise RequestTimeout(
                f"no {kind or 'envelope'} matching the condition within {timeout}s"
            ) from None
        finally:
            future.cancel()

    async def wait_for_participant(self, participant_id: str, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Return once ``participant_id`` is online in the space."""
        if participant_id in self.participants:
            return
        await self.wait_for(
            "system/presence", lambda _env: participant_id in self.participants, timeout
        )

    # ------------------------------------------------------------------ lifecycle

    async def connect(self) -> None:
        """Connect, join and return once ready; raise ConnectionFailed/AuthRefused if the
        first connection fails (later losses are retried in the background)."""
        if self._supervisor is not None and not self._supervisor.done():
            await self._wait_ready(self.options.connect_timeout)
            return
        self._closing = False
        loop = asyncio.get_running_loop()
        self._first = loop.create_future()
        self._supervisor = loop.create_task(self._supervise(), name=f"hubbub-client-{self.id}")
        try:
            await self._first
        except BaseException:
            await self._stop_supervisor()
            raise

    async def disconnect(self) -> None:
        """Close the connection for good (no reconnect) and end every message stream."""
        self._closing = True
        ws = self._ws
        if ws is not None:
            with contextlib.suppress(Exception):
                await ws.close(1000, "client disconnect")
        await self._stop_supervisor()
        for task in list(self._tasks):
            task.cancel()
        self.events.end_streams()
        self.events.fail_waiters(NotConnected("the client disconnected"))

    async def _stop_supervisor(self) -> None:
        task, self._supervisor = self._supervisor, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None

    async def wait_closed(self) -> None:
        """Return once the client stopped for good: ``disconnect()`` was called, or it could
        not reconnect (then :attr:`failure` says why)."""
        task = self._supervisor
        if task is not None:
            await asyncio.wait({task})

    async def serve_forever(self) -> None:
        """Return once :meth:`disconnect` is called; raise
        :class:`~hubbub.errors.ConnectionFailed` if the connection is lost for good."""
        if self._supervisor is None:
            raise NotConnected("call connect() (or use `async with`) before serve_forever()")
        await self.wait_closed()
        if self.failure is not None:
            raise self.failure

    async def __aenter__(self) -> Client:
        """Connect."""
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Disconnect."""
        await self.disconnect()

    async def _supervise(self) -> None:
        """Run sessions one after another until closed: the reconnect loop."""
        try:
            await self._reconnect_loop()
        finally:
            if not self._closing:
                self.events.end_streams()

    async def _reconnect_loop(self) -> None:
        """Sessions one after another, as :class:`~hubbub.sdk.reconnect.ReconnectPolicy`
        says: the next URL at once, a backoff between rounds, or giving up."""
        policy = ReconnectPolicy(self.options, self.gateway_url, self._rand.random)
        url = policy.first()
        while True:
            failed: ConnectionFailed | None = None
            try:
                await self._session(url)
                code, why = self._last_close
                reason = f"connection closed with code {code}" + (f": {why}" if why else "")
            except ConnectionFailed as exc:  # AuthRefused too
                failed = exc
                reason = str(exc)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug: report it, keep the connection alive
                log.exception("client %s: unexpected error in the connection loop", self.id)
                self._emit("error", exc)
                reason = f"internal error: {exc}"
            if self._closing:
                return
            reached, self._reached_ready = self._reached_ready, False
            step = policy.ended(
                url,
                failed,
                reason,
                first=self._first is not None and not self._first.done(),
                reached_ready=reached,
                refused=self._refused_reconnect,
            )
            if isinstance(step, Dial):
                log.info("client %s: %s; trying %s next", self.id, reason, step.url)
                url = step.url
            elif isinstance(step, Backoff):
                self._emit("reconnecting", Reconnecting(step.attempt, step.delay, step.reason))
                await asyncio.sleep(step.delay)
                url = policy.next_round()
            else:
                self.failure = step.failure
                self._fail_first(step.failure)
                if step.report:
                    self._emit("error", step.failure)
                return

    def _fail_first(self, exc: BaseException) -> None:
        if self._first is not None and not self._first.done():
            self._first.set_exception(exc)

    async def _session(self, url: str) -> None:
        """One connection to ``url``: dial, join, read until the socket closes."""
        opts = self.options
        self._dialing = url
        self._refused_reconnect = False
        self._conn_state.handle(Event.DIAL)
        try:
            hb = opts.heartbeat_interval
            ws = await connect(
                url,
                open_timeout=opts.connect_timeout,
                ping_interval=hb,
                ping_timeout=hb,
                close_timeout=2,
                max_size=None,
                compression=None,
            )
        except (OSError, TimeoutError, InvalidHandshake, InvalidURI) as exc:
            self._conn_state.handle(Event.CLOSED)
            raise ConnectionFailed(
                f"could not connect to {url}: {exc or type(exc).__name__} "
                "(is the gateway running? start one with `hubbub serve`)"
            ) from exc
        self._ws = ws
        self._conn_state.handle(Event.OPENED)
        self._emit("connected", url)
        code: int | None = None
        why = ""
        try:
            await ws.send(self._join_frame(), text=True)
            self._conn_state.handle(Event.JOIN_SENT)
            try:
                async with asyncio.timeout(opts.connect_timeout):
                    async for raw in ws:
                        self._receive(raw)
                        if self._conn_state.state is State.READY:
                            break
            except TimeoutError:
                raise ConnectionFailed(
                    f"no welcome from {url} within {opts.connect_timeout}s"
                ) from None
            if self._conn_state.state is not State.READY:
                raise self._closed_before_ready(ws)
            async for raw in ws:
                self._receive(raw)
        except ConnectionClosed:
            if self._conn_state.state is not State.READY:
                raise self._closed_before_ready(ws) from None
        finally:
            code, why = ws.close_code, ws.close_reason or ""
            self._last_close = (code, why)
            self._ws = None
            if self._heartbeat is not None:
                self._heartbeat.cancel()
                self._heartbeat = None
            self._ready.clear()
            self._conn_state.handle(Event.CLOSED)
            if code in NO_RECONNECT_CODES:
                self._refused_reconnect = True
            will = self.options.reconnect and not self._closing and not self._refused_reconnect
            self._emit("disconnected", Disconnected(code, why, will))

    def _closed_before_ready(self, ws: ClientConnection) -> ConnectionFailed:
        if self._handshake is not None and self._handshake.refusal is not None:
            return self._handshake.refusal
        code = ws.close_code
        return ConnectionFailed(
            f"the gateway closed the connection before the welcome (code {code}, "
            f"{ws.close_reason or 'no reason'})"
        )

    def _join_frame(self) -> str:
        resume = self.resume.join_points(self.channels)
        self._handshake = JoinHandshake(self.options, self.channels, resume, self.epoch)
        return encode(self._handshake.frame()).decode()

    def _become_ready(self) -> None:
        self._conn_state.handle(Event.WELCOMED)
        self._reached_ready = True
        self._ready.set()
        hb = self.options.heartbeat_interval
        if hb is not None and self._heartbeat is None:
            self._heartbeat = asyncio.get_running_loop().create_task(self._beat(hb))
        welcome = self.welcome
        previous, url = self.gateway_url, self._dialing
        self.gateway_url = url
        if self._first is not None and not self._first.done():
            self._first.set_result(None)
        if len(self.outbox):
            self._spawn(self._resend_unacknowledged())
        if previous is not None and previous != url:
            log.info("client %s: failed over from %s to %s", self.id, previous, url)
            self._emit("failover", Failover(previous, url))
        self._emit("ready", welcome)

    async def _beat(self, interval: float) -> None:
        """Send ``system/heartbeat`` every ``interval`` seconds while connected."""
        while True:
            await asyncio.sleep(interval)
            ws = self._ws
            if ws is None:
                return
            env = Envelope(kind="system/heartbeat", id=self.new_id())
            with contextlib.suppress(ConnectionClosed):
                await ws.send(encode(env), text=True)

    async def _wait_ready(self, limit: float | None) -> None:
        if self._conn_state.state is State.READY:
            return
        supervisor = self._supervisor
        if self._closing or supervisor is None or supervisor.done():
            raise NotConnected(
                "the client is not connected: call `await client.connect()` or use "
                "`async with` (it may also have given up reconnecting)"
            )
        ready = asyncio.ensure_future(self._ready.wait())
        try:
            await asyncio.wait(
                {ready, supervisor}, timeout=limit, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            ready.cancel()
        if not self.is_ready:
            why = (
                "gave up reconnecting"
                if supervisor.done()
                else f"still reconnecting after {limit}s"
            )
            raise NotConnected(f"not connected to {self.options.gateway}: {why}")

    # ------------------------------------------------------------------ sending

    async def send(self, envelope: Envelope | Mapping[str, Any], *, ack: bool = False) -> Envelope:
        """Send an envelope (or a dict in wire form); return it with its client id.

        Waits (up to ``connect_timeout``) while a reconnect is in progress; raises
        :class:`~hubbub.errors.NotConnected` if the client is not connected. The gateway's
        ``system/error`` about it, if any, carries this id as ``correlation_id``. A message
        the gateway stores is kept until the gateway echoes it and sent again, under the
        same id, after a reconnect (the gateway delivers it once). With ``ack=True``, wait
        for that echo (up to ``connect_timeout``) and return it, with its ``seq``; a refusal
        raises :class:`~hubbub.errors.GatewayError`.
        """
        env = envelope if isinstance(envelope, Envelope) else to_envelope(envelope)
        if not env.id:
            env.id = self.new_id()
        if not env.protocol:
            env.protocol = PROTOCOL
        if env.to and env.channel is None and not env.private:
            env.private = True  # the SDK's rule: `to` without a channel is a direct message
        ws = self._ws
        if ws is None or self._conn_state.state is not State.READY:
            await self._wait_ready(self.options.connect_timeout)
            ws = self._ws
        tracked = is_acknowledged(env)
        if ws is None and not tracked:
            raise NotConnected("the connection dropped while sending; send again")
        echo = self.outbox.track(env) if tracked else None
        if ws is not None:
            try:
                await ws.send(encode(env), text=True)
            except ConnectionClosed:
                if echo is None:
                    raise NotConnected(
                        "the connection closed while sending; the client reconnects by "
                        "itself, send again once it is ready"
                    ) from None
                # kept in the outbox: sent again once the client has reconnected
        if ack and echo is not None:
            try:
                async with asyncio.timeout(self.options.connect_timeout):
                    return await asyncio.shield(echo)
            except TimeoutError:
                raise RequestTimeout(
                    f"the gateway did not acknowledge {env.kind} {env.id} within "
                    f"{self.options.connect_timeout}s (it is still resent after a reconnect)"
                ) from None
        return env

    async def _resend_unacknowledged(self) -> None:
        """After a reconnect: send every unacknowledged message again, same ids, in order."""
        for env in self.outbox.pending():
            ws = self._ws
            if ws is None:
                return  # dropped again: the next reconnect resends what is still pending
            try:
                await ws.send(encode(env), text=True)
            except ConnectionClosed:
                return
            self.outbox.resent += 1

    async def _send_internal(self, env: Envelope) -> None:
        """Send on the current socket whatever the state (join-time bookkeeping)."""
        ws = self._ws
        if ws is not None:
            with contextlib.suppress(ConnectionClosed):
                await ws.send(encode(env), text=True)

    async def join(self, channel: str, timeout: float | None = None) -> Envelope:  # noqa: ASYNC109
        """Join ``channel``; return its ``channel/joined`` envelope (members, recent history)."""
        request = Envelope(kind="channel/join", id=self.new_id(), payload={"channel": channel})
        answer = self.expect("channel/joined", lambda e: e.payload.get("channel") == channel)
        return await self.request(request, answer, f"join {channel}", timeout)

    async def leave(self, channel: str, timeout: float | None = None) -> Envelope:  # noqa: ASYNC109
        """Leave ``channel``; return the ``channel/left`` envelope."""
        request = Envelope(kind="channel/leave", id=self.new_id(), payload={"channel": channel})
        answer = self.expect("channel/left", lambda e: e.payload.get("channel") == channel)
        return await self.request(request, answer, f"leave {channel}", timeout)

    async def request(
        self,
        request: Envelope,
        answer: asyncio.Future[Envelope],
        what: str,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> Envelope:
        """Send ``request`` (with an id); return ``answer`` (an :meth:`expect` future taken
        before) or raise the gateway's ``system/error`` about the request as a
        :class:`~hubbub.errors.GatewayError`; :class:`~hubbub.errors.RequestTimeout` after
        ``timeout`` (default ``connect_timeout``) names ``what``."""
        refused = self.expect("system/error", lambda e: request.id in e.correlation_ids())
        limit = timeout or self.options.connect_timeout
        try:
            await self.send(request)
            async with asyncio.timeout(limit):
                await asyncio.wait({answer, refused}, return_when=asyncio.FIRST_COMPLETED)
        except TimeoutError:
            raise RequestTimeout(
                f"no answer from the gateway to {what} within {limit:g}s"
            ) from None
        finally:
            for future in (answer, refused):
                if not future.done():
                    future.cancel()
        if answer.done() and not answer.cancelled():
            return answer.result()
        raise gateway_error(refused.result())

    # ------------------------------------------------------------------ receiving

    def _receive(self, raw: str | bytes) -> None:
        if is_stream_frame(raw):  # a MEW stream's data (docs/protocol.md#streams): not read
            return
        try:
            env = decode_envelope(raw)
        except Exception as exc:
            log.warning("client %s: undecodable frame from the gateway: %s", self.id, exc)
            return
        if env.seq is not None:
            if env.from_ == self.id:
                self.outbox.acknowledged(env)  # our own message is stored: no resend
            if self.resume.accept(env) is Verdict.DELIVER:
                self.roster.heard(env)
                self._deliver(env)
            return
        kind = env.kind
        if kind == "system/welcome":
            self._on_welcome(env)
        elif kind == "channel/joined":
            self._on_joined(env)
            return
        elif kind == "channel/left":
            self._on_left(env)
        elif kind == "system/presence":
            self.roster.presence(env.payload)
        elif kind == "history/response":
            if self._on_history(env):
                return
        elif kind == "system/error":
            self._on_error(env)
        self._deliver(env)

    def _deliver(self, env: Envelope) -> None:
        """Hand one envelope to waiters, handlers and subscribers."""
        self.events.deliver(env)

    def _on_welcome(self, env: Envelope) -> None:
        self.welcome = env
        you = env.payload.get("you")
        if isinstance(you, dict) and isinstance(you.get("id"), str):
            self.id = self.events.owner = you["id"]
        self.roster.welcomed(env.payload)
        self.resume.welcomed(env.payload)
        if self._handshake is not None:
            self._handshake.welcome()
        self._emit("welcome", env)
        self._check_ready()

    def _check_ready(self) -> None:
        hs = self._handshake
        if hs is not None and hs.complete and self._conn_state.state is State.JOINED:
            self._become_ready()

    def _on_joined(self, env: Envelope) -> None:
        payload = env.payload
        channel = payload.get("channel")
        if not isinstance(channel, str):
            self._deliver(env)
            return
        if channel not in self.channels:
            self.channels.append(channel)
        joined = self.resume.joined(channel, payload)
        if joined.reset:
            log.warning("client %s: history of %s was reset (%s); reloading", self.id,
                        channel, payload.get("history_reset"))  # fmt: skip
            self._emit("history_reset", env)
        self._deliver(env)
        self._replay(channel, joined.missed)
        if joined.more:
            self._request_page(channel)
        if self._handshake is not None:
            self._handshake.joined(channel)
        self._check_ready()

    def _replay(self, channel: str, envelopes: list[Envelope]) -> None:
        """Deliver what a resume or a history page brought, minus what was delivered before."""
        for env in envelopes:
            if env.seq is not None and env.from_ == self.id:
                self.outbox.acknowledged(env)  # our own message, stored: no resend
            if self.resume.replayed(channel, env) is Verdict.DELIVER:
                self.roster.heard(env)
                self._deliver(env)

    def _request_page(self, channel: str) -> None:
        """Ask for the next page of a resume that was cut at ``limits.resume_max`` (live
        messages of the channel are held until the gap is filled)."""
        request_id = self.new_id()
        payload = self.resume.page(channel, request_id)
        request = Envelope(kind="history/request", id=request_id, payload=payload)
        self._spawn(self._send_internal(request))

    def _on_history(self, env: Envelope) -> bool:
        """Consume a ``history/response`` that pages a resume; False if it is not ours."""
        channel = env.payload.get("channel")
        if not isinstance(channel, str) or not self.resume.is_paging(channel):
            return False
        messages, more = self.resume.paged(channel, env.payload)
        self._replay(channel, messages)
        if more:
            self._request_page(channel)
        else:
            self._replay(channel, self.resume.filled(channel))
        return True

    def _on_left(self, env: Envelope) -> None:
        channel = env.payload.get("channel")
        if isinstance(channel, str):
            if channel in self.channels:
                self.channels.remove(channel)
            self.resume.left(channel)

    def _on_error(self, env: Envelope) -> None:
        payload = env.payload
        code = str(payload.get("error", ""))
        hs = self._handshake
        if hs is not None and self._conn_state.state is State.JOINED:
            if hs.refuses(code, str(payload.get("message", code))):
                return
            refused = hs.channel_refused(code, bool(env.correlation_ids()))
            if refused is not None:
                if refused in self.channels:
                    self.channels.remove(refused)
                self._check_ready()
        for channel in self.resume.page_refused(env.correlation_ids()):
            log.warning("client %s: could not page the history of %s", self.id, channel)
            self._replay(channel, self.resume.filled(channel))
        error = gateway_error(env)
        if code not in _PARTIAL_REFUSALS:  # the rest of that message still went through
            for cid in env.correlation_ids():
                self.outbox.refused(cid, error)
        self._emit("error", error)


__all__ = [
    "Client",
    "Disconnected",
    "Failover",
    "Handler",
    "Reconnecting",
    "Subscription",
    "gateway_error",
    "to_envelope",
]
