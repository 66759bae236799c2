"""`hubbub demo --once` plays its scene end to end: floor control, callback, sleep, tools,
a proposal (no timing assertions: the scene only waits for things to happen)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import aiohttp
import pytest

from hubbub.demo.scene import gateway, run_demo
from tests.ports import reserve_port


@pytest.mark.slow  # the whole scripted scene
async def test_demo_scene_runs(capsys: pytest.CaptureFixture[str]) -> None:
    await run_demo(0, once=True)
    out = capsys.readouterr().out
    assert re.search(r"open the dashboard:\s+http://127\.0\.0\.1:\d+/dashboard", out)
    assert re.search(r"talk with the agents in the chat:\s+http://127\.0\.0\.1:\d+/chat\n", out)
    assert "#general   bob: bob here, on agentchat" in out
    # a. one question everyone wants: claims, at least one YIELD, exactly one answer
    contest = out.split("== a.")[1].split("== b.")[0]
    assert "claims the floor on" in contest
    assert "YIELD:" in contest
    counts = re.findall(r"=> (\d+) answers? to", contest)
    assert counts and set(counts) == {"1"}, contest  # every round: exactly one answer
    assert len(re.findall(r"#general   \w+: Call it", contest)) == len(counts)
    # b. a tool call through discovery
    assert "maths discovered: calculator/add, calculator/multiply" in out
    assert "calculator runs multiply(12, 7) = 84" in out
    assert "[dm]       maths → alice: 12 * 7 = 84." in out
    # c. a proposal waiting for the operator
    assert re.search(r"\[proposal\] coder proposes tools/call add .* WAITING for an operator", out)
    # d. a callback scheduled and fired
    assert "chef scheduled callback" in out and "fired for chef" in out
    assert "#general   chef: The bread is done" in out
    # d. sleep, buffered DMs, wake with them
    assert "travel is asleep" in out
    assert "travel woke up (timer): 2 buffered" in out
    assert "travel → alice: Booked the 9:40 train to Lyon, alice." in out
    assert "== scene over ==" in out
    assert "gave up waiting" not in out
    # the README's transcript shows what the demo prints (ids and section a vary by run)
    port = re.findall(r"127\.0\.0\.1:(\d+)/dashboard", out)[0]
    printed = _ids_hidden(out.replace(f"127.0.0.1:{port}", "127.0.0.1:8080")).splitlines()
    missing = [line for line in _readme_transcript() if line not in printed]
    assert not missing, "README lines the demo no longer prints:\n" + "\n".join(missing)
    # who answered what, section a included, is the README's, line for line and in order
    assert _answers(printed) == _answers(_readme_block()), "\n".join(_answers(printed))


def _answers(lines: list[str]) -> list[str]:
    """Who answered what: the agents' chats, the DMs alice got, the answer counts."""
    said = re.compile(r"^  (#general   (maths|travel|chef|coder): |\[dm\]  |  => \d+ answer)")
    return [line for line in lines if said.match(line)]


def _ids_hidden(text: str) -> str:
    return re.sub(r"…[0-9A-Za-z]{6}\b", "…ID", text)


def _readme_block() -> list[str]:
    """The README's sample transcript, ids hidden."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("\n```\n=====")[1].split("\n```")[0]
    return _ids_hidden("=====" + block).splitlines()


def _readme_transcript() -> list[str]:
    """The README's sample transcript, ids hidden, without section a (its claims and yields
    differ by run) and without what comes after the scene (not printed with --once)."""
    lines = _readme_block()
    a = next(i for i, line in enumerate(lines) if line.startswith("== a."))
    b = next(i for i, line in enumerate(lines) if line.startswith("== b."))
    return lines[:a] + lines[b : lines.index("== scene over ==") + 1]


def _ignore_sigint() -> None:
    """In the child before exec: start as ``sh -c 'hubbub demo &'`` does, SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _start_demo(port: int) -> subprocess.Popen[str]:
    """``hubbub demo --port PORT`` started like a background job (SIGINT ignored)."""
    return subprocess.Popen(
        [sys.executable, "-m", "hubbub", "demo", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
        preexec_fn=_ignore_sigint,
    )


def _read_until(proc: subprocess.Popen[str], marker: str, out: list[str]) -> str:
    """Collect the demo's output into ``out`` up to the first line containing ``marker``."""
    assert proc.stdout is not None
    for line in proc.stdout:
        out.append(line)
        if marker in line:
            return line
    raise AssertionError(f"the demo ended before printing {marker!r}:\n" + "".join(out))


def _stop(proc: subprocess.Popen[str], sig: signal.Signals, out: list[str]) -> None:
    """Send ``sig``; the demo must exit 0 within 30 s, without a traceback, saying so."""
    proc.send_signal(sig)
    try:
        rest, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"the demo ignored {sig.name}:\n" + "".join(out)) from None
    out.append(rest)
    transcript = "".join(out)
    assert proc.returncode == 0, transcript
    assert "Traceback" not in transcript and "Task was destroyed" not in transcript, transcript
    assert transcript.rstrip().endswith("stopped"), transcript


@pytest.mark.slow  # a `hubbub demo` process
def test_ctrl_c_mid_scene_stops_everything_cleanly() -> None:
    """`hubbub demo` interrupted while the agents are busy: exit 0, no traceback, port freed,
    even when started with SIGINT ignored (a background job)."""
    port = reserve_port()
    proc = _start_demo(port)
    out: list[str] = []
    try:
        _read_until(proc, "claims the floor on", out)  # mid-scene: agents connected, thinking
        _stop(proc, signal.SIGINT, out)
    finally:
        proc.kill()
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is fine
        s.bind(("127.0.0.1", port))  # no one listens there any more
        s.listen()


@pytest.mark.slow  # a `hubbub demo` process
def test_a_quick_rerun_keeps_the_port() -> None:
    """Stop the demo (SIGTERM) and start it again at once: its connections' TIME_WAIT does
    not push the second run off the port."""
    port = reserve_port()
    dashboard = f"http://127.0.0.1:{port}/dashboard"
    for _run in range(2):
        proc = _start_demo(port)
        out: list[str] = []
        try:
            banner = _read_until(proc, "open the dashboard:", out)
            assert banner.split()[-1] == dashboard, "".join(out)
            _read_until(proc, "agents:", out)  # the agents are connected
            _stop(proc, signal.SIGTERM, out)
        finally:
            proc.kill()


async def test_a_taken_port_moves_the_demo_to_a_free_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = int(taken.getsockname()[1])
        async with gateway(port) as (_, real), aiohttp.ClientSession() as http:
            assert real != port
            async with http.get(f"http://127.0.0.1:{real}/health") as response:
                assert response.status == 200
    assert f"(port {port} is not free: Address already in use;" in capsys.readouterr().out


async def test_a_taken_port_the_user_named_is_an_error() -> None:
    port = reserve_port()
    refused = pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}: Address already")
    with socket.create_server(("127.0.0.1", port)), refused:
        async with gateway(port, exact=True):
            raise AssertionError("the demo served on another port")


async def test_the_demo_removes_its_data_directory_on_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    async with gateway(0):
        (data,) = os.listdir(tmp_path)
        assert data.startswith("hubbub-demo-") and os.listdir(tmp_path / data)  # the history
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("env", "provider"),
    [
        ({"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "sk-test"}, "openai"),
        ({"ANTHROPIC_API_KEY": "sk-ant-test"}, "anthropic"),
        ({}, "offline"),
    ],
)
def test_the_demo_agents_run_on_the_model_the_environment_selects(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], provider: str
) -> None:
    from hubbub.demo.cast import SKILLS, make_agent

    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HUBBUB_MODEL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    agents = [make_agent(name, "ws://127.0.0.1:9/ws", 0.1) for name in SKILLS]
    assert {a.model.describe().split(":")[0] for a in agents} == {provider}
    assert [a.config.skills for a in agents] == [(skill,) for skill, _ in SKILLS.values()]
