"""`hubbub chat` arguments: each mistake is one line naming the problem and the fix."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from hubbub.cli import main


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--id", "alice", "--channel", "#bad name"], "'#bad name' is not a channel name"),
        (["--id", "alice", "--channel", "#" + "x" * 40], "write '#' then 1-31"),
        (["--id", "no/slash"], "'no/slash' is not a legal id"),
        (["--id", "alice", "--url", "http://127.0.0.1:8080/ws"], "use 'ws://127.0.0.1:8080/ws'"),
        (["--id", "alice", "--url", "127.0.0.1:8080"], "is not a WebSocket URL"),
    ],
)
def test_bad_arguments(args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["chat", *args])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_it_needs_a_terminal() -> None:
    result = CliRunner().invoke(main, ["chat", "--id", "alice"], input="")
    assert result.exit_code == 1
    assert "needs an interactive terminal" in result.output


def test_listed_in_the_help() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert "chat" in result.output
    help_text = CliRunner().invoke(main, ["chat", "--help"]).output
    for option in ("--gateway", "--id", "--token", "HUBBUB_TOKEN", "--space", "--channel"):
        assert option in help_text
