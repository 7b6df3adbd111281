"""Layering, enforced on the source: the engine and everything it uses stay pure (no aiohttp, no webhook, no
CLI, no reporters, no file readers), so the linter and the webhook share one engine and the hook stays light."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

PURE = ["model", "versions", "quantities", "jsonutil", "knowledge", "cluster", "workloads", "crl", "engine",
        "fixes", "suppress", "admission", "rules", "checks/__init__", "checks/base", "checks/driver",
        "checks/hardware", "checks/resources", "checks/vgpu", "checks/crl", "checks/meta"]
FORBIDDEN = ("aiohttp", "webhook", "kubernetes", "compatcheck.cli", "compatcheck.report", "compatcheck.lint",
             "compatcheck.loader", "compatcheck.fixer", "compatcheck.render", "subprocess", "socket")


def imported_modules(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_do_not_import_io_or_transport(module: str) -> None:
    imports = imported_modules(ROOT / "compatcheck" / f"{module}.py")
    bad = sorted(m for m in imports if any(m == f or m.startswith(f + ".") for f in FORBIDDEN))
    assert not bad, f"compatcheck/{module}.py imports {bad}"


def test_pure_modules_do_not_print_or_open_files() -> None:
    for module in PURE:
        tree = ast.parse((ROOT / "compatcheck" / f"{module}.py").read_text())
        calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert not calls & {"print", "open", "input"}, module


def test_every_module_says_what_it_is() -> None:
    missing = [str(p.relative_to(ROOT)) for p in [*ROOT.glob("compatcheck/**/*.py"), *ROOT.glob("webhook/*.py")]
               if p.name != "__main__.py" and not ast.get_docstring(ast.parse(p.read_text()))
               and p.read_text().strip()]
    assert not missing, f"modules without a docstring: {missing}"
