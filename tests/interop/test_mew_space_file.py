"""A MEW ``space.yaml`` as MEW writes it runs on hubbub unchanged (issue 24, "A faithful
space.yaml"): ``hubbub serve --space-config`` reads MEW's format, ``hubbub space import``
writes hubbub's.

The files below have the shapes of MEW's e2e scenarios and templates (rjcorwin/mew-protocol
``e2e/scenario-*/template/space.yaml``, ``templates/coder-agent/space.yaml``) after
``mew init`` filled in ``{{SPACE_NAME}}``; the clients are raw frames as ``MEWClient`` sends
them, and ``curl`` as the scenarios' checks use it.
"""

from __future__ import annotations

import json
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import websockets
from click.testing import CliRunner

from hubbub.cli import main
from hubbub.server.config import ConfigError, hash_token, load_space, read_space
from tests.conftest import RunningGateway, start_gateway, stop_gateway
from tests.interop.test_mew_client import MewPeer

Frame = dict[str, Any]

SCENARIO_1 = """\
space:
  id: "scenario-1-basic"
  name: "Scenario 1 - Basic Message Flow"
  description: "Test basic message routing with an echo participant"

participants:
  echo-agent:
    type: local
    tokens: ["echo-token"]
    auto_start: true
    command: "node"
    args: [
      "./.mew/agents/echo-agent.cjs",
      "--gateway", "ws://localhost:${PORT}",
      "--space", "scenario-1-basic",
      "--token", "echo-token"
    ]
    capabilities:
      - kind: "chat"
      - kind: "system/*"
      - kind: "participant/status"
  test-client:
    tokens: ["test-token"]
    capabilities:
      - kind: "chat"
      - kind: "system/*"
      - kind: "participant/status"
    output_log: "./logs/test-client-output.log"
    auto_connect: true

defaults:
  capabilities:
    - kind: "chat"
"""

CODER_AGENT = """\
space:
  id: "my-space"
  name: "my-space"
  description: "Coding assistant that requires human approval for file modifications"
  default_participant: human
  ui_theme: "neon"

participants:
  human:
    default_to:
      chat: ["mew"]
    capabilities:
      - kind: "*"
  mew:
    type: local
    command: "mew"
    args: ["agent", "run", "--token", "${TOKEN}", "--id", "mew"]
    auto_start: true
    capabilities:
      - kind: "chat"
      - kind: "mcp/proposal"
      - kind: "mcp/request"
        payload:
          method: "tools/list"
      - kind: "mcp/request"
        payload:
          method: "tools/call"
          params:
            name: "read_file"
    env:
      MEW_AGENT_CONFIG: '{"maxIterations": 100}'
  mcp-fs-bridge:
    type: local
    command: "mew"
    args: ["bridge", "start", "--token", "${TOKEN}"]
    auto_start: true
    capabilities:
      - kind: "mcp/response"
      - kind: "mcp/notification"

defaults:
  capabilities:
    - kind: "chat"
"""


def _write(directory: Path, text: str) -> Path:
    """``text`` as ``<directory>/.mew/space.yaml``, where ``mew init`` writes it."""
    path = directory / ".mew" / "space.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _token_file(space_file: Path, pid: str, token: str) -> None:
    tokens = space_file.parent / "tokens"
    tokens.mkdir(exist_ok=True)
    (tokens / f"{pid}.token").write_text(token + "\n", encoding="utf-8")


# ------------------------------------------------------------------ the translation


def test_a_scenario_file_becomes_participants_tokens_capabilities_and_defaults(
    tmp_path: Path,
) -> None:
    cfg, notes = read_space(_write(tmp_path, SCENARIO_1))
    assert cfg.space == "scenario-1-basic"
    assert cfg.open  # MEW admits unknown participants with the defaults
    assert "participant" in cfg.grant_roles  # MEW has no roles: capabilities decide
    assert cfg.open_capabilities() == [{"kind": "chat"}]
    echo = cfg.participants["echo-agent"]
    assert echo.kind == "agent"
    assert echo.all_token_hashes() == [hash_token("echo-token")]
    assert [c["kind"] for c in echo.effective_capabilities()] == [
        "chat",
        "system/*",
        "participant/status",
    ]
    assert cfg.participants["test-client"].kind == "human"
    assert cfg.participants["test-client"].all_token_hashes() == [hash_token("test-token")]
    joined = "\n".join(notes)
    for key in ("space.name", "space.description", "auto_start", "command", "args", "type"):
        assert key in joined
    assert "participants.*.output_log (test-client)" in joined
    assert "participants.*.auto_connect (test-client)" in joined
    assert "admits participants this file does not list" in joined  # open, as MEW
    assert len(notes) == 9  # that, and one line per unused setting


def test_tokens_come_from_mew_token_files_the_environment_or_a_new_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, CODER_AGENT)
    _token_file(path, "human", "human-file-token")
    monkeypatch.setenv("MEW_TOKEN_MCP_FS_BRIDGE", "bridge-env-token")
    cfg, notes = read_space(path)
    assert cfg.participants["human"].all_token_hashes() == [hash_token("human-file-token")]
    assert cfg.participants["mcp-fs-bridge"].all_token_hashes() == [hash_token("bridge-env-token")]
    made = path.parent / "tokens" / "mew.token"  # none anywhere: made as MEW's CLI makes it
    token = made.read_text(encoding="utf-8")
    assert cfg.participants["mew"].all_token_hashes() == [hash_token(token)]
    assert stat.S_IMODE(made.stat().st_mode) == 0o600
    assert (path.parent / "tokens" / ".gitignore").read_text() == "*\n!.gitignore\n"
    assert any(f"made one in {made}" in n for n in notes)
    again, _ = read_space(path)  # the next start reads the same token
    assert again.participants["mew"].all_token_hashes() == [hash_token(token)]


def test_the_template_human_with_star_and_payload_patterns_carry_over(tmp_path: Path) -> None:
    cfg, notes = read_space(_write(tmp_path, CODER_AGENT))
    assert cfg.participants["human"].kind == "human"
    assert cfg.participants["human"].effective_capabilities() == [{"kind": "*"}]
    mew_caps = cfg.participants["mew"].effective_capabilities()
    assert {"kind": "mcp/request", "payload": {"method": "tools/list"}} in mew_caps
    joined = "\n".join(notes)
    assert "space.default_participant" in joined and "space.ui_theme" in joined
    assert "participants.*.default_to (human)" in joined
    assert "participants.*.env (mew)" in joined


def test_a_participant_without_capabilities_gets_the_defaults_as_in_mew(tmp_path: Path) -> None:
    text = 'space: {id: s}\nparticipants:\n  bot: {tokens: ["t"]}\n'
    cfg, _ = read_space(_write(tmp_path, text))
    assert cfg.participants["bot"].effective_capabilities() == [{"kind": "chat"}]
    text += "defaults:\n  capabilities: [{kind: 'mcp/*'}]\n"
    cfg, _ = read_space(_write(tmp_path, text))
    assert cfg.participants["bot"].effective_capabilities() == [{"kind": "mcp/*"}]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("space: {name: x}\n", "space.id is missing"),
        ('space: {id: "{{SPACE_NAME}}"}\n', "placeholder must be filled in"),
        ("space: {id: s}\nparticipants: [a, b]\n", "participants must be a mapping"),
        ("space: {id: s}\nparticipants: {a: [x]}\n", "participants.a must be a mapping"),
        (
            "space: {id: s}\nparticipants: {a: {tokens: t}}\n",
            "participants.a.tokens must be a list",
        ),
        (
            "space: {id: s}\nparticipants: {a: {tokens: [t], capabilities: chat}}\n",
            "participants.a.capabilities must be a list",
        ),
        (
            "space: {id: s}\nparticipants: {a: {tokens: [t]}, b: {tokens: [t]}}\n",
            "participants a and b share a token",
        ),
        (
            "space: {id: s}\ndefaults: {capabilities: chat}\n",
            "defaults.capabilities must be a list",
        ),
        (
            "space: {id: s}\nparticipants: {a: {tokens: [t], capabilities: [{payload: {}}]}}\n",
            "participants.a.capabilities",
        ),
        ("space: {id: s}\nparticipants: {'a b': {tokens: [t]}}\n", "'a b' is not a legal id"),
        ("space: {id: s}\nparticipants: {'../x': {}}\n", "'../x' is not a legal id"),
    ],
)
def test_a_bad_mew_file_is_refused_naming_the_key_and_the_fix(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        read_space(_write(tmp_path, text))


def test_an_empty_token_file_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = _write(tmp_path, "space: {id: s}\nparticipants: {a: {}}\n")
    _token_file(path, "a", "")
    with pytest.raises(ConfigError, match=r"token file .*a\.token is empty; write the token"):
        read_space(path)


# ------------------------------------------------------------------ the space on a gateway


@pytest.fixture
async def scenario(tmp_path: Path) -> AsyncIterator[RunningGateway]:
    """A gateway running scenario 1's MEW file as ``hubbub serve --space-config`` does."""
    gw = await start_gateway(tmp_path / "data", spaces=[load_space(_write(tmp_path, SCENARIO_1))])
    yield gw
    await stop_gateway(gw)


async def _join(gw: RunningGateway, pid: str, token: str, space: str) -> MewPeer:
    """``MEWClient.connect()`` as the scenario's agents do (``--space``, ``--token``)."""
    ws = await websockets.connect(gw.url, max_size=None, compression=None)
    peer = MewPeer(ws, pid)
    await ws.send(
        json.dumps({"type": "join", "space": space, "token": token, "participantId": pid})
    )
    peer.welcome = await peer.expect("system/welcome")
    return peer


async def test_the_scenario_agents_join_with_the_files_tokens_and_capabilities(
    scenario: RunningGateway,
) -> None:
    echo = await _join(scenario, "echo-agent", "echo-token", "scenario-1-basic")
    kinds = [c["kind"] for c in echo.welcome["payload"]["you"]["capabilities"]]
    assert kinds[:3] == ["chat", "system/*", "participant/status"]
    stranger = await _join(scenario, "visitor", "any-token", "scenario-1-basic")
    assert [c["kind"] for c in stranger.welcome["payload"]["you"]["capabilities"]] == [
        "chat",
        "mcp/response",
    ]  # MEW's defaults, and MEW's baseline
    await stranger.send({"kind": "chat", "payload": {"text": "hi"}})
    heard = await echo.expect("chat", lambda f: f["from"] == "visitor")
    assert heard["payload"]["text"] == "hi"
    for peer in (echo, stranger):
        await peer.ws.close()


async def test_an_id_with_a_token_in_the_file_needs_that_token(scenario: RunningGateway) -> None:
    ws = await websockets.connect(scenario.url, max_size=None, compression=None)
    frame = {
        "type": "join",
        "space": "scenario-1-basic",
        "token": "wrong",
        "participantId": "test-client",
    }
    await ws.send(json.dumps(frame))
    error = json.loads(await ws.recv())
    assert error["kind"] == "system/error"
    assert "test-client" in error["payload"]["message"]
    await ws.close()


async def test_the_scenario_check_posts_over_http_with_the_literal_token(
    scenario: RunningGateway,
) -> None:
    """``curl -X POST /participants/test-client/messages -H 'Authorization: Bearer
    test-token'``, as scenario 1's check.sh, reaches the echo agent."""
    echo = await _join(scenario, "echo-agent", "echo-token", "scenario-1-basic")
    url = f"{scenario.http}/participants/test-client/messages"
    body = {"id": "msg-123", "kind": "chat", "payload": {"text": "Test with ID"}}
    async with aiohttp.ClientSession() as http:
        async with http.post(url, json=body, headers={"Authorization": "Bearer test-token"}) as r:
            assert r.status == 202, await r.text()
        async with http.post(url, json=body, headers={"Authorization": "Bearer echo-token"}) as r:
            assert r.status in (401, 403)  # another participant's token
    heard = await echo.expect("chat", lambda f: f["from"] == "test-client")
    assert heard["id"] == "msg-123"
    await echo.ws.close()


async def test_every_literal_token_of_a_participant_authenticates(tmp_path: Path) -> None:
    text = (
        "space: {id: s}\n"
        "participants:\n  bot: {tokens: [first, second], capabilities: [{kind: chat}]}\n"
    )
    path = _write(tmp_path, text)
    _token_file(path, "bot", "from-file")
    gw = await start_gateway(tmp_path / "data", spaces=[load_space(path)])
    try:
        for token in ("from-file", "first", "second"):
            peer = await _join(gw, "bot", token, "s")
            assert peer.welcome["payload"]["you"]["id"] == "bot"
            await peer.ws.close()
    finally:
        await stop_gateway(gw)


GRANT_SPACE = """\
space: {id: grants}
participants:
  test-agent:
    tokens: ["agent-token"]
    capabilities: [{kind: mcp/proposal}, {kind: chat}, {kind: capability/grant-ack}]
  file-server:
    tokens: ["file-server-token"]
    capabilities: [{kind: mcp/response}]
  test-client:
    tokens: ["test-token"]
    capabilities:
      - kind: "mcp/request"
        payload: {method: "tools/*"}
      - kind: "capability/grant"
"""


async def test_a_participant_whose_capabilities_allow_grants_may_grant(tmp_path: Path) -> None:
    """MEW has no roles: scenario 8's test-client, with ``capability/grant``, grants the agent
    a ``tools/call``, which the agent may then send (the grant's ``to`` is ignored)."""
    gw = await start_gateway(tmp_path / "data", spaces=[load_space(_write(tmp_path, GRANT_SPACE))])
    try:
        agent = await _join(gw, "test-agent", "agent-token", "grants")
        server = await _join(gw, "file-server", "file-server-token", "grants")
        client = await _join(gw, "test-client", "test-token", "grants")
        call = {"method": "tools/call", "params": {"name": "write_file"}}
        cap = {"kind": "mcp/request", "to": ["file-server"], "payload": call}
        grant = await client.send(
            {
                "kind": "capability/grant",
                "to": ["test-agent"],
                "payload": {"recipient": "test-agent", "capabilities": [cap]},
            }
        )
        got = await agent.expect("capability/grant")
        assert got["id"] == grant["id"]
        request = await agent.send({"kind": "mcp/request", "to": ["file-server"], "payload": call})
        heard = await server.expect("mcp/request")
        assert heard["id"] == request["id"]
        for peer in (agent, server, client):
            await peer.ws.close()
    finally:
        await stop_gateway(gw)


# ------------------------------------------------------------------ the commands


def test_space_import_writes_hubbubs_format_and_warns_for_each_unused_setting(
    tmp_path: Path,
) -> None:
    src = _write(tmp_path, SCENARIO_1)
    out = tmp_path / "hubbub-space.yaml"
    result = CliRunner().invoke(main, ["space", "import", str(src), "-o", str(out)])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 9
    assert "echo-token" not in out.read_text()  # hashes only
    imported = load_space(out)
    direct, _ = read_space(src)
    assert imported == direct
    assert imported.participants["echo-agent"].all_token_hashes() == [hash_token("echo-token")]


def test_space_import_to_stdout_and_never_over_the_mew_file(tmp_path: Path) -> None:
    src = _write(tmp_path, SCENARIO_1)
    result = CliRunner().invoke(main, ["space", "import", str(src)])
    assert result.exit_code == 0
    assert "space: scenario-1-basic" in result.stdout
    result = CliRunner().invoke(main, ["space", "import", str(src), "-o", str(src)])
    assert result.exit_code != 0
    assert "is the MEW file itself" in result.output
    assert src.read_text() == SCENARIO_1


def test_space_import_of_a_bad_file_names_the_problem(tmp_path: Path) -> None:
    src = _write(tmp_path, "space: {id: s}\nparticipants: {a: {tokens: t}}\n")
    result = CliRunner().invoke(main, ["space", "import", str(src)])
    assert result.exit_code != 0
    assert "participants.a.tokens must be a list" in result.output


def test_token_create_never_rewrites_a_mew_file(tmp_path: Path) -> None:
    src = _write(tmp_path, SCENARIO_1)
    result = CliRunner().invoke(main, ["token", "create", "--space", str(src), "--id", "alice"])
    assert result.exit_code != 0
    assert "is a MEW space file" in result.output and ".mew/tokens/<id>.token" in result.output
    assert src.read_text() == SCENARIO_1


async def test_health_answers_mews_word_for_a_mew_space_file(scenario: RunningGateway) -> None:
    """``mew space up`` waits for ``/health``'s ``status: "ok"``; agentchat's word
    (``healthy``) is for every other space."""
    async with aiohttp.ClientSession() as http, http.get(f"{scenario.http}/health") as r:
        assert (await r.json())["status"] == "ok"
    other = await start_gateway(scenario.data_dir.parent / "other")
    try:
        async with aiohttp.ClientSession() as http, http.get(f"{other.http}/health") as r:
            assert (await r.json())["status"] == "healthy"
    finally:
        await stop_gateway(other)
