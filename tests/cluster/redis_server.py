"""A real ``redis-server`` for a test: a free port, a temporary directory, AOF on by default."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tests import processes
from tests.ports import reserve_port
from tests.timing import SLOW_WAIT

DEFAULT_ARGS: tuple[str, ...] = (
    "--save",
    "",
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
)
"""No RDB snapshots; every write in the append-only file, fsynced before Redis answers."""

START_TIMEOUT_S = SLOW_WAIT
"""How long a start (or the AOF reload of a restart) may take before the test fails."""


class RedisServer:
    """One ``redis-server`` process on 127.0.0.1 with its data in ``directory``.

    ``args`` replaces :data:`DEFAULT_ARGS` (the persistence settings); port, bind address and
    directory are always set by the helper; ``password`` makes the server require it.
    ``kill9()`` kills it without warning, ``restart()`` starts it again on the same port and
    directory (so it reloads its AOF), ``stop()`` ends it.
    """

    def __init__(
        self, directory: Path, args: tuple[str, ...] = DEFAULT_ARGS, password: str | None = None
    ) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError(
                "redis-server is not installed: the cluster tests need Debian's redis-server "
                "(`make test` installs it as root; otherwise `sudo apt-get install -y "
                "redis-server`)"
            )
        self.binary = binary
        self.directory = directory
        self.args = args + (("--requirepass", password) if password else ())
        self.password = password
        self.port = reserve_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = directory / "redis.log"

    @property
    def url(self) -> str:
        """The URL a client connects with: ``redis://127.0.0.1:PORT/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        """Start the server and return once it answers PING (its AOF loaded)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        cmd = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.directory),
            "--daemonize",
            "no",
            "--logfile",
            "",
            *self.args,
        ]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"redis-server exited with {self.process.returncode}; its log "
                    f"({self.log_path}):\n{self._log_tail()}"
                )
            if self.ping():
                return
            time.sleep(0.02)  # polling a starting process, not waiting for a timer
        raise RuntimeError(
            f"redis-server did not answer PING within {START_TIMEOUT_S}s; its log:\n"
            f"{self._log_tail()}"
        )

    def ping(self) -> bool:
        """Tell whether the server answers PING with PONG (not LOADING, not refused)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                if self.password:
                    s.sendall(f"AUTH {self.password}\r\n".encode())
                    if not s.recv(64).startswith(b"+OK"):
                        return False
                s.sendall(b"PING\r\n")
                return s.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-20:])
        return "(no log)"

    def kill9(self) -> None:
        """Kill the server with SIGKILL (no shutdown, no last write) and wait for it to die."""
        processes.kill9(self.process)

    def restart(self) -> None:
        """Start the server again on the same port and directory (after kill9 or stop)."""
        self.kill9()
        self.start()

    def stop(self) -> None:
        """End the server (SIGTERM, then SIGKILL if it lingers)."""
        processes.stop(self.process)
