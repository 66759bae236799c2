"""The I/O shell around an Agent's :class:`~hubbub.sdk.floor.FloorCoordinator`.

It decides which messages are exempt (DMs, mentions, humans, ``@server``), arms the CSMA
timers (the agent's own, or a ``@@cb`` CSMA check callback that re-reads the channel history
when it fires), sends ``floor/responding-to`` just before inference, turns relayed claims,
``floor/claimed`` and ``floor/yield`` into cancellations of the agent's turn, asks the
agent's model whether a finished draft adds anything to the answers seen meanwhile
(:mod:`hubbub.sdk.covered`), handles fired callbacks and wake-ups, and nudges an idle
self-prompting agent. The guide is ``docs/agent.md`` ("Good citizens: CSMA and floor
claims").
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from hubbub.errors import HubbubError, NotConnected
from hubbub.llm.base import ChatModel
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.ids import SERVER_ID
from hubbub.sdk.agent_config import AgentConfig
from hubbub.sdk.covered import covered_prompt, judge
from hubbub.sdk.csma import jittered
from hubbub.sdk.decide import ADDRESSED_RULES, Decision, chat_text
from hubbub.sdk.floor import FloorCoordinator, Reply, Stage, Step, exemption
from hubbub.sdk.participant import Participant
from hubbub.sdk.react import Turn
from hubbub.sdk.runtime import AgentRuntime
from hubbub.sdk.server_notes import (
    CallbackFired,
    CsmaCheck,
    Wake,
    csma_check,
    csma_payload,
)

log = logging.getLogger("hubbub.agent")

EventKind = Literal[
    "exempt",
    "wait",
    "join",
    "skip",
    "claim",
    "yield",
    "release",
    "discard",
    "keep",
    "suspend",
    "callback",
    "wake",
    "nudge",
]
NoteHook = Callable[[Any], Any]

SERVER_TIMER_GRACE_S: Final = 5.0
"""With ``csma_timer: server``: proceed on the agent's own timer this long after the CSMA
check callback was due, if it never came (dropped, refused)."""
NUDGE_NOTE: Final = "no new messages; continue your own work if any"
NUDGE_SENDER: Final = "system"
_EVENTS_KEPT: Final = 2000
_HISTORY_PAGE: Final = 200


def wall_ms() -> float:
    """Unix time in milliseconds (``started_at`` of claims)."""
    return time.time() * 1000


class FloorHost(Protocol):
    """The agent that floor control serves (:class:`~hubbub.sdk.agent.Agent` implements it):
    what floor control reads of it, and the turns it hands back to it."""

    @property
    def id(self) -> str:
        """The agent's participant id."""
        ...

    @property
    def config(self) -> AgentConfig:
        """The agent's settings (coordination, CSMA, nudges, prompts)."""
        ...

    @property
    def participant(self) -> Participant:
        """The agent's connection (claims, callbacks, history, others' kinds)."""
        ...

    @property
    def model(self) -> ChatModel:
        """The model that judges whether a draft is already covered."""
        ...

    @property
    def runtime(self) -> AgentRuntime:
        """The runtime whose current turn a yield cancels."""
        ...

    @property
    def current(self) -> Turn | None:
        """The turn being answered, if any."""
        ...

    def busy(self) -> bool:
        """Whether the agent is deciding, answering, or has messages waiting."""
        ...

    def notify_changed(self) -> None:
        """Something floor control did may satisfy what the agent's waiters wait for."""
        ...

    async def answer_now(self, env: Envelope, decision: Decision) -> None:
        """Answer ``env`` without floor control (it is exempt)."""
        ...

    async def answer_batch(self, key: str, envelopes: list[Envelope]) -> None:
        """Answer channel messages that floor control let through, as one turn."""
        ...

    async def answer_note(self, note: CallbackFired | Wake) -> None:
        """Answer a fired callback or a wake-up (a hook asked for it)."""
        ...

    async def answer_nudge(self, note: str) -> None:
        """Take a turn on an idle nudge (``note`` is its text)."""
        ...


@dataclass(frozen=True)
class FloorEvent:
    """Something floor control did, for logs, tests and benchmarks (``at``: perf_counter)."""

    kind: EventKind
    msg_id: str
    detail: str = ""
    at: float = 0.0
    winner: str | None = None
    cancelled: bool = False
    """For ``yield``: whether a running turn was cancelled."""


class AgentFloor:
    """Floor control, CSMA, settle window, server notes and idle nudges of one Agent."""

    def __init__(
        self,
        agent: FloorHost,
        *,
        clock: Callable[[], float] = wall_ms,
        rng: random.Random | None = None,
    ) -> None:
        self.agent = agent
        cfg = agent.config
        self.rng = rng or random.Random()
        self.coordinator = FloorCoordinator(
            cfg.participant_id, cfg.floor_settings(), clock=clock, rng=self.rng
        )
        self.events: deque[FloorEvent] = deque(maxlen=_EVENTS_KEPT)
        """What floor control did, oldest first."""
        self.asleep = False
        """Whether the agent put itself to sleep (until its wake-up arrives)."""
        self.callback_hooks: list[NoteHook] = []
        self.wake_hooks: list[NoteHook] = []
        self._waiting: dict[str, asyncio.TimerHandle | None] = {}
        self._envelopes: dict[str, Envelope] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._nudge: asyncio.TimerHandle | None = None
        self._closed = False
        p = agent.participant
        p.on("floor/responding-to", self._on_claim)
        p.on("floor/claimed", self._on_claimed)
        p.on("floor/yield", self._on_yield)

    @property
    def id(self) -> str:
        """The agent's id."""
        return self.agent.id

    def busy(self) -> bool:
        """Whether a batch still waits for its CSMA delay or its turn."""
        return bool(self._waiting) or bool(self.coordinator.pending())

    def running(self) -> bool:
        """Whether a task floor control started still runs (a CSMA check, a note's hooks, a
        nudge's turn)."""
        return bool(self._tasks)

    def close(self) -> None:
        """Cancel every timer (the agent stops)."""
        self._closed = True
        for handle in self._waiting.values():
            if handle is not None:
                handle.cancel()
        self._waiting.clear()
        self._envelopes.clear()
        if self._nudge is not None:
            self._nudge.cancel()
            self._nudge = None
        for task in list(self._tasks):
            task.cancel()

    # ------------------------------------------------------------------ routing answers

    def kind_of(self, participant: str) -> str | None:
        """The participant's ``kind`` (``human``/``agent``/``service``) as the gateway said."""
        entry = self.agent.participant.client.participants.get(participant)
        kind = entry.get("kind") if isinstance(entry, dict) else None
        return kind if isinstance(kind, str) else None

    def exemption(self, env: Envelope, decision: Decision) -> str | None:
        """Why ``env`` is answered at once, without CSMA delay or claim (``None``: it is not)."""
        return exemption(
            self.agent.config.coordination,
            channel=env.channel,
            rule=decision.rule,
            sender=env.from_,
            sender_kind=self.kind_of(env.from_),
            humans=self.agent.config.humans,
        )

    async def route(self, env: Envelope, decision: Decision) -> None:
        """A message the agent decided to answer: at once if exempt, else after CSMA."""
        reason = self.exemption(env, decision)
        if reason is not None:
            if env.channel is None or decision.rule in ADDRESSED_RULES:
                self.coordinator.cut_settle()
            self._event("exempt", env.id, reason)
            await self.agent.answer_now(env, decision)
            return
        assert env.channel is not None
        step = self.coordinator.open(
            env.id, env.channel, chat_text(env), env.from_, decision.confidence
        )
        if step.action == "skip":
            self._event("skip", env.id, step.reason)
            log.info("%s: skip %s: %s", self.id, env.id, step.reason)
            return
        self._envelopes[env.id] = env
        batch = step.batch
        assert batch is not None
        if step.action == "joined":
            self._event("join", env.id, f"joins the batch of {batch.key}")
            log.info("%s: message %s joins the turn for %s (settle window)", self.id, env.id,
                     batch.key)  # fmt: skip
            return
        self._event("wait", env.id, f"{step.delay_ms:.0f} ms")
        if step.delay_ms <= 0:
            self._waiting[batch.key] = None
            await self._due(batch.key)
            return
        log.info("%s: message %s: waiting %.0f ms before answering (CSMA)", self.id, env.id,
                 step.delay_ms)  # fmt: skip
        loop = asyncio.get_running_loop()
        delay_s = step.delay_ms / 1000
        self._waiting[batch.key] = None
        if self.agent.config.csma_timer == "server":
            payload = csma_payload(batch.key, env.channel, env.seq)
            try:
                await self.agent.participant.schedule_callback(delay_s, payload)
            except (HubbubError, NotConnected) as exc:
                log.warning("%s: could not schedule the CSMA check: %s", self.id, exc)
                delay_s = 0.0
            delay_s += SERVER_TIMER_GRACE_S if delay_s else 0.0
            if batch.key not in self._waiting:
                return  # skipped (or checked) meanwhile
        self._waiting[batch.key] = loop.call_later(delay_s, self._fire, batch.key)

    def _fire(self, key: str) -> None:
        self._spawn(self._due(key))

    async def _due(self, key: str) -> None:
        handle = self._waiting.pop(key, ...)
        if handle is ...:
            return  # already handled (skipped, or the other timer came first)
        if handle is not None:
            handle.cancel()
        step = self.coordinator.due(key)
        batch = step.batch
        if step.action != "proceed" or batch is None:
            self._forget(key, step.reason)
            self._event("skip", key, step.reason)
            log.info("%s: skip %s: %s", self.id, key, step.reason)
            return
        for msg_id in batch.released:  # someone else answers these
            self._envelopes.pop(msg_id, None)
        envelopes = [self._envelopes.pop(m) for m in batch.messages if m in self._envelopes]
        if not envelopes:
            self.coordinator.finish(key)
            return
        await self.agent.answer_batch(key, envelopes)

    def _forget(self, key: str, reason: str) -> None:
        """Drop a waiting batch (skipped)."""
        handle = self._waiting.pop(key, None)
        if handle is not None:
            handle.cancel()
        batch = self.coordinator.finish(key)
        for msg_id in batch.messages if batch else [key]:
            self._envelopes.pop(msg_id, None)

    # ------------------------------------------------------------------ turns

    async def begin(self, turn: Turn) -> bool:
        """Inference for ``turn`` is about to start: claim the floor (or find the batch
        covered and abandon the turn). ``False``: the turn must not run."""
        key = turn.floor_key
        assert key is not None
        step = self.coordinator.begin(key)
        batch = step.batch
        if step.action == "skip" or batch is None:
            self._abandon(turn, "skipped", step.reason)
            return False
        self._still_mine(turn)
        if step.action == "claim":
            assert step.started_at is not None
            client = self.agent.participant.client
            for msg_id in batch.messages:
                claim = Envelope(
                    kind="floor/responding-to",
                    channel=batch.channel,
                    payload={"msg_id": msg_id, "started_at": step.started_at},
                )
                if not self.agent.participant.can_send(claim):
                    log.warning("%s may not send floor/responding-to; answering unclaimed",
                                self.id)  # fmt: skip
                    break
                try:
                    await client.send(claim)
                except (HubbubError, NotConnected) as exc:
                    log.warning("%s: could not claim %s: %s", self.id, msg_id, exc)
            self._event("claim", key, f"started_at {step.started_at}")
            log.info("%s: claims %s (started_at %d)", self.id, ", ".join(batch.messages),
                     step.started_at)  # fmt: skip
        return batch.stage is Stage.CLAIMED  # False: the floor was lost while claiming

    def _still_mine(self, turn: Turn) -> None:
        """Drop from what ``turn`` answers the messages its batch released to others."""
        batch = self.coordinator.batch(turn.floor_key or "")
        if batch is not None and batch.released and turn.answers is not None:
            turn.answers[:] = [m for m in turn.answers if m not in batch.released]

    def _abandon(self, turn: Turn, outcome: str, reason: str) -> None:
        turn.floor_outcome = outcome
        turn.floor_reason = reason
        if outcome == "skipped":
            self._event("skip", turn.floor_key or turn.trigger.id, reason)
            log.info("%s: skip %s: %s", self.id, turn.trigger.id, reason)
        self.agent.runtime.cancel(self.id)

    async def may_send(self, turn: Turn, draft: str) -> bool:
        """Whether ``draft``, the finished answer of ``turn``, may be sent: not after a yield,
        and not when the model judges that answers seen meanwhile already made its point
        (document 001); otherwise it is discarded."""
        key = turn.floor_key
        if key is None:
            return True
        self._still_mine(turn)
        replies = self.coordinator.covering(key)
        if replies and self.coordinator.should_send(key):
            cfg = self.agent.config
            prompt = covered_prompt(
                cfg.prompts.covered, name=cfg.name, question=turn.input, draft=draft,
                replies=replies,
            )  # fmt: skip
            verdict = await judge(self.agent.model, prompt)
            who = ", ".join(dict.fromkeys(r.who for r in replies))
            if verdict.adds_new:
                self._event("keep", key, f"{who} answered meanwhile; mine adds: {verdict.reason}")
                log.info("%s: %s answered %s meanwhile, but the draft adds something: %s",
                         self.id, who, turn.trigger.id, verdict.reason)  # fmt: skip
            else:
                return self._discard(turn, f"{who} already made the same point: {verdict.reason}")
        if self.coordinator.should_send(key):
            return True
        batch = self.coordinator.batch(key)
        return self._discard(turn, batch.reason if batch is not None else "lost the floor")

    def _discard(self, turn: Turn, reason: str) -> bool:
        turn.floor_outcome, turn.floor_reason = "discarded", reason
        self._event("discard", turn.floor_key or turn.trigger.id, reason)
        log.info("%s: discards its answer to %s: %s", self.id, turn.trigger.id, reason)
        return False

    def suspend(self, turn: Turn, by: str) -> bool:
        """``turn`` was interrupted by message ``by`` for another place: keep its batch (and
        claim) to answer it later. ``False``: nothing to keep (finish it instead)."""
        key = turn.floor_key
        if key is None:
            return True  # not under floor control: nothing to keep but the message
        if not self.coordinator.suspend(key):
            return False
        self._event("suspend", key, f"interrupted by {by}; answered after it")
        log.info("%s: %s waits until %s is answered", self.id, key, by)
        return True

    def finished(self, turn: Turn) -> None:
        """``turn`` ended (answered, abandoned, superseded)."""
        if turn.floor_key is not None:
            self.coordinator.finish(turn.floor_key)
        self.activity()
        self.agent.notify_changed()

    # ------------------------------------------------------------------ the channel

    def observe(self, env: Envelope) -> None:
        """A chat in a channel or DM, in arrival order: an answer that waiting or running
        batches must be compared with, perhaps (:meth:`FloorCoordinator.covering`)."""
        self.activity()
        self._note_chat(env)

    def _note_chat(self, env: Envelope) -> None:
        agent = env.from_ != SERVER_ID and self.kind_of(env.from_) != "human"
        chat = Reply(env.id, env.from_, chat_text(env))
        self.coordinator.spoke(env.channel, chat, env.correlation_ids(), agent=agent)
        if env.from_ == self.id:
            return
        for cid in env.correlation_ids():
            self.coordinator.reply_seen(cid, chat)
        if env.channel is not None:
            # an agent's chat that names what it answers (correlation_id) answers only that;
            # an uncorrelated one (agentchat clients) may answer any earlier message
            uncorrelated = not env.correlation_ids()
            self.coordinator.chat_seen(env.channel, chat, from_agent=agent and uncorrelated)

    def _on_claim(self, env: Envelope) -> None:
        at = time.perf_counter()
        msg_id, started_at = env.payload.get("msg_id"), env.payload.get("started_at")
        if not isinstance(msg_id, str) or not isinstance(started_at, int):
            return
        human = self.kind_of(env.from_) == "human"
        self._apply(self.coordinator.claim_seen(msg_id, env.from_, started_at, human=human), at)

    def _on_claimed(self, env: Envelope) -> None:
        at = time.perf_counter()
        p = env.payload
        msg_id, holder, started_at = p.get("msg_id"), p.get("holder"), p.get("started_at")
        if not (isinstance(msg_id, str) and isinstance(holder, str)):
            return
        if not isinstance(started_at, int):
            return
        human = self.kind_of(holder) == "human"
        self._apply(self.coordinator.claim_seen(msg_id, holder, started_at, human=human), at)

    def _on_yield(self, env: Envelope) -> None:
        at = time.perf_counter()
        msg_id, winner = env.payload.get("msg_id"), env.payload.get("winner")
        if not isinstance(msg_id, str):
            return
        winner = winner if isinstance(winner, str) else "someone"
        self._apply(self.coordinator.yield_received(msg_id, winner), at)

    def _apply(self, step: Step, at: float | None = None) -> None:
        batch = step.batch
        if batch is None or step.action not in ("skip", "yield", "release"):
            return
        at = time.perf_counter() if at is None else at
        if step.action == "release":
            assert step.message is not None
            self._envelopes.pop(step.message, None)
            self._event("release", step.message, step.reason, at, step.winner)
            log.info("%s: leaves %s to %s (%s); answers the rest of %s", self.id, step.message,
                     step.winner, step.reason, batch.key)  # fmt: skip
            return
        if step.action == "skip":
            if batch.key in self._waiting:
                self._forget(batch.key, step.reason)
                self._event("skip", batch.key, step.reason, at)
                log.info("%s: skip %s: %s", self.id, batch.key, step.reason)
            # a batch already handed to the runtime is skipped when its turn begins
            return
        turn = self.agent.current
        cancelled = False
        if turn is not None and turn.floor_key == batch.key:
            turn.floor_outcome, turn.floor_reason = "yielded", step.reason
            turn.winner = step.winner
            cancelled = self.agent.runtime.cancel(self.id)
        self._event("yield", batch.key, step.reason, at, step.winner, cancelled)
        log.info("%s: yields %s to %s: %s", self.id, batch.key, step.winner, step.reason)

    # ------------------------------------------------------------------ server notes

    def note(self, note: CallbackFired | Wake) -> None:
        """A fired callback or a wake-up for this agent (never an ordinary answer turn)."""
        if isinstance(note, CallbackFired) and note.origin not in ("", self.id):
            return  # a channel callback of another member
        self.activity()
        if isinstance(note, Wake):
            self.asleep = False
            self._event("wake", note.envelope.id, f"{note.buffered} buffered")
            log.info("%s: woke up (%d buffered messages follow)", self.id, note.buffered)
            self._spawn(self._hooks(self.wake_hooks, note))
            return
        check = csma_check(note)
        if check is not None and check.reply_to in self._waiting:
            self._spawn(self._check(check))
            return
        self._event("callback", note.cb_id, note.payload)
        log.info("%s: callback %s fired: %s", self.id, note.cb_id, note.payload[:120])
        self._spawn(self._hooks(self.callback_hooks, note))

    async def _check(self, check: CsmaCheck) -> None:
        """A CSMA check callback fired: re-read the channel since the message, then decide."""
        batch = self.coordinator.batch(check.reply_to)
        channel = check.channel or (batch.channel if batch else None)
        if batch is not None and channel is not None and check.seq is not None:
            try:
                since = await self.agent.participant.history(
                    channel, after_seq=check.seq, limit=_HISTORY_PAGE
                )
            except (HubbubError, NotConnected) as exc:
                log.info("%s: could not re-read %s: %s", self.id, channel, exc)
                since = []
            for env in since:
                if env.kind == "chat":
                    self._note_chat(env)
        await self._due(check.reply_to)

    async def _hooks(self, hooks: list[NoteHook], note: CallbackFired | Wake) -> None:
        answer = False
        for hook in list(hooks):
            try:
                result = hook(note)
                if inspect.isawaitable(result):
                    result = await result
            except Exception:
                log.exception("%s: a %s hook failed", self.id, type(note).__name__)
                continue
            answer = answer or result is True
        if answer:
            await self.agent.answer_note(note)

    # ------------------------------------------------------------------ idle nudges

    def activity(self) -> None:
        """Something happened: the idle nudge starts over."""
        period = self.agent.config.idle_nudge_s
        if period is None or self._closed:
            return
        if self._nudge is not None:
            self._nudge.cancel()
        delay = jittered(period, self.agent.config.jitter_percent, self.rng)
        self._nudge = asyncio.get_running_loop().call_later(delay, self._nudge_due)

    def _nudge_due(self) -> None:
        self._nudge = None
        agent = self.agent
        if self._closed:
            return
        if self.asleep or self.busy() or agent.busy():
            self.activity()
            return
        self._event("nudge", "", NUDGE_NOTE)
        log.info("%s: idle for a while: nudging itself", self.id)
        self._spawn(agent.answer_nudge(NUDGE_NOTE))
        self.activity()

    # ------------------------------------------------------------------ helpers

    def _event(
        self,
        kind: EventKind,
        msg_id: str,
        detail: str = "",
        at: float | None = None,
        winner: str | None = None,
        cancelled: bool = False,
    ) -> None:
        when = time.perf_counter() if at is None else at
        self.events.append(FloorEvent(kind, msg_id, detail, when, winner, cancelled))
        self.agent.notify_changed()

    def _spawn(self, coro: Any) -> None:
        if self._closed:
            with contextlib.suppress(AttributeError):
                coro.close()
            return
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: floor control failed: %s", self.id, task.exception())
        self.agent.notify_changed()


__all__ = ["NUDGE_NOTE", "AgentFloor", "FloorEvent", "FloorHost", "wall_ms"]
