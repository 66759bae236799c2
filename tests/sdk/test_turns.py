"""What a message handed to the runtime answers, and where an answer goes (no gateway)."""

from __future__ import annotations

import pytest

from hubbub.protocol.envelope import Envelope
from hubbub.protocol.ids import SERVER_ID
from hubbub.sdk.reasoning import answer_route
from hubbub.sdk.runtime import AgentMessage
from hubbub.sdk.turns import TurnInbox


def test_a_turn_answers_what_its_message_was_handed_over_with() -> None:
    inbox = TurnInbox()
    trigger = Envelope(kind="chat", id="m1", from_="bob", channel="#general")
    message = AgentMessage("bot", "bob: hi", sender="bob", id="m1")
    inbox.expect("m1", trigger, answers=["m0", "m1"], floor_key="k1")
    turn = inbox.begin(message)
    assert turn.trigger is trigger and turn.input == "bob: hi"
    assert turn.correlation() == ["m0", "m1"] and turn.floor_key == "k1"
    assert len(inbox) == 0  # taken: a second turn for it is a bare one
    bare = inbox.begin(message)
    assert bare.trigger.id == "m1" and bare.correlation() == ["m1"] and bare.floor_key is None


def test_a_refused_message_is_forgotten_and_a_stop_forgets_all() -> None:
    inbox = TurnInbox()
    inbox.expect("m1", Envelope(kind="chat", id="m1"))
    inbox.expect("m2", Envelope(kind="chat", id="m2"), answers=[])
    inbox.forget("m1")
    assert len(inbox) == 1
    assert inbox.begin(AgentMessage("bot", "x", id="m2")).correlation() == []  # answers nothing
    inbox.expect("m3", Envelope(kind="chat", id="m3"))
    inbox.clear()
    assert len(inbox) == 0


@pytest.mark.parametrize(
    ("trigger", "channels", "route"),
    [
        (Envelope(kind="chat", from_="bob", channel="#dev"), ["#general"], {"channel": "#dev"}),
        (Envelope(kind="chat", from_="bob", to=["bot"]), ["#general"], {"to": ["bob"]}),
        (Envelope(kind="chat", from_=SERVER_ID, to=["bot"]), ["#general"], {"channel": "#general"}),
        (Envelope(kind="chat", from_=""), ["#a", "#b"], {"channel": "#a"}),
        (Envelope(kind="chat", from_=SERVER_ID, to=["bot"]), [], {"to": ["bot"]}),
    ],
    ids=["channel", "dm", "server-note", "nudge", "server-note-no-channel"],
)
def test_an_answer_goes_where_its_trigger_came_from(
    trigger: Envelope, channels: list[str], route: dict[str, object]
) -> None:
    assert answer_route(trigger, "bot", channels) == route
