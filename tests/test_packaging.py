"""The built-in rules ship inside the wheel and load from an installed wheel (no checkout needed)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(ROOT)],
                   check=True, capture_output=True, text=True, timeout=300)
    (found,) = out.glob("compatcheck-*.whl")
    return found


def test_wheel_contains_rules_data_and_schemas(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    rule_files = {p.name for p in (ROOT / "rules").glob("*.yaml")}
    assert {f"compatcheck/_rules/{n}" for n in rule_files} <= names
    assert {f"compatcheck/_rules/data/{p.name}" for p in (ROOT / "rules" / "data").glob("*.yaml")} <= names
    assert {"compatcheck/schemas/rule.schema.json", "compatcheck/schemas/crl.schema.json",
            "compatcheck/schemas/table.schema.json"} <= names


def test_installed_wheel_loads_rules_from_itself(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
                    str(wheel)], check=True, capture_output=True, timeout=300)
    code = ("import compatcheck.io.loader as l, sys; d = l.builtin_rules_dir(); "
            "assert str(d).startswith(sys.argv[1]), d; r = l.load_rules(validate_builtin=True); "
            "print(len(r.ruleset), d)")
    proc = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, text=True,
                          cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"{len(list((ROOT / 'rules').glob('*.yaml')))} ")


def test_missing_builtin_rules_are_an_error_not_an_empty_rule_set(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    import compatcheck.io.loader as loader

    monkeypatch.setattr(loader, "builtin_rules_dir", lambda: tmp_path)
    with pytest.raises(loader.RuleLoadError) as err:
        loader.load_rules()
    assert [p.message for p in err.value.problems] == ["the built-in rules are missing (a broken install?)"]


# Import name of each distribution the wheel declares. ruamel.yaml.clib is the C parser ruamel.yaml loads itself
# when asked for it (YAML(typ="safe", pure=False) in compatcheck/io/manifests.py), and whose raw_parse checks the
# syntax of skipped documents (imported by its module name, _ruamel_yaml).
IMPORTS = {"ruamel.yaml": "ruamel", "ruamel.yaml.clib": "_ruamel_yaml", "jsonschema": "jsonschema",
           "aiohttp": "aiohttp", "kubernetes": "kubernetes", "cryptography": "cryptography",
           "prometheus.client": "prometheus_client",
           "orjson": "orjson", "jsonpatch": "jsonpatch", "pathspec": "pathspec", "cel.python": "celpy"}


def _requires(wheel: Path) -> dict[str, set[str]]:
    """Distribution names the wheel requires (normalised with dots), by extra ("" = ``pip install compatcheck``)."""
    import re
    from email.parser import Parser

    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        meta = Parser().parsestr(z.read(name).decode())
    out: dict[str, set[str]] = {}
    for req in meta.get_all("Requires-Dist") or []:
        dist = re.match(r"[A-Za-z0-9._-]+", req)
        extra = re.search(r"extra == ['\"]([^'\"]+)['\"]", req)
        assert dist is not None
        out.setdefault(extra.group(1) if extra else "", set()).add(dist.group(0).lower().replace("-", "."))
    return out


def test_every_dependency_is_imported_and_the_lint_install_pulls_no_webhook_package(wheel: Path) -> None:
    import ast

    requires = _requires(wheel)
    assert requires[""] == {"ruamel.yaml", "ruamel.yaml.clib", "jsonschema", "pathspec", "cel.python"}  # CEL: DRA
    assert requires["webhook"] == {"aiohttp", "kubernetes", "cryptography", "prometheus.client", "orjson",
                                   "jsonpatch"}
    imported: dict[str, set[str]] = {}
    for path in (ROOT / "compatcheck").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            for n in names:
                imported.setdefault(n.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    for dist in requires[""] | requires["webhook"]:
        module = IMPORTS[dist]
        if module is None:
            assert 'YAML(typ="safe", pure=False)' in (ROOT / "compatcheck/io/manifests.py").read_text()
            continue
        assert module in imported, f"{dist} is declared but never imported: remove it"
    # What only the webhook imports is in the webhook extra, not in the plain install.
    for dist in requires["webhook"]:
        users = imported[IMPORTS[dist] or ""]
        assert all(u.startswith("compatcheck/webhook/") or u in ("compatcheck/core/admission.py",
                                                                 "compatcheck/core/jsonutil.py") for u in users), users
