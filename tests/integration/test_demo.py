"""`hubbub demo --once` plays its scene end to end: floor control, callback, sleep, tools,
a proposal (no timing assertions: the scene only waits for things to happen)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys

import pytest

from hubbub.demo import run_demo


async def test_demo_scene_runs(capsys: pytest.CaptureFixture[str]) -> None:
    await run_demo(0, once=True)
    out = capsys.readouterr().out
    assert re.search(r"open the dashboard:\s+http://127\.0\.0\.1:\d+/dashboard", out)
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


def test_ctrl_c_mid_scene_stops_everything_cleanly() -> None:
    """`hubbub demo` interrupted while the agents are busy: exit 0, no traceback, port freed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = subprocess.Popen(
        [sys.executable, "-m", "hubbub", "demo", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )
    out: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.append(line)
            if "claims the floor on" in line:  # mid-scene: agents connected and thinking
                break
        else:
            raise AssertionError("the demo ended before the floor was claimed:\n" + "".join(out))
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=30)
        out.append(rest)
        assert proc.returncode == 0, "".join(out)
    finally:
        proc.kill()
    transcript = "".join(out)
    assert "Traceback" not in transcript and "Task was destroyed" not in transcript, transcript
    assert transcript.rstrip().endswith("stopped")
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is fine
        s.bind(("127.0.0.1", port))  # no one listens there any more
        s.listen()


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
    from hubbub.demo_cast import SKILLS, make_agent

    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HUBBUB_MODEL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    agents = [make_agent(name, "ws://127.0.0.1:9/ws", 0.1) for name in SKILLS]
    assert {a.model.describe().split(":")[0] for a in agents} == {provider}
    assert [a.config.skills for a in agents] == [(skill,) for skill, _ in SKILLS.values()]
