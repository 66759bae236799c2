"""The cluster's store: Redis, written by group commits of one Lua script each, fenced by the
leader's lease. The keys and their bounds are listed in docs/cluster.md ("Keys in Redis")."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, cast
from urllib.parse import parse_qsl, quote, unquote, urlencode

import msgspec
import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from hubbub.store.base import DM_STREAM, GroupCommit, MessageRef, Store, StoredMessage
from hubbub.store.retry import retry_pauses

__all__ = [
    "Fence",
    "FencedError",
    "RedisStore",
    "redacted_url",
    "redis_client",
    "replicas_wanted",
]

log = logging.getLogger("hubbub.store")

_FENCED = "FENCED"
"""The error code the commit script answers when the fence key holds another value."""

# The commit script. KEYS: every key the batch touches (Redis Cluster routes and checks them;
# all in the space's slot), the fence key first when there is a fence; ARGV[1]: the value the
# fence key must hold ('' without a fence); ARGV[2]: the key prefix; ARGV[3]: history_max;
# ARGV[4]: ids_max; ARGV[5]: the batch, a msgpack array of operations (strings and integers
# only: Redis' cmsgpack has no binary type); ARGV[6]: every binary value of the batch,
# concatenated (an operation names its start, length). A seq at or below the stream's last
# one is skipped: the batch is being tried again after a reply was lost, and its writes are
# already there. Returns how many entries were skipped.
_COMMIT_LUA = r"""
if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('FENCED ' .. KEYS[1] .. ' holds another writer\'s lease')
end
local P, cap, ids_max = ARGV[2], ARGV[3], tonumber(ARGV[4])
local ops, B = cmsgpack.unpack(ARGV[5]), ARGV[6]
local last, changed, refs, refs_added, streams, skipped = {}, {}, {}, {}, {}, 0

local function key(sp, name) return P .. ':{' .. sp .. '}:' .. name end
local function stream(sp, name)  -- a stream's key, remembered for the trim at the end
  local k = streams[sp .. ' ' .. name]
  if not k then k = key(sp, name); streams[sp .. ' ' .. name] = k end
  return k
end
local function blob(start, len) return string.sub(B, start, start + len - 1) end
local function entry(seq) return string.format('%d-0', seq) end
local function chunked(cmd, k, args, step)  -- one call per `step` arguments (unpack's limit)
  local out = {}
  for i = 1, #args, step do
    local part = redis.call(cmd, k, unpack(args, i, math.min(i + step - 1, #args)))
    if type(part) == 'table' then
      for j = 1, #part do out[#out + 1] = part[j] end
    end
  end
  return out
end
local function is_new(sp, name, seq)
  local seen = last[sp]
  if not seen then seen = {}; last[sp] = seen; changed[sp] = {} end
  local top = seen[name]
  if top == nil then top = tonumber(redis.call('HGET', key(sp, 'last'), name)) or 0 end
  if seq <= top then seen[name] = top; skipped = skipped + 1; return false end
  seen[name] = seq; changed[sp][name] = true
  return true
end
local function write_refs(sp)  -- the id records queued so far: a (sender, id)'s latest wins
  local r = refs[sp]
  if not r then return end
  refs[sp] = nil
  local fields, scores = {}, {}
  for i, id in ipairs(r.ids) do
    fields[#fields + 1] = id; fields[#fields + 1] = r.recs[i]
    scores[#scores + 1] = r.ts[i]; scores[#scores + 1] = id
  end
  if #fields > 0 then
    chunked('HSET', key(sp, 'ids'), fields, 1000)
    chunked('ZADD', key(sp, 'ids:ts'), scores, 1000)
    refs_added[sp] = true
  end
end

for _, op in ipairs(ops) do
  local o, sp = op[1], op[2]
  if o == 'm' then
    if is_new(sp, op[3], op[4]) then
      redis.call('XADD', stream(sp, 'ch:' .. op[3]), entry(op[4]), 'd', blob(op[5], op[6]))
    end
  elseif o == 'r' then
    local r = refs[sp]
    if not r then r = {ids = {}, recs = {}, ts = {}}; refs[sp] = r end
    r.ids[#r.ids + 1] = op[3]; r.recs[#r.recs + 1] = blob(op[4], op[5])
    r.ts[#r.ts + 1] = string.format('%d', op[6])
  elseif o == 'd' then
    if is_new(sp, op[3], op[4]) then
      local data = blob(op[5], op[6])
      for i = 7, #op do
        redis.call('XADD', stream(sp, 'dm:' .. op[i]), entry(op[4]), 'd', data)
      end
    end
  elseif o == 'f' then
    write_refs(sp)
    local z, bound = key(sp, 'ids:ts'), '(' .. string.format('%d', op[3])
    local old = redis.call('ZRANGEBYSCORE', z, '-inf', bound)
    chunked('HDEL', key(sp, 'ids'), old, 1000)
    redis.call('ZREMRANGEBYSCORE', z, '-inf', bound)
  elseif o == 'c' then
    local k = key(sp, 'channels')
    redis.call('ZADD', k, 'NX', redis.call('ZCARD', k), op[3])
  elseif o == 'cb' then
    redis.call('HSET', key(sp, 'callbacks'), op[3], blob(op[4], op[5]))
  elseif o == 'cb-' then
    redis.call('HDEL', key(sp, 'callbacks'), op[3])
  elseif o == 'k' then
    redis.call('HSET', key(sp, 'dm_marks'), op[3], string.format('%d', op[4]))
  elseif o == 'k-' then
    redis.call('HDEL', key(sp, 'dm_marks'), op[3])
  elseif o == 'b' then
    redis.call('SADD', key(sp, 'bans'), op[3])
  elseif o == 'b-' then
    redis.call('SREM', key(sp, 'bans'), op[3])
  elseif o == 'p' then
    redis.call('HSET', key(sp, 'caps'), op[3], op[4])
  elseif o == 'p-' then
    redis.call('HDEL', key(sp, 'caps'), op[3])
  elseif o == 'rec' then
    redis.call('HSET', key(sp, 'rec:' .. op[3]), op[4], op[5])
  elseif o == 'rec-' then
    redis.call('HDEL', key(sp, 'rec:' .. op[3]), op[4])
  else
    return redis.error_reply('ERR hubbub commit: unknown operation ' .. tostring(o))
  end
end

for sp in pairs(refs) do write_refs(sp) end
for _, k in pairs(streams) do redis.call('XTRIM', k, 'MAXLEN', '~', cap) end
for sp, names in pairs(changed) do
  local args = {}
  for name in pairs(names) do
    args[#args + 1] = name
    args[#args + 1] = string.format('%d', last[sp][name])
  end
  if #args > 0 then chunked('HSET', key(sp, 'last'), args, 1000) end
end
for sp in pairs(refs_added) do
  local z = key(sp, 'ids:ts')
  local extra = redis.call('ZCARD', z) - ids_max
  if extra > math.floor(ids_max / 100) then
    chunked('HDEL', key(sp, 'ids'), redis.call('ZRANGE', z, 0, extra - 1), 1000)
    redis.call('ZREMRANGEBYRANK', z, 0, extra - 1)
  end
end
return skipped
"""
_COMMIT_SHA = hashlib.sha1(_COMMIT_LUA.encode()).hexdigest()
_OP_KEYS = {
    "c": "channels",
    "cb": "callbacks",
    "cb-": "callbacks",
    "k": "dm_marks",
    "k-": "dm_marks",
    "b": "bans",
    "b-": "bans",
    "p": "caps",
    "p-": "caps",
}
"""The one key of a space each other operation of the commit script writes."""
WAIT_MS = 1000
"""How long a commit waits for its replicas (``replicas=N``) before it is tried again (below
the clients' 2 s socket timeout)."""
_json_encode = msgspec.json.Encoder().encode


class Fence(Protocol):
    """The leader's lease as the store sees it: a key and the value it must hold."""

    key: str
    """The lease key, e.g. ``hubbub:leader``."""

    def value(self) -> str | None:
        """What the key must hold for a write to be allowed (None: this node holds no lease)."""
        ...


class FencedError(RuntimeError):
    """This store's writes were refused because another node holds the lease."""


_HIDDEN = "***"
_HARMLESS_PARAMS = frozenset(
    {
        "db",
        "protocol",
        "socket_timeout",
        "socket_connect_timeout",
        "socket_keepalive",
        "retry_on_timeout",
        "health_check_interval",
        "max_connections",
        "ssl_cert_reqs",
        "decode_responses",
        "replicas",
    }
)
"""Query parameters of a Redis URL shown as they are; every other value is hidden."""


def redacted_url(url: str) -> str:
    """A Redis URL safe to show: its user, password and unknown query values hidden.

    Covers ``redis://``, ``rediss://`` and ``unix://`` URLs with credentials as userinfo
    (``user:pw@``, ``:pw@``, even with an unescaped ``@``, ``/`` or ``?`` in the password) or
    as query parameters (``?password=…&username=…``). Every place that shows a Redis URL (the
    startup log, errors, ``GET /health``) shows it through this function."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    if "@" in rest:  # the userinfo ends at the last "@", whatever the password holds
        rest = f"{_HIDDEN}@{rest.rpartition('@')[2]}"
    where, qmark, query = rest.partition("?")
    where = where.partition("#")[0]
    if qmark:
        pairs = parse_qsl(query.partition("#")[0], keep_blank_values=True)
        shown = [
            f"{quote(k, safe='')}={quote(v, safe='') if k in _HARMLESS_PARAMS else _HIDDEN}"
            for k, v in pairs
        ]
        where += "?" + "&".join(shown) if shown else ""
    return f"{scheme}{sep}{where}"


CLUSTER_SCHEME = "redis+cluster://"
"""``--cluster redis+cluster://host:port[,host:port…]``: a Redis Cluster (its seed nodes)."""

Client = aioredis.Redis | RedisCluster
"""A standalone Redis (or a primary with replicas) or a Redis Cluster."""


def replicas_wanted(url: str) -> int:
    """The ``replicas=N`` of a Redis URL: commits wait (``WAIT``) until N replicas hold them."""
    query = url.partition("?")[2].partition("#")[0]
    raw = dict(parse_qsl(query)).get("replicas", "0")
    if not raw.isdigit():
        raise ValueError(
            f"replicas={raw!r} in the Redis URL must be a whole number: how many replicas must "
            "hold a commit before it is acknowledged (0: do not wait)"
        )
    return int(raw)


def _without(url: str, param: str) -> str:
    """``url`` without the query parameter ``param`` (one redis-py does not know)."""
    head, qmark, query = url.partition("?")
    if not qmark:
        return url
    pairs = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != param]
    return f"{head}?{urlencode(pairs)}" if pairs else head


def redis_client(url: str, *, timeout_s: float = 5.0) -> Client:
    """A client as :class:`RedisStore` needs it: bytes replies, a timeout on every call, one
    immediate retry on a fresh connection (the store itself retries whole commits); a
    ``redis+cluster://`` URL gives a Redis Cluster client (MOVED/ASK and failovers followed)."""
    url = _without(url, "replicas")
    if url.startswith(CLUSTER_SCHEME):
        return _cluster_client(url, timeout_s)
    return aioredis.Redis.from_url(
        url,
        decode_responses=False,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(NoBackoff(), 1),
    )


def _cluster_client(url: str, timeout_s: float) -> RedisCluster:
    rest = url.removeprefix(CLUSTER_SCHEME)
    rest, _, query = rest.partition("?")
    userinfo, at, hosts = rest.rpartition("@")
    if not at:
        userinfo, hosts = "", rest
    hosts = hosts.partition("/")[0]  # a database number means nothing on a cluster
    params = dict(parse_qsl(query))
    user, _, password = userinfo.partition(":")
    nodes: list[ClusterNode] = []
    for seed in filter(None, hosts.split(",")):
        host, colon, port = seed.rpartition(":")
        if not colon or not port.isdigit():
            raise ValueError(
                f"{redacted_url(url)}: each seed node of a Redis Cluster is host:port "
                "(redis+cluster://10.0.0.1:7000,10.0.0.2:7000)"
            )
        nodes.append(ClusterNode(host.strip("[]") or "127.0.0.1", int(port)))
    if not nodes:
        raise ValueError(
            f"{redacted_url(url)} names no node: give one or more seed nodes, "
            "redis+cluster://host:port[,host:port...]"
        )
    return RedisCluster(
        startup_nodes=nodes,
        username=unquote(user) or params.get("username") or None,
        password=unquote(password) or params.get("password") or None,
        decode_responses=False,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), 6),
    )


async def _send(conn: AbstractConnection, command: tuple[Any, ...]) -> Any:
    """One command on ``conn`` and its answer."""
    await conn.send_packed_command(conn.pack_command(*command), check_health=False)
    return await conn.read_response()


async def _reply(call: Any) -> Any:
    """Await a redis-py command (its stubs type the sync and async answers as one union)."""
    return await cast(Awaitable[Any], call)


class RedisStore(Store):
    """Redis as the store of cluster mode, written only by the leader.

    ``append*`` and ``put_*`` only queue; one group commit at a time sends everything queued as
    a single ``EVALSHA`` of the commit script, which first checks the fence (the lease key must
    hold ``fence.value()``) and then applies the batch atomically. ``after_commit`` callbacks
    run once the commit holding everything queued before them succeeded, in registration order.
    A failed commit (Redis unreachable, loading, busy) is retried with a growing pause and
    nothing behind it is acknowledged; ``available`` is False meanwhile. A fenced commit is
    final: nothing more is written, the waiting callbacks never run, ``on_fenced`` is called.
    The client must answer bytes (``decode_responses=False``): see :func:`redis_client`; it
    stays the caller's to close.
    """

    def __init__(
        self,
        client: Client,
        fence: Fence | None = None,
        *,
        prefix: str = "hubbub",
        history_max: int = 100_000,
        ids_max: int = 200_000,
        on_fenced: Callable[[], None] | None = None,
        replicas: int = 0,
    ) -> None:
        if client.get_encoder().decode_responses:
            raise ValueError(
                "RedisStore needs a Redis client that answers bytes: make it with "
                "decode_responses=False (hubbub.store.redis.redis_client(url) does)"
            )
        if history_max < 1 or ids_max < 1:
            raise ValueError(
                f"history_max ({history_max}) and ids_max ({ids_max}) must be at least 1: they "
                "are how many messages per stream and message ids per space Redis keeps"
            )
        if not prefix or any(c in prefix for c in "{}"):
            raise ValueError(f"prefix {prefix!r} must be non-empty, without '{{' or '}}'")
        self._redis = client
        self._fence = fence
        self._prefix = prefix
        self.history_max = history_max
        self.ids_max = ids_max
        self._on_fenced = on_fenced
        self.replicas = replicas
        """How many replicas must hold a commit (``WAIT``) before it is acknowledged."""
        self._ops: list[list[Any]] = []
        """The queued operations, in order (see the commit script for their forms)."""
        self._blobs: list[bytes] = []
        self._blob_len = 0
        self._group = GroupCommit(self._take_batch, self._commit_batch, lambda: bool(self._ops))
        self._kick = self._group.kick
        """Make sure a commit follows what was just queued."""
        self._conn: AbstractConnection | None = None
        """The commit connection: the pool's per-call bookkeeping costs the leader more CPU
        than the round trip itself, and commits are one at a time anyway."""
        self._conn_node: ClusterNode | None = None
        """On a Redis Cluster: the primary the commit connection goes to."""
        self._fenced = False
        self._epoch = ""
        self.available = True
        """False while commits fail (Redis unreachable); True again after one succeeds."""
        self.commits = 0
        self.failed_commits = 0

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        """Load the commit script and read (or, on a Redis without hubbub data, make) the epoch."""
        try:
            await _reply(self._redis.script_load(_COMMIT_LUA))
        except (RedisConnectionError, RedisTimeoutError) as exc:
            if isinstance(self._redis, RedisCluster):
                where = ",".join(f"{n.host}:{n.port}" for n in self._redis.get_nodes())
            else:
                kwargs = self._redis.connection_pool.connection_kwargs
                where = kwargs.get("path") or f"{kwargs.get('host')}:{kwargs.get('port')}"
            raise RedisConnectionError(
                f"cannot reach Redis at {where} ({exc}): start redis-server there, or give "
                "the URL of a running one"
            ) from exc
        key = f"{self._prefix}:epoch"
        await _reply(self._redis.set(key, uuid.uuid4().hex, nx=True))
        self._epoch = (await _reply(self._redis.get(key))).decode()

    async def close(self) -> None:
        """Commit what is queued (nothing, once fenced); the client stays open."""
        try:
            if not self._fenced:
                await self.flush()
        finally:
            if self._conn is not None:
                await self._conn.disconnect()

    async def epoch(self) -> str:
        """The history's identity: the same for every node and restart until Redis is wiped."""
        return self._epoch

    async def ping_ms(self) -> float:
        """One PING round trip in milliseconds (raises redis' ConnectionError or TimeoutError
        when Redis cannot be reached)."""
        start = time.perf_counter()
        await _reply(self._redis.ping())
        return (time.perf_counter() - start) * 1000

    # ------------------------------------------------------------------ queued writes

    def append(
        self, space: str, channel: str, seq: int, data: bytes, ref: MessageRef | None = None
    ) -> None:
        """Queue a channel message (and the record of its id) for the next group commit."""
        self._queue(["m", space, channel, seq, *self._blob(data)])
        if ref is not None:
            self._queue_ref(space, ref)

    def append_dm(
        self, space: str, seq: int, parties: list[str], data: bytes, ref: MessageRef | None = None
    ) -> None:
        """Queue a direct message, written to the DM stream of each party."""
        self._queue(["d", space, DM_STREAM, seq, *self._blob(data), *dict.fromkeys(parties)])
        if ref is not None:
            self._queue_ref(space, ref)

    def _queue_ref(self, space: str, ref: MessageRef) -> None:
        """Queue the record of a (sender, id): field ``<sender> <id>`` (a participant id has
        no space), the latest record of a field wins."""
        record = _json_encode((ref.sender, ref.place, ref.seq, ref.ts_ms, ref.digest))
        self._queue(["r", space, f"{ref.sender} {ref.id}", *self._blob(record), ref.ts_ms])

    def forget_refs(self, space: str, before_ms: int) -> None:
        """Queue dropping the id records older than ``before_ms``."""
        self._queue(["f", space, before_ms])

    def put_channel(self, space: str, channel: str) -> None:
        """Queue remembering a channel created at run time."""
        self._queue(["c", space, channel])

    def put_callback(self, space: str, cb_id: str, data: bytes | None) -> None:
        """Queue saving (or, with None, deleting) a pending callback."""
        if data is None:
            self._queue(["cb-", space, cb_id])
        else:
            self._queue(["cb", space, cb_id, *self._blob(data)])

    def put_dm_mark(self, space: str, participant: str, seq: int | None) -> None:
        """Queue saving (or, with None, forgetting) a participant's DM mark."""
        if seq is None:
            self._queue(["k-", space, participant])
        else:
            self._queue(["k", space, participant, seq])

    def put_ban(self, space: str, participant: str, banned: bool) -> None:
        """Queue saving (or lifting) a ban."""
        self._queue(["b" if banned else "b-", space, participant])

    def put_capabilities(
        self, space: str, participant: str, capabilities: list[dict[str, Any]] | None
    ) -> None:
        """Queue saving (or, with None, forgetting) a participant's capabilities."""
        if capabilities is None:
            self._queue(["p-", space, participant])
        else:
            caps = json.dumps(capabilities, separators=(",", ":"))
            self._queue(["p", space, participant, caps])

    def put_record(self, space: str, table: str, key: str, data: Any | None) -> None:
        """Queue saving (or, with None, deleting) a record."""
        if data is None:
            self._queue(["rec-", space, table, key])
        else:
            self._queue(["rec", space, table, key, json.dumps(data, separators=(",", ":"))])

    def is_last_callback(self, fn: Callable[[], None]) -> bool:
        """Whether ``fn`` is the callback registered last, not yet taken by a commit."""
        return not self._fenced and self._group.is_last(fn)

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` after the commit that holds everything queued so far (never, once fenced)."""
        if self._fenced:
            return
        self._group.after_commit(fn)

    def _blob(self, data: bytes) -> tuple[int, int]:
        """Add ``data`` to the batch's binary argument; its (1-based start, length) there."""
        start = self._blob_len + 1
        self._blobs.append(data)
        self._blob_len += len(data)
        return start, len(data)

    def _queue(self, op: list[Any]) -> None:
        if self._fenced:
            return
        self._ops.append(op)
        self._kick()

    # ------------------------------------------------------------------ group commit

    def _take_batch(self) -> tuple[list[list[Any]], bytes] | None:
        """Everything queued since the last commit and its binary argument (None: nothing)."""
        ops, blob = self._ops, b"".join(self._blobs)
        self._ops, self._blobs, self._blob_len = [], [], 0
        return (ops, blob) if ops else None

    async def _commit_batch(self, batch: tuple[list[list[Any]], bytes]) -> bool:
        return await self._commit_until_done(*batch)

    async def _commit_until_done(self, ops: list[list[Any]], blob: bytes) -> bool:
        """Commit one batch, trying again after failures; False when it was fenced."""
        pauses = retry_pauses()
        payload = msgspec.msgpack.encode(ops)
        first_try = True
        while True:
            try:
                skipped = await self._commit_once(ops, payload, blob)
            except ResponseError as exc:
                if str(exc).startswith(_FENCED):
                    self._stop_fenced(str(exc))
                    return False
                error: Exception = exc
            except FencedError as exc:
                self._stop_fenced(str(exc))
                return False
            except Exception as exc:
                error = exc
            else:
                if skipped and first_try:
                    log.warning("%d queued entries had a seq already stored: skipped", skipped)
                self.commits += 1
                self.available = True
                return True
            first_try = False
            self.failed_commits += 1
            self.available = False
            pause = next(pauses)
            log.error(
                "Redis commit failed (%s: %s); retrying in %.2fs, nothing is acknowledged "
                "until it succeeds",
                type(error).__name__,
                error,
                pause,
            )
            await asyncio.sleep(pause)

    async def _commit_once(self, ops: list[list[Any]], payload: bytes, blob: bytes) -> int:
        """One round trip: the commit script on the batch (loaded again if Redis lost it)."""
        keys = self._keys_of(ops)
        fence_value = ""
        if self._fence is not None:
            value = self._fence.value()
            if value is None:
                raise FencedError(f"this node holds no lease ({self._fence.key})")
            keys, fence_value = [self._fence.key, *keys], value
        args = (fence_value, self._prefix, self.history_max, self.ids_max, payload, blob)
        try:
            skipped = await self._call("EVALSHA", _COMMIT_SHA, len(keys), *keys, *args)
        except NoScriptError:  # Redis restarted or SCRIPT FLUSH: load it and send it again
            await _reply(self._redis.script_load(_COMMIT_LUA))
            skipped = await self._call("EVALSHA", _COMMIT_SHA, len(keys), *keys, *args)
        return int(skipped)

    def _keys_of(self, ops: list[list[Any]]) -> list[str]:
        """Every key the commit script touches for ``ops`` (declared, as Redis Cluster wants)."""
        keys: dict[str, None] = {}
        for op in ops:
            o, sp = op[0], op[1]
            if o == "m":
                keys[self._key(sp, "last")] = keys[self._key(sp, "ch:" + op[2])] = None
            elif o == "d":
                keys[self._key(sp, "last")] = None
                for party in op[6:]:
                    keys[self._key(sp, "dm:" + party)] = None
            elif o in ("r", "f"):
                keys[self._key(sp, "ids")] = keys[self._key(sp, "ids:ts")] = None
            elif o in ("rec", "rec-"):
                keys[self._key(sp, "rec:" + op[2])] = None
            else:
                keys[self._key(sp, _OP_KEYS[o])] = None
        return list(keys)

    async def _call(self, *command: Any) -> Any:
        """One command on the commit connection, tried once more on a fresh connection when
        the old one was broken (a commit is safe to send twice: stored seqs are skipped); with
        ``replicas``, answered once that many replicas hold it (``WAIT``)."""
        if isinstance(self._redis, RedisCluster):
            return await self._call_cluster(command)
        conn = self._conn
        if conn is None:
            make: Callable[[], AbstractConnection] = self._redis.connection_pool.make_connection
            conn = self._conn = make()
        packed = conn.pack_command(*command)
        try:
            await conn.send_packed_command(packed, check_health=False)
            answer = await conn.read_response()
        except RedisConnectionError:  # it disconnected itself; the next send reconnects
            await conn.send_packed_command(packed, check_health=False)
            answer = await conn.read_response()
        await self._wait_replicas(conn)
        return answer

    async def _call_cluster(self, command: tuple[Any, ...]) -> Any:
        """The commit on the primary of its slot (its first key's), on this store's own
        connection there; the slot map is read again after a failure (a failover, MOVED)."""
        cluster = self._redis
        assert isinstance(cluster, RedisCluster)
        node = cluster.get_node_from_key(str(command[3]))
        if node is None:
            await cluster.nodes_manager.initialize()
            raise RedisConnectionError(f"no node serves the slot of {command[3]} yet")
        if self._conn is not None and self._conn_node is not node:
            await self._conn.disconnect()
            self._conn = None
        if self._conn is None:
            self._conn, self._conn_node = node.acquire_connection(), node  # kept: this store's
        conn = self._conn
        try:
            try:
                answer = await _send(conn, command)
            except NoScriptError:  # a promoted replica, a new shard: scripts are per node
                await _send(conn, ("SCRIPT", "LOAD", _COMMIT_LUA))
                answer = await _send(conn, command)
            await self._wait_replicas(conn)
        except ResponseError as exc:
            if not str(exc).startswith(_FENCED):
                await self._lost_node()
            raise
        except (RedisError, OSError):
            await self._lost_node()
            raise
        return answer

    async def _lost_node(self) -> None:
        """Drop the commit connection and read the cluster's slot map again."""
        conn, self._conn, self._conn_node = self._conn, None, None
        if conn is not None:
            await conn.disconnect()
        cluster = self._redis
        if isinstance(cluster, RedisCluster):
            try:
                await cluster.nodes_manager.initialize()
            except (RedisError, OSError) as exc:
                log.warning("reading the Redis Cluster's slots failed: %s", exc)

    async def _wait_replicas(self, conn: AbstractConnection) -> None:
        """Return once ``replicas`` replicas hold what this connection wrote (``WAIT``)."""
        if not self.replicas:
            return
        await conn.send_packed_command(
            conn.pack_command("WAIT", self.replicas, WAIT_MS), check_health=False
        )
        held = int(await conn.read_response())
        if held < self.replicas:
            raise RedisError(
                f"only {held} of {self.replicas} replicas took the commit within {WAIT_MS} ms; "
                "not acknowledged, trying again"
            )

    def _stop_fenced(self, why: str) -> None:
        """Stop for good: drop what is queued, never run the waiters, tell the owner."""
        self._fenced = True
        self._group.stopped = True
        self._ops, self._blobs, self._blob_len, self._group.waiters = [], [], 0, []
        log.error("Redis store fenced (%s): this node stops writing and must step down", why)
        if self._on_fenced is not None:
            try:
                self._on_fenced()
            except Exception:
                log.exception("the on_fenced callback failed")

    async def flush(self) -> None:
        """Wait until every queued write is committed (and its callbacks have run); raises
        :class:`FencedError` once the store was fenced (those writes will never be stored)."""
        await self._group.flush()
        if self._fenced:
            raise FencedError(
                "this node's writes were refused: another node holds the leader lease"
            )

    # ------------------------------------------------------------------ reads

    def _key(self, space: str, name: str) -> str:
        return f"{self._prefix}:{{{space}}}:{name}"

    async def history(
        self,
        space: str,
        channel: str,
        *,
        after_seq: int | None = None,
        before_seq: int | None = None,
        limit: int = 50,
    ) -> list[StoredMessage]:
        """Channel messages in ascending ``seq`` (one XRANGE or XREVRANGE)."""
        await self.flush()
        if limit <= 0 or (before_seq is not None and before_seq < 1):
            return []
        key = self._key(space, "ch:" + channel)
        high = "+" if before_seq is None else f"{before_seq - 1}-0"
        if after_seq is not None:
            low = "-" if after_seq < 0 else f"{after_seq + 1}-0"
            return _messages(await _reply(self._redis.xrange(key, low, high, count=limit)))
        rows = await _reply(self._redis.xrevrange(key, high, "-", count=limit))
        return _messages(reversed(rows))

    async def dm_history(
        self, space: str, participant: str, *, after_seq: int, limit: int
    ) -> list[StoredMessage]:
        """Direct messages involving ``participant`` after ``after_seq`` (one XRANGE)."""
        await self.flush()
        if limit <= 0:
            return []
        low = "-" if after_seq < 0 else f"{after_seq + 1}-0"
        key = self._key(space, "dm:" + participant)
        return _messages(await _reply(self._redis.xrange(key, low, "+", count=limit)))

    async def dm_history_before(
        self, space: str, participant: str, *, before_seq: int | None, limit: int
    ) -> list[StoredMessage]:
        """The last ``limit`` direct messages involving ``participant`` before ``before_seq``
        (one XREVRANGE), ascending."""
        await self.flush()
        if limit <= 0 or (before_seq is not None and before_seq < 1):
            return []
        high = "+" if before_seq is None else f"{before_seq - 1}-0"
        key = self._key(space, "dm:" + participant)
        return _messages(reversed(await _reply(self._redis.xrevrange(key, high, "-", count=limit))))

    async def last_seqs(self, space: str) -> dict[str, int]:
        """The highest ``seq`` per channel of a space (and :data:`DM_STREAM` for DMs)."""
        await self.flush()
        rows = await _reply(self._redis.hgetall(self._key(space, "last")))
        return {k.decode(): int(v) for k, v in rows.items()}

    async def channels(self, space: str) -> list[str]:
        """Channels created at run time, in creation order."""
        await self.flush()
        rows = await _reply(self._redis.zrange(self._key(space, "channels"), 0, -1))
        return [r.decode() for r in rows]

    async def callbacks(self, space: str) -> list[bytes]:
        """Every pending callback saved for a space, in callback id order."""
        await self.flush()
        rows = await _reply(self._redis.hgetall(self._key(space, "callbacks")))
        return [rows[k] for k in sorted(rows)]

    async def dm_marks(self, space: str) -> dict[str, int]:
        """The saved DM marks of a space."""
        await self.flush()
        rows = await _reply(self._redis.hgetall(self._key(space, "dm_marks")))
        return {k.decode(): int(v) for k, v in rows.items()}

    async def bans(self, space: str) -> list[str]:
        """The participant ids banned from a space, sorted."""
        await self.flush()
        rows = await _reply(self._redis.smembers(self._key(space, "bans")))
        return sorted(r.decode() for r in rows)

    async def capabilities(self, space: str) -> dict[str, list[dict[str, Any]]]:
        """The saved capabilities of a space."""
        await self.flush()
        rows = await _reply(self._redis.hgetall(self._key(space, "caps")))
        return {k.decode(): json.loads(v) for k, v in rows.items()}

    async def records(self, space: str, table: str) -> dict[str, Any]:
        """The saved records of ``table`` in a space."""
        await self.flush()
        rows = await _reply(self._redis.hgetall(self._key(space, "rec:" + table)))
        return {k.decode(): json.loads(v) for k, v in rows.items()}

    async def message_refs(self, space: str, since_ms: int, limit: int) -> list[MessageRef]:
        """Id records since ``since_ms``, oldest first (the newest ``limit``; records of one
        millisecond in id order)."""
        await self.flush()
        if limit <= 0:
            return []
        ids = await _reply(
            self._redis.zrevrangebyscore(
                self._key(space, "ids:ts"), "+inf", since_ms, start=0, num=limit
            )
        )
        if not ids:
            return []
        ids.reverse()
        records = await _reply(self._redis.hmget(self._key(space, "ids"), ids))
        out = []
        for field, record in zip(ids, records, strict=True):
            parts = None if record is None else json.loads(record)
            if parts is not None and len(parts) == 5:  # forgotten between the reads; or an
                sender, place, seq, ts_ms, digest = parts  # id-keyed record of an older version
                msg_id = field.decode().split(" ", 1)[1]
                out.append(MessageRef(msg_id, sender, place, int(seq), int(ts_ms), int(digest)))
        return out


def _messages(rows: Any) -> list[StoredMessage]:
    """Stream entries ``(b"<seq>-0", {b"d": data})`` as stored messages."""
    return [
        StoredMessage(int(entry_id.partition(b"-")[0]), fields[b"d"]) for entry_id, fields in rows
    ]
