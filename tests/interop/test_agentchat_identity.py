"""agentchat's public-key identity against hubbub, with real Ed25519 keys (``cryptography``):
the challenge, key ids, keys bound in space.yaml and on first use, displacement, and the
regression test for the hole where a keyless client took a keyed agent's id and DMs."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.keys import CHALLENGE_TTL_MS, Challenge
from hubbub.server.config import (
    AgentchatKeys,
    ConfigError,
    ParticipantConfig,
    SpaceConfig,
    hash_token,
)
from hubbub.server.core.verifications import VERIFY_TIMEOUT_MS, Verifications
from tests.conftest import Door, RunningGateway, WsClient, start_gateway, stop_gateway
from tests.interop.test_agentchat_client import of_type


class Keypair:
    """An agentchat identity: an Ed25519 keypair, the public key as SPKI PEM."""

    def __init__(self) -> None:
        self.private = Ed25519PrivateKey.generate()
        self.pem = (
            self.private.public_key()
            .public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
            .decode()
        )

    @property
    def agent_id(self) -> str:
        """agentchat's id of this key: ``@`` + 16 hex of SHA-256 of the PEM."""
        return "@" + hashlib.sha256(self.pem.encode()).hexdigest()[:16]

    def answer(
        self, challenge: dict[str, Any], timestamp: int = 1_700_000_000_000
    ) -> dict[str, Any]:
        """VERIFY_IDENTITY for a CHALLENGE, signed as agentchat's client signs it."""
        text = f"AGENTCHAT_AUTH|{challenge['nonce']}|{challenge['challenge_id']}|{timestamp}"
        signature = base64.b64encode(self.private.sign(text.encode())).decode()
        return {
            "type": "VERIFY_IDENTITY",
            "challenge_id": challenge["challenge_id"],
            "signature": signature,
            "timestamp": timestamp,
        }


async def keyed(gw: Door, name: str, key: Keypair, **extra: Any) -> WsClient:
    """IDENTIFY {name, pubkey}, answer the CHALLENGE; return once WELCOME arrived."""
    c = await gw.connect()
    await c.send({"type": "IDENTIFY", "name": name, "pubkey": key.pem, **extra})
    challenge = await c.expect_type("CHALLENGE")
    await c.send(key.answer(challenge))
    c.welcome = await c.expect_type("WELCOME")
    return c


async def refused_code(c: WsClient) -> str:
    """The code of the ERROR before the close, asserting no WELCOME came first."""
    frame = await c.next_where(lambda f: f.get("type") in ("ERROR", "WELCOME"))
    assert frame["type"] == "ERROR", frame
    return str(frame["code"])


def keyed_space(owner: Keypair, **policy: Any) -> SpaceConfig:
    cfg = SpaceConfig(
        space="default",
        open=True,
        participants={"owner": ParticipantConfig(kind="human", pubkeys=[owner.pem])},
        agentchat_keys=AgentchatKeys(**policy),
    )
    cfg.validate()
    return cfg


# ---------------------------------------------------------------------------------------------
# the challenge
# ---------------------------------------------------------------------------------------------


async def test_challenge_then_welcome_with_agentchats_key_id(gateway: RunningGateway) -> None:
    key = Keypair()
    c = await gateway.connect()
    await c.send({"type": "IDENTIFY", "name": "own-x", "pubkey": key.pem})
    challenge = await c.expect_type("CHALLENGE")
    assert challenge["challenge_id"] and len(challenge["nonce"]) == 32
    assert isinstance(challenge["expires_at"], int)
    await c.send(key.answer(challenge))
    welcome = await c.expect_type("WELCOME")
    assert welcome["agent_id"] == key.agent_id
    assert welcome["name"] == "own-x" and welcome["verified"] is False  # signed, not approved
    await c.send({"type": "MSG", "to": "#general", "content": "signed in"})
    echo = await c.expect_type("MSG")
    assert echo["from"] == key.agent_id and echo["from_name"] == "own-x"
    assert echo["verified"] is False


async def test_a_signature_by_another_key_is_refused(gateway: RunningGateway) -> None:
    key, thief = Keypair(), Keypair()
    c = await gateway.connect()
    await c.send({"type": "IDENTIFY", "name": "own-x", "pubkey": key.pem})
    challenge = await c.expect_type("CHALLENGE")
    await c.send(thief.answer(challenge))
    assert await refused_code(c) == "VERIFICATION_FAILED"


async def test_another_challenge_id_is_verification_expired(gateway: RunningGateway) -> None:
    """agentchat's test/challenge-auth.test.js: an unknown challenge_id → VERIFICATION_EXPIRED."""
    key = Keypair()
    c = await gateway.connect()
    await c.send({"type": "IDENTIFY", "name": "own-x", "pubkey": key.pem})
    challenge = await c.expect_type("CHALLENGE")
    await c.send(key.answer(challenge) | {"challenge_id": "chal_nonexistent_12345678"})
    assert await refused_code(c) == "VERIFICATION_EXPIRED"


async def test_a_second_identify_while_the_challenge_is_pending(gateway: RunningGateway) -> None:
    """agentchat's test/challenge-auth.test.js compares the text: "Challenge already pending"."""
    key = Keypair()
    c = await gateway.connect()
    await c.send({"type": "IDENTIFY", "name": "own-x", "pubkey": key.pem})
    challenge = await c.expect_type("CHALLENGE")
    await c.send({"type": "IDENTIFY", "name": "own-y", "pubkey": key.pem})
    err = await c.expect_type("ERROR")
    assert (err["code"], err["message"]) == ("INVALID_MSG", "Challenge already pending")
    await c.send(key.answer(challenge))  # the first challenge still stands
    assert (await c.expect_type("WELCOME"))["name"] == "own-x"


async def test_an_invalid_public_key_is_invalid_msg(gateway: RunningGateway) -> None:
    c = await gateway.connect()
    await c.send({"type": "IDENTIFY", "name": "own-x", "pubkey": "not a key"})
    frame = await c.next_where(lambda f: f.get("type") in ("ERROR", "CHALLENGE"))
    assert frame["type"] == "ERROR" and frame["code"] == "INVALID_MSG"
    assert "Ed25519" in frame["message"]


def test_a_late_answer_is_refused() -> None:
    """The challenge's expiry, with the clock passed in (no waiting on the wall clock)."""
    key = Keypair()
    ch = Challenge.issue(key.pem, 1_000, "ab" * 20)
    answer = key.answer({"nonce": ch.nonce, "challenge_id": ch.challenge_id}, timestamp=5)
    ch.check(ch.challenge_id, answer["signature"], 5, 1_000 + CHALLENGE_TTL_MS)  # in time
    with pytest.raises(ProtocolError) as late:
        ch.check(ch.challenge_id, answer["signature"], 5, 1_001 + CHALLENGE_TTL_MS)
    assert late.value.code is ErrorCode.VERIFICATION_EXPIRED  # agentchat's code for it
    with pytest.raises(ProtocolError):  # the timestamp is part of what is signed
        ch.check(ch.challenge_id, answer["signature"], 6, 1_000)


# ---------------------------------------------------------------------------------------------
# the hole: a keyless client never gets a keyed agent's id or its DMs
# ---------------------------------------------------------------------------------------------


async def test_keyless_client_never_gets_a_keyed_agents_id_or_dms(gateway: RunningGateway) -> None:
    key = Keypair()
    own = await keyed(gateway, "own-x", key)
    await own.close()  # offline now; a DM waits for it
    sender = await gateway.agentchat("sender")
    await sender.send({"type": "MSG", "to": key.agent_id, "content": "secret for own-x"})
    await sender.expect_type("MSG")

    for name in ("own-x", key.agent_id[1:]):  # its name (bound on first use), its id
        impostor = await gateway.agentchat(name)
        assert impostor.welcome["agent_id"] not in ("@own-x", key.agent_id)
        await impostor.silent(of_type("MSG", content="secret for own-x"))

    back = await keyed(gateway, "own-x", key)  # the key holder gets its DM
    dm = await back.next_where(of_type("MSG", content="secret for own-x"))
    assert dm["from"] == "@sender"


async def test_same_key_new_connection_displaces_the_old_one(gateway: RunningGateway) -> None:
    key = Keypair()
    first = await keyed(gateway, "own-x", key)
    second = await keyed(gateway, "own-x", key)
    displaced = await first.expect_type("SESSION_DISPLACED")
    assert displaced["reason"] and displaced["new_ip"] == "127.0.0.1"
    assert second.welcome["agent_id"] == key.agent_id  # not @...-2


async def test_tofu_name_belongs_to_the_first_key(gateway: RunningGateway) -> None:
    first, second = Keypair(), Keypair()
    await keyed(gateway, "alice", first)
    other = await keyed(gateway, "alice", second)
    assert other.welcome["agent_id"] == second.agent_id
    peer = await gateway.agentchat("peer")
    await other.send({"type": "MSG", "to": "#general", "content": "am I alice?"})
    msg = await peer.next_where(of_type("MSG", content="am I alice?"))
    assert msg["from_name"] != "alice"


# ---------------------------------------------------------------------------------------------
# keys in space.yaml, token mode, policies
# ---------------------------------------------------------------------------------------------


async def test_configured_key_authenticates_as_its_participant(tmp_path: Path) -> None:
    owner = Keypair()
    cfg = SpaceConfig(
        space="default",
        participants={
            "owner": ParticipantConfig(kind="human", pubkeys=[owner.pem]),
            "bot": ParticipantConfig(token_hash=hash_token("bot-token")),
        },
    )  # token mode
    cfg.validate()
    gw = await start_gateway(tmp_path, spaces=[cfg])
    try:
        c = await keyed(gw, "the-owner", owner)
        assert c.welcome["agent_id"] == "@owner" and c.welcome["verified"] is True
        stranger = await gw.connect()
        key = Keypair()
        await stranger.send({"type": "IDENTIFY", "name": "x", "pubkey": key.pem})
        await stranger.send(key.answer(await stranger.expect_type("CHALLENGE")))
        assert await refused_code(stranger) == "AUTH_FAILED"
        peer = await gw.agentchat("bot", token="bot-token")
        await peer.send({"type": "LIST_AGENTS", "channel": "#general"})
        agents = {a["id"]: a for a in (await peer.expect_type("AGENTS"))["list"]}
        assert agents["@owner"]["verified"] is True and agents["@bot"]["verified"] is False
    finally:
        await stop_gateway(gw)


async def test_keyless_client_cannot_take_a_configured_keys_id(tmp_path: Path) -> None:
    gw = await start_gateway(tmp_path, spaces=[keyed_space(Keypair())])
    try:
        c = await gw.agentchat("owner")
        assert c.welcome["agent_id"] == "@owner-2" and c.welcome["name"] == "owner"
        mew = await gw.connect()
        await mew.send({"type": "join", "participantId": "owner", "space": "default"})
        err = await mew.expect("system/error")
        assert err["payload"]["error"] == "auth_failed"
    finally:
        await stop_gateway(gw)


async def test_allowlist_strict_and_ephemeral_policies(tmp_path: Path) -> None:
    owner = Keypair()
    gw = await start_gateway(tmp_path, spaces=[keyed_space(owner, allowlist="strict")])
    try:
        keyless = await gw.connect()
        await keyless.send({"type": "IDENTIFY", "name": "lurker", "pubkey": None})
        assert await refused_code(keyless) == "NOT_ALLOWED"
        unlisted, key = await gw.connect(), Keypair()
        await unlisted.send({"type": "IDENTIFY", "name": "x", "pubkey": key.pem})
        first = await unlisted.recv()  # refused at once, no CHALLENGE (agentchat's allowlist test)
        assert (first["type"], first["code"]) == ("ERROR", "NOT_ALLOWED")
        await unlisted.ws.wait_closed()
        assert (await keyed(gw, "o", owner)).welcome["verified"] is True
    finally:
        await stop_gateway(gw)
    gw = await start_gateway(tmp_path, spaces=[keyed_space(owner, ephemeral="read_only")])
    try:
        lurker = await gw.agentchat("lurker")
        await lurker.send({"type": "MSG", "to": "#general", "content": "hi"})
        assert (await lurker.expect_type("ERROR"))["code"] == "CAPABILITY_VIOLATION"
    finally:
        await stop_gateway(gw)


async def test_tofu_binding_outlives_a_restart(tmp_path: Path) -> None:
    first, second = Keypair(), Keypair()
    gw = await start_gateway(tmp_path)
    try:
        await keyed(gw, "alice", first)
        await gw.router.durable()
    finally:
        await stop_gateway(gw)
    gw = await start_gateway(tmp_path)
    try:
        other = await keyed(gw, "alice", second)
        assert other.welcome["name"] != "alice"
        keyless = await gw.agentchat("alice")
        assert keyless.welcome["agent_id"] != "@alice"
    finally:
        await stop_gateway(gw)


def test_a_configured_pubkey_must_be_ed25519_pem() -> None:
    cfg = SpaceConfig(participants={"x": ParticipantConfig(pubkeys=["nope"])})
    with pytest.raises(ConfigError, match=r"participants.x.pubkeys\[0\]"):
        cfg.validate()


# ---------------------------------------------------------------------------------------------
# who sent it, who is there: MSG {from_name, verified}, JOINED {agents: [{id, name, verified}]}
# ---------------------------------------------------------------------------------------------


async def test_msg_and_joined_name_and_verify_each_agent(tmp_path: Path) -> None:
    owner, stranger = Keypair(), Keypair()
    gw = await start_gateway(tmp_path, spaces=[keyed_space(owner)])
    try:
        boss = await keyed(gw, "the-boss", owner)  # configured key: @owner, verified
        signed = await keyed(gw, "signer", stranger)  # signed, not approved
        plain = await gw.agentchat("plain")
        mew = await gw.mew("mew-reader")
        await boss.send({"type": "MSG", "to": "#general", "content": "from the boss"})
        got = await plain.next_where(of_type("MSG", content="from the boss"))
        assert (got["from"], got["from_name"], got["verified"]) == ("@owner", "the-boss", True)
        await signed.send({"type": "MSG", "to": "#general", "content": "signed"})
        got = await plain.next_where(of_type("MSG", content="signed"))
        assert (got["from"], got["from_name"]) == (stranger.agent_id, "signer")
        assert got["verified"] is False
        await plain.send({"type": "MSG", "to": "#general", "content": "plain"})
        got = await boss.next_where(of_type("MSG", content="plain"))
        assert (got["from_name"], got["verified"]) == ("plain", False)
        seen = await mew.next_where(
            lambda f: f.get("kind") == "chat" and f["payload"]["text"] == "from the boss"
        )
        assert seen["from"] == "owner" and seen["payload"]["from_name"] == "the-boss"

        await plain.send({"type": "JOIN", "channel": "#general"})
        joined = await plain.expect_type("JOINED")
        agents = {a["id"]: a for a in joined["agents"]}
        assert agents["@owner"] == {"id": "@owner", "name": "the-boss", "verified": True}
        assert agents[stranger.agent_id] == {
            "id": stranger.agent_id,
            "name": "signer",
            "verified": False,
        }
        assert agents["@plain"] == {"id": "@plain", "name": "plain", "verified": False}
        assert agents["@mew-reader"]["verified"] is False
        # the history a JOIN replays says who sent each message as the live MSG did
        replay = next(
            m
            for m in [await plain.expect_type("MSG") for _ in range(3)]
            if m["content"] == "from the boss"
        )
        assert replay["replay"] is True and replay["from_name"] == "the-boss"
        assert replay["verified"] is True
    finally:
        await stop_gateway(gw)


async def test_no_client_can_claim_a_name_or_verified_in_its_message(tmp_path: Path) -> None:
    owner = Keypair()
    gw = await start_gateway(tmp_path, spaces=[keyed_space(owner)])
    try:
        reader = await keyed(gw, "reader", owner)
        forger = await gw.agentchat("forger")
        await forger.send(
            {"type": "MSG", "to": "#general", "content": "a", "from_name": "the-boss"}
            | {"verified": True}
        )
        got = await reader.next_where(of_type("MSG", content="a"))
        assert (got["from_name"], got["verified"]) == ("forger", False)
        mew = await gw.mew("mew-forger")
        payload = {"text": "b", "from_name": "the-boss", "verified": True, "extra": 1}
        await mew.send({"kind": "chat", "payload": payload})
        got = await reader.next_where(of_type("MSG", content="b"))
        assert (got["from"], got["from_name"], got["verified"]) == (
            "@mew-forger",
            "mew-forger",
            False,
        )
        assert "extra" not in got  # only a client's sig is relayed
    finally:
        await stop_gateway(gw)


# ---------------------------------------------------------------------------------------------
# a lost key: an admin forgets the name it took on first use
# ---------------------------------------------------------------------------------------------


async def test_an_admin_forgets_a_name_bound_on_first_use(tmp_path: Path) -> None:
    lost, new = Keypair(), Keypair()
    gw = await start_gateway(tmp_path)
    admin = {"X-Hubbub-Request": "1"}  # open mode: loopback is admin
    try:
        await (await keyed(gw, "alice", lost)).close()
        assert (await keyed(gw, "alice", new)).welcome["name"] != "alice"  # taken
        async with aiohttp.ClientSession(headers=admin) as http:
            async with http.get(f"{gw.http}/admin/keys") as resp:
                assert (await resp.json())["bound"] == [
                    {"name": "alice", "pubkey": lost.pem.strip()}
                ]
            async with http.post(f"{gw.http}/admin/keys/alice/forget") as resp:
                assert resp.status == 200
                body = await resp.json()
            assert body["forgotten"] is True and body["pubkey"] == lost.pem.strip()
            async with http.post(f"{gw.http}/admin/keys/alice/forget") as resp:
                assert resp.status == 404 and (await resp.json())["error"] == "not_bound"
        async with (  # a request that a web page could forge
            aiohttp.ClientSession() as http,
            http.post(f"{gw.http}/admin/keys/alice/forget") as resp,
        ):
            assert resp.status == 403
    finally:
        await stop_gateway(gw)
    gw = await start_gateway(tmp_path)  # forgotten for good: the new key takes the name
    try:
        again = await keyed(gw, "alice", new)
        assert again.welcome["name"] == "alice"
        assert (await keyed(gw, "alice", lost)).welcome["name"] != "alice"
    finally:
        await stop_gateway(gw)


# ---------------------------------------------------------------------------------------------
# VERIFY_REQUEST / VERIFY_RESPONSE between agents
# ---------------------------------------------------------------------------------------------


async def test_an_agent_verifies_another_agents_key(gateway: RunningGateway) -> None:
    key = Keypair()
    target = await keyed(gateway, "target", key)
    asker = await gateway.agentchat("asker")
    await asker.send({"type": "VERIFY_REQUEST", "target": key.agent_id, "nonce": "n-123"})
    ack = await asker.expect_type("VERIFY_REQUEST")
    assert ack["status"] == "pending" and ack["target"] == key.agent_id
    asked = await target.expect_type("VERIFY_REQUEST")
    assert asked["from"] == "@asker" and asked["nonce"] == "n-123"
    sig = base64.b64encode(key.private.sign(b"n-123")).decode()
    await target.send(
        {"type": "VERIFY_RESPONSE", "request_id": asked["request_id"], "nonce": "n-123"}
        | {"sig": sig}
    )
    success = await asker.expect_type("VERIFY_SUCCESS")
    assert success["agent"] == key.agent_id and success["pubkey"] == key.pem
    assert (await target.expect_type("VERIFY_SUCCESS"))["verified"] is True


async def test_a_wrong_signature_fails_and_keyless_targets_cannot_be_verified(
    gateway: RunningGateway,
) -> None:
    key = Keypair()
    target = await keyed(gateway, "target", key)
    asker = await gateway.agentchat("asker")
    await asker.send({"type": "VERIFY_REQUEST", "target": key.agent_id, "nonce": "n"})
    asked = await target.expect_type("VERIFY_REQUEST")
    forged = base64.b64encode(Keypair().private.sign(b"n")).decode()
    await target.send(
        {"type": "VERIFY_RESPONSE", "request_id": asked["request_id"], "nonce": "n", "sig": forged}
    )
    failed = await asker.expect_type("VERIFY_FAILED")
    assert failed["target"] == key.agent_id and failed["reason"]
    await asker.send({"type": "VERIFY_REQUEST", "target": "@asker", "nonce": "n"})
    assert (await asker.expect_type("ERROR"))["code"] == "NO_PUBKEY"  # agentchat's code


def test_an_unanswered_verification_expires_after_30_s() -> None:
    """The ledger with the clock passed in (no waiting on the wall clock)."""
    ledger = Verifications()
    pending = ledger.ask("asker", "target", Keypair().pem, "n", now=1_000)
    assert ledger.expire(pending.request_id, 1_000 + VERIFY_TIMEOUT_MS) is None  # in time
    assert ledger.expire(pending.request_id, 1_001 + VERIFY_TIMEOUT_MS) == pending
    with pytest.raises(ProtocolError) as late:
        ledger.answer("target", pending.request_id, "n", "c2ln", 1_002 + VERIFY_TIMEOUT_MS)
    assert late.value.code is ErrorCode.VERIFICATION_EXPIRED
