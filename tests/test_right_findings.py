"""Findings that are right (issue #15): hand-written cluster profiles make Nodes as real as ``kubectl get nodes``,
the ExtendedResourceToleration admission plugin, one finding per cause (MIG), and only GPU resources make a GPU
pod. Every case runs through the real CLI and asserts the exact findings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compatcheck.core.cluster import is_gpu_resource
from compatcheck.core.profiles import profile_to_nodes
from compatcheck.io.loader import Loaded
from tests.test_integrations import cc

PROFILE = """\
apiVersion: compatcheck/v1
kind: ClusterProfile
{extra}nodePools:
  - name: t4
    gpu: Tesla-T4
    driver: "535.104.05"
    taints: [{{key: nvidia.com/gpu, effect: NoSchedule}}]
  - name: mig
    gpu: NVIDIA-A100-SXM4-80GB
    driver: "550.54.15"
    sharing: mig-mixed
    migProfiles: {{1g.10gb: 7}}
"""


def pod(name: str, resources: dict[str, Any], **spec: Any) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        **spec, "containers": [{"name": "main", "image": "nvidia/cuda:12.2.2-base-ubuntu22.04",
                                "resources": {"limits": resources}}]}})


def lint(tmp_path: Path, manifest: str, *args: str, profile_extra: str = "",
         config: str | None = None) -> list[tuple[str, str, str]]:
    (tmp_path / "m.yaml").write_text(manifest)
    (tmp_path / "p.yaml").write_text(PROFILE.format(extra=profile_extra))
    (tmp_path / ".git").mkdir(exist_ok=True)  # the config walk stops here
    if config is not None:
        (tmp_path / ".compatcheck.yaml").write_text("apiVersion: compatcheck/v1\n" + config)
    proc = cc("lint", "m.yaml", "--nodes", "p.yaml", "--format", "json", *args, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    report = json.loads(proc.stdout)
    assert report["errors"] == []
    return [(f["object"]["name"], f["rule"], f["message"]) for f in report["findings"]]


# ------------------------------------------------------------------------------ profile Nodes as kubectl shows them

def test_profile_nodes_carry_the_kubelet_and_cloud_labels(loaded: Loaded) -> None:
    nodes, errors = profile_to_nodes({"nodePools": [
        {"name": "l4", "count": 3, "gpu": "NVIDIA-L4", "driver": "550.54.15",
         "zones": ["us-central1-a", "us-central1-b"], "region": "us-central1", "instanceType": "g2-standard-8"},
        {"name": "gh", "gpu": "NVIDIA-GH200-480GB", "computeCapability": "9.0", "arch": "arm64",
         "labels": {"kubernetes.io/hostname": "gh-node", "topology.kubernetes.io/zone": "z1"}}]}, loaded.kb)
    assert errors == []
    placement = {k: v for k, v in nodes[2]["metadata"]["labels"].items() if not k.startswith("nvidia.com/")}
    assert placement == {
        "kubernetes.io/hostname": "l4-2", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
        "topology.kubernetes.io/zone": "us-central1-a", "failure-domain.beta.kubernetes.io/zone": "us-central1-a",
        "topology.kubernetes.io/region": "us-central1", "failure-domain.beta.kubernetes.io/region": "us-central1",
        "node.kubernetes.io/instance-type": "g2-standard-8", "beta.kubernetes.io/instance-type": "g2-standard-8"}
    assert [n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes[:3]] == [
        "us-central1-a", "us-central1-b", "us-central1-a"]
    assert nodes[0]["status"]["nodeInfo"] == {"operatingSystem": "linux", "architecture": "amd64"}
    gh = nodes[3]["metadata"]["labels"]
    # The profile's own labels win over what compatcheck sets.
    assert (gh["kubernetes.io/hostname"], gh["kubernetes.io/arch"], gh["topology.kubernetes.io/zone"]) == (
        "gh-node", "arm64", "z1")


def test_os_selector_finds_the_nodes_and_keeps_the_driver_findings(tmp_path: Path) -> None:
    """A pod selecting kubernetes.io/os: linux got 'no eligible node', which also hid every driver finding."""
    bf16 = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app"}, "spec": {
        "nodeSelector": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                         "nvidia.com/gpu.product": "Tesla-T4"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        "containers": [{"name": "main", "image": "vllm/vllm-openai:v0.9.2", "args": ["--dtype=bfloat16"],
                        "resources": {"limits": {"nvidia.com/gpu": 1}}}]}})
    assert lint(tmp_path, bf16) == [
        ("app", "cuda-driver-behind-runtime", "image CUDA 12.8 (image vllm/vllm-openai:v0.9.2) is newer than the "
         "driver's CUDA on 535.104.05 (CUDA 12.2) on t4-0, and the platform requires a driver at least as new as the "
         "runtime; use a driver from branch >= 570; NVIDIA minor-version compatibility would run it (no PTX JIT, no "
         "newer-driver APIs) if the platform accepts it: declare it in the config "
         "(driverPolicy.minorVersionCompatibility: true) or per node pool (label "
         'compatcheck.io/minor-version-compatibility: "true"); NVIDIA forward compatibility (the image\'s CUDA 12.8 '
         "cuda-compat libraries, which list driver branch 535) could bridge this on these data-center GPUs if the "
         "platform enables it: declare it in the config (driverPolicy.forwardCompatibility: true) or per node pool "
         '(label compatcheck.io/forward-compatibility: "true")'),
        ("app", "dtype-unsupported-by-gpu", "--dtype bfloat16 needs compute capability >= 8.0 (bf16); eligible GPUs: "
         "Tesla-T4 (compute capability 7.5)")]
    windows = pod("win", {"nvidia.com/gpu": 1}, nodeSelector={"kubernetes.io/os": "windows"})
    assert lint(tmp_path, windows) == [("win", "gpu-no-eligible-node", "no node can run this pod: none of the 2 "
                                        "nodes matches its nodeSelector/affinity; it would stay Pending")]


# ------------------------------------------------------------------------------ ExtendedResourceToleration

GPU_POD = pod("gpu", {"nvidia.com/gpu": 1}, nodeSelector={"nvidia.com/gpu.product": "Tesla-T4"})
MISSING = ("gpu", "gpu-toleration-missing", "every GPU node offering nvidia.com/gpu: 1 is tainted "
           "(nvidia.com/gpu:NoSchedule) and the pod tolerates none of them")


def test_without_the_plugin_the_taint_is_untolerated(tmp_path: Path) -> None:
    assert lint(tmp_path, GPU_POD) == [MISSING]


@pytest.mark.parametrize("where", ["profile", "config"])
def test_extended_resource_toleration_tolerates_the_resource_named_taint(tmp_path: Path, where: str) -> None:
    plugins = "admissionPlugins: [ExtendedResourceToleration]\n"
    found = lint(tmp_path, GPU_POD, profile_extra=plugins if where == "profile" else "",
                 config=plugins if where == "config" else None)
    assert found == []


@pytest.mark.parametrize(("taint", "shown"), [
    # The plugin adds {key: <resource>, operator: Exists, effect: NoSchedule}: nothing else.
    ("{key: nvidia.com/gpu, effect: NoExecute}", "nvidia.com/gpu:NoExecute"),
    ("{key: gpu, value: 'true', effect: NoSchedule}", "gpu=true:NoSchedule"),
])
def test_extended_resource_toleration_has_the_plugins_exact_semantics(tmp_path: Path, taint: str,
                                                                      shown: str) -> None:
    (tmp_path / "m.yaml").write_text(GPU_POD)
    (tmp_path / "p.yaml").write_text(PROFILE.format(extra="admissionPlugins: [ExtendedResourceToleration]\n")
                                     .replace("{key: nvidia.com/gpu, effect: NoSchedule}", taint))
    proc = cc("lint", "m.yaml", "--nodes", "p.yaml", "--format", "json", cwd=tmp_path)
    (finding,) = json.loads(proc.stdout)["findings"]
    assert (finding["rule"], finding["message"]) == (
        "gpu-toleration-missing", f"every GPU node offering nvidia.com/gpu: 1 is tainted ({shown}) and the pod "
        "tolerates none of them")


def test_unknown_admission_plugin_is_a_located_config_error(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text(GPU_POD)
    (tmp_path / ".compatcheck.yaml").write_text("apiVersion: compatcheck/v1\nadmissionPlugins: [PodNodeSelector]\n")
    proc = cc("lint", "m.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert ".compatcheck.yaml:2" in proc.stderr and "PodNodeSelector" in proc.stderr


# ------------------------------------------------------------------------------ one cause, one finding

def test_mig_profile_no_node_offers_is_one_finding(tmp_path: Path) -> None:
    assert lint(tmp_path, pod("mig", {"nvidia.com/mig-1g.5gb": 1})) == [
        ("mig", "mig-profile-unknown", "MIG profile 1g.5gb is offered by no node the pod can land on (nodes offer "
         "nvidia.com/mig-1g.10gb): the pod would stay Pending (Insufficient nvidia.com/mig-1g.5gb)")]


def test_mig_profile_and_selector_are_two_causes_only_when_both_are_wrong(tmp_path: Path) -> None:
    nowhere = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    # The profile exists in the cluster: only the selector is wrong.
    assert lint(tmp_path, pod("sel", {"nvidia.com/mig-1g.10gb": 1}, nodeSelector=nowhere)) == [
        ("sel", "gpu-no-eligible-node", "no node can run this pod: none of the 2 nodes matches its "
         "nodeSelector/affinity; it would stay Pending")]
    assert lint(tmp_path, pod("both", {"nvidia.com/mig-1g.5gb": 1}, nodeSelector=nowhere)) == [
        ("both", "gpu-no-eligible-node", "no node can run this pod: none of the 2 nodes matches its "
         "nodeSelector/affinity; it would stay Pending"),
        ("both", "mig-profile-unknown", "MIG profile 1g.5gb is offered by no node of the cluster (nodes offer "
         "nvidia.com/mig-1g.10gb): the pod would stay Pending (Insufficient nvidia.com/mig-1g.5gb)")]


# ------------------------------------------------------------------------------ what a GPU resource is

@pytest.mark.parametrize(("name", "gpu"), [
    ("nvidia.com/gpu", True), ("nvidia.com/gpu.shared", True), ("nvidia.com/mig-1g.10gb", True),
    ("nvidia.com/mig-3g.40gb.shared", True), ("nvidia.com/gpumem", True), ("nvidia.com/gpumem-percentage", True),
    ("nvidia.com/gpucores", True), ("tencent.com/vcuda-core", True), ("tencent.com/vcuda-memory", True),
    ("volcano.sh/vgpu-number", True), ("volcano.sh/gpu-memory", True), ("alpha.kubernetes.io/nvidia-gpu", True),
    ("nvidia.com/rdma_shared_device_a", False), ("nvidia.com/hostdev", False), ("nvidia.com/sriov_rdma", False),
    ("nvidia.com/mlnx_sriov_netdevice", False), ("rdma/hca_shared_devices_a", False), ("cpu", False),
])
def test_gpu_resources(name: str, gpu: bool) -> None:
    assert is_gpu_resource(name) is gpu


def test_network_devices_do_not_make_a_gpu_pod(tmp_path: Path) -> None:
    rdma = pod("rdma", {"nvidia.com/rdma_shared_device_a": 1, "nvidia.com/hostdev": 1})
    assert lint(tmp_path, rdma) == []
    both = pod("both", {"nvidia.com/rdma_shared_device_a": 1, "nvidia.com/gpu": 1},
               nodeSelector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})
    # A GPU pod that also wants an RDMA device: the GPU part is judged (the mig-mixed pool offers no whole GPU).
    assert lint(tmp_path, both) == [("both", "gpu-no-eligible-node", "no node can run this pod: 1 node matches "
                                     "its nodeSelector/affinity but none offers nvidia.com/gpu: 1; it would stay "
                                     "Pending")]


@pytest.mark.parametrize("plugins", [False, True])
def test_the_webhook_applies_the_configured_plugin_to_a_deployment(tmp_path: Path, plugins: bool) -> None:
    """A Deployment reaches the webhook before its Pods exist, so before the plugin added anything: the webhook
    (here ``compatcheck review``, the same code offline) applies the configured plugin itself."""
    from tests.conftest import admission_review

    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ml"}, "spec": {
        "selector": {"matchLabels": {"app": "d"}}, "template": {
            "metadata": {"labels": {"app": "d"}}, "spec": json.loads(GPU_POD)["spec"]}}}
    (tmp_path / "review.json").write_text(json.dumps(admission_review(deploy)))
    (tmp_path / "p.yaml").write_text(PROFILE.format(extra=""))
    (tmp_path / "c.yaml").write_text("apiVersion: compatcheck/v1\n" +
                                     ("admissionPlugins: [ExtendedResourceToleration]\n" if plugins else ""))
    proc = cc("review", "review.json", "--nodes", "p.yaml", "--config", "c.yaml", cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    response = json.loads(proc.stdout)["response"]
    warnings = [w for w in response.get("warnings", []) if w.startswith("gpu-toleration-missing")]
    assert response["allowed"] is True
    assert len(warnings) == (0 if plugins else 1)


ZONE_POD = pod("zonal", {"nvidia.com/gpu": 1}, nodeSelector={"topology.kubernetes.io/zone": "us-east1-b"},
               tolerations=[{"operator": "Exists"}])
ZONE_AFFINITY = pod("zonal", {"nvidia.com/gpu": 1}, tolerations=[{"operator": "Exists"}], affinity={"nodeAffinity": {
    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g2-standard-8"]}]}]}}})


@pytest.mark.parametrize("manifest", [ZONE_POD, ZONE_AFFINITY], ids=["selector", "affinity"])
def test_a_profile_silent_about_zones_does_not_judge_zone_selectors(tmp_path: Path, manifest: str) -> None:
    """Every real node has a zone and an instance type; a profile that names none does not know them, so a
    selector on them is not judged (it is, as soon as a pool says what its nodes carry)."""
    assert lint(tmp_path, manifest) == []
    pinned = PROFILE.replace("    driver: \"535.104.05\"\n", "    driver: \"535.104.05\"\n    zones: [us-central1-a]\n"
                             "    instanceType: n1-standard-8\n", 1)
    (tmp_path / "pinned.yaml").write_text(pinned.format(extra=""))
    proc = cc("lint", "m.yaml", "--nodes", "pinned.yaml", "--format", "json", cwd=tmp_path)
    assert [(f["rule"], f["message"]) for f in json.loads(proc.stdout)["findings"]] == [
        ("gpu-no-eligible-node", "no node can run this pod: none of the 2 nodes matches its nodeSelector/affinity; "
         "it would stay Pending")]
