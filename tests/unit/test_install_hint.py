"""The missing-extra hint fits how hubbub was installed (PEP 610's direct_url.json)."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

import pytest

from hubbub import extras
from hubbub.extras import explain, install_command

REAL = importlib.metadata.distribution("hubbub")


class _Dist:
    """A hubbub distribution whose direct_url.json holds ``origin`` (None: no such file)."""

    def __init__(self, origin: Any) -> None:
        self.origin = origin
        self.requires = REAL.requires  # which extra installs which package: the real one

    def read_text(self, name: str) -> str | None:
        assert name == "direct_url.json"
        if self.origin is None:
            return None
        return self.origin if isinstance(self.origin, str) else json.dumps(self.origin)


def _installed(monkeypatch: pytest.MonkeyPatch, origin: Any) -> None:
    monkeypatch.setattr(extras.importlib.metadata, "distribution", lambda name: _Dist(origin))


def test_an_editable_checkout_is_told_to_install_its_own_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _installed(monkeypatch, {"url": "file:///home/me/src/hubbub", "dir_info": {"editable": True}})
    assert install_command("agents") == "pip install -e '/home/me/src/hubbub[agents]'"


def test_a_checkout_path_with_spaces_is_quoted_for_the_shell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _installed(monkeypatch, {"url": "file:///home/me/my%20code", "dir_info": {"editable": True}})
    assert install_command("chat") == "pip install -e '/home/me/my code[chat]'"


def test_a_local_directory_install_names_the_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    _installed(monkeypatch, {"url": "file:///opt/hubbub", "dir_info": {}})
    assert install_command("mcp") == "pip install '/opt/hubbub[mcp]'"


@pytest.mark.parametrize(
    "origin",
    [
        None,  # installed from an index: no direct_url.json
        {"url": "https://files.example/hubbub-0.1.0.whl", "archive_info": {}},
        {"url": "https://github.com/x/hubbub", "vcs_info": {"vcs": "git"}},
        "not json",
    ],
)
def test_any_other_install_is_told_the_index_name(
    monkeypatch: pytest.MonkeyPatch, origin: Any
) -> None:
    _installed(monkeypatch, origin)
    assert install_command("agents") == "pip install 'hubbub[agents]'"


def test_no_hubbub_distribution_is_told_the_index_name(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> None:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(extras.importlib.metadata, "distribution", missing)
    assert install_command("agents") == "pip install 'hubbub[agents]'"


def test_the_missing_module_error_carries_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    checkout = Path("/home/me/src/hubbub")
    _installed(monkeypatch, {"url": checkout.as_uri(), "dir_info": {"editable": True}})
    error = explain(ModuleNotFoundError("No module named 'mcp'", name="mcp"), "agents")
    assert error is not None
    assert str(error).endswith("pip install -e '/home/me/src/hubbub[agents]'")
