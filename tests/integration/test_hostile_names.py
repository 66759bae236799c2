"""Nobody may pass for the gateway (issue 21 item 9): ids that read as ``server``, ``system``
or ``gateway`` are refused in every mode — open joins on both dialects, HTTP senders, and
space.yaml participants — over real sockets; the rule itself is a property test."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hubbub.protocol.ids import RESERVED_NAMES, is_participant_id, reserved_id_error
from hubbub.server.config import ConfigError, load_space
from tests.conftest import RunningGateway

LOOK_ALIKES = {"o": "0", "l": "1", "e": "3", "a": "4", "s": "5", "t": "7", "b": "8", "g": "9"}


@st.composite
def disguised(draw: st.DrawFn) -> str:
    """A reserved name with its case changed, look-alike digits and separators put in."""
    name = draw(st.sampled_from(RESERVED_NAMES))
    out = []
    for ch in name:
        c = draw(st.sampled_from([ch, ch.upper(), LOOK_ALIKES.get(ch, ch)]))
        out.append(c + draw(st.sampled_from(["", "", "_", ".", "-"])))
    return "".join(out)


@given(disguised())
def test_every_disguise_of_a_reserved_name_is_reserved(pid: str) -> None:
    assert is_participant_id(pid)
    reason = reserved_id_error(pid)
    assert reason is not None and "reserved" in reason and "choose another id" in reason


@pytest.mark.parametrize(
    "pid", ["servers", "serve", "alice", "agent-a", "sysadmin", "gateway-bot", "my_server"]
)
def test_ordinary_ids_are_not_reserved(pid: str) -> None:
    assert reserved_id_error(pid) is None


@pytest.mark.parametrize("pid", ["server", "Server", "serv3r", "SYSTEM", "gate_way", "5ystem"])
async def test_an_open_mew_join_as_the_gateway_is_refused(
    gateway: RunningGateway, pid: str
) -> None:
    c = await gateway.connect()
    await c.send({"type": "join", "participantId": pid, "space": "default"})
    err = (await c.expect("system/error"))["payload"]
    assert err["error"] == "invalid_id" and "reserved" in err["message"]


async def test_an_agentchat_identify_as_server_is_refused(gateway: RunningGateway) -> None:
    c = await gateway.connect()
    await c.send({"type": "IDENTIFY", "name": "server"})
    err = await c.expect_type("ERROR")
    assert "reserved" in err["message"] and "gateway's own name" in err["message"]


async def test_an_http_sender_named_like_the_gateway_is_refused(gateway: RunningGateway) -> None:
    body = {"kind": "chat", "channel": "#general", "payload": {"text": "@@wake@@"}}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{gateway.http}/participants/Gateway/messages", json=body) as resp,
    ):
        answer = await resp.json()
    assert resp.status == 400
    assert answer["error"] == "invalid_id" and "reserved" in answer["message"]


def test_a_space_yaml_participant_named_system_stops_the_start(tmp_path: Path) -> None:
    path = tmp_path / "space.yaml"
    path.write_text("space: team\nparticipants:\n  sys7em:\n    kind: agent\n")
    with pytest.raises(ConfigError, match=r"participants: participant id 'sys7em' is reserved"):
        load_space(path)
