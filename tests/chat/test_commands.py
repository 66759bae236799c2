"""Parsing what a person types into `hubbub chat`."""

from __future__ import annotations

import pytest

from hubbub.chat.commands import (
    HELP,
    Approve,
    Create,
    Dm,
    Help,
    History,
    Invalid,
    Join,
    Leave,
    Proposals,
    Quit,
    Reject,
    Say,
    SetPresence,
    Switch,
    Who,
    completions,
    parse,
)


@pytest.mark.parametrize("line", ["", "   ", "\t"])
def test_blank_lines_are_nothing(line: str) -> None:
    assert parse(line) is None


def test_plain_text_is_said_as_typed() -> None:
    assert parse("hello @bob  ") == Say("hello @bob")
    assert parse("  indented") == Say("  indented")
    assert parse("a/b is not a command") == Say("a/b is not a command")


def test_double_slash_sends_a_leading_slash() -> None:
    assert parse("//shrug") == Say("/shrug")


@pytest.mark.parametrize(
    ("line", "command"),
    [
        ("/join #dev", Join("#dev")),
        ("/join dev", Join("#dev")),
        ("/JOIN #dev", Join("#dev")),
        ("/create #new-room", Create("#new-room")),
        ("/leave", Leave(None)),
        ("/leave #dev", Leave("#dev")),
        ("/part dev", Leave("#dev")),
        ("/switch #general", Switch("#general")),
        ("/dm bob hi there", Dm("bob", "hi there")),
        ("/dm @bob  hi", Dm("bob", "hi")),
        ("/msg bob.x yo", Dm("bob.x", "yo")),
        ("/who", Who()),
        ("/help", Help()),
        ("/quit", Quit()),
        ("/exit", Quit()),
        ("/history", History(50)),
        ("/history 200", History(200)),
        ("/proposals", Proposals()),
        ("/approve 3", Approve(3)),
        ("/approve #3", Approve(3)),
        ("/reject 2", Reject(2, "rejected")),
        ("/reject 2 not on prod, please", Reject(2, "not on prod, please")),
        ("/away", SetPresence("away")),
        ("/back", SetPresence("online")),
    ],
)
def test_commands(line: str, command: object) -> None:
    assert parse(line) == command


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("/join", "usage: /join #channel"),
        ("/join #bad name", "is not a channel name"),
        ("/join #" + "x" * 32, "is not a channel name"),
        ("/switch", "usage: /switch #channel"),
        ("/dm bob", "usage: /dm <id> <text>"),
        ("/dm", "usage: /dm <id> <text>"),
        ("/dm bob/x hi", "is not a participant id"),
        ("/history lots", "usage: /history [n]"),
        ("/history 0", "usage: /history [n]"),
        ("/history 5000", "usage: /history [n]"),
        ("/approve", "usage: /approve N"),
        ("/approve one", "usage: /approve N"),
        ("/approve 0", "usage: /approve N"),
        ("/approve 1 now", "usage: /approve N"),
        ("/reject x", "usage: /reject N [reason]"),
        ("/jion #dev", "unknown command /jion; did you mean /join?"),
        ("/frobnicate", "unknown command /frobnicate; (/help lists the commands)"),
    ],
)
def test_invalid_commands_say_what_to_type(line: str, message: str) -> None:
    command = parse(line)
    assert isinstance(command, Invalid)
    assert message in command.message


def test_help_lists_every_command() -> None:
    usages = " ".join(usage for usage, _ in HELP)
    for name in ("join", "create", "leave", "switch", "dm", "who", "history", "proposals"):
        assert f"/{name}" in usages
    for name in ("approve", "reject", "away", "help", "quit"):
        assert f"/{name}" in usages
    assert "PageUp" in usages


CHANNELS = ["#design", "#dev", "#general"]


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("/j", (["/join "], 2)),
        ("/a", (["/approve ", "/away "], 2)),
        ("/DM", (["/dm "], 3)),
        ("/zz", ([], 3)),
        ("/join ", ([f"{c} " for c in CHANNELS], 0)),
        ("/join #de", (["#design ", "#dev "], 3)),
        ("/join de", (["#design ", "#dev "], 2)),
        ("/switch #", (["#dev ", "#general "], 1)),
        ("/leave g", (["#general "], 1)),
        ("/dm ", (["bob ", "carol "], 0)),
        ("/dm @c", (["carol "], 2)),
        ("/dm bob hel", ([], 0)),
        ("hello /j", ([], 0)),
        ("/create #x", ([], 2)),
        ("@", (["@bob ", "@carol "], 1)),
        ("thanks @C", (["@carol "], 2)),
        ("thanks @carol ", ([], 0)),
        ("mail x@b", ([], 0)),
        ("@@sleep", ([], 0)),
        ("hello", ([], 0)),
        ("", ([], 0)),
    ],
)
def test_completions(typed: str, expected: tuple[list[str], int]) -> None:
    assert completions(typed, CHANNELS, ["#dev", "#general"], ["bob", "carol"]) == expected
