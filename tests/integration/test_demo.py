"""`hubbub demo --once` plays its scene end to end."""

from __future__ import annotations

import pytest

from hubbub.demo import run_demo


async def test_demo_scene_runs(capsys: pytest.CaptureFixture[str]) -> None:
    await run_demo(0, once=True)
    out = capsys.readouterr().out
    assert "[bob sees] @alice -> #general: hi bob" in out
    assert "[alice sees] bob in DM to alice" in out
    assert "mcp/request" in out and "[bob sees] mcp" not in out
    assert "assistant discovered: calculator/multiply" in out
    assert "[alice sees] assistant in #general: 12 * 7 = 84." in out
    assert "assistant in #general" not in out.split("I had pasta for lunch.")[-1]
