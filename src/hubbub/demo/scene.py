"""``hubbub demo``: a gateway, four agents and a calculator playing a scripted scene.

The scene shows floor control (claims and a YIELD: one answer to a question all four agents
want), a callback, sleep with buffered DMs and the wake-up, a tool call through discovery and
a proposal waiting for the operator. The transcript is printed from the gateway's own
activity feed (what the dashboard shows) plus the DMs the human receives.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import socket
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import websockets
from aiohttp import web

from hubbub.defaults import DEFAULT_PORT, LOOPBACK
from hubbub.demo.cast import (
    CONTESTED,
    SKILLS,
    describe_activity,
    describe_dm,
    make_agent,
    make_calculator,
    offline_mode,
    short,
)
from hubbub.protocol.envelope import Envelope
from hubbub.sdk import Agent, Participant
from hubbub.sdk.server_notes import CallbackFired, Wake
from hubbub.server.app import build_app, make_router
from hubbub.server.gateway import Gateway
from hubbub.server.listener import GuardedSite, listen_error

Moment = Callable[[], Awaitable[None]]
JOIN_ORDER = ("chef", "maths", "travel", "coder")
"""The order the agents join #general in: the gateway hands a message to its members in that
order, so chef is first to start on the contested question and (its claim's ``started_at``
the earliest, or tied and its id the smallest) the one that keeps the floor every run."""
QUESTIONS = (
    f"Team poll: how should we {CONTESTED}?",
    f"Second try, everyone: please {CONTESTED}!",
    f"Last call: {CONTESTED}, anyone?",
)


def _listen(preferred: int, exact: bool) -> socket.socket:
    """The gateway's listening socket on 127.0.0.1:``preferred``; when that one is taken, an
    ``OSError`` saying so if ``exact`` (the user asked for that port), else a free port (the
    socket is the listener itself, so TIME_WAIT from a run a moment ago does not count as
    taken: ``create_server`` sets SO_REUSEADDR, as aiohttp would)."""
    try:
        return socket.create_server((LOOPBACK, preferred))
    except OSError as exc:
        why = os.strerror(exc.errno) if exc.errno else str(exc)
        if exact:
            fix = (
                "stop what runs there, choose another --port, or leave --port out (the demo "
                f"then takes a free port when {DEFAULT_PORT} is taken)"
            )
            raise listen_error(exc, LOOPBACK, preferred, fix) from None
        say(f"  (port {preferred} is not free: {why}; the gateway takes a free one)")
        return socket.create_server((LOOPBACK, 0))


def say(line: str) -> None:
    """Print one transcript line at once."""
    print(line, flush=True)


async def _until(predicate: Callable[[], bool], timeout: float, what: str) -> bool:  # noqa: ASYNC109
    """Wait for ``predicate`` (checked every 50 ms); on timeout say so and return False."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not predicate():
        if loop.time() > end:
            say(f"  (gave up waiting for {what} after {timeout:.0f} s)")
            return False
        await asyncio.sleep(0.05)
    return True


class Feed:
    """Prints the gateway's activity feed as a transcript and remembers every event."""

    def __init__(self, router: Gateway, dashboard: str) -> None:
        self.events: list[dict[str, Any]] = []
        self.chats: list[Envelope] = []
        """Channel chats the host saw (to count the answers to its questions)."""
        self.dashboard = dashboard
        self._queue = router.activity.subscribe()
        self._router = router
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            self.events.append(event)
            line = describe_activity(event, self.dashboard)
            if line:
                say(line)

    def seen(self, event: str, **fields: Any) -> list[dict[str, Any]]:
        """Events of kind ``event`` whose fields match."""
        return [
            e
            for e in self.events
            if e.get("event") == event and all(e.get(k) == v for k, v in fields.items())
        ]

    async def close(self) -> None:
        """Stop printing (again is fine)."""
        if self._task.done():
            return
        self._router.activity.unsubscribe(self._queue)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def _dialects(url: str) -> None:
    """Prologue: bob speaks agentchat, the rest MEW; both meet in #general."""
    async with websockets.connect(url) as bob:
        await bob.send(json.dumps({"type": "IDENTIFY", "name": "bob"}))
        await asyncio.sleep(0.2)
        await bob.send(json.dumps({"type": "JOIN", "channel": "#general"}))
        await asyncio.sleep(0.2)
        await bob.send(
            json.dumps({"type": "MSG", "to": "#general", "content": "bob here, on agentchat"})
        )
        await asyncio.sleep(0.3)


async def _contest(feed: Feed, host: Participant, agents: list[Agent]) -> None:
    """a. All four agents want to answer; claims and a YIELD leave exactly one answer."""
    say("\n== a. one question, four agents who all want to answer it (floor control) ==")
    for text in QUESTIONS:
        if await _one_question(feed, host, agents, text):
            return
        say("  (nobody had to yield this time: the others saw the claim first; asking again)")


async def _one_question(feed: Feed, host: Participant, agents: list[Agent], text: str) -> bool:
    """Ask one contested question; whether it got its answer and someone yielded."""
    say("  (every agent's script answers this question from 'host', so all four want the floor)")
    await host.chat(text)

    def posted() -> list[Envelope]:
        return [e for e in feed.chats if e.from_ == "host" and e.payload.get("text") == text]

    if not await _until(lambda: bool(posted()), 15, "the question"):
        return False
    qid = posted()[0].id
    answered = await _until(lambda: bool(_answers(feed, qid)), 30, "an answer")
    await _until(lambda: not any(a.busy() for a in agents), 30, "the agents to settle")
    await asyncio.sleep(0.3)
    for agent in agents:
        kinds = [e.kind for e in agent.floor.events if e.msg_id == qid]
        say(f"  [{agent.id:<8}] floor control: {' → '.join(kinds) or 'nothing'}")
    count = len(_answers(feed, qid))
    say(f"  => {count} answer{'s' if count != 1 else ''} to {short(qid)}")
    return answered and bool(feed.seen("yield", msg_id=qid))


def _answers(feed: Feed, qid: str) -> list[Envelope]:
    return [e for e in feed.chats if qid in e.correlation_ids()]


async def _tool_call(alice: Participant, replies: list[str], maths: Agent) -> None:
    """b. A tool call through discovery: maths found calculator/multiply and uses it."""
    say("\n== b. a tool call through discovery ==")
    await maths.wait_for_tools("calculator", timeout=15)
    found = ", ".join(sorted(t for t in maths.tools.qualified_names() if t.startswith("calc")))
    say(f"  maths discovered: {found}")
    say("  alice → maths: what is 12*7?")
    await alice.chat("what is 12*7?", to=["maths"])
    await _until(lambda: any("84" in r for r in replies), 30, "maths's answer")


async def _proposal(feed: Feed, alice: Participant, coder: Agent) -> None:
    """c. The coder may not call tools directly: its call becomes a proposal for the operator."""
    say("\n== c. a proposal waiting for the operator ==")
    say("  (coder's capabilities allow tools/list but not tools/call: it must propose)")
    await coder.wait_for_tools("calculator", timeout=15)
    say("  alice → coder: what is 1234+4321?")
    await alice.chat("what is 1234+4321?", to=["coder"])
    await _until(lambda: bool(feed.seen("proposal", participant="coder")), 30, "the proposal")


async def _callback_and_sleep(
    feed: Feed,
    alice: Participant,
    replies: list[str],
    chef: Agent,
    travel: Agent,
    moment: Moment | None,
) -> None:
    """d. chef schedules a callback; travel sleeps, gets DMs buffered, wakes with them."""
    say("\n== d. a callback, and sleep with buffered DMs ==")
    say("  chef: schedule_callback(3, 'check the oven')")
    await chef.schedule_callback(3, "check the oven")
    say("  travel: sleep(5)")
    await travel.sleep(5)
    await _until(lambda: bool(feed.seen("sleep", participant="travel")), 10, "travel's sleep")
    for text in ("book me a train to Lyon", "and a hotel near the station"):
        say(f"  alice → travel (asleep): {text}")
        await alice.chat(text, to=["travel"])
    await asyncio.sleep(0.5)
    if moment is not None:
        await moment()
    await _until(lambda: bool(feed.seen("callback-fired", participant="chef")), 30, "callback")
    await _until(lambda: bool(feed.seen("wake", participant="travel")), 30, "travel's wake-up")
    # both buffered DMs answered (a busy() check can fall between the wake and the first turn)
    await _until(lambda: sum(" travel → alice: " in r for r in replies) >= 2, 30, "travel")
    await _until(lambda: not travel.busy() and not chef.busy(), 30, "the answers")
    await asyncio.sleep(0.5)


async def _watch(p: Participant, into: list[Envelope]) -> None:
    async for env in p.client.messages():
        if env.kind == "chat" and env.channel is not None:
            into.append(env)


async def _watch_dms(p: Participant, into: list[str]) -> None:
    async for env in p.client.messages():
        line = describe_dm(env, p.id)
        if line:
            into.append(line)
            say(line)


async def play(
    url: str,
    router: Gateway,
    dashboard: str,
    *,
    moment: Moment | None = None,
    serve: bool = False,
) -> None:
    """Start the cast and play scenes a–d; with ``serve``, keep everyone running until
    cancelled (so that the operator can approve the proposal on the dashboard)."""
    feed = Feed(router, dashboard)
    replies: list[str] = []
    try:
        await _cast_and_scene(url, feed, replies, dashboard, moment, serve)
    finally:
        await feed.close()


async def _cast_and_scene(
    url: str,
    feed: Feed,
    replies: list[str],
    dashboard: str,
    moment: Moment | None,
    serve: bool,
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        say("\n== prologue: bob speaks agentchat, everyone else MEW; all meet in #general ==")
        await _dialects(url)
        await stack.enter_async_context(make_calculator(url, say))
        joined = {n: await stack.enter_async_context(make_agent(n, url, 0.4)) for n in JOIN_ORDER}
        agents = [joined[n] for n in SKILLS]
        maths, travel, chef, coder = agents
        cast = ", ".join(f"{a.id} ({SKILLS[a.id][0]})" for a in agents)
        say(f"  agents: {cast}; model {maths.model.describe()}; plus a calculator service")

        @chef.on_callback
        def fired(note: CallbackFired) -> bool:
            say(f"  [callback] chef's hook: callback {note.payload!r} arrived; answering it")
            return True

        @travel.on_wake
        def woke(note: Wake) -> None:
            say(f"  [wake]     travel's hook: awake, {note.buffered} buffered DMs follow")

        host = await stack.enter_async_context(
            Participant(gateway=url, participant_id="host", kind="service")
        )
        alice = await stack.enter_async_context(
            Participant(gateway=url, participant_id="alice", kind="human")
        )
        for task in (_watch(host, feed.chats), _watch_dms(alice, replies)):
            watcher = asyncio.create_task(task)
            stack.callback(watcher.cancel)
        stack.push_async_callback(feed.close)  # closes first: agents' goodbyes are not news
        await _until(lambda: all(a.tools.participants() for a in agents), 15, "tool discovery")
        await _contest(feed, host, agents)
        await _tool_call(alice, replies, maths)
        await _proposal(feed, alice, coder)
        await _callback_and_sleep(feed, alice, replies, chef, travel, moment)
        say("\n== scene over ==")
        if serve:
            say(f"still serving: approve coder's proposal at {dashboard}; Ctrl-C to stop")
            await asyncio.Event().wait()


@contextlib.asynccontextmanager
async def gateway(port: int, *, exact: bool = False) -> AsyncIterator[tuple[Gateway, int]]:
    """An open-mode gateway on 127.0.0.1:``port`` (a free port when that one is taken,
    unless ``exact``), stopped on exit; its history lives in a temporary directory, removed on
    exit."""
    with _listen(port, exact) as probe:  # the port the listener takes: 8080 unless really taken
        port = int(probe.getsockname()[1])
    with tempfile.TemporaryDirectory(prefix="hubbub-demo-", ignore_cleanup_errors=True) as data:
        router = make_router(data_dir=Path(data))
        runner = web.AppRunner(build_app(router), handle_signals=False)
        try:
            await runner.setup()
            await GuardedSite(runner, LOOPBACK, port, router.limits, router.metrics).start()
        except BaseException:
            await runner.cleanup()
            raise
        try:
            yield router, port
        finally:
            await runner.cleanup()


def _banner(port: int) -> str:
    dashboard = f"http://127.0.0.1:{port}/dashboard"
    model = "the offline scripted model" if offline_mode() else "the model your env selects"
    rule = "=" * 64
    say(rule)
    say(f"  hubbub demo — open the dashboard:  {dashboard}")
    say(f"  talk with the agents in the chat:  http://127.0.0.1:{port}/chat")
    say(f"  gateway ws://127.0.0.1:{port}/ws (open mode); agents on {model}")
    say(rule)
    return dashboard


async def run_demo(
    port: int,
    *,
    once: bool,
    screenshot: Path | None = None,
    chat_screenshot: Path | None = None,
    exact: bool = False,
) -> None:
    """Serve on ``port`` (a free one when it is taken, unless ``exact``), play the scene,
    then serve until Ctrl-C (or, with ``once``, stop); with ``screenshot`` /
    ``chat_screenshot``, save the dashboard / the web chat (signed in as a person watching
    from the start) mid-scene to that file."""
    async with (
        gateway(port, exact=exact) as (router, real_port),
        contextlib.AsyncExitStack() as stack,
    ):
        dashboard = _banner(real_port)
        url = f"ws://127.0.0.1:{real_port}/ws"
        shots: list[Callable[[], Awaitable[None]]] = []
        if screenshot is not None or chat_screenshot is not None:
            from hubbub.demo.shot import chat_page, dashboard_page

            if screenshot is not None:
                snap = await stack.enter_async_context(dashboard_page(dashboard))
                shots.append(functools.partial(snap, screenshot))
            if chat_screenshot is not None:
                chat = f"http://127.0.0.1:{real_port}/chat"
                snap = await stack.enter_async_context(chat_page(chat))
                shots.append(functools.partial(snap, chat_screenshot))

        async def moment() -> None:
            for shot in shots:
                await shot()

        await play(url, router, dashboard, moment=moment if shots else None, serve=not once)
