"""A channel's fan-out reaches every awake member exactly once, whether its connection is
local or reached through a group (a cluster node's link on the leader), across joins, leaves,
sleeps, wakes and reconnects on another node."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import cast

from hypothesis import given
from hypothesis import strategies as st

from hubbub.protocol.capabilities import CapabilitySet
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.ids import Clock, UlidGenerator
from hubbub.server.config import Limits, SpaceConfig
from hubbub.server.core.delivery import DIALECTS, Delivery
from hubbub.server.state.activity import Activity
from hubbub.server.state.connection import Connection, Members
from hubbub.server.state.metrics import Metrics
from hubbub.server.state.port import Port, Sent
from hubbub.server.state.space import Channel, Session, SpaceState, TokenBucket

PIDS = ["a", "b", "c", "d"]
PLACES = ["local", "g1", "g2"]  # a local connection, or one reached through group g1 / g2


class Group:
    """Records what a fan-out hands to it (as a cluster link would queue it)."""

    def __init__(self, name: str, got: Counter[str]) -> None:
        self.name = name
        self.got = got
        self.calls = 0

    def send_many(self, frame: bytes, members: Members) -> None:
        self.calls += 1
        for m in members.values():
            self.got[f"{self.name}:{m}"] += 1


class Recorded(Connection):
    """A connection that counts the frames sent to it."""

    __slots__ = ("group", "key", "member", "tally")

    def __init__(self, key: str, tally: Counter[str], group: Group | None, member: int) -> None:
        self.closed = False
        self.dialect = DIALECTS["mew"]
        self.key = key
        self.tally = tally
        self.group = group
        self.member = member

    def send(self, frame: bytes, sent: Sent = None) -> bool:
        self.tally[self.key] += 1
        return True

    def flush(self) -> None:
        """Nothing is held: every frame was counted as it was sent."""

    def close(self, code: int, reason: str) -> None:
        self.closed = True


class Sink:
    """Stands for a connection: keeps what is sent to it."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.port = Port(1 << 30)

    def send(self, frame: bytes, sent: Sent = None) -> bool:
        self.frames.append(frame)
        return True


actions = st.lists(
    st.tuples(
        st.sampled_from(["join", "leave", "sleep", "wake", "move"]),
        st.sampled_from(PIDS),
        st.sampled_from(PLACES),
    ),
    max_size=40,
)


@given(actions=actions)
def test_every_awake_member_gets_each_message_once(actions: list[tuple[str, str, str]]) -> None:
    got: Counter[str] = Counter()
    groups = {name: Group(name, got) for name in ("g1", "g2")}
    space = SpaceState(SpaceConfig())
    ch = Channel("#general", 0, 10)
    sessions: dict[str, Session] = {}
    asleep: set[str] = set()
    numbers = iter(range(1, 10_000))

    def session(pid: str, place: str) -> Session:
        n = next(numbers)
        group = groups.get(place)
        key = f"{place}:{n}" if group else f"local:{pid}:{n}"
        conn = Recorded(key, got, group, n)
        caps = CapabilitySet([])
        return Session(pid, "agent", "member", space, conn, caps, TokenBucket(0, 1))

    for action, pid, place in actions:
        s = sessions.get(pid)
        if action == "join" and s is None:
            sessions[pid] = s = session(pid, place)
            ch.add(s)
        elif action == "leave" and s is not None:
            assert ch.remove(s)
            del sessions[pid]
            asleep.discard(pid)
        elif action in ("sleep", "wake") and s is not None:
            ch.set_asleep(s, action == "sleep")
            (asleep.add if action == "sleep" else asleep.discard)(pid)
        elif (
            action == "move" and s is not None
        ):  # reconnects elsewhere: the new session replaces it
            new = session(pid, place)
            ch.remove(s)
            sessions[pid] = new
            ch.add(new)
            if pid in asleep:
                ch.set_asleep(new, True)

    delivery = Delivery(Limits(), Metrics(), Activity(), Clock(), UlidGenerator())
    got.clear()
    delivery.fanout(ch, cast(Envelope, None), data=b"{}")
    expected = Counter(
        cast(Recorded, s.conn).key for pid, s in sessions.items() if pid not in asleep
    )
    assert got == expected
    for g in groups.values():  # one call per group that has an awake member, none otherwise
        awake_here = [s for p, s in sessions.items() if p not in asleep and s.conn.group is g]
        assert g.calls == (1 if awake_here else 0)
    assert delivery.metrics.messages_out == sum(expected.values())


def test_a_group_fanout_keeps_order_with_single_sends() -> None:
    """Frames fanned out to a group and sent to one of its members stay in order there."""
    from hubbub.cluster.leader_link import LeaderLink, RemoteConnection
    from hubbub.cluster.wire import decode_batch

    class FakeRouter:
        def on_overflow(self, conn: Connection) -> None:
            pass

    async def run() -> list[list[object]]:
        sink = Sink()
        link = LeaderLink(cast(object, FakeRouter()), "n", cast(Connection, sink))  # type: ignore[arg-type]
        one = RemoteConnection(link, 1, DIALECTS["mew"], "p1")
        two = RemoteConnection(link, 2, DIALECTS["mew"], "p2")
        both = Members()
        both.update(p1=1, p2=2)
        link.send_many(b"A", both)
        one.send(b"only-1")
        link.send_many(b"B", both)  # the same members: their packed ids again
        two.send(b"B")  # not the same object as the fan-out's frame: a new entry
        fanned = b"C" * 3
        link.send_many(fanned, both)
        three = RemoteConnection(link, 3, DIALECTS["mew"], "p3")
        three.send(fanned)  # the same frame object: added to the packed entry's ids
        await asyncio.sleep(0)
        assert len(sink.frames) == 1
        frame = sink.frames[0]
        payload = frame[2:] if frame[1] < 126 else frame[4:]
        return [list(m) for m in decode_batch(payload)]

    batch = asyncio.run(run())
    per_client: dict[int, list[bytes]] = {1: [], 2: [], 3: []}
    for kind, frame, sids in batch:
        assert kind == "out"
        for sid in cast(list[int], sids):
            per_client[sid].append(cast(bytes, frame))
    assert per_client == {
        1: [b"A", b"only-1", b"B", b"CCC"],
        2: [b"A", b"B", b"B", b"CCC"],
        3: [b"CCC"],
    }
    assert [len(cast(list[int], ids)) for _k, _f, ids in batch] == [2, 1, 3, 3]


def test_a_node_writes_each_client_its_frames_in_order_with_one_send_per_run() -> None:
    """The edge joins a run of frames for the same clients into one send, order kept."""
    from hubbub.cluster.edge import Uplink
    from hubbub.cluster.wire import encode_batch

    uplink = Uplink("n", "127.0.0.1:1", "secret", Metrics())
    sinks = {sid: Sink() for sid in (1, 2, 3)}
    uplink.clients.update(cast(dict[int, Connection], sinks))
    batch = [
        ["out", b"A", [1, 2]],
        ["out", b"B", [1, 2]],
        ["out", b"C", [1]],
        ["out", b"D", [1, 2]],
        ["out", b"E", [1, 2, 9]],  # 9: a client that already left
        ["out", b"F", [3]],
    ]
    assert uplink._deliver(encode_batch(cast(list[list[object]], batch)))
    assert [s.frames for s in sinks.values()] == [
        [b"AB", b"C", b"D", b"E"],
        [b"AB", b"D", b"E"],
        [b"F"],
    ]
