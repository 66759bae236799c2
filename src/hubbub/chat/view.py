"""The state of ``hubbub chat`` without a terminal: what each channel pane shows, who is
there, who is responding or typing, and which proposals wait for an answer.

:meth:`ChatView.handle` takes every envelope the participant receives (and the current time,
so tests never sleep); the application only draws what the view says.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from hubbub.chat.activity import (
    TYPING_KINDS,
    TYPING_SECONDS,
    Typing,
    responding_text,
    typing_text,
)
from hubbub.chat.format import (
    Fragment,
    Line,
    envelope_line,
    is_dm,
    make_line,
    notice,
    presence_text,
    proposal_line,
    proposal_summary,
)
from hubbub.protocol.envelope import Envelope

CLAIM_SECONDS: Final = 45.0
"""How long "<id> is responding…" shows without a message from that participant."""
HISTORY_PAGE: Final = 50
"""Messages loaded by ``/history`` and PageUp at the top."""
FLOOR_KINDS: Final = frozenset({"floor/responding-to", "floor/claimed"})


@dataclass
class ChannelLog:
    """The lines of one pane, with the channel ``seq`` of each message line."""

    lines: list[Line] = field(default_factory=list)
    seqs: set[int] = field(default_factory=set)
    oldest: int | None = None
    """Lowest ``seq`` known (messages below it can be paged in)."""
    newest: int = 0
    exhausted: bool = False
    """No older messages exist (the beginning of the channel is shown)."""
    loading: bool = False

    def add(self, line: Line | None, seq: int | None = None) -> bool:
        """Append a live line; a message whose ``seq`` was shown already is dropped."""
        if seq is not None:
            if seq in self.seqs:
                return False
            self.seqs.add(seq)
            self.newest = max(self.newest, seq)
            if self.oldest is None or seq < self.oldest:
                self.oldest = seq
        if line is not None:
            self.lines.append(line)
        return True

    def add_history(self, items: list[tuple[int, Line | None]]) -> int:
        """Merge stored messages: older ones go on top, newer ones at the end; return how
        many lines were added."""
        added = 0
        older: list[Line] = []
        for seq, line in sorted(items, key=lambda item: item[0]):
            if seq in self.seqs:
                continue
            self.seqs.add(seq)
            if self.oldest is None or seq < self.oldest:
                if line is not None:
                    older.append(line)
            elif line is not None:
                self.lines.append(line)
            else:
                continue
            added += 1
        if older:
            self.lines[0:0] = older
        if items:
            low = min(seq for seq, _ in items)
            self.oldest = low if self.oldest is None else min(self.oldest, low)
            self.newest = max(self.newest, max(seq for seq, _ in items))
        return added


SETTLING_KINDS: Final[dict[str, str]] = {
    "mcp/request": "approved",
    "mcp/reject": "rejected",
    "mcp/withdraw": "withdrawn",
}
"""Kinds that settle the proposal their ``correlation_id`` names, and the status they give."""


@dataclass
class ProposalEntry:
    """A proposal seen live or in history, numbered for ``/approve N``."""

    number: int
    envelope: Envelope
    status: str = "pending"

    @property
    def id(self) -> str:
        """The proposal's envelope id."""
        return self.envelope.id


def _entries(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The participant entries of a (possibly coalesced) presence payload."""
    raw = payload.get("participants") or [payload.get("participant")]
    return [e for e in raw if isinstance(e, dict) and isinstance(e.get("id"), str)]


def _history(items: object) -> list[Envelope]:
    out: list[Envelope] = []
    for item in items if isinstance(items, list) else []:
        try:
            out.append(msgspec.convert(item, Envelope))
        except msgspec.ValidationError:
            continue
    return out


class ChatView:
    """Everything ``hubbub chat`` shows, updated by envelopes and local events."""

    def __init__(self, me: str, *, typing_seconds: float = TYPING_SECONDS) -> None:
        self.me = me
        self.channels: list[str] = []
        """Joined channels, in the order they were joined."""
        self.current: str | None = None
        self.logs: dict[str, ChannelLog] = {}
        self.console = ChannelLog()
        """What is shown while no channel is joined."""
        self.members: dict[str, set[str]] = {}
        self.people: dict[str, dict[str, Any]] = {}
        """Participants online in the space: id → {kind, presence, wake_at?}."""
        self.claims: dict[tuple[str, str], float] = {}
        """(channel, participant) → when the "is responding" claim lapses."""
        self.typing = Typing(typing_seconds)
        """Who is composing an answer (``reasoning/*``), in a channel or to me directly."""
        self.proposals: list[ProposalEntry] = []
        """Proposals of others, live or loaded from history, numbered for ``/approve N``."""
        self._outcomes: dict[str, str] = {}
        """Proposal id → how history says it was settled."""
        self.unread: dict[str, int] = {}
        self.known_channels: set[str] = set()
        """Channels of the space (from the welcome and every join)."""
        self.connection = "connecting"
        """``connected``, ``connecting``, ``reconnecting…`` or why it is closed."""

    # ------------------------------------------------------------------ panes

    def log(self, channel: str | None = None) -> ChannelLog:
        """The log of ``channel`` (the current one by default; the console if none)."""
        name = self.current if channel is None else channel
        if name is None:
            return self.console
        return self.logs.setdefault(name, ChannelLog())

    def lines(self, channel: str | None = None) -> list[Line]:
        """The lines of a pane (the current one by default)."""
        return self.log(channel).lines

    def notice(self, text: str, style: str = "notice", channel: str | None = None) -> None:
        """Show a local line in a pane (the current one by default)."""
        self.log(channel).add(notice(text, style))

    def show(self, lines: list[Line]) -> None:
        """Show lines (command output) in the current pane."""
        for line in lines:
            self.log().add(line)

    def _everywhere(self, line: Line) -> None:
        """Show a line that belongs to no channel (a DM) in every pane."""
        targets: list[str | None] = [*self.channels] or [None]
        for name in targets:
            self.log(name).add(line)

    def switch(self, channel: str) -> bool:
        """Make a joined channel current; False if it is not joined."""
        if channel not in self.channels:
            return False
        self.current = channel
        self.unread.pop(channel, None)
        return True

    def cycle(self, step: int) -> str | None:
        """Switch to the next (``step=1``) or previous (``-1``) joined channel."""
        if not self.channels:
            return None
        index = self.channels.index(self.current) if self.current in self.channels else -step
        target = self.channels[(index + step) % len(self.channels)]
        self.switch(target)
        return target

    # ------------------------------------------------------------------ envelopes

    def handle(self, env: Envelope, now: float) -> None:
        """Apply one received envelope (live) to the view."""
        kind = env.kind
        if kind in TYPING_KINDS:
            self.typing.observe(env, self.me, now)
        if kind == "channel/joined":
            self._joined(env)
        elif kind == "channel/left":
            self._left(env)
        elif kind == "system/presence":
            self._presence(env, now)
        elif kind == "system/welcome":
            self._welcome(env)
        elif kind == "history/response":
            self._history_page(env)
        elif kind in FLOOR_KINDS:
            self._claim(env, now)
        elif kind == "floor/outcome":
            self._outcome(env)
        elif kind == "mcp/proposal":
            self._proposal(env)
        elif kind in ("mcp/reject", "mcp/withdraw", "mcp/request"):
            self._settle(env)
        elif kind in ("chat", "system/error", "system/notice"):
            self._message(env)

    def _message(self, env: Envelope) -> None:
        line = envelope_line(env, self.me)
        if env.channel is None:
            if line is not None and env.kind in ("system/error", "system/notice"):
                self.log().add(line)
            elif line is not None and is_dm(env):
                self._everywhere(line)
            return
        channel = env.channel
        if env.kind == "chat":
            self.claims.pop((channel, env.from_), None)
        if channel not in self.channels:
            return
        if self.log(channel).add(line, env.seq) and channel != self.current:
            self.unread[channel] = self.unread.get(channel, 0) + 1

    def _welcome(self, env: Envelope) -> None:
        self.connection = "connected"
        self.known_channels.update(
            c["name"]
            for c in env.payload.get("channels", [])
            if isinstance(c, dict) and isinstance(c.get("name"), str)
        )
        self.people = {
            p["id"]: dict(p)
            for p in env.payload.get("participants", [])
            if isinstance(p, dict) and isinstance(p.get("id"), str)
        }

    def _joined(self, env: Envelope) -> None:
        payload = env.payload
        channel = payload.get("channel")
        if not isinstance(channel, str):
            return
        again = channel in self.channels
        self.known_channels.add(channel)
        if not again:
            self.channels.append(channel)
        if self.current is None:
            self.current = channel
        members = payload.get("members")
        if isinstance(members, list):
            self.members[channel] = {m for m in members if isinstance(m, str)}
        log = self.log(channel)
        items: list[tuple[int, Line | None]] = [
            (e.seq, self._history_line(e)) for e in _history(payload.get("history")) if e.seq
        ]
        log.add_history(items)
        seq = payload.get("seq")
        if not items and isinstance(seq, int) and log.oldest is None:
            log.oldest = seq + 1  # nothing shown yet: older messages are the ones up to seq
        if log.oldest is not None and log.oldest <= 1:
            log.exhausted = True
        others = sorted(self.members.get(channel, set()) - {self.me})
        who = f" with {', '.join(others)}" if others else " (nobody else is here)"
        verb = "rejoined" if again else "joined"
        log.add(notice(f"— {verb} {channel}{who} —"))

    def _history_line(self, env: Envelope) -> Line | None:
        if env.kind in FLOOR_KINDS:
            return None
        if env.kind == "mcp/proposal":
            return proposal_line(env, self._numbered(env))
        if env.kind in SETTLING_KINDS:
            self._settled_earlier(env)
        return envelope_line(env, self.me)

    def _left(self, env: Envelope) -> None:
        channel = env.payload.get("channel")
        if not isinstance(channel, str) or channel not in self.channels:
            return
        self.channels.remove(channel)
        self.members.pop(channel, None)
        self.unread.pop(channel, None)
        self.logs.pop(channel, None)
        self.typing.forget(channel)
        if self.current == channel:
            self.current = self.channels[0] if self.channels else None
        self.notice(f"— you left {channel} —")

    def _history_page(self, env: Envelope) -> None:
        channel = env.payload.get("channel")
        if not isinstance(channel, str) or channel not in self.channels:
            return
        log = self.log(channel)
        log.loading = False
        messages = _history(env.payload.get("messages"))
        added = log.add_history([(e.seq, self._history_line(e)) for e in messages if e.seq])
        if not env.payload.get("has_more"):
            log.exhausted = True
            log.lines.insert(0, notice(f"— the beginning of {channel} —"))
        elif added == 0:
            log.exhausted = True  # nothing new came back: do not ask again and again

    def history_request(self, channel: str, limit: int = HISTORY_PAGE) -> dict[str, Any] | None:
        """The ``history/request`` payload for older messages of ``channel``, or ``None``
        (with a notice) if there are none or a page is already on its way."""
        log = self.log(channel)
        if log.loading:
            return None
        if log.exhausted:
            self.notice(f"no older messages in {channel}", channel=channel)
            return None
        log.loading = True
        payload: dict[str, Any] = {"channel": channel, "limit": limit}
        if log.oldest is not None:
            payload["before_seq"] = log.oldest
        return payload

    # ------------------------------------------------------------------ presence

    def _presence(self, env: Envelope, now: float) -> None:
        payload = env.payload
        event = payload.get("event")
        channel = payload.get("channel")
        for entry in _entries(payload):
            pid = entry["id"]
            if event == "leave":
                self.typing.gone(pid, channel if isinstance(channel, str) else None)
            if isinstance(channel, str):
                self._membership(pid, str(event), channel)
            elif event == "join":
                self.people[pid] = dict(entry)
                for ch in entry.get("channels") or []:
                    self._membership(pid, "join", ch)
            elif event == "leave":
                self.people.pop(pid, None)
                for ch in list(self.members):
                    self._membership(pid, "leave", ch, gone=True)
            elif event == "update":
                self._update(pid, entry, payload, now)

    def _membership(self, pid: str, event: str, channel: str, gone: bool = False) -> None:
        members = self.members.get(channel)
        if members is None or pid == self.me:
            return
        if event == "join" and pid not in members:
            members.add(pid)
            self.notice(f"→ {pid} joined {channel}", "presence", channel)
        elif event == "leave" and pid in members:
            members.discard(pid)
            self.claims.pop((channel, pid), None)
            what = "went offline" if gone else f"left {channel}"
            self.notice(f"← {pid} {what}", "presence", channel)

    def _update(self, pid: str, entry: dict[str, Any], payload: dict[str, Any], now: float) -> None:
        person = self.people.setdefault(pid, {"id": pid})
        presence = entry.get("presence") or payload.get("presence") or "online"
        wake_at = entry.get("wake_at", payload.get("wake_at"))
        person["presence"] = presence
        if wake_at is not None and presence == "sleeping":
            person["wake_at"] = wake_at
        else:
            person.pop("wake_at", None)
        if pid == self.me:
            return
        text = presence_text(str(presence), wake_at, now)
        for channel, members in self.members.items():
            if pid in members:
                self.notice(f"• {pid} is {text}", "presence", channel)

    def presence_of(self, pid: str, now: float) -> str:
        """``online``, ``away``, ``sleeping, wakes in 47s``… for one participant."""
        person = self.people.get(pid, {})
        return presence_text(str(person.get("presence", "online")), person.get("wake_at"), now)

    # ------------------------------------------------------------------ floor claims

    def _claim(self, env: Envelope, now: float) -> None:
        channel = env.channel
        if channel is None:
            return
        holder = env.from_
        if env.kind == "floor/claimed":
            holder = str(env.payload.get("holder") or holder)
        self.claims[(channel, holder)] = now + CLAIM_SECONDS

    def _outcome(self, env: Envelope) -> None:
        """A claim ended (stored, so histories show it too): its holder no longer responds."""
        channel = env.channel
        if channel is None:
            return
        self.claims.pop((channel, str(env.payload.get("holder"))), None)
        if channel in self.channels:
            self.log(channel).add(envelope_line(env, self.me), env.seq)

    def responding(self, channel: str | None, now: float) -> list[str]:
        """Who is responding in ``channel`` right now (claims lapse after 45 s)."""
        for key, until in list(self.claims.items()):
            if until <= now:
                del self.claims[key]
        return sorted(pid for ch, pid in self.claims if ch == channel)

    # ------------------------------------------------------------------ proposals

    def _numbered(self, env: Envelope) -> int | None:
        """The ``/approve`` number of a proposal (live or from history), numbering it if it
        is new; ``None`` for my own proposals."""
        if env.from_ == self.me:
            return None
        known = next((p for p in self.proposals if p.id == env.id), None)
        if known is None:
            known = ProposalEntry(len(self.proposals) + 1, env)
            known.status = self._outcomes.get(env.id, "pending")
            self.proposals.append(known)
        return known.number

    def _settled_earlier(self, env: Envelope) -> None:
        """An approval, rejection or withdrawal in history settles the proposal it names
        (whether its page came before or after the proposal's)."""
        status = SETTLING_KINDS[env.kind]
        for pid in env.correlation_ids():
            self._outcomes.setdefault(pid, status)
            entry = next((p for p in self.proposals if p.id == pid), None)
            if entry is not None and entry.status == "pending":
                entry.status = status

    def _proposal(self, env: Envelope) -> None:
        line = proposal_line(env, self._numbered(env))
        if env.channel is not None and env.channel in self.channels:
            self.log(env.channel).add(line, env.seq)
        else:
            self._everywhere(line)

    def proposal(self, number: int) -> ProposalEntry | None:
        """The proposal shown as ``#number``."""
        if 1 <= number <= len(self.proposals):
            return self.proposals[number - 1]
        return None

    def _entry_for(self, env: Envelope) -> ProposalEntry | None:
        ids = set(env.correlation_ids())
        return next((p for p in self.proposals if p.id in ids), None)

    def _settle(self, env: Envelope) -> None:
        entry = self._entry_for(env)
        kind = env.kind
        if kind == "mcp/request":
            if entry is not None and entry.status == "pending":
                entry.status = "approved"
                if env.from_ != self.me:
                    self._about(entry, f"{env.from_} approved proposal #{entry.number}")
            return
        if entry is None:
            self._message(env)
            return
        if kind == "mcp/withdraw":
            if env.from_ != entry.envelope.from_:
                return  # only the proposer may withdraw (MEW)
            entry.status = "withdrawn"
            self._about(entry, f"{env.from_} withdrew proposal #{entry.number}")
        else:
            entry.status = "rejected"
            who = "you" if env.from_ == self.me else env.from_
            reason = env.payload.get("reason", "no reason given")
            self._about(entry, f"{who} rejected proposal #{entry.number}: {reason}", env.seq)

    def _about(self, entry: ProposalEntry, text: str, seq: int | None = None) -> None:
        line = notice(text, "proposal")
        channel = entry.envelope.channel
        if channel is not None and channel in self.channels:
            self.log(channel).add(line, seq)
        else:
            self._everywhere(line)

    def proposal_listing(self) -> list[Line]:
        """What ``/proposals`` shows."""
        if not self.proposals:
            return [notice("no proposals yet")]
        return [proposal_summary(p.number, p.envelope, p.status) for p in self.proposals]

    def pending_proposals(self) -> int:
        """How many proposals wait for an answer."""
        return sum(1 for p in self.proposals if p.status == "pending")

    # ------------------------------------------------------------------ status lines

    def who_lines(self, now: float) -> list[Line]:
        """What ``/who`` shows: the current channel's members and who else is online."""
        channel = self.current
        if channel is None:
            return [notice("not in a channel: /join #general")]
        members = sorted(self.members.get(channel, set()) | {self.me})
        out = [notice(f"in {channel}:")]
        for pid in members:
            kind = self.people.get(pid, {}).get("kind", "?")
            you = " (you)" if pid == self.me else ""
            out.append(notice(f"  {pid}{you} [{kind}] {self.presence_of(pid, now)}"))
        elsewhere = sorted(set(self.people) - set(members))
        if elsewhere:
            out.append(notice(f"also online in the space: {', '.join(elsewhere)}"))
        return out

    def presence_fragments(self, now: float) -> list[Fragment]:
        """The presence line: who is in the current channel and how they are."""
        channel = self.current
        if channel is None:
            return [("class:presence", "not in a channel: /join #general")]
        groups: dict[str, list[str]] = {}
        for pid in sorted(self.members.get(channel, set()) | {self.me}):
            state = self.presence_of(pid, now)
            key = state.split(",")[0]
            label = pid if "," not in state else f"{pid} ({state.split(', ', 1)[1]})"
            groups.setdefault(key, []).append(label)
        order = {"online": 0, "away": 1, "sleeping": 2}
        keys = sorted(groups, key=lambda k: (order.get(k, 3), k))
        parts = [f"{key}: {', '.join(groups[key])}" for key in keys]
        return [("class:presence", f"{channel} · " + " · ".join(parts))]

    def typists(self, channel: str | None, now: float) -> list[str]:
        """Who types in ``channel`` or to me, less those responding there (claims win)."""
        claimants = set(self.responding(channel, now))
        return [pid for pid in self.typing.who(channel, now) if pid not in claimants]

    def status_fragments(self, now: float, scrolled: bool = False) -> list[Fragment]:
        """The status line: channels (unread counts), connection, who is responding or
        typing, proposals."""
        frags: list[Fragment] = []
        for name in self.channels:
            if name == self.current:
                frags.append(("class:status.current", f"[{name}]"))
            else:
                count = self.unread.get(name)
                frags.append(("class:status", f"{name}({count})" if count else name))
            frags.append(("class:status", " "))
        if not self.channels:
            frags.append(("class:status", "no channel "))
        if self.connection != "connected":
            frags.append(("class:status.warn", f"· {self.connection} "))
        claimants = self.responding(self.current, now)
        if claimants:
            frags.append(("class:status.claim", f"· {responding_text(claimants)} "))
        typists = self.typists(self.current, now)
        if typists:
            frags.append(("class:status.typing", f"· {typing_text(typists)} "))
        pending = self.pending_proposals()
        if pending:
            plural = "s" if pending > 1 else ""
            frags.append(("class:status.proposal", f"· {pending} proposal{plural} (/proposals) "))
        if scrolled:
            frags.append(("class:status", "· scrolled back (PageDown) "))
        return frags


def status_text(fragments: list[Fragment]) -> str:
    """Plain text of status fragments."""
    return make_line(*fragments).plain


__all__ = [
    "CLAIM_SECONDS",
    "HISTORY_PAGE",
    "ChannelLog",
    "ChatView",
    "ProposalEntry",
    "status_text",
]
