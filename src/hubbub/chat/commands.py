"""What a person types into ``hubbub chat``: a plain line is a message, ``/word`` a command.

:func:`parse` turns one input line into a command object (or :class:`Invalid` with a message
that names the problem and the fix); nothing here touches the network or the terminal.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Final

from hubbub.protocol.ids import is_channel, is_participant_id, normalize_channel


@dataclass(frozen=True)
class Say:
    """Send ``text`` to the current channel."""

    text: str


@dataclass(frozen=True)
class Join:
    """Join a channel and switch to it."""

    channel: str


@dataclass(frozen=True)
class Create:
    """Create a channel (needs the capability) and switch to it."""

    channel: str


@dataclass(frozen=True)
class Leave:
    """Leave a channel (the current one if ``None``)."""

    channel: str | None


@dataclass(frozen=True)
class Switch:
    """Show another joined channel."""

    channel: str


@dataclass(frozen=True)
class Dm:
    """Send a direct message."""

    to: str
    text: str


@dataclass(frozen=True)
class Who:
    """List who is in the current channel."""


@dataclass(frozen=True)
class Help:
    """Show the commands and keys."""


@dataclass(frozen=True)
class Quit:
    """Leave the program."""


@dataclass(frozen=True)
class History:
    """Load ``count`` older messages of the current channel."""

    count: int


@dataclass(frozen=True)
class Proposals:
    """List the proposals seen so far."""


@dataclass(frozen=True)
class Approve:
    """Approve (run) proposal ``number``."""

    number: int


@dataclass(frozen=True)
class Reject:
    """Reject proposal ``number``."""

    number: int
    reason: str


@dataclass(frozen=True)
class SetPresence:
    """Tell the space you are ``online`` or ``away``."""

    presence: str


@dataclass(frozen=True)
class Invalid:
    """A line that is not a valid command; ``message`` says why and what to type."""

    message: str


Command = (
    Say
    | Join
    | Create
    | Leave
    | Switch
    | Dm
    | Who
    | Help
    | Quit
    | History
    | Proposals
    | Approve
    | Reject
    | SetPresence
    | Invalid
)

HISTORY_MAX: Final = 1000

HELP: Final[tuple[tuple[str, str], ...]] = (
    ("text", "send text to the current channel (start with // to send a leading /)"),
    ("/join #ch", "join a channel and show it"),
    ("/create #ch", "create a channel (if you may) and join it"),
    ("/leave [#ch]", "leave the current (or the named) channel"),
    ("/switch #ch", "show another joined channel (also Ctrl-N / Ctrl-P)"),
    ("/dm <id> <text>", "send a direct message"),
    ("/who", "who is in this channel, and how they are"),
    ("/history [n]", "load n older messages (default 50; PageUp at the top does it too)"),
    ("/proposals", "list tool-call proposals"),
    ("/approve N", "run proposal N and show its result"),
    ("/reject N [reason]", "decline proposal N"),
    ("/away, /back", "set your presence"),
    ("/help", "this list"),
    ("/quit", "leave (also Ctrl-D or Ctrl-C)"),
    ("PageUp / PageDown", "scroll the messages"),
)

_NAMES: Final = (
    "join",
    "create",
    "leave",
    "part",
    "switch",
    "dm",
    "msg",
    "who",
    "help",
    "quit",
    "exit",
    "history",
    "proposals",
    "approve",
    "reject",
    "away",
    "back",
)


def _channel(arg: str, usage: str) -> str | Invalid:
    if not arg:
        return Invalid(f"usage: {usage}")
    name = normalize_channel(arg)
    if not is_channel(name):
        return Invalid(f"{arg!r} is not a channel name: write '#' then 1-31 of [A-Za-z0-9_-]")
    return name


def _number(arg: str, usage: str) -> int | Invalid:
    text = arg.removeprefix("#")
    if not text.isdigit() or int(text) < 1:
        return Invalid(f"usage: {usage} (N is the number shown by /proposals)")
    return int(text)


def _dm(rest: str) -> Command:
    target, _, text = rest.partition(" ")
    target = target.removeprefix("@")
    text = text.strip()
    if not target or not text:
        return Invalid("usage: /dm <id> <text>")
    if not is_participant_id(target):
        return Invalid(f"{target!r} is not a participant id (1-32 of [A-Za-z0-9_.-])")
    return Dm(target, text)


def _history(rest: str) -> Command:
    if not rest:
        return History(50)
    if not rest.isdigit() or not 1 <= int(rest) <= HISTORY_MAX:
        return Invalid(f"usage: /history [n] with n from 1 to {HISTORY_MAX}")
    return History(int(rest))


def _proposal_command(name: str, rest: str) -> Command:
    arg, _, reason = rest.partition(" ")
    usage = "/approve N" if name == "approve" else "/reject N [reason]"
    number = _number(arg, usage)
    if isinstance(number, Invalid):
        return number
    if name == "approve":
        return Approve(number) if not reason.strip() else Invalid(f"usage: {usage}")
    return Reject(number, reason.strip() or "rejected")


def _channel_command(name: str, rest: str) -> Command:
    if name in ("leave", "part"):
        if not rest:
            return Leave(None)
        channel = _channel(rest, "/leave [#channel]")
        return channel if isinstance(channel, Invalid) else Leave(channel)
    channel = _channel(rest, f"/{name} #channel")
    if isinstance(channel, Invalid):
        return channel
    if name == "join":
        return Join(channel)
    if name == "create":
        return Create(channel)
    return Switch(channel)


def completions(
    before_cursor: str, channels: list[str], joined: list[str], people: list[str]
) -> tuple[list[str], int]:
    """Candidates for the word being typed (each with the space that ends it), and how many
    characters of it are typed.

    Command names after ``/``; channels after ``/join`` (``channels``: all known) and after
    ``/switch`` or ``/leave`` (``joined``); participant ids (``people``) after ``/dm``, and
    as ``@id`` for a word starting with ``@`` in a message (a mention).
    """
    if not before_cursor.startswith("/") or before_cursor.startswith("//"):
        return _mention_completions(before_cursor, people)
    word, space, rest = before_cursor[1:].partition(" ")
    if not space:
        names = sorted({n for n in _NAMES if n.startswith(word.lower())})
        return [f"/{n} " for n in names], len(word) + 1
    if " " in rest:
        return [], 0
    if word in ("dm", "msg"):
        typed = rest.removeprefix("@")
        return sorted(f"{p} " for p in people if p.startswith(typed)), len(rest)
    pool = channels if word == "join" else joined if word in ("switch", "leave", "part") else []
    prefix = normalize_channel(rest) if rest else "#"
    return sorted(f"{c} " for c in pool if c.startswith(prefix)), len(rest)


def _mention_completions(before_cursor: str, people: list[str]) -> tuple[list[str], int]:
    """``@id `` candidates for a word starting with ``@`` at the end of a message."""
    typed = before_cursor.rsplit(None, 1)[-1] if before_cursor.strip() else ""
    if before_cursor[-1:].isspace() or not typed.startswith("@") or typed.startswith("@@"):
        return [], 0
    prefix = typed[1:].lower()
    return sorted(f"@{p} " for p in people if p.lower().startswith(prefix)), len(typed)


def parse(line: str) -> Command | None:
    """The command typed as ``line``; ``None`` for a blank line."""
    text = line.strip()
    if not text:
        return None
    if not text.startswith("/"):
        return Say(line.rstrip())
    if text.startswith("//"):
        return Say(text[1:])
    word, _, rest = text[1:].partition(" ")
    name, rest = word.lower(), rest.strip()
    simple: dict[str, Command] = {
        "who": Who(),
        "help": Help(),
        "quit": Quit(),
        "exit": Quit(),
        "proposals": Proposals(),
        "away": SetPresence("away"),
        "back": SetPresence("online"),
    }
    if name in simple:
        return simple[name]
    if name in ("join", "create", "leave", "part", "switch"):
        return _channel_command(name, rest)
    if name in ("dm", "msg"):
        return _dm(rest)
    if name == "history":
        return _history(rest)
    if name in ("approve", "reject"):
        return _proposal_command(name, rest)
    close = difflib.get_close_matches(name, _NAMES, n=1)
    hint = f"did you mean /{close[0]}? " if close else ""
    return Invalid(f"unknown command /{name}; {hint}(/help lists the commands)")


__all__ = [
    "HELP",
    "Approve",
    "Command",
    "Create",
    "Dm",
    "Help",
    "History",
    "Invalid",
    "Join",
    "Leave",
    "Proposals",
    "Quit",
    "Reject",
    "Say",
    "SetPresence",
    "Switch",
    "Who",
    "completions",
    "parse",
]
