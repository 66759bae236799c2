"""Marker parsing and formatting: ``@@cb:Ns@@``, ``@@cb:Ns#ch@@`` and ``@@sleep:Ns[:mode]@@``."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hubbub.protocol.markers import (
    MAX_DURATION_S,
    SLEEP_MODES,
    CallbackMarker,
    Parsed,
    SleepMarker,
    callback_marker,
    clamp_duration,
    has_marker,
    max_duration_of,
    parse_markers,
    sleep_marker,
)

# ---------------------------------------------------------------------------- callback forms


def test_plain_text_is_untouched() -> None:
    text = "  no markers here, just @ signs @ and a #channel  "
    assert parse_markers(text) == Parsed(text)
    assert parse_markers(text).relayed
    assert not has_marker(text)


def test_dm_callback_form() -> None:
    p = parse_markers("working on it @@cb:30s@@check the build")
    assert p.text == "working on it"
    assert p.callbacks == (CallbackMarker(30.0, "check the build", None),)
    assert p.sleeps == ()
    assert p.relayed


def test_channel_callback_form() -> None:
    p = parse_markers("standup soon @@cb:60s#dev-team_2@@standup time")
    assert p.text == "standup soon"
    assert p.callbacks == (CallbackMarker(60.0, "standup time", "#dev-team_2"),)


@pytest.mark.parametrize(
    ("marker", "seconds"),
    [("@@cb:2.5s@@x", 2.5), ("@@cb:.5s@@x", 0.5), ("@@cb:0s@@x", 0.0), ("@@cb:007s@@x", 7.0)],
)
def test_callback_decimals(marker: str, seconds: float) -> None:
    (cb,) = parse_markers(marker).callbacks
    assert cb.seconds == seconds
    assert cb.payload == "x"


@pytest.mark.parametrize(
    ("marker", "seconds"),
    [("@@sleep:.5s@@", 0.5), ("@@sleep:2.5s@@", 2.5), ("@@sleep:10s@@", 10.0)],
)
def test_sleep_decimals(marker: str, seconds: float) -> None:
    assert parse_markers(marker).sleeps == (SleepMarker(seconds, "default"),)


def test_json_payload_is_kept_verbatim() -> None:
    payload = '{"csma":"check","reply_to":1712345678901}'
    p = parse_markers(f"@@cb:3s@@{payload}")
    assert p.callbacks == (CallbackMarker(3.0, payload),)
    assert not p.relayed


# ---------------------------------------------------------------------------- payload bounds


def test_payload_runs_to_the_end_of_the_message_newlines_and_all() -> None:
    # the audit's probe: the second line of a payload used to be relayed to everyone
    p = parse_markers("@@cb:5s@@secret line1\nsecret line2")
    assert p.callbacks == (CallbackMarker(5.0, "secret line1\nsecret line2"),)
    assert p.text == ""
    assert not p.relayed


def test_payload_is_verbatim_blanks_included() -> None:
    p = parse_markers("first @@cb:5s@@ remind me  \nsecond line\n")
    assert p.callbacks == (CallbackMarker(5.0, " remind me  \nsecond line\n"),)
    assert p.text == "first"


def test_payload_ends_at_next_marker() -> None:
    p = parse_markers("@@cb:1s@@ one @@cb:2s#ops@@ two\t@@sleep:3s@@ tail")
    assert p.callbacks == (CallbackMarker(1.0, " one "), CallbackMarker(2.0, " two\t", "#ops"))
    assert p.sleeps == (SleepMarker(3.0),)
    # a sleep marker carries no payload: what follows it is text
    assert p.text == "tail"


def test_payload_of_only_blanks_is_kept_and_may_be_empty() -> None:
    assert parse_markers("@@cb:1s@@   \t  \n").callbacks == (CallbackMarker(1.0, "   \t  \n"),)
    assert parse_markers("text @@cb:1s@@").callbacks == (CallbackMarker(1.0, ""),)


def test_adjacent_markers_give_empty_payload() -> None:
    p = parse_markers("@@cb:1s@@@@cb:2s@@y")
    assert p.callbacks == (CallbackMarker(1.0, ""), CallbackMarker(2.0, "y"))


def test_payload_may_contain_single_at_signs_and_hashes() -> None:
    p = parse_markers("@@cb:1s@@@alice #ops x@y")
    assert p.callbacks == (CallbackMarker(1.0, "@alice #ops x@y"),)


def test_malformed_marker_inside_a_payload_is_payload() -> None:
    p = parse_markers("@@cb:1s@@see @@cb:5m@@ later")
    assert p.callbacks == (CallbackMarker(1.0, "see @@cb:5m@@ later"),)


def test_several_markers_in_one_message() -> None:
    text = (
        "Plan for today.\n"
        "Middle paragraph @@sleep:30s:buffer@@ continues.\n"
        "End.\n"
        "@@cb:10s@@first check\n"
        "@@cb:1.25s#general@@ channel ping\nsecond line"
    )
    p = parse_markers(text)
    assert p.callbacks == (
        CallbackMarker(10.0, "first check\n"),
        CallbackMarker(1.25, " channel ping\nsecond line", "#general"),
    )
    assert p.sleeps == (SleepMarker(30.0, "buffer"),)
    assert p.text == "Plan for today.\nMiddle paragraph continues.\nEnd."


# ---------------------------------------------------------------------------- sleep modes


@pytest.mark.parametrize(
    ("suffix", "mode"), [("", "default"), (":default", "default"), (":buffer", "buffer")]
)
def test_sleep_modes(suffix: str, mode: str) -> None:
    assert parse_markers(f"@@sleep:5s{suffix}@@").sleeps == (SleepMarker(5.0, mode),)  # type: ignore[arg-type]


def test_sleep_drop_mode() -> None:
    assert parse_markers("bye @@sleep:5s:drop@@").sleeps == (SleepMarker(5.0, "drop"),)


def test_several_sleeps_are_all_reported_in_order() -> None:
    p = parse_markers("@@sleep:1s@@ @@sleep:2s:drop@@")
    assert p.sleeps == (SleepMarker(1.0), SleepMarker(2.0, "drop"))
    assert not p.relayed


# ---------------------------------------------------------------------------- malformed


@pytest.mark.parametrize(
    "text",
    [
        "@@cb:5m@@x",
        "@@cb:s@@",
        "@@sleep:5s:nap@@",
        "@@cb:5s#bad channel@@",
        "@@cb:5@@x",
        "@@cb:-5s@@x",
        "@@cb:1.s@@x",
        "@@cb:1s#@@x",
        "@@cb:1s#" + "c" * 32 + "@@x",
        "@@sleep:5s:@@",
        "@@sleep:5@@",
        "@@sleep:s@@",
        "@@sleep5s@@",
        "@@cb:1e3s@@x",
        "@@cb:5s@x",
        "@cb:5s@@x",
    ],
)
def test_malformed_markers_stay_as_text(text: str) -> None:
    p = parse_markers(text)
    assert p == Parsed(text)
    assert p.relayed


def test_malformed_marker_next_to_a_good_one() -> None:
    p = parse_markers("@@cb:5m@@x @@sleep:2s@@")
    assert p.sleeps == (SleepMarker(2.0),)
    assert p.callbacks == ()
    assert p.text == "@@cb:5m@@x"


def test_longest_valid_channel_name() -> None:
    ch = "#" + "c" * 31
    assert parse_markers(f"@@cb:1s{ch}@@x").callbacks == (CallbackMarker(1.0, "x", ch),)


# ---------------------------------------------------------------------------- relayed / tidy


@pytest.mark.parametrize(
    "text",
    [
        "@@sleep:5s@@",
        "  @@sleep:5s:drop@@\n",
        "@@cb:5s@@ payload only",
        "@@sleep:1s@@ @@cb:2s@@ hi\n@@cb:3s#ops@@ there",
        "@@cb:2s@@ line one\nline two\n",
    ],
)
def test_message_of_only_markers_is_not_relayed(text: str) -> None:
    p = parse_markers(text)
    assert p.text == ""
    assert not p.relayed
    assert p.callbacks or p.sleeps


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a @@sleep:1s@@ b", "a b"),
        ("a @@sleep:1s@@b", "a b"),
        ("a@@sleep:1s@@ b", "a b"),
        ("a@@sleep:1s@@b", "ab"),
        ("a  @@sleep:1s@@  b", "a  b"),  # blanks already doubled on each side: not more
        ("line1\n@@sleep:1s@@\nline3", "line1\nline3"),
        ("line1\n@@cb:3s@@ pay\nline3", "line1"),
        ("para1\n\n@@sleep:1s@@\n\npara2", "para1\n\npara2"),
        ("para1\n\n@@cb:1s@@ x\n\npara2", "para1"),
        ("x @@cb:1s@@\n\ny", "x"),
        ("para1\n\n@@cb:1s@@ x\n@@sleep:1s@@\n\npara2", "para1\n\npara2"),
        ("  indented start @@cb:1s@@ x", "indented start"),
        ("a \n@@sleep:1s@@\n  indented", "a\n  indented"),
        ("a\n@@sleep:1s@@ @@sleep:2s@@\nb", "a\nb"),
        ("a\r\n@@sleep:1s@@\r\nb", "a\r\nb"),
        ("a\t@@sleep:1s@@\tb", "a\tb"),
    ],
)
def test_stripping_leaves_no_doubled_blanks_or_empty_lines(text: str, expected: str) -> None:
    assert parse_markers(text).text == expected


def test_has_marker() -> None:
    assert has_marker("x @@cb:1s@@ y")
    assert has_marker("@@")
    assert not has_marker("@ @")


# ---------------------------------------------------------------------------- formatting


def test_format_examples() -> None:
    assert callback_marker(5) == "@@cb:5s@@"
    assert callback_marker(2.5, "ping") == "@@cb:2.5s@@ping"
    assert callback_marker(0.5, "x", "#ops") == "@@cb:0.5s#ops@@x"
    assert callback_marker(1234.567, "p") == "@@cb:1234.567s@@p"
    assert callback_marker(1e7, max_s=1e7) == "@@cb:10000000s@@"
    assert callback_marker(1e-5) == "@@cb:0.00001s@@"
    assert callback_marker(-0.0) == "@@cb:0s@@"
    assert sleep_marker(0.5) == "@@sleep:0.5s@@"
    assert sleep_marker(30, "buffer") == "@@sleep:30s:buffer@@"
    assert sleep_marker(30, "drop") == "@@sleep:30s:drop@@"


@pytest.mark.parametrize("payload", ["has @@ inside", "@@", "a@@\nb"])
def test_format_refuses_unparseable_payload(payload: str) -> None:
    with pytest.raises(ValueError, match="payload"):
        callback_marker(1, payload)


@pytest.mark.parametrize("seconds", [-1, -0.001, float("-inf"), float("nan")])
def test_format_refuses_bad_durations(seconds: float) -> None:
    with pytest.raises(ValueError, match="duration"):
        callback_marker(seconds)
    with pytest.raises(ValueError, match="duration"):
        sleep_marker(seconds)


@pytest.mark.parametrize("seconds", [3600.5, 1e9, 1e300, float("inf")])
def test_format_clamps_long_durations_to_the_maximum(seconds: float) -> None:
    assert MAX_DURATION_S == 3600
    assert callback_marker(seconds, "x") == "@@cb:3600s@@x"
    assert sleep_marker(seconds, "drop") == "@@sleep:3600s:drop@@"
    assert callback_marker(seconds, "x", "#ops", max_s=60) == "@@cb:60s#ops@@x"
    assert sleep_marker(seconds * 10, max_s=7200) == "@@sleep:7200s@@"


@pytest.mark.parametrize(
    ("seconds", "max_s", "out"),
    [(0, 3600, 0.0), (2.5, 3600, 2.5), (1e300, 3600, 3600.0), (float("inf"), 60, 60.0)],
)
def test_clamp_duration(seconds: float, max_s: float, out: float) -> None:
    assert clamp_duration(seconds, max_s) == out


@pytest.mark.parametrize(
    ("seconds", "message"),
    [
        (float("nan"), "must be a number of seconds"),
        (-1, "must be 0 seconds or more"),
        (float("-inf"), "must be 0 seconds or more"),
        ("30", "must be a number of seconds"),
        (True, "must be a number of seconds"),
    ],
)
def test_clamp_duration_refuses_what_is_not_a_duration(seconds: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        clamp_duration(seconds)  # type: ignore[arg-type]


def test_max_duration_of_a_welcome() -> None:
    assert max_duration_of({"max_duration_s": 60}) == 60
    for bad in (
        None,
        {},
        {"max_duration_s": "60"},
        {"max_duration_s": -1},
        {"max_duration_s": True},
    ):
        assert max_duration_of(bad) == MAX_DURATION_S


@pytest.mark.parametrize("channel", ["general", "#bad channel", "#", "#" + "c" * 32, "#é"])
def test_format_refuses_channels_the_parser_would_not_read(channel: str) -> None:
    with pytest.raises(ValueError, match="channel"):
        callback_marker(1, "x", channel)


def test_format_refuses_unknown_sleep_mode() -> None:
    with pytest.raises(ValueError, match="mode"):
        sleep_marker(1, "nap")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- round trips

_millis = st.integers(min_value=0, max_value=int(MAX_DURATION_S) * 1000).map(lambda n: n / 1000)
# any text without "@@": blanks, newlines, "\r", single "@" and "#" included, nothing trimmed
_payloads = st.text(
    st.characters(exclude_categories=("Cs",)) | st.sampled_from(" \t\r\n@#"), max_size=40
).filter(lambda s: "@@" not in s)
_channels = st.none() | st.from_regex(r"#[A-Za-z0-9_-]{1,31}", fullmatch=True)


@given(seconds=_millis, payload=_payloads, channel=_channels)
def test_callback_marker_round_trips(seconds: float, payload: str, channel: str | None) -> None:
    p = parse_markers(callback_marker(seconds, payload, channel))
    assert p.callbacks == (CallbackMarker(seconds, payload, channel),)
    assert p.sleeps == ()
    assert not p.relayed


@given(
    seconds=st.floats(min_value=0, max_value=MAX_DURATION_S, allow_nan=False),
    payload=_payloads,
)
def test_callback_marker_round_trips_any_float_up_to_the_maximum(
    seconds: float, payload: str
) -> None:
    (cb,) = parse_markers(callback_marker(seconds, payload)).callbacks
    assert cb.seconds == seconds
    assert cb.payload == payload


@given(seconds=_millis, mode=st.sampled_from(SLEEP_MODES))
def test_sleep_marker_round_trips(seconds: float, mode: str) -> None:
    p = parse_markers(sleep_marker(seconds, mode))  # type: ignore[arg-type]
    assert p == Parsed("", (), (SleepMarker(seconds, mode),))  # type: ignore[arg-type]


@given(
    before=st.from_regex(r"[a-z]{1,8}( [a-z]{1,8}){0,3}", fullmatch=True),
    sep=st.sampled_from([" ", "\n", "\n\n", ""]),
    seconds=_millis,
    payload=_payloads,
    channel=_channels,
)
def test_callback_marker_ending_a_text(
    before: str, sep: str, seconds: float, payload: str, channel: str | None
) -> None:
    p = parse_markers(f"{before}{sep}{callback_marker(seconds, payload, channel)}")
    assert p.callbacks == (CallbackMarker(seconds, payload, channel),)
    assert p.text == before


@given(first=_payloads, second=_payloads, mode=st.sampled_from(SLEEP_MODES))
def test_each_payload_ends_exactly_at_the_next_marker(first: str, second: str, mode: str) -> None:
    text = (
        callback_marker(1, first)
        + callback_marker(2, second, "#ops")
        + sleep_marker(3, mode)  # type: ignore[arg-type]
        + " tail"
    )
    p = parse_markers(text)
    assert p.callbacks == (CallbackMarker(1.0, first), CallbackMarker(2.0, second, "#ops"))
    assert p.text == "tail"


# ---------------------------------------------------------------------------- seam property

_words = st.from_regex(r"[a-z]{1,6}", fullmatch=True)


@st.composite
def _marked_texts(draw: st.DrawFn) -> tuple[str, list[str], list[str], int]:
    """A text of lines of words with sleep markers between words, then callbacks at its end.

    Returns the text, the words that must survive, the callback payloads and the number of
    sleep markers.
    """
    lines: list[str] = []
    kept: list[str] = []
    sleeps = 0
    for _ in range(draw(st.integers(1, 5))):
        items: list[str] = []
        for _ in range(draw(st.integers(0, 5))):
            if draw(st.booleans()):
                word = draw(_words)
                items.append(word)
                kept.append(word)
            else:
                mode = draw(st.sampled_from(SLEEP_MODES))
                items.append(sleep_marker(draw(st.integers(0, 99)), mode))
                sleeps += 1
        lines.append(" ".join(items))
    seps = draw(
        st.lists(st.sampled_from(["\n", "\n\n"]), min_size=len(lines) - 1, max_size=len(lines) - 1)
    )
    text = lines[0] + "".join(sep + line for sep, line in zip(seps, lines[1:], strict=True))
    payloads = draw(st.lists(_payloads, max_size=3))
    if payloads:
        text += draw(st.sampled_from(["", " ", "\n"]))
        text += "".join(callback_marker(draw(st.integers(0, 99)), x) for x in payloads)
    return text, kept, payloads, sleeps


def _longest_newline_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"\n+", text)), default=0)


@given(_marked_texts())
def test_stripping_keeps_words_and_adds_no_blanks(
    case: tuple[str, list[str], list[str], int],
) -> None:
    text, kept, payloads, sleeps = case
    p = parse_markers(text)
    if not payloads and not sleeps:
        assert p == Parsed(text)  # no marker: the text is relayed exactly as written
        return
    assert p.text.split() == kept
    assert [c.payload for c in p.callbacks] == payloads
    assert len(p.sleeps) == sleeps
    assert p.relayed == bool(kept)
    assert p.text == p.text.strip()
    assert "@@" not in p.text
    assert "  " not in p.text
    assert " \n" not in p.text
    assert "\n " not in p.text
    # stripping never adds empty lines: runs of line breaks are never longer than the input's
    assert _longest_newline_run(p.text) <= _longest_newline_run(text)
    for line in p.text.split("\n"):
        assert line == "" or re.fullmatch(r"[a-z]+( [a-z]+)*", line)
