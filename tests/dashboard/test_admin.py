"""The admin kill switch over HTTP: disconnect, ban, unban — also on sleeping agents."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import websockets

from hubbub.sdk import Client
from hubbub.server.config import Limits
from tests.conftest import WsClient, stop_gateway
from tests.dashboard.conftest import TOKENS, WAIT_S, open_events, start_dash_gateway, team_space
from tests.engines_live.conftest import EngineGateway


async def _admin(
    gw: EngineGateway, action: str, pid: str, token: str | None = TOKENS["boss"]
) -> tuple[int, dict[str, Any]]:
    # without a token, the header a page on another site cannot send (see web_guard.py)
    headers = {"Authorization": f"Bearer {token}"} if token else {"X-Hubbub-Request": "1"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{gw.http}/admin/participants/{pid}/{action}", headers=headers) as resp,
    ):
        return resp.status, await resp.json()


async def _join(gw: EngineGateway, pid: str, **extra: Any) -> WsClient:
    return await gw.mew(pid, space="team", token=TOKENS.get(pid), **extra)


async def _closed(client: WsClient) -> tuple[int, str]:
    """Read until the server closes the socket; return its close code and reason."""
    with pytest.raises(websockets.ConnectionClosed) as info:
        while True:
            await asyncio.wait_for(client.ws.recv(), WAIT_S)
    rcvd = info.value.rcvd
    assert rcvd is not None
    return rcvd.code, rcvd.reason


async def _sleep(gw: EngineGateway, client: WsClient, seconds: int = 600) -> None:
    await client.send({"kind": "chat", "payload": {"text": f"@@sleep:{seconds}s@@"}})
    await gw.synced(client)


async def test_disconnect_a_connected_agent(team: EngineGateway) -> None:
    bot = await _join(team, "bot")
    async with open_events(team, TOKENS["ops"]) as events:
        await events.next("snapshot")
        status, body = await _admin(team, "disconnect", "bot")
        assert status == 200
        assert body == {"space": "team", "id": "bot", "disconnected": True, "was": "online"}
        kicked = await events.activity("kick", participant="bot")
        assert kicked["by"] == "boss"
        await events.activity("disconnect", participant="bot")
    assert await _closed(bot) == (4001, "disconnected by an admin")
    assert "bot" not in team.router.spaces["team"].online
    again = await _join(team, "bot")  # a disconnect is not a ban
    assert again.welcome["payload"]["you"]["id"] == "bot"


async def test_disconnect_a_sleeping_agent_cancels_its_sleep(team: EngineGateway) -> None:
    bot = await _join(team, "bot")
    await _sleep(team, bot)
    sleep = team.router.coordination.spaces["team"].sleep
    assert sleep.entry("bot") is not None
    async with open_events(team, TOKENS["boss"]) as events:
        await events.next("snapshot")
        status, body = await _admin(team, "disconnect", "bot")
        assert status == 200 and body["disconnected"] is True and body["was"] == "sleeping"
        await events.activity("kick", participant="bot", was="sleeping")
        await events.activity("sleep-cancelled", participant="bot")
    assert await _closed(bot) == (4001, "disconnected by an admin")
    assert sleep.entry("bot") is None
    status, body = await _admin(team, "disconnect", "bot")
    assert status == 404 and body["error"] == "not_connected"
    assert "nothing to disconnect" in body["message"]


async def test_ban_refuses_reconnects_and_posts_until_unban(team: EngineGateway) -> None:
    bot = await _join(team, "bot")
    await _sleep(team, bot)
    async with open_events(team, TOKENS["boss"]) as events:
        await events.next("snapshot")
        status, body = await _admin(team, "ban", "bot")
        assert status == 200
        assert body == {
            "space": "team",
            "id": "bot",
            "banned": True,
            "disconnected": True,
            "was": "sleeping",
        }
        banned = await events.activity("ban", participant="bot")
        assert banned["by"] == "boss" and banned["disconnected"] is True
        state = await events.next("state", lambda s: s["banned"] == ["bot"])
        (entry,) = [p for p in state["participants"] if p["id"] == "bot"]
        assert entry["banned"] is True and entry["presence"] == "offline"
    error = await bot.expect("system/error")
    assert error["payload"]["error"] == "banned"
    assert await _closed(bot) == (4001, "banned by an admin")
    assert team.router.coordination.spaces["team"].sleep.entry("bot") is None

    # reconnecting is refused with `banned`, on both dialects
    retry = await team.connect()
    await retry.send(
        {"type": "join", "participantId": "bot", "space": "team", "token": "bot-token"}
    )
    refused = await retry.expect("system/error")
    assert refused["payload"]["error"] == "banned"
    assert "unban" in refused["payload"]["message"]
    assert (await _closed(retry))[0] == 1008
    legacy = await team.connect()
    await legacy.send({"type": "IDENTIFY", "name": "bot", "token": "bot-token", "space": "team"})
    assert (await legacy.expect_type("ERROR"))["code"] == "BANNED"

    # posting over HTTP is refused too
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{team.http}/participants/bot/messages",
            headers={"Authorization": f"Bearer {TOKENS['bot']}"},
            json={"kind": "chat", "channel": "#general", "payload": {"text": "let me in"}},
        ) as resp,
    ):
        assert resp.status == 403
        assert (await resp.json())["error"] == "banned"

    async with (
        aiohttp.ClientSession() as http,
        http.get(
            f"{team.http}/admin/bans", headers={"Authorization": f"Bearer {TOKENS['boss']}"}
        ) as resp,
    ):
        assert await resp.json() == {"space": "team", "banned": ["bot"]}

    status, body = await _admin(team, "unban", "bot")
    assert status == 200 and body == {
        "space": "team",
        "id": "bot",
        "banned": False,
        "was_banned": True,
    }
    back = await _join(team, "bot")
    assert back.welcome["payload"]["you"]["id"] == "bot"


async def test_a_ban_survives_a_restart_until_unban(tmp_path: Path) -> None:
    gw = await start_dash_gateway(tmp_path, spaces=[team_space()], limits=Limits(rate_per_s=0))
    try:
        status, _ = await _admin(gw, "ban", "bot")
        assert status == 200
    finally:
        await stop_gateway(gw)
    gw = await start_dash_gateway(tmp_path, spaces=[team_space()], limits=Limits(rate_per_s=0))
    try:
        retry = await gw.connect()
        await retry.send(
            {"type": "join", "participantId": "bot", "space": "team", "token": "bot-token"}
        )
        assert (await retry.expect("system/error"))["payload"]["error"] == "banned"
        status, body = await _admin(gw, "unban", "bot")
        assert status == 200 and body["was_banned"] is True
    finally:
        await stop_gateway(gw)
    gw = await start_dash_gateway(tmp_path, spaces=[team_space()], limits=Limits(rate_per_s=0))
    try:  # the unban was saved too
        back = await _join(gw, "bot")
        assert back.welcome["payload"]["you"]["id"] == "bot"
    finally:
        await stop_gateway(gw)


async def test_ban_an_offline_id_and_the_sdk_stops_reconnecting(team: EngineGateway) -> None:
    status, body = await _admin(team, "ban", "helper")
    assert status == 200 and body["disconnected"] is False
    client = Client(
        gateway=team.url,
        participant_id="helper",
        space="team",
        token=TOKENS["helper"],
        reconnect_delay=0.02,
        connect_timeout=5.0,
    )
    with pytest.raises(Exception, match="banned"):
        await client.connect()
    await client.disconnect()


async def test_only_admins_pull_the_switch(team: EngineGateway) -> None:
    await _join(team, "bot")
    for token in ("ops", "eve", "bot"):
        status, body = await _admin(team, "disconnect", "bot", TOKENS[token])
        assert status == 403 and body["error"] == "forbidden"
        assert "needs role admin" in body["message"]
    status, body = await _admin(team, "ban", "bot", None)
    assert status == 401 and body["error"] == "auth_failed"
    status, body = await _admin(team, "ban", "bot", "hb_wrong")
    assert status == 401
    assert "bot" in team.router.spaces["team"].online
    assert team.router.bans.banned("team") == []


async def test_open_mode_allows_the_switch_without_a_token(dgw: EngineGateway) -> None:
    sleeper = await dgw.mew("sleeper")
    await _sleep(dgw, sleeper)
    status, body = await _admin(dgw, "disconnect", "sleeper", None)
    assert status == 200 and body["was"] == "sleeping"
    assert (await _closed(sleeper))[0] == 4001
    status, body = await _admin(dgw, "ban", "no!good", None)
    assert status == 400 and body["error"] == "invalid_id"
