"""The one mention rule (``hubbub.protocol.mentions``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hubbub.protocol.mentions import mention_of, mentioned

PEOPLE = ["maths", "chef", "bob.smith", "bob", "a-1"]


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("@maths what is 6*7?", ["maths"]),
        ("@MATHS, and @Chef too", ["maths", "chef"]),
        ("@chef then @maths then @chef", ["chef", "maths"]),
        ("ask @maths.", ["maths"]),
        ("(@maths)", ["maths"]),
        ("mail x@maths.org", []),
        ("@maths.org is a site", []),
        ("@mathsy is someone else", []),
        ("@maths-bot is someone else", []),
        ("maths without the at", []),
        ("@@maths is a marker, not a mention", []),
        ("@everyone who can help?", []),
        ("@bob.smith hello", ["bob.smith"]),
        ("@bob hello", ["bob"]),
        ("@a-1 hi", ["a-1"]),
        ("", []),
    ],
)
def test_what_counts_as_a_mention(text: str, ids: list[str]) -> None:
    assert mentioned(text, PEOPLE) == ids


def test_display_names_count_and_map_to_the_id() -> None:
    names = {"helper": "Helpy"}
    assert mentioned("thanks @helpy!", ["helper", "maths"], names) == ["helper"]
    assert mentioned("thanks @helper", ["helper"], names) == ["helper"]
    assert mention_of("hey @HELPY and @helper", ["helper", "Helpy"]) == "@HELPY"
    assert mention_of("ask Helpy", ["helper", "Helpy"]) is None


@given(
    pid=st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,10}[A-Za-z0-9_]", fullmatch=True),
    before=st.sampled_from(["", " ", "hi ", "(", "\n"]),
    after=st.sampled_from(["", " ", "?", ", ok", ". Then", ")"]),
)
def test_an_at_id_standing_alone_is_always_a_mention(pid: str, before: str, after: str) -> None:
    text = f"{before}@{pid}{after}"
    assert mentioned(text, [pid]) == [pid]
    assert mentioned(text.upper(), [pid]) == [pid]
    assert mentioned(f"x{text}", [pid]) == ([pid] if before else [])


@given(text=st.text(max_size=60), ids=st.lists(st.sampled_from(PEOPLE), max_size=5))
def test_mentions_are_known_ids_each_once(text: str, ids: list[str]) -> None:
    found = mentioned(text, ids)
    assert len(found) == len(set(found)) and set(found) <= set(ids)
    assert all(f"@{pid}".lower() in text.lower() for pid in found)
