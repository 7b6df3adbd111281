"""admission.review with synthetic rules: the exact AdmissionReview answered for each path (skips, failure modes,
denials, warnings and their budgets, audit annotations, the UPDATE ratchet, mutations), the Decision logged, and
the evaluation cache's keys and bounds."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from compatcheck.core.admission import (
    AdmissionSettings,
    Decision,
    EvaluationCache,
    ReviewError,
    parse_request,
    review,
)
from compatcheck.core.checks.base import (
    NO_PARAMS_SCHEMA,
    EvalContext,
    InputProblem,
    Outcome,
    PodAnalysis,
    PodCheck,
    Violation,
    no_params,
)
from compatcheck.core.config import Config, Exemption
from compatcheck.core.knowledge import KnowledgeBase
from compatcheck.core.model import Applicability, Fix, ObjectRef, PatchOp, Severity
from compatcheck.core.rules import Rule, RuleSet

CTX = EvalContext(KnowledgeBase())
CONFIG = Config()  # one, so that the evaluation cache sees the same severities from one review to the next


def rule(rule_id: str, outcomes: Callable[[PodAnalysis], Iterable[Outcome]], *,
         severity: Severity = Severity.ERROR, fixes: Applicability | None = None, mutate: bool = False) -> Rule:
    check = PodCheck(name=f"check-{rule_id}", description="d", params_schema=NO_PARAMS_SCHEMA, prepare=no_params,
                     evaluate=lambda a, ctx, p: outcomes(a), gpu_only=False, fix_applicability=fixes)
    return Rule(rule_id, "summary", severity, check, {}, "why", "how", (), "test", mutate_by_default=mutate)


def env(a: PodAnalysis, name: str) -> tuple[int, Any] | None:
    """(index, value) of env var ``name`` of the first container."""
    for i, e in enumerate(a.pod.containers[0].data.get("env", [])):
        if e.get("name") == name:
            return i, e.get("value")
    return None


def when_env(name: str, *, message: str | None = None) -> Callable[[PodAnalysis], Iterable[Outcome]]:
    """A violation at env var ``name`` of the first container while it is set (the message names its value)."""
    def check(a: PodAnalysis) -> Iterable[Outcome]:
        found = env(a, name)
        if found is not None:
            yield Violation(message or f"{name} is {found[1]}", f"{a.pod.containers[0].pointer}/env/{found[0]}/value",
                            a.pod.containers[0].name)
    return check


def pod(*env_pairs: tuple[str, str], name: str | None = "p", namespace: str | None = "ns",
        **meta: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {**({"name": name} if name else {}), **({"namespace": namespace} if namespace else {}),
                                **meta}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [
        {"name": "c", "image": "img", "env": [{"name": k, "value": v} for k, v in env_pairs]}]}}


def body(obj: dict[str, Any] | None, *, operation: str = "CREATE", old: dict[str, Any] | None = None,
         api_version: str = "admission.k8s.io/v1", uid: str = "u-1", **extra: Any) -> dict[str, Any]:
    target = obj or old or {}
    return {"apiVersion": api_version, "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": target.get("kind")}, "operation": operation,
        "object": obj, "oldObject": old, **extra}}


def run(rules: Iterable[Rule], obj: dict[str, Any] | None, endpoint: str = "validate", *,
        cache: EvaluationCache | None = None, undecidable: str | None = None, **kw: Any) -> tuple[Any, Decision]:
    b = kw.pop("review_body", None) or body(obj, **{k: kw.pop(k) for k in ("operation", "old") if k in kw})
    rs = RuleSet({r.id: r for r in rules})
    kw.setdefault("config", CONFIG)
    response, decision = review(b, endpoint, rs, CTX, AdmissionSettings(**kw), cache,  # type: ignore[arg-type]
                                undecidable)
    assert set(response) == {"apiVersion", "kind", "response"}
    assert (response["apiVersion"], response["kind"]) == (b["apiVersion"], "AdmissionReview")
    assert response["response"]["uid"] == b["request"]["uid"]
    return {k: v for k, v in response["response"].items() if k != "uid"}, decision


# ------------------------------------------------------------------------------------------ parsing


def review_of(**request: Any) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


@pytest.mark.parametrize(("raw", "message"), [
    ([], "request body must be a JSON object (an AdmissionReview)"),
    ({"apiVersion": "admission.k8s.io/v1", "kind": "Pod"}, "expected kind AdmissionReview with apiVersion in "
     "['admission.k8s.io/v1', 'admission.k8s.io/v1beta1'], got kind='Pod' apiVersion='admission.k8s.io/v1'"),
    ({"apiVersion": "admission.k8s.io/v2", "kind": "AdmissionReview"}, "expected kind AdmissionReview with "
     "apiVersion in ['admission.k8s.io/v1', 'admission.k8s.io/v1beta1'], got kind='AdmissionReview' "
     "apiVersion='admission.k8s.io/v2'"),
    ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": []},
     "AdmissionReview has no request object"),
    (review_of(uid=""), "AdmissionReview request.uid must be a non-empty string"),
    (review_of(uid=7), "AdmissionReview request.uid must be a non-empty string"),
    (review_of(uid="x", operation="PATCH"), "AdmissionReview request.operation 'PATCH' is not "
                                            "CREATE/UPDATE/DELETE/CONNECT"),
    (review_of(uid="x", operation="create"), "AdmissionReview request.operation 'create' is not "
                                             "CREATE/UPDATE/DELETE/CONNECT"),
    (review_of(uid="x", operation="CREATE", object=[1]), "AdmissionReview request.object must be an object or null"),
    (review_of(uid="x", operation="UPDATE", object={}, oldObject="x"),
     "AdmissionReview request.oldObject must be an object or null"),
])
def test_malformed_reviews_raise_with_the_reason(raw: Any, message: str) -> None:
    with pytest.raises(ReviewError) as err:
        parse_request(raw)
    assert str(err.value) == message


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE", "DELETE", "CONNECT"])
def test_every_operation_is_read(operation: str) -> None:
    assert parse_request(review_of(uid="x", operation=operation)).operation == operation


def test_a_request_is_read_field_by_field() -> None:
    obj, old = pod(), pod(name="q")
    req = parse_request({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {
        "uid": "u", "operation": "UPDATE", "kind": {"kind": "Pod"}, "object": obj, "oldObject": old, "dryRun": 1}})
    assert (req.api_version, req.uid, req.operation, req.kind, req.obj, req.old, req.dry_run) == (
        "admission.k8s.io/v1beta1", "u", "UPDATE", "Pod", obj, old, True)


@pytest.mark.parametrize(("request_kind", "obj", "old", "kind"), [
    ({"kind": "Deployment"}, {"kind": "Pod"}, None, "Deployment"),  # the request's kind first
    ({}, {"kind": "Pod"}, {"kind": "Old"}, "Pod"),  # then the object's
    ("junk", None, {"kind": "Old"}, "Old"),  # then the old object's (a DELETE)
    (None, None, None, ""),
])
def test_the_kind_comes_from_the_request_then_the_objects(request_kind: Any, obj: Any, old: Any, kind: str) -> None:
    req = parse_request(review_of(uid="x", operation="DELETE", kind=request_kind, object=obj, oldObject=old))
    assert req.kind == kind and req.dry_run is False


# ------------------------------------------------------------------------------------------ skipped requests

FAILING = rule("r", lambda a: [Violation("bad", "/spec")])


@pytest.mark.parametrize(("operation", "with_obj"), [("DELETE", True), ("CONNECT", True), ("UPDATE", False)])
def test_deletes_connects_and_requests_without_an_object_are_allowed(operation: str, with_obj: bool) -> None:
    old = pod(name="old", namespace="old-ns")
    answer, decision = run([FAILING], pod() if with_obj else None, operation=operation, old=old)
    assert answer == {"allowed": True}
    assert (decision.skipped, decision.allowed, decision.operation) == ("operation", True, operation)
    if not with_obj:
        assert (decision.namespace, decision.name, decision.kind) == ("old-ns", "old", "Pod")


def test_the_opt_out_label_skips_only_when_true() -> None:
    answer, decision = run([FAILING], pod(labels={"compatcheck.io/ignore": "true"}))
    assert answer == {"allowed": True} and decision.skipped == "label compatcheck.io/ignore=true"
    answer, decision = run([FAILING], pod(labels={"compatcheck.io/ignore": "false"}))
    assert answer["allowed"] is False and decision.skipped is None


OWNER = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": True}]


@pytest.mark.parametrize(("owners", "owned"), [
    (OWNER, True), ([{**OWNER[0], "controller": False}], False), ([{**OWNER[0], "controller": "true"}], False),
    ([{k: v for k, v in OWNER[0].items() if k != "controller"}], False), (["junk", OWNER[0]], True),
    ({"controller": True}, False)])
def test_owned_pods_are_skipped_when_configured(owners: Any, owned: bool) -> None:
    answer, decision = run([FAILING], pod(ownerReferences=owners), owned_pods="skip")
    assert (answer == {"allowed": True}, decision.skipped) == ((True, "owned pod") if owned else (False, None))


def test_an_owned_object_that_is_not_a_pod_is_reviewed() -> None:
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs", "ownerReferences": OWNER},
          "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}
    answer, decision = run([FAILING], rs, owned_pods="skip")
    assert answer["allowed"] is False and decision.skipped is None


def test_owned_pods_are_warned_about_not_denied_by_default() -> None:
    answer, decision = run([FAILING], pod(ownerReferences=OWNER))
    assert answer == {"allowed": True, "warnings": ["r: bad"]}
    assert decision.allowed is True and decision.denied_rules == []
    answer, _decision = run([FAILING], pod(ownerReferences=OWNER), owned_pods="enforce")
    assert answer["allowed"] is False


# ------------------------------------------------------------------------------------------ failure modes


def test_an_undecidable_request_follows_the_failure_mode() -> None:
    answer, decision = run([FAILING], pod(), undecidable="the cluster view has not synced")
    assert answer == {"allowed": True, "warnings": ["compatcheck: not evaluated (the cluster view has not synced)"]}
    assert (decision.allowed, decision.internal_error) == (True, "the cluster view has not synced")
    answer, decision = run([FAILING], pod(), undecidable="x" * 500, failure_mode="deny")
    message = f"compatcheck could not evaluate this object ({'x' * 500}); failure mode is deny"[:399] + "…"
    assert answer == {"allowed": False, "status": {"code": 500, "message": message}}
    assert (decision.allowed, decision.internal_error) == (False, "x" * 500)


def _raises(message: str) -> Callable[[PodAnalysis], Iterable[Outcome]]:
    def check(a: PodAnalysis) -> Iterable[Outcome]:
        raise RuntimeError(message)
    return check


@pytest.mark.parametrize("endpoint", ["validate", "mutate"])
def test_a_rule_that_raises_is_answered_by_the_failure_mode_naming_the_first(endpoint: str) -> None:
    rules = [rule("a", _raises("first"), fixes=Applicability.SAFE, mutate=True),
             rule("b", _raises("second"), fixes=Applicability.SAFE, mutate=True), FAILING]
    answer, decision = run(rules, pod(), endpoint)
    error = "internal error in rule a: RuntimeError: first"
    assert answer == {"allowed": True, "warnings": [f"compatcheck: not evaluated ({error})"]}
    assert decision.internal_error == error and decision.findings == []
    answer, decision = run(rules, pod(), endpoint, failure_mode="deny")
    assert answer["allowed"] is False and decision.allowed is False
    assert answer["status"]["message"] == f"compatcheck could not evaluate this object ({error}); failure mode is deny"


def test_an_exception_outside_the_rules_is_answered_by_the_failure_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    import compatcheck.core.admission as admission

    monkeypatch.setattr(admission, "evaluate", lambda *a, **k: (_ for _ in ()).throw(ValueError("v")))
    answer, _decision = run([FAILING], pod())
    assert answer == {"allowed": True, "warnings": ["compatcheck: not evaluated (ValueError: v)"]}


# ------------------------------------------------------------------------------------------ validation


def many(n: int, *, severity: Severity = Severity.ERROR, width: int = 10) -> Rule:
    """A rule with ``n`` findings whose warnings ("many: " + message) are ``width`` + 6 characters long."""
    return rule("many", lambda a: [Violation(f"{i:0{width}d}", f"/f{i}") for i in range(n)], severity=severity)


def test_a_denial_lists_the_blocking_findings_and_warns_the_rest() -> None:
    rules = [rule("z-err", lambda a: [Violation("second  error\n spread", "/b")]),
             rule("a-err", lambda a: [Violation("first error", "/a")]),
             rule("warn", lambda a: [Violation("a warning", "/w")], severity=Severity.WARNING),
             rule("info", lambda a: [Violation("only info", "/i")], severity=Severity.INFO),
             rule("input", lambda a: [InputProblem("unreadable   annotation", "/metadata/annotations/x")])]
    answer, decision = run(rules, pod())
    assert answer == {"allowed": False, "status": {"code": 403, "reason": "Forbidden", "message": (
        "compatcheck denied Pod ns/p:\n- a-err: first error\n- z-err: second error spread")},
        "warnings": ["warn: a warning", "unreadable annotation"]}
    assert decision.allowed is False and decision.denied_rules == ["a-err", "z-err"]
    assert [f.rule_id for f in decision.findings] == ["a-err", "info", "warn", "z-err"]


@pytest.mark.parametrize(("obj", "what"), [
    (pod(name="p", namespace="ns"), "Pod ns/p"), (pod(name="p", namespace=None), "Pod p"),
    (pod(name=None, namespace="ns"), "Pod ns/"), (pod(name=None, generateName="g-"), "Pod ns/g-*")])
def test_a_denial_names_the_object(obj: dict[str, Any], what: str) -> None:
    answer, decision = run([FAILING], obj)
    assert answer["status"]["message"] == f"compatcheck denied {what}:\n- r: bad"
    assert (decision.namespace, decision.name) == (obj["metadata"].get("namespace"), what.partition("/")[2] or (
        "p" if what == "Pod p" else None))


@pytest.mark.parametrize(("n", "more"), [(8, None), (9, "- ... and 1 more (compatcheck lint shows them all)"),
                                         (12, "- ... and 4 more (compatcheck lint shows them all)")])
def test_a_denial_lists_at_most_eight_findings(n: int, more: str | None) -> None:
    answer, decision = run([many(n)], pod())
    lines = answer["status"]["message"].splitlines()
    assert lines[1:9] == [f"- many: {i:010d}" for i in range(min(n, 8))]
    assert lines[9:] == ([more] if more else [])
    assert decision.denied_rules == ["many"] and "warnings" not in answer


def test_denial_lines_are_cut_to_200_characters() -> None:
    answer, _decision = run([rule("r", lambda a: [Violation("y" * 300, "/a")])], pod())
    assert answer["status"]["message"].splitlines()[1] == ("- r: " + "y" * 300)[:199] + "…"


@pytest.mark.parametrize(("deny_on", "allowed"), [(Severity.ERROR, True), (Severity.WARNING, False),
                                                  (Severity.INFO, False)])
def test_deny_on_sets_the_lowest_blocking_severity(deny_on: Severity, allowed: bool) -> None:
    answer, decision = run([rule("w", lambda a: [Violation("m", "/a")], severity=Severity.WARNING)], pod(),
                           deny_on=deny_on)
    assert answer["allowed"] is allowed and decision.allowed is allowed
    assert answer.get("warnings") == (["w: m"] if allowed else None)


def test_warn_mode_never_denies() -> None:
    answer, decision = run([FAILING, many(2, severity=Severity.WARNING)], pod(), mode="warn")
    assert answer == {"allowed": True, "warnings": ["r: bad", "many: 0000000000", "many: 0000000001"]}
    assert decision.allowed is True and decision.denied_rules == []


def test_no_findings_no_warnings() -> None:
    assert run([rule("quiet", lambda a: [])], pod())[0] == {"allowed": True}


def test_audit_mode_annotates_and_never_warns() -> None:
    rules = [FAILING, rule("i", lambda a: [Violation("info", "/i")], severity=Severity.INFO),
             rule("w", lambda a: [Violation("warning", "/w")], severity=Severity.WARNING),
             rule("input", lambda a: [InputProblem("unreadable", "/x")])]
    answer, decision = run(rules, pod(), mode="audit")
    assert answer == {"allowed": True, "auditAnnotations": {"compatcheck.io/findings": "r: bad; w: warning"}}
    assert decision.allowed is True
    answer, _ = run([rule("i", lambda a: [Violation("one", "/i"), Violation("two", "/j")], severity=Severity.INFO)],
                    pod(), mode="audit")  # nothing at warning or above: every finding
    assert answer == {"allowed": True, "auditAnnotations": {"compatcheck.io/findings": "i: one; i: two"}}
    assert run([rule("quiet", lambda a: [])], pod(), mode="audit")[0] == {"allowed": True}
    answer, _ = run([rule("long", lambda a: [Violation("z" * 2000, "/x")])], pod(), mode="audit")
    assert answer["auditAnnotations"]["compatcheck.io/findings"] == ("long: " + "z" * 2000)[:999] + "…"


@pytest.mark.parametrize(("n", "width", "kept", "more"), [
    (40, 92, 40, None),  # 40 warnings of 98 characters: 3,920 characters, exactly the budget
    (41, 92, 40, "compatcheck: 1 more findings; run compatcheck lint for all of them"),
    (45, 200, 32, "compatcheck: 13 more findings; run compatcheck lint for all of them"),  # cut to 120 each
])
def test_warnings_stay_within_the_api_servers_budget(n: int, width: int, kept: int, more: str | None) -> None:
    rules = [many(n, severity=Severity.WARNING, width=width), rule("input", lambda a: [InputProblem("p" * 200, "/x")])]
    answer, _decision = run(rules, pod())
    warnings = answer["warnings"]
    full = [f"many: {i:0{width}d}" for i in range(kept)]
    assert warnings[:kept] == [w if len(w) <= 120 else w[:119] + "…" for w in full]
    assert warnings[kept:] == ([more] if more else []) + ["p" * 119 + "…"]


def test_a_warning_of_exactly_120_characters_is_not_cut() -> None:
    answer, _ = run([rule("w", lambda a: [Violation("x" * 117, "/a"), Violation("y" * 118, "/b")],
                          severity=Severity.WARNING)], pod())
    assert answer["warnings"] == ["w: " + "x" * 117, "w: " + "y" * 116 + "…"]


# ------------------------------------------------------------------------------------------ the UPDATE ratchet


@pytest.mark.parametrize(("old_value", "new_value", "allowed"), [
    ("bad", "bad", True),  # the stored object had the same problem: fixing other things must stay possible
    ("bad", "worse", False),  # a new offending value is a new problem
    (None, "bad", False),  # the problem is new
])
def test_an_update_is_denied_only_for_new_problems(old_value: str | None, new_value: str, allowed: bool) -> None:
    old = pod(*([("X", old_value)] if old_value else []), ("OTHER", "1"))
    new = pod(("X", new_value), ("OTHER", "2"))
    answer, decision = run([rule("x", when_env("X"))], new, operation="UPDATE", old=old)
    assert answer["allowed"] is allowed and decision.allowed is allowed
    if allowed:
        assert answer["warnings"] == ["x: X is bad"]


def test_the_ratchet_compares_the_value_at_the_pointer_not_only_the_message() -> None:
    old, new = pod(("X", "bad")), pod(("X", "bad!"))
    answer, _ = run([rule("x", when_env("X", message="X is set"))], new, operation="UPDATE", old=old)
    assert answer["allowed"] is False


def test_the_ratchet_compares_rule_and_container() -> None:
    old, new = pod(("X", "bad")), pod(("X", "bad"))
    new["spec"]["containers"][0]["name"] = "renamed"
    answer, _ = run([rule("x", when_env("X", message="same"))], new, operation="UPDATE", old=old)
    assert answer["allowed"] is False


def test_a_finding_on_a_whole_pod_spec_or_container_is_compared_by_its_message() -> None:
    def whole(a: PodAnalysis) -> Iterable[Outcome]:
        c = a.pod.containers[0]
        yield Violation(f"spec with {len(c.data['env'])} env", a.pod.pointer)
        yield Violation(f"container with {len(c.data['env'])} env", c.pointer, c.name)

    old, new = pod(("A", "1")), pod(("A", "2"))  # the spec and the container changed, the messages did not
    answer, _ = run([rule("whole", whole)], new, operation="UPDATE", old=old)
    assert answer == {"allowed": True, "warnings": ["whole: spec with 1 env", "whole: container with 1 env"]}
    answer, _ = run([rule("whole", whole)], pod(("A", "1"), ("B", "2")), operation="UPDATE", old=old)
    assert answer["allowed"] is False


def test_no_ratchet_on_create_or_without_the_old_object() -> None:
    answer, _ = run([rule("x", when_env("X"))], pod(("X", "bad")), operation="CREATE", old=pod(("X", "bad")))
    assert answer["allowed"] is False
    answer, _ = run([rule("x", when_env("X"))], pod(("X", "bad")), operation="UPDATE")
    assert answer["allowed"] is False


# ------------------------------------------------------------------------------------------ mutation


def fix_env(name: str, value: str, applicability: Applicability = Applicability.SAFE) -> Callable[
        [PodAnalysis], Iterable[Outcome]]:
    """A violation with a fix that sets env ``name`` to ``value`` while it is not that (appending it)."""
    def check(a: PodAnalysis) -> Iterable[Outcome]:
        c = a.pod.containers[0]
        found = env(a, name)
        if found is None or found[1] != value:
            yield Violation(f"{name} must be {value}", f"{c.pointer}/env", c.name, Fix(
                f"set {name}={value}", applicability,
                (PatchOp("add", f"{c.pointer}/env/-", {"name": name, "value": value}),)))
    return check


def patch_of(answer: dict[str, Any]) -> list[dict[str, Any]]:
    assert answer["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(answer["patch"]))  # type: ignore[no-any-return]


ADD_A = {"op": "add", "path": "/spec/containers/0/env/0", "value": {"name": "A", "value": "1"}}


def test_default_mutations_apply_safe_fixes_and_say_so() -> None:
    rules = [rule("set-a", fix_env("A", "1"), fixes=Applicability.SAFE, mutate=True), FAILING]
    answer, decision = run(rules, pod(), "mutate")
    assert {k: v for k, v in answer.items() if k != "patch"} == {
        "allowed": True, "patchType": "JSONPatch", "warnings": ["compatcheck fixed set-a: set A=1"]}
    assert patch_of(answer) == [ADD_A]
    assert decision.patched_rules == ["set-a"] and [f.rule_id for f in decision.findings] == ["set-a"]
    assert decision.allowed is True


def test_nothing_to_fix_is_no_patch() -> None:
    rules = [rule("set-a", fix_env("A", "1"), fixes=Applicability.SAFE, mutate=True)]
    answer, decision = run(rules, pod(("A", "1")), "mutate")
    assert answer == {"allowed": True} and decision.patched_rules == [] and decision.findings == []
    assert run([FAILING], pod(), "mutate")[0] == {"allowed": True}  # no fixable rule at all


@pytest.mark.parametrize(("applicability", "mutations", "allow_unsafe", "fixed"), [
    (Applicability.SAFE, None, frozenset(), True),  # the rule's default
    (Applicability.SAFE, frozenset(), frozenset(), False),  # the config turned it off
    (Applicability.SAFE, frozenset(), frozenset({"r"}), False),  # allow_unsafe is for unsafe fixes only
    (Applicability.UNSAFE, frozenset({"r"}), frozenset(), False),  # an unsafe fix needs allow_unsafe
    (Applicability.UNSAFE, None, frozenset({"r"}), True),
    (Applicability.DISPLAY_ONLY, frozenset({"r"}), frozenset({"r"}), False),
])
def test_which_fixes_the_webhook_applies(applicability: Applicability, mutations: frozenset[str] | None,
                                         allow_unsafe: frozenset[str], fixed: bool) -> None:
    rules = [rule("r", fix_env("A", "1", applicability), fixes=applicability, mutate=True)]
    answer, _ = run(rules, pod(), "mutate", mutations=mutations, allow_unsafe=allow_unsafe)
    assert ("patch" in answer) is fixed


def test_fixes_are_reapplied_until_they_converge_at_most_three_rounds() -> None:
    def never(a: PodAnalysis) -> Iterable[Outcome]:
        c = a.pod.containers[0]
        n = len(c.data["env"])
        yield Violation("again", f"{c.pointer}/env", c.name,
                        Fix(f"add {n}", Applicability.SAFE, (PatchOp("add", f"{c.pointer}/env/-", {"name": str(n)}),)))

    def image(a: PodAnalysis) -> Iterable[Outcome]:
        c = a.pod.containers[0]
        if c.data["image"] != "fixed":
            yield Violation("image", f"{c.pointer}/image", c.name, Fix(
                "set the image", Applicability.SAFE, (PatchOp("replace", f"{c.pointer}/image", "fixed"),)))

    obj = pod()
    answer, decision = run([rule("loop", never, fixes=Applicability.SAFE, mutate=True),
                            rule("once", image, fixes=Applicability.SAFE, mutate=True)], obj, "mutate")
    import jsonpatch

    fixed = jsonpatch.apply_patch(obj, patch_of(answer))
    assert fixed["spec"]["containers"][0] == {"name": "c", "image": "fixed",
                                              "env": [{"name": "0"}, {"name": "1"}, {"name": "2"}]}
    assert answer["warnings"] == ["compatcheck fixed loop: add 0", "compatcheck fixed once: set the image",
                                  "compatcheck fixed loop: add 1", "compatcheck fixed loop: add 2"]
    assert decision.patched_rules == ["loop", "once"] and len(decision.findings) == 4


def test_a_fix_that_cannot_be_applied_is_no_patch() -> None:
    def broken(a: PodAnalysis) -> Iterable[Outcome]:
        yield Violation("x", "/spec", None, Fix("replace nothing", Applicability.SAFE,
                                                (PatchOp("replace", "/spec/missing/field", 1),)))

    answer, decision = run([rule("b", broken, fixes=Applicability.SAFE, mutate=True)], pod(), "mutate")
    assert answer == {"allowed": True} and decision.patched_rules == []


def test_at_most_twenty_mutation_warnings() -> None:
    def many_fixes(a: PodAnalysis) -> Iterable[Outcome]:
        if not a.pod.annotations:
            for i in range(21):
                yield Violation("m", "/spec", None, Fix(f"add {i}", Applicability.SAFE, (
                    PatchOp("add", f"/metadata/annotations/k{i}", "v"),)))

    answer, decision = run([rule("m", many_fixes, fixes=Applicability.SAFE, mutate=True)], pod(annotations={}),
                           "mutate")
    assert answer["warnings"] == [f"compatcheck fixed m: add {i}" for i in range(20)]
    assert len(patch_of(answer)) == 21 and len(decision.findings) == 21


# ------------------------------------------------------------------------------------------ settings and logs


def test_settings_from_an_empty_config_take_the_rules_defaults() -> None:
    rules = RuleSet({r.id: r for r in [rule("m", fix_env("A", "1"), fixes=Applicability.SAFE, mutate=True),
                                       rule("n", fix_env("B", "1"), fixes=Applicability.SAFE)]})
    config = Config(annotation_exemptions=False)
    s = AdmissionSettings.from_config(config, rules)
    assert (s.mode, s.failure_mode, s.owned_pods, s.deny_on) == ("enforce", "allow", "warn", Severity.ERROR)
    assert (s.mutations, s.allow_unsafe, s.annotation_exemptions, s.config) == (
        frozenset({"m"}), frozenset(), False, config)
    s = AdmissionSettings.from_config(Config(fixes_enabled=frozenset({"n", "m"}), fixes_disabled=frozenset({"m"}),
                                             allow_unsafe=frozenset({"m", "u"})), rules)
    assert (s.mutations, s.allow_unsafe, s.annotation_exemptions) == (frozenset({"n"}), frozenset({"u"}), True)
    assert AdmissionSettings().mutations_in(rules) == frozenset({"m"})
    assert AdmissionSettings(mutations=frozenset({"x"})).mutations_in(rules) == frozenset({"x"})


def test_the_decision_log_line() -> None:
    _answer, decision = run([FAILING, rule("w", lambda a: [Violation("m", "/w")], severity=Severity.WARNING)], pod(),
                           review_body=body(pod(), dryRun=True, uid="u-9"))
    assert decision.log_fields() == {
        "uid": "u-9", "endpoint": "validate", "kind": "Pod", "namespace": "ns", "name": "p", "operation": "CREATE",
        "dryRun": True, "allowed": False, "rules": ["r", "w"], "denied": ["r"], "patched": []}
    d = Decision("u", "mutate", "Pod", None, None, "CREATE", True, False, internal_error="boom", skipped="why")
    assert d.log_fields() == {
        "uid": "u", "endpoint": "mutate", "kind": "Pod", "namespace": None, "name": None, "operation": "CREATE",
        "dryRun": False, "allowed": True, "rules": [], "denied": [], "patched": [], "error": "boom", "skipped": "why"}


def test_config_severities_apply_with_and_without_the_cache() -> None:
    milder = Config(severities={"r": Severity.WARNING})
    for cache in (None, EvaluationCache()):
        answer, _ = run([FAILING], pod(), cache=cache, config=milder)
        assert answer == {"allowed": True, "warnings": ["r: bad"]}


@pytest.mark.parametrize(("request_kind", "obj_kind", "kind"), [
    ({"kind": "Deployment"}, None, "Deployment"), ({}, "Pod", "Pod"), ({}, None, "")])
def test_the_decision_names_the_kind_of_the_request(request_kind: dict[str, Any], obj_kind: str | None,
                                                    kind: str) -> None:
    obj = pod()
    if obj_kind is None:
        del obj["kind"]
    b = body(obj)
    b["request"]["kind"] = request_kind
    _answer, decision = run([], None, review_body=b)
    assert decision.kind == kind


def test_v1beta1_is_answered_in_kind() -> None:
    answer, decision = run([FAILING], None, review_body=body(pod(), api_version="admission.k8s.io/v1beta1"))
    assert answer["allowed"] is False and decision.dry_run is False


def test_config_exemptions_and_suppression_annotations_apply() -> None:
    exempt = Config(exemptions=(Exemption(frozenset({"r"}), ("ns",)),))
    s = AdmissionSettings.from_config(exempt, RuleSet({"r": FAILING}))
    response, _ = review(body(pod()), "validate", RuleSet({"r": FAILING}), CTX, s)
    assert response["response"]["allowed"] is True
    silenced = pod(annotations={"compatcheck.io/ignore": "r=known"})
    assert run([FAILING], silenced)[0] == {"allowed": True}
    assert run([FAILING], silenced, annotation_exemptions=False)[0]["allowed"] is False


# ------------------------------------------------------------------------------------------ the evaluation cache


def test_the_cache_key_leaves_out_identity_and_status_only() -> None:
    base = pod(("A", "1"), labels={"l": "1"}, annotations={"a": "1"})
    key = EvaluationCache.key(base)
    assert len(key) == 16  # 128 bits, whatever the object's size
    same = copy.deepcopy(base)
    same["metadata"].update(name="other", namespace="elsewhere", uid="u", resourceVersion="2")
    same["status"] = {"phase": "Running"}
    assert EvaluationCache.key(same) == key
    for change in ({"labels": {"l": "2"}}, {"annotations": {"a": "2"}}):
        other = copy.deepcopy(base)
        other["metadata"].update(change)
        assert EvaluationCache.key(other) != key
    other = copy.deepcopy(base)
    other["spec"]["containers"][0]["env"][0]["value"] = "2"
    assert EvaluationCache.key(other) != key
    assert EvaluationCache.key({**base, "kind": "Other"}) != key


def test_the_cache_answers_equal_objects_rebound_to_each() -> None:
    cache = EvaluationCache()
    rules = [rule("x", when_env("X"))]
    run(rules, pod(("X", "bad")), cache=cache)
    answer, decision = run(rules, pod(("X", "bad"), name="twin"), cache=cache)
    assert (cache.hits, cache.misses) == (1, 1)
    assert answer["status"]["message"] == "compatcheck denied Pod ns/twin:\n- x: X is bad"
    assert [f.obj for f in decision.findings] == [ObjectRef("v1", "Pod", "ns", "twin")]


def test_the_cache_is_dropped_for_a_new_context_or_new_severities() -> None:
    cache = EvaluationCache()
    rs = RuleSet({"x": rule("x", when_env("X"))})
    obj, ref, sev = pod(("X", "bad")), ObjectRef("v1", "Pod", "ns", "p"), {}
    first = cache.evaluate(obj, ref, rs, CTX, sev, True)
    assert cache.evaluate(obj, ref, rs, CTX, sev, True) == first
    assert (cache.hits, cache.misses) == (1, 1)
    cache.evaluate(obj, ref, rs, EvalContext(KnowledgeBase()), sev, True)
    assert cache.misses == 2
    milder = cache.evaluate(obj, ref, rs, CTX, {"x": Severity.INFO}, True)
    assert cache.misses == 3 and [f.severity for f in milder.findings] == [Severity.INFO]
    cache.evaluate(obj, ref, rs, CTX, {"x": Severity.INFO}, True)  # equal severities, another config
    assert cache.misses == 4


SEV: dict[str, Severity] = {}


def test_the_cache_keeps_the_most_recently_used() -> None:
    cache = EvaluationCache(size=2)
    rs = RuleSet({"x": rule("x", when_env("X"))})
    a, b, c = (pod(("X", v)) for v in "abc")
    ref = ObjectRef(None, None, None, None)
    hits = []
    for obj in (a, b, a, c, a, b):
        before = cache.hits
        cache.evaluate(obj, ref, rs, CTX, SEV, True)
        hits.append(cache.hits > before)
    assert hits == [False, False, True, False, True, False]  # c pushed out b, the least recently used


def test_the_cache_holds_1024_evaluations_by_default() -> None:
    cache = EvaluationCache()
    rs = RuleSet({"x": rule("x", lambda a: [])})
    ref = ObjectRef(None, None, None, None)
    objects = [pod(("X", str(i))) for i in range(1025)]
    for obj in objects:
        cache.evaluate(obj, ref, rs, CTX, SEV, True)
    cache.evaluate(objects[1], ref, rs, CTX, SEV, True)
    assert cache.hits == 1
    cache.evaluate(objects[0], ref, rs, CTX, SEV, True)
    assert (cache.hits, cache.misses) == (1, 1026)


def test_mutations_go_through_the_cache() -> None:
    cache = EvaluationCache()
    rules = [rule("set-a", fix_env("A", "1"), fixes=Applicability.SAFE, mutate=True)]
    first, _ = run(rules, pod(), "mutate", cache=cache)
    assert (cache.hits, cache.misses) == (0, 2)  # the object, then the fixed object
    again, _ = run(rules, pod(name="twin"), "mutate", cache=cache)
    assert again == first and (cache.hits, cache.misses) == (2, 2)


def test_an_update_evaluates_the_old_object_through_the_cache() -> None:
    cache = EvaluationCache()
    rules = [rule("x", when_env("X"))]
    run(rules, pod(("X", "bad")), cache=cache)
    answer, _ = run(rules, pod(("X", "bad"), ("Y", "1")), operation="UPDATE", old=pod(("X", "bad")), cache=cache)
    assert answer["allowed"] is True and (cache.hits, cache.misses) == (1, 2)
