"""When to answer (document 003, "Chat Message Response Strategy").

For each chat message, in order:

1. from the agent itself → ignore;
2. ``auto_respond`` off → ignore;
3. addressed to the agent in ``to`` (or a DM) → answer;
4. the text mentions the agent (``@id`` or ``@name``: the one mention rule,
   :mod:`hubbub.protocol.mentions`) → answer;
5. addressed to others — ``to`` lists participants, or the text mentions known participants,
   and the agent is not among them → ignore (``addressed_to_others``): addressed means
   addressed, so the agent neither answers, nor claims the floor, nor is interrupted;
6. a reply to an earlier message (it has a ``correlation_id``: another agent's answer, say)
   that neither addresses nor mentions the agent → ignore, so agents do not answer answers;
7. the conversation's answers to unaddressed messages in the last minute reached
   ``rate_limit_per_minute`` → ignore;
8. otherwise (if ``respond_to_questions``) ask the model for
   ``{should_respond, confidence, reason}`` over the last ``context_window`` messages of the
   conversation (the prompt names the agent's skills and tools), and answer when it says so
   with ``confidence >= confidence_threshold``.

A message addressed to the agent is always answered: the rate limit (document 003: "agents
SHOULD implement rate limiting to avoid chat spam") only throttles what the agent says on its
own initiative, and only those answers count against it. A *conversation* is a channel, or
the DMs with one peer (:func:`where`), so ten DMs from one person never silence another.

The rules are plain functions over an envelope and a clock value; only step 7 calls a model,
and it is :class:`ResponsePolicy`'s caller that does it (:meth:`ResponsePolicy.classify`).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from hubbub.llm.base import ChatModel, LLMError, Message
from hubbub.llm.offline import fill
from hubbub.protocol import mentions as mention_rule
from hubbub.protocol.envelope import Envelope
from hubbub.protocol.transcript import quoted, said
from hubbub.sdk.agent_config import AgentConfig

RATE_WINDOW_S: Final = 60.0

Rule = Literal[
    "own_message",
    "auto_respond_off",
    "rate_limited",
    "direct",
    "mention",
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


def addressees(env: Envelope, participants: Collection[str]) -> list[str]:
    """Whom ``env`` is addressed to: its ``to`` and the known ``participants`` its text
    mentions, in that order, without its sender."""
    found = [*(env.to or ()), *mention_rule.mentioned_ids(chat_text(env), participants)]
    return [pid for pid in dict.fromkeys(found) if pid != env.from_]


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

    def observe(self, env: Envelope) -> None:
        """Remember a chat message in its conversation's context window."""
        key = where(env, self.agent_id)
        window = self._context.setdefault(key, deque(maxlen=self.config.context_window))
        window.append(said(env.from_, chat_text(env)))

    def context(self, conversation: str) -> list[str]:
        """The last ``context_window`` messages of a conversation, oldest first."""
        return list(self._context.get(conversation, ()))

    def quick(
        self, env: Envelope, now: float, participants: Collection[str] = ()
    ) -> Decision | None:
        """The decision when a rule settles it without a model; ``None`` → :meth:`classify`.
        ``participants``: the ids the agent knows (a mention of one addresses the message)."""
        cfg = self.config
        if env.from_ == self.agent_id:
            return Decision(False, "own_message", "my own message")
        if not cfg.auto_respond:
            return Decision(False, "auto_respond_off", "auto_respond is off")
        text = chat_text(env)
        if not text.strip():
            return Decision(False, "empty", "no text")
        if cfg.respond_to_direct and self.agent_id in (env.to or ()):
            how = "a direct message" if env.channel is None else f"addressed to me in {env.channel}"
            return Decision(True, "direct", how)
        if cfg.respond_to_mentions:
            found = mentions(text, *self._handles)
            if found:
                return Decision(True, "mention", f"mentions me ({found})")
        addressed = addressees(env, participants)
        if addressed and self.agent_id not in addressed and not mentions(text, *self._handles):
            return Decision(False, "addressed_to_others", f"addressed to {', '.join(addressed)}")
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
        if rule in ("direct", "mention"):
            return
        self._answers.setdefault(where(env, self.agent_id), deque()).append(now)


__all__ = [
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
