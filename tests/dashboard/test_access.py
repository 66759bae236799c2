"""Who may see the dashboard: observer and admin tokens, human consoles, open mode, refusals."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import aiohttp

from hubbub.server.web_assets import assets, page_html
from tests.conftest import stop_gateway
from tests.dashboard.conftest import TOKENS, open_events, start_dash_gateway, team_space
from tests.engines_live.conftest import EngineGateway


async def _get(
    gw: EngineGateway,
    path: str,
    token: str | None = None,
    *,
    header: bool = True,
    accept: str = "application/json",
    **query: str,
) -> tuple[int, Any, Any]:
    headers = {"Accept": accept}
    params = dict(query)
    if token is not None:
        if header:
            headers["Authorization"] = f"Bearer {token}"
        else:
            params["token"] = token
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{gw.http}{path}", headers=headers, params=params) as resp,
    ):
        body: Any = (
            await resp.json() if resp.content_type == "application/json" else await resp.text()
        )
        return resp.status, body, resp.headers


def test_the_page_loads_only_the_gateways_own_files() -> None:
    html = page_html("dashboard")
    assert "http://" not in html and "https://" not in html  # no CDN, nothing fetched elsewhere
    scripts = re.findall(r"<script[^>]*>", html)
    assert scripts == ['<script type="module" src="/web/dashboard/main.js">']
    assert "/web/dashboard/dashboard.css" in html
    assert {"dashboard/main.js", "dashboard/dashboard.css"} <= set(assets())


async def test_open_mode_needs_no_token(dgw: EngineGateway) -> None:
    status, body, headers = await _get(dgw, "/dashboard", accept="text/html")
    assert status == 200 and "<title>hubbub dashboard</title>" in body
    assert headers["Content-Type"].startswith("text/html")
    status, viewer, _ = await _get(dgw, "/dashboard/session")
    assert status == 200
    assert viewer == {
        "space": "default",
        "id": None,
        "kind": None,
        "role": "admin",
        "open": True,
        "can_observe": True,
        "can_admin": True,
        "can_console": True,
    }
    async with open_events(dgw) as events:
        snap = await events.next("snapshot")
    assert snap["space"] == "default" and snap["viewer"]["open"] is True


async def test_no_token_is_refused_with_the_fix(team: EngineGateway) -> None:
    for path in ("/dashboard", "/dashboard/session", "/dashboard/events"):
        status, body, headers = await _get(team, path)
        assert status == 401, path
        assert body["error"] == "auth_failed"
        assert "needs an observer or admin token" in body["message"]
        assert "?token=" in body["message"] and "hubbub token create" in body["message"]
        assert "--role observer" in body["message"]
        assert headers["WWW-Authenticate"].startswith("Bearer")
    # a browser gets the page shell (it holds no data) to enter or find a stored token...
    status, html, headers = await _get(team, "/dashboard", accept="text/html,*/*")
    assert status == 200 and "<title>hubbub dashboard</title>" in html
    assert headers["X-Hubbub-Error"] == "auth_failed"
    # ...but a refused token is a refusal for browsers too
    status, html, headers = await _get(team, "/dashboard", "hb_wrong", accept="text/html")
    assert status == 401 and "<title>hubbub dashboard</title>" in html


async def test_a_wrong_token_is_refused(team: EngineGateway) -> None:
    for header in (True, False):
        status, body, _ = await _get(team, "/dashboard/events", "hb_nonsense", header=header)
        assert status == 401 and body["error"] == "auth_failed"
        assert body["message"].startswith("unknown token")


async def test_observer_and_admin_tokens_watch(team: EngineGateway) -> None:
    for pid in ("ops", "boss", "watcher"):
        status, viewer, _ = await _get(team, "/dashboard/session", TOKENS[pid])
        assert status == 200 and viewer["id"] == pid and viewer["can_observe"] is True
        assert viewer["can_admin"] is (pid == "boss")
        assert viewer["can_console"] is (pid != "watcher")  # the console is for humans
        status, html, _ = await _get(team, "/dashboard", TOKENS[pid], accept="text/html")
        assert status == 200 and "hubbub dashboard" in html
        async with open_events(team, TOKENS[pid]) as events:  # ?token=, as EventSource does
            snap = await events.next("snapshot")
        assert snap["space"] == "team" and snap["viewer"]["role"] in ("observer", "admin")
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            f"{team.http}/dashboard/events", headers={"Authorization": f"Bearer {TOKENS['ops']}"}
        ) as resp,
    ):
        assert resp.status == 200  # a Bearer header works too
        assert (await resp.content.readline()).startswith(b"event: snapshot")


async def test_a_human_participant_gets_the_console_only(team: EngineGateway) -> None:
    status, viewer, _ = await _get(team, "/dashboard/session", TOKENS["eve"])
    assert status == 200
    assert viewer["can_console"] is True and viewer["can_observe"] is False
    assert viewer["can_admin"] is False and viewer["role"] == "participant"
    status, _, _ = await _get(team, "/dashboard", TOKENS["eve"], accept="text/html")
    assert status == 200
    status, body, _ = await _get(team, "/dashboard/events", TOKENS["eve"], header=False)
    assert status == 403 and body["error"] == "forbidden"
    assert "needs role observer or admin" in body["message"] and "role: observer" in body["message"]


async def test_an_agent_participant_token_is_refused(team: EngineGateway) -> None:
    for path in ("/dashboard", "/dashboard/session", "/dashboard/events"):
        status, body, _ = await _get(team, path, TOKENS["bot"])
        assert status == 403 and body["error"] == "forbidden", path
        assert "'bot' has role 'participant'" in body["message"]


async def test_a_token_of_another_space_is_refused(team: EngineGateway) -> None:
    status, body, _ = await _get(team, "/dashboard/session", TOKENS["ops"], space="other")
    assert status == 403 and body["error"] == "wrong_space"


async def test_an_open_space_with_tokens_still_honours_roles(tmp_path: Path) -> None:
    gw = await start_dash_gateway(tmp_path, spaces=[team_space(open_=True)])
    try:
        status, viewer, _ = await _get(gw, "/dashboard/session")
        assert status == 200 and viewer["open"] is True  # no token: open mode
        status, viewer, _ = await _get(gw, "/dashboard/session", TOKENS["ops"])
        assert status == 200 and viewer["open"] is False and viewer["can_admin"] is False
        status, _, _ = await _get(gw, "/dashboard/events", TOKENS["bot"])
        assert status == 403
    finally:
        await stop_gateway(gw)
