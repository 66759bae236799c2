"""When to answer: the rules of document 003 as plain functions over envelopes and a clock."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hubbub.llm import Message, OfflineModel
from hubbub.llm.base import ChatModel, Completion, Done
from hubbub.protocol.addressing import RosterView
from hubbub.protocol.envelope import Envelope
from hubbub.sdk import AgentConfig
from hubbub.sdk.decide import ResponsePolicy, mentions, parse_classification, where
from tests.strength import examples


def chat(text: str, sender: str = "alice", **fields: object) -> Envelope:
    channel = fields.pop("channel", "#general")
    msg_id = fields.pop("id", f"m-{text[:5]}")
    return Envelope(
        kind="chat",
        id=msg_id,  # type: ignore[arg-type]
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
        ("@helper: please look", "@helper"),
        ("ask @helpy about it", "@Helpy"),
        ("@HELPY?", "@Helpy"),
        ("helper: a bare name is not a mention (the one mention rule needs the @)", None),
        ("ask Helpy about it", None),
        ("the @helpers are busy", None),
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


def test_the_rate_limit_throttles_unaddressed_messages_per_conversation_and_slides() -> None:
    p = policy(rate_limit_per_minute=2)
    question = chat("what is 2+2?")
    for t in (0.0, 10.0):
        assert p.quick(question, t) is None  # → the classifier
        p.answered(question, "classifier", t)
    limited = p.quick(question, 20.0)
    assert limited is not None and limited.rule == "rate_limited" and not limited.respond
    assert "already 2 unprompted answers in #general" in limited.reason
    assert p.quick(chat("what is 2+2?", channel="#other"), 20.0) is None  # another channel
    assert p.quick(question, 60.5) is None  # the first answer left the window
    assert policy(rate_limit_per_minute=0).quick(question, 0) is None


def test_messages_addressed_to_the_agent_are_answered_and_cost_nothing() -> None:
    p = policy(rate_limit_per_minute=1)
    question = chat("what is 2+2?")
    p.answered(question, "classifier", 0.0)
    assert p.quick(question, 1.0).rule == "rate_limited"  # type: ignore[union-attr]
    for t in range(2, 30):
        for env in (
            chat("@helper what is 2+2?"),
            chat("what is 2+2?", to=["helper"]),
            chat("what is 2+2?", to=["helper"], channel=None),
        ):
            decision = p.quick(env, float(t))
            assert decision is not None and decision.respond, decision
            p.answered(env, decision.rule, float(t))
    assert p.quick(question, 59.0).rule == "rate_limited"  # type: ignore[union-attr]
    assert p.quick(question, 60.0) is None  # only the unprompted answer counted


def test_each_dm_peer_is_its_own_conversation() -> None:
    p = policy(rate_limit_per_minute=1, respond_to_direct=False)  # DMs go to the classifier
    from_alice = chat("what is 2+2?", to=["helper"], channel=None)
    from_bob = chat("what is 2+2?", sender="bob", to=["helper"], channel=None)
    assert where(from_alice, "helper") == "@alice"
    assert where(chat("x", sender="helper", to=["alice"], channel=None), "helper") == "@alice"
    assert where(chat("x", to=["helper", "carol"], channel=None), "helper") == "@alice,carol"
    p.answered(from_alice, "classifier", 0.0)
    assert p.quick(from_alice, 1.0).rule == "rate_limited"  # type: ignore[union-attr]
    assert p.quick(from_bob, 1.0) is None
    p.observe(from_alice)
    p.observe(chat("secret plans", sender="bob", to=["helper"], channel=None))
    assert p.context("@alice") == ["alice: what is 2+2?"]  # bob's DMs are not in alice's window


incoming = st.lists(
    st.tuples(
        st.sampled_from(["mention", "to", "dm", "plain", "others"]),
        st.sampled_from(["alice", "bob"]),
        st.sampled_from(["#general", "#other"]),
        st.floats(0, 30),
    ),
    max_size=40,
)


@settings(max_examples=examples(200), deadline=None)
@given(seen=incoming, limit=st.integers(1, 5))
def test_the_rate_limit_never_silences_an_addressed_message(
    seen: list[tuple[str, str, str, float]], limit: int
) -> None:
    """Whatever came before, a DM, a ``to`` or an @mention is answered; an unaddressed message
    is limited exactly when its conversation had ``limit`` unprompted answers in the last 60 s."""
    p = policy(rate_limit_per_minute=limit, respond_to_direct=True)
    now = 0.0
    unprompted: dict[str, list[float]] = {}
    for how, sender, channel, gap in seen:
        now += gap
        env = {
            "mention": chat("@helper what now?", sender=sender, channel=channel),
            "to": chat("what now?", sender=sender, channel=channel, to=["helper"]),
            "dm": chat("what now?", sender=sender, channel=None, to=["helper"]),
            "plain": chat("what now?", sender=sender, channel=channel),
            "others": chat("what now?", sender=sender, channel=channel, to=["zed"]),
        }[how]
        decision = p.quick(env, now)
        if how in ("mention", "to", "dm"):
            assert decision is not None and decision.respond
            p.answered(env, decision.rule, now)
            continue
        if how == "others":  # addressed to someone else: never answered, never counted
            assert decision is not None and decision.rule == "addressed_to_others"
            continue
        key = where(env, "helper")
        recent = [t for t in unprompted.get(key, []) if t > now - 60]
        if len(recent) >= limit:
            assert decision is not None and decision.rule == "rate_limited"
        else:
            assert decision is None  # the classifier decides
            p.answered(env, "classifier", now)
            unprompted.setdefault(key, []).append(now)


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


@pytest.mark.parametrize(
    ("fields", "rule", "respond"),
    [
        ({"text": "@maths what is 6*7?"}, "addressed_to_others", False),
        ({"text": "what is 6*7?", "to": ["maths"]}, "addressed_to_others", False),
        ({"text": "@MATHS and @chef, what is 6*7?"}, "addressed_to_others", False),
        ({"text": "@maths and @helper, what is 6*7?"}, "mention", True),
        ({"text": "what is 6*7?", "to": ["maths", "helper"]}, "direct", True),
        ({"text": "@helpy what is 6*7?", "to": ["maths"]}, "mention", True),
        ({"text": "@everyone what is 6*7?"}, None, None),  # not a participant: unaddressed
        ({"text": "mail maths@example.org"}, None, None),
        ({"text": "@alice reminds me of 6*7"}, None, None),  # the sender mentioning itself
    ],
)
def test_addressed_means_addressed(
    fields: dict[str, object], rule: str | None, respond: bool | None
) -> None:
    """A message whose ``to`` or @mentions name participants is theirs: the others ignore it
    (rule ``addressed_to_others``); a mention of someone unknown addresses nobody."""
    text = fields.pop("text")
    env = chat(str(text), **fields)
    decision = policy().quick(env, 0, ["maths", "chef", "helper", "alice"])
    if rule is None:
        assert decision is None  # → the classifier
    else:
        assert decision is not None and (decision.rule, decision.respond) == (rule, respond)


def test_addressed_to_others_wins_over_the_classifier_even_when_it_would_answer() -> None:
    p = policy(respond_to_questions=True)
    decision = p.quick(chat("@maths what is 6*7?"), 0, ["maths", "helper"])
    assert decision is not None and decision.reason == "addressed to maths"
    assert decision.describe() == "ignore (addressed_to_others): addressed to maths"


@settings(max_examples=examples(200), deadline=None)
@given(
    to=st.lists(st.sampled_from(["helper", "maths", "chef", "zed"]), max_size=3),
    mentioned=st.lists(st.sampled_from(["helper", "maths", "chef", "nobody"]), max_size=3),
)
def test_an_agent_answers_an_addressed_message_exactly_when_it_is_an_addressee(
    to: list[str], mentioned: list[str]
) -> None:
    text = " ".join(f"@{m}" for m in mentioned) + " what now?"
    env = chat(text, to=to or None)
    known = ["helper", "maths", "chef", "zed", "alice"]
    decision = policy().quick(env, 0, known)
    addressees = {*to, *(m for m in mentioned if m in known)}
    if "helper" in addressees:
        assert decision is not None and decision.respond
    elif addressees:
        assert decision is not None and decision.rule == "addressed_to_others"
    else:
        assert decision is None


def _roster(**kinds: str) -> RosterView:
    names: dict[str, str | None] = {"helper": "Helpy", "coder": "Ada", "travel": None}
    names |= dict.fromkeys(kinds)
    return RosterView(names, None, {"helper": "agent", "coder": "agent", **kinds})


def test_a_reply_to_my_answer_is_answered_at_once_and_carries_the_conversation() -> None:
    p = policy()
    question = chat("dinner for 4?", id="m-q")
    mine = chat("Pasta for 4.", sender="helper", id="m-mine", correlation_id=["m-q"])
    p.observe(question)
    p.observe(mine)
    reply = chat("thanks! could you make that for 6 instead?", id="m-r", correlation_id=["m-mine"])
    decision = p.quick(reply, 0, _roster(alice="human"))
    assert decision is not None and (decision.rule, decision.respond) == ("reply", True)
    context = p.reply_context(reply)
    assert context is not None
    assert context.splitlines()[0] == "alice: thanks! could you make that for 6 instead?"
    assert "alice: dinner for 4?" in context and "you (helper): Pasta for 4." in context
    p.answered(reply, "reply", 0)
    assert p._rate_limited("#general", 0) is None  # addressed: free of the rate limit


def test_a_reply_to_someone_elses_message_is_addressed_to_them() -> None:
    p = policy()
    p.observe(chat("Pasta for 4.", sender="coder", id="m-coder"))
    reply = chat("thanks! for 6 instead?", id="m-r", correlation_id=["m-coder"])
    decision = p.quick(reply, 0, _roster(alice="human"))
    assert decision is not None
    assert (decision.rule, decision.respond) == ("addressed_to_others", False)
    assert decision.reason == "addressed to coder"


def test_an_agents_answer_to_me_is_not_answered() -> None:
    """Agents do not answer answers: no ping-pong between two agents replying to each other."""
    p = policy()
    p.observe(chat("@coder what is 6*7?", sender="helper", id="m-mine"))
    answer = chat("42", sender="coder", id="m-a", correlation_id=["m-mine"])
    decision = p.quick(answer, 0, _roster())
    assert decision is not None and (decision.rule, decision.respond) == ("not_addressed", False)


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("@Ada could you look?", "addressed_to_others"),
        ("@travel book a train", "addressed_to_others"),
        ("@Helpy please", "mention"),
    ],
)
def test_display_names_and_offline_participants_address_as_ids_do(text: str, rule: str) -> None:
    decision = policy().quick(chat(text), 0, _roster(alice="human"))
    assert decision is not None and decision.rule == rule
