"""Ending the real processes a test or benchmark started (gateways, cluster nodes, Redis)."""

from __future__ import annotations

import subprocess


def kill9(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGKILL ``proc`` (no shutdown, no last write) and wait until it is gone."""
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()


def stop(proc: subprocess.Popen[bytes] | None, grace_s: float = 10.0) -> None:
    """SIGTERM ``proc``; SIGKILL it if it still runs after ``grace_s`` seconds."""
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            kill9(proc)
