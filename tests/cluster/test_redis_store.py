"""The Redis store answers exactly like the in-memory reference, commits in one round trip,
acknowledges only what Redis holds, obeys the leader's fence and survives Redis' ``kill -9``."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hubbub.store import MemoryStore, Store
from hubbub.store.base import DM_STREAM, MessageRef
from hubbub.store.redis import FencedError, RedisStore, redis_client
from tests.cluster.redis_server import RedisServer
from tests.timing import SLOW_WAIT, until

SPACE = "s"

# ------------------------------------------------------------------ the contract vs MemoryStore

PIDS = ["x", "y", "z"]
ops = st.one_of(
    st.tuples(st.just("msg"), st.sampled_from(["#a", "#b"]), st.sampled_from(["", "m1", "m2"])),
    st.tuples(st.just("dm"), st.lists(st.sampled_from(PIDS), min_size=1, max_size=4), st.just("")),
    st.tuples(st.just("channel"), st.sampled_from(["#c", "#d", "#e"])),
    st.tuples(st.just("cb"), st.sampled_from(["c1", "c2", "c3"]), st.sampled_from([b"1", None])),
    st.tuples(st.just("mark"), st.sampled_from(PIDS), st.one_of(st.none(), st.integers(0, 9))),
    st.tuples(st.just("ban"), st.sampled_from(PIDS), st.booleans()),
    st.tuples(
        st.just("caps"),
        st.sampled_from(PIDS),
        st.sampled_from([None, [], [{"kind": "chat"}], [{"kind": "mcp/*", "payload": {"a": 1}}]]),
    ),
    st.tuples(st.just("forget"), st.integers(0, 400)),
    st.tuples(
        st.just("record"),
        st.sampled_from(["keys", "private"]),
        st.sampled_from(["alice", "#c"]),
        st.sampled_from([None, "pem", {"invited": ["a", "b"]}]),
    ),
    st.tuples(st.just("check")),
)
history_queries = st.tuples(
    st.sampled_from(["#a", "#b", "#none"]),
    st.one_of(st.none(), st.integers(-1, 40)),
    st.one_of(st.none(), st.integers(-1, 40)),
    st.integers(0, 12),
)


def place_of(op: tuple[Any, ...]) -> str | None:
    """The stream a generated operation appends to (None: it appends nothing)."""
    return op[1] if op[0] == "msg" else DM_STREAM if op[0] == "dm" else None


def apply(store: Store, op: tuple[Any, ...], seq: int, ts: int) -> None:
    """Queue one generated operation (a message with ``seq``, an id record with ``ts``)."""
    kind = op[0]
    if kind in ("msg", "dm"):
        place = place_of(op)
        data = f"{place}:{seq}:\x00\xff".encode("latin-1")
        ref = MessageRef(op[2] or f"id{ts}", "x", place, seq, ts)
        if kind == "msg":
            store.append(SPACE, op[1], seq, data, ref if op[2] or seq % 2 else None)
        else:
            store.append_dm(SPACE, seq, op[1], data, ref)
    elif kind == "channel":
        store.put_channel(SPACE, op[1])
    elif kind == "cb":
        store.put_callback(SPACE, op[1], op[2])
    elif kind == "mark":
        store.put_dm_mark(SPACE, op[1], op[2])
    elif kind == "ban":
        store.put_ban(SPACE, op[1], op[2])
    elif kind == "caps":
        store.put_capabilities(SPACE, op[1], op[2])
    elif kind == "forget":
        store.forget_refs(SPACE, op[1])
    elif kind == "record":
        store.put_record(SPACE, op[1], op[2], op[3])


async def answers(store: Store, queries: list[tuple[str, int | None, int | None, int]]) -> Any:
    """Everything a store can be asked about the space (callbacks compared as a set)."""
    out: list[Any] = []
    for ch, after, before, limit in queries:
        out.append(await store.history(SPACE, ch, after_seq=after, before_seq=before, limit=limit))
    out.append(await store.history(SPACE, "#a"))
    for pid in PIDS:
        for after, limit in ((0, 100), (3, 2), (-1, 0)):
            out.append(await store.dm_history(SPACE, pid, after_seq=after, limit=limit))
        for before, limit in ((None, 100), (None, 2), (4, 2), (1, 5), (0, 5), (9, 0)):
            out.append(await store.dm_history_before(SPACE, pid, before_seq=before, limit=limit))
    out.append(await store.last_seqs(SPACE))
    out.append(await store.channels(SPACE))
    out.append(sorted(await store.callbacks(SPACE)))
    out.append(await store.dm_marks(SPACE))
    out.append(await store.bans(SPACE))
    out.append(await store.capabilities(SPACE))
    out.append([await store.records(SPACE, t) for t in ("keys", "private", "none")])
    for since, limit in ((0, 1000), (150, 3), (0, 0)):
        out.append(await store.message_refs(SPACE, since, limit))
    out.append(await store.last_seqs("other-space"))
    return out


async def replay_on_both(
    mem: Store, red: Store, batch: list[tuple[Any, ...]], queries: list[Any]
) -> None:
    """Apply ``batch`` to both stores, numbered as the pipeline does (per channel, and for
    DMs), and check that they answer ``queries`` alike at each check and at the end."""
    seqs: dict[str, int] = {}
    for ts, op in enumerate(batch, start=1):
        if op[0] == "check":
            assert await answers(red, queries) == await answers(mem, queries)
            continue
        place = place_of(op)
        if place is not None:
            seqs[place] = seqs.get(place, 0) + 1
        for store in (mem, red):
            apply(store, op, seqs.get(place or "", 0), ts * 10)
    assert await answers(red, queries) == await answers(mem, queries)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batch=st.lists(ops, max_size=50), queries=st.lists(history_queries, max_size=6))
def test_redis_matches_memory(
    redis_server: RedisServer,
    batch: list[tuple[Any, ...]],
    queries: list[tuple[str, int | None, int | None, int]],
) -> None:
    async def run() -> None:
        prefix = "t" + uuid.uuid4().hex  # every example on a fresh set of keys
        client = redis_client(redis_server.url)
        mem, red = MemoryStore(), RedisStore(client, prefix=prefix)
        await mem.open()
        await red.open()
        await replay_on_both(mem, red, batch, queries)
        await red.close()

        again = RedisStore(client, prefix=prefix)  # a second store on the same Redis sees all
        await again.open()
        assert await again.epoch() == await red.epoch()
        assert await answers(again, queries) == await answers(mem, queries)
        await client.aclose()

    asyncio.run(run())


# ------------------------------------------------------------------ fixtures and helpers


@pytest.fixture
async def client(redis_server: RedisServer) -> AsyncIterator[Any]:
    """An asyncio client as the gateway makes it, with a short timeout."""
    c = redis_client(redis_server.url, timeout_s=2.0)
    yield c
    await c.aclose()


def reader(server: RedisServer) -> redis.Redis:
    """A second, synchronous client: what another node or an operator would see."""
    return redis.Redis.from_url(server.url)


@dataclass
class Lease:
    """A fence as the lead's lease provides it."""

    key: str = "hubbub:leader"
    held: str | None = "node-a"

    def value(self) -> str | None:
        return self.held


# ------------------------------------------------------------------ commits


async def test_commit_is_one_round_trip_and_callbacks_see_the_data_in_redis(
    redis_server: RedisServer, client: Any
) -> None:
    store = RedisStore(client)
    await store.open()
    other = reader(redis_server)
    other.config_resetstat()
    seen: list[tuple[int, list[int]]] = []

    def check(seq: int) -> None:  # runs on the event loop: reads Redis from another connection
        stored = other.xrange("hubbub:{s}:ch:#general")
        seen.append((seq, [int(i.partition(b"-")[0]) for i, _ in stored]))

    for seq in range(1, 2001):
        store.append(SPACE, "#general", seq, b'{"n":%d}' % seq)
        if seq % 100 == 0:
            store.after_commit(lambda seq=seq: check(seq))
    await store.flush()
    assert [s for s, _ in seen] == list(range(100, 2001, 100)), "in registration order"
    for seq, stored in seen:
        assert stored[-1] >= seq and stored == list(range(1, stored[-1] + 1))
    assert store.commits < 2000, "appends are group-committed"
    stats = other.info("commandstats")
    assert stats["cmdstat_evalsha"]["calls"] == store.commits, "one EVALSHA per commit"
    assert await store.ping_ms() > 0


async def test_the_script_is_loaded_again_after_redis_forgot_it(
    redis_server: RedisServer, client: Any
) -> None:
    store = RedisStore(client)
    await store.open()
    store.append(SPACE, "#general", 1, b"one")
    await store.flush()
    reader(redis_server).script_flush()
    store.append(SPACE, "#general", 2, b"two")
    await store.flush()
    assert [m.data for m in await store.history(SPACE, "#general")] == [b"one", b"two"]
    assert store.failed_commits == 0


async def test_a_seq_is_never_written_twice(client: Any) -> None:
    first, retry = RedisStore(client), RedisStore(client)
    await first.open()
    await retry.open()
    for seq in (1, 2, 3):
        first.append(SPACE, "#general", seq, b"first %d" % seq)
    first.append_dm(SPACE, 1, ["a", "b"], b"dm first")
    await first.flush()
    # the same batch sent again (its reply was lost), plus what came after it
    for seq in (2, 3, 4):
        retry.append(SPACE, "#general", seq, b"again %d" % seq)
    retry.append_dm(SPACE, 1, ["a", "b"], b"dm again")
    retry.append_dm(SPACE, 2, ["a"], b"dm new")
    await retry.flush()
    history = await retry.history(SPACE, "#general")
    assert [m.data for m in history] == [b"first 1", b"first 2", b"first 3", b"again 4"]
    assert [m.data for m in await retry.dm_history(SPACE, "a", after_seq=0, limit=9)] == [
        b"dm first",
        b"dm new",
    ]
    assert await retry.last_seqs(SPACE) == {"#general": 4, DM_STREAM: 2}


async def test_streams_and_id_records_are_capped(redis_server: RedisServer, client: Any) -> None:
    store = RedisStore(client, history_max=20, ids_max=50)
    await store.open()
    for seq in range(1, 1001):
        ref = MessageRef(f"m{seq}", "x", "#general", seq, 1000 + seq)
        store.append(SPACE, "#general", seq, b"%d" % seq, ref)
        store.append_dm(SPACE, seq, ["a", "b"], b"%d" % seq)
    await store.flush()
    other = reader(redis_server)
    for key in ("hubbub:{s}:ch:#general", "hubbub:{s}:dm:a", "hubbub:{s}:dm:b"):
        # MAXLEN ~ trims whole stream nodes (stream-node-max-entries, 100 by default)
        assert 20 <= other.xlen(key) <= 20 + 100, key
    assert [m.seq for m in await store.history(SPACE, "#general", limit=3)] == [998, 999, 1000]
    oldest = await store.history(SPACE, "#general", after_seq=0, limit=1)
    assert oldest[0].seq > 800
    assert await store.last_seqs(SPACE) == {"#general": 1000, DM_STREAM: 1000}
    refs = await store.message_refs(SPACE, 0, 10_000)
    assert 50 <= len(refs) < 60 and refs[-1].id == "m1000"
    assert other.hlen("hubbub:{s}:ids") == other.zcard("hubbub:{s}:ids:ts") == len(refs)


async def test_epoch_is_shared_and_new_only_when_redis_is_wiped(
    redis_server: RedisServer, client: Any
) -> None:
    a, b = RedisStore(client), RedisStore(client)
    await a.open()
    await b.open()
    assert await a.epoch() == await b.epoch() != ""
    reader(redis_server).flushall()
    c = RedisStore(client)
    await c.open()
    assert await c.epoch() != await a.epoch()


async def test_a_client_that_decodes_replies_is_refused_with_the_fix(
    redis_server: RedisServer,
) -> None:
    import redis.asyncio as aioredis

    decoding = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    with pytest.raises(ValueError, match="decode_responses=False"):
        RedisStore(decoding)
    await decoding.aclose()


# ------------------------------------------------------------------ the fence


async def test_a_fenced_commit_writes_nothing_and_runs_no_callback(
    redis_server: RedisServer, client: Any
) -> None:
    other = reader(redis_server)
    other.set("hubbub:leader", "node-b")  # another node holds the lease
    fenced: list[str] = []
    ran: list[str] = []
    store = RedisStore(client, Lease(held="node-a"), on_fenced=lambda: fenced.append("x"))
    await store.open()
    store.append(SPACE, "#general", 1, b"one", MessageRef("m1", "x", "#general", 1, 5))
    store.append_dm(SPACE, 1, ["a", "b"], b"dm")
    store.put_channel(SPACE, "#new")
    store.put_ban(SPACE, "eve", True)
    store.after_commit(lambda: ran.append("callback"))
    with pytest.raises(FencedError, match="another node holds the leader lease"):
        await store.flush()
    assert ran == [] and fenced == ["x"]
    assert sorted(other.keys("*")) == [b"hubbub:epoch", b"hubbub:leader"]
    store.append(SPACE, "#general", 2, b"two")  # later writes are dropped, not sent
    store.after_commit(lambda: ran.append("later"))
    await store.close()
    assert ran == [] and fenced == ["x"] and store.commits == 0
    assert sorted(other.keys("*")) == [b"hubbub:epoch", b"hubbub:leader"]


async def test_the_leader_writes_until_its_lease_moves(
    redis_server: RedisServer, client: Any
) -> None:
    other = reader(redis_server)
    other.set("hubbub:leader", "node-a")
    fenced: list[str] = []
    ran: list[int] = []
    store = RedisStore(client, Lease(held="node-a"), on_fenced=lambda: fenced.append("x"))
    await store.open()
    store.append(SPACE, "#general", 1, b"one")
    store.after_commit(lambda: ran.append(1))
    await store.flush()
    assert ran == [1] and fenced == [] and other.xlen("hubbub:{s}:ch:#general") == 1

    other.set("hubbub:leader", "node-b")  # the lease expired and another node took it
    store.append(SPACE, "#general", 2, b"two")
    store.after_commit(lambda: ran.append(2))
    with pytest.raises(FencedError):
        await store.flush()
    assert ran == [1] and fenced == ["x"] and other.xlen("hubbub:{s}:ch:#general") == 1


async def test_a_node_without_a_lease_writes_nothing(
    redis_server: RedisServer, client: Any
) -> None:
    fenced: list[str] = []
    store = RedisStore(client, Lease(held=None), on_fenced=lambda: fenced.append("x"))
    await store.open()
    store.put_ban(SPACE, "eve", True)
    with pytest.raises(FencedError):
        await store.flush()
    assert fenced == ["x"] and reader(redis_server).keys("hubbub:{s}:*") == []


# ------------------------------------------------------------------ Redis dies


async def test_redis_killed_and_restarted_loses_nothing_acknowledged(
    redis_server: RedisServer, client: Any
) -> None:
    store = RedisStore(client)
    await store.open()
    epoch = await store.epoch()
    acked: list[int] = []
    for seq in range(1, 51):
        store.append(SPACE, "#general", seq, b"%d" % seq)
        store.after_commit(lambda seq=seq: acked.append(seq))
    await store.flush()
    assert acked == list(range(1, 51)) and store.available

    redis_server.kill9()
    for seq in range(51, 61):
        store.append(SPACE, "#general", seq, b"%d" % seq)
        store.put_ban(SPACE, f"p{seq}", True)
        store.after_commit(lambda seq=seq: acked.append(seq))
    await until(lambda: store.failed_commits >= 2, SLOW_WAIT, "two failed commits")
    assert not store.available
    assert acked == list(range(1, 51)), "nothing is acknowledged while Redis is away"

    redis_server.restart()  # the same port and directory: Redis reloads its AOF
    await asyncio.wait_for(store.flush(), 30)
    assert store.available
    assert acked == list(range(1, 61))

    again = RedisStore(client)
    await again.open()
    assert await again.epoch() == epoch
    history = await again.history(SPACE, "#general", after_seq=0, limit=100)
    assert [m.seq for m in history] == list(range(1, 61))
    assert len(await again.bans(SPACE)) == 10


async def test_opening_without_redis_names_the_address_and_the_fix(
    redis_server: RedisServer, client: Any
) -> None:
    redis_server.stop()
    with pytest.raises(
        redis.ConnectionError,
        match=f"cannot reach Redis at 127.0.0.1:{redis_server.port}.*start redis-server",
    ):
        await RedisStore(client).open()


async def test_id_records_are_per_sender_and_the_latest_wins(client: Any) -> None:
    """A restarted MEW client reuses its ids; another sender may use the same id."""
    store = RedisStore(client)
    await store.open()
    first = MessageRef("ts-agent-1", "agent", "#general", 1, 5, 11)
    other = MessageRef("ts-agent-1", "bob", "#general", 2, 6)
    again = MessageRef("ts-agent-1", "agent", "#general", 3, 7, 33)
    for seq, ref in enumerate((first, other), start=1):
        store.append(SPACE, "#general", seq, b"x", ref)
    await store.flush()
    store.append(SPACE, "#general", 3, b"y", again)
    refs = await store.message_refs(SPACE, 0, 100)
    assert refs == [other, again]
