"""The ``hubbub`` command: serve, space, token, demo, agent, chat, bridge, mcp (one module
each)."""

from __future__ import annotations

from typing import Any

import click

from hubbub import __version__
from hubbub.cli.agent import agent
from hubbub.cli.bridge import bridge
from hubbub.cli.chat import chat
from hubbub.cli.demo import demo
from hubbub.cli.mcp import mcp
from hubbub.cli.serve import serve
from hubbub.cli.space import space
from hubbub.cli.token import token
from hubbub.extras import explain

_EXTRA_OF = {"agent": "agents", "bridge": "agents", "demo": "agents", "chat": "chat", "mcp": "mcp"}
"""The extra each command needs (a package in several extras is named by the command's)."""


class _Commands(click.Group):
    """hubbub's commands; one that needs a package of a missing extra names the extra."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ModuleNotFoundError as exc:
            missing = explain(exc, _EXTRA_OF.get(ctx.invoked_subcommand or ""))
            if missing is None:
                raise
            raise click.ClickException(str(missing)) from None


@click.group(cls=_Commands)
@click.version_option(__version__, prog_name="hubbub")
def main() -> None:
    """hubbub: a gateway where LLM agents and people share chat channels."""


for _command in (serve, space, token, demo, bridge, agent, chat, mcp):
    main.add_command(_command)

__all__ = ["main"]
