"""The check-type registry, the one check contract every type keeps, and each type's params contract (table
tests of invalid params)."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
import typing
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from compatcheck.core import checks
from compatcheck.core.checks.base import (
    NO_PARAMS_SCHEMA,
    CheckType,
    EvalContext,
    InputProblem,
    ObjectTarget,
    Outcome,
    PodAnalysis,
    PodCheck,
    UnknownCheckType,
    Violation,
    no_params,
)
from compatcheck.core.rules import build_rule
from compatcheck.io.loader import Loaded
from tests.conftest import ROOT


def _evaluate(a: PodAnalysis, ctx: EvalContext, params: object) -> list[Outcome]:
    return []


def _pod_check(name: str, **changes: Any) -> PodCheck[Any]:
    fields: dict[str, Any] = {"name": name, "description": "a check type that is not registered",
                              "params_schema": NO_PARAMS_SCHEMA, "prepare": no_params, "evaluate": _evaluate}
    return PodCheck(**{**fields, **changes})


def test_registry_is_closed_and_loud() -> None:
    names = [c.name for c in checks.all_types()]
    assert names == sorted(names) and len(names) == len(set(names))
    with pytest.raises(UnknownCheckType, match='no such check type: "nope"'):
        checks.get("nope")
    existing = checks.all_types()[0]
    with pytest.raises(RuntimeError, match="registered twice"):
        checks.register(_pod_check(existing.name))


@pytest.mark.parametrize(("changes", "message"), [
    ({"prepare": None}, "has no prepare"),
    ({"evaluate": None}, "has no evaluate"),
    ({"evaluate": lambda a, params: []}, "evaluate must take 3 positional argument"),  # the old pod signature
    ({"prepare": lambda: None}, "prepare must take 1 positional argument"),
])
def test_registry_refuses_a_type_that_breaks_the_contract(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        checks.register(_pod_check("not-registered", **changes))
    with pytest.raises(TypeError, match="PodCheck or an ObjectCheck"):  # no target: the base class
        checks.register(CheckType(name="not-registered", description="x", params_schema={}, prepare=no_params,
                                  evaluate=_evaluate))
    with pytest.raises(UnknownCheckType):
        checks.get("not-registered")


@pytest.mark.parametrize("ctype", checks.all_types(), ids=lambda c: c.name)
def test_evaluate_signature_is_the_contract(ctype: CheckType[Any, Any]) -> None:
    """evaluate(target, ctx, params) -> Iterable[Outcome], with the target its kind says and the params its own
    prepare returns, a frozen dataclass. mypy holds this statically (CheckType is generic over both; see
    test_mypy_refuses_a_mismatched_check_type); this says it of the registry at run time."""
    hints = typing.get_type_hints(ctype.evaluate)
    names = list(inspect.signature(ctype.evaluate).parameters)
    assert len(names) == 3, names
    target, ctx, params = (hints[n] for n in names)
    assert target is {"pod": PodAnalysis, "object": ObjectTarget}[ctype.target]
    assert ctx is EvalContext
    prepared = typing.get_type_hints(ctype.prepare)["return"]
    assert params is prepared
    assert dataclasses.is_dataclass(prepared) and prepared.__dataclass_params__.frozen  # type: ignore[attr-defined]
    ret = hints["return"]
    assert typing.get_origin(ret) in (Iterator, Iterable) and typing.get_args(ret)[0] in (Outcome, Violation,
                                                                                          InputProblem)


def test_every_rule_holds_the_params_its_check_prepares(loaded: Loaded) -> None:
    for rule in loaded.ruleset:
        assert isinstance(rule.prepared, typing.get_type_hints(rule.check.prepare)["return"]), rule.id


_MISMATCHED = '''
from collections.abc import Iterator
from dataclasses import dataclass

from compatcheck.core.checks.base import (EvalContext, NoParams, ObjectTarget, PodAnalysis, PodCheck, RawParams,
                                          Violation, no_params)


@dataclass(frozen=True)
class P:
    n: int


def prepare(raw: RawParams) -> P:
    return P(1)


def good(a: PodAnalysis, ctx: EvalContext, params: P) -> Iterator[Violation]:
    yield Violation(str(params.n), "")


def wrong_target(a: ObjectTarget, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    return iter(())


def wrong_outcome(a: PodAnalysis, ctx: EvalContext, params: P) -> Iterator[str]:
    return iter(())


PodCheck(name="x", description="d", params_schema={}, prepare=prepare, evaluate=good)
PodCheck(name="x", description="d", params_schema={}, prepare=no_params, evaluate=good)  # refused: params
PodCheck(name="x", description="d", params_schema={}, prepare=no_params, evaluate=wrong_target)  # refused: target
PodCheck(name="x", description="d", params_schema={}, prepare=prepare, evaluate=wrong_outcome)  # refused: outcome
'''


def test_mypy_refuses_a_mismatched_check_type(tmp_path: Path) -> None:
    """The generics bite: an evaluate whose params are not what prepare returns, whose target is not the kind's,
    or that yields something else than Outcomes, fails mypy (which CI runs on every check module)."""
    (tmp_path / "mismatched.py").write_text(_MISMATCHED)
    out = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--config-file", "",
                          str(tmp_path / "mismatched.py")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stdout + out.stderr
    lines = sorted(int(line.split(":")[1]) for line in out.stdout.splitlines() if ": error:" in line)
    assert lines == [n for n, line in enumerate(_MISMATCHED.splitlines(), 1) if "# refused" in line], out.stdout


@pytest.mark.parametrize("ctype", checks.all_types(), ids=lambda c: c.name)
def test_params_schema_is_valid_and_documented(ctype: CheckType[Any, Any]) -> None:
    Draft202012Validator.check_schema(ctype.params_schema)
    assert ctype.params_schema.get("additionalProperties") is False, "unknown params must be errors"
    assert len(ctype.description) > 30


def _properties(schema: Any, where: str) -> Iterator[tuple[str, Any]]:
    if isinstance(schema, dict):
        for name, sub in (schema.get("properties") or {}).items():
            yield f"{where}/{name}", sub
            yield from _properties(sub, f"{where}/{name}")
        for key, sub in schema.items():
            if key != "properties":
                yield from _properties(sub, where)
    elif isinstance(schema, list):
        for sub in schema:
            yield from _properties(sub, where)


@pytest.mark.parametrize("ctype", checks.all_types(), ids=lambda c: c.name)
def test_every_param_is_described(ctype: CheckType[Any, Any]) -> None:
    undescribed = sorted({where for where, sub in _properties(ctype.params_schema, "") if not sub.get("description")})
    assert not undescribed, f"params without a description: {undescribed}"


def test_every_check_type_is_used_by_a_builtin_rule(loaded: Loaded) -> None:
    used = {r.check.name for r in loaded.ruleset}
    assert used == {c.name for c in checks.all_types()}


def _rule(ctype: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "compatcheck/v1", "id": "x", "summary": "A test rule summary.", "severity": "error",
            "check": {"type": ctype, "params": params},
            "docs": {"rationale": "twenty characters or more", "remediation": "Do it.", "references": ["https://x"]}}


_ENV_REQUIRED = {"when": "gpu-manager", "imagePattern": "paddle", "env": "X", "value": "y", "what": "w", "why": "z"}


@pytest.mark.parametrize(("ctype", "params", "message"), [
    # The types split from mode switches take no mode.
    *[(t, {"mode": "x"}, "'mode' was unexpected") for t in (
        "crl-limit-required", "crl-limit-disabled", "crl-request-policy", "crl-defaults", "crl-value-type",
        "cuda-driver-too-old", "cuda-driver-behind-runtime", "cuda-driver-major-skew", "gpu-arch-too-new",
        "gpu-arch-dropped", "eligible-node", "gpu-taint-toleration", "vgpu-cuda-ceiling", "vgpu-baseline",
        "vgpu-major")],
    ("crl-limit-required", {"extra": True}, "was unexpected"),
    ("cuda-driver-too-old", {"maxMajorSkew": 1}, "'maxMajorSkew' was unexpected"),  # only major-skew has it
    ("cuda-driver-behind-runtime", {"colour": 1}, "'colour' was unexpected"),
    ("cuda-driver-major-skew", {"maxMajorSkew": -1}, "less than the minimum"),
    ("cuda-driver-major-skew", {"maxMajorSkew": "one"}, "is not of type 'integer'"),
    ("vgpu-cuda-ceiling", {"ceiling": "twelve"}, "does not match"),
    ("vgpu-cuda-ceiling", {"defaultBaselineCuda": "11.4"}, "'defaultBaselineCuda' was unexpected"),
    ("vgpu-baseline", {"defaultBaselineCuda": "11"}, "does not match"),
    ("vgpu-baseline", {"ceiling": "12.4"}, "'ceiling' was unexpected"),
    ("vgpu-major", {"defaultBaselineCuda": 11.4}, "is not of type 'string'"),
    ("cuda-affinity-pin", {"accept": ["unknown"]}, "is not one of"),
    ("cuda-runtime-known", {"annotation": 1}, "is not of type 'string'"),
    ("dtype-capability", {"sources": [{"values": {"bf16": "bf16"}}]}, "is not valid under any of the given schemas"),
    ("framework-capability", {"frameworks": [{"name": "x", "minComputeCapability": "7", "source": "s",
                                              "image": "x"}]}, "does not match"),
    ("env-required", {"when": "gpu-manager"}, "is a required property"),
    ("env-required", {**_ENV_REQUIRED, "when": "mig"}, "is not one of"),
    ("shared-request-size", {"timeSlicingFailsRequestsGreaterThanOne": "yes"}, "is not of type 'boolean'"),
    ("mig-profile", {"profiles": []}, "was unexpected"),
    # Valid by the schema, but the check cannot prepare it: caught at load time, not per object.
    ("framework-capability", {"frameworks": [{"name": "x", "minComputeCapability": "7.0", "source": "s",
                                              "image": "vllm/vllm-openai:(?P<version"}]}, "error: missing"),
    ("env-required", {**_ENV_REQUIRED, "commandPattern": "paddle("}, "error: missing"),
    ("mps-requirements", {"minComputeCapability": "seven"}, "VersionError"),
    ("mps-requirements", {"minDriverCuda": "eleven"}, "VersionError"),
])
def test_invalid_params_are_rejected_with_the_check_name(ctype: str, params: dict[str, Any], message: str) -> None:
    from compatcheck.io.loader import packaged_schema

    rule, problems = build_rule(_rule(ctype, params), "x.yaml", builtin=False, validate=True,
                                rule_schema=packaged_schema("rule.schema.json"))
    assert rule is None
    assert any(message in p.message and ctype in p.message for p in problems), problems
    assert all(p.pointer.startswith("/check/params") for p in problems)
