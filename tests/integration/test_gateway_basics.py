"""Channels, DMs, presence and the two dialects meeting in #general, over real sockets."""

from __future__ import annotations

from tests.conftest import RunningGateway


async def test_mew_welcome_lists_participants_and_channels(gateway: RunningGateway) -> None:
    await gateway.mew("alice")
    bob = await gateway.mew("bob")
    payload = bob.welcome["payload"]
    assert payload["you"]["id"] == "bob"
    assert {p["id"] for p in payload["participants"]} >= {"alice", "bob"}
    assert any(c["name"] == "#general" for c in payload["channels"])


async def test_channel_message_reaches_every_member_with_server_fields(
    gateway: RunningGateway,
) -> None:
    alice = await gateway.mew("alice")
    bob = await gateway.mew("bob")
    await alice.send({"kind": "chat", "channel": "#general", "payload": {"text": "hi"}})
    got = await bob.expect("chat")
    echo = await alice.expect("chat")
    assert got == echo
    assert got["from"] == "alice"
    assert got["channel"] == "#general"
    assert got["seq"] == 1
    assert len(got["id"]) == 26 and got["ts"].endswith("Z")


async def test_from_is_overwritten(gateway: RunningGateway) -> None:
    alice = await gateway.mew("alice")
    bob = await gateway.mew("bob")
    await alice.send({"kind": "chat", "from": "bob", "payload": {"text": "I am bob"}})
    got = await bob.expect("chat")
    assert got["from"] == "alice"


async def test_mew_and_agentchat_see_each_other(gateway: RunningGateway) -> None:
    alice = await gateway.mew("alice")
    bob = await gateway.agentchat("bob")

    # alice sees bob arrive (presence), bob's channel message, and bob's DM
    joined = await alice.next_where(  # one frame per participant on the MEW dialect
        lambda f: f.get("kind") == "system/presence" and f["payload"]["participant"]["id"] == "bob"
    )
    assert joined["payload"]["event"] == "join"
    await bob.send({"type": "MSG", "to": "#general", "content": "hello from agentchat"})
    msg = await alice.expect("chat")
    assert msg["from"] == "bob" and msg["payload"]["text"] == "hello from agentchat"
    await bob.send({"type": "MSG", "to": "@alice", "content": "psst"})
    dm = await alice.expect("chat")
    assert dm["to"] == ["alice"] and "channel" not in dm and dm["payload"]["text"] == "psst"
    # bob sees alice's channel message and DM as MSG frames with @ ids and ms timestamps
    await alice.send({"kind": "chat", "channel": "#general", "payload": {"text": "hi bob"}})
    frame = await bob.next_where(lambda f: f.get("type") == "MSG" and f["from"] == "@alice")
    assert frame["to"] == "#general" and frame["content"] == "hi bob"
    assert isinstance(frame["ts"], int) and frame["ts"] > 1_700_000_000_000
    await alice.send(
        {"kind": "chat", "to": ["bob"], "private": True, "payload": {"text": "secret"}}
    )
    frame = await bob.next_where(lambda f: f.get("type") == "MSG" and f["content"] == "secret")
    assert frame["to"] == "@bob" and frame["from"] == "@alice"
    # and bob sees alice leave
    await alice.close()
    left = await bob.expect_type("AGENT_LEFT")
    assert left == left | {"agent": "@alice", "channel": "#general"}


async def test_dm_is_private(gateway: RunningGateway) -> None:
    alice = await gateway.mew("alice")
    bob = await gateway.mew("bob")
    carol = await gateway.mew("carol")
    await alice.send(
        {"kind": "chat", "to": ["bob"], "private": True, "payload": {"text": "for bob only"}}
    )
    assert (await bob.expect("chat"))["payload"]["text"] == "for bob only"
    assert (await alice.expect("chat"))["payload"]["text"] == "for bob only"
    await carol.silent(lambda f: f.get("kind") == "chat")


async def test_join_is_announced_before_the_newcomers_first_message(
    gateway: RunningGateway,
) -> None:
    alice = await gateway.mew("alice")
    bob = await gateway.mew("bob")
    await bob.send({"kind": "chat", "payload": {"text": "first words"}})
    frames = []
    while not frames or frames[-1].get("kind") != "chat":
        frames.append(await alice.recv())
    kinds = [f["kind"] for f in frames]
    assert kinds.index("system/presence") < kinds.index("chat")


async def test_presence_update_reaches_both_dialects_and_the_api(gateway: RunningGateway) -> None:
    import aiohttp

    alice = await gateway.mew("alice")
    bob = await gateway.agentchat("bob")
    await alice.send({"kind": "participant/status", "payload": {"presence": "away"}})
    frame = await bob.expect_type("PRESENCE")
    assert frame["agent"] == "@alice" and frame["presence"] == "away"
    await bob.send({"type": "SET_PRESENCE", "status": "away"})
    update = await alice.next_where(
        lambda f: (
            f.get("kind") == "system/presence"
            and f["payload"]["event"] == "update"
            and f["payload"]["participant"]["id"] == "bob"
        )
    )
    assert update["payload"]["participant"]["presence"] == "away"
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{gateway.http}/participants") as resp,
    ):
        people = {p["id"]: p for p in (await resp.json())["participants"]}
    assert people["alice"]["presence"] == "away" and people["bob"]["presence"] == "away"
    await bob.send({"type": "SET_PRESENCE", "status": "sleeping"})
    err = await bob.expect_type("ERROR")
    assert "'online', 'away', 'busy'" in err["message"]
