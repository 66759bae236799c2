"""The in-process session's transport reads back exactly the frames the gateway writes."""

from __future__ import annotations

import sys

import httpx2
import pytest

from hubbub.extras import install_command
from hubbub.protocol.envelope import Envelope, encode
from hubbub.server.http.mcp_http import QueueTransport
from hubbub.server.state.connection import ws_close_frame, ws_text_frame, ws_text_frames
from tests.conftest import RunningGateway


def test_frames_of_every_length_form_in_one_write() -> None:
    got: list[Envelope] = []
    closed: list[str] = []
    t = QueueTransport(got.append, closed.append)
    sizes = [10, 200, 70_000]  # 7-bit, 16-bit and 64-bit payload lengths
    envs = [Envelope(kind="chat", id=f"m{n}", payload={"text": "x" * n}) for n in sizes]
    t.write(ws_text_frames([encode(e) for e in envs]))
    assert [len(e.payload["text"]) for e in got] == sizes
    t.write(ws_text_frame(b"not json"))  # an undecodable frame is logged and skipped
    assert len(got) == 3 and not t.is_closing()
    t.write(ws_close_frame(4000, "replaced by a new connection with the same id"))
    assert t.is_closing() and closed == ["replaced by a new connection with the same id"]
    assert t.get_write_buffer_size() == 0


async def test_mcp_without_the_mcp_package_says_which_extra(
    gateway: RunningGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "hubbub.mcp.tools", None)  # as if `mcp` were missing
    async with httpx2.AsyncClient() as http:
        resp = await http.post(
            gateway.http + "/mcp", json={}, headers={"X-Hubbub-Participant": "a"}
        )
    assert resp.status_code == 501 and install_command("mcp") in resp.json()["message"]
