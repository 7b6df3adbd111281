"""GPUs an operator asks for in its own fields (rules/data/workload-kinds.yaml): Substratus' spec.resources.gpu.count,
Kthena's backend workers, Kaito's instance types, NIMBuild's resources. Each is a GPU workload with the exact
request, pointer and coverage record; a count of 0 is none."""

from __future__ import annotations

from typing import Any

from ruamel.yaml import YAML

from compatcheck.core.checks.base import container_gpu_requests
from compatcheck.core.workloads import pod_targets
from compatcheck.io.lint import LintOptions, run_lint
from compatcheck.io.loader import Loaded

NO_NODES = "no nodes known: no --nodes file, and its node selection pins no GPU or driver"

SERVER = """\
apiVersion: substratus.ai/v1
kind: Server
metadata:
  name: falcon
spec:
  image: substratusai/model-server-basaran
  resources:
    gpu:
      type: nvidia-l4
      count: 2
"""

BOOSTER = """\
apiVersion: workload.serving.volcano.sh/v1alpha1
kind: ModelBooster
metadata:
  name: pd
spec:
  backend:
    name: b
    type: vLLMDisaggregated
    workers:
      - type: prefill
        image: vllm/vllm-openai:v0.9.2
        resources:
          limits:
            nvidia.com/gpu: 1
      - type: decode
        image: private.example.com/vllm:custom
        resources:
          limits:
            nvidia.com/gpu: 2
      - type: router
        image: busybox
"""

WORKSPACE = """\
apiVersion: kaito.sh/v1beta1
kind: Workspace
metadata:
  name: phi
resource:
  instanceType: Standard_NC96ads_A100_v4
  labelSelector: {matchLabels: {apps: phi}}
inference:
  preset:
    name: phi-4-mini-instruct
"""


def load(text: str) -> dict[str, Any]:
    obj: dict[str, Any] = YAML(typ="safe").load(text)
    return obj


def coverage(loaded: Loaded, name: str, text: str) -> tuple[int, list[tuple[int | None, str]]]:
    report = run_lint([name], loaded, LintOptions(), texts={name: text})
    return report.gpu_workloads, [(n.line, n.reason) for n in report.not_checked]


def test_substratus_gpu_count_is_the_container_request(loaded: Loaded) -> None:
    (pod,) = pod_targets(load(SERVER), loaded.kb.kinds)
    (c,) = pod.containers
    assert (c.name, c.data, pod.pointer) == (
        "serve", {"name": "serve", "image": "substratusai/model-server-basaran",
                  "resources": {"limits": {"nvidia.com/gpu": 2}}}, "/spec")
    assert coverage(loaded, "server.yaml", SERVER) == (1, [
        (6, "image CUDA unknown: no image pattern recognises 'substratusai/model-server-basaran' (container serve)"),
        (5, NO_NODES)])
    assert coverage(loaded, "server.yaml", SERVER.replace("count: 2", "count: 0")) == (0, [])


def test_each_kthena_worker_is_a_pod_of_its_own(loaded: Loaded) -> None:
    pods = pod_targets(load(BOOSTER), loaded.kb.kinds)
    assert [(p.pointer, [(c.name, container_gpu_requests(c)) for c in p.containers]) for p in pods] == [
        ("/spec/backend/workers/0", [("worker", {"nvidia.com/gpu": 1})]),
        ("/spec/backend/workers/1", [("worker", {"nvidia.com/gpu": 2})]),
        ("/spec/backend/workers/2", [("worker", {})])]
    assert coverage(loaded, "booster.yaml", BOOSTER) == (1, [
        (10, NO_NODES),
        (16, "image CUDA unknown: no image pattern recognises 'private.example.com/vllm:custom' (container worker)"),
        (15, NO_NODES)])


def test_a_kaito_instance_type_gives_the_preset_its_gpus(loaded: Loaded) -> None:
    (pod,) = pod_targets(load(WORKSPACE), loaded.kb.kinds)
    (c,) = pod.containers
    assert (pod.pointer, c.name, container_gpu_requests(c), c.implied_pointer) == (
        "/inference/preset", "preset", {"nvidia.com/gpu": 4}, "/resource/instanceType")
    assert coverage(loaded, "ws.yaml", WORKSPACE.replace("Standard_NC96ads_A100_v4", "Standard_D4s_v5")) == (1, [
        (6, "GPU request not read: 'Standard_D4s_v5' is not a profile the workload-kinds table knows: its GPUs are "
            "unknown"),
        (9, NO_NODES)])
