"""The leadership lease: one key in Redis, held by one node, renewed before it expires."""

from __future__ import annotations

import secrets
from typing import Any

import msgspec


def lease_key(space: str) -> str:
    """The key whose value names the leader of ``space``: the fence its store's writes check
    (in the space's hash slot, with the rest of its keys)."""
    return f"hubbub:{{{space}}}:leader"


_RENEW = """
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if v == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 2
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class LeaderInfo(msgspec.Struct, frozen=True):
    """Who leads: its node name, the address of its node links, and the lease's token."""

    node: str
    link: str
    token: str


def read_leader(raw: bytes | str | None) -> LeaderInfo | None:
    """The leader named by the lease key's value (None: no leader, or not ours)."""
    if raw is None:
        return None
    try:
        return msgspec.json.decode(raw, type=LeaderInfo)
    except msgspec.DecodeError:
        return None


class Lease:
    """This node's claim on leading one space: acquire, renew, release; the store's fence."""

    def __init__(self, redis: Any, key: str, node: str, link: str, ttl_ms: int) -> None:
        self.redis = redis
        self.key = key
        self.ttl_ms = ttl_ms
        self.info = LeaderInfo(node, link, secrets.token_hex(8))
        self._value = msgspec.json.encode(self.info).decode()
        self.held = False

    def value(self) -> str | None:
        """What the lease key must hold for this node's writes (None: not leading)."""
        return self._value if self.held else None

    async def acquire(self) -> bool:
        """Take the lease if nobody holds it."""
        self.held = bool(await self.redis.set(self.key, self._value, nx=True, px=self.ttl_ms))
        return self.held

    async def renew(self) -> bool:
        """Extend the lease; False when another node holds it (this node must step down).

        A lease that expired while Redis was away (nobody else could take it) is taken again."""
        kept = int(await self.redis.eval(_RENEW, 1, self.key, self._value, self.ttl_ms))
        self.held = kept != 0
        return self.held

    async def release(self) -> None:
        """Give the lease up (a clean shutdown: another node takes over at once)."""
        if self.held:
            self.held = False
            await self.redis.eval(_RELEASE, 1, self.key, self._value)

    async def current(self) -> LeaderInfo | None:
        """The node that leads now, as Redis says."""
        return read_leader(await self.redis.get(self.key))
