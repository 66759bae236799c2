"""Direct messages sent while a participant is offline reach it when it comes back, even as a
new process that sends no ``resume``: on both dialects, across a gateway restart, and for a
configured participant that never connected before. Nothing is delivered twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hubbub.server.config import Limits, ParticipantConfig, SpaceConfig, hash_token
from tests.conftest import RunningGateway, WsClient, start_gateway, stop_gateway


def _dm(to: str, text: str) -> dict[str, Any]:
    return {"kind": "chat", "to": [to], "private": True, "payload": {"text": text}}


async def _gone(watcher: WsClient, pid: str) -> None:
    """Wait until ``watcher`` sees ``pid`` leave (the gateway has detached it)."""
    await watcher.next_where(
        lambda f: (
            f.get("kind") == "system/presence"
            and f["payload"].get("event") == "leave"
            and pid
            in [
                p["id"]
                for p in f["payload"].get("participants", [f["payload"].get("participant", {})])
            ]
        )
    )


async def _chats(client: WsClient, n: int) -> list[str]:
    return [(await client.expect("chat"))["payload"]["text"] for _ in range(n)]


async def _offline_bob(gw: RunningGateway) -> WsClient:
    """alice online; bob connected once and gone again; alice DMs him twice meanwhile."""
    alice = await gw.mew("alice")
    bob = await gw.mew("bob")
    await bob.close()
    await _gone(alice, "bob")
    for text in ("while you were out", "and one more"):
        await alice.send(_dm("bob", text))
        await alice.expect("chat")  # the sender's echo: stored and numbered
    return alice


async def test_a_new_connection_gets_the_dms_it_missed_once(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path, limits=Limits(rate_per_s=0))
    try:
        alice = await _offline_bob(gw)
        bob = await gw.mew("bob")  # a new process: no resume
        assert await _chats(bob, 2) == ["while you were out", "and one more"]
        await bob.close()
        await _gone(alice, "bob")
        bob = await gw.mew("bob")  # back again: nothing is replayed twice
        await alice.send(_dm("bob", "live now"))
        assert await _chats(bob, 1) == ["live now"]
    finally:
        await stop_gateway(gw)


async def test_an_agentchat_client_gets_them_too(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path, limits=Limits(rate_per_s=0))
    try:
        await _offline_bob(gw)
        bob = await gw.agentchat("bob", join=False)
        first = await bob.expect_type("MSG")
        assert first["content"] == "while you were out" and first["from"] == "@alice"
        assert (await bob.expect_type("MSG"))["content"] == "and one more"
    finally:
        await stop_gateway(gw)


async def test_dms_sent_after_a_restart_reach_an_offline_participant(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path, limits=Limits(rate_per_s=0))
    bob = await gw.mew("bob")
    await bob.send(_dm("bob", "before the restart"))
    await bob.expect("chat")
    await bob.close()
    await stop_gateway(gw)
    gw = await start_gateway(tmp_path, limits=Limits(rate_per_s=0))
    try:
        alice = await gw.mew("alice")
        await alice.send(_dm("bob", "after the restart"))
        await alice.expect("chat")
        bob = await gw.mew("bob")
        assert await _chats(bob, 1) == ["after the restart"]  # not the one it had seen
    finally:
        await stop_gateway(gw)


async def test_a_configured_participant_gets_dms_sent_before_its_first_connect(
    tmp_path: Path,
) -> None:
    people = {
        pid: ParticipantConfig(kind="agent", token_hash=hash_token(f"{pid}-token"))
        for pid in ("alice", "bob")
    }
    space = SpaceConfig(space="team", participants=people)
    space.validate()
    gw = await start_gateway(tmp_path, spaces=[space], limits=Limits(rate_per_s=0))
    try:
        alice = await gw.mew("alice", space="team", token="alice-token")
        await alice.send(_dm("bob", "welcome aboard"))
        await alice.expect("chat")
        bob = await gw.mew("bob", space="team", token="bob-token")
        assert await _chats(bob, 1) == ["welcome aboard"]
    finally:
        await stop_gateway(gw)
