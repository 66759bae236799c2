"""Run a command as the process's main: logging, the event loop, stopping on a signal."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import cast

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


YOUNG_GC_THRESHOLD = 20_000
"""Allocations (net of deallocations) between two young garbage collections; Python's
default is 700. Objects that live across a young collection move to older generations, and
enough of them trigger a full collection over the whole heap: with 200 ``/mcp`` sessions
each waiting in ``listen`` (the SDK's tasks, streams and task groups of every request), the
default made one full collection of ~180 ms per round of deliveries
(``benchmarks/mcp_listen.py``, docs/performance.md). At 20,000 the short-lived objects of a
request are freed by their reference counts before a collection looks at them."""


def freeze_start_up_objects() -> None:
    """Leave the objects made at start-up (modules, classes, settings) out of later garbage
    collections: a full collection over them paused the event loop for 100-200 ms; and
    collect the young generation less often (:data:`YOUNG_GC_THRESHOLD`)."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_GC_THRESHOLD, older, oldest)


LOOP_ENV = "HUBBUB_LOOP"
"""The environment variable that chooses the event loop: ``asyncio`` (default) or ``uvloop``."""

LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def loop_factory() -> LoopFactory | None:
    """The event loop ``HUBBUB_LOOP`` asks for; None means asyncio's default loop."""
    choice = os.environ.get(LOOP_ENV, "").strip().lower() or "asyncio"
    if choice == "asyncio":
        return None
    if choice == "uvloop":
        try:
            uvloop = importlib.import_module("uvloop")
        except ImportError:
            raise click.ClickException(
                f"{LOOP_ENV}=uvloop, but uvloop is not installed: `pip install uvloop`, "
                f"or unset {LOOP_ENV} to use asyncio's default loop"
            ) from None
        return cast(LoopFactory, uvloop.new_event_loop)
    raise click.ClickException(
        f"{LOOP_ENV}={os.environ[LOOP_ENV]!r} is not an event loop hubbub knows: "
        "use asyncio (the default) or uvloop"
    )


STOP_GRACE_S = 30.0
"""How long a stop may take after SIGINT/SIGTERM before the process exits regardless (a
worker whose parent died and whose Redis is gone would otherwise wait on it for ever)."""


def _exit_if_stop_hangs(what: str) -> None:
    """Arm a watchdog thread that ends the process if the stop outlasts ``STOP_GRACE_S``."""

    def give_up() -> None:
        print(f"{what}: the stop took over {STOP_GRACE_S:g} s; exiting now", file=sys.stderr)
        os._exit(1)

    timer = threading.Timer(STOP_GRACE_S, give_up)
    timer.daemon = True  # a stop that finishes in time exits without waiting for it
    timer.start()


def run_until_signal(main: Callable[[], Awaitable[None]], what: str) -> None:
    """Run ``main`` until it ends or SIGINT/SIGTERM cancels it (a stop that hangs is ended
    after ``STOP_GRACE_S``); errors become CLI errors."""

    async def runner() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()

        def stop() -> None:
            if not task.cancelling():
                _exit_if_stop_hangs(what)
            task.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop)
        with contextlib.suppress(asyncio.CancelledError):
            await main()

    factory = loop_factory()
    freeze_start_up_objects()
    try:
        with asyncio.Runner(loop_factory=factory) as loop_runner:
            loop_runner.run(runner())
    except (HubbubError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        pass
    click.echo(f"{what} stopped", err=True)
