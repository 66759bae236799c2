"""``listen`` across a gateway process that is killed (SIGKILL) and restarted on its SQLite
file: over ``/mcp`` the client's next session resumes where the last ``listen`` stopped; over
stdio ``hubbub mcp`` reconnects and resumes. Nothing missed, nothing twice, channel messages
and DMs, sent before the kill, while the participant was away, and after."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession

from tests.conftest import Door, WsClient
from tests.mcp.conftest import SHORT, call, opener
from tests.ports import reserve_port
from tests.processes import kill9, stop

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]  # `hubbub serve` processes


@dataclass
class GatewayProcess(Door):
    """``hubbub serve`` on a SQLite file in ``data_dir``, as a process of its own."""

    data_dir: Path
    port: int = 0
    clients: list[WsClient] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        if not self.port:
            self.port = reserve_port()
        argv = ["serve", "--port", str(self.port), "--data-dir", str(self.data_dir)]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hubbub", *argv],
            stderr=subprocess.DEVNULL,
            env=os.environ | SHORT,
        )
        for _ in range(400):
            assert self.proc.poll() is None, "hubbub serve exited"
            with contextlib.suppress(OSError):
                _, w = await asyncio.open_connection("127.0.0.1", self.port)
                w.close()
                return
            await asyncio.sleep(0.05)
        raise AssertionError("hubbub serve did not listen")

    async def kill(self) -> None:
        for c in self.clients:
            with contextlib.suppress(Exception):
                await c.ws.close()
        self.clients.clear()
        kill9(self.proc)


@pytest.fixture
async def gateway_process(tmp_path: Path) -> AsyncIterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path)
    await gw.start()
    yield gw
    for c in gw.clients:
        with contextlib.suppress(Exception):
            await c.ws.close()
    stop(gw.proc)


async def _stored(bob: WsClient, env: dict[str, Any]) -> None:
    """Send as bob and wait for the gateway's echo: the message is stored (durable)."""
    env = {"id": f"bob-{env['payload']['text']}", **env}
    await bob.send(env)
    await bob.next_where(lambda f: f.get("id") == env["id"] and f.get("seq") is not None)


def _chat(text: str) -> dict[str, Any]:
    return {"kind": "chat", "channel": "#general", "payload": {"text": text}}


def _dm(text: str) -> dict[str, Any]:
    return {"kind": "chat", "to": ["claude"], "private": True, "payload": {"text": text}}


async def _listen_until(s: ClientSession, n: int) -> list[str]:
    """Listen until ``n`` messages came back; then one more listen must bring nothing new."""
    texts: list[str] = []
    while len(texts) < n:
        got = await call(s, "listen", timeout_s=10)
        assert not got["nudge"], f"only {texts} came back"
        texts += [m["text"] for m in got["messages"]]
    got = await call(s, "listen", timeout_s=1)
    assert got["nudge"] and got["messages"] == [], got["messages"]
    return texts


async def test_http_listen_resumes_in_the_next_session_after_a_kill(
    gateway_process: GatewayProcess,
) -> None:
    gw = gateway_process
    open_mcp = opener("http", gw.http, gw.url)
    bob = await gw.mew("bob")
    killed = False
    with contextlib.suppress(Exception):  # ending the old session fails: its gateway is gone
        async with open_mcp("claude") as s:
            await _stored(bob, _chat("one"))
            assert await _listen_until(s, 1) == ["one"]  # returned: never again
            await _stored(bob, _chat("two"))  # reaches the session, not returned before the kill
            await _stored(bob, _dm("dm-two"))
            await gw.kill()
            killed = True
    assert killed
    await gw.start()
    bob = await gw.mew("bob")
    await _stored(bob, _chat("three"))  # while claude has no session
    await _stored(bob, _dm("dm-three"))
    async with open_mcp("claude") as s:  # a new Mcp-Session-Id, the same participant
        texts = await _listen_until(s, 4)
        assert sorted(texts) == ["dm-three", "dm-two", "three", "two"]
        assert [t for t in texts if not t.startswith("dm")] == ["two", "three"]
        await _stored(bob, _chat("four"))
        assert await _listen_until(s, 1) == ["four"]
    async with open_mcp("claude") as s:  # a later session: nothing of the above again
        await _stored(bob, _chat("five"))
        assert await _listen_until(s, 1) == ["five"]


async def test_stdio_listen_across_a_killed_gateway(gateway_process: GatewayProcess) -> None:
    gw = gateway_process
    async with opener("stdio", gw.http, gw.url)("claude") as s:
        bob = await gw.mew("bob")
        await _stored(bob, _chat("one"))
        assert await _listen_until(s, 1) == ["one"]
        await _stored(bob, _chat("two"))
        await _stored(bob, _dm("dm-two"))
        await gw.kill()
        await gw.start()  # hubbub mcp reconnects with its backoff and resumes
        bob = await gw.mew("bob")
        await _stored(bob, _chat("three"))
        await _stored(bob, _dm("dm-three"))
        texts = await _listen_until(s, 4)
        assert sorted(texts) == ["dm-three", "dm-two", "three", "two"]
        assert [t for t in texts if not t.startswith("dm")] == ["two", "three"]
        await _stored(bob, _chat("four"))
        assert await _listen_until(s, 1) == ["four"]
