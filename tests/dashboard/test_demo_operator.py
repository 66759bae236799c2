"""`hubbub demo` with a person at the dashboard: the proposal the scene leaves waiting is
approved in the operator console, the calculator runs, and the coder answers alice."""

from __future__ import annotations

import asyncio
import contextlib
import re

import pytest
from playwright.async_api import expect

from hubbub.demo.scene import run_demo
from tests.dashboard.conftest import WAIT_S, WatchedPage
from tests.ports import reserve_port


async def _printed(capsys: pytest.CaptureFixture[str], seen: list[str], text: str) -> str:
    """Wait until the demo has printed ``text``; return its whole transcript so far."""
    for _ in range(int(4 * WAIT_S / 0.1)):
        seen.append(capsys.readouterr().out)
        if text in "".join(seen):
            return "".join(seen)
        await asyncio.sleep(0.1)
    raise AssertionError(f"the demo did not print {text!r}:\n{''.join(seen)}")


async def test_the_operator_approves_the_demo_proposal(
    watched: WatchedPage, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = asyncio.create_task(run_demo(reserve_port(), once=False))
    seen: list[str] = []
    try:
        out = await _printed(capsys, seen, "still serving: approve coder's proposal at")
        dashboard = re.search(r"open the dashboard:\s+(\S+)", out)
        assert dashboard, out
        page = watched.page
        await page.goto(dashboard[1])
        await page.fill("#console-id", "operator")
        await page.press("#console-id", "Enter")
        await expect(page.locator("#console-log")).to_contain_text("connected as operator")
        item = page.locator("#proposals .proposal")
        await expect(item).to_have_count(1)
        await expect(item.locator(".what")).to_have_text("tools/call add")
        await expect(item.locator(".meta")).to_contain_text("from coder · to calculator")
        await item.locator("button.approve").click()
        await expect(page.locator("#proposals-settled .proposal .outcome")).to_have_text(
            "calculator answered: 5555"
        )
        out = await _printed(capsys, seen, "[dm]       coder → alice:")
        assert "[proposal] approved by operator" in out
        assert "calculator runs add(1234, 4321) = 5555" in out
        assert re.search(r"\[dm\]       coder → alice: .*5555", out), out
    finally:
        # the page first: a dashboard whose gateway stops reconnects and logs the refusal
        await watched.page.close()
        demo.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await demo
