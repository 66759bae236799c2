"""When to answer (document 003, "Chat Message Response Strategy").

For each chat message, in order:

1. from the agent itself → ignore;
2. ``auto_respond`` off → ignore;
3. addressed to the agent in ``to`` (or a DM) → answer;
4. the text mentions the agent (``@id`` or ``@name``: the one mention rule,
   :mod:`hubbub.protocol.mentions`) → answer;
5. a reply to the agent's own message (its ``correlation_id`` / agentchat ``in_reply_to``
   names it) → answer (``reply``), at once and with the conversation it replies to; a reply
   from another agent is not answered (agents do not answer answers);
6. addressed to others — ``to`` lists participants, the text mentions known participants
   (by id or display name), or it replies to someone else's message, and the agent is not
   among them → ignore (``addressed_to_others``): addressed means addressed, so the agent
   neither answers, nor claims the floor, nor is interrupted. Steps 3-6 are the one
   addressing rule, :mod:`hubbub.protocol.addressing`;
7. a reply to a message the agent does not know (it has a ``correlation_id``) → ignore;
8. the conversation's answers to unaddressed messages in the last minute reached
   ``rate_limit_per_minute`` → ignore;
9. otherwise (if ``respond_to_questions``) ask the model for
   ``{should_respond, confidence, reason}`` over the last ``context_window`` messages of the
   conversation (the prompt names the agent's skills and tools), and answer when it says so
   with ``confidence >= confidence_threshold``.

A message addressed to the agent is always answered: the rate limit (document 003: "agents
SHOULD implement rate limiting to avoid chat spam") only throttles what the agent says on its
own initiative, and only those answers count against it. A *conversation* is a channel, or
the DMs with one peer (:func:`where`), so ten DMs from one person never silence another.

The rules are plain functions over an envelope and a clock value; only step 9 calls a model,
and it is :class:`ResponsePolicy`'s caller that does it (:meth:`ResponsePolicy.classify`).
"""

from __future__ import annotations

import json
from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from hubbub.llm.base import ChatModel, LLMError, Message
from hubbub.llm.offline import fill
from hubbub.protocol import addressing as addressing_rule
from hubbub.protocol import mentions as mention_rule
from hubbub.protocol.addressing import RosterView
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.transcript import quoted, said
from hubbub.sdk.agent_config import AgentConfig

RATE_WINDOW_S: Final = 60.0
RECENT_KEPT: Final = 1024
"""Recent messages a policy keeps by id (what a reply replies to, and who wrote it)."""
ADDRESSED_RULES: Final = frozenset({"direct", "mention", "reply"})
"""The rules of messages addressed to the agent: answered at once, free of the rate limit."""

Rule = Literal[
    "own_message",
    "auto_respond_off",
    "rate_limited",
    "direct",
    "mention",
    "reply",
    "addressed_to_others",
    "classifier",
    "not_addressed",
    "empty",
]


@dataclass(frozen=True)
class Decision:
    """Whether to answer one message, which rule decided, and why (for the log)."""

    respond: bool
    rule: Rule
    reason: str
    confidence: float | None = None

    def describe(self) -> str:
        """``answer (mention): ...`` / ``ignore (classifier, 0.10): ...``."""
        verdict = "answer" if self.respond else "ignore"
        score = f", {self.confidence:.2f}" if self.confidence is not None else ""
        return f"{verdict} ({self.rule}{score}): {self.reason}"


@dataclass(frozen=True)
class Classification:
    """The model's verdict on a message that neither addresses nor mentions the agent."""

    should_respond: bool
    confidence: float
    reason: str


def where(env: Envelope, me: str) -> str:
    """The conversation ``env`` belongs to, as agent ``me`` sees it: its channel, or for a DM
    ``@`` and the other parties (``@alice``; ``@bob,carol`` for a group DM)."""
    if env.channel is not None:
        return env.channel
    others = sorted({env.from_, *(env.to or ())} - {me, ""})
    return "@" + ",".join(others or [me])


def chat_text(env: Envelope) -> str:
    """The text of a chat envelope (``""`` when it has none)."""
    text = env.payload.get("text")
    return text if isinstance(text, str) else ""


def mentions(text: str, agent_id: str, name: str) -> str | None:
    """How ``text`` mentions the agent (``@id`` or ``@name``, the one mention rule of
    :mod:`hubbub.protocol.mentions`), if it does."""
    for handle in dict.fromkeys((agent_id, name)):
        if handle and mention_rule.mentions(text, handle):
            return f"@{handle}"
    return None


def addressees(env: Envelope, participants: Collection[str] | RosterView) -> list[str]:
    """Whom ``env`` is addressed to (the one rule, :mod:`hubbub.protocol.addressing`): its
    ``to``, the known participants its text mentions, the author of the message it replies
    to, in that order, without its sender."""
    return addressing_rule.of(env, _view(participants)).ids


def _view(
    participants: Collection[str] | RosterView,
    author_of: Callable[[str], str | None] | None = None,
) -> RosterView:
    """``participants`` as a roster view (a bare collection of ids: no display names)."""
    if isinstance(participants, RosterView):
        if author_of is None:
            return participants
        known = participants.author_of
        return RosterView(
            participants.names, lambda mid: known(mid) or author_of(mid), participants.kinds
        )
    return RosterView(dict.fromkeys(participants), author_of)


def parse_classification(text: str) -> Classification:
    """The JSON verdict in a model's answer; raises ``ValueError`` if there is none."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError(f"no JSON object in the classifier's answer: {text[:120]!r}")
    try:
        data = json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise ValueError(f"the classifier's JSON is invalid ({exc.msg}): {text[:120]!r}") from None
    if not isinstance(data, dict):
        raise ValueError("the classifier's answer is not a JSON object")
    respond = data.get("should_respond", data.get("shouldRespond"))
    confidence = data.get("confidence", 0.0)
    if not isinstance(respond, bool):
        raise ValueError("the classifier's answer has no boolean 'should_respond'")
    if not isinstance(confidence, int | float) or isinstance(confidence, bool):
        confidence = 0.0
    reason = str(data.get("reason", "")) or "no reason given"
    return Classification(respond, max(0.0, min(1.0, float(confidence))), reason)


class ResponsePolicy:
    """The when-to-answer rules of one agent, with their per-conversation state (context
    windows and the rate limiter). Clock values are passed in, so tests need no sleeping."""

    def __init__(self, config: AgentConfig, agent_id: str) -> None:
        self.config = config
        self.agent_id = agent_id
        self._context: dict[str, deque[str]] = {}
        self._answers: dict[str, deque[float]] = {}
        self._handles = (agent_id, config.name)
        self._recent: OrderedDict[str, Envelope] = OrderedDict()

    def observe(self, env: Envelope) -> None:
        """Remember a chat message in its conversation's context window (and by id, for the
        replies to it)."""
        key = where(env, self.agent_id)
        window = self._context.setdefault(key, deque(maxlen=self.config.context_window))
        window.append(said(env.from_, chat_text(env)))
        if env.id and env.from_:
            self._recent[env.id] = env
            self._recent.move_to_end(env.id)
            if len(self._recent) > RECENT_KEPT:
                self._recent.popitem(last=False)

    def author_of(self, msg_id: str) -> str | None:
        """Who wrote a recent message, as this agent saw it."""
        env = self._recent.get(msg_id)
        return None if env is None else env.from_

    def replied_to(self, env: Envelope) -> Envelope | None:
        """The agent's own message that ``env`` replies to, if it remembers one."""
        for mid in env.correlation_ids():
            mine = self._recent.get(mid)
            if mine is not None and mine.from_ == self.agent_id:
                return mine
        return None

    def reply_context(self, env: Envelope) -> str | None:
        """What a reply to the agent's message hands the model: the reply, then the
        conversation it replies to (the message the agent answered, when known, and the
        agent's own message)."""
        mine = self.replied_to(env)
        if mine is None:
            return None
        lines = [
            said(env.from_, chat_text(env)),
            f"(a reply to your message {mine.id}; the conversation it replies to:",
        ]
        for mid in mine.correlation_ids():
            earlier = self._recent.get(mid)
            if earlier is not None and earlier.from_ != self.agent_id:
                lines.append("  " + said(earlier.from_, chat_text(earlier)))
        lines.append("  " + said(f"you ({self.agent_id})", chat_text(mine)) + ")")
        return "\n".join(lines)

    def context(self, conversation: str) -> list[str]:
        """The last ``context_window`` messages of a conversation, oldest first."""
        return list(self._context.get(conversation, ()))

    def quick(
        self, env: Envelope, now: float, participants: Collection[str] | RosterView = ()
    ) -> Decision | None:
        """The decision when a rule settles it without a model; ``None`` → :meth:`classify`.
        ``participants``: the space as the agent knows it (ids, or a roster view with display
        names and kinds: a mention of one addresses the message)."""
        cfg = self.config
        if env.from_ == self.agent_id:
            return Decision(False, "own_message", "my own message")
        if not cfg.auto_respond:
            return Decision(False, "auto_respond_off", "auto_respond is off")
        text = chat_text(env)
        if not text.strip():
            return Decision(False, "empty", "no text")
        view = _view(participants, self.author_of)
        addressed = addressing_rule.of(env, view)
        why = addressed.why(self.agent_id)
        if cfg.respond_to_direct and why == "to":
            how = "a direct message" if env.channel is None else f"addressed to me in {env.channel}"
            return Decision(True, "direct", how)
        found = mentions(text, *self._handles)
        if cfg.respond_to_mentions:
            if found:
                return Decision(True, "mention", f"mentions me ({found})")
            if why == "mention":
                return Decision(True, "mention", "mentions me")
        if why == "reply" and not found:
            if view.kinds.get(env.from_) == "agent":
                why_not = f"{env.from_}'s answer to me (agents do not answer answers)"
                return Decision(False, "not_addressed", why_not)
            if cfg.respond_to_direct:
                mine = self.replied_to(env)
                return Decision(
                    True, "reply", f"a reply to my message {mine.id if mine else '(earlier)'}"
                )
        ids = addressed.ids
        if ids and self.agent_id not in ids and not found:
            return Decision(False, "addressed_to_others", f"addressed to {', '.join(ids)}")
        if not cfg.respond_to_questions:
            return Decision(False, "not_addressed", "not addressed or mentioned")
        if env.correlation_ids():
            return Decision(False, "not_addressed", "a reply to an earlier message, not to me")
        return self._rate_limited(where(env, self.agent_id), now)

    def _rate_limited(self, conversation: str, now: float) -> Decision | None:
        """The ``rate_limited`` decision when ``conversation`` has used its budget of answers
        to unaddressed messages for the last minute, else ``None``."""
        limit = self.config.rate_limit_per_minute
        if not limit:
            return None
        recent = self._answers.get(conversation)
        if recent is None:
            return None
        while recent and recent[0] <= now - RATE_WINDOW_S:
            recent.popleft()
        if len(recent) < limit:
            return None
        return Decision(
            False,
            "rate_limited",
            f"already {len(recent)} unprompted answers in {conversation} in the last minute "
            f"(rate_limit_per_minute={limit}; messages addressed to me are still answered)",
        )

    def classify_prompt(self, env: Envelope, tool_names: Sequence[str]) -> str:
        """The classification prompt for ``env`` (the ``prompts.classify`` template)."""
        history = self.context(where(env, self.agent_id))
        if history and history[-1] == said(env.from_, chat_text(env)):
            history = history[:-1]
        values: dict[str, Any] = {
            "name": self.config.name,
            "tools": ", ".join(tool_names) or "none",
            "skills": ", ".join(self.config.skills) or "none",
            "history": "\n".join(history) or "(nothing yet)",
            "sender": env.from_,
            "text": quoted(chat_text(env)),
        }
        return fill(self.config.prompts.classify, values)

    async def classify(
        self, model: ChatModel, env: Envelope, tool_names: Sequence[str]
    ) -> Decision:
        """Ask ``model`` whether to answer ``env``; never raises (a failure means ignore)."""
        prompt = self.classify_prompt(env, tool_names)
        try:
            completion = await model.complete([Message.user(prompt)])
            verdict = parse_classification(completion.text)
        except (LLMError, ValueError) as exc:
            return Decision(False, "classifier", f"could not classify: {exc}")
        threshold = self.config.confidence_threshold
        respond = verdict.should_respond and verdict.confidence >= threshold
        reason = verdict.reason
        if verdict.should_respond and not respond:
            reason += f" (confidence below {threshold:g})"
        return Decision(respond, "classifier", reason, verdict.confidence)

    def answered(self, env: Envelope, rule: Rule, now: float) -> None:
        """Count the answer to ``env`` (decided by ``rule``) against its conversation's rate
        limit, unless the message was addressed to the agent (those are free)."""
        if rule in ADDRESSED_RULES:
            return
        self._answers.setdefault(where(env, self.agent_id), deque()).append(now)


__all__ = [
    "ADDRESSED_RULES",
    "Classification",
    "Decision",
    "ResponsePolicy",
    "Rule",
    "addressees",
    "chat_text",
    "mentions",
    "parse_classification",
    "where",
]
