"""Floor control (document 000): one claim per (channel, msg_id); the earliest start keeps it.

A claim ranks by ``(human first, started_at, participant id)``: a person's claim outranks any
agent's, then the earlier ``started_at`` wins and equal times go to the smaller id. The loser
of every contest (the newcomer or the holder it displaces) is told to yield. Claims expire
``ttl_ms`` after they were made, and end when the holder answers the claimed message (a chat
whose ``correlation_id`` / agentchat ``in_reply_to`` names it: its other chat ends nothing) or
disconnects. Past the document, claims are checked: the message must be a recent message of
the channel, and ``started_at`` may be neither before that message nor later than now plus
``max_skew_ms``. A claim on a message that was answered already (:meth:`FloorControl.answered`),
or that is addressed to others (:meth:`FloorControl.heard`), is refused
(:class:`ClaimRefused`): whoever claims it, nobody answers it twice or in another's place.
An open question (:meth:`FloorControl.asked`) that nobody claims or answers within
``unclaimed_ms`` is handed back by :meth:`FloorControl.unclaimed` when its timer fires, so
that its asker can be told no agent took it.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Final, Literal, TypeVar

from hubbub.engines.timers import TimerQueue

ReleaseReason = Literal["answered", "expired", "disconnected"]
RefusalWhy = Literal["answered", "addressed"]
_K = TypeVar("_K")
_V = TypeVar("_V")

KEPT: Final = 4096
"""Messages whose answer (and whose addressees) a floor remembers (the oldest first forgotten)."""


class ClaimRejected(ValueError):
    """A claim that cannot be accepted; the message says why and what to send instead."""


class ClaimRefused(ClaimRejected):
    """A believable claim on a message that is not the claimant's to answer: it was answered
    already (``why="answered"``, ``by``: who answered, ``answer``: the answer's id), or it is
    addressed to others (``why="addressed"``, ``by``: its addressees)."""

    def __init__(
        self, message: str, why: RefusalWhy, by: tuple[str, ...], answer: str | None = None
    ) -> None:
        super().__init__(message)
        self.why: RefusalWhy = why
        self.by = by
        self.answer = answer

    @property
    def winner(self) -> str:
        """Whom the claimant leaves the message to (who answered, or its first addressee)."""
        return self.by[0]


@dataclass(frozen=True, slots=True)
class Claim:
    """The current holder of the floor for one message."""

    channel: str
    msg_id: str
    holder: str
    started_at: int
    expires_at: float
    human: bool = False

    def rank(self) -> tuple[int, int, str]:
        """Smaller wins: humans first, then earliest start, then smallest id."""
        return (0 if self.human else 1, self.started_at, self.holder)


@dataclass(frozen=True, slots=True)
class Release:
    """A claim that ended without a contest."""

    claim: Claim
    reason: ReleaseReason
    yielded: tuple[str, ...] = ()
    """Who was told to yield on this message while it was held, in the order they were."""


@dataclass(slots=True)
class FloorOutcome:
    """What a claim led to: the holder now, who must yield, whether to relay it."""

    holder: Claim
    relay: bool = True
    changed: bool = True
    yielded: list[str] = field(default_factory=list)
    reason: str = ""
    """Why the participants in ``yielded`` lost, in words (sent with their yield)."""

    @property
    def winner(self) -> str:
        """The participant holding the floor."""
        return self.holder.holder


def _why(winner: Claim, loser: Claim) -> str:
    """Why ``loser`` yields to ``winner`` (the order of ``Claim.rank``, in words)."""
    if winner.human and not loser.human:
        return "a human claimed this message; humans keep the floor"
    if winner.started_at < loser.started_at:
        return "another claim has an earlier started_at"
    return "another claim has the same started_at; ties go to the smaller id"


class FloorControl:
    """Claims per (channel, msg_id) with TTL expiry on a shared timer queue."""

    def __init__(
        self,
        timers: TimerQueue,
        *,
        ttl_ms: float = 45_000,
        enabled: bool = True,
        max_skew_ms: float = 2_000,
        scope: str = "",
        unclaimed_ms: float = 30_000,
    ) -> None:
        self.timers = timers
        self.ttl_ms = ttl_ms
        self.unclaimed_ms = unclaimed_ms
        """How long an open question may go unclaimed before its asker is told (0: never)."""
        self.enabled = enabled
        self.max_skew_ms = max_skew_ms
        self.scope = scope
        self._claims: dict[tuple[str, str], Claim] = {}
        self._by_holder: dict[str, set[tuple[str, str]]] = {}
        self._yielded: dict[tuple[str, str], dict[str, None]] = {}
        """Who yielded on each held message (kept only while it is held)."""
        self._answers: OrderedDict[tuple[str, str], tuple[str, str | None]] = OrderedDict()
        """(channel, msg_id) → (who answered, the answer's id): the first answer of each."""
        self._addressees: OrderedDict[tuple[str, str], tuple[str, ...]] = OrderedDict()
        """(channel, msg_id) → whom the message is addressed to (addressed ones only)."""
        self._open: dict[tuple[str, str], str] = {}
        """(channel, msg_id) → asker, for open questions nobody claimed or answered yet."""

    def __len__(self) -> int:
        return len(self._claims)

    def holder(self, channel: str, msg_id: str) -> Claim | None:
        """The claim holding the floor on this message, if any."""
        return self._claims.get((channel, msg_id))

    def holds(self, participant: str) -> bool:
        """Whether ``participant`` holds any claim."""
        return participant in self._by_holder

    def claims(self) -> list[Claim]:
        """Every active claim (for observers)."""
        return list(self._claims.values())

    def timer_key(self, channel: str, msg_id: str) -> tuple[str, str, str, str]:
        """The timer-queue key of a claim's expiry."""
        return (self.scope, "floor", channel, msg_id)

    def open_key(self, channel: str, msg_id: str) -> tuple[str, str, str, str]:
        """The timer-queue key of an open question's deadline (:meth:`asked`)."""
        return (self.scope, "open", channel, msg_id)

    def asked(self, now: float, channel: str, msg_id: str, asker: str) -> bool:
        """``asker`` asked an open question (unaddressed): unless a claim or an answer comes
        within ``unclaimed_ms``, :meth:`unclaimed` hands it back when its timer fires. False
        when that is off (or the floor is), or it is claimed or answered already."""
        key = (channel, msg_id)
        if not self.enabled or self.unclaimed_ms <= 0 or key in self._claims:
            return False
        if key in self._answers:
            return False
        self._open[key] = asker
        self.timers.arm(self.open_key(channel, msg_id), now + self.unclaimed_ms)
        return True

    def unclaimed(self, channel: str, msg_id: str) -> str | None:
        """An open question's timer fired: its asker, if nobody claimed or answered it."""
        return self._open.pop((channel, msg_id), None)

    def open_questions(self) -> int:
        """How many open questions wait for a claim (for observers and tests)."""
        return len(self._open)

    def _taken(self, key: tuple[str, str]) -> None:
        """Someone claimed or answered the message: it is no longer an open question."""
        if self._open.pop(key, None) is not None:
            self.timers.cancel(self.open_key(*key))

    def heard(self, channel: str, msg_id: str, addressees: tuple[str, ...]) -> None:
        """A message of ``channel`` addressed to ``addressees`` (the addressing rule's): a
        claim on it by anyone else is refused."""
        if addressees:
            _keep(self._addressees, (channel, msg_id), addressees)

    def answered(self, channel: str, msg_id: str, by: str, answer: str | None) -> None:
        """``by`` answered ``msg_id`` (a chat ``answer`` that replies to it): a later claim
        on it is refused (the first answer is the one remembered)."""
        key = (channel, msg_id)
        if key not in self._answers:
            _keep(self._answers, key, (by, answer))
        self._taken(key)

    def answer_of(self, channel: str, msg_id: str) -> tuple[str, str | None] | None:
        """Who answered ``msg_id`` and with which message, if it was answered."""
        return self._answers.get((channel, msg_id))

    def refusal(self, channel: str, msg_id: str, participant: str) -> ClaimRefused | None:
        """Why ``participant`` may not claim ``msg_id`` even when its claim is believable
        (answered already, or addressed to others); ``None``: it may."""
        done = self._answers.get((channel, msg_id))
        if done is not None:
            by, answer = done
            whom = "you" if by == participant else by
            which = f" (message {answer})" if answer else ""
            return ClaimRefused(
                f"{msg_id} was answered already by {whom}{which}; do not answer it again",
                "answered",
                (by,),
                answer,
            )
        addressees = self._addressees.get((channel, msg_id))
        if addressees and participant not in addressees:
            return ClaimRefused(
                f"{msg_id} is addressed to {', '.join(addressees)}, not to you; leave it to "
                + ("them" if len(addressees) > 1 else addressees[0]),
                "addressed",
                addressees,
            )
        return None

    def claim(
        self,
        now: float,
        channel: str,
        msg_id: str,
        participant: str,
        started_at: int,
        *,
        msg_ts: float | None,
        human: bool = False,
    ) -> FloorOutcome:
        """Register a claim; raises ClaimRejected when it is not believable."""
        if msg_ts is None:
            raise ClaimRejected(
                f"{msg_id!r} is not a recent message of {channel}; claim only messages you "
                "received in that channel"
            )
        refused = self.refusal(channel, msg_id, participant)
        if refused is not None:
            raise refused
        if started_at < msg_ts:
            raise ClaimRejected(
                f"started_at {started_at} is before the message itself ({int(msg_ts)}); "
                "send the Unix time in ms taken just before inference"
            )
        if started_at > now + self.max_skew_ms:
            raise ClaimRejected(
                f"started_at {started_at} is {int(started_at - now)} ms in the future "
                f"(at most {int(self.max_skew_ms)} ms of clock skew is accepted); "
                "check the agent's clock"
            )
        new = Claim(channel, msg_id, participant, started_at, now + self.ttl_ms, human)
        key = (channel, msg_id)
        current = self._claims.get(key)
        if current is None:
            self._hold(new)
            return FloorOutcome(new)
        if current.holder == participant:
            return FloorOutcome(current, relay=False, changed=False)  # idempotent re-claim
        yielded = self._yielded.setdefault(key, {})
        if new.rank() < current.rank():
            self._drop(current)
            self._hold(new)
            yielded[current.holder] = None
            yielded.pop(participant, None)  # it holds the floor now
            return FloorOutcome(new, yielded=[current.holder], reason=_why(new, current))
        yielded[participant] = None
        return FloorOutcome(
            current, changed=False, yielded=[participant], reason=_why(current, new)
        )

    def spoke(
        self, channel: str, participant: str, reply_to: list[str] | None = None
    ) -> list[Release]:
        """``participant`` sent a chat to ``channel`` that replies to ``reply_to``: the claims
        it holds on those messages end as answered (its other claims, and every claim when it
        replies to nothing, go on)."""
        keys = self._by_holder.get(participant)
        if not keys or not reply_to:
            return []
        ended = [k for k in keys if k[0] == channel and k[1] in reply_to]
        return [self._release(self._claims[k], "answered") for k in ended]

    def disconnected(self, participant: str) -> list[Release]:
        """``participant`` left the server: every claim it holds ends."""
        keys = list(self._by_holder.get(participant, ()))
        return [self._release(self._claims[k], "disconnected") for k in keys]

    def expire(self, channel: str, msg_id: str) -> Release | None:
        """The expiry timer of a claim fired."""
        claim = self._claims.get((channel, msg_id))
        if claim is None:
            return None
        return self._release(claim, "expired")

    def _release(self, claim: Claim, reason: ReleaseReason) -> Release:
        """End a claim: the floor of its message is free, and who yielded on it is told."""
        self._drop(claim)
        yielded = self._yielded.pop((claim.channel, claim.msg_id), None)
        return Release(claim, reason, tuple(yielded) if yielded else ())

    def _hold(self, claim: Claim) -> None:
        key = (claim.channel, claim.msg_id)
        self._claims[key] = claim
        self._by_holder.setdefault(claim.holder, set()).add(key)
        self.timers.arm(self.timer_key(*key), claim.expires_at)
        self._taken(key)

    def _drop(self, claim: Claim) -> Claim:
        key = (claim.channel, claim.msg_id)
        del self._claims[key]
        held = self._by_holder[claim.holder]
        held.discard(key)
        if not held:
            del self._by_holder[claim.holder]
        self.timers.cancel(self.timer_key(*key))
        return claim


def _keep(table: OrderedDict[_K, _V], key: _K, value: _V) -> None:
    """Put ``key`` in a bounded table (:data:`KEPT`), forgetting the oldest entry past it."""
    table[key] = value
    table.move_to_end(key)
    if len(table) > KEPT:
        table.popitem(last=False)
