"""``hubbub mcp`` start-up: spawn the process, answer ``initialize`` (median of N runs).

Usage::

    .venv/bin/python benchmarks/mcp_startup.py [--runs 5] [--json out.json]

A gateway (``hubbub serve``, memory store) runs in its own process. Each run spawns
``hubbub mcp --gateway ws://... --id bench-N`` (this repository's ``src`` first on
``PYTHONPATH``), writes an ``initialize`` request on its stdin at once and times how long the
answer takes to come back on stdout; then ``notifications/initialized`` and ``tools/list``
(the first tool request) are timed too, and the process is stopped. It prints the median
and every run, and where the time of a bare import goes (``python -X importtime`` of
``hubbub.cli`` and ``hubbub.mcp.tools``, the slowest modules).

Also prints the size of the tool list as a model sees it (``--tools``): the characters of
each tool's name, description and input schema (JSON), summed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HUBBUB = str(Path(sys.executable).with_name("hubbub"))
ENV = os.environ | {"PYTHONPATH": str(ROOT / "src")}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve() -> tuple[subprocess.Popen[bytes], int]:
    port = _port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "hubbub", "serve", "--port", str(port)],
        env=ENV,
        stderr=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    for _ in range(400):
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.1):
            return proc, port
        time.sleep(0.05)
    raise SystemExit("hubbub serve did not start")


def _rpc(id_: int | None, method: str, params: dict[str, Any] | None = None) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if id_ is not None:
        msg["id"] = id_
    if params is not None:
        msg["params"] = params
    return json.dumps(msg).encode() + b"\n"


def _answer(proc: subprocess.Popen[bytes], id_: int) -> dict[str, Any]:
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("hubbub mcp exited before it answered")
        msg = json.loads(line)
        if msg.get("id") == id_:
            return dict(msg)


def one_run(port: int, n: int) -> dict[str, float]:
    """Spawn ``hubbub mcp``; seconds to the ``initialize`` answer and to ``tools/list``."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [HUBBUB, "mcp", "--gateway", f"ws://127.0.0.1:{port}/ws", "--id", f"bench-{n}"],
        env=ENV,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"},
    }
    proc.stdin.write(_rpc(1, "initialize", init))
    proc.stdin.flush()
    _answer(proc, 1)
    initialized = time.perf_counter() - start
    proc.stdin.write(_rpc(None, "notifications/initialized"))
    proc.stdin.write(_rpc(2, "tools/list", {}))
    proc.stdin.flush()
    _answer(proc, 2)
    listed = time.perf_counter() - start
    proc.stdin.close()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return {"initialize_s": initialized, "tools_list_s": listed}


def tool_list_chars() -> int:
    """The characters of the tool list as a model sees it: name, description, input schema."""
    import asyncio

    sys.path.insert(0, str(ROOT / "src"))
    from hubbub.mcp.tools import build_server

    async def listed() -> list[Any]:
        return list(await build_server().list_tools())

    tools = asyncio.run(listed())
    return sum(
        len(t.name) + len(t.description or "") + len(json.dumps(t.input_schema)) for t in tools
    )


def import_profile(top: int = 8) -> list[tuple[float, str]]:
    """The slowest modules (cumulative ms) of importing what ``hubbub mcp`` imports."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import hubbub.cli, hubbub.mcp.stdio"],
        env=ENV,
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    rows = []
    for line in out.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]) / 1000, parts[2].rstrip()))
    return sorted(rows, reverse=True)[:top]


def main() -> None:
    """Run the benchmark and print (or write) the result."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    gateway, port = _serve()
    try:
        runs = [one_run(port, n) for n in range(args.runs)]
    finally:
        gateway.terminate()
        gateway.wait()
    result = {
        "initialize_median_s": statistics.median(r["initialize_s"] for r in runs),
        "tools_list_median_s": statistics.median(r["tools_list_s"] for r in runs),
        "runs": runs,
        "tool_list_chars": tool_list_chars(),
        "slowest_imports_ms": import_profile(),
    }
    print(json.dumps(result, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
