"""Tests for the MEW capability matcher (hubbub.protocol.capabilities)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from hubbub.protocol.capabilities import (
    MAX_CAPABILITIES,
    MAX_PATTERN_CHARS,
    MAX_PATTERNS,
    CapabilityError,
    CapabilitySet,
    can_send,
    glob_tokens,
    matches,
    names_kind,
    narrowed,
    pattern_type,
    string_matcher,
    validate_capabilities,
)
from tests.strength import examples

READ_TOOLS: dict[str, Any] = {
    "kind": "mcp/request",
    "payload": {"method": "tools/call", "params": {"name": "read_*"}},
}
NOT_TOOLS_CALL: dict[str, Any] = {"kind": "mcp/request", "payload": {"method": "!tools/call"}}

# (capabilities, kind, payload, expected)
CASES: list[Any] = [
    # --- plain kinds and globs -----------------------------------------------------------
    pytest.param([{"kind": "chat"}], "chat", None, True, id="literal-kind"),
    pytest.param([{"kind": "chat"}], "chat/acknowledge", None, False, id="literal-is-not-prefix"),
    pytest.param([{"kind": "mcp/*"}], "mcp/request", None, True, id="star-one-segment"),
    pytest.param([{"kind": "mcp/*"}], "mcp/a/b", None, False, id="star-does-not-cross-slash"),
    pytest.param([{"kind": "mcp/*"}], "mcp", None, False, id="star-needs-the-slash"),
    pytest.param([{"kind": "mcp/**"}], "mcp/a/b", None, True, id="double-star-crosses-slash"),
    pytest.param([{"kind": "**"}], "mcp/request", None, True, id="double-star-everything"),
    pytest.param([{"kind": "**"}], "chat", None, True, id="double-star-plain-kind"),
    pytest.param([{"kind": "*"}], "chat", None, True, id="lone-star-plain-kind"),
    # MEW v0.4: a lone "*" is every kind (its templates give humans {kind: "*"})
    pytest.param([{"kind": "*"}], "mcp/request", None, True, id="lone-star-every-kind"),
    pytest.param([{"kind": "mcp/*"}], "mcp/x/y", None, False, id="star-is-one-segment"),
    pytest.param([{"kind": "*/request"}], "mcp/request", None, True, id="star-first-segment"),
    pytest.param([{"kind": "*/request"}], "a/b/request", None, False, id="star-first-one-only"),
    pytest.param([{"kind": "chat?"}], "chat/", None, False, id="question-not-slash"),
    pytest.param(
        [{"kind": "reasoning/?hought"}], "reasoning/thought", None, True, id="question-one-char"
    ),
    pytest.param([{"kind": "mcp.*"}], "mcpXrequest", None, False, id="dot-is-literal"),
    pytest.param([{"kind": "mcp.*"}], "mcp.request", None, True, id="dot-literal-matches"),
    # --- negation ----------------------------------------------------------------------------
    pytest.param([{"kind": "!system/*"}], "chat", None, True, id="neg-kind-allows-other"),
    pytest.param([{"kind": "!system/*"}], "system/welcome", None, False, id="neg-kind-denies"),
    pytest.param([{"kind": "!system/*"}], "system/a/b", None, True, id="neg-inner-star-one-seg"),
    pytest.param([{"kind": "!!chat"}], "chat", None, True, id="double-negation"),
    # --- regex ---------------------------------------------------------------------------------
    pytest.param(
        [{"kind": "/^mcp/(request|response)$/"}], "mcp/request", None, True, id="regex-anchored"
    ),
    pytest.param(
        [{"kind": "/^mcp/(request|response)$/"}], "mcp/proposal", None, False, id="regex-no"
    ),
    pytest.param([{"kind": "/request/"}], "mcp/request", None, True, id="regex-is-a-search"),
    pytest.param([{"kind": "!/^system//"}], "system/error", None, False, id="neg-regex-denies"),
    pytest.param([{"kind": "!/^system//"}], "chat", None, True, id="neg-regex-allows"),
    # --- lists (one-of) ------------------------------------------------------------------------
    pytest.param([{"kind": ["chat", "mcp/*"]}], "mcp/response", None, True, id="kind-list-hit"),
    pytest.param([{"kind": ["chat", "mcp/*"]}], "reasoning/start", None, False, id="kind-list-no"),
    pytest.param([], "chat", None, False, id="no-capabilities"),
    # --- payload patterns ----------------------------------------------------------------------
    pytest.param(
        [READ_TOOLS],
        "mcp/request",
        {"method": "tools/call", "params": {"name": "read_file"}},
        True,
        id="payload-nested-glob",
    ),
    pytest.param(
        [READ_TOOLS],
        "mcp/request",
        {"method": "tools/call", "params": {"name": "write_file"}},
        False,
        id="payload-nested-glob-miss",
    ),
    pytest.param([READ_TOOLS], "mcp/request", None, False, id="payload-pattern-no-payload"),
    pytest.param(
        [READ_TOOLS], "mcp/request", {"method": "tools/call"}, False, id="payload-missing-key"
    ),
    pytest.param(
        [READ_TOOLS],
        "mcp/request",
        {"method": "tools/call", "params": "read_file"},
        False,
        id="payload-nested-not-object",
    ),
    pytest.param(
        [READ_TOOLS],
        "mcp/request",
        {"method": "tools/call", "params": {"name": "read_x", "arguments": {"p": 1}}, "z": 2},
        True,
        id="payload-extra-keys-free",
    ),
    pytest.param(
        [READ_TOOLS],
        "mcp/response",
        {"method": "tools/call", "params": {"name": "read_file"}},
        False,
        id="payload-ok-kind-wrong",
    ),
    pytest.param(
        [NOT_TOOLS_CALL], "mcp/request", {"method": "tools/list"}, True, id="neg-payload-allows"
    ),
    pytest.param(
        [NOT_TOOLS_CALL], "mcp/request", {"method": "tools/call"}, False, id="neg-payload-denies"
    ),
    pytest.param([NOT_TOOLS_CALL], "mcp/request", {}, False, id="neg-payload-key-required"),
    pytest.param(
        [NOT_TOOLS_CALL], "mcp/request", {"method": 5}, False, id="neg-payload-needs-string"
    ),
    pytest.param(
        [{"kind": "x", "payload": {"force": True}}], "x", {"force": True}, True, id="bool-equal"
    ),
    pytest.param(
        [{"kind": "x", "payload": {"force": True}}], "x", {"force": 1}, False, id="bool-is-not-1"
    ),
    pytest.param(
        [{"kind": "x", "payload": {"limit": 10}}], "x", {"limit": 10.0}, True, id="int-eq-float"
    ),
    pytest.param(
        [{"kind": "x", "payload": {"limit": 10}}], "x", {"limit": "10"}, False, id="int-not-str"
    ),
    pytest.param(
        [{"kind": "x", "payload": {"limit": 1}}], "x", {"limit": True}, False, id="int-not-bool"
    ),
    pytest.param([{"kind": "x", "payload": {"v": None}}], "x", {"v": None}, True, id="null-eq"),
    pytest.param([{"kind": "x", "payload": {"v": None}}], "x", {}, False, id="null-needs-key"),
    pytest.param(
        [{"kind": "x", "payload": {"n": "/1/"}}], "x", {"n": 1}, False, id="regex-needs-string"
    ),
    pytest.param(
        [{"kind": "x", "payload": {"m": ["tools/call", "tools/list"]}}],
        "x",
        {"m": "tools/list"},
        True,
        id="payload-one-of-hit",
    ),
    pytest.param(
        [{"kind": "x", "payload": {"m": ["tools/call", "tools/list"]}}],
        "x",
        {"m": "resources/read"},
        False,
        id="payload-one-of-miss",
    ),
    pytest.param(
        [{"kind": "x", "payload": {"name": ["read_*", "/^list_/"]}}],
        "x",
        {"name": "list_files"},
        True,
        id="payload-one-of-mixed-patterns",
    ),
    pytest.param(
        [{"kind": "x", "payload": {"p": [1, {"a": "b"}]}}],
        "x",
        {"p": {"a": "b", "c": 1}},
        True,
        id="payload-one-of-object-alternative",
    ),
    pytest.param(
        [{"kind": "x", "payload": {"q": r"/^SELECT .* FROM public\./"}}],
        "x",
        {"q": "SELECT * FROM public.users"},
        True,
        id="payload-regex-hit",
    ),
    pytest.param(
        [{"kind": "x", "payload": {"q": r"/^SELECT .* FROM public\./"}}],
        "x",
        {"q": "DELETE FROM public.users"},
        False,
        id="payload-regex-miss",
    ),
    pytest.param(
        [{"kind": "x", "payload": {"uri": "/public/**"}}],
        "x",
        {"uri": "/public/a/b.txt"},
        True,
        id="payload-double-star",
    ),
    pytest.param(
        [{"kind": "x", "payload": {"uri": "/public/*"}}],
        "x",
        {"uri": "/public/a/b.txt"},
        False,
        id="payload-star-one-segment",
    ),
    pytest.param(
        [{"kind": "x", "payload": {"uri": "/public/"}}],
        "x",
        {"uri": "/private/public/x"},
        True,
        id="slashed-literal-is-a-regex",
    ),
    pytest.param(
        [{"kind": "x", "payload": {"a": {"b": {"c": "d*"}}}}],
        "x",
        {"a": {"b": {"c": "dd", "e": 0}}},
        True,
        id="payload-three-levels",
    ),
    pytest.param(
        [{"kind": "x", "payload": {"tags": "a"}}],
        "x",
        {"tags": ["a"]},
        False,
        id="array-value-not-string",
    ),
    pytest.param([{"kind": "x", "payload": {}}], "x", None, True, id="empty-payload-pattern"),
    pytest.param(
        [{"kind": "x", "payload": {"a": 1}}], "x", ["a", 1], False, id="payload-not-object"
    ),
    pytest.param([{"kind": "x"}], "x", ["not", "an", "object"], True, id="no-pattern-any-body"),
    # --- lists of capabilities: a union, negation never denies another entry ----------------
    pytest.param(
        [{"kind": "mcp/*"}, NOT_TOOLS_CALL],
        "mcp/request",
        {"method": "tools/call"},
        True,
        id="union-broader-entry-wins",
    ),
    pytest.param(
        [NOT_TOOLS_CALL, {"kind": "mcp/response"}, {"kind": "mcp/proposal"}],
        "mcp/request",
        {"method": "tools/call"},
        False,
        id="restriction-written-right",
    ),
    pytest.param(
        [NOT_TOOLS_CALL, {"kind": "mcp/response"}, {"kind": "mcp/proposal"}],
        "mcp/proposal",
        {"method": "tools/call"},
        True,
        id="restriction-other-kind-ok",
    ),
]


@pytest.mark.parametrize(("caps", "kind", "payload", "expected"), CASES)
def test_matching_table(
    caps: list[dict[str, Any]], kind: str, payload: Any, expected: bool
) -> None:
    cap_set = CapabilitySet(caps)
    assert cap_set.allows(kind, payload) is expected
    assert cap_set.allows(kind, payload) is expected  # second call answers from the kind cache
    assert any(matches(cap, kind, payload) for cap in caps) is expected
    envelope: dict[str, Any] = {"kind": kind}
    if payload is not None:
        envelope["payload"] = payload
    assert can_send(caps, envelope) is expected


def test_table_is_large_enough() -> None:
    assert len(CASES) >= 40


# --- validation ----------------------------------------------------------------------------


def test_validate_exact_message_for_bad_kind() -> None:
    with pytest.raises(CapabilityError) as err:
        validate_capabilities([{"kind": "chat"}, {"kind": "x"}, {"kind": 5}])
    assert str(err.value) == (
        "capability 2: 'kind' must be a string pattern or a list of them, got 5"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("chat", "capabilities must be a list", id="not-a-list"),
        pytest.param({"kind": "chat"}, "capabilities must be a list", id="single-mapping"),
        pytest.param(["chat"], "capability 0: must be a mapping like {kind: 'chat'}", id="string"),
        pytest.param([{"kind": "a"}, {}], "capability 1: missing 'kind'", id="missing-kind"),
        pytest.param([{"kind": ""}], "capability 0: 'kind' must not be empty", id="empty-kind"),
        pytest.param([{"kind": []}], "got an empty list", id="empty-kind-list"),
        pytest.param([{"kind": ["chat", 3]}], "capability 0: kind[1]:", id="kind-list-item"),
        pytest.param([{"kind": ["a", ["b"]]}], "kind[1]", id="nested-kind-list"),
        pytest.param(
            [{"kind": "/[/"}],
            "capability 0: kind: invalid regular expression '/[/': unterminated character set",
            id="bad-kind-regex",
        ),
        pytest.param(
            [{"kind": "!/(/"}], "invalid regular expression '/(/'", id="bad-negated-regex"
        ),
        pytest.param(
            [{"kind": "x", "payload": "tools/call"}],
            "capability 0: 'payload' must be a mapping",
            id="payload-not-mapping",
        ),
        pytest.param(
            [{"kind": "x", "payload": {"a": {"b": "/(/"}}}],
            "capability 0: payload.a.b: invalid regular expression '/(/': missing )",
            id="bad-nested-regex",
        ),
        pytest.param(
            [{"kind": "x", "payload": {"a": ["ok", "/[/"]}}],
            "payload.a[1]: invalid regular expression",
            id="bad-regex-in-one-of",
        ),
        pytest.param(
            [{"kind": "x", "payload": {"a": []}}],
            "payload.a: an empty list matches nothing",
            id="empty-one-of",
        ),
        pytest.param(
            [{"kind": "x", "payload": {"a": {1, 2}}}],
            "payload.a: a payload pattern value must be a string pattern, number",
            id="bad-value-type",
        ),
        pytest.param(
            [{"kind": "x", "payload": {1: "a"}}], "payload keys must be strings", id="int-key"
        ),
        pytest.param(
            [{"kind": "x", "payload": {"$.ops[*].type": "a"}}],
            "payload key '$.ops[*].type' is a JSONPath/wildcard key",
            id="jsonpath-key",
        ),
        pytest.param(
            [{"kind": "x", "payload": {"params": {"**": "a"}}}],
            "payload.params: payload key '**'",
            id="deep-wildcard-key",
        ),
        pytest.param([{"kind": "x", "paylaod": {"a": 1}}], "unknown key 'paylaod'", id="typo-key"),
        pytest.param([{"kind": "x", "id": 3}], "'id' must be a string", id="bad-note"),
    ],
)
def test_validate_errors_name_the_problem(value: object, expected: str) -> None:
    with pytest.raises(CapabilityError) as err:
        validate_capabilities(value)
    assert expected in str(err.value)


def test_capability_error_is_value_error() -> None:
    assert issubclass(CapabilityError, ValueError)


def test_every_entry_point_validates() -> None:
    bad = {"kind": "x", "payload": {"a": "/(/"}}
    with pytest.raises(CapabilityError, match=r"capability 1: payload\.a"):
        CapabilitySet([{"kind": "chat"}, bad])
    with pytest.raises(CapabilityError, match="invalid regular expression"):
        matches(bad, "x", {"a": "b"})
    with pytest.raises(CapabilityError, match="granted capability 0"):
        CapabilitySet([]).granted([bad])
    with pytest.raises(CapabilityError, match="revoked capability 0"):
        CapabilitySet([]).revoked([bad])
    with pytest.raises(CapabilityError, match="capabilities must be a list"):
        CapabilitySet("chat")  # type: ignore[arg-type]


def test_validate_returns_normalized_copies() -> None:
    source: list[Any] = [
        {"kind": ("chat", "mcp/*")},
        {"kind": "a", "payload": None},
        {"kind": "b", "payload": {}},
        {"kind": "c", "payload": {"m": ("x", "y")}, "id": "cap-1", "description": "note"},
    ]
    result = validate_capabilities(source)
    assert result == [
        {"kind": ["chat", "mcp/*"]},
        {"kind": "a"},
        {"kind": "b"},
        {"kind": "c", "payload": {"m": ["x", "y"]}, "id": "cap-1", "description": "note"},
    ]
    result[3]["payload"]["m"].append("z")
    assert source[3]["payload"]["m"] == ("x", "y")


def test_notes_do_not_affect_matching() -> None:
    caps = CapabilitySet([{"kind": "chat", "id": "c1", "description": "talk"}])
    assert caps.allows("chat")
    assert not caps.allows("mcp/request")


# --- CapabilitySet: copies, grant, revoke --------------------------------------------------


def test_capabilities_property_returns_copies() -> None:
    caps = CapabilitySet([READ_TOOLS])
    copy = caps.capabilities
    copy[0]["payload"]["params"]["name"] = "**"
    copy.append({"kind": "**"})
    assert caps.capabilities == [READ_TOOLS]
    assert not caps.allows("chat")
    assert not caps.allows("mcp/request", {"method": "tools/call", "params": {"name": "rm"}})


def test_set_keeps_order_and_drops_duplicates() -> None:
    caps = CapabilitySet([{"kind": "b"}, {"kind": "a"}, {"kind": "b"}])
    assert caps.capabilities == [{"kind": "b"}, {"kind": "a"}]
    assert len(caps) == 2
    assert "CapabilitySet(" in repr(caps)


def test_granted_adds_without_touching_the_original() -> None:
    base = CapabilitySet([{"kind": "chat"}])
    assert not base.allows("mcp/request")  # now cached as False in base
    more = base.granted([{"kind": "mcp/request"}])
    assert more.allows("mcp/request")
    assert more.allows("chat")
    assert not base.allows("mcp/request")
    assert base.capabilities == [{"kind": "chat"}]


def test_granted_dedups_equal_entries() -> None:
    base = CapabilitySet([{"kind": "chat"}, READ_TOOLS])
    more = base.granted([{"kind": "chat"}, dict(READ_TOOLS), {"kind": "x"}, {"kind": "x"}])
    assert more.capabilities == [{"kind": "chat"}, READ_TOOLS, {"kind": "x"}]


def test_grant_equality_is_json_typed() -> None:
    base = CapabilitySet([{"kind": "x", "payload": {"a": True}}])
    more = base.granted([{"kind": "x", "payload": {"a": 1}}])
    assert len(more) == 2
    assert more.allows("x", {"a": 1})
    assert not base.allows("x", {"a": 1})


def test_revoked_removes_an_equal_entry_only() -> None:
    base = CapabilitySet([{"kind": "chat"}, READ_TOOLS, {"kind": "mcp/request"}])
    less = base.revoked([READ_TOOLS])
    assert less.capabilities == [{"kind": "chat"}, {"kind": "mcp/request"}]


def test_revoked_kind_only_entry_removes_every_entry_of_that_kind_pattern() -> None:
    base = CapabilitySet([{"kind": "chat"}, READ_TOOLS, NOT_TOOLS_CALL, {"kind": "mcp/request"}])
    less = base.revoked([{"kind": "mcp/request"}])
    assert less.capabilities == [{"kind": "chat"}]
    assert not less.allows("mcp/request", {"method": "tools/list"})
    assert base.allows("mcp/request", {"method": "tools/list"})


def test_revoked_entry_with_payload_keeps_kind_only_entry() -> None:
    base = CapabilitySet([{"kind": "mcp/request"}, READ_TOOLS])
    less = base.revoked([{"kind": "mcp/request", "payload": {"method": "tools/call"}}])
    assert less.capabilities == [{"kind": "mcp/request"}, READ_TOOLS]


def test_revoked_compares_patterns_not_meanings() -> None:
    base = CapabilitySet([{"kind": "mcp/*"}, {"kind": "mcp/request"}, {"kind": ["chat", "x"]}])
    less = base.revoked([{"kind": "mcp/*"}, {"kind": "chat"}])
    assert less.capabilities == [{"kind": "mcp/request"}, {"kind": ["chat", "x"]}]
    assert less.allows("mcp/request")
    assert not less.allows("mcp/response")
    gone = less.revoked([{"kind": ["chat", "x"]}])
    assert not gone.allows("chat")


def test_revoking_something_not_held_changes_nothing() -> None:
    base = CapabilitySet([{"kind": "chat"}])
    assert base.revoked([{"kind": "mcp/*"}]).capabilities == [{"kind": "chat"}]


# --- can_send ------------------------------------------------------------------------------


def test_can_send_sdk_spec_examples() -> None:
    caps = [{"kind": "chat"}, NOT_TOOLS_CALL, {"kind": "mcp/proposal"}]
    assert can_send(caps, {"kind": "chat"})
    assert not can_send(caps, {"kind": "mcp/request", "payload": {"method": "tools/call"}})
    assert can_send(caps, {"kind": "mcp/request", "payload": {"method": "tools/list"}})
    assert can_send(caps, {"kind": "mcp/proposal", "payload": {"method": "tools/call"}})


def test_can_send_accepts_a_capability_set() -> None:
    caps = CapabilitySet([{"kind": "chat"}])
    assert can_send(caps, {"kind": "chat", "payload": {"text": "hi"}})
    assert not can_send(caps, {"kind": "mcp/request"})


@pytest.mark.parametrize("envelope", [{}, {"kind": None}, {"kind": 3}, {"payload": {}}])
def test_can_send_without_a_string_kind_is_false(envelope: dict[str, Any]) -> None:
    assert not can_send([{"kind": "**"}], envelope)


def test_allows_non_string_kind_is_false() -> None:
    caps = CapabilitySet([{"kind": "**"}])
    assert not caps.allows(None)  # type: ignore[arg-type]
    assert not matches({"kind": "**"}, 5)  # type: ignore[arg-type]


def test_kind_cache_is_bounded_and_stays_correct() -> None:
    caps = CapabilitySet([{"kind": "k/*"}, {"kind": "p", "payload": {"a": "b"}}])
    for index in range(10_000):
        assert caps.allows(f"k/{index}")
        assert not caps.allows(f"k/{index}/x")
    assert len(caps._cache) <= 4096
    assert caps.allows("p", {"a": "b"})
    assert not caps.allows("p", {"a": "c"})
    assert caps.allows("p", {"a": "b"})


# --- property tests ------------------------------------------------------------------------


def _glob_oracle(pattern: str, value: str) -> bool:
    """An independent backtracking glob matcher: ``**`` any, ``*`` no '/', ``?`` one non-'/'."""
    if not pattern:
        return not value
    if pattern.startswith("**"):
        rest = pattern[2:].lstrip("*")
        return any(_glob_oracle(rest, value[i:]) for i in range(len(value) + 1))
    head = pattern[0]
    if head == "*":
        rest = pattern[1:]
        for i in range(len(value) + 1):
            if _glob_oracle(rest, value[i:]):
                return True
            if i < len(value) and value[i] == "/":
                return False
        return False
    if not value:
        return False
    if head == "?":
        return value[0] != "/" and _glob_oracle(pattern[1:], value[1:])
    return head == value[0] and _glob_oracle(pattern[1:], value[1:])


KINDS = st.text(alphabet="ab/", max_size=7)
GLOBS = st.text(alphabet="ab/*?", min_size=1, max_size=7).filter(
    lambda g: not (len(g) >= 2 and g[0] == "/" and g[-1] == "/")
)
REGEXES = st.text(alphabet="ab.^$|/", max_size=5).map(lambda body: f"/{body}/")
STRING_PATTERNS = st.one_of(GLOBS, GLOBS.map(lambda g: "!" + g), REGEXES)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-1, 2), st.sampled_from([1.0, 0.5]))
VALUE_PATTERNS = st.recursive(
    st.one_of(STRING_PATTERNS, SCALARS),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=3),
        st.dictionaries(st.sampled_from("abc"), inner, max_size=2),
    ),
    max_leaves=6,
)
CAPABILITIES = st.fixed_dictionaries(
    {"kind": st.one_of(STRING_PATTERNS, st.lists(STRING_PATTERNS, min_size=1, max_size=3))},
    optional={"payload": st.dictionaries(st.sampled_from("abc"), VALUE_PATTERNS, max_size=3)},
)
JSON_VALUES = st.recursive(
    st.one_of(KINDS, SCALARS),
    lambda inner: st.one_of(
        st.lists(inner, max_size=2), st.dictionaries(st.sampled_from("abc"), inner, max_size=3)
    ),
    max_leaves=8,
)
PAYLOADS = st.one_of(st.none(), st.dictionaries(st.sampled_from("abc"), JSON_VALUES, max_size=3))


@settings(max_examples=examples(400), deadline=None)
@given(pattern=GLOBS, kind=KINDS)
def test_glob_semantics_match_an_independent_oracle(pattern: str, kind: str) -> None:
    expected = _glob_oracle(pattern, kind)
    every = pattern == "*"  # a lone "*" kind is every kind (MEW v0.4); elsewhere a glob
    assert matches({"kind": pattern}, kind) is (expected or every)
    assert matches({"kind": "!" + pattern}, kind) is (not expected)
    assert matches({"kind": "x", "payload": {"v": pattern}}, "x", {"v": kind}) is expected


@settings(max_examples=examples(300), deadline=None)
@given(
    caps=st.lists(CAPABILITIES, max_size=4),
    queries=st.lists(st.tuples(KINDS, PAYLOADS), min_size=1, max_size=8),
)
def test_cached_set_agrees_with_uncached_matches(
    caps: list[dict[str, Any]], queries: list[tuple[str, dict[str, Any] | None]]
) -> None:
    cap_set = CapabilitySet(caps)
    # Several payloads for the same kinds, and repeats, so answers come from the kind cache.
    for kind, payload in queries + queries:
        expected = any(matches(cap, kind, payload) for cap in caps)
        assert cap_set.allows(kind, payload) is expected


def test_a_runaway_regex_denies_instead_of_stalling() -> None:
    """A catastrophic pattern gives up after a few ms and counts as no match."""
    caps = CapabilitySet([{"kind": "chat", "payload": {"text": "/^(a|aa)+$/"}}])
    assert caps.allows("chat", {"text": "aaaa"})
    assert not caps.allows("chat", {"text": "a" * 40 + "!"})


# ---------------------------------------------------------------------------------------------
# narrowed: what a participant asked for, within what it may have
# ---------------------------------------------------------------------------------------------

NARROW_CASES: list[Any] = [
    pytest.param([{"kind": "chat"}], [{"kind": "**"}], [{"kind": "chat"}], id="within-everything"),
    pytest.param([{"kind": "**"}], [{"kind": "chat"}], [{"kind": "chat"}], id="everything-cut"),
    pytest.param(
        [{"kind": "mcp/*"}],
        [{"kind": "mcp/request"}],
        [{"kind": "mcp/request"}],
        id="glob-cut-to-literal",
    ),
    pytest.param(
        [{"kind": "mcp/request"}], [{"kind": "mcp/*"}], [{"kind": "mcp/request"}], id="literal-kept"
    ),
    pytest.param([{"kind": "space/kick"}], [{"kind": "mcp/*"}], [], id="outside"),
    pytest.param(
        [{"kind": ["chat", "space/kick"]}],
        [{"kind": "**"}, {"kind": "chat"}],
        [{"kind": ["chat", "space/kick"]}, {"kind": "chat"}],
        id="kind-list-kept-whole",
    ),
    pytest.param(
        [{"kind": ["chat", "space/kick"]}],
        [{"kind": "chat"}],
        [{"kind": "chat"}],
        id="kind-list-cut",
    ),
    pytest.param(
        [{"kind": "mcp/request"}],
        [{"kind": "mcp/*", "payload": {"method": "tools/list"}}],
        [{"kind": "mcp/request", "payload": {"method": "tools/list"}}],
        id="payload-from-bound",
    ),
    pytest.param(
        [{"kind": "mcp/request", "payload": {"params": {"name": "read_*"}}}],
        [{"kind": "mcp/request", "payload": {"method": "tools/call"}}],
        [
            {
                "kind": "mcp/request",
                "payload": {"params": {"name": "read_*"}, "method": "tools/call"},
            }
        ],
        id="payload-keys-joined",
    ),
    pytest.param(
        [{"kind": "mcp/request", "payload": {"method": "tools/*"}}],
        [{"kind": "mcp/request", "payload": {"method": ["tools/call", "resources/read"]}}],
        [{"kind": "mcp/request", "payload": {"method": "tools/call"}}],
        id="one-of-cut",
    ),
    pytest.param(
        [{"kind": "mcp/request", "payload": {"method": "tools/list"}}],
        [{"kind": "mcp/request", "payload": {"method": "!tools/call"}}],
        [{"kind": "mcp/request", "payload": {"method": "tools/list"}}],
        id="literal-within-negation",
    ),
    pytest.param(
        [{"kind": "mcp/request", "payload": {"method": "tools/*"}}],
        [{"kind": "mcp/request", "payload": {"method": "!tools/call"}}],
        [],
        id="glob-and-negation-not-expressible",
    ),
    pytest.param([{"kind": "a*"}], [{"kind": "*b"}], [], id="unrelated-globs-give-nothing"),
    pytest.param(
        [{"kind": "chat", "id": "talk"}],
        [{"kind": "**"}],
        [{"kind": "chat", "id": "talk"}],
        id="notes-kept",
    ),
]


@pytest.mark.parametrize(("asked", "bounds", "expected"), NARROW_CASES)
def test_narrowed(asked: list[Any], bounds: list[Any], expected: list[Any]) -> None:
    assert narrowed(asked, bounds) == expected


def test_narrowed_refuses_a_bad_request() -> None:
    with pytest.raises(CapabilityError, match="requested capability 0"):
        narrowed([{"kinds": "chat"}], [{"kind": "**"}])


_KINDS = st.sampled_from(["chat", "mcp/request", "mcp/response", "mcp/a/b", "space/kick"])
_KIND_PATTERNS = st.sampled_from(
    ["chat", "mcp/*", "mcp/**", "**", "*", "mcp/request", "!chat", "/^mcp/", "*/request", "m*"]
)
_METHODS = st.sampled_from(["tools/call", "tools/list", "ping", "x/y/z"])
_METHOD_PATTERNS = st.sampled_from(
    ["tools/call", "tools/*", "!tools/call", "**", "/list/", "ping", "*"]
)
_CAP = st.builds(
    lambda kind, method: {"kind": kind} | ({"payload": {"method": method}} if method else {}),
    st.one_of(_KIND_PATTERNS, st.lists(_KIND_PATTERNS, min_size=1, max_size=3)),
    st.one_of(st.none(), _METHOD_PATTERNS, st.lists(_METHOD_PATTERNS, min_size=1, max_size=2)),
)


@settings(max_examples=examples(300), deadline=None)
@given(
    asked=st.lists(_CAP, max_size=3),
    bounds=st.lists(_CAP, max_size=3),
    kind=_KINDS,
    method=st.one_of(st.none(), _METHODS),
)
def test_narrowed_never_allows_more_than_either(
    asked: list[Any], bounds: list[Any], kind: str, method: str | None
) -> None:
    payload = None if method is None else {"method": method}
    cut = CapabilitySet(narrowed(asked, bounds))
    if cut.allows(kind, payload):
        assert CapabilitySet(asked).allows(kind, payload)
        assert CapabilitySet(bounds).allows(kind, payload)


# --- hostile patterns (issue 21): linear globs, bounded lists, one budget per envelope ------


def _backtracking_glob(glob: str) -> re.Pattern[str]:
    """The glob as the old ``re`` translation read it: the meaning the automaton must keep."""
    wild = {"**": ".*", "*": "[^/]*", "?": "[^/]"}
    return re.compile("".join(wild.get(t) or re.escape(t) for t in glob_tokens(glob)), re.DOTALL)


_GLOB_CHARS = st.sampled_from(["a", "b", "/", "*", "?", "\n", "é"])
_VALUE_CHARS = st.sampled_from(["a", "b", "/", "*", "?", "\n", "é", "c"])


@settings(max_examples=examples(2000), deadline=None)
@given(glob=st.text(_GLOB_CHARS, max_size=8), value=st.text(_VALUE_CHARS, max_size=10))
def test_the_linear_glob_matches_what_the_regex_translation_did(glob: str, value: str) -> None:
    assume(pattern_type(glob) in ("glob", "literal"))  # not a /regex/ nor a !negation
    expected = _backtracking_glob(glob).fullmatch(value) is not None
    assert string_matcher(glob)(value) is expected


@pytest.mark.parametrize(
    ("glob", "value", "expected"),
    [
        ("*a*a*b", "a" * 60_000, False),  # cubic for a backtracking matcher
        ("*a*a*b", "a" * 60_000 + "b", True),
        ("*a*a*b", "a" * 60_000 + "/", False),  # a / in the value: read by the automaton
        ("**a**a**b", "a/" * 30_000 + "b", True),
        ("*search*", "search" * 10_000 + "/", False),  # quadratic for a backtracking matcher
        ("*search*", "x" * 60_000 + "search", True),
        ("**/x", "a/" * 30_000 + "x", True),
        ("?" * 500, "a" * 500, True),
        ("*" + "?*" * 200 + "/", "a" * 30_000, False),  # many automaton states
    ],
)
def test_adversarial_globs_answer_within_one_envelope_budget(
    glob: str, value: str, expected: bool
) -> None:
    caps = CapabilitySet([{"kind": "chat", "payload": {"text": glob}}])
    assert caps.verdict("chat", {"text": value}) == ("allowed" if expected else "denied")


def test_runaway_regexes_share_one_budget_and_the_answer_says_so() -> None:
    runaway = [f"/(a|aa)+{i}$/" for i in range(200)]
    caps = CapabilitySet([{"kind": "chat", "payload": {"text": runaway}}])
    assert caps.verdict("chat", {"text": "a" * 40 + "!"}) == "too_costly"
    assert caps.allows("chat", {"text": "a" * 40 + "!"}) is False
    assert caps.verdict("chat", {"text": "7"}) == "denied"  # cheap values still get answers


@pytest.mark.parametrize(
    ("caps", "limit"),
    [
        ([{"kind": f"k{i}"} for i in range(MAX_CAPABILITIES + 1)], "MAX_CAPABILITIES"),
        ([{"kind": [f"k{i}" for i in range(MAX_PATTERNS + 1)]}], "MAX_PATTERNS"),
        ([{"kind": "x" * (MAX_PATTERN_CHARS + 1)}], "MAX_PATTERN_CHARS"),
        ([{"kind": "x", "payload": {"a": "y" * (MAX_PATTERN_CHARS + 1)}}], "MAX_PATTERN_CHARS"),
        (
            [{"kind": "k", "payload": {"v": ["z" * 500] * 40}}],
            "MAX_CAPABILITY_BYTES",
        ),
        ([{"kind": "/(a{60000}){60000}/"}], "MAX_REGEX_REPEATS"),  # compiling: forever
        ([{"kind": "!/a{4294967294}/"}], "MAX_REGEX_REPEATS"),
        (
            [{"kind": "x", "payload": {"q": [f"/(b{{100}}){{10}}{i}/" for i in range(11)]}}],
            "MAX_REGEX_REPEATS",
        ),
    ],
)
def test_capability_lists_are_bounded_and_the_error_names_the_limit(
    caps: list[Any], limit: str
) -> None:
    with pytest.raises(CapabilityError, match=limit):
        validate_capabilities(caps)
    with pytest.raises(CapabilityError, match=limit):
        CapabilitySet(caps)


def test_counted_regexes_within_the_limit_are_accepted() -> None:
    caps = CapabilitySet([{"kind": "x", "payload": {"phone": r"/^\d{3}-\d{4}$/", "t": "/a{100}/"}}])
    assert caps.allows("x", {"phone": "555-1234", "t": "a" * 100})


def test_a_grant_past_the_limit_is_refused() -> None:
    held = CapabilitySet([{"kind": f"k{i}"} for i in range(MAX_CAPABILITIES)])
    with pytest.raises(CapabilityError, match="MAX_CAPABILITIES"):
        held.granted([{"kind": "one-more"}])
    assert len(held.granted([{"kind": "k0"}])) == MAX_CAPABILITIES  # a repeat adds nothing


def test_removing_nothing_names_the_revoked_entries_that_match_no_held_entry() -> None:
    human = CapabilitySet([{"kind": "!capability/*"}, {"kind": "capability/grant-ack"}])
    assert human.removing_nothing([{"kind": "**"}]) == [{"kind": "**"}]
    assert human.removing_nothing([{"kind": "!capability/*"}]) == []
    mixed = CapabilitySet([{"kind": "mcp/*", "payload": {"method": "x"}}])
    assert mixed.removing_nothing([{"kind": "mcp/*"}]) == []  # a kind-only entry: that kind
    assert mixed.removing_nothing([{"kind": "mcp/*", "payload": {"method": "y"}}]) != []


def test_keys_mew_writes_beyond_kind_and_payload_are_ignored() -> None:
    """MEW's grants carry ``to``; its gateway ignores it, and so does hubbub."""
    caps = CapabilitySet([{"kind": "chat", "to": ["bob"], "note": "x"}])
    assert caps.allows("chat", {"text": "hi"}) and caps.capabilities == [{"kind": "chat"}]


def test_equal_lists_share_one_compiled_set_and_a_grant_changes_only_its_own() -> None:
    """All of an open space's participants have the same list: one compiled set serves them
    (an idle connection does not pay for its own), and granting one of them more gives
    that one a new set."""
    alice = CapabilitySet.shared([{"kind": "chat"}, {"kind": "channel/*"}])
    bob = CapabilitySet.shared([{"kind": "chat"}, {"kind": "channel/*"}])
    carol = CapabilitySet.shared([{"kind": "chat"}])
    assert alice is bob and alice is not carol
    assert alice.with_baseline() is bob.with_baseline()
    granted = alice.granted([{"kind": "reasoning/*"}])
    assert granted.allows("reasoning/start") and not bob.allows("reasoning/start")
    with pytest.raises(CapabilityError):
        CapabilitySet.shared([{"kind": 3}])


# ------------------------------------------------------------------ names_kind (guarded kinds)


@pytest.mark.parametrize(
    ("caps", "payload", "named"),
    [
        ([{"kind": "participant/shutdown"}], None, True),
        ([{"kind": "participant/*"}], None, True),
        ([{"kind": "participant/**"}], None, True),
        ([{"kind": ["chat", "participant/shut*"]}], None, True),
        ([{"kind": "participant/shutdown", "payload": {"reason": "ok"}}], {"reason": "ok"}, True),
        ([{"kind": "participant/shutdown", "payload": {"reason": "ok"}}], {"reason": "x"}, False),
        ([{"kind": "**"}], None, False),
        ([{"kind": "*"}], None, False),
        ([{"kind": "!capability/*"}], None, False),
        ([{"kind": "/^participant/"}], None, False),
        ([{"kind": "*/shutdown"}], None, False),
        ([{"kind": ["**", "participant/clear"]}], None, False),
        ([{"kind": "participant/clear"}], None, False),
        ([], None, False),
    ],
)
def test_names_kind_counts_only_patterns_that_name_the_kind(
    caps: list[dict[str, Any]], payload: dict[str, Any] | None, named: bool
) -> None:
    assert names_kind(caps, "participant/shutdown", payload) is named
