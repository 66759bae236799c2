"""``python -m hubbub`` runs the CLI."""

from hubbub.cli import main

main()
