"""Callbacks over real sockets: markers stripped, @server deliveries, limits, grace, restart."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import websockets

from hubbub.server.config import ParticipantConfig, SpaceConfig, hash_token
from tests.conftest import WsClient, stop_gateway
from tests.engines_live.conftest import EngineGateway, ManualClock, start_engine_gateway
from tests.ports import reserve_port


def _chat(text: str, channel: str = "#general") -> dict[str, Any]:
    return {"kind": "chat", "channel": channel, "payload": {"text": text}}


async def test_dm_callback_fires_to_sender_only_and_marker_is_stripped(egw: EngineGateway) -> None:
    a = await egw.mew("agent-a")
    b = await egw.mew("agent-b")
    await a.send(_chat("working on it @@cb:30s@@check build"))
    seen = await b.expect("chat")
    assert seen["payload"]["text"] == "working on it"
    egw.tick(29)
    await a.silent(lambda f: f.get("from") == "system:gateway" and f.get("kind") == "chat")
    egw.tick(1.5)
    fire = await a.next_where(lambda f: f.get("from") == "system:gateway" and f["kind"] == "chat")
    assert fire["to"] == ["agent-a"] and "channel" not in fire
    assert fire["payload"]["text"] == "@@cb-fire@@check build"
    assert fire["payload"]["cb_origin"] == "agent-a" and fire["payload"]["cb_id"]
    assert 500 <= fire["payload"]["late_ms"] < 1_500  # how long after its due time it went out
    await b.silent(lambda f: "cb-fire" in str(f))


async def test_marker_only_message_is_not_relayed(egw: EngineGateway) -> None:
    a = await egw.mew("agent-a")
    b = await egw.mew("agent-b")
    await a.send(_chat('@@cb:30s@@{"csma":"check","reply_to":1}'))
    await egw.synced(a)
    await b.silent(lambda f: f.get("kind") == "chat")
    egw.tick(31)
    fire = await a.next_where(lambda f: f.get("kind") == "chat")
    assert fire["payload"]["text"] == '@@cb-fire@@{"csma":"check","reply_to":1}'


async def test_channel_callback_goes_to_channel_while_origin_is_member(
    egw: EngineGateway,
) -> None:
    a = await egw.mew("agent-a")
    b = await egw.mew("agent-b")
    await a.send(_chat("@@cb:30s#general@@standup time @@cb:40s#general@@second"))
    await egw.synced(a)
    egw.tick(31)
    got = await b.next_where(lambda f: f.get("kind") == "chat")
    assert got["from"] == "system:gateway" and got["channel"] == "#general"
    assert got["payload"]["text"] == "@@cb-fire@@standup time "  # verbatim, to the next marker
    assert got["payload"]["cb_origin"] == "agent-a" and isinstance(got["seq"], int)
    await a.send({"kind": "channel/leave", "payload": {"channel": "#general"}})
    await a.expect("channel/left")
    egw.tick(10)
    await b.silent(lambda f: f.get("kind") == "chat")
    assert any(
        e["event"] == "callback-dropped" and "not a member" in e["reason"]
        for e in egw.router.activity.recent
    )


async def test_agentchat_callback_frame_matches_the_document(egw: EngineGateway) -> None:
    bot = await egw.agentchat("bot")
    await bot.send({"type": "MSG", "to": "#general", "content": "@@cb:1.5s@@nudge"})
    await bot.send({"type": "LIST_CHANNELS"})
    await bot.expect_type("CHANNELS")
    egw.tick(2)
    fire = await bot.expect_type("MSG")
    assert fire["from"] == "@server" and fire["to"] == "@bot"
    assert fire["content"] == "@@cb-fire@@nudge"
    # document 001: cb_origin is the original sender, written as ids are on this dialect
    assert fire["cb_origin"] == "@bot" and fire["cb_id"]


async def test_limits_refuse_with_clear_errors_and_still_relay(tmp_path: Path) -> None:
    gw = await start_engine_gateway(tmp_path, cb_max_per_agent=2, cb_max_payload=10)
    try:
        a = await gw.mew("agent-a")
        b = await gw.mew("agent-b")
        await a.send(_chat("hi @@cb:30s@@this payload is too long"))
        err = await a.expect("system/error")
        assert err["payload"]["error"] == "callback_rejected"
        assert "AGENTCHAT_CB_MAX_PAYLOAD" in err["payload"]["message"]
        assert (await b.expect("chat"))["payload"]["text"] == "hi"
        await a.send(_chat("@@cb:30s@@1 @@cb:30s@@2 @@cb:30s@@3"))
        err = await a.expect("system/error")
        assert "AGENTCHAT_CB_MAX_PER_AGENT" in err["payload"]["message"]
        assert gw.router.coordination.spaces["default"].callbacks.count("agent-a") == 2
    finally:
        await stop_gateway(gw)


async def test_duration_is_clamped(tmp_path: Path) -> None:
    gw = await start_engine_gateway(tmp_path, cb_max_duration_s=60)
    try:
        a = await gw.mew("agent-a")
        await a.send(_chat("@@cb:99999s@@late"))
        await gw.synced(a)
        gw.tick(61)
        fire = await a.next_where(lambda f: f.get("kind") == "chat")
        assert fire["payload"]["text"] == "@@cb-fire@@late"
    finally:
        await stop_gateway(gw)


async def test_callback_to_unknown_channel_is_refused(egw: EngineGateway) -> None:
    a = await egw.mew("agent-a")
    await a.send(_chat("@@cb:30s#nowhere@@x"))
    err = await a.expect("system/error")
    assert (
        err["payload"]["error"] == "callback_rejected" and "#nowhere" in err["payload"]["message"]
    )


async def test_offline_origin_drops_but_reconnect_within_grace_keeps(egw: EngineGateway) -> None:
    a = await egw.mew("agent-a")
    await a.send(_chat("@@cb:10s@@one @@cb:120s@@two"))
    await egw.synced(a)
    watcher = await egw.mew("watcher")
    await a.close()
    await watcher.next_where(lambda f: f.get("payload", {}).get("event") == "leave")
    egw.tick(11)  # 'one' falls due while agent-a is offline (within the 30 s grace): dropped
    a2 = await egw.mew("agent-a")
    egw.tick(110)
    fire = await a2.next_where(lambda f: f.get("kind") == "chat")
    assert fire["payload"]["text"] == "@@cb-fire@@two"
    reasons = [
        e.get("reason") for e in egw.router.activity.recent if e["event"] == "callback-dropped"
    ]
    assert reasons == ["offline"]


async def test_grace_window_end_collects_callbacks(egw: EngineGateway) -> None:
    a = await egw.mew("agent-a")
    await a.send(_chat("@@cb:300s@@later"))
    await egw.synced(a)
    watcher = await egw.mew("watcher")
    await a.close()
    await watcher.next_where(lambda f: f.get("payload", {}).get("event") == "leave")
    engine = egw.router.coordination.spaces["default"].callbacks
    assert engine.count("agent-a") == 1
    egw.tick(31)
    assert engine.count("agent-a") == 0
    a2 = await egw.mew("agent-a")
    egw.tick(300)
    await a2.silent(lambda f: f.get("kind") == "chat")


async def test_pending_callbacks_survive_a_restart(tmp_path: Path) -> None:
    clock = ManualClock()
    gw = await start_engine_gateway(tmp_path, clock)
    a = await gw.mew("agent-a")
    await a.send(_chat("@@cb:60s@@after restart"))
    await a.send(_chat("sync"))
    await a.expect("chat")
    await stop_gateway(gw)
    gw = await start_engine_gateway(tmp_path, clock)
    try:
        a = await gw.mew("agent-a")
        gw.tick(61)
        fire = await a.next_where(lambda f: f.get("kind") == "chat" and "cb_id" in f["payload"])
        assert fire["payload"]["text"] == "@@cb-fire@@after restart"
    finally:
        await stop_gateway(gw)


async def test_multiline_payload_is_verbatim_and_never_relayed(egw: EngineGateway) -> None:
    a = await egw.mew("agent-a")
    b = await egw.mew("agent-b")
    await a.send(_chat("status: fine\n@@cb:5s@@ secret line1\nsecret line2\n"))
    assert (await b.expect("chat"))["payload"]["text"] == "status: fine"
    await egw.synced(a)
    egw.tick(6)
    fire = await a.next_where(lambda f: f.get("kind") == "chat" and "cb_id" in f["payload"])
    assert fire["payload"]["text"] == "@@cb-fire@@ secret line1\nsecret line2\n"
    await b.silent(lambda f: "secret" in str(f))


async def test_agentchat_channel_callback_frame(egw: EngineGateway) -> None:
    bot = await egw.agentchat("bot")
    watcher = await egw.agentchat("watcher")
    human = await egw.mew("human")
    await bot.send({"type": "MSG", "to": "#general", "content": "@@cb:30s#general@@standup"})
    await bot.send({"type": "LIST_CHANNELS"})
    await bot.expect_type("CHANNELS")
    egw.tick(31)
    fire = await watcher.expect_type("MSG")
    assert fire == {
        "type": "MSG",
        "from": "@server",
        "from_name": "server",
        "to": "#general",
        "content": "@@cb-fire@@standup",
        "msg_id": fire["msg_id"],
        "ts": fire["ts"],
        "seq": fire["seq"],
        "cb_id": fire["cb_id"],
        "cb_origin": "@bot",
        "late_ms": fire["late_ms"],
        "verified": False,
    }
    assert fire["cb_id"] and isinstance(fire["seq"], int)
    assert 1_000 <= fire["late_ms"] < 2_000  # the clock jumped 1 s past the due time
    assert (await bot.expect_type("MSG"))["cb_origin"] == "@bot"
    mew_view = await human.next_where(lambda f: f.get("kind") == "chat")
    assert mew_view["payload"]["cb_origin"] == "bot"  # MEW ids are bare
    assert mew_view["payload"]["cb_id"] == fire["cb_id"]


async def test_agentchat_callback_rejected_error_code(tmp_path: Path) -> None:
    gw = await start_engine_gateway(tmp_path, cb_max_payload=10)
    try:
        bot = await gw.agentchat("bot")
        other = await gw.agentchat("other")
        await bot.send({"type": "MSG", "to": "#general", "content": "hi @@cb:30s@@far too long"})
        err = await bot.expect_type("ERROR")
        assert err["code"] == "CALLBACK_REJECTED"
        assert "AGENTCHAT_CB_MAX_PAYLOAD" in err["message"]
        assert (await other.expect_type("MSG"))["content"] == "hi"
        assert gw.router.coordination.spaces["default"].callbacks.count("bot") == 0
    finally:
        await stop_gateway(gw)


async def test_marker_message_to_a_wrong_destination_schedules_nothing(
    egw: EngineGateway,
) -> None:
    a = await egw.mew("agent-a")
    engine = egw.router.coordination.spaces["default"].callbacks
    cases = [
        (_chat("@@cb:30s@@x", "#nowhere"), "unknown_channel"),
        (
            {"kind": "chat", "to": ["nobody"], "payload": {"text": "hi @@cb:30s@@x"}},
            "unknown_participant",
        ),
    ]
    for frame, code in cases:
        await a.send(frame)
        err = await a.expect("system/error")
        assert err["payload"]["error"] == code, err
    assert engine.count("agent-a") == 0
    assert not any(e["event"] == "callback-scheduled" for e in egw.router.activity.recent)


# ---------------------------------------------------------------------------- restart


def _from_server(f: dict[str, Any]) -> bool:
    return f.get("from") in ("system:gateway", "@server") and "cb-fire" in str(f)


async def _join(url: str, hello: dict[str, Any]) -> WsClient:
    """Connect to ``url`` and say hello; return once welcomed and in #general."""
    c = WsClient(await websockets.connect(url, max_size=None, compression=None))
    await c.send(hello)
    if hello["type"] == "join":
        await c.expect("system/welcome")
        await c.expect("channel/joined")
    else:
        await c.expect_type("WELCOME")
        await c.send({"type": "JOIN", "channel": "#general"})
        await c.expect_type("JOINED")
    return c


async def _schedule_before_the_restart(url: str) -> list[WsClient]:
    """agent-a (MEW) and bot (agentchat) will come back; agent-b will not."""
    a = await _join(url, {"type": "join", "participantId": "agent-a", "space": "default"})
    bot = await _join(url, {"type": "IDENTIFY", "name": "bot"})
    b = await _join(url, {"type": "join", "participantId": "agent-b", "space": "default"})
    # due 60, 90 and 125 s from now: the gateway is down for 120 s, so the last one falls due
    # 5 s into the grace window after the restart
    await a.send(_chat("@@cb:125s@@third@@cb:90s@@second@@cb:60s@@first"))
    await bot.send({"type": "MSG", "to": "#general", "content": "@@cb:60s@@nudge"})
    await b.send(_chat("@@cb:60s@@lost"))
    for c in (a, b):
        await c.send({"kind": "channel/list"})
        await c.expect("channel/list-response")
    await bot.send({"type": "LIST_CHANNELS"})
    await bot.expect_type("CHANNELS")
    return [a, bot, b]


async def _first_life_stopped(data_dir: Path, clock: ManualClock) -> None:
    """Schedule on an in-process gateway, then shut it down as every restart test does."""
    gw = await start_engine_gateway(data_dir, clock)
    gw.clients.extend(await _schedule_before_the_restart(gw.url))
    await stop_gateway(gw)


async def _first_life_killed(data_dir: Path, clock: ManualClock) -> None:
    """Schedule on a ``hubbub serve`` process, then kill it (SIGKILL): nothing is shut down,
    its state is just gone and the next gateway reopens the SQLite file it left."""
    port = reserve_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "hubbub", "serve", "--port", str(port), "--data-dir", str(data_dir)],
        stderr=subprocess.DEVNULL,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )
    try:
        for _ in range(200):
            assert proc.poll() is None, "hubbub serve exited"
            try:
                _, w = await asyncio.open_connection("127.0.0.1", port)
                w.close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        clients = await _schedule_before_the_restart(f"ws://127.0.0.1:{port}/ws")
        db = sqlite3.connect(data_dir / "hubbub.db")
        for _ in range(200):  # wait for the process's group commit to write the 5 callbacks
            saved = db.execute("SELECT count(*) FROM callbacks").fetchone()[0]
            if saved == 5:
                break
            await asyncio.sleep(0.05)
        db.close()
        assert saved == 5, f"{saved} of the 5 callbacks reached the SQLite file"
    finally:
        proc.kill()
        proc.wait(10)
    for c in clients:
        await c.ws.close()


@pytest.mark.parametrize(
    "first_life",
    [_first_life_stopped, pytest.param(_first_life_killed, marks=pytest.mark.slow)],  # a process
)
async def test_callbacks_due_while_the_gateway_was_down_wait_for_their_owner(
    tmp_path: Path, first_life: Any
) -> None:
    clock = ManualClock()
    await first_life(tmp_path, clock)
    clock.advance(120)  # the gateway is down for 2 minutes: 4 of the 5 callbacks fall due
    gw = await start_engine_gateway(tmp_path, clock)
    try:
        gw.tick(10)  # 10 s into the 30 s grace window: nothing is dropped, nothing fired
        events = gw.router.activity.recent
        assert not [e for e in events if e["event"].startswith("callback-")]

        a = await gw.mew("agent-a")  # back within the window: everything late, in due order
        fires = [(await a.next_where(_from_server))["payload"] for _ in range(3)]
        assert [f["text"] for f in fires] == [
            "@@cb-fire@@first",
            "@@cb-fire@@second",
            "@@cb-fire@@third",
        ]
        late = [f["late_ms"] for f in fires]
        assert 70_000 <= late[0] < 80_000  # due 60 s after scheduling, delivered 130 s after
        # each marker of a message is scheduled at its own clock reading (a few ms apart)
        assert abs(late[0] - late[1] - 30_000) < 1_000 and abs(late[0] - late[2] - 65_000) < 1_000
        assert all(f["cb_origin"] == "agent-a" and f["cb_id"] for f in fires)

        bot = await gw.agentchat("bot", join=False)  # the agentchat dialect says it too
        fire = await bot.next_where(_from_server)
        assert fire["content"] == "@@cb-fire@@nudge" and fire["cb_origin"] == "@bot"
        assert 69_000 <= fire["late_ms"] < 80_000  # due 60 s after scheduling, like "first"

        gw.tick(21)  # the window ends; agent-b never came back
        dropped = [e for e in gw.router.activity.recent if e["event"] == "callback-dropped"]
        assert [(e["participant"], e["reason"]) for e in dropped] == [("agent-b", "collected")]
        fired = [e for e in gw.router.activity.recent if e["event"] == "callback-fired"]
        assert sorted(e["participant"] for e in fired) == ["agent-a"] * 3 + ["bot"]
        b = await gw.mew("agent-b")
        await b.silent(_from_server)
        await a.silent(_from_server)  # each was delivered once
    finally:
        await stop_gateway(gw)


# ---------------------------------------------------------------------------- issue 21 item 13


async def test_a_channel_callback_of_an_origin_whose_chat_was_revoked_is_dropped(
    tmp_path: Path,
) -> None:
    cfg = SpaceConfig(
        space="team",
        participants={
            "boss": ParticipantConfig(kind="human", role="admin", token_hash=hash_token("b")),
            "bot": ParticipantConfig(
                token_hash=hash_token("t"),
                capabilities=[{"kind": "chat"}, {"kind": "channel/*"}],
            ),
        },
    )
    cfg.validate()
    clock = ManualClock()
    gw = await start_engine_gateway(tmp_path, clock, spaces=[cfg])
    try:
        boss = await gw.mew("boss", space="team", token="b")
        bot = await gw.mew("bot", space="team", token="t")
        await bot.send(_chat("@@cb:30s#general@@posted after the revoke"))
        await gw.synced(bot)
        revoke = {"recipient": "bot", "capabilities": [{"kind": "chat"}]}
        await boss.send({"kind": "capability/revoke", "payload": revoke})
        await bot.expect("capability/revoke")
        gw.tick(31)
        err = await bot.next_where(lambda f: f.get("kind") == "system/error")
        assert err["payload"]["error"] == "callback_rejected"
        assert "dropped when it fell due" in err["payload"]["message"]
        await boss.silent(lambda f: f.get("kind") == "chat" and "cb_id" in f["payload"])
        assert any(
            e["event"] == "callback-dropped" and e["reason"].startswith("refused")
            for e in gw.router.activity.recent
        )
    finally:
        await stop_gateway(gw)


# ---------------------------------------------------------------------------- issue 21 item 10


async def _post(gw: EngineGateway, pid: str, text: str) -> dict[str, Any]:
    body = {"kind": "chat", "channel": "#general", "payload": {"text": text}}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{gw.http}/participants/{pid}/messages", json=body) as resp,
    ):
        assert resp.status == 202, await resp.text()
        answer: dict[str, Any] = await resp.json()
        return answer


def _stored_callbacks(gw: EngineGateway) -> int:
    with sqlite3.connect(gw.data_dir / "hubbub.db") as db:
        ((n,),) = db.execute("SELECT count(*) FROM callbacks").fetchall()
    return int(n)


async def test_throw_away_http_ids_cannot_pile_up_callbacks(tmp_path: Path) -> None:
    gw = await start_engine_gateway(tmp_path, cb_max_per_space=120)
    try:
        bomb = "x " + "@@cb:3600s@@p" * 60
        first = await _post(gw, "throwaway-0", bomb)
        # the per-agent cap holds for an HTTP sender as for a connection
        assert len(first["errors"]) == 10
        assert "AGENTCHAT_CB_MAX_PER_AGENT" in first["errors"][0]["message"]
        second = await _post(gw, "throwaway-1", bomb)
        third = await _post(gw, "throwaway-2", bomb)
        assert len(second["errors"]) == 10 and len(third["errors"]) == 40
        assert "AGENTCHAT_CB_MAX_PER_SPACE" in third["errors"][-1]["message"]
        await gw.router.durable()
        assert len(gw.router.coordination.spaces["default"].callbacks) == 120
        assert _stored_callbacks(gw) == 120
        # nobody connected as those ids: their callbacks are collected after the grace window
        gw.tick(31)
        await gw.router.durable()
        assert len(gw.router.coordination.spaces["default"].callbacks) == 0
        assert _stored_callbacks(gw) == 0
    finally:
        await stop_gateway(gw)


async def test_an_http_origin_that_connects_within_the_window_keeps_its_callbacks(
    egw: EngineGateway,
) -> None:
    await _post(egw, "agent-a", "later @@cb:60s@@check")
    a = await egw.mew("agent-a")
    egw.tick(61)
    fire = await a.next_where(lambda f: f.get("kind") == "chat" and "cb_id" in f["payload"])
    assert fire["payload"]["text"] == "@@cb-fire@@check"
