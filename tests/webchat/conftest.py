"""Web chat fixtures: a real gateway, real offline-model agents, people in Chromium contexts.

Each person is a browser context of its own (its own storage, like another browser), driven
by Playwright on Debian's chromium (see tests/dashboard/conftest.py). A person's page fails
its test if it logged a console error or threw.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from playwright.async_api import Browser, Page, expect

from hubbub.demo.cast import make_agent, make_calculator
from hubbub.sdk import Agent, Participant
from tests.conftest import RunningGateway
from tests.dashboard.conftest import WAIT_S, WatchedPage, browser

__all__ = ["WAIT_S", "browser"]

LAPTOP = {"width": 1280, "height": 800}
GATEWAY_DOWN = r"WebSocket connection to 'ws://[^']+' failed: .*ERR_CONNECTION_REFUSED"
"""What Chromium logs while the page retries a gateway that is down (expected when a test
stops it)."""
PHONE = {"width": 390, "height": 844}

OpenPage = Callable[..., Awaitable[Page]]


@pytest.fixture
async def pages(browser: Browser) -> AsyncIterator[OpenPage]:
    """``await pages(url, allow=regex, **context options)``: a page in a new browser context (a
    person of their own); each fails the test if it logged an error (other than ``allow``)."""
    made: list[tuple[Any, WatchedPage, re.Pattern[str] | None]] = []

    async def make(url: str, allow: str | None = None, **options: Any) -> Page:
        context = await browser.new_context(**{"viewport": LAPTOP, **options})
        wp = WatchedPage(await context.new_page())
        made.append((context, wp, re.compile(allow) if allow else None))
        await wp.page.goto(url)
        return wp.page

    yield make
    errors = [e for _, wp, ok in made for e in wp.errors if not (ok and ok.search(e))]
    for context, _, _ in made:
        await context.close()
    assert errors == [], errors


async def sign_in(page: Page, name: str) -> None:
    """Sign in with a name (open mode) and wait until connected, in #general."""
    await expect(page.locator("#signin-name")).to_be_focused()
    await page.keyboard.type(name)
    await page.keyboard.press("Enter")
    await expect(page.locator("#conn")).to_have_attribute("data-state", "live")
    await expect(page.locator("#conv-title")).to_have_text("#general")


@pytest.fixture
async def person(gw: RunningGateway, pages: OpenPage) -> Callable[..., Awaitable[Page]]:
    """``await person("dana")``: a browser signed in to ``/chat`` by name."""

    async def make(name: str, **options: Any) -> Page:
        page = await pages(f"{gw.http}/chat", **options)
        await sign_in(page, name)
        return page

    return make


@pytest.fixture
async def cast(gw: RunningGateway) -> AsyncIterator[Callable[..., Awaitable[Agent]]]:
    """``await cast("maths", latency_s)``: one of the demo's offline-model agents (and, for
    the first one, the demo's calculator service), stopped at teardown."""
    async with contextlib.AsyncExitStack() as stack:
        calculator: list[Participant] = []

        async def make(name: str, latency_s: float = 0.2) -> Agent:
            if not calculator:
                calc = make_calculator(gw.url, lambda line: None)
                calculator.append(await stack.enter_async_context(calc))
            return await stack.enter_async_context(make_agent(name, gw.url, latency_s))

        yield make
