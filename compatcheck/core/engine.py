"""The rules engine: evaluate one Kubernetes object against a RuleSet in a context.

Pure: no I/O, no printing, no aiohttp. The CLI and the webhook both call ``evaluate``; findings carry
RFC 6901 pointers relative to the object, and the caller maps them to lines (CLI) or patches (webhook).
Every check type's ``evaluate(target, ctx, params)`` yields ``Outcome``s: a ``Violation`` becomes a finding,
an ``InputProblem`` an input diagnostic. A check that raises is contained: it becomes an internal
diagnostic naming the rule, never a crash.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from compatcheck.core.checks.base import EvalContext, InputProblem, ObjectTarget, Outcome, PodAnalysis
from compatcheck.core.jsonutil import JsonObject
from compatcheck.core.knowledge import ASSUMED_MARK
from compatcheck.core.kserve import resolve_predictors
from compatcheck.core.model import Diagnostic, DuplicateKey, Finding, ObjectRef, Severity
from compatcheck.core.rules import Rule, RuleSet
from compatcheck.core.shapes import pod_spec_problems
from compatcheck.core.workloads import PodTarget, object_ref, pod_targets


@dataclass
class EvalResult:
    findings: list[Finding] = field(default_factory=list)
    # What is not a finding: bad input inside the object (kind "input", at a pointer) and checks that raised
    # (kind "internal"), each naming its rule. ``path`` is "": the caller knows the file, if any.
    problems: list[Diagnostic] = field(default_factory=list)
    # The object's pod targets, for callers that need them next (suppressions); None when not computed.
    pods: list[PodTarget] | None = None


# Every object gets a time budget (seconds of wall clock), checked between rules: an input that makes a check slow
# (a pod with thousands of containers, a costly selector) is said to be unchecked, never a stuck pipeline or webhook.
OBJECT_BUDGET = 10.0


class OverBudget(Exception):
    """The object's evaluation went past its deadline: what was found so far is not an answer."""


# The deadline of whatever runs now in this thread or task (a webhook review, which evaluates several objects: the
# object, its old version, fixes), for callers that do not pass one; None: none.
DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("compatcheck_deadline", default=None)


def evaluate(obj: JsonObject, ruleset: RuleSet | Iterable[Rule], ctx: EvalContext, *,
             severities: dict[str, Severity] | None = None, duplicates: Sequence[DuplicateKey] = (),
             deadline: float | None = None) -> EvalResult:
    """Findings for ``obj``. ``severities`` overrides rule severities (config); absent rules run as declared.
    ``duplicates``: the keys the YAML reader saw twice in ``obj`` (it kept the last, as kubectl does).
    ``deadline`` (a ``time.monotonic()`` value; else ``DEADLINE``'s): raise ``OverBudget`` once it has passed,
    checked between rules."""
    deadline = deadline if deadline is not None else DEADLINE.get()
    rules = ruleset if isinstance(ruleset, RuleSet) else RuleSet({r.id: r for r in ruleset})
    pods = pod_targets(obj)
    resolve_predictors(obj, pods, ctx.serving_runtimes)  # KServe: the runtime a model format runs on
    result = EvalResult(pods=pods)
    ref = object_ref(obj)
    sev = severities or {}
    seen_problems: set[tuple[str, str]] = set()
    target = ObjectTarget(obj, pods, tuple(duplicates))
    for rule in rules.object_rules:
        _check(deadline)
        _collect(rule, _run(rule, target, ctx, result), result, ref, sev, seen_problems,
                 assumed=ctx.driver_policy.assumed_severity)
    if not pods:
        return result
    online = ctx.cluster is not None
    for pod in pods:
        shape = [] if pod.flat else pod_spec_problems(pod.spec, pod.pointer)
        if shape:  # the API server refuses the object: no rule reads a value that cannot exist
            for pointer, message in shape:
                result.problems.append(Diagnostic("", f"{message} (the API server refuses the object; its pod spec "
                                                      "was not checked)", pointer=pointer, kind="input"))
            continue
        analysis = PodAnalysis(pod, ctx)
        # Most rules only concern GPU pods; the split is made once per rule set, not tested per rule.
        for rule in rules.pod_rules_for(gpu=analysis.is_gpu_pod, online=online):
            _check(deadline)
            # An operator's flat spec is read as a container it is not: no patch is offered against it.
            _collect(rule, _run(rule, analysis, ctx, result), result, ref, sev, seen_problems, fixable=not pod.flat,
                     assumed=ctx.driver_policy.assumed_severity)
        for pointer, message in analysis.dra_notes:  # DRA claims that could not be checked: said, not silent
            if (pointer, message) not in seen_problems:
                seen_problems.add((pointer, message))
                result.problems.append(Diagnostic("", message, pointer=pointer, severity=Severity.INFO, kind="note"))
    return result


def _check(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise OverBudget("over its time budget")


def _run(rule: Rule, target: PodAnalysis | ObjectTarget, ctx: EvalContext, result: EvalResult) -> list[Outcome]:
    try:
        return list(rule.evaluate(target, ctx))
    except Exception as exc:  # a bug in one check must not take the linter or the webhook down
        result.problems.append(Diagnostic("", f"internal error in rule {rule.id}: {type(exc).__name__}: {exc}",
                                          severity=Severity.ERROR, kind="internal", rule_id=rule.id))
        return []


def _collect(rule: Rule, outcomes: list[Outcome], result: EvalResult, ref: ObjectRef,
             severities: dict[str, Severity], seen_problems: set[tuple[str, str]], *, fixable: bool = True,
             assumed: Severity | None = None) -> None:
    if not outcomes:
        return
    severity = severities.get(rule.id, rule.severity)
    for o in outcomes:
        # decided from the newest release a table knows (and saying so): the policy's severity, if it sets one
        own = assumed if assumed is not None and ASSUMED_MARK in getattr(o, "message", "") else severity
        if isinstance(o, InputProblem):
            key = (o.pointer, o.message)
            if key not in seen_problems:  # several pods of one object may share an annotation
                seen_problems.add(key)
                result.problems.append(Diagnostic("", o.message, pointer=o.pointer, kind="input", rule_id=rule.id))
            continue
        result.findings.append(Finding(rule.id, own, o.message, ref, o.pointer, o.container,
                                       o.fix if fixable else None))
