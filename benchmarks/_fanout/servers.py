"""Start, probe and stop the server under test as a subprocess; measure its CPU and RSS."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol

import psutil

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # tests.ports: one place for test servers' ports
from tests.ports import reserve_port  # noqa: E402

BARE_SERVER = Path(__file__).resolve().with_name("bare_server.py")
HOST = "127.0.0.1"


def raise_nofile_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; return the new soft limit."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


async def wait_listening(port: int) -> None:
    """Return once something accepts connections on ``port`` (15 s at most)."""
    for _ in range(300):
        try:
            _, w = await asyncio.open_connection(HOST, port)
            w.close()
            return
        except OSError:
            await asyncio.sleep(0.05)
    raise RuntimeError("the gateway did not start")


def hubbub_env() -> dict[str, str]:
    """The environment for ``python -m hubbub``: the repo's ``src`` first on the path."""
    env = dict(os.environ)
    src = str(REPO / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def hubbub_runnable() -> tuple[bool, str]:
    """Whether ``python -m hubbub serve --help`` works; the reason when it does not."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "hubbub", "serve", "--help"],
            env=hubbub_env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, repr(exc)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return False, lines[-1] if lines else f"exit status {proc.returncode}"
    return True, ""


class ServerProc:
    """One server subprocess (hubbub or the bare ceiling server)."""

    running: ClassVar[set[ServerProc]] = set()
    """Started and not yet stopped; :func:`stop_all` ends them when the benchmark exits."""

    def __init__(self, name: str, argv: list[str], port: int, env: dict[str, str] | None) -> None:
        self.name = name
        self.argv = argv
        self.port = port
        self.env = env
        self.workdir = Path(tempfile.mkdtemp(prefix="hubbub-bench-"))
        self.log_path = self.workdir / "server.log"
        self.popen: subprocess.Popen[bytes] | None = None
        self.ps: psutil.Process | None = None

    @classmethod
    def bare(cls, technique: str, loop: str = "asyncio") -> ServerProc:
        port = reserve_port()
        argv = [sys.executable, str(BARE_SERVER), "--port", str(port), "--technique", technique]
        return cls(f"bare/{technique}", [*argv, "--loop", loop], port, None)

    @classmethod
    def hubbub(
        cls,
        cluster: str | None = None,
        node: str = "",
        workers: int = 1,
        loop: str = "asyncio",
        extra: Sequence[str] = (),
    ) -> ServerProc:
        """``hubbub serve`` on SQLite, or a node of the cluster on Redis ``cluster``."""
        port = reserve_port()
        env = hubbub_env() | {"HUBBUB_LOOP": loop}
        server = cls(node or "hubbub", [], port, env)
        server.argv = [
            sys.executable,
            "-m",
            "hubbub",
            "serve",
            "--host",
            HOST,
            "--port",
            str(port),
            "--data-dir",
            str(server.workdir / "data"),
            "--rate-limit",
            "0",
            *extra,
        ]
        if cluster is not None:
            server.argv += ["--cluster", cluster, "--node", node or f"node-{port}"]
        if workers > 1:
            server.argv += ["--workers", str(workers)]
        return server

    def port_for(self, role: str, index: int) -> int:
        """The port a client of ``role`` (receiver, sender) number ``index`` connects to."""
        return self.port

    def aux_cpu(self) -> dict[str, float]:
        """CPU seconds so far of processes serving beside this one (none)."""
        return {}

    def cpu_parts(self) -> dict[str, float]:
        """CPU seconds so far of each gateway process group (one: this server)."""
        return {}

    async def start(self, timeout: float = 30.0) -> None:
        log = self.log_path.open("wb")
        self.popen = subprocess.Popen(
            self.argv,
            cwd=self.workdir,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=raise_nofile_limit,
        )
        log.close()
        ServerProc.running.add(self)
        self.ps = psutil.Process(self.popen.pid)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise RuntimeError(f"{self.name} exited during start-up:\n{self.log_tail()}")
            if await self._healthy():
                return
            await asyncio.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.name} not healthy after {timeout:.0f} s:\n{self.log_tail()}")

    async def _healthy(self) -> bool:
        try:
            async with asyncio.timeout(2.0):
                reader, writer = await asyncio.open_connection(HOST, self.port)
                writer.write(
                    b"GET /health HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n"
                    % (HOST.encode(), self.port)
                )
                status = await reader.readline()
                writer.close()
                return status.split(b" ")[1:2] == [b"200"]
        except (OSError, TimeoutError, IndexError):
            return False

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def _procs(self) -> list[psutil.Process]:
        if self.ps is None:
            return []
        try:
            return [self.ps, *self.ps.children(recursive=True)]
        except psutil.Error:
            return []

    def cpu_seconds(self) -> float:
        """User+system CPU seconds of the server process and its children so far."""
        total = 0.0
        for p in self._procs():
            with contextlib.suppress(psutil.Error):
                t = p.cpu_times()
                total += t.user + t.system
        return total

    def rss_bytes(self) -> int:
        total = 0
        for p in self._procs():
            with contextlib.suppress(psutil.Error):
                total += p.memory_info().rss
        return total

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace: float = 3.0) -> bool:
        """SIGTERM, then SIGKILL after ``grace`` seconds; False when it had to be killed."""
        graceful = True
        if self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                graceful = False
                self.popen.kill()
                self.popen.wait(5)
        shutil.rmtree(self.workdir, ignore_errors=True)
        ServerProc.running.discard(self)
        return graceful


class Endpoint(Protocol):
    """What a measurement needs of the server(s) under test."""

    name: str

    def port_for(self, role: str, index: int) -> int:
        """The port a client of ``role`` number ``index`` connects to."""

    def cpu_seconds(self) -> float:
        """CPU seconds of every gateway process so far."""

    def aux_cpu(self) -> dict[str, float]:
        """CPU seconds so far of other serving processes (Redis), by name."""

    def cpu_parts(self) -> dict[str, float]:
        """CPU seconds so far of each member, by name, when there are several."""

    def rss_bytes(self) -> int:
        """Resident memory of every gateway process."""

    def log_tail(self, lines: int = 30) -> str:
        """The end of the servers' logs."""


class ServerGroup:
    """Several gateway processes measured as one (a cluster's nodes): CPU and RSS summed.

    Clients are spread over the members by index, or all of a role pinned to one member
    (``senders_on``/``receivers_on``); ``aux`` meters other processes' CPU (Redis).
    """

    def __init__(
        self,
        name: str,
        members: Sequence[ServerProc],
        aux: dict[str, Callable[[], float]] | None = None,
        senders_on: int | None = None,
        receivers_on: int | None = None,
    ) -> None:
        self.name = name
        self.members = list(members)
        self.aux = aux or {}
        self.senders_on = senders_on
        self.receivers_on = receivers_on

    def port_for(self, role: str, index: int) -> int:
        """The member's port for client ``index`` of ``role``: its pinned member or by index."""
        pinned = self.senders_on if role == "sender" else self.receivers_on
        member = pinned if pinned is not None else index % len(self.members)
        return self.members[member].port

    def cpu_seconds(self) -> float:
        return sum(m.cpu_seconds() for m in self.members)

    def aux_cpu(self) -> dict[str, float]:
        return {name: meter() for name, meter in self.aux.items()}

    def cpu_parts(self) -> dict[str, float]:
        return {m.name: m.cpu_seconds() for m in self.members}

    def rss_bytes(self) -> int:
        return sum(m.rss_bytes() for m in self.members)

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(f"[{m.name}]\n{m.log_tail(lines)}" for m in self.members)


def redis_cpu_seconds(port: int) -> float:
    """used_cpu_sys + used_cpu_user of the redis-server on ``port`` (``INFO cpu``)."""
    with socket.create_connection((HOST, port), timeout=5) as s:
        s.sendall(b"INFO cpu\r\n")
        data = b""
        while b"used_cpu_user:" not in data or not data.endswith(b"\r\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    fields = dict(line.split(":", 1) for line in data.decode().splitlines() if ":" in line)
    return float(fields["used_cpu_sys"]) + float(fields["used_cpu_user"])


def stop_all() -> None:
    """Stop every server still running (registered with ``atexit`` by the benchmark)."""
    for server in list(ServerProc.running):
        server.stop(grace=1.0)


def log(msg: str) -> None:
    """A progress line on stderr (the results go to stdout)."""
    print(msg, file=sys.stderr, flush=True)


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def run_benchmark(
    run: Callable[[Any], Coroutine[Any, Any, Any]], plan: Any, json_path: str | None
) -> int:
    """Run a benchmark's plan and write its results as JSON; the exit status.

    Ctrl-C and SIGTERM unwind normally so every server subprocess is stopped (also when
    started from a shell that ignores SIGINT in background jobs)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    atexit.register(stop_all)
    try:
        results = asyncio.run(run(plan))
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    if json_path:
        Path(json_path).write_text(json.dumps(results, indent=2, default=str) + "\n")
        log(f"wrote {json_path}")
    return 0
