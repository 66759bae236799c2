"""The offline scripted model: deterministic answers from a few rules and a script file.

No network, no weights. It reads the conversation the way a real model would (the last user
message, the tool results after it) and answers by rules, in this order:

1. a classification request (the agent asking "should I respond?") → a JSON verdict (an
   agent with skills answers what they cover and its rules answer, :mod:`hubbub.llm.topics`,
   and leaves the rest to others); a request to judge
   a draft against others' answers (``adds_new``) → a JSON verdict by word overlap
   (:func:`judge_novelty`);
2. tool results after the last user message → the final answer built from them;
3. a rule of the script file whose ``match`` regex finds the text → its reply or tool call;
4. arithmetic (``what is 12*7``, ``3 plus 4``, or a follow-up such as ``and times 2?`` on
   the previous answer's result, read from the conversation) → a call of an offered tool
   named after the operation (``multiply``, ``add``, ...) per expression, or the answer
   computed directly;
5. a greeting → a greeting; anything else → the script's ``default_reply``.

``latency_s`` is waited before the first token and ``tokens_per_s`` paces the streamed text;
both are ``asyncio.sleep``, so cancelling the call stops it at once.

User messages are expected as ``"sender: text"`` (how the agent writes them); the sender is
used in replies as ``{sender}``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import itertools
import json
import math
import re
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Final

import yaml

from hubbub.llm.base import (
    ChatModel,
    Completion,
    Done,
    Message,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallEvent,
    ToolSpec,
)
from hubbub.llm.topics import skills_covering

CLASSIFY_MARKER: Final = "should_respond"
"""A user message containing this word asks for a respond/ignore verdict as JSON."""

NOVELTY_MARKER: Final = "adds_new"
"""A user message containing this word asks whether a draft adds anything (JSON verdict)."""
SAME_POINT_SHARE: Final = 0.8
"""A draft makes "substantially the same point" (document 001) when at least this share of
its words were already said (see :func:`judge_novelty`)."""

_SENDER = re.compile(r"^([A-Za-z0-9_.-]{1,32}): (.*)$", re.DOTALL)
_NUMBER = r"(-?\d+(?:\.\d+)?)"
_OPERATOR = r"(\*|×|x|\+|-|/|÷|times|multiplied by|plus|minus|divided by|over)"
_EXPRESSION = re.compile(rf"(?<![\w.]){_NUMBER}\s*{_OPERATOR}\s*{_NUMBER}(?![\w.])", re.IGNORECASE)
_FOLLOW_UP = re.compile(
    rf"^(?:@[\w.-]+[\s,:]*)*(?:and|now|then|ok|so)?[\s,]*{_OPERATOR}\s*{_NUMBER}\s*\??\s*$",
    re.IGNORECASE,
)
_RESULT = re.compile(rf"=\s*{_NUMBER}\.?\s*$")
_GREETING = re.compile(r"^\W*(hi|hello|hey|howdy|hiya|good (morning|afternoon|evening))\b", re.I)
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_TOKEN = re.compile(r"\S+\s*|\s+")
_WORD = re.compile(r"[a-z][a-z0-9]+")
_TERM = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")
_SAID_LINE = re.compile(r"^- [^:\n]*: (.*)$", re.MULTILINE)
_DRAFT_LINE = re.compile(r"^Your draft: (.*)$", re.MULTILINE)

_OPS: Final[dict[str, str]] = {
    "*": "*", "×": "*", "x": "*", "times": "*", "multiplied by": "*",
    "+": "+", "plus": "+",
    "-": "-", "minus": "-",
    "/": "/", "÷": "/", "divided by": "/", "over": "/",
}  # fmt: skip
_OP_TOOL_WORDS: Final[dict[str, tuple[str, ...]]] = {
    "*": ("multiply", "mul", "times", "product"),
    "+": ("add", "plus", "sum"),
    "-": ("subtract", "sub", "minus", "difference"),
    "/": ("divide", "div", "quotient"),
}
_STOP_WORDS: Final = frozenset(
    {
        "the", "and", "for", "you", "your", "are", "with", "this", "that", "what", "from",
        "have", "tool", "tools", "participant", "offered", "offers", "numbers", "number", "two",
    }
)  # fmt: skip
_SCRIPT_KEYS: Final = ("rules", "default_reply", "greeting")
_RULE_KEYS: Final = ("match", "reply", "tool", "arguments", "then")

DEFAULT_REPLY = (
    "Sorry {sender}, I am the offline scripted model and have no rule for that. "
    "Try arithmetic, like 'what is 12*7', or add a rule to my script file."
)
DEFAULT_GREETING = "Hello {sender}! How can I help?"


class ScriptError(ValueError):
    """The offline model's script file is wrong (the message names the key and the fix)."""


@dataclass(frozen=True)
class ScriptRule:
    """One rule: when ``match`` finds the text, reply, or call ``tool`` and then reply."""

    match: re.Pattern[str]
    reply: str | None = None
    tool: str | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)
    then: str | None = None


@dataclass(frozen=True)
class OfflineScript:
    """The rules of the offline model (a YAML file: ``rules``, ``default_reply``, ``greeting``)."""

    rules: tuple[ScriptRule, ...] = ()
    default_reply: str = DEFAULT_REPLY
    greeting: str = DEFAULT_GREETING

    @classmethod
    def load(cls, path: str | Path) -> OfflineScript:
        """Read a script file; :class:`ScriptError` names what is wrong."""
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ScriptError(f"{path}: cannot read the offline script: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise ScriptError(f"{path}: not valid YAML: {exc}") from None
        return cls.from_mapping(data or {}, str(path))

    @classmethod
    def from_mapping(cls, data: object, source: str = "offline script") -> OfflineScript:
        """A script from parsed YAML/JSON data."""
        if not isinstance(data, dict):
            raise ScriptError(f"{source}: the script must be a mapping with 'rules'")
        _check_keys(data, _SCRIPT_KEYS, source)
        rules_data = data.get("rules") or []
        if not isinstance(rules_data, list):
            raise ScriptError(f"{source}: 'rules' must be a list of rules")
        rules = tuple(_rule(item, f"{source}: rules[{i}]") for i, item in enumerate(rules_data))
        out = cls(rules=rules)
        for key in ("default_reply", "greeting"):
            if key in data:
                if not isinstance(data[key], str):
                    raise ScriptError(f"{source}: '{key}' must be a string")
                out = dataclasses.replace(out, **{key: data[key]})
        return out


def _check_keys(data: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
    for key in data:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(allowed)})"
            raise ScriptError(f"{where}: unknown key {key!r}{hint}")


def _rule(item: object, where: str) -> ScriptRule:
    if not isinstance(item, dict):
        raise ScriptError(f"{where}: a rule must be a mapping with 'match'")
    _check_keys(item, _RULE_KEYS, where)
    pattern = item.get("match")
    if not isinstance(pattern, str) or not pattern:
        raise ScriptError(f"{where}: 'match' (a regular expression) is required")
    try:
        compiled = re.compile(pattern, re.IGNORECASE)
    except re.error as exc:
        raise ScriptError(f"{where}: 'match' is not a valid regular expression: {exc}") from None
    reply, tool, then = item.get("reply"), item.get("tool"), item.get("then")
    arguments = item.get("arguments") or {}
    if (reply is None) == (tool is None):
        raise ScriptError(f"{where}: give exactly one of 'reply' or 'tool'")
    for key, value in (("reply", reply), ("tool", tool), ("then", then)):
        if value is not None and not isinstance(value, str):
            raise ScriptError(f"{where}: '{key}' must be a string")
    if not isinstance(arguments, dict):
        raise ScriptError(f"{where}: 'arguments' must be a mapping")
    return ScriptRule(compiled, reply, tool, arguments, then)


def fill(template: str, values: Mapping[str, object]) -> str:
    """Replace ``{name}`` placeholders that ``values`` knows; leave other braces alone."""

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        return str(values[key]) if key in values else m.group(0)

    return _PLACEHOLDER.sub(sub, template)


def format_number(value: float) -> str:
    """``84`` rather than ``84.0``; up to 10 significant digits otherwise."""
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.10g}"


@dataclass(frozen=True)
class Expression:
    """``a op b`` found in a message."""

    a: float
    op: str
    b: float
    text: str

    def value(self) -> float | None:
        """The result, or ``None`` for a division by zero."""
        if self.op == "*":
            return self.a * self.b
        if self.op == "+":
            return self.a + self.b
        if self.op == "-":
            return self.a - self.b
        return None if self.b == 0 else self.a / self.b

    def label(self) -> str:
        """``12 * 7``."""
        return f"{format_number(self.a)} {self.op} {format_number(self.b)}"


def expressions(text: str) -> list[Expression]:
    """Every arithmetic expression in ``text``, in order."""
    return [
        Expression(float(m.group(1)), _OPS[m.group(2).lower()], float(m.group(3)), m.group(0))
        for m in _EXPRESSION.finditer(text)
    ]


def follow_up(text: str, before: Sequence[Message]) -> list[Expression]:
    """``and times 2?`` after an answer ending ``= 42.``: the expression ``42 * 2`` (the
    previous result is read from the conversation before ``text``; none: ``[]``)."""
    m = _FOLLOW_UP.match(text.strip())
    if m is None:
        return []
    for message in reversed(before):
        if message.role != "assistant":
            continue
        result = _RESULT.search(message.content.strip())
        if result is not None:
            a = float(result.group(1))
            return [Expression(a, _OPS[m.group(1).lower()], float(m.group(2)), text)]
    return []


def _tool_words(spec: ToolSpec) -> list[str]:
    name = spec.display_name or spec.name
    tail = name.rsplit("/", 1)[-1].rsplit("__", 1)[-1]
    return re.split(r"[^a-z0-9]+", tail.lower())


def tool_for(op: str, tools: Sequence[ToolSpec]) -> ToolSpec | None:
    """The first tool named after operation ``op`` (``multiply`` for ``*``...)."""
    words = _OP_TOOL_WORDS[op]
    for spec in tools:
        if any(w in words for w in _tool_words(spec)):
            return spec
    return None


def numeric_arguments(spec: ToolSpec, a: float, b: float) -> dict[str, Any]:
    """``{first: a, second: b}`` over the tool's first two (numeric, required) parameters."""
    props = spec.parameters.get("properties")
    props = props if isinstance(props, dict) else {}
    required = [p for p in spec.parameters.get("required", []) if p in props]
    ordered = required + [p for p in props if p not in required]
    numeric = [p for p in ordered if _is_numeric(props[p])]
    names = (numeric if len(numeric) >= 2 else ordered)[:2]
    while len(names) < 2:
        names.append("ab"[len(names)])
    out: dict[str, Any] = {}
    for name, value in zip(names, (a, b), strict=True):
        schema = props.get(name)
        schema = schema if isinstance(schema, dict) else {}
        integral = value == int(value)
        out[name] = int(value) if integral and schema.get("type") != "number" else value
    return out


def _is_numeric(schema: object) -> bool:
    return isinstance(schema, dict) and schema.get("type") in ("number", "integer")


@dataclass(frozen=True)
class _Plan:
    """What to do for one user message: a reply, or tool calls and how to answer after."""

    reply: str | None = None
    calls: tuple[tuple[ToolSpec, dict[str, Any]], ...] = ()
    then: str | None = None
    expressions: tuple[Expression, ...] = ()
    values: Mapping[str, object] = field(default_factory=dict)


class OfflineModel(ChatModel):
    """The deterministic offline model (the default provider): rules, a script, no network."""

    provider: ClassVar[str] = "offline"

    def __init__(
        self,
        script: OfflineScript | None = None,
        *,
        latency_s: float = 0.0,
        tokens_per_s: float = 0.0,
        model: str = "offline-scripted",
    ) -> None:
        if latency_s < 0 or tokens_per_s < 0:
            raise ValueError("latency_s and tokens_per_s must be >= 0 (0 = no delay)")
        self.script = script or OfflineScript()
        self.latency_s = latency_s
        self.tokens_per_s = tokens_per_s
        self.model = model
        self.calls = 0
        """How many completions this model produced (for tests and the demo)."""
        self._ids = itertools.count(1)

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream the rule-based answer, paced by ``latency_s`` and ``tokens_per_s``."""
        await asyncio.sleep(self.latency_s)
        completion = self.answer(messages, tools)
        self.calls += 1
        pause = 1.0 / self.tokens_per_s if self.tokens_per_s else 0.0
        for token in _TOKEN.findall(completion.text):
            if pause:
                await asyncio.sleep(pause)
            yield TextDelta(token)
        for call in completion.tool_calls:
            yield ToolCallEvent(call)
        yield Done(completion)

    # ------------------------------------------------------------------ the rules

    def answer(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> Completion:
        """The whole answer to a conversation, without delays (pure and deterministic)."""
        users = [i for i, m in enumerate(messages) if m.role == "user"]
        last_user = users[-1] if users else None
        if last_user is None:
            return self._text("I have nothing to answer yet.")
        sender, text = _split_sender(messages[last_user].content)
        if CLASSIFY_MARKER in text:
            return self._text(json.dumps(classify(text, tools, self.script)))
        if NOVELTY_MARKER in text:
            return self._text(json.dumps(judge_novelty(text)))
        plan = self._plan(sender, text, tools, messages[:last_user])
        results = [m for m in messages[last_user + 1 :] if m.role == "tool"]
        if results:
            return self._text(self._after_tools(plan, results))
        if plan.calls:
            calls = tuple(
                ToolCall(f"offline-{next(self._ids)}", spec.name, args) for spec, args in plan.calls
            )
            what = ", ".join(spec.display_name or spec.name for spec, _ in plan.calls)
            return Completion(f"I will use {what}.", calls, "tool_calls", self.model)
        return self._text(plan.reply or "")

    def _text(self, text: str) -> Completion:
        return Completion(text, (), "stop", self.model)

    def _plan(
        self,
        sender: str,
        text: str,
        tools: Sequence[ToolSpec],
        before: Sequence[Message] = (),
    ) -> _Plan:
        values: dict[str, object] = {"sender": sender, "text": text}
        for rule in self.script.rules:
            m = rule.match.search(text)
            if m is None:
                continue
            values.update({k: v for k, v in m.groupdict().items() if v is not None})
            values.update({str(i): g for i, g in enumerate(m.groups(), 1) if g is not None})
            if rule.reply is not None:
                return _Plan(reply=fill(rule.reply, values))
            assert rule.tool is not None
            spec = _find_tool(rule.tool, tools)
            if spec is None:
                return _Plan(reply=f"I would use {rule.tool}, but no participant offers it now.")
            args = {k: _fill_value(v, values) for k, v in rule.arguments.items()}
            values["tool"] = spec.display_name or spec.name
            then = rule.then or "{tool} says: {result}"
            return _Plan(calls=((spec, args),), then=then, values=values)
        found = expressions(text) or follow_up(text, before)
        if found:
            calls = []
            for e in found:
                spec = tool_for(e.op, tools)
                if spec is None:
                    break
                calls.append((spec, numeric_arguments(spec, e.a, e.b)))
            else:
                return _Plan(calls=tuple(calls), expressions=tuple(found), values=values)
            return _Plan(reply=_arithmetic_answer(found, [None] * len(found)))
        if _GREETING.search(text):
            return _Plan(reply=fill(self.script.greeting, values))
        return _Plan(reply=fill(self.script.default_reply, values))

    def _after_tools(self, plan: _Plan, results: Sequence[Message]) -> str:
        if plan.expressions and len(results) == len(plan.expressions):
            return _arithmetic_answer(list(plan.expressions), list(results))
        joined = "; ".join(r.content for r in results)
        if plan.then is not None:
            return fill(plan.then, {**plan.values, "result": joined})
        return f"The tools answered: {joined}"


def _split_sender(content: str) -> tuple[str, str]:
    m = _SENDER.match(content)
    return (m.group(1), m.group(2)) if m else ("there", content)


def _find_tool(wanted: str, tools: Sequence[ToolSpec]) -> ToolSpec | None:
    for spec in tools:
        if wanted in (spec.display_name, spec.name):
            return spec
    for spec in tools:
        if (spec.display_name or spec.name).rsplit("/", 1)[-1] == wanted:
            return spec
    return None


def _fill_value(value: object, values: Mapping[str, object]) -> object:
    return fill(value, values) if isinstance(value, str) else value


def _arithmetic_answer(found: Sequence[Expression], results: Sequence[Message | None]) -> str:
    parts = []
    for e, result in zip(found, results, strict=True):
        if result is None:
            value = e.value()
            parts.append(
                f"{e.label()} = {format_number(value)}"
                if value is not None
                else f"{e.label()} cannot be computed: division by zero"
            )
        elif result.is_error:
            parts.append(f"I could not compute {e.label()}: {result.content}")
        else:
            parts.append(f"{e.label()} = {result.content}")
    return "; ".join(parts) + "."


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in _STOP_WORDS}


def classify(prompt: str, tools: Sequence[ToolSpec], script: OfflineScript) -> dict[str, Any]:
    """The verdict on a classification prompt: ``{should_respond, confidence, reason}``.

    The prompt names the agent's tools on a line ``Your tools: ...`` and the message on a line
    ``New message from SENDER: TEXT`` (as :mod:`hubbub.sdk.decide` writes it; a text's further
    lines follow behind ``"  | "``, as :mod:`hubbub.protocol.transcript` quotes them).
    """
    tools_line = re.search(r"^Your tools: (.*)$", prompt, re.MULTILINE)
    skills_line = re.search(r"^Your skills: (.*)$", prompt, re.MULTILINE)
    message_line = re.search(r"^New message from [^:]*: (.*(?:\n  \| .*)*)$", prompt, re.M)
    text = message_line.group(1).replace("\n  | ", "\n") if message_line else prompt
    tool_names = [t.strip() for t in tools_line.group(1).split(",")] if tools_line else []
    specs = [ToolSpec(name=n, display_name=n) for n in tool_names if n and n != "none"]
    specs += list(tools)
    found = expressions(text)
    skills = [s.strip() for s in skills_line.group(1).split(",")] if skills_line else []
    skills = [s for s in skills if s and s != "none"]
    if skills:
        return _by_skills(text, skills, bool(found), script)
    if found and all(tool_for(e.op, specs) is not None for e in found):
        return _verdict(True, 0.9, "arithmetic that my tools can compute")
    if any(rule.match.search(text) for rule in script.rules):
        return _verdict(True, 0.8, "my script has an answer for this")
    tool_words: set[str] = set()
    for spec in specs:
        tool_words |= _words(" ".join(_tool_words(spec)))
    overlap = sorted(_words(text) & tool_words)
    question = "?" in text
    if overlap:
        confidence = 0.8 if question else 0.7
        return _verdict(True, confidence, f"it is about {', '.join(overlap)}, which my tools cover")
    if question:
        return _verdict(False, 0.4, "a question, but not about anything my tools cover")
    return _verdict(False, 0.1, "not a question, and not about my tools")


def _by_skills(
    text: str, skills: Sequence[str], arithmetic: bool, script: OfflineScript
) -> dict[str, Any]:
    """The verdict of an agent with skills: answer what its skills cover *and* its rules
    answer (a rule of its script, or arithmetic for a maths skill); a message in its field
    that no rule answers is not its to claim (it would only apologise). The tools it can reach
    are everyone's, so they do not make a message its business."""
    covered = skills_covering(text, skills, arithmetic=arithmetic)
    if any(rule.match.search(text) for rule in script.rules):
        if covered:
            confidence = 0.9 if "?" in text or arithmetic else 0.7
            return _verdict(True, confidence, f"it is about {', '.join(covered)}, my skill")
        return _verdict(True, 0.8, "my script has an answer for this")
    if covered and arithmetic:
        return _verdict(True, 0.9, f"it is about {', '.join(covered)}, my skill")
    if covered:
        return _verdict(False, 0.3, f"about {', '.join(covered)}, but no rule of mine answers it")
    return _verdict(False, 0.2, f"not about my skills ({', '.join(skills)})")


_FILLER: Final = frozenset(
    {
        "a", "an", "the", "is", "are", "was", "be", "it", "its", "s", "to", "of", "in", "on",
        "at", "for", "and", "or", "so", "that", "this", "i", "you", "we", "as", "with",
    }
)  # fmt: skip


def terms(text: str) -> set[str]:
    """The words and numbers of ``text`` that carry its point (lower case, filler dropped)."""
    return {t for t in _TERM.findall(text.lower()) if t not in _FILLER}


def said_share(draft: str, said: Sequence[str]) -> float:
    """The share of the draft's :func:`terms` that appear in ``said`` (1.0 for an empty
    draft: it adds nothing)."""
    mine = terms(draft)
    if not mine:
        return 1.0
    theirs: set[str] = set()
    for text in said:
        theirs |= terms(text)
    return len(mine & theirs) / len(mine)


def judge_novelty(prompt: str) -> dict[str, Any]:
    """The verdict on a "does my draft add anything?" prompt: ``{adds_new, reason}``.

    The prompt holds what others said as ``- who: text`` lines and the draft on a line
    ``Your draft: ...`` (as :mod:`hubbub.sdk.covered` writes it). The draft adds nothing when
    at least :data:`SAME_POINT_SHARE` of its words and numbers were already said.
    """
    draft_line = _DRAFT_LINE.search(prompt)
    draft = draft_line.group(1) if draft_line else ""
    said = _SAID_LINE.findall(prompt[: draft_line.start()] if draft_line else prompt)
    share = said_share(draft, said)
    if share >= SAME_POINT_SHARE:
        return {"adds_new": False, "reason": f"{share:.0%} of my draft was already said"}
    return {"adds_new": True, "reason": f"only {share:.0%} of my draft was already said"}


def _verdict(respond: bool, confidence: float, reason: str) -> dict[str, Any]:
    return {"should_respond": respond, "confidence": confidence, "reason": reason}


__all__ = [
    "CLASSIFY_MARKER",
    "NOVELTY_MARKER",
    "SAME_POINT_SHARE",
    "Expression",
    "OfflineModel",
    "OfflineScript",
    "ScriptError",
    "ScriptRule",
    "classify",
    "expressions",
    "fill",
    "follow_up",
    "format_number",
    "judge_novelty",
    "numeric_arguments",
    "said_share",
    "terms",
    "tool_for",
]
