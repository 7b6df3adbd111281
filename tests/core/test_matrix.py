"""matrix: a pool's name (the first pool label all its nodes share, else product and driver) and description, a
cluster restricted to one pool, a cell's status from its findings, and the matrix's order."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core.cluster import DRIVER_FULL_LABEL, build_cluster
from compatcheck.core.matrix import Cell, Pool, build_matrix, cell, pool_of, restrict
from compatcheck.core.model import Finding, ObjectRef, Severity
from tests.core.tables import make_kb

KB = make_kb()
T4 = {"nvidia.com/gpu.product": "Tesla-T4", DRIVER_FULL_LABEL: "550.54.15"}


def node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"nvidia.com/gpu": 1}}}


def pool_names(*nodes: dict[str, Any]) -> list[str]:
    return [pool_of(cls).name for cls in build_cluster(list(nodes), KB).classes]


@pytest.mark.parametrize(("labels", "name"), [
    ([{"pool": "train"}, {"pool": "train"}], "train"),
    ([{"cloud.google.com/gke-nodepool": "gpu"}] * 2, "cloud.google.com/gke-nodepool=gpu"),
    ([{"eks.amazonaws.com/nodegroup": "g"}], "eks.amazonaws.com/nodegroup=g"),
    ([{"kubernetes.azure.com/agentpool": "a", "agentpool": "b"}], "kubernetes.azure.com/agentpool=a"),
    ([{"agentpool": "b", "karpenter.sh/nodepool": "k"}], "agentpool=b"),
    ([{"karpenter.sh/nodepool": "k", "node.kubernetes.io/instance-type": "g5"}], "karpenter.sh/nodepool=k"),
    ([{"node.kubernetes.io/instance-type": "g5"}], "node.kubernetes.io/instance-type=g5"),
    # the first label every member shares wins: "pool" differs, one node lacks agentpool
    ([{"pool": "a", "agentpool": "x", "karpenter.sh/nodepool": "k"}, {"pool": "b", "karpenter.sh/nodepool": "k"}],
     "karpenter.sh/nodepool=k"),
    ([{"pool": "a"}, {"pool": "b"}], "Tesla-T4 / 550.54.15 (CUDA 12.4)"),
    ([{"pool": "a"}, {}], "Tesla-T4 / 550.54.15 (CUDA 12.4)"),
    ([{"other": "x"}], "Tesla-T4 / 550.54.15 (CUDA 12.4)"),
])
def test_a_pool_is_named_by_the_first_pool_label_its_nodes_share(labels: list[dict[str, str]], name: str) -> None:
    assert pool_names(*(node(f"n{i}", {**T4, **extra}) for i, extra in enumerate(labels))) == [name]


def test_a_pool_describes_its_nodes_gpu_and_driver() -> None:
    cluster = build_cluster([node("a", T4), node("b", T4), node("c", {}),
                             node("d", {"nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "0"}),
                             node("e", {"nvidia.com/gpu.product": "Mystery-GPU"})], KB)
    pools = [pool_of(cls) for cls in cluster.classes]
    assert pools == [
        Pool("Tesla-T4 / 550.54.15 (CUDA 12.4)", 2, "Tesla-T4 (compute capability 7.5)", "550.54.15 (CUDA 12.4)"),
        Pool("nodes / an unknown driver", 1, "no GPU", "an unknown driver"),
        Pool("nodes / an unknown driver", 1, "GPU (compute capability 8.0)", "an unknown driver"),
        Pool("Mystery-GPU / an unknown driver", 1, "Mystery-GPU", "an unknown driver")]
    assert [p.describe() for p in pools[:2]] == [
        "2 nodes, Tesla-T4 (compute capability 7.5), driver 550.54.15 (CUDA 12.4)",
        "1 node, no GPU, driver an unknown driver"]
    assert Pool("p", 0, "g", "d").describe() == "0 nodes, g, driver d"


def test_restrict_keeps_one_class_and_the_clusters_other_views() -> None:
    cluster = build_cluster([node("a", {**T4, "pool": "t4"}), node("b", {"pool": "cpu"}),
                             node("c", {"pool": "cpu"})], KB)
    cluster.admission_plugins = frozenset({"ExtendedResourceToleration"})
    cluster.unknown_keys = frozenset({"topology.kubernetes.io/zone"})
    cluster.device_class_origins = {"gpu.nvidia.com": ({"kind": "DeviceClass"}, "nodes.yaml", 3)}
    sentinel: Any = object()
    cluster.dra = sentinel
    one = restrict(cluster, 1, KB)
    assert [[m.name for m in cls.members] for cls in one.classes] == [["b", "c"]]
    assert one.node_count == 2
    assert (one.dra, one.admission_plugins, one.unknown_keys, one.device_class_origins) == (
        sentinel, frozenset({"ExtendedResourceToleration"}), frozenset({"topology.kubernetes.io/zone"}),
        {"gpu.nvidia.com": ({"kind": "DeviceClass"}, "nodes.yaml", 3)})
    assert one.device_class_origins is not cluster.device_class_origins
    assert [[m.name for m in cls.members] for cls in restrict(cluster, 0, KB).classes] == [["a"]]


def finding(rule: str, severity: Severity, message: str = "m", name: str = "w", kind: str = "Deployment") -> Finding:
    return Finding(rule, severity, message, ObjectRef("apps/v1", kind, "ns", name), "/spec")


E, W, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO


@pytest.mark.parametrize(("findings", "expected"), [
    ([], Cell("ok")),
    ([finding("r", INFO)], Cell("ok", (("r", "info", "m"),))),
    ([finding("r", W, "b"), finding("r", W, "a"), finding("r", W, "a"), finding("s", INFO)],
     Cell("warning", (("r", "warning", "a"), ("r", "warning", "b"), ("s", "info", "m")))),
    ([finding("z", W), finding("a", E), finding("m", INFO)],
     Cell("error", (("a", "error", "m"), ("m", "info", "m"), ("z", "warning", "m")))),
    ([finding("a", E), finding("gpu-no-eligible-node", E, "nowhere"), finding("z", W)],
     Cell("n/a", (("gpu-no-eligible-node", "error", "nowhere"),))),
    ([finding("gpu-no-eligible-node", W, "x")], Cell("n/a", (("gpu-no-eligible-node", "warning", "x"),))),
])
def test_a_cells_status_is_its_worst_finding_unless_the_workload_cannot_land(findings: list[Finding],
                                                                            expected: Cell) -> None:
    assert cell(findings) == expected


def test_the_matrix_sorts_pools_by_name_and_rows_and_groups_findings_per_workload() -> None:
    pools = [Pool("b", 1, "g", "d"), Pool("a", 2, "g", "d"), Pool("b", 3, "g", "d")]
    rows = [("Deployment", "ns", "w"), ("Job", "ns", "j"), ("Deployment", "ns", "w"), ("Deployment", "ns", "v")]
    per_pool = [[finding("r", E)],  # pool b (1 node)
                [finding("s", W, name="j", kind="Job"), finding("t", INFO, name="v")],  # pool a
                []]  # pool b (3 nodes)
    m = build_matrix(pools, rows, per_pool)
    assert [(p.name, p.nodes) for p in m.pools] == [("a", 2), ("b", 1), ("b", 3)]
    assert m.rows == [("Deployment", "ns", "v"), ("Deployment", "ns", "w"), ("Job", "ns", "j")]
    assert {k: c.status for k, c in m.cells.items()} == {
        (("Deployment", "ns", "v"), 0): "ok", (("Deployment", "ns", "w"), 0): "ok", (("Job", "ns", "j"), 0): "warning",
        (("Deployment", "ns", "v"), 1): "ok", (("Deployment", "ns", "w"), 1): "error", (("Job", "ns", "j"), 1): "ok",
        (("Deployment", "ns", "v"), 2): "ok", (("Deployment", "ns", "w"), 2): "ok", (("Job", "ns", "j"), 2): "ok"}
    assert m.cells[(("Deployment", "ns", "v"), 0)] == Cell("ok", (("t", "info", "m"),))
    assert (m.changes, build_matrix([], [], []).cells) == ({}, {})
