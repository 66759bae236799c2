"""The two codecs: frames to envelopes and back, with the documents' field names."""

from __future__ import annotations

import json

import pytest

from hubbub.protocol.agentchat import AgentchatDialect
from hubbub.protocol.dialect import Reply
from hubbub.protocol.envelope import Envelope, decode_envelope
from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.mew import MewDialect

AC = AgentchatDialect()
MEW = MewDialect()
TS = "2026-11-22T10:00:00.123Z"
TS_MS = 1795341600123


def frames(env: Envelope) -> list[dict[str, object]]:
    return [json.loads(f) for f in AC.encode(env)]


def test_agentchat_msg_to_channel_and_dm() -> None:
    env = AC.decode(json.dumps({"type": "MSG", "to": "#general", "content": "hi"}))
    assert isinstance(env, Envelope)
    assert (env.kind, env.channel, env.payload) == ("chat", "#general", {"text": "hi"})
    env = AC.decode(json.dumps({"type": "MSG", "to": "@bob", "content": "psst"}))
    assert isinstance(env, Envelope) and env.to == ["bob"] and env.channel is None


def test_agentchat_outgoing_msg_has_at_ids_and_ms_timestamps() -> None:
    env = Envelope(
        kind="chat",
        id="01X",
        ts=TS,
        from_="alice",
        channel="#general",
        seq=4,
        payload={"text": "hello"},
    )
    assert frames(env) == [
        {
            "type": "MSG",
            "from": "@alice",
            "from_name": "alice",
            "to": "#general",
            "content": "hello",
            "msg_id": "01X",
            "ts": TS_MS,
            "verified": False,
            "seq": 4,
        }
    ]


def test_extra_msg_fields_ride_in_the_payload_and_back_out() -> None:
    env = AC.decode(
        json.dumps(
            {
                "type": "MSG",
                "to": "#general",
                "content": "hi",
                "sig": "s1",
                "in_reply_to": "01A",
                "ts": 5,
                "verified": True,
                "from": "@eve",
            }
        )
    )
    assert isinstance(env, Envelope)
    assert env.payload == {"text": "hi", "sig": "s1"}
    assert env.correlation_id == ["01A"]
    env.id, env.ts, env.from_ = "01B", TS, "bob"
    (frame,) = frames(env)
    assert frame["sig"] == "s1" and frame["in_reply_to"] == "01A"
    assert (frame["from"], frame["ts"]) == ("@bob", TS_MS) and frame["verified"] is False


def test_msg_says_the_senders_name_and_key_from_the_server_stamp_only() -> None:
    """``from_name`` and ``verified`` come from the payload fields the router stamps
    (``stamp_sender``); any other payload field, a MEW client's own, is not relayed."""
    env = Envelope(kind="chat", id="01C", ts=TS, from_="a1b2c3d4e5f6a7b8", channel="#general")
    env.payload = {"text": "hi", "from_name": "alice", "verified": True, "format": "md"}
    (frame,) = frames(env)
    assert (frame["from"], frame["from_name"], frame["verified"]) == (
        "@a1b2c3d4e5f6a7b8",
        "alice",
        True,
    )
    assert "format" not in frame and "text" not in frame


def test_extra_msg_fields_may_not_nest_deeper_than_envelopes() -> None:
    deep: object = 1
    for _ in range(150):
        deep = [deep]
    with pytest.raises(ProtocolError, match="nests"):
        AC.decode(json.dumps({"type": "MSG", "to": "#general", "content": "x", "sig": deep}))


def test_callback_and_wake_fields_pass_through() -> None:
    env = Envelope(
        kind="chat",
        id="1",
        ts=TS,
        from_="system:gateway",
        to=["bob"],
        payload={"text": "@@cb-fire@@x", "cb_id": "c1", "cb_origin": "bob"},
    )
    (frame,) = frames(env)
    assert frame["from"] == "@server" and frame["to"] == "@bob"
    assert frame["cb_id"] == "c1" and frame["cb_origin"] == "@bob"


def test_responding_to_and_yield_frames() -> None:
    claim = AC.decode(
        json.dumps(
            {"type": "RESPONDING_TO", "msg_id": "m1", "started_at": 1700, "channel": "#general"}
        )
    )
    assert isinstance(claim, Envelope) and claim.kind == "floor/responding-to"
    assert claim.payload == {"msg_id": "m1", "started_at": 1700}
    env = Envelope(
        kind="floor/yield",
        ts=TS,
        from_="system:gateway",
        channel="#general",
        payload={"msg_id": "m1", "winner": "bob"},
    )
    assert frames(env) == [
        {
            "type": "YIELD",
            "msg_id": "m1",
            "winner": "@bob",
            "holder": "@bob",
            "holder_started_at": None,
            "reason": "",
            "channel": "#general",
            "ts": TS_MS,
        }
    ]
    env.payload |= {"winner_started_at": 1650, "reason": "another claim has an earlier started_at"}
    (frame,) = frames(env)
    assert frame["holder_started_at"] == 1650 and frame["reason"].startswith("another claim")
    claimed = Envelope(
        kind="floor/claimed",
        ts=TS,
        channel="#general",
        payload={"msg_id": "m1", "holder": "bob", "started_at": 1650, "expires_at": 9},
    )
    (frame,) = frames(claimed)
    assert (frame["holder"], frame["holder_name"], frame["agent"]) == ("@bob", "bob", "@bob")


def test_presence_frames() -> None:
    join = Envelope(
        kind="system/presence",
        ts=TS,
        payload={"event": "join", "channel": "#ops", "participants": [{"id": "a"}, {"id": "b"}]},
    )
    assert [(f["type"], f["agent"], f["name"], f["channel"]) for f in frames(join)] == [
        ("AGENT_JOINED", "@a", "a", "#ops"),
        ("AGENT_JOINED", "@b", "b", "#ops"),
    ]
    connected = Envelope(  # about the space, not a channel: the router sends it per channel
        kind="system/presence",
        ts=TS,
        payload={"event": "join", "participant": {"id": "a", "channels": ["#general"]}},
    )
    assert frames(connected) == []
    sleep = Envelope(
        kind="system/presence",
        ts=TS,
        payload={"event": "update", "participant": {"id": "a", "presence": "sleeping"}},
    )
    assert frames(sleep) == [
        {"type": "PRESENCE", "agent": "@a", "presence": "sleeping", "ts": TS_MS},
        {
            "type": "PRESENCE_CHANGED",
            "agent_id": "@a",
            "name": "a",
            "presence": "sleeping",
            "status": "sleeping",
            "status_text": None,
            "ts": TS_MS,
        },
    ]


def test_set_presence_carries_status_text() -> None:
    env = AC.decode('{"type":"SET_PRESENCE","status":"busy","status_text":"on PR 12"}')
    assert isinstance(env, Envelope) and env.kind == "participant/status"
    assert env.payload == {"presence": "busy", "status_text": "on PR 12"}


def test_agents_lists_objects() -> None:
    env = Envelope(
        kind="channel/members-response",
        ts=TS,
        payload={
            "channel": "#general",
            "members": ["a", "b"],
            "participants": [
                {"id": "a", "presence": "busy", "status_text": "x"},
                {"id": "b", "presence": "online"},
            ],
        },
    )
    (frame,) = frames(env)
    assert frame["list"] == [
        {"id": "@a", "name": "a", "verified": False, "presence": "busy", "status_text": "x"},
        {"id": "@b", "name": "b", "verified": False, "presence": "online", "status_text": None},
    ]


def test_session_displaced_on_both_dialects() -> None:
    payload = {"reason": "replaced", "new_ip": "10.0.0.2"}
    env = Envelope(kind="system/session-displaced", ts=TS, payload=payload)
    assert frames(env) == [
        {"type": "SESSION_DISPLACED", "reason": "replaced", "new_ip": "10.0.0.2", "ts": TS_MS}
    ]
    (mew,) = MEW.encode(env)
    assert json.loads(mew)["kind"] == "system/error"
    assert json.loads(mew)["payload"] == {"error": "session_displaced", "message": "replaced"}


@pytest.mark.parametrize(
    ("message", "said"),
    [
        ("you are not a member of #ops; send channel/join first", "send JOIN first"),
        ("create it with channel/create (needs the capability)", "create it with CREATE_CHANNEL"),
        ("you may not send kind 'chat' with this payload", "you may not send MSG with"),
        ("unknown kind 'x/y'", "unknown kind 'x/y'"),
    ],
)
def test_error_messages_name_frames(message: str, said: str) -> None:
    env = Envelope(kind="system/error", ts=TS, payload={"error": "x", "message": message})
    (frame,) = frames(env)
    assert said in frame["message"]


def test_marketplace_frames_are_unsupported() -> None:
    with pytest.raises(ProtocolError) as info:
        AC.decode('{"type":"PROPOSAL","to":"@bob","task":"t","sig":"s"}')
    assert info.value.code == ErrorCode.UNSUPPORTED
    assert info.value.message.startswith("PROPOSAL is not supported")


def test_identify_without_channels_asks_for_auto_join() -> None:
    assert AC.parse_hello({"type": "IDENTIFY", "name": "a"}).auto_join
    hello = AC.parse_hello({"type": "IDENTIFY", "name": "a", "channels": ["#ops"]})
    assert not hello.auto_join and hello.channels == ["#ops"]


def test_kinds_agentchat_cannot_express_are_not_sent() -> None:
    for kind in ("mcp/request", "reasoning/thought", "capability/grant", "history/response"):
        assert AC.encode(Envelope(kind=kind, ts=TS)) == []


def test_ping_is_answered_locally() -> None:
    reply = AC.decode('{"type":"PING"}')
    assert isinstance(reply, Reply) and json.loads(reply.data)["type"] == "PONG"


@pytest.mark.parametrize(
    ("frame", "code", "text"),
    [
        ("{nope", ErrorCode.INVALID_JSON, "not valid JSON"),
        ('{"type":"DANCE"}', ErrorCode.UNKNOWN_KIND, "expected one of"),
        ('{"content":"x"}', ErrorCode.UNKNOWN_KIND, "missing"),
        ('{"type":"MSG","to":"#general"}', ErrorCode.INVALID_ENVELOPE, "content"),
        ('{"type":"MSG","to":"general","content":"x"}', ErrorCode.INVALID_ENVELOPE, "'#'"),
        ('{"type":"JOIN","channel":5}', ErrorCode.INVALID_ENVELOPE, "channel"),
    ],
)
def test_agentchat_bad_frames(frame: str, code: ErrorCode, text: str) -> None:
    with pytest.raises(ProtocolError) as info:
        AC.decode(frame)
    assert info.value.code == code and text in info.value.message


@pytest.mark.parametrize(
    ("frame", "code", "text"),
    [
        ("{nope", ErrorCode.INVALID_JSON, "not valid JSON"),
        ("[1,2]", ErrorCode.INVALID_ENVELOPE, "Expected `object`"),
        ('{"payload":{}}', ErrorCode.INVALID_ENVELOPE, "kind"),
        ('{"kind":5}', ErrorCode.INVALID_ENVELOPE, "$.kind"),
        ('{"kind":"chat","to":"bob"}', ErrorCode.INVALID_ENVELOPE, "$.to"),
        ('{"kind":"chat","payload":[]}', ErrorCode.INVALID_ENVELOPE, "$.payload"),
    ],
)
def test_mew_bad_envelopes(frame: str, code: ErrorCode, text: str) -> None:
    with pytest.raises(ProtocolError) as info:
        decode_envelope(frame)
    assert info.value.code == code and text in info.value.message


def test_mew_hello_forms() -> None:
    a = MEW.parse_hello({"type": "join", "participantId": "x", "space": "s", "token": "t"})
    b = MEW.parse_hello(
        {"kind": "system/join", "payload": {"participant_id": "x", "space": "s", "token": "t"}}
    )
    assert a == b
    with pytest.raises(ProtocolError, match="participantId"):
        MEW.parse_hello({"type": "join"})
