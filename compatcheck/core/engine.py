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

from compatcheck.core.checks.base import (
    EvalContext,
    InputProblem,
    ObjectTarget,
    Outcome,
    PodAnalysis,
    container_gpu_requests,
    quantity_int,
)
from compatcheck.core.cluster import is_gpu_resource, is_other_vendor_gpu_resource, required_terms
from compatcheck.core.discovery import discover, is_custom_resource
from compatcheck.core.jsonutil import Json, JsonObject, mapping, sequence
from compatcheck.core.knowledge import ASSUMED_MARK
from compatcheck.core.kserve import resolve_predictors
from compatcheck.core.llmaz import resolve_playground
from compatcheck.core.model import Diagnostic, DuplicateKey, Finding, ObjectRef, Severity
from compatcheck.core.pointers import escape_token
from compatcheck.core.rules import Rule, RuleSet
from compatcheck.core.shapes import pod_spec_problems
from compatcheck.core.workloads import (
    KindTable,
    PodTarget,
    api_group,
    object_ref,
    pod_targets,
    targets_at,
    workload_kind,
)


@dataclass
class EvalResult:
    findings: list[Finding] = field(default_factory=list)
    # What is not a finding: bad input inside the object (kind "input", at a pointer) and checks that raised
    # (kind "internal"), each naming its rule. ``path`` is "": the caller knows the file, if any.
    problems: list[Diagnostic] = field(default_factory=list)
    # The object's pod targets, for callers that need them next (suppressions); None when not computed.
    pods: list[PodTarget] | None = None
    # Coverage: whether the object asks for a GPU, and what of it could not be checked (pointer, reason).
    gpu: bool = False
    unchecked: list[tuple[str, str]] = field(default_factory=list)
    # DeviceClasses of GPU claims in neither the input nor the cluster, read as NVIDIA's driver chart installs them:
    # (pointer, message), a note per pod and class in lint's output (the checks read them as assumed, on purpose).
    assumed_classes: list[tuple[str, str]] = field(default_factory=list)

    @property
    def checked(self) -> bool:
        """A GPU object is checked when nothing of it was left unchecked, or when findings (other than the
        runtime being unknown) already give a verdict on it."""
        return not self.unchecked or any(f.rule_id != RUNTIME_UNKNOWN for f in self.findings)


RUNTIME_UNKNOWN = "cuda-runtime-unknown"


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
    pods = pod_targets(obj, ctx.kb.kinds)
    discovered = False
    if not pods and is_custom_resource(obj):
        # A kind nobody listed, or a listed one with no pod spec where its row reads: found by their shape
        pods = targets_at(obj, discover(obj))
        discovered = bool(pods)
    resolve_predictors(obj, pods, ctx.serving_runtimes)  # KServe: the runtime a model format runs on
    resolve_playground(obj, pods, ctx.llmaz)  # llmaz: a Playground's model flavors and backend runtime
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
            _collect(rule, _run(rule, analysis, ctx, result), result, ref, sev, seen_problems,
                     fixable=not (pod.flat or discovered), assumed=ctx.driver_policy.assumed_severity)
        for pointer, message in analysis.dra_notes:  # DRA claims that could not be checked: said, not silent
            if (pointer, message) not in seen_problems:
                seen_problems.add((pointer, message))
                result.problems.append(Diagnostic("", message, pointer=pointer, severity=Severity.INFO, kind="note"))
        for note in assumed_classes(analysis):
            if note not in result.assumed_classes:
                result.assumed_classes.append(note)
        if analysis.is_gpu_pod or pod.unknown_gpu:
            result.gpu = True
            result.unchecked.extend(_unchecked(analysis, ref, discovered))
            if discovered:
                where = pod.template_pointer or pod.pointer
                what = (f"{ref.kind} ({api_group(ref.api_version or '')}) "
                        + ("has no pod spec where the workload-kinds table reads it" if workload_kind(obj, ctx.kb.kinds)
                           else "is not in the workload-kinds table"))
                message = (f"{what}: the pod {'template' if pod.template_pointer else 'spec'} at {where} was found by "
                           "its shape and checked as a pod (a row in a rules directory's data/ reads it as its "
                           "operator does; docs/workloads.md)")
                result.problems.append(Diagnostic("", message, pointer=where, severity=Severity.INFO, kind="note"))
        else:
            other = _other_vendor_gpus(pod)
            if other:  # an AMD or Intel GPU: a GPU workload, which the CUDA checks do not concern: said, not silent
                result.gpu = True
                result.unchecked.extend(other)
    if discovered and not result.gpu:
        stray = _stray_gpu_request(obj, [p.pointer for p in pods])
        if stray is not None:  # pods found by shape, and a GPU request in none of them: said, never silent
            pointer, resource, value = stray
            result.gpu = True
            result.unchecked.append((pointer, f"GPU request not read: {resource}: {value!r} at {pointer} is in none "
                                              "of the pod specs found by shape (a patch over a template, or fields "
                                              f"its operator reads; a row in the workload-kinds table reads {ref.kind} "
                                              "as its operator does)"))
    return result


def _stray_gpu_request(obj: JsonObject, pod_pointers: list[str]) -> tuple[str, str, Json] | None:
    """The first GPU request (a ``limits`` or ``requests`` mapping naming a GPU resource, in a quantity other than 0)
    in ``obj``'s spec outside the pod specs at ``pod_pointers``, with its pointer."""
    stack: list[tuple[Json, str, int]] = [(obj.get("spec"), "/spec", 0)]
    budget = 20_000
    while stack and budget > 0:
        node, pointer, depth = stack.pop()
        budget -= 1
        if depth > 24 or any(pointer == p or pointer.startswith(p + "/") for p in pod_pointers):
            continue
        if isinstance(node, dict):
            for section in ("limits", "requests"):
                values = node.get(section)
                if isinstance(values, dict):
                    for k, v in values.items():
                        q = quantity_int(v)
                        if is_gpu_resource(str(k)) and (q is None or q > 0):
                            return f"{pointer}/{section}/{escape_token(str(k))}", str(k), v
            stack.extend((v, f"{pointer}/{escape_token(str(k))}", depth + 1) for k, v in reversed(list(node.items()))
                         if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend((v, f"{pointer}/{i}", depth + 1) for i, v in reversed(list(enumerate(node)))
                         if isinstance(v, dict | list))
    return None


def _check(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise OverBudget("over its time budget")


def _pins_nvidia_labels(spec: JsonObject) -> bool:
    """Whether the pod's node selection names a GPU Feature Discovery label (a driver, CUDA or GPU pin)."""
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict) and any(str(k).startswith("nvidia.com/") for k in selector):
        return True
    return any(isinstance(e, dict) and str(e.get("key", "")).startswith("nvidia.com/")
               for term in required_terms(spec) or [] for e in sequence(term.get("matchExpressions")))


def assumed_classes(analysis: PodAnalysis) -> list[tuple[str, str]]:
    """The DeviceClasses of the pod's GPU requests that are in neither the input nor --nodes (read as NVIDIA's DRA
    driver chart installs them): one note per pod and class, naming it."""
    out: dict[str, tuple[str, str]] = {}
    for r in analysis.dra_gpu_requests:
        for ra in r.alternatives:
            cls = ra.device_class
            if cls is not None and cls.source not in ("input", "cluster") and cls.name not in out:
                out[cls.name] = (r.pointer, f"DeviceClass {cls.name!r} of {r.what} is in neither the input nor "
                                            f"--nodes: read as {cls.source} defines it")
    return list(out.values())


def asks_for_gpu(obj: JsonObject, kinds: KindTable | None = None) -> bool:
    """Whether ``obj`` (read as its kind, or by shape) has a container that asks for a GPU resource in a quantity
    other than 0 (a placeholder counts): for objects that are not evaluated (unrendered templates)."""
    pods = pod_targets(obj, kinds)
    if not pods and is_custom_resource(obj):
        pods = targets_at(obj, discover(obj))
    return any((quantity_int(v) or 0) > 0 or quantity_int(v) is None
               for pod in pods for c in pod.containers for v in container_gpu_requests(c).values())


def _other_vendor_gpus(pod: PodTarget) -> list[tuple[str, str]]:
    """A not-checked record for each container that asks for another vendor's GPU (``amd.com/gpu``,
    ``gpu.intel.com/*``) in a quantity other than 0 (a placeholder counts), at its first such request."""
    out: list[tuple[str, str]] = []
    for c in pod.containers:
        res = mapping(c.data.get("resources"))
        found: tuple[str, str] | None = None
        for section in ("limits", "requests"):
            for k, v in mapping(res.get(section)).items():
                q = quantity_int(v)
                if found is None and is_other_vendor_gpu_resource(str(k)) and (q is None or q > 0):
                    found = (f"{c.pointer}/resources/{section}/{escape_token(str(k))}", str(k))
        if found is not None:
            out.append((found[0], f"not an NVIDIA GPU: {found[1]} in container {c.name}: compatcheck checks CUDA "
                                  "only"))
    return out


def _unchecked(analysis: PodAnalysis, ref: ObjectRef, discovered: bool) -> list[tuple[str, str]]:
    """What of a GPU pod could not be checked, and why (the coverage's not-checked reasons)."""
    pod = analysis.pod
    out: list[tuple[str, str]] = [(p, f"GPU request not read: {why}") for p, why in pod.unknown_gpu]
    if discovered:
        out.append((pod.template_pointer or pod.pointer, f"kind found only by structure: {ref.kind} at "
                                                         f"{pod.template_pointer or pod.pointer}"))
    for c, requests in analysis.gpu_containers:
        for resource, value in requests.items():
            if quantity_int(value) is None:
                out.append((f"{c.pointer}/resources", f"placeholder in a quantity: {resource}: {value!r} in "
                                                      f"container {c.name}"))
        runtime = analysis.runtime(c)
        if runtime.version is None:
            if pod.unknown_image:  # an image another object (not in the input) gives: named
                out.extend((p, f"image CUDA unknown: {why}") for p, why in pod.unknown_image)
            elif runtime.absent and "not an image reference" in runtime.problem:
                out.append((runtime.pointer, f"template not rendered: {runtime.problem} (container {c.name})"))
            elif not runtime.absent:
                out.append((runtime.pointer, f"image CUDA unknown: {runtime.problem or runtime.origin} "
                                             f"(container {c.name})"))
    for pointer, message in analysis.dra_notes:
        out.append((pointer, f"DRA: {message}"))
    for pointer, message in assumed_classes(analysis):
        out.append((pointer, f"DRA: {message}"))
    if analysis.dra_gpu_requests and not analysis.dra_inventory_known:
        out.append((analysis.dra_gpu_requests[0].pointer, "DRA: no ResourceSlices in the input or --nodes: the devices "
                                                          "its claims would get were not allocated"))
    if analysis.ctx.cluster is None and not analysis.pinned_classes and not analysis.dra_pins and \
            not _pins_nvidia_labels(pod.spec):
        out.append((pod.pointer, "no nodes known: no --nodes file, and its node selection pins no GPU or driver"))
    return out


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
