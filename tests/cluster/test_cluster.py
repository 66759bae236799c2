"""Three real nodes on a real redis-server: one space, whichever node a client is on."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import websockets

from hubbub.protocol.ids import ulid_time_ms
from tests.cluster.nodes import ClusterNode, leader_link, leader_of, start_cluster, stop_cluster
from tests.conftest import WsClient
from tests.interop.test_agentchat_identity import Keypair, keyed

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
async def nodes(redis_server: Any, tmp_path: Path) -> AsyncIterator[list[ClusterNode]]:
    started = await start_cluster(redis_server.url, tmp_path, 3)
    try:
        yield started
    finally:
        await stop_cluster(started)


def chat(text: str, mid: str | None = None, channel: str = "#general") -> dict[str, Any]:
    frame: dict[str, Any] = {"kind": "chat", "channel": channel, "payload": {"text": text}}
    if mid:
        frame["id"] = mid
    return frame


async def texts(c: WsClient, n: int, timeout: float = 10) -> list[tuple[int, str]]:
    """The next ``n`` chat messages a MEW client receives, as (seq, text)."""
    out = []
    for _ in range(n):
        f = await c.expect("chat", timeout)
        out.append((f["seq"], f["payload"]["text"]))
    return out


async def test_health_names_the_nodes_the_leader_and_redis(nodes: list[ClusterNode]) -> None:
    for node in nodes:
        h = await node.health()
        assert h["cluster"]["node"] == node.name
        assert h["cluster"]["leader"] == "node0"
        assert h["cluster"]["redis"]["reachable"] is True
        assert {n["node"] for n in h["cluster"]["nodes"]} == {"node0", "node1", "node2"}
    roles = [(await n.health())["cluster"]["role"] for n in nodes]
    assert roles == ["leader", "follower", "follower"]


async def test_both_dialects_on_three_nodes_see_one_order(nodes: list[ClusterNode]) -> None:
    a = await nodes[0].mew("alice")
    b = await nodes[1].mew("bob")
    c = await nodes[2].agentchat("carol")
    await a.send(chat("from a"))
    await b.send(chat("from b"))
    await c.send({"type": "MSG", "to": "#general", "content": "from c"})
    seen_a = await texts(a, 3)
    seen_b = await texts(b, 3)
    assert seen_a == seen_b
    assert [s for s, _ in seen_a] == sorted(s for s, _ in seen_a)
    got_c = [await c.expect_type("MSG") for _ in range(3)]
    assert [m["content"] for m in got_c] == [t for _, t in seen_a]
    # presence: bob's welcome listed alice; carol is seen coming online by alice
    assert "alice" in {p["id"] for p in b.welcome["payload"]["participants"]}


async def test_dm_between_nodes_and_history_over_http_on_a_follower(
    nodes: list[ClusterNode],
) -> None:
    a = await nodes[0].mew("alice")
    b = await nodes[2].mew("bob")
    await a.send({"kind": "chat", "to": ["bob"], "private": True, "payload": {"text": "psst"}})
    dm = await b.expect("chat")
    assert dm["payload"]["text"] == "psst" and dm["from"] == "alice"
    await b.send(chat("public"))
    await a.expect("chat")
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{nodes[1].http}/channels/general/messages") as resp,
    ):
        assert resp.status == 200, await resp.text()
        body = await resp.json()
    assert [m["payload"]["text"] for m in body["messages"]] == ["public"]


async def test_resume_from_another_node_gets_exactly_the_missed(nodes: list[ClusterNode]) -> None:
    a = await nodes[0].mew("alice")
    b = await nodes[1].mew("bob")
    await a.send(chat("one"))
    [(seq1, _)] = await texts(b, 1)
    await b.close()
    for t in ("two", "three"):
        await a.send(chat(t))
    await texts(a, 3)
    b2 = await nodes[2].connect()
    await b2.send(
        {"type": "join", "participantId": "bob", "space": "default", "resume": {"#general": seq1}}
    )
    joined = await b2.expect("channel/joined")
    replay = [m["payload"]["text"] for m in joined["payload"]["history"]]
    assert replay == ["two", "three"]
    await a.send(chat("four"))
    assert [t for _, t in await texts(b2, 1)] == ["four"]


async def test_floor_claims_from_different_nodes_are_arbitrated_once(
    nodes: list[ClusterNode],
) -> None:
    human = await nodes[0].mew("human")
    a = await nodes[1].mew("agent-a")
    b = await nodes[2].mew("agent-b")
    await human.send(chat("question?"))
    q = await human.expect("chat")
    await a.expect("chat")
    await b.expect("chat")
    t0 = ulid_time_ms(q["id"])
    claim = {"kind": "floor/responding-to", "channel": "#general"}
    await a.send(claim | {"payload": {"msg_id": q["id"], "started_at": t0 + 50}})
    await b.send(claim | {"payload": {"msg_id": q["id"], "started_at": t0 + 10}})
    y = await a.expect("floor/yield")
    assert y["payload"]["winner"] == "agent-b"
    await b.silent(lambda f: f.get("kind") == "floor/yield")


async def test_callback_of_a_killed_leader_fires_from_the_next(nodes: list[ClusterNode]) -> None:
    agent = await nodes[1].mew("agent")
    await agent.send(chat("back soon @@cb:3s@@"))
    echo = await agent.expect("chat")
    assert echo["payload"]["text"].startswith("back soon")
    due = time.time() + 3
    nodes[0].kill9()
    # the follower closes its clients (1012); the agent comes back on another node
    with contextlib.suppress(websockets.ConnectionClosed, TimeoutError):
        while True:
            await agent.recv(5)
    again = await _rejoin(nodes[2], "agent")
    fired = await again.next_where(
        lambda f: f.get("kind") == "chat" and f.get("from") == "system:gateway", 20
    )
    late = time.time() - due
    assert fired is not None
    assert late < 5.0, f"callback fired {late:.1f} s late"


async def _rejoin(node: ClusterNode, pid: str, timeout: float = 15) -> WsClient:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await node.mew(pid)
        except (TimeoutError, websockets.ConnectionClosed, OSError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def test_kill9_of_the_leader_under_load_loses_nothing(nodes: list[ClusterNode]) -> None:
    """Senders on every node; kill -9 the leader mid-stream; unacked sends are resent to a
    surviving node under the same id. History is gap-free and holds every acked message once."""
    acked: set[str] = set()
    stop = asyncio.Event()

    async def sender(name: str, home: int) -> None:
        n = 0
        pending: dict[str, dict[str, Any]] = {}
        order = [home, *[i for i in range(3) if i != home]]
        while not stop.is_set():
            for idx in order:
                node = nodes[idx]
                if node.proc is None or node.proc.poll() is not None:
                    continue
                try:
                    c = await node.mew(name, resume={})  # opts in to resends, as the SDK
                    for frame in list(pending.values()):  # resend, same id
                        await c.send(frame)
                    while not stop.is_set():
                        n += 1
                        mid = f"{name}-{n}"
                        pending[mid] = chat(mid, mid)
                        await c.send(pending[mid])
                        while True:
                            f = await c.recv(10)
                            if f.get("kind") == "chat" and f.get("from") == name:
                                acked.add(f["id"])
                                pending.pop(f["id"], None)
                                if f["id"] == mid:
                                    break
                            elif f.get("kind") == "system/error":
                                break
                except (websockets.ConnectionClosed, TimeoutError, OSError):
                    await asyncio.sleep(0.1)
                    continue
            await asyncio.sleep(0.1)

    tasks = [asyncio.create_task(sender(f"s{i}", i)) for i in range(3)]
    await asyncio.sleep(2)
    nodes[0].kill9()
    await asyncio.sleep(6)
    stop.set()
    await asyncio.gather(*tasks)
    survivor = nodes[1]
    async with aiohttp.ClientSession() as http:
        msgs: list[dict[str, Any]] = []
        after = 0
        while True:
            async with http.get(
                f"{survivor.http}/channels/general/messages",
                params={"after_seq": after, "limit": 500},
            ) as resp:
                page = (await resp.json())["messages"]
            if not page:
                break
            msgs += page
            after = page[-1]["seq"]
    seqs = [m["seq"] for m in msgs]
    ids = [m["id"] for m in msgs]
    assert seqs == list(range(1, len(seqs) + 1)), "seq gap or reuse"
    assert len(ids) == len(set(ids)), "a message stored twice"
    assert acked <= set(ids), f"acknowledged but lost: {sorted(acked - set(ids))[:5]}"
    assert len(acked) > 50


async def test_redis_away_refuses_with_unavailable_then_recovers(
    nodes: list[ClusterNode], redis_server: Any
) -> None:
    a = await nodes[1].mew("alice")
    await a.send(chat("before", "m-before"))
    await a.expect("chat")
    redis_server.stop()
    deadline = time.monotonic() + 10
    while (await nodes[1].health())["cluster"]["redis"]["reachable"]:
        assert time.monotonic() < deadline, "the node did not notice that Redis is away"
        await asyncio.sleep(0.2)
    await asyncio.sleep(1.0)  # the leader's supervision notices too
    await a.send(chat("during", "m-during"))
    err = await a.expect("system/error", timeout=10)
    assert err["payload"]["error"] == "unavailable", err
    assert "send it again" in err["payload"]["message"]
    redis_server.restart()
    deadline = time.monotonic() + 30
    got: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        try:
            await a.send(chat("after", "m-after"))
            got = await a.next_where(lambda f: f.get("kind") == "chat" and f["id"] == "m-after", 3)
            break
        except TimeoutError:
            continue
        except websockets.ConnectionClosed:
            a = await _rejoin(nodes[1], "alice")
    assert got is not None, "no message accepted after Redis came back"
    leader = await leader_of(nodes)
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{leader.http}/channels/general/messages") as resp,
    ):
        stored = [m["id"] for m in (await resp.json())["messages"]]
    assert "m-before" in stored and "m-after" in stored
    assert "m-during" not in stored  # refused, so not stored: the sender knows to resend


async def test_dm_buffered_for_a_sleeper_survives_the_leaders_death(
    nodes: list[ClusterNode],
) -> None:
    sleeper = await nodes[1].mew("sleeper")
    other = await nodes[2].mew("other")
    await sleeper.send(chat("nap @@sleep:60s@@"))
    await other.next_where(
        lambda f: (
            f.get("kind") == "system/presence"
            and f["payload"].get("participant", {}).get("presence") == "sleeping"
        )
    )
    await other.send(
        {"kind": "chat", "to": ["sleeper"], "private": True, "payload": {"text": "dm"}}
    )
    await other.expect("chat")  # the echo: stored
    await sleeper.silent(lambda f: f.get("kind") == "chat" and f["from"] == "other")
    nodes[0].kill9()
    with contextlib.suppress(websockets.ConnectionClosed, TimeoutError):
        while True:
            await sleeper.recv(5)
    back = await _rejoin(nodes[2], "sleeper")
    got = await back.next_where(lambda f: f.get("kind") == "chat" and f["from"] == "other", 10)
    assert got["payload"]["text"] == "dm"
    await back.silent(lambda f: f.get("kind") == "chat" and f["from"] == "other")


async def test_workers_share_one_port_and_a_dead_worker_is_replaced(
    redis_server: Any, tmp_path: Path
) -> None:
    node = ClusterNode("w", redis_server.url, tmp_path, extra=["--workers", "2"])
    node.spawn()
    try:
        await node.wait_ready()
        seen: set[str] = set()
        deadline = time.monotonic() + 20
        while len(seen) < 2 and time.monotonic() < deadline:
            # a new connection each time: the kernel spreads them over the workers
            with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                seen.add((await node.health())["cluster"]["node"])
            if len(seen) < 2:
                h = await node.health()
                seen.update(n["node"] for n in h["cluster"]["nodes"])
        assert len(seen) == 2, seen
        a = await node.mew("alice")
        b = await node.mew("bob")
        await a.send(chat("hello"))
        assert [t for _, t in await texts(b, 1)] == ["hello"]
        workers = (await node.health())["cluster"]["nodes"]
        assert {w["node"] for w in workers} == {"w-0", "w-1"}
        os.kill(workers[0]["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                pids = {n["pid"] for n in (await node.health())["cluster"]["nodes"]}
                if len(pids - {workers[0]["pid"]}) >= 2:  # the survivor and the replacement
                    break
            await asyncio.sleep(0.3)
        else:
            raise AssertionError("the dead worker was not replaced")
        assert node.proc is not None
        pids.discard(workers[0]["pid"])  # killed above
        node.proc.kill()  # the parent dies hard: its workers go with it
        node.proc.wait()
        deadline = time.monotonic() + 45  # SIGTERM: a graceful stop, at most STOP_GRACE_S (30 s)
        while pids and time.monotonic() < deadline:
            pids = {p for p in pids if _alive(p)}
            await asyncio.sleep(0.1)
        assert not pids, f"workers outlived their parent: {pids}"
    finally:
        await stop_cluster([node])


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for a reaper does not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


async def test_http_api_dashboard_and_its_event_stream_work_through_a_follower(
    nodes: list[ClusterNode],
) -> None:
    reader = await nodes[0].mew("reader")
    follower = nodes[2]
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{follower.http}/participants/poster/messages",
            json={"kind": "chat", "channel": "#general", "payload": {"text": "via http"}},
            headers={"Idempotency-Key": "k-1"},
        ) as resp:
            assert resp.status == 202, await resp.text()
            first = await resp.json()
        async with http.post(  # the same key again: the same answer, nothing twice
            f"{follower.http}/participants/poster/messages",
            json={"kind": "chat", "channel": "#general", "payload": {"text": "via http"}},
            headers={"Idempotency-Key": "k-1"},
        ) as resp:
            assert (await resp.json())["seq"] == first["seq"]
        got = await reader.expect("chat")
        assert got["payload"]["text"] == "via http" and got["from"] == "poster"
        await reader.silent(lambda f: f.get("kind") == "chat")
        async with http.get(f"{follower.http}/dashboard") as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/html")
        async with http.get(f"{follower.http}/dashboard/events") as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            chunk = await asyncio.wait_for(resp.content.readany(), 5)
            assert chunk.startswith((b"event:", b"data:", b":", b"id:", b"retry:"))
        async with http.get(f"{follower.http}/no/such/page") as resp:
            assert resp.status == 404


async def test_bad_input_on_a_follower_is_answered_and_the_link_port_is_closed_to_strangers(
    nodes: list[ClusterNode],
) -> None:
    a = await nodes[1].mew("alice")
    b = await nodes[2].mew("bob")
    for bad in ("{not json", '{"kind": 5}', '{"kind": "chat", "payload": {"text": 1}}', "[]"):
        await a.send(bad)
        err = await a.expect("system/error")
        assert err["payload"]["message"]
    await a.ws.send(b"\xff\xfe binary garbage")
    await a.expect("system/error")
    await a.send(chat("still fine"))
    assert [t for _, t in await texts(b, 1)] == ["still fine"]
    link = await leader_link(nodes[1])
    async with aiohttp.ClientSession() as http:
        async with http.get(f"http://{link}/cluster/link") as resp:
            assert resp.status == 403  # no cluster secret
        async with http.get(f"http://{link}/participants") as resp:
            assert resp.status == 403


async def test_sdk_client_with_every_node_fails_over_and_loses_nothing(
    nodes: list[ClusterNode],
) -> None:
    from hubbub.sdk import Client

    urls = [nodes[2].url, nodes[1].url, nodes[0].url]
    got: list[str] = []
    all_in = asyncio.Event()

    def on_chat(env: Any) -> None:
        if env.from_ == "writer":
            got.append(env.payload["text"])
            if len(got) >= 40:
                all_in.set()

    async with (
        Client(gateway=urls, participant_id="writer", connect_timeout=20) as writer,
        Client(gateway=list(reversed(urls)), participant_id="reader", connect_timeout=20) as rd,
    ):
        rd.on("chat", on_chat)
        assert writer.gateway_url == nodes[2].url
        for i in range(20):
            await writer.send(chat(f"m{i}"), ack=True)
        nodes[2].kill9()  # the writer's node, for good
        for i in range(20, 40):
            await asyncio.wait_for(writer.send(chat(f"m{i}"), ack=True), 20)
        assert writer.gateway_url in (nodes[1].url, nodes[0].url)
        await asyncio.wait_for(all_in.wait(), 10)
    assert got == [f"m{i}" for i in range(40)]


async def test_spaces_are_led_by_different_nodes_and_a_dead_leader_of_one_is_replaced(
    redis_server: Any, tmp_path: Path
) -> None:
    """Two spaces on three nodes: each space has its own leader (its own lease); clients of
    either space work from any node; killing one space's leader leaves the other untouched."""
    args: list[str] = []
    for sid in ("alpha", "beta"):
        (tmp_path / f"{sid}.yaml").write_text(f"space: {sid}\nopen: true\n")
        args += ["--space-config", str(tmp_path / f"{sid}.yaml")]
    nodes = [ClusterNode(f"node{i}", redis_server.url, tmp_path, extra=args) for i in range(3)]
    try:
        for node in nodes:
            node.spawn()
        for node in nodes:
            await node.wait_ready()
        deadline = time.monotonic() + 20
        while True:  # every space led (by whichever nodes took their leases)
            leaders = (await nodes[0].health())["cluster"]["leaders"]
            if all(leaders.values()):
                break
            assert time.monotonic() < deadline, leaders
            await asyncio.sleep(0.1)
        clients = {}
        for sid, i in (("alpha", 0), ("beta", 1)):
            for who, node in (("x", nodes[i]), ("y", nodes[2])):
                c = await node.connect()
                await c.send({"type": "join", "participantId": f"{who}-{sid}", "space": sid})
                await c.expect("system/welcome", timeout=10)
                await c.expect("channel/joined", timeout=10)
                clients[(who, sid)] = c
        for sid in ("alpha", "beta"):
            await clients[("x", sid)].send(chat(f"hello {sid}"))
            got = await clients[("y", sid)].expect("chat")
            assert got["payload"]["text"] == f"hello {sid}"
        async with aiohttp.ClientSession() as http:
            for sid in ("alpha", "beta"):
                url = f"{nodes[2].http}/channels/general/messages?space={sid}"
                async with http.get(url) as resp:
                    texts_ = [m["payload"]["text"] for m in (await resp.json())["messages"]]
                assert texts_ == [f"hello {sid}"]
        alpha_leader = next(n for n in nodes if n.name == leaders["alpha"])
        alpha_leader.kill9()
        survivors = [n for n in nodes if n is not alpha_leader]
        deadline = time.monotonic() + 15
        while True:
            now = (await survivors[0].health())["cluster"]["leaders"]
            if now["alpha"] not in (None, alpha_leader.name):
                break
            assert time.monotonic() < deadline, now
            await asyncio.sleep(0.1)
        if leaders["beta"] != alpha_leader.name:
            assert now["beta"] == leaders["beta"]  # the other space kept its leader
    finally:
        await stop_cluster(nodes)


async def test_keyed_agentchat_client_and_private_channel_across_nodes(
    nodes: list[ClusterNode],
) -> None:
    """A key proven on one node is the same identity on the leader; an invitation made on
    one node lets the invitee in on another, and outsiders elsewhere stay out."""
    key = Keypair()
    owner = await keyed(nodes[1], "owner", key)
    assert owner.welcome["agent_id"] == key.agent_id
    await owner.send({"type": "CREATE_CHANNEL", "channel": "#hideout", "invite_only": True})
    await owner.next_where(lambda f: f.get("type") == "JOINED" and f["channel"] == "#hideout")
    guest = await nodes[2].agentchat("guest")
    outsider = await nodes[0].agentchat("outsider")
    await owner.send({"type": "INVITE", "channel": "#hideout", "agent": "@guest"})
    await guest.next_where(lambda f: f.get("type") == "MSG" and "#hideout" in f["content"])
    await guest.send({"type": "JOIN", "channel": "#hideout"})
    await guest.next_where(lambda f: f.get("type") == "JOINED" and f["channel"] == "#hideout")
    await outsider.send({"type": "JOIN", "channel": "#hideout"})
    err = await outsider.next_where(lambda f: f.get("type") == "ERROR")
    assert err["code"] == "NOT_INVITED"
    # the one visibility rule holds on a follower too: a look-alike create names nothing,
    # and a MEW outsider's presence never lists the private channel
    await outsider.send({"type": "CREATE_CHANNEL", "channel": "#HideOut"})
    err = await outsider.next_where(lambda f: f.get("type") == "ERROR")
    assert err["code"] == "CHANNEL_EXISTS" and "#hideout" not in err["message"]
    watcher = await nodes[0].mew("watcher")
    late = await nodes[2].agentchat("late-guest", join=False)
    await owner.send({"type": "INVITE", "channel": "#hideout", "agent": "@late-guest"})
    await late.next_where(lambda f: f.get("type") == "MSG" and "#hideout" in f["content"])
    await late.close()
    again = await nodes[2].mew("late-guest", channels=["#general", "#hideout"])
    assert [c["name"] for c in again.welcome["payload"]["channels"]][:2] == ["#general", "#hideout"]
    joined = await watcher.next_where(
        lambda f: (
            f.get("kind") == "system/presence"
            and f["payload"].get("event") == "join"
            and f["payload"]["participant"]["id"] == "late-guest"
            and "#general" in f["payload"]["participant"].get("channels", ())
        )  # its MEW connect
    )
    assert joined["payload"]["participant"]["channels"] == ["#general"]
