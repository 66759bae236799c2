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

Correlation (see docs/sdk.md): every request the participant sends carries a client-chosen
id ``T`` both as the envelope ``id`` (the gateway quotes it in a ``system/error``) and as the
JSON-RPC ``payload.id``. The gateway replaces the envelope id and echoes the envelope back; the
echo tells the participant the gateway's id ``S`` of its request, and a response is matched by
``correlation_id == [S]`` (or, failing that, by ``payload.id == T`` from the target).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Literal, TypeVar, overload

import mcp.types as mt
from mcp import MCPError

from hubbub.errors import (
    CapabilityDenied,
    HubbubError,
    InvalidArguments,
    NotConnected,
    ProposalRejected,
    ProposalWithdrawn,
    RequestFailed,
    RequestTimeout,
    ToolError,
)
from hubbub.protocol.capabilities import CapabilityError, CapabilitySet
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.ids import SERVER_ID
from hubbub.protocol.markers import SleepMode, callback_marker, sleep_marker
from hubbub.sdk.client import Client, gateway_error, to_envelope
from hubbub.sdk.hooks import Unsubscribe, register
from hubbub.sdk.options import ParticipantOptions
from hubbub.sdk.proposals import Proposal, ProposalInbox
from hubbub.sdk.provider import JSONRPC, answer, error_body, is_notification
from hubbub.sdk.server_notes import CallbackFired, Wake, server_note
from hubbub.sdk.tools import (
    ERROR_META_KEY,
    INVALID_ARGUMENTS,
    Resource,
    Tool,
    result_text,
)

log = logging.getLogger("hubbub.sdk.participant")

F = TypeVar("F", bound=Callable[..., Any])
Hook = Callable[[], Awaitable[None] | None]

CANCELLED: Final = "notifications/cancelled"
_LIST_PAGES_MAX: Final = 100


@dataclass(eq=False)
class _Pending:
    """A request, proposal or fulfilment waiting for its response."""

    token: str
    kind: Literal["request", "proposal", "fulfilment"]
    targets: list[str]
    method: str
    future: asyncio.Future[dict[str, Any]]
    echo_key: tuple[str, str, tuple[str, ...]]
    channel: str | None = None
    server_id: str | None = None


def _echo_key(env: Envelope) -> tuple[str, str, tuple[str, ...]]:
    """What identifies our own envelope in the gateway's echo (which has a new id)."""
    return (env.kind, str(env.payload.get("id")), tuple(env.correlation_ids()))


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
        self._tools: dict[str, Tool] = {}
        self._resources: dict[str, Resource] = {}
        self._pending: dict[str, _Pending] = {}
        self._by_echo: dict[tuple[str, str, tuple[str, ...]], _Pending] = {}
        self._by_server_id: dict[str, _Pending] = {}
        self._ready_hooks: list[Hook] = []
        self._shutdown_hooks: list[Hook] = []
        self._ready_ran = False
        self._callback_hooks: list[Callable[[Any], Any]] = []
        self._wake_hooks: list[Callable[[Any], Any]] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._serving: dict[tuple[str, str], asyncio.Task[Any]] = {}
        """Requests being answered, by (sender, JSON-RPC id): ``notifications/cancelled``."""
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
        for pending in list(self._pending.values()):
            if not pending.future.done():
                pending.future.set_exception(NotConnected(f"{self.id} disconnected"))
        for task in list(self._tasks):
            task.cancel()
        await self.client.disconnect()

    async def serve_forever(self) -> None:
        """Serve until :meth:`disconnect` is called (tools are served in the background);
        raise :class:`~hubbub.errors.ConnectionFailed` if the connection is lost for good."""
        if not self._ready_ran:
            raise NotConnected("call connect() (or use `async with`) before serve_forever()")
        await self.client.wait_closed()
        if self.client.failure is not None:
            raise self.client.failure

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
        self._tools[tool.name] = tool

    def remove_tool(self, name: str) -> None:
        """Stop offering a tool."""
        self._tools.pop(name, None)

    @property
    def tools(self) -> dict[str, Tool]:
        """The tools this participant offers, by name."""
        return dict(self._tools)

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
        self._resources[resource.uri] = resource

    @property
    def resources(self) -> dict[str, Resource]:
        """The resources this participant offers, by uri."""
        return dict(self._resources)

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
        refused = self.client.expect("system/error", lambda e: request.id in e.correlation_ids())
        limit_s = timeout if timeout is not None else self.options.request_timeout
        try:
            await self.client.send(request)
            async with asyncio.timeout(limit_s):
                await asyncio.wait({answer, refused}, return_when=asyncio.FIRST_COMPLETED)
        except TimeoutError:
            raise RequestTimeout(f"no history of {channel} within {limit_s}s") from None
        finally:
            for future in (answer, refused):
                if not future.done():
                    future.cancel()
        if not answer.done() or answer.cancelled():
            raise gateway_error(refused.result())
        out: list[Envelope] = []
        for item in answer.result().payload.get("messages", []):
            if isinstance(item, dict):
                with contextlib.suppress(ValueError):
                    out.append(to_envelope(item))
        return out

    # ------------------------------------------------------------------ server markers

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
        too big) comes back as a ``system/error`` ``callback_rejected``. Returns the chat sent.
        """
        env = Envelope(
            kind="chat",
            payload={"text": callback_marker(delay, payload, channel)},
            **self._marker_channel(channel),
        )
        self._require(env, "chat")
        return await self.client.send(env)

    async def sleep(
        self, seconds: float, mode: SleepMode = "default", channel: str | None = None
    ) -> Envelope:
        """Sleep for ``seconds`` (``@@sleep:Ns[:mode]@@``): ``default`` drops channel messages
        and buffers DMs and mentions, ``buffer`` buffers all, ``drop`` drops all. Sending any
        message wakes early; the wake-up raises the :meth:`on_wake` hooks."""
        env = Envelope(
            kind="chat",
            payload={"text": sleep_marker(seconds, mode)},
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
            kind: Literal["request", "proposal"] = "request"
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
        pending = self._track(token, kind, targets, method, env)
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

    def _track(
        self,
        token: str,
        kind: Literal["request", "proposal", "fulfilment"],
        targets: list[str],
        method: str,
        env: Envelope,
    ) -> _Pending:
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        pending = _Pending(token, kind, targets, method, future, _echo_key(env), env.channel)
        self._pending[token] = pending
        self._by_echo[pending.echo_key] = pending
        return pending

    def _untrack(self, pending: _Pending) -> None:
        self._pending.pop(pending.token, None)
        if self._by_echo.get(pending.echo_key) is pending:
            del self._by_echo[pending.echo_key]
        if pending.server_id is not None:
            self._by_server_id.pop(pending.server_id, None)

    async def _send_and_wait(
        self,
        pending: _Pending,
        env: Envelope,
        timeout_s: float | None,
    ) -> dict[str, Any]:
        limit = self.options.request_timeout if timeout_s is None else timeout_s
        try:
            await self.client.send(env)
            async with asyncio.timeout(limit):
                return await pending.future
        except TimeoutError:
            what = "fulfilment of the proposal" if pending.kind == "proposal" else "response"
            raise RequestTimeout(
                f"no {what} for {pending.method} from {', '.join(pending.targets)} within "
                f"{limit:g}s (pass a longer timeout, or check that the target is online)"
            ) from None
        finally:
            self._untrack(pending)  # keeps pending.server_id, which a withdrawal needs

    async def _withdraw(self, pending: _Pending, reason: str) -> None:
        """Withdraw our own timed-out proposal (MEW: the proposer SHOULD do so)."""
        if pending.server_id is None:
            log.warning("%s: cannot withdraw a proposal the gateway never echoed", self.id)
            return
        env = Envelope(
            kind="mcp/withdraw",
            channel=pending.channel,
            to=None if pending.channel else pending.targets,
            correlation_id=[pending.server_id],
            payload={"reason": reason},
        )
        if not self.can_send(env):
            log.warning("%s may not send mcp/withdraw; proposal %s stays open", self.id, env)
            return
        with contextlib.suppress(NotConnected):
            await self.client.send(env)

    @property
    def my_proposals(self) -> list[str]:
        """Ids of this participant's own proposals still waiting for a fulfilment (the id the
        gateway gave each, once its echo arrived; the client id before)."""
        return [
            p.server_id or p.token
            for p in self._pending.values()
            if p.kind == "proposal" and not p.future.done()
        ]

    async def withdraw(self, proposal_id: str, reason: str = "no_longer_needed") -> None:
        """Withdraw one of our own pending proposals (``mcp/withdraw``, MEW: the proposer
        cancels its own proposal when it is no longer needed).

        ``proposal_id`` is the id everyone sees (from :attr:`my_proposals`, or our proposal's
        echo), or the client id it was sent with. The ``mcp_request`` waiting for it raises
        :class:`~hubbub.errors.ProposalWithdrawn` at once. Raises ``ValueError`` when it is not
        a pending proposal of ours, and :class:`~hubbub.errors.CapabilityDenied` when our
        capabilities do not allow ``mcp/withdraw``."""
        pending = self._by_server_id.get(proposal_id) or self._pending.get(proposal_id)
        if pending is None or pending.kind != "proposal" or pending.future.done():
            mine = ", ".join(self.my_proposals) or "none"
            raise ValueError(
                f"{proposal_id!r} is not a pending proposal of {self.id} (pending: {mine}); "
                "a participant may only withdraw its own proposals, before they are fulfilled, "
                "rejected or timed out"
            )
        probe = Envelope(kind="mcp/withdraw", correlation_id=[proposal_id], payload={})
        self._require(probe, f"withdrawing proposal {proposal_id}")
        echo = None
        if pending.server_id is None:  # sent, but its id is not known yet: wait for the echo
            echo = self.client.expect(
                "mcp/proposal", lambda e: e.from_ == self.id and _echo_key(e) == pending.echo_key
            )
        pending.future.set_exception(ProposalWithdrawn(pending.server_id or proposal_id, reason))
        if echo is not None:
            try:
                async with asyncio.timeout(self.client.options.connect_timeout):
                    pending.server_id = (await echo).id
            except TimeoutError:
                log.warning("%s: proposal %s was never echoed; nothing to withdraw", self.id,
                            proposal_id)  # fmt: skip
                return
            finally:
                echo.cancel()
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
        raw = await self.mcp_request(
            target,
            {"method": "tools/call", "params": {"name": name, "arguments": dict(arguments or {})}},
            timeout,
        )
        result = mt.CallToolResult.model_validate(raw)
        if result.is_error and raise_on_error:
            text = result_text(result) or f"tool {name!r} of {target} failed"
            if (result.meta or {}).get(ERROR_META_KEY) == INVALID_ARGUMENTS:
                raise InvalidArguments(text, result)
            raise ToolError(text, result)
        return result

    async def list_tools(self, target: str, *, timeout: float | None = None) -> list[mt.Tool]:  # noqa: ASYNC109
        """The tools ``target`` offers (all pages)."""
        tools: list[mt.Tool] = []
        cursor: str | None = None
        for _ in range(_LIST_PAGES_MAX):
            params = {"cursor": cursor} if cursor else {}
            page = mt.ListToolsResult.model_validate(
                await self.mcp_request(target, {"method": "tools/list", "params": params}, timeout)
            )
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def list_resources(
        self,
        target: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> list[mt.Resource]:
        """The resources ``target`` offers (all pages)."""
        resources: list[mt.Resource] = []
        cursor: str | None = None
        for _ in range(_LIST_PAGES_MAX):
            params = {"cursor": cursor} if cursor else {}
            page = mt.ListResourcesResult.model_validate(
                await self.mcp_request(
                    target, {"method": "resources/list", "params": params}, timeout
                )
            )
            resources.extend(page.resources)
            cursor = page.next_cursor
            if not cursor:
                break
        return resources

    async def read_resource(
        self,
        target: str,
        uri: str,
        *,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> mt.ReadResourceResult:
        """Read resource ``uri`` of ``target``."""
        raw = await self.mcp_request(
            target, {"method": "resources/read", "params": {"uri": uri}}, timeout
        )
        return mt.ReadResourceResult.model_validate(raw)

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
        if _echo_key(env) in self._by_echo:
            raise ValueError(f"proposal {p.id} is already being fulfilled by {self.id}")
        pending = self._track(token, "fulfilment", p.to, p.method, env)
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
        if env.from_ == self.id:
            pending = self._by_echo.get(_echo_key(env))
            if pending is not None and pending.server_id is None:
                pending.server_id = env.id
                self._by_server_id[env.id] = pending
            if kind not in ("mcp/request", "mcp/response") or self.id not in (env.to or ()):
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
            mine = self._by_server_id.get(cid)
            if mine is not None and mine.kind == "proposal":
                # someone fulfils our proposal: the response to that request answers it
                self._by_server_id.setdefault(env.id, mine)
        if self.id not in (env.to or ()):
            return
        payload = env.payload
        if payload.get("method") == CANCELLED:
            self._on_cancelled(env)
            return
        task = self._spawn(self._serve(env))
        if "id" in payload:
            key = (env.from_, str(payload["id"]))
            self._serving[key] = task
            task.add_done_callback(lambda t: self._serving.pop(key, None))

    def _on_cancelled(self, env: Envelope) -> None:
        """``notifications/cancelled`` from a requester: stop answering that request (MCP: no
        response is sent for it)."""
        params = env.payload.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        task = self._serving.get((env.from_, str(request_id)))
        if task is None:
            return  # already answered, or never ours: nothing to do
        reason = params.get("reason") if isinstance(params, dict) else None
        log.info("%s: %s cancelled request %s (%s)", self.id, env.from_, request_id, reason)
        task.cancel()

    async def _cancel_request(self, pending: _Pending, reason: str) -> None:
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
        pending: _Pending | None = None
        for cid in env.correlation_ids():
            pending = self._by_server_id.get(cid)
            if pending is not None:
                if pending.server_id != cid:
                    del self._by_server_id[cid]  # a fulfilment's id, used once
                break
        payload = env.payload
        if pending is None:
            candidate = self._pending.get(str(payload.get("id")))
            if (
                candidate is not None
                and env.from_ in candidate.targets
                and (candidate.kind == "proposal" or self.id in (env.to or ()))
            ):
                pending = candidate
        if pending is None and env.channel is None and self.id not in (env.to or ()):
            # A DM response addressed to someone else reaches us only because we proposed
            # what it answers (the gateway shows a fulfilment's outcome to the proposer). If
            # the fulfiller changed the payload id, attribute it when that is unambiguous.
            waiting = [
                p
                for p in self._pending.values()
                if p.kind == "proposal" and env.from_ in p.targets and not p.future.done()
            ]
            if len(waiting) == 1:
                pending = waiting[0]
        if pending is None or pending.future.done():
            return
        if pending.kind == "proposal":
            self._untrack(pending)
        error = payload.get("error")
        if isinstance(error, dict):
            pending.future.set_exception(
                RequestFailed(
                    int(error.get("code", mt.INTERNAL_ERROR)),
                    str(error.get("message", "")),
                    error.get("data"),
                    env.from_,
                )
            )
            return
        result = payload.get("result")
        pending.future.set_result(result if isinstance(result, dict) else {})

    def _on_reject(self, env: Envelope) -> None:
        reason = str(env.payload.get("reason", "no reason given"))
        for cid in env.correlation_ids():
            self.proposals.settle(cid, "rejected")
            pending = self._by_server_id.get(cid)
            if pending is not None and pending.kind == "proposal" and not pending.future.done():
                self._untrack(pending)
                pending.future.set_exception(ProposalRejected(env.from_, reason, cid))

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
        for cid in env.correlation_ids():
            pending = self._pending.get(cid)
            if pending is not None and not pending.future.done():
                self._untrack(pending)
                pending.future.set_exception(gateway_error(env))

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
        payload = env.payload
        notification = is_notification(payload)
        try:
            result = await answer(
                payload.get("method"), payload.get("params"), self._tools, self._resources, self.id
            )
            body: dict[str, Any] = {"jsonrpc": JSONRPC, "id": payload.get("id"), "result": result}
        except RequestFailed as exc:
            body = error_body(payload.get("id"), exc.code, exc.message, exc.data)
        except MCPError as exc:
            body = error_body(payload.get("id"), exc.code, exc.message, exc.data)
        except Exception as exc:
            log.exception("%s failed to answer %s", self.id, payload.get("method"))
            body = error_body(payload.get("id"), mt.INTERNAL_ERROR, f"internal error: {exc}")
        if notification:
            return  # no response
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
