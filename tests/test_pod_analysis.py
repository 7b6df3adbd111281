"""PodAnalysis memos shared through the EvalContext (the webhook keeps one context per cluster snapshot): a pod
evaluated after another must get exactly what it would get alone, whichever placement field differs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from compatcheck.checks.base import EvalContext
from compatcheck.engine import evaluate
from compatcheck.loader import Loaded, load_nodes

ROOT = Path(__file__).resolve().parent.parent


def base_pod() -> dict[str, Any]:
    # CUDA 12.8 is newer than the A100 pool's driver (550): a finding exactly when that pool is eligible.
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "d"}, "spec": {
        "nodeSelector": {"pool": "training"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [{"name": "c", "image": "nvidia/cuda:12.8.0-base-ubuntu22.04",
                        "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}


def _vary(field: str) -> dict[str, Any]:
    pod = base_pod()
    spec = pod["spec"]
    if field == "nodeSelector":
        spec["nodeSelector"] = {"nvidia.com/gpu.product": "Tesla-T4"}
    elif field == "tolerations":
        del spec["tolerations"]
    elif field == "nodeName":
        spec["nodeName"] = "t4-inference-0"
    elif field == "affinity":
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["Tesla-T4"]}]}]}}}
    elif field == "gpu-request":
        spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "16"
    return pod


def _answer(obj: dict[str, Any], loaded: Loaded, ctx: EvalContext) -> list[tuple[str, str]]:
    return sorted((f.rule_id, f.message) for f in evaluate(copy.deepcopy(obj), loaded.ruleset, ctx).findings)


@pytest.fixture
def fresh(loaded: Loaded) -> Any:
    cluster, errors = load_nodes(str(ROOT / "examples" / "cluster-profile.yaml"), loaded.kb, 1 << 24)
    assert not errors
    return lambda: EvalContext(loaded.kb, cluster)


@pytest.mark.parametrize("field", ["nodeSelector", "tolerations", "nodeName", "affinity", "gpu-request"])
def test_placement_memo_is_keyed_by_every_field_placement_reads(field: str, loaded: Loaded, fresh: Any) -> None:
    shared = fresh()
    first = _answer(base_pod(), loaded, shared)
    varied = _vary(field)
    alone = _answer(varied, loaded, fresh())
    assert alone != first, "the variant must change the answer, or this test proves nothing"
    assert _answer(varied, loaded, shared) == alone
    assert _answer(base_pod(), loaded, shared) == first
