"""Who is typing: participants composing an answer, from their ``reasoning/*`` events.

An agent answering a DM or a mention is exempt from floor claims, but it still
announces its turn with ``reasoning/start`` (then ``reasoning/thought``…, and
``reasoning/conclusion`` or ``reasoning/cancel``), sent to the channel of the message it
answers or, for a DM, as a DM back to its sender. :class:`Typing` turns those events into
"maths is typing…": pure state, fed with envelopes and the current time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from hubbub.protocol.envelope import Envelope
from hubbub.protocol.ids import SERVER_ID

TYPING_SECONDS: Final = 60.0
"""How long "<id> is typing…" shows without news (a reasoning event) from that participant."""
MAX_NAMED: Final = 3
"""More typists than this are counted ("4 people are typing…") instead of named."""
STARTS: Final = frozenset({"reasoning/start", "reasoning/thought"})
"""Kinds that mean "still composing" (a thought is news too: the deadline moves on)."""
ENDS: Final = frozenset({"reasoning/conclusion", "reasoning/cancel", "chat"})
"""Kinds that end the indicator (the answer itself, or the turn's end)."""
TYPING_KINDS: Final = STARTS | ENDS

Key = tuple[str | None, str]
"""(channel, or ``None`` for direct messages to me; participant id)."""


def scope(env: Envelope, me: str) -> Key | None:
    """Where ``env``'s sender types (its channel, or ``None`` for a DM to me), if anywhere."""
    sender = env.from_
    if sender in (me, "", SERVER_ID):
        return None
    if env.channel is not None:
        return (env.channel, sender)
    if me in (env.to or []):
        return (None, sender)
    return None


@dataclass
class Typing:
    """Who is typing where, and until when the indicator shows without news."""

    seconds: float = TYPING_SECONDS
    until: dict[Key, float] = field(default_factory=dict)
    """(channel or ``None``, participant) → when the indicator lapses."""

    def observe(self, env: Envelope, me: str, now: float) -> bool:
        """Apply one live envelope; True if who is typing changed."""
        if env.kind not in TYPING_KINDS:
            return False
        key = scope(env, me)
        if key is None:
            return False
        if env.kind in STARTS:
            new = key not in self.until
            self.until[key] = now + self.seconds
            return new
        return self.until.pop(key, None) is not None

    def gone(self, pid: str, channel: str | None = None) -> None:
        """``pid`` left ``channel`` (or, without one, went offline: everywhere)."""
        for key in [k for k in self.until if k[1] == pid and (channel is None or k[0] == channel)]:
            del self.until[key]

    def forget(self, channel: str) -> None:
        """I left ``channel``: nobody types there for me any more."""
        for key in [k for k in self.until if k[0] == channel]:
            del self.until[key]

    def who(self, channel: str | None, now: float) -> list[str]:
        """Who is typing in ``channel`` or to me directly (sorted; lapsed ones dropped)."""
        for key, until in list(self.until.items()):
            if until <= now:
                del self.until[key]
        return sorted({pid for ch, pid in self.until if ch is None or ch == channel})


def _names(ids: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    if len(ids) == 1:
        return ids[0]
    return f"{', '.join(ids[:-1])} and {ids[-1]}"


def typing_text(ids: list[str]) -> str:
    """``maths is typing…``, ``maths and chef are typing…``, ``4 people are typing…``."""
    if not ids:
        return ""
    if len(ids) > MAX_NAMED:
        return f"{len(ids)} people are typing…"
    verb = "is" if len(ids) == 1 else "are"
    return f"{_names(ids)} {verb} typing…"


def responding_text(ids: list[str]) -> str:
    """``bob is responding…``, ``carol, dave are responding…`` (floor claims)."""
    if not ids:
        return ""
    verb = "is" if len(ids) == 1 else "are"
    return f"{', '.join(ids)} {verb} responding…"


__all__ = [
    "MAX_NAMED",
    "TYPING_KINDS",
    "TYPING_SECONDS",
    "Key",
    "Typing",
    "responding_text",
    "scope",
    "typing_text",
]
