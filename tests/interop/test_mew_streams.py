"""MEW v0.4 streams (§3.10, issue 24 item 9) with raw frames in MEW's shapes.

The flows of MEW's e2e scenarios 12 (lifecycle), 15 (late joiners see open streams),
16 (grant, revoke, transfer) and 18 (targeted streams), and of ``MEWAgent``'s reasoning
stream, over real sockets to a real gateway: ``stream/request`` → the gateway's
``stream/open``, raw ``#<stream_id>#<data>`` frames, ``stream/close``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re

import aiohttp
import pytest

from hubbub.sdk import Client
from tests.conftest import RunningGateway
from tests.interop.test_mew_client import MakePeer, MewPeer

Frame = dict[str, object]
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")


async def _open(requester: MewPeer, *others: MewPeer, **payload: object) -> Frame:
    """``requester`` asks for a stream (``MEWParticipant.requestStream``: ``to: ["gateway"]``);
    every peer hears the gateway's ``stream/open``; its payload."""
    req = await requester.send(
        {"kind": "stream/request", "to": ["gateway"], "payload": {"direction": "upload"} | payload}
    )
    opened = {}
    for peer in (requester, *others):
        env = await peer.expect("stream/open", lambda f: f["correlation_id"] == [req["id"]])
        assert env["from"] == "system:gateway"
        opened = env["payload"]
    return opened


async def _error(peer: MewPeer, code: str) -> Frame:
    env = await peer.expect("system/error", lambda f: f["payload"]["error"] == code)
    return env["payload"]


async def test_a_request_opens_a_stream_that_everyone_hears_of(mew: MakePeer) -> None:
    """Scenario 12 and ``MEWAgent``: the request is relayed (its sender learns its id from
    the echo), then the gateway's ``stream/open`` correlates to it."""
    agent, human = await mew("agent"), await mew("human")
    req = await agent.send(
        {
            "kind": "stream/request",
            "to": ["gateway"],
            "payload": {"direction": "upload", "description": "reasoning:agent"},
        }
    )
    for peer in (agent, human):
        relayed = await peer.expect("stream/request")
        assert relayed["from"] == "agent" and relayed["id"] == req["id"]
        opened = await peer.expect("stream/open")
        assert opened["correlation_id"] == [req["id"]] and opened["to"] == ["agent"]
        p = opened["payload"]
        assert p["stream_id"].startswith("stream-") and p["encoding"] == "text"
        assert p["owner"] == "agent" and p["authorized_writers"] == ["agent"]
        assert "target" not in p and ISO.match(p["created"])


async def test_frames_reach_the_space_and_only_writers_may_send_them(mew: MakePeer) -> None:
    """Scenario 16's first steps: the owner's frames reach everyone (itself too, as MEW's
    gateway echoes them); another participant's frame is refused and relayed to nobody."""
    owner, writer, verifier = await mew("stream-owner"), await mew("stream-writer"), await mew("v")
    sid = (await _open(owner, writer, verifier))["stream_id"]
    await owner.ws.send(f"#{sid}#frame1-owner")
    for peer in (owner, writer, verifier):
        assert await peer.stream_frame() == f"#{sid}#frame1-owner"
    await writer.ws.send(f"#{sid}#frame2-unauthorized")
    refused = await _error(writer, "unauthorized_stream_write")
    assert refused["stream_id"] == sid and "stream/grant-write" in refused["message"]
    await owner.ws.send(f"#{sid}#frame3")
    assert await verifier.stream_frame() == f"#{sid}#frame3"  # frame2 never arrived
    await writer.ws.send("#stream-999#nobody opened this")
    refused = await _error(writer, "unauthorized_stream_write")
    assert "no stream 'stream-999' is open" in refused["message"]


async def test_late_joiners_see_open_streams_in_their_welcome(mew: MakePeer) -> None:
    """Scenario 15: every field of the request, the gateway's own fields winning over a
    request that tries to set them (scenario 18's malicious stream)."""
    a = await mew("client-a")
    sid = (
        await _open(
            a,
            expected_size_bytes=1024,
            description="Test stream",
            content_type="text/plain",
            format="utf8",
            metadata={"schema_version": "1.0"},
            owner="attacker",
            authorized_writers=["observer", "attacker"],
        )
    )["stream_id"]
    b = await mew("client-b")
    [listed] = b.welcome["payload"]["active_streams"]
    assert listed == {
        "stream_id": sid,
        "owner": "client-a",
        "authorized_writers": ["client-a"],
        "created": listed["created"],
        "direction": "upload",
        "expected_size_bytes": 1024,
        "description": "Test stream",
        "content_type": "text/plain",
        "format": "utf8",
        "metadata": {"schema_version": "1.0"},
    }
    assert ISO.match(listed["created"])
    await a.send({"kind": "stream/close", "payload": {"stream_id": sid, "reason": "complete"}})
    closed = await b.expect("stream/close")
    assert closed["from"] == "client-a" and closed["payload"]["reason"] == "complete"
    c = await mew("client-c")
    assert c.welcome["payload"]["active_streams"] == []
    await a.ws.send(f"#{sid}#after the close")
    await _error(a, "unauthorized_stream_write")


async def test_a_targeted_stream_reaches_its_targets_only(mew: MakePeer) -> None:
    """Scenario 18: frames of a stream with ``target`` go to the targets alone; the
    ``stream/open`` (everyone hears it) and ``active_streams`` carry the target."""
    publisher, aggregator, observer = (
        await mew("publisher"),
        await mew("aggregator"),
        await mew("o"),
    )
    opened = await _open(publisher, aggregator, observer, target=["aggregator"])
    sid = opened["stream_id"]
    assert opened["target"] == ["aggregator"]
    for n in (1, 2, 3):
        await publisher.ws.send(f"#{sid}#position-data-{n}")
    for n in (1, 2, 3):
        assert await aggregator.stream_frame() == f"#{sid}#position-data-{n}"
    broadcast = (await _open(aggregator, publisher, observer))["stream_id"]
    await aggregator.ws.send(f"#{broadcast}#world-state-1")
    for peer in (publisher, observer, aggregator):
        assert await peer.stream_frame() == f"#{broadcast}#world-state-1"  # not a targeted one
    late = await mew("late")
    targets = {s["stream_id"]: s.get("target") for s in late.welcome["payload"]["active_streams"]}
    assert targets == {sid: ["aggregator"], broadcast: None}


async def test_a_target_that_is_not_in_the_space_is_refused(mew: MakePeer) -> None:
    publisher = await mew("publisher")
    await publisher.send(
        {"kind": "stream/request", "payload": {"direction": "upload", "target": ["ghost"]}}
    )
    refused = await _error(publisher, "target_not_found")
    assert refused["targets"] == ["ghost"]
    late = await mew("late")
    assert late.welcome["payload"]["active_streams"] == []


async def test_grant_revoke_and_transfer_ownership(mew: MakePeer) -> None:
    """Scenario 16: each change is acknowledged to everyone with the stream's writers."""
    owner, writer, verifier = await mew("stream-owner"), await mew("stream-writer"), await mew("v")
    sid = (await _open(owner, writer, verifier))["stream_id"]

    grant = await owner.send(
        {
            "kind": "stream/grant-write",
            "to": ["gateway"],
            "payload": {"stream_id": sid, "participant_id": "stream-writer", "reason": "control"},
        }
    )
    for peer in (owner, writer, verifier):
        ack = await peer.expect("stream/write-granted")
        assert ack["from"] == "system:gateway" and ack["correlation_id"] == [grant["id"]]
        assert ack["payload"] == {
            "stream_id": sid,
            "participant_id": "stream-writer",
            "authorized_writers": ["stream-owner", "stream-writer"],
            "reason": "control",
        }
    await writer.ws.send(f"#{sid}#frame3-authorized")
    assert await verifier.stream_frame() == f"#{sid}#frame3-authorized"

    revoke = await owner.send(
        {
            "kind": "stream/revoke-write",
            "payload": {"stream_id": sid, "participant_id": "stream-writer"},
        }
    )
    ack = await verifier.expect("stream/write-revoked")
    assert ack["correlation_id"] == [revoke["id"]]
    assert ack["payload"]["authorized_writers"] == ["stream-owner"]
    await writer.ws.send(f"#{sid}#frame4-revoked")
    await _error(writer, "unauthorized_stream_write")

    await owner.send(
        {
            "kind": "stream/transfer-ownership",
            "payload": {"stream_id": sid, "new_owner": "stream-writer"},
        }
    )
    moved = (await verifier.expect("stream/ownership-transferred"))["payload"]
    assert moved["previous_owner"] == "stream-owner" and moved["new_owner"] == "stream-writer"
    assert moved["authorized_writers"] == ["stream-writer"]
    await writer.ws.send(f"#{sid}#frame5-new-owner")
    assert await verifier.stream_frame() == f"#{sid}#frame5-new-owner"
    await owner.ws.send(f"#{sid}#frame6-old-owner")
    await _error(owner, "unauthorized_stream_write")
    late = await mew("late")
    [listed] = late.welcome["payload"]["active_streams"]
    assert listed["owner"] == "stream-writer" and listed["authorized_writers"] == ["stream-writer"]


async def test_only_the_owner_changes_a_stream(mew: MakePeer) -> None:
    """MEW §3.10.5-7's errors, each with a message naming the fix."""
    owner, other = await mew("owner"), await mew("other")
    sid = (await _open(owner, other))["stream_id"]
    grant = {"stream_id": sid, "participant_id": "other"}
    await other.send({"kind": "stream/grant-write", "payload": grant})
    assert "owned by 'owner'" in (await _error(other, "unauthorized"))["message"]
    await owner.send({"kind": "stream/grant-write", "payload": grant | {"stream_id": "stream-x"}})
    await _error(owner, "stream_not_found")
    await owner.send({"kind": "stream/grant-write", "payload": grant | {"participant_id": "ghost"}})
    await _error(owner, "participant_not_found")
    revoke_self = {"stream_id": sid, "participant_id": "owner"}
    await owner.send({"kind": "stream/revoke-write", "payload": revoke_self})
    await _error(owner, "invalid_operation")
    await owner.send(
        {"kind": "stream/transfer-ownership", "payload": {"stream_id": sid, "new_owner": "ghost"}}
    )
    await _error(owner, "participant_not_found")
    await other.send({"kind": "stream/close", "payload": {"stream_id": sid}})
    await _error(other, "unauthorized")
    await owner.ws.send(f"#{sid}#still open")
    assert await other.stream_frame() == f"#{sid}#still open"


async def test_a_close_without_a_stream_id_is_relayed(mew: MakePeer) -> None:
    """Scenario 12: participants' own ``stream/open`` and ``stream/close`` (the gateway opened
    nothing) reach whom they address, correlated as sent."""
    client, agent = await mew("test-client"), await mew("control-agent")
    sent = await client.send(
        {
            "kind": "stream/open",
            "to": ["control-agent"],
            "correlation_id": ["chat-stream-1"],
            "payload": {"stream_id": "stream-123", "encoding": "text"},
        }
    )
    got = await agent.expect("stream/open")
    assert got["from"] == "test-client" and got["correlation_id"] == ["chat-stream-1"]
    await client.send(
        {
            "kind": "stream/close",
            "to": ["control-agent"],
            "correlation_id": [sent["id"]],
            "payload": {"reason": "complete"},
        }
    )
    closed = await agent.expect("stream/close")
    assert closed["from"] == "test-client" and closed["payload"] == {"reason": "complete"}


async def test_an_owner_leaving_closes_its_streams(mew: MakePeer) -> None:
    """MEW's ``MEWParticipant`` closes its streams on shutdown; when a connection just ends,
    the gateway closes them (reason ``owner_disconnected``) and a leaving writer's grant ends."""
    owner, writer, watcher = await mew("owner"), await mew("writer"), await mew("watcher")
    mine = await _open(owner, writer, watcher)
    theirs = await _open(watcher, owner, writer)
    await watcher.send(
        {
            "kind": "stream/grant-write",
            "payload": {"stream_id": theirs["stream_id"], "participant_id": "owner"},
        }
    )
    await writer.expect("stream/write-granted")
    await owner.ws.close()
    closed = await watcher.expect("stream/close")
    assert closed["from"] == "system:gateway"
    assert closed["payload"] == {"stream_id": mine["stream_id"], "reason": "owner_disconnected"}
    revoked = await writer.expect("stream/write-revoked")
    assert revoked["payload"]["participant_id"] == "owner"
    assert revoked["payload"]["authorized_writers"] == ["watcher"]
    late = await mew("late")
    assert [s["stream_id"] for s in late.welcome["payload"]["active_streams"]] == [
        theirs["stream_id"]
    ]


async def test_stream_limits(mew: MakePeer, gateway: RunningGateway) -> None:
    """Hostile input: a participant owns at most 16 open streams, a request keeps at most
    4 KiB for late joiners, a frame is bounded like any frame."""
    owner = await mew("owner")
    for _ in range(16):
        await _open(owner)
    await owner.send({"kind": "stream/request", "payload": {"direction": "upload"}})
    assert "close one" in (await _error(owner, "stream_limit"))["message"]
    big = {"direction": "upload", "description": "x" * 5000}
    other = await mew("other")
    await other.send({"kind": "stream/request", "payload": big})
    await _error(other, "stream_limit")
    sid = (await _open(other))["stream_id"]
    await other.ws.send(f"#{sid}#" + "y" * (gateway.router.limits.max_frame_bytes + 1))
    await _error(other, "frame_too_large")
    await other.ws.send("#no second hash")
    assert "#<stream_id>#<data>" in (await _error(other, "invalid_envelope"))["message"]


async def test_a_stream_requested_over_http(mew: MakePeer, gateway: RunningGateway) -> None:
    """Scenario 15 posts its request (its client is connected too: a stream belongs to a
    connection): the stream opens all the same."""
    watcher = await mew("watcher")
    await mew("client-a")
    async with aiohttp.ClientSession() as http:
        body = {
            "id": "stream-req-1",
            "kind": "stream/request",
            "to": ["gateway"],
            "payload": {"direction": "upload", "description": "Test stream"},
        }
        async with http.post(
            f"{gateway.http}/participants/client-a/messages", data=json.dumps(body)
        ) as resp:
            assert resp.status == 202, await resp.text()
    opened = await watcher.expect("stream/open")
    assert opened["correlation_id"] == ["stream-req-1"]
    assert opened["payload"]["owner"] == "client-a"
    late = await mew("late")
    [listed] = late.welcome["payload"]["active_streams"]
    assert listed["description"] == "Test stream" and listed["owner"] == "client-a"


async def test_a_hubbub_client_beside_a_stream_reads_on(
    mew: MakePeer, gateway: RunningGateway, caplog: pytest.LogCaptureFixture
) -> None:
    """The hubbub SDK does not read stream data: frames reach it (MEW dialect) and are
    passed over quietly, and the messages after them arrive as ever."""
    client = Client(gateway=gateway.url, participant_id="sdk-reader")
    chats: asyncio.Queue[str] = asyncio.Queue()
    client.on("chat", lambda env: chats.put_nowait(env.payload["text"]))
    await client.connect()
    try:
        owner = await mew("owner")
        sid = (await _open(owner))["stream_id"]
        with caplog.at_level(logging.WARNING, logger="hubbub"):
            await owner.ws.send(f"#{sid}#token by token")
            await owner.send({"kind": "chat", "payload": {"text": "after the frame"}})
            assert await asyncio.wait_for(chats.get(), 5) == "after the frame"
        assert not [r for r in caplog.records if "undecodable" in r.getMessage()]
    finally:
        await client.disconnect()


async def test_stream_errors_over_http_have_mews_statuses(gateway: RunningGateway) -> None:
    """MEW's gateway answers its stream errors over HTTP with 404 and 403."""
    url = f"{gateway.http}/participants/client-a/messages"
    await gateway.mew("client-a")  # a stream's owner is connected
    async with aiohttp.ClientSession() as http:
        body = {"kind": "stream/request", "payload": {"direction": "upload"}}
        async with http.post(url, data=json.dumps(body)) as resp:
            sid = (await resp.json())["stream_id"]
        grant = {"stream_id": "stream-nope", "participant_id": "x"}
        async with http.post(
            url, data=json.dumps({"kind": "stream/grant-write", "payload": grant})
        ) as resp:
            assert resp.status == 404 and (await resp.json())["error"] == "stream_not_found"
        close = {"kind": "stream/close", "payload": {"stream_id": sid}}
        other = f"{gateway.http}/participants/client-b/messages"
        async with http.post(other, data=json.dumps(close)) as resp:
            assert resp.status == 403 and (await resp.json())["error"] == "unauthorized"
