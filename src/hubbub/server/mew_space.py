"""MEW's ``space.yaml`` read as hubbub's: participants, tokens, capabilities and ``defaults``.

A MEW space file (``space: {id: ...}``, rjcorwin/mew-protocol's CLI format) is translated to
the builtins of hubbub's own space config, which :func:`hubbub.server.config.read_space` then
validates like any other. Tokens are found where MEW's gateway finds them: the environment
variable ``MEW_TOKEN_<ID>``, else ``.mew/tokens/<id>.token`` (created as MEW does when
missing), plus every literal ``tokens:`` entry. MEW admits any participant that joins with an
unknown id or token, with ``defaults.capabilities`` (``[{kind: chat}]`` without them), so the
translated space is open; and it has no roles, so a capability alone lets a participant
grant. Every MEW key hubbub does not use comes back as a note.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hubbub.protocol.ids import is_participant_id

MEW_DEFAULT_CAPABILITIES: list[dict[str, Any]] = [{"kind": "chat"}]
"""What MEW's gateway gives a participant when neither it nor ``defaults`` lists any."""

MEW_GRANT_ROLES = ("participant", "observer", "admin")
"""MEW has no roles: whoever a capability allows ``capability/grant`` may grant."""

_PROCESS_KEYS = ("type", "command", "args", "env", "cwd", "auto_start", "restart_policy")
"""Participant keys that tell MEW's CLI how to start a process (hubbub starts none)."""

_UNUSED_PARTICIPANT_KEYS: dict[str, str] = {
    **dict.fromkeys(
        _PROCESS_KEYS,
        "hubbub starts no participant processes; run each one's command yourself, with "
        "hubbub's ws://HOST:PORT as its gateway",
    ),
    "auto_connect": "hubbub connects no participant itself; connect it with its client",
    "output_log": "hubbub writes no per-participant log; the client writes its own",
    "fifo": "hubbub makes no FIFOs; connect the participant with a client",
    "mcp_server": "hubbub starts no MCP server; run `hubbub bridge` or MEW's bridge yourself",
    "bridge_config": "hubbub starts no MCP bridge; run `hubbub bridge` or MEW's bridge yourself",
    "default_to": "addressing defaults belong to the client (MEW's CLI); hubbub ignores them",
}
"""Participant keys of MEW's CLI that hubbub does not use, and what to do instead."""

_SPACE_KEYS_UNUSED = ("name", "description", "ui_theme", "default_participant")
"""Keys under ``space:`` that only MEW's CLI reads."""

_TOP_KEYS_UNUSED: dict[str, str] = {
    "gateway_logging": "hubbub writes no envelope-history log; see its dashboard and /metrics",
}


class MewSpaceError(ValueError):
    """A MEW space file is malformed; the message names the key and the fix."""


@dataclass
class Translation:
    """A MEW space as hubbub space-config builtins, and what did not carry over."""

    config: dict[str, Any]
    """The ``space.yaml`` of hubbub (builtins; token hashes, never tokens)."""
    notes: list[str] = field(default_factory=list)
    """One line for each MEW setting hubbub does not use, and each token file created."""


def is_mew_space(raw: Mapping[str, Any]) -> bool:
    """Whether a parsed YAML document is MEW's format (its ``space:`` is a mapping with an
    ``id``; hubbub's is the id itself)."""
    space = raw.get("space")
    return isinstance(space, Mapping)


def translate(raw: Mapping[str, Any], path: Path, hasher: Callable[[str], str]) -> Translation:
    """hubbub's space config for the MEW space file ``raw`` read from ``path``; ``hasher``
    turns a token into its stored hash. Raise MewSpaceError for a malformed file."""
    where = str(path)
    space = raw.get("space")
    if not isinstance(space, Mapping) or not isinstance(space.get("id"), str):
        raise MewSpaceError(f"{where}: space.id is missing; MEW's format needs space: {{id: ...}}")
    out = Translation(
        config={
            "space": space["id"],
            "open": True,
            "grant_roles": list(MEW_GRANT_ROLES),
            "health_status": "ok",
        }
    )
    for key in _SPACE_KEYS_UNUSED:
        if key in space:
            out.notes.append(f"{where}: space.{key} is not used by hubbub (MEW's CLI reads it)")
    for key in space:
        if key not in (*_SPACE_KEYS_UNUSED, "id"):
            out.notes.append(f"{where}: space.{key} is not a setting hubbub knows; ignored")
    for key in raw:
        if key in ("space", "participants", "defaults"):
            continue
        why = _TOP_KEYS_UNUSED.get(key, "not a setting hubbub knows")
        out.notes.append(f"{where}: {key} is ignored ({why})")
    defaults = _defaults(raw.get("defaults"), where, out.notes)
    out.config["defaults"] = {"capabilities": defaults}
    out.notes.append(
        f"{where}: like MEW's gateway, hubbub admits participants this file does not list "
        f"(any id, any token) with defaults.capabilities {json.dumps(defaults)}; to refuse them, "
        "run "
        "`hubbub space import` and set open: false in hubbub's file"
    )
    people = raw.get("participants") or {}
    if not isinstance(people, Mapping):
        raise MewSpaceError(f"{where}: participants must be a mapping of id -> settings")
    tokens_dir = mew_tokens_dir(path)
    unused: dict[str, list[str]] = {}
    participants: dict[str, Any] = {}
    owners: dict[str, str] = {}
    for pid_raw, entry in people.items():
        pid = str(pid_raw)
        if not is_participant_id(pid):  # before its id names a token file
            raise MewSpaceError(
                f"{where}: participants: {pid!r} is not a legal id (1-32 of [A-Za-z0-9_.-])"
            )
        entry = entry or {}
        if not isinstance(entry, Mapping):
            raise MewSpaceError(
                f"{where}: participants.{pid} must be a mapping (tokens:, capabilities:, ...)"
            )
        for key in entry:
            if key not in ("tokens", "capabilities"):
                unused.setdefault(str(key), []).append(pid)
        tokens = _tokens(pid, entry.get("tokens"), tokens_dir, where, out.notes)
        for token in tokens:
            other = owners.setdefault(token, pid)
            if other != pid:
                raise MewSpaceError(
                    f"{where}: participants {other} and {pid} share a token; give each "
                    "participant its own (a token names one participant)"
                )
        caps = entry.get("capabilities")
        if caps is not None and not isinstance(caps, list):
            raise MewSpaceError(
                f"{where}: participants.{pid}.capabilities must be a list of "
                "{kind: ..., payload: ...} entries"
            )
        hashes = [hasher(t) for t in tokens]
        participants[pid] = {
            "kind": _kind(pid, entry, space),
            "token_hash": hashes[0],
            "token_hashes": hashes[1:],
            "capabilities": list(caps) if caps is not None else list(defaults),
        }
    for key, pids in unused.items():
        why = _UNUSED_PARTICIPANT_KEYS.get(key, "not a setting hubbub knows")
        out.notes.append(f"{where}: participants.*.{key} ({', '.join(pids)}) is ignored: {why}")
    out.config["participants"] = participants
    return out


def mew_tokens_dir(path: Path) -> Path:
    """Where MEW keeps a space's tokens: ``<dir>/.mew/tokens`` beside the file, or
    ``<dir>/tokens`` when the file itself lies in ``.mew/`` (as ``mew init`` writes it)."""
    base = path.resolve().parent
    return (base if base.name == ".mew" else base / ".mew") / "tokens"


def _defaults(raw: object, where: str, notes: list[str]) -> list[dict[str, Any]]:
    """MEW's ``defaults.capabilities`` (MEW's own fallback when absent)."""
    if raw is None:
        return list(MEW_DEFAULT_CAPABILITIES)
    if not isinstance(raw, Mapping):
        raise MewSpaceError(
            f"{where}: defaults must be a mapping (defaults: {{capabilities: ...}})"
        )
    for key in raw:
        if key != "capabilities":
            notes.append(f"{where}: defaults.{key} is not a setting hubbub knows; ignored")
    caps = raw.get("capabilities")
    if caps is None:
        return list(MEW_DEFAULT_CAPABILITIES)
    if not isinstance(caps, list):
        raise MewSpaceError(
            f"{where}: defaults.capabilities must be a list of {{kind: ...}} entries"
        )
    return list(caps)


def _tokens(pid: str, literal: object, tokens_dir: Path, where: str, notes: list[str]) -> list[str]:
    """Every token of a participant, its MEW token (environment, then file) first."""
    if literal is None:
        literal = []
    if not isinstance(literal, list) or not all(isinstance(t, str) and t for t in literal):
        raise MewSpaceError(
            f"{where}: participants.{pid}.tokens must be a list of non-empty strings "
            '(tokens: ["my-token"])'
        )
    tokens: list[str] = []
    env_name = "MEW_TOKEN_" + pid.upper().replace("-", "_")
    stored = os.environ.get(env_name)
    token_file = tokens_dir / f"{pid}.token"
    if stored is None and token_file.exists():
        try:
            stored = token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise MewSpaceError(
                f"{where}: participant {pid}'s token file {token_file} cannot be read "
                f"({exc.strerror}); fix its permissions or remove it to have a new one made"
            ) from None
        if not stored:
            raise MewSpaceError(
                f"{where}: participant {pid}'s token file {token_file} is empty; write the "
                "token in it or remove it to have a new one made"
            )
    if stored is None and not literal:
        stored = _new_token_file(token_file)
        notes.append(f"{where}: participant {pid} had no token; made one in {token_file}")
    if stored is not None:
        tokens.append(stored)
    tokens.extend(t for t in literal if t not in tokens)
    return tokens


def _new_token_file(token_file: Path) -> str:
    """A new token written to ``token_file`` as MEW's CLI does (mode 0600, its folder
    git-ignored)."""
    tokens_dir = token_file.parent
    tokens_dir.mkdir(parents=True, mode=0o700, exist_ok=True)
    ignore = tokens_dir / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n!.gitignore\n", encoding="utf-8")
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process (a cluster node, MEW's CLI) made it first
        return token_file.read_text(encoding="utf-8").strip()
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(token)
    return token


def _kind(pid: str, entry: Mapping[str, Any], space: Mapping[str, Any]) -> str:
    """``agent`` for a participant MEW starts (``command``, ``type``, a bridge), else
    ``human`` (MEW's interactive participant, ``space.default_participant``, included)."""
    if space.get("default_participant") == pid:
        return "human"
    started = any(k in entry for k in ("command", "type", "mcp_server", "bridge_config"))
    return "agent" if started else "human"
