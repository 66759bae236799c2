"""The one mention rule (protocol/mentions.py): ids, case, word boundaries, display names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hubbub.protocol.ids import PARTICIPANT_ID_RE
from hubbub.protocol.mentions import addresses, mentioned_ids, mentions


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("@maths what is 6*7?", True),
        ("hey @maths", True),
        ("hey @Maths, please", True),  # case does not matter
        ("ask @MATHS.", True),  # a full stop ends the sentence, not the id
        ("(@maths)", True),
        ("@maths: hi", True),
        ("bob@maths.org", False),  # an e-mail address
        ("see @maths.org", False),  # a dotted name continues
        ("@mathsy", False),  # a longer id
        ("@maths-bot", False),
        ("@maths_2", False),
        ("maths, what is 6*7?", False),  # a bare word is not a mention
        ("@@maths", False),
        ("", False),
    ],
)
def test_mentions_by_id(text: str, expected: bool) -> None:
    assert mentions(text, "maths") is expected


def test_mentions_by_display_name() -> None:
    assert mentions("thanks @Chef Anna!", "chef-1", "Chef Anna")
    assert not mentions("thanks Chef Anna!", "chef-1", "Chef Anna")
    assert not mentions("thanks @Chef Annabel", "chef-1", "Chef Anna")


def test_ids_with_dots_and_dashes() -> None:
    assert mentions("ping @a.b-c now", "a.b-c")
    assert not mentions("ping @a.b-cd now", "a.b-c")


def test_mentioned_ids_in_order_once_each() -> None:
    known = ["maths", "chef", "travel"]
    assert mentioned_ids("@Chef and @maths. then @chef again, @nobody", known) == [
        "chef",
        "maths",
    ]
    assert mentioned_ids("no mention here", known) == []
    assert mentioned_ids("mail bob@chef.org", known) == []


def test_addresses_by_to_or_mention() -> None:
    assert addresses(["maths"], "what is 6*7?", "maths")
    assert addresses(None, "@maths what is 6*7?", "maths")
    assert not addresses(["chef"], "what is 6*7?", "maths")
    assert not addresses(None, "what is 6*7?", "maths")


ids = st.from_regex(PARTICIPANT_ID_RE, fullmatch=True).filter(lambda s: not s.endswith("."))


@given(
    pid=ids,
    before=st.sampled_from(["", " ", "(", "hi "]),
    after=st.sampled_from(["", " ", ",", "!", ". next", "?"]),
)
def test_any_id_written_as_a_word_is_a_mention(pid: str, before: str, after: str) -> None:
    assert mentions(f"{before}@{pid}{after}", pid)
    assert mentions(f"{before}@{pid.upper()}{after}", pid)
    assert pid in mentioned_ids(f"{before}@{pid}{after}", [pid])


@given(pid=ids, tail=st.sampled_from(["x", "0", "_", "-", ".x"]))
def test_a_longer_name_is_not_a_mention(pid: str, tail: str) -> None:
    assert not mentions(f"@{pid}{tail}", pid)
