"""Pure formatting for ``hubbub chat``: envelopes, presence and tool results as display lines.

A :class:`Line` is a tuple of prompt_toolkit style fragments ``(style, text)``; its
:attr:`~Line.plain` text is what the tests (and a person) read.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from hubbub.protocol.envelope import Envelope
from hubbub.protocol.ids import SERVER_ID, iso_to_ms

Fragment = tuple[str, str]

ARGS_LIMIT: Final = 200
"""Longest rendering of proposal arguments in one line (characters)."""


@dataclass(frozen=True)
class Line:
    """One entry of the message pane: styled fragments (may wrap on screen)."""

    fragments: tuple[Fragment, ...]

    @property
    def plain(self) -> str:
        """The text without styles."""
        return "".join(text for _, text in self.fragments)


def make_line(*fragments: Fragment) -> Line:
    """A line from ``(style, text)`` fragments."""
    return Line(tuple(fragments))


def notice(text: str, style: str = "notice") -> Line:
    """A one-style informational line (``style`` is a class name such as ``error``)."""
    return make_line((f"class:{style}", text))


def clock(ts: str) -> str:
    """``HH:MM`` in local time for an envelope timestamp; ``--:--`` if it cannot be read."""
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).astimezone().strftime("%H:%M")
    except ValueError:
        return "--:--"


def to_epoch(value: object) -> float | None:
    """Seconds since the epoch for an ISO-8601 string or a Unix time (ms if it is large)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value / 1000 if value > 1e11 else float(value)
    if isinstance(value, str):
        try:
            return iso_to_ms(value) / 1000
        except ValueError:
            return None
    return None


def duration(seconds: float) -> str:
    """A short human duration: ``47s``, ``2m 05s``, ``1h 02m`` (seconds up to 99)."""
    s = max(0, math.ceil(seconds))
    if s < 100:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


def presence_text(presence: str, wake_at: object, now: float) -> str:
    """``online``, ``away``, ``sleeping, wakes in 47s``... for a participant's presence."""
    if presence != "sleeping":
        return presence
    wake = to_epoch(wake_at)
    if wake is None:
        return "sleeping"
    left = wake - now
    return "sleeping, waking now" if left <= 0 else f"sleeping, wakes in {duration(left)}"


def compact_json(value: object, limit: int = ARGS_LIMIT) -> str:
    """``value`` as one line of JSON, cut to ``limit`` characters."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_call(payload: dict[str, Any]) -> tuple[str, str]:
    """``(what, arguments)`` of a JSON-RPC request: ``("tools/call add", '{"a": 1}')``."""
    method = str(payload.get("method", "?"))
    params = payload.get("params")
    params = params if isinstance(params, dict) else {}
    if method == "tools/call":
        return f"tools/call {params.get('name', '?')}", compact_json(params.get("arguments") or {})
    return method, compact_json(params)


def _who(pid: str, me: str) -> Fragment:
    if pid == me:
        return ("class:from.me", pid)
    if pid == SERVER_ID:
        return ("class:from.server", pid)
    return ("class:from", pid)


def _stamp(env: Envelope) -> Fragment:
    return ("class:time", clock(env.ts) + " ")


def is_dm(env: Envelope) -> bool:
    """Whether an envelope is a direct message (``to`` and no ``channel``)."""
    return env.channel is None and bool(env.to)


def chat_line(env: Envelope, me: str) -> Line:
    """A ``chat`` envelope: ``12:03 alice: hi``, ``12:03 [DM] alice → bob: psst``."""
    text = str(env.payload.get("text", ""))
    to = env.to or []
    mention = f"@{me}" in text
    text_style = "class:mention" if mention else "class:text"
    if is_dm(env):
        dm = "class:dm"
        return make_line(
            _stamp(env),
            (dm + " class:dm.tag", "[DM] "),
            _who(env.from_, me),
            (dm, " → " + ", ".join(to) + ": "),
            (dm, text),
        )
    head: list[Fragment] = [_stamp(env), _who(env.from_, me)]
    if to:
        head.append(("class:to", " → " + ", ".join(to)))
    return make_line(*head, ("", ": "), (text_style, text))


def proposal_line(env: Envelope, number: int | None) -> Line:
    """An ``mcp/proposal``: who wants what run by whom, with the commands to answer it."""
    what, args = describe_call(env.payload)
    targets = ", ".join(env.to or []) or "?"
    label = f"proposal #{number}" if number is not None else "proposal"
    frags: list[Fragment] = [
        _stamp(env),
        ("class:proposal", f"⚑ {label}: {env.from_} proposes {what} on {targets} args {args}"),
    ]
    if number is not None:
        frags.append(("class:proposal.hint", f"  (/approve {number} or /reject {number} [reason])"))
    return make_line(*frags)


def proposal_summary(number: int, env: Envelope, status: str) -> Line:
    """One row of ``/proposals``: number, proposer, method, target, arguments, status."""
    what, args = describe_call(env.payload)
    targets = ", ".join(env.to or []) or "?"
    return make_line(
        ("class:proposal", f"#{number} [{status}] {env.from_} → {targets}: {what} args {args}")
    )


def tool_result_line(target: str, result: dict[str, Any]) -> Line:
    """The outcome of an approved ``tools/call``: ``calc answered: 5`` (or its error)."""
    texts: list[str] = []
    for block in result.get("content") or []:
        if isinstance(block, dict):
            if block.get("type") == "text":
                texts.append(str(block.get("text", "")))
            else:
                texts.append(f"[{block.get('type', '?')}]")
    if not texts and "structuredContent" in result:
        texts.append(compact_json(result["structuredContent"]))
    if not texts:
        texts.append(compact_json(result))
    body = " ".join(texts)
    if result.get("isError"):
        return notice(f"✗ {target} reported an error: {body}", "result.error")
    return notice(f"✓ {target} answered: {body}", "result")


def error_line(env: Envelope) -> Line:
    """A ``system/error``: ``error (unknown_channel): channel #x does not exist…``."""
    code = env.payload.get("error", "error")
    message = env.payload.get("message", "")
    return make_line(_stamp(env), ("class:error", f"error ({code}): {message}"))


def notice_line(env: Envelope) -> Line:
    """A ``system/notice`` from the gateway: ``ⓘ no agent took this: …`` (a question nobody
    took, an addressee who is offline or asleep)."""
    text = env.payload.get("text")
    return make_line(_stamp(env), ("class:notice", f"ⓘ {text if isinstance(text, str) else ''}"))


_ENDED: Final = {
    "answered": "answered by {holder}",
    "expired": "{holder} held the floor and did not answer in time",
    "disconnected": "{holder} left before answering",
}


def floor_outcome_line(env: Envelope, me: str) -> Line:
    """A ``floor/outcome``: ``↳ answered by maths · chef, travel yielded to maths``."""
    p = env.payload
    holder = "you" if p.get("holder") == me else str(p.get("holder", "?"))
    parts = [_ENDED.get(str(p.get("reason")), "{holder} held the floor").format(holder=holder)]
    yielded = [str(pid) for pid in p.get("yielded") or []]
    if yielded:
        parts.append(f"{', '.join(yielded)} yielded to {holder}")
    return make_line(_stamp(env), ("class:floor", "↳ " + " · ".join(parts)))


def envelope_line(env: Envelope, me: str) -> Line | None:
    """The display line of a stored or live envelope, or ``None`` if it is not shown.

    Stateless (no proposal numbers): used for history and as the base of live rendering.
    """
    kind = env.kind
    if kind == "chat":
        return chat_line(env, me)
    if kind == "mcp/proposal":
        return proposal_line(env, None)
    if kind == "mcp/reject":
        who = "you" if env.from_ == me else env.from_
        reason = env.payload.get("reason", "no reason given")
        return make_line(_stamp(env), ("class:proposal", f"{who} rejected a proposal: {reason}"))
    if kind == "mcp/withdraw":
        return make_line(_stamp(env), ("class:notice", f"{env.from_} withdrew a proposal"))
    if kind == "system/error":
        return error_line(env)
    if kind == "floor/outcome":
        return floor_outcome_line(env, me)
    if kind == "system/notice":
        return notice_line(env)
    return None


__all__ = [
    "Fragment",
    "Line",
    "chat_line",
    "clock",
    "compact_json",
    "describe_call",
    "duration",
    "envelope_line",
    "error_line",
    "floor_outcome_line",
    "is_dm",
    "make_line",
    "notice",
    "notice_line",
    "presence_text",
    "proposal_line",
    "proposal_summary",
    "to_epoch",
    "tool_result_line",
]
