"""Screenshots during the demo (Playwright + Debian's chromium): the dashboard, the web chat."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

WIDTH, HEIGHT = 1400, 900
CHAT_NAME = "sam"
"""Who signs in to the web chat for its screenshot (a person watching the scene)."""

Snap = Callable[[Path], Awaitable[None]]


def chromium_path() -> str:
    """Debian's chromium: ``HUBBUB_CHROMIUM``, ``chromium`` on the PATH or /usr/bin/chromium."""
    return os.environ.get("HUBBUB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


@contextlib.asynccontextmanager
async def _page(url: str) -> AsyncIterator[Any]:
    """A 1400x900 page of headless chromium at ``url``."""
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=chromium_path(), headless=True)
        try:
            page = await browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            await page.goto(url)
            yield page
        finally:
            await browser.close()


async def _save(page: Any, path: Path, what: str) -> None:
    await page.wait_for_timeout(700)  # let the live state land
    path.parent.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(path))
    print(f"  [screenshot] saved the {what} to {path}", flush=True)


@contextlib.asynccontextmanager
async def dashboard_page(url: str) -> AsyncIterator[Snap]:
    """Open the dashboard at ``url``; yield ``snap(path)`` saving a 1400x900 screenshot."""
    async with _page(url) as page:

        async def snap(path: Path) -> None:
            await _save(page, path, "dashboard")

        yield snap


@contextlib.asynccontextmanager
async def chat_page(url: str) -> AsyncIterator[Snap]:
    """Open the web chat at ``url`` signed in as :data:`CHAT_NAME`; yield ``snap(path)``
    saving a screenshot of ``#general`` with a mention being typed."""
    async with _page(url) as page:
        await page.fill("#signin-name", CHAT_NAME)
        await page.press("#signin-name", "Enter")
        await page.wait_for_selector('#conn[data-state="live"]')

        async def snap(path: Path) -> None:
            box = page.locator("#composer-input")
            await box.focus()
            await page.keyboard.type("Thanks @maths! @co")  # the mention list opens
            await _save(page, path, "chat")
            await box.fill("")

        yield snap
