"""A connection's join without a gateway: the frame, what completes it, what refuses it."""

from __future__ import annotations

from hubbub.errors import AuthRefused
from hubbub.protocol.ids import DM_STREAM
from hubbub.sdk.handshake import JoinHandshake
from hubbub.sdk.options import ClientOptions

OPTS = ClientOptions(participant_id="alice", space="team", token="t0k", kind="human")


def test_the_frame_carries_identity_channels_and_the_resume_with_its_epoch() -> None:
    hs = JoinHandshake(OPTS, ["#general", "#dev"], {"#general": 7, DM_STREAM: 3}, "e1")
    assert hs.frame() == {
        "type": "join",
        "participantId": "alice",
        "space": "team",
        "channels": ["#general", "#dev"],
        "token": "t0k",
        "kind": "human",
        "resume": {"#general": 7, DM_STREAM: 3},
        "presence_lists": True,
        "epoch": "e1",
    }
    first = JoinHandshake(ClientOptions(participant_id="bob"), ["#general"], {}, "e1")
    # nothing to resume, but the empty resume opts in to resend detection (ids per sender)
    assert first.frame()["resume"] == {} and "epoch" not in first.frame()


def test_complete_once_welcomed_and_every_channel_answered_in_any_order() -> None:
    hs = JoinHandshake(OPTS, ["#a", "#b"], {}, None)
    hs.joined("#b")
    assert not hs.complete
    hs.welcome()
    assert not hs.complete
    hs.joined("#a")
    assert hs.complete
    hs.joined("#later")  # a join after the handshake changes nothing
    assert hs.complete


def test_a_join_error_after_the_welcome_refuses_the_first_channel_still_awaited() -> None:
    hs = JoinHandshake(OPTS, ["#a", "#b", "#c"], {}, None)
    assert hs.channel_refused("not_in_channel", correlated=False) is None  # not welcomed yet
    hs.welcome()
    hs.joined("#a")
    assert hs.channel_refused("rate_limited", correlated=False) is None  # not a join error
    assert hs.channel_refused("capability_violation", correlated=True) is None  # about a message
    assert hs.channel_refused("unknown_channel", correlated=False) == "#b"
    assert not hs.complete
    hs.joined("#c")
    assert hs.complete


def test_a_refusal_before_the_welcome_is_the_connections_and_none_after_it() -> None:
    hs = JoinHandshake(OPTS, ["#a"], {}, None)
    assert not hs.refuses("invalid_channel", "bad")
    assert hs.refuses("auth_failed", "unknown token")
    assert isinstance(hs.refusal, AuthRefused) and "unknown token" in str(hs.refusal)
    late = JoinHandshake(OPTS, ["#a"], {}, None)
    late.welcome()
    assert not late.refuses("banned", "later") and late.refusal is None
