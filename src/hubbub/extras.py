"""Optional packages: which extra of hubbub installs which, and the error that says so.

The core (``pip install hubbub``) is the gateway and the SDK's :class:`~hubbub.sdk.Client`;
``[agents]`` adds what ``Participant`` and ``Agent`` need, ``[chat]`` the terminal client.
Which package belongs to which extra is read from hubbub's own package metadata (that is,
``pyproject.toml``), so the rule lives in one place.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import re
import shlex
from collections.abc import Iterator
from urllib.parse import unquote, urlparse

_IN_EXTRA = re.compile(r"""([A-Za-z0-9][A-Za-z0-9._-]*)[^;]*;.*\bextra\s*==\s*["']([^"']+)["']""")


class MissingExtra(ModuleNotFoundError):
    """An optional package is not installed; the message names the extra to install."""


def _import_name(distribution: str) -> str:
    return distribution.lower().replace("-", "_").replace(".", "_")


def extra_providing(module: str, prefer: str | None = None) -> str | None:
    """The extra of hubbub that installs the top-level package ``module``: ``prefer`` when it
    is one of them (what the command being run needs), else the smallest (None: no extra)."""
    try:
        requirements = importlib.metadata.requires("hubbub") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    extras: dict[str, set[str]] = {}
    for requirement in requirements:
        match = _IN_EXTRA.match(requirement)
        if match:
            extras.setdefault(match[2], set()).add(_import_name(match[1]))
    having = [extra for extra, modules in extras.items() if module in modules]
    if prefer in having:
        return prefer
    return min(having, key=lambda extra: len(extras[extra]), default=None)


def install_command(extra: str) -> str:
    """The pip command that adds hubbub's ``extra`` to the install that runs: ``pip install -e
    '<checkout>[extra]'`` for an editable install of a checkout, ``pip install '<dir>[extra]'``
    for one from a local directory, else ``pip install 'hubbub[extra]'`` (read from the
    distribution's ``direct_url.json``, PEP 610)."""
    try:
        recorded = importlib.metadata.distribution("hubbub").read_text("direct_url.json")
        origin = json.loads(recorded) if recorded else {}
    except (importlib.metadata.PackageNotFoundError, ValueError):
        origin = {}
    url = origin.get("url") if isinstance(origin, dict) else None
    dir_info = origin.get("dir_info") if isinstance(origin, dict) else None
    if isinstance(url, str) and url.startswith("file://") and isinstance(dir_info, dict):
        target = shlex.quote(f"{unquote(urlparse(url).path)}[{extra}]")
        return f"pip install -e {target}" if dir_info.get("editable") else f"pip install {target}"
    return f"pip install 'hubbub[{extra}]'"


def explain(exc: ModuleNotFoundError, prefer: str | None = None) -> MissingExtra | None:
    """``exc`` as a :class:`MissingExtra` if the missing package comes with an extra (naming
    ``prefer`` where that extra installs it)."""
    if isinstance(exc, MissingExtra) and prefer is None:
        return exc
    if not exc.name or "." in exc.name:  # a submodule of an installed package: not an extra's
        return None
    extra = extra_providing(exc.name, prefer)
    if extra is None:
        return None
    return MissingExtra(
        f"No module named {exc.name!r} (it comes with hubbub's {extra!r} extra): "
        f"{install_command(extra)}",
        name=exc.name,
    )


@contextlib.contextmanager
def extra_needed(prefer: str | None = None) -> Iterator[None]:
    """Inside the block, importing a missing optional package raises :class:`MissingExtra`
    (naming ``prefer``, the extra the block's code needs, where that extra installs it)."""
    try:
        yield
    except ModuleNotFoundError as exc:
        missing = explain(exc, prefer)
        if missing is None or missing is exc:
            raise
        raise missing from None
