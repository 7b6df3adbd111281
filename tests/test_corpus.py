"""The 120 real public manifests in ../shared/corpus: the linter survives all of them (as a subprocess,
with and without a cluster view) and reports nothing on the non-GPU ("Negative/awkward") ones."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, SHARED

CORPUS = SHARED / "corpus"
pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is not beside the checkout")

# Files that are malformed on purpose (SOURCES.md "deliberately not clean").
EXPECTED_ERRORS = {
    "FairwindsOps__polaris/pkg__kube__test_files__test_3__bad.yaml",
    "stackrox__kube-linter/pkg__command__lint__testdata__invalid.yaml",
    # '- <<: *common-env' merges an alias of a sequence, which go-yaml (kubectl) refuses: "map merge requires map or
    # sequence of maps as the value" (tests/e2e/test_yaml_stream.py).
    "stackrox__kube-linter/pkg__templates__sortedkeys__testdata__container-with-merge.yaml",
}
# Real findings on files that are otherwise not GPU manifests: kubeconform's fixture writes a key twice (the
# API server keeps the last one).
EXPECTED_NON_GPU_FINDINGS = {("yannh__kubeconform/fixtures__duplicate_property.yaml", "yaml-duplicate-key")}


def non_gpu_files() -> set[str]:
    table = (CORPUS / "SOURCES.md").read_text()
    out = set()
    for row in table.splitlines():
        cells = [c.strip() for c in row.split("|")]
        if len(cells) > 8 and cells[7] == "Negative/awkward":
            m = re.match(r"`(.+)`", cells[2])
            if m:
                out.add(m.group(1))
    return out


def lint_corpus(*extra: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "compatcheck", "lint", str(CORPUS), "--format", "json", *extra],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1, 2)
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def without_nodes() -> dict:
    return lint_corpus()


@pytest.fixture(scope="module")
def with_nodes() -> dict:
    return lint_corpus("--nodes", "examples/cluster-profile.yaml")


def rel(path: str) -> str:
    return path.split("corpus/", 1)[1]


def test_reads_every_file(without_nodes: dict) -> None:
    assert without_nodes["summary"]["files"] == 120
    # Documents that cannot hold a pod spec (CRDs, Services, RBAC, ...) are skipped before the full parse.
    summary = without_nodes["summary"]
    assert summary["objects"] > 130 and summary["objects"] + summary["documentsWithoutPodSpecs"] > 150


@pytest.mark.parametrize("mode", ["without_nodes", "with_nodes"])
def test_only_the_deliberately_broken_files_error(mode: str, request: pytest.FixtureRequest) -> None:
    out = request.getfixturevalue(mode)
    assert {rel(e["file"]) for e in out["errors"]} == EXPECTED_ERRORS
    assert not any("internal error" in e["message"] for e in out["errors"])
    assert all("line" in e for e in out["errors"])


@pytest.mark.parametrize("mode", ["without_nodes", "with_nodes"])
def test_no_findings_on_non_gpu_manifests(mode: str, request: pytest.FixtureRequest) -> None:
    out = request.getfixturevalue(mode)
    negatives = non_gpu_files()
    assert len(negatives) == 25
    noisy = sorted({(rel(f["file"]), f["rule"]) for f in out["findings"] if rel(f["file"]) in negatives})
    assert set(noisy) == EXPECTED_NON_GPU_FINDINGS


def assumed(file: str, line: int, cls: str, template: str, request: str) -> tuple[str, int, str]:
    """The note at a DRA pod whose DeviceClass is in neither the input nor --nodes (issue 21: never silent)."""
    chart = ("https://github.com/NVIDIA/k8s-dra-driver-gpu/tree/main/deployments/helm/dra-driver-nvidia-gpu/templates "
             "(deviceclass-gpu.yaml, deviceclass-mig.yaml)")
    return (file, line, f"DeviceClass {cls!r} of ResourceClaimTemplate {template} request {request!r} is in neither "
                        f"the input nor --nodes: read as {chart} defines it")


def test_nothing_is_skipped_with_a_note_and_the_placeholder_secret_is_no_error(without_nodes: dict) -> None:
    # The {{HF_TOKEN}} Secret beside a GPU Deployment holds no pod spec: skipped unparsed, with no note and no error.
    # The notes: KServe's DRA sample is a resource.k8s.io/v1alpha3 template, which Kubernetes 1.36 does not serve;
    # and each DRA pod whose DeviceClass is not in the corpus is read with the class NVIDIA's driver chart installs.
    dra = "NVIDIA__k8s-dra-driver-gpu/"
    assert [(rel(s["file"]), s["line"], s["reason"]) for s in without_nodes["skipped"]][1:] == [
        assumed(f"{dra}demo__specs__quickstart__v1__gpu-test-mps.yaml", 59, "gpu.nvidia.com",
                "gpu-test-mps/shared-gpu", "mps-gpu"),
        assumed(f"{dra}demo__specs__quickstart__v1__gpu-test4.yaml", 69, "mig.nvidia.com", "gpu-test4/mig-devices",
                "mig-1g-5gb-0"),
        assumed(f"{dra}demo__specs__quickstart__v1__gpu-test5.yaml", 90, "gpu.nvidia.com", "gpu-test5/multiple-gpus",
                "ts-gpu"),
        assumed(f"{dra}tests__bats__specs__gpu-cuda-demo-suite.yaml", 49, "gpu.nvidia.com", "rct-cuda-demo", "gpu"),
        assumed(f"{dra}tests__bats__specs__gpu-simple-mig-ts.yaml", 46, "mig.nvidia.com", "rct-mig1g-ts", "mig1gts"),
        assumed("kserve__kserve/docs__samples__llmisvc__nvidia-dra__llm-inference-service-qwen2-7b-nvidia-dra.yaml",
                17, "gpu.nvidia.com", "nvidia-gpu-template", "gpu")]
    assert [(rel(s["file"]), s["line"], s["reason"]) for s in without_nodes["skipped"]][:1] == [(
        "kserve__kserve/docs__samples__llmisvc__nvidia-dra__nvidia-gpu-claim-template.yaml", 1,
        "ResourceClaimTemplate of resource.k8s.io/v1alpha3 (Kubernetes 1.31) is no longer served (1.36 serves "
        "v1alpha3 only for DeviceTaintRule and ResourcePoolStatusRequest): read as v1beta1, apply it as "
        "resource.k8s.io/v1")]
    name = "GoogleCloudPlatform__kubernetes-engine-samples/ai-ml__llm-serving-llama__vllm__vllm-llama4-maverick-" \
           "17b-128e-instruct.yaml"
    assert name not in {rel(e["file"]) for e in without_nodes["errors"]}


def test_real_gpu_manifests_get_real_findings(with_nodes: dict) -> None:
    rules = {f["rule"] for f in with_nodes["findings"]}
    # The corpus has CUDA 12.x images on the example profile's 535 / 470 drivers and HAMi pods.
    assert "cuda-driver-behind-runtime" in rules or "cuda-driver-too-old" in rules
    for f in with_nodes["findings"]:
        assert f["line"] and f["column"] and f["pointer"].startswith("/")


GKE_SAMPLES = "GoogleCloudPlatform__kubernetes-engine-samples"
GKE_GPU_WORKLOADS = {  # every GPU workload of the GKE samples: none carries a toleration, GKE adds it
    "ai-ml__llm-serving-gemma__tgi__tgi-7b-bitsandbytes-nf4.yaml",
    "ai-ml__llm-serving-gemma__trtllm__deploy-triton-server.yaml",
    "ai-ml__llm-serving-gemma__vllm__vllm-3-27b-it.yaml", "ai-ml__llm-serving-gemma__vllm__vllm-7b-kvcache.yaml",
    "ai-ml__llm-serving-llama__vllm__vllm-llama4-maverick-17b-128e-instruct.yaml",
    "batch__kueue-intro__job-team-a.yaml", "ai-ml__llm-multiple-gpus__llama3-70b__text-generation-inference.yaml"}


@pytest.mark.parametrize("plugin", [True, False])
def test_gke_samples_on_a_gke_profile(tmp_path: Path, plugin: bool) -> None:
    """Google's own GKE GPU samples, on a ClusterProfile of GKE GPU pools (fixtures/_clusters/gke-gpu.yaml): GKE's
    ExtendedResourceToleration tolerates its nvidia.com/gpu taint, so with the profile's admissionPlugins there is
    no gpu-toleration-missing and no pod without a node, and the driver findings the taint used to hide appear;
    without it, every GPU workload gets the toleration warning (a platform team's first week of noise)."""
    profile = (ROOT / "fixtures" / "_clusters" / "gke-gpu.yaml").read_text()
    if not plugin:
        profile = profile.replace("admissionPlugins: [ExtendedResourceToleration]\n", "")
    (tmp_path / "gke.yaml").write_text(profile)
    report = lint_corpus_dir(CORPUS / GKE_SAMPLES, "--nodes", str(tmp_path / "gke.yaml"))
    assert report["errors"] == []
    found = {(f["file"].rsplit("/", 1)[1], f["rule"]) for f in report["findings"]}
    # vLLM's CUDA 12.x on the R550 pools: by the default driver policy (driver >= runtime) an error; the profile
    # declares neither forward nor minor-version compatibility for GKE's pools
    vllm_on_550 = {(name, "cuda-driver-behind-runtime") for name in (
        "ai-ml__llm-serving-gemma__vllm__vllm-3-27b-it.yaml", "ai-ml__llm-serving-gemma__vllm__vllm-7b-kvcache.yaml",
        "ai-ml__llm-serving-llama__vllm__vllm-llama4-maverick-17b-128e-instruct.yaml")}
    unknown = {("ai-ml__llm-serving-gemma__trtllm__deploy-triton-server.yaml", "cuda-runtime-unknown")}
    if plugin:
        assert found == vllm_on_550 | unknown
    else:
        assert found == {(name, "gpu-toleration-missing") for name in GKE_GPU_WORKLOADS} | unknown


def lint_corpus_dir(path: Path, *extra: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "compatcheck", "lint", str(path), "--format", "json", *extra],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    return json.loads(proc.stdout)


def test_the_amd_sample_gets_no_finding_and_says_it_is_not_an_nvidia_gpu(without_nodes: dict) -> None:
    """KServe's AMD LLMInferenceService (amd.com/gpu, a ROCm image): SOURCES says a CUDA linter should not flag it.
    No finding, and one explicit not-checked record (a coverage record, not a finding) naming why."""
    name = ("kserve__kserve/docs__samples__llmisvc__multi-gpu-vendor__"
            "llm-inference-service-qwen2-7b-amd-no-scheduler.yaml")
    assert [f for f in without_nodes["findings"] if rel(f["file"]) == name] == []
    assert [(n["object"], n["line"], n["reason"]) for n in without_nodes["coverage"]["notChecked"]
            if rel(n["file"]) == name] == [
        ({"kind": "LLMInferenceService", "namespace": None, "name": "qwen2-7b-instruct-amd"}, 28,
         "not an NVIDIA GPU: amd.com/gpu in container main: compatcheck checks CUDA only")]
