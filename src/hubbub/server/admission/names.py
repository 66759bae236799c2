"""Names that look like an existing one: participant ids and channel names that differ from a
known one only by case or by look-alike characters are refused (``Alice`` or ``aIice`` next
to ``alice``, ``#General`` or ``#genera1`` next to ``#general``), unless
``limits.allow_lookalike_names``.

Ids and channel names are ASCII (``[A-Za-z0-9_.-]``), so the look-alikes are few and the fold
is small and exact: two names look alike when they are equal after either

- lowercasing, then ``1`` → ``l`` and ``0`` → ``o`` (case, digit one / ell, zero / oh), or
- ``I`` → ``l``, ``1`` → ``l``, ``0`` → ``o``, then lowercasing (capital i / ell, which many
  sans-serif fonts draw alike).

Lowercase ``i`` and ``l`` stay apart (``bili`` is not ``bill``); ``rn`` / ``m`` and other
multi-character look-alikes are not folded (the web UIs show ids in a font that tells them
apart, docs/webchat.md).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Final

from hubbub.protocol.errors import ErrorCode, ProtocolError

_DIGITS: Final = str.maketrans({"1": "l", "0": "o"})
_CAPITAL_I: Final = str.maketrans({"I": "l", "1": "l", "0": "o"})


def _keys(name: str) -> tuple[str, str]:
    """The name's two folds (see the module's docstring)."""
    return name.lower().translate(_DIGITS), name.translate(_CAPITAL_I).lower()


def looks_like(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` differ only by case or look-alike characters (or not at all)."""
    ka, kb = _keys(a), _keys(b)
    return ka[0] == kb[0] or ka[1] == kb[1]


class LookAlikes:
    """The names of one kind (ids, or channels) of one space, by their folds."""

    def __init__(self) -> None:
        self._by_key: tuple[dict[str, str], dict[str, str]] = ({}, {})
        self._names: set[str] = set()

    def add(self, name: str) -> None:
        """Remember ``name`` (the first of look-alike names is the one others are refused for)."""
        if name in self._names:
            return
        self._names.add(name)
        for table, key in zip(self._by_key, _keys(name), strict=True):
            table.setdefault(key, name)

    def clash(self, name: str) -> str | None:
        """The known name that ``name`` looks like, if it is not that name itself."""
        if name in self._names:
            return None
        for table, key in zip(self._by_key, _keys(name), strict=True):
            other = table.get(key)
            if other is not None:
                return other
        return None

    def sync(self, names: Collection[str]) -> None:
        """Take in names added elsewhere (configured, restored from the store): a pass over
        ``names`` only when it holds more than this index."""
        if len(names) > len(self._names):
            for name in names:
                self.add(name)


class NameGuard:
    """Refuses a new participant id or channel name that looks like one a space has."""

    def __init__(self, allow: bool) -> None:
        self.allow = allow
        self._ids: dict[str, LookAlikes] = {}
        self._channels: dict[str, LookAlikes] = {}
        self._key_names: dict[str, LookAlikes] = {}
        """The names agentchat keys took (shown as their ``from_name``; their ids are key
        ids): apart from the ids, whose index follows the space's known ids."""

    def add_key_names(self, space: str, names: Collection[str]) -> None:
        """Remember names keys took in an earlier run (bound on first use)."""
        table = self._key_names.setdefault(space, LookAlikes())
        for name in names:
            table.add(name)

    def check_id(
        self, space: str, known: Collection[str], pid: str, *, key_name: bool = False
    ) -> None:
        """Refuse ``pid`` (new in ``space``, whose ids are ``known``) if it looks like a known
        id or a name a key took; else remember it (``key_name``: as a name a key takes)."""
        other = None
        if not self.allow:
            keys = self._key_names.setdefault(space, LookAlikes())
            other = self._clash(self._ids, space, known, pid, remember=False)
            if other is None and pid not in known:
                other = keys.clash(pid)
            if other is None:
                if key_name:
                    keys.add(pid)
                elif pid not in known:
                    self._ids[space].add(pid)
        if other is not None:
            what = "name" if key_name else "participant id"
            raise ProtocolError(
                ErrorCode.INVALID_ID,
                f"{what} {pid!r} looks like {other!r}, who is already in space {space!r} "
                f"({what}s that differ only by case or by I/l/1, O/0 are refused): connect as "
                f"{other!r} if that is you, or pick another {what.split()[-1]}",
            )

    def check_channel(
        self, space: str, channels: Collection[str], name: str, sees: Callable[[str], bool]
    ) -> None:
        """Refuse creating channel ``name`` if it exists or looks like an existing one;
        ``sees``: whether the creator may see a channel (``state/visibility.py``): the
        refusal never names one it may not."""
        other = name if name in channels else None
        if other is None:
            other = self._clash(self._channels, space, channels, name, remember=False)
        if other is None:
            return
        if not sees(other):
            raise ProtocolError(
                ErrorCode.CHANNEL_EXISTS,
                f"the channel name {name} is not available: it is, or looks like, the name of "
                "a channel you cannot see (names that differ only by case or by I/l/1, O/0 "
                "count as the same): pick another name",
            )
        if other == name:
            raise ProtocolError(ErrorCode.CHANNEL_EXISTS, f"channel {name} already exists; join it")
        raise ProtocolError(
            ErrorCode.CHANNEL_EXISTS,
            f"{name} looks like the existing channel {other} (channel names that differ "
            f"only by case or by I/l/1, O/0 are refused): join {other}, or pick another name",
        )

    def _clash(
        self,
        tables: dict[str, LookAlikes],
        space: str,
        existing: Collection[str],
        name: str,
        *,
        remember: bool,
    ) -> str | None:
        """The existing name ``name`` looks like (None: it is new — remembered if asked —,
        or it exists already, or look-alikes are allowed)."""
        if self.allow or name in existing:
            return None
        names = tables.setdefault(space, LookAlikes())
        names.sync(existing)
        other = names.clash(name)
        if other is None and remember:
            names.add(name)
        return other


__all__ = ["LookAlikes", "NameGuard", "looks_like"]
