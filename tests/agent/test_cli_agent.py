"""``hubbub agent run`` as a user runs it: a real process against a real gateway, Ctrl-C."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hubbub.cli import main
from tests.agent.conftest import calculator
from tests.conftest import RunningGateway
from tests.sdk.conftest import MakeParticipant


@pytest.mark.slow  # a `hubbub agent run` process
async def test_agent_run_answers_until_ctrl_c(
    gw: RunningGateway, participant: MakeParticipant, tmp_path: Path
) -> None:
    await calculator(participant)
    config = tmp_path / "agent.yaml"
    config.write_text("participant_id: x\nprovider: offline\noffline: {latency_s: 0.01}\n")
    env = {**os.environ, "MEW_GATEWAY": gw.url}
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "MEW_AGENT_CONFIG"):
        env.pop(var, None)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "hubbub", "agent", "run", "--config", str(config),
        "--id", "clibot", "--log-level", "info",
        env=env, stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        human = await participant("alice", kind="human")
        await human.client.wait_for_participant("clibot", timeout=20)
        answered = human.client.expect("chat", lambda e: e.from_ == "clibot")
        # the agent may still be listing the calculator's tools: ask until it uses them
        async with asyncio.timeout(20):
            while True:
                await human.chat("@clibot what is 12*7?")
                answer = await asyncio.wait_for(asyncio.shield(answered), 5)
                if answer.payload["text"] == "12 * 7 = 84.":
                    break
                answered = human.client.expect("chat", lambda e: e.from_ == "clibot")
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), 10)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    log = err.decode()
    assert proc.returncode == 0, log
    assert "agent clibot (offline:offline-scripted) joining" in log
    assert "clibot: discovered the tools of calculator:" in log
    assert "from alice in #general → answer (mention): mentions me (@clibot)" in log
    assert "clibot: calling calculator/multiply {'a': 12, 'b': 7} directly" in log
    assert log.rstrip().endswith("agent stopped")


def test_a_bad_config_names_the_key(tmp_path: Path) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text("participant_id: a\nmax_iteration: 3\n")
    result = CliRunner().invoke(main, ["agent", "run", "--config", str(config)], env={})
    assert result.exit_code == 1
    expected = f"{config}: unknown key 'max_iteration' (did you mean 'max_iterations'?)"
    assert expected in result.output


def test_a_missing_id_says_how_to_give_one() -> None:
    result = CliRunner().invoke(main, ["agent", "run"], env={"MEW_PARTICIPANT_ID": ""})
    assert result.exit_code == 1
    assert "participant_id is required" in result.output and "--id" in result.output
