"""One vocabulary across every `hubbub` command: walked over click's command tree, so a new
command or option is held to it too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

from hubbub.cli import main
from hubbub.cli.options import LOG_LEVELS, DeprecatedAlias
from hubbub.server.config import hash_token

CONNECTING = {"agent run", "bridge", "chat", "mcp"}
"""The commands that connect to a gateway."""


def _commands(group: click.Group = main, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            yield from _commands(command, f"{path} ")
        else:
            yield path, command


COMMANDS = dict(_commands())


def _options(command: click.Command) -> list[click.Option]:
    return [p for p in command.params if isinstance(p, click.Option)]


def test_the_walk_finds_every_command() -> None:
    assert set(COMMANDS) >= CONNECTING | {"serve", "demo", "token create", "space import"}


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_option_has_help(path: str) -> None:
    missing = [o.opts[0] for o in _options(COMMANDS[path]) if not (o.help or "").strip()]
    assert missing == [], f"hubbub {path}: options without help: {missing}"


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_space_is_a_name_and_space_config_a_file(path: str) -> None:
    for option in _options(COMMANDS[path]):
        if isinstance(option, DeprecatedAlias):
            assert option.hidden, option.opts  # an old spelling, never offered
            continue
        if "--space" in option.opts:
            assert not isinstance(option.type, click.Path), f"hubbub {path}: --space is a file"
        if "--space-config" in option.opts:
            assert isinstance(option.type, click.Path), f"hubbub {path}: --space-config"


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_log_level_is_the_same_choice_everywhere(path: str) -> None:
    for option in _options(COMMANDS[path]):
        if "--log-level" in option.opts:
            assert isinstance(option.type, click.Choice), path
            assert tuple(option.type.choices) == LOG_LEVELS, path
            assert not option.type.case_sensitive, path


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_the_gateway_option_is_spelled_gateway(path: str) -> None:
    visible = {o for opt in _options(COMMANDS[path]) if not opt.hidden for o in opt.opts}
    assert not visible & {"--url", "--gateway-url", "--server"}, path
    if path in CONNECTING:
        assert "--gateway" in visible, path
        (gateway,) = [o for o in _options(COMMANDS[path]) if "--gateway" in o.opts]
        assert gateway.envvar is not None and next(iter(gateway.envvar)) == "HUBBUB_GATEWAY"


def test_every_command_that_logs_offers_log_level() -> None:
    with_it = {p for p, c in COMMANDS.items() if any("--log-level" in o.opts for o in _options(c))}
    assert with_it >= {"serve", "demo", "agent run", "bridge", "mcp"}


@pytest.mark.parametrize("level", ["DEBUG", "Warning", "info"])
def test_log_level_takes_any_case(level: str) -> None:
    result = CliRunner().invoke(main, ["bridge", "--id", "x", "--log-level", level, "--help"])
    assert result.exit_code == 0, result.output


def test_a_log_level_off_the_list_names_the_choices() -> None:
    result = CliRunner().invoke(main, ["serve", "--log-level", "verbose"])
    assert result.exit_code == 2
    assert "'verbose' is not one of 'debug', 'info', 'warning', 'error'" in result.output


# ------------------------------------------------------------- the old spellings still work


@pytest.mark.parametrize(
    "env",
    [
        {"HUBBUB_GATEWAY": "http://127.0.0.1:9/ws"},
        {"HUBBUB_URL": "http://127.0.0.1:9/ws"},
        {"MEW_GATEWAY": "http://127.0.0.1:9/ws"},
    ],
)
@pytest.mark.parametrize("command", [["chat", "--id", "a"], ["mcp", "--id", "a"]])
def test_every_gateway_variable_is_read(env: dict[str, str], command: list[str]) -> None:
    """The bad URL in the variable is refused: the variable was read (before any connect)."""
    result = CliRunner().invoke(main, command, env=env)
    assert result.exit_code == 2, result.output
    assert "use 'ws://127.0.0.1:9/ws'" in result.output and "--gateway" in result.output


def test_hubbub_gateway_wins_over_the_older_variables() -> None:
    env = {"HUBBUB_GATEWAY": "http://new:1/ws", "HUBBUB_URL": "http://old:1/ws"}
    result = CliRunner().invoke(main, ["chat", "--id", "a"], env=env | {"MEW_GATEWAY": "x"})
    assert "use 'ws://new:1/ws'" in result.output


@pytest.mark.parametrize("spelling", ["--url", "--gateway"])
def test_chat_takes_gateway_and_the_old_url(spelling: str) -> None:
    result = CliRunner().invoke(main, ["chat", "--id", "a", spelling, "http://127.0.0.1:9/ws"])
    assert result.exit_code == 2 and "use 'ws://127.0.0.1:9/ws'" in result.output


def test_url_and_gateway_together_is_a_usage_error() -> None:
    url = "ws://127.0.0.1:9/ws"
    result = CliRunner().invoke(main, ["chat", "--id", "a", "--url", url, "--gateway", url])
    assert result.exit_code == 2 and "give --gateway only" in result.output


def test_help_shows_gateway_and_not_url() -> None:
    help_text = CliRunner().invoke(main, ["chat", "--help"]).output
    assert "--gateway" in help_text and "--url" not in help_text
    assert "HUBBUB_GATEWAY" in help_text


@pytest.mark.parametrize("name", ["space.yaml", "configs/team.yml", "team.json"])
@pytest.mark.parametrize("command", [["chat", "--id", "a"], ["mcp", "--id", "a"]])
def test_a_file_for_space_says_where_files_go(name: str, command: list[str]) -> None:
    result = CliRunner().invoke(main, [*command, "--space", name])
    assert result.exit_code == 2
    assert "looks like a file" in result.output and "--space-config" in result.output


def test_token_create_takes_space_config(tmp_path: Path) -> None:
    cfg = tmp_path / "space.yaml"
    result = CliRunner().invoke(main, ["token", "create", "--space-config", str(cfg), "--id", "a"])
    assert result.exit_code == 0, result.output
    token = result.stdout.strip().splitlines()[0]
    assert yaml.safe_load(cfg.read_text())["participants"]["a"]["token_hash"] == hash_token(token)
    assert "deprecated" not in result.output


def test_token_create_still_takes_the_old_space_and_says_what_to_write(tmp_path: Path) -> None:
    cfg = tmp_path / "space.yaml"
    result = CliRunner().invoke(main, ["token", "create", "--space", str(cfg), "--id", "a"])
    assert result.exit_code == 0, result.output
    assert "warning: --space is deprecated here: write --space-config FILE" in result.stderr
    token = result.stdout.strip().splitlines()[0]
    assert yaml.safe_load(cfg.read_text())["participants"]["a"]["token_hash"] == hash_token(token)


def test_token_create_without_a_file_names_the_option() -> None:
    result = CliRunner().invoke(main, ["token", "create", "--id", "a"])
    assert result.exit_code == 2 and "Missing option '--space-config'" in result.output
