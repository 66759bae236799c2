"""The pages' protocol constants (``web/common/wire.js``) equal the gateway's, in Chromium.

Like the capability parity test: the served module is imported in a real page and every
constant is compared with the Python one of the same meaning; the participant-id pattern is
also run on a table of ids through both.
"""

from __future__ import annotations

from typing import Any

from hubbub.protocol.ids import DM_STREAM, PARTICIPANT_ID_RE, SERVER_ID, is_participant_id
from hubbub.protocol.markers import CB_FIRE, WAKE
from hubbub.sdk.client import NO_RECONNECT_CODES
from hubbub.server.state.connection import CLOSE_KICKED, CLOSE_POLICY, CLOSE_REPLACED
from tests.conftest import RunningGateway
from tests.webchat.conftest import OpenPage

IDS = ["alice", "a", "x" * 32, "x" * 33, "", "a b", "a.b-c_d", "é", "@alice", "A9", "a/b", "a\n"]


async def test_the_pages_protocol_constants_are_the_gateways(
    gw: RunningGateway, pages: OpenPage
) -> None:
    page = await pages(f"{gw.http}/chat")
    js: dict[str, Any] = await page.evaluate(
        """async (ids) => {
            const w = await import("/web/common/wire.js");
            return {
              SERVER: w.SERVER, DM: w.DM, ID_PATTERN: w.ID_PATTERN, CB_FIRE: w.CB_FIRE,
              WAKE: w.WAKE, FINAL_CLOSE_CODES: [...w.FINAL_CLOSE_CODES],
              ids: ids.map((id) => w.ID_RE.test(id)),
            };
        }""",
        IDS,
    )
    assert js.pop("ids") == [is_participant_id(i) for i in IDS]
    assert js == {
        "SERVER": SERVER_ID,
        "DM": DM_STREAM,
        "ID_PATTERN": PARTICIPANT_ID_RE.pattern,
        "CB_FIRE": CB_FIRE,
        "WAKE": WAKE,
        "FINAL_CLOSE_CODES": sorted({CLOSE_POLICY, CLOSE_REPLACED, CLOSE_KICKED}),
    }
    assert set(js["FINAL_CLOSE_CODES"]) == NO_RECONNECT_CODES  # the Python SDK stops on them too
