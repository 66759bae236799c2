"""The addressing rule (``hubbub.protocol.addressing``): ``to``, @id or @display name, replies."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hubbub.protocol.addressing import (
    Authors,
    RosterView,
    addressing,
    mentioned,
    of,
    unambiguous_names,
)
from hubbub.protocol.envelope import Envelope
from tests.strength import examples

NAMES: dict[str, str | None] = {"coder": "Ada", "travel": "Phileas", "maths": None, "alice": None}
AUTHORS = {"m-answer": "coder", "m-q": "alice"}


def chat(text: str, sender: str = "alice", **fields: object) -> Envelope:
    return Envelope(kind="chat", id="m-new", from_=sender, channel="#general",
                    payload={"text": text}, **fields)  # type: ignore[arg-type]  # fmt: skip


def view(names: dict[str, str | None] | None = None) -> RosterView:
    return RosterView(NAMES if names is None else names, AUTHORS.get)


def test_a_display_name_mention_addresses_its_participant_in_any_case() -> None:
    assert of(chat("@Ada could you look at this?"), view()).ids == ["coder"]
    assert of(chat("thanks @ada."), view()).ids == ["coder"]
    assert of(chat("@ADA!"), view()).why("coder") == "mention"
    assert of(chat("mail ada@Ada.org or @Adam"), view()).ids == []


def test_ids_and_names_are_found_in_the_order_written() -> None:
    assert mentioned("@Phileas then @coder, then @maths", NAMES) == ["travel", "coder", "maths"]
    assert mentioned("@maths and @Ada", NAMES) == ["maths", "coder"]
    assert mentioned("@coder or @Ada: once", NAMES) == ["coder"]


def test_a_reply_is_addressed_to_the_author_of_the_message_it_replies_to() -> None:
    reply = of(chat("thanks! could you make that for 6?", correlation_id=["m-answer"]), view())
    assert reply.ids == ["coder"] and reply.why("coder") == "reply"
    assert of(chat("thanks", correlation_id="m-answer"), view()).ids == ["coder"]  # bare string
    assert of(chat("what was that?", correlation_id=["m-unknown"]), view()).ids == []


def test_the_sender_is_never_its_own_addressee() -> None:
    env = chat("@alice and @Ada", sender="alice", to=["alice"], correlation_id=["m-q"])
    assert of(env, view()).ids == ["coder"]


def test_to_comes_first_then_mentions_then_reply_authors_once_each() -> None:
    env = chat("@Phileas and @coder", to=["maths", "travel"], correlation_id=["m-answer"])
    got = of(env, view())
    assert got.ids == ["maths", "travel", "coder"]
    assert (got.why("maths"), got.why("travel"), got.why("coder")) == ("to", "to", "mention")


def test_an_ambiguous_display_name_addresses_nobody_but_ids_still_do() -> None:
    names: dict[str, str | None] = {"coder": "Ada", "coder2": "ada", "ada": None, "x": "Bob"}
    assert unambiguous_names(names) == {"x": "Bob"}
    assert of(chat("@Ada hello"), view(names)).ids == ["ada"]  # the id wins; names shared
    assert of(chat("@coder2 hello"), view(names)).ids == ["coder2"]
    assert of(chat("@Bob hello"), view(names)).ids == ["x"]


def test_an_offline_participant_is_still_addressed_when_the_roster_knows_it() -> None:
    """The roster view lists known participants, not only those online."""
    assert of(chat("@travel book a train"), view()).ids == ["travel"]
    assert of(chat("@travel book a train"), RosterView({"alice": None})).ids == []


def test_only_chat_replies_count() -> None:
    env = Envelope(kind="mcp/response", from_="alice", correlation_id=["m-answer"], payload={})
    assert of(env, view()).ids == []


def test_authors_are_bounded_and_keep_the_newest() -> None:
    authors = Authors(kept=3)
    for i in range(5):
        authors.heard(Envelope(kind="chat", id=f"m{i}", from_=f"p{i}", payload={}))
    assert len(authors) == 3
    assert authors.author_of("m1") is None and authors.author_of("m4") == "p4"


@settings(max_examples=examples(300), deadline=None)
@given(
    to=st.lists(st.sampled_from(["coder", "travel", "zed"]), max_size=2),
    handles=st.lists(
        st.sampled_from(["coder", "Ada", "ADA", "Phileas", "maths", "nobody"]), max_size=3
    ),
    reply=st.sampled_from([None, "m-answer", "m-q", "m-unknown"]),
    sender=st.sampled_from(["alice", "coder", "bob"]),
)
def test_addressees_are_exactly_to_mentions_and_reply_authors(
    to: list[str], handles: list[str], reply: str | None, sender: str
) -> None:
    text = " ".join(f"@{h}" for h in handles) + " ok?"
    got = addressing(
        sender=sender, to=to, text=text, replies_to=[reply] if reply else [],
        names=NAMES, author_of=AUTHORS.get,
    )  # fmt: skip
    by_handle = {"coder": "coder", "ada": "coder", "phileas": "travel", "maths": "maths"}
    expected = {*to, *(by_handle[h.lower()] for h in handles if h.lower() in by_handle)}
    if reply in AUTHORS:
        expected.add(AUTHORS[reply])
    expected.discard(sender)
    assert set(got.ids) == expected
    assert len(got.ids) == len(set(got.ids))
