"""Tokens, space configs, capability enforcement, grant and revoke, over real sockets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hubbub.server.config import ParticipantConfig, SpaceConfig, hash_token
from tests.conftest import RunningGateway, start_gateway, stop_gateway

AGENT_CAPS = [{"kind": "chat"}, {"kind": "channel/*"}, {"kind": "mcp/response"}]


def space() -> SpaceConfig:
    cfg = SpaceConfig(
        space="team",
        channels=["#general", "#ops"],
        participants={
            "boss": ParticipantConfig(
                kind="human", role="admin", token_hash=hash_token("boss-token")
            ),
            "bot": ParticipantConfig(
                kind="agent", token_hash=hash_token("bot-token"), capabilities=AGENT_CAPS
            ),
            "tool": ParticipantConfig(kind="service", token_hash=hash_token("tool-token")),
        },
    )
    cfg.validate()
    return cfg


@pytest.fixture
async def team(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    gw = await start_gateway(tmp_path, spaces=[space()])
    yield gw
    await stop_gateway(gw)


async def test_token_authenticates_and_sets_kind_and_capabilities(team: RunningGateway) -> None:
    bot = await team.mew("bot", space="team", token="bot-token")
    you = bot.welcome["payload"]["you"]
    assert you["id"] == "bot" and you["kind"] == "agent"
    assert you["capabilities"] == AGENT_CAPS


async def test_wrong_token_is_refused_with_1008(team: RunningGateway) -> None:
    c = await team.connect()
    await c.send({"type": "join", "participantId": "bot", "space": "team", "token": "nope"})
    err = await c.expect("system/error")
    assert err["payload"]["error"] == "auth_failed"
    assert "unknown token" in err["payload"]["message"]
    await c.ws.wait_closed()
    assert c.ws.close_code == 1008


async def test_token_of_someone_else_is_refused(team: RunningGateway) -> None:
    c = await team.connect()
    await c.send({"type": "join", "participantId": "boss", "space": "team", "token": "bot-token"})
    err = await c.expect("system/error")
    assert "belongs to participant 'bot'" in err["payload"]["message"]


async def test_agentchat_identify_with_token(team: RunningGateway) -> None:
    c = await team.agentchat("whatever", space="team", token="bot-token")
    assert c.welcome["agent_id"] == "@bot"


async def test_capability_violation_is_answered_and_dropped(team: RunningGateway) -> None:
    boss = await team.mew("boss", space="team", token="boss-token")
    bot = await team.mew("bot", space="team", token="bot-token")
    await bot.send(
        {
            "id": "my-req-1",
            "kind": "mcp/request",
            "to": ["boss"],
            "payload": {"method": "tools/call", "params": {"name": "x"}},
        }
    )
    err = await bot.expect("system/error")
    assert err["payload"]["error"] == "capability_violation"
    assert err["payload"]["attempted_kind"] == "mcp/request"
    assert err["payload"]["your_capabilities"] == AGENT_CAPS
    assert err["correlation_id"] == ["my-req-1"]
    await boss.silent(lambda f: f.get("kind") == "mcp/request")


async def test_grant_then_revoke_take_effect_at_once(team: RunningGateway) -> None:
    boss = await team.mew("boss", space="team", token="boss-token")
    bot = await team.mew("bot", space="team", token="bot-token")
    tool = await team.mew("tool", space="team", token="tool-token")
    request = {"kind": "mcp/request", "to": ["tool"], "payload": {"method": "tools/list"}}

    await bot.send(request)
    assert (await bot.expect("system/error"))["payload"]["error"] == "capability_violation"

    grant = {"recipient": "bot", "capabilities": [{"kind": "mcp/request"}]}
    await boss.send({"kind": "capability/grant", "to": ["bot"], "payload": grant})
    got = await bot.expect("capability/grant")
    assert got["from"] == "boss" and got["payload"]["capabilities"] == [{"kind": "mcp/request"}]
    await bot.send(request)
    assert (await tool.expect("mcp/request"))["from"] == "bot"

    await boss.send({"kind": "capability/revoke", "to": ["bot"], "payload": grant})
    await bot.expect("capability/revoke")
    await bot.send(request)
    assert (await bot.expect("system/error"))["payload"]["error"] == "capability_violation"
    await tool.silent(lambda f: f.get("kind") == "mcp/request")


async def test_revoke_of_a_configured_capability_works(team: RunningGateway) -> None:
    boss = await team.mew("boss", space="team", token="boss-token")
    bot = await team.mew("bot", space="team", token="bot-token")
    await boss.send(
        {
            "kind": "capability/revoke",
            "payload": {"recipient": "bot", "capabilities": [{"kind": "chat"}]},
        }
    )
    await bot.expect("capability/revoke")
    await bot.send({"kind": "chat", "payload": {"text": "can I still talk?"}})
    assert (await bot.expect("system/error"))["payload"]["error"] == "capability_violation"
    # the revocation outlives a reconnect
    await bot.close()
    bot2 = await team.mew("bot", space="team", token="bot-token")
    assert {"kind": "chat"} not in bot2.welcome["payload"]["you"]["capabilities"]


async def test_agent_cannot_grant_itself(team: RunningGateway) -> None:
    bot = await team.mew("bot", space="team", token="bot-token")
    await bot.send(
        {
            "kind": "capability/grant",
            "payload": {"recipient": "bot", "capabilities": [{"kind": "**"}]},
        }
    )
    assert (await bot.expect("system/error"))["payload"]["error"] == "capability_violation"


async def test_channel_creation_needs_the_capability(team: RunningGateway) -> None:
    bot = await team.mew("bot", space="team", token="bot-token")
    await bot.send({"kind": "channel/create", "payload": {"channel": "#botland"}})
    # channel/* covers channel/create for this bot; a capability-less kind is refused
    joined = await bot.expect("channel/joined")
    assert joined["payload"]["channel"] == "#botland"
    tool = await team.mew("tool", space="team", token="tool-token")
    await tool.send({"kind": "channel/create", "payload": {"channel": "#toolshed"}})
    err = await tool.expect("system/error")
    assert err["payload"]["error"] == "capability_violation"
    await tool.send({"kind": "channel/create", "payload": {"channel": "#botland"}})
    await tool.expect("system/error")


async def test_join_and_leave_other_channels(team: RunningGateway) -> None:
    boss = await team.mew("boss", space="team", token="boss-token")
    bot = await team.mew("bot", space="team", token="bot-token")
    await boss.send({"kind": "channel/join", "payload": {"channel": "#ops"}})
    await boss.expect("channel/joined")
    await bot.send({"kind": "channel/join", "payload": {"channel": "#ops"}})
    joined = await bot.expect("channel/joined")
    assert sorted(joined["payload"]["members"]) == ["boss", "bot"]
    seen = await boss.next_where(
        lambda f: f.get("kind") == "system/presence" and f["payload"].get("channel") == "#ops"
    )
    assert seen["payload"]["event"] == "join"
    await boss.send({"kind": "chat", "channel": "#ops", "payload": {"text": "ops only"}})
    assert (await bot.expect("chat"))["channel"] == "#ops"
    await bot.send({"kind": "channel/leave", "payload": {"channel": "#ops"}})
    await bot.expect("channel/left")
    await boss.send({"kind": "chat", "channel": "#ops", "payload": {"text": "bot gone"}})
    await boss.next_where(lambda f: f.get("kind") == "chat" and f["payload"]["text"] == "bot gone")
    await bot.silent(lambda f: f.get("kind") == "chat")  # delivered to #ops by now, not to bot
