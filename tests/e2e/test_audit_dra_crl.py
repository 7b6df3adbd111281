"""``compatcheck audit`` against a real kube-apiserver of its own (issue #22): a pod whose GPU comes through a DRA
claim (ResourceSlice, DeviceClass and ResourceClaimTemplate as the API server stores them) and a GPU-Manager pod
governed by cf-crl ConfigMaps in kube-public, each found once with the rule it breaks. An API server of its own, as
the CRL ConfigMaps are cluster-wide and would change what other modules' webhooks default."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compatcheck.cli.entry import main
from compatcheck.core.cluster import VGPU_BASELINE_LABEL
from tests.conftest import FIXTURES
from tests.e2e.conftest import create_node, gpu_node, namespace
from tests.e2e.kapi import KubeAPIServer
from tests.e2e.test_dra_cluster import NV, t4_slice, template


def _create(kapi: KubeAPIServer, ns: str | None, obj: dict[str, Any]) -> None:
    kapi.kubectl("create", *(("-n", ns) if ns else ()), "-f", "-", stdin=json.dumps(obj))


def test_audit_reads_dra_claims_and_crl_configmaps(own_kapi: KubeAPIServer, capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    from kubernetes import client

    kapi = own_kapi
    api = kapi.client()
    create_node(api, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "dra-t4-0", "labels": {
        "kubernetes.io/hostname": "dra-t4-0", "pool": "dra-t4"}}, "status": {"allocatable": {"cpu": "8"}}})
    res = client.ResourceV1Api(api)
    res.create_resource_slice(t4_slice("dra-t4-0"))
    res.create_device_class({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                             "metadata": {"name": "gpu.example.com"}, "spec": {"selectors": [{"cel": {"expression": (
                                 f"device.driver == '{NV}' && device.attributes['{NV}'].type == 'gpu'")}}]}})
    # A GPU-Manager pool (vcuda resources, the driver and vGPU baseline CUDA 11.4) and its cf-crl ConfigMaps.
    vgpu_node = gpu_node("vgpu-0", driver="470.82.01", gpus=0, labels={"pool": "vgpu", VGPU_BASELINE_LABEL: "11.4"})
    vgpu_node["status"]["allocatable"].update({"tencent.com/vcuda-core": "400", "tencent.com/vcuda-memory": "256"})
    create_node(api, vgpu_node)
    kapi.kubectl("create", "-f", str(FIXTURES / "crl-limit-required" / "crl.yaml"))  # in kube-public
    ns = namespace(api, "audit-dra")
    _create(kapi, ns, template("one-gpu", "gpu.example.com"))
    _create(kapi, ns, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vllm-dra"}, "spec": {
        "nodeName": "dra-t4-0", "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.6.3", "args": ["--dtype", "bfloat16"],
                        "resources": {"claims": [{"name": "gpu"}]}}]}})
    _create(kapi, ns, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vgpu"}, "spec": {
        "nodeSelector": {"pool": "vgpu"},
        "containers": [{"name": "main", "image": "nvidia/cuda:11.4.3-base-ubuntu20.04",
                        "resources": {"limits": {"tencent.com/vcuda-core": "50"}}}]}})

    code = main(["audit", "--kubeconfig", str(kapi.kubeconfig), "-n", ns, "--format", "json"])
    out = capsys.readouterr()
    assert code == 1, out.err
    doc = json.loads(out.out)
    rows = sorted((f["object"]["name"], f["rule"], f["severity"], f["pods"]) for f in doc["findings"])
    assert rows == [
        # the claim gets a T4 on R535 (the slice's driver): bf16 needs Ampere, and CUDA 12.4 is newer than R535
        # half a card's cores without vcuda-memory: the CRL requires the memory limit, and GPU-Manager refuses it
        ("vgpu", "crl-limit-required", "error", 1),
        ("vgpu", "vcuda-core-invalid", "error", 1),
        ("vllm-dra", "cuda-driver-behind-runtime", "error", 1),
        ("vllm-dra", "dtype-unsupported-by-gpu", "error", 1),
    ]
    crl = next(f for f in doc["findings"] if f["rule"] == "crl-limit-required")
    assert crl["message"].startswith("limits.tencent.com/vcuda-memory is required because the container uses "
                                     "gpu-manager resources (CRL group gpu-manager, ConfigMap "
                                     "cf-crl-gpu-manager-vcuda-memory)")
