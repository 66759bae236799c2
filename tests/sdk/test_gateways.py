"""Several gateway URLs: how they are written, the errors that name the fix, the round order."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from hubbub.cli import main
from hubbub.sdk import AgentConfig, ClientOptions, ParticipantOptions
from hubbub.sdk.agent_config import AgentConfigError
from hubbub.sdk.gateways import next_urls

A, B, C = "ws://a:8080/ws", "wss://b.example/ws", "ws://10.0.0.3:9000/"


@pytest.mark.parametrize(
    ("gateway", "urls"),
    [
        (A, (A,)),
        (f"{A},{B}", (A, B)),
        (f" {A} , {B},{C} ", (A, B, C)),
        ([A, B, C], (A, B, C)),
        ((B, A), (B, A)),
        ([f"{A},{B}", C], (A, B, C)),
    ],
)
def test_one_url_a_comma_separated_string_or_a_list(
    gateway: str | list[str], urls: tuple[str, ...]
) -> None:
    opts = ClientOptions(participant_id="alice", gateway=gateway)
    assert opts.gateways == urls
    assert opts.gateway == ",".join(urls)  # one string, as before


def test_one_url_is_kept_as_it_is() -> None:
    assert ClientOptions(participant_id="a", gateway=A).gateway == A
    assert ClientOptions(participant_id="a").gateways == ("ws://127.0.0.1:8080/ws",)


def test_the_list_survives_replace_the_environment_and_participant_options() -> None:
    opts = ParticipantOptions.from_env({"MEW_GATEWAY": f"{A},{B}"}, participant_id="bob")
    assert opts.gateways == (A, B)
    assert opts.client_options().gateways == (A, B)
    assert opts.replace(gateway=[C]).gateways == (C,)
    config = AgentConfig.load(None, env={"MEW_GATEWAY": f"{A},{B}"}, participant_id="bot")
    assert config.participant_options().gateways == (A, B)


@pytest.mark.parametrize(
    ("gateway", "message"),
    [
        ("", "lists no URL: give one, e.g. 'ws://127.0.0.1:8080/ws'"),
        ([], "lists no URL"),
        (f"{A},,{B}", f"gateway '{A},,{B}' has an empty entry: separate URLs with one comma"),
        (f"{A},", "no trailing comma"),
        (
            f"{A},http://b:8080/ws",
            "'http://b:8080/ws' must be a WebSocket URL: use 'ws://b:8080/ws'",
        ),
        (f"{A},b:8080", "'b:8080' is not a WebSocket URL: use one like ws://127.0.0.1:8080/ws"),
        ([A, B, A], f"gateway '{A}' is listed twice: name each URL once"),
        (f"{A},ws://:8080/ws", "'ws://:8080/ws' is not a valid URL (hostname isn't provided)"),
        ("ws://b:port/ws", "'ws://b:port/ws' is not a valid URL"),
        ("ws://b c/ws", "'ws://b c/ws' contains a space: remove it"),
        ([A, 7], "gateway entry 7 is not a string"),
        (None, "is neither a URL nor a list of URLs"),
    ],
)
def test_a_bad_list_names_the_entry_and_the_fix(gateway: object, message: str) -> None:
    with pytest.raises(ValueError, match=r"^gateway") as info:
        ClientOptions(participant_id="alice", gateway=gateway)  # type: ignore[arg-type]
    assert message in str(info.value)


def test_an_agent_config_with_a_bad_list_says_which_entry() -> None:
    with pytest.raises(AgentConfigError, match="'ftp://x' is not a WebSocket URL"):
        AgentConfig(participant_id="bot", gateway=f"{A},ftp://x")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["chat", "--id", "alice", "--url", f"{A},http://b/ws"], "use 'ws://b/ws'"),
        (["chat", "--id", "alice", "--url", f"{A},,{B}"], "has an empty entry"),
        (["bridge", "--id", "files", "--gateway", f"{A},{A}", "--", "x"], "is listed twice"),
        (["agent", "run", "--id", "bot", "--gateway", f"{A},b:1"], "'b:1' is not a WebSocket URL"),
    ],
)
def test_the_cli_options_check_every_url(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code in (1, 2)
    assert message in " ".join(result.output.split())


def test_the_cli_accepts_the_comma_form_and_says_so() -> None:
    # `hubbub chat` checks its arguments, then finds no terminal: the URLs were accepted
    result = CliRunner().invoke(main, ["chat", "--id", "alice", "--url", f"{A},{B}"], input="")
    assert result.exit_code == 1 and "needs an interactive terminal" in result.output
    for command in (["chat"], ["bridge"], ["agent", "run"]):
        help_text = " ".join(CliRunner().invoke(main, [*command, "--help"]).output.split())
        assert "several separated by commas" in help_text, command


# ------------------------------------------------------------------ the order of a round


def test_a_round_starts_with_the_last_connected_url() -> None:
    assert next_urls([A, B, C], None) == [A, B, C]
    assert next_urls([A, B, C], B) == [B, C, A]
    assert next_urls([A, B, C], C) == [C, A, B]
    assert next_urls([A, B, C], "ws://gone/ws") == [A, B, C]
    assert next_urls([A], A) == [A]


@given(
    urls=st.lists(st.integers(0, 50), min_size=1, max_size=8, unique=True).map(
        lambda ns: [f"ws://h{n}/ws" for n in ns]
    ),
    data=st.data(),
)
def test_a_round_tries_every_url_once_in_list_order_from_the_last_one(
    urls: list[str], data: st.DataObject
) -> None:
    last_ok = data.draw(st.one_of(st.none(), st.sampled_from(urls), st.just("ws://other/ws")))
    order = next_urls(urls, last_ok)
    assert sorted(order) == sorted(urls)  # every URL, once
    start = urls.index(order[0])
    assert order == [urls[(start + i) % len(urls)] for i in range(len(urls))]  # list order
    assert order[0] == (last_ok if last_ok in urls else urls[0])
    assert next_urls(order, last_ok) == order  # a round of the round is the same round
