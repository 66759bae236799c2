"""The `hubbub` command as a user runs it: serve, graceful shutdown, token create."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
import websockets
import yaml
from click.testing import CliRunner

from hubbub.cli import main
from hubbub.server.config import hash_token, load_space
from tests.ports import reserve_port


async def _wait_ready(proc: subprocess.Popen[str], port: int) -> None:
    for _ in range(100):
        if proc.poll() is not None:
            raise AssertionError(f"server exited: {proc.stderr.read() if proc.stderr else ''}")
        try:
            _, w = await asyncio.open_connection("127.0.0.1", port)
            w.close()
            return
        except OSError:
            await asyncio.sleep(0.1)
    raise AssertionError("server did not start")


@pytest.mark.slow  # a `hubbub serve` process
async def test_serve_logs_url_and_closes_clients_with_1001_on_sigterm(tmp_path: Path) -> None:
    port = reserve_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "hubbub", "serve", "--port", str(port), "--data-dir", str(tmp_path)],
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )
    try:
        await _wait_ready(proc, port)
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws") as ws:
            await ws.send(json.dumps({"type": "join", "participantId": "alice"}))
            await ws.send(json.dumps({"kind": "chat", "payload": {"text": "persist me"}}))
            await asyncio.sleep(0.3)
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(ws.wait_closed(), 10)
            assert ws.close_code == 1001
        assert proc.wait(10) == 0
    finally:
        proc.kill()
    log = proc.stderr.read() if proc.stderr else ""
    assert f"serving ws://127.0.0.1:{port}/ws (open mode" in log
    assert f"dashboard: http://127.0.0.1:{port}/dashboard" in log
    assert f"chat: http://127.0.0.1:{port}/chat" in log
    assert (tmp_path / "hubbub.db").exists()
    import sqlite3

    rows = sqlite3.connect(tmp_path / "hubbub.db").execute("SELECT data FROM messages").fetchall()
    assert any(b"persist me" in r[0] for r in rows)


def test_token_create_prints_once_and_stores_hash(tmp_path: Path) -> None:
    cfg = tmp_path / "space.yaml"
    result = CliRunner().invoke(
        main, ["token", "create", "--space", str(cfg), "--id", "alice", "--kind", "human"]
    )
    assert result.exit_code == 0, result.output
    token = result.stdout.strip().splitlines()[0]
    assert token.startswith("hb_")
    raw = yaml.safe_load(cfg.read_text())
    assert raw["participants"]["alice"]["token_hash"] == hash_token(token)
    assert token not in cfg.read_text()
    space = load_space(cfg)
    assert space.participants["alice"].kind == "human"


def test_token_create_rejects_bad_id(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["token", "create", "--space", str(tmp_path / "s.yaml"), "--id", "no/slash"]
    )
    assert result.exit_code != 0
    assert "not a legal id" in result.output


def test_serve_reports_a_bad_config_by_key(tmp_path: Path) -> None:
    cfg = tmp_path / "space.yaml"
    cfg.write_text("space: team\nparticipants:\n  bot:\n    kind: robot\n")
    result = CliRunner().invoke(main, ["serve", "--space-config", str(cfg)])
    assert result.exit_code != 0
    assert "participants.bot.kind" in result.output
    cfg.write_text("space: team\nchannels: [general]\n")
    result = CliRunner().invoke(main, ["serve", "--space-config", str(cfg)])
    assert "'general' is not a channel name" in result.output
    result = CliRunner().invoke(main, ["serve", "--space-config", str(tmp_path / "missing.yaml")])
    assert "does not exist" in result.output


def test_serve_refuses_a_bad_origin_or_connection_limit_with_the_flag_named(
    tmp_path: Path,
) -> None:
    result = CliRunner().invoke(main, ["serve", "--allow-origin", "app.example"])
    assert result.exit_code != 0
    assert "--allow-origin" in result.output and "scheme://host[:port]" in result.output
    result = CliRunner().invoke(
        main, ["serve", "--max-connections", "10", "--max-connections-per-ip", "20"]
    )
    assert result.exit_code != 0 and "max_connections_per_ip" in result.output


@pytest.mark.slow  # a `hubbub serve` process
async def test_serve_accepts_browsers_only_from_its_own_and_the_allowed_origins(
    tmp_path: Path,
) -> None:
    port = reserve_port()
    app = "http://app.example:3000"
    argv = ["serve", "--port", str(port), "--data-dir", str(tmp_path), "--allow-origin", app]
    proc = subprocess.Popen(
        [sys.executable, "-m", "hubbub", *argv, "--max-connections", "50"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        await _wait_ready(proc, port)
        url = f"ws://127.0.0.1:{port}/ws"
        for origin in (app, f"http://127.0.0.1:{port}"):
            async with websockets.connect(url, origin=origin) as ws:  # type: ignore[arg-type]
                await ws.send(json.dumps({"type": "join", "participantId": "page"}))
                assert "system/welcome" in str(await ws.recv())
        try:
            await websockets.connect(url, origin="http://evil.example")  # type: ignore[arg-type]
        except websockets.InvalidStatus as exc:
            assert exc.response.status_code == 403
        else:
            raise AssertionError("a foreign origin was let in")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        proc.kill()


def test_serve_refuses_a_bad_allowed_host_with_the_flag_named() -> None:
    result = CliRunner().invoke(main, ["serve", "--allowed-hosts", "ok.example,http://x.example"])
    assert result.exit_code != 0
    assert "--allowed-hosts" in result.output and "'http://x.example'" in result.output


@pytest.mark.slow  # a `hubbub serve` process
async def test_serve_answers_the_hosts_it_is_told(tmp_path: Path) -> None:
    port = reserve_port()
    argv = ["serve", "--port", str(port), "--data-dir", str(tmp_path), "--host", "localhost"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "hubbub", *argv, "--allowed-hosts", "a.test,.b.test"],
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | {"HUBBUB_ALLOWED_HOSTS": "ignored.test"},  # the flag wins
    )
    try:
        await _wait_ready(proc, port)
        async with aiohttp.ClientSession() as http:
            for host, status in (
                ("a.test", 200),
                ("x.b.test", 200),
                ("localhost", 200),
                ("127.0.0.1", 200),
                ("ignored.test", 421),
                ("rebind.attacker.example", 421),
            ):
                headers = {"Host": f"{host}:{port}"}
                async with http.get(f"http://127.0.0.1:{port}/health", headers=headers) as resp:
                    assert resp.status == status, host
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
    finally:
        proc.kill()


@pytest.mark.slow  # a `hubbub serve` process
def test_serve_on_a_taken_port_says_so_without_a_traceback(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = int(taken.getsockname()[1])
        result = subprocess.run(
            [sys.executable, "-m", "hubbub", "serve", "--port", str(port), "--store", "memory"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in result.stderr
    assert "--port" in result.stderr.splitlines()[-1]


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        (
            "space: team\nchanels: ['#general']\n",
            "unknown key 'chanels' (did you mean 'channels'?)",
        ),
        (
            "space: team\ndefaults:\n  capabilites: []\n",
            "defaults: unknown key 'capabilites' (did you mean 'capabilities'?)",
        ),
        (
            "space: team\nagentchat_keys:\n  bnd: tofu\n",
            "agentchat_keys: unknown key 'bnd' (did you mean 'bind'?)",
        ),
        (
            "space: team\nparticipants:\n  bob:\n    knd: human\n",
            "participants.bob: unknown key 'knd' (did you mean 'kind'?)",
        ),
        (
            "space: team\nparticipants:\n  bob:\n    zzzz: 1\n",
            "participants.bob: unknown key 'zzzz' (known keys: kind, token_hash,",
        ),
    ],
)
def test_serve_suggests_the_key_a_misspelt_space_config_key_was_meant_to_be(
    tmp_path: Path, yaml_text: str, message: str
) -> None:
    cfg = tmp_path / "space.yaml"
    cfg.write_text(yaml_text)
    result = CliRunner().invoke(main, ["serve", "--space-config", str(cfg)])
    assert result.exit_code == 1
    assert f"Error: {cfg}: {message}" in result.output
