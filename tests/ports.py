"""Ports for servers the tests start as processes, held from the pick to the server's bind.

Binding port 0, closing the socket and handing the number on (probe-and-release) races: the
kernel hands the same port to the next port-0 bind or outgoing connection of any process, and
``redis-server`` then failed with ``bind: Address already in use``. A server in-process takes
port 0 and reports what it got; ``redis-server`` cannot (``--port 0`` turns TCP off), and a
gateway killed with ``kill -9`` must come back on the port its clients reconnect to.

So :func:`reserve_port` picks a port **outside the kernel's ephemeral range**
(``/proc/sys/net/ipv4/ip_local_port_range``), which no port-0 bind and no outgoing connection
is ever given, and holds an exclusive lock on it (a file under ``/tmp/hubbub-test-ports``) for
the life of the process: every pytest-xdist worker, test run and benchmark on the machine skips
a locked port, and the bind check skips one some other program uses. Nothing can take the port
between the pick and the server's bind, or between a kill and the restart.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import socket
from pathlib import Path

LOCKS = Path("/tmp/hubbub-test-ports")
"""One lock file per port; the same folder whatever TMPDIR a run sets (make test-fast's)."""
FALLBACK_EPHEMERAL = (32768, 60999)
LOWEST = 10000
"""Below this, ports belong to services by convention."""

_held: dict[int, int] = {}
"""Port -> the file descriptor whose lock holds it (closed only when the process ends)."""


def ephemeral_range() -> tuple[int, int]:
    """The ports the kernel gives to port-0 binds and outgoing connections."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return FALLBACK_EPHEMERAL


def _candidates() -> list[int]:
    low, high = ephemeral_range()
    ports = [*range(LOWEST, low), *range(high + 1, 65536)]
    if not ports:
        raise RuntimeError(
            f"the kernel's ephemeral range {low}-{high} leaves no port for test servers; narrow "
            "it (sysctl net.ipv4.ip_local_port_range='32768 60999')"
        )
    start = random.randrange(len(ports))
    return ports[start:] + ports[:start]


def _bindable(port: int, host: str) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def reserve_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` nothing listens on, locked for this process until it ends."""
    LOCKS.mkdir(mode=0o1777, parents=True, exist_ok=True)
    for port in _candidates():
        if port in _held:
            continue
        fd = os.open(LOCKS / f"{port}.lock", os.O_CREAT | os.O_RDWR, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        if not _bindable(port, host):
            with contextlib.suppress(OSError):
                os.close(fd)
            continue
        _held[port] = fd
        return port
    raise RuntimeError("no free port outside the ephemeral range: every one is locked or in use")
