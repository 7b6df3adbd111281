"""The package's shape, held by tools: the import-linter contracts (pyproject.toml) pass and do bite, a lint-only
install never needs the webhook extra, the core neither prints nor opens files, and every module says what it is."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

LINT_IMPORTS = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
WEBHOOK_EXTRA = ("aiohttp", "kubernetes", "cryptography", "prometheus_client", "jsonpatch")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LINT_IMPORTS, "--no-cache", "--config", str(root / "pyproject.toml")], cwd=root,
                          capture_output=True, text=True, timeout=300, env={"PYTHONPATH": str(root), "PATH": ""})


def test_the_import_contracts_hold() -> None:
    out = lint_imports(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Contracts: 7 kept, 0 broken." in out.stdout


@pytest.mark.parametrize(("module", "line", "broken"), [
    # a core module that reads YAML, directly or through io (which imports ruamel: the contract is transitive)
    ("core/engine.py", "import ruamel.yaml", "compatcheck.core is not allowed to import ruamel"),
    ("core/checks/base.py", "from compatcheck.io import manifests", "compatcheck.core is not allowed to import ruamel"),
    # the CLI importing the webhook statically, so a lint-only install would need aiohttp
    ("cli/lint.py", "from compatcheck.webhook import run", "compatcheck.cli is not allowed to import aiohttp"),
    # the webhook reaching up into the command line
    ("webhook/app.py", "from compatcheck.cli import common",
     "compatcheck.webhook is not allowed to import compatcheck.cli"),
    # a check evaluating CEL itself instead of through compatcheck.core.cel
    ("core/dra/selectors.py", "import celpy", "compatcheck.core.dra.selectors -> celpy"),
    # the DRA model reaching up into the allocator (its modules are layers: compatcheck/core/dra/__init__.py)
    ("core/dra/model.py", "from compatcheck.core.dra import allocator",
     "compatcheck.core.dra.model -> compatcheck.core.dra.allocator"),
    # the core speaking HTTPS, or the CLI going round the lookup's budget, cache and host policy
    ("core/imageconfig.py", "import http.client", "compatcheck.core is not allowed to import http"),
    ("cli/images.py", "from compatcheck.io import oci", "compatcheck.cli is not allowed to import compatcheck.io.oci"),
])
def test_the_contracts_catch_a_bad_import(tmp_path: Path, module: str, line: str, broken: str) -> None:
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "compatcheck", root / "compatcheck", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    target = root / "compatcheck" / module
    target.write_text(target.read_text().replace("from __future__ import annotations",
                                                 f"from __future__ import annotations\n{line}  # noqa", 1))
    out = lint_imports(root)
    assert out.returncode != 0, out.stdout
    assert broken in out.stdout and "BROKEN" in out.stdout, out.stdout


def test_a_lint_only_install_never_imports_the_webhook_extra(tmp_path: Path) -> None:
    """The shipped example linted with the webhook extra's modules unimportable: the same output, and none of
    them imported (``pip install compatcheck`` without extras)."""
    blocker = ("import sys, importlib.abc\n"
               "class Block(importlib.abc.MetaPathFinder):\n"
               "    def find_spec(self, name, path=None, target=None):\n"
               f"        if name.split('.')[0] in {WEBHOOK_EXTRA!r}: raise ImportError(name, name=name)\n"
               "sys.meta_path.insert(0, Block())\n"
               "from compatcheck.cli import main\n"
               "code = main(sys.argv[1:])\n"
               f"assert not [m for m in sys.modules if m.split('.')[0] in {WEBHOOK_EXTRA!r}], 'imported'\n"
               "sys.exit(code)\n")
    args = ["lint", "examples/manifests", "--nodes", "examples/cluster-profile.yaml", "--format", "json"]
    blocked = subprocess.run([sys.executable, "-c", blocker, *args], cwd=ROOT, capture_output=True, text=True)
    normal = subprocess.run([sys.executable, "-m", "compatcheck", *args], cwd=ROOT, capture_output=True, text=True)
    assert blocked.returncode == normal.returncode == 1, blocked.stderr
    assert blocked.stdout == normal.stdout and '"findings"' in blocked.stdout
    # and a webhook command says what to install instead of a traceback
    serve = subprocess.run([sys.executable, "-c", blocker, "webhook", "serve", "--cert-file", "x", "--key-file", "y"],
                           cwd=ROOT, capture_output=True, text=True)
    assert serve.returncode == 2 and "Traceback" not in serve.stderr
    assert "needs the webhook extra" in serve.stderr and "pip install 'compatcheck[webhook]'" in serve.stderr


def test_the_core_neither_prints_nor_opens_files() -> None:
    for path in (ROOT / "compatcheck" / "core").rglob("*.py"):
        tree = ast.parse(path.read_text())
        calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert not calls & {"print", "open", "input"}, path


def test_every_module_says_what_it_is() -> None:
    missing = [str(p.relative_to(ROOT)) for p in ROOT.glob("compatcheck/**/*.py")
               if p.name != "__main__.py" and p.read_text().strip() and not ast.get_docstring(ast.parse(p.read_text()))]
    assert not missing, f"modules without a docstring: {missing}"


def test_a_module_over_a_thousand_lines_says_why_at_its_top() -> None:
    """One responsibility per module: a module past ~1,000 lines is split, or its docstring says why it is not."""
    long = [str(p.relative_to(ROOT)) for p in ROOT.glob("compatcheck/**/*.py")
            if len(p.read_text().splitlines()) > 1000
            and "Why one module" not in (ast.get_docstring(ast.parse(p.read_text())) or "")]
    assert not long, f"split these, or say why at their top ('Why one module ...'): {long}"


def test_each_dra_module_says_its_role_and_what_it_must_not_do() -> None:
    """compatcheck.core.dra is one responsibility per module: each says what it is for and what it must not do, and
    the package's docstring names every module (what `dra-modules` in pyproject.toml layers)."""
    package = ROOT / "compatcheck" / "core" / "dra"
    overview = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    modules = sorted(p for p in package.glob("*.py") if p.name != "__init__.py")
    assert len(modules) >= 5
    for path in modules:
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        assert "must not" in doc, f"{path.name} does not say what it must not do"
        assert f"``{path.stem}``" in overview, f"compatcheck/core/dra/__init__.py does not name {path.stem}"
    layers = (ROOT / "pyproject.toml").read_text().split('containers = ["compatcheck.core.dra"]')[1].split("\n")[1]
    assert sorted(m.stem for m in modules) == sorted(layers.split("[")[1].split("]")[0].replace('"', "").split(", "))
