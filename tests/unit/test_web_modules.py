"""The web pages' ES modules: every import resolves, and no two modules import each other.

The Python side has import-linter (.importlinter); this is the same rule for
``server/web/``: a cycle between modules (the dashboard's console and proposals once were
one) makes their load order matter and their parts impossible to read alone.
"""

from __future__ import annotations

import re
from pathlib import Path

import hubbub.server

WEB = Path(hubbub.server.__file__).parent / "web"
IMPORT = re.compile(r"""^\s*import\s+(?:[^'"]*?\s+from\s+)?["']([^"']+)["']""", re.M)


def graph() -> dict[Path, set[Path]]:
    """Each module and the modules it imports (relative imports, resolved)."""
    out: dict[Path, set[Path]] = {}
    for module in sorted(WEB.rglob("*.js")):
        targets = {(module.parent / spec).resolve() for spec in IMPORT.findall(module.read_text())}
        out[module.resolve()] = targets
    return out


def test_every_import_names_a_module_that_exists() -> None:
    modules = graph()
    assert len(modules) > 20  # the dashboard's and the web chat's
    missing = [(m.name, t) for m, ts in modules.items() for t in ts if t not in modules]
    assert missing == []


def test_the_web_modules_import_no_cycle() -> None:
    modules = graph()
    state: dict[Path, str] = {}
    cycles: list[list[str]] = []

    def visit(module: Path, path: list[Path]) -> None:
        state[module] = "open"
        for target in sorted(modules.get(module, ())):
            if state.get(target) == "open":
                cycle = [*path[path.index(target) :], target]
                cycles.append([str(p.relative_to(WEB.resolve())) for p in cycle])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = "done"

    for module in modules:
        if module not in state:
            visit(module, [module])
    assert cycles == []
