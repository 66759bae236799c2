"""Where the two WebSocket dialects and HTTP must answer as MEW's and agentchat's own servers
do: #general for a participant without channel/join, agentchat's channel-name error, the
floor holder's display name, and system/register over HTTP (MEW e2e scenario 4)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from hubbub.server.config import ParticipantConfig, SpaceConfig, hash_token
from tests.conftest import RunningGateway, start_gateway, stop_gateway
from tests.interop.test_agentchat_identity import Keypair, keyed

CHAT_ONLY = [{"kind": "chat"}]
"""MEW's default capabilities for a participant: no channel/join."""


def space() -> SpaceConfig:
    def member(token: str, **extra: Any) -> ParticipantConfig:
        return ParticipantConfig(token_hash=hash_token(token), **extra)

    cfg = SpaceConfig(
        space="team",
        channels=["#general", "#ops"],
        participants={
            "bot": member("bot-token", capabilities=CHAT_ONLY),
            "mbot": member("mbot-token", capabilities=CHAT_ONLY),
            "claimer": member("claimer-token"),
            "asker": member("asker-token", kind="human"),
        },
    )
    cfg.validate()
    return cfg


@pytest.fixture
async def team(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    gw = await start_gateway(tmp_path, spaces=[space()])
    yield gw
    await stop_gateway(gw)


def of_type(type_: str, **fields: Any) -> Any:
    """A predicate: an agentchat frame of ``type_`` whose ``fields`` have these values."""
    return lambda f: f.get("type") == type_ and all(f.get(k) == v for k, v in fields.items())


async def test_chat_only_capabilities_are_in_general_on_both_dialects(team: RunningGateway) -> None:
    """Being in a space means being in #general (the one may_join rule): an agentchat client
    with MEW's default ``[chat]`` is auto-joined to it, posts there and may JOIN it, as a MEW
    client with the same capabilities; #ops still needs channel/join."""
    mew = await team.mew("mbot", space="team", token="mbot-token")
    bot = await team.agentchat("Bot Display", space="team", token="bot-token")
    await bot.send({"type": "MSG", "to": "#general", "content": "no JOIN needed"})
    got = await mew.expect("chat")
    assert (got["from"], got["payload"]["text"]) == ("bot", "no JOIN needed")
    await bot.send({"type": "JOIN", "channel": "#general"})
    joined = await bot.expect_type("JOINED")
    assert joined["channel"] == "#general"
    await mew.send({"kind": "channel/join", "payload": {"channel": "#general"}})
    assert (await mew.expect("channel/joined"))["payload"]["channel"] == "#general"
    await bot.send({"type": "JOIN", "channel": "#ops"})
    err = await bot.expect_type("ERROR")
    assert err["code"] == "CAPABILITY_VIOLATION" and "#ops" in err["message"]
    await mew.send({"kind": "channel/join", "payload": {"channel": "#ops"}})
    refused = await mew.expect("system/error")
    assert refused["payload"]["error"] == "capability_violation"


async def test_a_bad_channel_name_is_invalid_msg_on_agentchat(gateway: RunningGateway) -> None:
    """agentchat's server answers a bad channel name with INVALID_MSG "Invalid channel name";
    MEW clients keep hubbub's invalid_channel, with the same sentence."""
    bot = await gateway.agentchat("bot")
    for frame in (
        {"type": "JOIN", "channel": "general"},
        {"type": "CREATE_CHANNEL", "channel": "bad name"},
    ):
        await bot.send(frame)
        err = await bot.expect_type("ERROR")
        assert err["code"] == "INVALID_MSG", err
        assert err["message"].startswith("Invalid channel name"), err
        assert "write '#' then 1-31" in err["message"]
    mew = await gateway.mew("asker")
    for payload in ({"channel": "general"}, {"channel": "bad name"}):
        kind = "channel/join" if payload["channel"] == "general" else "channel/create"
        await mew.send({"kind": kind, "payload": payload})
        refused = (await mew.expect("system/error"))["payload"]
        assert refused["error"] == "invalid_channel", refused
        assert refused["message"].startswith("Invalid channel name")


async def test_floor_claimed_names_the_holder_by_its_display_name(
    gateway: RunningGateway,
) -> None:
    """A keyed agentchat client's id is its key's hash and its name what it IDENTIFYed with:
    FLOOR_CLAIMED's holder_name is that name, as agentchat's server writes it."""
    asker = await gateway.mew("asker", kind="human")
    key = Keypair()
    claimer = await keyed(gateway, "Claire", key)
    holder = key.agent_id
    assert claimer.welcome["agent_id"] == holder and holder != "@Claire"
    watcher = await gateway.agentchat("watcher")
    await asker.send({"kind": "chat", "channel": "#general", "payload": {"text": "who?"}})
    q = await claimer.expect_type("MSG")
    await watcher.expect_type("MSG")
    claim = {"type": "RESPONDING_TO", "msg_id": q["msg_id"], "channel": "#general",
             "started_at": q["ts"] + 5}  # fmt: skip
    await claimer.send(claim)
    claimed = await watcher.next_where(of_type("FLOOR_CLAIMED", holder=holder))
    assert (claimed["holder_name"], claimed["agent"]) == ("Claire", holder)
    mine = await claimer.next_where(of_type("FLOOR_CLAIMED", holder=holder))
    assert mine["holder_name"] == "Claire"


async def test_http_system_register_is_refused_as_mew_refuses_it(team: RunningGateway) -> None:
    """MEW e2e scenario 4: an HTTP system/register answers 400 invalid_request "system/register
    is reserved for the gateway…", and the sender's connection gets that system/error too."""
    limited = await team.mew("mbot", space="team", token="mbot-token")
    body = {"id": "sysreg-1", "kind": "system/register", "payload": {"capabilities": []}}
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            team.http + "/participants/mbot/messages?space=team",
            data=json.dumps(body),
            headers={"Authorization": "Bearer mbot-token", "Content-Type": "application/json"},
        ) as resp,
    ):
        status, answer = resp.status, await resp.json()
    assert status == 400 and answer["error"] == "invalid_request", answer
    assert answer["message"].startswith("system/register is reserved for the gateway")
    assert "capability/grant" in answer["message"]
    err = await limited.expect("system/error")
    assert err["payload"]["error"] == "invalid_request"
    assert err["payload"]["message"] == answer["message"]
    assert err["correlation_id"] == ["sysreg-1"]
    # over the WebSocket, as MEW's gateway: the same system/error
    await limited.send({"id": "sysreg-2", "kind": "system/register", "payload": {}})
    err = await limited.expect("system/error")
    assert err["payload"]["error"] == "invalid_request"
    assert err["correlation_id"] == ["sysreg-2"]
