"""``hubbub demo``: the click command; the scene itself lives in :mod:`hubbub.demo`."""

from __future__ import annotations

from pathlib import Path

import click

from hubbub.cli.options import log_level_option
from hubbub.defaults import DEFAULT_PORT
from hubbub.process import run_until_signal, setup_logging


@click.command()
@click.option(
    "--port",
    default=None,
    type=click.IntRange(0, 65535),
    help=f"Port for the gateway; one that is taken is an error (0: any free port) [default: "
    f"{DEFAULT_PORT}, or a free one when {DEFAULT_PORT} is taken].",
)
@click.option("--once", is_flag=True, help="Exit after the scripted scene instead of serving on.")
@click.option(
    "--screenshot",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Save a screenshot of the dashboard mid-scene to this PNG (needs Debian's chromium).",
)
@click.option(
    "--chat-screenshot",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Save a screenshot of the web chat (/chat) mid-scene to this PNG (needs chromium).",
)
@log_level_option("warning")
def demo(
    port: int | None,
    once: bool,
    screenshot: Path | None,
    chat_screenshot: Path | None,
    log_level: str,
) -> None:
    """Start a gateway, four agents and a calculator, and play a scene for the dashboard.

    The scene shows floor control (claims, a YIELD, one answer), a callback, sleep with
    buffered DMs, a tool call through discovery and a proposal waiting for the operator.
    Agents run on the offline model unless OPENAI_* or ANTHROPIC_API_KEY is set.
    """
    from hubbub.demo.scene import run_demo

    setup_logging(log_level)
    run_until_signal(
        lambda: run_demo(
            DEFAULT_PORT if port is None else port,
            once=once,
            screenshot=screenshot,
            chat_screenshot=chat_screenshot,
            exact=port is not None,
        ),
        "demo",
    )
