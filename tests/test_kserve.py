"""KServe: which ServingRuntime an InferenceService naming only a model format runs on, and the container that
results (kserve/kserve GetSupportingRuntimes, RuntimeSupportsModel, MergeRuntimeContainers)."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core.kserve import build_runtime_index, merged, resolve_predictors
from compatcheck.core.workloads import pod_targets


def runtime(name: str, image: str, *, kind: str = "ServingRuntime", namespace: str | None = "ml",
            formats: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace and kind == "ServingRuntime":
        meta["namespace"] = namespace
    return {"apiVersion": "serving.kserve.io/v1alpha1", "kind": kind, "metadata": meta, "spec": {
        "supportedModelFormats": formats if formats is not None else [{"name": "vllm", "autoSelect": True}],
        "containers": [{"name": "sidecar", "image": "busybox"}, {"name": "kserve-container", "image": image,
                                                                 "args": ["--port=8080"]}], **spec}}


def isvc(model: dict[str, Any], namespace: str = "ml") -> dict[str, Any]:
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "m", "namespace": namespace}, "spec": {"predictor": {"model": model}}}


def image_of(obj: dict[str, Any], runtimes: list[dict[str, Any]]) -> Any:
    pods = pod_targets(obj)
    resolve_predictors(obj, pods, build_runtime_index(runtimes))
    (pod,) = pods
    (c,) = pod.containers
    return c.data.get("image")


VLLM = {"modelFormat": {"name": "vllm"}, "resources": {"limits": {"nvidia.com/gpu": 1}}}


@pytest.mark.parametrize(("runtimes", "model", "expected"), [
    # namespaced before cluster-scoped
    ([runtime("c", "cluster:1", kind="ClusterServingRuntime"), runtime("n", "ns:1")], VLLM, "ns:1"),
    # another namespace's runtime is not a candidate; the cluster's is
    ([runtime("c", "cluster:1", kind="ClusterServingRuntime"), runtime("n", "ns:1", namespace="other")], VLLM,
     "cluster:1"),
    # the highest priority for the format; a runtime without one comes after those with one
    ([runtime("a", "a:1"), runtime("b", "b:1", formats=[{"name": "vllm", "autoSelect": True, "priority": 1}]),
      runtime("c", "c:1", formats=[{"name": "vllm", "autoSelect": True, "priority": 5}])], VLLM, "c:1"),
    # autoSelect false, disabled, multi-model, or another protocol: not chosen automatically
    ([runtime("a", "a:1", formats=[{"name": "vllm"}]), runtime("b", "b:1", disabled=True),
      runtime("c", "c:1", multiModel=True), runtime("d", "d:1", protocolVersions=["v2"])], VLLM, None),
    # ... but a runtime named by the model needs only to list the format
    ([runtime("a", "a:1", formats=[{"name": "vllm"}])], {**VLLM, "runtime": "a"}, "a:1"),
    # a model format version must be listed
    ([runtime("a", "a:1", formats=[{"name": "vllm", "version": "1", "autoSelect": True}])],
     {**VLLM, "modelFormat": {"name": "vllm", "version": "2"}}, None),
    # the model's own image wins
    ([runtime("a", "a:1")], {**VLLM, "image": "mine:1"}, "mine:1"),
])
def test_runtime_selection(runtimes: list[dict[str, Any]], model: dict[str, Any], expected: Any) -> None:
    assert image_of(isvc(model), runtimes) == expected


def test_a_framework_shortcut_is_its_model_format() -> None:
    obj = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": {"name": "m"},
           "spec": {"predictor": {"pytorch": {"storageUri": "s3://x"}}}}
    rt = runtime("torchserve", "pytorch/torchserve-kfs:0.9.0-gpu", kind="ClusterServingRuntime",
                 formats=[{"name": "pytorch", "autoSelect": True}])
    assert image_of(obj, [rt]) == "pytorch/torchserve-kfs:0.9.0-gpu"


def test_the_predictor_container_is_merged_over_the_runtime_one() -> None:
    base = {"name": "kserve-container", "image": "r:1", "args": ["--port=8080"], "env": [
        {"name": "A", "value": "1"}, {"name": "B", "value": "1"}], "resources": {"limits": {"cpu": "1"}}}
    over = {"name": "model", "args": ["--dtype=bfloat16"], "env": [{"name": "B", "value": "2"}],
            "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "2"}}}
    assert merged(base, over) == {
        "name": "kserve-container", "image": "r:1", "args": ["--dtype=bfloat16"],
        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
        "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "1"}, "requests": {"cpu": "2"}}}
