"""engine.evaluate with synthetic rules: what each outcome becomes (every field), which rules meet which targets, and
how input problems are merged and internal errors contained."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest

from compatcheck.core.checks.base import (
    NO_PARAMS_SCHEMA,
    EvalContext,
    InputProblem,
    ObjectCheck,
    ObjectTarget,
    Outcome,
    PodAnalysis,
    PodCheck,
    Violation,
    no_params,
)
from compatcheck.core.cluster import build_cluster
from compatcheck.core.engine import evaluate
from compatcheck.core.knowledge import KnowledgeBase
from compatcheck.core.model import Applicability, Diagnostic, Finding, Fix, ObjectRef, PatchOp, Severity
from compatcheck.core.rules import Rule, RuleSet

KB = KnowledgeBase()
REF = ObjectRef("batch/v1", "Job", "ns", "j")
FIX = Fix("do it", Applicability.SAFE, (PatchOp("add", "/x", 1),))


def rule(rule_id: str, outcomes: Callable[[Any], Iterable[Outcome]], *, target: str = "pod",
         severity: Severity = Severity.WARNING, needs_nodes: bool = False, gpu_only: bool = False) -> Rule:
    def run(t: Any, ctx: EvalContext, params: Any) -> Iterable[Outcome]:
        return outcomes(t)

    kind: Any = PodCheck if target == "pod" else ObjectCheck
    check = kind(name=f"check-{rule_id}", description="d", params_schema=NO_PARAMS_SCHEMA, prepare=no_params,
                 evaluate=run, needs_nodes=needs_nodes, gpu_only=gpu_only)
    return Rule(rule_id, "summary", severity, check, {}, "why", "how", (), "test")


def container(name: str, gpus: int) -> dict[str, Any]:
    return {"name": name, "image": "img", "resources": {"limits": {"nvidia.com/gpu": gpus}}}


def job(*gpus: int) -> dict[str, Any]:
    """A Job whose one pod has a container per entry of ``gpus``."""
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns"},
            "spec": {"template": {"spec": {"containers": [container(f"c{i}", g) for i, g in enumerate(gpus)]}}}}


def two_pods() -> dict[str, Any]:
    """A PyTorchJob: two pod specs, one GPU container each."""
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"pytorchReplicaSpecs": {
                r: {"template": {"spec": {"containers": [container("c", 1)]}}} for r in ("Master", "Worker")}}}


def test_a_violation_becomes_a_finding_with_every_field() -> None:
    pod = rule("pod-rule", lambda a: [Violation("m1", "/p1", "c0", FIX), Violation("m2", "/p2")])
    obj = rule("obj-rule", lambda t: [Violation("m3", "/p3", "c9", FIX)], target="object", severity=Severity.INFO)
    result = evaluate(job(1), RuleSet({r.id: r for r in (pod, obj)}), EvalContext(KB))
    assert result.findings == [
        Finding("obj-rule", Severity.INFO, "m3", REF, "/p3", "c9", FIX),
        Finding("pod-rule", Severity.WARNING, "m1", REF, "/p1", "c0", FIX),
        Finding("pod-rule", Severity.WARNING, "m2", REF, "/p2", None, None)]
    assert result.problems == []


def test_severities_override_only_the_rules_they_name() -> None:
    rules = [rule("a", lambda t: [Violation("m", "/a")]), rule("b", lambda t: [Violation("m", "/b")])]
    result = evaluate(job(1), rules, EvalContext(KB), severities={"a": Severity.ERROR, "zzz": Severity.INFO})
    assert [(f.rule_id, f.severity) for f in result.findings] == [("a", Severity.ERROR), ("b", Severity.WARNING)]


def test_an_input_problem_is_a_diagnostic_naming_its_rule_never_a_finding() -> None:
    r = rule("r", lambda a: [InputProblem("unreadable", "/metadata/annotations/x"), Violation("after", "/v")])
    result = evaluate(job(1), [r], EvalContext(KB))
    assert result.problems == [Diagnostic("", "unreadable", pointer="/metadata/annotations/x", severity=Severity.ERROR,
                                          kind="input", rule_id="r")]
    assert [f.message for f in result.findings] == ["after"]  # the outcomes after a problem still count


def test_input_problems_are_reported_once_per_pointer_and_message() -> None:
    problems = [InputProblem("bad", "/same"), InputProblem("bad", "/same"), InputProblem("other", "/same"),
                InputProblem("bad", "/elsewhere")]
    first = rule("first", lambda a: problems)
    second = rule("second", lambda a: [InputProblem("bad", "/same"), InputProblem("new", "/same")])
    result = evaluate(two_pods(), [first, second], EvalContext(KB))  # both rules run on both pods
    assert [(p.rule_id, p.pointer, p.message) for p in result.problems] == [
        ("first", "/same", "bad"), ("first", "/same", "other"), ("first", "/elsewhere", "bad"),
        ("second", "/same", "new")]


def test_a_check_that_raises_is_an_internal_error_of_its_rule() -> None:
    def boom(t: Any) -> Iterable[Outcome]:
        yield Violation("before the error", "/x")  # lost with the rest of the rule's outcomes
        raise KeyError("k")

    ok = rule("ok", lambda a: [Violation("fine", "/y")])
    result = evaluate(job(1), [rule("bad", boom), ok, rule("bad-object", boom, target="object")], EvalContext(KB))
    assert result.problems == [
        Diagnostic("", "internal error in rule bad-object: KeyError: 'k'", severity=Severity.ERROR, kind="internal",
                   rule_id="bad-object"),
        Diagnostic("", "internal error in rule bad: KeyError: 'k'", severity=Severity.ERROR, kind="internal",
                   rule_id="bad")]
    assert [(f.rule_id, f.message) for f in result.findings] == [("ok", "fine")]


def test_object_rules_see_the_object_and_its_pods_and_pod_rules_each_pod() -> None:
    seen: list[Any] = []
    obj_rule = rule("o", lambda t: seen.append(t) or [], target="object")
    pod_rule = rule("p", lambda a: seen.append(a) or [])
    obj = two_pods()
    result = evaluate(obj, [obj_rule, pod_rule], EvalContext(KB))
    target, *analyses = seen
    assert isinstance(target, ObjectTarget) and target.obj is obj and target.pods is result.pods
    assert result.pods is not None and [p.pointer for p in result.pods] == [
        "/spec/pytorchReplicaSpecs/Master/template/spec", "/spec/pytorchReplicaSpecs/Worker/template/spec"]
    assert all(isinstance(a, PodAnalysis) for a in analyses)
    assert [a.pod for a in analyses] == result.pods


def test_an_object_without_pods_meets_only_object_rules() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    rules = [rule("o", lambda t: [Violation("obj", "")], target="object"), rule("p", lambda a: [Violation("x", "")])]
    result = evaluate(cm, rules, EvalContext(KB))
    assert result.pods == [] and [f.rule_id for f in result.findings] == ["o"]
    assert result.findings[0].obj == ObjectRef("v1", "ConfigMap", None, "c")


@pytest.mark.parametrize(("gpus", "online", "ran"), [
    ((1,), False, ["any"]),
    ((1,), True, ["any", "nodes"]),
    ((0,), True, []),
    ((0, 2), True, ["any", "nodes"]),
])
def test_rules_meet_the_pods_they_concern(gpus: tuple[int, ...], online: bool, ran: list[str]) -> None:
    hit: list[str] = []

    def note(name: str) -> Callable[[Any], Iterable[Outcome]]:
        return lambda a: hit.append(name) or []

    rules = [rule("any", note("any"), gpu_only=True), rule("nodes", note("nodes"), gpu_only=True, needs_nodes=True),
             rule("z", note("any-pod"), gpu_only=False)]
    cluster = build_cluster([], KB) if online else None
    evaluate(job(*gpus), rules, EvalContext(KB, cluster))
    assert [h for h in hit if h != "any-pod"] == ran
    assert hit.count("any-pod") == 1  # a rule that is not gpu_only meets every pod


def test_object_rules_get_the_context_and_report_input_problems() -> None:
    ctx = EvalContext(KB)
    seen: list[Any] = []

    def check(t: ObjectTarget, c: EvalContext, params: Any) -> Iterable[Outcome]:
        seen.append(c)
        return [InputProblem("bad", "/metadata"), InputProblem("bad", "/metadata")]

    obj_rule = Rule("o", "s", Severity.INFO, ObjectCheck(name="o", description="d", params_schema=NO_PARAMS_SCHEMA,
                                                         prepare=no_params, evaluate=check), {}, "w", "h", (), "t")
    result = evaluate(job(1), [obj_rule, rule("p", lambda a: [InputProblem("bad", "/metadata")])], ctx)
    assert seen == [ctx]
    assert [(p.rule_id, p.pointer) for p in result.problems] == [("o", "/metadata")]  # once, for the first rule
