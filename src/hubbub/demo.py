"""``hubbub demo``: a gateway plus a scripted conversation between both wire dialects."""

from __future__ import annotations

import asyncio
import json
import socket
import tempfile
from pathlib import Path
from typing import Any

import websockets
from aiohttp import web

from hubbub.server.app import build_app, make_router


def _free_port(preferred: int) -> int:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", preferred))
        except OSError:
            s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _show(who: str, frame: dict[str, Any]) -> None:
    if "kind" in frame:
        kind = frame["kind"]
        p = frame.get("payload", {})
        if kind == "chat":
            where = frame.get("channel") or "DM to " + ",".join(frame.get("to", []))
            print(f"  [{who} sees] {frame['from']} in {where}: {p.get('text')}")
        elif kind == "system/presence":
            people = p.get("participants") or [p.get("participant", {})]
            names = ", ".join(x.get("id", "?") for x in people)
            where = f" {p['channel']}" if "channel" in p else ""
            print(f"  [{who} sees] presence {p.get('event')}{where}: {names}")
        elif kind in ("system/welcome", "channel/joined", "system/error"):
            print(f"  [{who} sees] {kind} {json.dumps(p)[:100]}")
    else:
        t = frame.get("type")
        if t == "MSG":
            print(f"  [{who} sees] {frame['from']} -> {frame['to']}: {frame['content']}")
        else:
            print(f"  [{who} sees] {t} {json.dumps(frame)[:100]}")


async def _reader(who: str, ws: Any) -> None:
    async for raw in ws:
        _show(who, json.loads(raw))


def _tidy(x: float) -> float:
    """84.0 reads better as 84."""
    return int(x) if float(x).is_integer() else x


async def _agent_scene(url: str, alice: Any) -> None:
    """A calculator participant and an agent on the offline model answer alice."""
    from hubbub.sdk import Agent, Participant

    print("scene: a calculator participant offers tools; an agent (offline model) uses them\n")
    calc = Participant(gateway=url, participant_id="calculator", kind="service")

    @calc.tool
    def multiply(a: float, b: float) -> float:
        """Multiply two numbers."""
        return _tidy(a * b)

    @calc.tool
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return _tidy(a + b)

    async with calc, Agent(participant_id="assistant", gateway=url) as agent:
        found = await agent.wait_for_tools("calculator", timeout=10)
        print(f"  assistant discovered: {', '.join('calculator/' + t.name for t in found)}")
        for text in ("@assistant what is 12*7?", "I had pasta for lunch."):
            print(f"alice says {text!r}")
            await alice.send(json.dumps({"kind": "chat", "payload": {"text": text}}))
            await asyncio.sleep(2.0)


async def run_demo(port: int, *, once: bool) -> None:
    """Serve on ``port`` (or a free one), play the scene, then serve until Ctrl-C."""
    port = _free_port(port)
    data_dir = Path(tempfile.mkdtemp(prefix="hubbub-demo-"))
    runner = web.AppRunner(build_app(make_router(data_dir=data_dir)), handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    url = f"ws://127.0.0.1:{port}/ws"
    print(f"hubbub gateway on {url} (open mode; HTTP API at http://127.0.0.1:{port}/participants)")
    print("scene: alice speaks MEW, bob speaks agentchat; both share #general\n")
    try:
        async with websockets.connect(url) as alice, websockets.connect(url) as bob:
            await alice.send(
                json.dumps({"type": "join", "participantId": "alice", "kind": "human"})
            )
            await bob.send(json.dumps({"type": "IDENTIFY", "name": "bob"}))
            await bob.send(json.dumps({"type": "JOIN", "channel": "#general"}))
            readers = [
                asyncio.create_task(_reader("alice", alice)),
                asyncio.create_task(_reader("bob", bob)),
            ]
            await asyncio.sleep(0.3)
            steps: list[tuple[Any, dict[str, Any], str]] = [
                (alice, {"kind": "chat", "payload": {"text": "hi bob, can you hear me?"}}, "alice"),
                (bob, {"type": "MSG", "to": "#general", "content": "loud and clear, alice"}, "bob"),
                (
                    bob,
                    {"type": "MSG", "to": "@alice", "content": "(a private note for you)"},
                    "bob",
                ),
                (
                    alice,
                    {"kind": "chat", "to": ["bob"], "payload": {"text": "thanks, DM back"}},
                    "alice",
                ),
                (alice, {"kind": "mcp/request", "to": ["bob"], "payload": {}}, "alice"),
            ]
            for ws, frame, who in steps:
                print(f"{who} sends {json.dumps(frame)}")
                await ws.send(json.dumps(frame))
                await asyncio.sleep(0.3)
            print("\n(the last request is MEW-only, so bob's agentchat client never sees it)\n")
            await _agent_scene(url, alice)
            print(
                "\nfloor control, callbacks and sleep/wake arrive with the coordination engines.\n"
            )
            for r in readers:
                r.cancel()
        if not once:
            print(f"gateway still serving on {url}; Ctrl-C to stop")
            await asyncio.Event().wait()
    finally:
        await runner.cleanup()
