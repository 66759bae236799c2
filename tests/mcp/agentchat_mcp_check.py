"""agentchat's own MCP server (``@tjamescouch/agentchat-mcp``) pointed at hubbub: a manual check.

Not collected by pytest (CI needs no Node). Needs Node 18+ and a built checkout of agentchat
(its ``dist/`` and ``mcp-server/node_modules``; docs/compatibility.md says how)::

    .venv/bin/python tests/mcp/agentchat_mcp_check.py /path/to/agentchat

Starts ``hubbub serve`` (open mode, memory store), runs ``node mcp-server/index.js`` with
``AGENTCHAT_URL=ws://127.0.0.1:PORT`` under the official ``mcp`` Python client over stdio,
and drives agentchat's tools against a MEW participant ``bob``: connect, send, listen,
claim. Prints each step's result and exits non-zero on the first failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import websockets
from mcp import ClientSession, StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.ports
from tests.ports import reserve_port

HUBBUB = str(Path(sys.executable).with_name("hubbub"))


def step(name: str, ok: bool, detail: Any) -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)
    if not ok:
        raise SystemExit(1)


async def frame_where(ws: Any, pred: Any, timeout: float = 15.0) -> dict[str, Any]:
    async with asyncio.timeout(timeout):
        while True:
            frame: dict[str, Any] = json.loads(await ws.recv())
            if pred(frame):
                return frame


def folders(root: Path) -> tuple[Path, Path]:
    """A home and a working directory under ``root`` (agentchat refuses to run from a
    shallow directory)."""
    home, cwd = root / "home", root / "project" / "work"
    home.mkdir()
    cwd.mkdir(parents=True)
    return home, cwd


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if c.type == "text")


async def main(agentchat: Path) -> None:
    port = reserve_port()
    gateway = subprocess.Popen(
        [HUBBUB, "serve", "--port", str(port), "--store", "memory"], stderr=subprocess.DEVNULL
    )
    work = tempfile.TemporaryDirectory(prefix="agentchat-mcp-")
    home, cwd = folders(Path(work.name))
    try:
        for _ in range(200):
            try:
                _, probe = await asyncio.open_connection("127.0.0.1", port)
                probe.close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        bob = await websockets.connect(f"ws://127.0.0.1:{port}/ws")
        await bob.send(json.dumps({"type": "join", "participantId": "bob", "space": "default"}))
        await frame_where(bob, lambda f: f.get("kind") == "channel/joined")
        params = StdioServerParameters(
            command="node",
            args=[str(agentchat / "mcp-server" / "index.js")],
            env={
                "PATH": os.environ.get("PATH", ""),
                "HOME": str(home),
                "AGENTCHAT_URL": f"ws://127.0.0.1:{port}",
                "AGENTCHAT_SETTLE_MS": "200",
            },
            cwd=str(cwd),
        )
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            names = {t.name for t in (await s.list_tools()).tools}
            wanted = {"agentchat_connect", "agentchat_send", "agentchat_listen", "agentchat_claim"}
            step("tools/list", wanted <= names, sorted(wanted & names))

            got = await s.call_tool("agentchat_connect", {"name": "agentmcp"})
            step("agentchat_connect", not got.is_error, text_of(got)[:200])

            got = await s.call_tool(
                "agentchat_send", {"target": "#general", "message": "hello from agentchat-mcp"}
            )
            seen = await frame_where(
                bob, lambda f: f.get("payload", {}).get("text") == "hello from agentchat-mcp"
            )
            step("agentchat_send", not got.is_error, f"bob got it from {seen.get('from')}")

            await bob.send(json.dumps({"id": "q1", "kind": "chat", "channel": "#general",
                                       "payload": {"text": "what is 6*7?"}}))  # fmt: skip
            listened = asyncio.create_task(
                s.call_tool("agentchat_listen", {"channels": ["#general"]})
            )
            async with asyncio.timeout(30):
                got = await listened
            text = text_of(got)
            step("agentchat_listen", not got.is_error and "what is 6*7?" in text, text[:300])
            # agentchat-mcp's inbox keeps no msg_id (from, from_name, to, content, ts only),
            # so a model cannot claim what listen returned: the claim uses the id bob knows
            messages = json.loads(text).get("messages", [])
            question = next(m for m in messages if m.get("content") == "what is 6*7?")
            step("listen gives no msg_id", "msg_id" not in question, sorted(question))
            msg_id = "q1"
            got = await s.call_tool("agentchat_claim", {"msg_id": msg_id, "channel": "#general"})
            claimed = await frame_where(
                bob,
                lambda f: (
                    str(f.get("kind", "")).startswith("floor/")
                    and f.get("payload", {}).get("msg_id") == msg_id
                ),
            )
            step(
                "agentchat_claim",
                not got.is_error,
                f"bob saw {claimed['kind']} {json.dumps(claimed.get('payload'))}",
            )
        await bob.close()
    finally:
        gateway.terminate()
        gateway.wait(10)
        work.cleanup()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    asyncio.run(main(Path(sys.argv[1])))
