"""A dashboard screenshot during the demo (Playwright + Debian's chromium)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

WIDTH, HEIGHT = 1400, 900


def chromium_path() -> str:
    """Debian's chromium: ``HUBBUB_CHROMIUM``, ``chromium`` on the PATH or /usr/bin/chromium."""
    return os.environ.get("HUBBUB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


@contextlib.asynccontextmanager
async def dashboard_page(url: str) -> AsyncIterator[Callable[[Path], Awaitable[None]]]:
    """Open ``url`` in headless chromium; yield ``snap(path)`` saving a 1400x900 screenshot."""
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=chromium_path(), headless=True)
        try:
            page = await browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
            await page.goto(url)

            async def snap(path: Path) -> None:
                await page.wait_for_timeout(700)  # let the live state land
                path.parent.mkdir(parents=True, exist_ok=True)
                await page.screenshot(path=str(path))
                print(f"  [screenshot] saved the dashboard to {path}", flush=True)

            yield snap
        finally:
            await browser.close()
