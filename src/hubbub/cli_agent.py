"""``hubbub agent run``: run one agent (document 003, layer 3) until Ctrl-C."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import click

from hubbub.llm.factory import PROVIDERS


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
@click.option("--gateway", default=None, help="Gateway WebSocket URL [config, env MEW_GATEWAY].")
@click.option("--space", default=None, help="Space [config, env MEW_SPACE].")
@click.option("--id", "participant_id", default=None, help="Participant id [MEW_PARTICIPANT_ID].")
@click.option("--token", default=None, help="Token [config, env MEW_TOKEN].")
@click.option("--provider", type=click.Choice(PROVIDERS), default=None, help="Model provider.")
@click.option("--model", default=None, help="Model name, e.g. gpt-4o-mini or llama3.2.")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default=None,
    help="Log level [config, info].",
)
def run(config_path: Path | None, log_level: str | None, **overrides: Any) -> None:
    """Connect one agent and let it answer until Ctrl-C."""
    from hubbub.errors import HubbubError
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
    logging.basicConfig(
        level=getattr(logging, config.log_level.upper()),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
    for noisy in ("httpx", "httpx2", "httpcore", "httpcore2", "openai", "anthropic"):
        if config.log_level != "debug":
            logging.getLogger(noisy).setLevel(logging.WARNING)

    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        try:
            bot = Agent(config)
        except ScriptError as exc:
            raise click.ClickException(str(exc)) from None
        click.echo(
            f"agent {config.participant_id} ({bot.model.describe()}) joining {config.gateway}; "
            "Ctrl-C to stop",
            err=True,
        )
        with contextlib.suppress(asyncio.CancelledError):
            await bot.run_forever()

    try:
        asyncio.run(main())
    except (HubbubError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        pass
    click.echo("agent stopped", err=True)
