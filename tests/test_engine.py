"""The engine: a check that raises is contained to its rule; rules meet only the pods they concern."""

from __future__ import annotations

import dataclasses
from typing import Any

from compatcheck.core.checks.base import EvalContext
from compatcheck.core.engine import evaluate
from compatcheck.core.rules import RuleSet
from compatcheck.io.loader import Loaded


def _pod(gpu: bool) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": "0.5"} if gpu else {"cpu": "1"}  # 0.5 GPU: extended-resource-invalid
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": {
        "compatcheck.io/ignore": "dtype-unsupported-by-gpu"}},  # no reason: suppression-without-reason fires
            "spec": {"nodeSelector": {"nvidia.com/gpu.product": "Tesla-T4"}, "containers": [
                {"name": "c", "image": "vllm/vllm-openai:v0.6.3", "args": ["--dtype=bfloat16"],
                 "resources": {"limits": limits}}]}}


def _broken(rules: RuleSet, *ids: str) -> RuleSet:
    def boom(*_a: Any) -> Any:
        raise RuntimeError("kaboom")

    return RuleSet({r.id: dataclasses.replace(r, check=dataclasses.replace(r.check, evaluate=boom))
                    if r.id in ids else r for r in rules})


def test_a_raising_check_is_contained_to_its_rule(loaded: Loaded) -> None:
    ctx = EvalContext(loaded.kb)
    healthy = evaluate(_pod(gpu=True), loaded.ruleset, ctx)
    assert {"dtype-unsupported-by-gpu", "suppression-without-reason"} <= {f.rule_id for f in healthy.findings}
    broken = _broken(loaded.ruleset, "dtype-unsupported-by-gpu", "suppression-without-reason")
    assert broken.get("suppression-without-reason").check.target == "object"  # both paths of the engine
    result = evaluate(_pod(gpu=True), broken, ctx)
    assert sorted((p.rule_id, p.kind == "internal") for p in result.problems) == [
        ("dtype-unsupported-by-gpu", True), ("suppression-without-reason", True)]
    assert all("internal error in rule" in p.message and "kaboom" in p.message for p in result.problems)
    others = {f.rule_id for f in healthy.findings} - {"dtype-unsupported-by-gpu", "suppression-without-reason"}
    assert others and {f.rule_id for f in result.findings} == others  # every other rule still ran


def test_gpu_only_rules_skip_pods_without_gpus(loaded: Loaded) -> None:
    ctx = EvalContext(loaded.kb)
    gpu_only = {r.id for r in loaded.ruleset.pod_rules if r.check.gpu_only}
    assert gpu_only and not gpu_only & {r.id for r in loaded.ruleset.pod_rules_for(gpu=False, online=True)}
    assert not {r.id for r in loaded.ruleset.pod_rules_for(gpu=True, online=False)} & {
        r.id for r in loaded.ruleset if r.needs_nodes}
    broken = _broken(loaded.ruleset, *gpu_only)  # would raise if called
    assert not evaluate(_pod(gpu=False), broken, ctx).problems
    assert evaluate(_pod(gpu=True), broken, ctx).problems
