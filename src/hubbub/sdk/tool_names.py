"""The reversible mapping between ``participant/tool`` and provider-safe tool names.

Model APIs accept tool names matching ``^[a-zA-Z0-9_-]{1,64}$``; participant ids may hold
``.``, ``_`` and ``-``, and tool names anything. The encoding is readable in the common case
and exact in every case:

- **plain**: when both parts are runs of ``[A-Za-z0-9-]`` joined by single underscores
  (``calculator``, ``read_file``, ``math-service``), the name is ``participant__tool``:
  ``calculator/multiply`` → ``calculator__multiply``. Neither part contains ``__``, so the
  first ``__`` is the separator.
- **escaped**: otherwise every byte of the UTF-8 text outside ``[A-Za-z0-9-]`` is written
  ``_hh`` (two lowercase hex digits) and the parts are joined by ``___``:
  ``bot.v2/get`` → ``bot_2ev2___get``. A plain name never contains ``___``, so the two forms
  cannot be confused.
- **hashed**: an encoding longer than 64 characters is cut and ends in a hash:
  ``<prefix>___<12 hex>___``; it decodes to nothing by itself and is resolved through the
  :class:`ToolNameMap` that made it.

:func:`decode_tool_name` accepts only canonical encodings, so ``encode`` is a bijection
between pairs and the names it produces.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

PROVIDER_NAME_RE: Final = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_LENGTH: Final = 64
_NAME_CHARS = re.compile(r"^[A-Za-z0-9_-]+$")
_PLAIN_PART = re.compile(r"^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$")
_SAFE_BYTES: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
_HEX: Final = frozenset("0123456789abcdef")
_HASH_LEN: Final = 12


class UnknownToolName(KeyError):
    """A provider-safe name that maps to no ``participant/tool``."""

    def __str__(self) -> str:
        """The message alone (``KeyError`` would quote it)."""
        return str(self.args[0]) if self.args else "unknown tool name"


def _escape(part: str) -> str:
    out: list[str] = []
    for byte in part.encode("utf-8"):
        out.append(chr(byte) if byte in _SAFE_BYTES else f"_{byte:02x}")
    return "".join(out)


def encode_tool_name(participant: str, tool: str) -> str:
    """The canonical encoding of ``participant/tool`` (may exceed 64 characters)."""
    if _PLAIN_PART.match(participant) and _PLAIN_PART.match(tool):
        return f"{participant}__{tool}"
    return f"{_escape(participant)}___{_escape(tool)}"


def _unescape(encoded: str) -> tuple[str, str] | None:
    parts: list[bytearray] = [bytearray()]
    i, n = 0, len(encoded)
    while i < n:
        ch = encoded[i]
        if ch != "_":
            parts[-1].append(ord(ch))
            i += 1
        elif encoded[i + 1 : i + 3] == "__":
            if len(parts) == 2:
                return None
            parts.append(bytearray())
            i += 3
        elif i + 2 < n and encoded[i + 1] in _HEX and encoded[i + 2] in _HEX:
            parts[-1].append(int(encoded[i + 1 : i + 3], 16))
            i += 3
        else:
            return None
    if len(parts) != 2:
        return None
    try:
        return parts[0].decode("utf-8"), parts[1].decode("utf-8")
    except UnicodeDecodeError:
        return None


def decode_tool_name(name: str) -> tuple[str, str]:
    """``(participant, tool)`` of a canonical encoding; :class:`UnknownToolName` otherwise."""
    if _NAME_CHARS.match(name):
        if "___" in name:
            pair = _unescape(name)
        else:
            head, sep, tail = name.partition("__")
            pair = (head, tail) if sep else None
        if pair is not None and encode_tool_name(*pair) == name:
            return pair
    raise UnknownToolName(f"{name!r} is not an encoded participant/tool name")


def hashed_tool_name(participant: str, tool: str) -> str:
    """The 64-character form of a pair whose encoding is too long."""
    digest = hashlib.sha256(f"{participant}/{tool}".encode()).hexdigest()[:_HASH_LEN]
    readable = re.sub(r"[^A-Za-z0-9-]+", "-", f"{participant}-{tool}")
    keep = MAX_LENGTH - _HASH_LEN - 6
    return f"{readable[:keep]}___{digest}___"


class ToolNameMap:
    """Provider-safe names for the tools an agent offers, and the way back.

    Names are the canonical encoding when it fits in 64 characters, else the hashed form;
    the map remembers every name it handed out, so both kinds resolve.
    """

    def __init__(self) -> None:
        self._by_name: dict[str, tuple[str, str]] = {}
        self._by_pair: dict[tuple[str, str], str] = {}

    def name_for(self, participant: str, tool: str) -> str:
        """The provider-safe name of ``participant/tool`` (remembered for :meth:`resolve`)."""
        pair = (participant, tool)
        known = self._by_pair.get(pair)
        if known is not None:
            return known
        name = encode_tool_name(participant, tool)
        if len(name) > MAX_LENGTH:
            name = hashed_tool_name(participant, tool)
        other = self._by_name.get(name)
        if other is not None and other != pair:  # a 48-bit hash collision: refuse loudly
            raise ValueError(f"tool names {other} and {pair} map to the same name {name!r}")
        self._by_name[name] = pair
        self._by_pair[pair] = name
        return name

    def resolve(self, name: str) -> tuple[str, str]:
        """``(participant, tool)`` for a name from :meth:`name_for` (or any plain encoding)."""
        pair = self._by_name.get(name)
        if pair is not None:
            return pair
        return decode_tool_name(name)

    def forget(self, participant: str) -> None:
        """Drop the names of ``participant``'s tools."""
        for pair in [p for p in self._by_pair if p[0] == participant]:
            self._by_name.pop(self._by_pair.pop(pair), None)

    def __len__(self) -> int:
        """How many names are remembered."""
        return len(self._by_name)


__all__ = [
    "MAX_LENGTH",
    "PROVIDER_NAME_RE",
    "ToolNameMap",
    "UnknownToolName",
    "decode_tool_name",
    "encode_tool_name",
    "hashed_tool_name",
]
