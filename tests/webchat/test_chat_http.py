"""The web chat over HTTP: the page and its headers, how to sign in, the pages' module files."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from hubbub.server.config import Limits, ParticipantConfig, SpaceConfig, hash_token
from hubbub.server.web_assets import PAGE_CSP, WEB, assets, page_html
from tests.conftest import RunningGateway, start_gateway, stop_gateway


async def _get(
    gw: RunningGateway, path: str, token: str | None = None, **query: str
) -> tuple[int, Any, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"{gw.http}{path}", headers=headers, params=query) as resp,
    ):
        json_body = resp.content_type == "application/json"
        body: Any = await resp.json() if json_body else await resp.read()
        return resp.status, body, resp.headers


@pytest.fixture
async def team(tmp_path: Path) -> Any:
    """A gateway with the token-only space ``team`` (eve, a human) and the open ``default``."""
    eve = ParticipantConfig(kind="human", token_hash=hash_token("eve-token"))
    cfg = SpaceConfig(space="team", participants={"eve": eve})
    lobby = SpaceConfig(space="default", open=True)
    gw = await start_gateway(tmp_path, spaces=[cfg, lobby], limits=Limits(rate_per_s=0))
    yield gw
    await stop_gateway(gw)


async def test_the_page_is_served_with_a_same_origin_policy(gateway: RunningGateway) -> None:
    status, body, headers = await _get(gateway, "/chat")
    assert status == 200 and b"<title>hubbub chat</title>" in body
    assert headers["Content-Type"].startswith("text/html")
    assert headers["Content-Security-Policy"] == PAGE_CSP
    assert "script-src 'self'" in PAGE_CSP and "frame-ancestors 'none'" in PAGE_CSP
    assert headers["X-Frame-Options"] == "DENY" and headers["Cache-Control"] == "no-store"
    status, dash, headers = await _get(gateway, "/dashboard")
    assert status == 200 and headers["Content-Security-Policy"] == PAGE_CSP
    assert b'href="/chat"' in dash  # the dashboard links to the chat


async def test_how_to_sign_in(team: RunningGateway) -> None:
    status, body, _ = await _get(team, "/chat/session", space="default")
    lobby = {"space": "default", "id": None, "kind": None, "open": True, "dm_seq": 0}
    assert (status, body) == (200, lobby)
    status, body, _ = await _get(team, "/chat/session", space="team")
    assert status == 200 and body["open"] is False
    assert "space 'team' signs people in with a token" in body["message"]
    assert (
        "hubbub token create --space-config space.yaml --id <your name> --kind human"
        in body["message"]
    )
    status, body, _ = await _get(team, "/chat/session", "eve-token")
    eve = {"space": "team", "id": "eve", "kind": "human", "open": False, "dm_seq": 0}
    assert (status, body) == (200, eve)


async def test_the_session_answer_says_where_dms_start(team: RunningGateway) -> None:
    """``dm_seq``: the page resumes DMs from there and pages back through the older ones."""
    amy = await team.mew("amy")
    for text in ("one", "two"):
        await amy.send({"kind": "chat", "to": ["amy"], "private": True, "payload": {"text": text}})
        await amy.expect("chat")
    status, body, _ = await _get(team, "/chat/session", space="default")
    assert status == 200 and body["dm_seq"] == 2
    status, body, _ = await _get(team, "/chat/session", "eve-token")
    assert status == 200 and body["dm_seq"] == 0  # DMs are numbered per space
    status, body, _ = await _get(team, "/chat/session", space="team")
    assert "dm_seq" not in body  # nothing about a space one cannot sign in to yet


async def test_sign_in_refusals_name_the_fix(team: RunningGateway) -> None:
    status, body, _ = await _get(team, "/chat/session", "hb_nonsense", space="default")
    assert status == 401 and body["error"] == "auth_failed"
    assert "this gateway knows no such token" in body["message"]
    assert "this space is open, so you can also sign in with a name" in body["message"]
    status, body, _ = await _get(team, "/chat/session", "eve-token", space="default")
    assert status == 403 and body["error"] == "wrong_space"
    assert "open /chat?space=team" in body["message"]
    status, body, _ = await _get(team, "/chat/session", space="nowhere")
    assert status == 404 and "known spaces: default, team" in body["message"]
    team.router.bans.ban("team", "eve")
    status, body, _ = await _get(team, "/chat/session", "eve-token")
    assert status == 403 and body["error"] == "banned"


async def test_the_module_files_are_served_and_nothing_else(gateway: RunningGateway) -> None:
    served = assets()
    assert {"common/session.js", "chat/main.js", "chat/chat.css", "dashboard/main.js"} <= set(
        served
    )
    for name in ("common/session.js", "chat/chat.css"):
        status, body, headers = await _get(gateway, f"/web/{name}")
        assert status == 200 and body == (WEB / name).read_bytes()
        want = "text/javascript" if name.endswith(".js") else "text/css"
        assert headers["Content-Type"].startswith(want)
        assert headers["X-Content-Type-Options"] == "nosniff"
    for path in (
        "/web/chat/index.html",
        "/web/nope.js",
        "/web/../web_assets.py",
        "/web/%2e%2e/app.py",
    ):
        status, _, _ = await _get(gateway, path)
        assert status == 404, path


IMPORT = re.compile(r"""^import\s(?:[^;]*?\sfrom\s)?\s*["']([^"']+)["'];""", re.M)


def test_every_module_import_and_page_reference_resolves() -> None:
    served = assets()
    for name in served:
        if not name.endswith(".js"):
            continue
        text = (WEB / name).read_text(encoding="utf-8")
        assert "import(" not in text, f"{name}: a dynamic import (keep the module graph static)"
        for target in IMPORT.findall(text):
            assert target.startswith("./") or target.startswith("../"), (name, target)
            resolved = (Path(name).parent / target).as_posix()
            parts: list[str] = []
            for part in resolved.split("/"):
                if part == "..":
                    parts.pop()
                elif part != ".":
                    parts.append(part)
            assert "/".join(parts) in served, f"{name} imports {target}, which is not served"
    for page in ("chat", "dashboard"):
        html = page_html(page)
        assert "http://" not in html and "https://" not in html  # nothing from elsewhere
        refs = re.findall(r'(?:src|href)="/web/([^"]+)"', html)
        assert refs and all(ref in served for ref in refs), refs
        assert re.findall(r"<script[^>]*>", html) == [
            f'<script type="module" src="/web/{page}/main.js">'
        ]
