"""Bad input on real sockets: every mistake gets a clear error, and nobody else notices.

Each case checks, on the MEW dialect and (where it has the concept) on agentchat:

- a clear error arrives (MEW ``system/error {error, message}``; agentchat ``ERROR {code,
  message}`` with the code upper-cased) and its message names the problem;
- the connection stays open where that is safe: the same client then sends a chat that the
  other participants receive; where it is not safe (refused handshakes, the hard frame cap) the
  close code is the documented one;
- no other participant receives an error or anything of the bad frame;
- nothing accepted before the bad frame is lost (channel history over HTTP).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from hubbub.protocol.agentchat import wire_code
from hubbub.server.config import Limits, ParticipantConfig, SpaceConfig, hash_token
from tests.conftest import RunningGateway, WsClient, start_gateway, stop_gateway

CLOSE_POLICY = 1008
CLOSE_TOO_BIG = 1009

Frame = dict[str, Any] | str | bytes

# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def is_error(frame: dict[str, Any]) -> bool:
    return frame.get("kind") == "system/error" or frame.get("type") == "ERROR"


def error_code(frame: dict[str, Any]) -> str:
    return str(frame["payload"]["error"] if "kind" in frame else frame["code"])


def error_message(frame: dict[str, Any]) -> str:
    return str(frame["payload"]["message"] if "kind" in frame else frame["message"])


def chat_text(frame: dict[str, Any]) -> str | None:
    """The text of a chat (MEW ``chat`` or agentchat ``MSG``), None for other frames."""
    if frame.get("kind") == "chat":
        return str(frame["payload"].get("text"))
    if frame.get("type") == "MSG":
        return str(frame.get("content"))
    return None


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def send_raw(c: WsClient, frame: Frame) -> None:
    """Send a dict as JSON text, a str as a text frame, bytes as a binary frame."""
    if isinstance(frame, dict):
        await c.ws.send(json.dumps(frame))
    else:
        await c.ws.send(frame)


async def send_chat(c: WsClient, dialect: str, text: str, channel: str = "#general") -> None:
    if dialect == "mew":
        await c.send({"kind": "chat", "channel": channel, "payload": {"text": text}})
    else:
        await c.send({"type": "MSG", "to": channel, "content": text})


async def receive_chat(c: WsClient, text: str, timeout: float = 5.0) -> dict[str, Any]:
    """The chat carrying ``text``; fails if an error frame arrives before it."""

    def match(frame: dict[str, Any]) -> bool:
        if is_error(frame):
            raise AssertionError(f"unexpected error frame {frame}")
        return chat_text(frame) == text

    return await c.next_where(match, timeout)


async def next_error(c: WsClient, timeout: float = 5.0) -> dict[str, Any]:
    return await c.next_where(is_error, timeout)


def assert_error(frame: dict[str, Any], code: str, fragment: str) -> None:
    """``frame`` is an error of ``code`` (agentchat's name for it on that dialect) naming
    ``fragment``."""
    expected = wire_code(code) if frame.get("type") == "ERROR" else code
    assert error_code(frame) == expected, frame
    assert fragment in error_message(frame), frame
    if frame.get("kind") == "system/error":
        assert frame["from"] == "system:gateway"


async def history_texts(gw: RunningGateway, channel: str = "general") -> list[str]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{gw.http}/channels/{channel}/messages", params={"limit": "1000"}) as resp,
    ):
        assert resp.status == 200
        body = await resp.json()
    return [m["payload"]["text"] for m in body["messages"] if m["kind"] == "chat"]


async def closed_with(c: WsClient, code: int) -> None:
    """The server closed ``c`` with ``code``."""
    await asyncio.wait_for(c.ws.wait_closed(), 5)
    assert c.ws.close_code == code, (c.ws.close_code, c.ws.close_reason)


@asynccontextmanager
async def custom_gateway(tmp_path: Path, **kw: Any) -> AsyncIterator[RunningGateway]:
    gw = await start_gateway(tmp_path, **kw)
    try:
        yield gw
    finally:
        await stop_gateway(gw)


@dataclass
class Room:
    """Four participants in #general: an offender and a peer on each dialect."""

    gw: RunningGateway
    m_off: WsClient
    m_peer: WsClient
    a_off: WsClient
    a_peer: WsClient

    def offender(self, dialect: str) -> WsClient:
        return self.m_off if dialect == "mew" else self.a_off

    @property
    def peers(self) -> list[WsClient]:
        return [self.m_peer, self.a_peer]


async def make_room(gw: RunningGateway) -> Room:
    return Room(
        gw,
        await gw.mew("m-off"),
        await gw.mew("m-peer"),
        await gw.agentchat("a-off"),
        await gw.agentchat("a-peer"),
    )


@pytest.fixture
async def room(gateway: RunningGateway) -> Room:
    return await make_room(gateway)


async def check_bad_frame(
    room: Room, dialect: str, frame: Frame, code: str, fragment: str
) -> dict[str, Any]:
    """Chat, bad frame, error, chat: the error is clear, the connection and peers unaffected."""
    off = room.offender(dialect)
    before, after = unique("before"), unique("after")
    await send_chat(off, dialect, before)
    for c in (off, *room.peers):
        await receive_chat(c, before)

    await send_raw(off, frame)
    err = await next_error(off)
    assert_error(err, code, fragment)

    await send_chat(off, dialect, after)
    await receive_chat(off, after)  # no second error for the bad frame, still connected
    for peer in room.peers:
        await receive_chat(peer, after)  # no error and nothing of the bad frame before it
    assert await history_texts(room.gw) == [before, after]
    assert room.gw.router.metrics.errors["internal_error"] == 0
    return err


# ---------------------------------------------------------------------------------------------
# malformed frames after the handshake
# ---------------------------------------------------------------------------------------------


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


MEW_CASES: list[tuple[str, Frame, str, str]] = [
    ("invalid-json", '{"kind": "chat", "payload": {"text": "hi"', "invalid_json", "not valid JSON"),
    ("not-an-object", '["chat", "hi"]', "invalid_envelope", "Expected `object`"),
    (
        "invalid-utf8",
        b'{"kind":"chat","payload":{"text":"\xff\xfe"}}',
        "invalid_json",
        "not valid UTF-8",
    ),
    (
        "unknown-kind",
        {"kind": "system/shout", "payload": {"text": "hi"}},  # an application's kind is routed
        "unknown_kind",
        "'system/shout'",
    ),
    (
        "server-only-welcome",
        {"kind": "system/welcome", "payload": {}},
        "unknown_kind",
        "only by the server",
    ),
    (
        "server-only-error",
        {"kind": "system/error", "payload": {"error": "x"}},
        "unknown_kind",
        "only by the server",
    ),
    (
        "system-join-again",
        {"kind": "system/join", "payload": {"participantId": "m-off"}},
        "unknown_kind",
        "only by the server",
    ),
    ("join-frame-again", {"type": "join", "participantId": "m-off"}, "invalid_envelope", "`kind`"),
    ("missing-kind", {"payload": {"text": "hi"}}, "invalid_envelope", "`kind`"),
    ("kind-is-a-number", {"kind": 5, "payload": {"text": "hi"}}, "invalid_envelope", "`$.kind`"),
    ("chat-without-text", {"kind": "chat", "payload": {}}, "invalid_envelope", "'text'"),
    ("chat-without-payload", {"kind": "chat", "channel": "#general"}, "invalid_envelope", "'text'"),
    (
        "chat-text-not-string",
        {"kind": "chat", "payload": {"text": 5}},
        "invalid_envelope",
        "'text'",
    ),
    ("payload-not-object", {"kind": "chat", "payload": "hi"}, "invalid_envelope", "`$.payload`"),
    (
        "to-is-a-string",
        {"kind": "chat", "to": "m-peer", "payload": {"text": "hi"}},
        "invalid_envelope",
        "`$.to`",
    ),
    (
        "to-is-empty",
        {"kind": "chat", "to": [], "payload": {"text": "hi"}},
        "invalid_envelope",
        "at least one recipient",
    ),
    (
        "join-after-seq-negative",
        {"kind": "channel/join", "payload": {"channel": "#general", "after_seq": -1}},
        "invalid_envelope",
        "after_seq",
    ),
    (
        "history-after-seq-negative",
        {"kind": "history/request", "payload": {"channel": "#general", "after_seq": -1}},
        "invalid_envelope",
        "after_seq",
    ),
    (
        "history-limit-not-integer",
        {"kind": "history/request", "payload": {"channel": "#general", "limit": "ten"}},
        "invalid_envelope",
        "limit",
    ),
    (
        "dm-illegal-id",
        {"kind": "chat", "to": ["bad id"], "payload": {"text": "hi"}},
        "invalid_id",
        "'bad id'",
    ),
    (
        "dm-unknown-participant",
        {"kind": "chat", "to": ["nobody"], "payload": {"text": "hi"}},
        "unknown_participant",
        "'nobody'",
    ),
    (
        "join-unknown-channel",
        {"kind": "channel/join", "payload": {"channel": "#nowhere"}},
        "unknown_channel",
        "#nowhere",
    ),
    (
        "chat-to-unknown-channel",
        {"kind": "chat", "channel": "#nowhere", "payload": {"text": "hi"}},
        "unknown_channel",
        "#nowhere",
    ),
    (
        "chat-to-illegal-channel-name",
        {"kind": "chat", "channel": "general", "payload": {"text": "hi"}},
        "invalid_channel",
        "'general'",
    ),
    (
        "payload-nested-150-deep",
        '{"kind":"chat","payload":{"text":"hi","x":' + _nested(150) + "}}",
        "invalid_envelope",
        "deeper than 100 levels",
    ),
    (
        "payload-nested-5000-deep",
        '{"kind":"chat","payload":{"text":"hi","x":' + _nested(5000) + "}}",
        "invalid_envelope",
        "deeper than 100 levels",
    ),
    (
        "grant-invalid-regex",
        {
            "kind": "capability/grant",
            "payload": {"recipient": "m-peer", "capabilities": [{"kind": "/(/"}]},
        },
        "invalid_envelope",
        "invalid regular expression",
    ),
    (
        "grant-regex-too-large",
        {
            "kind": "capability/grant",
            "payload": {"recipient": "m-peer", "capabilities": [{"kind": "/a{4294967296}/"}]},
        },
        "invalid_envelope",
        "invalid regular expression",
    ),
    (
        "grant-unknown-recipient",
        {
            "kind": "capability/grant",
            "payload": {"recipient": "nobody", "capabilities": [{"kind": "chat"}]},
        },
        "unknown_participant",
        "'recipient'",
    ),
]

AGENTCHAT_CASES: list[tuple[str, Frame, str, str]] = [
    ("invalid-json", '{"type": "MSG", "to": "#general"', "invalid_json", "not valid JSON"),
    ("not-an-object", '["MSG"]', "invalid_envelope", "Expected `object`"),
    (
        "invalid-utf8",
        b'{"type":"MSG","to":"#general","content":"\xff\xfe"}',
        "invalid_json",
        "not valid UTF-8",
    ),
    (
        "unknown-type",
        {"type": "SHOUT", "to": "#general", "content": "hi"},
        "unknown_kind",
        "'SHOUT'",
    ),
    ("server-only-type", {"type": "WELCOME", "agent_id": "@a-off"}, "unknown_kind", "'WELCOME'"),
    ("missing-type", {"to": "#general", "content": "hi"}, "unknown_kind", "`type`"),
    ("type-is-a-number", {"type": 5, "to": "#general"}, "unknown_kind", "`$.type`"),
    ("msg-without-content", {"type": "MSG", "to": "#general"}, "invalid_envelope", "`content`"),
    (
        "msg-content-not-string",
        {"type": "MSG", "to": "#general", "content": 5},
        "invalid_envelope",
        "`$.content`",
    ),
    ("msg-without-to", {"type": "MSG", "content": "hi"}, "invalid_envelope", "`to`"),
    (
        "msg-target-without-prefix",
        {"type": "MSG", "to": "general", "content": "hi"},
        "invalid_envelope",
        "must start with '#'",
    ),
    (
        "join-after-seq-negative",
        {"type": "JOIN", "channel": "#general", "after_seq": -1},
        "invalid_envelope",
        "after_seq",
    ),
    (
        "join-after-seq-not-integer",
        {"type": "JOIN", "channel": "#general", "after_seq": "x"},
        "invalid_envelope",
        "after_seq",
    ),
    (
        "responding-to-started-at-out-of-range",
        '{"type":"RESPONDING_TO","msg_id":"x","channel":"#general","started_at":1e400}',
        "invalid_envelope",
        "out of range",
    ),
    ("dm-illegal-id", {"type": "MSG", "to": "@bad id", "content": "hi"}, "invalid_id", "'bad id'"),
    (
        "dm-unknown-participant",
        {"type": "MSG", "to": "@nobody", "content": "hi"},
        "unknown_participant",
        "'nobody'",
    ),
    (
        "join-unknown-channel",
        {"type": "JOIN", "channel": "#nowhere"},
        "unknown_channel",
        "#nowhere",
    ),
    (
        "msg-to-unknown-channel",
        {"type": "MSG", "to": "#nowhere", "content": "hi"},
        "unknown_channel",
        "#nowhere",
    ),
    (
        "identify-again",
        {"type": "IDENTIFY", "name": "someone"},
        "invalid_envelope",
        "Already identified",
    ),
    (
        "extra-field-nested-5000-deep",
        '{"type":"MSG","to":"#general","content":"hi","x":' + _nested(5000) + "}",
        "invalid_envelope",
        "too deeply",
    ),
]


@pytest.mark.parametrize(
    ("frame", "code", "fragment"),
    [pytest.param(f, c, m, id=i) for i, f, c, m in MEW_CASES],
)
async def test_mew_bad_frame(room: Room, frame: Frame, code: str, fragment: str) -> None:
    await check_bad_frame(room, "mew", frame, code, fragment)


@pytest.mark.parametrize(
    ("frame", "code", "fragment"),
    [pytest.param(f, c, m, id=i) for i, f, c, m in AGENTCHAT_CASES],
)
async def test_agentchat_bad_frame(room: Room, frame: Frame, code: str, fragment: str) -> None:
    await check_bad_frame(room, "agentchat", frame, code, fragment)


async def test_mew_error_correlates_with_the_offending_id(room: Room) -> None:
    await room.m_off.send({"kind": "system/shout", "id": "client-42", "payload": {"text": "hi"}})
    err = await next_error(room.m_off)
    assert_error(err, "unknown_kind", "'system/shout'")
    assert err["correlation_id"] == ["client-42"]
    assert err["to"] == ["m-off"]


# ---------------------------------------------------------------------------------------------
# size limits
# ---------------------------------------------------------------------------------------------


def _chat_of_size(dialect: str, size: int) -> str:
    """A valid chat frame of exactly ``size`` bytes."""
    if dialect == "mew":
        template = '{"kind":"chat","channel":"#general","payload":{"text":"%s"}}'
    else:
        template = '{"type":"MSG","to":"#general","content":"%s"}'
    frame = template % ("x" * (size - len(template) + 2))
    assert len(frame.encode()) == size
    return frame


@pytest.mark.parametrize("dialect", ["mew", "agentchat"])
async def test_frame_over_the_limit_is_refused_and_the_connection_stays(
    tmp_path: Path, dialect: str
) -> None:
    async with custom_gateway(tmp_path, limits=Limits(max_frame_bytes=4096)) as gw:
        room = await make_room(gw)
        await check_bad_frame(
            room,
            dialect,
            _chat_of_size(dialect, 5000),
            "frame_too_large",
            "frame of 5000 bytes exceeds the limit of 4096 bytes",
        )


@pytest.mark.parametrize("dialect", ["mew", "agentchat"])
async def test_frame_over_the_hard_cap_closes_with_1009_and_nobody_else_notices(
    tmp_path: Path, dialect: str
) -> None:
    # hard cap = max(4 x max_frame_bytes, 1 MiB) = 1 MiB
    async with custom_gateway(tmp_path, limits=Limits(max_frame_bytes=4096)) as gw:
        room = await make_room(gw)
        off = room.offender(dialect)
        before = unique("before")
        await send_chat(off, dialect, before)
        for peer in room.peers:
            await receive_chat(peer, before)

        await off.ws.send(_chat_of_size(dialect, 1024 * 1024 + 1))
        await closed_with(off, CLOSE_TOO_BIG)

        after = unique("after")
        await send_chat(room.m_peer, "mew", after)
        for peer in room.peers:
            await receive_chat(peer, after)
        assert await history_texts(gw) == [before, after]
        # the server is fine and the offender may simply reconnect
        again = await gw.mew("m-off") if dialect == "mew" else await gw.agentchat("a-off")
        await send_chat(again, dialect, "back")
        await receive_chat(room.m_peer, "back")


# ---------------------------------------------------------------------------------------------
# channels one is not in
# ---------------------------------------------------------------------------------------------


async def _create_ops(room: Room) -> None:
    """m-peer creates #ops (open mode: everyone may) and is its only member."""
    await room.m_peer.send({"kind": "channel/create", "payload": {"channel": "#ops"}})
    joined = await room.m_peer.expect("channel/joined")
    assert joined["payload"]["channel"] == "#ops"
    assert joined["payload"]["members"] == ["m-peer"]


NOT_IN_CHANNEL_CASES: list[tuple[str, str, Frame]] = [
    ("mew-chat", "mew", {"kind": "chat", "channel": "#ops", "payload": {"text": "sneak"}}),
    (
        "mew-history",
        "mew",
        {"kind": "history/request", "payload": {"channel": "#ops"}},
    ),
    ("agentchat-msg", "agentchat", {"type": "MSG", "to": "#ops", "content": "sneak"}),
]
"""Leaving a channel one is not in is no error (agentchat answers LEFT): see
tests/interop/test_agentchat_answers.py."""


@pytest.mark.parametrize(
    ("dialect", "frame"), [pytest.param(d, f, id=i) for i, d, f in NOT_IN_CHANNEL_CASES]
)
async def test_sending_to_a_channel_one_is_not_in(room: Room, dialect: str, frame: Frame) -> None:
    await _create_ops(room)
    await check_bad_frame(room, dialect, frame, "not_in_channel", "not a member of #ops")
    await room.m_peer.silent(lambda f: chat_text(f) == "sneak" or f.get("channel") == "#ops")
    # the member of #ops can still use it
    await send_chat(room.m_peer, "mew", "ops only", channel="#ops")
    got = await receive_chat(room.m_peer, "ops only")
    assert got["channel"] == "#ops"
    assert await history_texts(room.gw, "ops") == ["ops only"]


# ---------------------------------------------------------------------------------------------
# flooding
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", ["mew", "agentchat"])
async def test_flood_every_refused_message_gets_an_error(room: Room, dialect: str) -> None:
    """Default limits (20 msgs/s, burst 40): 100 chats at once; none is silently dropped."""
    off = room.offender(dialect)
    texts = [f"flood-{i:03d}" for i in range(100)]
    for text in texts:
        await send_chat(off, dialect, text)

    accepted: list[str] = []
    refused = 0
    while len(accepted) + refused < 100:
        frame = await off.next_where(lambda f: is_error(f) or chat_text(f) is not None)
        if is_error(frame):
            assert_error(frame, "rate_limited", "rate limit exceeded")
            refused += 1
        else:
            text = chat_text(frame)
            assert text is not None and text.startswith("flood-")
            accepted.append(text)
    assert refused >= 1 and len(accepted) >= 1
    assert len(accepted) <= 45  # burst 40 plus what refills while the frames are read
    assert accepted == sorted(accepted)

    for peer in room.peers:
        got = []
        while len(got) < len(accepted):
            frame = await peer.next_where(lambda f: is_error(f) or chat_text(f) is not None)
            assert not is_error(frame), frame
            got.append(chat_text(frame))
        assert got == accepted
        await peer.silent(lambda f: is_error(f) or chat_text(f) is not None)
    assert await history_texts(room.gw) == accepted

    await asyncio.sleep(0.25)  # the bucket refills at 20/s
    after = unique("after")
    await send_chat(off, dialect, after)
    # every client reads up to here, so none is left with a full receive queue at teardown
    for c in (room.m_off, room.a_off, *room.peers):
        await receive_chat(c, after)


# ---------------------------------------------------------------------------------------------
# identity
# ---------------------------------------------------------------------------------------------


async def test_forged_from_is_overwritten(room: Room) -> None:
    await room.m_off.send({"kind": "chat", "from": "m-peer", "payload": {"text": "I am m-peer"}})
    got = await receive_chat(room.m_peer, "I am m-peer")
    assert got["from"] == "m-off"
    got = await receive_chat(room.a_peer, "I am m-peer")
    assert got["from"] == "@m-off"

    await room.a_off.send(
        {"type": "MSG", "from": "@a-peer", "to": "#general", "content": "I am a-peer"}
    )
    got = await receive_chat(room.a_peer, "I am a-peer")
    assert got["from"] == "@a-off"
    got = await receive_chat(room.m_peer, "I am a-peer")
    assert got["from"] == "a-off"

    await room.m_off.send(
        {
            "kind": "chat",
            "from": "system:gateway",
            "to": ["m-peer"],
            "private": True,
            "payload": {"text": "dm"},
        }
    )
    got = await receive_chat(room.m_peer, "dm")
    assert got["from"] == "m-off" and got["to"] == ["m-peer"]

    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{room.gw.http}/channels/general/messages") as resp,
    ):
        stored = (await resp.json())["messages"]
    assert [(m["from"], m["payload"]["text"]) for m in stored] == [
        ("m-off", "I am m-peer"),
        ("a-off", "I am a-peer"),
    ]


# ---------------------------------------------------------------------------------------------
# refused handshakes (close 1008)
# ---------------------------------------------------------------------------------------------


async def refused(gw: RunningGateway, first: Frame, code: str, fragment: str) -> dict[str, Any]:
    """Open a connection, send ``first``: an error naming the problem, then close 1008."""
    c = await gw.connect()
    await send_raw(c, first)
    err = await next_error(c)
    assert_error(err, code, fragment)
    await closed_with(c, CLOSE_POLICY)
    return err


async def still_fine(room: Room) -> None:
    """Everyone already connected still talks, on both dialects."""
    text = unique("still")
    await send_chat(room.m_off, "mew", text)
    for c in (room.m_off, *room.peers):
        await receive_chat(c, text)
    text = unique("still")
    await send_chat(room.a_off, "agentchat", text)
    for c in (room.a_off, *room.peers):
        await receive_chat(c, text)
    assert room.gw.router.metrics.errors["internal_error"] == 0


HANDSHAKE_CASES: list[tuple[str, Frame, str]] = [
    ("mew-chat-first", {"kind": "chat", "payload": {"text": "hi"}}, "must be"),
    ("unknown-type-first", {"type": "HELLO", "name": "x"}, "must be"),
    ("invalid-json-first", '{"type": "join", "participantId": ', "not valid JSON"),
    ("invalid-utf8-first", b'{"type":"join","participantId":"\xff"}', "not valid UTF-8"),
    ("array-first", '["join"]', "must be a JSON object"),
    ("deeply-nested-first", "[" * 5000, "nests too deeply"),
    # json.loads accepts a lone surrogate; it used to crash token hashing (close 1006)
    (
        "lone-surrogate-token",
        '{"type":"join","participantId":"x","token":"\\ud800"}',
        "not valid JSON",
    ),
]


@pytest.mark.parametrize(
    ("first", "fragment"), [pytest.param(f, m, id=i) for i, f, m in HANDSHAKE_CASES]
)
async def test_first_frame_must_be_join_or_identify(
    room: Room, first: Frame, fragment: str
) -> None:
    err = await refused(room.gw, first, "handshake_required", fragment)
    assert "join" in err["payload"]["message"] and "IDENTIFY" in err["payload"]["message"]
    await still_fine(room)


HELLO_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("mew-slash-in-id", {"type": "join", "participantId": "bad/id"}, "invalid_id", "'bad/id'"),
    ("mew-space-in-id", {"type": "join", "participantId": "bad id"}, "invalid_id", "'bad id'"),
    ("mew-id-too-long", {"type": "join", "participantId": "x" * 33}, "invalid_id", "1-32"),
    ("mew-missing-id", {"type": "join"}, "invalid_id", "participantId"),
    ("mew-id-not-string", {"type": "join", "participantId": 5}, "invalid_envelope", "join frame"),
    (
        "mew-system-join-without-payload",
        {"kind": "system/join"},
        "invalid_envelope",
        "payload",
    ),
    ("agentchat-slash-in-name", {"type": "IDENTIFY", "name": "bad/id"}, "invalid_id", "'bad/id'"),
    ("agentchat-missing-name", {"type": "IDENTIFY"}, "invalid_envelope", "`name`"),
    (
        "mew-unknown-space",
        {"type": "join", "participantId": "x", "space": "elsewhere"},
        "unknown_space",
        "'elsewhere'",
    ),
    (
        "mew-kind-not-allowed",
        {"type": "join", "participantId": "x", "kind": "robot"},
        "invalid_envelope",
        "'robot'",
    ),
    (
        "mew-capabilities-invalid-regex",
        {"type": "join", "participantId": "x", "capabilities": [{"kind": "/(/"}]},
        "invalid_envelope",
        "invalid regular expression",
    ),
    (
        "mew-capabilities-nested-too-deep",
        {
            "type": "join",
            "participantId": "x",
            "capabilities": [
                {"kind": "chat", "payload": json.loads('{"a":' * 40 + "1" + "}" * 40)}
            ],
        },
        "invalid_envelope",
        "deeper than 32 levels",
    ),
]


@pytest.mark.parametrize(
    ("first", "code", "fragment"), [pytest.param(f, c, m, id=i) for i, f, c, m in HELLO_CASES]
)
async def test_bad_hello_is_refused_with_1008(
    room: Room, first: dict[str, Any], code: str, fragment: str
) -> None:
    await refused(room.gw, first, code, fragment)
    await still_fine(room)


# ---------------------------------------------------------------------------------------------
# tokens and spaces
# ---------------------------------------------------------------------------------------------


def _spaces() -> list[SpaceConfig]:
    a = SpaceConfig(
        space="a",
        participants={
            "x": ParticipantConfig(token_hash=hash_token("tok-a")),
            "y": ParticipantConfig(token_hash=hash_token("tok-a2")),
        },
    )
    b = SpaceConfig(
        space="b", participants={"z": ParticipantConfig(token_hash=hash_token("tok-b"))}
    )
    a.validate()
    b.validate()
    return [a, b]


AUTH_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "mew-token-of-another-space",
        {"type": "join", "participantId": "x", "space": "b", "token": "tok-a"},
        "wrong_space",
        "belongs to space 'a', not 'b'",
    ),
    (
        "agentchat-token-of-another-space",
        {"type": "IDENTIFY", "name": "x", "space": "b", "token": "tok-a"},
        "wrong_space",
        "belongs to space 'a', not 'b'",
    ),
    (
        "mew-unknown-token",
        {"type": "join", "participantId": "x", "space": "a", "token": "tok-nope"},
        "auth_failed",
        "unknown token",
    ),
    (
        "agentchat-unknown-token",
        {"type": "IDENTIFY", "name": "x", "space": "a", "token": "tok-nope"},
        "auth_failed",
        "unknown token",
    ),
    (
        "mew-no-token",
        {"type": "join", "participantId": "x", "space": "a"},
        "auth_failed",
        "requires a token",
    ),
    (
        "agentchat-no-token",
        {"type": "IDENTIFY", "name": "x", "space": "a"},
        "auth_failed",
        "requires a token",
    ),
    (
        "mew-token-of-another-participant",
        {"type": "join", "participantId": "y", "space": "a", "token": "tok-a"},
        "auth_failed",
        "belongs to participant 'x', not 'y'",
    ),
    (
        "mew-default-space-does-not-exist",
        {"type": "join", "participantId": "x", "token": "tok-a"},
        "unknown_space",
        "'default'",
    ),
]


@pytest.mark.parametrize(
    ("first", "code", "fragment"), [pytest.param(f, c, m, id=i) for i, f, c, m in AUTH_CASES]
)
async def test_bad_credentials_are_refused_with_1008(
    tmp_path: Path, first: dict[str, Any], code: str, fragment: str
) -> None:
    async with custom_gateway(tmp_path, spaces=_spaces()) as gw:
        x = await gw.mew("x", space="a", token="tok-a")
        y = await gw.mew("y", space="a", token="tok-a2")
        z = await gw.agentchat("z", space="b", token="tok-b")
        await send_chat(x, "mew", "before")
        await receive_chat(y, "before")

        err = await refused(gw, first, code, fragment)
        if first.get("type") == "IDENTIFY":
            assert set(err) >= {"type", "code", "message"}

        await send_chat(x, "mew", "after")
        await receive_chat(y, "after")
        await send_chat(z, "agentchat", "in b")
        await receive_chat(z, "in b")
        await x.silent(lambda f: chat_text(f) == "in b")
        async with (
            aiohttp.ClientSession() as http,
            http.get(
                f"{gw.http}/channels/general/messages",
                headers={"Authorization": "Bearer tok-a"},
            ) as resp,
        ):
            assert resp.status == 200
            stored = (await resp.json())["messages"]
        assert [m["payload"]["text"] for m in stored] == ["before", "after"]


# ---------------------------------------------------------------------------------------------
# sequence numbers beyond 64 bits (SQLite integers)
# ---------------------------------------------------------------------------------------------


async def test_history_request_with_huge_seq_is_answered(room: Room) -> None:
    await send_chat(room.m_off, "mew", "one")
    await receive_chat(room.m_off, "one")
    await room.m_off.send(
        {"kind": "history/request", "payload": {"channel": "#general", "after_seq": 2**70}}
    )
    resp = await room.m_off.expect("history/response")
    assert resp["payload"]["messages"] == []
    await room.m_off.send(
        {"kind": "history/request", "payload": {"channel": "#general", "before_seq": 2**70}}
    )
    resp = await room.m_off.expect("history/response")
    assert [m["payload"]["text"] for m in resp["payload"]["messages"]] == ["one"]

    # a resume point past the channel's end: a fresh join that says so, with recent history
    await room.a_off.send({"type": "JOIN", "channel": "#general", "after_seq": 2**70})
    joined = await room.a_off.expect_type("JOINED")
    assert joined["channel"] == "#general"
    assert joined["history_reset"]["reason"] == "past_end"
    replay = await room.a_off.next_where(lambda f: f.get("replay") is True)
    assert replay["content"] == "one"
    await still_fine(room)


async def test_resume_with_out_of_range_seqs_leaves_no_ghost(room: Room) -> None:
    await send_chat(room.m_off, "mew", "one")
    await receive_chat(room.m_peer, "one")
    ghost = await room.gw.connect()
    await ghost.send(
        {"type": "join", "participantId": "ghost", "resume": {"@dm": 2**70, "#general": -(2**70)}}
    )
    await ghost.expect("system/welcome")
    joined = await ghost.expect("channel/joined")
    assert [m["payload"]["text"] for m in joined["payload"]["history"]] == ["one"]
    await send_chat(ghost, "mew", "from ghost")
    await receive_chat(room.m_peer, "from ghost")
    await ghost.close()
    left = await room.m_peer.next_where(
        lambda f: f.get("kind") == "system/presence" and f["payload"]["event"] == "leave"
    )
    assert left["payload"]["participant"]["id"] == "ghost"
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{room.gw.http}/participants") as resp,
    ):
        people = {p["id"]: p for p in (await resp.json())["participants"]}
    assert people["ghost"]["online"] is False


# ---------------------------------------------------------------------------------------------
# the same decoder behind POST /participants/{id}/messages
# ---------------------------------------------------------------------------------------------

HTTP_CASES: list[tuple[str, bytes, str, str]] = [
    ("invalid-json", b'{"kind":"chat",', "invalid_json", "not valid JSON"),
    ("invalid-utf8", b'{"kind":"chat","payload":{"text":"\xff"}}', "invalid_json", "UTF-8"),
    (
        "nested-150-deep",
        b'{"kind":"chat","payload":{"text":"x","a":' + b"[" * 150 + b"]" * 150 + b"}}",
        "invalid_envelope",
        "deeper than 100 levels",
    ),
    (
        "nested-5000-deep",
        b'{"kind":"chat","payload":{"text":"x","a":' + b"[" * 5000 + b"]" * 5000 + b"}}",
        "invalid_envelope",
        "deeper than 100 levels",
    ),
    (
        "unknown-kind",
        b'{"kind":"system/shout","payload":{"text":"x"}}',
        "unknown_kind",
        "system/shout",
    ),
]


@pytest.mark.parametrize(
    ("body", "code", "fragment"), [pytest.param(b, c, m, id=i) for i, b, c, m in HTTP_CASES]
)
async def test_http_post_bad_body_is_a_clear_400(
    room: Room, body: bytes, code: str, fragment: str
) -> None:
    url = f"{room.gw.http}/participants/m-off/messages"
    async with aiohttp.ClientSession() as http, http.post(url, data=body) as resp:
        assert resp.status == 400
        answer = await resp.json()
    assert answer["error"] == code and fragment in answer["message"], answer
    await still_fine(room)
    assert room.gw.router.metrics.errors["internal_error"] == 0
