"""Floor control over real sockets, on both dialects, with the documents' field names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hubbub.protocol.ids import iso_to_ms, ulid_time_ms
from tests.conftest import WsClient, stop_gateway
from tests.engines_live.conftest import EngineGateway, ManualClock, start_engine_gateway


async def _question(asker: WsClient, *others: WsClient) -> dict[str, Any]:
    await asker.send({"kind": "chat", "channel": "#general", "payload": {"text": "question?"}})
    msg = await asker.expect("chat")
    for o in others:
        await o.next_where(lambda f: f.get("kind") == "chat" or f.get("type") == "MSG")
    return msg


def _claim(msg_id: str, started_at: int) -> dict[str, Any]:
    return {
        "kind": "floor/responding-to",
        "channel": "#general",
        "payload": {"msg_id": msg_id, "started_at": started_at},
    }


async def test_earlier_claim_displaces_holder_who_gets_yield(egw: EngineGateway) -> None:
    human = await egw.mew("human")
    a = await egw.mew("agent-a")
    b = await egw.mew("agent-b")
    q = await _question(human, a, b)
    t0 = ulid_time_ms(q["id"])
    await a.send(_claim(q["id"], t0 + 20))
    relay = await human.expect("floor/responding-to")
    assert relay["from"] == "agent-a"
    assert relay["payload"] == {"msg_id": q["id"], "started_at": t0 + 20}
    claimed = await human.expect("floor/claimed")
    assert claimed["payload"]["holder"] == "agent-a"
    await b.send(_claim(q["id"], t0 + 10))  # started earlier: b wins
    y = await a.expect("floor/yield")
    assert y["from"] == "system:gateway"
    assert y["payload"] == {
        "msg_id": q["id"],
        "winner": "agent-b",
        "winner_started_at": t0 + 10,
        "reason": "another claim has an earlier started_at",
    }
    assert y["channel"] == "#general"
    claimed = await human.expect("floor/claimed")
    assert claimed["payload"]["holder"] == "agent-b"
    await b.silent(lambda f: f.get("kind") == "floor/yield")


async def test_later_claim_yields_at_once(egw: EngineGateway) -> None:
    human = await egw.mew("human")
    a = await egw.mew("agent-a")
    b = await egw.mew("agent-b")
    q = await _question(human, a, b)
    t0 = ulid_time_ms(q["id"])
    await a.send(_claim(q["id"], t0 + 5))
    await b.send(_claim(q["id"], t0 + 50))
    y = await b.expect("floor/yield")
    assert y["payload"]["winner"] == "agent-a"
    await a.silent(lambda f: f.get("kind") == "floor/yield")
    holder = egw.router.coordination.spaces["default"].floor.holder("#general", q["id"])
    assert holder is not None and holder.holder == "agent-a"


async def test_tie_goes_to_smaller_id(egw: EngineGateway) -> None:
    human = await egw.mew("human")
    zed = await egw.mew("zed")
    amy = await egw.mew("amy")
    q = await _question(human, zed, amy)
    t = ulid_time_ms(q["id"]) + 7
    await zed.send(_claim(q["id"], t))
    await amy.send(_claim(q["id"], t))
    y = await zed.expect("floor/yield")
    assert y["payload"]["winner"] == "amy"


async def test_human_claim_outranks_earlier_agent(egw: EngineGateway) -> None:
    asker = await egw.mew("asker")
    agent = await egw.mew("agent")
    person = await egw.mew("person", kind="human")
    q = await _question(asker, agent, person)
    t0 = ulid_time_ms(q["id"])
    await agent.send(_claim(q["id"], t0 + 1))
    await person.send(_claim(q["id"], t0 + 500))
    y = await agent.expect("floor/yield")
    assert y["payload"]["winner"] == "person"


async def test_holder_reclaim_is_idempotent(egw: EngineGateway) -> None:
    human = await egw.mew("human")
    a = await egw.mew("agent-a")
    q = await _question(human, a)
    t0 = ulid_time_ms(q["id"])
    await a.send(_claim(q["id"], t0 + 3))
    await human.expect("floor/claimed")
    await a.send(_claim(q["id"], t0 + 1))
    await human.silent(lambda f: str(f.get("kind", "")).startswith("floor/"))
    holder = egw.router.coordination.spaces["default"].floor.holder("#general", q["id"])
    assert holder is not None and holder.started_at == t0 + 3


async def test_an_answer_ends_the_claim_and_a_later_claim_is_refused(egw: EngineGateway) -> None:
    human = await egw.mew("human")
    a = await egw.mew("agent-a")
    b = await egw.mew("agent-b")
    q = await _question(human, a, b)
    t0 = ulid_time_ms(q["id"])
    await a.send(_claim(q["id"], t0 + 1))
    await human.expect("floor/claimed")
    floor = egw.router.coordination.spaces["default"].floor
    await a.send({"kind": "chat", "channel": "#general", "payload": {"text": "by the way"}})
    await human.expect("chat")
    assert floor.holder("#general", q["id"]) is not None  # its other chat ends nothing
    await a.send(
        {
            "kind": "chat",
            "channel": "#general",
            "correlation_id": [q["id"]],
            "payload": {"text": "the answer"},
        }
    )
    answer = await human.expect("chat")
    assert floor.holder("#general", q["id"]) is None
    await b.send(_claim(q["id"], t0 + 2))
    refused = await b.expect("floor/yield")
    assert refused["payload"] == {
        "msg_id": q["id"],
        "winner": "agent-a",
        "reason": f"{q['id']} was answered already by agent-a (message {answer['id']}); "
        "do not answer it again",
        "refused": "answered",
        "answer": answer["id"],
    }
    await human.silent(lambda f: f.get("kind") == "floor/claimed")


async def test_claim_expires_after_ttl(egw: EngineGateway) -> None:
    human = await egw.mew("human")
    a = await egw.mew("agent-a")
    q = await _question(human, a)
    await a.send(_claim(q["id"], ulid_time_ms(q["id"]) + 1))
    await human.expect("floor/claimed")
    floor = egw.router.coordination.spaces["default"].floor
    egw.tick(44)
    assert floor.holder("#general", q["id"]) is not None
    egw.tick(2)
    assert floor.holder("#general", q["id"]) is None
    assert any(
        e["event"] == "claim-released" and e["reason"] == "expired"
        for e in egw.router.activity.recent
    )


async def test_disconnect_releases_claims(egw: EngineGateway) -> None:
    human = await egw.mew("human")
    a = await egw.mew("agent-a")
    q = await _question(human, a)
    await a.send(_claim(q["id"], ulid_time_ms(q["id"]) + 1))
    await human.expect("floor/claimed")
    await a.close()
    await human.expect("system/presence")
    assert egw.router.coordination.spaces["default"].floor.holder("#general", q["id"]) is None


async def test_bad_claims_get_clear_errors(egw: EngineGateway) -> None:
    human = await egw.mew("human")
    a = await egw.mew("agent-a")
    q = await _question(human, a)
    t0 = ulid_time_ms(q["id"])
    cases = [
        (_claim("01NOTAMESSAGEOFTHISCHANNEL", t0), "not a recent message"),
        (_claim(q["id"], t0 - 5000), "before the message"),
        (_claim(q["id"], t0 + 60_000), "in the future"),
        (
            {
                "kind": "floor/responding-to",
                "to": ["human"],
                "payload": {"msg_id": q["id"], "started_at": t0},
            },
            "channel messages only",
        ),
        (
            {
                "kind": "floor/responding-to",
                "channel": "#general",
                "payload": {"msg_id": q["id"], "started_at": "soon"},
            },
            "Unix time in ms",
        ),
        (
            {"kind": "floor/responding-to", "channel": "#general", "payload": {"started_at": t0}},
            "needs 'msg_id'",
        ),
    ]
    for frame, words in cases:
        await a.send(frame)
        err = await a.expect("system/error")
        assert err["payload"]["error"] == "invalid_claim", err
        assert words in err["payload"]["message"], err
    await human.silent(lambda f: str(f.get("kind", "")).startswith("floor/"))


async def test_refused_claims_are_silent_on_agentchat(egw: EngineGateway) -> None:
    """agentchat's server ignores a bad RESPONDING_TO; so does this dialect (no ERROR)."""
    bob = await egw.agentchat("bob")
    eve = await egw.agentchat("eve")
    await bob.send({"type": "RESPONDING_TO", "msg_id": "x", "started_at": 1, "channel": "@eve"})
    await bob.send({"type": "PING"})
    answer = await bob.next_where(lambda f: f.get("type") in ("PONG", "ERROR"))
    assert answer["type"] == "PONG", answer  # the claim before it got no ERROR
    await bob.silent(lambda f: f.get("type") == "ERROR")
    await eve.silent(lambda f: f.get("type") in ("RESPONDING_TO", "FLOOR_CLAIMED"))


async def test_agentchat_frames_match_the_document(egw: EngineGateway) -> None:
    human = await egw.mew("human")
    a = await egw.agentchat("a1")
    b = await egw.agentchat("b1")
    await human.send({"kind": "chat", "channel": "#general", "payload": {"text": "who knows?"}})
    msg = await a.expect_type("MSG")
    await b.expect_type("MSG")
    t0 = msg["ts"]
    await b.send(
        {
            "type": "RESPONDING_TO",
            "msg_id": msg["msg_id"],
            "started_at": t0 + 40,
            "channel": "#general",
        }
    )
    relay = await a.expect_type("RESPONDING_TO")
    assert relay["from"] == "@b1" and relay["msg_id"] == msg["msg_id"]
    assert relay["started_at"] == t0 + 40 and relay["channel"] == "#general"
    fc = await a.expect_type("FLOOR_CLAIMED")
    assert fc["agent"] == "@b1" and fc["msg_id"] == msg["msg_id"]
    assert fc["holder"] == "@b1" and fc["holder_name"] == "b1"
    await a.send(
        {
            "type": "RESPONDING_TO",
            "msg_id": msg["msg_id"],
            "started_at": t0 + 10,
            "channel": "#general",
        }
    )
    y = await b.expect_type("YIELD")
    assert y == {
        "type": "YIELD",
        "msg_id": msg["msg_id"],
        "winner": "@a1",
        "holder": "@a1",
        "holder_started_at": t0 + 10,
        "reason": "another claim has an earlier started_at",
        "channel": "#general",
        "ts": y["ts"],
    }
    mew_view = await human.expect("floor/claimed")
    while mew_view["payload"]["holder"] != "a1":
        mew_view = await human.expect("floor/claimed")


async def test_disabled_floor_relays_without_tracking(tmp_path: Any) -> None:
    from tests.conftest import stop_gateway
    from tests.engines_live.conftest import start_engine_gateway

    gw = await start_engine_gateway(tmp_path, respond_enabled=False)
    try:
        human = await gw.mew("human")
        a = await gw.mew("agent-a")
        b = await gw.mew("agent-b")
        q = await _question(human, a, b)
        t0 = ulid_time_ms(q["id"])
        await a.send(_claim(q["id"], t0 + 9))
        await b.send(_claim(q["id"], t0 + 1))
        assert (await human.expect("floor/responding-to"))["from"] == "agent-a"
        assert (await human.expect("floor/responding-to"))["from"] == "agent-b"
        await a.silent(lambda f: f.get("kind") in ("floor/yield", "floor/claimed"))
    finally:
        await stop_gateway(gw)


async def test_claim_on_a_message_sent_before_a_restart(tmp_path: Path) -> None:
    clock = ManualClock()
    gw = await start_engine_gateway(tmp_path, clock)
    human = await gw.mew("human")
    q = await _question(human)
    await stop_gateway(gw)
    gw = await start_engine_gateway(tmp_path, clock)  # the same SQLite file
    try:
        human = await gw.mew("human")
        a = await gw.mew("agent-a")
        await a.send(_claim(q["id"], ulid_time_ms(q["id"]) + 5))
        got = await a.next_where(lambda f: f.get("kind") in ("floor/claimed", "system/error"))
        assert got["kind"] == "floor/claimed", got
        assert got["payload"]["holder"] == "agent-a" and got["payload"]["msg_id"] == q["id"]
        assert (await human.expect("floor/claimed"))["payload"]["holder"] == "agent-a"
    finally:
        await stop_gateway(gw)


async def test_restart_recalls_the_recent_message_ids(tmp_path: Path) -> None:
    gw = await start_engine_gateway(tmp_path)
    human = await gw.mew("human")
    questions = [await _question(human) for _ in range(3)]
    await stop_gateway(gw)
    gw = await start_engine_gateway(tmp_path)
    try:
        agent = await gw.mew("agent")
        for msg in questions:  # a message sent before the restart may still be claimed
            started = iso_to_ms(msg["ts"]) + 1
            await agent.send(_claim(msg["id"], started))
            claimed = await agent.expect("floor/claimed")
            assert claimed["payload"]["msg_id"] == msg["id"]
    finally:
        await stop_gateway(gw)


# ---------------------------------------------------------------------------- stored outcomes


def _outcome_of(msg_id: str) -> Any:
    return lambda f: f.get("kind") == "floor/outcome" and f["payload"]["msg_id"] == msg_id


async def test_the_outcome_is_stored_and_in_a_late_joiners_history(egw: EngineGateway) -> None:
    human = await egw.mew("human", kind="human")
    maths = await egw.mew("maths")
    chef = await egw.mew("chef")
    travel = await egw.mew("travel")
    q = await _question(human, maths, chef, travel)
    t0 = ulid_time_ms(q["id"])
    await chef.send(_claim(q["id"], t0 + 30))
    await maths.send(_claim(q["id"], t0 + 10))  # displaces chef
    await travel.send(_claim(q["id"], t0 + 20))  # yields to maths
    await travel.expect("floor/yield")
    await maths.send(
        {
            "kind": "chat",
            "channel": "#general",
            "correlation_id": [q["id"]],
            "payload": {"text": "42"},
        }
    )
    answer = await human.expect("chat")
    live = await human.next_where(_outcome_of(q["id"]))
    assert live["from"] == "system:gateway" and live["channel"] == "#general"
    assert live["correlation_id"] == [q["id"]]
    assert live["payload"] == {
        "msg_id": q["id"],
        "holder": "maths",
        "reason": "answered",
        "answer": answer["id"],
        "yielded": ["chef", "travel"],
    }
    assert live["seq"] == answer["seq"] + 1  # stored in the channel, right after the answer

    late = await egw.mew("late", kind="human")
    stored = [m for m in await _history_of(late) if m["kind"] == "floor/outcome"]
    assert [m["payload"] for m in stored] == [live["payload"]]
    assert stored[0]["seq"] == live["seq"] and stored[0]["id"] == live["id"]


async def _history_of(client: WsClient) -> list[dict[str, Any]]:
    await client.send({"kind": "history/request", "payload": {"channel": "#general", "limit": 50}})
    page = await client.expect("history/response")
    messages: list[dict[str, Any]] = page["payload"]["messages"]
    return messages


async def test_an_expired_or_abandoned_claim_is_stored_without_an_answer(
    egw: EngineGateway,
) -> None:
    human = await egw.mew("human", kind="human")
    a = await egw.mew("agent-a")
    b = await egw.mew("agent-b")
    q1 = await _question(human, a, b)
    await a.send(_claim(q1["id"], ulid_time_ms(q1["id"]) + 1))
    await human.expect("floor/claimed")
    egw.tick(46)
    expired = await human.next_where(_outcome_of(q1["id"]))
    assert expired["payload"] == {
        "msg_id": q1["id"],
        "holder": "agent-a",
        "reason": "expired",
        "yielded": [],
    }
    q2 = await _question(human, a, b)
    await b.send(_claim(q2["id"], ulid_time_ms(q2["id"]) + 1))
    await human.expect("floor/claimed")
    await b.close()
    left = await human.next_where(_outcome_of(q2["id"]))
    assert left["payload"]["reason"] == "disconnected" and left["payload"]["holder"] == "agent-b"
    history = await _history_of(human)
    assert [m["payload"]["reason"] for m in history if m["kind"] == "floor/outcome"] == [
        "expired",
        "disconnected",
    ]


async def test_agentchat_clients_get_no_frame_for_an_outcome(egw: EngineGateway) -> None:
    human = await egw.mew("human", kind="human")
    a = await egw.agentchat("a1")
    await human.send({"kind": "chat", "channel": "#general", "payload": {"text": "who knows?"}})
    msg = await a.expect_type("MSG")
    await a.send(
        {
            "type": "RESPONDING_TO",
            "msg_id": msg["msg_id"],
            "started_at": msg["ts"] + 5,
            "channel": "#general",
        }
    )
    await a.expect_type("FLOOR_CLAIMED")
    await a.send({"type": "MSG", "to": "#general", "content": "me", "in_reply_to": msg["msg_id"]})
    await human.next_where(_outcome_of(msg["msg_id"]))
    frames = await a.fence()  # everything written to a1 up to the outcome, and more
    assert [f for f in frames if f.get("type") not in ("MSG", "PRESENCE")] == []
