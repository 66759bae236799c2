"""Fuzzing one live gateway with thousands of random frames on both dialects.

One server runs for the whole test on its own event loop (driven with ``asyncio.Runner`` from a
synchronous hypothesis test, so it is started once and not per example). Each example sends a
barrage of random frames from four fuzz clients (two MEW, two agentchat) and a few random first
frames on new connections, then synchronises with every fuzz client through a sentinel frame
whose error names it. Afterwards: the server is up, a fresh MEW client and a fresh agentchat
client talk normally (channel and DM, both ways), no fuzz client was disconnected, and no
``internal_error`` (an unhandled exception) was answered or logged.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import websockets
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hubbub.protocol.agentchat import CLIENT_TYPES
from hubbub.protocol.envelope import CLIENT_KINDS, SERVER_KINDS
from hubbub.server.config import Limits
from tests.conftest import RunningGateway, WsClient, start_gateway, stop_gateway

pytestmark = pytest.mark.slow

EXAMPLES = 40
FRAMES_PER_EXAMPLE = 60  # at least; 40 x 60 = 2,400 frames
MIN_FRAMES = 2000
LIMITS = Limits(rate_per_s=0, max_frame_bytes=16 * 1024, max_payload_bytes=8 * 1024)

MEW_FUZZERS = ["fz-m0", "fz-m1"]
AGENTCHAT_FUZZERS = ["fz-a0", "fz-a1"]
TARGET = "fz-target"  # idle MEW member of #general; the only id capability frames may name
FUZZERS = MEW_FUZZERS + AGENTCHAT_FUZZERS

# ---------------------------------------------------------------------------------------------
# strategies
# ---------------------------------------------------------------------------------------------

SAFE_IDS = [TARGET, "nobody", "bad id", "bad/id", "", "system:gateway", "x" * 33, "@fz-a0"]
IDS = SAFE_IDS + FUZZERS
CHANNELS = ["#general", "#fuzz", "#nowhere", "general", "#", "#" + "x" * 32, "", "#bad chan"]
KINDS = sorted(
    CLIENT_KINDS | SERVER_KINDS | {"system/join", "system/heartbeat", "chat/shout", "CHAT", ""}
)
TYPES = [*CLIENT_TYPES, "WELCOME", "ERROR", "JOINED", "MSGX", "msg", ""]
AC_TARGETS = [*CHANNELS, *("@" + i for i in IDS), "@", "fz-a0"]
NASTY = [
    '{"kind":"chat","payload":{"text":"\\ud800"}}',
    '{"kind":"chat","payload":{"text":"\\udc00x"}}',
    '{"type":"MSG","to":"#general","content":"\\ud800\\u0041"}',
    '{"kind":"chat","payload":{"text":"x","n":1e400}}',
    '{"type":"RESPONDING_TO","msg_id":"m","channel":"#general","started_at":1e400}',
    '{"kind":"chat","payload":{"text":NaN}}',
    '{"kind":"chat","payload":{"text":"x"}}garbage',
    '{"kind":"chat","payload":{"text":"x"},"kind":"chat/shout"}',
    "",
    " ",
    "null",
    "[]",
    "{}",
]

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([-1, 0, 2**63, 2**64, 2**70, -(2**70)])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
seqs = st.integers(-3, 20) | st.sampled_from([2**62, 2**63, 2**70, -(2**70)]) | json_values
capabilities = (
    st.lists(
        st.fixed_dictionaries(
            {
                "kind": st.sampled_from(["chat", "mcp/*", "**", "/x+/", "/(/", "!chat", ""])
                | json_values
            },
            optional={"payload": json_values},
        ),
        max_size=3,
    )
    | json_values
)

payloads = st.fixed_dictionaries(
    {},
    optional={
        "text": st.text(max_size=60) | json_values,
        "channel": st.sampled_from(CHANNELS) | json_values,
        "after_seq": seqs,
        "before_seq": seqs,
        "limit": seqs,
        "msg_id": st.text(max_size=12) | json_values,
        "started_at": st.integers() | json_values,
        "recipient": st.sampled_from(SAFE_IDS) | json_values,
        "capabilities": capabilities,
        "event": st.sampled_from(["join", "leave", "update"]),
        "extra": json_values,
    },
)


def _safe_capability_target(env: dict[str, Any], target: str) -> dict[str, Any]:
    """Capability frames name only ids of SAFE_IDS, so fuzz clients keep their capabilities."""
    if str(env.get("kind", "")).startswith("capability/"):
        payload = env.get("payload")
        env["payload"] = {**(payload if isinstance(payload, dict) else {}), "recipient": target}
    return env


envelopes = st.tuples(
    st.fixed_dictionaries(
        {"kind": st.sampled_from(KINDS) | st.text(max_size=12)},
        optional={
            "channel": st.sampled_from(CHANNELS) | json_values,
            "to": st.lists(st.sampled_from(IDS), max_size=3) | json_values,
            "payload": payloads | json_values,
            "from": st.sampled_from(IDS) | json_values,
            "id": st.text(max_size=30) | json_values,
            "seq": st.integers() | json_values,
            "ts": st.text(max_size=30),
            "correlation_id": st.text(max_size=10) | st.lists(st.text(max_size=5), max_size=2),
            "context": st.text(max_size=10) | json_values,
            "protocol": st.sampled_from(["mew/v0.4", "mew/v9", ""]) | json_values,
        },
    ),
    st.sampled_from([i for i in SAFE_IDS if i]),
).map(lambda pair: _safe_capability_target(*pair))

agentchat_frames = st.fixed_dictionaries(
    {"type": st.sampled_from(TYPES) | st.text(max_size=10) | json_values},
    optional={
        "to": st.sampled_from(AC_TARGETS) | json_values,
        "content": st.text(max_size=60) | json_values,
        "channel": st.sampled_from(CHANNELS) | json_values,
        "after_seq": seqs,
        "msg_id": st.text(max_size=12) | json_values,
        "started_at": st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | json_values,
        "name": st.text(max_size=12) | json_values,
        "token": st.text(max_size=12) | json_values,
        "from": st.sampled_from(AC_TARGETS),
    },
)

# Well-typed frames get past the decoders to the router's checks and to delivery.
new_channels = st.from_regex(r"#fz[a-z]{1,2}", fullmatch=True)
any_channel = st.sampled_from(CHANNELS) | new_channels
good_seqs = st.integers(-3, 30) | st.sampled_from([2**62, 2**63, 2**70])
good_payloads = st.fixed_dictionaries(
    {},
    optional={
        "text": st.text(max_size=60),
        "channel": any_channel,
        "after_seq": good_seqs,
        "before_seq": good_seqs,
        "limit": st.integers(0, 2000),
        "msg_id": st.text(max_size=12),
        "started_at": st.integers(0, 2**53),
        "capabilities": capabilities,
        "extra": json_values,
    },
)
good_envelopes = st.tuples(
    st.fixed_dictionaries(
        {"kind": st.sampled_from(KINDS)},
        optional={
            "channel": any_channel,
            "to": st.lists(st.sampled_from(IDS), max_size=3),
            "payload": good_payloads,
            "from": st.sampled_from(IDS),
            "id": st.text(max_size=30),
            "correlation_id": st.lists(st.text(max_size=5), max_size=2),
        },
    ),
    st.sampled_from([i for i in SAFE_IDS if i]),
).map(lambda pair: _safe_capability_target(*pair))
good_agentchat = st.one_of(
    st.fixed_dictionaries(
        {
            "type": st.just("MSG"),
            "to": st.sampled_from(AC_TARGETS) | new_channels,
            "content": st.text(max_size=60),
        }
    ),
    st.fixed_dictionaries(
        {"type": st.just("JOIN"), "channel": st.sampled_from(CHANNELS) | new_channels},
        optional={"after_seq": good_seqs},
    ),
    st.fixed_dictionaries(
        {"type": st.just("LEAVE"), "channel": st.sampled_from(CHANNELS) | new_channels}
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("RESPONDING_TO"),
            "msg_id": st.text(max_size=12),
            "started_at": st.integers(0, 2**53) | st.floats(0, 1e15),
            "channel": st.sampled_from(CHANNELS),
        }
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["LIST_AGENTS", "CREATE_CHANNEL"]), "channel": new_channels}
    ),
    st.fixed_dictionaries({"type": st.sampled_from(["LIST_CHANNELS", "PING"])}),
    st.fixed_dictionaries({"type": st.just("IDENTIFY"), "name": st.text(max_size=12)}),
)

real_key_dicts = st.dictionaries(
    st.sampled_from(
        ["kind", "type", "payload", "to", "channel", "from", "id", "seq", "content", "ts"]
    ),
    json_values | st.sampled_from(KINDS) | st.sampled_from(TYPES) | st.sampled_from(CHANNELS),
    max_size=6,
)


def _as_frame(value: Any, binary: bool) -> str | bytes:
    text = json.dumps(value)
    return text.encode() if binary else text


def _nest(depth: int, opener: str) -> str:
    closer = {"[": "]", "{": "}"}[opener]
    if opener == "{":
        return '{"a":' * depth + "1" + closer * depth
    return opener * depth + closer * depth


json_frames = st.builds(
    _as_frame, json_values | real_key_dicts | envelopes | agentchat_frames, st.booleans()
)
good_frames = st.builds(_as_frame, good_envelopes | good_agentchat, st.booleans())
truncated = st.builds(
    lambda value, cut: json.dumps(value)[: max(1, cut)],
    envelopes | agentchat_frames,
    st.integers(1, 80),
)
random_bytes = st.binary(max_size=200)
invalid_utf8 = st.builds(
    lambda junk, ac: (
        (
            b'{"type":"MSG","to":"#general","content":"'
            if ac
            else b'{"kind":"chat","payload":{"text":"'
        )
        + junk
        + b'"}}'
    ),
    st.binary(min_size=1, max_size=16).filter(lambda b: not _is_utf8(b)),
    st.booleans(),
)
oversized = st.builds(
    lambda n, ac: json.dumps(
        {"type": "MSG", "to": "#general", "content": "x" * n}
        if ac
        else {"kind": "chat", "payload": {"text": "y" * n}}
    ),
    st.integers(7_000, 40_000),
    st.booleans(),
)
deep = st.builds(
    lambda depth, opener, balanced, ac: (
        (
            '{"type":"MSG","to":"#general","content":"d","x":'
            if ac
            else '{"kind":"chat","payload":{"text":"d","x":'
        )
        + (_nest(depth, opener) if balanced else opener * depth)
        + ("}" if ac else "}}")
    ),
    st.integers(1, 3000) | st.integers(95, 105),
    st.sampled_from(["[", "{"]),
    st.booleans(),
    st.booleans(),
)
garbage_text = st.text(max_size=200)


def weighted(*choices: tuple[int, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    """Pick a strategy with the given weights (``one_of`` would weigh them equally)."""
    table = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.integers(0, len(table) - 1).flatmap(lambda i: table[i])


not_json = st.one_of(truncated, random_bytes, invalid_utf8, garbage_text, st.sampled_from(NASTY))
frames = weighted((9, good_frames), (5, json_frames), (3, not_json), (1, oversized), (2, deep))

hello_ids = st.from_regex(r"hs-[a-z0-9]{1,8}", fullmatch=True)
good_hellos = st.fixed_dictionaries(
    {"type": st.sampled_from(["join", "IDENTIFY"]), "participantId": hello_ids, "name": hello_ids},
    optional={
        "space": st.sampled_from(["default", "nope"]),
        "token": st.sampled_from(["", "tok-unknown"]),
        "kind": st.sampled_from(["human", "agent", "service", "robot"]),
        "capabilities": st.lists(
            st.fixed_dictionaries({"kind": st.sampled_from(["chat", "**", "/(/", "", "mcp/*"])}),
            max_size=2,
        ),
        "channels": st.lists(st.sampled_from(CHANNELS), max_size=3),
        "resume": st.dictionaries(st.sampled_from([*CHANNELS, "@dm"]), good_seqs, max_size=3),
    },
).map(json.dumps)
loose_hellos = st.fixed_dictionaries(
    {"type": st.sampled_from(["join", "IDENTIFY", "JOIN", "identify", "MSG"])},
    optional={
        "participantId": st.from_regex(r"hs-[a-z0-9]{1,8}", fullmatch=True) | json_values,
        "name": st.text(max_size=12) | json_values,
        "space": st.sampled_from(["default", "nope", ""]) | json_values,
        "token": st.text(max_size=12) | json_values,
        "kind": st.sampled_from(["human", "agent", "service", "robot"]) | json_values,
        "capabilities": capabilities,
        "channels": st.lists(st.sampled_from(CHANNELS), max_size=3) | json_values,
        "resume": st.dictionaries(st.sampled_from([*CHANNELS, "@dm"]), st.integers()) | json_values,
    },
).map(json.dumps)
first_frames = weighted((4, good_hellos), (2, loose_hellos), (2, frames))


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode()
    except UnicodeDecodeError:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# clients
# ---------------------------------------------------------------------------------------------


def is_error(frame: dict[str, Any]) -> bool:
    return frame.get("kind") == "system/error" or frame.get("type") == "ERROR"


def error_code(frame: dict[str, Any]) -> str:
    return str(frame["payload"]["error"] if "kind" in frame else frame["code"]).lower()


def error_message(frame: dict[str, Any]) -> str:
    return str(frame["payload"]["message"] if "kind" in frame else frame["message"])


class Reader:
    """Drains one fuzz client all the time, notes internal errors, and answers sentinels."""

    def __init__(self, name: str, client: WsClient, dialect: str) -> None:
        self.name = name
        self.client = client
        self.dialect = dialect
        self.internal: list[dict[str, Any]] = []
        self.errors = 0
        self.frames = 0
        self._waiting: dict[str, asyncio.Future[None]] = {}
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        async for raw in self.client.ws:
            frame = json.loads(raw)
            self.frames += 1
            if not is_error(frame):
                continue
            self.errors += 1
            if error_code(frame) == "internal_error":
                self.internal.append(frame)
            message = error_message(frame)
            for token, fut in list(self._waiting.items()):
                if token in message and not fut.done():
                    fut.set_result(None)

    @property
    def alive(self) -> bool:
        return not self.task.done()

    async def sync(self, token: str) -> None:
        """Send a sentinel whose error names ``token``; wait until it comes back."""
        fut = asyncio.get_running_loop().create_future()
        self._waiting[token] = fut
        if self.dialect == "mew":
            await self.client.send({"kind": f"system/sentinel-{token}"})  # never routed
        else:
            await self.client.send({"type": f"SENTINEL_{token}"})
        try:
            await asyncio.wait_for(fut, 30)
        finally:
            del self._waiting[token]


async def random_first_frame(gw: RunningGateway, frame: str | bytes) -> str:
    """Open a connection with a random first frame: welcome, or an error and close 1008, or
    (an agentchat frame before IDENTIFY) AUTH_REQUIRED on a connection that IDENTIFY can
    still use."""
    # max_queue=None: keep reading even if nobody consumes (welcome, joins, history replay),
    # or the close handshake would wait behind unread frames
    ws = await websockets.connect(
        gw.url, max_size=None, max_queue=None, compression=None, close_timeout=2
    )
    try:
        await ws.send(frame)
        first = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if first.get("kind") == "system/welcome" or first.get("type") == "WELCOME":
            return "welcome"
        if first.get("type") in ("PONG", "CHANNELS"):  # answered before IDENTIFY
            return "answered"
        assert is_error(first), first
        assert error_code(first) != "internal_error", first
        if error_code(first) == "auth_required":
            await ws.send(json.dumps({"type": "IDENTIFY", "name": "hs-late"}))
            welcome = json.loads(await asyncio.wait_for(ws.recv(), 10))
            assert welcome["type"] == "WELCOME", welcome
            return "auth_required"
        await asyncio.wait_for(ws.wait_closed(), 10)
        assert ws.close_code == 1008, (ws.close_code, first)
        return error_code(first)
    finally:
        await ws.close()


# ---------------------------------------------------------------------------------------------
# the test
# ---------------------------------------------------------------------------------------------


async def _exchange(gw: RunningGateway) -> None:
    """A fresh MEW and a fresh agentchat client exchange channel messages and DMs."""
    mew = await gw.mew("zz-verify-m")
    ac = await gw.agentchat("zz-verify-a")

    def chat(text: str) -> Callable[[dict[str, Any]], bool]:
        def match(f: dict[str, Any]) -> bool:
            assert not is_error(f), f
            got = f["payload"].get("text") if f.get("kind") == "chat" else f.get("content")
            return (f.get("kind") == "chat" or f.get("type") == "MSG") and got == text

        return match

    await mew.send({"kind": "chat", "channel": "#general", "payload": {"text": "verify m->#"}})
    frame = await ac.next_where(chat("verify m->#"), 10)
    assert frame["from"] == "@zz-verify-m" and frame["to"] == "#general"
    await ac.send({"type": "MSG", "to": "#general", "content": "verify a->#"})
    frame = await mew.next_where(chat("verify a->#"), 10)
    assert frame["from"] == "zz-verify-a" and frame["channel"] == "#general"
    await mew.send(
        {"kind": "chat", "to": ["zz-verify-a"], "private": True, "payload": {"text": "verify m->a"}}
    )
    frame = await ac.next_where(chat("verify m->a"), 10)
    assert frame["from"] == "@zz-verify-m" and frame["to"] == "@zz-verify-a"
    await ac.send({"type": "MSG", "to": "@zz-verify-m", "content": "verify a->m"})
    frame = await mew.next_where(chat("verify a->m"), 10)
    assert frame["from"] == "zz-verify-a" and frame["to"] == ["zz-verify-m"]
    assert "channel" not in frame


def test_fuzz_one_live_gateway(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    with asyncio.Runner() as runner:
        gw = runner.run(start_gateway(tmp_path, limits=LIMITS))
        try:
            _fuzz(runner, gw)
        finally:
            runner.run(stop_gateway(gw))
    gc.collect()  # "Task exception was never retrieved" is logged when the task is collected
    logged = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not logged, [f"{r.name}: {r.getMessage()}" for r in logged]


def _fuzz(runner: asyncio.Runner, gw: RunningGateway) -> None:
    async def setup() -> dict[str, Reader]:
        readers = {}
        for name in [*MEW_FUZZERS, TARGET]:
            readers[name] = Reader(name, await gw.mew(name), "mew")
        for name in AGENTCHAT_FUZZERS:
            readers[name] = Reader(name, await gw.agentchat(name), "agentchat")
        return readers

    readers = runner.run(setup())
    stats = {"frames": 0, "examples": 0, "first_frames": 0}
    outcomes: dict[str, int] = {}

    async def barrage(
        batch: list[tuple[int, str | bytes]], firsts: list[str | bytes], n: int
    ) -> None:
        for index, frame in batch:
            await readers[FUZZERS[index]].client.ws.send(frame)
        for frame in firsts:
            outcome = await random_first_frame(gw, frame)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        await asyncio.gather(*(readers[name].sync(f"s{n}x{name}") for name in FUZZERS))
        for name, reader in readers.items():
            assert reader.alive, f"{name} was disconnected: {reader.client.ws.close_code}"
            assert not reader.internal, reader.internal

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def one_example(data: st.DataObject) -> None:
        batch = data.draw(
            st.lists(
                st.tuples(st.integers(0, len(FUZZERS) - 1), frames),
                min_size=FRAMES_PER_EXAMPLE,
                max_size=FRAMES_PER_EXAMPLE + 10,
            ),
            label="frames",
        )
        firsts = data.draw(st.lists(first_frames, max_size=3), label="first frames")
        stats["examples"] += 1
        runner.run(barrage(batch, firsts, stats["examples"]))
        stats["frames"] += len(batch)
        stats["first_frames"] += len(firsts)

    one_example()

    assert stats["frames"] >= MIN_FRAMES, stats
    assert gw.router.metrics.errors["internal_error"] == 0, gw.router.metrics.errors
    # the barrage did reach the parsers and the router, not only one error path
    errors = gw.router.metrics.errors
    for code in ("invalid_json", "invalid_envelope", "unknown_kind", "frame_too_large"):
        assert errors[code] > 0, errors
    assert gw.router.spaces["default"].channels["#general"].seq > 0  # and delivery
    assert outcomes.get("welcome", 0) > 0 and len(outcomes) > 1, outcomes

    async def verify() -> None:
        async with aiohttp.ClientSession() as http, http.get(f"{gw.http}/health") as resp:
            assert resp.status == 200
            assert (await resp.json())["status"] == "healthy"
        await _exchange(gw)
        for name, reader in readers.items():
            assert reader.alive, f"{name} was disconnected"
            assert not reader.internal, reader.internal

    runner.run(verify())
    assert gw.router.metrics.errors["internal_error"] == 0, gw.router.metrics.errors
    seq = gw.router.spaces["default"].channels["#general"].seq
    print(f"fuzz: {stats}, #general seq {seq}, first frames {outcomes}, errors {dict(errors)}")
