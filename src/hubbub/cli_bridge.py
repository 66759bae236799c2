"""``hubbub bridge``: expose a stdio MCP server's tools and resources as a participant."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys

import click

from hubbub.sdk.options import DEFAULT_GATEWAY


@click.command(
    context_settings={"ignore_unknown_options": True},
    epilog="Example: hubbub bridge --id files -- python -m my_mcp_server --root /srv",
)
@click.option("--id", "participant_id", required=True, help="Participant id in the space.")
@click.option(
    "--gateway",
    envvar="MEW_GATEWAY",
    default=DEFAULT_GATEWAY,
    show_default=True,
    help="Gateway WebSocket URL [env MEW_GATEWAY].",
)
@click.option("--space", envvar="MEW_SPACE", default="default", show_default=True)
@click.option("--token", envvar="MEW_TOKEN", default=None, help="Token [env MEW_TOKEN].")
@click.option(
    "--channel",
    "channels",
    multiple=True,
    default=("#general",),
    show_default=True,
    help="Channel to join (repeat for several).",
)
@click.option("--log-level", default="info", show_default=True)
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
    from hubbub.errors import HubbubError
    from hubbub.sdk.bridge import run_bridge
    from hubbub.sdk.options import ParticipantOptions

    logging.basicConfig(
        level=getattr(logging, log_level.upper()),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )
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
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await run_bridge(list(command), options)

    try:
        asyncio.run(main())
    except (HubbubError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        pass
    click.echo("bridge stopped", err=True)
