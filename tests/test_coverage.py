"""Never silent: every object that asks for a GPU ends with findings or an explicit *not checked* record with its
reason, and the coverage summary says how many were checked, in every format (text, JSON ``coverage``, SARIF
notifications); ``--fail-on-unchecked`` / ``failOnUnchecked`` fail CI on blind spots, and the webhook can warn on
them (``webhook.warnUnchecked``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from compatcheck.core.admission import AdmissionSettings, review
from compatcheck.core.checks.base import EvalContext, PodAnalysis
from compatcheck.core.cluster import is_gpu_resource, is_other_vendor_gpu_resource
from compatcheck.core.config import Config
from compatcheck.core.crl import CrlIndex
from compatcheck.core.engine import evaluate
from compatcheck.core.model import ObjectRef
from compatcheck.core.workloads import object_ref
from compatcheck.io.lint import LintOptions, run_lint
from compatcheck.io.loader import Loaded
from compatcheck.io.manifests import expand_paths, iter_objects, read_file
from tests.conftest import FIXTURES, SHARED, admission_review, shared

PINNED = """\
apiVersion: v1
kind: Pod
metadata: {name: pinned, namespace: ml}
spec:
  nodeSelector: {nvidia.com/cuda.driver-version.major: "470"}
  containers:
  - name: main
    image: nvidia/cuda:12.4.1-base-ubuntu22.04
    resources: {limits: {nvidia.com/gpu: 1}}
"""
UNKNOWN_IMAGE = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: private, namespace: ml}
spec:
  template:
    spec:
      containers:
      - name: server
        image: registry.example.com/team/server:3
        resources: {limits: {nvidia.com/gpu: 1}}
"""
PLACEHOLDER = """\
apiVersion: batch/v1
kind: Job
metadata: {name: tmpl}
spec:
  template:
    spec:
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}
      containers:
      - name: train
        image: nvidia/cuda:12.4.1-base-ubuntu22.04
        resources: {limits: {nvidia.com/gpu: "${GPUS}"}}
"""
DRA = """\
apiVersion: v1
kind: Pod
metadata: {name: dra, namespace: ml}
spec:
  nodeSelector: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}
  resourceClaims:
  - {name: gpu, resourceClaimTemplateName: one-gpu}
  containers:
  - name: main
    image: nvidia/cuda:12.4.1-base-ubuntu22.04
    resources: {claims: [{name: gpu}]}
---
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
CPU_ONLY = """\
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - {name: web, image: "nginx:1.27", resources: {limits: {cpu: "1", nvidia.com/gpu: 0}}}
"""
IMAGE_PLACEHOLDER = PINNED.replace("name: pinned", "name: image").replace("nvidia/cuda:12.4.1-base-ubuntu22.04",
                                                                          "${REGISTRY}/cuda:12.4")
INPUTS = {"a-pinned.yaml": PINNED, "b-unknown.yaml": UNKNOWN_IMAGE, "c-placeholder.yaml": PLACEHOLDER,
          "d-dra.yaml": DRA, "e-cpu.yaml": CPU_ONLY, "f-image.yaml": IMAGE_PLACEHOLDER}
FILES = sorted(INPUTS)
CHART = ("https://github.com/NVIDIA/k8s-dra-driver-gpu/tree/main/deployments/helm/dra-driver-nvidia-gpu/templates "
         "(deviceclass-gpu.yaml, deviceclass-mig.yaml)")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("cov")
    for name, text in INPUTS.items():
        (d / name).write_text(text)
    return d


def lint(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "compatcheck", "lint", *args], capture_output=True, text=True,
                          cwd=cwd)


ML_PRIVATE = {"kind": "Deployment", "namespace": "ml", "name": "private"}
ML_DRA = {"kind": "Pod", "namespace": "ml", "name": "dra"}
NOT_CHECKED = [
    (ML_PRIVATE, "b-unknown.yaml", 9,
     "image CUDA unknown: no image pattern recognises 'registry.example.com/team/server:3' (container server)"),
    (ML_PRIVATE, "b-unknown.yaml", 6, "no nodes known: no --nodes file, and its node selection pins no GPU or driver"),
    ({"kind": "Job", "namespace": None, "name": "tmpl"}, "c-placeholder.yaml", 1,
     "placeholder in a quantity: '${GPUS}' (render it first: envsubst, helm template)"),
    (ML_DRA, "d-dra.yaml", 7, "DRA: DeviceClass 'gpu.nvidia.com' of ResourceClaimTemplate ml/one-gpu request 'gpu' is "
                              f"in neither the input nor --nodes: read as {CHART} defines it"),
    (ML_DRA, "d-dra.yaml", 7, "DRA: no ResourceSlices in the input or --nodes: the devices its claims would get were "
                              "not allocated"),
    ({"kind": "Pod", "namespace": "ml", "name": "image"}, "f-image.yaml", 1,
     "template not rendered: '${REGISTRY}/cuda:12.4' (render it first: envsubst, helm template)"),
]


def test_json_has_the_coverage_block(inputs: Path) -> None:
    out = json.loads(lint(*FILES, "--format", "json", cwd=inputs).stdout)
    coverage = out["coverage"]
    assert [(n["object"], n["file"], n["line"], n["reason"]) for n in coverage["notChecked"]] == NOT_CHECKED
    # 5 GPU workloads (the CPU pod with nvidia.com/gpu: 0 is none): the pinned one checked, with its finding
    assert {k: v for k, v in coverage.items() if k != "notChecked"} == {"gpuWorkloads": 5, "checked": 1}
    assert [f["object"]["name"] for f in out["findings"] if f["rule"] == "cuda-affinity-mismatch"] == ["pinned"]
    # the DRA pod's class, not in the input: a note naming it, at the pod
    assert [(n["file"], n["line"], n["reason"]) for n in out["skipped"] if "DeviceClass" in n["reason"]] == [
        ("d-dra.yaml", 7, NOT_CHECKED[3][3].removeprefix("DRA: "))]


def test_text_ends_with_the_coverage_summary(inputs: Path) -> None:
    lines = lint(*FILES, cwd=inputs).stdout.splitlines()
    assert lines[-1] == ("GPU workloads: 5, checked 1, not checked 4 (DRA: 1, image CUDA unknown: 1, no nodes known: "
                         "1, placeholder in a quantity: 1, template not rendered: 1)")
    assert lines[-7:-1] == [f"{f}:{line}: not checked: {o['kind']} {o['namespace'] + '/' if o['namespace'] else ''}"
                            f"{o['name']}: {r}" for o, f, line, r in NOT_CHECKED]


def test_sarif_carries_them_as_notifications(inputs: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(shared("reference/sarif-schema-2.1.0.json").read_text())
    sarif = json.loads(lint(*FILES, "--format", "sarif", cwd=inputs).stdout)
    jsonschema.Draft7Validator(schema).validate(sarif)
    invocation = sarif["runs"][0]["invocations"][0]
    notes = [n for n in invocation["toolExecutionNotifications"] if n.get("descriptor") == {"id": "not-checked"}]
    assert [(n["level"], n["message"]["text"], n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
             n["locations"][0]["physicalLocation"]["region"]["startLine"], n["properties"]["reason"])
            for n in notes] == [
        ("note", f"not checked: {'/'.join(x for x in (o['kind'], o['namespace'], o['name']) if x)}: {r}", f, line,
         r.split(":", 1)[0]) for o, f, line, r in NOT_CHECKED]
    assert invocation["properties"]["coverage"] == {"gpuWorkloads": 5, "checked": 1, "notChecked": 4}


@pytest.mark.parametrize(("args", "config", "code"), [
    ([], None, 0), (["--fail-on-unchecked"], None, 1), ([], "failOnUnchecked: true\n", 1),
    ([], "failOnUnchecked: false\n", 0)])
def test_fail_on_unchecked(tmp_path: Path, args: list[str], config: str | None, code: int) -> None:
    (tmp_path / "m.yaml").write_text(UNKNOWN_IMAGE)
    if config is not None:
        (tmp_path / ".compatcheck.yaml").write_text("apiVersion: compatcheck/v1\n" + config)
    proc = lint("m.yaml", *args, cwd=tmp_path)
    assert proc.returncode == code, proc.stderr
    # and an input whose GPU workloads were all checked passes with it
    (tmp_path / "m.yaml").write_text(CPU_ONLY)
    assert lint("m.yaml", *args, cwd=tmp_path).returncode == 0


def test_the_webhook_warns_on_unchecked_when_configured(loaded: Loaded) -> None:
    from ruamel.yaml import YAML

    obj = YAML(typ="safe").load(UNKNOWN_IMAGE)
    ctx = EvalContext(loaded.kb, None, CrlIndex())
    plain = AdmissionSettings.from_config(Config(), loaded.ruleset)
    warned = AdmissionSettings.from_config(Config(warn_unchecked=True), loaded.ruleset)
    body, _ = review(admission_review(obj), "validate", loaded.ruleset, ctx, plain)
    assert "warnings" not in body["response"] or not any("not checked" in w for w in body["response"]["warnings"])
    body, _ = review(admission_review(obj), "validate", loaded.ruleset, ctx, warned)
    assert [w for w in body["response"]["warnings"] if "not checked" in w] == [
        "not checked: image CUDA unknown: no image pattern recognises 'registry.example.com/team/server:3' (container "
        "server)", "not checked: no nodes known: no --nodes file, and its node selection pins no GPU or driver"]


# ---------------------------------------------------------------------------------------------- other vendors' GPUs

OTHER_VENDORS = """\
apiVersion: v1
kind: Pod
metadata: {name: rocm, namespace: ml}
spec:
  containers:
  - name: torch
    image: rocm/pytorch:latest
    resources:
      limits: {amd.com/gpu: 1}
---
apiVersion: batch/v1
kind: Job
metadata: {name: xpu}
spec:
  template:
    spec:
      initContainers:
      - {name: fetch, image: "busybox:1.36"}
      containers:
      - name: job
        image: intel/intel-extension-for-pytorch:latest
        resources:
          requests:
            cpu: "1"
          limits:
            gpu.intel.com/i915: 1
            gpu.intel.com/millicores: 100
---
apiVersion: v1
kind: Pod
metadata: {name: none}
spec:
  containers:
  - {name: idle, image: "rocm/pytorch:latest", resources: {limits: {amd.com/gpu: 0}}}
---
apiVersion: v1
kind: Pod
metadata: {name: both}
spec:
  nodeSelector: {nvidia.com/cuda.driver-version.major: "550"}
  containers:
  - {name: cuda, image: "nvidia/cuda:12.4.1-base-ubuntu22.04", resources: {limits: {nvidia.com/gpu: 1}}}
  - {name: rocm, image: "rocm/pytorch:latest", resources: {limits: {amd.com/gpu: 1}}}
"""


def test_other_vendors_gpus_are_not_checked_and_say_why(tmp_path: Path) -> None:
    """An AMD or Intel GPU is no NVIDIA GPU: no CUDA finding, and a not-checked record (not silence) at the request;
    a count of 0 is no GPU workload; a pod that also asks for an NVIDIA GPU is checked for it, with no such record."""
    (tmp_path / "v.yaml").write_text(OTHER_VENDORS)
    out = json.loads(lint("v.yaml", "--format", "json", cwd=tmp_path).stdout)
    assert out["findings"] == []
    assert out["coverage"] == {"gpuWorkloads": 3, "checked": 1, "notChecked": [
        {"object": {"kind": "Pod", "namespace": "ml", "name": "rocm"}, "file": "v.yaml", "line": 9,
         "reason": "not an NVIDIA GPU: amd.com/gpu in container torch: compatcheck checks CUDA only"},
        {"object": {"kind": "Job", "namespace": None, "name": "xpu"}, "file": "v.yaml", "line": 26,
         "reason": "not an NVIDIA GPU: gpu.intel.com/i915 in container job: compatcheck checks CUDA only"}]}
    assert lint("v.yaml", cwd=tmp_path).stdout.splitlines()[-1] == (
        "GPU workloads: 3, checked 1, not checked 2 (not an NVIDIA GPU: 2)")
    sarif = json.loads(lint("v.yaml", "--format", "sarif", cwd=tmp_path).stdout)
    notes = [n for n in sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
             if n.get("descriptor") == {"id": "not-checked"}]
    assert [(n["properties"]["reason"], n["locations"][0]["physicalLocation"]["region"]["startLine"])
            for n in notes] == [("not an NVIDIA GPU", 9), ("not an NVIDIA GPU", 26)]


# ---------------------------------------------------------------------------------------------- the whole corpus


def _asks_for_gpu(node: Any) -> bool:
    """Independently of compatcheck's reading: a mapping with a string image whose resources name a GPU resource
    with a quantity other than 0 (what a person grepping the manifest would call a GPU workload)."""
    if isinstance(node, list):
        return any(_asks_for_gpu(n) for n in node)
    if not isinstance(node, dict):
        return False
    res = node.get("resources")
    if isinstance(node.get("image"), str) and isinstance(res, dict):
        for section in ("limits", "requests"):
            values = res.get(section)
            if isinstance(values, dict) and any((is_gpu_resource(str(k)) or is_other_vendor_gpu_resource(str(k)))
                                                and str(v).strip() not in
                                                ("0", "0.0", "0m") for k, v in values.items()):
                return True
    return any(_asks_for_gpu(v) for v in node.values())


def _objects(directory: Path) -> list[tuple[str, ObjectRef, dict[str, Any]]]:
    files, _missing = expand_paths([str(directory)])
    out = []
    for f in files:
        for doc in read_file(f).documents:
            for _prefix, obj in iter_objects(doc):
                out.append((f, object_ref(obj), obj))
    return out


TREES = ["fixtures", "../shared/corpus", "../shared/corpus-reading"]


@pytest.mark.parametrize("tree", TREES)
def test_every_gpu_workload_ends_with_a_finding_or_a_not_checked_record(loaded: Loaded, tree: str) -> None:
    directory = FIXTURES if tree == "fixtures" else SHARED / tree.removeprefix("../shared/")
    if not directory.is_dir():
        pytest.skip(f"{tree} is not beside the checkout")
    report = run_lint([str(directory)], loaded, LintOptions())
    spoken = {(f.source.path if f.source else "", f.obj) for f in report.findings}
    spoken |= {(n.path, n.obj) for n in report.not_checked}
    gpu = [(path, ref, obj) for path, ref, obj in _objects(directory) if _asks_for_gpu(obj)]
    assert gpu and report.gpu_workloads >= len({(p, r) for p, r, _o in gpu})
    ctx = EvalContext(loaded.kb, None, CrlIndex())
    for path, ref, obj in gpu:
        if (path, ref) in spoken:
            continue
        # No finding and no record: only a GPU workload checked against the GPUs and drivers its own node
        # selection pins (the verdict is "compatible"), never one that was not looked at.
        result = evaluate(obj, loaded.ruleset, ctx)
        assert result.gpu and result.unchecked == [] and result.findings == [], (path, ref)
        gpu_pods = [pod for pod in result.pods or [] if PodAnalysis(pod, ctx).is_gpu_pod]
        assert gpu_pods and all(any(str(k).startswith("nvidia.com/") for k in pod.spec.get("nodeSelector") or {})
                                or "affinity" in pod.spec or "nvidia.com/use-gputype" in pod.annotations
                                for pod in gpu_pods), (path, ref)
