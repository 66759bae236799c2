"""Open mode as MEW's clients use it: a token always sent, ``capabilities: []`` by default,
every participant's capabilities in the welcome and in presence."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from hubbub.server.config import (
    OPEN_MODE_CAPABILITIES,
    ParticipantConfig,
    SpaceConfig,
    SpaceDefaults,
    hash_token,
)
from tests.conftest import RunningGateway, start_gateway, stop_gateway

BOT_CAPS = [{"kind": "chat"}, {"kind": "channel/*"}]
NARROW_DEFAULTS = [
    {"kind": "chat"},
    {"kind": "channel/join"},
    {"kind": "mcp/request", "payload": {"method": ["tools/list", "tools/call"]}},
    {"kind": "mcp/response"},
]

BASELINE = {"kind": "mcp/response"}
"""MEW's baseline: every participant may answer a request (listed as held)."""


def open_space() -> SpaceConfig:
    """An open space that also configures one participant with a token."""
    cfg = SpaceConfig(
        open=True,
        participants={
            "bot": ParticipantConfig(token_hash=hash_token("bot-token"), capabilities=BOT_CAPS)
        },
    )
    cfg.validate()
    return cfg


@pytest.fixture
async def mixed(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    gw = await start_gateway(tmp_path, spaces=[open_space()])
    yield gw
    await stop_gateway(gw)


@pytest.fixture
async def narrow(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    """An open space whose defaults are narrower than everything."""
    cfg = SpaceConfig(open=True, defaults=SpaceDefaults(capabilities=NARROW_DEFAULTS))
    cfg.validate()
    gw = await start_gateway(tmp_path, spaces=[cfg])
    yield gw
    await stop_gateway(gw)


def mew_join(pid: str, token: str, capabilities: list[dict[str, Any]]) -> dict[str, Any]:
    """The join frame exactly as MEW's MEWClient sends it."""
    return {
        "type": "join",
        "space": "default",
        "token": token,
        "participantId": pid,
        "capabilities": capabilities,
    }


def presence(frame: dict[str, Any], event: str) -> dict[str, dict[str, Any]]:
    """The participants a ``system/presence`` frame of ``event`` announces, by id (one, or
    several coalesced)."""
    p = frame.get("payload", {})
    if frame.get("kind") != "system/presence" or p.get("event") != event or "channel" in p:
        return {}
    return {e["id"]: e for e in p.get("participants") or [p["participant"]]}


# ------------------------------------------------------------------ tokens in open mode


async def test_unknown_token_joins_as_open_mode_participant(
    mixed: RunningGateway, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "hubbub.auth")
    for _ in range(2):
        c = await mixed.connect()
        await c.send(mew_join("cli-user", "mew-generated-token", []))
        welcome = await c.expect("system/welcome")
        assert welcome["payload"]["you"]["id"] == "cli-user"
        await c.expect("channel/joined")
        await c.close()
    ignored = [r for r in caplog.records if "ignoring a token" in r.getMessage()]
    assert len(ignored) == 1 and "cli-user" in ignored[0].getMessage()


async def test_agentchat_unknown_token_joins_in_open_mode(mixed: RunningGateway) -> None:
    c = await mixed.agentchat("somebody", token="whatever")
    assert c.welcome["agent_id"] == "@somebody"


async def test_configured_token_still_authenticates_in_open_mode(mixed: RunningGateway) -> None:
    bot = await mixed.mew("bot", token="bot-token")
    you = bot.welcome["payload"]["you"]
    assert you["id"] == "bot" and you["capabilities"] == [*BOT_CAPS, BASELINE]


async def test_unknown_token_cannot_take_a_configured_id(mixed: RunningGateway) -> None:
    c = await mixed.connect()
    await c.send(mew_join("bot", "not-the-bot-token", []))
    err = await c.expect("system/error")
    assert err["payload"]["error"] == "auth_failed"
    assert "the token presented is not its token" in err["payload"]["message"]


async def test_http_bearer_unknown_token_is_ignored_in_open_mode(mixed: RunningGateway) -> None:
    listener = await mixed.mew("listener")
    headers = {"Authorization": "Bearer mew-generated-token"}
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{mixed.http}/participants/poster/messages",
            json={"kind": "chat", "payload": {"text": "hi over http"}},
            headers=headers,
        ) as resp:
            assert resp.status == 202
        async with http.get(f"{mixed.http}/participants", headers=headers) as resp:
            assert resp.status == 200
        async with http.get(f"{mixed.http}/dashboard/session", headers=headers) as resp:
            assert resp.status == 200 and (await resp.json())["open"] is True
        # a configured token still means that participant
        async with http.post(
            f"{mixed.http}/participants/poster/messages",
            json={"kind": "chat", "payload": {"text": "spoof"}},
            headers={"Authorization": "Bearer bot-token"},
        ) as resp:
            assert resp.status == 401 and "belongs to 'bot'" in (await resp.json())["message"]
    chat = await listener.expect("chat")
    assert chat["from"] == "poster" and chat["payload"]["text"] == "hi over http"


# ------------------------------------------------------------------ requested capabilities


async def test_empty_capabilities_mean_the_defaults(gateway: RunningGateway) -> None:
    c = await gateway.connect()
    await c.send(mew_join("mew-agent", "tok", []))
    welcome = await c.expect("system/welcome")
    assert welcome["payload"]["you"]["capabilities"] == OPEN_MODE_CAPABILITIES
    joined = await c.expect("channel/joined")
    assert joined["payload"]["channel"] == "#general"
    await c.send({"kind": "chat", "payload": {"text": "not mute"}})
    assert (await c.expect("chat"))["payload"]["text"] == "not mute"


async def test_requested_capabilities_are_kept_within_everything(gateway: RunningGateway) -> None:
    asked = [{"kind": "chat"}, {"kind": "channel/join"}, {"kind": "mcp/proposal"}]
    c = await gateway.mew("limited", capabilities=asked)
    assert c.welcome["payload"]["you"]["capabilities"] == [*asked, BASELINE]
    await c.send({"id": "req-1", "kind": "mcp/request", "to": ["limited"], "payload": {}})
    err = await c.expect("system/error")
    assert err["payload"]["error"] == "capability_violation"


async def test_a_plain_mew_join_sees_general_whatever_it_may_send(
    gateway: RunningGateway,
) -> None:
    speaker = await gateway.mew("speaker")
    c = await gateway.connect()
    await c.send(mew_join("reader", "tok", [{"kind": "mcp/proposal"}, {"kind": "chat"}]))
    await c.expect("system/welcome")
    assert (await c.expect("channel/joined"))["payload"]["channel"] == "#general"
    await speaker.send({"kind": "chat", "payload": {"text": "everyone sees this"}})
    assert (await c.expect("chat"))["payload"]["text"] == "everyone sees this"
    # being in the space means being in #general: naming it needs no channel/join either
    c = await gateway.connect()
    await c.send(mew_join("picky", "tok", [{"kind": "chat"}]) | {"channels": ["#general"]})
    await c.expect("system/welcome")
    assert (await c.expect("channel/joined"))["payload"]["channel"] == "#general"


async def test_requested_capabilities_never_exceed_the_defaults(narrow: RunningGateway) -> None:
    asked = [{"kind": "chat"}, {"kind": "channel/*"}, {"kind": "mcp/*"}, {"kind": "space/kick"}]
    c = await narrow.mew("agent", capabilities=asked)
    assert c.welcome["payload"]["you"]["capabilities"] == [
        {"kind": "chat"},
        {"kind": "channel/join"},
        {"kind": "mcp/request", "payload": {"method": ["tools/list", "tools/call"]}},
        {"kind": "mcp/response"},
    ]
    await c.send(
        {"id": "r-1", "kind": "mcp/request", "to": ["agent"], "payload": {"method": "ping"}}
    )
    err = await c.expect("system/error")
    assert err["payload"]["error"] == "capability_violation"
    assert err["correlation_id"] == ["r-1"]


async def test_asking_only_for_what_the_space_forbids_is_refused(narrow: RunningGateway) -> None:
    c = await narrow.connect()
    await c.send(mew_join("greedy", "tok", [{"kind": "capability/grant"}]))
    err = await c.expect("system/error")
    assert err["payload"]["error"] == "capability_violation"
    assert "none of the requested capabilities" in err["payload"]["message"]
    assert "'capabilities': []" in err["payload"]["message"]


# ------------------------------------------------------------------ capabilities in presence


async def test_welcome_and_presence_carry_capabilities(tmp_path: Path) -> None:
    space = SpaceConfig(space="default", open=True, grant_roles=["admin", "participant"])
    gateway = await start_gateway(tmp_path, spaces=[space])  # alice may grant here
    try:
        await _welcome_and_presence_carry_capabilities(gateway)
    finally:
        await stop_gateway(gateway)


async def _welcome_and_presence_carry_capabilities(gateway: RunningGateway) -> None:
    alice = await gateway.mew("alice")
    asked = [{"kind": "chat"}, {"kind": "channel/join"}]
    bob = await gateway.mew("bob", capabilities=asked)
    listed = {p["id"]: p for p in bob.welcome["payload"]["participants"]}
    assert listed["alice"]["capabilities"] == OPEN_MODE_CAPABILITIES
    assert listed["bob"]["capabilities"] == [*asked, BASELINE]
    joined = await alice.next_where(lambda f: "bob" in presence(f, "join"))
    assert presence(joined, "join")["bob"]["capabilities"] == [*asked, BASELINE]
    # a grant is announced to everyone with the new capabilities
    await alice.send(
        {
            "kind": "capability/grant",
            "to": ["bob"],
            "payload": {"recipient": "bob", "capabilities": [{"kind": "mcp/proposal"}]},
        }
    )
    update = await alice.next_where(lambda f: "bob" in presence(f, "update"))
    granted = [*asked, BASELINE, {"kind": "mcp/proposal"}]
    assert presence(update, "update")["bob"]["capabilities"] == granted
