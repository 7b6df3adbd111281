"""llmaz Playgrounds (compatcheck.core.llmaz): the GPUs come from the claimed OpenModel's flavor and the image from the
BackendRuntime, resolved among the files linted together; what is not in the input is a not-checked record naming
it."""

from __future__ import annotations

from typing import Any

from ruamel.yaml import YAML

from compatcheck.core.checks.base import EvalContext, PodAnalysis, container_gpu_requests
from compatcheck.core.crl import CrlIndex
from compatcheck.core.llmaz import build_index, resolve_playground
from compatcheck.core.workloads import pod_targets
from compatcheck.io.lint import LintOptions, run_lint
from compatcheck.io.loader import Loaded

MODEL = """\
apiVersion: llmaz.io/v1alpha1
kind: OpenModel
metadata:
  name: qwen
spec:
  familyName: qwen
  source: {modelHub: {modelID: Qwen/Qwen2-0.5B-Instruct}}
  inferenceConfig:
    flavors:
      - name: t4
        limits:
          nvidia.com/gpu: 1
      - name: a100
        limits:
          nvidia.com/gpu: 4
      - name: cpu
        limits:
          cpu: 8
"""
BACKEND = """\
apiVersion: inference.llmaz.io/v1alpha1
kind: BackendRuntime
metadata:
  name: vllm
spec:
  image: vllm/vllm-openai
  version: v0.8.5
"""
PLAYGROUND = """\
apiVersion: inference.llmaz.io/v1alpha1
kind: Playground
metadata:
  name: qwen
  namespace: llm
spec:
  replicas: 1
  modelClaim:
    modelName: qwen
{flavors}  backendRuntimeConfig:
    resources:
      limits:
        cpu: 4
        nvidia.com/gpu: 8
"""


def playground(flavors: str = "") -> str:
    return PLAYGROUND.format(flavors=flavors)


def records(loaded: Loaded, texts: dict[str, str]) -> tuple[int, int, list[tuple[str, int | None, str]]]:
    report = run_lint(list(texts), loaded, LintOptions(), texts=texts)
    return (report.gpu_workloads, report.gpu_workloads - report.unchecked_objects(),
            [(n.path, n.line, n.reason) for n in report.not_checked])


NO_NODES = "no nodes known: no --nodes file, and its node selection pins no GPU or driver"


def test_the_model_flavor_and_the_backend_image_are_resolved(loaded: Loaded) -> None:
    texts = {"model.yaml": MODEL, "backend.yaml": BACKEND,
             "pg.yaml": playground("    inferenceFlavors: [a100]\n")}
    assert records(loaded, texts) == (1, 0, [("pg.yaml", 6, NO_NODES)])
    objs = [YAML(typ="safe").load(t) for t in texts.values()]
    (pod,) = pod_targets(objs[2], loaded.kb.kinds)
    resolve_playground(objs[2], [pod], build_index(objs))
    (c,) = pod.containers
    # The flavor's accelerators overwrite backendRuntimeConfig's (8): 4 GPUs, pointed at the claim.
    assert (c.name, c.data["image"], container_gpu_requests(c), c.implied_pointer) == (
        "model-runner", "vllm/vllm-openai:v0.8.5", {"nvidia.com/gpu": 4}, "/spec/modelClaim/modelName")
    assert c.data["resources"] == {"limits": {"cpu": 4}}
    analysis = PodAnalysis(pod, EvalContext(loaded.kb, None, CrlIndex()))
    assert analysis.is_gpu_pod and analysis.runtime(c).version is not None


def test_without_flavors_claimed_the_first_flavor_is_used() -> None:
    objs: list[dict[str, Any]] = [YAML(typ="safe").load(t) for t in (MODEL, BACKEND, playground())]
    from compatcheck.io.loader import load_rules

    kinds = load_rules().kb.kinds
    (pod,) = pod_targets(objs[2], kinds)
    resolve_playground(objs[2], [pod], build_index(objs))
    assert container_gpu_requests(pod.containers[0]) == {"nvidia.com/gpu": 1}


def test_a_cpu_flavor_is_no_gpu_workload(loaded: Loaded) -> None:
    pg = playground("    inferenceFlavors: [cpu]\n").replace("        nvidia.com/gpu: 8\n", "")
    assert records(loaded, {"model.yaml": MODEL, "backend.yaml": BACKEND, "pg.yaml": pg}) == (0, 0, [])


def test_an_open_model_not_in_the_input_is_named(loaded: Loaded) -> None:
    pg = playground().replace("        nvidia.com/gpu: 8\n", "")
    assert records(loaded, {"backend.yaml": BACKEND, "pg.yaml": pg}) == (1, 0, [
        ("pg.yaml", 9, "GPU request not read: OpenModel 'qwen' (its GPUs are its inference flavors' limits) is not in "
                       "the input"),
        ("pg.yaml", 6, NO_NODES)])


def test_a_backend_runtime_not_in_the_input_is_named(loaded: Loaded) -> None:
    pg = playground().replace("  backendRuntimeConfig:\n", "  backendRuntimeConfig:\n    backendName: sglang\n")
    assert records(loaded, {"model.yaml": MODEL, "backend.yaml": BACKEND, "pg.yaml": pg}) == (1, 0, [
        ("pg.yaml", 11, "image CUDA unknown: the image comes from BackendRuntime 'sglang', which is not in the input"),
        ("pg.yaml", 6, NO_NODES)])
