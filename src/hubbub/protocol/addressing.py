"""The addressing rule: whom a chat message is addressed to (one rule for every door).

A message is *addressed* to:

- every participant its ``to`` lists;
- every known participant its text mentions, by ``@id`` or by ``@display name`` (the mention
  rule of :mod:`hubbub.protocol.mentions`: any case, a word of its own). A display name counts
  only when it is unambiguous: it is not another participant's id, and no other known
  participant has it (``@id`` always works);
- the author of the message it replies to: a *reply* names an earlier message in its
  ``correlation_id`` (MEW) or ``in_reply_to`` (agentchat, the same field on the envelope).

The sender is never among its own message's addressees. The gateway, the SDK's
when-to-answer rules, the MCP tools and ``hubbub chat`` all call :func:`addressing`; the web
chat has a JavaScript twin (``web/common/mentions.js``) held equal by
``tests/webchat/test_mentions_parity.py``.

The roster is a view: the display name of each participant known in the space (offline ones
included: a message to someone absent is still addressed to them), and who wrote a message
id (as far as the caller remembers).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from hubbub.protocol import mentions as mention_rule
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.ids import reserved_id_error

Why = Literal["to", "mention", "reply"]

AUTHORS_KEPT = 4096
"""Message ids whose authors an :class:`Authors` remembers (the oldest is forgotten first)."""


@dataclass(frozen=True)
class Addressing:
    """Whom one message is addressed to, and why (each list in the order found)."""

    to: tuple[str, ...] = ()
    mentioned: tuple[str, ...] = ()
    replied: tuple[str, ...] = ()
    """The authors of the messages it replies to."""

    @property
    def ids(self) -> list[str]:
        """Every addressee, once each: ``to`` first, then mentions, then reply authors."""
        return list(dict.fromkeys((*self.to, *self.mentioned, *self.replied)))

    def why(self, pid: str) -> Why | None:
        """How the message addresses ``pid`` (``to`` before a mention before a reply)."""
        if pid in self.to:
            return "to"
        if pid in self.mentioned:
            return "mention"
        if pid in self.replied:
            return "reply"
        return None

    def __bool__(self) -> bool:
        return bool(self.to or self.mentioned or self.replied)


NAME_MAX = 64
"""Characters a display name may have."""


def display_name_error(name: str) -> str | None:
    """Why ``name`` may not be a display name (None: it may): 1-64 characters, no control
    characters, no ``@``, not blank at either end, not reading as the gateway's own name."""
    if not name or len(name) > NAME_MAX:
        return f"display name {name[:80]!r} must be 1-{NAME_MAX} characters"
    if name != name.strip() or any(not c.isprintable() for c in name):
        return f"display name {name[:80]!r} has spaces at an end or control characters"
    if "@" in name:
        return f"display name {name!r} may not hold '@' (others write '@' before it)"
    reserved = reserved_id_error(name.replace(" ", ""))
    if reserved is not None:
        return f"display name {name!r} reads as the gateway's own name: pick another"
    return None


def unambiguous_names(names: Mapping[str, str | None]) -> dict[str, str]:
    """The display names that address their participant (id → name): those that are not
    another participant's id and that no other participant shares (compared without case)."""
    ids = {pid.lower() for pid in names}
    count: dict[str, int] = {}
    for name in names.values():
        if name:
            count[name.lower()] = count.get(name.lower(), 0) + 1
    out: dict[str, str] = {}
    for pid, name in names.items():
        if not name or name.lower() == pid.lower():
            continue
        if count[name.lower()] == 1 and name.lower() not in ids:
            out[pid] = name
    return out


def mentioned(text: str, names: Mapping[str, str | None]) -> list[str]:
    """The ids among ``names`` (id → display name) that ``text`` mentions by id or by an
    unambiguous display name, in the order first written, once each."""
    if "@" not in text:
        return []
    by_id = mention_rule.mentioned_ids(text, names)
    by_name = unambiguous_names(names)
    if not by_name:
        return by_id
    at = {pid: mention_rule.first_mention(text, pid) for pid in by_id}
    for pid, name in by_name.items():
        pos = mention_rule.first_mention(text, name)
        if pos >= 0 and (pid not in at or pos < at[pid]):
            at[pid] = pos
    return sorted(at, key=lambda pid: at[pid])


def addressing(
    *,
    sender: str,
    to: Sequence[str] | None,
    text: str,
    replies_to: Sequence[str],
    names: Mapping[str, str | None],
    author_of: Callable[[str], str | None],
) -> Addressing:
    """Whom a message from ``sender`` is addressed to: its ``to``, the participants among
    ``names`` its ``text`` mentions, the authors (``author_of``) of the ``replies_to`` ids."""
    authors = (author_of(mid) for mid in replies_to)
    return Addressing(
        tuple(p for p in dict.fromkeys(to or ()) if p != sender),
        tuple(p for p in mentioned(text, names) if p != sender),
        tuple(p for p in dict.fromkeys(a for a in authors if a) if p != sender),
    )


def may_address(env: Envelope) -> bool:
    """Whether a chat may be addressed to someone (``to``, a reply, an ``@`` in its text):
    only those need :func:`of`, so a plain message costs nothing more."""
    text = env.payload.get("text")
    return bool(env.to or env.correlation_id or (isinstance(text, str) and "@" in text))


def of(env: Envelope, roster: RosterView) -> Addressing:
    """Whom a chat envelope is addressed to, as ``roster`` knows the space."""
    text = env.payload.get("text") if env.kind == "chat" else None
    return addressing(
        sender=env.from_,
        to=env.to,
        text=text if isinstance(text, str) else "",
        replies_to=env.correlation_ids() if env.kind == "chat" else (),
        names=roster.names,
        author_of=roster.author_of,
    )


class RosterView:
    """What the rule needs to know of a space: display names by id, and message authors."""

    def __init__(
        self,
        names: Mapping[str, str | None] | None = None,
        author_of: Callable[[str], str | None] | None = None,
        kinds: Mapping[str, str] | None = None,
    ) -> None:
        self.names: Mapping[str, str | None] = names if names is not None else {}
        """Every participant known in the space (id → display name or None)."""
        self.author_of: Callable[[str], str | None] = author_of or (lambda _mid: None)
        """Who wrote the message with this id (None: not known)."""
        self.kinds: Mapping[str, str] = kinds if kinds is not None else {}
        """The kind of the participants whose kind is known (``agent``, ``human``, …)."""


class Authors:
    """Who wrote the recent messages, by message id (bounded: :data:`AUTHORS_KEPT`)."""

    def __init__(self, kept: int = AUTHORS_KEPT) -> None:
        self._by_id: OrderedDict[str, str] = OrderedDict()
        self._kept = kept

    def heard(self, env: Envelope) -> None:
        """Remember the author of a message (one with an ``id`` and a sender)."""
        if env.id and env.from_:
            self._by_id[env.id] = env.from_
            self._by_id.move_to_end(env.id)
            if len(self._by_id) > self._kept:
                self._by_id.popitem(last=False)

    def author_of(self, msg_id: str) -> str | None:
        """The author of message ``msg_id``, if remembered."""
        return self._by_id.get(msg_id)

    def __len__(self) -> int:
        return len(self._by_id)


def names_of(entries: Iterable[Mapping[str, object]]) -> dict[str, str | None]:
    """id → display name of roster entries (``{"id", "name"?}``, as welcome and presence
    carry them)."""
    out: dict[str, str | None] = {}
    for entry in entries:
        pid, name = entry.get("id"), entry.get("name")
        if isinstance(pid, str):
            out[pid] = name if isinstance(name, str) and name else None
    return out


__all__ = [
    "AUTHORS_KEPT",
    "Addressing",
    "Authors",
    "RosterView",
    "Why",
    "addressing",
    "display_name_error",
    "may_address",
    "mentioned",
    "names_of",
    "of",
    "unambiguous_names",
]
