"""Who proposed what: enforces document 003's proposal rules and shows an outcome to its proposer.

MEW proposals are fulfilled by someone else (a human or trusted service) sending the real
``mcp/request`` with ``correlation_id = [proposal id]``; the target answers the fulfiller. The
ledger remembers proposal → (proposer, targets) and fulfilment → proposer, so the gateway

- refuses a proposal without ``to`` (document 003: proposals MUST name their targets),
- refuses a fulfilment whose ``to`` is not the proposal's ``to``,
- refuses a withdrawal by anyone but the proposer,
- refuses an answer (``mcp/response``, ``mcp/reject``, a fulfilment, a withdrawal) whose
  ``correlation_id`` names a request or proposal its sender could not have seen: one in a
  channel it is not a member of, or a direct one neither from nor to it (:meth:`check_seen`),
- and also delivers the response (and any ``mcp/reject``) to the proposer.

The same ledger is the dashboard's proposal board: which proposals are open (pending, or
approved and running) and what each routed MCP envelope meant for them
(:meth:`ProposalLedger.outcome`, read once the envelope is delivered).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Final, TypeVar

from hubbub.protocol.envelope import Envelope
from hubbub.protocol.errors import ErrorCode, ProtocolError

_V = TypeVar("_V")


BOARD_MAX: Final = 1000
"""Open proposals a board lists (the newest)."""


class Proposal:
    """One proposal: who made it, for whom, the envelope, and where it stands."""

    __slots__ = ("approved_by", "env", "open", "proposer", "targets")

    def __init__(self, env: Envelope) -> None:
        self.env = env
        self.proposer = env.from_
        self.targets = frozenset(env.to or ())
        self.open = True
        """Pending, or approved and running (not yet answered, rejected or withdrawn)."""
        self.approved_by: str | None = None


class _Fulfilment:
    __slots__ = ("proposal", "proposer", "reported")

    def __init__(self, proposal: str, proposer: str) -> None:
        self.proposal = proposal
        self.proposer = proposer
        self.reported = False


Outcome = tuple[str, str]
"""What a routed envelope meant for the board: (event, proposal id)."""


class ProposalLedger:
    """Bounded maps of recent proposals and fulfilments (oldest forgotten first)."""

    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self._open_by: Counter[str] = Counter()
        """Open proposals per proposer (their sum: :attr:`open_count`)."""
        self.open_count = 0
        self._proposals: OrderedDict[str, Proposal] = OrderedDict()
        self._fulfilment: OrderedDict[str, _Fulfilment] = OrderedDict()
        """Request id → the proposal it fulfils (and its proposer)."""
        self._outcomes: OrderedDict[str, Outcome] = OrderedDict()
        """Envelope id → what it meant for the board, until :meth:`outcome` reads it."""
        self._seen: OrderedDict[str, tuple[str | None, frozenset[str]]] = OrderedDict()
        """Request or proposal id → its channel (None: direct) and its sender and ``to``."""

    def _remember(self, table: OrderedDict[str, _V], key: str, value: _V) -> None:
        table[key] = value
        if len(table) > self.capacity:
            _, old = table.popitem(last=False)
            if isinstance(old, Proposal):
                self._close(old)

    def _close(self, p: Proposal) -> None:
        """``p`` is no longer open: answered, rejected, withdrawn or forgotten."""
        if p.open:
            p.open = False
            self.open_count -= 1
            self._open_by[p.proposer] -= 1
            if self._open_by[p.proposer] <= 0:
                del self._open_by[p.proposer]

    def check_room(self, env: Envelope, sender: str, per_proposer: int, per_space: int) -> None:
        """Refuse a new proposal past ``per_proposer`` open ones of its proposer or
        ``per_space`` open ones in the space (``limits.max_pending_proposals*``)."""
        if env.kind != "mcp/proposal" or (env.id and env.id in self._proposals):
            return  # not a proposal, or the resend of one
        mine = self._open_by.get(sender, 0)
        if mine >= per_proposer or self.open_count >= per_space:
            whose = (
                f"you have {mine} pending proposals, the most one participant may have "
                "(limits.max_pending_proposals_per_participant)"
                if mine >= per_proposer
                else f"the space has {self.open_count} pending proposals, the most it may have "
                "(limits.max_pending_proposals)"
            )
            raise ProtocolError(
                ErrorCode.RATE_LIMITED,
                f"proposal refused: {whose}; wait until some are approved, rejected or "
                "withdrawn (mcp/withdraw your own), then propose again",
                correlation_id=env.id or None,
                extra={"attempted_kind": env.kind},
            )

    def check(self, env: Envelope, sender: str) -> None:
        """Refuse a fulfilment sent elsewhere than its proposal's ``to`` (a proposal without
        ``to`` is broadcast, MEW v0.4, and may be fulfilled toward anyone), and an
        ``mcp/withdraw`` of a proposal the sender did not make."""
        kind = env.kind
        if kind not in ("mcp/request", "mcp/withdraw"):
            return
        for cid in env.correlation_ids():
            known = self._proposals.get(cid)
            if known is None:
                continue
            proposer, targets = known.proposer, known.targets
            if kind == "mcp/withdraw" and proposer != sender:
                raise ProtocolError(
                    ErrorCode.CAPABILITY_VIOLATION,
                    f"only the proposer ({proposer}) may withdraw proposal {cid}",
                    correlation_id=env.id or None,
                    extra={"attempted_kind": kind},
                )
            if kind == "mcp/request" and targets and frozenset(env.to or ()) != targets:
                raise ProtocolError(
                    ErrorCode.INVALID_ENVELOPE,
                    f"this request fulfils proposal {cid}, so its 'to' must be the "
                    f"proposal's: {sorted(targets)} (got {env.to or []}); send it there, "
                    "or drop the correlation_id for an unrelated request",
                    correlation_id=env.id or None,
                    extra={"attempted_kind": kind},
                )

    def check_seen(self, env: Envelope, sender: str, member_of: Callable[[str], bool]) -> None:
        """Refuse an MCP envelope whose ``correlation_id`` names a request or proposal that
        ``sender`` could not have seen (``member_of``: whether it is in a channel)."""
        for cid in env.correlation_ids():
            seen = self._seen.get(cid)
            if seen is None:
                continue
            channel, parties = seen
            if sender in parties or (channel is not None and member_of(channel)):
                continue
            where = f"in {channel}, which you are not a member of" if channel else "not to you"
            raise ProtocolError(
                ErrorCode.CAPABILITY_VIOLATION,
                f"correlation_id {cid!r} names a message you could not have seen ({where}); "
                "answer only requests and proposals you received",
                correlation_id=env.id or None,
                extra={"attempted_kind": env.kind},
            )

    def observe(self, env: Envelope, channel: str | None = None) -> list[str]:
        """Record an accepted MCP envelope (sent to ``channel``, None: direct); return extra
        recipients (the proposer) if any."""
        kind = env.kind
        if kind in ("mcp/request", "mcp/proposal") and env.id:
            self._remember(self._seen, env.id, (channel, frozenset((env.from_, *(env.to or ())))))
        if kind == "mcp/proposal":
            if env.id in self._proposals:
                return []  # recorded already
            self.open_count += 1
            self._open_by[env.from_] += 1
            self._remember(self._proposals, env.id, Proposal(env))
            self._note(env.id, ("proposal", env.id))
            return []
        extra: list[str] = []
        for cid in env.correlation_ids():
            known = self._proposals.get(cid)
            if kind == "mcp/request" and known is not None:
                self._remember(self._fulfilment, env.id, _Fulfilment(cid, known.proposer))
                if known.open:
                    known.approved_by = env.from_
                    self._note(env.id, ("proposal-approved", cid))
            elif kind == "mcp/response" and cid in self._fulfilment:
                done = self._fulfilment[cid]
                extra.append(done.proposer)
                answered = self._proposals.get(done.proposal)
                if not done.reported and answered is not None and answered.open:
                    done.reported = True
                    self._close(answered)
                    self._note(env.id, ("proposal-result", done.proposal))
            elif kind == "mcp/reject" and known is not None:
                extra.append(known.proposer)
                if known.open:
                    self._close(known)
                    self._note(env.id, ("proposal-rejected", cid))
            elif kind == "mcp/withdraw":
                gone = self._proposals.pop(cid, None)
                if gone is not None and gone.open:
                    self._close(gone)
                    self._note(env.id, ("proposal-withdrawn", cid))
        return extra

    def _note(self, env_id: str, outcome: Outcome) -> None:
        """Keep the first outcome of an envelope for :meth:`outcome`."""
        if env_id not in self._outcomes:
            self._remember(self._outcomes, env_id, outcome)

    def outcome(self, env: Envelope) -> Outcome | None:
        """What the delivered ``env`` meant for the board (once: the note is dropped)."""
        return self._outcomes.pop(env.id, None) if self._outcomes else None

    def get(self, proposal_id: str) -> Proposal | None:
        """A recent proposal, by id."""
        return self._proposals.get(proposal_id)

    def open(self) -> list[Proposal]:
        """The open proposals, oldest first (at most :data:`BOARD_MAX`, the newest)."""
        return [p for p in self._proposals.values() if p.open][-BOARD_MAX:]
