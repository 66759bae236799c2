"""When to answer: the rules of document 003 as plain functions over envelopes and a clock."""

from __future__ import annotations

import pytest

from hubbub.llm import Message, OfflineModel
from hubbub.llm.base import ChatModel, Completion, Done
from hubbub.protocol.envelope import Envelope
from hubbub.sdk import AgentConfig
from hubbub.sdk.decide import ResponsePolicy, mentions, parse_classification


def chat(text: str, sender: str = "alice", **fields: object) -> Envelope:
    channel = fields.pop("channel", "#general")
    return Envelope(
        kind="chat",
        id=f"m-{text[:5]}",
        from_=sender,
        channel=channel,  # type: ignore[arg-type]
        payload={"text": text},
        **fields,  # type: ignore[arg-type]
    )


def policy(**config: object) -> ResponsePolicy:
    return ResponsePolicy(AgentConfig(participant_id="helper", name="Helpy", **config), "helper")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("hey @helper, a question", "@helper"),
        ("helper: please look", "helper"),
        ("ask Helpy about it", "Helpy"),
        ("HELPY?", "HELPY"),
        ("the helpers are busy", None),
        ("see helper-bot", None),
        ("mail me at x@helper.com", None),
        ("superhelper", None),
    ],
)
def test_mentions(text: str, found: str | None) -> None:
    assert mentions(text, "helper", "Helpy") == found


def test_quick_rules_in_order() -> None:
    p = policy()
    assert p.quick(chat("hi", sender="helper"), 0).rule == "own_message"  # type: ignore[union-attr]
    assert policy(auto_respond=False).quick(chat("@helper hi"), 0).rule == "auto_respond_off"  # type: ignore[union-attr]
    direct = p.quick(chat("hi", to=["helper"]), 0)
    assert direct is not None and direct.respond and direct.reason == "addressed to me in #general"
    dm = p.quick(chat("hi", to=["helper"], channel=None), 0)
    assert dm is not None and dm.reason == "a direct message"
    mention = p.quick(chat("hey @helper"), 0)
    assert mention is not None and mention.rule == "mention" and mention.respond
    assert p.quick(chat("what is 2+2?"), 0) is None  # → the classifier
    reply = p.quick(chat("2+2 = 4", sender="other-bot", correlation_id=["m-1"]), 0)
    assert reply is not None and not reply.respond
    assert "a reply to an earlier message" in reply.reason
    assert p.quick(chat("   "), 0).rule == "empty"  # type: ignore[union-attr]
    off = policy(respond_to_questions=False).quick(chat("what is 2+2?"), 0)
    assert off is not None and off.rule == "not_addressed"
    no_mentions = policy(respond_to_mentions=False).quick(chat("hey @helper"), 0)
    assert no_mentions is None


def test_the_rate_limit_is_per_channel_and_slides() -> None:
    p = policy(rate_limit_per_minute=2)
    for t in (0.0, 10.0):
        assert p.quick(chat("@helper x"), t) is not None
        p.answered("#general", t)
    limited = p.quick(chat("@helper x"), 20.0)
    assert limited is not None and limited.rule == "rate_limited"
    assert p.quick(chat("@helper x", channel="#other"), 20.0).rule == "mention"  # type: ignore[union-attr]
    assert p.quick(chat("@helper x"), 60.5).rule == "mention"  # type: ignore[union-attr]
    assert policy(rate_limit_per_minute=0).quick(chat("@helper"), 0).rule == "mention"  # type: ignore[union-attr]


def test_the_context_window_feeds_the_classification_prompt() -> None:
    p = policy(context_window=2)
    for text in ("one", "two", "three"):
        p.observe(chat(text))
    last = chat("what is 2*3?", sender="bob")
    p.observe(last)
    prompt = p.classify_prompt(last, ["calc/multiply"])
    assert "Your tools: calc/multiply" in prompt
    assert "Recent conversation:\nalice: three\n" in prompt  # the window holds 2, minus `last`
    assert "New message from bob: what is 2*3?" in prompt
    assert "should_respond" in prompt


def test_parse_classification() -> None:
    verdict = parse_classification('Ok: {"should_respond": true, "confidence": 0.7, "reason": "q"}')
    assert (verdict.should_respond, verdict.confidence, verdict.reason) == (True, 0.7, "q")
    camel = parse_classification('{"shouldRespond": false, "confidence": 3}')
    assert camel.confidence == 1.0 and camel.reason == "no reason given"
    for bad in ("no json", '{"confidence": 1}', "{bad json}"):
        with pytest.raises(ValueError):
            parse_classification(bad)


VERDICT = '{"should_respond": true, "confidence": %s, "reason": "%s"}'


class Canned(ChatModel):
    provider = "canned"

    def __init__(self, text: str) -> None:
        self.text = text

    async def stream(self, messages, tools=()):  # type: ignore[no-untyped-def]
        yield Done(Completion(self.text))


async def test_classify_applies_the_threshold_and_survives_nonsense() -> None:
    p = policy(confidence_threshold=0.75)
    env = chat("is it?")
    low = await p.classify(Canned(VERDICT % (0.6, "maybe")), env, [])
    assert not low.respond and low.reason == "maybe (confidence below 0.75)"
    assert low.confidence == 0.6
    high = await p.classify(Canned(VERDICT % (0.8, "yes")), env, [])
    assert high.respond and high.describe() == "answer (classifier, 0.80): yes"
    broken = await p.classify(Canned("I think so!"), env, [])
    assert not broken.respond and broken.reason.startswith("could not classify: no JSON object")
    offline = await p.classify(OfflineModel(), chat("what is 3*3?"), ["calc/multiply"])
    assert offline.respond and offline.confidence == 0.9
    assert Message.user("x").role == "user"
