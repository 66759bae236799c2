"""``hubbub space import``: a MEW ``space.yaml`` written as hubbub's own space config."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from hubbub.server.config import ConfigError, read_space, space_yaml


@click.group()
def space() -> None:
    """Work with space configs."""


@space.command("import")
@click.argument("mew_file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write hubbub's space.yaml [stdout].",
)
def space_import(mew_file: Path, output: Path | None) -> None:
    """Translate a MEW space.yaml (participants, tokens, capabilities, defaults) to hubbub's
    format; prints a warning for each MEW setting hubbub does not use."""
    if output is not None and output.resolve() == mew_file.resolve():
        raise click.ClickException(
            f"-o {output} is the MEW file itself; write hubbub's config to another file "
            "(MEW's CLI still reads the original)"
        )
    try:
        cfg, notes = read_space(mew_file)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    for note in notes:
        click.echo(f"warning: {note}", err=True)
    text = space_yaml(cfg)
    if output is None:
        sys.stdout.write(text)
        return
    output.write_text(text, encoding="utf-8")
    click.echo(
        f"space {cfg.space!r}: {len(cfg.participants)} participant(s) written to {output} "
        "(token hashes only; the tokens stay where MEW keeps them)",
        err=True,
    )
