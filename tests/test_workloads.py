"""The kind -> pod-spec table: every declared location yields its containers, with the right pointers."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core.workloads import WORKLOAD_KINDS, PodLocation, WorkloadKind, pod_targets


def _place(obj: dict[str, Any], pattern: str, value: Any) -> None:
    tokens = [t for t in pattern.split("/") if t]
    node: Any = obj
    for i, t in enumerate(tokens):
        last = i == len(tokens) - 1
        nxt_is_star = not last and tokens[i + 1] == "*"
        if t == "*":
            continue
        child: Any = value if last else ({} if not nxt_is_star else None)
        if nxt_is_star:
            # '*' is a list for JobSet/Ray/Volcano, a map for Kubeflow replica specs: use a map with one key
            # unless the parent name says list.
            is_list = t in ("workerGroupSpecs", "replicatedJobs", "tasks")
            child = [{}] if is_list else {"Worker": {}}
            node[t] = child
            node = child[0] if is_list else child["Worker"]
            continue
        node = node.setdefault(t, child) if not last else node.__setitem__(t, child)


def _pod_template(loc: PodLocation) -> dict[str, Any]:
    spec = {"containers": [{"name": "main", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04"}],
            "initContainers": [{"name": "init", "image": "busybox"}]}
    return {"metadata": {"annotations": {"a": "b"}}, "spec": spec} if loc.shape == "template" else spec


@pytest.mark.parametrize(("wk", "loc"), [(wk, loc) for wk in WORKLOAD_KINDS for loc in wk.locations],
                         ids=[f"{wk.kind}({wk.groups[0] or 'core'}){loc.pattern}" for wk in WORKLOAD_KINDS
                              for loc in wk.locations])
def test_each_location_is_found(wk: WorkloadKind, loc: PodLocation) -> None:
    group = wk.groups[0]
    obj: dict[str, Any] = {"apiVersion": f"{group}/v1" if group else "v1", "kind": wk.kind,
                           "metadata": {"name": "x"}}
    if loc.pattern == "":
        obj.update(_pod_template(loc))
    else:
        _place(obj, loc.pattern, _pod_template(loc))
    targets = pod_targets(obj)
    assert targets, obj
    names = {c.name for t in targets for c in t.containers}
    assert {"main", "init"} <= names
    for t in targets:
        for c in t.containers:
            # The pointer really leads to the container.
            node: Any = obj
            for tok in c.pointer.strip("/").split("/"):
                node = node[int(tok)] if isinstance(node, list) else node[tok.replace("~1", "/").replace("~0", "~")]
            assert node is c.data


def test_kserve_framework_shortcut_is_a_container() -> None:
    obj = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": {"name": "m"},
           "spec": {"predictor": {"nodeSelector": {"a": "b"},
                                  "pytorch": {"storageUri": "s3://x", "resources": {"limits": {"nvidia.com/gpu": 1}}}}}}
    (t,) = pod_targets(obj)
    assert t.pointer == "/spec/predictor" and t.spec["nodeSelector"] == {"a": "b"}
    assert [(c.name, c.pointer) for c in t.containers] == [("pytorch", "/spec/predictor/pytorch")]


def test_same_kind_name_in_different_groups() -> None:
    volcano = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "v"},
               "spec": {"tasks": [{"template": {"spec": {"containers": [{"name": "t"}]}}}]}}
    assert pod_targets(volcano)[0].pointer == "/spec/tasks/0/template/spec"
    unknown = {"apiVersion": "example.com/v1", "kind": "Job", "spec": {"template": {"spec": {"containers": []}}}}
    assert pod_targets(unknown) == []


def test_template_annotations_override_object_annotations() -> None:
    obj = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "d", "annotations": {"k": "obj", "o": "1"}},
           "spec": {"template": {"metadata": {"annotations": {"k": "tpl"}}, "spec": {"containers": [{"name": "c"}]}}}}
    (t,) = pod_targets(obj)
    assert t.annotations == {"k": "tpl", "o": "1"}
