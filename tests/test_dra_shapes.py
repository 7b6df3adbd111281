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
    assert (out.get("warnings"), [f["rule"] for f in out["findings"]]) == (None, ["cuda-driver-needs-forward-compat"])
