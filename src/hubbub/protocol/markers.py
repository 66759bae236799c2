"""The server markers in chat text: ``@@cb:Ns@@payload``, ``@@cb:Ns#channel@@payload`` and
``@@sleep:Ns[:mode]@@`` — parsing (for the gateway) and formatting (for the SDK).

A callback marker's payload runs from the end of the marker to the next marker or to the end
of the message, verbatim: newlines and blanks are part of it, nothing is trimmed (document
001: the server stores and delivers it as written). A sleep marker has no payload: the text
after it is message text. What is relayed is the text outside the markers and their payloads,
joined without doubled blanks at the seams and trimmed at both ends. A marker whose duration
or mode does not parse is not a marker: it stays in the text (or in a payload) as written.

Durations have one rule, :func:`clamp_duration`, used by the gateway's engines (with
``AGENTCHAT_CB_MAX_DURATION_S``), by the formatting here (the SDK's ``schedule_callback`` and
``sleep``, with the gateway's ``max_duration_s`` from its welcome) and by the MCP tools: a
longer duration, infinity included, is clamped to the maximum, not refused (documents 001 and
004); NaN and a negative duration are refused with a ValueError.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final, Literal

SleepMode = Literal["default", "buffer", "drop"]
SLEEP_MODES: tuple[SleepMode, ...] = ("default", "buffer", "drop")
CB_FIRE = "@@cb-fire@@"
"""Prefix of the text of a delivered callback."""
WAKE = "@@wake@@"
"""Text of the wake message a sleeper receives."""

MAX_DURATION_S: Final = 3600.0
"""The longest callback delay and sleep unless the gateway says otherwise (documents 001 and
004: ``AGENTCHAT_CB_MAX_DURATION_S``, 3600 s); the gateway's own is ``max_duration_s`` of its
welcome (:func:`max_duration_of`)."""

_CHANNEL = re.compile(r"#[A-Za-z0-9_-]{1,31}")
_NUMBER = r"(?P<n>\d+(?:\.\d+)?|\.\d+)"
_MARKER = re.compile(
    r"@@(?:cb:" + _NUMBER + r"s(?:(?P<ch>" + _CHANNEL.pattern + r"))?"
    r"|sleep:(?P<sn>\d+(?:\.\d+)?|\.\d+)s(?::(?P<mode>buffer|drop|default))?)@@"
)


@dataclass(frozen=True, slots=True)
class CallbackMarker:
    """``@@cb:Ns@@payload`` (``channel`` None: a DM to the sender) or ``@@cb:Ns#ch@@payload``."""

    seconds: float
    payload: str
    channel: str | None = None


@dataclass(frozen=True, slots=True)
class SleepMarker:
    """``@@sleep:Ns@@`` with its mode."""

    seconds: float
    mode: SleepMode = "default"


@dataclass(frozen=True, slots=True)
class Parsed:
    """A chat text split into what is relayed and the markers it carried."""

    text: str
    callbacks: tuple[CallbackMarker, ...] = ()
    sleeps: tuple[SleepMarker, ...] = ()

    @property
    def relayed(self) -> bool:
        """Whether anything is left to relay once the markers are stripped."""
        return bool(self.text.strip())


def has_marker(text: str) -> bool:
    """Cheap test for the hot path: can ``text`` contain a marker at all."""
    return "@@" in text


def parse_markers(text: str) -> Parsed:
    """Split ``text`` into the relayed text and its callback and sleep markers."""
    if "@@" not in text:
        return Parsed(text)
    matches = list(_MARKER.finditer(text))
    if not matches:
        return Parsed(text)
    kept: list[str] = []
    callbacks: list[CallbackMarker] = []
    sleeps: list[SleepMarker] = []
    pos = 0
    for i, m in enumerate(matches):
        kept.append(text[pos : m.start()])
        if m.group("sn") is not None:
            mode = m.group("mode") or "default"
            sleeps.append(SleepMarker(float(m.group("sn")), mode))  # type: ignore[arg-type]
            pos = m.end()
            continue
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        callbacks.append(CallbackMarker(float(m.group("n")), text[m.end() : end], m["ch"]))
        pos = end
    kept.append(text[pos:])
    return Parsed(_tidy(kept), tuple(callbacks), tuple(sleeps))


_BLANKS = " \t\r\n"


def _tidy(pieces: list[str]) -> str:
    """Join what is left around stripped markers: no doubled blanks or empty lines at a seam."""
    out = pieces[0]
    for piece in pieces[1:]:
        out = _join(out, piece)
    return out.strip()


def _join(left: str, right: str) -> str:
    """Join two pieces across a stripped marker.

    The blanks on either side of the seam merge instead of adding up: line breaks count as
    many as the side with more of them (the indentation of the next line is kept), otherwise
    the blanks after the marker win over those before it.
    """
    body = left.rstrip(_BLANKS)
    tail = left[len(body) :]
    rest = right.lstrip(_BLANKS)
    head = right[: len(right) - len(rest)]
    breaks = max(tail.count("\n"), head.count("\n"))
    if not breaks:
        return body + (head or tail) + rest
    newline = "\r\n" if "\r\n" in tail + head else "\n"
    indent = head[head.rfind("\n") + 1 :].lstrip("\r") if "\n" in head else ""
    return body + newline * breaks + indent + rest


def clamp_duration(seconds: float, max_s: float = MAX_DURATION_S) -> float:
    """A callback delay or sleep within ``[0, max_s]``: longer ones (infinity too) are clamped,
    not refused (documents 001 and 004); raise ValueError for NaN or a negative duration."""
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or math.isnan(seconds):
        raise ValueError(f"a duration must be a number of seconds (got {seconds!r})")
    if seconds < 0:
        raise ValueError(f"a duration must be 0 seconds or more (got {seconds:g})")
    return float(min(seconds, max_s))


def max_duration_of(welcome: Mapping[str, Any] | None) -> float:
    """The gateway's longest callback delay and sleep, from its welcome's ``max_duration_s``
    (:data:`MAX_DURATION_S` when it does not say)."""
    value = (welcome or {}).get("max_duration_s")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return MAX_DURATION_S
    return float(value) if math.isfinite(value) and value >= 0 else MAX_DURATION_S


def _seconds(value: float, max_s: float) -> str:
    """``value``, clamped to ``max_s``, in plain decimal notation that reads back as the same
    float."""
    value = clamp_duration(value, max_s)
    if not math.isfinite(value):
        raise ValueError(f"a duration must be finite (got {value}); pass a finite max_s")
    text = format(Decimal(repr(float(value) + 0.0)), "f")  # + 0.0: no "-0" for -0.0
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def callback_marker(
    seconds: float,
    payload: str = "",
    channel: str | None = None,
    max_s: float = MAX_DURATION_S,
) -> str:
    """The marker text that schedules a callback in ``seconds`` (to ``channel`` if given),
    clamped to ``max_s`` (:func:`clamp_duration`).

    The payload goes to the end of the text, so a message carrying it must end with it (the
    gateway reads it back verbatim, newlines included); it may not contain ``@@``.
    """
    if "@@" in payload:
        raise ValueError(
            "a callback payload cannot contain '@@' (it could start a marker and end the payload)"
        )
    if channel and not _CHANNEL.fullmatch(channel):
        raise ValueError(
            f"a callback channel must look like '#name' (letters, digits, '_' or '-', at most "
            f"31 after '#'); got {channel!r}"
        )
    target = channel or ""
    return f"@@cb:{_seconds(seconds, max_s)}s{target}@@{payload}"


def sleep_marker(seconds: float, mode: SleepMode = "default", max_s: float = MAX_DURATION_S) -> str:
    """The marker text that puts the sender to sleep for ``seconds``, clamped to ``max_s``
    (:func:`clamp_duration`)."""
    if mode not in SLEEP_MODES:
        raise ValueError(f"sleep mode must be one of {', '.join(SLEEP_MODES)} (got {mode!r})")
    suffix = "" if mode == "default" else f":{mode}"
    return f"@@sleep:{_seconds(seconds, max_s)}s{suffix}@@"
