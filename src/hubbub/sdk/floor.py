"""The agent's side of floor control (documents 000 and 001): CSMA delay, settle window,
``floor/responding-to`` claims and yields, as a sans-I/O state machine.

:class:`FloorCoordinator` takes events — a channel message the agent decided to answer, a
claim or reply seen in the channel, a ``floor/yield``, its own timer falling due, inference
about to start — with the time from an injected clock, and answers with a :class:`Step`
saying what to do: wait so long, skip, claim, yield. It never sleeps and never sends; the
agent (``hubbub.sdk.agent_floor``) does the I/O.

Life of a *batch* (the messages of one channel answered as one turn)::

    open ──► WAITING ──due──► READY ──begin──► CLAIMED ──finish──► (gone)
               │ claim seen         │ claimed        │ earlier claim, human claim, YIELD
               ▼                    ▼                ▼
            SKIPPED              SKIPPED          YIELDED

- **CSMA** (modes ``both`` and ``csma``): a batch waits a random delay (:mod:`hubbub.sdk.csma`);
  a claim on one of its messages seen meanwhile skips it. Answers seen meanwhile (or during
  inference) are collected, not acted on: :meth:`FloorCoordinator.covering` hands them to the
  agent, whose model judges whether its draft adds anything to them (document 001: discard
  the draft only when someone "already responded with substantially the same point"). An
  answer is a chat whose ``correlation_id`` names one of the batch's messages (from anyone
  but its sender), or any later chat in the channel from another agent (agentchat clients
  send no ``correlation_id``).
- **Ranking and continuity** (:mod:`hubbub.sdk.csma`): the delay's band follows how much of
  the message's topics the agent's skills cover and the classifier's confidence; and the
  agent that answered an asker last (within ``continuity_ms``) gets the first right to claim
  that asker's next unaddressed message, while the others defer (:meth:`FloorCoordinator.spoke`
  keeps who answered whom).
- **Settle window**: channel messages the agent will answer that arrive within ``settle_ms``
  of the batch's first one, while it still waits, join it. The window closes when the delay
  ends (so it adds no latency) or when a DM or mention arrives (:meth:`cut_settle`).
- **Claims** (modes ``both`` and ``claims``): just before inference the agent claims every
  message of the batch with one ``started_at``; it keeps the floor while its
  ``(started_at, id)`` is the least seen and no human claimed; otherwise it yields.
- **Per message**: claims are per message (document 000), so a claim, a yield or a human's
  claim on *some* messages of a batch gives up only those (``release``: someone else answers
  them); the batch goes on with the rest, and only losing its last message skips or yields
  it. A burst of questions from several people, which agents with different skills batch
  differently, so leaves none unanswered.
"""

from __future__ import annotations

import enum
import itertools
import random
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from hubbub.protocol.ids import SERVER_ID
from hubbub.sdk.csma import csma_delay_ms

Coordination = Literal["both", "csma", "claims", "none"]
COORDINATIONS: Final[tuple[Coordination, ...]] = ("both", "csma", "claims", "none")
HumanPolicy = Literal["coordinate", "exempt"]
"""How agents answer a person's unaddressed channel message: ``coordinate`` (CSMA and floor
control pick one agent, as for anyone else) or ``exempt`` (every agent that judges it relevant
answers at once: the literal reading of document 000's "humans always get the floor")."""
HUMAN_POLICIES: Final[tuple[HumanPolicy, ...]] = ("coordinate", "exempt")
Action = Literal["wait", "joined", "skip", "proceed", "claim", "yield", "release", "none"]

_SEEN_KEPT: Final = 4096
_LATER_KEPT: Final = 256
"""Recent agents' chats kept per channel (candidate answers to waiting batches)."""


def uses_csma(mode: Coordination) -> bool:
    """Whether ``mode`` waits a CSMA delay before answering."""
    return mode in ("both", "csma")


def uses_claims(mode: Coordination) -> bool:
    """Whether ``mode`` sends ``floor/responding-to`` and honours yields."""
    return mode in ("both", "claims")


def exemption(
    mode: Coordination,
    *,
    channel: str | None,
    rule: str,
    sender: str,
    sender_kind: str | None,
    humans: HumanPolicy = "coordinate",
) -> str | None:
    """Why a message the agent will answer is answered at once, without CSMA delay or claim
    (``None``: floor control applies). Exempt: DMs, messages addressed to, mentioning or
    replying to the agent (``rule`` ``direct``/``mention``/``reply``), ``@server``'s, and with
    ``humans="exempt"`` a person's (document 000). With ``coordinate`` (the default) a
    person's unaddressed question goes through floor control like any other, so that one
    agent answers it."""
    if mode == "none":
        return "coordination is off"
    if channel is None:
        return "a direct message"
    if rule == "direct":
        return "addressed to me"
    if rule == "mention":
        return "mentions me"
    if rule == "reply":
        return "replies to me"
    if sender == SERVER_ID:
        return "from the server"
    if humans == "exempt" and sender_kind == "human":
        return "from a human"
    return None


class Stage(enum.Enum):
    """Where a batch is."""

    WAITING = "waiting"
    """The CSMA delay runs (the settle window may be open)."""
    READY = "ready"
    """The delay is over; the batch waits for the agent's runtime to start its turn."""
    CLAIMED = "claimed"
    """Inference started (with a claim when claims are used)."""
    SKIPPED = "skipped"
    """Someone else covers it: no inference, no answer."""
    YIELDED = "yielded"
    """Lost the floor: inference is cancelled, nothing is sent."""
    DONE = "done"


@dataclass(frozen=True)
class FloorSettings:
    """The floor settings of one agent (from :class:`~hubbub.sdk.AgentConfig`)."""

    coordination: Coordination = "both"
    csma_min_ms: float = 2000
    csma_max_ms: float = 8000
    settle_ms: float = 5000
    skills: tuple[str, ...] = ()
    continuity_ms: float = 180_000
    """For this long after an agent answered someone, that person's next unaddressed channel
    message goes first to that agent (0: never)."""

    def __post_init__(self) -> None:
        if self.coordination not in COORDINATIONS:
            raise ValueError(f"coordination must be one of {', '.join(COORDINATIONS)}")
        if self.csma_min_ms < 0 or self.settle_ms < 0 or self.continuity_ms < 0:
            raise ValueError("csma_min_ms, settle_ms and continuity_ms must be >= 0")
        if self.csma_max_ms < self.csma_min_ms:
            raise ValueError(
                f"csma_min_ms ({self.csma_min_ms:g}) must not exceed "
                f"csma_max_ms ({self.csma_max_ms:g})"
            )


@dataclass
class Batch:
    """Messages of one channel answered as one turn; ``key`` is the first one's id."""

    key: str
    channel: str
    messages: list[str]
    opened_at: float
    due_at: float
    settle_until: float
    stage: Stage = Stage.WAITING
    window_open: bool = True
    started_at: int | None = None
    reason: str = ""
    winner: str | None = None
    senders: dict[str, str] = field(default_factory=dict)
    """Who sent each message (their own follow-ups are not answers)."""
    position: int | None = None
    """Where the first message came in the channel (later agents' chats may answer it)."""
    released: list[str] = field(default_factory=list)
    """Messages given up to someone else's claim (the batch goes on with the rest)."""


@dataclass(frozen=True)
class Reply:
    """A chat that may already answer a batch: its id, sender and text."""

    id: str
    who: str
    text: str


@dataclass
class Seen:
    """What the channel said about one message: claims (``who → (started_at, human)``) and
    replies (chats whose ``correlation_id`` names it)."""

    claims: dict[str, tuple[int, bool]] = field(default_factory=dict)
    replies: list[Reply] = field(default_factory=list)


@dataclass(frozen=True)
class Step:
    """What the agent should do now.

    ``wait``: arm a timer for ``delay_ms`` then call :meth:`FloorCoordinator.due`;
    ``joined``: the message joined a waiting batch; ``skip``: drop the batch (``reason``);
    ``proceed``: hand the batch to the runtime (after ``due``) or start inference without a
    claim (after ``begin``); ``claim``: send a claim per message with ``started_at``, then
    start inference; ``yield``: cancel the inference at once, send nothing; ``release``:
    someone else answers ``message``, one of several in the batch, which goes on without it;
    ``none``: nothing.
    """

    action: Action
    batch: Batch | None = None
    delay_ms: float = 0.0
    reason: str = ""
    started_at: int | None = None
    winner: str | None = None
    message: str | None = None


_NOTHING: Final = Step("none")


class FloorCoordinator:
    """Per-agent CSMA, settle window and claim bookkeeping (sans-I/O; clock and rng injected).

    ``clock()`` returns Unix time in milliseconds (``started_at`` is sent to the gateway).
    """

    def __init__(
        self,
        agent_id: str,
        settings: FloorSettings | None = None,
        *,
        clock: Callable[[], float],
        rng: random.Random | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.settings = settings or FloorSettings()
        self.clock = clock
        self.rng = rng or random.Random()
        self._batches: dict[str, Batch] = {}
        self._batch_of: dict[str, str] = {}
        self._seen: OrderedDict[str, Seen] = OrderedDict()
        self._positions: OrderedDict[str, int] = OrderedDict()
        self._agents_said: dict[str, deque[tuple[int, Reply]]] = {}
        self._arrivals = itertools.count()
        self._authors: OrderedDict[str, str] = OrderedDict()
        """Who wrote each recent chat, by id (whom an answer answers)."""
        self._answerer: OrderedDict[tuple[str, str], tuple[str, float]] = OrderedDict()
        """(channel, asker) → (the agent that answered the asker last there, when)."""

    # ------------------------------------------------------------------ inspection

    @property
    def mode(self) -> Coordination:
        """The coordination mode."""
        return self.settings.coordination

    def batch(self, key: str) -> Batch | None:
        """The batch with this key, if it is still tracked."""
        return self._batches.get(key)

    def batch_of(self, msg_id: str) -> Batch | None:
        """The tracked batch a message belongs to."""
        key = self._batch_of.get(msg_id)
        return None if key is None else self._batches.get(key)

    def pending(self) -> list[Batch]:
        """Batches still waiting or ready (not yet started, skipped or finished)."""
        return [b for b in self._batches.values() if b.stage in (Stage.WAITING, Stage.READY)]

    def seen(self, msg_id: str) -> Seen:
        """What was seen about ``msg_id`` (empty if nothing)."""
        return self._seen.get(msg_id) or Seen()

    def delay_for(
        self, text: str, confidence: float | None = None, first: bool | None = None
    ) -> float:
        """A CSMA delay (ms) for a message with this text (0 when CSMA is off), ranked by the
        classifier's ``confidence`` and continuity (``first``, :meth:`continuity`)."""
        s = self.settings
        if not uses_csma(s.coordination):
            return 0.0
        lo, hi = s.csma_min_ms, s.csma_max_ms
        return csma_delay_ms(self.rng, lo, hi, s.skills, text, confidence, first)

    def last_answerer(self, channel: str, asker: str) -> str | None:
        """The agent that answered ``asker`` in ``channel`` last, within ``continuity_ms``."""
        seen = self._answerer.get((channel, asker))
        if seen is None or self.clock() - seen[1] > self.settings.continuity_ms:
            return None
        return seen[0]

    def continuity(self, channel: str, asker: str) -> bool | None:
        """True: this agent answered ``asker`` last (it claims first); False: another agent
        did (this one defers); None: nobody did lately."""
        last = self.last_answerer(channel, asker) if asker else None
        return None if last is None else last == self.agent_id

    # ------------------------------------------------------------------ the agent's events

    def open(
        self,
        msg_id: str,
        channel: str,
        text: str = "",
        sender: str = "",
        confidence: float | None = None,
    ) -> Step:
        """A channel message the agent decided to answer: skip, join a batch, or wait (the
        delay ranked by ``confidence``, the classifier's, and continuity with ``sender``)."""
        now = self.clock()
        covered = self._covered([msg_id])
        if covered:
            return Step("skip", reason=covered)
        for batch in self._batches.values():
            if (
                batch.channel == channel
                and batch.stage is Stage.WAITING
                and batch.window_open
                and now <= batch.settle_until
                and now < batch.due_at
            ):
                batch.messages.append(msg_id)
                batch.senders[msg_id] = sender
                self._batch_of[msg_id] = batch.key
                return Step("joined", batch)
        delay = self.delay_for(text, confidence, self.continuity(channel, sender))
        batch = Batch(
            msg_id,
            channel,
            [msg_id],
            now,
            now + delay,
            now + self.settings.settle_ms,
            senders={msg_id: sender},
            position=self._positions.get(msg_id),
        )
        self._batches[msg_id] = batch
        self._batch_of[msg_id] = msg_id
        return Step("wait", batch, delay_ms=delay)

    def cut_settle(self) -> list[Batch]:
        """A DM or a mention arrived: every open settle window closes (no more joiners)."""
        cut = [b for b in self._batches.values() if b.window_open]
        for batch in cut:
            batch.window_open = False
        return cut

    def due(self, key: str) -> Step:
        """The batch's delay is over: ``proceed`` (hand it to the runtime) or ``skip``."""
        batch = self._batches.get(key)
        if batch is None or batch.stage is not Stage.WAITING:
            return Step("skip", batch, reason=batch.reason if batch else "no longer tracked")
        batch.window_open = False
        covered = self._claimed_away(batch)
        if covered:
            return self._skip(batch, covered)
        batch.stage = Stage.READY
        return Step("proceed", batch)

    def begin(self, key: str) -> Step:
        """Inference is about to start: ``claim`` (with ``started_at``), ``proceed``, or
        ``skip`` if someone claimed it meanwhile."""
        batch = self._batches.get(key)
        if batch is None:
            return Step("skip", reason="no longer tracked")
        if batch.stage is Stage.WAITING:  # begun without waiting (the agent's choice)
            batch.window_open = False
            batch.stage = Stage.READY
        if batch.stage is not Stage.READY:
            return Step("skip", batch, reason=batch.reason or f"batch is {batch.stage.value}")
        covered = self._claimed_away(batch, batch.started_at)
        if covered:
            return self._skip(batch, covered)
        if batch.started_at is None:  # a suspended batch keeps its claim's started_at
            batch.started_at = int(self.clock())
        batch.stage = Stage.CLAIMED
        action: Action = "claim" if uses_claims(self.mode) else "proceed"
        return Step(action, batch, started_at=batch.started_at)

    def should_send(self, key: str) -> bool:
        """Whether the finished answer of the batch may be sent as far as the floor goes:
        not after a yield or a skip (answers seen meanwhile are :meth:`covering`'s)."""
        batch = self._batches.get(key)
        return batch is None or batch.stage not in (Stage.YIELDED, Stage.SKIPPED)

    def covering(self, key: str) -> list[Reply]:
        """The answers seen since the batch's messages arrived, oldest first, that its draft
        must be compared with before it is sent (CSMA modes only; ``[]``: send it)."""
        batch = self._batches.get(key)
        if batch is None or not uses_csma(self.mode):
            return []
        askers = set(batch.senders.values())
        found: dict[str, Reply] = {}
        for msg_id in batch.messages:
            seen = self._seen.get(msg_id)
            for reply in seen.replies if seen is not None else ():
                if reply.who != batch.senders.get(msg_id):
                    found.setdefault(reply.id, reply)
        if batch.position is not None:
            for at, reply in self._agents_said.get(batch.channel, ()):
                if at > batch.position and reply.who not in askers:
                    found.setdefault(reply.id, reply)
        return sorted(found.values(), key=lambda r: self._positions.get(r.id, -1))

    def suspend(self, key: str) -> bool:
        """A new message for another place interrupted the batch's turn: keep the batch (and
        its claim's ``started_at``) to begin again later. ``False`` if it was not running."""
        batch = self._batches.get(key)
        if batch is None or batch.stage is not Stage.CLAIMED:
            return False
        batch.stage = Stage.READY
        return True

    def finish(self, key: str) -> Batch | None:
        """The batch's turn ended (answered, skipped, yielded or abandoned): forget it."""
        batch = self._batches.pop(key, None)
        if batch is None:
            return None
        if batch.stage in (Stage.WAITING, Stage.READY, Stage.CLAIMED):
            batch.stage = Stage.DONE
        for msg_id in batch.messages:
            if self._batch_of.get(msg_id) == key:
                del self._batch_of[msg_id]
        return batch

    # ------------------------------------------------------------------ the channel's events

    def claim_seen(self, msg_id: str, who: str, started_at: int, *, human: bool = False) -> Step:
        """A relayed ``floor/responding-to`` (or a ``floor/claimed`` holder) for ``msg_id``."""
        if who == self.agent_id:
            return _NOTHING
        self._note(msg_id).claims[who] = (started_at, human)
        batch = self.batch_of(msg_id)
        if batch is None:
            return _NOTHING
        if batch.stage in (Stage.WAITING, Stage.READY):
            return self._lose(batch, msg_id, who, f"{who} claimed {msg_id}", skip=True)
        if batch.stage is Stage.CLAIMED and uses_claims(self.mode):
            assert batch.started_at is not None
            if human:
                return self._lose(batch, msg_id, who, f"{who} (a human) claimed {msg_id}")
            if (started_at, who) < (batch.started_at, self.agent_id):
                reason = f"{who} started earlier ({started_at} < {batch.started_at})"
                return self._lose(batch, msg_id, who, reason)
        return _NOTHING

    def yield_received(self, msg_id: str, winner: str) -> Step:
        """The gateway's ``floor/yield`` for ``msg_id``: ``winner`` holds the floor."""
        batch = self.batch_of(msg_id)
        if batch is None:
            return _NOTHING
        reason = f"the gateway gave {msg_id} to {winner}"
        if batch.stage is Stage.CLAIMED:
            return self._lose(batch, msg_id, winner, reason)
        if batch.stage in (Stage.WAITING, Stage.READY):
            return self._lose(batch, msg_id, winner, reason, skip=True)
        return _NOTHING

    def reply_seen(self, msg_id: str, reply: Reply) -> None:
        """A chat whose ``correlation_id`` names ``msg_id`` (an answer to it, or the asker
        adding to it): kept for :meth:`covering`."""
        if reply.who == self.agent_id:
            return
        replies = self._note(msg_id).replies
        if all(r.id != reply.id for r in replies):
            replies.append(reply)

    def chat_seen(self, channel: str, chat: Reply, *, from_agent: bool) -> None:
        """A chat in ``channel``, in arrival order (each once; a chat seen again, e.g. when the
        history is re-read, is ignored). ``from_agent``: another agent sent it, so it may
        answer the messages before it."""
        if chat.id in self._positions:
            return
        at = next(self._arrivals)
        self._positions[chat.id] = at
        while len(self._positions) > _SEEN_KEPT:
            self._positions.popitem(last=False)
        if from_agent and chat.who != self.agent_id:
            said = self._agents_said.setdefault(channel, deque(maxlen=_LATER_KEPT))
            said.append((at, chat))

    def spoke(
        self, channel: str | None, chat: Reply, replies_to: Sequence[str], *, agent: bool
    ) -> None:
        """A chat (the agent's own too): remember who wrote it; when an agent (``agent``)
        replies in a channel to someone's message, it is that asker's latest answerer there."""
        self._authors[chat.id] = chat.who
        self._authors.move_to_end(chat.id)
        while len(self._authors) > _SEEN_KEPT:
            self._authors.popitem(last=False)
        if channel is None or not agent or chat.who == SERVER_ID:
            return
        for msg_id in replies_to:
            asker = self._authors.get(msg_id)
            if asker is not None and asker not in (chat.who, SERVER_ID):
                key = (channel, asker)
                self._answerer[key] = (chat.who, self.clock())
                self._answerer.move_to_end(key)
                while len(self._answerer) > _SEEN_KEPT:
                    self._answerer.popitem(last=False)

    # ------------------------------------------------------------------ internals

    def _note(self, msg_id: str) -> Seen:
        seen = self._seen.get(msg_id)
        if seen is None:
            seen = self._seen[msg_id] = Seen()
            while len(self._seen) > _SEEN_KEPT:
                self._seen.popitem(last=False)
        return seen

    def _covered(self, messages: Sequence[str], started_at: int | None = None) -> str:
        """Why someone else holds the floor for these messages (``""`` when nobody does); with
        our own claim's ``started_at``, only a claim that outranks it counts."""
        if self.mode == "none":
            return ""
        for msg_id in messages:
            seen = self._seen.get(msg_id)
            if seen is not None and seen.claims:
                claims = seen.claims
                who = min(claims, key=lambda w: (not claims[w][1], claims[w], w))
                theirs, human = claims[who]
                if started_at is None or human or (theirs, who) < (started_at, self.agent_id):
                    return f"{who} claimed {msg_id}"
        return ""

    def _claimed_away(self, batch: Batch, started_at: int | None = None) -> str:
        """Give up the batch's messages someone else holds the floor for; why, when that
        leaves none (``""``: messages are left to answer)."""
        reasons = {m: self._covered([m], started_at) for m in batch.messages}
        taken = [m for m, why in reasons.items() if why]
        if len(taken) == len(batch.messages):
            return reasons[batch.messages[0]] if taken else ""
        for msg_id in taken:
            self._release(batch, msg_id)
        return ""

    def _lose(
        self, batch: Batch, msg_id: str, winner: str, reason: str, skip: bool = False
    ) -> Step:
        """``winner`` holds the floor on ``msg_id``: release it, or, if it is the batch's last
        message, skip (before inference) or yield (during) the whole batch."""
        if msg_id in batch.messages and len(batch.messages) > 1:
            self._release(batch, msg_id)
            return Step("release", batch, reason=reason, winner=winner, message=msg_id)
        return self._skip(batch, reason) if skip else self._yield(batch, winner, reason)

    def _release(self, batch: Batch, msg_id: str) -> None:
        batch.messages.remove(msg_id)
        batch.senders.pop(msg_id, None)
        batch.released.append(msg_id)
        if self._batch_of.get(msg_id) == batch.key:
            del self._batch_of[msg_id]

    def _skip(self, batch: Batch, reason: str) -> Step:
        batch.stage = Stage.SKIPPED
        batch.reason = reason
        return Step("skip", batch, reason=reason)

    def _yield(self, batch: Batch, winner: str, reason: str) -> Step:
        batch.stage = Stage.YIELDED
        batch.winner = winner
        batch.reason = reason
        return Step("yield", batch, reason=reason, winner=winner)


__all__ = [
    "COORDINATIONS",
    "HUMAN_POLICIES",
    "Action",
    "Batch",
    "Coordination",
    "FloorCoordinator",
    "FloorSettings",
    "HumanPolicy",
    "Reply",
    "Seen",
    "Stage",
    "Step",
    "exemption",
    "uses_claims",
    "uses_csma",
]
