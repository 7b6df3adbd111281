"""The rules engine: evaluate one Kubernetes object against a RuleSet in a context.

Pure: no I/O, no printing, no aiohttp. The CLI and the webhook both call ``evaluate``; findings carry
RFC 6901 pointers relative to the object, and the caller maps them to lines (CLI) or patches (webhook).
A check that raises is contained: it becomes a problem entry naming the rule, never a crash.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from compatcheck.checks.base import EvalContext, PodAnalysis, Violation
from compatcheck.model import Finding, ObjectRef, Severity
from compatcheck.rules import Rule, RuleSet
from compatcheck.workloads import PodTarget, object_ref, pod_targets


@dataclass(frozen=True)
class Problem:
    """Bad input inside an object (or an internal error of a check): reported as an error, not a finding."""

    message: str
    pointer: str
    rule_id: str | None = None
    internal: bool = False  # a check raised: a bug, not bad input


@dataclass
class EvalResult:
    findings: list[Finding] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    # The object's pod targets, for callers that need them next (suppressions); None when not computed.
    pods: list[PodTarget] | None = None


@dataclass(frozen=True)
class ObjectTarget:
    """What object-level checks receive: the object and the pod targets the engine found in it."""

    obj: dict[str, Any]
    pods: list[PodTarget]


def evaluate(obj: dict[str, Any], ruleset: RuleSet | Iterable[Rule], ctx: EvalContext, *,
             severities: dict[str, Severity] | None = None) -> EvalResult:
    """Findings for ``obj``. ``severities`` overrides rule severities (config); absent rules run as declared."""
    rules = ruleset if isinstance(ruleset, RuleSet) else RuleSet({r.id: r for r in ruleset})
    pods = pod_targets(obj)
    result = EvalResult(pods=pods)
    ref = object_ref(obj)
    sev = severities or {}
    seen_problems: set[tuple[str, str]] = set()
    target = ObjectTarget(obj, pods)
    for rule in rules.object_rules:
        _collect(rule, result, ref, sev, seen_problems, target, ctx)
    pod_rules = rules.pod_rules if ctx.cluster is not None else rules.offline_pod_rules
    if not pod_rules:
        return result
    for pod in pods:
        analysis = PodAnalysis(pod, ctx)
        gpu = analysis.is_gpu_pod
        for rule in pod_rules:
            if gpu or not rule.check.gpu_only:
                _collect(rule, result, ref, sev, seen_problems, analysis)
    return result


def _collect(rule: Rule, result: EvalResult, ref: ObjectRef, severities: dict[str, Severity],
             seen_problems: set[tuple[str, str]], *target: Any) -> None:
    try:
        violations: list[Violation] = list(rule.check.evaluate(*target, rule.prepared))
    except Exception as exc:  # a bug in one check must not take the linter or the webhook down
        result.problems.append(Problem(f"internal error in rule {rule.id}: {type(exc).__name__}: {exc}", "",
                                       rule.id, internal=True))
        return
    if not violations:
        return
    severity = severities.get(rule.id, rule.severity)
    for v in violations:
        if v.input_error:
            key = (v.pointer, v.message)
            if key not in seen_problems:  # several pods of one object may share an annotation
                seen_problems.add(key)
                result.problems.append(Problem(v.message, v.pointer, rule.id))
            continue
        result.findings.append(Finding(rule.id, severity, v.message, ref, v.pointer, v.container, v.fix))
