"""``hubbub token create``: a participant's token, stored as a hash in a space config."""

from __future__ import annotations

from pathlib import Path

import click

from hubbub.cli.options import hidden_alias
from hubbub.server.config import (
    ConfigError,
    ParticipantConfig,
    SpaceConfig,
    hash_token,
    load_space,
    new_token,
    save_space,
)


@click.group()
def token() -> None:
    """Manage participant tokens in a space config."""


@token.command("create")
@click.option(
    "--space-config",
    "space_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The space.yaml to update, created if missing (required).",
)
@hidden_alias(
    "--space",
    "--space-config",
    "space_file",
    warn="write --space-config FILE (--space is a space's name in every other command)",
    type=click.Path(dir_okay=False, path_type=Path),
)
@click.option("--id", "pid", required=True, help="The participant's id (1-32 of [A-Za-z0-9_.-]).")
@click.option(
    "--kind",
    type=click.Choice(["human", "agent", "service"]),
    default=None,
    help="Participant kind [agent for new participants].",
)
@click.option(
    "--role",
    type=click.Choice(["participant", "observer", "admin"]),
    default=None,
    help="Dashboard role [participant].",
)
def token_create(space_file: Path | None, pid: str, kind: str | None, role: str | None) -> None:
    """Create a token for a participant; prints it once and stores only its hash."""
    from hubbub.protocol.ids import is_participant_id

    if space_file is None:  # not required=True: the old spelling --space may give it
        raise click.UsageError("Missing option '--space-config' (the space.yaml to update).")

    if not is_participant_id(pid):
        raise click.BadParameter(
            f"{pid!r} is not a legal id (1-32 of [A-Za-z0-9_.-])", param_hint="--id"
        )
    try:
        cfg = load_space(space_file) if space_file.exists() else SpaceConfig()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    entry = cfg.participants.get(pid) or ParticipantConfig()
    if kind is not None:
        entry.kind = kind  # type: ignore[assignment]
    if role is not None:
        entry.role = role  # type: ignore[assignment]
    secret = new_token()
    entry.token_hash = hash_token(secret)
    cfg.participants[pid] = entry
    try:
        save_space(cfg, space_file)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(secret)
    click.echo(
        f"token for {pid!r} ({entry.kind}) in space {cfg.space!r} saved as a hash in {space_file}; "
        "it is shown only once",
        err=True,
    )
