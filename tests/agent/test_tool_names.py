"""The participant/tool ↔ provider-safe name mapping: readable, exact, reversible."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hubbub.sdk.tool_names import (
    MAX_LENGTH,
    PROVIDER_NAME_RE,
    ToolNameMap,
    UnknownToolName,
    decode_tool_name,
    encode_tool_name,
)

participant_ids = st.text(
    alphabet="abcXYZ019_.-", min_size=1, max_size=32
)  # every id the gateway accepts has these characters only
tool_names = st.one_of(
    st.text(alphabet="abz09_.-/ ", min_size=0, max_size=40),
    st.text(min_size=0, max_size=20),  # anything at all, unicode included
)


@pytest.mark.parametrize(
    ("participant", "tool", "name"),
    [
        ("calculator", "multiply", "calculator__multiply"),
        ("math-service", "add", "math-service__add"),
        ("files", "read_file", "files__read_file"),
        ("my_bot", "get_time", "my_bot__get_time"),
        ("bot.v2", "get", "bot_2ev2___get"),
        ("a__b", "c", "a_5f_5fb___c"),
        ("_x", "y", "_5fx___y"),
        ("x", "a b/c", "x___a_20b_2fc"),
    ],
)
def test_examples(participant: str, tool: str, name: str) -> None:
    assert encode_tool_name(participant, tool) == name
    assert decode_tool_name(name) == (participant, tool)


@given(participant_ids, tool_names)
def test_encoding_round_trips_and_is_provider_safe(participant: str, tool: str) -> None:
    name = encode_tool_name(participant, tool)
    assert decode_tool_name(name) == (participant, tool)
    if len(name) <= MAX_LENGTH:
        assert PROVIDER_NAME_RE.match(name)


@given(st.text(alphabet="ab_-x5f2e", min_size=1, max_size=20))
def test_decoding_accepts_only_canonical_names(name: str) -> None:
    try:
        pair = decode_tool_name(name)
    except UnknownToolName:
        return
    assert encode_tool_name(*pair) == name  # so encode is injective


@given(st.lists(st.tuples(participant_ids, tool_names), max_size=30))
def test_the_map_gives_distinct_safe_names_that_resolve_back(
    pairs: list[tuple[str, str]],
) -> None:
    names = ToolNameMap()
    given_names = {pair: names.name_for(*pair) for pair in pairs}
    assert len(set(given_names.values())) == len(given_names)
    for pair, name in given_names.items():
        assert PROVIDER_NAME_RE.match(name), name
        assert names.resolve(name) == pair
        assert names.name_for(*pair) == name  # stable


def test_long_names_are_hashed_and_resolved_through_the_map() -> None:
    names = ToolNameMap()
    pid, tool = "p" * 32, "a_very_long_tool_name_" * 3
    name = names.name_for(pid, tool)
    assert len(name) == MAX_LENGTH and PROVIDER_NAME_RE.match(name)
    assert names.resolve(name) == (pid, tool)
    with pytest.raises(UnknownToolName):
        decode_tool_name(name)  # only the map knows it
    names.forget(pid)
    with pytest.raises(UnknownToolName, match="not an encoded participant/tool name"):
        names.resolve(name)
    assert len(names) == 0


def test_garbage_is_refused() -> None:
    for bad in ["", "calculator", "a___b___c", "bad name", "a_zz___b", "a___b__"]:
        with pytest.raises(UnknownToolName):
            decode_tool_name(bad)
