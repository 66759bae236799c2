"""Layer 3 of the SDK: :class:`Agent`, an LLM agent built on a Participant (composition).

```python
async with Agent(participant_id="assistant", gateway="ws://127.0.0.1:8080/ws") as agent:
    await agent.run_forever()
```

The agent discovers other participants' tools (:mod:`hubbub.sdk.discovery`), decides which
chat messages to answer (:mod:`hubbub.sdk.decide`), answers them with a ReAct loop
(:mod:`hubbub.sdk.react`) that calls tools through ``mcp_request`` — so a tool the agent may
not call directly becomes a proposal a human can approve — and reports its reasoning as
``reasoning/start|thought|conclusion`` events (``reasoning/cancel`` when a turn is abandoned).
Its turns run in an :class:`~hubbub.sdk.runtime.AgentRuntime` (its own, or one shared by many
agents): one processing sequence at a time; a message to answer that arrives during a
tool-calling loop interrupts it, one that arrives after a tool call completed waits (FIFO), and
one that finds the inbox full is refused with a DM to its sender. The guide is
``docs/agent.md``.

Its parts: :class:`~hubbub.sdk.tool_catalog.ToolCatalog` (the tools its model may call, and
running a call), :class:`~hubbub.sdk.reasoning.ReasoningReport` (the ``reasoning/*`` events),
:class:`~hubbub.sdk.turns.TurnInbox` (what each message handed to the runtime answers),
:class:`~hubbub.sdk.agent_floor.AgentFloor` (floor control) and the runtime. The agent wires
them and holds the turn in progress.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, TypeVar

from hubbub.errors import (
    HubbubError,
    NotConnected,
    RequestTimeout,
)
from hubbub.llm.base import ChatModel, Completion, Message, ToolCall, ToolSpec
from hubbub.llm.factory import create_model
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.ids import SERVER_ID
from hubbub.protocol.markers import SleepMode
from hubbub.protocol.transcript import said
from hubbub.sdk.agent_config import AgentConfig, floor_env
from hubbub.sdk.agent_floor import NUDGE_SENDER, AgentFloor
from hubbub.sdk.decide import Decision, ResponsePolicy, chat_text, where
from hubbub.sdk.discovery import DiscoveredTool, Discovery, ToolDirectory
from hubbub.sdk.hooks import Unsubscribe, register
from hubbub.sdk.participant import Participant
from hubbub.sdk.react import ReActLoop, Thought, Turn
from hubbub.sdk.reasoning import ReasoningReport
from hubbub.sdk.runtime import Aborted, AgentMessage, AgentRuntime, QueueFull
from hubbub.sdk.server_notes import CallbackFired, Wake, server_note
from hubbub.sdk.states import State
from hubbub.sdk.tool_catalog import ToolCatalog, short
from hubbub.sdk.tools import Resource, Tool
from hubbub.sdk.turns import TurnInbox

log = logging.getLogger("hubbub.agent")

F = TypeVar("F", bound=Callable[..., Any])

_DECISIONS_KEPT: Final = 500
CLASSIFY_CONCURRENCY: Final = 4
"""Classifications of unaddressed messages that run at once (the rest wait their turn)."""


@dataclass(frozen=True)
class DecisionRecord:
    """A chat message the agent saw and what it decided about it."""

    envelope: Envelope
    decision: Decision


class Agent:
    """An autonomous participant: tool discovery, when-to-answer, ReAct loop, reasoning events.

    Construct with keyword options or an :class:`~hubbub.sdk.AgentConfig` (see
    ``AgentConfig.load`` for files and the environment); ``model`` overrides the provider the
    config picks; ``runtime`` hosts the agent's turns in a shared
    :class:`~hubbub.sdk.runtime.AgentRuntime` (default: a private one with ``queue_limit``).
    ``agent.participant`` is the :class:`~hubbub.sdk.Participant` it speaks through;
    ``@agent.tool`` offers the agent's own tools (to others and to its model).
    """

    def __init__(
        self,
        config: AgentConfig | None = None,
        /,
        *,
        model: ChatModel | None = None,
        runtime: AgentRuntime | None = None,
        rng: random.Random | None = None,
        **fields: Any,
    ) -> None:
        if config is None:  # the documents' AGENTCHAT_* knobs apply unless a keyword is given
            fields = {**floor_env(os.environ), **fields}
            config = AgentConfig.from_mapping(fields, "Agent()", expand=False)
        elif fields:
            config = config.replace(**fields)
        self.config = config
        self.participant = Participant(config.participant_options())
        self.model = model or create_model(config.model_settings())
        self.tools = ToolDirectory()
        """Tools discovered on other participants."""
        self.catalog = ToolCatalog(self.participant, self.tools, config)
        """Every tool the model may call (discovered and own), and running a call."""
        self.reasoning = ReasoningReport(self.participant)
        """Sends this agent's ``reasoning/*`` events."""
        self.discovery = Discovery(
            self.participant,
            self.tools,
            timeout=config.discovery_timeout,
            retries=config.discovery_retries,
            retry_delay=config.discovery_retry_delay,
            on_change=self._tools_changed,
        )
        self.policy = ResponsePolicy(config, config.participant_id)
        self.loop = ReActLoop(
            self.model,
            self,
            name=config.name,
            system_prompt=config.system_prompt,
            prompts=config.prompts,
            max_iterations=config.max_iterations,
            reasoning_enabled=config.reasoning_enabled,
        )
        """Builds each model call's prompts (system, ``reason``/``act``/``respond``)."""
        self.runtime = runtime or AgentRuntime(max_queue=config.queue_limit)
        """Runs the agent's turns: one at a time, interrupted or queued by new messages."""
        self.runtime.register(
            config.participant_id,
            self._call_model,
            self._call_tool,
            waiting=lambda: bool(self.participant.requests.proposals()),
            on_tool_result=self._observed,
            on_input=self._begin_turn,
            on_reply=self._answered,
            on_error=self._turn_failed,
            max_rounds=config.max_iterations,
        )
        self.decisions: deque[DecisionRecord] = deque(maxlen=_DECISIONS_KEPT)
        """Recent decisions about chat messages, oldest first."""
        self.current: Turn | None = None
        """The turn being answered, if any."""
        self.inbox = TurnInbox()
        """What each message handed to the runtime answers, until its turn begins."""
        self._deciding: set[asyncio.Task[Decision]] = set()
        self._last_decision: asyncio.Task[Decision] | None = None
        self._classifying = asyncio.Semaphore(CLASSIFY_CONCURRENCY)
        self._changed = asyncio.Event()
        self._waiters: list[tuple[Callable[[DecisionRecord], bool], asyncio.Future[Any]]] = []
        self._stopped = False
        self.floor = AgentFloor(self, rng=rng)
        """Floor control: CSMA delays, claims and yields, server notes, idle nudges
        (``agent.floor.events`` logs what it did; ``agent.floor.coordinator`` decides)."""
        self.participant.on("chat", self._on_chat)
        self.participant.on("reasoning/cancel", self._on_reasoning_cancel)

    # ------------------------------------------------------------------ lifecycle

    @property
    def id(self) -> str:
        """The agent's participant id."""
        return self.participant.id

    async def connect(self) -> None:
        """Connect, start discovering tools, and start answering messages."""
        if self._stopped:
            raise NotConnected("this agent was stopped; create a new Agent to connect again")
        log.info(
            "%s: starting with model %s (reasoning %s, auto_respond %s)",
            self.id,
            self.model.describe(),
            "on" if self.config.reasoning_enabled else "off",
            "on" if self.config.auto_respond else "off",
        )
        try:
            await self.participant.connect()
        except BaseException:
            await self._stop_turns()
            raise
        self.floor.activity()

    async def disconnect(self) -> None:
        """Abandon the current turn (``reasoning/cancel``), stop discovery, disconnect.

        Idempotent; a stopped agent cannot be started again (make a new one)."""
        if self._stopped:
            return
        self._stopped = True
        self.floor.close()
        await self._stop_turns()
        await self.discovery.close()
        await self.participant.disconnect()
        await self.model.aclose()
        for _, future in self._waiters:
            future.cancel()

    async def serve_forever(self) -> None:
        """Connect (if needed) and serve until disconnected or the connection is lost for
        good; disconnects at the end."""
        if not self.participant.client.is_ready:
            await self.connect()
        try:
            await self.participant.serve_forever()
        finally:
            await self.disconnect()

    async def start(self) -> None:
        """:meth:`connect` under document 003's name."""
        await self.connect()

    async def stop(self) -> None:
        """:meth:`disconnect` under document 003's name."""
        await self.disconnect()

    async def run_forever(self) -> None:
        """:meth:`serve_forever` under its earlier name."""
        await self.serve_forever()

    @property
    def state(self) -> State:
        """The connection state (see :mod:`hubbub.sdk.states`)."""
        return self.participant.state

    @property
    def is_ready(self) -> bool:
        """Whether the agent is connected and joined, and may send."""
        return self.participant.is_ready

    def on_ready(self, hook: F) -> Unsubscribe[F]:
        """Run ``hook`` once the first connection is ready (see :meth:`Participant.on_ready`)."""
        return self.participant.on_ready(hook)

    def on_shutdown(self, hook: F) -> Unsubscribe[F]:
        """Run ``hook`` at :meth:`disconnect`, while still connected."""
        return self.participant.on_shutdown(hook)

    async def _stop_turns(self) -> None:
        """Stop deciding, leave the runtime (abandoning the turn: ``reasoning/cancel``)."""
        for task in list(self._deciding):
            task.cancel()
        await asyncio.gather(*self._deciding, return_exceptions=True)
        await self.runtime.unregister(self.id)
        turn, self.current = self.current, None
        if turn is not None:
            await self.reasoning.cancel(turn, "cancelled")
        self.inbox.clear()

    async def __aenter__(self) -> Agent:
        """Connect."""
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Disconnect."""
        await self.disconnect()

    def busy(self) -> bool:
        """Whether the agent is deciding, answering, or has messages waiting for a turn."""
        aid = self.id
        return (
            bool(self._deciding)
            or self.runtime.is_processing(aid)
            or bool(self.runtime.bus.size(aid))
            or self.floor.busy()
        )

    @property
    def idle(self) -> bool:
        """Whether the agent has nothing in progress: not :meth:`busy`, no floor-control task
        running (a CSMA check, a callback or wake-up hook) and every message it sent that the
        gateway stores acknowledged. The idle-nudge timer is not work in progress."""
        return (
            not self.busy() and not self.floor.running() and not len(self.participant.client.outbox)
        )

    async def until_idle(self, timeout: float = 5.0) -> None:  # noqa: ASYNC109
        """Return once :attr:`idle` holds; raise :class:`~hubbub.errors.RequestTimeout` after
        ``timeout``."""
        await self.wait_until(lambda: self.idle, timeout)

    # ------------------------------------------------------------------ server markers

    async def schedule_callback(
        self, delay: float, payload: str = "", channel: str | None = None
    ) -> Envelope:
        """``@@cb``: have the gateway send ``payload`` back in ``delay`` s (see
        :meth:`Participant.schedule_callback`); it reaches the :meth:`on_callback` hooks."""
        return await self.participant.schedule_callback(delay, payload, channel)

    async def sleep(
        self, seconds: float, mode: SleepMode = "default", channel: str | None = None
    ) -> Envelope:
        """``@@sleep``: sleep for ``seconds`` (no idle nudges meanwhile); the wake-up reaches
        the :meth:`on_wake` hooks and the buffered messages that follow are answered as usual."""
        self.floor.asleep = True
        return await self.participant.sleep(seconds, mode, channel)

    def on_callback(self, hook: F) -> Unsubscribe[F]:
        """``hook(CallbackFired)`` for each fired callback (decorator); returning ``True``
        makes the agent answer it with a turn that reads ``@@cb-fire@@<payload>``. Returns an
        :class:`~hubbub.sdk.hooks.Unsubscribe` that removes it."""
        return register(self.floor.callback_hooks, hook)

    def on_wake(self, hook: F) -> Unsubscribe[F]:
        """``hook(Wake)`` when the agent wakes up (decorator); ``True`` asks for a turn.
        Returns an :class:`~hubbub.sdk.hooks.Unsubscribe` that removes it."""
        return register(self.floor.wake_hooks, hook)

    # ------------------------------------------------------------------ own tools

    def tool(self, fn: F | None = None, /, **options: Any) -> Any:
        """Offer a typed function as a tool of the agent (``@agent.tool``), as a Participant."""
        if fn is not None:
            return self.participant.tool(fn, **options)
        return self.participant.tool(**options)

    def add_tool(self, tool: Tool) -> None:
        """Offer ``tool`` (document 003 ``addTool``): to other participants through MCP, and
        to the agent's own model as ``<agent id>/<tool>``."""
        self.participant.register_tool(tool)

    def register_tool(self, tool: Tool) -> None:
        """:meth:`add_tool` under the Participant's name."""
        self.add_tool(tool)

    def add_resource(self, resource: Resource) -> None:
        """Offer ``resource`` to other participants (document 003 ``addResource``)."""
        self.participant.register_resource(resource)

    # ------------------------------------------------------------------ tools for the model

    def prepare_llm_tools(self) -> list[ToolSpec]:
        """Every tool the model may call: discovered ones and the agent's own, with
        provider-safe names (``participant__tool``) mapping back to ``participant/tool``."""
        return self.specs()

    def specs(self) -> list[ToolSpec]:
        """The tools offered to the model now (see :meth:`prepare_llm_tools`)."""
        return self.catalog.specs()

    def label(self, provider_name: str) -> str:
        """``participant/tool`` for a provider-safe name (the name itself if unknown)."""
        return self.catalog.label(provider_name)

    def tool_name(self, name: str) -> str:
        """The provider-safe name of ``participant/tool`` (a provider-safe name, which never
        holds a ``/``, is returned as it is)."""
        return self.catalog.tool_name(name)

    async def execute_llm_tool_call(self, name: str, arguments: dict[str, Any]) -> Message:
        """Run one tool call as the ReAct loop does (document 003 ``executeLLMToolCall``):
        ``name`` is ``participant/tool`` (``calculator/add``, or ``<agent id>/<tool>`` for its
        own) or the provider-safe name the model saw. Returns the tool result message
        (``content``, ``is_error``); a failing or unknown tool is an error result, not an
        exception."""
        turn = Turn(Envelope(kind="chat"), "")
        return await self.run(turn, ToolCall(f"manual-{name}", self.tool_name(name), arguments))

    async def run(self, turn: Turn, call: ToolCall) -> Message:
        """Execute one of the model's tool calls through ``mcp_request``; never raises for a
        failing tool (the model reads the failure as the call's result)."""
        return await self.catalog.run(call)

    # ------------------------------------------------------------------ receiving

    def _on_chat(self, env: Envelope) -> None:
        note = server_note(env)
        if note is not None:
            self.floor.note(note)
            return
        self.policy.observe(env)
        self.floor.observe(env)
        if env.from_ == self.id:
            self._record(env, Decision(False, "own_message", "my own message"))
            return
        # addressed messages are decided on arrival, never behind a model call; the rest are
        # classified concurrently (at most CLASSIFY_CONCURRENCY at once) and handed on in order
        loop = asyncio.get_running_loop()
        decision = self.policy.quick(env, loop.time(), self.participant.client.roster.view())
        if decision is not None and not decision.respond:
            self._record(env, decision)
            return
        if decision is not None:
            task = loop.create_task(self._route(env, decision), name=f"hubbub-decide-{env.id}")
        else:
            task = loop.create_task(
                self._classify_in_order(env, self._last_decision), name=f"hubbub-decide-{env.id}"
            )
            self._last_decision = task
        self._deciding.add(task)
        task.add_done_callback(self._decided)

    def _decided(self, task: asyncio.Task[Decision]) -> None:
        self._deciding.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: failed to handle a message: %s", self.id, task.exception())
        self.notify_changed()

    async def _route(self, env: Envelope, decision: Decision) -> Decision:
        """Record a decision and, to answer, hand the message to floor control."""
        self._record(env, decision)
        if decision.respond:
            await self.floor.route(env, decision)
        return decision

    async def _classify_in_order(
        self, env: Envelope, previous: asyncio.Task[Decision] | None
    ) -> Decision:
        """Classify ``env`` (alongside others, bounded), then hand it on after the message
        classified before it (unaddressed messages keep their arrival order)."""
        async with self._classifying:
            decision = await self.policy.classify(self.model, env, self.tools.qualified_names())
        if previous is not None:
            await asyncio.wait([previous])
        return await self._route(env, decision)

    async def handle(self, env: Envelope) -> Decision:
        """Decide about one chat message and, to answer it, hand it to the runtime (it starts
        a turn, interrupts the current one, waits in the inbox or is refused when it is full)."""
        now = asyncio.get_running_loop().time()
        decision = self.policy.quick(env, now, self.participant.client.roster.view())
        if decision is None:
            decision = await self.policy.classify(self.model, env, self.tools.qualified_names())
        self._record(env, decision)
        if decision.respond:
            await self.floor.route(env, decision)
        return decision

    # the turns that floor control (self.floor, through agent_floor.FloorHost) hands back

    async def answer_now(self, env: Envelope, decision: Decision) -> None:
        """Answer ``env`` without floor control (exempt); a reply to the agent's message
        comes with the conversation it replies to."""
        self.policy.answered(env, decision.rule, asyncio.get_running_loop().time())
        context = self.policy.reply_context(env) if decision.rule == "reply" else None
        await self._deliver(env, context)

    async def answer_batch(self, key: str, envelopes: list[Envelope]) -> None:
        """Answer channel messages that floor control let through, as one turn."""
        now = asyncio.get_running_loop().time()  # one answer; none of them was addressed to me
        self.policy.answered(envelopes[0], "classifier", now)
        last = envelopes[-1]
        content = "\n".join(said(e.from_, chat_text(e)) for e in envelopes)
        answers = [e.id for e in envelopes]
        if not await self._deliver(last, content, answers=answers, floor_key=key):
            self.floor.coordinator.finish(key)

    async def answer_note(self, note: CallbackFired | Wake) -> None:
        """Answer a fired callback or a wake-up (a hook asked for it): a turn reads its text."""
        env = note.envelope
        await self._deliver(env, said("server", chat_text(env)), answers=[])

    async def answer_nudge(self, note: str) -> None:
        """Take a turn on an idle nudge, a short system note (its answer goes to the channel)."""
        message = AgentMessage(self.id, said(NUDGE_SENDER, note), sender=NUDGE_SENDER)
        trigger = Envelope(kind="chat", id=message.id, payload={"text": note})
        await self._deliver(trigger, message.content, message, answers=[])

    async def _deliver(
        self,
        env: Envelope,
        content: str | None = None,
        message: AgentMessage | None = None,
        *,
        answers: list[str] | None = None,
        floor_key: str | None = None,
    ) -> bool:
        """Hand a message to the runtime; ``False`` if the inbox was full (sender told)."""
        if message is None:
            text = content if content is not None else said(env.from_, chat_text(env))
            message = AgentMessage(self.id, text, sender=env.from_, id=env.id)
        self.inbox.expect(message.id, env, answers, floor_key)
        try:
            delivery = self.runtime.send(message)
        except QueueFull as exc:
            self.inbox.forget(message.id)
            await self._refuse(env, exc)
            return False
        log.info("%s: message %s %s", self.id, message.id, delivery.value)
        return True

    async def _refuse(self, env: Envelope, exc: QueueFull) -> None:
        """Tell the sender, by DM, that the message was rejected (the inbox is full)."""
        if env.from_ in (SERVER_ID, ""):
            log.warning("%s: inbox full; dropped %s", self.id, env.id)
            return
        text = (
            f"Sorry, I cannot take your message now: my inbox is full ({exc.limit} waiting). "
            "Please send it again later."
        )
        reply = Envelope(kind="chat", to=[env.from_], correlation_id=[env.id],
                         payload={"text": text, "error": "queue_full"})  # fmt: skip
        if not self.participant.can_send(reply):
            log.error("%s: rejected message %s and may not tell %s", self.id, env.id, env.from_)
            return
        with contextlib.suppress(HubbubError):
            await self.participant.client.send(reply)

    def _on_reasoning_cancel(self, env: Envelope) -> None:
        turn = self.current
        if env.from_ == self.id or turn is None:
            return
        if turn.reasoning_id is None or env.context != turn.reasoning_id:
            return
        log.info("%s: %s cancelled the turn answering %s", self.id, env.from_, turn.trigger.id)
        turn.cancelled_by = env.from_
        if not self.runtime.cancel(self.id):
            turn.cancelled_by = None

    def _record(self, env: Envelope, decision: Decision) -> None:
        record = DecisionRecord(env, decision)
        self.decisions.append(record)
        level = logging.DEBUG if decision.rule == "own_message" else logging.INFO
        log.log(
            level,
            "%s: message %s from %s in %s → %s",
            self.id,
            env.id,
            env.from_,
            where(env, self.id),
            decision.describe(),
        )
        for match, future in list(self._waiters):
            if not future.done() and match(record):
                future.set_result(record)
        self.notify_changed()

    # ------------------------------------------------------------------ answering

    @property
    def history(self) -> list[Message]:
        """The agent's conversation (a copy), as the runtime holds it."""
        return self.runtime.conversations.history(self.id)

    async def _begin_turn(self, message: AgentMessage) -> None:
        """A message became the latest content: a new turn (the one it supersedes is
        cancelled with ``reasoning/cancel``, reason ``interrupted``)."""
        previous = self.current
        turn = self.inbox.begin(message)
        if previous is not None:
            self._carry_over(previous, turn)
            note = f"interrupted by message {message.id}"
            await self.reasoning.cancel(previous, "interrupted", note)
        self.current = turn
        self._trim()
        if turn.floor_key is not None and not await self.floor.begin(turn):
            return  # covered by someone else, or the floor was lost: the runtime aborts it
        if self.config.reasoning_enabled:
            turn.reasoning_id = await self.reasoning.start(turn)

    def _carry_over(self, previous: Turn, turn: Turn) -> None:
        """Leave no message unanswered when ``turn`` interrupts ``previous``: an answer to the
        same place answers both (it correlates to both); for another place, the interrupted
        message is answered again after the new one (with its floor claim kept)."""
        if previous.floor_outcome is not None or not previous.trigger.from_:
            self.floor.finished(previous)  # stopped by floor control, or an idle nudge
            return
        if self.reasoning.route(previous.trigger) == self.reasoning.route(turn.trigger):
            turn.answers = list(dict.fromkeys(previous.correlation() + turn.correlation()))
            self.floor.finished(previous)
            return
        if not self.floor.suspend(previous, turn.trigger.id) or not self._answer_later(previous):
            self.floor.finished(previous)

    def _answer_later(self, turn: Turn) -> bool:
        """Queue ``turn``'s message again behind the current one; ``False`` if the inbox is
        full."""
        again = AgentMessage(self.id, turn.input, sender=turn.trigger.from_)
        self.inbox.expect(again.id, turn.trigger, turn.correlation(), turn.floor_key)
        try:
            self.runtime.send(again)  # queued: a turn that is starting cannot be interrupted
        except QueueFull:
            self.inbox.forget(again.id)
            log.warning("%s: inbox full; %s stays unanswered", self.id, turn.trigger.id)
            return False
        log.info("%s: will answer %s after the message that interrupted it", self.id,
                 turn.trigger.id)  # fmt: skip
        return True

    def _trim(self) -> None:
        """Keep at most ``history_limit`` messages, starting at a user message."""
        history = self.history
        if len(history) <= self.config.history_limit:
            return
        kept = history[-self.config.history_limit :]
        while kept and kept[0].role != "user":
            kept.pop(0)
        self.runtime.conversations.replace(self.id, kept)

    def _turn(self) -> Turn:
        if self.current is None:
            raise RuntimeError(f"{self.id}: no turn in progress")
        return self.current

    # ------------------------------------------------------------------ the ReAct steps

    async def reason(self, turn: Turn, history: Sequence[Message]) -> Thought:
        """ReAct *Reason* (document 003 ``reason()``): one model call over ``history`` with the
        tools offered, as a :class:`~hubbub.sdk.react.Thought`.

        Override it to change how the agent thinks (``turn.thoughts`` are this turn's earlier
        thoughts, ``turn.final`` says the answer is due): the thought's calls are then acted
        on (:meth:`act`) and the loop goes on; a thought without calls is the answer. A call
        may name its tool ``participant/tool``."""
        specs = self.specs()
        request = self.loop.request(turn, history, specs, final=turn.final)
        return Thought.of(await self.loop.call_model(request, specs))

    async def act(self, turn: Turn, call: ToolCall) -> Message:
        """ReAct *Act* (document 003 ``act()``): execute one tool call of the current thought
        and return its result, the observation the model reads next
        (``Message.tool_result(call, text, is_error=...)``).

        Override it to change how actions run (a cache, a sandbox, a dry run); return an error
        result rather than raise for a failing tool. The default calls the tool through
        ``mcp_request`` (a proposal when only that is allowed), or runs the agent's own."""
        return await self.run(turn, call)

    async def _call_model(self, history: Sequence[Message]) -> Completion:
        turn = self._turn()
        turn.iterations += 1
        turn.final = turn.iterations > self.config.max_iterations
        thought = await self.reason(turn, history)
        turn.thoughts.append(thought)
        completion = self._completion(thought)
        if completion.tool_calls and not turn.final and self.config.reasoning_enabled:
            await self.reasoning.send(turn, "reasoning/thought", self.loop.thought(completion))
        return completion

    def _completion(self, thought: Thought) -> Completion:
        """The model answer the runtime records for ``thought`` (tools by provider-safe name)."""
        calls = tuple(dataclasses.replace(c, name=self.tool_name(c.name)) for c in thought.calls)
        if thought.completion is not None:
            return dataclasses.replace(thought.completion, text=thought.reasoning, tool_calls=calls)
        return Completion(thought.reasoning, calls, "tool_calls" if calls else "stop")

    async def _call_tool(self, call: ToolCall) -> Message:
        turn = self._turn()
        turn.actions.append(self.label(call.name))
        return await self.act(turn, call)

    async def _observed(self, call: ToolCall, result: Message) -> None:
        turn = self._turn()
        label = self.label(call.name)
        turn.observations.append(f"{label}: {result.content}")
        if self.config.reasoning_enabled:
            await self.reasoning.send(
                turn, "reasoning/thought", self.loop.observation(label, result)
            )

    async def _answered(self, _message: AgentMessage, answer: str) -> None:
        turn, self.current = self._turn(), None
        try:
            allowed = await self.floor.may_send(turn, answer)
        finally:
            self.floor.finished(turn)
        if not allowed:
            await self.reasoning.cancel(turn, "yielded", turn.floor_reason)
            return
        if turn.reasoning_id is not None:
            used = ", ".join(dict.fromkeys(turn.actions))
            summary = f"answered using {used}" if used else "answered directly"
            await self.reasoning.send(turn, "reasoning/conclusion", {"message": summary})
        if answer:
            await self._reply(turn, answer)
        else:
            log.warning("%s: the model gave an empty answer to %s", self.id, turn.trigger.id)

    async def _turn_failed(self, message: AgentMessage, exc: BaseException) -> None:
        turn, self.current = self.current, None
        if turn is None:
            log.error("%s: could not process %s: %s", self.id, message.id, exc)
            return
        self.floor.finished(turn)
        if isinstance(exc, Aborted):
            if turn.floor_outcome == "yielded":
                await self.reasoning.cancel(turn, "yielded", f"yielded to {turn.winner}")
            elif turn.floor_outcome is None:
                by = f"cancelled by {turn.cancelled_by}" if turn.cancelled_by else ""
                await self.reasoning.cancel(turn, "cancelled", by)
            return
        log.error("%s: could not answer %s: %s", self.id, turn.trigger.id, exc)
        await self.reasoning.cancel(turn, "error", str(exc))
        with contextlib.suppress(HubbubError):
            await self._reply(turn, f"Sorry, I could not answer: {exc}")

    async def _reply(self, turn: Turn, text: str) -> None:
        trigger = turn.trigger
        env = Envelope(
            kind="chat",
            correlation_id=turn.correlation() or None,
            payload={"text": text},
            **self.reasoning.route(trigger),
        )
        if not self.participant.can_send(env):
            log.error("%s may not send chat; its answer to %s is lost", self.id, trigger.id)
            return
        await self.participant.client.send(env)
        log.info("%s: answered %s: %s", self.id, trigger.id, short(text))

    # ------------------------------------------------------------------ waiting (tests, tools)

    def _tools_changed(self, participant: str) -> None:
        self.notify_changed()

    def notify_changed(self) -> None:
        """Have :meth:`wait_until` check its condition again (something changed)."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:  # noqa: ASYNC109
        """Return once ``predicate()`` holds (re-checked on every decision and tool change,
        and every 50 ms); raise :class:`~hubbub.errors.RequestTimeout` after ``timeout``."""
        try:
            async with asyncio.timeout(timeout):
                while not predicate():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._changed.wait(), 0.05)
        except TimeoutError:
            raise RequestTimeout(f"the condition did not hold within {timeout}s") from None

    async def wait_for_tools(self, participant: str, timeout: float = 5.0) -> list[DiscoveredTool]:  # noqa: ASYNC109
        """The tools of ``participant``, once discovered (raises RequestTimeout)."""
        await self.wait_until(lambda: participant in self.tools.participants(), timeout)
        return self.tools.of(participant)

    def expect_decision(
        self, where_: Callable[[DecisionRecord], bool] | None = None
    ) -> asyncio.Future[DecisionRecord]:
        """A future for the next decision for which ``where_`` holds (registered at once)."""
        future: asyncio.Future[DecisionRecord] = asyncio.get_running_loop().create_future()
        entry = (where_ or (lambda _r: True), future)
        self._waiters.append(entry)
        future.add_done_callback(lambda _f: self._waiters.remove(entry))
        return future


__all__ = ["Agent", "DecisionRecord"]
