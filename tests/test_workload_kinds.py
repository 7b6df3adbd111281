"""Every kind of the workload table, end to end: one failing GPU manifest per (API group, kind) in
``fixtures/_workloads`` (each in its project's own shape) must produce exactly the findings written below,
through ``compatcheck lint`` (a subprocess, JSON output) and through the webhook (``admission.review`` on an
AdmissionReview built as the API server builds it for that kind), and none once every GPU quantity is 0.

The list of kinds here is written out, not read from the table: removing a kind from the table (or adding one
without a manifest) fails ``test_the_table_knows_exactly_these_kinds``, and the manifest of a removed kind stops
producing its findings. The expectations are written by hand (reviewed against NVIDIA's driver/CUDA table), not
generated: each message says the pinned R470 driver runs CUDA 11.4, which the image's CUDA outgrew.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from compatcheck.core.admission import AdmissionSettings, review
from compatcheck.core.checks.base import EvalContext
from compatcheck.core.cluster import is_gpu_resource
from compatcheck.core.crl import CrlIndex
from compatcheck.core.workloads import api_group
from compatcheck.io.loader import Loaded, builtin_kinds
from tests.conftest import FIXTURES, ROOT, admission_review

WORKLOADS = FIXTURES / "_workloads"
RULE = "cuda-affinity-mismatch"
WORKLOAD_KINDS = builtin_kinds().kinds  # the built-in table (rules/data/workload-kinds.yaml)


def r470(cuda: str, origin: str, branch: int) -> str:
    """The message of a container whose CUDA ``cuda`` (found from ``origin``) the R470 pin cannot run (the default
    driver policy: no minor-version compatibility floor is offered)."""
    return (f"the pod's node selection admits only drivers for CUDA 11.4, too old for image CUDA {cuda} ({origin}); "
            f"it needs a driver from branch >= {branch}")


SELECTOR = "/spec/template/spec/nodeSelector"  # of every kind whose pod template is /spec/template

# file -> [(pointer, container, message)] of the cuda-affinity-mismatch errors it must produce, in order.
EXPECTED: dict[str, list[tuple[str, str, str]]] = {
    # core
    "pods.yaml": [("/spec/nodeSelector", "vllm", r470("12.4", "image vllm/vllm-openai:v0.6.3", 550))],
    "podtemplates.yaml": [
        ("/template/spec/nodeSelector", "vectoradd", r470("12.4", "image nvidia/cuda:12.4.1-base-ubuntu22.04", 550))],
    "replicationcontrollers.yaml": [
        (SELECTOR, "triton", r470("12.4", "image nvcr.io/nvidia/tritonserver:24.05-py3", 550))],
    # apps (and the extensions/v1beta1 of old manifests)
    "deployments.apps.yaml": [("/spec/template/spec/nodeSelector", "inference-server", r470(
        "12.4", "image ghcr.io/huggingface/text-generation-inference:2.4.0, whose wheels load CUDA 12.4 over its CUDA "
        "12.1 base", 550))],
    "deployments.extensions.yaml": [
        (SELECTOR, "server", r470("12.2", "image nvidia/cuda:12.2.2-runtime-ubuntu22.04", 535))],
    "statefulsets.apps.yaml": [("/spec/template/spec/nodeSelector", "ollama", r470("12.4", "env CUDA_VERSION", 550))],
    "daemonsets.apps.yaml": [("/spec/template/spec/nodeSelector", "cuda-validation",
                              r470("12.6", "image nvcr.io/nvidia/cuda:12.6.3-base-ubi9", 560))],
    "daemonsets.extensions.yaml": [
        ("/spec/template/spec/nodeSelector", "burn", r470("12.1", "image nvidia/cuda:12.1.1-devel-ubuntu22.04", 530))],
    "replicasets.apps.yaml": [
        ("/spec/template/spec/nodeSelector", "inference-server", r470("12.8", "image vllm/vllm-openai:v0.9.2", 570))],
    "replicasets.extensions.yaml": [
        (SELECTOR, "server", r470("12.2", "image nvidia/cuda:12.2.2-runtime-ubuntu22.04", 535))],
    # batch
    "jobs.batch.yaml": [("/spec/template/spec/affinity/nodeAffinity", "trainer",
                         r470("12.4", "image pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", 550))],
    "cronjobs.batch.yaml": [("/spec/jobTemplate/spec/template/spec/nodeSelector", "embed",
                             r470("12.1", "image pytorch/pytorch:2.4.1-cuda12.1-cudnn9-runtime", 530))],
    # OpenShift, Argo
    "deploymentconfigs.apps.openshift.io.yaml": [
        ("/spec/template/spec/nodeSelector", "triton",
         r470("12.4", "image nvcr.io/nvidia/tritonserver:24.07-trtllm-python-py3", 550))],
    "rollouts.argoproj.io.yaml": [
        ("/spec/template/spec/nodeSelector", "vllm", r470("12.4", "image vllm/vllm-openai:v0.6.3", 550))],
    # Kubeflow training operator, PaddleFlow
    "pytorchjobs.kubeflow.org.yaml": [
        ("/spec/pytorchReplicaSpecs/Master/template/spec/nodeSelector", "pytorch",
         r470("12.1", "image pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime", 530)),
        ("/spec/pytorchReplicaSpecs/Worker/template/spec/nodeSelector", "pytorch",
         r470("12.1", "image pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime", 530)),
    ],
    "tfjobs.mlkube.io.yaml": [("/spec/replica_specs/0/template/spec/nodeSelector", "tensorflow",
                               r470("12.4", "image nvidia/cuda:12.4.1-base-ubuntu22.04", 550))],
    "tfjobs.kubeflow.org.yaml": [("/spec/tfReplicaSpecs/Worker/template/spec/nodeSelector", "tensorflow",
                                  r470("12.2", "image tensorflow/tensorflow:2.15.0-gpu", 535))],
    "paddlejobs.kubeflow.org.yaml": [
        ("/spec/paddleReplicaSpecs/Worker/template/spec/nodeSelector", "paddle",
         r470("12.0", "image paddlepaddle/paddle:2.6.1-gpu-cuda12.0-cudnn8.9-trt8.6", 525))],
    "mpijobs.kubeflow.org.yaml": [("/spec/mpiReplicaSpecs/Worker/template/spec/nodeSelector", "worker",
                                   r470("12.3", "image nvcr.io/nvidia/tensorflow:24.01-tf2-py3", 545))],
    "xgboostjobs.kubeflow.org.yaml": [
        ("/spec/xgbReplicaSpecs/Master/template/spec/affinity/nodeAffinity", "xgboost",
         r470("12.5", "image rapidsai/base:24.12-cuda12.5-py3.12", 555)),
        ("/spec/xgbReplicaSpecs/Worker/template/spec/affinity/nodeAffinity", "xgboost",
         r470("12.5", "image rapidsai/base:24.12-cuda12.5-py3.12", 555)),
    ],
    "jaxjobs.kubeflow.org.yaml": [
        ("/spec/jaxReplicaSpecs/Worker/template/spec/nodeSelector", "jax",
         r470("12.8", "image nvcr.io/nvidia/cuda-dl-base:25.01-cuda12.8-devel-ubuntu24.04", 570))],
    "paddlejobs.batch.paddlepaddle.org.yaml": [
        ("/spec/worker/template/spec/nodeSelector", "resnet",
         r470("12.0", "image paddlepaddle/paddle:2.6.1-gpu-cuda12.0-cudnn8.9-trt8.6", 525))],
    # KubeRay, AIBrix
    "rayclusters.ray.io.yaml": [("/spec/workerGroupSpecs/0/template/spec/nodeSelector", "ray-worker",
                                 r470("12.1", "annotation compatcheck.io/cuda-runtime", 530))],
    "rayjobs.ray.io.yaml": [("/spec/rayClusterSpec/headGroupSpec/template/spec/nodeSelector", "ray-head",
                             r470("12.1", "annotation compatcheck.io/cuda-runtime.ray-head", 530))],
    "rayservices.ray.io.yaml": [("/spec/rayClusterConfig/workerGroupSpecs/0/template/spec/nodeSelector", "llm",
                                 r470("12.4", "annotation compatcheck.io/cuda-runtime", 550))],
    "rayclusterfleets.orchestration.aibrix.ai.yaml": [
        ("/spec/template/spec/headGroupSpec/template/spec/nodeSelector", "ray-head",
         r470("12.4", "image vllm/vllm-openai:v0.6.3", 550)),
        ("/spec/template/spec/workerGroupSpecs/0/template/spec/nodeSelector", "ray-worker",
         r470("12.4", "image vllm/vllm-openai:v0.6.3", 550)),
    ],
    # kubernetes-sigs, Volcano
    "jobsets.jobset.x-k8s.io.yaml": [("/spec/replicatedJobs/1/template/spec/template/spec/nodeSelector", "pytorch",
                                      r470("12.4", "image pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", 550))],
    "leaderworkersets.leaderworkerset.x-k8s.io.yaml": [
        ("/spec/leaderWorkerTemplate/leaderTemplate/spec/nodeSelector", "vllm-leader",
         r470("12.8", "image vllm/vllm-openai:v0.9.2", 570)),
        ("/spec/leaderWorkerTemplate/workerTemplate/spec/nodeSelector", "vllm-worker",
         r470("12.8", "image vllm/vllm-openai:v0.9.2", 570)),
    ],
    "jobs.batch.volcano.sh.yaml": [("/spec/tasks/1/template/spec/nodeSelector", "mpiworker",
                                    r470("12.4", "image nvcr.io/nvidia/pytorch:24.05-py3", 550))],
    # KServe, Knative
    "inferenceservices.serving.kserve.io.yaml": [("/spec/predictor/nodeSelector", "pytorch",
                                                  r470("12.1", "annotation compatcheck.io/cuda-runtime", 530))],
    "inferencegraphs.serving.kserve.io.yaml": [],  # a router with no pod spec of its own
    # KFServing (serving.kubeflow.org, before KServe)
    "inferenceservices.serving.kubeflow.org.yaml": [("/spec/predictor/nodeSelector", "pytorch",
                                                     r470("12.1", "annotation compatcheck.io/cuda-runtime", 530))],
    "llminferenceservices.serving.kserve.io.yaml": [
        ("/spec/template/nodeSelector", "main", r470("12.8", "image vllm/vllm-openai:v0.9.2", 570)),
        ("/spec/worker/nodeSelector", "main", r470("12.8", "image vllm/vllm-openai:v0.9.2", 570)),
    ],
    "servingruntimes.serving.kserve.io.yaml": [
        ("/spec/nodeSelector", "kserve-container", r470("12.4", "image vllm/vllm-openai:v0.6.3", 550))],
    "clusterservingruntimes.serving.kserve.io.yaml": [
        ("/spec/nodeSelector", "kserve-container", r470("12.4", "image nvcr.io/nvidia/tritonserver:24.05-py3", 550))],
    "services.serving.knative.dev.yaml": [("/spec/template/spec/nodeSelector", "containers[0]",
                                           r470("12.4", "image nvidia/cuda:12.4.1-cudnn-runtime-ubuntu22.04", 550))],
    # KubeShare
    "sharepods.sharedgpu.goc.yaml": [
        ("/spec/nodeSelector", "cuda", r470("12.4", "image nvidia/cuda:12.4.1-base-ubuntu22.04", 550))],
    # NVIDIA NIM Operator, Dynamo, Grove
    "nimservices.apps.nvidia.com.yaml": [
        ("/spec/nodeSelector", "nim", r470("12.8", "annotation compatcheck.io/cuda-runtime", 570))],
    "dynamographdeployments.nvidia.com.yaml": [
        ("/spec/components/1/podTemplate/spec/nodeSelector", "main",
         r470("12.9", "annotation compatcheck.io/cuda-runtime", 575))],
    "nimbuilds.apps.nvidia.com.yaml": [
        ("/spec/nodeSelector", "nim-build-ctr", r470("12.8", "annotation compatcheck.io/cuda-runtime", 570))],
    "podcliquesets.grove.io.yaml": [("/spec/template/cliques/0/spec/podSpec/nodeSelector", "model-worker",
                                     r470("12.4", "image vllm/vllm-openai:v0.6.3", 550))],
    # Kubeflow Trainer v2 (a TrainJob is placed by its runtime: nothing of its own pins a driver)
    "trainingruntimes.trainer.kubeflow.org.yaml": [
        ("/spec/template/spec/replicatedJobs/0/template/spec/template/spec/nodeSelector", "node",
         r470("12.4", "image pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", 550))],
    "clustertrainingruntimes.trainer.kubeflow.org.yaml": [
        ("/spec/template/spec/replicatedJobs/0/template/spec/template/spec/nodeSelector", "node",
         r470("12.4", "image pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", 550))],
    "trainjobs.trainer.kubeflow.org.yaml": [],
    # vLLM production-stack (no placement fields: nothing pins a driver)
    "vllmruntimes.production-stack.vllm.ai.yaml": [],
    # llmaz, Substratus (no placement fields: nothing pins a driver), Kthena
    "playgrounds.inference.llmaz.io.yaml": [],
    "workspaces.kaito.sh.yaml": [
        ("/inference/template/spec/nodeSelector", "vllm", r470("12.8", "image vllm/vllm-openai:v0.9.2", 570))],
    "servers.substratus.ai.yaml": [],
    "models.substratus.ai.yaml": [],
    "notebooks.substratus.ai.yaml": [],
    "datasets.substratus.ai.yaml": [],
    "modelboosters.workload.serving.volcano.sh.yaml": [
        ("/spec/backend/workers/0/affinity/nodeAffinity", "worker",
         r470("12.8", "image vllm/vllm-openai:v0.9.2", 570))],
    # Argo Workflows: each container-running template is a pod whose placement is the template's own
    "workflows.argoproj.io.yaml": [
        ("/spec/templates/1/nodeSelector", "container", r470("12.8", "image vllm/vllm-openai:v0.9.2", 570))],
    "workflowtemplates.argoproj.io.yaml": [
        ("/spec/templates/0/nodeSelector", "infer", r470("12.4", "image nvidia/cuda:12.4.1-base-ubuntu22.04", 550))],
    "clusterworkflowtemplates.argoproj.io.yaml": [
        ("/spec/templates/0/affinity/nodeAffinity", "script",
         r470("12.2", "image nvidia/cuda:12.2.2-runtime-ubuntu22.04", 535))],
    "cronworkflows.argoproj.io.yaml": [
        ("/spec/workflowSpec/templates/0/nodeSelector", "eval",
         r470("12.4", "image pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", 550))],
}

# Known gaps: the finding written above is the right one, and compatcheck does not give it yet (strict: a fix
# makes these tests fail until the mark is removed).
GAPS: dict[str, str] = {}

# Kubernetes names a resource by the lower-case plural of its kind; all of these follow the rule.
def resource_of(kind: str) -> str:
    return kind.lower() + "s"


def load(name: str) -> dict[str, Any]:
    obj: dict[str, Any] = YAML(typ="safe").load((WORKLOADS / name).read_text())
    return obj


def cases(*, gaps: bool = True) -> list[Any]:
    return [pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=GAPS[name])) if name in GAPS and gaps
            else name for name in sorted(EXPECTED)]


def test_every_manifest_is_named_by_its_resource_and_group() -> None:
    files = sorted(p.name for p in WORKLOADS.glob("*.yaml"))
    assert files == sorted(EXPECTED)
    for name in files:
        obj = load(name)
        group = api_group(obj["apiVersion"])
        assert name == f"{resource_of(obj['kind'])}{'.' + group if group else ''}.yaml"


def test_the_table_knows_exactly_these_kinds() -> None:
    """The manifests' (group, kind) pairs are the table's: a kind dropped from the table, or one added to it
    without a manifest here, fails."""
    manifests = {(api_group(load(n)["apiVersion"]), load(n)["kind"]) for n in EXPECTED}
    table = {(g, wk.kind) for wk in WORKLOAD_KINDS for g in wk.groups}
    assert table == manifests, {"only in the table": table - manifests, "only here": manifests - table}


# ---------------------------------------------------------------------------------------------- through lint


def _lint(directory: Path) -> dict[str, list[dict[str, Any]]]:
    """``compatcheck lint DIR --format json`` as a user runs it: the findings by file name."""
    proc = subprocess.run([sys.executable, "-m", "compatcheck", "lint", str(directory), "--format", "json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    out = json.loads(proc.stdout)
    assert out["errors"] == [] and out["skipped"] == [], out
    by_file: dict[str, list[dict[str, Any]]] = {}
    for f in out["findings"]:
        by_file.setdefault(Path(f["file"]).name, []).append(f)
    return by_file


@pytest.fixture(scope="module")
def linted() -> dict[str, list[dict[str, Any]]]:
    return _lint(WORKLOADS)


@pytest.mark.parametrize("name", cases())
def test_lint_finds_exactly_the_expected(linted: dict[str, list[dict[str, Any]]], name: str) -> None:
    obj = load(name)
    got = [(f["rule"], f["severity"], f["pointer"], f["container"], f["message"], f["object"]["kind"],
            f["object"]["name"]) for f in linted.get(name, [])]
    assert got == [(RULE, "error", p, c, m, obj["kind"], obj["metadata"]["name"]) for p, c, m in EXPECTED[name]]


# ---------------------------------------------------------------------------------------------- through the webhook


def _cut(text: str, limit: int) -> str:
    """Denial lines are cut at ``limit`` characters with an ellipsis (compatcheck.core.admission)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


@pytest.fixture(scope="module")
def offline(loaded: Loaded) -> EvalContext:
    return EvalContext(loaded.kb, None, CrlIndex())


def _validate(loaded: Loaded, ctx: EvalContext, obj: dict[str, Any]) -> tuple[dict[str, Any], list[Any]]:
    body, decision = review(admission_review(obj, uid="kinds"), "validate", loaded.ruleset, ctx, AdmissionSettings())
    assert decision.internal_error is None
    return body["response"], decision.findings


@pytest.mark.parametrize("name", cases())
def test_webhook_denies_with_exactly_the_expected(loaded: Loaded, offline: EvalContext, name: str) -> None:
    obj = load(name)
    response, findings = _validate(loaded, offline, obj)
    assert [(f.rule_id, f.severity.value, f.pointer, f.container, f.message) for f in findings] == [
        (RULE, "error", p, c, m) for p, c, m in EXPECTED[name]]
    assert response["uid"] == "kinds"
    if not EXPECTED[name]:
        assert response == {"uid": "kinds", "allowed": True}
        return
    meta = obj["metadata"]
    where = f"{meta['namespace']}/{meta['name']}" if "namespace" in meta else meta["name"]
    assert response["allowed"] is False and "warnings" not in response
    assert response["status"] == {"code": 403, "reason": "Forbidden", "message": "\n".join(
        [f"compatcheck denied {obj['kind']} {where}:"] + [_cut(f"- {RULE}: {m}", 200) for _p, _c, m in EXPECTED[name]])}


# ---------------------------------------------------------------------------------------------- no GPU at all

# Every spelling of zero the API server accepts for an extended resource (a quantity: integer or string,
# with or without a suffix or exponent).
ZEROS: list[Any] = [0, "0", "00", "+0", "0.0", 0.0, "0m", "0k", "0Ki", "0e3", "0E0", "0.000"]


def with_zero_gpus(obj: dict[str, Any], zero: Any) -> dict[str, Any]:
    """``obj`` with every GPU quantity (requests and limits, every container; KubeShare's share annotations) set to
    ``zero``."""
    out = copy.deepcopy(obj)
    annotations = out.get("metadata", {}).get("annotations") or {}
    for key in ("sharedgpu/gpu_request", "sharedgpu/gpu_limit"):
        if key in annotations:
            annotations[key] = "0"

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key in ("requests", "limits"):
                section = node.get(key)
                if isinstance(section, dict):
                    for name in section:
                        if is_gpu_resource(name):
                            section[name] = zero
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(out)
    return out


def zero_variants() -> list[tuple[str, Any]]:
    """Each manifest with zero GPUs, spelled in turn by each of ZEROS (every spelling used at least twice)."""
    names = sorted(n for n in EXPECTED if EXPECTED[n] and n not in GAPS)
    return [(n, ZEROS[i % len(ZEROS)]) for i, n in enumerate(names)]


def test_every_manifest_changes_gpu_quantities() -> None:
    """The zero variants really set something to zero (else the tests below would prove nothing)."""
    for name, zero in zero_variants():
        assert with_zero_gpus(load(name), zero) != load(name), name


@pytest.fixture(scope="module")
def linted_zero(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    d = tmp_path_factory.mktemp("zero-gpus")
    for name, zero in zero_variants():
        (d / name.replace(".yaml", ".json")).write_text(json.dumps(with_zero_gpus(load(name), zero)))
    return _lint(d)


@pytest.mark.parametrize(("name", "zero"), zero_variants(), ids=[f"{n}-{z!r}" for n, z in zero_variants()])
def test_zero_gpus_is_no_gpu_request(loaded: Loaded, offline: EvalContext,
                                     linted_zero: dict[str, list[dict[str, Any]]], name: str, zero: Any) -> None:
    """``nvidia.com/gpu: 0`` requests no GPU: no GPU rule applies, through lint and through the webhook."""
    assert linted_zero.get(name.replace(".yaml", ".json"), []) == []
    response, findings = _validate(loaded, offline, with_zero_gpus(load(name), zero))
    assert findings == [] and response == {"uid": "kinds", "allowed": True}


def _pod(*resources: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": {
        "nodeSelector": {"nvidia.com/cuda.driver-version.major": "470"},
        "containers": [{"name": f"c{i}", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04", "resources": r}
                       for i, r in enumerate(resources)]}}


@pytest.mark.parametrize("zero", ZEROS, ids=repr)
@pytest.mark.parametrize("section", ["limits", "requests and limits"])
def test_zero_in_every_spelling(loaded: Loaded, offline: EvalContext, zero: Any, section: str) -> None:
    sections = ("requests", "limits") if section == "requests and limits" else ("limits",)
    gpu = {s: {"nvidia.com/gpu": zero} for s in sections}
    assert _validate(loaded, offline, _pod(gpu))[1] == []
    # Beside a container that does ask for one GPU, only that one is judged.
    _response, findings = _validate(loaded, offline, _pod(gpu, {"limits": {"nvidia.com/gpu": 1}}))
    assert [(f.rule_id, f.container) for f in findings] == [(RULE, "c1")]


@pytest.mark.parametrize("quantity", [1, "1", "2", "500m", "1e0"], ids=repr)
def test_any_other_quantity_is_a_gpu_request(loaded: Loaded, offline: EvalContext, quantity: Any) -> None:
    """The other side of the zero case: a non-zero (even an invalid fractional) request is a GPU request."""
    _response, findings = _validate(loaded, offline, _pod({"limits": {"nvidia.com/gpu": quantity}}))
    assert RULE in {f.rule_id for f in findings}


# ---------------------------------------------------------------------------------------------- not in the table


def test_a_nimcache_is_no_gpu_workload_and_no_error(loaded: Loaded, offline: EvalContext) -> None:
    """A NIMCache: the Job the operator runs for it asks for cpu and memory only (docs/workloads.md), so it is not in
    the table: lint reads no pod spec in it and says nothing, the webhook admits it with no finding."""
    path = FIXTURES / "_not-workloads" / "nimcaches.apps.nvidia.com.yaml"
    proc = subprocess.run([sys.executable, "-m", "compatcheck", "lint", str(path), "--format", "json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    out = json.loads(proc.stdout)
    assert (proc.returncode, proc.stderr, out["findings"], out["errors"], out["skipped"]) == (0, "", [], [], [])
    assert (out["summary"]["objects"], out["summary"]["documentsWithoutPodSpecs"]) == (0, 1)
    obj = YAML(typ="safe").load(path.read_text())
    assert (obj["kind"], api_group(obj["apiVersion"])) not in {(g, wk.kind) for wk in WORKLOAD_KINDS for g in wk.groups}
    response, findings = _validate(loaded, offline, obj)
    assert (response, findings) == ({"uid": "kinds", "allowed": True}, [])


def test_argo_workflow_finding_is_at_the_templates_line(linted: dict[str, list[dict[str, Any]]]) -> None:
    """The Argo Workflow's finding is at the line of the GPU template's nodeSelector (its pod's placement), and the
    steps template, the GPU-less sidecar, init container and containerSet container give nothing."""
    got = {name: [(f["line"], f["pointer"], f["container"]) for f in linted[name]]
           for name in ("workflows.argoproj.io.yaml", "workflowtemplates.argoproj.io.yaml",
                        "cronworkflows.argoproj.io.yaml")}
    assert got == {"workflows.argoproj.io.yaml": [(15, "/spec/templates/1/nodeSelector", "container")],
                   "workflowtemplates.argoproj.io.yaml": [(12, "/spec/templates/0/nodeSelector", "infer")],
                   "cronworkflows.argoproj.io.yaml": [(14, "/spec/workflowSpec/templates/0/nodeSelector", "eval")]}


def test_argo_template_containers_are_read_from_every_list() -> None:
    """container, script, initContainers, sidecars and containerSet.containers are each read, at their pointers."""
    from compatcheck.core.workloads import pod_targets
    obj = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow", "metadata": {"name": "w"},
           "spec": {"templates": [{"name": "s", "steps": []},
                                  {"name": "a", "container": {"image": "a"}, "initContainers": [{"name": "i"}],
                                   "sidecars": [{"name": "side"}]},
                                  {"name": "b", "script": {"image": "b", "source": "x"}},
                                  {"name": "c", "containerSet": {"containers": [{"name": "c1"}, {"name": "c2"}]}}]}}
    got = [[(c.name, c.pointer, c.init) for c in t.containers] for t in pod_targets(obj, builtin_kinds())]
    assert got == [[],
                   [("i", "/spec/templates/1/initContainers/0", True), ("side", "/spec/templates/1/sidecars/0", False),
                    ("container", "/spec/templates/1/container", False)],
                   [("script", "/spec/templates/2/script", False)],
                   [("c1", "/spec/templates/3/containerSet/containers/0", False),
                    ("c2", "/spec/templates/3/containerSet/containers/1", False)]]
