"""Layer 2 of the SDK: :class:`Participant`, a protocol-aware participant built on a Client.

It offers MCP tools and resources (answering ``tools/list``, ``tools/call``,
``resources/list``, ``resources/read``), calls other participants' tools (directly when its
capabilities allow ``mcp/request``, otherwise as an ``mcp/proposal`` that a human or trusted
service fulfils), and lets a fulfiller approve or reject the proposals it sees.

```python
async with Participant(gateway="ws://127.0.0.1:8080/ws", participant_id="calc") as calc:

    @calc.tool
    def add(a: int, b: int) -> int:
        "Add two integers."
        return a + b

    await calc.serve_forever()
```

Its parts: :class:`~hubbub.sdk.tool_server.ToolServer` (the tools and resources offered, the
requests being answered), :class:`~hubbub.sdk.correlation.OpenRequests` (which response
answers which request of ours: the rules are there), :class:`~hubbub.sdk.ProposalInbox`
(others' proposals) and the :class:`~hubbub.sdk.Client` it speaks through.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, TypeVar, overload

import mcp.types as mt

from hubbub.errors import (
    CapabilityDenied,
    HubbubError,
    NotConnected,
    ProposalRejected,
    ProposalWithdrawn,
    RequestFailed,
    RequestTimeout,
)
from hubbub.protocol.capabilities import CapabilityError, CapabilitySet
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.ids import SERVER_ID
from hubbub.protocol.markers import SleepMode, callback_marker, max_duration_of, sleep_marker
from hubbub.sdk import mcp_calls
from hubbub.sdk.client import Client, gateway_error, to_envelope
from hubbub.sdk.correlation import Kind, OpenRequests, Pending
from hubbub.sdk.hooks import Unsubscribe, register
from hubbub.sdk.options import ParticipantOptions
from hubbub.sdk.proposals import Proposal, ProposalInbox
from hubbub.sdk.provider import JSONRPC
from hubbub.sdk.server_notes import CallbackFired, Wake, server_note
from hubbub.sdk.states import State
from hubbub.sdk.tool_server import CANCELLED, ToolServer
from hubbub.sdk.tools import (
    Resource,
    Tool,
)

log = logging.getLogger("hubbub.sdk.participant")

F = TypeVar("F", bound=Callable[..., Any])
Hook = Callable[[], Awaitable[None] | None]


class Participant:
    """A participant with MCP tools, resources, capability-aware requests and proposals.

    Composition: ``participant.client`` is the :class:`~hubbub.sdk.Client` it speaks through.
    Construct with keyword options (see :class:`~hubbub.sdk.ParticipantOptions`).
    """

    def __init__(self, options: ParticipantOptions | None = None, /, **fields: Any) -> None:
        if options is None:
            options = ParticipantOptions(**fields)
        elif fields:
            options = dataclasses.replace(options, **fields)
        self.options = options
        self.client = Client(options.client_options())
        self.proposals = ProposalInbox()
        """Proposals by others that this participant saw and that are still pending."""
        self.capabilities = CapabilitySet(options.capabilities or [])
        """What this participant may send (from the welcome, updated by grants/revokes)."""
        self.server = ToolServer()
        """The tools and resources offered, and the requests being answered."""
        self.requests = OpenRequests()
        """Requests, proposals and fulfilments of ours waiting for their answer."""
        self._answers: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ready_hooks: list[Hook] = []
        self._shutdown_hooks: list[Hook] = []
        self._ready_ran = False
        self._callback_hooks: list[Callable[[Any], Any]] = []
        self._wake_hooks: list[Callable[[Any], Any]] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self.client.on("message", self._on_envelope)

    # ------------------------------------------------------------------ identity, lifecycle

    @property
    def id(self) -> str:
        """This participant's id."""
        return self.client.id

    async def connect(self) -> None:
        """Connect and join, then run the ``on_ready`` hooks (once, on the first connect)."""
        await self.client.connect()
        if not self._ready_ran:
            self._ready_ran = True
            for hook in self._ready_hooks:
                await _call_hook(hook)

    async def disconnect(self) -> None:
        """Run the ``on_shutdown`` hooks, fail what is still pending, and disconnect."""
        if self.client.is_ready:
            for hook in self._shutdown_hooks:
                try:
                    await _call_hook(hook)
                except Exception:
                    log.exception("on_shutdown hook of %s failed", self.id)
        for future in list(self._answers.values()):
            if not future.done():
                future.set_exception(NotConnected(f"{self.id} disconnected"))
        for task in list(self._tasks):
            task.cancel()
        await self.client.disconnect()

    async def serve_forever(self) -> None:
        """Serve until :meth:`disconnect` is called (tools are served in the background);
        raise :class:`~hubbub.errors.ConnectionFailed` if the connection is lost for good."""
        if not self._ready_ran:
            raise NotConnected("call connect() (or use `async with`) before serve_forever()")
        await self.client.serve_forever()

    @property
    def state(self) -> State:
        """The connection state (see :mod:`hubbub.sdk.states`)."""
        return self.client.state

    @property
    def is_ready(self) -> bool:
        """Whether the participant is connected and joined, and may send."""
        return self.client.is_ready

    async def __aenter__(self) -> Participant:
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

    def on_ready(self, hook: F) -> Unsubscribe[F]:
        """Run ``hook`` once the first connection is ready (decorator); returns an
        :class:`~hubbub.sdk.hooks.Unsubscribe` that removes it."""
        return register(self._ready_hooks, hook)

    def on_shutdown(self, hook: F) -> Unsubscribe[F]:
        """Run ``hook`` at :meth:`disconnect`, while still connected (decorator); returns an
        :class:`~hubbub.sdk.hooks.Unsubscribe` that removes it."""
        return register(self._shutdown_hooks, hook)

    @overload
    def on(self, event: str, handler: None = None) -> Callable[[F], F]: ...

    @overload
    def on(self, event: str, handler: F) -> F: ...

    def on(self, event: str, handler: F | None = None) -> F | Callable[[F], F]:
        """Register a client event handler (see :meth:`Client.on`); usable as a decorator."""
        return self.client.on(event, handler)

    def on_mcp_request(self, handler: F) -> Unsubscribe[F]:
        """Observe every ``mcp/request`` this participant sees (decorator); returns an
        :class:`~hubbub.sdk.hooks.Unsubscribe` that removes it."""
        return self._on_kind("mcp/request", handler)

    def on_mcp_proposal(self, handler: F) -> Unsubscribe[F]:
        """Observe every ``mcp/proposal`` this participant sees (decorator); returns an
        :class:`~hubbub.sdk.hooks.Unsubscribe` that removes it."""
        return self._on_kind("mcp/proposal", handler)

    def _on_kind(self, kind: str, handler: F) -> Unsubscribe[F]:
        self.client.on(kind, handler)
        return Unsubscribe(handler, lambda: self.client.off(kind, handler))

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ------------------------------------------------------------------ tools and resources

    @overload
    def tool(self, fn: F, /) -> F: ...

    @overload
    def tool(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        title: str | None = None,
        annotations: mt.ToolAnnotations | None = None,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        fn: F | None = None,
        /,
        *,
        name: str | None = None,
        description: str | None = None,
        title: str | None = None,
        annotations: mt.ToolAnnotations | None = None,
    ) -> F | Callable[[F], F]:
        """Offer a typed function as an MCP tool: ``@p.tool`` or ``@p.tool(name=...)``."""

        def register(func: F) -> F:
            self.register_tool(
                Tool.from_function(
                    func, name=name, description=description, title=title, annotations=annotations
                )
            )
            return func

        return register(fn) if fn is not None else register

    def register_tool(self, tool: Tool) -> None:
        """Offer ``tool`` (replacing a tool of the same name)."""
        self.server.register_tool(tool)

    def remove_tool(self, name: str) -> None:
        """Stop offering a tool."""
        self.server.remove_tool(name)

    @property
    def tools(self) -> dict[str, Tool]:
        """The tools this participant offers, by name."""
        return dict(self.server.tools)

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
    ) -> Callable[[F], F]:
        """Offer a function's return value as the resource ``uri`` (decorator)."""

        def register(func: F) -> F:
            self.register_resource(
                Resource(
                    uri=uri,
                    read=func,
                    name=name or getattr(func, "__name__", None),
                    description=description or inspect.getdoc(func),
                    mime_type=mime_type,
                )
            )
            return func

        return register

    def register_resource(self, resource: Resource) -> None:
        """Offer ``resource`` (replacing one with the same uri)."""
        self.server.register_resource(resource)

    @property
    def resources(self) -> dict[str, Resource]:
        """The resources this participant offers, by uri."""
        return dict(self.server.resources)

    # ------------------------------------------------------------------ capabilities

    def can_send(self, envelope: Mapping[str, Any] | Envelope) -> bool:
        """Whether this participant's capabilities allow ``envelope`` (``kind``, ``payload``).

        Uses the gateway's own matcher (:mod:`hubbub.protocol.capabilities`).
        """
        if isinstance(envelope, Envelope):
            return self.capabilities.allows(envelope.kind, envelope.payload)
        kind = envelope.get("kind")
        if not isinstance(kind, str):
            return False
        return self.capabilities.allows(kind, envelope.get("payload"))

    def capabilities_of(self, participant_id: str) -> list[dict[str, Any]] | None:
        """What ``participant_id`` may send, as the gateway last announced it (welcome, then
        presence on join and after each grant or revoke); None if it is not online."""
        if participant_id == self.id:
            return self.capabilities.capabilities
        entry = self.client.participants.get(participant_id)
        caps = entry.get("capabilities") if entry is not None else None
        return [dict(c) for c in caps if isinstance(c, dict)] if isinstance(caps, list) else None

    def _require(self, env: Envelope, what: str) -> None:
        if not self.can_send(env):
            raise CapabilityDenied(
                f"{self.id} may not send {env.kind} ({what}); its capabilities are "
                f"{self.capabilities.capabilities}: ask an admin for a capability/grant",
                env.kind,
            )

    # ------------------------------------------------------------------ messaging

    async def chat(
        self, text: str, to: str | list[str] | None = None, channel: str | None = None
    ) -> Envelope:
        """Send a chat message: to a channel (default ``#general``), addressed to ``to``
        inside it, or as a DM when ``to`` is given without ``channel``."""
        recipients = [to] if isinstance(to, str) else to
        env = Envelope(kind="chat", to=recipients, channel=channel, payload={"text": text})
        self._require(env, "chat")
        return await self.client.send(env)

    async def join(self, channel: str) -> Envelope:
        """Join a channel; return its ``channel/joined`` envelope."""
        self._require(Envelope(kind="channel/join", payload={"channel": channel}), channel)
        return await self.client.join(channel)

    async def leave(self, channel: str) -> Envelope:
        """Leave a channel; return the ``channel/left`` envelope."""
        self._require(Envelope(kind="channel/leave", payload={"channel": channel}), channel)
        return await self.client.leave(channel)

    async def history(
        self,
        channel: str,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int = 50,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> list[Envelope]:
        """Stored messages of ``channel`` (``history/request``), oldest first."""
        payload: dict[str, Any] = {"channel": channel, "limit": limit}
        if after_seq is not None:
            payload["after_seq"] = after_seq
        if before_seq is not None:
            payload["before_seq"] = before_seq
        request = Envelope(kind="history/request", id=self.client.new_id(), payload=payload)
        self._require(request, channel)
        # the gateway quotes its own id for the request, which the client never sees: the
        # next history of this channel is the answer
        answer = self.client.expect(
            "history/response",
            lambda e: request.id in e.correlation_ids() or e.payload.get("channel") == channel,
        )
        limit_s = timeout if timeout is not None else self.options.request_timeout
        page = await self.client.request(request, answer, f"the history of {channel}", limit_s)
        out: list[Envelope] = []
        for item in page.payload.get("messages", []):
            if isinstance(item, dict):
                with contextlib.suppress(ValueError):
                    out.append(to_envelope(item))
        return out

    # ------------------------------------------------------------------ server markers

    @property
    def max_duration_s(self) -> float:
        """The longest callback delay and sleep the gateway allows (its welcome's
        ``max_duration_s``; 3600 s, documents 001 and 004, when it does not say)."""
        welcome = self.client.welcome
        return max_duration_of(welcome.payload if welcome is not None else None)

    def _marker_channel(self, channel: str | None) -> dict[str, Any]:
        """Where a marker-only chat goes: ``channel``, the first joined one, or a DM to self."""
        target = channel or (self.client.channels[0] if self.client.channels else None)
        return {"channel": target} if target else {"to": [self.id]}

    async def schedule_callback(
        self, delay: float, payload: str = "", channel: str | None = None
    ) -> Envelope:
        """Ask the gateway to send ``payload`` back after ``delay`` seconds (``@@cb:Ns@@``).

        Without ``channel`` it comes back as a DM from ``@server``; with one, it is posted
        to that channel (``@@cb:Ns#channel@@``). The delivery raises the :meth:`on_callback`
        hooks. Sends a marker-only chat (nobody sees it); a refusal (too many pending, payload
        too big) comes back as a ``system/error`` ``callback_rejected``. A delay past the
        gateway's longest (:attr:`max_duration_s`) is clamped to it; NaN or a negative delay
        raises ValueError. Returns the chat sent.
        """
        env = Envelope(
            kind="chat",
            payload={"text": callback_marker(delay, payload, channel, self.max_duration_s)},
            **self._marker_channel(channel),
        )
        self._require(env, "chat")
        return await self.client.send(env)

    async def sleep(
        self, seconds: float, mode: SleepMode = "default", channel: str | None = None
    ) -> Envelope:
        """Sleep for ``seconds`` (``@@sleep:Ns[:mode]@@``): ``default`` drops channel messages
        and buffers DMs and mentions, ``buffer`` buffers all, ``drop`` drops all. Sending any
        message wakes early; the wake-up raises the :meth:`on_wake` hooks. A sleep past the
        gateway's longest (:attr:`max_duration_s`) is clamped to it; NaN or a negative
        duration raises ValueError."""
        env = Envelope(
            kind="chat",
            payload={"text": sleep_marker(seconds, mode, self.max_duration_s)},
            **self._marker_channel(channel),
        )
        self._require(env, "chat")
        return await self.client.send(env)

    def on_callback(self, hook: F) -> Unsubscribe[F]:
        """Call ``hook(CallbackFired)`` for every callback of ours that fires (decorator);
        returns an :class:`~hubbub.sdk.hooks.Unsubscribe` that removes it."""
        return register(self._callback_hooks, hook)

    def on_wake(self, hook: F) -> Unsubscribe[F]:
        """Call ``hook(Wake)`` when we wake up from ``@@sleep`` (decorator); returns an
        :class:`~hubbub.sdk.hooks.Unsubscribe` that removes it."""
        return register(self._wake_hooks, hook)

    def _on_server_note(self, env: Envelope) -> None:
        note = server_note(env)
        if note is None or (isinstance(note, CallbackFired) and note.origin not in ("", self.id)):
            return  # not ours: a channel callback of another member
        hooks = self._wake_hooks if isinstance(note, Wake) else self._callback_hooks
        for hook in list(hooks):
            try:
                result = hook(note)
            except Exception:
                log.exception("%s: a server-note hook failed", self.id)
                continue
            if inspect.isawaitable(result):
                self._spawn(_quietly(result, self.id))

    # ------------------------------------------------------------------ requests

    async def mcp_request(
        self,
        target: str | list[str],
        payload: Mapping[str, Any],
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> dict[str, Any]:
        """Send an MCP request and return its JSON-RPC ``result``.

        Sent directly (``mcp/request`` DM) when the capabilities allow it, otherwise as an
        ``mcp/proposal`` in the participant's channel for a human or trusted service to fulfil;
        otherwise :class:`~hubbub.errors.CapabilityDenied`. Raises
        :class:`~hubbub.errors.RequestFailed` on a JSON-RPC error,
        :class:`~hubbub.errors.ProposalRejected` when a proposal is rejected, and
        :class:`~hubbub.errors.RequestTimeout` after ``timeout`` (default
        ``request_timeout``); a timed-out (or cancelled) proposal is withdrawn.
        """
        targets = [target] if isinstance(target, str) else list(target)
        if not targets:
            raise ValueError("mcp_request needs a target participant")
        method = payload.get("method")
        if not isinstance(method, str) or not method:
            raise ValueError("an MCP request payload needs 'method' (e.g. 'tools/call')")
        token = self.client.new_id()
        body: dict[str, Any] = {"jsonrpc": JSONRPC, "id": token, "method": method}
        for key, value in payload.items():
            if key not in ("jsonrpc", "id", "method"):
                body[key] = value
        if self.capabilities.allows("mcp/request", body):
            env = Envelope(kind="mcp/request", id=token, to=targets, payload=body)
            kind: Kind = "request"
        elif self.capabilities.allows("mcp/proposal", body):
            channel = self.client.channels[0] if self.client.channels else None
            env = Envelope(kind="mcp/proposal", id=token, to=targets, channel=channel, payload=body)
            kind = "proposal"
        else:
            raise CapabilityDenied(
                f"{self.id} may send neither mcp/request nor mcp/proposal for {method!r}; "
                f"its capabilities are {self.capabilities.capabilities}: ask an admin for a "
                "capability/grant of mcp/request (or mcp/proposal)",
                "mcp/request",
            )
        pending = self._track(Pending(token, kind, targets, method, env.channel, payload=body))
        try:
            return await self._send_and_wait(pending, env, timeout)
        except RequestTimeout:
            if kind == "proposal":
                await self._withdraw(pending, "timeout")
            raise
        except asyncio.CancelledError:
            # nobody waits for it any more: withdraw a proposal, stop a running request
            stop = self._withdraw if kind == "proposal" else self._cancel_request
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(stop(pending, "cancelled")), 1)
            raise

    def _track(self, pending: Pending) -> Pending:
        self._answers[pending.token] = asyncio.get_running_loop().create_future()
        return self.requests.open(pending)

    def _untrack(self, pending: Pending) -> None:
        self.requests.close(pending.token)
        self._answers.pop(pending.token, None)

    def _answered(self, pending: Pending, result: dict[str, Any] | BaseException) -> None:
        """Complete the call waiting for ``pending`` (if it still waits)."""
        future = self._answers.get(pending.token)
        if future is None or future.done():
            return
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)

    async def _send_and_wait(
        self,
        pending: Pending,
        env: Envelope,
        timeout_s: float | None,
    ) -> dict[str, Any]:
        limit = self.options.request_timeout if timeout_s is None else timeout_s
        try:
            await self.client.send(env)
            async with asyncio.timeout(limit):
                return await self._answers[pending.token]
        except TimeoutError:
            what = "fulfilment of the proposal" if pending.kind == "proposal" else "response"
            raise RequestTimeout(
                f"no {what} for {pending.method} from {', '.join(pending.targets)} within "
                f"{limit:g}s (pass a longer timeout, or check that the target is online)"
            ) from None
        finally:
            self._untrack(pending)

    async def _withdraw(self, pending: Pending, reason: str) -> None:
        """Withdraw our own timed-out proposal (MEW: the proposer SHOULD do so)."""
        env = Envelope(
            kind="mcp/withdraw",
            channel=pending.channel,
            to=None if pending.channel else pending.targets,
            correlation_id=[pending.token],
            payload={"reason": reason},
        )
        if not self.can_send(env):
            log.warning("%s may not send mcp/withdraw; proposal %s stays open", self.id, env)
            return
        with contextlib.suppress(NotConnected):
            await self.client.send(env)

    @property
    def my_proposals(self) -> list[str]:
        """Ids of this participant's own proposals still waiting for a fulfilment."""
        return self.requests.proposals()

    async def withdraw(self, proposal_id: str, reason: str = "no_longer_needed") -> None:
        """Withdraw one of our own pending proposals (``mcp/withdraw``, MEW: the proposer
        cancels its own proposal when it is no longer needed).

        ``proposal_id`` is its id (from :attr:`my_proposals`; the id it was sent with is the
        id everyone sees). The ``mcp_request`` waiting for it raises
        :class:`~hubbub.errors.ProposalWithdrawn` at once. Raises ``ValueError`` when it is not
        a pending proposal of ours, and :class:`~hubbub.errors.CapabilityDenied` when our
        capabilities do not allow ``mcp/withdraw``."""
        pending = self.requests.get(proposal_id)
        if pending is None or pending.kind != "proposal":
            mine = ", ".join(self.my_proposals) or "none"
            raise ValueError(
                f"{proposal_id!r} is not a pending proposal of {self.id} (pending: {mine}); "
                "a participant may only withdraw its own proposals, before they are fulfilled, "
                "rejected or timed out"
            )
        probe = Envelope(kind="mcp/withdraw", correlation_id=[proposal_id], payload={})
        self._require(probe, f"withdrawing proposal {proposal_id}")
        self.requests.close(proposal_id)
        self._answered(pending, ProposalWithdrawn(proposal_id, reason))
        await self._withdraw(pending, reason)

    async def call_tool(
        self,
        target: str,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
        raise_on_error: bool = True,
    ) -> mt.CallToolResult:
        """Call ``target``'s tool ``name``; raise ToolError / InvalidArguments when the result
        is an MCP error (unless ``raise_on_error=False``)."""
        return await mcp_calls.call_tool(
            self.mcp_request, target, name, arguments, timeout, raise_on_error
        )

    async def list_tools(self, target: str, *, timeout: float | None = None) -> list[mt.Tool]:  # noqa: ASYNC109
        """The tools ``target`` offers (all pages)."""
        return await mcp_calls.list_tools(self.mcp_request, target, timeout)

    async def list_resources(
        self,
        target: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> list[mt.Resource]:
        """The resources ``target`` offers (all pages)."""
        return await mcp_calls.list_resources(self.mcp_request, target, timeout)

    async def read_resource(
        self,
        target: str,
        uri: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> mt.ReadResourceResult:
        """Read resource ``uri`` of ``target``."""
        return await mcp_calls.read_resource(self.mcp_request, target, uri, timeout)

    # ------------------------------------------------------------------ fulfiller side

    def _proposal(self, proposal: Proposal | str) -> Proposal:
        if isinstance(proposal, Proposal):
            return proposal
        found = self.proposals.get(proposal)
        if found is None:
            raise ValueError(f"no pending proposal {proposal!r} (see participant.proposals)")
        return found

    async def approve(
        self,
        proposal: Proposal | str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> dict[str, Any]:
        """Fulfil a proposal: send its request to its targets; return the JSON-RPC result.

        The request is an ``mcp/request`` DM with ``correlation_id: [proposal id]`` and the
        proposal's payload unchanged; the gateway also shows the response to the proposer.
        """
        p = self._proposal(proposal)
        if p.status != "pending":
            raise ValueError(f"proposal {p.id} is {p.status}; only a pending one can be approved")
        if not p.to:
            raise ValueError(f"proposal {p.id} names no target ('to'), so it cannot be fulfilled")
        token = self.client.new_id()
        env = Envelope(
            kind="mcp/request",
            id=token,
            to=p.to,
            correlation_id=[p.id],
            payload=dict(p.payload),
        )
        self._require(env, f"fulfilling {p.method}")
        if self.requests.fulfilling(p.id):
            raise ValueError(f"proposal {p.id} is already being fulfilled by {self.id}")
        pending = self._track(Pending(token, "fulfilment", p.to, p.method, proposal=p.id))
        self.proposals.settle(p.id, "approved")
        return await self._send_and_wait(pending, env, timeout)

    async def reject(self, proposal: Proposal | str, reason: str = "rejected") -> None:
        """Decline a proposal: ``mcp/reject`` to its proposer (visible in its channel)."""
        p = self._proposal(proposal)
        env = Envelope(
            kind="mcp/reject",
            to=[p.proposer],
            channel=p.channel,
            correlation_id=[p.id],
            payload={"reason": reason},
        )
        self._require(env, "rejecting a proposal")
        self.proposals.settle(p.id, "rejected")
        await self.client.send(env)

    # ------------------------------------------------------------------ receiving

    def _on_envelope(self, env: Envelope) -> None:
        kind = env.kind
        if env.from_ == self.id and (
            kind not in ("mcp/request", "mcp/response") or self.id not in (env.to or ())
        ):
            return  # our own envelope coming back; only a request to ourselves matters
        if kind == "mcp/request":
            self._on_request(env)
        elif kind == "mcp/response":
            self._on_response(env)
        elif kind == "mcp/proposal":
            self.proposals.add(env)
        elif kind == "mcp/reject":
            self._on_reject(env)
        elif kind == "mcp/withdraw":
            self._on_withdraw(env)
        elif kind == "system/error":
            self._on_error(env)
        elif kind == "system/welcome":
            you = env.payload.get("you")
            caps = you.get("capabilities") if isinstance(you, dict) else None
            if isinstance(caps, list):
                self._set_capabilities(caps)
        elif kind in ("capability/grant", "capability/revoke"):
            self._on_capability(env)
        elif kind == "chat" and env.from_ == SERVER_ID:
            self._on_server_note(env)

    def _on_request(self, env: Envelope) -> None:
        for cid in env.correlation_ids():
            self.proposals.settle(cid, "fulfilled")
        self.requests.request_seen(env)  # someone fulfilling our proposal: its answer is ours
        if self.id not in (env.to or ()):
            return
        if env.payload.get("method") == CANCELLED:
            self.server.cancel(env, self.id)
            return
        self.server.answering(env, self._spawn(self._serve(env)))

    async def _cancel_request(self, pending: Pending, reason: str) -> None:
        """Tell the targets of our abandoned request to stop (MCP ``notifications/cancelled``)."""
        body = {
            "jsonrpc": JSONRPC,
            "method": CANCELLED,
            "params": {"requestId": pending.token, "reason": reason},
        }
        env = Envelope(kind="mcp/request", to=pending.targets, payload=body)
        if not self.can_send(env):
            log.debug("%s may not send %s; %s runs on", self.id, CANCELLED, pending.token)
            return
        with contextlib.suppress(HubbubError):
            await self.client.send(env)

    def _on_response(self, env: Envelope) -> None:
        pending = self.requests.response(env, self.id)
        if pending is None:
            return
        payload = env.payload
        error = payload.get("error")
        if isinstance(error, dict):
            code = int(error.get("code", mt.INTERNAL_ERROR))
            failed = RequestFailed(
                code, str(error.get("message", "")), error.get("data"), env.from_
            )
            self._answered(pending, failed)
            return
        result = payload.get("result")
        self._answered(pending, result if isinstance(result, dict) else {})

    def _on_reject(self, env: Envelope) -> None:
        reason = str(env.payload.get("reason", "no reason given"))
        for cid in env.correlation_ids():
            seen = self.proposals.get(cid)
            if seen is not None and (
                env.from_ in seen.to or self._may_fulfil(env.from_, seen.payload)
            ):
                self.proposals.settle(cid, "rejected")

        def may(pid: str, pending: Pending) -> bool:
            return self._may_fulfil(pid, pending.payload)

        for pending in self.requests.rejected(env, may):
            self._answered(pending, ProposalRejected(env.from_, reason, pending.token))

    def _may_fulfil(self, pid: str, payload: dict[str, Any] | None) -> bool:
        """Whether ``pid``'s capabilities (as the gateway announced them) let it send the
        request a proposal with ``payload`` asks for: who may fulfil a proposal may reject it."""
        entry = self.client.participants.get(pid)
        caps = entry.get("capabilities") if isinstance(entry, dict) else None
        if not isinstance(caps, list) or payload is None:
            return False
        try:
            return CapabilitySet(caps).allows("mcp/request", payload)
        except CapabilityError:
            return False

    def _on_withdraw(self, env: Envelope) -> None:
        for cid in env.correlation_ids():
            proposal = self.proposals.get(cid)
            if proposal is None:
                continue
            if env.from_ != proposal.proposer:
                log.warning(
                    "%s ignored a withdrawal of proposal %s by %s: only its proposer (%s) may",
                    self.id,
                    cid,
                    env.from_,
                    proposal.proposer,
                )
                continue
            self.proposals.settle(cid, "withdrawn")

    def _on_error(self, env: Envelope) -> None:
        for pending in self.requests.refused(env):
            self._answered(pending, gateway_error(env))

    def _set_capabilities(self, caps: list[Any]) -> None:
        try:
            self.capabilities = CapabilitySet(caps)
        except CapabilityError as exc:
            log.warning("%s: the gateway sent capabilities it cannot compile: %s", self.id, exc)

    def _on_capability(self, env: Envelope) -> None:
        payload = env.payload
        recipient = payload.get("recipient") or (env.to[0] if env.to else None)
        caps = payload.get("capabilities")
        if recipient != self.id or not isinstance(caps, list):
            return
        try:
            if env.kind == "capability/grant":
                self.capabilities = self.capabilities.granted(caps)
            else:
                self.capabilities = self.capabilities.revoked(caps)
        except CapabilityError as exc:
            log.warning("%s: ignored an unusable %s: %s", self.id, env.kind, exc)
            return
        if env.kind == "capability/grant":
            ack = Envelope(
                kind="capability/grant-ack",
                to=[env.from_],
                correlation_id=[env.id],
                payload={"status": "accepted"},
            )
            if self.can_send(ack):
                self._spawn(self._send_quietly(ack))

    async def _send_quietly(self, env: Envelope) -> None:
        try:
            await self.client.send(env)
        except NotConnected:
            log.info("%s: could not send %s: not connected", self.id, env.kind)

    # ------------------------------------------------------------------ serving

    async def _serve(self, env: Envelope) -> None:
        """Answer one request addressed to us; never raises."""
        body = await self.server.respond(env, self.id)
        if body is None:
            return  # a notification: no response
        reply = Envelope(
            kind="mcp/response",
            to=[env.from_],
            channel=env.channel,
            correlation_id=[env.id],
            payload=body,
        )
        if not self.can_send(reply):
            log.warning("%s may not send mcp/response; %s goes unanswered", self.id, env.id)
            return
        try:
            await self.client.send(reply)
        except NotConnected:
            log.warning("%s: lost the connection before answering %s", self.id, env.id)


async def _call_hook(hook: Hook) -> None:
    result = hook()
    if inspect.isawaitable(result):
        await result


async def _quietly(awaitable: Awaitable[Any], who: str) -> None:
    try:
        await awaitable
    except Exception:
        log.exception("%s: a server-note hook failed", who)


__all__ = ["Participant"]
