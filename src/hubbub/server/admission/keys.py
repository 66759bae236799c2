"""Who an agentchat public key is: configured keys, names bound on first use, key ids.

The space's ``agentchat_keys`` policy (docs/configuration.md#agentchat-keys) decides:

- a key listed in a participant's ``pubkeys`` authenticates as that participant, as its
  token would (``verified``), in token mode too — unless ``bind: off``;
- any other proven key gets agentchat's id, ``@`` + the first 16 hex of its SHA-256
  (open mode only; ``allowlist: strict`` refuses it with ``not_allowed``); with
  ``bind: tofu`` the first key seen for a name owns that name, stored durably (public keys
  only); a later key asking for an owned name keeps its id and is shown under its id;
- a client without a key (``ephemeral``: allow, read_only or deny) never gets an id a key
  owns — a key's id, a name bound on first use, a participant with ``pubkeys`` — in open
  mode too: agentchat clients get a free id derived from the name, others are refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from hubbub.protocol.errors import ErrorCode, ProtocolError
from hubbub.protocol.hello import Hello
from hubbub.protocol.ids import is_participant_id
from hubbub.protocol.keys import KEY_ID, key_id
from hubbub.server.admission.auth import Identity
from hubbub.server.config import Limits, SpaceConfig
from hubbub.server.state.space import RateBuckets
from hubbub.store.base import Store

TABLE: Final = "keys"
"""The store's record table: name → the PEM of the key that owns it (``bind: tofu``)."""
READ_ONLY_CAPABILITIES: Final[list[dict[str, Any]]] = [
    {"kind": kind}
    for kind in (
        "channel/join",
        "channel/leave",
        "channel/list",
        "channel/members",
        "history/request",
        "participant/status",
        "system/heartbeat",
    )
]
"""What a keyless agentchat client may send under ``ephemeral: read_only``: it reads, never
posts (agentchat's lurk mode)."""


class KeyBindings:
    """Identities of agentchat clients by public key, for every space of the server."""

    def __init__(
        self, store: Store, configs: dict[str, SpaceConfig], limits: Limits | None = None
    ) -> None:
        self.store = store
        self.configs = configs
        self.limits = limits or Limits()
        self._per_address: dict[str, RateBuckets] = {}
        """Each space's new bindings per client address (a bucket per address)."""
        self._configured: dict[tuple[str, str], str] = {}
        self._tofu: dict[str, dict[str, str]] = {sid: {} for sid in configs}
        for sid, cfg in configs.items():
            for pid, p in cfg.participants.items():
                for pem in p.pubkeys:
                    self._configured[(sid, pem.strip())] = pid

    async def load(self, space: str) -> None:
        """Read the names bound on first use by an earlier run."""
        saved = await self.store.records(space, TABLE)
        self._tofu[space] = {k: v for k, v in saved.items() if isinstance(v, str)}

    def bound(self, space: str) -> dict[str, str]:
        """The names bound on first use in ``space``: name → its key (SPKI PEM)."""
        return dict(sorted(self._tofu.get(space, {}).items()))

    def count(self, space: str) -> int:
        """How many names are bound on first use in ``space``."""
        return len(self._tofu.get(space, {}))

    def page(self, space: str, after: str | None, limit: int) -> tuple[list[tuple[str, str]], bool]:
        """Up to ``limit`` names bound in ``space`` after the name ``after`` (None: from the
        first), in name order, with their keys; and whether more follow."""
        table = self._tofu.get(space, {})
        names = sorted(n for n in table if after is None or n > after)
        return [(n, table[n]) for n in names[:limit]], len(names) > limit

    def forget(self, space: str, name: str) -> str | None:
        """Unbind ``name`` from the key that took it on first use (an admin's cure for a lost
        key): the next client asking for it gets it. The key it had, or None if none."""
        pem = self._tofu.get(space, {}).pop(name, None)
        if pem is not None:
            self.store.put_record(space, TABLE, name, None)
        return pem

    def keyed(
        self,
        cfg: SpaceConfig,
        hello: Hello,
        check_name: Callable[[str], None],
        address: str = "",
    ) -> Identity:
        """The identity of a client whose ``hello`` carries a proven public key, from client
        ``address``; ``check_name`` refuses the name it takes, as every name taken (before it
        is bound)."""
        if not hello.key_proven or hello.pubkey is None:
            raise ProtocolError(
                ErrorCode.VERIFICATION_FAILED,
                "the public key was not proven: answer the CHALLENGE with VERIFY_IDENTITY",
            )
        pem = hello.pubkey.strip()
        policy = cfg.agentchat_keys
        name = hello.name or hello.participant_id
        pid = self._configured_for(cfg, pem)
        if pid is not None:
            check_name(name)
            p = cfg.participants[pid]
            caps = tuple(p.effective_capabilities())
            return Identity(
                cfg.space,
                pid,
                p.kind,
                p.role,
                caps,
                by_token=True,
                name=name,
                verified=True,
                pubkey=hello.pubkey,
            )
        refusal = self.screen(cfg.space, pem)
        if refusal is not None:
            raise refusal
        if not cfg.open:
            raise ProtocolError(
                ErrorCode.AUTH_FAILED,
                f"space {cfg.space!r} requires a token or a configured key: add this public "
                "key to participants.<id>.pubkeys in space.yaml, or IDENTIFY with a 'token'",
            )
        kid = key_id(hello.pubkey)  # of the text as sent, as agentchat derives it
        bind = False
        if policy.bind == "tofu" and is_participant_id(name) and not self._configured_id(cfg, name):
            owner = self._tofu[cfg.space].get(name)
            if owner is None:
                bind = True
            elif owner != pem:
                name = kid  # the name belongs to another key
        elif self._configured_id(cfg, name):
            name = kid
        if name != kid:
            check_name(name)
        if bind:
            self._check_room(cfg, address)
            self._tofu[cfg.space][name] = pem
            self.store.put_record(cfg.space, TABLE, name, pem)
        kind = hello.kind or cfg.defaults.kind
        caps = tuple(cfg.open_capabilities())
        return Identity(
            cfg.space,
            kid,
            kind,
            "participant",
            caps,
            by_token=True,
            name=name,
            verified=False,
            pubkey=hello.pubkey,
        )

    def _check_room(self, cfg: SpaceConfig, address: str) -> None:
        """Refuse a new binding past the space's bound or its client address's rate; spend
        one of the address's otherwise."""
        policy, space = cfg.agentchat_keys, cfg.space
        most = self.limits.key_bindings_max if policy.max_bindings is None else policy.max_bindings
        held = len(self._tofu[space])
        if most and held >= most:
            raise ProtocolError(
                ErrorCode.NOT_ALLOWED,
                f"space {space!r} holds {held} names bound to keys on first use, its bound of "
                f"{most} (agentchat_keys.max_bindings in space.yaml, else "
                "limits.key_bindings_max / HUBBUB_KEY_BINDINGS_MAX): connect under a name your "
                "key already owns, or ask an admin to forget unused ones (GET /admin/keys, "
                "POST /admin/keys/{name}/forget) or to raise the bound",
            )
        per_hour = (
            self.limits.key_bindings_per_address_per_hour
            if policy.bindings_per_address_per_hour is None
            else policy.bindings_per_address_per_hour
        )
        if not per_hour or not address or self.limits.rate_per_s <= 0:
            return
        buckets = self._per_address.get(space)
        if buckets is None:
            buckets = self._per_address[space] = RateBuckets(per_hour / 3600, per_hour)
        if not buckets.get(space, address).take():
            raise ProtocolError(
                ErrorCode.RATE_LIMITED,
                f"too many new names bound to keys from your address {address}: at most "
                f"{per_hour} an hour in space {space!r} "
                "(agentchat_keys.bindings_per_address_per_hour in space.yaml, else "
                "limits.key_bindings_per_address_per_hour / "
                "HUBBUB_KEY_BINDINGS_PER_ADDRESS_PER_HOUR); nothing was bound: connect under a "
                "name your key already owns, or try again later",
            )

    def screen(self, space: str, pubkey: str) -> ProtocolError | None:
        """Why ``pubkey`` may not connect to ``space`` whoever holds it (not on a strict
        allowlist), or None: asked before the challenge too, as agentchat's server does."""
        cfg = self.configs.get(space)
        if cfg is None or cfg.agentchat_keys.allowlist != "strict":
            return None
        if self._configured_for(cfg, pubkey.strip()) is not None:
            return None
        return ProtocolError(
            ErrorCode.NOT_ALLOWED,
            f"this public key is not on the allowlist of space {cfg.space!r}: an admin "
            "adds it to participants.<id>.pubkeys in space.yaml",
        )

    def _configured_for(self, cfg: SpaceConfig, pem: str) -> str | None:
        """The participant a configured key authenticates as (none under ``bind: off``)."""
        if cfg.agentchat_keys.bind == "off":
            return None
        return self._configured.get((cfg.space, pem))

    def keyless(self, cfg: SpaceConfig, hello: Hello, ident: Identity) -> Identity:
        """An open-mode identity without a key, as the policy allows (raise otherwise)."""
        if hello.name is not None:  # an agentchat client: the space's policy for keyless ones
            policy = cfg.agentchat_keys
            if policy.allowlist == "strict" or policy.ephemeral == "deny":
                raise ProtocolError(
                    ErrorCode.NOT_ALLOWED,
                    f"space {cfg.space!r} admits agentchat clients with a public key only: "
                    "connect with a saved keypair (IDENTIFY {name, pubkey})",
                )
            if policy.ephemeral == "read_only":
                ident = Identity(
                    ident.space, ident.id, ident.kind, ident.role, tuple(READ_ONLY_CAPABILITIES)
                )
            ident = Identity(
                ident.space, ident.id, ident.kind, ident.role, ident.capabilities, name=hello.name
            )
        if not hello.unique_name:
            self.check_unowned(cfg.space, ident.id)
        elif self.owned(cfg.space, ident.id):  # agentchat: a free id derived from the name
            ident = Identity(
                ident.space,
                self.free_id(cfg.space, ident.id, set()),
                ident.kind,
                ident.role,
                ident.capabilities,
                name=ident.name,
            )
        return ident

    def check_unowned(self, space: str, pid: str) -> None:
        """Refuse acting as ``pid`` without its key when a key owns it (a key's id, a name
        bound on first use, a participant with ``pubkeys``): every door asks this of a
        keyless identity — a join on either dialect, ``/mcp``, an HTTP post."""
        if self.owned(space, pid):
            raise ProtocolError(
                ErrorCode.AUTH_FAILED,
                f"id {pid!r} belongs to a public key in space {space!r}: only a client that "
                "proves that key (agentchat IDENTIFY with its pubkey, then VERIFY_IDENTITY) "
                "may act as it; choose another id",
            )

    def owned(self, space: str, pid: str) -> bool:
        """Whether ``pid`` is an id that only a key may have."""
        cfg = self.configs[space]
        return (
            KEY_ID.fullmatch(pid) is not None
            or pid in self._tofu.get(space, {})
            or self._configured_id(cfg, pid)
        )

    def free_id(self, space: str, base: str, online: set[str] | dict[str, Any]) -> str:
        """``base-2``, ``base-3``, … : the first that no key owns and nobody online has."""
        stem, n = base[:28], 2
        while f"{stem}-{n}" in online or self.owned(space, f"{stem}-{n}"):
            n += 1
        return f"{stem}-{n}"

    @staticmethod
    def _configured_id(cfg: SpaceConfig, pid: str) -> bool:
        p = cfg.participants.get(pid)
        return p is not None and bool(p.pubkeys)
