"""Options that several ``hubbub`` commands share (one definition each)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def channels_option(help_text: str) -> Callable[[F], F]:
    """``--channel`` (repeatable, into ``channels``; ``#general`` by default)."""
    return click.option(
        "--channel",
        "channels",
        multiple=True,
        default=("#general",),
        show_default=True,
        help=help_text,
    )
