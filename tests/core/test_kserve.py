"""compatcheck.core.kserve on hand-written runtimes: which ServingRuntime KServe picks for a model format (named,
eligible, ranked), the container that results when the predictor's fields are merged over the runtime's, and which
InferenceService predictors are completed. Exact results, every branch (kserve/kserve GetSupportingRuntimes,
RuntimeSupportsModel, MergeRuntimeContainers)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from compatcheck.core.kserve import (
    EMPTY_RUNTIMES,
    Runtime,
    RuntimeIndex,
    build_runtime_index,
    is_runtime,
    merged,
    resolve_predictors,
    runtime_container,
)
from compatcheck.core.workloads import pod_targets

V1 = "serving.kserve.io/v1alpha1"


def rt(name: str | None, *, kind: str = "ServingRuntime", namespace: str | None = None,
       formats: list[Any] | None = None, containers: list[Any] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {} if name is None else {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    body: dict[str, Any] = {"supportedModelFormats": formats if formats is not None else
                            [{"name": "vllm", "autoSelect": True}], **spec}
    body["containers"] = containers if containers is not None else [{"name": "kserve-container",
                                                                      "image": f"{name}:1"}]
    return {"apiVersion": V1, "kind": kind, "metadata": meta, "spec": body}


def pick(runtimes: list[dict[str, Any]], model: dict[str, Any], fmt: str = "vllm",
         namespace: str | None = "ml") -> str | None:
    found = build_runtime_index(runtimes).select(namespace, model, fmt)
    return None if found is None else found.where


@pytest.mark.parametrize(("obj", "expected"), [
    ({"apiVersion": V1, "kind": "ServingRuntime"}, True),
    ({"apiVersion": "serving.kserve.io/v1beta1", "kind": "ClusterServingRuntime"}, True),
    ({"apiVersion": V1, "kind": "InferenceService"}, False),
    ({"apiVersion": "serving.kserve.iox/v1", "kind": "ServingRuntime"}, False),
    ({"apiVersion": "serving.kserve.io", "kind": "ServingRuntime"}, False),
    ({"apiVersion": None, "kind": "ServingRuntime"}, False),
    ({"kind": "ServingRuntime"}, False),
])
def test_what_is_a_runtime(obj: dict[str, Any], expected: bool) -> None:
    assert is_runtime(obj) is expected


def test_the_index_keeps_runtimes_by_namespace_and_cluster_runtimes_apart() -> None:
    index = build_runtime_index([
        rt("a", namespace="ml"), rt("b"), rt("c", kind="ClusterServingRuntime"), rt(None, namespace="ml"),
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
        {"apiVersion": V1, "kind": "ServingRuntime", "metadata": {"name": "d", "namespace": "ml"}}])
    assert {ns: [r.where for r in rs] for ns, rs in index.namespaced.items()} == {
        "ml": ["ServingRuntime ml/a", "ServingRuntime ml/d"], None: ["ServingRuntime b"]}
    assert [r.where for r in index.cluster] == ["ClusterServingRuntime c"]
    assert index.namespaced["ml"][1] == Runtime("ServingRuntime", "ml", "d", {})
    assert index.namespaced["ml"][0].spec["containers"] == [{"name": "kserve-container", "image": "a:1"}]
    assert bool(index) is True
    assert bool(RuntimeIndex()) is False and bool(EMPTY_RUNTIMES) is False
    assert bool(build_runtime_index([rt("c", kind="ClusterServingRuntime")])) is True
    assert bool(build_runtime_index([rt("b")])) is True
    assert bool(build_runtime_index([rt(None)])) is False


def test_a_runtime_without_a_kind_string_is_namespaced() -> None:
    index = RuntimeIndex()
    index.add({"metadata": {"name": "x", "namespace": "ml"}, "spec": "not a mapping"})
    assert index.namespaced == {"ml": [Runtime("None", "ml", "x", {})]} and index.cluster == []


VLLM: dict[str, Any] = {"modelFormat": {"name": "vllm"}}


@pytest.mark.parametrize(("runtimes", "model", "namespace", "expected"), [
    # the InferenceService's namespace, then runtimes written without one (applied to it), then the cluster's
    ([rt("c", kind="ClusterServingRuntime"), rt("n", namespace="ml")], VLLM, "ml", "ServingRuntime ml/n"),
    ([rt("c", kind="ClusterServingRuntime"), rt("n")], VLLM, "ml", "ServingRuntime n"),
    ([rt("c", kind="ClusterServingRuntime"), rt("n", namespace="other")], VLLM, "ml", "ClusterServingRuntime c"),
    ([rt("n", namespace="other")], VLLM, "ml", None),
    # an InferenceService without a namespace sees only runtimes without one
    ([rt("n", namespace="ml"), rt("c", kind="ClusterServingRuntime")], VLLM, None, "ClusterServingRuntime c"),
    ([rt("n", namespace="ml"), rt("m")], VLLM, None, "ServingRuntime m"),
    # ranked within a group: a priority for the format first, the highest first, then by name
    ([rt("z", formats=[{"name": "vllm", "autoSelect": True, "priority": 1}]), rt("a"),
      rt("m", formats=[{"name": "vllm", "autoSelect": True, "priority": 2}])], VLLM, "ml", "ServingRuntime m"),
    ([rt("z", formats=[{"name": "vllm", "autoSelect": True, "priority": 1}]), rt("a")], VLLM, "ml",
     "ServingRuntime z"),
    ([rt("b"), rt("a")], VLLM, "ml", "ServingRuntime a"),
    ([rt("b", formats=[{"name": "vllm", "autoSelect": True, "priority": 3}]),
      rt("a", formats=[{"name": "vllm", "autoSelect": True, "priority": 3}])], VLLM, "ml", "ServingRuntime a"),
    # a priority given to another format, or not an integer, is no priority for this one
    ([rt("a"), rt("b", formats=[{"name": "other", "autoSelect": True, "priority": 9},
                                {"name": "vllm", "autoSelect": True}])], VLLM, "ml", "ServingRuntime a"),
    ([rt("a"), rt("b", formats=[{"name": "vllm", "autoSelect": True, "priority": "9"}])], VLLM, "ml",
     "ServingRuntime a"),
    ([rt("b", formats=[{"name": "vllm", "autoSelect": True, "priority": 0}]), rt("a")], VLLM, "ml",
     "ServingRuntime b"),
    # only formats with autoSelect: true (the boolean) are chosen automatically
    ([rt("a", formats=[{"name": "vllm"}])], VLLM, "ml", None),
    ([rt("a", formats=[{"name": "vllm", "autoSelect": "true"}])], VLLM, "ml", None),
    ([rt("a", formats=[{"autoSelect": True}, "junk", {"name": "vllm", "autoSelect": True}])], VLLM, "ml",
     "ServingRuntime a"),
    ([rt("a", formats=[{"name": "other", "autoSelect": True}])], VLLM, "ml", None),
    # disabled and multi-model runtimes are never chosen automatically (only true disables)
    ([rt("a", disabled=True), rt("b")], VLLM, "ml", "ServingRuntime b"),
    ([rt("a", multiModel=True), rt("b")], VLLM, "ml", "ServingRuntime b"),
    ([rt("a", disabled=False, multiModel="yes")], VLLM, "ml", "ServingRuntime a"),
    # the protocol: v1 unless the model says otherwise; a runtime without protocolVersions speaks v1
    ([rt("a", protocolVersions=["v2"]), rt("b")], VLLM, "ml", "ServingRuntime b"),
    ([rt("a", protocolVersions=["v2"]), rt("b")], {**VLLM, "protocolVersion": "v2"}, "ml", "ServingRuntime a"),
    ([rt("a", protocolVersions=["v1", "v2"])], VLLM, "ml", "ServingRuntime a"),
    ([rt("a", protocolVersions=[])], VLLM, "ml", "ServingRuntime a"),
    ([rt("a")], {**VLLM, "protocolVersion": "v2"}, "ml", None),
    # a model format version must be listed with the format
    ([rt("a", formats=[{"name": "vllm", "version": "1", "autoSelect": True}])],
     {"modelFormat": {"name": "vllm", "version": "1"}}, "ml", "ServingRuntime a"),
    ([rt("a", formats=[{"name": "vllm", "version": "1", "autoSelect": True}])],
     {"modelFormat": {"name": "vllm", "version": "2"}}, "ml", None),
    ([rt("a", formats=[{"name": "vllm", "version": "1", "autoSelect": True}])], VLLM, "ml", "ServingRuntime a"),
    ([rt("a")], {"modelFormat": {"name": "vllm", "version": "1"}}, "ml", None),
    # a named runtime: it must exist (here, without a namespace, or the cluster's) and list the format
    ([rt("a", formats=[{"name": "vllm"}]), rt("b")], {**VLLM, "runtime": "a"}, "ml", "ServingRuntime a"),
    ([rt("a", namespace="ml", disabled=True)], {**VLLM, "runtime": "a"}, "ml", "ServingRuntime ml/a"),
    ([rt("a", kind="ClusterServingRuntime")], {**VLLM, "runtime": "a"}, "ml", "ClusterServingRuntime a"),
    ([rt("a", namespace="ml"), rt("a", kind="ClusterServingRuntime")], {**VLLM, "runtime": "a"}, "ml",
     "ServingRuntime ml/a"),
    ([rt("a", namespace="other"), rt("b")], {**VLLM, "runtime": "a"}, "ml", None),
    ([rt("a", formats=[{"name": "other"}]), rt("b")], {**VLLM, "runtime": "a"}, "ml", None),
    ([rt("a", formats=[{"name": "vllm", "version": "1"}])],
     {"modelFormat": {"name": "vllm", "version": "1"}, "runtime": "a"}, "ml", "ServingRuntime a"),
    ([rt("a", formats=[{"name": "vllm", "version": "1"}])],
     {"modelFormat": {"name": "vllm", "version": "2"}, "runtime": "a"}, "ml", None),
    ([rt("a", formats=[{"name": "vllm"}])], {"modelFormat": {"name": "vllm", "version": "2"}, "runtime": "a"}, "ml",
     None),
])
def test_the_runtime_kserve_selects(runtimes: list[dict[str, Any]], model: dict[str, Any], namespace: str | None,
                                    expected: str | None) -> None:
    assert pick(runtimes, model, namespace=namespace) == expected


def test_a_namespaced_runtime_is_not_counted_twice() -> None:
    index = build_runtime_index([rt("a")])
    assert [r.where for r in index._in("ml")] == ["ServingRuntime a"]
    assert [r.where for r in index._in(None)] == ["ServingRuntime a"]
    index.namespaced["ml"] = list(index.namespaced[None])
    assert [r.where for r in index._in("ml")] == ["ServingRuntime a"]


@pytest.mark.parametrize(("containers", "expected"), [
    ([{"name": "sidecar", "image": "s"}, {"name": "kserve-container", "image": "k"}], "k"),
    ([{"name": "first", "image": "f"}, {"name": "second", "image": "s"}], "f"),
    (["junk", {"name": "kserve-container", "image": "k"}], "k"),
    ([], None),
])
def test_the_runtime_container(containers: list[Any], expected: str | None) -> None:
    found = runtime_container(Runtime("ServingRuntime", None, "r", {"containers": containers}))
    assert (None if found is None else found.get("image", "")) == (expected if expected != "junk" else "")


def test_no_containers_no_runtime_container() -> None:
    assert runtime_container(Runtime("ServingRuntime", None, "r", {})) is None


def test_the_predictor_is_merged_over_the_runtime_container() -> None:
    base = {"name": "kserve-container", "image": "rt:1", "command": ["python"], "args": ["--port=8080"],
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1"}}}
    before = copy.deepcopy(base)
    over = {"image": "mine:2", "args": ["--dtype=half"], "command": [],
            "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}],
            "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "2Gi"}, "claims": [{"name": "x"}]},
            "modelFormat": {"name": "vllm"}}
    assert merged(base, over) == {
        "name": "kserve-container", "image": "mine:2", "command": ["python"], "args": ["--dtype=half"],
        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}, {"name": "C", "value": "4"}],
        "resources": {"limits": {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": 1}, "requests": {"cpu": "1"},
                      "claims": {}}}
    assert base == before  # the runtime's container is not changed


def test_merging_adds_no_empty_fields() -> None:
    assert merged({"name": "c", "image": "rt:1"}, {"image": "", "args": None}) == {"name": "c", "image": "rt:1"}
    assert merged({"name": "c"}, {"command": ["x"], "env": [{"name": "A"}]}) == {
        "name": "c", "command": ["x"], "env": [{"name": "A"}]}
    assert merged({"name": "c"}, {"resources": {"limits": {"cpu": "1"}}}) == {
        "name": "c", "resources": {"limits": {"cpu": "1"}}}
    assert merged({"name": "c", "env": [{"name": "A"}]}, {}) == {"name": "c", "env": [{"name": "A"}]}


def isvc(predictor: dict[str, Any], *, kind: str = "InferenceService",
         api_version: str = "serving.kserve.io/v1beta1", namespace: str | None = "ml") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "m"}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": {"predictor": predictor}}


def resolved(obj: dict[str, Any], runtimes: list[dict[str, Any]]) -> list[tuple[bool, list[tuple[str, Any]]]]:
    pods = pod_targets(obj)
    resolve_predictors(obj, pods, build_runtime_index(runtimes))
    return [(p.flat, [(c.rel, c.data.get("image")) for c in p.containers]) for p in pods]


RUNTIMES = [rt("v", namespace="ml"), rt("p", kind="ClusterServingRuntime", formats=[
    {"name": "pytorch", "autoSelect": True}])]


@pytest.mark.parametrize(("obj", "expected"), [
    # model + modelFormat, and a framework shortcut read as the format of its name
    (isvc({"model": VLLM}), [(True, [("/model", "v:1")])]),
    (isvc({"pytorch": {"storageUri": "s3://m"}}), [(True, [("/pytorch", "p:1")])]),
    # a model with an image of its own keeps it and is not marked
    (isvc({"model": {**VLLM, "image": "mine:1"}}), [(False, [("/model", "mine:1")])]),
    # a model without a format, a format no runtime serves
    (isvc({"model": {"storageUri": "s3://m"}}), [(False, [("/model", None)])]),
    (isvc({"tensorflow": {"storageUri": "s3://m"}}), [(False, [("/tensorflow", None)])]),
    # a pod-spec container without an image is no predictor model
    (isvc({"containers": [{"name": "x"}]}), [(False, [("/containers/0", None)])]),
    # each predictor field on its own: one that is not completed does not stop the next
    (isvc({"containers": [{"name": "x", "image": "own:1"}], "model": VLLM}),
     [(True, [("/containers/0", "own:1"), ("/model", "v:1")])]),
    (isvc({"model": {"storageUri": "s3://m"}, "pytorch": {}}), [(True, [("/model", None), ("/pytorch", "p:1")])]),
    (isvc({"model": {"modelFormat": {"name": "onnx"}}, "pytorch": {}}),
     [(True, [("/model", None), ("/pytorch", "p:1")])]),
    # the InferenceService's namespace decides which runtimes are seen
    (isvc({"model": VLLM}, namespace="other"), [(False, [("/model", None)])]),
    (isvc({"model": VLLM}, namespace=None), [(False, [("/model", None)])]),
])
def test_which_predictors_are_completed(obj: dict[str, Any], expected: list[Any]) -> None:
    assert resolved(obj, RUNTIMES) == expected


def test_nothing_is_completed_without_runtimes_or_for_other_kinds() -> None:
    obj = isvc({"model": VLLM})
    assert resolved(obj, []) == [(False, [("/model", None)])]
    pods = pod_targets(obj)
    for other in ({**obj, "kind": "Deployment"}, {**obj, "apiVersion": "example.com/v1"},
                  {**obj, "apiVersion": "v1"}, {k: v for k, v in obj.items() if k != "apiVersion"}):
        resolve_predictors(other, pods, build_runtime_index(RUNTIMES))
        assert [(p.flat, c.data) for p in pods for c in p.containers] == [(False, VLLM)]


def test_a_runtime_without_containers_completes_nothing() -> None:
    assert resolved(isvc({"model": VLLM}), [rt("v", namespace="ml", containers=[])]) == [(False, [("/model", None)])]


def test_the_completed_container_is_the_merge() -> None:
    obj = isvc({"model": {**VLLM, "args": ["--dtype=bfloat16"], "resources": {"limits": {"nvidia.com/gpu": 1}}}})
    pods = pod_targets(obj)
    resolve_predictors(obj, pods, build_runtime_index([rt("v", namespace="ml", containers=[
        {"name": "kserve-container", "image": "vllm:1", "args": ["--port=8080"]}])]))
    assert pods[0].containers[0].data == {
        "name": "kserve-container", "image": "vllm:1", "args": ["--dtype=bfloat16"],
        "resources": {"limits": {"nvidia.com/gpu": 1}}}
