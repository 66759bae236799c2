"""hubbub answers agentchat's frames as agentchat's server does: its error codes, its
silences, TYPING, its /health fields, what a MSG relays."""

from __future__ import annotations

from datetime import datetime

import aiohttp

from hubbub import __version__
from hubbub.server.config import SpaceConfig
from tests.conftest import RunningGateway
from tests.interop.test_agentchat_client import of_type


async def test_error_codes_agentchat_clients_act_on(gateway: RunningGateway) -> None:
    bob = await gateway.agentchat("bob")
    await bob.send({"type": "JOIN", "channel": "#nowhere"})
    assert (await bob.expect_type("ERROR"))["code"] == "CHANNEL_NOT_FOUND"
    await bob.send({"type": "MSG", "to": "@nobody", "content": "hi"})
    assert (await bob.expect_type("ERROR"))["code"] == "AGENT_NOT_FOUND"
    await bob.send({"type": "MSG", "to": "#general"})
    assert (await bob.expect_type("ERROR"))["code"] == "INVALID_MSG"
    await bob.send({"type": "IDENTIFY", "name": "bob"})
    err = await bob.expect_type("ERROR")
    assert (err["code"], err["message"]) == ("INVALID_MSG", "Already identified")  # exactly
    await bob.send(
        {"type": "VERIFY_IDENTITY", "challenge_id": "c", "signature": "s", "timestamp": 1}
    )
    assert (await bob.expect_type("ERROR"))["code"] == "INVALID_MSG"
    await bob.send({"type": "SET_PRESENCE", "status": "dancing"})
    err = await bob.expect_type("ERROR")
    assert err["code"] == "INVALID_MSG" and err["message"].startswith("Invalid presence status")
    await bob.send({"type": "SET_PRESENCE", "status": "busy", "status_text": "x" * 101})
    assert (await bob.expect_type("ERROR"))["code"] == "INVALID_MSG"


async def test_leave_of_a_channel_one_is_not_in_answers_left(gateway: RunningGateway) -> None:
    bob = await gateway.agentchat("bob", join=False)
    await bob.send({"type": "LEAVE", "channel": "#general"})
    left = await bob.expect_type("LEFT")
    assert left["channel"] == "#general"
    await bob.silent(of_type("ERROR"))


async def test_leave_of_a_channel_that_does_not_exist_is_silent(gateway: RunningGateway) -> None:
    bob = await gateway.agentchat("bob")
    await bob.send({"type": "LEAVE", "channel": "#nowhere"})
    await bob.silent(lambda f: f.get("type") in ("ERROR", "LEFT"))
    owner = await gateway.agentchat("owner")
    await owner.send({"type": "CREATE_CHANNEL", "channel": "#hidden", "invite_only": True})
    await owner.expect_type("JOINED")
    await bob.send({"type": "LEAVE", "channel": "#hidden"})  # invisible to bob: as unknown
    await bob.silent(lambda f: f.get("type") in ("ERROR", "LEFT"))
    mew = await gateway.mew("mew-bob")  # MEW's answer is unchanged: an error naming it
    await mew.send({"kind": "channel/leave", "payload": {"channel": "#nowhere"}})
    err = await mew.expect("system/error")
    assert err["payload"]["error"] == "unknown_channel" and "#nowhere" in err["payload"]["message"]


async def test_presence_changed_reaches_co_members_only_and_not_the_sender(
    gateway: RunningGateway,
) -> None:
    mate = await gateway.agentchat("mate")  # shares #general with bob
    loner = await gateway.agentchat("loner", join=False)  # shares no channel with bob
    mew = await gateway.mew("mew-watcher")  # MEW keeps space-wide presence
    bob = await gateway.agentchat("bob")
    await bob.send({"type": "SET_PRESENCE", "status": "busy", "status_text": "deep work"})
    changed = await mate.next_where(of_type("PRESENCE_CHANGED", agent_id="@bob"))
    assert (changed["presence"], changed["status_text"]) == ("busy", "deep work")
    await mew.next_where(
        lambda f: (
            f.get("kind") == "system/presence"
            and f["payload"]["event"] == "update"
            and f["payload"]["participant"]["id"] == "bob"
        )
    )
    # the flush that told mate told everyone it tells: nothing more is coming
    await bob.silent(of_type("PRESENCE_CHANGED"))
    await loner.silent(of_type("PRESENCE_CHANGED"))
    await mate.send({"type": "SET_PRESENCE", "status": "away"})
    assert (await bob.next_where(of_type("PRESENCE_CHANGED")))["agent_id"] == "@mate"


async def test_typing_is_relayed_to_the_other_members(gateway: RunningGateway) -> None:
    alice = await gateway.agentchat("alice")
    bob = await gateway.agentchat("bob")
    await alice.send({"type": "TYPING", "channel": "#general"})
    typing = await bob.expect_type("TYPING")
    assert typing["from"] == "@alice" and typing["from_name"] == "alice"
    assert typing["channel"] == "#general"
    await alice.silent(lambda f: f.get("type") in ("TYPING", "ERROR"))


async def test_msg_relays_sig_and_in_reply_to_but_no_other_field(gateway: RunningGateway) -> None:
    alice = await gateway.agentchat("alice")
    bob = await gateway.agentchat("bob")
    await alice.send(
        {"type": "MSG", "to": "#general", "content": "x", "sig": "c2ln", "verified": True}
        | {"from": "@admin", "evil": 1}
    )
    got = await bob.next_where(of_type("MSG", content="x"))
    assert got["sig"] == "c2ln" and got["from"] == "@alice"
    assert "evil" not in got and got.get("verified") is not True


async def test_health_answers_agentchats_fields_besides_hubbubs(gateway: RunningGateway) -> None:
    await gateway.agentchat("bob")
    async with aiohttp.ClientSession() as http, http.get(f"{gateway.http}/health") as resp:
        body = await resp.json()
    assert body["status"] == "healthy" and body["version"] == __version__  # agentchat's words
    assert body["connections"] == 1 and body["spaces"] == ["default"]  # hubbub's own
    assert body["store"] == {"available": True}
    assert body["server"] == "hubbub" and body["agents"]["connected"] == 1
    assert body["agents"]["with_identity"] == 0
    assert body["channels"] == {"total": 1, "public": 1}
    started = datetime.fromisoformat(body["started_at"])  # ISO-8601, as agentchat writes it
    assert body["uptime_seconds"] >= 0 and datetime.fromisoformat(body["timestamp"]) >= started


async def test_ping_and_list_channels_are_answered_before_identify(
    gateway: RunningGateway,
) -> None:
    owner = await gateway.agentchat("owner")
    await owner.send({"type": "CREATE_CHANNEL", "channel": "#hidden", "invite_only": True})
    await owner.expect_type("JOINED")
    c = await gateway.connect()
    await c.send({"type": "PING"})
    assert (await c.recv())["type"] == "PONG"
    await c.send({"type": "LIST_CHANNELS"})
    listed = await c.recv()
    assert listed["type"] == "CHANNELS"
    assert [ch["name"] for ch in listed["list"]] == ["#general"]  # not the private one
    await c.send({"type": "IDENTIFY", "name": "late", "pubkey": None})
    assert (await c.expect_type("WELCOME"))["agent_id"] == "@late"


def test_agentchat_channels_adds_agentchats_default_set() -> None:
    cfg = SpaceConfig(channels=["#ops"], agentchat_channels=True)
    cfg.validate()
    assert cfg.channels[:3] == ["#general", "#ops", "#engineering"]
    assert "#agents" in cfg.channels and len(cfg.channels) == len(set(cfg.channels)) == 9
