"""MEW v0.4 ``space/invite`` (§3.6.5-6) and the welcome after a grant (§3.6.1), issue 24
item 10, with raw frames in MEW's shapes over real sockets (MEW's e2e scenario 17)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import websockets

from hubbub.server.config import ParticipantConfig, SpaceConfig, hash_token
from tests.conftest import RunningGateway, start_gateway, stop_gateway
from tests.interop.test_mew_client import MakePeer, MewPeer

SPACE = "invite-space"
INITIAL = [{"kind": "chat"}, {"kind": "mcp/proposal"}, {"kind": "mcp/response"}]


def _space() -> SpaceConfig:
    """Scenario 17's space: an admin that may invite, an observer that may not. Open, as
    hubbub reads MEW's ``space.yaml``: there, as in MEW, ``space/invite`` is the authority and
    the admin may give the invitee ``mcp/proposal``, which it lacks itself (a token space
    refuses that: ``tests/integration/test_hostile_defaults.py``)."""
    cfg = SpaceConfig(
        space=SPACE,
        open=True,
        participants={
            "admin": ParticipantConfig(
                kind="human",
                token_hash=hash_token("admin-token"),
                capabilities=[
                    {"kind": "chat"},
                    {"kind": "space/invite"},
                    {"kind": "mcp/response"},
                    {"kind": "capability/grant"},
                ],
                role="admin",
            ),
            "observer": ParticipantConfig(
                token_hash=hash_token("observer-token"),
                capabilities=[{"kind": "chat"}, {"kind": "mcp/response"}],
            ),
        },
    )
    cfg.validate()
    return cfg


@pytest.fixture
async def space(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    gw = await start_gateway(tmp_path, spaces=[_space()])
    yield gw
    await stop_gateway(gw)


async def _join(gw: RunningGateway, pid: str, token: str, **extra: object) -> MewPeer:
    ws = await websockets.connect(gw.url, max_size=None, compression=None)
    peer = MewPeer(ws, pid)
    frame = {"type": "join", "space": SPACE, "token": token, "participantId": pid, **extra}
    await ws.send(json.dumps(frame))
    peer.welcome = await peer.expect("system/welcome")
    return peer


async def _invite(admin: MewPeer, pid: str, **payload: object) -> dict[str, object]:
    sent = await admin.send(
        {
            "kind": "space/invite",
            "payload": {"participant_id": pid, "initial_capabilities": INITIAL} | payload,
        }
    )
    ack = await admin.expect("space/invite-ack")
    assert ack["correlation_id"] == [sent["id"]] and ack["to"] == ["admin"]
    assert ack["from"] == "system:gateway"
    payload_out: dict[str, object] = ack["payload"]
    return payload_out


async def test_an_invite_gives_the_inviter_a_token_that_joins(space: RunningGateway) -> None:
    """The ack with the token goes to the inviter alone; everyone else hears of the new
    participant (presence ``invited``) without it; the token then joins with the invite's
    capabilities."""
    admin = await _join(space, "admin", "admin-token")
    observer = await _join(space, "observer", "observer-token")
    ack = await _invite(admin, "new-agent", reason="Adding new agent for testing")
    assert ack["status"] == "created" and ack["participant_id"] == "new-agent"
    token = ack["token"]
    assert isinstance(token, str) and len(token) > 30
    told = await observer.expect("system/presence", lambda f: f["payload"]["event"] == "invited")
    assert told["payload"] == {
        "event": "invited",
        "participant": {"id": "new-agent", "capabilities": INITIAL},
        "invited_by": "admin",
        "reason": "Adding new agent for testing",
    }
    await observer.silent(lambda f: f["kind"] == "space/invite-ack" or token in json.dumps(f))
    agent = await _join(space, "new-agent", token)
    caps = agent.welcome["payload"]["you"]["capabilities"]
    assert {"kind": "mcp/proposal"} in caps and {"kind": "chat"} in caps
    await agent.send({"kind": "mcp/proposal", "to": ["admin"], "payload": {"method": "tools/call"}})
    assert (await admin.expect("mcp/proposal"))["from"] == "new-agent"


async def test_refused_invites(space: RunningGateway) -> None:
    """An existing id is ``already_exists``; a bad id names the characters; without the
    capability, ``capability_violation``."""
    admin = await _join(space, "admin", "admin-token")
    observer = await _join(space, "observer", "observer-token")
    ack = await _invite(admin, "observer")
    assert ack["status"] == "already_exists" and "token" not in ack
    await admin.send({"kind": "space/invite", "payload": {"participant_id": "../../../etc/passwd"}})
    err = await admin.expect("system/error")
    assert err["payload"]["error"] == "invalid_id"
    assert "invalid characters" in err["payload"]["message"]
    await admin.send({"kind": "space/invite", "payload": {}})
    err = await admin.expect("system/error")
    assert "requires participant_id" in err["payload"]["message"]
    await observer.send({"kind": "space/invite", "payload": {"participant_id": "sneaky"}})
    err = await observer.expect("system/error")
    assert err["payload"]["error"] == "capability_violation"


async def test_an_invite_over_http_and_after_a_restart(tmp_path: Path) -> None:
    """Scenario 17 posts its invite: the response carries the token (``"status":"created"``),
    the inviter's connection gets the ack too, the invited participant posts with the token,
    and it still works after the gateway restarts."""
    gw = await start_gateway(tmp_path, spaces=[_space()])
    connected = await _join(gw, "admin", "admin-token")  # the inviter's MEW connection
    body = {
        "id": "invite-1",
        "kind": "space/invite",
        "payload": {"participant_id": "new-agent", "initial_capabilities": INITIAL},
    }
    admin = {"Authorization": "Bearer admin-token"}
    try:
        async with aiohttp.ClientSession() as http:
            url = f"{gw.http}/participants/admin/messages?space={SPACE}"
            async with http.post(url, data=json.dumps(body), headers=admin) as resp:
                got = await resp.json()
            assert got["status"] == "created" and got["participant_id"] == "new-agent"
            token = got["token"]
            ack = await connected.expect("space/invite-ack")  # as MEW's gateway sends it
            assert ack["payload"]["token"] == token and ack["correlation_id"] == ["invite-1"]
            async with http.post(
                url, data=json.dumps(body | {"id": "invite-2"}), headers=admin
            ) as resp:
                assert (await resp.json())["status"] == "already_exists"
    finally:
        await stop_gateway(gw)
    gw = await start_gateway(tmp_path, spaces=[_space()])
    try:
        async with aiohttp.ClientSession() as http:
            proposal = {"kind": "mcp/proposal", "to": ["admin"], "payload": {"method": "x"}}
            async with http.post(
                f"{gw.http}/participants/new-agent/messages?space={SPACE}",
                data=json.dumps(proposal),
                headers={"Authorization": f"Bearer {token}"},
            ) as resp:
                assert resp.status == 202, await resp.text()
                assert (await resp.json())["status"] == "accepted"
    finally:
        await stop_gateway(gw)


async def test_a_grant_sends_the_mew_grantee_an_updated_welcome(space: RunningGateway) -> None:
    """§3.6.1 step 3: the grantee's new welcome lists its capabilities with the grant's."""
    admin = await _join(space, "admin", "admin-token")
    observer = await _join(space, "observer", "observer-token")
    grant = await admin.send(
        {
            "kind": "capability/grant",
            "to": ["observer"],
            "payload": {
                "recipient": "observer",
                "capabilities": [{"kind": "mcp/response"}, {"kind": "space/invite"}],
            },
        }
    )
    got = await observer.expect("capability/grant")
    assert got["id"] == grant["id"]
    welcome = await observer.expect("system/welcome")
    assert welcome["to"] == ["observer"]
    assert {"kind": "space/invite"} in welcome["payload"]["you"]["capabilities"]
    assert "admin" in {p["id"] for p in welcome["payload"]["participants"]}
    await admin.silent(lambda f: f["kind"] == "system/welcome")


async def test_a_resuming_client_is_not_welcomed_again(space: RunningGateway) -> None:
    """The hubbub SDK and web chat (joins with ``resume``) learn a grant from the grant
    envelope and presence; a second welcome would restart their handshake."""
    admin = await _join(space, "admin", "admin-token")
    observer = await _join(space, "observer", "observer-token", resume={})
    await admin.send(
        {
            "kind": "capability/grant",
            "payload": {"recipient": "observer", "capabilities": [{"kind": "space/invite"}]},
        }
    )
    await observer.expect("capability/grant")
    await observer.silent(lambda f: f["kind"] == "system/welcome")


async def test_in_an_open_space_a_participant_without_a_token_may_not_invite(
    mew: MakePeer,
) -> None:
    """Anyone may join an open space under any id: letting anyone invite would let anyone
    claim ids (an invited id then needs its token)."""
    squatter = await mew("squatter")  # the open space's defaults allow every kind
    await squatter.send({"kind": "space/invite", "payload": {"participant_id": "bob"}})
    err = await squatter.expect("system/error")
    assert err["payload"]["error"] == "capability_violation"
    assert "only a participant with a token" in err["payload"]["message"]
    bob = await mew("bob")  # still anyone's to take
    assert bob.welcome["payload"]["you"]["id"] == "bob"
