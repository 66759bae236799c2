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
            "to": "#general",
            "content": "hello",
            "msg_id": "01X",
            "ts": TS_MS,
            "seq": 4,
        }
    ]


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
        {"type": "YIELD", "msg_id": "m1", "winner": "@bob", "channel": "#general", "ts": TS_MS}
    ]


def test_presence_frames() -> None:
    join = Envelope(
        kind="system/presence",
        ts=TS,
        payload={
            "event": "join",
            "participants": [
                {"id": "a", "channels": ["#general", "#ops"]},
                {"id": "b", "channels": ["#general"]},
            ],
        },
    )
    assert [(f["type"], f["agent"], f["channel"]) for f in frames(join)] == [
        ("AGENT_JOINED", "@a", "#general"),
        ("AGENT_JOINED", "@a", "#ops"),
        ("AGENT_JOINED", "@b", "#general"),
    ]
    sleep = Envelope(
        kind="system/presence",
        ts=TS,
        payload={"event": "update", "participant": {"id": "a", "presence": "sleeping"}},
    )
    assert frames(sleep) == [
        {"type": "PRESENCE", "agent": "@a", "presence": "sleeping", "ts": TS_MS}
    ]


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
