"""A page on another origin attacks the gateway from a real headless Chromium.

The hostile page is served by a second local HTTP server on another port (another origin);
it tries what any web page a user happens to open could: a WebSocket to ``/ws``, no-cors
``fetch`` POSTs to the kill switch and the message endpoint, and framing ``/dashboard``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web
from playwright.async_api import Browser, Page

from tests.conftest import RunningGateway
from tests.dashboard.conftest import WAIT_S

Serve = Callable[[str], Awaitable[str]]

ATTACK = """<!doctype html><title>cute cats</title><script>
const gw = "127.0.0.1:%(port)d";
window.results = {};
const ws = new WebSocket("ws://" + gw + "/ws");
ws.onopen = () => {
  window.results.ws = "open";
  ws.send(JSON.stringify({type: "join", participantId: "mallory"}));
  ws.send(JSON.stringify({kind: "chat", payload: {text: "joined from a web page"}}));
};
ws.onerror = () => { if (!window.results.ws) window.results.ws = "refused"; };
const post = (path, body) => fetch("http://" + gw + path, {
  method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body,
}).then(() => "sent", () => "failed");
post("/admin/participants/alice/ban", "").then((r) => { window.results.ban = r; });
post("/participants/mallory/messages",
     JSON.stringify({kind: "chat", payload: {text: "posted from a web page"}}))
  .then((r) => { window.results.post = r; });
</script>"""

FRAME = """<!doctype html><title>cute cats</title>
<iframe id="victim" src="http://127.0.0.1:%(port)d/dashboard"
        onload="window.framed = true" width="800" height="600"></iframe>"""


@pytest.fixture
async def hostile_site() -> AsyncIterator[Serve]:
    """``await serve(html)``: the URL of ``html`` served from another origin (its own port)."""
    pages: dict[str, str] = {}

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=pages[request.match_info["name"]], content_type="text/html")

    app = web.Application()
    app.router.add_get("/{name}", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()

    async def serve(html: str) -> str:
        name = f"page{len(pages)}.html"
        pages[name] = html
        return f"http://127.0.0.1:{site.port}/{name}"

    yield serve
    await runner.cleanup()


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    """A fresh page (console errors are expected here: the browser reports the refusals)."""
    context = await browser.new_context()
    yield await context.new_page()
    await context.close()


async def test_a_page_on_another_origin_can_neither_join_nor_ban(
    dgw: RunningGateway, hostile_site: Serve, page: Page
) -> None:
    alice = await dgw.mew("alice")
    await page.goto(await hostile_site(ATTACK % {"port": dgw.port}))
    await page.wait_for_function(
        "window.results.ws && window.results.ban && window.results.post", timeout=WAIT_S * 1000
    )
    results = await page.evaluate("window.results")
    assert results["ws"] == "refused"
    space = dgw.router.spaces["default"]
    assert "mallory" not in space.online and "mallory" not in space.known
    assert "alice" in space.online and not dgw.router.bans.is_banned("default", "alice")
    await alice.silent(lambda f: f.get("kind") == "chat")
    assert await dgw.router.store.history("default", "#general", after_seq=0, limit=10) == []


async def test_a_page_on_another_origin_cannot_frame_the_dashboard(
    dgw: RunningGateway, hostile_site: Serve, page: Page
) -> None:
    await page.goto(await hostile_site(FRAME % {"port": dgw.port}))
    await page.wait_for_function("window.framed === true", timeout=WAIT_S * 1000)
    victim = page.frames[1]
    assert not victim.url.startswith(dgw.http), victim.url  # Chromium shows its error page
    assert await victim.locator("#conn").count() == 0
