"""Dynamic Resource Allocation objects in every shape compatcheck meets (issue #14): the older API versions
(v1beta1, v1beta2, v1alpha3 and the removed v1alpha2), pods with the pre-1.31 claim reference, DeviceClasses defined
both in the input and in --nodes, and MIG devices from ResourceSlices. ``compatcheck lint`` runs as a subprocess on
real files; outputs are exact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.test_dra import NVIDIA_SLICE, TEMPLATE, VLLM, lint

NV = "gpu.nvidia.com"


def _class(selector: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}
    if selector:
        spec["selectors"].append({"cel": {"expression": selector}})
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": NV}, "spec": spec}


T4_ONLY = "device.attributes['gpu.nvidia.com'].productName == 'Tesla T4'"


def test_a_device_class_of_the_input_that_the_cluster_defines_differently_wins_with_a_warning(
        tmp_path: Path) -> None:
    """The input's DeviceClass is what is being applied: the claims are checked against it (as applying it would
    replace the cluster's), and a warning at it names the --nodes place. The same spec in both says nothing."""
    slices = {**NVIDIA_SLICE, "spec": {**NVIDIA_SLICE["spec"], "devices": NVIDIA_SLICE["spec"]["devices"][:1]}}
    (tmp_path / "cluster.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        _class(None), slices]}, indent=1))
    (tmp_path / "app.yaml").write_text(TEMPLATE + "---\n" + VLLM + "---\n" + json.dumps(_class(T4_ONLY)) + "\n")
    proc = lint(str(tmp_path / "app.yaml"), "--nodes", str(tmp_path / "cluster.json"), "--format", "json")
    out = json.loads(proc.stdout)
    assert out["warnings"] == [{
        "file": str(tmp_path / "app.yaml"), "line": 24,
        "message": f"DeviceClass gpu.nvidia.com is defined here differently from the cluster's (--nodes "
                   f"{tmp_path / 'cluster.json'}:9): the claims that name it are checked against this definition, "
                   "as applying it would replace the cluster's"}]
    # the input's class pins a T4; the cluster has an A100: no device, as applying the input would leave it
    assert [(f["rule"], f["pointer"], f["message"]) for f in out["findings"]] == [
        ("dra-request-unsatisfiable", "/spec/spec/devices/requests/0",
         "request 'gpu': no device of the cluster can serve it: no device is in DeviceClass gpu.nvidia.com (1 "
         "gpu.nvidia.com device in reach: NVIDIA-A100-SXM4-40GB)"),
        ("gpu-no-eligible-node", "/spec/template/spec/resourceClaims/0",
         "no device can be allocated for claim 'gpu' (ResourceClaimTemplate ml/one-gpu request 'gpu'): no device is "
         "in DeviceClass gpu.nvidia.com (1 gpu.nvidia.com device in reach: NVIDIA-A100-SXM4-40GB); the pod would stay "
         "Pending")]
    # the same spec in the input as in the cluster: no warning
    (tmp_path / "app.yaml").write_text(TEMPLATE + "---\n" + VLLM + "---\n" + json.dumps(_class(None)) + "\n")
    out = json.loads(lint(str(tmp_path / "app.yaml"), "--nodes", str(tmp_path / "cluster.json"),
                          "--format", "json").stdout)
    # (an A100 on R535 for vLLM 0.6.3's CUDA 12.4: an error by the default driver policy)
    assert (out.get("warnings"), [f["rule"] for f in out["findings"]]) == (None, ["cuda-driver-behind-runtime"])


OLD = """\
apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClass
metadata: {name: gpu.nvidia.com}
driverName: gpu.resource.nvidia.com
---
apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClaimTemplate
metadata: {name: gpu-template, namespace: ml}
spec:
  spec:
    resourceClassName: gpu.nvidia.com
---
apiVersion: v1
kind: Pod
metadata: {name: old, namespace: ml}
spec:
  resourceClaims:
    - name: gpu
      source:
        resourceClaimTemplateName: gpu-template
    - name: gpu2
      resourceClaimTemplateName: gpu-template
  containers:
    - name: c
      image: nvidia/cuda:12.4.1-base-ubuntu22.04
      resources:
        claims: [{name: gpu}, {name: gpu2}]
"""


def test_shapes_no_current_api_server_reads_are_notes_not_silence(tmp_path: Path) -> None:
    """resource.k8s.io/v1alpha2 objects (not served since 1.31), a pod claim named under ``source`` (the pre-1.31
    shape the API server rejects: tests/e2e/test_dra_versions.py) and a claim that resolves to a v1alpha2 template:
    each a note saying what was not checked."""
    (tmp_path / "old.yaml").write_text(OLD)
    proc = lint(str(tmp_path / "old.yaml"))
    path = tmp_path / "old.yaml"
    assert (proc.returncode, proc.stdout.splitlines()) == (0, [
        f'{path}:1: note: ResourceClass of resource.k8s.io/v1alpha2 (the "classic" DRA API) is not served since '
        "Kubernetes 1.31: not checked",
        f'{path}:6: note: ResourceClaimTemplate of resource.k8s.io/v1alpha2 (the "classic" DRA API) is not served '
        "since Kubernetes 1.31: not checked",
        f"{path}:19: note: claim 'gpu' names ResourceClaimTemplate gpu-template under 'source', the shape before "
        "Kubernetes 1.31 (kubernetes/kubernetes#125116): current API servers do not read it (strict validation "
        "rejects the unknown field; without it the entry names no claim and the pod is invalid), so its devices were "
        "not checked; write the name on the entry itself",
        f"{path}:21: note: ResourceClaimTemplate ml/gpu-template (claim 'gpu2') is resource.k8s.io/v1alpha2, not "
        "served since Kubernetes 1.31: the devices it requests were not checked",
        "1 files, 3 objects: 0 errors, 0 warnings, 0 info",
        # the pod's claims name no template compatcheck can read: nothing says it asks for a GPU (notes above)
        "GPU workloads: 0, checked 0, not checked 0"])


# The note at the pod: its template's DeviceClass is not in the file, and no --nodes (docs/coverage.md).
ASSUMED_CLASS = (19, "DeviceClass 'gpu.nvidia.com' of ResourceClaimTemplate ml/one-gpu request 'gpu' is in neither the "
                     "input nor --nodes: read as https://github.com/NVIDIA/k8s-dra-driver-gpu/tree/main/deployments/"
                     "helm/dra-driver-nvidia-gpu/templates (deviceclass-gpu.yaml, deviceclass-mig.yaml) defines it")


def test_a_v1alpha3_template_is_read_as_v1beta1_with_a_note(tmp_path: Path) -> None:
    """v1alpha3 (Kubernetes 1.31) wrote requests as v1beta1 does: read the same, checked, and a note says 1.36 no
    longer serves it. Its selector pins a T4: bf16 is the finding it is for a v1 template."""
    alpha = TEMPLATE.replace("resource.k8s.io/v1", "resource.k8s.io/v1alpha3").replace(
        "exactly: {deviceClassName: gpu.nvidia.com}",
        "deviceClassName: gpu.nvidia.com\n          selectors:\n            - cel: {expression: \"" + T4_ONLY + "\"}")
    (tmp_path / "app.yaml").write_text(alpha + "---\n" + VLLM)
    out = json.loads(lint(str(tmp_path / "app.yaml"), "--format", "json").stdout)
    assert [(n["line"], n["reason"]) for n in out["skipped"]] == [(  # notes: what was not (fully) checked
        1, "ResourceClaimTemplate of resource.k8s.io/v1alpha3 (Kubernetes 1.31) is no longer served (1.36 serves "
           "v1alpha3 only for DeviceTaintRule and ResourcePoolStatusRequest): read as v1beta1, apply it as "
           "resource.k8s.io/v1"), ASSUMED_CLASS]
    assert [(f["rule"], f["pointer"], f["message"]) for f in out["findings"]] == [(
        "dtype-unsupported-by-gpu", "/spec/template/spec/containers/0/args/3",
        "--dtype bfloat16 needs compute capability >= 8.0 (bf16); eligible GPUs: Tesla-T4 (compute capability 7.5)")]


MIG = Path(__file__).resolve().parents[1] / "fixtures" / "mig-profile-unknown"


def _rules(case: str, kind: str) -> list[tuple[str, str]]:
    proc = lint(str(MIG / f"{kind}.{case}.yaml"), "--nodes", str(MIG / f"nodes.{case}.yaml"), "--format", "json")
    return [(f["rule"], f["pointer"]) for f in json.loads(proc.stdout)["findings"]]


def test_dra_mig_devices_are_what_the_mig_rules_read_with_every_rule_on() -> None:
    """MIG devices from ResourceSlices are the nvidia.com/mig-<profile> of a mixed-strategy node: NVIDIA's A100 demo
    (four MIG profiles of one GPU) is clean on the A100 it was written for; on an H100 each request is
    mig-profile-unknown alone (gpu-no-eligible-node folds into it, as for a device-plugin MIG resource), the
    template itself dra-request-unsatisfiable; the MIG extended resource a DeviceClass maps is offered by the
    GH200's 1g.12gb devices, and only mig-profile-unknown speaks when there are none."""
    assert _rules("dra-a100-slices", "pass") == []
    template = [("dra-request-unsatisfiable", f"/spec/spec/devices/requests/{i}") for i in range(4)]
    assert _rules("dra-h100-slices", "fail") == template + [
        ("mig-profile-unknown", "/spec/template/spec/resourceClaims/0")] * 4
    assert _rules("dra-gh200-1g12gb", "pass") == []
    assert _rules("dra-gh200-1g24gb", "fail") == [
        ("mig-profile-unknown", "/spec/containers/0/resources/limits/nvidia.com~1mig-1g.12gb")]


def test_a_v1beta1_template_is_read_as_v1_with_the_deprecation_the_api_server_warns_of(tmp_path: Path) -> None:
    """v1beta1 (requests inline): checked as v1, with a note carrying kube-apiserver 1.36's own deprecation warning
    (tests/e2e/test_dra_versions.py compares them)."""
    beta = TEMPLATE.replace("resource.k8s.io/v1", "resource.k8s.io/v1beta1").replace(
        "exactly: {deviceClassName: gpu.nvidia.com}",
        "deviceClassName: gpu.nvidia.com\n          selectors:\n            - cel: {expression: \"" + T4_ONLY + "\"}")
    (tmp_path / "app.yaml").write_text(beta + "---\n" + VLLM)
    out = json.loads(lint(str(tmp_path / "app.yaml"), "--format", "json").stdout)
    assert [(n["line"], n["reason"]) for n in out["skipped"]] == [(
        1, "ResourceClaimTemplate of resource.k8s.io/v1beta1 is deprecated in Kubernetes 1.35+ and unavailable in "
           "1.38+ (1.36 serves it only with --runtime-config): read as v1, apply it as resource.k8s.io/v1"),
        ASSUMED_CLASS]
    assert [f["rule"] for f in out["findings"]] == ["dtype-unsupported-by-gpu"]


def test_a_media_extension_mig_device_is_the_device_plugins_dot_me_resource() -> None:
    """NVML and the DRA driver write 1g.5gb+me; the device plugin's resource (and the mig-profiles table) 1g.5gb.me."""
    from compatcheck.core.cel import DeviceInput
    from compatcheck.core.dra import device_resources, mig_profile

    me = DeviceInput(NV, {NV: {"type": "mig", "profile": "1g.5gb+me"}}, {})
    assert (mig_profile(me), device_resources(me)) == ("1g.5gb+me", (("nvidia.com/mig-1g.5gb.me", 1),))
    gpu = DeviceInput(NV, {NV: {"type": "gpu", "profile": "1g.5gb"}}, {})  # only a MIG device has a profile
    other = DeviceInput("example.com", {"example.com": {"type": "mig", "profile": "1g.5gb"}}, {})
    assert [device_resources(d) for d in (gpu, other)] == [(), ()]
