"""cluster: ClusterProfile pools to exact synthetic Nodes (labels, allocatable, taints) and located problems; node
facts and their wording; tolerations; node counts; and the carried placement indexes at their limits."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core.cluster import (
    DRIVER_FULL_LABEL,
    Cluster,
    NodeClass,
    NodeFacts,
    Taint,
    build_cluster,
    build_cluster_from_records,
    node_facts,
    node_record,
    placement_matches,
    untolerated_taints,
)
from compatcheck.core.model import Diagnostic, Severity
from compatcheck.core.profiles import profile_to_nodes
from compatcheck.core.versions import parse_compute_capability, parse_cuda_version, parse_driver_version
from tests.core.tables import make_kb

KB = make_kb()


def nodes_of(*pools: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Diagnostic]]:
    return profile_to_nodes({"kind": "ClusterProfile", "nodePools": list(pools)}, KB)


def node(name: str, labels: dict[str, str], allocatable: dict[str, Any], taints: list[Any] | None = None) -> Any:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        **labels, "kubernetes.io/hostname": name}}, "spec": {"taints": taints or []},
        "status": {"allocatable": allocatable}}


def pnode(name: str, labels: dict[str, str], allocatable: dict[str, Any], taints: list[Any] | None = None) -> Any:
    """A ClusterProfile's Node: what the kubelet labels every Node with (kubernetes.io/os, arch, hostname and their
    beta twins), then the pool's labels; its nodeInfo."""
    made = node(name, {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                       "beta.kubernetes.io/arch": "amd64", **labels}, allocatable, taints)
    made["status"]["nodeInfo"] = {"operatingSystem": "linux", "architecture": "amd64"}
    return made


PRODUCT, STRATEGY = "nvidia.com/gpu.product", "nvidia.com/gpu.sharing-strategy"
T4 = {PRODUCT: "Tesla-T4"}


@pytest.mark.parametrize(("pool", "expected"), [
    ({"name": "a", "gpu": "Tesla-T4"}, [pnode("a-0", {**T4, STRATEGY: "none"}, {"nvidia.com/gpu": 1})]),
    ({"gpu": "Tesla-T4", "count": 2, "gpusPerNode": 4, "labels": {"pool": "x", "n": 1}, "resources": {"cpu": 8},
      "taints": [{"key": "k", "effect": "NoSchedule"}]},
     [pnode(f"pool0-{i}", {"pool": "x", "n": "1", **T4, STRATEGY: "none"}, {"cpu": 8, "nvidia.com/gpu": 4},
           [{"key": "k", "effect": "NoSchedule"}]) for i in range(2)]),
    ({"name": "b", "resources": {"nvidia.com/gpu": 3}, "gpusPerNode": 8},  # declared resources are kept
     [pnode("b-0", {STRATEGY: "none"}, {"nvidia.com/gpu": 3})]),
    ({"name": "c", "gpusPerNode": 0}, [pnode("c-0", {STRATEGY: "none"}, {})]),
    ({"name": "d", "gpu": "Mystery", "computeCapability": "8.6"},
     [pnode("d-0", {PRODUCT: "Mystery", "nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "6",
                   STRATEGY: "none"}, {"nvidia.com/gpu": 1})]),
    ({"name": "e", "driver": "550.54.15"},
     [pnode("e-0", {DRIVER_FULL_LABEL: "550.54.15", "nvidia.com/cuda.runtime-version.major": "12",
                   "nvidia.com/cuda.runtime-version.minor": "4", STRATEGY: "none"}, {"nvidia.com/gpu": 1})]),
    ({"name": "f", "driver": "439.1", "driverCuda": "12.2"},  # a driver older than the table: no CUDA labels
     [pnode("f-0", {DRIVER_FULL_LABEL: "439.1", STRATEGY: "none"}, {"nvidia.com/gpu": 1})]),
    ({"name": "g", "driverCuda": "11.8"},
     [pnode("g-0", {"nvidia.com/cuda.runtime-version.major": "11", "nvidia.com/cuda.runtime-version.minor": "8",
                   STRATEGY: "none"}, {"nvidia.com/gpu": 1})]),
    ({"name": "h", "sharing": "time-slicing", "replicas": 2, "gpusPerNode": 3},
     [pnode("h-0", {STRATEGY: "time-slicing", "nvidia.com/gpu.replicas": "2"}, {"nvidia.com/gpu": 6})]),
    ({"name": "i", "sharing": "mps", "replicas": 4, "renameShared": True},
     [pnode("i-0", {STRATEGY: "mps", "nvidia.com/gpu.replicas": "4"}, {"nvidia.com/gpu.shared": 4})]),
    ({"name": "j", "sharing": "mig-single", "gpusPerNode": 2, "migProfiles": {"1g.5gb": 7}},
     [pnode("j-0", {"nvidia.com/mig.strategy": "single"}, {"nvidia.com/gpu": 14})]),
    ({"name": "k", "sharing": "mig-mixed", "gpusPerNode": 2, "migProfiles": {"1g.5gb": 3, "2g.10gb": 2}},
     [pnode("k-0", {"nvidia.com/mig.strategy": "mixed"}, {"nvidia.com/mig-1g.5gb": 6, "nvidia.com/mig-2g.10gb": 4})]),
    ({"name": "l", "gpusPerNode": 2, "vgpu": {"type": "gpu-manager"}},
     [pnode("l-0", {STRATEGY: "none"}, {"tencent.com/vcuda-core": 200, "tencent.com/vcuda-memory": 128})]),
    ({"name": "m", "gpusPerNode": 2, "vgpu": {"type": "gpu-manager", "memoryUnits": 10, "baselineCuda": "12.2"}},
     [pnode("m-0", {STRATEGY: "none", "compatcheck.io/vgpu-baseline-cuda": "12.2"},
           {"tencent.com/vcuda-core": 200, "tencent.com/vcuda-memory": 20})]),
    ({"name": "n", "gpusPerNode": 2, "vgpu": {"type": "hami"}},
     [pnode("n-0", {STRATEGY: "none"}, {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 32768, "nvidia.com/gpucores": 200})]),
    ({"name": "o", "gpusPerNode": 2, "vgpu": {"type": "hami", "memoryMiB": 1000}},
     [pnode("o-0", {STRATEGY: "none"}, {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 2000, "nvidia.com/gpucores": 200})]),
])
def test_a_pool_becomes_exactly_these_nodes(pool: dict[str, Any], expected: list[dict[str, Any]]) -> None:
    assert nodes_of(pool) == (expected, [])


def problem(pool: int, field: str, message: str) -> Diagnostic:  # the pools are [the one tested, a good one]
    pointer = f"/nodePools/{pool}/{field}"
    return Diagnostic("", f"{pointer}: {message}", pointer=pointer, severity=Severity.ERROR, kind="nodes")


@pytest.mark.parametrize(("pool", "errors", "names"), [
    ({"name": "a", "gpu": "Mystery"}, [problem(0, "gpu", "GPU 'Mystery' is not in the gpu-products table; add "
                                                         "computeCapability")], ["a-0"]),
    ({"name": "a", "computeCapability": "8.x", "driver": "550.54.15", "driverCuda": "x"},
     [problem(0, "computeCapability", "compute capability '8.x' is not a version number (expected digits and "
                                      "dots, e.g. 12.4)")], ["a-0"]),
    ({"name": "a", "driver": "5", "driverCuda": "12.2"},
     [problem(0, "driver", "driver version '5' is out of range (expected a branch such as 535.104.05)")], ["a-0"]),
    ({"name": "a", "driverCuda": "100.1"}, [problem(0, "driverCuda", "CUDA version '100.1' is out of range")],
     ["a-0"]),
    ({"name": "a", "sharing": "time-slicing"}, [problem(0, "sharing", "time-slicing needs replicas >= 2")], []),
    ({"name": "a", "sharing": "mps", "replicas": 1}, [problem(0, "replicas", "mps needs replicas >= 2")], []),
    ({"name": "a", "sharing": "mig-mixed"},
     [problem(0, "sharing", "mig-mixed needs migProfiles with positive counts, e.g. {1g.10gb: 7}")], []),
    ({"name": "a", "sharing": "mig-single", "migProfiles": {}},
     [problem(0, "migProfiles", "mig-single needs migProfiles with positive counts, e.g. {1g.10gb: 7}")], []),
    ({"name": "a", "vgpu": {"type": "hami", "baselineCuda": "twelve"}},
     [problem(0, "vgpu/baselineCuda", "CUDA version 'twelve' is not a version number (expected digits and dots, "
                                      "e.g. 12.4)")], ["a-0"]),
])
def test_what_a_schema_cannot_see_is_a_located_problem(pool: dict[str, Any], errors: list[Diagnostic],
                                                       names: list[str]) -> None:
    nodes, got = nodes_of(pool, {"name": "ok", "gpu": "Tesla-T4"})
    assert got == errors
    assert [n["metadata"]["name"] for n in nodes] == [*names, "ok-0"]


def test_a_problem_does_not_stop_the_next_fields() -> None:
    (n,), errors = nodes_of({"name": "a", "computeCapability": "8.x", "driver": "550.54.15",
                             "vgpu": {"type": "hami", "baselineCuda": "x"}})
    labels = n["metadata"]["labels"]
    assert labels[DRIVER_FULL_LABEL] == "550.54.15" and labels["compatcheck.io/vgpu-baseline-cuda"] == "x"
    assert [e.pointer for e in errors] == ["/nodePools/0/computeCapability", "/nodePools/0/vgpu/baselineCuda"]


# ---------------------------------------------------------------------------------------- node facts


def facts(labels: dict[str, str], allocatable: dict[str, Any] | None = None) -> NodeFacts:
    return node_facts(labels, allocatable or {}, KB)


def test_facts_of_a_fully_labelled_node() -> None:
    f = facts({DRIVER_FULL_LABEL: "550.54.15", PRODUCT: "Tesla-T4-SHARED", STRATEGY: "time-slicing",
               "nvidia.com/mig.strategy": "single", "nvidia.com/gpu.replicas": " 4 ",
               "compatcheck.io/vgpu-baseline-cuda": "12.2"},
              {"nvidia.com/gpu": "4", "cpu": "8", "tencent.com/vcuda-core": 200, "nvidia.com/mig-1g.5gb": "2"})
    assert f == NodeFacts(
        driver=parse_driver_version("550.54.15"), driver_cuda=parse_cuda_version("12.4"),
        compute_capability=parse_compute_capability("7.5"), product="Tesla-T4", datacenter=True,
        sharing_strategy="time-slicing", mig_strategy="single", replicas=4, vgpu_baseline=parse_cuda_version("12.2"),
        gpu_resources=(("nvidia.com/gpu", 4), ("nvidia.com/mig-1g.5gb", 2), ("tencent.com/vcuda-core", 200)))
    assert f.has_gpu and f.resource("nvidia.com/mig-1g.5gb") == 2 and f.resource("nvidia.com/gpu.shared") == 0


@pytest.mark.parametrize(("labels", "driver", "driver_cuda", "cc"), [
    ({"nvidia.com/cuda.driver-version.major": "535", "nvidia.com/cuda.driver-version.minor": "104",
      "nvidia.com/cuda.driver-version.revision": "05"}, "535.104.05", "12.0", None),
    ({"nvidia.com/cuda.driver.major": "470", "nvidia.com/cuda.driver.minor": "82", "nvidia.com/cuda.driver.rev": ""},
     "470.82", "11.4", None),
    ({"nvidia.com/cuda.driver-version.major": "550", "nvidia.com/cuda.driver.major": "470"}, "550", "12.4", None),
    ({DRIVER_FULL_LABEL: "470.82.01", "nvidia.com/cuda.runtime.major": "12"}, "470.82.01", "12.0", None),
    ({"cuda-major-version": "11", "cuda-minor-version": "2", "nvidia.com/cuda.runtime-version.major": "12",
      "nvidia.com/cuda.runtime-version.minor": "1"}, None, "12.1", None),
    ({"cuda-major-version": "11", "cuda-minor-version": "2"}, None, "11.2", None),
    ({"nvidia.com/gpu.compute.major": "9", PRODUCT: "Tesla-T4"}, None, None, "9.0"),
    ({"nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "9"}, None, None, "8.9"),
    ({PRODUCT: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"}, None, None, "8.0"),
])
def test_where_each_fact_is_read_from(labels: dict[str, str], driver: str | None, driver_cuda: str | None,
                                      cc: str | None) -> None:
    f = facts(labels)
    assert (str(f.driver) if f.driver else None, str(f.driver_cuda) if f.driver_cuda else None,
            str(f.compute_capability) if f.compute_capability else None) == (driver, driver_cuda, cc)
    assert f.problems == ()


def label_problem(key: str, message: str) -> Diagnostic:
    return Diagnostic("", f"label {key}: {message}", pointer=f"/metadata/labels/{key.replace('/', '~1')}",
                      severity=Severity.WARNING, kind="nodes")


@pytest.mark.parametrize(("labels", "forward", "mvc"), [
    ({}, None, None),
    ({"compatcheck.io/forward-compatibility": "true"}, True, None),
    ({"compatcheck.io/forward-compatibility": " FALSE ", "compatcheck.io/minor-version-compatibility": "True"},
     False, True),
    ({"compatcheck.io/minor-version-compatibility": "false"}, None, False),
    ({"compatcheck.io/forward-compatibility": "maybe"}, None, None),  # a warning (below); the config decides
])
def test_a_pools_driver_policy_labels(labels: dict[str, str], forward: bool | None, mvc: bool | None) -> None:
    f = facts(labels)
    assert (f.forward_compat, f.minor_version_compat) == (forward, mvc)


def test_a_profile_pool_declares_its_driver_policy_as_labels() -> None:
    nodes, errors = nodes_of({"name": "fc", "gpu": "Tesla-T4", "forwardCompatibility": True,
                              "minorVersionCompatibility": False},
                             {"name": "own", "gpu": "Tesla-T4", "forwardCompatibility": True,
                              "labels": {"compatcheck.io/forward-compatibility": "false"}},
                             {"name": "none", "gpu": "Tesla-T4"})
    assert errors == []
    policy = [{k: v for k, v in n["metadata"]["labels"].items() if k.endswith("-compatibility")} for n in nodes]
    assert policy == [{"compatcheck.io/forward-compatibility": "true",
                       "compatcheck.io/minor-version-compatibility": "false"},
                      {"compatcheck.io/forward-compatibility": "false"},  # the pool's own label wins
                      {}]


@pytest.mark.parametrize(("labels", "allocatable", "problems"), [
    ({DRIVER_FULL_LABEL: "x"}, {}, [label_problem(DRIVER_FULL_LABEL, "driver version 'x' is not a version number "
                                                                     "(expected digits and dots, e.g. 12.4)")]),
    ({"nvidia.com/cuda.driver.major": "5", "nvidia.com/cuda.driver.minor": "1"}, {}, [label_problem(
        "nvidia.com/cuda.driver.major", "driver version '5.1' is out of range (expected a branch such as "
                                        "535.104.05) (with .minor and .rev)")]),
    ({"nvidia.com/cuda.runtime-version.major": "x"}, {}, [label_problem(
        "nvidia.com/cuda.runtime-version.major", "'x' is not a whole number")]),
    ({"nvidia.com/cuda.runtime.major": "100"}, {}, [label_problem(
        "nvidia.com/cuda.runtime.major", "CUDA version '100.0' is out of range")]),
    ({"nvidia.com/cuda.runtime-version.major": "12", "nvidia.com/cuda.runtime-version.minor": "x"}, {}, [
        label_problem("nvidia.com/cuda.runtime-version.minor", "'x' is not a whole number")]),
    ({"nvidia.com/gpu.compute.major": "0", "nvidia.com/gpu.compute.minor": "y"}, {}, [
        label_problem("nvidia.com/gpu.compute.minor", "'y' is not a whole number"),
        label_problem("nvidia.com/gpu.compute.major", "compute capability '0.0' is not of the form MAJOR.MINOR")]),
    ({"compatcheck.io/vgpu-baseline-cuda": "12.x", "nvidia.com/gpu.replicas": "two"}, {}, [
        label_problem("compatcheck.io/vgpu-baseline-cuda", "CUDA version '12.x' is not a version number (expected "
                                                           "digits and dots, e.g. 12.4)"),
        label_problem("nvidia.com/gpu.replicas", "'two' is not a whole number")]),
    ({"compatcheck.io/forward-compatibility": "yes", "compatcheck.io/minor-version-compatibility": "1"}, {}, [
        label_problem("compatcheck.io/forward-compatibility", "'yes' is neither \"true\" nor \"false\"; the "
                                                              "config's driverPolicy applies to this node"),
        label_problem("compatcheck.io/minor-version-compatibility", "'1' is neither \"true\" nor \"false\"; the "
                                                                   "config's driverPolicy applies to this node")]),
    ({}, {"nvidia.com/gpu": "lots", "example.com/x": "bad"}, [Diagnostic(
        "", "allocatable nvidia.com/gpu: 'lots' is not a quantity", pointer="/status/allocatable/nvidia.com~1gpu",
        severity=Severity.WARNING, kind="nodes")]),
])
def test_unreadable_labels_are_located_warnings(labels: dict[str, str], allocatable: dict[str, Any],
                                                problems: list[Diagnostic]) -> None:
    assert list(facts(labels, allocatable).problems) == problems


@pytest.mark.parametrize(("labels", "driver", "gpu"), [
    ({DRIVER_FULL_LABEL: "550.54.15", PRODUCT: "Tesla-T4"}, "550.54.15 (CUDA 12.4)", "Tesla-T4 (compute capability "
                                                                                      "7.5)"),
    ({DRIVER_FULL_LABEL: "439.1", PRODUCT: "Mystery"}, "439.1", "Mystery"),
    ({"cuda-major-version": "12", "cuda-minor-version": "2"}, "a driver for CUDA 12.2", "GPU"),
    ({"nvidia.com/gpu.compute.major": "8"}, "an unknown driver", "GPU (compute capability 8.0)"),
])
def test_facts_in_words(labels: dict[str, str], driver: str, gpu: str) -> None:
    f = facts(labels)
    assert (f.describe_driver(), f.describe_gpu()) == (driver, gpu)


@pytest.mark.parametrize(("labels", "allocatable", "has_gpu"), [
    ({}, {}, False), ({}, {"nvidia.com/gpu": 1}, True), ({PRODUCT: "x"}, {}, True),
    ({DRIVER_FULL_LABEL: "550"}, {}, True), ({"nvidia.com/gpu.compute.major": "8"}, {}, False)])
def test_has_gpu(labels: dict[str, str], allocatable: dict[str, Any], has_gpu: bool) -> None:
    assert facts(labels, allocatable).has_gpu is has_gpu


def test_sample_names() -> None:
    cluster = build_cluster([node(f"n{i}", T4, {}) for i in range(5)], KB)
    (cls,) = cluster.classes
    assert cls.sample_names() == "n0, n1, n2 and 2 more"
    assert cls.sample_names(2) == "n0, n1 and 3 more" and cls.sample_names(5) == "n0, n1, n2, n3, n4"
    cls.members[3:] = []
    assert cls.sample_names() == "n0, n1, n2"


def test_a_node_record_reads_labels_taints_and_gpu_allocatable() -> None:
    raw = {"metadata": {"name": "n1", "labels": {"b": "2", PRODUCT: "Tesla-T4", "a": 1, "gone": None}},
           "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}, {"key": "nv"},
                               {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}, "junk"]},
           "status": {"capacity": {"nvidia.com/gpu": "2", "cpu": "4"}}}
    rec = node_record(raw)
    assert (rec.name, rec.rule_labels, rec.label_keys, rec.label_values) == (
        "n1", ((PRODUCT, "Tesla-T4"),), ("a", "b"), ("1", "2"))
    assert rec.taints == (Taint("k", "v", "NoSchedule"), Taint("nv", "", ""))
    assert node_record({"spec": {"taints": [{"effect": "NoSchedule"}]}}).taints == (Taint("", "", "NoSchedule"),)
    assert rec.gpu_allocatable == (("nvidia.com/gpu", "2"),)
    assert (rec.label("a"), rec.label("b"), rec.label("0"), rec.label("c"), rec.label(PRODUCT)) == (
        "1", "2", None, None, None)
    assert rec.placement_labels() == {"a": "1", "b": "2"}
    nameless = node_record({"metadata": {"labels": {"kubernetes.io/hostname": "h"}}, "status": {
        "allocatable": {"nvidia.com/gpu": 1}, "capacity": {"nvidia.com/gpu": 9}}})
    assert nameless.name == "h" and nameless.gpu_allocatable == (("nvidia.com/gpu", "1"),)
    assert node_record({}).name == "<unnamed>" and node_record({"status": {"allocatable": [1]}}).gpu_allocatable == ()


def test_node_problems_name_the_first_node_of_a_class() -> None:
    from compatcheck.core.cluster import about_node, node_problems

    cluster = build_cluster([node(f"n{i}", {DRIVER_FULL_LABEL: "x"}, {}) for i in range(3)] +
                            [node("ok", T4, {}), node("solo", {"nvidia.com/gpu.replicas": "y"}, {})], KB)
    found = [(cls.members[0].name, about_node(cls, p).message) for cls, p in node_problems(cluster)]
    assert found == [
        ("n0", f"node n0 (and 2 more with the same labels): label {DRIVER_FULL_LABEL}: driver version 'x' is not a "
               "version number (expected digits and dots, e.g. 12.4)"),
        ("solo", "node solo: label nvidia.com/gpu.replicas: 'y' is not a whole number")]


# ---------------------------------------------------------------------------------------- tolerations


def one_class(taints: list[dict[str, Any]]) -> NodeClass:
    (cls,) = build_cluster([node("n", T4, {"nvidia.com/gpu": 1}, taints)], KB).classes
    return cls


@pytest.mark.parametrize(("toleration", "tolerated"), [
    ({"key": "k", "operator": "Exists"}, True),
    ({"key": "k", "operator": "Exists", "effect": "NoSchedule"}, True),
    ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": "other", "operator": "Exists"}, False),
    ({"operator": "Exists"}, True),  # no key: every taint
    ({"operator": "Exists", "effect": "NoExecute"}, False),
    ({}, False),  # no key, Equal
    ({"key": "k", "value": "v"}, True),  # Equal by default
    ({"key": "k", "operator": "Equal", "value": "v"}, True),
    ({"key": "k", "operator": "Equal", "value": "w"}, False),
    ({"key": "k", "operator": "Equal"}, False),
])
def test_tolerations(toleration: dict[str, Any], tolerated: bool) -> None:
    cls = one_class([{"key": "k", "value": "v", "effect": "NoSchedule"}])
    assert (untolerated_taints({"tolerations": [toleration]}, cls) == []) is tolerated


@pytest.mark.parametrize(("toleration", "tolerated"), [
    ({"key": "k"}, True), ({"key": "k", "value": None}, True), ({"key": "k", "value": ""}, True),
    ({"key": "k", "value": "x"}, False)])
def test_a_taint_without_a_value_matches_an_equal_toleration_without_one(toleration: dict[str, Any],
                                                                         tolerated: bool) -> None:
    cls = one_class([{"key": "k", "effect": "NoExecute"}])
    assert (untolerated_taints({"tolerations": ["junk", toleration]}, cls) == []) is tolerated


def test_prefer_no_schedule_taints_never_keep_a_pod_off() -> None:
    cls = one_class([{"key": "soft", "effect": "PreferNoSchedule"}, {"key": "hard", "effect": "NoExecute"}])
    assert untolerated_taints({}, cls) == [Taint("hard", "", "NoExecute")]
    assert untolerated_taints({"tolerations": "junk"}, cls) == [Taint("hard", "", "NoExecute")]


# ---------------------------------------------------------------------------------------- counts and resources


def test_placed_node_count_counts_nodes_not_classes() -> None:
    cluster = build_cluster([node(f"t{i}", T4, {}) for i in range(3)] + [node("a0", {PRODUCT: "A100"}, {})], KB)
    assert cluster.placed_node_count({}) == 4
    assert cluster.placed_node_count({"nodeSelector": {PRODUCT: "Tesla-T4"}}) == 3
    assert cluster.placed_node_count({"nodeSelector": {PRODUCT: "H100"}}) == 0
    assert cluster.placed_node_count({"nodeSelector": {"kubernetes.io/hostname": "t1"}}) == 1
    assert cluster.placed_node_count({"nodeName": "zz"}) == 0
    assert repr(cluster) == "Cluster(2 classes, 4 nodes)"


def test_offers_resources() -> None:
    from compatcheck.core.cluster import offers_resources

    (cls,) = build_cluster([node("n", T4, {"nvidia.com/gpu": 2})], KB).classes
    assert offers_resources({"nvidia.com/gpu": 2, "nvidia.com/gpumem": 0}, cls)
    assert not offers_resources({"nvidia.com/gpu": 3}, cls)
    assert not offers_resources({"nvidia.com/gpumem": 1}, cls)


# ---------------------------------------------------------------------------------------- carried indexes


def pool(n: int, **labels_of: Any) -> list[dict[str, Any]]:
    return [node(f"n{i}", {**T4, **{k: f(i) for k, f in labels_of.items()}}, {"nvidia.com/gpu": 1}) for i in range(n)]


def snapshots(before: list[dict[str, Any]], changed: dict[int, dict[str, str]], key: str) -> tuple[Cluster, Cluster]:
    """A cluster with the index of ``key`` built, and its successor whose nodes ``changed`` have new labels."""
    recs = [node_record(n) for n in before]
    old = build_cluster_from_records(recs, KB)
    old.placement({"nodeSelector": {key: "x"}})
    new_recs = list(recs)
    for i, labels in changed.items():
        new_recs[i] = node_record(node(f"n{i}", {**T4, **labels}, {"nvidia.com/gpu": 1}))
    return old, build_cluster_from_records(new_recs, KB, previous=old)


@pytest.mark.parametrize(("size", "changes", "carried"), [
    (100, 64, True), (100, 65, False), (1024, 128, True), (1024, 129, False), (1024, 120, True)])
def test_indexes_are_carried_over_only_few_changes(size: int, changes: int, carried: bool) -> None:
    _old, new = snapshots(pool(size, rack=lambda i: f"r{i % 7}"), {i: {"rack": "moved"} for i in range(changes)},
                         "rack")
    assert (new._index is not None) is carried
    assert new.placed_node_count({"nodeSelector": {"rack": "moved"}}) == changes


@pytest.mark.parametrize("members", [2, 3, 70])
def test_a_carried_index_moves_one_node_out_of_a_shared_value(members: int) -> None:
    # value "shared" is held by `members` nodes (a list, or a bitset from 64 on); one of them leaves it.
    old, new = snapshots(pool(80, rack=lambda i: "shared" if i < members else f"own{i}"), {0: {"rack": "own0"}},
                         "rack")
    assert new._index is not None
    assert new.placed_node_count({"nodeSelector": {"rack": "shared"}}) == members - 1
    assert new.placed_node_count({"nodeSelector": {"rack": "own0"}}) == 1
    assert old.placed_node_count({"nodeSelector": {"rack": "shared"}}) == members  # the old one is untouched
    left = new.placed_node_count({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "NotIn", "values": ["shared"]}]}]}}}})
    assert left == 80 - members + 1


def test_placement_matches_a_class_by_its_members() -> None:
    (cls,) = build_cluster(pool(3, rack=lambda i: f"r{i}"), KB).classes
    assert placement_matches({"nodeSelector": {"rack": "r2"}}, cls)
    assert not placement_matches({"nodeSelector": {"rack": "r3"}}, cls)
    assert placement_matches({"nodeSelector": {PRODUCT: "Tesla-T4"}}, cls)


def test_at_most_16_placement_indexes_least_recently_used_out() -> None:
    cluster = build_cluster(pool(3, **{f"k{i}": (lambda n, i=i: f"{i}-{n}") for i in range(18)}), KB)
    for i in range(17):
        cluster.placement({"nodeSelector": {f"k{i}": "x"}})
    index = cluster._node_index()
    assert index.indexed_keys() == [f"k{i}" for i in range(1, 17)]
    cluster.placement({"nodeSelector": {"k5": "x"}})
    cluster.placement({"nodeSelector": {"k17": "x"}})
    assert index.indexed_keys() == [f"k{i}" for i in (2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 5, 17)]


@pytest.mark.parametrize(("name", "gpu"), [
    ("nvidia.com/gpu", True), ("nvidia.com/mig-1g.5gb", True), ("tencent.com/vcuda-core", True),
    ("volcano.sh/vgpu-number", True), ("volcano.sh/gpu-memory", True), ("alpha.kubernetes.io/nvidia-gpu", True),
    ("amd.com/gpu", False), ("tencent.com/other", False), ("cpu", False)])
def test_is_gpu_resource(name: str, gpu: bool) -> None:
    from compatcheck.core.cluster import is_gpu_resource

    assert is_gpu_resource(name) is gpu


@pytest.mark.parametrize("spec", [
    {"nodeSelector": ["junk"]}, {"nodeName": ""}, {"nodeName": 5},
    {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": "junk"}}}},
    {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": {
        "matchExpressions": []}}}}}])
def test_placement_fields_of_the_wrong_type_place_nowhere_in_particular(spec: dict[str, Any]) -> None:
    cluster = build_cluster(pool(2, rack=lambda i: f"r{i}"), KB)
    assert cluster.placement(spec) == cluster.classes and cluster.placed_node_count(spec) == 2
    assert placement_matches(spec, cluster.classes[0])


ZONE, KIND = "topology.kubernetes.io/zone", "nvidia.com/gpu.product"


def _terms(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}}}}


@pytest.mark.parametrize(("spec", "placed"), [
    ({"nodeSelector": {ZONE: "z9"}}, ["a", "b"]),  # the zone is unknown: not judged
    ({"nodeSelector": {ZONE: "z9", KIND: "Tesla-T4"}}, ["a"]),  # what is known still is
    (_terms([{"key": ZONE, "operator": "In", "values": ["z9"]}, {"key": KIND, "operator": "In", "values": ["L4"]}]),
     ["b"]),
    (_terms([{"key": KIND, "operator": "In", "values": ["nope"]}], [{"key": ZONE, "operator": "NotIn", "values": []}]),
     ["a", "b"]),  # a term that says only unknown things admits every node, and so does the OR of the terms
    (_terms([{"key": KIND, "operator": "In", "values": ["nope"]}]), []),
    ({"nodeSelector": {"kubernetes.io/hostname": "b-0"}}, ["b"]),  # placement labels stay exact
])
def test_unknown_keys_are_not_judged(spec: dict[str, Any], placed: list[str]) -> None:
    nodes = [{"metadata": {"name": f"{n}-0", "labels": {"kubernetes.io/hostname": f"{n}-0", KIND: kind}}}
             for n, kind in (("a", "Tesla-T4"), ("b", "L4"))]
    cluster = build_cluster(nodes, KB)
    cluster.unknown_keys = frozenset({ZONE})
    assert sorted(m.name[0] for c in cluster.placement(spec) for m in c.members
                  if cluster.placed_node_count(spec)) == placed
    assert cluster.placed_node_count(spec) == len(placed)
