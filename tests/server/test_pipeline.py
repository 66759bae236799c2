"""The message pipeline without sockets: admission, sequencer and delivery, on a MemoryStore
and on SQLite (whose group commit delivers a burst of one channel's messages in one go).

Each participant is a recorded receiver (its port's envelopes kept as they are drained), each
frame goes through :meth:`Gateway.receive` exactly as the WebSocket hands it over, and the
engines run on an injected clock. A test settles by waiting for the store's commits, never for time.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from hubbub.protocol.dialects import MEW
from hubbub.protocol.envelope import Envelope, materialized, to_builtins
from hubbub.protocol.hello import Hello
from hubbub.protocol.ids import SERVER_ID
from hubbub.protocol.markers import WAKE
from hubbub.server.config import Limits, open_space
from hubbub.server.gateway import Gateway
from hubbub.server.state.connection import Connection
from hubbub.server.state.port import Port
from hubbub.server.state.space import Session
from hubbub.store.memory import MemoryStore
from hubbub.store.sqlite import SqliteStore


class Recorded(Connection):
    """A MEW receiver whose driver keeps every envelope drained from its port (as the wire
    names its fields) and counts the frames."""

    __slots__ = ("got", "sends")

    def __init__(self) -> None:
        super().__init__(MEW, Port(1 << 20, envelopes=True), lambda c: None, "test")
        self.got: list[dict[str, Any]] = []
        self.sends = 0

    def flush(self) -> None:
        for _data, sent in self.port.drain():
            envs = [sent] if isinstance(sent, Envelope) else list(sent or ())
            assert envs, "a frame for a MEW receiver carries its envelopes"
            self.got.extend(to_builtins(materialized(e)) for e in envs)
            self.sends += 1
        self.port.settle(0)

    def close(self, code: int, reason: str) -> None:
        self.closed = True


class Clock:
    """The engines' clock, moved by the test."""

    def __init__(self) -> None:
        self.ms = 1_800_000_000_000.0

    def __call__(self) -> float:
        return self.ms


class Peer:
    """One attached participant: what it sends in, what it got."""

    def __init__(self, gw: Gateway, session: Session, conn: Recorded) -> None:
        self.gw = gw
        self.session = session
        self.conn = conn

    def send(self, env: dict[str, Any]) -> None:
        """Hand one frame to the gateway as the WebSocket would."""
        self.gw.receive(self.session, msgspec.json.encode(env))

    def got(self, kind: str) -> list[dict[str, Any]]:
        """The envelopes of ``kind`` received so far, in order."""
        return [e for e in self.conn.got if e.get("kind") == kind]

    def texts(self) -> list[str]:
        """The texts of the chat messages received so far, in order."""
        return [e["payload"]["text"] for e in self.got("chat")]

    def errors(self) -> list[str]:
        """The codes of the errors received so far."""
        return [e["payload"]["error"] for e in self.got("system/error")]


class Pipeline:
    """A gateway over a store with recorded connections."""

    def __init__(self, gw: Gateway, clock: Clock) -> None:
        self.gw = gw
        self.clock = clock

    async def attach(self, pid: str, **hello: Any) -> Peer:
        """Connect ``pid`` (a MEW join of #general unless ``channels`` says otherwise)."""
        h = Hello(participant_id=pid, channels=hello.pop("channels", ["#general"]), **hello)
        conn = Recorded()
        session = await self.gw.attach(self.gw.authenticate(h), conn, h)
        await self.settle()
        return Peer(self.gw, session, conn)

    async def settle(self) -> None:
        """Wait until everything accepted so far is committed and delivered."""
        for _ in range(3):
            await self.gw.durable()
            await asyncio.sleep(0)
        while self.gw.tasks.running:  # a resend's echo reads the store in the background
            await asyncio.sleep(0.001)
            await self.gw.durable()


@pytest.fixture(params=["memory", "sqlite"])
async def pipe(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Pipeline]:
    clock = Clock()
    limits = Limits(presence_coalesce_ms=0, rate_per_s=0)
    store = MemoryStore() if request.param == "memory" else SqliteStore(tmp_path / "h.db")
    gw = Gateway([open_space()], store, limits, engine_clock=clock)
    await gw.start()
    yield Pipeline(gw, clock)
    await gw.stop()


def chat(text: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "chat", "payload": {"text": text}, **extra}


async def test_channel_message_reaches_every_member_once_numbered(pipe: Pipeline) -> None:
    alice, bob = await pipe.attach("alice"), await pipe.attach("bob")
    alice.send(chat("one", channel="#general"))
    alice.send(chat("two"))  # #general by default
    await pipe.settle()
    assert bob.texts() == alice.texts() == ["one", "two"]
    assert [e["seq"] for e in bob.got("chat")] == [1, 2]
    assert all(e["from"] == "alice" and e["channel"] == "#general" for e in bob.got("chat"))


async def test_dm_reaches_its_parties_only_and_moves_their_marks(pipe: Pipeline) -> None:
    alice, bob, carol = [await pipe.attach(p) for p in ("alice", "bob", "carol")]
    alice.send(chat("psst", to=["bob", "bob"], private=True))
    await pipe.settle()
    (dm,) = bob.got("chat")
    assert dm["to"] == ["bob"] and "channel" not in dm and dm["seq"] == 1
    assert alice.texts() == ["psst"] and carol.texts() == []
    space = pipe.gw.spaces["default"]
    assert space.dm_seq == 1 and space.dm_marks["bob"] == space.dm_marks["alice"] == 1


async def test_resend_is_answered_with_the_original_and_delivered_once(pipe: Pipeline) -> None:
    alice, bob = await pipe.attach("alice", resends=True), await pipe.attach("bob")
    alice.send(chat("once", id="m-1"))
    await pipe.settle()
    alice.send(chat("once", id="m-1"))  # the same message again: a resend
    await pipe.settle()
    assert bob.texts() == ["once"]
    assert alice.texts() == ["once", "once"]  # its lost echo, sent again
    assert pipe.gw.metrics.resends == 1
    alice.send(chat("changed", id="m-1"))  # the same id, another message: a new one
    bob.send(chat("mine", id="m-1"))  # another sender's id is never refused
    await pipe.settle()
    assert bob.errors() == [] and bob.texts() == ["once", "changed", "mine"]
    bob.send(chat("mine", id="m-1"))  # bob did not opt in: every frame is a message
    await pipe.settle()
    assert alice.texts()[-2:] == ["mine", "mine"] and pipe.gw.metrics.resends == 1


async def test_capability_refusal_names_the_kind_and_delivers_nothing(pipe: Pipeline) -> None:
    allowed = [{"kind": "chat"}, {"kind": "channel/join"}]
    alice = await pipe.attach("alice", capabilities=allowed)
    bob = await pipe.attach("bob")
    alice.send({"kind": "mcp/request", "id": "r-1", "payload": {"method": "tools/list"}})
    await pipe.settle()
    (error,) = alice.got("system/error")
    assert error["payload"]["error"] == "capability_violation"
    assert error["payload"]["attempted_kind"] == "mcp/request"
    assert error["correlation_id"] == ["r-1"]
    assert bob.got("mcp/request") == []


async def test_banned_sender_is_refused_before_anything_is_numbered(pipe: Pipeline) -> None:
    alice, bob = await pipe.attach("alice"), await pipe.attach("bob")
    pipe.gw.bans.ban("default", "alice")
    alice.send(chat("let me in"))
    await pipe.settle()
    assert alice.errors() == ["banned"] and bob.texts() == []
    assert pipe.gw.spaces["default"].channels["#general"].assigned == 0


async def test_rate_limit_refuses_the_frame_over_the_burst(pipe: Pipeline) -> None:
    pipe.gw.rates.rate, pipe.gw.rates.burst = 0.001, 2
    alice, bob = await pipe.attach("alice"), await pipe.attach("bob")
    for text in ("a", "b", "c"):
        alice.send(chat(text))
    await pipe.settle()
    assert bob.texts() == ["a", "b"] and alice.errors() == ["rate_limited"]


async def test_join_while_a_message_is_uncommitted_gets_it_live_without_gap(
    pipe: Pipeline,
) -> None:
    alice = await pipe.attach("alice")
    alice.send(chat("before"))
    await pipe.settle()
    bob = await pipe.attach("bob", channels=[])
    alice.send(chat("in flight"))  # numbered, not yet committed
    ch = pipe.gw.spaces["default"].channels["#general"]
    assert (ch.assigned, ch.seq) == (2, 1)
    await pipe.gw.sequencer.join(bob.session, ch, after_seq=0)
    await pipe.settle()
    (joined,) = bob.got("channel/joined")
    history = [m["payload"]["text"] for m in joined["payload"]["history"]]
    assert history == ["before"] and joined["payload"]["seq"] == 1
    assert bob.texts() == ["in flight"]  # live, once, after the history


async def test_a_sleeper_buffers_channel_messages_until_its_wake(pipe: Pipeline) -> None:
    alice, bob = await pipe.attach("alice"), await pipe.attach("bob")
    bob.send(chat("@@sleep:60s:buffer@@"))
    await pipe.settle()
    assert bob.session.wake_at is not None
    alice.send(chat("while you slept"))
    await pipe.settle()
    assert bob.texts() == []  # held by the sleep engine, not written
    pipe.clock.ms += 61_000
    pipe.gw.coordination.run_due()
    await pipe.settle()
    wake, held = bob.got("chat")
    assert wake["from"] == SERVER_ID and wake["payload"]["text"] == WAKE
    assert wake["payload"]["buffered"] == 1 and held["payload"]["text"] == "while you slept"


async def test_a_sleeper_wakes_when_it_speaks_the_wake_dm_first(pipe: Pipeline) -> None:
    alice, bob = await pipe.attach("alice"), await pipe.attach("bob")
    bob.send(chat("@@sleep:60s@@"))
    await pipe.settle()
    bob.send(chat("back"))
    await pipe.settle()
    assert bob.session.wake_at is None
    assert bob.texts() == [WAKE, "back"] and alice.texts() == ["back"]


async def test_unknown_destination_is_refused_before_markers_schedule(pipe: Pipeline) -> None:
    alice = await pipe.attach("alice")
    alice.send(chat("@@cb:30s@@later", channel="#nowhere", id="c-1"))
    await pipe.settle()
    (error,) = alice.got("system/error")
    assert error["payload"]["error"] == "unknown_channel" and error["correlation_id"] == ["c-1"]
    assert pipe.gw.coordination.participant_state(alice.session.space, "alice") == {
        "pending_callbacks": 0
    }


async def test_a_burst_keeps_its_order_around_dms_and_sleepers(pipe: Pipeline) -> None:
    """Messages accepted in one turn reach every member in the order they were accepted,
    DMs and the sleepers' buffers included; a run of one channel's messages that one commit
    stores reaches a member in one write (SQLite's group commit; MemoryStore has none)."""
    alice, bob, carol, dave = [await pipe.attach(p) for p in ("alice", "bob", "carol", "dave")]
    sends = carol.conn.sends
    for i in range(20):
        (alice, bob)[i % 2].send(chat(f"first {i}"))
    alice.send(chat("just for carol", to=["carol"], private=True))
    for i in range(20):
        (bob, alice)[i % 2].send(chat(f"then {i}"))
    await pipe.settle()
    burst = [f"first {i}" for i in range(20)] + [f"then {i}" for i in range(20)]
    got = carol.got("chat")
    assert [e["payload"]["text"] for e in got] == [*burst[:20], "just for carol", *burst[20:]]
    seqs = [e["seq"] for e in got if e.get("channel") == "#general"]
    assert seqs == sorted(seqs) and len(set(seqs)) == 40
    assert alice.texts() == [*burst[:20], "just for carol", *burst[20:]]
    assert bob.texts() == dave.texts() == burst
    if isinstance(pipe.gw.store, SqliteStore):  # three runs: before the DM, the DM, after it
        assert carol.conn.sends - sends == 3

    dave.send(chat("@@sleep:60s:buffer@@"))
    await pipe.settle()
    for i in range(10):
        (alice, bob)[i % 2].send(chat(f"asleep {i}"))
    await pipe.settle()
    later = [f"asleep {i}" for i in range(10)]
    assert bob.texts()[40:] == later
    pipe.clock.ms += 61_000
    pipe.gw.coordination.run_due()
    await pipe.settle()
    wake, *held = dave.got("chat")[40:]
    assert wake["payload"]["buffered"] == 10
    assert [e["payload"]["text"] for e in held] == later
