"""What every long-running ``hubbub`` command shares: logging and stopping on a signal."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import sys
from collections.abc import Awaitable, Callable

import click

from hubbub.errors import HubbubError


def setup_logging(level: str) -> None:
    """One readable log line per event on stderr."""
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
        stream=sys.stderr,
    )


def freeze_start_up_objects() -> None:
    """Leave the objects made at start-up (modules, classes, settings) out of later garbage
    collections: a full collection over them paused the event loop for 100-200 ms."""
    gc.collect()
    gc.freeze()


def run_until_signal(main: Callable[[], Awaitable[None]], what: str) -> None:
    """Run ``main`` until it ends or SIGINT/SIGTERM cancels it; errors become CLI errors."""

    async def runner() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await main()

    freeze_start_up_objects()
    try:
        asyncio.run(runner())
    except (HubbubError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        pass
    click.echo(f"{what} stopped", err=True)
