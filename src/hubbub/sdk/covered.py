"""Whether a draft answer adds anything to what others said meanwhile (document 001, CSMA).

Document 001: when the CSMA delay is over, "if another agent already responded with
substantially the same point → discard draft; if no one responded, or agent has a genuinely
different take → send", and that point is "determined by the agent's own judgment". So the
agent asks its own model, with the ``covered`` prompt (the question, what others said, the
draft), for ``{"adds_new": true|false, "reason": "..."}``.

The draft is dropped only on the model's word: a model that fails or answers no JSON means
send (a repeated point costs less than a lost one). The offline model judges by word overlap
(:func:`hubbub.llm.offline.judge_novelty`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from hubbub.llm.base import ChatModel, LLMError, Message
from hubbub.llm.offline import fill
from hubbub.sdk.floor import Reply


@dataclass(frozen=True)
class Judgment:
    """The model's verdict on a draft: does it add something new, and why."""

    adds_new: bool
    reason: str


def _line(text: str) -> str:
    return " ".join(text.split())


def covered_prompt(
    template: str, *, name: str, question: str, draft: str, replies: Sequence[Reply]
) -> str:
    """The ``covered`` prompt: ``{name}``, ``{input}`` (the question), ``{replies}`` (one
    ``- who: text`` line each) and ``{draft}``; texts are flattened to one line each."""
    said = "\n".join(f"- {r.who}: {_line(r.text)}" for r in replies)
    values = {"name": name, "input": _line(question), "replies": said, "draft": _line(draft)}
    return fill(template, values)


def parse_judgment(text: str) -> Judgment:
    """The JSON verdict in a model's answer; raises ``ValueError`` if there is none."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError(f"no JSON object in the answer: {text[:120]!r}")
    try:
        data = json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise ValueError(f"the JSON is invalid ({exc.msg}): {text[:120]!r}") from None
    adds_new = data.get("adds_new", data.get("addsNew")) if isinstance(data, dict) else None
    if not isinstance(adds_new, bool):
        raise ValueError(f"no boolean 'adds_new' in the answer: {text[:120]!r}")
    return Judgment(adds_new, str(data.get("reason", "")) or "no reason given")


async def judge(model: ChatModel, prompt: str) -> Judgment:
    """Ask ``model`` whether the draft in ``prompt`` adds something new; never raises (a
    failure counts as "it does": the draft is sent)."""
    try:
        completion = await model.complete([Message.user(prompt)])
        return parse_judgment(completion.text)
    except (LLMError, ValueError) as exc:
        return Judgment(True, f"could not judge ({exc}); sending the draft")


__all__ = ["Judgment", "covered_prompt", "judge", "parse_judgment"]
