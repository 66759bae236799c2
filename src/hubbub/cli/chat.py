"""``hubbub chat``: talk in a space from the terminal (see docs/chat.md)."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import sys

import click

from hubbub.cli.options import (
    channels_option,
    gateway_option,
    id_option,
    space_option,
    token_option,
)
from hubbub.protocol.ids import is_channel, is_participant_id, normalize_channel

_FIXES = {
    "auth_failed": "pass the right token with --token or HUBBUB_TOKEN "
    "(`hubbub token create --space-config space.yaml --id {id}` makes one)",
    "wrong_space": "use --space with the space the token belongs to",
    "unknown_space": "check --space",
    "invalid_id": "choose an --id of 1-32 of [A-Za-z0-9_.-]",
    "banned": "ask an admin of the space",
}


def _check_id(pid: str | None) -> str:
    if pid is None:
        pid = getpass.getuser()
        if not is_participant_id(pid):
            raise click.BadParameter(
                f"your login name {pid!r} is not a legal id; choose one (1-32 of [A-Za-z0-9_.-])",
                param_hint="--id",
            )
        return pid
    if not is_participant_id(pid):
        raise click.BadParameter(
            f"{pid!r} is not a legal id: use 1-32 of [A-Za-z0-9_.-]", param_hint="--id"
        )
    return pid


def _check_channels(names: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for raw in names:
        name = normalize_channel(raw.strip())
        if not is_channel(name):
            raise click.BadParameter(
                f"{raw!r} is not a channel name: write '#' then 1-31 of [A-Za-z0-9_-], "
                "e.g. --channel '#general' (quote it: # starts a comment in most shells)",
                param_hint="--channel",
            )
        if name not in out:
            out.append(name)
    return tuple(out)


async def _session(
    url: str, pid: str, token: str | None, space: str, channels: tuple[str, ...]
) -> None:
    """Connect, run the UI until the person quits, disconnect."""
    from hubbub.chat.app import ChatApp
    from hubbub.chat.view import ChatView
    from hubbub.errors import AuthRefused, ConnectionFailed, GatewayError
    from hubbub.sdk import Participant

    participant = Participant(
        gateway=url,
        participant_id=pid,
        token=token,
        space=space,
        channels=channels,
        kind="human",
    )
    chat = ChatApp(participant, ChatView(pid))
    refusals: dict[str, GatewayError] = {}

    def remember(exc: object) -> None:
        if isinstance(exc, GatewayError):
            refusals.setdefault(exc.code, exc)

    participant.on("error", remember)
    try:
        await participant.connect()
    except AuthRefused as exc:
        why = str(exc).removeprefix("the gateway refused the join: ")
        fix = _FIXES.get(exc.code, "check --id, --token and --space").format(id=pid)
        raise click.ClickException(f"{url} refused {pid!r}: {why} — {fix}") from None
    except ConnectionFailed as exc:
        raise click.ClickException(f"{exc}; or check --gateway") from None
    participant.client.off("error", remember)
    missing = [ch for ch in channels if ch not in participant.client.channels]
    if missing:
        await participant.disconnect()
        error = next(iter(refusals.values()), None)
        why = error.message if error is not None else "the gateway did not let you in"
        raise click.ClickException(
            f"cannot join {', '.join(missing)}: {why} — pick a channel that exists "
            "(e.g. --channel '#general'), then /create the new one from inside the chat"
        )
    try:
        await chat.run()
    finally:
        await participant.disconnect()


@click.command("chat", epilog="Inside, /help lists the commands; docs/chat.md has the whole story.")
@gateway_option()
@id_option(required=False, help_text="Your participant id (else your login name)")
@token_option()
@space_option(help_text="The space to join")
@channels_option("A channel to join (repeat for several; the first is shown first).")
def chat(
    gateway: str,
    participant_id: str | None,
    token: str | None,
    space: str,
    channels: tuple[str, ...],
) -> None:
    """Chat in a space from the terminal: channels, DMs, presence, proposals."""
    pid = _check_id(participant_id)
    wanted = _check_channels(channels)
    import hubbub.chat.app  # noqa: F401  (before the terminal check: it needs the chat extra)

    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise click.ClickException(
            "hubbub chat needs an interactive terminal (stdin and stdout must be a TTY); "
            "to post from a script use the HTTP API (POST /participants/{id}/messages)"
        )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_session(gateway, pid, token or None, space, wanted))
