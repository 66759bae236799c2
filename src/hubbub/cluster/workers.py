"""``hubbub serve --workers N``: N node processes sharing one port, restarted when they die."""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import signal
import subprocess
import sys
import time
from types import FrameType

log = logging.getLogger("hubbub")

RESTART_PAUSE_S = 1.0
"""Pause before a worker that died is started again (a crash loop costs one start a second)."""


def worker_argv(argv: list[str], index: int, link_port: int) -> list[str]:
    """The command line of worker ``index``: this one without ``--workers``, sharing the port."""
    out: list[str] = []
    skip = name_next = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if name_next:  # --node NAME: each worker is NAME-index
            name_next = False
            arg = f"{arg}-{index}"
        if arg == "--workers":
            skip = True
            continue
        if arg.startswith("--workers="):
            continue
        if arg.startswith("--node="):
            arg = f"{arg}-{index}"
        name_next = arg == "--node"
        out.append(arg)
    out.append("--reuse-port")
    if link_port:
        out += ["--link-port", str(link_port + 100 * index)]  # room for 100 spaces each
    return out


def _die_with_parent() -> None:
    """In a worker, before it runs: end it when the parent dies, even by SIGKILL (Linux)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass  # not Linux: a SIGKILLed parent leaves its workers (a clean stop ends them)


_PR_SET_PDEATHSIG = 1


def _start(argv: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, preexec_fn=_die_with_parent)


def run_workers(n: int, link_port: int) -> int:
    """Start ``n`` workers and keep them running until SIGINT/SIGTERM; the exit status."""
    base = [sys.executable, "-m", "hubbub", *sys.argv[1:]]
    argvs = [worker_argv(base, i, link_port) for i in range(n)]
    procs: list[subprocess.Popen[bytes]] = [_start(a) for a in argvs]
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    log.info("started %d workers: pids %s", n, [p.pid for p in procs])
    while not stopping:
        time.sleep(0.2)
        for i, p in enumerate(procs):
            code = p.poll()
            if code is not None and not stopping:
                log.warning("worker %d (pid %d) exited with %s; restarting it", i, p.pid, code)
                time.sleep(RESTART_PAUSE_S)
                procs[i] = _start(argvs[i])
    deadline = time.monotonic() + 8  # inside the 10 s a supervisor gives a stop
    for p in procs:
        try:
            p.wait(max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            p.kill()
    return 0 if all(p.returncode in (0, -signal.SIGTERM) for p in procs) else 1
