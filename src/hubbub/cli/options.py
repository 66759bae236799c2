"""Options that several ``hubbub`` commands share (one definition each): one vocabulary.

``--gateway`` is the gateway's WebSocket URL, ``--space`` a space's *name*, ``--space-config``
a space *file*, ``--id`` / ``--token`` who connects, ``--log-level`` one of :data:`LOG_LEVELS`;
each reads one ``HUBBUB_*`` environment variable first, then the older names still accepted
(``HUBBUB_URL``, and MEW's ``MEW_GATEWAY``, ``MEW_SPACE``, ``MEW_TOKEN``,
``MEW_PARTICIPANT_ID``, which MEW's own agents and CLI read). Older spellings of an option
(``chat --url``, ``token create --space FILE``) stay as hidden aliases.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from hubbub.defaults import DEFAULT_GATEWAY
from hubbub.protocol.ids import SPACE_ID_RE

F = TypeVar("F", bound=Callable[..., Any])

LOG_LEVELS = ("debug", "info", "warning", "error")
"""The choices of ``--log-level`` on every command (case-insensitive)."""

GATEWAY_ENV = ("HUBBUB_GATEWAY", "HUBBUB_URL", "MEW_GATEWAY")
SPACE_ENV = ("HUBBUB_SPACE", "MEW_SPACE")
TOKEN_ENV = ("HUBBUB_TOKEN", "MEW_TOKEN")
ID_ENV = ("HUBBUB_ID", "MEW_PARTICIPANT_ID")
"""The environment of each option, the first set one wins (``HUBBUB_*`` first)."""

_SPACE_FILE_SUFFIXES = (".yaml", ".yml", ".json")


class DeprecatedAlias(click.Option):
    """A hidden, older spelling of another option (``replacement``), still accepted."""

    def __init__(self, *args: Any, replacement: str, **kwargs: Any) -> None:
        kwargs["hidden"] = True
        super().__init__(*args, **kwargs)
        self.replacement = replacement


def hidden_alias(
    alias: str, replacement: str, dest: str, *, warn: str | None = None, **kwargs: Any
) -> Callable[[F], F]:
    """``alias``: a hidden older spelling of option ``replacement`` (whose value goes to
    ``dest``); ``warn``, if given, is printed on stderr whenever the old spelling is used."""
    alias_dest = "alias_" + alias.lstrip("-").replace("-", "_")

    def decorate(f: F) -> F:
        @functools.wraps(f)
        def wrapper(*args: Any, **values: Any) -> Any:
            value = values.pop(alias_dest)
            if value is not None and value != ():
                ctx = click.get_current_context()
                if ctx.get_parameter_source(dest) is ParameterSource.COMMANDLINE:
                    raise click.UsageError(
                        f"{alias} is the old spelling of {replacement}: give {replacement} only"
                    )
                values[dest] = value
                if warn is not None:
                    click.echo(f"warning: {alias} is deprecated here: {warn}", err=True)
            return f(*args, **values)

        option = click.option(
            alias,
            alias_dest,
            cls=DeprecatedAlias,
            replacement=replacement,
            default=None,
            help=f"Old spelling of {replacement} (hidden).",
            **kwargs,
        )
        return option(wrapper)  # type: ignore[return-value]

    return decorate


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


def log_level_option(
    default: str | None = "info", help_text: str | None = None
) -> Callable[[F], F]:
    """``--log-level``: one of :data:`LOG_LEVELS`, in any case, on every command."""
    return click.option(
        "--log-level",
        type=click.Choice(LOG_LEVELS, case_sensitive=False),
        default=default,
        show_default=default is not None,
        help=help_text or "How much the command logs on stderr.",
    )


def _check_gateways(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Each URL of ``--gateway`` checked (one rule: the SDK's); None and () pass."""
    from hubbub.sdk.gateways import join_gateways, parse_gateways

    if value is None or value == ():
        return value
    try:
        if isinstance(value, tuple):
            return tuple(join_gateways(parse_gateways(v)) for v in value)
        return join_gateways(parse_gateways(value))
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


def gateway_option(
    default: str | None = DEFAULT_GATEWAY, *, multiple: bool = False, help_text: str | None = None
) -> Callable[[F], F]:
    """``--gateway URL`` (into ``gateway``; ``--url`` is its hidden old spelling), from
    ``HUBBUB_GATEWAY`` (or ``HUBBUB_URL``, ``MEW_GATEWAY``)."""
    dest = "gateway"
    text = help_text or (
        "The gateway's WebSocket URL, or several separated by commas to fail over between them"
    )

    def decorate(f: F) -> F:
        f = hidden_alias("--url", "--gateway", dest, multiple=multiple, callback=_check_gateways)(f)
        return click.option(
            "--gateway",
            dest,
            metavar="URL",
            default=() if multiple else default,
            show_default=default is not None and not multiple,
            multiple=multiple,
            envvar=list(GATEWAY_ENV),
            callback=_check_gateways,
            help=f"{text} [env HUBBUB_GATEWAY; HUBBUB_URL and MEW_GATEWAY are read too].",
        )(f)

    return decorate


def _check_space(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A space's name; a file name (``space.yaml``) is refused with where files go."""
    if value is None:
        return value
    if value.lower().endswith(_SPACE_FILE_SUFFIXES) or "/" in value:
        raise click.BadParameter(
            f"{value!r} looks like a file: --space takes a space's name, e.g. 'team' (the "
            "`space:` key of its config); the file itself goes to `hubbub serve --space-config`",
            ctx=ctx,
            param=param,
        )
    if not SPACE_ID_RE.fullmatch(value):
        raise click.BadParameter(
            f"{value!r} is not a space name: use 1-64 of [A-Za-z0-9_.-], e.g. 'team'",
            ctx=ctx,
            param=param,
        )
    return value


def space_option(default: str | None = "default", help_text: str | None = None) -> Callable[[F], F]:
    """``--space NAME`` (a space's name, never a file), from ``HUBBUB_SPACE`` (or
    ``MEW_SPACE``)."""
    return click.option(
        "--space",
        metavar="NAME",
        default=default,
        show_default=default is not None,
        envvar=list(SPACE_ENV),
        callback=_check_space,
        help=(help_text or "The space's name (the `space:` of its config)")
        + " [env HUBBUB_SPACE; MEW_SPACE is read too].",
    )


def token_option(help_text: str | None = None) -> Callable[[F], F]:
    """``--token``, from ``HUBBUB_TOKEN`` (or ``MEW_TOKEN``)."""
    return click.option(
        "--token",
        metavar="TOKEN",
        default=None,
        envvar=list(TOKEN_ENV),
        help=(help_text or "Your token; not needed in open mode")
        + " [env HUBBUB_TOKEN; MEW_TOKEN is read too].",
    )


def id_option(*, required: bool, help_text: str) -> Callable[[F], F]:
    """``--id`` (into ``participant_id``), from ``HUBBUB_ID`` (or ``MEW_PARTICIPANT_ID``)."""
    return click.option(
        "--id",
        "participant_id",
        metavar="ID",
        required=required,
        default=None,
        envvar=list(ID_ENV),
        help=f"{help_text} [env HUBBUB_ID; MEW_PARTICIPANT_ID is read too].",
    )
