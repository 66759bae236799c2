"""The SQLite store when its file or its disk fails: a clear message, an honest /health."""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, NamedTuple

import aiohttp
import pytest

from hubbub.store.base import MessageRef
from hubbub.store.sqlite import SqliteStore
from tests import processes
from tests.ports import reserve_port

pytestmark = pytest.mark.slow  # every test starts a gateway process

START_TIMEOUT_S = 30
WAIT_S = 30.0
FILE_LIMIT = 2 * 1024 * 1024
"""The largest file the gateway may write in the disk-full test (RLIMIT_FSIZE)."""


def _serve(data_dir: Path) -> subprocess.CompletedProcess[str]:
    """``hubbub serve`` on ``data_dir`` until it exits by itself (it must, the file is bad)."""
    cmd = [sys.executable, "-m", "hubbub", "serve", "--port", str(reserve_port())]
    return subprocess.run(
        [*cmd, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
        check=False,
    )


async def _history_file(path: Path, messages: int) -> None:
    """A real gateway history: ``messages`` channel messages with their id records."""
    store = SqliteStore(path)
    await store.open()
    for seq in range(1, messages + 1):
        body = b'{"kind":"chat","payload":{"text":"%d %s"}}' % (seq, b"x" * 300)
        ref = MessageRef(f"m{seq}", "alice", "#general", seq, 1)
        store.append("default", "#general", seq, body, ref)
    await store.close()


PAGE = 4096
"""SQLite's page size (its default; the store does not change it)."""


def _garble(path: Path, needle: bytes | None) -> None:
    """Overwrite one page (a torn write, a bad sector): the file's first (its header), or the
    one holding ``needle``."""
    data = bytearray(path.read_bytes())
    start = 0
    if needle is not None:
        at = data.rfind(needle)
        assert at >= 0, f"{needle!r} is not in {path}"
        start = at - at % PAGE
    data[start : start + PAGE] = b"\x13" * PAGE
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["header", "pages"])
async def test_a_corrupt_history_file_stops_the_start_with_one_sentence_and_the_fix(
    tmp_path: Path, damage: str
) -> None:
    db = tmp_path / "hubbub.db"
    await _history_file(db, 3000)
    # "pages": the leaf page of `messages` with the newest message, which the start's
    # MAX(seq) reads (a garbled page that the start does not read goes unnoticed until a
    # history read reaches it; a `PRAGMA quick_check` at open would notice, at the cost of
    # reading the whole file)
    _garble(db, None if damage == "header" else b'"text":"3000 ')
    result = _serve(tmp_path)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    error = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(error) == 1, result.stderr
    assert str(db) in error[0] and "damaged" in error[0]
    assert ".recover" in error[0] and "--data-dir" in error[0]  # the fixes


async def _health(http: aiohttp.ClientSession, base: str) -> dict[str, Any]:
    async with http.get(f"{base}/health") as resp:
        body: dict[str, Any] = await resp.json()
        return body


async def _until_health(http: aiohttp.ClientSession, base: str, status: str) -> dict[str, Any]:
    """Poll ``/health`` until it reports ``status`` (the store retries on its own schedule)."""
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while True:
        body = await _health(http, base)
        if body["status"] == status:
            return body
        assert asyncio.get_running_loop().time() < deadline, body
        await asyncio.sleep(0.05)


class FullDisk(NamedTuple):
    """A gateway whose history outgrew the files it may write, and a message left waiting."""

    proc: subprocess.Popen[bytes]
    http: aiohttp.ClientSession
    base: str
    log: Path
    waiting: asyncio.Future[aiohttp.ClientResponse]


@contextlib.asynccontextmanager
async def _full_disk(tmp_path: Path) -> AsyncIterator[FullDisk]:
    """``hubbub serve`` that may write files of at most 2 MiB (RLIMIT_FSIZE: a write past it
    fails as on a full disk), posted to until a message is not acknowledged."""
    port = reserve_port()
    log_path = tmp_path / "serve.log"

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, resource.RLIM_INFINITY))

    cmd = [sys.executable, "-m", "hubbub", "serve", "--port", str(port), "--rate-limit", "0"]
    with log_path.open("wb") as log_file:
        proc = subprocess.Popen(
            [*cmd, "--data-dir", str(tmp_path / "data")],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            preexec_fn=small_files,
            env=os.environ | {"PYTHONUNBUFFERED": "1"},
        )
    base = f"http://127.0.0.1:{port}"
    body = {"kind": "chat", "channel": "#general", "payload": {"text": "x" * 50_000}}
    try:
        async with aiohttp.ClientSession() as http:
            deadline = asyncio.get_running_loop().time() + WAIT_S
            while True:
                try:
                    assert (await _health(http, base))["status"] == "healthy"
                    break
                except aiohttp.ClientConnectionError:
                    assert proc.poll() is None, log_path.read_text()
                    assert asyncio.get_running_loop().time() < deadline
                    await asyncio.sleep(0.05)
            url = f"{base}/participants/alice/messages"
            for _ in range(2 * FILE_LIMIT // 50_000):  # enough to outgrow the limit
                post = asyncio.ensure_future(http.post(url, json=body))
                done, _pending = await asyncio.wait([post], timeout=2.0)
                if not done:  # not acknowledged: its commit fails
                    yield FullDisk(proc, http, base, log_path, post)
                    return
                assert post.result().status == 202
            raise AssertionError("every message was stored: the file limit did not bite")
    finally:
        processes.stop(proc)


async def test_a_full_disk_is_reported_by_health_and_the_log_names_the_real_error(
    tmp_path: Path,
) -> None:
    async with _full_disk(tmp_path) as full:
        http, base = full.http, full.base
        health = await _until_health(http, base, "degraded")
        reason = health["store"]["error"]
        assert "disk I/O error" in reason and "free space" in reason, reason
        body = {"kind": "chat", "channel": "#general", "payload": {"text": "one more"}}
        async with http.post(f"{base}/participants/bob/messages", json=body) as resp:
            assert resp.status == 503  # refused at once, not left waiting
            assert (await resp.json())["error"] == "unavailable"
        log = full.log.read_text()
        assert "disk I/O error" in log
        assert "cannot rollback" not in log

        unlimited = (resource.RLIM_INFINITY, resource.RLIM_INFINITY)
        resource.prlimit(full.proc.pid, resource.RLIMIT_FSIZE, unlimited)  # space freed
        health = await _until_health(http, base, "healthy")
        assert health["store"] == {"available": True}
        resp = await asyncio.wait_for(full.waiting, WAIT_S)  # the waiting message is stored
        assert resp.status == 202
        resp.release()


async def test_a_gateway_on_a_full_disk_still_stops(tmp_path: Path) -> None:
    async with _full_disk(tmp_path) as full:
        await _until_health(full.http, full.base, "degraded")
        full.proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(full.proc.wait, START_TIMEOUT_S) == 0
        assert "stopping without the last writes" in full.log.read_text()
