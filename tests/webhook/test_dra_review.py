"""The DRA, KAI, NIM, KServe-runtime and operator fixtures through the webhook: each object of a case, reviewed
as the API server sends it (``admission.review`` on an AdmissionReview, the rule alone enabled, the case's
context: its nodes and the DRA objects and runtimes of its file, as the live view would hold them), is denied
with exactly the messages of its golden (cut at 200 characters as the denial cuts them), or admitted for a pass
case. ``tests/test_fixtures.py`` checks the same cases through the engine, ``compatcheck lint`` in test_dra."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compatcheck.core.admission import AdmissionSettings, review
from compatcheck.io.loader import Loaded
from tests.conftest import admission_review
from tests.test_fixtures import CASES, _context, _objects

MARKS = ("dra", "kai", "nim", "kserve", "vllmruntime")
REVIEWED = [c for c in CASES if any(m in c[2] for m in MARKS) or c[0] == "dra-request-unsatisfiable"]


def test_the_cases_are_these() -> None:
    assert len(REVIEWED) == 53, [f"{c[0]}/{c[1]}.{c[2]}" for c in REVIEWED]


@pytest.mark.parametrize(("rule_id", "kind", "case", "path"), REVIEWED,
                         ids=[f"{c[0]}/{c[1]}.{c[2]}" for c in REVIEWED])
def test_reviewed_as_linted(loaded: Loaded, rule_id: str, kind: str, case: str, path: Path) -> None:
    ruleset = loaded.ruleset.subset(lambda r: r.id == rule_id)
    objects = _objects(path)
    ctx = _context(loaded, path.parent, case, objects)
    golden: list[dict[str, Any]] = [] if kind == "pass" else json.loads(
        path.with_name(f"fail.{case}.findings.json").read_text())
    for obj in objects:
        body, decision = review(admission_review(obj, uid="dra"), "validate", ruleset, ctx, AdmissionSettings())
        response = body["response"]
        kind_name = obj["kind"]
        meta = obj.get("metadata", {})
        what = f"{kind_name} {meta['namespace'] + '/' if 'namespace' in meta else ''}{meta.get('name', '')}"
        mine = [g for g in golden if g["object"] == what]
        errors = [g for g in mine if g["severity"] == "error"]
        assert [(f.rule_id, f.message) for f in decision.findings] == [(g["rule"], g["message"]) for g in mine]
        if not errors:
            assert response["allowed"] is True, response
            continue
        assert response["allowed"] is False
        lines = response["status"]["message"].splitlines()
        assert lines[0] == f"compatcheck denied {what}:"
        cut = [f"- {rule_id}: {g['message']}" for g in errors]
        assert lines[1:] == [c if len(c) <= 200 else c[:199] + "…" for c in cut]
