"""Floor claims from outside the SDK, per door: a claim on a message that was answered
already, or that is addressed to someone else, is refused with who answered or whom it is for;
an answer ends only the claim it replies to, and ``floor/outcome`` names that reply."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from hubbub.protocol.ids import ulid_time_ms
from tests.conftest import WsClient, stop_gateway
from tests.engines_live.conftest import EngineGateway, start_engine_gateway


@pytest.fixture
async def egw(tmp_path: Path) -> AsyncIterator[EngineGateway]:
    gw = await start_engine_gateway(tmp_path)
    yield gw
    await stop_gateway(gw)


def _chat(text: str, *, reply_to: str | None = None, **extra: Any) -> dict[str, Any]:
    frame: dict[str, Any] = {"kind": "chat", "channel": "#general", "payload": {"text": text}}
    if reply_to is not None:
        frame["correlation_id"] = [reply_to]
    return frame | extra


def _claim(msg_id: str, started_at: int) -> dict[str, Any]:
    return {
        "kind": "floor/responding-to",
        "channel": "#general",
        "payload": {"msg_id": msg_id, "started_at": started_at},
    }


async def _said(sender: WsClient, frame: dict[str, Any], *others: WsClient) -> dict[str, Any]:
    """Send a chat and return it as delivered (once every other client got it too)."""
    await sender.send(frame)
    msg = await sender.expect("chat")
    for o in others:
        await o.next_where(lambda f: f.get("id") == msg["id"] or f.get("msg_id") == msg["id"])
    return msg


def _no_claim_relayed(f: dict[str, Any]) -> bool:
    return f.get("kind") in ("floor/claimed", "floor/responding-to")


# ------------------------------------------------------------------ MEW


async def test_mew_claim_on_an_answered_message_is_refused(egw: EngineGateway) -> None:
    ann = await egw.mew("ann", kind="human")
    maths = await egw.mew("maths")
    chef = await egw.mew("chef")
    q = await _said(ann, _chat("what is 6*7?"), maths, chef)
    answer = await _said(maths, _chat("42", reply_to=q["id"]), ann, chef)  # no claim needed
    await chef.send(_claim(q["id"], ulid_time_ms(q["id"]) + 5))
    y = await chef.expect("floor/yield")
    assert y["payload"] == {
        "msg_id": q["id"],
        "winner": "maths",
        "reason": f"{q['id']} was answered already by maths (message {answer['id']}); "
        "do not answer it again",
        "refused": "answered",
        "answer": answer["id"],
    }
    await ann.silent(_no_claim_relayed)  # nobody hears of a claim that was refused
    assert egw.router.coordination.spaces["default"].floor.holder("#general", q["id"]) is None


@pytest.mark.parametrize("how", ["to", "mention", "display name", "reply", "offline"])
async def test_mew_claim_on_a_message_addressed_to_another_is_refused(
    egw: EngineGateway, how: str
) -> None:
    ann = await egw.mew("ann", kind="human")
    travel = await egw.mew("travel", name="Trip Planner")
    chef = await egw.mew("chef")
    if how == "reply":  # a reply to travel's message is for travel
        first = await _said(travel, _chat("Lisbon is lovely in May"), ann, chef)
        frame = _chat("and in June?", reply_to=first["id"])
    elif how == "to":
        frame = _chat("flights to Porto?", to=["travel"])
    elif how == "mention":
        frame = _chat("@travel flights to Porto?")
    elif how == "display name":
        frame = _chat("@Trip Planner flights to Porto?")
    else:  # travel is offline: nobody stands in for it
        await travel.close()
        await ann.next_where(lambda f: f.get("kind") == "system/presence")
        frame = _chat("@travel flights to Porto?")
    q = await _said(ann, frame, chef)
    await chef.send(_claim(q["id"], ulid_time_ms(q["id"]) + 5))
    y = await chef.expect("floor/yield")
    assert y["payload"]["refused"] == "addressed" and y["payload"]["winner"] == "travel"
    assert y["payload"]["addressees"] == ["travel"]
    assert y["payload"]["reason"] == (
        f"{q['id']} is addressed to travel, not to you; leave it to travel"
    )
    await ann.silent(_no_claim_relayed)


async def test_the_addressee_itself_may_claim(egw: EngineGateway) -> None:
    ann = await egw.mew("ann", kind="human")
    travel = await egw.mew("travel")
    q = await _said(ann, _chat("@travel flights?"), travel)
    await travel.send(_claim(q["id"], ulid_time_ms(q["id"]) + 5))
    claimed = await ann.expect("floor/claimed")
    assert claimed["payload"]["holder"] == "travel"


async def test_an_answer_ends_only_the_claim_it_replies_to(egw: EngineGateway) -> None:
    ann = await egw.mew("ann", kind="human")
    maths = await egw.mew("maths")
    q1 = await _said(ann, _chat("what is 6*7?"), maths)
    q2 = await _said(ann, _chat("and 2+2?"), maths)
    for q in (q1, q2):
        await maths.send(_claim(q["id"], ulid_time_ms(q["id"]) + 5))
        await ann.expect("floor/claimed")
    floor = egw.router.coordination.spaces["default"].floor
    await _said(maths, _chat("thinking..."), ann)  # replies to nothing: ends nothing
    a2 = await _said(maths, _chat("4", reply_to=q2["id"]), ann)
    outcome = await ann.next_where(lambda f: f.get("kind") == "floor/outcome")
    assert outcome["payload"]["msg_id"] == q2["id"]
    assert outcome["payload"]["answer"] == a2["id"]  # the reply, not the chat before it
    assert floor.holder("#general", q1["id"]) is not None
    a1 = await _said(maths, _chat("42", reply_to=q1["id"]), ann)
    outcome = await ann.next_where(lambda f: f.get("kind") == "floor/outcome")
    assert (outcome["payload"]["msg_id"], outcome["payload"]["answer"]) == (q1["id"], a1["id"])


# ------------------------------------------------------------------ agentchat


async def test_agentchat_responding_to_an_answered_message_gets_a_yield(
    egw: EngineGateway,
) -> None:
    ann = await egw.mew("ann", kind="human")
    maths = await egw.mew("maths")
    chef = await egw.agentchat("chef")
    q = await _said(ann, _chat("what is 6*7?"), maths, chef)
    answer = await _said(maths, _chat("42", reply_to=q["id"]), ann, chef)
    await chef.send(
        {
            "type": "RESPONDING_TO",
            "msg_id": q["id"],
            "started_at": ulid_time_ms(q["id"]) + 5,
            "channel": "#general",
        }
    )
    y = await chef.expect_type("YIELD")
    assert y["msg_id"] == q["id"] and y["winner"] == "@maths"
    assert y["reason"] == (
        f"{q['id']} was answered already by maths (message {answer['id']}); do not answer it again"
    )
    await ann.silent(_no_claim_relayed)


async def test_agentchat_responding_to_a_message_for_another_gets_a_yield(
    egw: EngineGateway,
) -> None:
    ann = await egw.mew("ann", kind="human")
    await egw.mew("travel")
    chef = await egw.agentchat("chef")
    q = await _said(ann, _chat("@travel flights?"), chef)
    await chef.send(
        {
            "type": "RESPONDING_TO",
            "msg_id": q["id"],
            "started_at": ulid_time_ms(q["id"]) + 5,
            "channel": "#general",
        }
    )
    y = await chef.expect_type("YIELD")
    assert y["winner"] == "@travel" and "addressed to travel" in y["reason"]


async def test_agentchat_answer_in_reply_ends_the_claim_and_names_the_reply(
    egw: EngineGateway,
) -> None:
    ann = await egw.mew("ann", kind="human")
    chef = await egw.agentchat("chef")
    q = await _said(ann, _chat("soup ideas?"), chef)
    await chef.send(
        {
            "type": "RESPONDING_TO",
            "msg_id": q["id"],
            "started_at": ulid_time_ms(q["id"]) + 5,
            "channel": "#general",
        }
    )
    await ann.expect("floor/claimed")
    await chef.send({"type": "MSG", "to": "#general", "content": "hold on"})
    await ann.expect("chat")
    await chef.send(
        {"type": "MSG", "to": "#general", "content": "gazpacho", "in_reply_to": q["id"]}
    )
    answer = await ann.expect("chat")
    outcome = await ann.next_where(lambda f: f.get("kind") == "floor/outcome")
    assert outcome["payload"]["answer"] == answer["id"]


# ------------------------------------------------------------------ HTTP


async def test_http_claim_on_an_answered_message_says_who_answered(egw: EngineGateway) -> None:
    ann = await egw.mew("ann", kind="human")
    maths = await egw.mew("maths")
    q = await _said(ann, _chat("what is 6*7?"), maths)
    await _said(maths, _chat("42", reply_to=q["id"]), ann)
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{egw.http}/participants/poster/messages",
            json=_claim(q["id"], ulid_time_ms(q["id"]) + 5),
        ) as resp,
    ):
        body = await resp.json()
    assert resp.status == 400 and body["error"] == "invalid_claim"
    assert body["message"].startswith(f"{q['id']} was answered already by maths")
