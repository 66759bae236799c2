"""``hubbub mcp``: put any MCP client in a channel (stdio transport)."""

from __future__ import annotations

import click

from hubbub.cli.options import channels_option
from hubbub.defaults import DEFAULT_GATEWAY
from hubbub.process import run_until_signal, setup_logging


@click.command(
    epilog="Example: claude mcp add hubbub -- hubbub mcp --gateway ws://127.0.0.1:8080/ws "
    "--id claude"
)
@click.option(
    "--gateway",
    "gateways",
    multiple=True,
    envvar="HUBBUB_URL",
    help="Gateway WebSocket URL; repeat (or separate by commas) for the nodes of a cluster "
    f"[env HUBBUB_URL; default {DEFAULT_GATEWAY}].",
)
@click.option("--id", "participant_id", required=True, help="Your participant id in the space.")
@click.option("--token", envvar="HUBBUB_TOKEN", default=None, help="Token [env HUBBUB_TOKEN].")
@click.option("--space", default="default", show_default=True)
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
@click.option("--log-level", default="warning", show_default=True)
def mcp(
    gateways: tuple[str, ...],
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
    urls = ",".join(g for g in gateways if g) or DEFAULT_GATEWAY
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
