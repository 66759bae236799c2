"""The dashboard's event stream: the snapshot of a space with a sleeper, and the live feed."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp

from hubbub.protocol.ids import ulid_time_ms
from tests.conftest import WsClient
from tests.dashboard.conftest import open_events, person
from tests.engines_live.conftest import EngineGateway


def _chat(text: str, channel: str = "#general") -> dict[str, Any]:
    return {"kind": "chat", "channel": channel, "payload": {"text": text}}


def _dm(to: str, text: str) -> dict[str, Any]:
    return {"kind": "chat", "to": [to], "private": True, "payload": {"text": text}}


async def _sleeping(gw: EngineGateway, sleeper: WsClient, marker: str) -> None:
    await sleeper.send(_chat(marker))
    await gw.synced(sleeper)
    assert sleeper.welcome["payload"]["you"]["id"] in {
        e.participant for e in gw.router.coordination.spaces["default"].sleep.sleepers()
    }


async def test_snapshot_shows_a_sleeper_its_buffer_callbacks_and_the_floor(
    dgw: EngineGateway,
) -> None:
    sleeper = await dgw.mew("sleeper")
    alice = await dgw.mew("alice", kind="human")
    agent = await dgw.mew("agent")
    await alice.send(_chat("who knows?"))
    question = await agent.expect("chat")
    started = int(dgw.clock())
    claim = {"msg_id": question["id"], "started_at": started}
    await agent.send({"kind": "floor/responding-to", "channel": "#general", "payload": claim})
    await sleeper.send(_chat("@@cb:300s@@check the build"))
    await _sleeping(dgw, sleeper, "@@sleep:60s@@")
    for n in range(3):
        await alice.send(_dm("sleeper", f"dm {n}"))
    await dgw.synced(alice)
    before = int(dgw.clock())  # the snapshot's "now" is whole milliseconds
    async with open_events(dgw) as events:
        snap = await events.next("snapshot")
        assert before <= snap["now"] <= dgw.clock() + 1
        me = person(snap, "sleeper")
        assert me["presence"] == "sleeping" and me["online"] is True
        assert me["sleeping"]["mode"] == "default" and me["sleeping"]["buffered"] == 3
        assert abs(me["sleeping"]["wake_at"] - (before + 60_000)) < 5_000
        assert me["pending_callbacks"] == 1 and me["channels"] == ["#general"]
        assert person(snap, "alice")["kind"] == "human"
        assert person(snap, "agent")["presence"] == "online"
        assert "sleeping" not in person(snap, "agent")
        (general,) = [c for c in snap["channels"] if c["name"] == "#general"]
        assert general["members"] == ["agent", "alice", "sleeper"]
        assert general["sleeping"] == ["sleeper"]
        (held,) = snap["floor"]
        assert held["holder"] == "agent" and held["msg_id"] == question["id"]
        assert held["channel"] == "#general" and held["expires_at"] > snap["now"]
        names = [e["event"] for e in snap["recent"]]
        for wanted in ("connect", "claim", "callback-scheduled", "sleep"):
            assert wanted in names, names
        assert snap["viewer"]["can_admin"] is True and snap["proposals"] == []

        dgw.tick(61)  # the sleeper's wake-up falls due
        wake = await events.activity("wake", participant="sleeper")
        assert wake["reason"] == "timer" and wake["buffered"] == 3
        state = await events.next("state", lambda s: "sleeping" not in person(s, "sleeper"))
        assert person(state, "sleeper")["presence"] == "online"
        assert state["channels"][0]["sleeping"] == []
        assert "recent" not in state


async def test_buffered_count_updates_live(dgw: EngineGateway) -> None:
    sleeper = await dgw.mew("sleeper")
    alice = await dgw.mew("alice")
    await _sleeping(dgw, sleeper, "@@sleep:120s:buffer@@")
    async with open_events(dgw) as events:
        await events.next("snapshot")
        await alice.send(_chat("one"))
        await alice.send(_chat("two"))
        state = await events.next(
            "state", lambda s: person(s, "sleeper").get("sleeping", {}).get("buffered") == 2
        )
        assert person(state, "sleeper")["sleeping"]["mode"] == "buffer"


async def test_live_feed_messages_membership_presence_and_errors(dgw: EngineGateway) -> None:
    alice = await dgw.mew("alice", kind="human")
    async with open_events(dgw) as events:
        await events.next("snapshot")
        bob = await dgw.mew("bob")
        got = await events.activity("connect", participant="bob")
        assert got["kind"] == "agent" and got["channels"] == ["#general"]
        await alice.send(_chat("hello bob"))
        msg = await events.activity("message", participant="alice")
        assert msg["channel"] == "#general" and msg["text"] == "hello bob" and msg["seq"] == 1
        await alice.send(_dm("bob", "a secret"))
        dm = await events.activity("message", participant="alice", dm=True)
        assert dm["to"] == ["bob"] and "text" not in dm  # DM text is not shown to observers
        await alice.send({"kind": "channel/create", "payload": {"channel": "#ops"}})
        await events.activity("join", participant="alice", channel="#ops")
        await alice.send({"kind": "channel/leave", "payload": {"channel": "#ops"}})
        await events.activity("leave", participant="alice", channel="#ops")
        await bob.send({"kind": "participant/status", "payload": {"presence": "away"}})
        await events.activity("presence", participant="bob", presence="away")
        await bob.send({"kind": "chat", "channel": "#nope", "payload": {"text": "x"}})
        err = await events.activity("error", participant="bob")
        assert err["code"] == "unknown_channel" and "#nope" in err["message"]
        await bob.close()
        await events.activity("disconnect", participant="bob")
        state = await events.next("state", lambda s: person(s, "bob")["presence"] == "offline")
        assert person(state, "bob")["online"] is False


async def test_claims_and_yields_are_in_the_feed(dgw: EngineGateway) -> None:
    alice = await dgw.mew("alice", kind="human")
    first = await dgw.mew("first")
    second = await dgw.mew("second")
    async with open_events(dgw) as events:
        await events.next("snapshot")
        await alice.send(_chat("anyone?"))
        question = await first.expect("chat")
        await second.expect("chat")
        t0 = ulid_time_ms(question["id"])  # a claim may not start before the message itself
        late = {"msg_id": question["id"], "started_at": t0 + 2}
        early = {"msg_id": question["id"], "started_at": t0 + 1}
        await second.send({"kind": "floor/responding-to", "channel": "#general", "payload": late})
        await events.activity("claim", participant="second")
        await first.send({"kind": "floor/responding-to", "channel": "#general", "payload": early})
        # the new holder first, then the yield it causes (the order a reader expects)
        await events.activity("claim", participant="first")
        yielded = await events.activity("yield", participant="second")
        assert yielded["winner"] == "first" and yielded["msg_id"] == question["id"]
        state = await events.next("state", lambda s: [c["holder"] for c in s["floor"]] == ["first"])
        assert state["floor"][0]["msg_id"] == question["id"]
        await first.send({**_chat("here is the answer"), "correlation_id": [question["id"]]})
        released = await events.activity("claim-released", participant="first")
        assert released["reason"] == "answered"
        await events.next("state", lambda s: s["floor"] == [])


async def test_a_refused_claim_and_an_unclaimed_question_are_in_the_feed(
    dgw: EngineGateway,
) -> None:
    alice = await dgw.mew("alice", kind="human")
    maths = await dgw.mew("maths", kind="agent")
    chef = await dgw.mew("chef", kind="agent")
    async with open_events(dgw) as events:
        await events.next("snapshot")
        await alice.send(_chat("what is 6*7?"))
        question = await maths.expect("chat")
        await chef.expect("chat")
        await maths.send({**_chat("42"), "correlation_id": [question["id"]]})
        await chef.expect("chat")
        claim = {"msg_id": question["id"], "started_at": ulid_time_ms(question["id"]) + 1}
        await chef.send({"kind": "floor/responding-to", "channel": "#general", "payload": claim})
        refused = await events.activity("claim-refused", participant="chef")
        assert (refused["reason"], refused["winner"]) == ("answered", "maths")
        await alice.send(_chat("anyone been to Lima?"))
        open_question = await alice.next_where(
            lambda f: f.get("kind") == "chat" and f["payload"]["text"] == "anyone been to Lima?"
        )
        await dgw.synced(alice)
        dgw.tick(31)
        unclaimed = await events.activity("unclaimed", participant="alice")
        assert unclaimed["msg_id"] == open_question["id"] and unclaimed["after_s"] == 30


async def test_proposals_and_their_outcomes(dgw: EngineGateway) -> None:
    agent = await dgw.mew("agent")
    human = await dgw.mew("human", kind="human")
    calc = await dgw.mew("calc", kind="service")
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "add", "arguments": {"a": 2, "b": 3}},
    }
    async with open_events(dgw) as events:
        await events.next("snapshot")
        await agent.send(
            {"kind": "mcp/proposal", "channel": "#general", "to": ["calc"], "payload": call}
        )
        proposed = await events.activity("proposal", participant="agent")
        assert proposed["method"] == "tools/call" and proposed["tool"] == "add"
        assert proposed["arguments"] == {"a": 2, "b": 3} and proposed["to"] == ["calc"]
        assert proposed["payload"] == call and proposed["status"] == "pending"
        state = await events.next("state")
        assert "proposals" not in state  # a state push does not repeat the board (issue 21)
        # the human fulfils it, the target answers: approved, then the result
        proposal = await human.expect("mcp/proposal")
        await human.send(
            {
                "kind": "mcp/request",
                "to": ["calc"],
                "correlation_id": [proposal["id"]],
                "payload": proposal["payload"],
            }
        )
        approved = await events.activity("proposal-approved", id=proposal["id"])
        assert approved["participant"] == "human"
        request = await calc.expect("mcp/request")
        result = {"content": [{"type": "text", "text": "5"}]}
        await calc.send(
            {
                "kind": "mcp/response",
                "to": [request["from"]],
                "correlation_id": [request["id"]],
                "payload": {"jsonrpc": "2.0", "id": 7, "result": result},
            }
        )
        done = await events.activity("proposal-result", id=proposal["id"])
        assert done["participant"] == "calc" and done["ok"] is True and done["result"] == "5"
        # a rejected one and a withdrawn one
        for outcome in ("mcp/reject", "mcp/withdraw"):
            await agent.send(
                {"kind": "mcp/proposal", "channel": "#general", "to": ["calc"], "payload": call}
            )
            pending = await events.activity("proposal", participant="agent")
            who = human if outcome == "mcp/reject" else agent
            await who.send(
                {
                    "kind": outcome,
                    "channel": "#general",
                    "to": ["agent"],
                    "correlation_id": [pending["id"]],
                    "payload": {"reason": "not now"},
                }
            )
            name = "proposal-rejected" if outcome == "mcp/reject" else "proposal-withdrawn"
            ended = await events.activity(name, id=pending["id"])
            assert ended["reason"] == "not now"
    async with open_events(dgw) as events:
        assert (await events.next("snapshot"))["proposals"] == []  # all settled


async def test_pending_proposals_are_in_the_snapshot(dgw: EngineGateway) -> None:
    agent = await dgw.mew("agent")
    await dgw.mew("calc")
    payload = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    await agent.send(
        {"kind": "mcp/proposal", "channel": "#general", "to": ["calc"], "payload": payload}
    )
    await dgw.synced(agent)
    async with open_events(dgw) as events:
        snap = await events.next("snapshot")
    (pending,) = snap["proposals"]
    assert pending["participant"] == "agent" and pending["method"] == "tools/list"
    assert pending["channel"] == "#general" and pending["payload"] == payload


async def test_the_stream_only_shows_its_own_space_and_stops_cleanly(
    dgw: EngineGateway,
) -> None:
    async with open_events(dgw) as events:
        await events.next("snapshot")
        dgw.router.activity.publish("claim", "elsewhere", participant="ghost")
        dgw.router.activity.publish("claim", "default", participant="here")
        got = await events.next("activity")
        assert got["participant"] == "here"
    started = time.monotonic()
    async with open_events(dgw) as events:
        await events.next("snapshot")
        stopping = asyncio.create_task(dgw.runner.cleanup())
        await asyncio.wait_for(stopping, 10)
    assert time.monotonic() - started < 10
    assert dgw.router.activity.watched is False


async def test_a_large_proposal_is_loaded_on_demand_and_pushes_stay_small(
    dgw: EngineGateway,
) -> None:
    """Issue 21 item 8: payloads past observe.PAYLOAD_MAX are left out of the feed and the
    snapshot and loaded by id; a state push never carries the board."""
    agent = await dgw.mew("agent")
    await dgw.mew("calc")
    big = {"text": "x" * 7800}
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": big},
    }
    async with open_events(dgw) as events:
        await events.next("snapshot")
        for _ in range(20):
            await agent.send(
                {"kind": "mcp/proposal", "channel": "#general", "to": ["calc"], "payload": call}
            )
        proposed = await events.activity("proposal", participant="agent")
        assert "payload" not in proposed and "arguments" not in proposed
        assert proposed["payload_omitted"] is True and proposed["payload_bytes"] > 7800
        assert (
            proposed["args_preview"].startswith('{"text":"xxx')
            and len(proposed["args_preview"]) <= 200
        )
        await dgw.mew("someone")  # a presence change: a state push follows
        state = await events.next(
            "state", lambda s: any(p["id"] == "someone" for p in s["participants"])
        )
        assert "proposals" not in state
    async with open_events(dgw) as events:
        snap = await events.next("snapshot")
    assert len(snap["proposals"]) == 20 and all("payload" not in p for p in snap["proposals"])
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{dgw.http}/dashboard/proposals/{proposed['id']}") as resp:
            assert resp.status == 200
            body = await resp.json()
        assert body == {"id": proposed["id"], "open": True, "payload": call}
        async with http.get(f"{dgw.http}/dashboard/proposals/nope") as resp:
            assert resp.status == 404
            assert "no recent proposal 'nope'" in (await resp.json())["message"]


async def test_the_payload_endpoint_needs_an_observer(team: EngineGateway) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{team.http}/dashboard/proposals/x", params={"space": "team"}) as resp,
    ):
        assert resp.status == 401
