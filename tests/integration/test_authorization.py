"""One authorization rule for WebSocket and HTTP: channel access, bans, who may grant, restarts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from hubbub.protocol.capabilities import CapabilitySet
from hubbub.server.config import Limits, ParticipantConfig, SpaceConfig, hash_token
from tests.conftest import RunningGateway, WsClient, start_gateway, stop_gateway

BOT_CAPS: list[dict[str, Any]] = [
    {"kind": ["chat", "channel/leave", "history/request", "capability/grant-ack"]},
    {"kind": "channel/join", "payload": {"channel": "!#secret"}},
]
"""An agent that may join every channel except #secret."""

LEAD_CAPS: list[dict[str, Any]] = [
    {"kind": ["chat", "capability/grant", "capability/revoke", "channel/*"]},
]
"""An admin whose own capabilities are limited: it may grant only what these cover."""


def team_space() -> SpaceConfig:
    cfg = SpaceConfig(
        space="team",
        channels=["#general", "#ops", "#secret"],
        participants={
            "root": ParticipantConfig(
                kind="human", role="admin", token_hash=hash_token("root-token")
            ),
            "lead": ParticipantConfig(
                kind="human",
                role="admin",
                token_hash=hash_token("lead-token"),
                capabilities=LEAD_CAPS,
            ),
            "alice": ParticipantConfig(kind="human", token_hash=hash_token("alice-token")),
            "carol": ParticipantConfig(
                kind="human", token_hash=hash_token("carol-token"), capabilities=[{"kind": "**"}]
            ),
            "bot": ParticipantConfig(
                kind="agent", token_hash=hash_token("bot-token"), capabilities=BOT_CAPS
            ),
        },
    )
    cfg.validate()
    return cfg


async def start_team(tmp_path: Path) -> RunningGateway:
    return await start_gateway(tmp_path, spaces=[team_space()], limits=Limits(rate_per_s=0))


@pytest.fixture
async def team(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    gw = await start_team(tmp_path)
    yield gw
    await stop_gateway(gw)


async def join(gw: RunningGateway, pid: str, **extra: Any) -> WsClient:
    return await gw.mew(pid, space="team", token=f"{pid}-token", **extra)


async def call(
    gw: RunningGateway, method: str, path: str, token: str, body: Any = None
) -> tuple[int, dict[str, Any]]:
    """One HTTP request with a bearer token; the status and the JSON answer."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, f"{gw.http}{path}", json=body, headers=headers) as resp,
    ):
        return resp.status, await resp.json()


def chat(channel: str, text: str) -> dict[str, Any]:
    return {"kind": "chat", "channel": channel, "payload": {"text": text}}


async def error_of(c: WsClient) -> dict[str, Any]:
    """The next error frame on either dialect, as {error, message}."""
    frame = await c.next_where(
        lambda f: f.get("kind") == "system/error" or f.get("type") == "ERROR"
    )
    if frame.get("type") == "ERROR":
        return {"error": frame["code"].lower(), "message": frame["message"]}
    payload: dict[str, Any] = frame["payload"]
    return payload


# ---------------------------------------------------------------------------------------------
# channel access: the same rule over WebSocket and HTTP
# ---------------------------------------------------------------------------------------------


async def test_http_reads_and_posts_need_the_join_capability(team: RunningGateway) -> None:
    root = await join(team, "root", channels=["#secret"])
    await root.send(chat("#secret", "the launch code is 0000"))
    await root.expect("chat")
    # over WebSocket the bot may not join #secret ...
    bot = await team.connect()
    await bot.send(
        {
            "type": "join",
            "participantId": "bot",
            "space": "team",
            "token": "bot-token",
            "channels": ["#secret"],
        }
    )
    refusal = await error_of(bot)
    assert refusal["error"] == "capability_violation" and "#secret" in refusal["message"]
    # ... so over HTTP it may neither read it nor post into it, connected or not
    status, body = await call(team, "GET", "/channels/secret/messages", "bot-token")
    assert status == 403 and body["error"] == "capability_violation"
    assert "#secret" in body["message"] and "the launch code" not in str(body)
    status, body = await call(
        team, "POST", "/participants/bot/messages", "bot-token", chat("#secret", "let me in")
    )
    assert status == 403 and body["error"] == "capability_violation"
    await root.silent(lambda f: f.get("kind") == "chat")
    history = await team.router.store.history("team", "#secret")
    assert len(history) == 1


async def test_an_offline_participant_reads_and_posts_where_it_may_join(
    team: RunningGateway,
) -> None:
    root = await join(team, "root", channels=["#ops"])
    status, body = await call(
        team, "POST", "/participants/bot/messages", "bot-token", chat("#ops", "deploy done")
    )
    assert status == 202, body
    assert (await root.expect("chat"))["payload"]["text"] == "deploy done"
    status, body = await call(team, "GET", "/channels/ops/messages", "bot-token")
    assert status == 200 and [m["payload"]["text"] for m in body["messages"]] == ["deploy done"]


@pytest.mark.parametrize("dialect", ["mew", "agentchat"])
async def test_a_connected_participant_posts_over_http_only_where_it_joined(
    team: RunningGateway, dialect: str
) -> None:
    root = await join(team, "root", channels=["#ops"])
    if dialect == "mew":
        bot = await join(team, "bot")  # joins #general only
    else:
        # joins #general only (agentchat's auto-join would put it in #ops too)
        bot = await team.agentchat("bot", space="team", token="bot-token", channels=["#general"])
    status, body = await call(
        team, "POST", "/participants/bot/messages", "bot-token", chat("#ops", "sneaky")
    )
    assert status == 403 and body["error"] == "not_in_channel"
    assert "#ops" in body["message"] and "join" in body["message"]
    status, body = await call(team, "GET", "/channels/ops/messages", "bot-token")
    assert status == 403 and body["error"] == "not_in_channel"
    await root.silent(lambda f: f.get("kind") == "chat")
    # once its connection joined #ops, the same post is accepted
    if dialect == "mew":
        await bot.send({"kind": "channel/join", "payload": {"channel": "#ops"}})
        await bot.expect("channel/joined")
    else:
        await bot.send({"type": "JOIN", "channel": "#ops"})
        await bot.expect_type("JOINED")
    status, body = await call(
        team, "POST", "/participants/bot/messages", "bot-token", chat("#ops", "joined now")
    )
    assert status == 202, body
    assert (await root.expect("chat"))["payload"]["text"] == "joined now"


async def test_a_ban_refuses_http_reads_too(team: RunningGateway) -> None:
    status, _ = await call(team, "POST", "/admin/participants/bot/ban", "root-token")
    assert status == 200
    for path in ("/channels/general/messages", "/participants"):
        status, body = await call(team, "GET", path, "bot-token")
        assert status == 403 and body["error"] == "banned", path
        assert "unban" in body["message"]
    status, body = await call(
        team, "POST", "/participants/bot/messages", "bot-token", chat("#general", "hi")
    )
    assert status == 403 and body["error"] == "banned"


async def test_a_revoked_join_capability_ends_the_membership(team: RunningGateway) -> None:
    root = await join(team, "root", channels=["#general", "#ops"])
    bot = await join(team, "bot", channels=["#general", "#ops"])
    await root.send(
        {
            "kind": "capability/revoke",
            "payload": {
                "recipient": "bot",
                "capabilities": [{"kind": "channel/join", "payload": {"channel": "!#secret"}}],
            },
        }
    )
    left = await bot.expect("channel/left")
    assert left["payload"]["channel"] in ("#general", "#ops")
    await bot.send(chat("#ops", "still here?"))
    assert (await error_of(bot))["error"] in ("not_in_channel", "capability_violation")
    status, body = await call(team, "GET", "/channels/ops/messages", "bot-token")
    assert status == 403 and body["error"] == "capability_violation"
    await root.silent(lambda f: f.get("kind") == "chat" and f["from"] == "bot")


# ---------------------------------------------------------------------------------------------
# who may grant and revoke
# ---------------------------------------------------------------------------------------------


def grant(kind: str, recipient: str, caps: list[dict[str, Any]]) -> dict[str, Any]:
    return {"kind": kind, "payload": {"recipient": recipient, "capabilities": caps}}


async def test_only_admins_grant_and_revoke(team: RunningGateway) -> None:
    root = await join(team, "root")
    alice = await join(team, "alice")  # a human with the default capabilities
    carol = await join(team, "carol")  # a human with role participant and capabilities **
    bot = await join(team, "bot")
    assert not CapabilitySet(alice.welcome["payload"]["you"]["capabilities"]).allows(
        "capability/grant"
    )
    frames = (
        grant("capability/revoke", "root", [{"kind": "chat"}]),
        grant("capability/grant", "bot", [{"kind": "**"}]),
    )
    for frame in frames:
        await alice.send(frame)
        refusal = await error_of(alice)
        assert refusal["error"] == "capability_violation"
        assert "capability/grant" in refusal["message"]
        await carol.send(frame)
        refusal = await error_of(carol)
        assert refusal["error"] == "capability_violation"
        assert "role 'participant'" in refusal["message"] and "grant_roles" in refusal["message"]
    for who in ("alice", "carol"):
        status, body = await call(
            team, "POST", f"/participants/{who}/messages", f"{who}-token", frames[1]
        )
        assert status == 403 and body["error"] == "capability_violation"
    await root.send(chat("#general", "still the boss"))
    assert (await root.expect("chat"))["payload"]["text"] == "still the boss"
    await bot.send({"kind": "channel/create", "payload": {"channel": "#mine"}})
    assert (await error_of(bot))["error"] == "capability_violation"
    await bot.silent(lambda f: f.get("kind") in ("capability/grant", "capability/revoke"))


async def test_a_grant_never_exceeds_the_granters_capabilities(team: RunningGateway) -> None:
    lead = await join(team, "lead")
    bot = await join(team, "bot")
    for caps in (
        [{"kind": "mcp/request"}],
        [{"kind": "**"}],
        [{"kind": "channel/*"}, {"kind": "x"}],
    ):
        await lead.send(grant("capability/grant", "bot", caps))
        refusal = await error_of(lead)
        assert refusal["error"] == "capability_violation"
        assert "do not cover" in refusal["message"]
    await lead.send(grant("capability/grant", "bot", [{"kind": "channel/create"}]))
    got = await bot.expect("capability/grant")
    assert got["payload"]["capabilities"] == [{"kind": "channel/create"}]
    await bot.send({"kind": "channel/create", "payload": {"channel": "#botland"}})
    assert (await bot.expect("channel/joined"))["payload"]["channel"] == "#botland"


async def test_grants_and_revokes_survive_a_restart(tmp_path: Path) -> None:
    gw = await start_team(tmp_path)
    try:
        root = await join(gw, "root")
        bot = await join(gw, "bot")
        await root.send(
            grant(
                "capability/revoke",
                "bot",
                [{"kind": ["chat", "channel/leave", "history/request", "capability/grant-ack"]}],
            )
        )
        await bot.expect("capability/revoke")
        await root.send(grant("capability/grant", "alice", [{"kind": "mcp/request"}]))  # offline
        await root.expect("capability/grant")
    finally:
        await stop_gateway(gw)
    gw = await start_team(tmp_path)
    try:
        bot = await join(gw, "bot")
        caps = CapabilitySet(bot.welcome["payload"]["you"]["capabilities"])
        assert not caps.allows("chat")
        await bot.send(chat("#general", "back again"))
        assert (await error_of(bot))["error"] == "capability_violation"
        status, body = await call(
            gw, "POST", "/participants/bot/messages", "bot-token", chat("#general", "via http")
        )
        assert status == 403 and body["error"] == "capability_violation"
        alice = await join(gw, "alice")
        assert CapabilitySet(alice.welcome["payload"]["you"]["capabilities"]).allows("mcp/request")
    finally:
        await stop_gateway(gw)


async def test_revoking_everything_leaves_nothing_also_after_a_reconnect(
    team: RunningGateway,
) -> None:
    root = await join(team, "root")
    bot = await join(team, "bot")
    await root.send(grant("capability/revoke", "bot", BOT_CAPS))
    await bot.expect("capability/revoke")
    await bot.close()
    again = await join(team, "bot", channels=[])  # MEW's baseline stays: answering requests
    assert again.welcome["payload"]["you"]["capabilities"] == [{"kind": "mcp/response"}]
