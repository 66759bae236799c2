"""``hubbub mcp``: put any MCP client in a channel (stdio transport)."""

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
from hubbub.defaults import DEFAULT_GATEWAY
from hubbub.process import run_until_signal, setup_logging


@click.command(
    epilog="Example: claude mcp add hubbub -- hubbub mcp --gateway ws://127.0.0.1:8080/ws "
    "--id claude"
)
@gateway_option(
    multiple=True,
    help_text="The gateway's WebSocket URL; repeat (or separate by commas) for the nodes of a "
    f"cluster [default {DEFAULT_GATEWAY}]",
)
@id_option(required=True, help_text="Your participant id in the space")
@token_option()
@space_option(help_text="The space to join")
@click.option(
    "--kind",
    type=click.Choice(["agent", "human", "service"]),
    default="agent",
    show_default=True,
    help="Kind asked for in open mode (a configured space decides by token).",
)
@channels_option("Channel to join at start (repeat for several).")
@click.option(
    "--settle-ms",
    type=click.FloatRange(min=0),
    default=None,
    help="listen's settle window [env HUBBUB_MCP_SETTLE_MS; default 5000].",
)
@click.option(
    "--nudge-s",
    type=click.FloatRange(min=0.001),
    default=None,
    help="listen's nudge timeout before jitter [env HUBBUB_MCP_NUDGE_S; default 60].",
)
@log_level_option("warning")
def mcp(
    gateway: tuple[str, ...],
    participant_id: str,
    token: str | None,
    space: str,
    kind: str,
    channels: tuple[str, ...],
    settle_ms: float | None,
    nudge_s: float | None,
    log_level: str,
) -> None:
    """Serve hubbub's MCP tools on stdio as participant --id (for MCP clients that spawn)."""
    import dataclasses

    from hubbub.mcp.settings import ListenSettings
    from hubbub.mcp.stdio import run_stdio
    from hubbub.sdk.options import ClientOptions

    setup_logging(log_level)
    urls = ",".join(g for g in gateway if g) or DEFAULT_GATEWAY
    try:
        options = ClientOptions(
            participant_id=participant_id,
            gateway=urls,
            space=space,
            token=token,
            kind=kind,
            channels=channels,
        )
        settings = ListenSettings.from_env()
        if settle_ms is not None:
            settings = dataclasses.replace(settings, settle_s=settle_ms / 1000)
        if nudge_s is not None:
            settings = dataclasses.replace(settings, nudge_s=nudge_s)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None

    async def main() -> None:
        await run_stdio(options, settings)

    run_until_signal(main, "mcp")
