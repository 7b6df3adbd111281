"""PodAnalysis memos shared through the EvalContext (the webhook keeps one context per cluster snapshot): a pod
evaluated after another must get exactly what it would get alone, whichever placement field differs."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from compatcheck.core.checks.base import EvalContext
from compatcheck.core.engine import evaluate
from compatcheck.io.loader import Loaded, load_nodes

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


def test_reviews_never_scan_every_node(loaded: Loaded, monkeypatch: pytest.MonkeyPatch) -> None:
    # Placement is answered from per-key indexes built once per snapshot: 40 pods pinned to 40 nodes of a
    # 3,000-node cluster whose nodes all carry unique labels read each node's labels once per key, not per pod.
    import compatcheck.core.cluster as cluster_module
    from compatcheck.core.cluster import NodeRecord, build_cluster
    from compatcheck.core.engine import evaluate

    nodes = [{"metadata": {"name": f"n{i}", "labels": {
        "kubernetes.io/hostname": f"n{i}", "nvidia.com/gpu.product": ["Tesla-T4", "NVIDIA-L4"][i % 2],
        "nvidia.com/cuda.driver-version.full": "550.54.15", "example.com/instance-id": f"i-{i}",
        "example.com/rack": f"r{i // 20}"}}, "status": {"allocatable": {"nvidia.com/gpu": "1"}}}
        for i in range(3000)]
    ctx = EvalContext(loaded.kb, build_cluster(nodes, loaded.kb))
    reads = []
    column = cluster_module._column
    monkeypatch.setattr(cluster_module, "_column",
                        lambda recs, key: reads.append((key, len(recs))) or column(recs, key))

    def no_scan(rec: NodeRecord) -> dict[str, str]:
        raise AssertionError("placement looked at the nodes one by one")

    monkeypatch.setattr(NodeRecord, "placement_labels", no_scan)
    stuck = []
    for i in range(40):
        pod = base_pod()
        host = "gone" if i % 10 == 0 else "n5" if i == 5 else f"n{100 + i * 50}"
        pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": host}
        pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "example.com/rack", "operator": "NotIn", "values": ["r0"]}]}]}}}
        pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
        if any(f.rule_id == "gpu-no-eligible-node" for f in evaluate(pod, loaded.ruleset, ctx).findings):
            stuck.append(i)
    assert sorted(reads) == [("example.com/rack", 3000), ("kubernetes.io/hostname", 3000)]
    assert stuck == [0, 5, 10, 20, 30]  # pinned to a node that is not there, or in rack r0 (n0-n19)
