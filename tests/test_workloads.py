"""The kind -> pod-spec table: every declared location yields its containers, with the right pointers."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core.workloads import PodLocation, WorkloadKind, pod_targets
from compatcheck.io.loader import builtin_kinds

WORKLOAD_KINDS = builtin_kinds().kinds  # the built-in table (rules/data/workload-kinds.yaml)


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
            is_list = t in ("workerGroupSpecs", "replicatedJobs", "tasks", "cliques", "components", "templates")
            if i + 1 == len(tokens) - 1:  # the location is each item (Argo's /spec/templates/*): the item is it
                node[t] = [value] if is_list else {"Worker": value}
                return
            child = [{}] if is_list else {"Worker": {}}
            node[t] = child
            node = child[0] if is_list else child["Worker"]
            continue
        node = node.setdefault(t, child) if not last else node.__setitem__(t, child)


def _pod_template(loc: PodLocation) -> dict[str, Any]:
    spec = {"containers": [{"name": "main", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04"}],
            "initContainers": [{"name": "init", "image": "busybox"}]}
    return {"metadata": {"annotations": {"a": "b"}}, "spec": spec} if loc.shape == "template" else spec


FLAT = [(wk, loc) for wk in WORKLOAD_KINDS for loc in wk.locations if loc.flat is not None]


@pytest.mark.parametrize(("wk", "loc"), [(wk, loc) for wk in WORKLOAD_KINDS for loc in wk.locations
                                         if loc.flat is None],
                         ids=[f"{wk.kind}({wk.groups[0] or 'core'}){loc.pattern}" for wk in WORKLOAD_KINDS
                              for loc in wk.locations if loc.flat is None])
def test_each_location_is_found(wk: WorkloadKind, loc: PodLocation) -> None:
    group, version = wk.groups[0], wk.versions[0] if wk.versions else "v1"  # a version the row reads
    obj: dict[str, Any] = {"apiVersion": f"{group}/{version}" if group else version, "kind": wk.kind,
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


def test_the_flat_kinds_are_these() -> None:
    assert [(wk.kind, loc.pattern) for wk, loc in FLAT] == [
        ("NIMService", "/spec"), ("TrainJob", "/spec/trainer"), ("NIMBuild", "/spec"), ("Server", "/spec"),
        ("Model", "/spec"), ("Notebook", "/spec"), ("Dataset", "/spec"), ("ModelBooster", "/spec/backend/workers/*"),
        ("Playground", "/spec"), ("Workspace", "/*/preset"), ("VLLMRuntime", "/spec/deploymentConfig")]


def test_a_nimservice_is_one_container_with_the_placement_of_its_spec() -> None:
    obj = {"apiVersion": "apps.nvidia.com/v1alpha1", "kind": "NIMService", "metadata": {"name": "n"}, "spec": {
        "image": {"repository": "nvcr.io/nim/meta/llama-3.1-8b-instruct", "tag": "1.3.3", "pullPolicy": "Always"},
        "args": ["--x"], "env": [{"name": "A", "value": "b"}], "nodeSelector": {"pool": "gpu"},
        "resources": {"limits": {"nvidia.com/gpu": 2}}, "replicas": 1}}
    (t,) = pod_targets(obj)
    assert t.flat and t.pointer == "/spec" and t.spec["nodeSelector"] == {"pool": "gpu"}
    (c,) = t.containers
    assert (c.name, c.pointer, c.init) == ("nim", "/spec", False)
    assert c.data == {"name": "nim", "image": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3", "args": ["--x"],
                      "env": [{"name": "A", "value": "b"}], "resources": {"limits": {"nvidia.com/gpu": 2}}}


def test_a_trainjob_trainer_and_a_vllmruntime_deployment_config() -> None:
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "j"}, "spec": {
        "trainer": {"image": "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "command": ["torchrun"],
                    "resourcesPerNode": {"limits": {"nvidia.com/gpu": 4}}}}}
    (c,) = pod_targets(job)[0].containers
    assert c.data == {"name": "trainer", "image": "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
                      "command": ["torchrun"], "resources": {"limits": {"nvidia.com/gpu": 4}}}
    runtime = {"apiVersion": "production-stack.vllm.ai/v1alpha1", "kind": "VLLMRuntime", "metadata": {"name": "v"},
               "spec": {"model": {"modelURL": "Qwen/Qwen3-8B", "dtype": "bfloat16"},
                        "vllmConfig": {"tensorParallelSize": 2, "extraArgs": ["--enforce-eager"]},
                        "deploymentConfig": {"image": {"registry": "docker.io", "name": "vllm/vllm-openai:v0.9.2"},
                                             "resources": {"cpu": "4", "gpu": "2", "gpuType": "nvidia.com/gpu"}}}}
    (c,) = pod_targets(runtime)[0].containers
    assert c.data == {"name": "vllm", "image": "docker.io/vllm/vllm-openai:v0.9.2",
                      "resources": {"limits": {"nvidia.com/gpu": "2"}},
                      "args": ["Qwen/Qwen3-8B", "--dtype", "bfloat16", "--tensor-parallel-size", "2",
                               "--enforce-eager"]}
    # the arguments the operator builds point at the fields they come from
    assert [c.pointer_at("args", i) for i in range(6)] == [
        "/spec/model/modelURL", "/spec/model/dtype", "/spec/model/dtype", "/spec/vllmConfig/tensorParallelSize",
        "/spec/vllmConfig/tensorParallelSize", "/spec/vllmConfig/extraArgs/0"]


def test_dynamo_v1alpha1_counts_the_service_gpus_for_its_main_container() -> None:
    main = {"mainContainer": {"image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.4.0"}}
    obj = {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "d"},
           "spec": {"services": {"Frontend": {"extraPodSpec": main},
                                 "decode": {"resources": {"limits": {"gpu": "2"}}, "extraPodSpec": main}}}}
    front, decode = pod_targets(obj)
    assert [(c.name, c.pointer, c.implied_gpu) for c in front.containers] == [
        ("mainContainer", "/spec/services/Frontend/extraPodSpec/mainContainer", {})]
    assert [(c.name, c.implied_gpu, c.implied_pointer) for c in decode.containers] == [
        ("mainContainer", {"nvidia.com/gpu": "2"}, "/spec/services/decode/resources/limits/gpu")]


@pytest.mark.parametrize(("annotations", "expected"), [
    ({"gpu-fraction": "0.5"}, ("main", "/metadata/annotations/gpu-fraction")),
    ({"gpu-memory": "2000"}, ("main", "/metadata/annotations/gpu-memory")),
    ({"gpu-fraction": "0.5", "gpu-fraction-container-name": "init"}, ("init", "/metadata/annotations/gpu-fraction")),
    ({"gpu-fraction-container-name": "init"}, None),
])
def test_kai_sharing_annotations_are_a_gpu_request(annotations: dict[str, str], expected: Any) -> None:
    """KAI Scheduler docs/gpu-sharing: the first container gets the shared GPU, or the one named."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": annotations}, "spec": {
        "schedulerName": "kai-scheduler", "initContainers": [{"name": "init", "image": "busybox"}],
        "containers": [{"name": "main", "image": "nvidia/cuda:13.0.2-base-ubi8"}, {"name": "side", "image": "x"}]}}
    got = [(c.name, c.implied_pointer) for t in pod_targets(pod) for c in t.containers if c.implied_gpu]
    assert got == ([] if expected is None else [expected])
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {
        "metadata": {"annotations": annotations}, "spec": pod["spec"]}}}
    got = [(c.name, c.implied_pointer) for t in pod_targets(deploy) for c in t.containers if c.implied_gpu]
    assert got == ([] if expected is None else [(expected[0], "/spec/template" + expected[1])])


def test_docs_say_which_fields_each_kind_of_the_table_reads() -> None:
    """docs/workloads.md has a row for every (group, kind) of the table: "Kind, Kind (group, group) | fields"."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "workloads.md").read_text()
    documented = set()
    for line in text.splitlines():
        if not line.startswith("| ") or line.startswith("| Kind") or line.startswith("|---"):
            continue
        cell = line.split("|")[1].strip()
        kinds, _, groups = cell.partition(" (")
        for kind in kinds.split(", "):
            for group in groups.rstrip(")").split(", "):
                documented.add(("" if group == "core" else group, kind))
    table = {(g, wk.kind) for wk in WORKLOAD_KINDS for g in wk.groups}
    assert table - documented == set()
