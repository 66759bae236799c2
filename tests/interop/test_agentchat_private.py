"""Invite-only channels, on both dialects and over HTTP: agentchat's ``CREATE_CHANNEL
{invite_only: true}`` and ``INVITE``, the MEW dialect's ``channel/create {private: true}`` and
``channel/invite``. Regression tests for the hole where ``invite_only`` made a public channel."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from tests.conftest import RunningGateway, start_gateway, stop_gateway
from tests.interop.test_agentchat_client import of_type


async def test_invite_only_channel_is_private_for_real(gateway: RunningGateway) -> None:
    """The CLI's ``create --private``: outsiders cannot join, post, list or see it."""
    owner = await gateway.agentchat("owner")
    await owner.send({"type": "CREATE_CHANNEL", "channel": "#hideout", "invite_only": True})
    joined = await owner.expect_type("JOINED")
    assert joined["channel"] == "#hideout"

    outsider = await gateway.agentchat("outsider")  # auto-join must not take #hideout
    await outsider.silent(of_type("JOINED", channel="#hideout"))
    await outsider.send({"type": "JOIN", "channel": "#hideout"})
    assert (await outsider.expect_type("ERROR"))["code"] == "NOT_INVITED"
    await outsider.send({"type": "MSG", "to": "#hideout", "content": "let me in"})
    assert (await outsider.expect_type("ERROR"))["code"] == "NOT_INVITED"
    await outsider.send({"type": "LIST_CHANNELS"})
    listed = await outsider.expect_type("CHANNELS")
    assert "#hideout" not in [c["name"] for c in listed["list"]]
    await owner.send({"type": "LIST_CHANNELS"})
    assert "#hideout" in [c["name"] for c in (await owner.expect_type("CHANNELS"))["list"]]

    url = f"{gateway.http}/channels/%23hideout/messages"
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        assert resp.status == 403
        assert (await resp.json())["error"] == "not_invited"


async def test_invite_tells_the_truth_and_lets_the_invitee_in(gateway: RunningGateway) -> None:
    owner = await gateway.agentchat("owner")
    await owner.send({"type": "CREATE_CHANNEL", "channel": "#hideout", "invite_only": True})
    await owner.expect_type("JOINED")
    guest = await gateway.agentchat("guest")

    await owner.send({"type": "INVITE", "channel": "#hideout", "agent": "@guest"})
    note = await guest.expect_type("MSG")
    assert note["from"] == "@owner" and note["content"] == "You have been invited to #hideout"
    await owner.silent(of_type("ERROR"))  # success is silent, as agentchat's server answers

    await guest.send({"type": "JOIN", "channel": "#hideout"})
    assert (await guest.expect_type("JOINED"))["channel"] == "#hideout"
    await guest.send({"type": "MSG", "to": "#hideout", "content": "thanks"})
    seen = await owner.next_where(of_type("MSG", to="#hideout"))
    assert seen["content"] == "thanks" and seen["from"] == "@guest"

    stranger = await gateway.agentchat("stranger")
    await stranger.send({"type": "INVITE", "channel": "#hideout", "agent": "@stranger"})
    assert (await stranger.expect_type("ERROR"))["code"] == "NOT_INVITED"


async def test_private_channel_on_the_mew_dialect(gateway: RunningGateway) -> None:
    alice = await gateway.mew("alice")
    await alice.send({"kind": "channel/create", "payload": {"channel": "#quiet", "private": True}})
    assert (await alice.expect("channel/joined"))["payload"]["channel"] == "#quiet"
    bob = await gateway.mew("bob")
    await bob.send({"kind": "channel/join", "payload": {"channel": "#quiet"}})
    assert (await bob.expect("system/error"))["payload"]["error"] == "not_invited"
    await bob.send({"kind": "channel/list"})
    names = [c["name"] for c in (await bob.expect("channel/list-response"))["payload"]["channels"]]
    assert "#quiet" not in names

    await alice.send(
        {"kind": "channel/invite", "payload": {"channel": "#quiet", "participant": "bob"}}
    )
    told = await bob.expect("channel/invited")
    assert told["payload"] == {"channel": "#quiet", "participant": "bob", "by": "alice"}
    assert (await alice.expect("channel/invited"))["payload"]["participant"] == "bob"
    await bob.send({"kind": "channel/join", "payload": {"channel": "#quiet"}})
    assert (await bob.expect("channel/joined"))["payload"]["channel"] == "#quiet"


async def test_invitations_outlive_a_restart(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path)
    try:
        owner = await gw.agentchat("owner")
        await owner.send({"type": "CREATE_CHANNEL", "channel": "#vault", "invite_only": True})
        await owner.expect_type("JOINED")
        await owner.send({"type": "INVITE", "channel": "#vault", "agent": "@friend"})
        await owner.send({"type": "PING"})
        await owner.expect_type("PONG")
        await gw.router.durable()
    finally:
        await stop_gateway(gw)
    gw = await start_gateway(tmp_path)
    try:
        friend = await gw.agentchat("friend")
        await friend.send({"type": "JOIN", "channel": "#vault"})
        assert (await friend.expect_type("JOINED"))["channel"] == "#vault"
        other = await gw.agentchat("other")
        await other.send({"type": "JOIN", "channel": "#vault"})
        assert (await other.expect_type("ERROR"))["code"] == "NOT_INVITED"
    finally:
        await stop_gateway(gw)
