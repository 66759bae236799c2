"""Bad frames are sorted the same way on the oldest and the newest msgspec that pyproject allows.

msgspec 0.23 raised ``DecodeError("Invalid UTF-8 encoded string")`` where 0.19-0.22 raised
``UnicodeDecodeError``, and the gateway, which sorted errors by exception class and message text,
answered ``invalid_envelope`` for bad UTF-8. Each version is installed from the registry into a
folder of its own and the decoders run in a subprocess that imports it first.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]

PROBE = r"""
import json, sys
import msgspec
from hubbub.protocol.agentchat import AgentchatDialect
from hubbub.protocol.envelope import decode_envelope
from hubbub.protocol.errors import ProtocolError

frames = {
    "mew-bad-utf8": (decode_envelope, b'{"kind":"chat","payload":{"text":"\xff\xfe"}}'),
    "mew-bad-json": (decode_envelope, b'{"kind":"chat",'),
    "mew-wrong-shape": (decode_envelope, b'["chat"]'),
    "agentchat-bad-utf8": (AgentchatDialect().decode, b'{"type":"MSG","to":"#g","content":"\xff"}'),
    "agentchat-bad-json": (AgentchatDialect().decode, b'{"type":"MSG"'),
    "agentchat-unknown-type": (AgentchatDialect().decode, b'{"type":"SHOUT"}'),
}
out = {"version": msgspec.__version__}
for name, (decode, data) in frames.items():
    try:
        decode(data)
        out[name] = ["decoded", ""]
    except ProtocolError as exc:
        out[name] = [exc.code.value, exc.message]
print(json.dumps(out))
"""


def _msgspec_range() -> Requirement:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (req,) = [Requirement(d) for d in project["dependencies"] if d.startswith("msgspec")]
    return req


def _oldest(req: Requirement) -> str:
    (lower,) = [s.version for s in req.specifier if s.operator == ">="]
    return f"msgspec=={lower}.*"


def _install(spec: str, into: Path) -> None:
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--only-binary=:all:"]
    done = subprocess.run([*cmd, "--target", str(into), spec], capture_output=True, text=True)
    assert done.returncode == 0, f"pip could not install {spec}:\n{done.stderr}"


@pytest.mark.slow
@pytest.mark.parametrize("which", ["oldest", "newest"])
def test_bad_frames_sort_alike_on_every_allowed_msgspec(which: str, tmp_path: Path) -> None:
    req = _msgspec_range()
    spec = _oldest(req) if which == "oldest" else str(req)
    _install(spec, tmp_path)
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT / 'src'}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen.pop("version") in req.specifier
    codes = {name: code for name, (code, _) in seen.items()}
    assert codes == {
        "mew-bad-utf8": "invalid_json",
        "mew-bad-json": "invalid_json",
        "mew-wrong-shape": "invalid_envelope",
        "agentchat-bad-utf8": "invalid_json",
        "agentchat-bad-json": "invalid_json",
        "agentchat-unknown-type": "unknown_kind",
    }
    for name in ("mew-bad-utf8", "agentchat-bad-utf8"):
        assert "not valid UTF-8" in seen[name][1], seen[name]
    for name in ("mew-bad-json", "agentchat-bad-json"):
        assert "not valid JSON" in seen[name][1], seen[name]
