"""Crash harness: ``kill -9`` a real gateway again and again and count what it took back.

Usage::

    .venv/bin/python benchmarks/crash.py [--kills 20] [--seed N] [--cluster 3] [--json out.json]

A real ``python -m hubbub serve`` on a SQLite file (this repository's ``src`` first on
``PYTHONPATH``) takes traffic from:

- two WebSocket senders (the SDK ``Client``: it reconnects, resumes, and resends what the
  gateway has not echoed yet under the same ids) sending chat messages with ``ack=True``;
- one HTTP sender posting with an ``Idempotency-Key`` and retrying the same key until it
  gets its ``202``;
- a callback owner that schedules ``@@cb:1s@@`` callbacks (acknowledged by the echo of the
  scheduling message) and counts their fires;
- an admin that, between kills, creates a channel, bans a participant and grants a
  capability, each acknowledged by the gateway's answer.

The gateway is killed with SIGKILL ``--kills`` times at random moments, every other time
right after an acknowledgement arrived, and restarted on the same data directory and port.
Then history is read back over HTTP (every page) and by a fresh client resuming from seq 0,
and the harness prints: acknowledged-but-lost, duplicates, seq gaps, seqs reused (a seq that
was acknowledged for one message and holds another), callbacks acknowledged vs fired, and
bans/grants/channels kept. It exits 1 when any loss, duplicate, gap or reuse count is not 0.
``tests/integration/test_crash_harness.py`` runs a 3-kill version in ``make test``.

``--cluster N`` runs the same against N nodes of a cluster (``serve --cluster``) on a real
``redis-server`` (AOF ``appendfsync always``) instead of one gateway: the clients are spread
over the nodes, and each kill takes a random node (the leader about every other time), which
is restarted on its port; ``tests/cluster/test_cluster_crash.py`` runs 3 kills on 3 nodes.
``--redis-cluster`` puts the nodes on a 3-master Redis Cluster (``redis+cluster://``) instead.
``--handoffs H`` mixes H graceful hand-offs in (a second, idle space is configured so leads
move on every join): the leader of the busy space gets SIGTERM (it stops admitting, commits,
releases the lease; another node takes over), then rejoins (the leads are spread again), and
the result counts them under ``handoffs``.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.processes, tests.cluster

import aiohttp
from tests import processes
from tests.ports import reserve_port

from hubbub.errors import HubbubError
from hubbub.sdk import Client

ROOT = Path(__file__).resolve().parents[1]
ADMIN_TOKEN = "hb_crash_admin_token_0123456789"
GRANTED = {"kind": "reasoning/*"}


@dataclass
class Gateway:
    """One ``hubbub serve`` subprocess, restartable on the same data dir and port."""

    data_dir: Path
    port: int
    config: Path
    proc: subprocess.Popen[bytes] | None = None
    log: Path = field(init=False)
    cluster: list[str] = field(default_factory=list)
    """``serve`` arguments making this gateway a cluster node (empty: one SQLite gateway)."""

    def __post_init__(self) -> None:
        self.log = self.data_dir / "gateway.log"

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    async def start(self) -> None:
        env = os.environ | {"PYTHONPATH": str(ROOT / "src")}
        cmd = [sys.executable, "-m", "hubbub", "serve", "--port", str(self.port)]
        cmd += ["--data-dir", str(self.data_dir), "--rate-limit", "0"]
        cmd += ["--space-config", str(self.config), *self.cluster]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=out)
        deadline = time.monotonic() + 20
        async with aiohttp.ClientSession() as http:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"gateway exited at start; see {self.log}")
                with contextlib.suppress(aiohttp.ClientError, OSError):
                    async with http.get(f"{self.http}/health") as resp:
                        if resp.status == 200:
                            return
                await asyncio.sleep(0.05)
        raise RuntimeError(f"gateway did not answer /health within 20 s; see {self.log}")

    def kill(self) -> None:
        processes.kill9(self.proc)

    def stop(self) -> None:
        processes.stop(self.proc)

    async def terminate(self) -> None:
        """SIGTERM: a node hands its leads over (commits, releases) and exits."""
        assert self.proc is not None
        self.proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            await asyncio.to_thread(self.proc.wait, 15)
        self.kill()

    async def leads(self) -> list[str]:
        """The spaces this node leads (cluster mode)."""
        with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
            async with aiohttp.ClientSession() as http, http.get(f"{self.http}/health") as resp:
                return list((await resp.json())["cluster"]["leads"])
        return []


@dataclass
class Tally:
    """What the gateway acknowledged, by whom, and what the harness saw afterwards."""

    acked: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Message text → (channel, seq) from its acknowledgement."""
    callbacks_acked: set[str] = field(default_factory=set)
    callbacks_fired: Counter[str] = field(default_factory=Counter)
    channels: list[str] = field(default_factory=list)
    bans: list[str] = field(default_factory=list)
    grants: list[str] = field(default_factory=list)
    ack_event: asyncio.Event = field(default_factory=asyncio.Event)
    resends: int = 0


def write_space(path: Path) -> None:
    """An open space with an admin token (for bans) — open mode keeps the senders simple."""
    import hashlib

    digest = hashlib.sha256(ADMIN_TOKEN.encode()).hexdigest()
    path.write_text(
        "space: default\nopen: true\nchannels: ['#general']\nparticipants:\n"
        f"  admin:\n    kind: human\n    role: admin\n    token_hash: 'sha256:{digest}'\n"
        "    capabilities: [{kind: '**'}]\n"
    )


async def ws_sender(gw: Gateway, name: str, tally: Tally, stop: asyncio.Event) -> None:
    """Send chat messages one after another, each acknowledged by its echo."""
    async with Client(gateway=gw.ws, participant_id=name, connect_timeout=30) as client:
        i = 0
        msg_id = client.new_id()
        while not stop.is_set():
            text = f"{name}-{i}"
            try:
                echo = await client.send(
                    {"id": msg_id, "kind": "chat", "channel": "#general",
                     "payload": {"text": text}},
                    ack=True,
                )  # fmt: skip
            except HubbubError:
                # not acknowledged for now: the same message (same id) again, which the
                # gateway stores once even if the first try was stored before the kill
                await asyncio.sleep(0.05)
                continue
            tally.acked[text] = ("#general", echo.seq or 0)
            tally.ack_event.set()
            i += 1
            msg_id = client.new_id()
        tally.resends += client.outbox.resent


async def http_sender(gw: Gateway, tally: Tally, stop: asyncio.Event) -> None:
    """POST messages; retry each with its Idempotency-Key until the gateway answers 202."""
    i = 0
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
        while not stop.is_set():
            text = f"http-{i}"
            body = {"kind": "chat", "channel": "#general", "payload": {"text": text}}
            try:
                async with http.post(
                    f"{gw.http}/participants/poster/messages",
                    json=body,
                    headers={"Idempotency-Key": f"crash-{text}"},
                ) as resp:
                    if resp.status == 503:  # no leader for a moment (cluster): same key again
                        await asyncio.sleep(0.2)
                        continue
                    if resp.status != 202:
                        raise RuntimeError(f"HTTP {resp.status}: {await resp.text()}")
                    answer = await resp.json()
            except (aiohttp.ClientError, OSError, TimeoutError):
                await asyncio.sleep(0.05)
                continue
            tally.acked[text] = ("#general", int(answer["seq"]))
            tally.ack_event.set()
            i += 1


async def callback_owner(gw: Gateway, tally: Tally, stop: asyncio.Event) -> None:
    """Schedule callbacks (acknowledged by the echo) and count their fires."""
    async with Client(gateway=gw.ws, participant_id="timer", connect_timeout=30) as client:

        def on_chat(env: Any) -> None:
            text = env.payload.get("text", "")
            if env.from_ == "system:gateway" and text.startswith("@@cb-fire@@"):
                tally.callbacks_fired[text.removeprefix("@@cb-fire@@")] += 1

        client.on("chat", on_chat)
        i = 0
        msg_id = client.new_id()
        while not stop.is_set():
            key = f"cb{i}"
            try:  # a retry after a failed ack resends the same message (same id), not a new one
                await client.send(
                    {"id": msg_id, "kind": "chat", "channel": "#general",
                     "payload": {"text": f"scheduling {key} @@cb:1s@@{key}"}},
                    ack=True,
                )  # fmt: skip
            except HubbubError:
                await asyncio.sleep(0.05)
                continue
            tally.callbacks_acked.add(key)
            i += 1
            msg_id = client.new_id()
            await asyncio.sleep(0.2)
        # stay connected until every acknowledged callback had its time to fire
        with contextlib.suppress(TimeoutError, HubbubError):
            async with asyncio.timeout(10):
                while set(tally.callbacks_fired) < tally.callbacks_acked:
                    await client.wait_for("chat")


async def admin_round(gw: Gateway, n: int, tally: Tally) -> None:
    """Create a channel, ban a participant, grant a capability; each acknowledged."""
    async with Client(
        gateway=gw.ws, participant_id="admin", token=ADMIN_TOKEN, connect_timeout=30
    ) as admin:
        channel = f"#room{n}"
        joined = admin.expect("channel/joined", lambda e: e.payload.get("channel") == channel)
        await admin.send({"kind": "channel/create", "payload": {"channel": channel}})
        await asyncio.wait_for(joined, 30)
        tally.channels.append(channel)
        grantee = f"grantee{n}"
        async with Client(gateway=gw.ws, participant_id=grantee, connect_timeout=30):
            pass  # known to the space from now on: it may be granted capabilities
        grant = {"kind": "capability/grant", "to": [grantee],
                 "payload": {"recipient": grantee, "capabilities": [GRANTED]}}  # fmt: skip
        with contextlib.suppress(HubbubError):
            await admin.send(grant, ack=True)
            tally.grants.append(grantee)
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{gw.http}/admin/participants/banned{n}/ban",
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}", "X-Hubbub-Request": "1"},
        ) as resp,
    ):
        if resp.status == 200:
            tally.bans.append(f"banned{n}")


async def read_history(gw: Gateway) -> list[dict[str, Any]]:
    """Every message of #general over HTTP, page by page."""
    out: list[dict[str, Any]] = []
    after = 0
    async with aiohttp.ClientSession() as http:
        while True:
            url = f"{gw.http}/channels/general/messages?after_seq={after}&limit=1000"
            async with http.get(url) as resp:
                page = await resp.json()
            out.extend(page["messages"])
            if not page["messages"]:
                return out
            after = page["messages"][-1]["seq"]


async def resume_texts(gw: Gateway) -> list[str]:
    """The chat texts a client resuming #general from seq 0 receives (until 1 s of quiet)."""
    got: list[str] = []
    client = Client(gateway=gw.ws, participant_id="reader", connect_timeout=30)
    client.last_seq["#general"] = 0  # as if it had seen nothing: the whole channel comes
    client.on("chat", lambda env: got.append(str(env.payload.get("text"))))
    async with client:
        seen = -1
        while seen != len(got):
            seen = len(got)
            await asyncio.sleep(1.0)
    return got


async def channels_kept(gw: Gateway, channels: list[str]) -> int:
    """How many of ``channels`` the gateway still knows."""
    kept = 0
    async with aiohttp.ClientSession() as http:
        for channel in channels:
            async with http.get(f"{gw.http}/channels/{channel[1:]}/messages") as resp:
                kept += resp.status == 200
    return kept


async def grants_kept(gw: Gateway, grantees: list[str]) -> int:
    """How many grantees still hold the granted capability (their welcome says)."""
    kept = 0
    for pid in grantees:
        async with Client(gateway=gw.ws, participant_id=pid, connect_timeout=30) as client:
            assert client.welcome is not None
            kept += GRANTED in client.welcome.payload["you"]["capabilities"]
    return kept


async def run(
    kills: int, seed: int, nodes: int = 0, handoffs: int = 0, redis_cluster: bool = False
) -> dict[str, Any]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="hubbub-crash-") as tmp:
        data = Path(tmp)
        config = data / "space.yaml"
        write_space(config)
        side = data / "side.yaml"  # a second space: leads move between nodes on each join
        side.write_text("space: side\nopen: true\n")
        redis = None
        if nodes:
            from tests.cluster.redis_cluster import RedisCluster
            from tests.cluster.redis_server import RedisServer

            redis = RedisCluster(data / "redis") if redis_cluster else RedisServer(data / "redis")
            redis.start()
            atexit.register(redis.stop)  # also when the run fails half way
            gws = []
            for i in range(nodes):
                (data / f"node{i}").mkdir()
                args = ["--cluster", redis.url, "--node", f"node{i}", "--lease-ms", "1500"]
                args += ["--space-config", str(side)] if handoffs else []
                gws.append(Gateway(data / f"node{i}", reserve_port(), config, cluster=args))
        else:
            gws = [Gateway(data, reserve_port(), config)]
        for g in gws:
            await g.start()
        gw = gws[0]

        def at(i: int) -> Gateway:
            return gws[i % len(gws)]

        tally = Tally()
        stop = asyncio.Event()
        workers = [
            asyncio.create_task(ws_sender(at(1), "ws-a", tally, stop)),
            asyncio.create_task(ws_sender(at(2), "ws-b", tally, stop)),
            asyncio.create_task(http_sender(at(0), tally, stop)),
            asyncio.create_task(callback_owner(at(1), tally, stop)),
        ]
        started = time.monotonic()
        moved = 0
        rounds = ["kill"] * kills + ["handoff"] * handoffs
        rng.shuffle(rounds)  # the hand-offs in the mix, the kills keep their count
        k = 0
        for n, what in enumerate(rounds):
            await admin_round(at(n), n, tally)
            if n % 2:
                tally.ack_event.clear()
                await tally.ack_event.wait()  # right after an acknowledgement
            else:
                await asyncio.sleep(rng.uniform(0.3, 1.5))
            if what == "handoff":  # graceful: the busy space's leader stops, then rejoins
                for g in [g for g in gws if "default" in await g.leads()]:
                    await g.terminate()
                    moved += 1
                    print(f"  hand-off {moved}/{handoffs}: {len(tally.acked)} messages "
                          "acknowledged so far", flush=True)  # fmt: skip
                    await g.start()
                continue
            victim = gws[rng.randrange(len(gws))]
            victim.kill()
            k += 1
            print(f"  kill {k}/{kills}: {len(tally.acked)} messages acknowledged so far",
                  flush=True)  # fmt: skip
            await asyncio.sleep(rng.uniform(0.0, 0.3))
            await victim.start()
        await asyncio.sleep(1.0 + 5.0 * bool(nodes))  # a new leader, then the last callbacks
        stop.set()
        await asyncio.gather(*workers)
        history = await read_history(gw)
        resumed = await resume_texts(gw)
        async with (
            aiohttp.ClientSession() as http,
            http.get(
                f"{gw.http}/admin/bans", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
            ) as resp,
        ):
            banned = set((await resp.json())["banned"])
        channels = await channels_kept(gw, tally.channels)
        grants = await grants_kept(gw, tally.grants)
        for g in gws:
            g.stop()
        if redis is not None:
            redis.stop()
        elapsed = time.monotonic() - started

    texts = [m["payload"].get("text", "") for m in history if m.get("kind") == "chat"]
    by_seq = {m["seq"]: m["payload"].get("text", "") for m in history}
    counts = Counter(t for t in texts if not t.startswith("@@"))
    seqs = sorted(by_seq)
    result = {
        "kills": kills,
        "handoffs": moved,
        "seconds": round(elapsed, 1),
        "acknowledged": len(tally.acked),
        "stored": len(history),
        "acknowledged_but_lost": sum(1 for t in tally.acked if t not in counts),
        "duplicates": sum(n - 1 for n in counts.values() if n > 1),
        "seq_gaps": (seqs[-1] - len(seqs)) if seqs else 0,
        "seqs_reused": sum(
            1 for t, (_, q) in tally.acked.items() if by_seq.get(q) not in (None, t)
        ),
        "resume_lost": sum(1 for t in tally.acked if t not in set(resumed)),
        "resume_duplicates": sum(n - 1 for n in Counter(resumed).values() if n > 1),
        "callbacks_acknowledged": len(tally.callbacks_acked),
        "callbacks_fired": sum(1 for k in tally.callbacks_acked if tally.callbacks_fired[k]),
        "callbacks_fired_twice": sum(1 for n in tally.callbacks_fired.values() if n > 1),
        "callbacks_missing": ", ".join(
            f"{k}{' (in history)' if f'@@cb-fire@@{k}' in set(texts) else ''}"
            for k in sorted(tally.callbacks_acked - set(tally.callbacks_fired))
        ),
        "channels_kept": f"{channels}/{len(tally.channels)}",
        "bans_kept": f"{sum(1 for b in tally.bans if b in banned)}/{len(tally.bans)}",
        "grants_kept": f"{grants}/{len(tally.grants)}",
        "client_resends": tally.resends,
    }
    return result


FAIL_KEYS = (
    "acknowledged_but_lost",
    "duplicates",
    "seq_gaps",
    "seqs_reused",
    "resume_lost",
    "resume_duplicates",
    "callbacks_fired_twice",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument(
        "--cluster", type=int, default=0, metavar="N", help="N cluster nodes on a real Redis"
    )
    parser.add_argument(
        "--handoffs",
        type=int,
        default=0,
        metavar="H",
        help="with --cluster: first H graceful hand-offs (SIGTERM of the busy space's leader, "
        "then it rejoins and the leads are spread again), then the kills",
    )
    parser.add_argument(
        "--redis-cluster",
        action="store_true",
        help="with --cluster: the nodes run on a 3-master Redis Cluster (redis+cluster://)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    what = f"a node of {args.cluster} in a cluster" if args.cluster else "a real gateway"
    more = f" and {args.handoffs} hand-offs" if args.handoffs else ""
    print(f"crash harness: {args.kills} kill -9 of {what}{more} (seed {args.seed})")
    cluster = (args.cluster, args.handoffs, args.redis_cluster)
    result = asyncio.run(run(args.kills, args.seed, *cluster))
    width = max(map(len, result))
    for key, value in result.items():
        print(f"  {key:<{width}}  {value}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    bad = [k for k in FAIL_KEYS if result[k]]
    if result["callbacks_fired"] != result["callbacks_acknowledged"]:
        bad.append("callbacks_fired")
    for kept in ("channels_kept", "bans_kept", "grants_kept"):
        have, want = str(result[kept]).split("/")
        if have != want:
            bad.append(kept)
    if bad:
        print(f"FAIL: {', '.join(bad)}")
        sys.exit(1)
    print("PASS: nothing acknowledged was lost, duplicated or renumbered")


if __name__ == "__main__":
    main()
