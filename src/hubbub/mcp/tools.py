"""hubbub's MCP server: the tools, the channel resources and the ``collaborate`` prompt.

Written once, on the official ``mcp`` SDK's :class:`~mcp.server.mcpserver.MCPServer`, for
both transports. A tool reaches its participant through :data:`CURRENT_DESK`, a context
variable that each transport sets where the SDK's handlers inherit it: ``hubbub mcp`` once
for the process (one session), ``/mcp`` around each HTTP request of a session (the SDK runs
a message's handler in the context of the request that carried it). Tool failures are
``isError`` results whose text names the fix; they never become protocol errors.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal
from urllib.parse import unquote

import msgspec
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import (
    CallToolResult,
    EmptyResult,
    SubscribeRequestParams,
    TextContent,
    UnsubscribeRequestParams,
)
from pydantic import BaseModel, Field

from hubbub import __version__
from hubbub.mcp import models as m
from hubbub.mcp.desk import Desk, DeskError
from hubbub.mcp.sdk_private import add_request_handler
from hubbub.mcp.seat import SeatClosed
from hubbub.mcp.settings import ListenSettings
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.ids import is_channel, is_participant_id, normalize_channel
from hubbub.protocol.markers import (
    callback_marker,
    clamp_duration,
    parse_markers,
    sleep_marker,
)

CURRENT_DESK: contextvars.ContextVar[Desk] = contextvars.ContextVar("hubbub_mcp_desk")
"""The desk of the MCP session whose request is being handled."""

RESOURCE_PREFIX = "hubbub://channel/"
JSONRPC = "2.0"
REQUEST_TIMEOUT_S = 30.0

INSTRUCTIONS = """\
You are a participant in a hubbub space: chat channels shared with people and other agents.
Call `listen` in a loop; it returns messages once a burst settles, or `nudge: true` when
nothing happened. Answer what is addressed to you (`addressed_to_you`). Before answering an
unaddressed question, `claim_floor` on it: answer only if `granted`; if you get `yielded_to`,
another agent answers - do not. If someone already answered well, stay silent. Each result's
`advice` says what to do next. Use `schedule_callback` instead of polling, and `sleep` when
you have nothing to do."""

COLLABORATE = """\
How to behave in a shared hubbub channel:

1. Listen. Call `listen` in a loop. Each result lists new messages with who sent them (a
   person, an agent, a service), whether they are addressed to you, and who holds the floor.
   A result with `nudge: true` means nothing happened for a while: check on your own work, or
   `sleep` if you have none.
2. Answer what is addressed to you. A direct message, a message whose `to` lists you, or one
   that mentions you (`@your-id`) is yours to answer: answer it without claiming the floor.
3. Claim before answering anything else. For an unaddressed question you can answer well,
   call `claim_floor(message_id)` first. `granted`: answer with `send(to, text,
   reply_to=message_id)`. `yielded_to: X`: X is answering - do not answer, do not repeat
   their point. A later yield shows up in the next `listen` (`yields`), and `send` with that
   `reply_to` refuses unless you pass `force: true` (use it only for a genuinely different
   contribution).
4. Do not pile on. If someone already answered well, stay silent. Short answers beat long
   ones.
5. Use callbacks instead of polling: `schedule_callback(seconds, payload)` brings `payload`
   back to you as a message after that many seconds. Use `sleep(seconds)` to stop receiving
   channel chatter for a while (direct messages are kept for you).
6. Tools of others: `tools()` lists what other participants offer; `call_tool` runs one, or
   files a proposal a person approves when you may not call it directly - then wait for the
   answer in `listen`."""


def _ok(model: BaseModel, text: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=m.structured(model)
    )


def _fail(text: str) -> CallToolResult:
    """A refusal: its text in the content and, for clients that show the model only the
    structured content, as its ``advice`` too."""
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content={"error": True, "advice": text},
        is_error=True,
    )


def _desk() -> Desk:
    try:
        return CURRENT_DESK.get()
    except LookupError:
        raise SeatClosed(
            "this MCP session has no hubbub participant; reconnect the MCP client"
        ) from None


async def _guarded(run: Callable[[Desk], Awaitable[CallToolResult]]) -> CallToolResult:
    """Run a tool body; what the gateway refuses becomes an ``isError`` result."""
    try:
        return await run(_desk())
    except DeskError as exc:
        return _fail(f"The gateway refused this: {exc}")
    except SeatClosed as exc:
        return _fail(f"Not connected to the hubbub gateway: {exc}. Try again in a moment.")


def _clamped(asked: float, due: float) -> str:
    """The note on a duration cut to the gateway's longest (empty when it was not)."""
    return f" (asked {asked:g}s: the gateway's longest is {due:g}s)" if due < asked else ""


def _channel_arg(name: str) -> str | None:
    """A channel argument with its ``#``, or None when it is not a channel name."""
    name = normalize_channel(name.strip())
    return name if is_channel(name) else None


def _bad_channel(name: str) -> CallToolResult:
    return _fail(
        f"{name!r} is not a channel name: write '#' then 1-31 letters, digits, '_' or '-', "
        "e.g. '#general' (call `channels` to list them)."
    )


CHANNEL = (
    "A channel: '#' then 1-31 letters, digits, '_' or '-', e.g. '#general' (the '#' may be "
    "left out)."
)
Channel = Annotated[str, Field(description=CHANNEL)]
MessageId = Annotated[str, Field(description="The `id` of a message (from `listen` or `history`).")]


ListenTimeout = Annotated[float | None, Field(ge=0)]
"""``listen``'s ``timeout_s`` (its description, which states the settings, is set per server)."""


def _tool(srv: MCPServer, **hints: Any) -> Callable[[Any], Any]:
    """``srv.tool()`` with the docstring dedented as the tool's description; ``hints``
    replace parameters' annotations (ones built at run time, which a string annotation
    cannot name)."""

    def register(fn: Any) -> Any:
        fn.__annotations__.update(hints)
        return srv.tool(description=inspect.cleandoc(fn.__doc__ or ""))(fn)

    return register


def build_server(settings: ListenSettings | None = None) -> MCPServer:
    """The MCP server with hubbub's tools, resources and prompt (one per process);
    ``listen``'s description states ``settings``' defaults (the environment's by default)."""
    ls = settings or ListenSettings.from_env()
    srv: MCPServer = MCPServer(
        "hubbub", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    tool = _tool(srv)
    timeout_help = (
        f"Seconds to wait for traffic before a nudge (default {ls.nudge_s:g}, varied by "
        f"±{ls.jitter:.0%}); at most {ls.longest_wait_s:g}, so that with the "
        f"{ls.settle_s:g} s settle window the call ends within {ls.max_listen_s:g} s."
    )

    @tool
    async def join(channel: Channel) -> Annotated[CallToolResult, m.Joined]:
        """Join a channel: its messages then reach you through `listen`."""
        name = _channel_arg(channel)
        if name is None:
            return _bad_channel(channel)

        async def run(desk: Desk) -> CallToolResult:
            ans = await desk.request(
                Envelope(kind="channel/join", payload={"channel": name}),
                lambda e: e.kind == "channel/joined" and e.payload.get("channel") == name,
            )
            members = [str(x) for x in ans.payload.get("members", [])]
            await desk.checkpoint()  # a later session rejoins it
            return _ok(
                m.Joined(channel=name, members=members),
                f"Joined {name} ({len(members)} members: {', '.join(members)}).",
            )

        return await _guarded(run)

    @tool
    async def leave(channel: Channel) -> Annotated[CallToolResult, m.Left]:
        """Leave a channel."""
        name = _channel_arg(channel)
        if name is None:
            return _bad_channel(channel)

        async def run(desk: Desk) -> CallToolResult:
            await desk.request(Envelope(kind="channel/leave", payload={"channel": name}))
            await desk.checkpoint()  # a later session does not rejoin it
            return _ok(m.Left(channel=name), f"Left {name}.")

        return await _guarded(run)

    @tool
    async def send(
        to: Annotated[
            str,
            Field(
                description="'#channel' (e.g. '#general'), or '@participant' for a private "
                "message (e.g. '@alice')."
            ),
        ],
        text: Annotated[
            str, Field(description="The message (not empty). Markers such as @@cb:30s@@ work.")
        ],
        reply_to: Annotated[
            str | None,
            Field(description="The `id` of the message you answer (default: none)."),
        ] = None,
        force: Annotated[
            bool,
            Field(
                description="Send although you yielded the floor on `reply_to` (default "
                "false); only for a genuinely different contribution."
            ),
        ] = False,
    ) -> Annotated[CallToolResult, m.Sent]:
        """Send a message to a channel or, privately, to a participant. Refused when you
        yielded the floor on the message you reply to, unless `force` is true."""
        target = to.strip()
        if not text.strip():
            return _fail("`text` is empty: write the message to send.")

        async def run(desk: Desk) -> CallToolResult:
            env = Envelope(kind="chat", payload={"text": text})
            if target.startswith("@") and is_participant_id(target[1:]):
                env.to, env.private = [target[1:]], True
            else:
                name = _channel_arg(target)
                if name is None:
                    return _fail(
                        f"`to` is {to!r}: write '#channel' for a channel (e.g. '#general') or "
                        "'@participant' for a private message (e.g. '@alice')."
                    )
                env.channel = name
            if reply_to:
                env.correlation_id = [reply_to]
                yielded = desk.yields.get(reply_to)
                if yielded is not None and not force:
                    return _fail(
                        f"Not sent: {yielded.winner} is answering message {reply_to} (you "
                        "yielded the floor on it). Do not repeat their answer; if you have "
                        "something genuinely different to add, call send again with force: true."
                    )
            if not parse_markers(text).relayed:
                await desk.seat.send(env)
                await desk.sync()
                return _ok(
                    m.Sent(
                        id=env.id,
                        channel=env.channel,
                        to=env.to,
                        advice="Markers only: nothing was posted; what they schedule arrives "
                        "through listen.",
                    ),
                    "Done (markers only).",
                )
            echo = await desk.send_stored(env)
            return _ok(
                m.Sent(id=echo.id, seq=echo.seq, channel=echo.channel, to=echo.to, ts=echo.ts),
                f"Sent to {echo.channel or '@' + ','.join(echo.to or [])} (id {echo.id}, "
                f"seq {echo.seq}).",
            )

        return await _guarded(run)

    @_tool(srv, timeout_s=Annotated[float | None, Field(ge=0, description=timeout_help)])
    async def listen(
        ctx: Context,
        channels: Annotated[
            list[str] | None,
            Field(
                description="Only messages of these channels (default: every channel you "
                "are in); direct messages always come."
            ),
        ] = None,
        timeout_s: ListenTimeout = None,
    ) -> Annotated[CallToolResult, m.Listened]:
        """Wait for messages for you (your channels and your direct messages) and return them
        once a burst has settled. With no traffic, returns `nudge: true` and who is online.
        Also reports floor yields. Follow the result's `advice`; call `listen` again after."""
        wanted: list[str] | None = None
        if channels:
            wanted = []
            for c in channels:
                name = _channel_arg(c)
                if name is None:
                    return _bad_channel(c)
                wanted.append(name)

        async def progress(elapsed: float, message: str) -> None:
            await ctx.report_progress(elapsed, None, message)

        async def run(desk: Desk) -> CallToolResult:
            got = await desk.listen(wanted, timeout_s, progress, str(ctx.request_id))
            repeated = set(got.repeated)
            msgs = [m.message_of(desk, e, e.id in repeated) for e in got.messages]
            yields = [
                m.YieldNote(message_id=y.msg_id, winner=y.winner, channel=y.channel)
                for y in got.yields
            ]
            present = None
            lines = [m.message_line(x) for x in msgs]
            for y in yields:
                lines.append(
                    f"YIELD: {y.winner} is answering message {y.message_id}; do not answer it."
                )
            if got.nudge:
                present = [m.present_of(p) for p in desk.roster() if p.get("id") != desk.me]
                others = ", ".join(f"{p.id} ({p.kind}, {p.presence})" for p in present) or "nobody"
                lines.insert(0, f"No new messages (nudge). Online: {others}.")
            advice = _listen_advice(got.nudge, got.superseded, msgs, yields)
            lines.append(f"Advice: {advice}")
            return _ok(
                m.Listened(
                    messages=msgs, nudge=got.nudge, present=present, yields=yields, advice=advice
                ),
                "\n".join(lines),
            )

        return await _guarded(run)

    @tool
    async def claim_floor(message_id: MessageId) -> Annotated[CallToolResult, m.Claim]:
        """Claim the floor on a channel message before answering it. Returns `granted`
        (answer it), or `yielded_to`: the agent that answers instead (do not answer)."""

        async def run(desk: Desk) -> CallToolResult:
            channel = desk.recent.get(message_id)
            if channel is None:
                return _fail(
                    f"No channel message {message_id!r} is known to this session: claim the "
                    "`id` of a channel message that `listen` or `history` returned (direct "
                    "messages need no claim: just answer them)."
                )
            return await _claim(desk, message_id, channel)

        return await _guarded(run)

    @tool
    async def who(
        channel: Annotated[
            str | None,
            Field(
                description="List this channel's members (default: everyone online in the "
                "space). " + CHANNEL
            ),
        ] = None,
    ) -> Annotated[CallToolResult, m.Who]:
        """Who is online, or the members of a channel, with presence (sleeping participants
        show their wake time)."""

        async def run(desk: Desk) -> CallToolResult:
            if channel is None:
                people = [m.present_of(p) for p in desk.roster()]
                name = None
            else:
                name = _channel_arg(channel)
                if name is None:
                    return _bad_channel(channel)
                ans = await desk.request(
                    Envelope(kind="channel/members", payload={"channel": name})
                )
                people = [m.present_of(p) for p in ans.payload.get("participants", [])]
            text = ", ".join(
                f"{p.id} ({p.kind}, {p.presence}"
                + (f", wakes {p.wake_at}" if p.wake_at else "")
                + ")"
                for p in people
            )
            return _ok(m.Who(channel=name, participants=people), f"{name or 'Online'}: {text}.")

        return await _guarded(run)

    @tool
    async def channels() -> Annotated[CallToolResult, m.Channels]:
        """The channels of the space, their member counts, and whether you are in each."""

        async def run(desk: Desk) -> CallToolResult:
            ans = await desk.request(Envelope(kind="channel/list"))
            infos = [
                m.ChannelInfo(
                    name=str(c.get("name")),
                    members=int(c.get("members", 0)),
                    joined=c.get("name") in desk.channels,
                )
                for c in ans.payload.get("channels", [])
                if isinstance(c, dict)
            ]
            text = ", ".join(
                f"{c.name} ({c.members}{', joined' if c.joined else ''})" for c in infos
            )
            return _ok(m.Channels(channels=infos), f"Channels: {text}.")

        return await _guarded(run)

    @tool
    async def history(
        channel: Channel,
        before_seq: Annotated[
            int | None,
            Field(
                description="Only messages before this `seq` (default: up to the latest); "
                "0 or more."
            ),
        ] = None,
        limit: Annotated[
            int, Field(description="How many messages, the newest last (default 20, 1-200).")
        ] = 20,
    ) -> Annotated[CallToolResult, m.History]:
        """Older messages of a channel you are in, for context (not news to answer)."""
        name = _channel_arg(channel)
        if name is None:
            return _bad_channel(channel)
        if limit < 1 or (before_seq is not None and before_seq < 0):
            return _fail("`limit` must be at least 1 and `before_seq` a non-negative integer.")

        async def run(desk: Desk) -> CallToolResult:
            payload: dict[str, Any] = {"channel": name, "limit": min(limit, 200)}
            if before_seq is not None:
                payload["before_seq"] = before_seq
            ans = await desk.request(Envelope(kind="history/request", payload=payload))
            envs = [e for e in _envelopes(ans.payload.get("messages", [])) if _shown(e)]
            msgs = [m.message_of(desk, e) for e in envs]
            for e in envs:
                desk.remember(e)
            has_more = bool(ans.payload.get("has_more"))
            lines = [m.message_line(x) for x in msgs] or [f"No messages in {name}."]
            return _ok(m.History(channel=name, messages=msgs, has_more=has_more), "\n".join(lines))

        return await _guarded(run)

    @tool
    async def schedule_callback(
        seconds: Annotated[
            float,
            Field(
                description="Delay in seconds, more than 0 (the gateway's longest is "
                "applied: the result says when it cut it)."
            ),
        ],
        payload: Annotated[str, Field(description="The text that comes back to you.")],
        channel: Annotated[
            str | None,
            Field(
                description="Post it to this channel for everyone (default: to you only). "
                + CHANNEL
            ),
        ] = None,
    ) -> Annotated[CallToolResult, m.Scheduled]:
        """After `seconds`, the gateway sends `payload` back to you as a message (through
        `listen`), or to a channel for everyone there. Use it instead of polling."""
        name = None
        if channel is not None:
            name = _channel_arg(channel)
            if name is None:
                return _bad_channel(channel)
        if not seconds > 0:  # NaN too
            return _fail("`seconds` must be a number more than 0 (e.g. 30).")

        async def run(desk: Desk) -> CallToolResult:
            where = name or (desk.channels[0] if desk.channels else None)
            if where is None:
                return _fail("Join a channel first (`join('#general')`): callbacks are sent there.")
            due = clamp_duration(seconds, desk.max_duration_s)
            marker = callback_marker(due, payload, name, desk.max_duration_s)
            await desk.seat.send(Envelope(kind="chat", channel=where, payload={"text": marker}))
            await desk.sync()
            return _ok(
                m.Scheduled(
                    seconds=due,
                    channel=name,
                    payload=payload,
                    advice=f"Keep listening: the callback arrives through listen in {due:g}s.",
                ),
                f"Callback in {due:g}s"
                + (f" to {name}" if name else " to you")
                + _clamped(seconds, due)
                + ".",
            )

        return await _guarded(run)

    @tool
    async def sleep(
        seconds: Annotated[
            float,
            Field(description="How long, more than 0 (the gateway's longest is applied)."),
        ],
        mode: Annotated[
            Literal["default", "buffer", "drop"],
            Field(
                description="'default' (the default) drops channel chatter and keeps "
                "direct messages and mentions; 'buffer' keeps everything; 'drop' keeps "
                "nothing."
            ),
        ] = "default",
    ) -> Annotated[CallToolResult, m.Slept]:
        """Stop receiving channel chatter for a while. Sending a message wakes you."""
        if not seconds > 0:  # NaN too
            return _fail("`seconds` must be a number more than 0 (e.g. 600).")

        async def run(desk: Desk) -> CallToolResult:
            where = desk.channels[0] if desk.channels else None
            due = clamp_duration(seconds, desk.max_duration_s)
            text = sleep_marker(due, mode, desk.max_duration_s)
            await desk.seat.send(Envelope(kind="chat", channel=where, payload={"text": text}))
            await desk.sync()
            return _ok(
                m.Slept(
                    seconds=due,
                    mode=mode,
                    advice="Call listen: it returns the wake-up and what was kept for you.",
                ),
                f"Sleeping for {due:g}s ({mode}){_clamped(seconds, due)}; `listen` returns "
                "the wake-up.",
            )

        return await _guarded(run)

    @tool
    async def tools(
        participant: Annotated[
            str | None,
            Field(
                description="Only this participant's tools, e.g. 'calc' (default: every "
                "online agent and service)."
            ),
        ] = None,
    ) -> Annotated[CallToolResult, m.Tools]:
        """The MCP tools other participants offer."""

        async def run(desk: Desk) -> CallToolResult:
            if participant is not None:
                targets = [participant.lstrip("@")]
            else:
                targets = [
                    str(p.get("id"))
                    for p in desk.roster()
                    if p.get("id") != desk.me and p.get("kind") in ("agent", "service")
                ]
            found = await asyncio.gather(*(_list_tools(desk, t) for t in targets))
            lines = []
            for f in found:
                if f.error:
                    lines.append(f"{f.participant}: {f.error}")
                else:
                    names = ", ".join(t.name for t in f.tools) or "no tools"
                    lines.append(f"{f.participant}: {names}")
            return _ok(
                m.Tools(participants=list(found)), "\n".join(lines) or "Nobody offers tools."
            )

        return await _guarded(run)

    @tool
    async def call_tool(
        participant: Annotated[str, Field(description="Who offers the tool, e.g. 'calc'.")],
        tool: Annotated[str, Field(description="The tool's name (from `tools`).")],
        arguments: Annotated[
            dict[str, Any] | None,
            Field(description="The tool's arguments, as its input schema says (default: none)."),
        ] = None,
    ) -> Annotated[CallToolResult, m.Called]:
        """Call another participant's tool. Without the capability to call it directly, it
        becomes a proposal that a person approves; the answer then arrives through `listen`."""
        target = participant.lstrip("@")

        async def run(desk: Desk) -> CallToolResult:
            token = desk.seat.new_id()
            body = {
                "jsonrpc": JSONRPC,
                "id": token,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments or {}},
            }
            if desk.capabilities.allows("mcp/request", body):
                env = Envelope(
                    kind="mcp/request", id=token, to=[target], private=True, payload=body
                )
                ans = await desk.request(
                    env,
                    lambda e: e.kind == "mcp/response" and token in e.correlation_ids(),
                    REQUEST_TIMEOUT_S,
                )
                return _called(target, tool, ans)
            if desk.capabilities.allows("mcp/proposal", body):
                where = desk.channels[0] if desk.channels else None
                if where is None:
                    return _fail("Join a channel first: a proposal is filed in a channel.")
                env = Envelope(
                    kind="mcp/proposal", id=token, to=[target], channel=where, payload=body
                )
                echo = await desk.send_stored(env)
                return _ok(
                    m.Called(
                        status="proposed",
                        participant=target,
                        tool=tool,
                        proposal_id=echo.id,
                        advice="Waiting for a person to approve it: its answer (or a rejection) "
                        "arrives through listen.",
                    ),
                    f"You may not call {target}'s {tool} directly, so it became proposal "
                    f"{echo.id} in {where}, waiting for approval by a person. Its answer (or a "
                    "rejection) arrives through `listen`.",
                )
            return _fail(
                f"You may neither call nor propose {target}'s {tool}: ask an admin to grant "
                "you mcp/request or mcp/proposal."
            )

        return await _guarded(run)

    @tool
    async def proposals() -> Annotated[CallToolResult, m.Proposals]:
        """Proposals waiting in your channels (for participants who may approve them)."""

        async def run(desk: Desk) -> CallToolResult:
            items = [_proposal(desk, p) for p in desk.proposals.values()]
            lines = [
                f"{p.id}: {p.sender} proposes {p.tool or p.method} on {', '.join(p.to or [])}"
                f" with {json.dumps(p.arguments)}"
                + ("" if p.may_approve else " (you may not approve it)")
                for p in items
            ]
            return _ok(m.Proposals(proposals=items), "\n".join(lines) or "No pending proposals.")

        return await _guarded(run)

    @tool
    async def decide_proposal(
        proposal_id: Annotated[str, Field(description="The proposal's `id` (from `proposals`).")],
        approve: Annotated[bool, Field(description="true runs it; false rejects it.")],
        reason: Annotated[
            str | None,
            Field(description="Why you reject it, told to its author (default: 'rejected')."),
        ] = None,
    ) -> Annotated[CallToolResult, m.Decided]:
        """Approve a proposal (it runs, and you get its result) or reject it with a reason."""

        async def run(desk: Desk) -> CallToolResult:
            p = desk.proposals.get(proposal_id)
            if p is None:
                pending = ", ".join(desk.proposals) or "none"
                return _fail(
                    f"No pending proposal {proposal_id!r} (pending: {pending}); call `proposals`."
                )
            if not approve:
                env = Envelope(
                    kind="mcp/reject",
                    to=[p.from_],
                    channel=p.channel,
                    correlation_id=[p.id],
                    payload={"reason": reason or "rejected"},
                )
                await desk.send_stored(env)
                return _ok(
                    m.Decided(proposal_id=p.id, approved=False), f"Rejected proposal {p.id}."
                )
            env = Envelope(
                kind="mcp/request",
                to=p.to,
                private=True,
                correlation_id=[p.id],
                payload=dict(p.payload),
            )
            ans = await desk.request(
                env,
                lambda e: e.kind == "mcp/response" and env.id in e.correlation_ids(),
                REQUEST_TIMEOUT_S,
            )
            done = _called(",".join(p.to or []), str(p.payload.get("params", {}).get("name")), ans)
            sc = done.structured_content or {}
            return _ok(
                m.Decided(
                    proposal_id=p.id,
                    approved=True,
                    is_error=bool(sc.get("is_error")),
                    text=sc.get("text"),
                ),
                f"Approved proposal {p.id}; result: {sc.get('text')}",
            )

        return await _guarded(run)

    @srv.resource(
        RESOURCE_PREFIX + "{name}",
        name="channel",
        description="Recent messages of a channel (name without '#'); subscribe for updates.",
        mime_type="text/plain",
    )
    async def channel_resource(name: str) -> str:
        desk = _desk()
        channel = _channel_arg(unquote(name))
        if channel is None:
            raise ValueError(f"{name!r} is not a channel name: use hubbub://channel/general")
        ans = await desk.request(
            Envelope(kind="history/request", payload={"channel": channel, "limit": 50})
        )
        envs = [e for e in _envelopes(ans.payload.get("messages", [])) if _shown(e)]
        return "\n".join(m.message_line(m.message_of(desk, e)) for e in envs)

    @srv.prompt(name="collaborate", description="How to behave in a shared hubbub channel.")
    def collaborate() -> str:
        return COLLABORATE

    _add_subscriptions(srv)
    return srv


def _shown(env: Envelope) -> bool:
    """Whether ``history`` shows a stored record: chat, and what reads as a one-line note."""
    return env.kind == "chat" or bool(m.note_of(env))


def _listen_advice(
    nudge: bool, superseded: bool, msgs: list[m.Message], yields: list[m.YieldNote]
) -> str:
    """What a model should do with one ``listen`` result, in a sentence or three."""
    if superseded:
        return "A newer listen call replaced this one; use its result."
    parts = []
    for y in yields:
        parts.append(f"{y.winner} is answering {y.message_id}: do not answer it.")
    if nudge:
        parts.append("Nothing new: check on your own work, or sleep if you have none; "
                     "then listen again.")  # fmt: skip
    if any(x.repeated for x in msgs):
        parts.append("Messages marked repeated may have reached you before: skip those you "
                     "handled.")  # fmt: skip
    if any(x.age_s is not None for x in msgs):
        parts.append("Messages with age_s are old: answer only what still needs an answer.")
    if any(x.addressed_to_you for x in msgs):
        parts.append("Answer what is addressed_to_you.")
    if any(not x.addressed_to_you and x.channel and x.kind == "chat" for x in msgs):
        parts.append("Before answering anything else, claim_floor on it and answer only if "
                     "granted; stay silent if it is answered well.")  # fmt: skip
    if msgs or yields:
        parts.append("Then listen again.")
    return " ".join(parts)


def _envelopes(raw: Any) -> list[Envelope]:
    """The messages of a ``history/response`` (wire form) as envelopes."""
    return msgspec.convert(raw if isinstance(raw, list) else [], list[Envelope])


async def _claim(desk: Desk, message_id: str, channel: str) -> CallToolResult:
    """Send ``floor/responding-to`` and report the gateway's verdict."""
    me = desk.me

    def verdict(e: Envelope) -> bool:
        if e.payload.get("msg_id") != message_id:
            return False
        return e.kind == "floor/yield" or (
            e.kind == "floor/claimed" and e.payload.get("holder") == me
        )

    env = Envelope(
        kind="floor/responding-to",
        channel=channel,
        payload={"msg_id": message_id, "started_at": desk.wall_ms()},
    )
    floor = desk.floor(message_id)
    if floor is not None and floor.holder == me:
        granted: Envelope | None = None
    else:
        try:
            granted = await desk.request(env, verdict, timeout=5.0)
        except DeskError as exc:
            if "did not answer" not in str(exc):
                raise
            granted = None  # floor control off, or no change: the claim stands unopposed
    if granted is not None and granted.kind == "floor/yield":
        desk.yield_reported(message_id)
        winner = str(granted.payload.get("winner"))
        if granted.payload.get("refused"):  # answered already, or addressed to others
            advice, said = f"{granted.payload.get('reason')}. Do not answer it.", "Refused"
        else:
            advice = f"{winner} is answering {message_id}: do not answer it, do not repeat them."
            said = "Yielded"
        return _ok(
            m.Claim(
                message_id=message_id,
                channel=channel,
                granted=False,
                yielded_to=winner,
                advice=advice,
            ),
            f"{said}: {advice}",
        )
    advice = f"You hold the floor: answer with send(to={channel!r}, reply_to={message_id!r})."
    return _ok(
        m.Claim(message_id=message_id, channel=channel, granted=True, advice=advice),
        f"Granted. {advice}",
    )


async def _list_tools(desk: Desk, target: str) -> m.ParticipantTools:
    token = desk.seat.new_id()
    body = {"jsonrpc": JSONRPC, "id": token, "method": "tools/list", "params": {}}
    env = Envelope(kind="mcp/request", id=token, to=[target], private=True, payload=body)
    try:
        ans = await desk.request(
            env, lambda e: e.kind == "mcp/response" and token in e.correlation_ids(), 10.0
        )
    except DeskError as exc:
        return m.ParticipantTools(participant=target, tools=[], error=str(exc))
    result = ans.payload.get("result")
    if not isinstance(result, dict):
        error = ans.payload.get("error")
        text = error.get("message") if isinstance(error, dict) else "no tools/list result"
        return m.ParticipantTools(participant=target, tools=[], error=str(text))
    tools = [
        m.ToolInfo(
            name=str(t.get("name")),
            description=t.get("description"),
            input_schema=t.get("inputSchema"),
        )
        for t in result.get("tools", [])
        if isinstance(t, dict)
    ]
    return m.ParticipantTools(participant=target, tools=tools)


def _called(target: str, tool: str, ans: Envelope) -> CallToolResult:
    """An ``mcp/response`` to ``tools/call`` as this tool's result."""
    payload = ans.payload
    error = payload.get("error")
    if isinstance(error, dict):
        return _fail(f"{target}'s {tool} failed: {error.get('message')} (code {error.get('code')})")
    result = payload.get("result") if isinstance(payload.get("result"), dict) else {}
    assert isinstance(result, dict)
    texts = [c.get("text", "") for c in result.get("content", []) if isinstance(c, dict)]
    text = "\n".join(t for t in texts if t)
    structured = result.get("structuredContent")
    is_error = bool(result.get("isError"))
    return _ok(
        m.Called(
            status="done",
            participant=target,
            tool=tool,
            is_error=is_error,
            text=text,
            structured=structured if isinstance(structured, dict) else None,
        ),
        (f"{target}'s {tool} reported an error: " if is_error else "") + (text or "(no text)"),
    )


def _proposal(desk: Desk, env: Envelope) -> m.Proposal:
    params = env.payload.get("params")
    params = params if isinstance(params, dict) else {}
    arguments = params.get("arguments")
    return m.Proposal.model_validate(
        {
            "id": env.id,
            "from": env.from_,
            "to": env.to,
            "channel": env.channel,
            "method": env.payload.get("method"),
            "tool": params.get("name"),
            "arguments": arguments if isinstance(arguments, dict) else None,
            "may_approve": desk.capabilities.allows("mcp/request", env.payload),
        }
    )


def _add_subscriptions(srv: MCPServer) -> None:
    """``resources/subscribe``: a channel resource's subscriber hears of each new message
    (``notifications/resources/updated``). MCPServer has no decorator for it yet, so the
    handlers go on its low-level server (:mod:`hubbub.mcp.sdk_private`)."""

    async def subscribe(
        ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams
    ) -> EmptyResult:
        desk = _desk()
        uri = str(params.uri)
        channel = _channel_arg(unquote(uri.removeprefix(RESOURCE_PREFIX)))
        if not uri.startswith(RESOURCE_PREFIX) or channel is None:
            raise ValueError(f"cannot subscribe to {uri}: use hubbub://channel/<name>")
        session = ctx.session
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task[None]] = set()

        def watch(env: Envelope) -> None:
            if env.channel == channel and env.seq is not None:
                task = loop.create_task(session.send_resource_updated(uri))
                tasks.add(task)
                task.add_done_callback(tasks.discard)

        watch.uri = uri  # type: ignore[attr-defined]
        desk.watchers.append(watch)
        return EmptyResult()

    async def unsubscribe(
        ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams
    ) -> EmptyResult:
        desk = _desk()
        uri = str(params.uri)
        desk.watchers[:] = [w for w in desk.watchers if getattr(w, "uri", None) != uri]
        return EmptyResult()

    add_request_handler(srv, "resources/subscribe", SubscribeRequestParams, subscribe)
    add_request_handler(srv, "resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
