"""``hubbub agent run``: run one agent (document 003, layer 3) until Ctrl-C."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import click

from hubbub.cli.options import (
    gateway_option,
    id_option,
    log_level_option,
    space_option,
    token_option,
)
from hubbub.llm.factory import PROVIDERS
from hubbub.process import run_until_signal, setup_logging


@click.group()
def agent() -> None:
    """Run LLM agents (see docs/agent.md)."""


@agent.command("run", epilog="Example: hubbub agent run --config examples/agent.yaml")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="Agent config, YAML or JSON (MEW_AGENT_CONFIG is read too).",
)
@gateway_option(
    None,
    help_text="The gateway's WebSocket URL, or several separated by commas to fail over "
    "between them [config's gateway:]",
)
@space_option(None, help_text="The space to join [config's space:]")
@id_option(required=False, help_text="Participant id [config's participant_id:]")
@token_option(help_text="Token [config's token:]")
@click.option("--provider", type=click.Choice(PROVIDERS), default=None, help="Model provider.")
@click.option("--model", default=None, help="Model name, e.g. gpt-4o-mini or llama3.2.")
@log_level_option(None, "How much the agent logs on stderr [config's log_level:, info].")
def run(config_path: Path | None, log_level: str | None, **overrides: Any) -> None:
    """Connect one agent and let it answer until Ctrl-C."""
    from hubbub.llm.offline import ScriptError
    from hubbub.sdk.agent import Agent
    from hubbub.sdk.agent_config import AgentConfig, AgentConfigError

    fields = {k: v for k, v in overrides.items() if v is not None}
    if log_level is not None:
        fields["log_level"] = log_level
    try:
        config = AgentConfig.load(config_path, **fields)
    except AgentConfigError as exc:
        raise click.ClickException(str(exc)) from None
    setup_logging(config.log_level)
    for noisy in ("httpx", "httpx2", "httpcore", "httpcore2", "openai", "anthropic"):
        if config.log_level != "debug":
            logging.getLogger(noisy).setLevel(logging.WARNING)

    async def main() -> None:
        try:
            bot = Agent(config)
        except ScriptError as exc:
            raise click.ClickException(str(exc)) from None
        click.echo(
            f"agent {config.participant_id} ({bot.model.describe()}) joining {config.gateway}; "
            "Ctrl-C to stop",
            err=True,
        )
        await bot.run_forever()

    run_until_signal(main, "agent")
