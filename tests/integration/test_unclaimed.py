"""When nobody takes it: a person's open question that no agent claims or answers within
``unclaimed_notice_s`` gets the asker a ``system/notice`` ("no agent took this"), and the
dashboard's feed an ``unclaimed`` event; on a manual engine clock (no waiting)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hubbub.protocol.ids import ulid_time_ms
from tests.conftest import WsClient, stop_gateway
from tests.engines_live.conftest import EngineGateway, start_engine_gateway


@pytest.fixture
async def egw(tmp_path: Path) -> AsyncIterator[EngineGateway]:
    gw = await start_engine_gateway(tmp_path)
    yield gw
    await stop_gateway(gw)


def _notice(f: dict[str, Any]) -> bool:
    return f.get("kind") == "system/notice"


async def _ask(asker: WsClient, text: str, *others: WsClient, **extra: Any) -> dict[str, Any]:
    await asker.send({"kind": "chat", "channel": "#general", "payload": {"text": text}, **extra})
    msg = await asker.expect("chat")
    for o in others:
        await o.next_where(lambda f: f.get("id") == msg["id"] or f.get("msg_id") == msg["id"])
    return msg


async def test_an_open_question_nobody_takes_gets_a_notice(egw: EngineGateway) -> None:
    ann = await egw.mew("ann", kind="human")
    maths = await egw.mew("maths", kind="agent")
    q = await _ask(ann, "what is the capital of Peru?", maths)
    await egw.synced(ann)
    egw.tick(29)
    await ann.silent(_notice)
    egw.tick(2)
    note = await ann.expect("system/notice")
    assert note["from"] == "system:gateway" and note["to"] == ["ann"]
    assert note["channel"] == "#general" and note["correlation_id"] == [q["id"]]
    assert note["payload"] == {
        "notice": "unclaimed",
        "text": "no agent took this: nobody claimed or answered it within 30 s",
        "msg_id": q["id"],
        "after_s": 30,
    }
    await maths.silent(_notice)  # the asker's, nobody else's
    (event,) = [e for e in egw.router.activity.recent if e["event"] == "unclaimed"]
    assert (event["msg_id"], event["participant"], event["channel"]) == (
        q["id"],
        "ann",
        "#general",
    )


async def test_a_claimed_or_answered_question_gets_none(egw: EngineGateway) -> None:
    ann = await egw.mew("ann", kind="human")
    maths = await egw.mew("maths", kind="agent")
    claimed = await _ask(ann, "what is 6*7?", maths)
    await maths.send(
        {
            "kind": "floor/responding-to",
            "channel": "#general",
            "payload": {"msg_id": claimed["id"], "started_at": ulid_time_ms(claimed["id"]) + 1},
        }
    )
    await ann.expect("floor/claimed")
    answered = await _ask(ann, "and 6*8?", maths)
    await maths.send(
        {
            "kind": "chat",
            "channel": "#general",
            "correlation_id": [answered["id"]],
            "payload": {"text": "48"},
        }
    )
    await ann.expect("chat")
    egw.tick(60)
    await ann.silent(_notice)


async def test_no_notice_without_an_agent_a_question_or_for_an_addressed_one(
    egw: EngineGateway,
) -> None:
    ann = await egw.mew("ann", kind="human")
    bob = await egw.mew("bob", kind="human")
    await _ask(ann, "lunch, anyone?", bob)  # no agent in the channel: people among themselves
    maths = await egw.mew("maths", kind="agent")
    await _ask(ann, "good morning all", bob, maths)  # not a question
    await _ask(ann, "@bob are you in today?", bob, maths)  # addressed to bob
    await _ask(bob, "what is 6*7?", ann, maths, to=["maths"])  # addressed to maths
    egw.tick(60)
    await ann.silent(_notice)
    await bob.silent(_notice)
    assert [e for e in egw.router.activity.recent if e["event"] == "unclaimed"] == []


async def test_the_window_is_a_setting(tmp_path: Path) -> None:
    gw = await start_engine_gateway(tmp_path, unclaimed_notice_s=5)
    try:
        ann = await gw.mew("ann", kind="human")
        maths = await gw.mew("maths", kind="agent")
        await _ask(ann, "anyone?", maths)
        await gw.synced(ann)
        gw.tick(6)
        note = await ann.expect("system/notice")
        assert note["payload"]["after_s"] == 5 and "within 5 s" in note["payload"]["text"]
    finally:
        await stop_gateway(gw)


async def test_off_when_the_window_is_zero(tmp_path: Path) -> None:
    gw = await start_engine_gateway(tmp_path, unclaimed_notice_s=0)
    try:
        ann = await gw.mew("ann", kind="human")
        maths = await gw.mew("maths", kind="agent")
        await _ask(ann, "anyone?", maths)
        gw.tick(120)
        await ann.silent(_notice)
    finally:
        await stop_gateway(gw)


async def test_an_agentchat_asker_reads_it_as_a_server_message(egw: EngineGateway) -> None:
    ann = await egw.agentchat("ann", kind="human")
    maths = await egw.mew("maths", kind="agent")
    await ann.send({"type": "MSG", "to": "#general", "content": "anyone know Lisbon?"})
    await maths.expect("chat")
    await egw.synced(maths)
    egw.tick(31)
    note = await ann.next_where(lambda f: f.get("type") == "MSG" and f.get("from") == "@server")
    assert note["content"] == "no agent took this: nobody claimed or answered it within 30 s"
