"""Who may see what of a private channel: the one rule every outbound path asks.

A **private** (invite-only) channel's existence, name, members, text and streams reach only
the participants it invited (its creator and those a member invited: ``Channel.invited``).
Everything a participant, an HTTP reader, an MCP session or a dashboard viewer is shown passes
one of these functions first:

- :func:`sees_channel`: may ``pid`` see channel ``ch`` at all (name, members, messages)?
  Public: everyone; private: the invited only; an unauthenticated reader (``None``): public
  channels only. Channel access (``admission/authorization.py``), ``channel/list``, the
  welcome, auto-join, the agentchat channel list before ``IDENTIFY`` and ``GET
  /participants`` ask it.
- :func:`shown_channels`: the channels of a list that ``pid`` may see (a participant's
  channels in ``GET /participants`` and the dashboard); :func:`announced_channels` the ones a
  space-wide announcement may name (presence ``join``/``leave`` heard by everyone connected:
  public channels only, whoever listens).
- :func:`sees_stream` / :func:`stream_audience`: who hears of a stream (its ``stream/open``,
  data frames, writer changes, close, the welcome's ``active_streams``): a stream requested
  in a private channel reaches those who see that channel; ``target`` narrows it further.
- :func:`observer_level`: what a dashboard viewer sees of a channel: ``all``, ``exists`` (an
  admin not invited: the channel, its members and its traffic, never its text — as for DMs)
  or ``none``.
- :func:`hidden_names`: the private channels named in a text that ``pid`` may not see (an
  error message copied into the dashboard feed).

An outsider who names a private channel itself (``JOIN #secret``) is told ``not_invited``:
it learns no more than the name it typed. ``channel/create`` of a name that is, or looks
like, a channel the creator cannot see is refused without naming that channel
(``admission/names.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, Literal

from hubbub.server.state.space import Channel, Session, SpaceState
from hubbub.server.state.streams import Stream

Level = Literal["all", "exists", "none"]
"""What a dashboard viewer sees of a channel (see :func:`observer_level`)."""

_CHANNEL_NAME: Final = re.compile(r"#[A-Za-z0-9_-]{1,31}")


def sees_channel(ch: Channel, pid: str | None) -> bool:
    """Whether ``pid`` may see channel ``ch`` at all: it is public, or ``pid`` is invited."""
    return not ch.private or (pid is not None and pid in ch.invited)


def sees_name(space: SpaceState, name: str, pid: str | None) -> bool:
    """Whether ``pid`` may see the channel called ``name`` (a name that is no channel of
    ``space`` hides nothing)."""
    ch = space.channels.get(name)
    return ch is None or sees_channel(ch, pid)


def shown_channels(space: SpaceState, names: Iterable[str], pid: str | None) -> list[str]:
    """The channels of ``names`` that ``pid`` may see, sorted."""
    return sorted(n for n in names if sees_name(space, n, pid))


def announced_channels(space: SpaceState, names: Iterable[str]) -> list[str]:
    """The channels of ``names`` that an announcement to everyone connected may name (the
    public ones), sorted."""
    return shown_channels(space, names, None)


def sees_stream(space: SpaceState, stream: Stream, pid: str) -> bool:
    """Whether ``pid`` may hear of ``stream`` (its opening, writers, close; the welcome's
    entry): it may see the channel the stream was requested in (a stream requested as a
    direct message: its owner and targets only)."""
    if stream.channel is None:
        return pid == stream.owner or pid in (stream.target or ())
    return sees_name(space, stream.channel, pid)


def stream_audience(space: SpaceState, stream: Stream, *, frames: bool = False) -> list[Session]:
    """The connected participants who hear of ``stream`` (:func:`sees_stream`); ``frames``:
    who receives its data frames (of those, only its ``target`` when it has one)."""
    target = stream.target if frames else None
    return [
        s
        for s in list(space.online.values())
        if (target is None or s.id in target) and sees_stream(space, stream, s.id)
    ]


def active_streams(space: SpaceState, pid: str) -> list[dict[str, object]]:
    """The open streams of ``space`` that ``pid`` may hear of, as a welcome lists them."""
    return [st.describe() for st in space.streams.open_streams() if sees_stream(space, st, pid)]


def observer_level(space: SpaceState, name: str | None, pid: str | None, admin: bool) -> Level:
    """What a dashboard viewer (``pid``: its id, None in open mode) sees of channel
    ``name``: ``all`` when it may see the channel, ``exists`` for an admin who may not (the
    channel, its members and traffic, no text), else ``none``."""
    if name is None or sees_name(space, name, pid):
        return "all"
    return "exists" if admin else "none"


def hidden_names(space: SpaceState, text: str, pid: str | None) -> list[str]:
    """The channels named in ``text`` that ``pid`` may not see."""
    return [n for n in _CHANNEL_NAME.findall(text) if not sees_name(space, n, pid)]


__all__ = [
    "Level",
    "active_streams",
    "announced_channels",
    "hidden_names",
    "observer_level",
    "sees_channel",
    "sees_name",
    "sees_stream",
    "shown_channels",
    "stream_audience",
]
