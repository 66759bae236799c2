"""agentchat's moderation frames against hubbub: ADMIN_KICK, ADMIN_BAN, ADMIN_UNBAN from an
admin (by role or ``admin_key``) → ADMIN_RESULT; the target hears KICKED/BANNED first."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from hubbub.server.config import ParticipantConfig, SpaceConfig, hash_token
from tests.conftest import RunningGateway, start_gateway, stop_gateway


def moderated_space() -> SpaceConfig:
    cfg = SpaceConfig(
        space="default",
        participants={
            "boss": ParticipantConfig(role="admin", token_hash=hash_token("boss-token")),
            "bot": ParticipantConfig(token_hash=hash_token("bot-token")),
            "peer": ParticipantConfig(token_hash=hash_token("peer-token")),
        },
    )
    cfg.validate()
    return cfg


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    gw = await start_gateway(tmp_path, spaces=[moderated_space()])
    yield gw
    await stop_gateway(gw)


async def test_kick_by_admin_role(gw: RunningGateway) -> None:
    boss = await gw.agentchat("boss", token="boss-token")
    bot = await gw.agentchat("bot", token="bot-token")
    await boss.send({"type": "ADMIN_KICK", "agent_id": "@bot", "reason": "spamming"})
    kicked = await bot.expect_type("KICKED")
    assert kicked["reason"] == "spamming"
    result = await boss.expect_type("ADMIN_RESULT")
    assert result["action"] == "kick" and result["agentId"] == "@bot"
    await boss.send({"type": "ADMIN_KICK", "agent_id": "@bot"})  # offline now
    assert (await boss.expect_type("ERROR"))["code"] == "AGENT_NOT_FOUND"


async def test_ban_by_admin_key_then_unban(gw: RunningGateway) -> None:
    peer = await gw.agentchat("peer", token="peer-token")
    bot = await gw.agentchat("bot", token="bot-token")
    await peer.send(
        {"type": "ADMIN_BAN", "agent_id": "@bot", "admin_key": "boss-token", "reason": "rude"}
    )
    banned = await bot.expect_type("BANNED")
    assert banned["reason"] == "rude"
    result = await peer.expect_type("ADMIN_RESULT")
    assert result["action"] == "ban" and result["success"] is True
    assert result["agentId"] == "@bot"

    again = await gw.connect()
    await again.send({"type": "IDENTIFY", "name": "bot", "token": "bot-token"})
    assert (await again.expect_type("ERROR"))["code"] == "BANNED"

    await peer.send({"type": "ADMIN_UNBAN", "agent_id": "@bot", "admin_key": "boss-token"})
    assert (await peer.expect_type("ADMIN_RESULT"))["action"] == "unban"
    back = await gw.agentchat("bot", token="bot-token")
    assert back.welcome["agent_id"] == "@bot"


async def test_wrong_admin_key_is_auth_required(gw: RunningGateway) -> None:
    peer = await gw.agentchat("peer", token="peer-token")
    bot = await gw.agentchat("bot", token="bot-token")
    for key in ("bot-token", "nonsense"):  # a token, but not an admin's; no token at all
        await peer.send({"type": "ADMIN_KICK", "agent_id": "@bot", "admin_key": key})
        assert (await peer.expect_type("ERROR"))["code"] == "AUTH_REQUIRED"
    await bot.silent(lambda f: f.get("type") == "KICKED")


async def test_dashboard_kill_switch_sends_kicked_before_the_close(gw: RunningGateway) -> None:
    bot = await gw.agentchat("bot", token="bot-token")
    url = f"{gw.http}/admin/participants/bot/disconnect"
    headers = {"Authorization": "Bearer boss-token"}
    async with aiohttp.ClientSession() as http, http.post(url, headers=headers) as resp:
        assert resp.status == 200
    kicked = await bot.expect_type("KICKED")
    assert kicked["reason"] == "disconnected by an admin"
