"""The manual (docs/, mkdocs.yml) and the front page (README.md) stay true: the CLI reference is what the parser
says, every module docs/architecture.md names exists, the site builds in MkDocs' strict mode (broken links and
anchors fail), every page is in the nav, and the README stays a short front page whose links into the manual
resolve."""

from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

# A module or a name in one, as docs/architecture.md writes them: core.dra.allocator, io.manifests,
# core.checks.base.PodAnalysis, compatcheck.cli (not a dotted name's tail such as resource.k8s.io).
DOTTED = re.compile(r"(?<![\w./-])(?:compatcheck\.)?(?:core|io|report|cli|webhook)(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"\bcompatcheck/[\w/]+\.py\b")


def _resolve(name: str) -> bool:
    parts = name.removeprefix("compatcheck.").split(".")
    for n in range(len(parts), 0, -1):
        module = "compatcheck." + ".".join(parts[:n])
        try:
            if importlib.util.find_spec(module) is None:
                continue
        except ModuleNotFoundError:  # a name inside a module (core.admission.parse_request), not a submodule
            continue
        obj: object = importlib.import_module(module)
        for attr in parts[n:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_module_the_architecture_page_names_exists() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    names = sorted(set(DOTTED.findall(text)))
    paths = sorted(set(PATH.findall(text)))
    assert len(names) > 30 and "core.dra.allocator" in names  # the page is read, not skipped
    assert not [n for n in names if not _resolve(n)], "docs/architecture.md names what does not exist"
    assert not [p for p in paths if not (ROOT / p).is_file()], "docs/architecture.md names missing files"
    # and every module of the DRA package is on the page
    dra = {p.stem for p in (ROOT / "compatcheck" / "core" / "dra").glob("*.py")} - {"__init__"}
    assert not [m for m in sorted(dra) if f"core.dra.{m}" not in names]


def test_the_architecture_check_catches_a_module_that_is_gone() -> None:
    assert _resolve("core.dra.allocator.Allocator") and _resolve("compatcheck.io.manifests")
    assert not _resolve("core.dra.planner") and not _resolve("core.dra.allocator.Planner")
    assert DOTTED.findall("resource.k8s.io/v1 and core.cel, webhook.app:") == ["core.cel", "webhook.app"]


def test_the_cli_reference_has_not_drifted() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "cli_reference.py"), "--check"], cwd=ROOT)
    assert proc.returncode == 0, "docs/cli.md is stale: python scripts/cli_reference.py"


def test_the_cli_reference_names_every_command() -> None:
    text = (ROOT / "docs" / "cli.md").read_text()
    for command in ("lint", "fix", "rules list", "rules explain", "rules validate", "versions", "webhook serve",
                    "cert generate", "review", "images explain"):
        assert f"`compatcheck {command}`" in text, command
    assert "| `--fail-on` `{error,warning,info}` |" in text


def _nav_pages() -> list[str]:
    text = (ROOT / "mkdocs.yml").read_text()
    return re.findall(r":\s*([\w-]+\.md)\s*$", text, re.MULTILINE)


def test_every_page_is_in_the_nav() -> None:
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    nav = _nav_pages()
    assert sorted(set(nav)) == sorted(set(nav) & set(pages)), "mkdocs.yml names a page that does not exist"
    assert not sorted(set(pages) - set(nav)), "a page of docs/ is missing from mkdocs.yml's nav"


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("mkdocs and mkdocs-material are not installed: pip install -e '.[docs]'")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"PATH": "", "NO_MKDOCS_2_WARNING": "1", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "site" / "cli" / "index.html").is_file()
    assert (tmp_path / "site" / "search" / "search_index.json").is_file()


def test_the_readme_is_a_front_page_whose_links_resolve() -> None:
    readme = (ROOT / "README.md").read_text()
    lines = readme.splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move detail into docs/"
    assert lines[0] == "# compatcheck" and lines[2] == "```sh"
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if not link.startswith(("http://", "https://"))]
    assert len(local) >= 8 and not [link for link in local if not (ROOT / link).exists()]
    assert "mkdocs serve" in readme


def test_every_module_is_in_the_architecture_module_map() -> None:
    """docs/architecture.md's module map names every module of the package, and nothing that is gone."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    mapped = set(re.findall(r"^\| `(compatcheck/[^`]+\.py)` \|", page, re.M))
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "compatcheck").rglob("*.py") if "__pycache__" not in p.parts}
    assert sorted(modules - mapped) == [], "add these to the module map of docs/architecture.md"
    assert sorted(mapped - modules) == [], "these modules of the map are gone"
