"""Client against a real gateway: states, events, iteration, reconnect and resume."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from hubbub.errors import (
    AuthRefused,
    ConnectionFailed,
    GatewayError,
    NotConnected,
    RequestTimeout,
)
from hubbub.protocol.envelope import Envelope
from hubbub.sdk import Client, Disconnected, Reconnecting, State
from hubbub.server.config import Limits, ParticipantConfig, SpaceConfig, hash_token
from tests.conftest import RunningGateway, start_gateway, stop_gateway
from tests.sdk.conftest import FAST, MakeClient
from tests.timing import WAIT, until


def texts(envs: list[Envelope]) -> list[str]:
    return [e.payload["text"] for e in envs if e.kind == "chat"]


async def test_states_and_lifecycle_events_follow_the_table(gw: RunningGateway) -> None:
    c = Client(gateway=gw.url, participant_id="alice", **FAST)
    seen: list[tuple[str, State]] = []
    for event in ("connected", "welcome", "ready", "disconnected"):
        c.on(event, lambda _arg, event=event: seen.append((event, c.state)))
    assert c.state is State.DISCONNECTED
    async with c:
        assert c.state is State.READY and c.is_ready
        assert c.welcome is not None and c.welcome.payload["you"]["id"] == "alice"
        assert "#general" in c.channels and "#general" in c.last_seq
    assert c.state is State.DISCONNECTED
    assert seen == [
        ("connected", State.CONNECTED),
        ("welcome", State.JOINED),
        ("ready", State.READY),
        ("disconnected", State.DISCONNECTED),
    ]


async def test_handlers_and_async_iteration_see_messages(client: MakeClient) -> None:
    alice = await client("alice")
    bob = await client("bob")
    stream = alice.messages()
    handled: list[str] = []
    handled_async: list[str] = []

    @alice.on("chat")
    def on_chat(env: Envelope) -> None:
        handled.append(env.payload["text"])

    async def on_chat_async(env: Envelope) -> None:
        await asyncio.sleep(0)
        handled_async.append(env.payload["text"])

    alice.on("chat", on_chat_async)
    await bob.send({"kind": "chat", "payload": {"text": "one"}})
    await bob.send(Envelope(kind="chat", to=["alice"], payload={"text": "two (dm)"}))
    got: list[str] = []
    async for env in stream:
        if env.kind == "chat":
            got.append(env.payload["text"])
            assert env.from_ == "bob"
        if len(got) == 2:
            break
    assert got == ["one", "two (dm)"]
    await until(lambda: len(handled_async) == 2)
    assert handled == got and handled_async == got
    alice.off("chat", on_chat)
    await bob.send({"kind": "chat", "payload": {"text": "three"}})
    await until(lambda: len(handled_async) == 3)
    assert handled == got


async def test_iteration_ends_when_the_client_disconnects(client: MakeClient) -> None:
    alice = await client("alice")
    bob = await client("bob")
    seen: list[str] = []

    async def drain() -> list[str]:
        async for env in alice:
            if env.kind == "chat":
                seen.append(env.payload["text"])
        return seen

    task = asyncio.create_task(drain())
    await bob.send({"kind": "chat", "payload": {"text": "before the end"}})
    await until(lambda: seen == ["before the end"])
    await alice.disconnect()
    assert await asyncio.wait_for(task, 2) == ["before the end"]  # the loop ended, nothing lost
    with pytest.raises(NotConnected, match="connect"):
        await alice.send({"kind": "chat", "payload": {"text": "late"}})


async def test_a_failing_handler_is_reported_and_the_client_carries_on(client: MakeClient) -> None:
    alice = await client("alice")
    bob = await client("bob")
    errors: list[BaseException] = []
    alice.on("error", errors.append)

    @alice.on("chat")
    def broken(env: Envelope) -> None:
        raise RuntimeError("handler bug")

    await bob.send({"kind": "chat", "payload": {"text": "x"}})
    await until(lambda: errors)
    assert isinstance(errors[0], RuntimeError)
    second = alice.expect("chat", lambda e: e.payload["text"] == "y")
    await bob.send({"kind": "chat", "payload": {"text": "y"}})
    env = await asyncio.wait_for(second, 2)
    assert env.from_ == "bob"


async def test_kill_the_socket_mid_stream_and_miss_nothing(client: MakeClient) -> None:
    """The receiver's socket is aborted twice while a sender posts; it reconnects by itself
    with ``resume`` and sees every message exactly once, in order."""
    n = 300
    receiver = await client("receiver")
    sender = await client("sender")
    got: list[int] = []
    reconnects: list[Reconnecting] = []
    receiver.on("reconnecting", reconnects.append)
    resumed: list[int] = []
    receiver.on("channel/joined", lambda env: resumed.append(len(env.payload["history"])))
    kills = {40, 170}

    @receiver.on("chat")
    def on_chat(env: Envelope) -> None:
        if env.from_ != "sender":
            return
        got.append(int(env.payload["text"]))
        if len(got) in kills:
            ws = receiver._ws
            assert ws is not None and ws.transport is not None
            ws.transport.abort()  # an abrupt drop: no close frame

    async def post() -> None:
        for i in range(n):
            await sender.send({"kind": "chat", "payload": {"text": str(i)}})
            if i % 10 == 0:
                await asyncio.sleep(0.002)  # let the stream interleave with the reconnects

    await post()
    await until(lambda: len(got) >= n, timeout=2 * WAIT)
    # a last message: a repeat of an earlier one would have come before it on this connection
    await sender.send({"kind": "chat", "payload": {"text": str(n)}})
    await until(lambda: n in got)
    assert got == list(range(n + 1))
    assert len(reconnects) == 2
    assert len(resumed) == 2 and sum(resumed) > 0  # messages came back through the resume
    assert receiver.is_ready


async def test_resume_pages_a_gap_longer_than_resume_max(tmp_path: Path) -> None:
    gateway = await start_gateway(tmp_path, limits=Limits(rate_per_s=0, resume_max=7))
    receiver = Client(
        gateway=gateway.url,
        participant_id="receiver",
        **{**FAST, "reconnect_delay": 0.3, "max_reconnect_delay": 0.3},
    )
    sender = Client(gateway=gateway.url, participant_id="sender", **FAST)
    try:
        await receiver.connect()
        await sender.connect()
        got: list[int] = []
        receiver.on("chat", lambda env: got.append(int(env.payload["text"])))
        joined: list[dict[str, Any]] = []
        receiver.on("channel/joined", lambda env: joined.append(env.payload))
        for i in range(5):
            await sender.send({"kind": "chat", "payload": {"text": str(i)}})
        await until(lambda: len(got) == 5)
        ws = receiver._ws
        assert ws is not None and ws.transport is not None
        ws.transport.abort()
        await until(lambda: receiver.state is not State.READY)
        for i in range(5, 60):  # 55 missed messages, resumed 7 at a time at most
            await sender.send({"kind": "chat", "payload": {"text": str(i)}})
        await until(lambda: receiver.is_ready)
        for i in range(60, 70):  # live messages, buffered until the gap is paged in
            await sender.send({"kind": "chat", "payload": {"text": str(i)}})
        await until(lambda: len(got) >= 70)
        await sender.send({"kind": "chat", "payload": {"text": "70"}})  # a repeat comes before
        await until(lambda: 70 in got)
        assert got == list(range(71))
        assert joined[0]["has_more"] is True and len(joined[0]["history"]) == 7
    finally:
        await receiver.disconnect()
        await sender.disconnect()
        await stop_gateway(gateway)


async def test_direct_messages_are_resumed_too(client: MakeClient) -> None:
    receiver = await client("receiver", reconnect_delay=0.2)
    sender = await client("sender")
    got: list[str] = []
    receiver.on("chat", lambda env: got.append(env.payload["text"]))
    await sender.send({"kind": "chat", "to": ["receiver"], "payload": {"text": "first"}})
    await until(lambda: got == ["first"])
    ws = receiver._ws
    assert ws is not None and ws.transport is not None
    ws.transport.abort()
    await until(lambda: receiver.state is not State.READY)
    for i in range(5):
        await sender.send({"kind": "chat", "to": ["receiver"], "payload": {"text": f"dm{i}"}})
    await until(lambda: len(got) >= 6)
    await sender.send({"kind": "chat", "to": ["receiver"], "payload": {"text": "last"}})
    await until(lambda: "last" in got)  # a repeat would have come before it
    assert got == ["first", "dm0", "dm1", "dm2", "dm3", "dm4", "last"]


async def test_direct_messages_are_resumed_before_any_was_seen(client: MakeClient) -> None:
    other = await client("other")
    await other.send({"kind": "chat", "to": ["other"], "payload": {"text": "older DM"}})
    receiver = await client("receiver", reconnect_delay=0.2)
    sender = await client("sender")
    got: list[str] = []
    receiver.on("chat", lambda env: got.append(env.payload["text"]))
    ws = receiver._ws
    assert ws is not None and ws.transport is not None
    ws.transport.abort()
    await until(lambda: receiver.state is not State.READY)
    await sender.send({"kind": "chat", "to": ["receiver"], "payload": {"text": "while away"}})
    await until(lambda: len(got) >= 1)
    await sender.send({"kind": "chat", "to": ["receiver"], "payload": {"text": "last"}})
    await until(lambda: "last" in got)  # the older DM would have come before it
    assert got == ["while away", "last"]


async def test_wrong_token_raises_auth_refused_and_does_not_retry(tmp_path: Path) -> None:
    cfg = SpaceConfig(
        space="team",
        participants={"bot": ParticipantConfig(token_hash=hash_token("right"))},
    )
    cfg.validate()
    gateway = await start_gateway(tmp_path, spaces=[cfg])
    try:
        reconnects: list[Reconnecting] = []
        c = Client(gateway=gateway.url, participant_id="bot", space="team", token="wrong", **FAST)
        c.on("reconnecting", reconnects.append)
        with pytest.raises(AuthRefused, match="unknown token") as info:
            await c.connect()
        assert info.value.code == "auth_failed"
        await asyncio.sleep(0.1)
        assert reconnects == [] and c.state is State.DISCONNECTED
        async with Client(
            gateway=gateway.url, participant_id="bot", space="team", token="right", **FAST
        ) as ok:
            assert ok.is_ready
    finally:
        await stop_gateway(gateway)


async def test_nothing_listening_raises_connection_failed() -> None:
    c = Client(gateway="ws://127.0.0.1:9/ws", participant_id="x", **FAST)
    with pytest.raises(ConnectionFailed, match=r"could not connect to ws://127\.0\.0\.1:9/ws"):
        await c.connect()
    with pytest.raises(NotConnected):
        await c.send({"kind": "chat", "payload": {"text": "x"}})


async def test_gives_up_after_max_reconnect_attempts(tmp_path: Path) -> None:
    gateway = await start_gateway(tmp_path)
    c = Client(gateway=gateway.url, participant_id="alice", **{**FAST, "max_reconnect_attempts": 2})
    reconnects: list[Reconnecting] = []
    errors: list[BaseException] = []
    c.on("reconnecting", reconnects.append)
    c.on("error", errors.append)
    await c.connect()
    stream = c.messages()
    await stop_gateway(gateway)
    await until(lambda: errors, timeout=5)
    assert [r.attempt for r in reconnects] == [1, 2]
    assert all(0 < r.delay <= 0.2 for r in reconnects)
    assert isinstance(errors[-1], ConnectionFailed)
    assert "gave up reconnecting" in str(errors[-1])
    assert c.state is State.DISCONNECTED
    async for _ in stream:  # the stream ends
        pass
    with pytest.raises(NotConnected, match=r"gave up reconnecting|not connected"):
        await c.send({"kind": "chat", "payload": {"text": "x"}})
    await c.disconnect()


async def test_a_replaced_connection_does_not_fight_back(client: MakeClient) -> None:
    first = await client("twin")
    gone: list[Disconnected] = []
    first.on("disconnected", gone.append)
    second = await client("twin")
    await until(lambda: gone)
    assert gone[0].code == 4000 and gone[0].will_reconnect is False
    await asyncio.sleep(0.1)
    assert second.is_ready and first.state is State.DISCONNECTED


async def test_heartbeats_are_sent_while_connected(client: MakeClient, gw: RunningGateway) -> None:
    await client("beater", heartbeat_interval=0.05)
    before = gw.router.metrics.messages_in
    await until(lambda: gw.router.metrics.messages_in - before >= 3, what="three heartbeats")


async def test_join_leave_and_a_refused_channel(client: MakeClient) -> None:
    errors: list[BaseException] = []
    admin = await client("admin")
    created = admin.expect("channel/joined", lambda e: e.payload["channel"] == "#ops")
    await admin.send({"kind": "channel/create", "payload": {"channel": "#ops"}})
    await asyncio.wait_for(created, 2)
    bob = await client("bob", connect=False, channels=["#general", "#nope"])
    bob.on("error", errors.append)
    await bob.connect()
    assert bob.channels == ["#general"] and errors and "#nope" in str(errors[0])
    joined = await bob.join("#ops")
    assert "bob" in joined.payload["members"] and "#ops" in bob.channels
    talk = bob.expect("chat")
    await admin.send({"kind": "chat", "channel": "#ops", "payload": {"text": "ops talk"}})
    env = await asyncio.wait_for(talk, 2)
    assert env.channel == "#ops"
    with pytest.raises(GatewayError, match="unknown_channel"):
        await bob.join("#missing")
    await bob.leave("#ops")
    assert "#ops" not in bob.channels and "#ops" not in bob.last_seq


async def test_wait_for_times_out_with_a_clear_error(client: MakeClient) -> None:
    alice = await client("alice")
    with pytest.raises(RequestTimeout, match="no chat matching"):
        await alice.wait_for("chat", timeout=0.05)
    await client("bob")
    await alice.wait_for_participant("bob", timeout=2)
    assert "bob" in alice.participants


def test_a_misspelt_event_name_is_refused_with_a_suggestion() -> None:
    c = Client(participant_id="alice")
    with pytest.raises(ValueError, match="unknown event 'conected'; did you mean 'connected'"):
        c.on("conected", print)
    with pytest.raises(ValueError, match="did you mean 'mcp/request'"):
        c.on("mcp/requests", print)
    assert c.on("mcp/request", print) is print


async def test_serve_forever_returns_at_disconnect_and_needs_a_connection(
    gw: RunningGateway,
) -> None:
    c = Client(gateway=gw.url, participant_id="alice", **FAST)
    with pytest.raises(NotConnected, match="connect"):
        await c.serve_forever()
    await c.connect()
    serving = asyncio.create_task(c.serve_forever())
    await asyncio.sleep(0)
    assert not serving.done()
    await c.disconnect()
    await asyncio.wait_for(serving, 2)  # returned, nothing raised
