"""The first frame of a connection: who connects, where, with what (either dialect)."""

from __future__ import annotations

from typing import Any

import msgspec


class Hello(msgspec.Struct, kw_only=True):
    """A parsed join/IDENTIFY frame, the same for both dialects."""

    participant_id: str
    space: str = "default"
    token: str | None = None
    kind: str | None = None
    capabilities: list[dict[str, Any]] | None = None
    channels: list[str] | None = None
    resume: dict[str, int] = msgspec.field(default_factory=dict)
    epoch: str | None = None
    """The history epoch the ``resume`` points belong to (from an earlier welcome)."""
    auto_join: bool = False
    """Join the space's auto-join channels (``agentchat_auto_join``) instead of ``channels``,
    silently as agentchat does: no ``channel/joined`` or history unless ``resume`` names the
    channel (a later ``channel/join`` answers with both)."""
    resends: bool = False
    """The client resends what it is not sure landed, under the same ids, and wants each
    answered with its original (the hubbub SDK's join, which carries ``resume``)."""
    presence_lists: bool = False
    """The client reads a run of presence events as one frame with ``participants``."""
    unique_name: bool = False
    """In open mode, pick a free id derived from ``participant_id`` instead of displacing."""
    name: str | None = None
    """The display name asked for (agentchat's IDENTIFY ``name``); None on the MEW dialect."""
    display_name: str | None = None
    """The display name a MEW join asked for (its ``name``; agentchat's is :attr:`name`)."""
    pubkey: str | None = None
    """An agentchat client's Ed25519 public key (SPKI PEM), when it sent one."""
    key_proven: bool = False
    """The client answered the key's challenge (set by the gateway's handshake, never by a
    frame: see :data:`KEY_PROVEN`)."""


KEY_PROVEN = "hubbub_key_proven"
"""The field the gateway's handshake writes into an IDENTIFY frame once its public key is
proven (overwriting whatever a client put there); cluster nodes forward it to the leader."""
