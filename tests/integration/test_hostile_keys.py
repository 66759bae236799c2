"""Hostile input against agentchat public keys, round three: nobody acts as a key's id without
the key (HTTP, MEW join, /mcp, agentchat IDENTIFY), a key takes no name that reads as the
gateway's or looks like another's, and names bound on first use are bounded per address and
per space (``GET /admin/keys`` in pages). Real gateways on real sockets, real Ed25519 keys."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest
import websockets

from hubbub.server.config import (
    AgentchatKeys,
    ConfigError,
    Limits,
    SpaceConfig,
    limits_from_env,
)
from tests.conftest import MakeGateway, RunningGateway, WsClient, start_gateway, stop_gateway
from tests.interop.test_agentchat_client import of_type
from tests.interop.test_agentchat_identity import Keypair, keyed, keyed_space
from tests.mcp.conftest import ACCEPT, INIT

ADMIN = {"X-Hubbub-Request": "1"}  # open mode: loopback is admin
CHAT = {"kind": "chat", "channel": "#general", "payload": {"text": "I am the key holder"}}


async def post_as(gw: RunningGateway, pid: str) -> tuple[int, dict[str, Any]]:
    """POST a chat message as ``pid`` without a token; the status and the answer."""
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{gw.http}/participants/{pid}/messages", json=CHAT) as resp,
    ):
        return resp.status, await resp.json()


async def identify_keyed(gw: RunningGateway, name: str, key: Keypair) -> dict[str, Any]:
    """IDENTIFY {name, pubkey}, answer the CHALLENGE; the WELCOME or the ERROR that came."""
    c = await gw.connect()
    await c.send({"type": "IDENTIFY", "name": name, "pubkey": key.pem})
    challenge = await c.expect_type("CHALLENGE")
    await c.send(key.answer(challenge))
    return await c.next_where(lambda f: f.get("type") in ("WELCOME", "ERROR"))


async def admin_keys(gw: RunningGateway, query: str = "") -> tuple[int, dict[str, Any]]:
    """``GET /admin/keys?query`` from the gateway's machine (open mode: admin)."""
    async with (
        aiohttp.ClientSession(headers=ADMIN) as http,
        http.get(f"{gw.http}/admin/keys{query}") as resp,
    ):
        return resp.status, await resp.json()


# ---------------------------------------------------------------------------------------------
# item 1: a key's id, or a name a key owns, is acted as only with the key — at every door
# ---------------------------------------------------------------------------------------------


async def test_http_cannot_post_as_a_key_id_or_a_name_bound_to_a_key(
    gateway: RunningGateway,
) -> None:
    key = Keypair()
    await keyed(gateway, "alice", key)
    reader = await gateway.agentchat("reader")
    for pid in (key.agent_id[1:], "alice"):  # its id, the name it took on first use
        status, answer = await post_as(gateway, pid)
        assert status == 401, answer
        assert answer["error"] == "auth_failed"
        assert f"id {pid!r} belongs to a public key" in answer["message"]
        assert "VERIFY_IDENTITY" in answer["message"]  # how to prove it
    await reader.silent(of_type("MSG", content="I am the key holder"))


async def test_http_cannot_post_as_a_participant_with_configured_keys(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path, spaces=[keyed_space(Keypair())])
    try:
        status, answer = await post_as(gw, "owner")
        assert status == 401 and answer["error"] == "auth_failed"
        assert "belongs to a public key" in answer["message"]
        assert (await post_as(gw, "someone-else"))[0] == 202  # other open ids still post
    finally:
        await stop_gateway(gw)


async def test_mew_join_and_mcp_initialize_as_a_key_id_are_refused(
    gateway: RunningGateway,
) -> None:
    key = Keypair()
    await keyed(gateway, "bob", key)
    for pid in (key.agent_id[1:], "bob"):
        mew = await gateway.connect()
        await mew.send({"type": "join", "participantId": pid, "space": "default"})
        err = (await mew.expect("system/error"))["payload"]
        assert err["error"] == "auth_failed" and "belongs to a public key" in err["message"]
        initialize = INIT
        headers = {"X-Hubbub-Participant": pid, **ACCEPT}
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{gateway.http}/mcp", json=initialize, headers=headers) as resp,
        ):
            assert resp.status == 401
            body = await resp.json()
        assert body["error"] == "auth_failed" and "belongs to a public key" in body["message"]
    # a keyless agentchat client asking for the id gets another one (agentchat's free name)
    other = await gateway.agentchat(key.agent_id[1:])
    assert other.welcome["agent_id"] != key.agent_id


# ---------------------------------------------------------------------------------------------
# item 5: a key takes no name that reads as the gateway's, or looks like another's
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["server", "system", "Serv3r", "gate_way"])
async def test_a_keyed_identify_named_like_the_gateway_is_refused_and_binds_nothing(
    gateway: RunningGateway, name: str
) -> None:
    answer = await identify_keyed(gateway, name, Keypair())
    assert answer["type"] == "ERROR", answer
    assert answer["code"] == "INVALID_ID"
    assert "reserved" in answer["message"] and "gateway's own name" in answer["message"]
    assert (await admin_keys(gateway))[1]["bound"] == []


async def test_a_configured_key_may_not_call_itself_server(tmp_path: Path) -> None:
    owner = Keypair()
    gw = await start_gateway(tmp_path, spaces=[keyed_space(owner)])
    try:
        answer = await identify_keyed(gw, "server", owner)
        assert answer["type"] == "ERROR" and "reserved" in answer["message"]
        assert (await keyed(gw, "the-owner", owner)).welcome["agent_id"] == "@owner"
    finally:
        await stop_gateway(gw)


async def test_look_alike_names_are_refused_between_keys_and_plain_joins(
    gateway: RunningGateway,
) -> None:
    await gateway.mew("alice")
    answer = await identify_keyed(gateway, "aIice", Keypair())  # capital i for ell
    assert answer["type"] == "ERROR" and answer["code"] == "INVALID_ID"
    assert "looks like 'alice'" in answer["message"]
    await keyed(gateway, "carol", Keypair())  # a key binds carol ...
    mew = await gateway.connect()
    await mew.send({"type": "join", "participantId": "Caro1", "space": "default"})
    err = (await mew.expect("system/error"))["payload"]  # ... so no one joins as Caro1
    assert err["error"] == "invalid_id" and "looks like 'carol'" in err["message"]
    assert [b["name"] for b in (await admin_keys(gateway))[1]["bound"]] == ["carol"]


async def test_a_name_bound_before_a_restart_still_keeps_look_alikes_out(tmp_path: Path) -> None:
    key = Keypair()
    gw = await start_gateway(tmp_path)
    try:
        await keyed(gw, "dora", key)
        await gw.router.durable()
    finally:
        await stop_gateway(gw)
    gw = await start_gateway(tmp_path)
    try:
        mew = await gw.connect()
        await mew.send({"type": "join", "participantId": "D0ra", "space": "default"})
        err = (await mew.expect("system/error"))["payload"]
        assert err["error"] == "invalid_id" and "looks like 'dora'" in err["message"]
        assert (await keyed(gw, "dora", key)).welcome["name"] == "dora"  # its owner is back
    finally:
        await stop_gateway(gw)


# ---------------------------------------------------------------------------------------------
# item 6: names bound on first use are bounded per address and per space; /admin/keys pages
# ---------------------------------------------------------------------------------------------


async def test_new_bindings_per_address_are_bounded(gateways: MakeGateway) -> None:
    gw = await gateways(limits=Limits(key_bindings_per_address_per_hour=3))
    keys = [Keypair() for _ in range(4)]
    for i, key in enumerate(keys[:3]):
        assert (await identify_keyed(gw, f"agent-{i}", key))["type"] == "WELCOME"
    refused = await identify_keyed(gw, "agent-3", keys[3])
    assert refused["type"] == "ERROR" and refused["code"] == "RATE_LIMITED"
    assert "key_bindings_per_address_per_hour" in refused["message"]
    assert "127.0.0.1" in refused["message"]
    # a key coming back to its own name binds nothing new: still welcome
    again = await identify_keyed(gw, "agent-0", keys[0])
    assert again["type"] == "WELCOME" and again["name"] == "agent-0"
    assert len((await admin_keys(gw))[1]["bound"]) == 3
    # another address has a budget of its own
    ws = await websockets.connect(gw.url, local_addr=("127.0.0.2", 0))
    other = WsClient(ws, gw)
    gw.clients.append(other)
    await other.send({"type": "IDENTIFY", "name": "agent-3", "pubkey": keys[3].pem})
    await other.send(keys[3].answer(await other.expect_type("CHALLENGE")))
    assert (await other.expect_type("WELCOME"))["name"] == "agent-3"


async def test_bindings_per_space_are_bounded_and_forgetting_makes_room(
    gateways: MakeGateway,
) -> None:
    cfg = SpaceConfig(space="default", open=True, agentchat_keys=AgentchatKeys(max_bindings=2))
    cfg.validate()
    gw = await gateways(spaces=[cfg])
    assert (await identify_keyed(gw, "one", Keypair()))["type"] == "WELCOME"
    assert (await identify_keyed(gw, "two", Keypair()))["type"] == "WELCOME"
    third = Keypair()
    refused = await identify_keyed(gw, "three", third)
    assert refused["type"] == "ERROR" and refused["code"] == "NOT_ALLOWED"
    assert "agentchat_keys.max_bindings" in refused["message"] and "2" in refused["message"]
    assert "/admin/keys" in refused["message"]  # the cure: forget unused ones
    async with (
        aiohttp.ClientSession(headers=ADMIN) as http,
        http.post(f"{gw.http}/admin/keys/one/forget") as resp,
    ):
        assert resp.status == 200
    assert (await identify_keyed(gw, "three", third))["type"] == "WELCOME"


async def test_the_server_wide_bound_applies_to_a_space_without_its_own(
    gateways: MakeGateway,
) -> None:
    gw = await gateways(limits=Limits(key_bindings_max=1))
    assert (await identify_keyed(gw, "one", Keypair()))["type"] == "WELCOME"
    refused = await identify_keyed(gw, "two", Keypair())
    assert refused["type"] == "ERROR" and "key_bindings_max" in refused["message"]


async def test_admin_keys_come_in_pages(gateways: MakeGateway) -> None:
    gw = await gateways()
    names = ["ann", "ben", "cat", "dan", "eve"]
    pems = {}
    for name in names:
        key = Keypair()
        pems[name] = key.pem.strip()
        assert (await identify_keyed(gw, name, key))["type"] == "WELCOME"
    status, first = await admin_keys(gw, "?limit=2")
    assert status == 200
    assert first["bound"] == [{"name": n, "pubkey": pems[n]} for n in ("ann", "ben")]
    assert (first["has_more"], first["next_after"], first["total"]) == (True, "ben", 5)
    _, second = await admin_keys(gw, f"?limit=2&after={first['next_after']}")
    assert [b["name"] for b in second["bound"]] == ["cat", "dan"] and second["has_more"]
    _, last = await admin_keys(gw, f"?limit=2&after={second['next_after']}")
    assert [b["name"] for b in last["bound"]] == ["eve"] and last["has_more"] is False
    _, everything = await admin_keys(gw)  # the default page holds them all
    assert [b["name"] for b in everything["bound"]] == names
    status, bad = await admin_keys(gw, "?limit=many")
    assert status == 400 and "limit" in bad["message"]


def test_binding_bounds_are_checked_and_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HUBBUB_KEY_BINDINGS_MAX", "7")
    monkeypatch.setenv("HUBBUB_KEY_BINDINGS_PER_ADDRESS_PER_HOUR", "2")
    lim = limits_from_env()
    assert (lim.key_bindings_max, lim.key_bindings_per_address_per_hour) == (7, 2)
    with pytest.raises(ConfigError, match="key_bindings_max"):
        Limits(key_bindings_max=-1).validate()
    cfg = SpaceConfig(agentchat_keys=AgentchatKeys(max_bindings=-1))
    with pytest.raises(ConfigError, match=r"agentchat_keys\.max_bindings"):
        cfg.validate()
