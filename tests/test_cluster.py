"""Scheduling semantics (selectors, affinity operators, tolerations) and node equivalence classes."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.cluster import Taint, build_cluster, placement_matches, profile_to_nodes, untolerated_taints
from compatcheck.loader import Loaded


def node(name: str, labels: dict[str, str], taints: list[dict[str, str]] | None = None,
         gpus: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
            "spec": {"taints": taints or []}, "status": {"allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "8"}}}


def one_class(loaded: Loaded, labels: dict[str, str], taints: list[dict[str, str]] | None = None) -> Any:
    (cls,) = build_cluster([node("n1", labels, taints)], loaded.kb).classes
    return cls


def term(*exprs: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": list(exprs)}]}}}}


@pytest.mark.parametrize(("expr", "labels", "ok"), [
    ({"key": "a", "operator": "In", "values": ["x", "y"]}, {"a": "y"}, True),
    ({"key": "a", "operator": "In", "values": ["x"]}, {"a": "y"}, False),
    ({"key": "a", "operator": "NotIn", "values": ["x"]}, {}, True),
    ({"key": "a", "operator": "NotIn", "values": ["x"]}, {"a": "x"}, False),
    ({"key": "a", "operator": "Exists"}, {"a": ""}, True),
    ({"key": "a", "operator": "DoesNotExist"}, {"a": "1"}, False),
    ({"key": "cuda-major-version", "operator": "Gt", "values": ["11"]}, {"cuda-major-version": "12"}, True),
    ({"key": "cuda-major-version", "operator": "Gt", "values": ["12"]}, {"cuda-major-version": "12"}, False),
    ({"key": "cuda-major-version", "operator": "Lt", "values": ["12"]}, {"cuda-major-version": "11"}, True),
    ({"key": "cuda-major-version", "operator": "Gt", "values": ["x"]}, {"cuda-major-version": "12"}, False),
    ({"key": "cuda-major-version", "operator": "Gt", "values": ["11"]}, {}, False),
    ({"key": "a", "operator": "Bogus", "values": ["x"]}, {"a": "x"}, False),
])
def test_affinity_operators(loaded: Loaded, expr: dict[str, Any], labels: dict[str, str], ok: bool) -> None:
    assert placement_matches(term(expr), one_class(loaded, labels)) is ok


def test_terms_are_ored_and_expressions_anded(loaded: Loaded) -> None:
    cls = one_class(loaded, {"a": "1", "b": "2"})
    spec = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "a", "operator": "In", "values": ["9"]}]},
        {"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]},
                              {"key": "b", "operator": "In", "values": ["2"]}]}]}}}}
    assert placement_matches(spec, cls)
    spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][1][
        "matchExpressions"][1]["values"] = ["3"]
    assert not placement_matches(spec, cls)


def test_empty_term_matches_nothing(loaded: Loaded) -> None:
    spec = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{}]}}}}
    assert not placement_matches(spec, one_class(loaded, {}))


def test_node_selector_and_hostname(loaded: Loaded) -> None:
    cluster = build_cluster([node(f"gpu-{i}", {"pool": "a"}) for i in range(5)], loaded.kb)
    (cls,) = cluster.classes
    assert cls.count == 5
    assert placement_matches({"nodeSelector": {"pool": "a", "kubernetes.io/hostname": "gpu-3"}}, cls)
    assert not placement_matches({"nodeSelector": {"kubernetes.io/hostname": "gpu-9"}}, cls)
    assert placement_matches(term({"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-1"]}), cls)
    fields = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-4"]}]}]}}}}
    assert placement_matches(fields, cls)
    assert placement_matches({"nodeName": "gpu-2"}, cls) and not placement_matches({"nodeName": "x"}, cls)


@pytest.mark.parametrize(("tolerations", "left"), [
    ([], 2),
    ([{"key": "nvidia.com/gpu", "operator": "Exists"}], 1),
    ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}], 2),
    ([{"key": "nvidia.com/gpu", "value": "present"}], 1),
    ([{"key": "nvidia.com/gpu", "value": "other"}], 2),
    ([{"operator": "Exists"}], 0),
    ([{"key": "nvidia.com/gpu", "operator": "Exists"}, {"key": "dedicated", "operator": "Equal", "value": "ml"}], 0),
])
def test_tolerations(loaded: Loaded, tolerations: list[dict[str, str]], left: int) -> None:
    cls = one_class(loaded, {}, [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                                 {"key": "dedicated", "value": "ml", "effect": "NoExecute"},
                                 {"key": "soft", "value": "x", "effect": "PreferNoSchedule"}])
    assert len(untolerated_taints({"tolerations": tolerations}, cls)) == left


def test_equivalence_classes_do_not_grow_with_node_count(loaded: Loaded) -> None:
    nodes = [node(f"n{i}", {"nvidia.com/gpu.product": ["Tesla-T4", "NVIDIA-L4"][i % 2],
                            "nvidia.com/gfd.timestamp": str(i)}) for i in range(2000)]
    cluster = build_cluster(nodes, loaded.kb)
    assert cluster.node_count == 2000 and len(cluster.classes) == 2


def test_gfd_labels_old_and_new(loaded: Loaded) -> None:
    new = one_class(loaded, {"nvidia.com/cuda.driver-version.full": "550.54.15",
                             "nvidia.com/gpu.compute.major": "9", "nvidia.com/gpu.compute.minor": "0"})
    assert str(new.facts.driver) == "550.54.15" and str(new.facts.driver_cuda) == "12.4"
    assert str(new.facts.compute_capability) == "9.0"
    old = one_class(loaded, {"nvidia.com/cuda.driver.major": "535", "nvidia.com/cuda.driver.minor": "104",
                             "nvidia.com/cuda.driver.rev": "05", "nvidia.com/cuda.runtime.major": "12",
                             "nvidia.com/cuda.runtime.minor": "2"})
    assert str(old.facts.driver) == "535.104.05" and str(old.facts.driver_cuda) == "12.2"
    platform = one_class(loaded, {"cuda-major-version": "12", "cuda-minor-version": "4"})
    assert platform.facts.driver is None and str(platform.facts.driver_cuda) == "12.4"
    bad = one_class(loaded, {"nvidia.com/cuda.driver-version.full": "garbage"})
    assert bad.facts.driver is None and bad.facts.problems


@pytest.mark.parametrize(("pool", "message"), [
    ({"name": "x", "gpu": "Mystery-GPU"}, "not in the gpu-products table"),
    ({"name": "x", "gpu": "Tesla-T4", "sharing": "mps", "replicas": 1}, "needs replicas >= 2"),
    ({"name": "x", "gpu": "Tesla-T4", "sharing": "magic"}, "sharing must be one of"),
    ({"name": "x", "gpu": "Tesla-T4", "driver": "latest"}, "not a version number"),
    ({"name": "x", "gpu": "Tesla-T4", "count": 0}, "count must be a positive integer"),
    ({"name": "x", "gpu": "NVIDIA-A100-SXM4-80GB", "sharing": "mig-mixed"}, "needs migProfiles"),
])
def test_profile_errors(loaded: Loaded, pool: dict[str, Any], message: str) -> None:
    _nodes, errors = profile_to_nodes({"kind": "ClusterProfile", "nodePools": [pool]}, loaded.kb)
    assert any(message in e for e in errors), errors


def test_profile_mig_mixed_and_time_slicing(loaded: Loaded) -> None:
    nodes, errors = profile_to_nodes({"nodePools": [
        {"name": "mig", "gpu": "NVIDIA-A100-SXM4-80GB", "gpusPerNode": 2, "sharing": "mig-mixed",
         "migProfiles": {"1g.10gb": 7}},
        {"name": "ts", "gpu": "Tesla-T4", "sharing": "time-slicing", "replicas": 4, "renameShared": True}]},
        loaded.kb)
    assert not errors
    assert nodes[0]["status"]["allocatable"] == {"nvidia.com/mig-1g.10gb": 14}
    assert nodes[1]["status"]["allocatable"] == {"nvidia.com/gpu.shared": 4}
    assert nodes[1]["metadata"]["labels"]["nvidia.com/gpu.sharing-strategy"] == "time-slicing"


@pytest.mark.parametrize(("pool", "message"), [
    ({"name": "x", "labels": ["a"]}, "labels must be a mapping"),
    ({"name": "x", "resources": "8"}, "resources must be a mapping"),
    ({"name": "x", "taints": {"key": "a"}}, "taints must be a list"),
    ({"name": "x", "gpu": "Tesla-T4", "sharing": "mig-mixed", "migProfiles": {"1g.10gb": "seven"}}, "positive counts"),
    ({"name": "x", "gpu": "Tesla-T4", "vgpu": {"type": "hami", "memoryMiB": "lots"}}, "must be integers"),
])
def test_profile_wrong_types_are_errors_not_crashes(loaded: Loaded, pool: dict[str, Any], message: str) -> None:
    _nodes, errors = profile_to_nodes({"kind": "ClusterProfile", "nodePools": [pool]}, loaded.kb)
    assert any(message in e for e in errors), errors


CONDITION_TAINTS = [
    ("node.kubernetes.io/not-ready", "NoSchedule"), ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoSchedule"), ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"), ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"), ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/network-unavailable", "NoSchedule"), ("node.kubernetes.io/out-of-service", "NoExecute"),
    ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule"),
    ("node.cloudprovider.kubernetes.io/shutdown", "NoSchedule"),
]


@pytest.mark.parametrize(("key", "effect"), CONDITION_TAINTS)
def test_condition_taints_neither_split_a_pool_nor_count_as_untolerated(loaded: Loaded, key: str,
                                                                         effect: str) -> None:
    # A node rebooting for a driver upgrade (NotReady), cordoned or under pressure is still where the pod runs.
    policy = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    nodes = [node("ready", {"pool": "a"}, [policy]),
             node("sick", {"pool": "a"}, [policy, {"key": key, "effect": effect}])]
    (cls,) = build_cluster(nodes, loaded.kb).classes
    assert cls.count == 2
    assert cls.taints == (Taint("nvidia.com/gpu", "present", "NoSchedule"),)
    assert untolerated_taints({"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}, cls) == []


def test_a_wholly_not_ready_pool_stays_in_scope(loaded: Loaded) -> None:
    nodes = [node(f"n{i}", {"nvidia.com/gpu.product": "Tesla-T4"},
                  [{"key": k, "effect": e} for k, e in CONDITION_TAINTS]) for i in range(3)]
    (cls,) = build_cluster(nodes, loaded.kb).classes
    assert cls.taints == () and untolerated_taints({}, cls) == []
