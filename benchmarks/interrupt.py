"""Interruption benchmark: how fast does a real agent close its in-flight model request over
HTTP when a new message interrupts it, or when it loses the floor (``YIELD``)?

Usage::

    .venv/bin/python benchmarks/interrupt.py [--samples N] [--quick] [--json PATH]
        [--token-ms 50] [--tokens 200] [--jitter-ms 100] [--warmup 3] [--seed 1] [--gc-freeze]

One process: a real gateway (aiohttp, SQLite store, rate limit off) on 127.0.0.1, a real
``hubbub.sdk.Agent`` ("bot") on the openai-compatible provider (the official ``openai`` SDK),
and plain ``Participant``\\ s: a human ("alice"), a poster and a rival (kind agent, "poe" and
"ada"). The agent's model server is a fake OpenAI-compatible server (aiohttp, 127.0.0.1) in a
**child process** (this script with ``--fake-server``), as a real model server is another
process: in a thread of this one it would need the GIL to notice the close, and the agent's
work right after an interruption (its next request) delayed that by up to ~30 ms.

The fake server answers a request whose last user message contains ``[long]`` with a slow
stream (one token every ``--token-ms``, ``--tokens`` of them: 10 s by default), a
classification request (the agent's ``should_respond`` prompt) with ``should_respond: true``
at once, and anything else with a short answer at once. For every request it records, with
``time.monotonic()``, when it first streamed a token and when it saw the client close the
connection (aiohttp's ``handler_cancellation``: the handler is cancelled on connection loss).

Case ``interrupt`` (document 002): alice DMs the bot ``[long]``; once the server streams the
answer, after a random 0-``--jitter-ms`` ms, alice DMs it again. The runtime must interrupt the
turn: the first request's connection closes, and the bot answers the second DM (a short
answer). Measured to the server seeing the first request closed, from:

- ``DM sent``: alice's client handing the second DM to its WebSocket;
- ``DM received``: the bot's client dispatching the second DM (a ``message`` handler on the
  bot's participant, which runs right before the agent's own ``chat`` handler) — the target;
- ``cancel issued``: ``runtime.send`` returning ``INTERRUPTED`` (diagnostic: provider close).

Case ``yield`` (document 000, coordination ``claims``, no CSMA delay): poe posts a ``[long]``
question in ``#general``; the bot classifies it (one fast request), claims it
(``floor/responding-to``) and starts its answer. Once that streams (+ jitter), ada sends a
forged earlier claim for the same message (``started_at`` = the message's own timestamp, the
earliest the gateway accepts; ``ada`` also wins a tie on id). The gateway relays ada's claim
and sends the bot ``floor/yield``; the bot cancels the turn. Measured to the close, from:

- ``claim sent``: ada's client handing the claim to its WebSocket;
- ``lost floor``: the bot's client dispatching the first frame that tells it (the relayed
  earlier claim, which the gateway sends before the ``YIELD``, or the ``YIELD``) — the target;
- ``YIELD received``: the bot's client dispatching ``floor/yield`` itself;
- ``cancel issued``: the floor calling ``runtime.cancel`` (diagnostic).

Two real agents racing for one message cannot be arranged so that the loser's request is
reliably open when its ``YIELD`` comes (the loser is the later claimer, and it gets the
``YIELD`` a round trip after its own claim, while its request is still being set up); hence
the forged claim.

Target (issue 6): an interruption or ``YIELD`` closes the in-flight model request within
50 ms p99. Percentiles are nearest-rank (as ``pile_on.py``). The gateway, the agent and the
clients share this process and the machine's cores with whatever else runs: the CPU used by
this process, the fake server and other processes while measuring is printed, and so are this
process's garbage-collection pauses (a full collection stalls everything in it; ``--gc-freeze``
moves the start-up objects out of the collector's way).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import os
import platform
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import psutil
from aiohttp import web

from hubbub.protocol.envelope import Envelope
from hubbub.protocol.ids import iso_to_ms
from hubbub.sdk import Agent, AgentConfig, Participant
from hubbub.sdk.runtime import AgentMessage, Delivery
from pile_on import pct, start_gateway

TARGET_P99_MS = 50.0
SCRIPT = os.path.abspath(__file__)
CLASSIFY_MARKER = "should_respond"
LONG_MARKER = "[long]"
CLASSIFICATION = json.dumps(
    {"should_respond": True, "confidence": 0.9, "reason": "benchmark: always answer"}
)
Event = Literal["streaming", "closed", "finished"]


def log(msg: str) -> None:
    """Progress on stderr."""
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------- the fake model server


@dataclass
class RequestRecord:
    """One chat-completions request as the fake server saw it (``time.monotonic()`` of the
    server process: ``CLOCK_MONOTONIC``, the same clock in every process of the machine)."""

    n: int
    kind: Literal["classify", "long", "short"]
    last_user: str
    received_at: float
    streaming_at: float | None = None
    closed_at: float | None = None
    finished_at: float | None = None
    closed: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)
    """Set when the server reported that the client closed the connection."""


class FakeOpenAI:
    """A fake ``/v1/chat/completions`` server in a child process (this script with
    ``--fake-server``), which reports each request's events as JSON lines on its stdout."""

    def __init__(self, token_ms: float, tokens: int) -> None:
        self.token_ms = token_ms
        self.tokens = tokens
        self.records: dict[int, RequestRecord] = {}
        self.port = 0
        self.pid = 0
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._watchers: list[tuple[Event, Callable[[RequestRecord], bool], asyncio.Future[Any]]]
        self._watchers = []

    @property
    def base_url(self) -> str:
        """The openai client's ``base_url``."""
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> None:
        """Start the server process; return once it listens."""
        self._proc = proc = await asyncio.create_subprocess_exec(
            sys.executable,
            SCRIPT,
            "--fake-server",
            "--token-ms",
            str(self.token_ms),
            "--tokens",
            str(self.tokens),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        self.pid = proc.pid
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        if not line:
            raise RuntimeError("the fake model server did not start (see its error above)")
        self.port = int(json.loads(line)["port"])
        self._reader = asyncio.create_task(self._read(proc.stdout))

    async def stop(self) -> None:
        """Stop the server process (it exits when its stdin closes)."""
        proc = self._proc
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        if self._reader is not None:
            self._reader.cancel()

    def expect(self, event: Event, where: Callable[[RequestRecord], bool]) -> asyncio.Future[Any]:
        """A future for the next request that reaches ``event`` and for which ``where`` holds
        (register before causing the request)."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._watchers.append((event, where, future))
        return future

    async def _read(self, stdout: asyncio.StreamReader) -> None:
        while line := await stdout.readline():
            note = json.loads(line)
            n, event, at = note["n"], note["event"], note["at"]
            if event == "received":
                self.records[n] = RequestRecord(n, note["kind"], note["last_user"], at)
                continue
            record = self.records[n]
            if event == "streaming":
                record.streaming_at = at
            elif event == "closed":
                record.closed_at = at
                record.closed.set()
            else:
                record.finished_at = at
            for watcher in list(self._watchers):
                wanted, where, future = watcher
                if future.done():
                    self._watchers.remove(watcher)
                elif wanted == event and where(record):
                    self._watchers.remove(watcher)
                    future.set_result(record)


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


async def serve_fake(token_s: float, tokens: int) -> None:
    """The fake server process: serve until stdin closes; events as JSON lines on stdout."""
    count = 0

    def note(n: int, event: str, **extra: Any) -> None:
        line = json.dumps({"n": n, "event": event, "at": time.monotonic(), **extra})
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    async def completions(request: web.Request) -> web.StreamResponse:
        nonlocal count
        body = await request.json()
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        last = users[-1].get("content") if users else ""
        last = last if isinstance(last, str) else json.dumps(last)
        kind = "classify" if CLASSIFY_MARKER in last else "long" if LONG_MARKER in last else "short"
        n, count = count, count + 1
        note(n, "received", kind=kind, last_user=last)
        if kind == "classify":
            words, pause = [CLASSIFICATION], 0.0
        elif kind == "long":
            words, pause = [f"word{i} " for i in range(tokens)], token_s
        else:
            words, pause = ["Fine", ", ", "thanks."], 0.0
        if not body.get("stream"):
            message = {"role": "assistant", "content": "".join(words)}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            note(n, "finished")
            return web.json_response(
                {
                    "id": "chatcmpl-bench",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": "fake-model",
                    "choices": [choice],
                }
            )
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        try:
            await response.prepare(request)
            await response.write(_chunk({"role": "assistant", "content": ""}))
            for i, word in enumerate(words):
                if i and pause:
                    await asyncio.sleep(pause)
                await response.write(_chunk({"content": word}))
                if i == 0:
                    note(n, "streaming")
            await response.write(_chunk({}, "stop"))
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except (asyncio.CancelledError, ConnectionError):
            note(n, "closed")
            raise
        note(n, "finished")
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    # handler_cancellation: the handler is cancelled the moment the client disconnects
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    sys.stdout.write(json.dumps({"port": port}) + "\n")
    sys.stdout.flush()
    stdin = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    try:
        await stdin.read()  # until the benchmark closes our stdin
    finally:
        await runner.cleanup()


# ---------------------------------------------------------------------- the agent's side


class Probe:
    """What the bot's client and runtime did, and when (``time.monotonic()``)."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.chats: dict[str, float] = {}
        """Text of each chat envelope the bot's client dispatched → when."""
        self.lost_floor: dict[str, tuple[float, str]] = {}
        """msg_id → (when, kind) of the first frame telling the bot another holds the floor."""
        self.yields: dict[str, float] = {}
        """msg_id → when the bot's client dispatched ``floor/yield`` for it."""
        self.deliveries: list[tuple[str, Delivery, float]] = []
        self.cancels: list[float] = []
        agent.participant.on("message", self._on_message)
        runtime = agent.runtime
        send, cancel = runtime.send, runtime.cancel

        def timed_send(message: AgentMessage) -> Delivery:
            delivery = send(message)
            self.deliveries.append((message.content, delivery, time.monotonic()))
            return delivery

        def timed_cancel(agent_id: str) -> bool:
            done = cancel(agent_id)
            self.cancels.append(time.monotonic())
            return done

        runtime.send = timed_send  # type: ignore[method-assign]
        runtime.cancel = timed_cancel  # type: ignore[method-assign]

    def _on_message(self, env: Envelope) -> None:
        now = time.monotonic()
        if env.kind == "chat":
            text = env.payload.get("text")
            if isinstance(text, str):
                self.chats.setdefault(text, now)
            return
        msg_id = env.payload.get("msg_id")
        if not isinstance(msg_id, str):
            return
        if env.kind == "floor/yield":
            self.yields.setdefault(msg_id, now)
        elif env.kind == "floor/responding-to":
            if env.from_ == self.agent.id:
                return
        elif env.kind != "floor/claimed" or env.payload.get("holder") == self.agent.id:
            return
        self.lost_floor.setdefault(msg_id, (now, env.kind))

    def delivery(self, marker: str) -> tuple[Delivery, float] | None:
        """How the runtime took the message whose content contains ``marker``."""
        for content, delivery, at in reversed(self.deliveries):
            if marker in content:
                return delivery, at
        return None

    def cancel_after(self, t: float) -> float | None:
        """The first ``runtime.cancel`` at or after ``t``."""
        return next((c for c in self.cancels if c >= t), None)


async def until_idle(agent: Agent, limit: float = 10.0) -> None:
    """Wait until the agent is neither deciding nor answering."""
    deadline = time.monotonic() + limit
    while agent.busy():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{agent.id} still busy after {limit:g} s")
        await asyncio.sleep(0.005)


class GcWatch:
    """This process's garbage-collection pauses (``time.monotonic()`` start and end)."""

    def __init__(self) -> None:
        self.pauses: list[tuple[float, float, int]] = []
        self._start = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        now = time.monotonic()
        if phase == "start":
            self._start = now
        else:
            self.pauses.append((self._start, now, int(info["generation"])))

    def within(self, start: float, end: float) -> float:
        """Milliseconds of pauses between ``start`` and ``end``."""
        return 1000 * sum(
            max(0.0, min(b, end) - max(a, start)) for a, b, _ in self.pauses if b > start
        )


GC = GcWatch()

# ---------------------------------------------------------------------- the cases


@dataclass
class Sample:
    """One measured interruption (all in ms to the close as the model server saw it)."""

    k: int
    sent_ms: float
    received_ms: float | None
    cancel_ms: float | None
    yield_ms: float | None = None
    first_frame: str = ""
    gc_ms: float = 0.0
    """Garbage-collection pauses of this process between the send and the close."""


@dataclass
class CaseResult:
    """The samples of one case, and what went wrong."""

    name: str
    samples: list[Sample] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    busy_other_cores: float = 0.0
    busy_self_cores: float = 0.0
    busy_server_cores: float = 0.0
    gc_full: int = 0
    """Generation-2 collections of this process while measuring."""
    gc_max_ms: float = 0.0
    """The longest collection pause of this process while measuring."""


@dataclass
class Bench:
    """Everything the cases need."""

    server: FakeOpenAI
    agent: Agent
    probe: Probe
    human: Participant
    poster: Participant
    rival: Participant
    rng: random.Random
    jitter_s: float
    claim_errors: list[str] = field(default_factory=list)


async def interrupt_once(b: Bench, k: int) -> Sample | str:
    """One interruption by a DM; a ``Sample``, or what went wrong."""
    tag = f"interrupt-{k:04d}"
    first, second = f"{tag} first: write me an essay {LONG_MARKER}", f"{tag} second: never mind"
    aid = b.agent.id
    streaming = b.server.expect("streaming", lambda r: r.kind == "long" and tag in r.last_user)
    await b.human.chat(first, to=aid)
    record: RequestRecord = await asyncio.wait_for(streaming, 10)
    await asyncio.sleep(b.rng.uniform(0, b.jitter_s))
    answered = b.human.client.expect("chat", lambda e: e.from_ == aid)
    dm = Envelope(kind="chat", to=[aid], payload={"text": second})
    sent = time.monotonic()
    await b.human.client.send(dm)
    try:
        await asyncio.wait_for(record.closed.wait(), 5)
    except TimeoutError:
        answered.cancel()
        await asyncio.wait_for(until_idle(b.agent, 15), 16)
        got = b.probe.delivery(f"{tag} second")
        how = got[0].value if got else "not delivered"
        return f"{tag}: request not closed within 5 s (second DM {how})"
    await asyncio.wait_for(answered, 10)
    await until_idle(b.agent)
    assert record.closed_at is not None
    closed = record.closed_at
    received = b.probe.chats.get(second)
    got = b.probe.delivery(f"{tag} second")
    if got is not None and got[0] is not Delivery.INTERRUPTED:
        return f"{tag}: second DM {got[0].value}, not interrupted"
    return Sample(
        k,
        (closed - sent) * 1000,
        (closed - received) * 1000 if received is not None else None,
        (closed - got[1]) * 1000 if got is not None else None,
        gc_ms=GC.within(sent, closed),
    )


async def yield_once(b: Bench, k: int) -> Sample | str:
    """One yield to a forged earlier claim; a ``Sample``, or what went wrong."""
    tag = f"yield-{k:04d}"
    text = f"{tag} {LONG_MARKER} what is everyone's view on topic {k}?"
    poster = b.poster.id
    echo = b.poster.client.expect(
        "chat", lambda e: e.from_ == poster and e.payload.get("text") == text
    )
    streaming = b.server.expect("streaming", lambda r: r.kind == "long" and tag in r.last_user)
    await b.poster.client.send(Envelope(kind="chat", channel="#general", payload={"text": text}))
    question = await asyncio.wait_for(echo, 5)
    record: RequestRecord = await asyncio.wait_for(streaming, 10)
    await asyncio.sleep(b.rng.uniform(0, b.jitter_s))
    errors = len(b.claim_errors)
    claim = Envelope(
        kind="floor/responding-to",
        channel="#general",
        payload={"msg_id": question.id, "started_at": iso_to_ms(question.ts)},
    )
    sent = time.monotonic()
    await b.rival.client.send(claim)
    try:
        await asyncio.wait_for(record.closed.wait(), 5)
    except TimeoutError:
        await asyncio.wait_for(until_idle(b.agent, 15), 16)
        why = b.claim_errors[errors] if len(b.claim_errors) > errors else "no error frame"
        return f"{tag}: request not closed within 5 s ({why})"
    await until_idle(b.agent)
    assert record.closed_at is not None
    closed = record.closed_at
    lost = b.probe.lost_floor.get(question.id)
    yielded = b.probe.yields.get(question.id)
    cancel = b.probe.cancel_after(sent)
    return Sample(
        k,
        (closed - sent) * 1000,
        (closed - lost[0]) * 1000 if lost is not None else None,
        (closed - cancel) * 1000 if cancel is not None else None,
        (closed - yielded) * 1000 if yielded is not None else None,
        lost[1] if lost is not None else "",
        GC.within(sent, closed),
    )


async def run_case(
    b: Bench, name: str, once: Callable[[Bench, int], Any], samples: int, warmup: int
) -> CaseResult:
    """``warmup`` unrecorded runs of a case, then ``samples`` recorded ones."""
    result = CaseResult(name)
    for k in range(warmup):
        outcome = await once(b, -1 - k)
        if isinstance(outcome, str):
            result.problems.append(f"warm-up: {outcome}")

    def used(proc: psutil.Process) -> float:
        times = proc.cpu_times()
        return float(times.user + times.system)

    def busy() -> float:
        times = psutil.cpu_times()
        return float(sum(times) - times.idle - getattr(times, "iowait", 0.0))

    me, server = psutil.Process(), psutil.Process(b.server.pid)
    cpu0, me0, server0, pauses0 = busy(), used(me), used(server), len(GC.pauses)
    started = time.monotonic()
    for k in range(samples):
        outcome = await once(b, k)
        if isinstance(outcome, str):
            result.problems.append(outcome)
            log(f"    {outcome}")
        else:
            result.samples.append(outcome)
        if (k + 1) % 50 == 0:
            log(f"    {name}: {k + 1}/{samples}")
    wall = result.wall_s = time.monotonic() - started
    total, mine, served = busy() - cpu0, used(me) - me0, used(server) - server0
    result.busy_self_cores = mine / wall
    result.busy_server_cores = served / wall
    result.busy_other_cores = max(0.0, total - mine - served) / wall
    pauses = GC.pauses[pauses0:]
    result.gc_full = sum(1 for *_, generation in pauses if generation == 2)
    result.gc_max_ms = max(((b - a) * 1000 for a, b, _ in pauses), default=0.0)
    return result


async def main_async(args: argparse.Namespace) -> list[CaseResult]:
    """Start everything, run the two cases, stop everything."""
    server = FakeOpenAI(args.token_ms, args.tokens)
    await server.start()
    results: list[CaseResult] = []
    with tempfile.TemporaryDirectory(prefix="hubbub-interrupt-") as tmp:
        runner, url = await start_gateway(Path(tmp))
        config = AgentConfig.from_mapping(
            {
                "participant_id": "bot",
                "gateway": url,
                "provider": "openai",
                "base_url": server.base_url,
                "api_key": "benchmark",
                "model": "fake-model",
                "coordination": "claims",  # no CSMA delay: claim, then inference at once
                "rate_limit_per_minute": 0,
                "discovery_timeout": 5.0,
            },
            "benchmarks/interrupt.py",
            expand=False,
        )
        agent = Agent(config)
        probe = Probe(agent)
        human = Participant(gateway=url, participant_id="alice", kind="human")
        poster = Participant(gateway=url, participant_id="poe", kind="agent")
        rival = Participant(gateway=url, participant_id="ada", kind="agent")
        bench = Bench(
            server,
            agent,
            probe,
            human,
            poster,
            rival,
            random.Random(args.seed),
            args.jitter_ms / 1000,
        )
        rival.on("system/error", lambda e: bench.claim_errors.append(json.dumps(e.payload)))
        try:
            for p in (human, poster, rival):
                await p.connect()
            await agent.start()
            for pid in (poster.id, rival.id):  # discovery done before measuring
                await agent.wait_for_tools(pid, timeout=30)
            await asyncio.sleep(0.2)
            if args.gc_freeze:
                gc.collect()
                gc.freeze()
            log(f"interrupt: {args.samples} samples ...")
            results.append(
                await run_case(bench, "interrupt", interrupt_once, args.samples, args.warmup)
            )
            log(f"yield: {args.samples} samples ...")
            results.append(await run_case(bench, "yield", yield_once, args.samples, args.warmup))
        finally:
            await agent.stop()
            for p in (human, poster, rival):
                await p.disconnect()
            await runner.cleanup()
            await server.stop()
    return results


# ---------------------------------------------------------------------- the report


def stats(values: list[float]) -> dict[str, float | None]:
    """Nearest-rank p50 / p90 / p99 and max of ``values`` (ms)."""
    ordered = sorted(values)
    return {
        "p50": pct(ordered, 0.50),
        "p90": pct(ordered, 0.90),
        "p99": pct(ordered, 0.99),
        "max": ordered[-1] if ordered else None,
    }


ROWS: list[tuple[str, str, str, bool]] = [
    ("interrupt", "DM sent → close", "sent_ms", False),
    ("interrupt", "DM received → close", "received_ms", True),
    ("interrupt", "cancel issued → close", "cancel_ms", False),
    ("yield", "claim sent → close", "sent_ms", False),
    ("yield", "lost floor → close", "received_ms", True),
    ("yield", "YIELD received → close", "yield_ms", False),
    ("yield", "cancel issued → close", "cancel_ms", False),
]


def report(results: list[CaseResult], args: argparse.Namespace, took: float) -> dict[str, Any]:
    """Print the table; return everything for ``--json``."""
    by_name = {r.name: r for r in results}
    head = ("case", "measure", "samples", "p50", "p90", "p99", "max", "p99 ≤ 50 ms")
    rows: list[tuple[str, ...]] = []
    summary: list[dict[str, Any]] = []
    for case, measure, key, target in ROWS:
        result = by_name.get(case)
        if result is None:
            continue
        values = [v for s in result.samples if (v := getattr(s, key)) is not None]
        st = stats(values)
        p99 = st["p99"]
        verdict = "-" if p99 is None else "PASS" if p99 <= TARGET_P99_MS else "FAIL"
        if target:
            verdict += " (target)"
        shown = ["-" if v is None else f"{v:.2f}" for v in st.values()]
        rows.append((case, measure, str(len(values)), *shown, verdict))
        summary.append({"case": case, "measure": measure, "n": len(values), **st, "pass": verdict})
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    print(
        f"hubbub interruption → HTTP close, ms (fake OpenAI server: a token every "
        f"{args.token_ms:g} ms; interrupt 0-{args.jitter_ms:g} ms after the first token)"
    )
    print()
    print("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)))
    print()
    for result in results:
        frames: dict[str, int] = {}
        for s in result.samples:
            if s.first_frame:
                frames[s.first_frame] = frames.get(s.first_frame, 0) + 1
        first = ", ".join(f"{k} {v}" for k, v in sorted(frames.items()))
        hit = [s for s in result.samples if s.gc_ms >= 1.0]
        print(
            f"{result.name}: {len(result.samples)} measured, {len(result.problems)} failed, "
            f"{result.wall_s:.1f} s; cores busy: this process {result.busy_self_cores:.2f}, "
            f"fake server {result.busy_server_cores:.2f}, other processes "
            f"{result.busy_other_cores:.2f}"
            + (f"; the bot first learnt it lost from: {first}" if first else "")
        )
        print(
            f"  GC of this process: {result.gc_full} full collections, longest pause "
            f"{result.gc_max_ms:.1f} ms; {len(hit)} sample(s) include a pause ≥ 1 ms"
            + "".join(f" (#{s.k}: {s.gc_ms:.0f} ms of {s.sent_ms:.0f} ms)" for s in hit[:3])
        )
        for problem in result.problems[:5]:
            print(f"  {problem}")
    targets = [s for s in summary if s["pass"].endswith("(target)")]
    ok = bool(targets) and all(s["pass"].startswith("PASS") for s in targets)
    ok = ok and not any(r.problems for r in results)
    print()
    print(
        f"{'PASS' if ok else 'FAIL'}: an interruption or YIELD closes the in-flight model "
        f"request within {TARGET_P99_MS:g} ms p99 (issue 6)"
    )
    load = os.getloadavg()
    print(
        f"\n{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} "
        f"cores, load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1/5/15 min) at the "
        f"end, load at start {args.load_at_start[0]:.2f}; the gateway, the agent and the clients "
        f"share this process, the fake model server is a child process"
        f"{'; gc.freeze() after start-up' if args.gc_freeze else ''}; {took:.0f} s"
    )
    return {
        "meta": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "loadavg_at_start": args.load_at_start,
            "loadavg_at_end": load,
            "samples": args.samples,
            "warmup": args.warmup,
            "token_ms": args.token_ms,
            "tokens": args.tokens,
            "jitter_ms": args.jitter_ms,
            "seed": args.seed,
            "gc_freeze": args.gc_freeze,
            "elapsed_s": took,
        },
        "summary": summary,
        "cases": [
            {
                "name": r.name,
                "wall_s": r.wall_s,
                "busy_self_cores": r.busy_self_cores,
                "busy_other_cores": r.busy_other_cores,
                "busy_server_cores": r.busy_server_cores,
                "gc_full": r.gc_full,
                "gc_max_ms": r.gc_max_ms,
                "problems": r.problems,
                "samples": [asdict(s) for s in r.samples],
            }
            for r in results
        ],
        "pass": ok,
    }


def main() -> None:
    """Parse the options, run, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=None, help="per case (default 200)")
    parser.add_argument("--quick", action="store_true", help="30 samples per case")
    parser.add_argument("--warmup", type=int, default=3, help="unrecorded runs per case")
    parser.add_argument("--token-ms", type=float, default=50.0, help="the slow stream's pace")
    parser.add_argument("--tokens", type=int, default=200, help="the slow stream's length")
    parser.add_argument(
        "--jitter-ms", type=float, default=100.0, help="random wait after the first token"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON")
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() once everything has started (fewer, shorter full collections)",
    )
    parser.add_argument("--fake-server", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fake_server:  # the child process that plays the model server
        asyncio.run(serve_fake(args.token_ms / 1000, args.tokens))
        return
    if args.samples is None:
        args.samples = 30 if args.quick else 200
    if args.samples < 1 or args.tokens < 1 or args.token_ms <= 0:
        raise SystemExit("--samples and --tokens must be >= 1, --token-ms > 0")
    args.load_at_start = os.getloadavg()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    started = time.monotonic()
    results = asyncio.run(main_async(args))
    out = report(results, args, time.monotonic() - started)
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=2))
    if not out["pass"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
