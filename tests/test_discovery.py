"""Structural discovery (compatcheck.core.discovery): pod templates, pod specs and containers of custom resources
whose kind no table row names are linted as the pods they are, with a note naming the kind and the path; objects
that only mention GPUs are not workloads."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core.checks.base import EvalContext
from compatcheck.core.crl import CrlIndex
from compatcheck.core.discovery import discover, is_custom_resource
from compatcheck.core.engine import evaluate
from compatcheck.io.lint import LintOptions, run_lint
from compatcheck.io.loader import Loaded

R470 = {"nvidia.com/cuda.driver-version.major": "470"}
MESSAGE = ("the pod's node selection admits only drivers for CUDA 11.4, too old for image CUDA 12.4 (image "
           "nvidia/cuda:12.4.1-base-ubuntu22.04); it needs a driver from branch >= 550")  # (the minor-version hint only
# where the platform declares it: docs/driver-policy.md)
IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"


def gpu_container(name: str = "main", gpus: Any = 1) -> dict[str, Any]:
    return {"name": name, "image": IMAGE, "resources": {"limits": {"nvidia.com/gpu": gpus}}}


def cr(spec: dict[str, Any], kind: str = "FineTune", api_version: str = "tuning.example.ai/v1beta1") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "ft", "namespace": "ml"}, "spec": spec}


def run(loaded: Loaded, obj: dict[str, Any]) -> tuple[list[tuple[str, str, str | None]], list[tuple[str, str]],
                                                       list[tuple[str, str]]]:
    result = evaluate(obj, loaded.ruleset, EvalContext(loaded.kb, None, CrlIndex()))
    return ([(f.rule_id, f.pointer, f.container) for f in result.findings],
            [(p.pointer, p.message) for p in result.problems if p.kind == "note"], result.unchecked)


def note(kind: str, where: str, what: str = "template") -> tuple[str, str]:
    return (where, f"{kind} (tuning.example.ai) is not in the workload-kinds table: the pod {what} at {where} was "
                   "found by its shape and checked as a pod (a row in a rules directory's data/ reads it as its "
                   "operator does; docs/workloads.md)")


def test_a_pod_template_under_an_unknown_kind_is_linted_with_a_note(loaded: Loaded) -> None:
    obj = cr({"trainer": {"replicas": 2, "template": {"spec": {"nodeSelector": R470,
                                                                "containers": [gpu_container("tune")]}}}})
    findings, notes, unchecked = run(loaded, obj)
    assert findings == [("cuda-affinity-mismatch", "/spec/trainer/template/spec/nodeSelector", "tune")]
    assert notes == [note("FineTune", "/spec/trainer/template")]
    assert unchecked == [("/spec/trainer/template", "kind found only by structure: FineTune at /spec/trainer/template")]


def test_a_pod_spec_and_a_single_container_are_found(loaded: Loaded) -> None:
    obj = cr({"workers": [{"podSpec": {"nodeSelector": R470, "containers": [gpu_container("w")]}}],
              "steps": [{"name": "s", "nodeSelector": R470, "container": gpu_container("step")}]})
    findings, notes, _ = run(loaded, obj)
    assert findings == [("cuda-affinity-mismatch", "/spec/workers/0/podSpec/nodeSelector", "w"),
                        ("cuda-affinity-mismatch", "/spec/steps/0/nodeSelector", "step")]
    assert notes == [note("FineTune", "/spec/workers/0/podSpec", "spec"), note("FineTune", "/spec/steps/0", "spec")]


def test_discovered_findings_offer_no_fix(loaded: Loaded) -> None:
    obj = cr({"template": {"spec": {"nodeSelector": R470, "containers": [gpu_container()]}}})
    result = evaluate(obj, loaded.ruleset, EvalContext(loaded.kb, None, CrlIndex()))
    assert [f.fix for f in result.findings] == [None]


def test_a_known_kind_with_its_pods_elsewhere_is_found_by_shape_too(loaded: Loaded) -> None:
    """A kind of the table whose row finds no pod spec (a layout its row does not know yet) is never silent: its
    pods are found by their shape, and the note says the table does not read them there."""
    obj = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r"},
           "spec": {"futureGroups": [{"template": {"spec": {"nodeSelector": R470,
                                                             "containers": [gpu_container("w")]}}}]}}
    findings, notes, _unchecked = run(loaded, obj)
    assert findings == [("cuda-affinity-mismatch", "/spec/futureGroups/0/template/spec/nodeSelector", "w")]
    assert notes == [("/spec/futureGroups/0/template", "RayCluster (ray.io) has no pod spec where the workload-kinds "
                      "table reads it: the pod template at /spec/futureGroups/0/template was found by its shape and "
                      "checked as a pod (a row in a rules directory's data/ reads it as its operator does; "
                      "docs/workloads.md)")]


# ---------------------------------------------------------------------------------------------- no false hits

NOT_WORKLOADS: dict[str, dict[str, Any]] = {
    # an autoscaler's node pool: GPU limits and a node template, no container
    "karpenter-nodepool": {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "gpu"},
                           "spec": {"limits": {"nvidia.com/gpu": 64},
                                    "template": {"spec": {"requirements": [
                                        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt",
                                         "values": ["0"]}], "taints": [{"key": "nvidia.com/gpu",
                                                                         "effect": "NoSchedule"}]}}}},
    # a queue's quota
    "kueue-clusterqueue": {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "q"},
                           "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                               {"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}},
    # a simulated node (KWOK-style Stage / fake Node in a custom resource)
    "fake-node": {"apiVersion": "sim.example.io/v1", "kind": "FakeNode", "metadata": {"name": "n"},
                  "spec": {"node": {"status": {"allocatable": {"nvidia.com/gpu": "8"},
                                               "capacity": {"nvidia.com/gpu": "8"}}}}},
    # a script and a manifest embedded as strings
    "strings": {"apiVersion": "ops.example.io/v1", "kind": "Runbook", "metadata": {"name": "r"},
                "spec": {"script": "kubectl run x --image=nvidia/cuda:12.4.1-base-ubuntu22.04 "
                                   "--limits=nvidia.com/gpu=1",
                         "manifest": "containers:\n- image: nvidia/cuda:12.4.1-base-ubuntu22.04\n  resources:\n"
                                     "    limits: {nvidia.com/gpu: 1}\n"}},
}


@pytest.mark.parametrize("name", sorted(NOT_WORKLOADS))
def test_objects_that_only_mention_gpus_are_not_workloads(loaded: Loaded, name: str) -> None:
    obj = NOT_WORKLOADS[name]
    assert discover(obj) == []
    result = evaluate(obj, loaded.ruleset, EvalContext(loaded.kb, None, CrlIndex()))
    assert (result.findings, result.problems, result.gpu, result.unchecked) == ([], [], False, [])


def test_a_gpu_count_of_zero_is_no_gpu_workload(loaded: Loaded) -> None:
    obj = cr({"template": {"spec": {"nodeSelector": R470, "containers": [gpu_container(gpus=0)]}}})
    assert [loc.pattern for loc in discover(obj)] == ["/spec/template"]  # found, and not a GPU pod
    result = evaluate(obj, loaded.ruleset, EvalContext(loaded.kb, None, CrlIndex()))
    assert (result.findings, result.problems, result.gpu, result.unchecked) == ([], [], False, [])


@pytest.mark.parametrize(("api_version", "custom"), [
    ("v1", False), ("apps/v1", False), ("batch/v1", False), ("resource.k8s.io/v1", False),
    ("networking.k8s.io/v1", False), ("jobset.x-k8s.io/v1alpha2", True), ("tuning.example.ai/v1", True),
    ("autoscaling/v2", False), (5, False)])
def test_only_custom_resources_are_searched(api_version: Any, custom: bool) -> None:
    assert is_custom_resource({"apiVersion": api_version, "kind": "X"}) is custom


def test_lint_reads_an_unknown_kind_with_containers_and_says_so(loaded: Loaded) -> None:
    text = ("apiVersion: tuning.example.ai/v1beta1\nkind: FineTune\nmetadata: {name: ft, namespace: ml}\nspec:\n"
            "  template:\n    spec:\n      nodeSelector: {nvidia.com/cuda.driver-version.major: \"470\"}\n"
            f"      containers:\n      - name: tune\n        image: {IMAGE}\n"
            "        resources: {limits: {nvidia.com/gpu: 2}}\n")
    report = run_lint([], loaded, LintOptions(), texts={"ft.yaml": text})
    assert [(f.rule_id, f.source.line if f.source else None, f.message) for f in report.findings] == [
        ("cuda-affinity-mismatch", 7, MESSAGE)]
    assert [(n.path, n.line, n.message) for n in report.notes] == [
        ("ft.yaml", 5, note("FineTune", "/spec/template")[1])]


# ---------------------------------------------------------------------------------------------- GPUs beside the pods

def patched_roles(gpus: Any) -> dict[str, Any]:
    """A custom resource whose pod template holds no GPU, and a role that patches it by name with a GPU request (the
    shape of RoleBasedGroup's roles[].standalonePattern.templateRef.patch)."""
    patch = {"spec": {"containers": [{"name": "engine", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}
    return cr({"roleTemplates": [{"name": "base", "template": {"spec": {"containers": [
                   {"name": "engine", "image": IMAGE}]}}}],
               "roles": [{"name": "decode", "standalonePattern": {"templateRef": {"name": "base", "patch": patch}}}]},
              kind="RoleGroup")


def test_a_gpu_request_beside_the_pods_found_is_said_not_read(loaded: Loaded) -> None:
    # Pods found by shape, none asks for a GPU, and a GPU request lies elsewhere in the spec (a patch over a named
    # template): a GPU workload, not checked, pointing at the request.
    where = "/spec/roles/0/standalonePattern/templateRef/patch/spec/containers/0/resources/limits/nvidia.com~1gpu"
    findings, notes, unchecked = run(loaded, patched_roles("2"))
    assert findings == []
    assert notes == []  # the note names GPU pods found by shape; the template found holds none
    assert unchecked == [(where, f"GPU request not read: nvidia.com/gpu: '2' at {where} is in none of the pod specs "
                                 "found by shape (a patch over a template, or fields its operator reads; a row in the "
                                 "workload-kinds table reads RoleGroup as its operator does)")]
    result = evaluate(patched_roles("2"), loaded.ruleset, EvalContext(loaded.kb, None, CrlIndex()))
    assert result.gpu is True


@pytest.mark.parametrize("gpus", [0, "0"])
def test_a_zero_request_beside_the_pods_is_no_gpu_workload(loaded: Loaded, gpus: Any) -> None:
    result = evaluate(patched_roles(gpus), loaded.ruleset, EvalContext(loaded.kb, None, CrlIndex()))
    assert (result.gpu, result.unchecked) == (False, [])


def test_a_patch_alone_with_no_pod_found_is_not_a_workload(loaded: Loaded) -> None:
    # A policy that patches GPU limits into pods (Kyverno-style: containers without an image) holds no pod itself.
    obj = cr({"rules": [{"mutate": {"patchStrategicMerge": {"spec": {"containers": [
        {"name": "*", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}}]}, kind="ClusterPolicy",
        api_version="kyverno.io/v1")
    result = evaluate(obj, loaded.ruleset, EvalContext(loaded.kb, None, CrlIndex()))
    assert (result.findings, result.problems, result.gpu, result.unchecked) == ([], [], False, [])
