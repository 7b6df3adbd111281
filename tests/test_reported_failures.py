"""Failures reported in public issue trackers, rebuilt as manifests plus the nodes they ran on, and setups that work
which a sloppy linter would flag (issue #12). ``tests/reported_failures/cases.yaml`` indexes them.

Each case is linted in-process, as ``compatcheck lint <manifest> --nodes <id>-*.nodes.yaml`` would: every ``expect``
must be reported at its severity, no ``forbid`` rule may fire, and a negative has no error at all. A case whose
``needs`` are not all in ``AVAILABLE`` is a strict xfail: extend ``AVAILABLE`` as capabilities land, and a case that
starts passing before that is reported (XPASS fails the run).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from compatcheck.core.config import Config
from compatcheck.core.model import Finding, Severity
from compatcheck.core.policy import DriverPolicy
from compatcheck.io.config import driver_policy
from compatcheck.io.lint import LintOptions, run_lint
from compatcheck.io.loader import Loaded
from tests.conftest import ROOT

CASES_DIR = ROOT / "tests" / "reported_failures"
INDEX = CASES_DIR / "cases.yaml"

# Capabilities a case may need (cases.yaml documents each). AVAILABLE: those the linter has today.
KNOWN = frozenset({"arch-in-image", "forward-compat", "framework-version-floors", "wheel-cuda", "image-table",
                   "image-table-gap", "model-config", "arch-specific-kernels", "flashinfer-history",
                   "unreleased-build", "ngc-unlisted-branch", "unexplained-report", "floating-tag"})
AVAILABLE = frozenset({"arch-in-image", "forward-compat", "framework-version-floors", "image-table", "wheel-cuda"})

MIN_FAILURES, MIN_NEGATIVES = 70, 15
_URL = re.compile(r"https://\S+")


@dataclass(frozen=True)
class Expect:
    rules: tuple[str, ...]  # any one of them
    severity: Severity

    def met(self, findings: list[Finding]) -> bool:
        return any(f.rule_id in self.rules and f.severity is self.severity for f in findings)

    def __str__(self) -> str:
        return f"{' or '.join(self.rules)} at {self.severity.value}"


@dataclass(frozen=True)
class Case:
    id: str
    url: str
    kind: str
    framework: str
    cls: str
    expect: tuple[Expect, ...]
    forbid: tuple[str, ...]
    needs: tuple[str, ...]
    severities: dict[str, Severity]
    policy: DriverPolicy
    note: str

    @property
    def files(self) -> list[Path]:
        return sorted(CASES_DIR.glob(f"{self.id}-*.yaml"))

    @property
    def nodes(self) -> Path:
        (path,) = [p for p in self.files if p.name.endswith(".nodes.yaml")]
        return path

    @property
    def manifest(self) -> Path:
        (path,) = [p for p in self.files if not p.name.endswith(".nodes.yaml")]
        return path

    @property
    def missing(self) -> list[str]:
        return [n for n in self.needs if n not in AVAILABLE]


def _expect(raw: dict[str, Any]) -> Expect:
    rules = tuple(raw["any"]) if "any" in raw else (raw["rule"],)
    return Expect(rules, Severity(raw["severity"]))


def _load_index() -> list[Case]:
    data = YAML(typ="safe").load(INDEX.read_text(encoding="utf-8"))
    return [Case(id=c["id"], url=c["url"], kind=c["kind"], framework=c["framework"], cls=c["class"],
                 expect=tuple(_expect(e) for e in c.get("expect", [])), forbid=tuple(c.get("forbid", [])),
                 needs=tuple(c.get("needs", [])),
                 severities={k: Severity(v) for k, v in (c.get("severities") or {}).items()},
                 policy=driver_policy(c.get("driverPolicy") or {}), note=c.get("note", ""))
            for c in data["cases"]]


CASES = _load_index()


def _params() -> list[Any]:
    out = []
    for case in CASES:
        marks = []
        if case.missing:
            marks.append(pytest.mark.xfail(strict=True, reason=f"needs {', '.join(case.missing)}"))
        name = case.manifest.name.removesuffix(".yaml") if len(case.files) == 2 else case.id
        out.append(pytest.param(case, id=name, marks=marks))
    return out


def _describe(findings: list[Finding]) -> str:
    return "; ".join(f"{f.rule_id} ({f.severity.value}): {f.message}" for f in findings) or "no findings"


@pytest.mark.parametrize("case", _params())
def test_reported_case(loaded: Loaded, case: Case) -> None:
    config = Config(severities=dict(case.severities), driver_policy=case.policy)
    report = run_lint([str(case.manifest)], loaded, LintOptions(nodes=str(case.nodes), config=config))
    assert not report.errors, [d.message for d in report.errors]
    assert not [d for d in report.warnings if d.kind == "nodes"], [d.message for d in report.warnings]
    assert report.objects, f"{case.manifest.name} holds no Kubernetes object"
    findings = report.findings
    missing = [str(e) for e in case.expect if not e.met(findings)]
    assert not missing, f"{case.id}: expected {missing}; got {_describe(findings)}"
    forbidden = [f for f in findings if f.rule_id in case.forbid]
    assert not forbidden, f"{case.id}: forbidden findings: {_describe(forbidden)}"
    if case.kind == "negative":
        errors = [f for f in findings if f.severity is Severity.ERROR]
        assert not errors, f"{case.id} works in practice, yet: {_describe(errors)}"


def test_index_is_well_formed(loaded: Loaded) -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]
    known_rules = set(loaded.ruleset.rules) | {"gpu-arch-not-in-image", "cuda-driver-needs-forward-compat"}
    for case in CASES:
        assert case.kind in ("failure", "negative"), case.id
        assert case.url.startswith("https://"), case.id
        assert case.note, f"{case.id} has no note"
        assert set(case.needs) <= KNOWN, f"{case.id}: unknown needs {set(case.needs) - KNOWN}"
        named = {r for e in case.expect for r in e.rules} | set(case.forbid) | set(case.severities)
        assert named <= known_rules, f"{case.id}: unknown rule ids {named - known_rules}"
        if case.kind == "failure":
            assert case.expect, f"failure {case.id} expects no finding"
            assert all(e.severity in (Severity.ERROR, Severity.WARNING) for e in case.expect), case.id
        else:
            assert case.forbid, f"negative {case.id} forbids nothing a sloppy linter would raise"
    assert set(KNOWN) >= AVAILABLE


def test_every_case_has_a_manifest_and_nodes_with_its_url() -> None:
    by_id = {c.id: c for c in CASES}
    for case in CASES:
        assert len(case.files) == 2, f"{case.id}: expected <id>-<name>.yaml and <id>-<name>.nodes.yaml, got " \
                                     f"{[p.name for p in case.files]}"
        assert case.nodes.name == case.manifest.name.removesuffix(".yaml") + ".nodes.yaml", case.id
        for path in case.files:
            head = path.read_text(encoding="utf-8").split("\napiVersion:", 1)[0]
            assert head.startswith("#"), f"{path.name} does not start with its comment block"
            urls = [u.rstrip(".,:;)") for u in _URL.findall(head)]
            assert case.url in urls, f"{path.name}: its comment does not name {case.url}"
        head = case.manifest.read_text(encoding="utf-8").split("\napiVersion:", 1)[0]
        fields = ("Failed:", "Resolution:") if case.kind == "failure" else ("Outcome:", "Sloppy:")
        for field in (*fields, "Stated:", "Inferred:"):
            assert field in head, f"{case.manifest.name}: the comment block lacks {field!r}"
    stray = [p.name for p in CASES_DIR.glob("*.yaml")
             if p != INDEX and p.name.split("-", 1)[0] not in by_id]
    assert not stray, f"case files without an entry in cases.yaml: {stray}"


def test_enough_cases() -> None:
    kinds = Counter(c.kind for c in CASES)
    assert kinds["failure"] >= MIN_FAILURES, kinds
    assert kinds["negative"] >= MIN_NEGATIVES, kinds
