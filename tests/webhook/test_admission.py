"""The pure admission decisions (compatcheck.core.admission.review), table-driven, on recorded and built requests."""

from __future__ import annotations

import base64
import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from compatcheck.core.admission import AdmissionSettings, ReviewError, review
from compatcheck.core.checks.base import EvalContext
from compatcheck.core.config import Config
from compatcheck.core.crl import CrlIndex, build_index
from compatcheck.core.engine import evaluate
from compatcheck.core.model import Severity
from compatcheck.core.policy import DriverPolicy
from compatcheck.io.loader import Loaded, load_nodes
from compatcheck.io.manifests import iter_objects, read_file
from tests.conftest import FIXTURES, ROOT, image_table_as_of, shared, shared_files


@pytest.fixture(scope="module")
def ctx(loaded: Loaded) -> EvalContext:
    cluster, errors = load_nodes(str(ROOT / "examples" / "cluster-profile.yaml"), loaded.kb, 1 << 24)
    assert not errors
    crl_doc = read_file(str(FIXTURES / "crl-default-missing" / "crl.yaml"))
    index, invalid = build_index([o for d in crl_doc.documents for _p, o in iter_objects(d)])
    assert not invalid
    return EvalContext(loaded.kb, cluster, index)


def recorded(name: str) -> dict[str, Any]:
    """A real AdmissionReview recorded from a cluster (../shared/fixtures/admission)."""
    return json.loads(shared(f"fixtures/admission/{name}").read_text())  # type: ignore[no-any-return]


def request(obj: dict[str, Any] | None, *, operation: str = "CREATE", old: dict[str, Any] | None = None,
            api_version: str = "admission.k8s.io/v1", uid: str = "u-1") -> dict[str, Any]:
    target = obj or old or {}
    return {"apiVersion": api_version, "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": target.get("kind")}, "operation": operation,
        "namespace": "default", "name": target.get("metadata", {}).get("name"), "object": obj, "oldObject": old,
        "dryRun": False}}


def pod(image: str = "vllm/vllm-openai:v0.6.3", args: list[str] | None = None, limits: dict[str, Any] | None = None,
        **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default", **meta},
            "spec": {"nodeSelector": {"nvidia.com/gpu.product": "Tesla-T4"}, "containers": [
                {"name": "c", "image": image, "args": args or [],
                 "resources": {"limits": limits or {"nvidia.com/gpu": "1"}}}]}}


def answer(loaded: Loaded, ctx: EvalContext, body: dict[str, Any], endpoint: str = "validate",
           **settings: Any) -> dict[str, Any]:
    response, _decision = review(body, endpoint, loaded.ruleset, ctx, AdmissionSettings(**settings))  # type: ignore[arg-type]
    assert response["response"]["uid"] == body["request"]["uid"]
    assert response["apiVersion"] == body["apiVersion"] and response["kind"] == "AdmissionReview"
    return response["response"]


def patched(body: dict[str, Any], resp: dict[str, Any]) -> dict[str, Any]:
    assert resp["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(resp["patch"]))
    return jsonpatch.apply_patch(body["request"]["object"], ops)


# ------------------------------------------------------------------------------------------ recorded requests


@pytest.mark.parametrize("path", shared_files("fixtures/admission", "*.json"))
@pytest.mark.parametrize("endpoint", ["validate", "mutate"])
def test_every_recorded_request_gets_a_valid_answer(loaded: Loaded, ctx: EvalContext, path: Path,
                                                    endpoint: str) -> None:
    body = json.loads(path.read_text())
    resp = answer(loaded, ctx, body, endpoint)
    assert isinstance(resp["allowed"], bool)
    if body["request"]["operation"] in ("DELETE", "CONNECT"):
        assert resp == {"uid": body["request"]["uid"], "allowed": True}  # never a patch on DELETE
    if "patch" in resp:
        patched(body, resp)  # the patch applies


def test_recorded_paddle_deployment_is_mutated_then_clean(loaded: Loaded, ctx: EvalContext) -> None:
    body = recorded("0003-Deployment-CREATE.json")
    resp = answer(loaded, ctx, body, "mutate")
    obj = patched(body, resp)
    env = obj["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "FLAGS_allocator_strategy", "value": "naive_best_fit"} in env
    findings = evaluate(obj, [loaded.ruleset.get("paddle-allocator-conflict")], ctx).findings
    assert findings == []
    again = copy.deepcopy(body)
    again["request"]["object"] = obj
    assert "patch" not in answer(loaded, ctx, again, "mutate")  # idempotent: the API server may reinvoke


def test_recorded_vllm_bf16_is_denied(loaded: Loaded, ctx: EvalContext) -> None:
    resp = answer(loaded, ctx, recorded("0016-Deployment-CREATE.json"))
    assert resp["allowed"] is False and resp["status"]["code"] == 403
    message = resp["status"]["message"]
    assert message.startswith("compatcheck denied Deployment default/vllm:\n- ")
    assert "- dtype-unsupported-by-gpu: --dtype bfloat16 needs compute capability >= 8.0" in message
    assert all(len(line) <= 260 for line in message.splitlines())


def test_recorded_crl_configmap_that_breaks_the_spec_is_denied(loaded: Loaded, ctx: EvalContext) -> None:
    resp = answer(loaded, ctx, recorded("0018-ConfigMap-CREATE.json"))
    assert resp["allowed"] is False and "crl-configmap-invalid" in resp["status"]["message"]


def test_recorded_dry_run_is_answered_the_same(loaded: Loaded, ctx: EvalContext) -> None:
    dry = recorded("0020-Pod-CREATE.json")
    wet = recorded("0002-Pod-CREATE.json")
    assert dry["request"]["dryRun"] is True
    a, b = answer(loaded, ctx, dry), answer(loaded, ctx, wet)
    assert a["allowed"] == b["allowed"] and a.get("warnings") == b.get("warnings")


# ------------------------------------------------------------------------------------------ decisions


def test_warnings_are_short_and_bounded(loaded: Loaded, ctx: EvalContext) -> None:
    spec_pod = pod(image="corp/x:1")  # info only (runtime unknown): nothing to say at admission
    assert "warnings" not in answer(loaded, ctx, request(spec_pod))
    many = pod(limits={"nvidia.com/gpu": "1"})
    many["spec"]["containers"] *= 60
    many["spec"]["tolerations"] = []
    resp = answer(loaded, ctx, request(many), mode="warn")
    assert resp["allowed"] is True
    assert all(len(w) <= 120 for w in resp["warnings"])
    assert sum(len(w) for w in resp["warnings"]) <= 4096


@pytest.mark.parametrize(("mode", "allowed", "has_warnings", "has_audit"), [
    ("enforce", False, False, False), ("warn", True, True, False), ("audit", True, False, True)])
def test_modes(loaded: Loaded, ctx: EvalContext, mode: str, allowed: bool, has_warnings: bool,
               has_audit: bool) -> None:
    # CUDA 12.2 runs natively on the R535 T4s: the dtype error is the only finding
    resp = answer(loaded, ctx, request(pod(image="nvidia/cuda:12.2.2-base-ubuntu22.04", args=["--dtype=bfloat16"])),
                  mode=mode)
    assert resp["allowed"] is allowed
    assert ("warnings" in resp) is has_warnings
    assert ("auditAnnotations" in resp) is has_audit
    if has_audit:
        assert "dtype-unsupported-by-gpu" in resp["auditAnnotations"]["compatcheck.io/findings"]


def test_update_ratchets_on_findings_already_present(loaded: Loaded, ctx: EvalContext) -> None:
    old = pod(args=["--dtype=bfloat16"])
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"team": "a"}  # an unrelated edit must go through
    resp = answer(loaded, ctx, request(new, operation="UPDATE", old=old))
    assert resp["allowed"] is True and any(w.startswith("dtype-unsupported-by-gpu") for w in resp["warnings"])
    worse = copy.deepcopy(new)
    worse["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "0.5"
    resp = answer(loaded, ctx, request(worse, operation="UPDATE", old=old))
    assert resp["allowed"] is False
    assert "extended-resource-invalid" in resp["status"]["message"]
    assert "dtype-unsupported-by-gpu" not in resp["status"]["message"]


@pytest.mark.parametrize(("change", "denied"), [
    # the offending value changed, from one incompatible value to another: a new problem
    (lambda c: c.update(image="nvidia/cuda:13.1.0-base-ubuntu24.04"), ["cuda-driver-too-old"]),
    (lambda c: c.update(args=["--dtype=bf16"]), ["dtype-unsupported-by-gpu"]),
    # unrelated edits of the same container go through
    (lambda c: c.update(env=[{"name": "LOG_LEVEL", "value": "debug"}]), []),
    (lambda c: c.update(imagePullPolicy="Always"), []),
])
def test_update_ratchet_forgives_only_an_unchanged_offending_value(loaded: Loaded, ctx: EvalContext, change: Any,
                                                                   denied: list[str]) -> None:
    old = pod(image="nvidia/cuda:13.0.0-base-ubuntu24.04", args=["--dtype=bfloat16"])
    assert answer(loaded, ctx, request(old))["allowed"] is False  # both problems, on CREATE
    new = copy.deepcopy(old)
    change(new["spec"]["containers"][0])
    resp = answer(loaded, ctx, request(new, operation="UPDATE", old=old))
    assert resp["allowed"] is (not denied)
    if denied:
        assert sorted(r for r in ("cuda-driver-too-old", "dtype-unsupported-by-gpu")
                      if f"- {r}:" in resp["status"]["message"]) == denied


def test_update_ratchet_on_a_whole_pod_spec_finding_follows_its_message(loaded: Loaded, ctx: EvalContext) -> None:
    old = pod(image="nvidia/cuda:12.2.2-base-ubuntu22.04")
    old["spec"]["nodeSelector"] = {"pool": "nowhere"}
    assert "gpu-no-eligible-node" in answer(loaded, ctx, request(old))["status"]["message"]
    edited = copy.deepcopy(old)
    edited["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]  # the spec changes, the problem not
    assert answer(loaded, ctx, request(edited, operation="UPDATE", old=old))["allowed"] is True
    moved = copy.deepcopy(old)
    moved["spec"]["nodeSelector"] = {"pool": "elsewhere"}  # another selector nothing matches: a new problem
    assert answer(loaded, ctx, request(moved, operation="UPDATE", old=old))["allowed"] is False


@pytest.mark.parametrize(("failure_mode", "allowed"), [("allow", True), ("deny", False)])
def test_an_undecidable_request_is_answered_by_the_failure_mode(loaded: Loaded, ctx: EvalContext,
                                                                failure_mode: str, allowed: bool) -> None:
    settings = AdmissionSettings(failure_mode=failure_mode)
    why = "the cluster view has not completed its first sync"
    out, decision = review(request(pod()), "validate", loaded.ruleset, ctx, settings, None, why)
    resp = out["response"]
    assert resp["allowed"] is allowed and decision.internal_error == why and decision.findings == []
    if allowed:
        assert resp["warnings"] == [f"compatcheck: not evaluated ({why})"]
    else:
        assert why in resp["status"]["message"]
    # what needs no decision still needs none: opted-out objects and deletions
    opted = pod(labels={"compatcheck.io/ignore": "true"})
    out, _ = review(request(opted), "validate", loaded.ruleset, ctx, settings, None, why)
    assert out["response"] == {"uid": "u-1", "allowed": True}
    out, _ = review(request(None, operation="DELETE", old=pod()), "mutate", loaded.ruleset, ctx, settings, None, why)
    assert out["response"] == {"uid": "u-1", "allowed": True}


def test_owned_pods_warn_by_default(loaded: Loaded, ctx: EvalContext) -> None:
    owned = pod(args=["--dtype=bfloat16"], ownerReferences=[{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                              "name": "rs", "uid": "x", "controller": True}])
    assert answer(loaded, ctx, request(owned))["allowed"] is True
    assert answer(loaded, ctx, request(owned), owned_pods="enforce")["allowed"] is False
    assert "warnings" not in answer(loaded, ctx, request(owned), owned_pods="skip")


def test_opt_out_label_and_suppression_annotation(loaded: Loaded, ctx: EvalContext) -> None:
    out = pod(args=["--dtype=bfloat16"], labels={"compatcheck.io/ignore": "true"})
    assert answer(loaded, ctx, request(out)) == {"uid": "u-1", "allowed": True}
    sup = pod(args=["--dtype=bfloat16"], annotations={
        "compatcheck.io/ignore": "dtype-unsupported-by-gpu=tested, cuda-driver-behind-runtime=ships cuda-compat"})
    assert answer(loaded, ctx, request(sup))["allowed"] is True
    assert answer(loaded, ctx, request(sup), annotation_exemptions=False)["allowed"] is False


def test_v1beta1_is_answered_in_kind(loaded: Loaded, ctx: EvalContext) -> None:
    body = request(pod(args=["--dtype=bfloat16"]), api_version="admission.k8s.io/v1beta1")
    response, _ = review(body, "validate", loaded.ruleset, ctx, AdmissionSettings())
    assert response["apiVersion"] == "admission.k8s.io/v1beta1" and response["response"]["allowed"] is False


def test_crl_defaults_are_mutated_by_default(loaded: Loaded, ctx: EvalContext) -> None:
    body = request(pod(image="nvidia/cuda:11.4.3-base-ubuntu20.04",
                       limits={"tencent.com/vcuda-core": "50"}))
    obj = patched(body, answer(loaded, ctx, body, "mutate"))
    limits = obj["spec"]["containers"][0]["resources"]["limits"]
    requests_ = obj["spec"]["containers"][0]["resources"]["requests"]
    assert limits == {"tencent.com/vcuda-core": "50", "tencent.com/vcuda-memory": "8",
                      "example.com/vcuda-priority": "1"}
    assert requests_ == {"tencent.com/vcuda-memory": "8", "example.com/vcuda-priority": "1"} or \
        requests_["example.com/vcuda-priority"] == "1"
    again = request(obj)
    assert "patch" not in answer(loaded, ctx, again, "mutate")


def test_mutation_warnings_name_the_rule_first(loaded: Loaded, ctx: EvalContext) -> None:
    """The cut to 120 characters used to take the rule id off the end of a long fix description."""
    body = request(pod(image="nvidia/cuda:11.4.3-base-ubuntu20.04", limits={
        "tencent.com/vcuda-core": "50", "tencent.com/vcuda-memory": "4"}))
    body["request"]["object"]["spec"]["containers"][0]["resources"]["requests"] = {
        "tencent.com/vcuda-core": "50", "tencent.com/vcuda-memory": "4"}
    assert answer(loaded, ctx, body, "mutate")["warnings"] == [
        "compatcheck fixed crl-default-missing: set limits.example.com/vcuda-priority to the CRL default 1 (and "
        "requests, policy…"]


def test_unsafe_mutations_are_opt_in(loaded: Loaded, ctx: EvalContext) -> None:
    body = request(pod(args=["--dtype=bfloat16"]))
    assert "patch" not in answer(loaded, ctx, body, "mutate")
    resp = answer(loaded, ctx, body, "mutate", allow_unsafe=frozenset({"dtype-unsupported-by-gpu"}))
    assert patched(body, resp)["spec"]["containers"][0]["args"] == ["--dtype=half"]


def test_driver_affinity_mutation_is_and_ed_with_existing_terms(loaded: Loaded, ctx: EvalContext) -> None:
    p = pod(image="nvidia/cuda:12.8.1-base-ubuntu22.04")
    del p["spec"]["nodeSelector"]
    p["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "Exists"}]}]}}}
    body = request(p)
    resp = answer(loaded, ctx, body, "mutate", allow_unsafe=frozenset({
        "cuda-driver-behind-runtime", "cuda-driver-too-old", "cuda-driver-needs-forward-compat"}))
    terms = patched(body, resp)["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert len(terms) == 2
    assert all(t["matchExpressions"][0]["key"] == "kubernetes.io/hostname" for t in terms)
    assert terms[0]["matchExpressions"][1] == {"key": "nvidia.com/cuda.runtime-version.major", "operator": "Gt",
                                               "values": ["12"]}
    assert terms[1]["matchExpressions"][2] == {"key": "nvidia.com/cuda.runtime-version.minor", "operator": "Gt",
                                               "values": ["7"]}


@pytest.mark.parametrize(("body", "message"), [
    ([], "must be a JSON object"),
    ({"kind": "Pod"}, "expected kind AdmissionReview"),
    ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, "has no request"),
    ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": ""}}, "uid"),
    ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
      "request": {"uid": "x", "operation": "PATCH"}}, "operation"),
    ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
      "request": {"uid": "x", "operation": "CREATE", "object": [1]}}, "request.object"),
])
def test_malformed_reviews_raise(loaded: Loaded, ctx: EvalContext, body: Any, message: str) -> None:
    with pytest.raises(ReviewError, match=message):
        review(body, "validate", loaded.ruleset, ctx, AdmissionSettings())


def test_internal_errors_follow_the_failure_mode(loaded: Loaded, ctx: EvalContext,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import compatcheck.core.admission as adm

    def boom(*a: Any, **k: Any) -> Any:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(adm, "evaluate", boom)
    body = request(pod())
    allow = answer(loaded, ctx, body)
    assert allow["allowed"] is True and "not evaluated (RuntimeError: kaboom)" in allow["warnings"][0]
    deny = answer(loaded, ctx, body, failure_mode="deny")
    assert deny["allowed"] is False and deny["status"]["code"] == 500


def test_settings_from_config(loaded: Loaded) -> None:
    cfg = Config(webhook={"mode": "warn", "failureMode": "deny", "ownedPods": "skip", "denyOn": "warning"},
                 allow_unsafe=frozenset({"dtype-unsupported-by-gpu"}),
                 fixes_disabled=frozenset({"crl-default-missing"}))
    s = AdmissionSettings.from_config(cfg, loaded.ruleset)
    assert (s.mode, s.failure_mode, s.owned_pods, s.deny_on) == ("warn", "deny", "skip", Severity.WARNING)
    assert "crl-default-missing" not in s.mutations and s.allow_unsafe == {"dtype-unsupported-by-gpu"}


def test_evaluation_cache_is_invisible(loaded: Loaded, ctx: EvalContext) -> None:
    from compatcheck.core.admission import EvaluationCache

    cache = EvaluationCache()
    owner = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "r", "controller": True}]
    first = pod(args=["--dtype=bfloat16"], uid="a", ownerReferences=owner)
    twin = copy.deepcopy(first)
    twin["metadata"].update(name="p-2", uid="b")  # a ReplicaSet sibling: identity differs, nothing else
    body_a, body_b = request(first), request(twin, uid="u-2")
    s = AdmissionSettings(owned_pods="enforce")
    plain_b, _ = review(body_b, "validate", loaded.ruleset, ctx, s)
    review(body_a, "validate", loaded.ruleset, ctx, s, cache)
    cached_b, decision = review(body_b, "validate", loaded.ruleset, ctx, s, cache)
    assert cache.hits == 1 and cached_b == plain_b
    assert "Pod default/p-2" in cached_b["response"]["status"]["message"]
    assert all(f.obj.name == "p-2" for f in decision.findings)
    changed = copy.deepcopy(twin)
    changed["spec"]["containers"][0]["args"] = ["--dtype=half"]
    review(request(changed), "validate", loaded.ruleset, ctx, s, cache)
    assert cache.misses == 2
    other_ctx = EvalContext(ctx.kb, None, ctx.crl)  # a new snapshot drops the cache
    review(body_b, "validate", loaded.ruleset, other_ctx, s, cache)
    assert cache.misses == 3
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "a"},
                  "spec": {"template": {"spec": first["spec"]}}}
    redeployed = copy.deepcopy(deployment)
    redeployed["metadata"].update(name="d2", namespace="b", resourceVersion="9")
    review(request(deployment), "validate", loaded.ruleset, other_ctx, s, cache)
    again, decision = review(request(redeployed), "validate", loaded.ruleset, other_ctx, s, cache)
    assert (cache.hits, cache.misses) == (2, 4)  # any kind: a re-applied Deployment is a hit
    assert "Deployment b/d2" in again["response"]["status"]["message"]


def test_review_cached_answers_only_what_needs_no_evaluation(loaded: Loaded, ctx: EvalContext) -> None:
    """What the webhook answers on its event loop: the same answer as ``review``, or CacheMiss."""
    from compatcheck.core.admission import CacheMiss, EvaluationCache, review_cached

    cache, s = EvaluationCache(), AdmissionSettings(owned_pods="enforce")
    owner = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "r", "controller": True}]
    first = pod(args=["--dtype=bfloat16"], uid="a", ownerReferences=owner)
    twin = copy.deepcopy(first)
    twin["metadata"].update(name="p-2", uid="b")
    body_a, body_b = request(first), request(twin, uid="u-2")
    with pytest.raises(CacheMiss):  # nothing cached yet
        review_cached(body_a, "validate", loaded.ruleset, ctx, s, cache)
    with pytest.raises(CacheMiss):  # no cache at all
        review_cached(body_a, "validate", loaded.ruleset, ctx, s, None)
    assert (cache.hits, cache.misses) == (0, 0)
    review(body_a, "validate", loaded.ruleset, ctx, s, cache)
    plain_b, _ = review(body_b, "validate", loaded.ruleset, ctx, s)
    inline_b, decision = review_cached(body_b, "validate", loaded.ruleset, ctx, s, cache)
    assert inline_b == plain_b and inline_b["response"]["allowed"] is False
    assert "Pod default/p-2" in inline_b["response"]["status"]["message"]
    assert decision.denied_rules == ["cuda-driver-behind-runtime", "dtype-unsupported-by-gpu"]
    assert (cache.hits, cache.misses) == (1, 1)
    with pytest.raises(CacheMiss):  # /mutate applies and diffs fixes: always the review thread's
        review_cached(body_b, "mutate", loaded.ruleset, ctx, s, cache)
    # an UPDATE that would be denied needs its old object's evaluation too
    worse = copy.deepcopy(twin)
    worse["spec"]["containers"][0]["image"] = "nvidia/cuda:13.1.0-base-ubuntu24.04"
    update = request(worse, operation="UPDATE", old=twin, uid="u-3")
    review(request(worse, uid="u-4"), "validate", loaded.ruleset, ctx, s, cache)  # the new object is cached
    other = EvaluationCache()
    review(request(worse, uid="u-4"), "validate", loaded.ruleset, ctx, s, other)
    with pytest.raises(CacheMiss):  # its old object is not, in ``other``
        review_cached(update, "validate", loaded.ruleset, ctx, s, other)
    plain, _ = review(update, "validate", loaded.ruleset, ctx, s)
    assert review_cached(update, "validate", loaded.ruleset, ctx, s, cache)[0] == plain  # both are, in ``cache``
    # skips and the failure mode's answers need no evaluation: answered whatever the cache holds
    deleted = request(None, operation="DELETE", old=first, uid="u-5")
    assert review_cached(deleted, "validate", loaded.ruleset, ctx, s, EvaluationCache())[0] == \
        review(deleted, "validate", loaded.ruleset, ctx, s)[0]
    unsynced, decision = review_cached(body_a, "validate", loaded.ruleset, ctx, s, None, "not synced")
    assert unsynced["response"]["allowed"] is True and decision.internal_error == "not synced"
    with pytest.raises(ReviewError):
        review_cached({"kind": "AdmissionReview"}, "validate", loaded.ruleset, ctx, s, cache)


def test_evaluation_cache_keeps_per_object_exemptions_and_suppressions(loaded: Loaded, ctx: EvalContext) -> None:
    """Config exemptions may name namespaces and objects (identity the key leaves out), and suppression
    annotations change the answer: a hit must still give exactly the uncached answer."""
    from compatcheck.core.admission import EvaluationCache
    from compatcheck.core.config import Exemption

    exempted = frozenset({"dtype-unsupported-by-gpu", "cuda-driver-behind-runtime"})  # the two errors of `base`
    exemption = Exemption(exempted, ("lab",), (), (), (), ())
    s = AdmissionSettings.from_config(Config(exemptions=(exemption,)), loaded.ruleset)
    cache = EvaluationCache()
    base = pod(args=["--dtype=bfloat16"])
    in_lab = copy.deepcopy(base)
    in_lab["metadata"]["namespace"] = "lab"
    silenced = copy.deepcopy(base)
    silenced["metadata"]["annotations"] = {"compatcheck.io/ignore": ",".join(f"{r}=known" for r in exempted)}
    for obj in (base, in_lab, silenced, base, in_lab, silenced):
        body = request(obj)
        uncached, _ = review(body, "validate", loaded.ruleset, ctx, s)
        cached, _ = review(body, "validate", loaded.ruleset, ctx, s, cache)
        assert cached == uncached
    assert cache.misses == 2 and cache.hits == 4  # base and in_lab share one evaluation; silenced differs
    assert not review(request(base), "validate", loaded.ruleset, ctx, s, cache)[0]["response"]["allowed"]
    assert review(request(in_lab), "validate", loaded.ruleset, ctx, s, cache)[0]["response"]["allowed"]
    assert review(request(silenced), "validate", loaded.ruleset, ctx, s, cache)[0]["response"]["allowed"]
    # Other severities (another config) must not be answered from the old entries.
    milder = AdmissionSettings.from_config(Config(severities={r: Severity.WARNING for r in exempted}),
                                           loaded.ruleset)
    assert review(request(base), "validate", loaded.ruleset, ctx, milder, cache)[0]["response"]["allowed"]


def test_evaluation_cache_keys_a_pod_with_claims_by_its_namespace(loaded: Loaded) -> None:
    """Two namespaces, one template name: a T4 in one, an A100 in the other. The same pod body is a miss in the
    second namespace (its claim resolves there), and the answers differ as uncached ones do."""
    from compatcheck.core.admission import EvaluationCache
    from compatcheck.core.dra import build_index as build_dra_index

    def tmpl(ns: str, product: str) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "gpu", "namespace": ns}, "spec": {"spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {
                        "expression": f"device.attributes['gpu.nvidia.com'].productName == '{product}'"}}]}}]}}}}

    dra = build_dra_index([tmpl("a", "Tesla T4"), tmpl("b", "NVIDIA A100-SXM4-80GB")], authoritative=True)
    ctx = EvalContext(loaded.kb, None, CrlIndex(), dra=dra)
    cache, settings = EvaluationCache(), AdmissionSettings()
    denied = []
    for ns in ("a", "b", "a"):
        obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns}, "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
            "containers": [{"name": "c", "image": "vllm/vllm-openai:v0.6.3", "args": ["--dtype=bfloat16"],
                            "resources": {"claims": [{"name": "gpu"}]}}]}}
        answer, decision = review(request(obj), "validate", loaded.ruleset, ctx, settings, cache)
        denied.append((answer["response"]["allowed"], decision.denied_rules))
    assert denied == [(False, ["dtype-unsupported-by-gpu"]), (True, []), (False, ["dtype-unsupported-by-gpu"])]
    assert (cache.hits, cache.misses) == (1, 2)


def test_a_resource_claim_made_for_a_pod_from_its_template_is_only_warned_about(loaded: Loaded) -> None:
    """The resourceclaim controller creates a ResourceClaim per Pod from the template (owner: the Pod); the template
    was reviewed, so by default the generated claim is not denied (its findings are warnings), as owned Pods."""
    from compatcheck.core.dra import build_inventory

    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {
        "name": "p-gpu-x7k2p", "namespace": "ml", "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u", "controller": True}]},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}
    cluster, errors = load_nodes(str(ROOT / "examples" / "cluster-profile.yaml"), loaded.kb, 1 << 24)
    assert cluster is not None and not errors
    cluster.dra = build_inventory([])  # the cluster publishes no device
    ctx = EvalContext(loaded.kb, cluster, CrlIndex())
    owned, decision = review(request(claim), "validate", loaded.ruleset, ctx, AdmissionSettings())
    assert owned["response"]["allowed"] is True and decision.findings[0].rule_id == "dra-request-unsatisfiable"
    assert owned["response"]["warnings"][0].startswith("dra-request-unsatisfiable: request 'gpu': no device of the")
    mine = copy.deepcopy(claim)
    del mine["metadata"]["ownerReferences"]
    denied, _ = review(request(mine), "validate", loaded.ruleset, ctx, AdmissionSettings())
    assert denied["response"]["allowed"] is False


# ------------------------------------------------------------------------------------------ the driver policy
# CUDA 13.0 (NVIDIA_REQUIRE_CUDA lists brand=tesla,driver>=535,driver<536) on Tesla T4s with R535: the platform's
# rule (driver >= runtime) denies it by default; a declared forward compatibility admits it with a warning.
CUDA13 = "nvidia/cuda:13.0.0-base-ubuntu24.04"
T4_R535 = """\
apiVersion: compatcheck/v1
kind: ClusterProfile
nodePools:
- name: t4
  gpu: Tesla-T4
  driver: "535.104.05"
{extra}"""


def policy_ctx(loaded: Loaded, tmp_path: Path, policy: DriverPolicy, pool: str = "") -> EvalContext:
    (tmp_path / "nodes.yaml").write_text(T4_R535.format(extra=pool))
    cluster, errors = load_nodes(str(tmp_path / "nodes.yaml"), loaded.kb, 1 << 24)
    assert not errors
    return EvalContext(loaded.kb, cluster, CrlIndex(), driver_policy=policy)


@pytest.mark.parametrize(("policy", "pool", "allowed", "rule"), [
    (DriverPolicy(), "", False, "cuda-driver-too-old"),
    (DriverPolicy(forward_compatibility=True), "", True, "cuda-driver-needs-forward-compat"),
    (DriverPolicy(), "  forwardCompatibility: true\n", True, "cuda-driver-needs-forward-compat"),
    (DriverPolicy(forward_compatibility=True), "  forwardCompatibility: false\n", False, "cuda-driver-too-old"),
    # minor-version compatibility never crosses a major version: declaring it changes nothing here
    (DriverPolicy(minor_version_compatibility=True), "", False, "cuda-driver-too-old"),
])
def test_the_driver_policy_decides_a_cuda13_pod_on_r535(loaded: Loaded, tmp_path: Path, policy: DriverPolicy,
                                                       pool: str, allowed: bool, rule: str) -> None:
    ctx = policy_ctx(loaded, tmp_path, policy, pool)
    resp = answer(loaded, ctx, request(pod(image=CUDA13)))
    assert resp["allowed"] is allowed
    if allowed:
        # a warning is cut at 120 characters
        assert resp["warnings"] == [f"{rule}: image CUDA 13.0 (image {CUDA13}) is newer than the driver …"]
    else:
        assert resp["status"]["code"] == 403
        assert resp["status"]["message"] == (
            f"compatcheck denied Pod default/p:\n- {rule}: image CUDA 13.0 (image {CUDA13}) needs a driver from "
            "branch >= 580; eligible nodes run 535.104.05 (CUDA 12.2) on t4-0; NVIDIA forward compatibility (…")


@pytest.mark.parametrize(("policy", "allowed", "rule"), [
    (DriverPolicy(), False, "cuda-driver-behind-runtime"),
    (DriverPolicy(minor_version_compatibility=True), True, "cuda-driver-needs-minor-version-compat"),
])
def test_the_driver_policy_decides_minor_version_compatibility(loaded: Loaded, tmp_path: Path, policy: DriverPolicy,
                                                               allowed: bool, rule: str) -> None:
    # PyTorch's CUDA 12.4 (no NVIDIA_REQUIRE_CUDA gate, no cuda-compat) on R535 (CUDA 12.2): the same major
    ctx = policy_ctx(loaded, tmp_path, policy)
    resp = answer(loaded, ctx, request(pod(image="pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime")))
    assert resp["allowed"] is allowed
    if allowed:
        assert resp["warnings"] == [f"{rule}: image CUDA 12.4 (image pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime) "
                                    "is newer …"]
    else:
        # a line of the denial is cut at 200 characters
        assert resp["status"]["message"] == (
            f"compatcheck denied Pod default/p:\n- {rule}: image CUDA 12.4 (image pytorch/pytorch:2.5.1-cuda12.4-"
            "cudnn9-runtime) is newer than the driver's CUDA on 535.104.05 (CUDA 12.2) on t4-0, and the platform "
            "requires a driv…")


@pytest.mark.parametrize(("config", "allowed"), [
    ("apiVersion: compatcheck/v1\n", False),
    ("apiVersion: compatcheck/v1\ndriverPolicy: {forwardCompatibility: true}\n", True),
])
def test_the_webhook_reads_the_driver_policy_from_its_config(tmp_path: Path, config: str, allowed: bool) -> None:
    """``compatcheck review`` answers as the serving webhook does, from the same config and --nodes."""
    from tests.conftest import admission_review

    (tmp_path / "review.json").write_text(json.dumps(admission_review(pod(image=CUDA13))))
    (tmp_path / "nodes.yaml").write_text(T4_R535.format(extra=""))
    (tmp_path / "c.yaml").write_text(config)
    proc = subprocess.run([sys.executable, "-m", "compatcheck", "review", "review.json", "--nodes", "nodes.yaml",
                           "--config", "c.yaml"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    response = json.loads(proc.stdout)["response"]
    assert response["allowed"] is allowed
    rules = [w.split(":", 1)[0] for w in response.get("warnings", [])] if allowed else [
        line[2:].split(":", 1)[0] for line in response["status"]["message"].splitlines()[1:]]
    assert rules == (["cuda-driver-needs-forward-compat"] if allowed else ["cuda-driver-too-old"])


@pytest.mark.parametrize(("policy", "allowed"), [
    (DriverPolicy(), False),
    (DriverPolicy(assumed_severity=Severity.WARNING), True),
])
def test_an_assumed_finding_takes_the_policys_severity_at_admission(loaded: Loaded, tmp_path: Path,
                                                                    policy: DriverPolicy, allowed: bool) -> None:
    """A vLLM release newer than the image table (decided from the newest row, said so): denied as the rule says by
    default, admitted with a warning where the policy lowers assumed findings."""
    ctx = policy_ctx(loaded, tmp_path, policy)
    resp = answer(loaded, ctx, request(pod(image="vllm/vllm-openai:v0.99.0")))
    assert resp["allowed"] is allowed
    start = "cuda-driver-too-old: image CUDA 13.0 (image vllm/vllm-openai:v0.99.0, assumed from v0.33.0"
    if allowed:
        assert resp["warnings"] == [f"{start}, the newest vllm-openai rele…"]
    else:
        assert resp["status"]["message"] == (
            f"compatcheck denied Pod default/p:\n- {start}, the newest vllm-openai release compatcheck knows, table "
            f"dated {image_table_as_of()}) needs a driver from branch >= 5…")
