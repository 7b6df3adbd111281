"""Dynamic Resource Allocation: the CEL of device selectors behaves as the API server's, NVIDIA's DRA attributes
read as node facts, a ClusterProfile's DRA pools, and ``compatcheck lint`` on claims, templates and ResourceSlices
(subprocesses on real files, exact output)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from compatcheck.core.cel import CelError, CelUnsupported, DeviceInput, Semver, compile_selector
from compatcheck.core.dra import (
    ClaimConstraint,
    build_inventory,
    constraint_reason,
    device_labels,
    device_resources,
    read_constraints,
    read_slice,
)
from compatcheck.core.profiles import profile_to_nodes
from compatcheck.io.loader import Loaded
from tests.conftest import ROOT

NV = "gpu.nvidia.com"
A100 = DeviceInput(NV, {NV: {"productName": "NVIDIA A100-SXM4-80GB", "type": "gpu", "brand": "Nvidia",
                             "cudaComputeCapability": Semver("8.0.0"), "driverVersion": Semver("550.54.15"),
                             "cudaDriverVersion": Semver("12.4.0"), "index": 3},
                        "resource.kubernetes.io": {"pcieRoot": "pci0000:00"}},
                   {NV: {"memory": Fraction(80 * 2**30)}})


def matches(expression: str, device: DeviceInput = A100) -> bool:
    return compile_selector(expression).matches(device)


@pytest.mark.parametrize(("expression", "expected"), [
    # the driver's own domain; a qualified name of another domain
    ("device.driver == 'gpu.nvidia.com'", True),
    ("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-80GB'", True),
    ('device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00"', True),
    ("device.attributes['gpu.nvidia.com'].index == 3", True),
    # semver library: methods, never operators
    ("device.attributes['gpu.nvidia.com'].cudaComputeCapability.isGreaterThan(semver('7.5.0'))", True),
    ("device.attributes['gpu.nvidia.com'].cudaComputeCapability.compareTo(semver('8.0.0')) >= 0", True),
    ("device.attributes['gpu.nvidia.com'].driverVersion.isLessThan(semver('535.0.0'))", False),
    ("device.attributes['gpu.nvidia.com'].driverVersion.major() == 550", True),
    ("device.attributes['gpu.nvidia.com'].cudaComputeCapability == semver('8.0.0')", True),
    ("semver('v8', true) == device.attributes['gpu.nvidia.com'].cudaComputeCapability", True),
    ("isSemver('1.2') || isSemver('v1.2.3')", False),
    ("isSemver('1.2', true)", True),
    ("semver('1.0.0-alpha').isLessThan(semver('1.0.0'))", True),
    ("semver('1.0.0+build.1') == semver('1.0.0')", True),
    # quantity library on capacity
    ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0", True),
    ("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('81Gi'))", False),
    ("quantity('1.5Gi').isInteger() && quantity('500m').isInteger() == false", True),
    ("quantity('1k').add(24).asInteger() == 1024", True),
    # an unknown domain is an empty map: 'in' and has() say absent, no error
    ("'x' in device.attributes['example.com']", False),
    ("!has(device.attributes['gpu.nvidia.com'].profile)", True),
    # the strings extension
    ("device.attributes['gpu.nvidia.com'].productName.lowerAscii().contains('a100')", True),
    ("device.attributes['gpu.nvidia.com'].productName.split(' ')[0] == 'NVIDIA'", True),
    # && and || absorb an error when the other side decides, as CEL's logical operators do: a guarded parse of a
    # string that is no version or quantity is false (or true), not an error
    ("isSemver(device.attributes['gpu.nvidia.com'].productName) && "
     "semver(device.attributes['gpu.nvidia.com'].productName).major() > 1", False),
    ("!isSemver(device.attributes['gpu.nvidia.com'].productName) || "
     "semver(device.attributes['gpu.nvidia.com'].productName).major() > 1", True),
    ("isQuantity(device.attributes['gpu.nvidia.com'].productName) && "
     "quantity(device.attributes['gpu.nvidia.com'].productName).isInteger()", False),
    ("semver('x.y').major() == 1 || device.driver == 'gpu.nvidia.com'", True),
])
def test_selectors_evaluate_as_the_api_server_does(expression: str, expected: bool) -> None:
    assert matches(expression) is expected


@pytest.mark.parametrize(("expression", "error"), [
    # an attribute the driver does not publish: an evaluation error (the scheduler aborts the allocation)
    ("device.attributes['gpu.nvidia.com'].profile == '1g.10gb'", "no such key"),
    # a Semver is equal only to a Semver, and has no < operator
    ("device.attributes['gpu.nvidia.com'].driverVersion == '550.54.15'", "no such overload"),
    ("semver('1.2')", "is not a semantic version"),
    ("semver('1.2').major() == 1", "is not a semantic version"),
    ("semver(device.attributes['gpu.nvidia.com'].productName).major() == 1 && true", "is not a semantic version"),
    ("quantity('lots').isInteger()", "is not a quantity"),
    # a selector must be a bool
    ("device.attributes['gpu.nvidia.com'].index", "not bool"),
])
def test_selector_runtime_errors(expression: str, error: str) -> None:
    with pytest.raises(CelError) as exc:
        matches(expression)
    assert error in str(exc.value)
    assert not isinstance(exc.value, CelUnsupported)


def test_syntax_errors_and_what_the_evaluator_lacks_are_told_apart() -> None:
    with pytest.raises(CelError) as exc:
        compile_selector("device.driver == ")
    assert exc.value.kind == "syntax"
    with pytest.raises(CelUnsupported):
        compile_selector("cel.bind(x, device.driver, x == 'gpu.nvidia.com')")
    # the device is a declared object: another field is a compile error, as in the API server
    with pytest.raises(CelError) as exc:
        compile_selector("device.nosuchfield == 'x'")
    assert (exc.value.kind, str(exc.value)) == ("syntax", "undefined field 'nosuchfield'")
    compile_selector("device.driver == 'device.other'")  # not in a string literal


NVIDIA_SLICE: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n0-gpu"},
    "spec": {"driver": NV, "nodeName": "n0", "pool": {"name": "n0", "generation": 1, "resourceSliceCount": 1},
             "devices": [
                 {"name": "gpu-0", "attributes": {
                     "type": {"string": "gpu"}, "productName": {"string": "NVIDIA A100-SXM4-40GB"},
                     "cudaComputeCapability": {"version": "8.0.0"}, "driverVersion": {"version": "535.104.5"},
                     "cudaDriverVersion": {"version": "12.2.0"}},
                  "capacity": {"memory": {"value": "40Gi"}}},
                 {"name": "gpu-0-mig-9-4-4", "attributes": {
                     "type": {"string": "mig"}, "profile": {"string": "1g.5gb"},
                     "productName": {"string": "NVIDIA A100-SXM4-40GB"},
                     "cudaComputeCapability": {"version": "8.0.0"}, "driverVersion": {"version": "535.104.5"},
                     "cudaDriverVersion": {"version": "12.2.0"}}},
             ]},
}


def test_nvidia_dra_attributes_become_the_labels_the_rules_read() -> None:
    """productName dashed as GFD writes it; the driver's semver 535.104.5 is driver 535.104.05 again."""
    gpu, mig = read_slice(NVIDIA_SLICE)
    assert dict(gpu.labels) == {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
        "nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/cuda.driver-version.full": "535.104.05",
        "nvidia.com/cuda.runtime-version.major": "12", "nvidia.com/cuda.runtime-version.minor": "2",
    }
    assert gpu.node == "n0" and gpu.input.capacity == {NV: {"memory": Fraction(40 * 2**30)}}
    # a MIG device runs what its parent GPU runs, and is what the device plugin's mixed strategy offers
    assert dict(mig.labels) == {**dict(gpu.labels), "nvidia.com/mig.strategy": "mixed"}
    assert (device_resources(mig.input), device_resources(gpu.input)) == ((("nvidia.com/mig-1g.5gb", 1),), ())
    other = DeviceInput("example.com", {"example.com": {"productName": "X"}}, {})
    assert device_labels(other) == ()


def test_a_v1beta1_slice_reads_its_basic_devices() -> None:
    beta = {**NVIDIA_SLICE, "apiVersion": "resource.k8s.io/v1beta1", "spec": {
        **NVIDIA_SLICE["spec"], "devices": [{"name": d["name"], "basic": {k: v for k, v in d.items() if k != "name"}}
                                            for d in NVIDIA_SLICE["spec"]["devices"]]}}
    assert [(d.name, d.labels) for d in read_slice(beta)] == [(d.name, d.labels) for d in read_slice(NVIDIA_SLICE)]


def test_a_profile_dra_pool_becomes_nodes_without_gpus_and_their_resource_slices(loaded: Loaded) -> None:
    profile = {"apiVersion": "compatcheck/v1", "kind": "ClusterProfile", "nodePools": [
        {"name": "t4", "count": 2, "gpu": "Tesla T4", "driver": "535.104.05", "gpusPerNode": 2, "dra": True}]}
    objects, problems = profile_to_nodes(profile, loaded.kb)
    assert problems == []
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("Node", "t4-0"), ("Node", "t4-1"), ("ResourceSlice", "t4-0-gpu.nvidia.com"),
        ("ResourceSlice", "t4-1-gpu.nvidia.com")]
    assert "nvidia.com/gpu" not in objects[0]["status"]["allocatable"]
    assert objects[0]["metadata"]["labels"]["nvidia.com/gpu.product"] == "Tesla-T4"
    devices = build_inventory(objects).devices
    assert [(d.node, d.name) for d in devices] == [("t4-0", "gpu-0"), ("t4-0", "gpu-1"), ("t4-1", "gpu-0"),
                                                   ("t4-1", "gpu-1")]
    assert dict(devices[0].labels) == {
        "nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.compute.major": "7",
        "nvidia.com/gpu.compute.minor": "5", "nvidia.com/cuda.driver-version.full": "535.104.05",
        "nvidia.com/cuda.runtime-version.major": "12", "nvidia.com/cuda.runtime-version.minor": "2"}
    assert devices[0].input.attributes[NV]["architecture"] == "Turing"


def test_a_dra_pool_does_not_share_through_the_device_plugin(loaded: Loaded) -> None:
    profile = {"apiVersion": "compatcheck/v1", "kind": "ClusterProfile", "nodePools": [
        {"name": "t4", "gpu": "Tesla-T4", "dra": True, "sharing": "time-slicing", "replicas": 4}]}
    _objects, problems = profile_to_nodes(profile, loaded.kb)
    assert [p.message for p in problems] == [
        "/nodePools/0/dra: a DRA pool shares its GPUs per claim (the driver's sharing config), not with sharing or "
        "vgpu"]


# ---------------------------------------------------------------------------------------------- compatcheck lint


def lint(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "compatcheck", "lint", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "NO_COLOR": "1"}, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


TEMPLATE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml}
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly: {deviceClassName: gpu.nvidia.com}
"""
VLLM = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm, namespace: ml}
spec:
  template:
    spec:
      resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          args: ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--dtype", "bfloat16"]
          resources: {claims: [{name: gpu}]}
"""
PROFILE = """\
apiVersion: compatcheck/v1
kind: ClusterProfile
nodePools:
  - {name: t4, count: 2, gpu: Tesla T4, driver: "535.104.05", gpusPerNode: 2, dra: true}
"""


def test_a_template_linted_beside_the_deployment_meets_the_profile_dra_pool(tmp_path: Path) -> None:
    """The issue's case: vLLM asking for its GPU through a ResourceClaimTemplate, bf16 on T4s."""
    (tmp_path / "app.yaml").write_text(TEMPLATE + "---\n" + VLLM)
    (tmp_path / "profile.yaml").write_text(PROFILE)
    proc = lint(str(tmp_path / "app.yaml"), "--nodes", str(tmp_path / "profile.yaml"), "--format", "json")
    assert proc.returncode == 1
    found = [(f["rule"], f["pointer"], f["message"]) for f in json.loads(proc.stdout)["findings"]]
    assert ("dtype-unsupported-by-gpu", "/spec/template/spec/containers/0/args/3",
            "--dtype bfloat16 needs compute capability >= 8.0 (bf16); eligible GPUs: Tesla-T4 (compute capability "
            "7.5)") in found


def test_a_template_not_in_the_input_is_a_note_not_silence(tmp_path: Path) -> None:
    (tmp_path / "app.yaml").write_text(VLLM)
    proc = lint(str(tmp_path / "app.yaml"))
    assert proc.returncode == 0
    assert proc.stdout.splitlines()[0] == (
        f"{tmp_path / 'app.yaml'}:7: note: ResourceClaimTemplate ml/one-gpu (claim 'gpu') is not in the input: the "
        "devices it requests were not checked")


def test_resource_slices_alone_are_a_nodes_file(tmp_path: Path) -> None:
    """``kubectl get resourceslices -o yaml``: a List of ResourceSlices, no Node."""
    (tmp_path / "app.yaml").write_text(TEMPLATE + "---\n" + VLLM)
    (tmp_path / "slices.yaml").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {**NVIDIA_SLICE, "spec": {**NVIDIA_SLICE["spec"], "devices": NVIDIA_SLICE["spec"]["devices"][:1]}}]}))
    proc = lint(str(tmp_path / "app.yaml"), "--nodes", str(tmp_path / "slices.yaml"), "--format", "json")
    out = json.loads(proc.stdout)
    assert out["errors"] == []
    # an A100 on R535 (CUDA 12.2) is older than vLLM 0.6.3's CUDA 12.4: by the default driver policy an error (forward
    # compatibility would run it, were it declared); bf16 is fine
    assert [f["rule"] for f in out["findings"]] == ["cuda-driver-behind-runtime"]


@pytest.mark.parametrize(("label", "rule"), [
    (None, "cuda-driver-behind-runtime"),
    ("true", "cuda-driver-needs-forward-compat"),
    ("false", "cuda-driver-behind-runtime"),
])
def test_a_devices_node_declares_the_driver_policy_for_its_devices(tmp_path: Path, label: str | None,
                                                                    rule: str) -> None:
    """The compatcheck.io/forward-compatibility label of the Node a ResourceSlice publishes devices for holds for
    those devices as for the node's device-plugin GPUs."""
    labels = {"kubernetes.io/hostname": "n0", **({"compatcheck.io/forward-compatibility": label} if label else {})}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n0", "labels": labels}}
    (tmp_path / "app.yaml").write_text(TEMPLATE + "---\n" + VLLM)
    (tmp_path / "cluster.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        node, {**NVIDIA_SLICE, "spec": {**NVIDIA_SLICE["spec"], "devices": NVIDIA_SLICE["spec"]["devices"][:1]}}]}))
    out = json.loads(lint(str(tmp_path / "app.yaml"), "--nodes", str(tmp_path / "cluster.json"),
                          "--format", "json").stdout)
    assert [(f["rule"], "535.104.05 (CUDA 12.2) on n0" in f["message"]) for f in out["findings"]] == [(rule, True)]


def test_a_nim_claim_creation_spec_becomes_the_cel_the_operator_writes() -> None:
    """NVIDIA/k8s-nim-operator internal/k8sutil/cel/cel.go BuildExpr: strings and bools compare with ==/!=, ints
    with the operator, versions and quantities through compareTo(...) against 0; the driver comes first."""
    from compatcheck.core.dra.claims import _nim_selectors

    device = {"name": "gpu", "driverName": NV, "attributeSelectors": [
        {"key": "architecture", "op": "Equal", "value": {"stringValue": "Ampere"}},
        {"key": "gpu.nvidia.com/cudaComputeCapability", "op": "GreaterThanOrEqual", "value": {"versionValue": "8.0.0"}},
        {"key": "index", "op": "LessThan", "value": {"intValue": 4}},
        {"key": "example.com/fast", "op": "NotEqual", "value": {"boolValue": False}}],
        "capacitySelectors": [{"key": "memory", "op": "GreaterThan", "value": "40Gi"}]}
    assert _nim_selectors(device) == (
        'device.driver == "gpu.nvidia.com"',
        'device.attributes["gpu.nvidia.com"].architecture == "Ampere"',
        '(device.attributes["gpu.nvidia.com"].cudaComputeCapability).compareTo(semver("8.0.0")) >= 0',
        'device.attributes["gpu.nvidia.com"].index < 4',
        'device.attributes["example.com"].fast != false',
        '(device.capacity["gpu.nvidia.com"].memory).compareTo(quantity("40Gi")) > 0')
    ampere = DeviceInput(NV, {NV: {**A100.attributes[NV], "architecture": "Ampere"}, "example.com": {"fast": True}},
                         A100.capacity)
    assert all(matches(e, ampere) for e in _nim_selectors(device))


def test_the_gpu_workload_count_script(tmp_path: Path) -> None:
    """scripts/gpu_workloads.py (the figures in docs/getting-started.md): a DRA claim, a KAI annotation, an extended
    resource, and a CPU pod that is no GPU workload."""
    kai = ("apiVersion: v1\nkind: Pod\nmetadata: {name: kai, annotations: {gpu-fraction: '0.5'}}\n"
           "spec: {containers: [{name: c, image: 'nvidia/cuda:13.0.2-base-ubi8'}]}\n")
    plain = ("apiVersion: v1\nkind: Pod\nmetadata: {name: plain}\n"
             "spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}\n")
    cpu = "apiVersion: v1\nkind: Pod\nmetadata: {name: cpu}\nspec: {containers: [{name: c, image: busybox}]}\n"
    (tmp_path / "dra.yaml").write_text(TEMPLATE + "---\n" + VLLM)
    (tmp_path / "pods.yaml").write_text(kai + "---\n" + plain + "---\n" + cpu)
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_workloads.py"), str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"{tmp_path}:", "  objects with a pod spec: 4", "  GPU workloads: 3", "    through DRA claim: 1",
        "    through KAI annotation: 1", "    through extended resource: 1",
        f"  not a GPU workload: {tmp_path / 'pods.yaml'}: Pod cpu",
        # and the coverage of a lint of the directory (no --nodes: nothing pins a driver; the DRA template's class
        # and devices, and the image x, are not known)
        "  coverage: GPU workloads 3, checked 0, not checked 3", "    not checked, DRA: 1",
        "    not checked, image CUDA unknown: 1", "    not checked, no nodes known: 3"]


def _slice(node: str, *devices: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpu"},
            "spec": {"driver": NV, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": n, "attributes": a} for n, a in devices]}}


def test_constraints_are_read_with_the_requests_they_cover() -> None:
    spec = {"devices": {"requests": [{"name": "a"}, {"name": "b"}, {"name": "c"}], "constraints": [
        {"requests": ["a", "b"], "matchAttribute": "resource.kubernetes.io/pcieRoot"},
        {"distinctAttribute": "gpu.nvidia.com/uuid"},
        {"requests": ["c/small"], "distinctAttribute": "gpu.nvidia.com/index"}]}}
    assert read_constraints(spec, "/spec") == [
        ClaimConstraint("matchAttribute", "resource.kubernetes.io/pcieRoot", ("a", "b"), "/spec/devices/constraints/0",
                        ("a", "b")),
        ClaimConstraint("distinctAttribute", "gpu.nvidia.com/uuid", ("a", "b", "c"), "/spec/devices/constraints/1"),
        ClaimConstraint("distinctAttribute", "gpu.nvidia.com/index", ("c",), "/spec/devices/constraints/2",
                        ("c/small",))]


def test_constraints_across_requests_as_the_allocator_meets_them() -> None:
    """distinctAttribute: values of different types are distinct (int 1 and string "1"), a device without the
    attribute cannot be allocated under the constraint; matchAttribute: one device serves one request only."""
    devices = read_slice(_slice("n0", ("g0", {"index": {"int": 1}}), ("g1", {"index": {"string": "1"}}),
                                ("g2", {"type": {"string": "gpu"}})))
    g0, g1, g2 = devices
    distinct = ClaimConstraint("distinctAttribute", "index", ("a", "b"), "/c/0")
    assert constraint_reason(distinct, [((g0, g1, g2), 1), ((g0, g1, g2), 1)]) is None
    assert constraint_reason(distinct, [((g0, g2), 1), ((g0, g2), 1)]) == (
        "they ask for 2 devices with distinct index on one node and at most 1 distinct value is on any node")
    match = ClaimConstraint("matchAttribute", "index", ("a", "b"), "/c/0")
    assert constraint_reason(match, [((g0,), 1), ((g0,), 1)]) == (
        "they ask for 2 devices with the same index on one node and no node has them")
    same = read_slice(_slice("n1", ("h0", {"index": {"int": 1}}), ("h1", {"index": {"int": 1}})))
    assert constraint_reason(match, [((g0, *same), 1), ((g0, *same), 1)]) is None
    # devices on two nodes never combine
    other = read_slice(_slice("n2", ("k0", {"index": {"int": 2}})))
    assert constraint_reason(distinct, [((g0,), 1), (tuple(other), 1)]) is not None


def test_a_template_defined_twice_differently_is_a_warning_naming_both_places(tmp_path: Path) -> None:
    """Two files define ml/one-gpu: the claims are checked against the last (as applying both would leave it),
    and a warning at it names the other; the same definition twice, or one in another namespace, says nothing."""
    t4 = TEMPLATE.replace("exactly: {deviceClassName: gpu.nvidia.com}",
                            "exactly:\n            deviceClassName: gpu.nvidia.com\n            selectors:\n"
                            "              - cel: {expression: \"device.attributes['gpu.nvidia.com'].productName"
                            " == 'Tesla T4'\"}")
    (tmp_path / "a.yaml").write_text(TEMPLATE + "---\n" + VLLM)
    (tmp_path / "b.yaml").write_text(t4 + "---\n" + TEMPLATE.replace("namespace: ml", "namespace: other"))
    (tmp_path / "c.yaml").write_text(t4)
    proc = lint(str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"), str(tmp_path / "c.yaml"), "--format", "json")
    out = json.loads(proc.stdout)
    assert out["warnings"] == [{
        "file": str(tmp_path / "b.yaml"), "line": 3,
        "message": f"ResourceClaimTemplate ml/one-gpu is defined again here, differently (also at "
                   f"{tmp_path / 'a.yaml'}:3): the claims that name it are checked against this last definition, "
                   "as applying the files in this order would leave it"}]
    # the last definition is the one checked: its selector pins a T4, on which bf16 does not run
    assert [(f["rule"], f["file"]) for f in out["findings"]] == [("dtype-unsupported-by-gpu", str(tmp_path / "a.yaml"))]
    text = lint(str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"))
    assert text.stdout.splitlines()[0] == (
        f"{tmp_path / 'b.yaml'}:3: warning: ResourceClaimTemplate ml/one-gpu is defined again here, differently (also "
        f"at {tmp_path / 'a.yaml'}:3): the claims that name it are checked against this last definition, as applying "
        "the files in this order would leave it")
