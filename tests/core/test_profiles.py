"""profiles: the well-known labels of a ClusterProfile's nodes (OS, architecture, zones in turn, region, instance
type) and the ResourceSlices of a ``dra: true`` pool, device by device, with the attributes the profile knows."""

from __future__ import annotations

from typing import Any

from compatcheck.core.model import Diagnostic, Severity
from compatcheck.core.profiles import profile_to_nodes, well_known_labels
from tests.core.tables import make_kb

KB = make_kb()


def nodes_of(*pools: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Diagnostic]]:
    return profile_to_nodes({"kind": "ClusterProfile", "nodePools": list(pools)}, KB)


def test_well_known_labels() -> None:
    assert well_known_labels("n", "linux", "amd64", None, None, None) == {
        "kubernetes.io/hostname": "n", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"}
    assert well_known_labels("n", "windows", "arm64", "z", 5, 6) == {
        "kubernetes.io/hostname": "n", "kubernetes.io/os": "windows", "kubernetes.io/arch": "arm64",
        "beta.kubernetes.io/os": "windows", "beta.kubernetes.io/arch": "arm64",
        "topology.kubernetes.io/zone": "z", "failure-domain.beta.kubernetes.io/zone": "z",
        "topology.kubernetes.io/region": "5", "failure-domain.beta.kubernetes.io/region": "5",
        "node.kubernetes.io/instance-type": "6", "beta.kubernetes.io/instance-type": "6"}


def test_nodes_take_the_zones_in_turn_and_the_pools_os_and_architecture() -> None:
    nodes, errors = nodes_of({"name": "p", "count": 4, "zones": ["a", "b", "c"], "region": "r",
                              "instanceType": "g4", "os": "windows", "arch": "arm64"})
    assert errors == []
    assert [(n["metadata"]["name"], n["metadata"]["labels"]["topology.kubernetes.io/zone"]) for n in nodes] == [
        ("p-0", "a"), ("p-1", "b"), ("p-2", "c"), ("p-3", "a")]
    first = nodes[0]
    assert first["status"]["nodeInfo"] == {"operatingSystem": "windows", "architecture": "arm64"}
    assert {k: first["metadata"]["labels"][k] for k in ("kubernetes.io/os", "kubernetes.io/arch",
                                                         "topology.kubernetes.io/region",
                                                         "node.kubernetes.io/instance-type")} == {
        "kubernetes.io/os": "windows", "kubernetes.io/arch": "arm64", "topology.kubernetes.io/region": "r",
        "node.kubernetes.io/instance-type": "g4"}
    assert nodes_of({"name": "q", "count": 0})[0] == []


def test_a_pools_own_labels_win_over_the_well_known_ones() -> None:
    (n,), _ = nodes_of({"name": "p", "labels": {"kubernetes.io/os": "plan9", "kubernetes.io/hostname": "h"}})
    assert (n["metadata"]["labels"]["kubernetes.io/os"], n["metadata"]["labels"]["kubernetes.io/hostname"]) == (
        "plan9", "h")


def slices(nodes: list[dict[str, Any]]) -> list[tuple[str, str, list[tuple[str, dict[str, Any]]]]]:
    return [(s["metadata"]["name"], s["spec"]["nodeName"], [(d["name"], d["attributes"]) for d in s["spec"]["devices"]])
            for s in nodes if s["kind"] == "ResourceSlice"]


def test_a_dra_pool_publishes_a_slice_per_node_with_a_device_per_gpu() -> None:
    nodes, errors = nodes_of({"name": "d", "gpu": "Tesla T4", "driver": "550.54.15", "dra": True, "gpusPerNode": 2,
                              "count": 2})
    assert errors == []
    assert [n["kind"] for n in nodes] == ["Node", "Node", "ResourceSlice", "ResourceSlice"]
    assert nodes[0]["status"]["allocatable"] == {}  # the GPUs are devices of the slice, not nvidia.com/gpu
    attrs = {"type": {"string": "gpu"}, "productName": {"string": "Tesla T4"},
             "cudaComputeCapability": {"version": "7.5.0"}, "architecture": {"string": "Turing"},
             "driverVersion": {"version": "550.54.15"}, "cudaDriverVersion": {"version": "12.4.0"}}
    assert slices(nodes) == [("d-0-gpu.nvidia.com", "d-0", [("gpu-0", attrs), ("gpu-1", attrs)]),
                             ("d-1-gpu.nvidia.com", "d-1", [("gpu-0", attrs), ("gpu-1", attrs)])]
    s = nodes[2]
    assert (s["apiVersion"], s["spec"]["driver"], s["spec"]["pool"]) == (
        "resource.k8s.io/v1", "gpu.nvidia.com", {"name": "d-0", "generation": 1, "resourceSliceCount": 1})


def test_a_dra_device_has_the_attributes_the_profile_knows() -> None:
    nodes, errors = nodes_of({"name": "cc", "dra": True, "computeCapability": "8.0", "driverCuda": "12.2"},
                             {"name": "none", "dra": True},
                             {"name": "short", "dra": True, "driver": "550.54", "gpu": "Mystery",
                              "computeCapability": "9"},
                             {"name": "known", "dra": True, "gpu": "NVIDIA-H100-80GB", "computeCapability": "3.5"},
                             {"name": "odd", "dra": True, "computeCapability": "1.1"},
                             {"name": "zero", "dra": True, "gpusPerNode": 0})
    assert errors == []
    assert slices(nodes) == [
        ("cc-0-gpu.nvidia.com", "cc-0", [("gpu-0", {"type": {"string": "gpu"}, "cudaComputeCapability": {
            "version": "8.0.0"}, "architecture": {"string": "Ampere"}, "cudaDriverVersion": {"version": "12.2.0"}})]),
        ("none-0-gpu.nvidia.com", "none-0", [("gpu-0", {"type": {"string": "gpu"}})]),
        ("short-0-gpu.nvidia.com", "short-0", [("gpu-0", {
            "type": {"string": "gpu"}, "productName": {"string": "Mystery"},
            "cudaComputeCapability": {"version": "9.0.0"}, "architecture": {"string": "Hopper"},
            "driverVersion": {"version": "550.54.0"},
            "cudaDriverVersion": {"version": "12.4.0"}})]),
        ("known-0-gpu.nvidia.com", "known-0", [("gpu-0", {  # the profile's capability, not the product's
            "type": {"string": "gpu"}, "productName": {"string": "NVIDIA-H100-80GB"},
            "cudaComputeCapability": {"version": "3.5.0"}, "architecture": {"string": "Kepler"}})]),
        ("odd-0-gpu.nvidia.com", "odd-0", [("gpu-0", {"type": {"string": "gpu"},
                                                       "cudaComputeCapability": {"version": "1.1.0"}})]),
    ]
    assert [n["metadata"]["name"] for n in nodes if n["kind"] == "Node"] == ["cc-0", "none-0", "short-0", "known-0",
                                                                             "odd-0", "zero-0"]


def test_a_known_product_gives_its_compute_capability_to_the_device() -> None:
    nodes, _ = nodes_of({"name": "h", "dra": True, "gpu": "NVIDIA-H100-80GB"})
    assert slices(nodes)[0][2][0][1]["cudaComputeCapability"] == {"version": "9.0.0"}


def test_a_dra_pool_does_not_share_with_sharing_or_vgpu() -> None:
    message = "a DRA pool shares its GPUs per claim (the driver's sharing config), not with sharing or vgpu"
    nodes, errors = nodes_of({"name": "x", "dra": True, "sharing": "mps", "replicas": 2},
                             {"name": "y", "dra": True, "vgpu": {"type": "hami"}},
                             {"name": "ok", "dra": True, "sharing": "none"},
                             {"name": "plain", "sharing": "mps", "replicas": 2})
    assert errors == [Diagnostic("", f"/nodePools/{i}/dra: {message}", pointer=f"/nodePools/{i}/dra",
                                 severity=Severity.ERROR, kind="nodes") for i in (0, 1)]
    assert [n["metadata"]["name"] for n in nodes] == ["ok-0", "ok-0-gpu.nvidia.com", "plain-0"]
