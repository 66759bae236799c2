"""What each install gets: the lean core (`pip install hubbub`) runs a gateway and the SDK's
Client; whatever needs an extra says which one; `make demo` and `make test` install what they
need, once."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import tomllib
from pathlib import Path

import pytest

from tests.ports import reserve_port

pytestmark = pytest.mark.slow  # virtual environments and pip in subprocesses

ROOT = Path(__file__).resolve().parents[2]


def _hint(extra: str) -> str:
    """The install command the hint must name for this venv's hubbub: its checkout's own
    extra for an editable install (as `make` makes it), else the index's name."""
    from importlib import metadata

    origin = json.loads(metadata.distribution("hubbub").read_text("direct_url.json") or "{}")
    if origin.get("dir_info", {}).get("editable"):
        checkout = origin["url"].removeprefix("file://")
        return f"pip install -e '{checkout}[{extra}]'"
    return f"pip install 'hubbub[{extra}]'"


def _import_name(requirement: str) -> str:
    """``prompt-toolkit>=3`` → ``prompt_toolkit``."""
    name = requirement.split(";")[0].split("[")[0]
    for stop in "<>=!~ ":
        name = name.split(stop)[0]
    return name.strip().lower().replace("-", "_")


def _extra_modules() -> set[str]:
    """The import names of the packages the runtime extras add on top of the core."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {
        _import_name(r)
        for e in ("agents", "chat", "cluster")
        for r in extras["optional-dependencies"][e]
    }
    return names - {"hubbub"}


def _not_installed_prelude() -> str:
    """Python that makes the extras' packages unimportable, as if never installed."""
    return textwrap.dedent(
        f"""
        import importlib.abc, sys

        class NotInstalled(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] in {sorted(_extra_modules())!r}:
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None

        sys.meta_path.insert(0, NotInstalled())
        """
    )


def _python(code: str, *args: str) -> list[str]:
    """A command line running ``code`` with the extras' packages missing."""
    return [sys.executable, "-c", _not_installed_prelude() + textwrap.dedent(code), *args]


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_python(code, *args), capture_output=True, text=True, timeout=60)


def test_the_runtime_extras_hold_the_model_providers_mcp_and_the_terminal_ui() -> None:
    assert _extra_modules() >= {"openai", "anthropic", "mcp", "prompt_toolkit", "redis"}
    core = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not {_import_name(r) for r in core} & _extra_modules()


def test_the_core_alone_serves_a_gateway_and_the_client_talks_to_it(tmp_path: Path) -> None:
    port = reserve_port()
    serve = "from hubbub.cli import main\nmain()\n"
    server = subprocess.Popen(
        _python(serve, "serve", "--port", str(port), "--data-dir", str(tmp_path)),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert server.poll() is None, server.communicate()[1]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "hubbub serve did not start"
                time.sleep(0.1)
        client = _run(
            """
            import asyncio, json, sys
            import hubbub.server.app
            import hubbub.sdk.client
            from hubbub.sdk import Client

            async def main(url):
                async with Client(gateway=url, participant_id="cron") as client:
                    echo = client.expect("chat")
                    await client.send({"kind": "chat", "payload": {"text": "nightly build green"}})
                    env = await asyncio.wait_for(echo, 10)
                    print(json.dumps([env.from_, env.channel, env.payload["text"]]))

            asyncio.run(main(sys.argv[1]))
            """,
            f"ws://127.0.0.1:{port}/ws",
        )
        assert client.returncode == 0, client.stderr
        assert json.loads(client.stdout) == ["cron", "#general", "nightly build green"]
        server.send_signal(signal.SIGTERM)
        _, log = server.communicate(timeout=30)
        assert server.returncode == 0, log
    finally:
        server.kill()
    assert f"serving ws://127.0.0.1:{port}/ws (open mode" in log


@pytest.mark.parametrize(
    ("command", "extra"),
    [
        (["agent", "run", "--id", "bot"], "agents"),
        (["bridge", "--id", "files", "--", "true"], "agents"),
        (["demo", "--once", "--port", "0"], "agents"),
        (["chat", "--id", "alice"], "chat"),
        (["mcp", "--id", "claude"], "mcp"),
    ],
)
def test_a_command_without_its_extra_says_which_extra_to_install(
    command: list[str], extra: str
) -> None:
    result = _run("from hubbub.cli import main\nmain()\n", *command)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert _hint(extra) in result.stderr, result.stderr


def test_the_sdk_classes_without_the_extra_say_which_extra_to_install() -> None:
    result = _run(
        """
        from hubbub.sdk import Client  # the core: fine
        for name in ("Participant", "Agent", "Tool"):
            try:
                exec(f"from hubbub.sdk import {name}")
            except ImportError as exc:
                print(name, exc)
        """
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["Participant", "Agent", "Tool"], result.stdout
    assert all(_hint("agents") in line for line in lines), result.stdout


# ---------------------------------------------------------------- make demo / make test


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The Makefile and pyproject.toml in an empty directory, with a venv that exists."""
    (tmp_path / "requirements").mkdir()
    for name in (
        "Makefile",
        "pyproject.toml",
        "requirements/constraints.txt",
        "requirements/tools.in",
    ):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").touch()
    return tmp_path


def _make(checkout: Path, target: str) -> list[str]:
    """The pip installs ``make TARGET`` would run (``make -n``), after which the stamps it
    would leave are left as if it had run."""
    # not the variables of a make this test runs under (`make test-latest` passes VENV=)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    out = subprocess.run(
        ["make", "-n", target], cwd=checkout, capture_output=True, text=True, check=True, env=env
    ).stdout
    for line in out.splitlines():
        if line.startswith("touch "):
            for stamp in line.split()[1:]:
                (checkout / stamp).touch()
    return [line for line in out.splitlines() if "pip install" in line and "--upgrade" not in line]


def test_make_demo_installs_the_agents_extra_not_the_test_tools(checkout: Path) -> None:
    installs = _make(checkout, "demo")
    assert len(installs) == 1 and "'.[agents]'" in installs[0], installs
    assert "-c requirements/constraints.txt" in installs[0], installs  # the locked versions
    assert _make(checkout, "demo") == []  # a second run installs nothing


def test_make_test_after_make_demo_installs_the_test_extras(checkout: Path) -> None:
    _make(checkout, "demo")
    installs = _make(checkout, "test")
    assert len(installs) == 1 and "'.[test]'" in installs[0], installs
    assert "-c requirements/constraints.txt" in installs[0], installs
    assert _make(checkout, "test") == []


def test_make_demo_after_make_test_installs_nothing(checkout: Path) -> None:
    _make(checkout, "test")
    assert _make(checkout, "demo") == []


def test_a_changed_pyproject_is_installed_again(checkout: Path) -> None:
    _make(checkout, "test")
    future = time.time() + 5
    os.utime(checkout / "pyproject.toml", (future, future))
    installs = _make(checkout, "demo")
    assert len(installs) == 1, installs


def test_a_changed_lock_is_installed_again(checkout: Path) -> None:
    _make(checkout, "test")
    future = time.time() + 5
    os.utime(checkout / "requirements/constraints.txt", (future, future))
    installs = _make(checkout, "test")
    assert len(installs) == 1 and "-c requirements/constraints.txt" in installs[0], installs


@pytest.mark.skipif(
    os.environ.get("HUBBUB_UNPINNED") == "1",
    reason="make test-latest installs the newest versions the ranges allow, on purpose",
)
def test_the_venv_holds_exactly_the_locked_versions() -> None:
    """What `make test` installed is what requirements/constraints.txt pins, package by package."""
    from importlib import metadata

    from packaging.utils import canonicalize_name

    pins: dict[str, str] = {}
    for line in (ROOT / "requirements/constraints.txt").read_text().splitlines():
        requirement = line.split(";")[0].strip()
        if "==" in requirement and not requirement.startswith("#"):
            name, version = requirement.split("==")
            pins[canonicalize_name(name)] = version.strip()
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()}
    installed.pop("hubbub", None)
    # pip's own build tools of an older venv, never imported by hubbub
    for tool in ("setuptools", "wheel"):
        installed.pop(tool, None)
    assert {n: v for n, v in installed.items() if pins.get(n) != v} == {}
