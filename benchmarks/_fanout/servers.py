"""Start, probe and stop the server under test as a subprocess; measure its CPU and RSS."""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import ClassVar

import psutil

REPO = Path(__file__).resolve().parents[2]
BARE_SERVER = Path(__file__).resolve().with_name("bare_server.py")
HOST = "127.0.0.1"


def raise_nofile_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit; return the new soft limit."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


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
    def bare(cls, technique: str) -> ServerProc:
        port = free_port()
        argv = [sys.executable, str(BARE_SERVER), "--port", str(port), "--technique", technique]
        return cls(f"bare/{technique}", argv, port, None)

    @classmethod
    def hubbub(cls) -> ServerProc:
        port = free_port()
        server = cls("hubbub", [], port, hubbub_env())
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
        ]
        return server

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


def stop_all() -> None:
    """Stop every server still running (registered with ``atexit`` by the benchmark)."""
    for server in list(ServerProc.running):
        server.stop(grace=1.0)
