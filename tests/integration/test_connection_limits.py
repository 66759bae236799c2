"""Half-open connection floods against a real gateway: timed out, refused, never starving others.

The floods come from other loopback addresses (127.0.0.2, 127.0.0.3) so that per-address
limits can be told apart from the real clients on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import resource
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import websockets
from websockets.exceptions import InvalidStatus

from hubbub.server.config import Limits
from tests.conftest import RunningGateway, WsClient, start_gateway, stop_gateway
from tests.ports import reserve_port
from tests.timing import SLOW_WAIT

PARTIAL = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow"
WAIT_S = SLOW_WAIT

Socket = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def _flood(gw: RunningGateway, source: str, n: int) -> list[Socket]:
    """``n`` connections from ``source`` that each send a request head and never finish it."""
    out = []
    for _ in range(n):
        reader, writer = await asyncio.open_connection("127.0.0.1", gw.port, local_addr=(source, 0))
        writer.write(PARTIAL)
        out.append((reader, writer))
    return out


async def _answer(sock: Socket) -> bytes:
    """Everything the server sends until it closes the connection (b"" if it just closed)."""
    try:
        return await asyncio.wait_for(sock[0].read(), WAIT_S)
    except ConnectionResetError:
        return b""


def _close(socks: list[Socket]) -> None:
    for _, writer in socks:
        writer.close()


def _refusal(answer: bytes) -> dict[str, Any] | None:
    """The JSON body of a 503 answer; None when the connection was closed without one."""
    if not answer:
        return None
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 "), head
    assert b"Connection: close" in head
    out = json.loads(body)
    assert isinstance(out, dict)
    return out


async def _get(gw: RunningGateway, path: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(f"{gw.http}{path}") as resp:
        return resp.status, await resp.text()


async def _still_chatting(client: WsClient) -> None:
    await client.send({"kind": "chat", "payload": {"text": "still here"}})
    assert (await client.expect("chat"))["payload"]["text"] == "still here"


@pytest.fixture
async def limited(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    """A gateway that serves 60 connections, 40 per address, and waits long for heads."""
    limits = Limits(max_connections=60, max_connections_per_ip=40, header_timeout_s=60)
    gw = await start_gateway(tmp_path, limits=limits)
    yield gw
    await stop_gateway(gw)


async def test_a_flood_from_one_address_is_refused_over_its_limit(
    limited: RunningGateway,
) -> None:
    alice = await limited.mew("alice")
    flood = await _flood(limited, "127.0.0.2", 300)
    try:
        refused = [await _answer(s) for s in flood[40:]]  # the first 40 are served: they wait
        bodies = [b for b in map(_refusal, refused) if b is not None]
        assert bodies, "no connection over the limit got a 503"
        for body in bodies:
            assert body["error"] == "too_many_connections"
            assert "max_connections_per_ip" in body["message"]
        # the real clients on another address do not notice
        assert (await _get(limited, "/health"))[0] == 200
        await _still_chatting(alice)
        late = await limited.mew("bob")
        await _still_chatting(late)
        metrics = (await _get(limited, "/metrics"))[1]
        assert 'hubbub_connections_refused_total{reason="max_connections_per_ip"}' in metrics
    finally:
        _close(flood)


async def test_the_global_limit_refuses_everyone_cleanly_until_connections_end(
    limited: RunningGateway,
) -> None:
    alice = await limited.mew("alice")  # 1 connection from 127.0.0.1
    first = await _flood(limited, "127.0.0.2", 40)
    second = await _flood(limited, "127.0.0.3", 40)
    try:
        refused = [await _answer(s) for s in second[19:]]  # 1 + 40 + 19 = the 60 served
        bodies = [b for b in map(_refusal, refused) if b is not None]
        assert bodies and all("limits.max_connections)" in b["message"] for b in bodies)
        status, text = await _get(limited, "/health")
        assert status == 503 and "max_connections" in text
        with pytest.raises(InvalidStatus) as info:
            await websockets.connect(limited.url)
        assert info.value.response.status_code == 503
        await _still_chatting(alice)  # the connections already served keep working
        _close(first)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_S
        while (await _get(limited, "/health"))[0] != 200:  # the slots free as they close
            assert loop.time() < deadline, "/health never recovered"
            await asyncio.sleep(0.05)
    finally:
        _close(first + second)


async def test_connections_that_never_finish_their_request_are_cut_at_the_timeout(
    tmp_path: Path,
) -> None:
    gw = await start_gateway(tmp_path, limits=Limits(header_timeout_s=0.5))
    try:
        alice = await gw.mew("alice")
        loop = asyncio.get_running_loop()
        started = loop.time()
        flood = await _flood(gw, "127.0.0.2", 200)
        answers = await asyncio.gather(*(_answer(s) for s in flood))
        assert loop.time() - started >= 0.5
        for answer in answers:
            assert answer.startswith(b"HTTP/1.1 408 "), answer[:80]
            assert b"header_timeout_s" in answer
        _close(flood)
        await _still_chatting(alice)  # a served WebSocket is not cut by the head timeout
        assert (await _get(gw, "/health"))[0] == 200
        metrics = (await _get(gw, "/metrics"))[1]
        assert 'hubbub_connections_refused_total{reason="header_timeout"} 200.0' in metrics
    finally:
        await stop_gateway(gw)


@pytest.mark.slow  # a `hubbub serve` process
async def test_out_of_file_descriptors_logs_once_a_second_and_recovers(tmp_path: Path) -> None:
    """Caps set above the open-file limit: accept() fails with EMFILE, as on main under flood."""
    port = reserve_port()
    log_path = tmp_path / "serve.log"

    def low_fd_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))

    serve = [sys.executable, "-m", "hubbub", "serve", "--port", str(port), "--store", "memory"]
    caps = ["--max-connections", "5000", "--max-connections-per-ip", "5000"]
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(
            [*serve, *caps],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            preexec_fn=low_fd_limit,
        )
    flood: list[socket.socket] = []
    try:
        gw = RunningGateway(None, None, port, tmp_path)  # type: ignore[arg-type]
        await _until_up(gw)
        loop = asyncio.get_running_loop()
        started = loop.time()
        for _ in range(400):
            flood.append(socket.create_connection(("127.0.0.1", port)))
            flood[-1].sendall(PARTIAL)

        def reports() -> list[str]:
            text = log_path.read_text(errors="replace")
            return [line for line in text.splitlines() if "Too many open files" in line]

        while len(reports()) < 2:  # the first failure at once, the next ones a second later
            assert loop.time() - started < WAIT_S, log_path.read_text(errors="replace")
            await asyncio.sleep(0.05)
        lines = reports()
        assert len(lines) <= loop.time() - started + 1
        assert "(1 times since the last report)" in lines[0]
        assert "ulimit -n" in lines[1] and "(1 times" not in lines[1]
        for sock in flood:
            sock.close()
        flood.clear()
        assert (await _until_up(gw)) == 200  # the freed descriptors serve new clients again
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        for sock in flood:
            sock.close()
        proc.kill()
    text = log_path.read_text(errors="replace")
    assert "does not fit the open-file limit of 200" in text
    assert "Traceback" not in text, text[-2000:]
    assert len(text) < 20_000


async def _until_up(gw: RunningGateway) -> int:
    """The status of ``GET /health`` once the gateway answers it."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while True:
        try:
            return (await _get(gw, "/health"))[0]
        except aiohttp.ClientError:
            assert loop.time() < deadline, "the gateway never answered /health"
            await asyncio.sleep(0.05)
