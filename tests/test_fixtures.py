"""Per-rule fixtures, discovered from the filesystem (fixtures/<rule-id>/{pass,fail,fixed}.<case>.yaml).

Each case runs with only its rule enabled. Context comes from ``nodes.yaml`` / ``nodes.<case>.yaml``
(a node list or ClusterProfile), ``crl.yaml`` and ``config.yaml`` / ``config.<case>.yaml`` (a .compatcheck.yaml whose
``driverPolicy`` the case runs under) beside the cases. Every ``pass`` must produce no finding.
Every ``fail`` must produce exactly the findings of its golden ``fail.<case>.findings.json`` (object, rule,
severity, pointer, container, message, and the fix's applicability and description, or null), and every
``fixed`` golden must equal the fail case after its fixes and lint clean of the rule.

``COMPATCHECK_UPDATE_GOLDENS=1 pytest tests/test_fixtures.py`` writes the findings goldens from what the
rules say now (new cases, changed messages); review the diff before committing it. ``COMPATCHECK_RULE=<id>``
runs one rule's fixtures only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from compatcheck.core.checks.base import EvalContext
from compatcheck.core.crl import CrlIndex, build_index
from compatcheck.core.dra import build_index as build_dra_index
from compatcheck.core.dra import is_dra
from compatcheck.core.engine import evaluate
from compatcheck.core.kserve import build_runtime_index
from compatcheck.core.model import Applicability, DuplicateKey, Finding
from compatcheck.core.patches import apply_fixes
from compatcheck.core.policy import DriverPolicy
from compatcheck.io.config import load_config
from compatcheck.io.lint import duplicates_in
from compatcheck.io.loader import Loaded, load_nodes
from compatcheck.io.manifests import iter_objects, read_file
from tests.conftest import FIXTURES

CASES = sorted(
    (p.parent.name, p.name.split(".", 1)[0], p.name.split(".")[1], p)
    for p in FIXTURES.glob("*/*.yaml")
    if p.name.split(".", 1)[0] in ("pass", "fail") and not p.parent.name.startswith("_")
)
ONLY = os.environ.get("COMPATCHECK_RULE")
UPDATE_GOLDENS = os.environ.get("COMPATCHECK_UPDATE_GOLDENS") == "1"


def _objects(path: Path) -> list[dict]:
    return [obj for obj, _dups in _objects_with_duplicates(path)]


def _objects_with_duplicates(path: Path) -> list[tuple[dict, list[DuplicateKey]]]:
    """The objects of a fixture, each with the duplicate keys the reader saw in it (yaml-duplicate-key)."""
    parsed = read_file(str(path))
    assert not parsed.errors, parsed.errors
    return [(obj, duplicates_in(doc, p)) for doc in parsed.documents for p, obj in iter_objects(doc)]


def _context(loaded: Loaded, rule_dir: Path, case: str, objects: list[dict[str, Any]]) -> EvalContext:
    """The case's context: its nodes file, the CRLs beside it, and (as lint does) the DRA objects of the case
    file itself (DeviceClasses, ResourceClaims and templates that its pods' claims resolve to) and its KServe
    ServingRuntimes."""
    nodes = rule_dir / f"nodes.{case}.yaml"
    if not nodes.exists():
        nodes = rule_dir / "nodes.yaml"
    cluster = None
    if nodes.exists():
        cluster, errors = load_nodes(str(nodes), loaded.kb, 1 << 24)
        assert not errors, errors
    config = rule_dir / f"config.{case}.yaml"
    if not config.exists():
        config = rule_dir / "config.yaml"
    policy = load_config(str(config)).driver_policy if config.exists() else DriverPolicy()
    crl = CrlIndex()
    if (rule_dir / "crl.yaml").exists():
        crl, invalid = build_index(_objects(rule_dir / "crl.yaml"))
        assert not invalid, invalid
    return EvalContext(loaded.kb, cluster, crl, dra=build_dra_index(o for o in objects if is_dra(o)),
                       serving_runtimes=build_runtime_index(objects), driver_policy=policy)


@pytest.mark.parametrize(("rule_id", "kind", "case", "path"),
                         [c for c in CASES if ONLY is None or c[0] == ONLY],
                         ids=[f"{c[0]}/{c[1]}.{c[2]}" for c in CASES if ONLY is None or c[0] == ONLY])
def test_fixture(loaded: Loaded, rule_id: str, kind: str, case: str, path: Path) -> None:
    rule = loaded.ruleset.get(rule_id)
    objects = _objects_with_duplicates(path)
    ctx = _context(loaded, path.parent, case, [obj for obj, _dups in objects])
    assert objects, f"{path} holds no Kubernetes object"
    results = [evaluate(obj, [rule], ctx, duplicates=dups) for obj, dups in objects]
    for r in results:
        assert not r.problems, r.problems
    findings = [f for r in results for f in r.findings]
    if kind == "pass":
        assert findings == [], [f.message for f in findings]
        return
    assert findings, f"{path.name}: expected a {rule_id} finding"
    assert all(f.rule_id == rule_id for f in findings)
    _compare_golden(path.with_name(f"fail.{case}.findings.json"), findings)
    fixed_path = path.with_name(f"fixed.{case}.yaml")
    fixable = [f for f in findings if f.fix is not None]
    if not fixed_path.exists():
        return
    assert fixable, f"{fixed_path.name} exists but {rule_id} offered no fix"
    fixed_objects = []
    for (obj, _dups), r in zip(objects, results, strict=False):
        new, _applied = apply_fixes(obj, r.findings, {Applicability.SAFE, Applicability.UNSAFE})
        fixed_objects.append(new)
    assert fixed_objects == _objects(fixed_path)
    for obj in fixed_objects:
        assert evaluate(obj, [rule], ctx).findings == []


def _as_golden(findings: list[Finding]) -> list[dict[str, Any]]:
    return [{"object": f.obj.describe(), "rule": f.rule_id, "severity": f.severity.value, "pointer": f.pointer,
             "container": f.container, "message": f.message,
             "fix": None if f.fix is None else {"applicability": f.fix.applicability.value,
                                                "description": f.fix.description}}
            for f in findings]


def _compare_golden(golden: Path, findings: list[Finding]) -> None:
    got = _as_golden(findings)
    if UPDATE_GOLDENS:
        golden.write_text(json.dumps(got, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return
    assert golden.exists(), (f"{golden.relative_to(FIXTURES)} is missing: COMPATCHECK_UPDATE_GOLDENS=1 pytest "
                             "tests/test_fixtures.py writes it; review it before committing")
    assert got == json.loads(golden.read_text(encoding="utf-8")), (
        f"findings differ from {golden.relative_to(FIXTURES)} (COMPATCHECK_UPDATE_GOLDENS=1 rewrites it)")


def test_every_findings_golden_has_its_fail_case() -> None:
    stray = [str(p.relative_to(FIXTURES)) for p in FIXTURES.glob("*/*.findings.json")
             if not p.with_name(p.name.removesuffix(".findings.json") + ".yaml").exists()
             or not p.name.startswith("fail.")]
    assert not stray, f"findings goldens without a fail.<case>.yaml: {stray}"


def test_every_rule_has_pass_and_fail_fixtures(loaded: Loaded) -> None:
    have = {(r, k) for r, k, _c, _p in CASES}
    missing = [f"{rid}/{k}" for rid in loaded.ruleset.rules for k in ("pass", "fail") if (rid, k) not in have]
    assert not missing, f"rules without fixtures: {missing}"


def test_every_fixable_rule_has_a_fixed_golden(loaded: Loaded) -> None:
    missing = [r.id for r in loaded.ruleset if r.fix_applicability is not None
               and not list((FIXTURES / r.id).glob("fixed.*.yaml"))]
    assert not missing, f"fixable rules without a fixed.* golden: {missing}"


def test_fixture_dirs_name_existing_rules(loaded: Loaded) -> None:
    stray = [p.name for p in FIXTURES.iterdir() if p.is_dir() and not p.name.startswith("_")
             and p.name not in loaded.ruleset.rules]
    assert not stray, f"fixture directories for unknown rules: {stray}"
