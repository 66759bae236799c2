"""Optional packages: which extra of hubbub installs which, and the error that says so.

The core (``pip install hubbub``) is the gateway and the SDK's :class:`~hubbub.sdk.Client`;
``[agents]`` adds what ``Participant`` and ``Agent`` need, ``[chat]`` the terminal client.
Which package belongs to which extra is read from hubbub's own package metadata (that is,
``pyproject.toml``), so the rule lives in one place.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import re
from collections.abc import Iterator

_IN_EXTRA = re.compile(r"""([A-Za-z0-9][A-Za-z0-9._-]*)[^;]*;.*\bextra\s*==\s*["']([^"']+)["']""")


class MissingExtra(ModuleNotFoundError):
    """An optional package is not installed; the message names the extra to install."""


def _import_name(distribution: str) -> str:
    return distribution.lower().replace("-", "_").replace(".", "_")


def extra_providing(module: str) -> str | None:
    """The smallest extra of hubbub that installs the top-level package ``module`` (None:
    no extra does)."""
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
    return min(having, key=lambda extra: len(extras[extra]), default=None)


def explain(exc: ModuleNotFoundError) -> MissingExtra | None:
    """``exc`` as a :class:`MissingExtra` if the missing package comes with an extra."""
    if isinstance(exc, MissingExtra):
        return exc
    if not exc.name or "." in exc.name:  # a submodule of an installed package: not an extra's
        return None
    extra = extra_providing(exc.name)
    if extra is None:
        return None
    return MissingExtra(
        f"No module named {exc.name!r} (it comes with hubbub's {extra!r} extra): "
        f"pip install 'hubbub[{extra}]'",
        name=exc.name,
    )


@contextlib.contextmanager
def extra_needed() -> Iterator[None]:
    """Inside the block, importing a missing optional package raises :class:`MissingExtra`."""
    try:
        yield
    except ModuleNotFoundError as exc:
        missing = explain(exc)
        if missing is None or missing is exc:
            raise
        raise missing from None
