"""Dashboard fixtures: gateways on a manual engine clock, a server-sent events reader, Chromium.

The browser tests use Debian's ``chromium`` through Playwright (``executable_path``; never
``playwright install``). A missing browser fails the tests: ``make test`` installs it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from playwright.async_api import Browser, ConsoleMessage, Page, async_playwright, expect

from hubbub.server.config import Limits, ParticipantConfig, SpaceConfig, hash_token
from tests.conftest import start_gateway, stop_gateway
from tests.engines_live.conftest import EngineGateway, ManualClock
from tests.timing import SLOW_WAIT

WAIT_S = SLOW_WAIT
"""How long a test waits for something visible (generous: CI runs on 2 slow cores)."""
expect.set_options(timeout=WAIT_S * 1000)

TOKENS = {
    "boss": "boss-token",
    "ops": "ops-token",
    "eve": "eve-token",
    "bot": "bot-token",
    "helper": "helper-token",
    "watcher": "watcher-token",
}


def team_space(open_: bool = False) -> SpaceConfig:
    """A space with one participant per role and kind of interest."""
    people = {
        "boss": ParticipantConfig(kind="human", role="admin"),
        "ops": ParticipantConfig(kind="human", role="observer"),
        "eve": ParticipantConfig(kind="human"),
        "bot": ParticipantConfig(kind="agent"),
        "helper": ParticipantConfig(kind="agent"),
        "watcher": ParticipantConfig(kind="service", role="observer"),
    }
    for pid, p in people.items():
        p.token_hash = hash_token(TOKENS[pid])
    cfg = SpaceConfig(space="team", open=open_, participants=people)
    cfg.validate()
    return cfg


async def start_dash_gateway(
    data_dir: Path, spaces: list[SpaceConfig] | None = None, limits: Limits | None = None
) -> EngineGateway:
    """A gateway whose engine timers fire only on ``gw.tick(seconds)``."""
    clock = ManualClock()
    gw = await start_gateway(data_dir, spaces=spaces, limits=limits, clock=clock)
    gw.__class__ = EngineGateway
    gw.clock = clock  # type: ignore[attr-defined]
    return gw  # type: ignore[return-value]


@pytest.fixture
async def dgw(tmp_path: Path) -> AsyncIterator[EngineGateway]:
    """An open-mode gateway on a manual engine clock, without a rate limit."""
    gw = await start_dash_gateway(tmp_path, limits=Limits(rate_per_s=0))
    yield gw
    await stop_gateway(gw)


@pytest.fixture
async def team(tmp_path: Path) -> AsyncIterator[EngineGateway]:
    """A gateway with the token-only space ``team`` (see :func:`team_space`)."""
    gw = await start_dash_gateway(tmp_path, spaces=[team_space()], limits=Limits(rate_per_s=0))
    yield gw
    await stop_gateway(gw)


# ---------------------------------------------------------------------- server-sent events


class EventStream:
    """Reads a ``text/event-stream`` response one event at a time."""

    def __init__(self, resp: aiohttp.ClientResponse) -> None:
        self.resp = resp
        self.seen: list[tuple[str, dict[str, Any]]] = []

    async def read(self, timeout: float = WAIT_S) -> tuple[str, dict[str, Any]]:
        """The next event as (name, data)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        name, data = "message", []
        while True:
            left = deadline - loop.time()
            if left <= 0:
                raise TimeoutError("no event on the stream")
            raw = await asyncio.wait_for(self.resp.content.readline(), left)
            if not raw:
                raise EOFError("the event stream ended")
            line = raw.decode().rstrip("\r\n")
            if not line:
                if data:
                    event = (name, json.loads("\n".join(data)))
                    self.seen.append(event)
                    return event
                name = "message"
                continue
            if line.startswith(":"):
                continue
            key, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if key == "event":
                name = value
            elif key == "data":
                data.append(value)

    async def next(
        self,
        name: str,
        pred: Callable[[dict[str, Any]], bool] = lambda d: True,
        timeout: float = WAIT_S,
    ) -> dict[str, Any]:
        """The next event called ``name`` whose data matches ``pred`` (others are skipped)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            left = deadline - loop.time()
            if left <= 0:
                raise TimeoutError(f"no {name} event matched")
            got, data = await self.read(left)
            if got == name and pred(data):
                return data

    async def activity(self, event: str, timeout: float = WAIT_S, **fields: Any) -> dict[str, Any]:
        """The next activity event of type ``event`` with the given field values."""
        return await self.next(
            "activity",
            lambda d: d.get("event") == event and all(d.get(k) == v for k, v in fields.items()),
            timeout,
        )


@asynccontextmanager
async def open_events(
    gw: EngineGateway, token: str | None = None, **query: str
) -> AsyncIterator[EventStream]:
    """Connect to ``/dashboard/events`` (token in the query, as a browser does)."""
    params = dict(query)
    if token is not None:
        params["token"] = token
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    async with (
        aiohttp.ClientSession(timeout=timeout) as http,
        http.get(f"{gw.http}/dashboard/events", params=params) as resp,
    ):
        assert resp.status == 200, await resp.text()
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        yield EventStream(resp)


def person(state: dict[str, Any], pid: str) -> dict[str, Any]:
    """One participant's entry of a snapshot or state event."""
    found = [p for p in state["participants"] if p["id"] == pid]
    assert found, f"{pid} not in {[p['id'] for p in state['participants']]}"
    return found[0]


# ---------------------------------------------------------------------- the browser


def chromium_path() -> str:
    """Debian's Chromium; fails (never skips) when it is missing."""
    path = os.environ.get("HUBBUB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        pytest.fail(
            "Debian's chromium is not installed: run `apt-get install -y chromium` "
            "(`make test` does it when run as root)",
            pytrace=False,
        )
    return path


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    """A headless Debian Chromium driven by Playwright."""
    path = chromium_path()
    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=path, headless=True)
        try:
            yield b
        finally:
            await b.close()


class WatchedPage:
    """A page and the console errors and uncaught exceptions it produced."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.errors: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))

    def _console(self, msg: ConsoleMessage) -> None:
        if msg.type == "error":
            self.errors.append(f"console.error: {msg.text}")


@pytest.fixture
async def watched(browser: Browser) -> AsyncIterator[WatchedPage]:
    """A laptop-sized page; the test fails if the page logged an error."""
    context = await browser.new_context(viewport={"width": 1366, "height": 768})
    wp = WatchedPage(await context.new_page())
    yield wp
    await context.close()
    assert wp.errors == [], wp.errors
