"""``hubbub bridge``: expose a stdio MCP server's tools and resources as a participant."""

from __future__ import annotations

import click

from hubbub.cli.options import (
    channels_option,
    gateway_option,
    id_option,
    log_level_option,
    space_option,
    token_option,
)
from hubbub.process import run_until_signal, setup_logging


@click.command(
    context_settings={"ignore_unknown_options": True},
    epilog="Example: hubbub bridge --id files -- python -m my_mcp_server --root /srv",
)
@id_option(required=True, help_text="Participant id in the space")
@gateway_option()
@space_option(help_text="The space to join")
@token_option(help_text="Token; not needed in open mode")
@channels_option("Channel to join (repeat for several).")
@log_level_option("info")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def bridge(
    participant_id: str,
    gateway: str,
    space: str,
    token: str | None,
    channels: tuple[str, ...],
    log_level: str,
    command: tuple[str, ...],
) -> None:
    """Start a stdio MCP server and offer its tools and resources as participant --id."""
    from hubbub.sdk.bridge import run_bridge
    from hubbub.sdk.options import ParticipantOptions

    setup_logging(log_level)
    try:
        options = ParticipantOptions(
            participant_id=participant_id,
            gateway=gateway,
            space=space,
            token=token,
            kind="service",
            channels=channels,
        )
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None

    async def main() -> None:
        await run_bridge(list(command), options)

    run_until_signal(main, "bridge")
