"""Judging a draft against the answers others gave meanwhile (document 001's "substantially
the same point"): the prompt, the verdict's parsing, and the offline model's word-overlap rule."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hubbub.llm.base import ChatModel, Completion, Done, LLMError, Message, StreamEvent, ToolSpec
from hubbub.llm.offline import SAME_POINT_SHARE, OfflineModel, judge_novelty, said_share
from hubbub.sdk.agent_config import Prompts
from hubbub.sdk.covered import covered_prompt, judge, parse_judgment
from hubbub.sdk.floor import Reply
from tests.strength import examples

TEMPLATE = Prompts().covered


def prompt(draft: str, *said: str) -> str:
    replies = [Reply(f"r{i}", f"bot{i}", text) for i, text in enumerate(said)]
    return covered_prompt(
        TEMPLATE, name="helper", question="alice: what is 12*7?", draft=draft, replies=replies
    )


def test_the_prompt_names_the_question_what_was_said_and_the_draft_one_line_each() -> None:
    text = prompt("It is\n84.", "84, surely", "multi\nline")
    assert "Question: alice: what is 12*7?\n" in text
    assert "Already said:\n- bot0: 84, surely\n- bot1: multi line\n" in text
    assert "Your draft: It is 84.\n" in text
    assert "adds_new" in text and "should_respond" not in text


@pytest.mark.parametrize(
    ("draft", "said", "adds_new"),
    [
        ("12 * 7 = 84.", ["12*7 = 84"], False),
        ("my answer to asker", ["My answer to asker!"], False),
        ("The answer is 84", ["it's 84, the answer"], False),
        ("84", ["I think 12 times 7 is 84"], False),  # everything the draft says was said
        ("12 * 7 = 84, and 12 * 8 = 96.", ["12*7 = 84"], True),  # a further point
        ("my answer to asker", ["no idea, sorry"], True),
        ("Paris", ["Lyon", "Marseille"], True),
        ("", ["anything"], False),  # an empty draft adds nothing
    ],
)
async def test_the_offline_model_drops_a_draft_whose_words_were_already_said(
    draft: str, said: list[str], adds_new: bool
) -> None:
    completion = await OfflineModel().complete([Message.user(prompt(draft, *said))])
    verdict = json.loads(completion.text)
    assert verdict["adds_new"] is adds_new, verdict


WORDS = ["alpha", "beta", "gamma", "delta", "42", "7", "zeta"]
words = st.lists(st.sampled_from(WORDS), min_size=1)


@settings(max_examples=examples(200), deadline=None)
@given(draft=words, said=st.lists(words, min_size=1, max_size=3))
def test_repeating_never_adds_and_new_words_beyond_the_threshold_always_add(
    draft: list[str], said: list[list[str]]
) -> None:
    texts = [" ".join(s) for s in said]
    repeated = " ".join(w for s in said for w in s)
    assert judge_novelty(prompt(repeated, *texts))["adds_new"] is False
    fresh = [f"new{i}" for i in range(len(set(draft)) * 5)]  # over 80 % of it is new
    mixed = " ".join(draft + fresh)
    share = said_share(mixed, texts)
    assert share < SAME_POINT_SHARE
    assert judge_novelty(prompt(mixed, *texts))["adds_new"] is True


def test_parse_judgment() -> None:
    verdict = parse_judgment('Sure: {"adds_new": false, "reason": "same number"}')
    assert (verdict.adds_new, verdict.reason) == (False, "same number")
    assert parse_judgment('{"addsNew": true}').reason == "no reason given"
    for bad in ("no json", '{"reason": "x"}', "{bad}", '{"adds_new": "no"}'):
        with pytest.raises(ValueError):
            parse_judgment(bad)


class Canned(ChatModel):
    """Answers every call with ``text`` (or raises ``error``)."""

    provider = "canned"

    def __init__(self, text: str = "", error: Exception | None = None) -> None:
        self.text, self.error = text, error

    async def stream(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = ()
    ) -> AsyncGenerator[StreamEvent, None]:
        if self.error is not None:
            raise self.error
        yield Done(Completion(self.text))


async def test_a_model_that_cannot_judge_lets_the_draft_through() -> None:
    text = prompt("84", "84")
    nonsense = await judge(Canned("I would rather not say"), text)
    assert nonsense.adds_new and nonsense.reason.startswith("could not judge (no JSON object")
    failed = await judge(Canned(error=LLMError("the model server is down")), text)
    assert failed.adds_new and "the model server is down" in failed.reason
    same = await judge(Canned('{"adds_new": false, "reason": "same"}'), text)
    assert not same.adds_new and same.reason == "same"
