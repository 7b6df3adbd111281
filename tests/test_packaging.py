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
