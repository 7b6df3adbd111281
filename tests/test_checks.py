"""The check-type registry and each type's params contract (table tests of invalid params)."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from compatcheck.core import checks
from compatcheck.core.checks.base import CheckType, UnknownCheckType
from compatcheck.core.rules import build_rule
from compatcheck.io.loader import Loaded


def test_registry_is_closed_and_loud() -> None:
    names = [c.name for c in checks.all_types()]
    assert names == sorted(names) and len(names) == len(set(names))
    with pytest.raises(UnknownCheckType, match='no such check type: "nope"'):
        checks.get("nope")
    existing = checks.all_types()[0]
    with pytest.raises(RuntimeError, match="registered twice"):
        checks.register(CheckType(existing.name, "dup", "pod", {}, lambda *a: []))


@pytest.mark.parametrize("ctype", checks.all_types(), ids=lambda c: c.name)
def test_params_schema_is_valid_and_documented(ctype: CheckType) -> None:
    Draft202012Validator.check_schema(ctype.params_schema)
    assert ctype.params_schema.get("additionalProperties") is False, "unknown params must be errors"
    assert len(ctype.description) > 30


def test_every_check_type_is_used_by_a_builtin_rule(loaded: Loaded) -> None:
    used = {r.check.name for r in loaded.ruleset}
    assert used == {c.name for c in checks.all_types()}


def _rule(ctype: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "compatcheck/v1", "id": "x", "summary": "A test rule summary.", "severity": "error",
            "check": {"type": ctype, "params": params},
            "docs": {"rationale": "twenty characters or more", "remediation": "Do it.", "references": ["https://x"]}}


@pytest.mark.parametrize(("ctype", "params", "message"), [
    ("cuda-driver-compat", {}, "'mode' is a required property"),
    ("cuda-driver-compat", {"mode": "too-young"}, "'too-young' is not one of"),
    ("cuda-driver-compat", {"mode": "major-skew", "maxMajorSkew": -1}, "less than the minimum"),
    ("cuda-driver-compat", {"mode": "too-old", "colour": 1}, "'colour' was unexpected"),
    ("vgpu-compat", {"mode": "cuda-unsupported", "ceiling": "twelve"}, "does not match"),
    ("dtype-capability", {"sources": [{"values": {"bf16": "bf16"}}]}, "is not valid under any of the given schemas"),
    ("framework-capability", {"frameworks": [{"name": "x", "minComputeCapability": "7", "source": "s",
                                              "image": "x"}]}, "does not match"),
    ("env-required", {"when": "gpu-manager"}, "is a required property"),
    ("node-eligibility", {"mode": "maybe"}, "is not one of"),
    ("crl-policy", {"mode": "limit-required", "extra": True}, "was unexpected"),
    # Valid by the schema, but the check cannot prepare it: caught at load time, not per object.
    ("framework-capability", {"frameworks": [{"name": "x", "minComputeCapability": "7.0", "source": "s",
                                              "image": "vllm/vllm-openai:(?P<version"}]}, "error: missing"),
])
def test_invalid_params_are_rejected_with_the_check_name(ctype: str, params: dict[str, Any], message: str) -> None:
    from compatcheck.io.loader import packaged_schema

    rule, problems = build_rule(_rule(ctype, params), "x.yaml", builtin=False, validate=True,
                                rule_schema=packaged_schema("rule.schema.json"))
    assert rule is None
    assert any(message in p.message and ctype in p.message for p in problems), problems
    assert all(p.pointer.startswith("/check/params") for p in problems)
