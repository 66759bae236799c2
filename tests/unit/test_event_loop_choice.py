"""HUBBUB_LOOP chooses the event loop of every long-running command (serve, cluster nodes)."""

from __future__ import annotations

import asyncio
import sys

import pytest
from click.testing import CliRunner

from hubbub.cli import main
from hubbub.process import run_until_signal


def _loop_module_of_a_run() -> str:
    seen: list[str] = []

    async def body() -> None:
        seen.append(type(asyncio.get_running_loop()).__module__)

    run_until_signal(body, "test")
    return seen[0]


@pytest.mark.parametrize("value", ["", "asyncio", " AsyncIO "])
def test_default_and_asyncio_run_on_asyncios_own_loop(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("HUBBUB_LOOP", value)
    assert _loop_module_of_a_run().startswith("asyncio")


def test_an_unknown_loop_is_refused_by_serve_naming_the_choices() -> None:
    result = CliRunner().invoke(
        main, ["serve", "--store", "memory", "--port", "0"], env={"HUBBUB_LOOP": "tokio"}
    )
    assert result.exit_code != 0
    assert "HUBBUB_LOOP='tokio' is not an event loop hubbub knows" in result.output
    assert "asyncio (the default) or uvloop" in result.output


def test_uvloop_asked_for_but_missing_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # what Python does when it is absent
    result = CliRunner().invoke(
        main, ["serve", "--store", "memory", "--port", "0"], env={"HUBBUB_LOOP": "uvloop"}
    )
    assert result.exit_code != 0
    assert "uvloop is not installed: `pip install uvloop`" in result.output
