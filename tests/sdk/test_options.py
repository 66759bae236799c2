"""Options objects: defaults that run, environment variables, errors that name the fix."""

from __future__ import annotations

import pytest

from hubbub.sdk import Client, ClientOptions, Participant, ParticipantOptions


def test_defaults_and_the_environment() -> None:
    opts = ClientOptions(participant_id="alice")
    assert opts.gateway == "ws://127.0.0.1:8080/ws" and opts.channels == ("#general",)
    env = {"MEW_GATEWAY": "ws://gw:9/ws", "MEW_SPACE": "team", "MEW_TOKEN": "t"}
    from_env = ParticipantOptions.from_env(env, participant_id="bob", request_timeout=3)
    assert (from_env.gateway, from_env.space, from_env.token) == ("ws://gw:9/ws", "team", "t")
    assert from_env.client_options().participant_id == "bob"
    assert Participant(from_env, space="other").options.space == "other"
    assert Client(opts, space="x").options.space == "x"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"participant_id": "a/b"}, "is not legal"),
        ({"participant_id": "a", "gateway": "http://x"}, "must be a WebSocket URL"),
        ({"participant_id": "a", "channels": "#general"}, "not one string"),
        ({"participant_id": "a", "channels": ["general"]}, "write '#'"),
        ({"participant_id": "a", "capabilities": [{"knd": "chat"}]}, "unknown key 'knd'"),
        ({"participant_id": "a", "reconnect_delay": 0}, "reconnect_delay"),
        ({"participant_id": "a", "reconnect_jitter": 2}, "between 0 and 1"),
        ({"participant_id": "a", "heartbeat_interval": 0}, "None to turn heartbeats off"),
    ],
)
def test_bad_options_name_the_fix(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ClientOptions(**fields)  # type: ignore[arg-type]


def test_participant_options_check_the_request_timeout() -> None:
    with pytest.raises(ValueError, match="request_timeout must be > 0"):
        ParticipantOptions(participant_id="a", request_timeout=0)
