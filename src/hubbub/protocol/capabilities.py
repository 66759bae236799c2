"""MEW v0.4 capability patterns: the one matcher used by the gateway and by the SDK.

A capability is ``{"kind": <pattern>, "payload"?: <payload pattern>}``; a participant may send an
envelope when ANY of its capabilities matches it (a union: there are no deny rules, exactly as
in MEW's ``hasCapability``/``canSend``). Negation (``!pattern``) is part of a single pattern and
means "any value except". The exact rules are in ``docs/capabilities.md``.

Everything is validated and compiled once: a glob becomes a small automaton that reads a value
once, left to right (linear time, no backtracking, see :class:`_Glob`), a ``/regex/`` a compiled
``regex`` pattern run with a timeout. All the matching for one envelope shares one CPU budget
(:data:`MATCH_BUDGET_S`); past it the envelope is refused as too costly to check. Lists and
patterns are bounded in size (:data:`MAX_CAPABILITIES`, :data:`MAX_CAPABILITY_BYTES`,
:data:`MAX_PATTERNS`, :data:`MAX_PATTERN_CHARS`, :data:`MAX_REGEX_REPEATS`), checked before
anything is compiled. :class:`CapabilitySet` additionally caches,
per kind, which capabilities can match, so that ``allows(kind)`` for a kind whose answer does
not depend on the payload is one dict lookup.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, Literal

import regex

__all__ = [
    "BASELINE",
    "EVERY_KIND",
    "MATCH_BUDGET_S",
    "MAX_CAPABILITIES",
    "MAX_CAPABILITY_BYTES",
    "MAX_PATTERNS",
    "MAX_PATTERN_CHARS",
    "MAX_REGEX_REPEATS",
    "Capability",
    "CapabilityError",
    "CapabilitySet",
    "MatchBudget",
    "Verdict",
    "can_send",
    "covers",
    "matches",
    "narrowed",
    "uncovered",
    "validate_capabilities",
]

Capability = dict[str, Any]
log = logging.getLogger("hubbub.capabilities")

# A compiled pattern for one JSON value (payload side) or one string (kind side); both spend
# from the budget of the envelope being checked.
_ValueMatcher = Callable[[object, "MatchBudget"], bool]
_StrMatcher = Callable[[str, "MatchBudget"], bool]

_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})
# Keys of a capability entry: the two that match, and two inert notes (MEW's ``id``).
_MATCH_KEYS: Final = ("kind", "payload")
_NOTE_KEYS: Final = ("id", "description")
EVERY_KIND: Final = "*"
"""A ``kind`` that is this alone matches every kind (elsewhere ``*`` is one path segment)."""
BASELINE: Final = ({"kind": "mcp/response"},)
"""What every participant may send whatever its capabilities (MEW's baseline: answering a
request addressed to it)."""
# Bound on the per-kind cache: kinds are chosen by senders, so the cache must not grow forever.
_KIND_CACHE_MAX: Final = 4096
# Deepest nesting of a payload pattern (patterns come from senders too, via capability/grant).
_MAX_PATTERN_DEPTH: Final = 32


def _short(value: object) -> str:
    """``repr`` of a bad value for an error message, cut to a readable length."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class CapabilityError(ValueError):
    """A capability list or pattern that cannot be used; the message says where and how to fix."""


# ---------------------------------------------------------------------------------------------
# compiling patterns
# ---------------------------------------------------------------------------------------------

MAX_CAPABILITIES: Final = 128
"""Most entries in one capability list (a join's request, a participant's set after grants)."""
MAX_CAPABILITY_BYTES: Final = 16 * 1024
"""Largest capability list, as compact JSON (UTF-8 bytes)."""
MAX_PATTERNS: Final = 256
"""Most string patterns (kinds and payload strings, one-of items included) in one list."""
MAX_PATTERN_CHARS: Final = 512
"""Longest string pattern (a glob, ``/regex/``, negation or literal), in characters."""
MAX_REGEX_REPEATS: Final = 10_000
"""Most a list's ``/regex/`` patterns may repeat by counted quantifiers (``{n}``, ``{m,n}``):
per pattern the product of its counts, summed over the list. The ``regex`` engine expands
them when it compiles (``(a{1000}){1000}`` took seconds, larger counts forever)."""
MATCH_BUDGET_S: Final = 0.05
"""CPU time all capability matching for one envelope may take; past it the envelope is refused."""
REGEX_TIMEOUT_S: Final = 0.005
"""Longest one capability regex may run on one value; past it the value does not match."""


_CLOCK_EVERY: Final = 8192
"""Characters globs may read between two looks at the clock (a look costs about 1 µs)."""


class MatchBudget:
    """The CPU time left for matching one envelope against capabilities (this thread's CPU
    time). The clock starts at the first look, which comes before the first regex or after
    :data:`_CLOCK_EVERY` characters read by globs: an envelope that needs neither costs no
    look at all."""

    __slots__ = ("_deadline", "_seconds", "_unchecked", "exhausted")

    def __init__(self, seconds: float = MATCH_BUDGET_S) -> None:
        """A budget of ``seconds`` of this thread's CPU time."""
        self._seconds = seconds
        self._deadline: float | None = None
        self._unchecked = 0
        self.exhausted = False

    def left(self) -> float:
        """Seconds left (0 once spent)."""
        now = time.thread_time()
        if self._deadline is None:
            self._deadline = now + self._seconds
        left = self._deadline - now
        if left <= 0:
            self.exhausted = True
            return 0.0
        return left

    def spend(self, characters: int) -> None:
        """Count ``characters`` read; raise :class:`_OutOfBudget` once the budget is spent
        (the clock is read every :data:`_CLOCK_EVERY` characters)."""
        self._unchecked += characters
        if self._unchecked >= _CLOCK_EVERY:
            self._unchecked = 0
            if self.exhausted or self.left() <= 0:
                raise _OutOfBudget


class _OutOfBudget(Exception):
    """The matching of one envelope ran past its :class:`MatchBudget`."""


PatternType = Literal["negation", "regex", "glob", "literal"]


def pattern_type(pattern: str) -> PatternType:
    """How a string pattern is read: ``!negation``, ``/regex/``, glob (``*``/``?``) or literal."""
    if pattern.startswith("!"):
        return "negation"
    if len(pattern) >= 2 and pattern[0] == "/" and pattern[-1] == "/":
        return "regex"
    if "*" in pattern or "?" in pattern:
        return "glob"
    return "literal"


def glob_tokens(glob: str) -> list[str]:
    """A glob split into wildcards (``**``, ``*``, ``?``; runs of ``*`` are one ``**``) and
    single literal characters (there is no escape, so a token is a wildcard or one char)."""
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        if glob.startswith("**", i):
            out.append("**")
            i += 2
            while i < n and glob[i] == "*":
                i += 1
            continue
        out.append(glob[i])
        i += 1
    return out


_GLOB_CHUNK: Final = 4096
"""Characters a glob reads between two looks at the budget."""
_GLOB_CELLS_MAX: Final = 1024
"""Most transitions one glob remembers (states x character classes; beyond: computed each
time), so that a participant's globs hold at most a few KiB each."""
_OTHER_CLASS: Final = 0
"""The class of characters that are neither ``/`` nor a literal of the glob."""
_SLASH_CLASS: Final = 1


class _Glob:
    """A glob as an automaton over its token positions: linear in the value, no backtracking.

    State bit ``i`` set: the first ``i`` tokens match what was read so far (a bit-parallel NFA,
    "shift-and"). Reading a character moves bit ``i`` to ``i + 1`` where token ``i`` is that
    character or ``?`` (not ``/``), keeps it where token ``i`` is ``**`` (or ``*``, not on
    ``/``), and a wildcard may match nothing (bit ``i`` also sets ``i + 1``). Stars are never
    adjacent (runs are one ``**``), so that closure is one step. Characters fall into classes
    (each literal of the glob, ``/``, anything else) and the transitions of the state sets met
    are remembered, so reading one character is a lookup or a few integer operations.
    """

    __slots__ = (
        "_adv",
        "_classes",
        "_final",
        "_pieces",
        "_rows",
        "_rows_max",
        "_stars",
        "_start",
        "_stay",
    )

    def __init__(self, tokens: Sequence[str]) -> None:
        literals = sorted({t for t in tokens if t not in ("*", "**", "?", "/")})
        self._classes = {char: index + 2 for index, char in enumerate(literals)}
        self._classes["/"] = _SLASH_CLASS
        width = len(literals) + 2
        literal = [0] * width  # per class: the positions of tokens that are that character
        any_char = star = double_star = 0
        for i, token in enumerate(tokens):
            bit = 1 << i
            if token == "**":
                double_star |= bit
            elif token == "*":
                star |= bit
            elif token == "?":
                any_char |= bit
            else:
                literal[self._classes[token]] |= bit
        self._adv = [bits | any_char for bits in literal]
        self._adv[_SLASH_CLASS] = literal[_SLASH_CLASS]  # ? never reads a /
        self._stay = [star | double_star] * width
        self._stay[_SLASH_CLASS] = double_star  # * never reads a /
        self._stars = star | double_star
        self._start = self._closed(1)
        self._final = 1 << len(tokens)
        self._rows: dict[int, list[int]] = {}
        self._rows_max = max(1, _GLOB_CELLS_MAX // width)
        # Without ``?``, on a value without ``/`` (where ``*`` and ``**`` are alike), the glob
        # is literal pieces between stars: found left to right with str.find (leftmost first
        # is right for such a glob), at C speed.
        self._pieces: list[str] | None = None
        if "?" not in tokens:
            self._pieces = [""]
            for token in tokens:
                if token in ("*", "**"):
                    self._pieces.append("")
                else:
                    self._pieces[-1] += token

    def _by_pieces(self, value: str) -> bool:
        pieces = self._pieces
        assert pieces is not None
        first, last = pieces[0], pieces[-1]
        if len(pieces) == 1:
            return value == first
        end = len(value) - len(last)
        if end < len(first) or not value.startswith(first) or not value.endswith(last):
            return False
        at = len(first)
        for piece in pieces[1:-1]:
            found = value.find(piece, at, end)
            if found < 0:
                return False
            at = found + len(piece)
        return True

    def _closed(self, state: int) -> int:
        return state | ((state & self._stars) << 1)

    def _step(self, state: int, k: int) -> int:
        row = self._rows.get(state)
        if row is None:
            if len(self._rows) >= self._rows_max:
                return self._closed(((state & self._adv[k]) << 1) | (state & self._stay[k]))
            row = self._rows[state] = [-1] * len(self._adv)
        nxt = row[k]
        if nxt < 0:
            nxt = row[k] = self._closed(((state & self._adv[k]) << 1) | (state & self._stay[k]))
        return nxt

    def __call__(self, value: str, budget: MatchBudget) -> bool:
        """Whether the whole of ``value`` matches."""
        if self._pieces is not None and "/" not in value:
            budget.spend(len(value))
            return self._by_pieces(value)
        state, classify, rows, step = self._start, self._classes.get, self._rows, self._step
        for begin in range(0, len(value), _GLOB_CHUNK):
            chunk = value[begin : begin + _GLOB_CHUNK] if len(value) > _GLOB_CHUNK else value
            budget.spend(len(chunk))
            for char in chunk:
                k = classify(char, _OTHER_CLASS)
                row = rows.get(state)  # the remembered transition, inline: the hot loop
                nxt = row[k] if row is not None else -1
                state = nxt if nxt >= 0 else step(state, k)
            if not state:
                return False
        return bool(state & self._final)


def _negate(inner: _StrMatcher) -> _StrMatcher:
    return lambda value, budget: not inner(value, budget)


def _any_of_str(alternatives: Sequence[_StrMatcher]) -> _StrMatcher:
    alts = tuple(alternatives)

    def match(value: str, budget: MatchBudget) -> bool:
        for alt in alts:  # noqa: SIM110 - hot path: no generator per call
            if alt(value, budget):
                return True
        return False

    return match


def _is_literal(pattern: str) -> bool:
    """Whether a string pattern has no special syntax (so it matches by equality)."""
    return pattern_type(pattern) == "literal"


def _bounded_search(compiled: regex.Pattern[str], pattern: str) -> _StrMatcher:
    """A regex search that cannot stall the gateway: a runaway pattern counts as no match, and
    the search stops when the envelope's budget does."""

    def search(value: str, budget: MatchBudget) -> bool:
        limit = min(REGEX_TIMEOUT_S, budget.left())
        if limit <= 0:
            raise _OutOfBudget
        try:
            return compiled.search(value, timeout=limit) is not None
        except TimeoutError:
            if limit < REGEX_TIMEOUT_S:
                budget.exhausted = True
                raise _OutOfBudget from None
            log.warning(
                "capability regex %s gave up after %.0f ms on a %d-character value: denied",
                _short(pattern),
                REGEX_TIMEOUT_S * 1000,
                len(value),
            )
            return False

    return search


def string_matcher(pattern: str, where: str = "pattern") -> Callable[[str], bool]:
    """The compiled matcher of one string pattern (raises :class:`CapabilityError`); each call
    has a budget of its own and answers no match past it."""
    compiled = _compile_string(pattern, where)

    def match(value: str) -> bool:
        try:
            return compiled(value, MatchBudget())
        except _OutOfBudget:
            return False

    return match


def _check_length(pattern: str, where: str) -> None:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise CapabilityError(
            f"{where}: pattern of {len(pattern)} characters is longer than the limit of "
            f"{MAX_PATTERN_CHARS} (MAX_PATTERN_CHARS); write a shorter pattern"
        )


def _compile_string(pattern: str, where: str) -> _StrMatcher:
    """Compile one string pattern: ``!neg``, ``/regex/``, glob, or a literal."""
    _check_length(pattern, where)
    read = pattern_type(pattern)
    if read == "negation":
        return _negate(_compile_string(pattern[1:], where))
    if read == "regex":
        try:
            compiled = regex.compile(pattern[1:-1])
        except (regex.error, OverflowError, RecursionError) as exc:
            raise CapabilityError(
                f"{where}: invalid regular expression {_short(pattern)}: {exc} "
                "(write /regex/ in Python 're' syntax, or drop the slashes for a literal)"
            ) from None
        return _bounded_search(compiled, pattern)
    if read == "glob":
        return _Glob(glob_tokens(pattern))
    return lambda value, budget: value == pattern


def _every_kind(_kind: str, _budget: MatchBudget) -> bool:
    return True


def _compile_kind(kind: object, where: str) -> _StrMatcher:
    """Compile the ``kind`` of a capability: a string pattern or a non-empty list of them; a
    lone ``*`` is every kind (MEW v0.4 §4.1: its templates give humans ``{kind: "*"}``)."""
    hint = "'kind' must be a string pattern or a list of them"
    if isinstance(kind, str):
        if not kind:
            raise CapabilityError(f"{where}: 'kind' must not be empty (e.g. 'chat' or 'mcp/*')")
        if kind == EVERY_KIND:
            return _every_kind
        return _compile_string(kind, f"{where}: kind")
    if isinstance(kind, list | tuple):
        if not kind:
            raise CapabilityError(f"{where}: {hint}, got an empty list (list at least one kind)")
        alternatives: list[_StrMatcher] = []
        for index, item in enumerate(kind):
            if not isinstance(item, str) or not item:
                raise CapabilityError(
                    f"{where}: kind[{index}]: {hint}; each list item must be a non-empty "
                    f"string, got {_short(item)}"
                )
            alternatives.append(
                _every_kind
                if item == EVERY_KIND
                else _compile_string(item, f"{where}: kind[{index}]")
            )
        return alternatives[0] if len(alternatives) == 1 else _any_of_str(alternatives)
    raise CapabilityError(f"{where}: {hint}, got {_short(kind)}")


def _string_value(matcher: _StrMatcher) -> _ValueMatcher:
    return lambda value, budget: isinstance(value, str) and matcher(value, budget)


def _literal_value(expected: str) -> _ValueMatcher:
    return lambda value, budget: value == expected  # a non-string never equals a string


def _bool_value(expected: bool) -> _ValueMatcher:
    return lambda value, budget: value is expected


def _null_value() -> _ValueMatcher:
    return lambda value, budget: value is None


def _number_value(expected: float) -> _ValueMatcher:
    return lambda value, budget: (
        isinstance(value, int | float) and not isinstance(value, bool) and value == expected
    )


def _any_of_value(alternatives: Sequence[_ValueMatcher]) -> _ValueMatcher:
    alts = tuple(alternatives)

    def match(value: object, budget: MatchBudget) -> bool:
        for alt in alts:  # noqa: SIM110 - hot path: no generator per call
            if alt(value, budget):
                return True
        return False

    return match


def _object_value(fields: Sequence[tuple[str, _ValueMatcher]]) -> _ValueMatcher:
    items = tuple(fields)

    def match(value: object, budget: MatchBudget) -> bool:
        if type(value) is not dict and not isinstance(value, Mapping):
            return False
        for key, matcher in items:
            if key not in value or not matcher(value[key], budget):
                return False
        return True

    return match


def _compile_value(pattern: object, where: str, depth: int = 1) -> _ValueMatcher:
    """Compile one payload pattern value (string pattern, scalar, nested object or one-of)."""
    if depth > _MAX_PATTERN_DEPTH:
        raise CapabilityError(
            f"{where}: payload pattern nests deeper than {_MAX_PATTERN_DEPTH} levels"
        )
    if isinstance(pattern, str):
        if _is_literal(pattern):
            _check_length(pattern, where)
            return _literal_value(pattern)
        return _string_value(_compile_string(pattern, where))
    if isinstance(pattern, bool):
        return _bool_value(pattern)
    if pattern is None:
        return _null_value()
    if isinstance(pattern, int | float):
        return _number_value(pattern)
    if isinstance(pattern, Mapping):
        return _object_value(_compile_fields(pattern, where, depth + 1))
    if isinstance(pattern, list | tuple):
        if not pattern:
            raise CapabilityError(
                f"{where}: an empty list matches nothing; list at least one allowed value"
            )
        return _any_of_value(
            [
                _compile_value(item, f"{where}[{index}]", depth + 1)
                for index, item in enumerate(pattern)
            ]
        )
    raise CapabilityError(
        f"{where}: a payload pattern value must be a string pattern, number, boolean, null, "
        f"mapping or list, got {type(pattern).__name__} {_short(pattern)}"
    )


def _compile_fields(
    pattern: Mapping[Any, Any], where: str, depth: int = 1
) -> list[tuple[str, _ValueMatcher]]:
    fields: list[tuple[str, _ValueMatcher]] = []
    for key, sub in pattern.items():
        if not isinstance(key, str):
            raise CapabilityError(f"{where}: payload keys must be strings, got {_short(key)}")
        if key.startswith("$") or "*" in key or "?" in key:
            raise CapabilityError(
                f"{where}: payload key {_short(key)} is a JSONPath/wildcard key; hubbub matches "
                "payload keys literally, so write the exact key (nest objects for deeper fields)"
            )
        fields.append((key, _compile_value(sub, f"{where}.{key}", depth)))
    return fields


def _plain(value: object) -> Any:
    """A JSON-shaped deep copy (mappings -> dict, tuples -> list)."""
    if isinstance(value, Mapping):
        return {key: _plain(sub) for key, sub in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


class _Compiled:
    """One validated capability with its compiled matchers and its identity keys."""

    __slots__ = ("entry", "key", "kind_key", "kind_match", "payload_match")

    def __init__(self, raw: object, where: str) -> None:
        if not isinstance(raw, Mapping):
            raise CapabilityError(
                f"{where}: must be a mapping like {{kind: 'chat'}}, got {_short(raw)}"
            )
        unknown = [key for key in raw if key not in _MATCH_KEYS and key not in _NOTE_KEYS]
        for key in unknown:  # MEW writes more (a grant's ``to``): ignored, as MEW does,
            near = difflib.get_close_matches(str(key), _MATCH_KEYS, n=1, cutoff=0.7)
            if near:  # but a misspelt 'payload' would widen the capability: refused
                raise CapabilityError(
                    f"{where}: unknown key {key!r} (did you mean {near[0]!r}?); a capability "
                    "has 'kind', an optional 'payload' pattern, and optional notes"
                )
            log.debug("%s: ignoring the key %r of a capability", where, key)
        if "kind" not in raw:
            raise CapabilityError(f"{where}: missing 'kind' (e.g. {{kind: 'chat'}})")
        kind = raw["kind"]
        self.kind_match: _StrMatcher = _compile_kind(kind, where)
        payload = raw.get("payload")
        if payload is not None and not isinstance(payload, Mapping):
            raise CapabilityError(
                f"{where}: 'payload' must be a mapping of field patterns "
                f"(e.g. {{method: 'tools/call'}}), got {_short(payload)}"
            )
        entry: Capability = {"kind": _plain(kind)}
        # An absent, null or empty payload pattern constrains nothing (MEW).
        self.payload_match: _ValueMatcher | None = None
        if payload:
            self.payload_match = _object_value(_compile_fields(payload, f"{where}: payload"))
            entry["payload"] = _plain(payload)
        for note in _NOTE_KEYS:
            if note in raw:
                if not isinstance(raw[note], str):
                    raise CapabilityError(
                        f"{where}: {note!r} must be a string, got {_short(raw[note])}"
                    )
                entry[note] = raw[note]
        self.entry = entry
        self.kind_key = _canonical(entry["kind"])
        self.key = _canonical([entry["kind"], entry.get("payload")])

    def matches(self, kind: str, payload: object, budget: MatchBudget) -> bool:
        """Whether this capability matches ``kind`` and ``payload``."""
        if not self.kind_match(kind, budget):
            return False
        if self.payload_match is None:
            return True
        return self.payload_match(payload if isinstance(payload, Mapping) else _EMPTY, budget)


def _canonical(value: object) -> str:
    """A JSON-typed identity (``true`` differs from ``1``) for dedup and revoke."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _compile_list(value: object, noun: str = "capability") -> list[_Compiled]:
    if isinstance(value, str | bytes | Mapping):
        raise CapabilityError(
            f"capabilities must be a list of {{kind, payload?}} mappings, "
            f"got {type(value).__name__} {_short(value)}"
        )
    if not isinstance(value, Iterable):
        raise CapabilityError(
            f"capabilities must be a list of {{kind, payload?}} mappings, got {_short(value)}"
        )
    items = list(value)
    _check_size(items, noun)  # before compiling anything: compiling is what it protects
    return [_Compiled(raw, f"{noun} {index}") for index, raw in enumerate(items)]


def _check_count(count: int, noun: str) -> None:
    if count > MAX_CAPABILITIES:
        raise CapabilityError(
            f"{noun} list has {count} entries, more than the limit of {MAX_CAPABILITIES} "
            "(MAX_CAPABILITIES); list fewer, broader patterns (e.g. 'mcp/*' or a kind list)"
        )


def _raw_strings(value: object) -> Iterable[str]:
    """The strings in a raw (unvalidated) kind or payload pattern, however nested."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


_COUNTED: Final = regex.compile(r"(?<!\\)\{(\d*)(?:,(\d*))?\}")
"""A counted quantifier ``{n}``, ``{m,}``, ``{,n}``, ``{m,n}`` (read generously: one inside a
character class counts too)."""


def _regex_repeats(body: str) -> int:
    """The product of the counts of a regex's counted quantifiers (1 if it has none)."""
    product = 1
    for low, high in _COUNTED.findall(body):
        product *= max(int(low or 0), int(high or 0), 1)
        if product > MAX_REGEX_REPEATS:
            break
    return product


def _check_size(items: Sequence[object], noun: str) -> None:
    """Raise :class:`CapabilityError` when a (raw) list is past the entry, pattern, byte or
    regex repeat limits."""
    _check_count(len(items), noun)
    patterns = repeats = 0
    for index, raw in enumerate(items):
        if not isinstance(raw, Mapping):
            continue
        for key in _MATCH_KEYS:
            for text in _raw_strings(raw.get(key)):
                patterns += 1
                inner = text.lstrip("!")
                if len(text) > MAX_PATTERN_CHARS or pattern_type(inner) != "regex":
                    continue
                count = _regex_repeats(inner[1:-1])
                if count > MAX_REGEX_REPEATS:
                    raise CapabilityError(
                        f"{noun} {index}: {key}: invalid regular expression {_short(text)}: it "
                        f"repeats {count} times by counted quantifiers like {{n}}, more than "
                        f"the limit of {MAX_REGEX_REPEATS} (MAX_REGEX_REPEATS); use * or + "
                        "instead of large counts"
                    )
                repeats += count
    if patterns > MAX_PATTERNS:
        raise CapabilityError(
            f"{noun} list has {patterns} string patterns, more than the limit of "
            f"{MAX_PATTERNS} (MAX_PATTERNS); merge them into fewer, broader patterns"
        )
    try:
        size = len(_canonical(items).encode())
    except (TypeError, ValueError, RecursionError):
        size = 0  # not JSON: compiling it says what is wrong
    if size > MAX_CAPABILITY_BYTES:
        raise CapabilityError(
            f"{noun} list is {size} bytes as JSON, more than the limit of "
            f"{MAX_CAPABILITY_BYTES} (MAX_CAPABILITY_BYTES); list fewer or shorter patterns"
        )
    if repeats > MAX_REGEX_REPEATS:
        raise CapabilityError(
            f"{noun} list's /regex/ patterns repeat {repeats} times by counted quantifiers "
            f"like {{n}}, more than the limit of "
            f"{MAX_REGEX_REPEATS} (MAX_REGEX_REPEATS); use * or + instead of large counts"
        )


def _dedup(compiled: Iterable[_Compiled]) -> list[_Compiled]:
    seen: set[str] = set()
    out: list[_Compiled] = []
    for item in compiled:
        if item.key not in seen:
            seen.add(item.key)
            out.append(item)
    return out


# ---------------------------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------------------------


def validate_capabilities(value: object) -> list[Capability]:
    """Check a capability list (e.g. from space.yaml) and return normalized copies of it."""
    if not isinstance(value, list | tuple):
        raise CapabilityError(
            f"capabilities must be a list of {{kind, payload?}} mappings, "
            f"got {type(value).__name__} {_short(value)}"
        )
    return [_plain(item.entry) for item in _compile_list(value)]


def matches(
    capability: Mapping[str, Any], kind: str, payload: Mapping[str, Any] | None = None
) -> bool:
    """Whether one capability allows an envelope of ``kind`` with ``payload`` (uncached)."""
    compiled = _Compiled(capability, "capability")
    if not isinstance(kind, str):
        return False
    try:
        return compiled.matches(kind, payload, MatchBudget())
    except _OutOfBudget:
        return False


def names_kind(
    capabilities: Sequence[Mapping[str, Any]], kind: str, payload: Mapping[str, Any] | None = None
) -> bool:
    """Whether a capability that **names** ``kind`` allows it: its kind pattern is ``kind``
    itself or a glob in ``kind``'s namespace (``participant/shutdown``, ``participant/*``),
    not a pattern that reaches every namespace (``**``, a lone ``*``, ``!…``, ``/regex/``)."""
    head, slash, _ = kind.rpartition("/")
    namespace = head + slash
    named: list[dict[str, Any]] = []
    for entry in capabilities:
        own = [
            p
            for p in _alternatives(entry.get("kind"))
            if p == kind or (namespace and pattern_type(p) == "glob" and p.startswith(namespace))
        ]
        if own:
            named.append({**entry, "kind": own})
    return bool(named) and CapabilitySet.shared(named).allows(kind, payload)


# ---------------------------------------------------------------------------------------------
# covering: whether one capability list allows everything another does (a grant never exceeds
# what the granter holds; narrowing meets patterns). Sound, not complete: it never says
# "covered" wrongly, but may refuse an exotic grant that is in fact covered (a negation or
# regex wider than it can prove, a pattern covered only by the union of several entries).
# ---------------------------------------------------------------------------------------------

_MAX_GLOB_WORK: Final = 1_000_000
"""Largest (held tokens × wanted tokens) table a glob comparison builds; past it: not covered."""


def uncovered(
    held: Sequence[Mapping[str, Any]], wanted: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The entries of ``wanted`` that ``held`` does not cover (empty: all covered)."""
    return [entry for entry in wanted if not covers(held, entry)]


def covers(held: Sequence[Mapping[str, Any]], wanted: Mapping[str, Any]) -> bool:
    """Whether every envelope the capability ``wanted`` allows is allowed by ``held``."""
    payload = wanted.get("payload") or None
    for kind in _alternatives(wanted.get("kind")):
        if not any(
            any(h == EVERY_KIND or _str_covers(h, kind) for h in _alternatives(entry.get("kind")))
            and _payload_covers(entry.get("payload") or None, payload)
            for entry in held
        ):
            return False
    return True


def _alternatives(kind: object) -> list[str]:
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list | tuple):
        return [k for k in kind if isinstance(k, str)]
    return []


def _str_covers(held: str, wanted: str) -> bool:
    """Whether the string pattern ``held`` matches every value that ``wanted`` matches."""
    if held == wanted or _matches_everything(held):
        return True
    read = pattern_type(wanted)
    if read == "literal":
        return string_matcher(held)(wanted)
    if read == "glob" and pattern_type(held) in ("glob", "literal"):
        return _glob_covers(glob_tokens(held), glob_tokens(wanted))
    return False


def _matches_everything(pattern: str) -> bool:
    return pattern_type(pattern) == "glob" and set(glob_tokens(pattern)) == {"**"}


def _glob_covers(held: list[str], wanted: list[str]) -> bool:
    """Whether the glob ``held`` matches every string the glob ``wanted`` matches.

    ``cover[i][j]``: ``held[i:]`` matches everything ``wanted[j:]`` matches. A ``**`` of
    ``held`` may absorb any token of ``wanted``; a ``*`` any token that never yields ``/``.
    """
    n, m = len(held), len(wanted)
    if (n + 1) * (m + 1) > _MAX_GLOB_WORK:
        return False
    cover = [[False] * (m + 1) for _ in range(n + 1)]
    cover[n][m] = True
    for i in range(n - 1, -1, -1):
        for j in range(m, -1, -1):
            h = held[i]
            w = wanted[j] if j < m else None
            if h == "**":
                cover[i][j] = cover[i + 1][j] or (w is not None and cover[i][j + 1])
            elif h == "*":
                no_slash = w is not None and w not in ("**", "/")
                cover[i][j] = cover[i + 1][j] or (no_slash and cover[i][j + 1])
            elif h == "?":
                cover[i][j] = w is not None and w not in ("**", "*", "/") and cover[i + 1][j + 1]
            else:
                cover[i][j] = w == h and cover[i + 1][j + 1]
    return cover[0][0]


def _payload_covers(held: object, wanted: object) -> bool:
    """Whether the payload pattern ``held`` matches every payload ``wanted`` matches."""
    if held is None:
        return True
    if not isinstance(held, Mapping) or not isinstance(wanted, Mapping):
        return False
    return all(key in wanted and _value_covers(sub, wanted[key]) for key, sub in held.items())


def _value_covers(held: object, wanted: object) -> bool:
    """Whether the payload value pattern ``held`` matches every value ``wanted`` matches."""
    if _canonical(held) == _canonical(wanted):
        return True
    if isinstance(wanted, list | tuple):
        return all(_value_covers(held, item) for item in wanted)
    if isinstance(held, list | tuple):
        return any(_value_covers(item, wanted) for item in held)
    if isinstance(held, str):
        return isinstance(wanted, str) and _str_covers(held, wanted)
    if isinstance(held, Mapping):
        return _payload_covers(held, wanted)
    return False


# ---------------------------------------------------------------------------------------------
# narrowing: what a participant asked for, within what it may have
# ---------------------------------------------------------------------------------------------

_NONE: Final = object()
"""No pattern matches both sides (the meet of two patterns is empty or not expressible)."""


def _is_regex(pattern: str) -> bool:
    return len(pattern) >= 2 and pattern[0] == "/" and pattern[-1] == "/"


def _meet_value(a: object, b: object) -> object:
    """A pattern matching exactly what both match, or ``_NONE`` (empty or not expressible)."""
    if _value_covers(a, b):
        return b
    if _value_covers(b, a):
        return a
    if isinstance(a, list | tuple) or isinstance(b, list | tuple):
        alts: list[object] = []
        for x in a if isinstance(a, list | tuple) else [a]:
            for y in b if isinstance(b, list | tuple) else [b]:
                m = _meet_value(x, y)
                if m is not _NONE and all(_canonical(m) != _canonical(o) for o in alts):
                    alts.append(m)
        return _NONE if not alts else alts[0] if len(alts) == 1 else alts
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        out = dict(a)
        for key, sub in b.items():
            if key in out:
                m = _meet_value(out[key], sub)
                if m is _NONE:
                    return _NONE
                out[key] = m
            else:
                out[key] = sub
        return out
    return _NONE


def _meet(asked: Capability, bound: Capability) -> Capability | None:
    kinds: list[str] = []
    asked_kinds = asked["kind"] if isinstance(asked["kind"], list) else [asked["kind"]]
    bound_kinds = bound["kind"] if isinstance(bound["kind"], list) else [bound["kind"]]
    for a in asked_kinds:
        for b in bound_kinds:
            k = a if _str_covers(b, a) else b if _str_covers(a, b) else None
            if k is not None and k not in kinds:
                kinds.append(k)
    if not kinds:
        return None
    payload = _meet_value(asked.get("payload") or {}, bound.get("payload") or {})
    if payload is _NONE:
        return None
    out: Capability = {"kind": kinds[0] if len(kinds) == 1 else kinds}
    if payload:
        out["payload"] = payload
    for note in _NOTE_KEYS:
        if note in asked:
            out[note] = asked[note]
    return out


def narrowed(
    requested: Iterable[Mapping[str, Any]], bounds: Iterable[Mapping[str, Any]]
) -> list[Capability]:
    """The capabilities a participant asked for, cut down to what ``bounds`` allows.

    Each requested capability is met with each bound: the result allows an envelope only if
    the request and a bound both do. Where the meet of two patterns cannot be written as one
    pattern (two unrelated globs or regexes), that pair gives nothing: the participant may get
    less than the exact intersection, never more than ``bounds``.
    """
    asked = [item.entry for item in _compile_list(requested, "requested capability")]
    allowed = [item.entry for item in _compile_list(bounds, "bound")]
    out = [m for a in asked for b in allowed if (m := _meet(a, b)) is not None]
    return [_plain(item.entry) for item in _dedup(_compile_list(out))]


_SHARED_MAX = 256
"""Distinct capability lists whose compiled set :meth:`CapabilitySet.shared` keeps."""
_SHARED: dict[str, CapabilitySet] = {}

Verdict = Literal["allowed", "denied", "too_costly"]
"""What checking one envelope against a capability set concluded (``too_costly``: its
matching ran past :data:`MATCH_BUDGET_S`, so it is refused without an answer)."""


class CapabilitySet:
    """A participant's capabilities, compiled once; ``allows`` is the enforcement check."""

    __slots__ = ("_based", "_cache", "_compiled", "_digest")

    def __init__(self, capabilities: Iterable[Mapping[str, Any]]) -> None:
        """Validate and compile ``capabilities`` (raises :class:`CapabilityError`)."""
        if isinstance(capabilities, CapabilitySet):
            compiled = list(capabilities._compiled)
        else:
            compiled = _compile_list(capabilities)
        self._compiled: tuple[_Compiled, ...] = tuple(_dedup(compiled))
        # kind -> True (allowed whatever the payload), False (never), or the payload matchers
        # of the capabilities whose kind pattern matches (the answer depends on the payload).
        self._cache: dict[str, bool | tuple[_ValueMatcher, ...]] = {}
        self._digest: str | None = None
        self._based: CapabilitySet | None = None
        """:meth:`with_baseline`'s answer, once asked."""

    @classmethod
    def _of(cls, compiled: Iterable[_Compiled], noun: str) -> CapabilitySet:
        new = cls.__new__(cls)
        new._compiled = tuple(_dedup(compiled))
        _check_size([item.entry for item in new._compiled], noun)
        new._cache = {}
        new._digest = None
        new._based = None
        return new

    @classmethod
    def shared(cls, capabilities: Sequence[Mapping[str, Any]]) -> CapabilitySet:
        """The compiled set of ``capabilities``, one object for every equal list (raises
        :class:`CapabilityError`): a set never changes, so the participants of a space that
        have the same capabilities — all of an open space's — share one (a compiled set
        costs about a KiB per connection otherwise)."""
        try:
            key = _canonical(capabilities)
        except (TypeError, ValueError):  # not JSON: compiling it says what is wrong
            return cls(capabilities)
        found = _SHARED.get(key)
        if found is None:
            found = cls(capabilities)
            if len(_SHARED) >= _SHARED_MAX:
                del _SHARED[next(iter(_SHARED))]  # the oldest
            _SHARED[key] = found
        return found

    @property
    def digest(self) -> str:
        """A short name of this exact list (``sha256:`` and 32 hex digits of its JSON)."""
        if self._digest is None:
            text = _canonical([item.entry for item in self._compiled])
            self._digest = "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:32]
        return self._digest

    @property
    def capabilities(self) -> list[Capability]:
        """Copies of the capabilities, as JSON-ready dicts (for welcome frames and errors)."""
        return [_plain(item.entry) for item in self._compiled]

    def __len__(self) -> int:
        """Number of (distinct) capabilities."""
        return len(self._compiled)

    def __repr__(self) -> str:
        """Debug form listing the capabilities."""
        return f"CapabilitySet({self.capabilities!r})"

    def allows(self, kind: str, payload: Mapping[str, Any] | None = None) -> bool:
        """Whether an envelope of ``kind`` with ``payload`` matches any capability (an envelope
        too costly to check is not allowed)."""
        entry = self._cache.get(kind)
        if entry is True or entry is False:
            return entry
        return self.verdict(kind, payload) == "allowed"

    def verdict(self, kind: str, payload: Mapping[str, Any] | None = None) -> Verdict:
        """Whether an envelope of ``kind`` with ``payload`` is allowed, denied, or refused
        because checking it ran past the envelope's CPU budget (:data:`MATCH_BUDGET_S`)."""
        budget = MatchBudget()
        try:
            entry = self._cache.get(kind)
            if entry is None:
                entry = self._resolve(kind, budget)
            if entry is True:
                return "allowed"
            if entry is False:
                return "denied"
            body = payload if type(payload) is dict or isinstance(payload, Mapping) else _EMPTY
            for payload_match in entry:
                if payload_match(body, budget):
                    return "allowed"
            return "denied"
        except _OutOfBudget:
            log.warning(
                "capability check of a %r envelope ran past its %.0f ms budget "
                "(%d capabilities): refused",
                kind[:40] if isinstance(kind, str) else kind,
                MATCH_BUDGET_S * 1000,
                len(self._compiled),
            )
            return "too_costly"

    def _resolve(self, kind: str, budget: MatchBudget) -> bool | tuple[_ValueMatcher, ...]:
        if not isinstance(kind, str):
            return False
        payload_matchers: list[_ValueMatcher] = []
        result: bool | tuple[_ValueMatcher, ...] = False
        for item in self._compiled:
            if item.kind_match(kind, budget):
                if item.payload_match is None:
                    result = True
                    break
                payload_matchers.append(item.payload_match)
        else:
            if payload_matchers:
                result = tuple(payload_matchers)
        cache = self._cache
        if len(cache) >= _KIND_CACHE_MAX:
            cache.clear()
        cache[kind] = result  # only reached within the budget: an exhausted one raised
        return result

    def with_baseline(self) -> CapabilitySet:
        """This set plus :data:`BASELINE` (itself when it allows the baseline already)."""
        if self._based is None:
            budget = MatchBudget()
            if all(self._resolve(b.entry["kind"], budget) is True for b in _BASELINE_COMPILED):
                self._based = self
            else:
                self._based = CapabilitySet._of(
                    [*self._compiled, *_BASELINE_COMPILED], "capability"
                )
        return self._based

    def granted(self, extra: Iterable[Mapping[str, Any]]) -> CapabilitySet:
        """A new set with ``extra`` added (entries equal to one already held are not repeated);
        raises :class:`CapabilityError` when the result is past the size limits."""
        added = _compile_list(extra, "granted capability")
        return CapabilitySet._of([*self._compiled, *added], "resulting capability")

    def revoked(self, remove: Iterable[Mapping[str, Any]]) -> CapabilitySet:
        """A new set without entries equal to ``remove``; a kind-only entry removes that kind."""
        revoking = _compile_list(remove, "revoked capability")
        exact = {item.key for item in revoking}
        whole_kinds = {item.kind_key for item in revoking if item.payload_match is None}
        return CapabilitySet._of(
            (
                item
                for item in self._compiled
                if item.key not in exact and item.kind_key not in whole_kinds
            ),
            "resulting capability",
        )

    def removing_nothing(self, remove: Iterable[Mapping[str, Any]]) -> list[Capability]:
        """The entries of a revoke list that would remove none of this set's entries."""
        out: list[Capability] = []
        for wanted in _compile_list(remove, "revoked capability"):
            whole_kind = wanted.payload_match is None
            if not any(
                item.key == wanted.key or (whole_kind and item.kind_key == wanted.kind_key)
                for item in self._compiled
            ):
                out.append(_plain(wanted.entry))
        return out


def can_send(
    capabilities: Iterable[Mapping[str, Any]] | CapabilitySet, envelope: Mapping[str, Any]
) -> bool:
    """Whether ``envelope`` (its ``kind`` and optional ``payload``) is allowed."""
    kind = envelope.get("kind")
    if not isinstance(kind, str):
        return False
    caps = capabilities if isinstance(capabilities, CapabilitySet) else CapabilitySet(capabilities)
    return caps.allows(kind, envelope.get("payload"))


_BASELINE_COMPILED: Final = tuple(_compile_list(list(BASELINE), "baseline capability"))
