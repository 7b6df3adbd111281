"""The rules engine: evaluate one Kubernetes object against a RuleSet in a context.

Pure: no I/O, no printing, no aiohttp. The CLI and the webhook both call ``evaluate``; findings carry
RFC 6901 pointers relative to the object, and the caller maps them to lines (CLI) or patches (webhook).
A check that raises is contained: it becomes a problem entry naming the rule, never a crash.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from compatcheck.core.checks.base import EvalContext, PodAnalysis, Violation
from compatcheck.core.model import Finding, ObjectRef, Severity
from compatcheck.core.rules import Rule, RuleSet
from compatcheck.core.workloads import PodTarget, object_ref, pod_targets


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
        _collect(rule, _run(rule, result, target, ctx), result, ref, sev, seen_problems)
    if not pods:
        return result
    online = ctx.cluster is not None
    for pod in pods:
        analysis = PodAnalysis(pod, ctx)
        # Most rules only concern GPU pods; the split is made once per rule set, not tested per rule.
        for rule in rules.pod_rules_for(gpu=analysis.is_gpu_pod, online=online):
            _collect(rule, _run(rule, result, analysis), result, ref, sev, seen_problems)
    return result


def _run(rule: Rule, result: EvalResult, *target: Any) -> list[Violation]:
    try:
        return list(rule.check.evaluate(*target, rule.prepared))
    except Exception as exc:  # a bug in one check must not take the linter or the webhook down
        result.problems.append(Problem(f"internal error in rule {rule.id}: {type(exc).__name__}: {exc}", "",
                                       rule.id, internal=True))
        return []


def _collect(rule: Rule, violations: list[Violation], result: EvalResult, ref: ObjectRef,
             severities: dict[str, Severity], seen_problems: set[tuple[str, str]]) -> None:
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
