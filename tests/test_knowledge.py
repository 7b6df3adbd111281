"""Table tests for versions and the knowledge base (verdicts, image table, products, architectures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from compatcheck.core.versions import VersionError, parse_cuda_version, parse_driver_version, parse_version
from compatcheck.io.lint import LintOptions, run_lint
from compatcheck.io.loader import Loaded
from tests.conftest import image_table_as_of


@pytest.mark.parametrize(("text", "parts"), [("12", (12,)), ("12.4", (12, 4)), ("12.4.1", (12, 4, 1)),
                                             ("535.104.05", (535, 104, 5)), ("v0.9.2", (0, 9, 2)), (12, (12,))])
def test_parse_version(text: object, parts: tuple[int, ...]) -> None:
    assert parse_version(text).parts == parts


@pytest.mark.parametrize("text", ["12.x", "latest", "", None, True, "1.2.3.4.5", "12..4", [12]])
def test_parse_version_rejects(text: object) -> None:
    with pytest.raises(VersionError):
        parse_version(text)


@pytest.mark.parametrize("text", ["0.1", "100.0", "99999"])
def test_cuda_range(text: str) -> None:
    with pytest.raises(VersionError):
        parse_cuda_version(text)


def test_ordering_pads_with_zeros() -> None:
    assert parse_version("12.4") == parse_version("12.4.0")
    assert parse_version("12.10") > parse_version("12.9")
    assert parse_driver_version("525") < parse_driver_version("525.60.13")


@pytest.mark.parametrize(("driver", "runtime", "driver_cuda", "verdict"), [
    ("535.104.05", "12.2", "12.2", "compatible"),
    ("535.104.05", "12.4", "12.2", "minor-version-compatibility"),
    ("535.104.05", "11.8", "12.2", "compatible"),
    ("470.82.01", "12.0", "11.4", "incompatible"),          # never across a major
    ("450.80.02", "11.8", "11.0", "minor-version-compatibility"),
    ("450.51.06", "11.2", "11.0", "incompatible"),          # below the 11.x MVC floor 450.80.02
    ("440.33", "10.2", "10.2", "compatible"),
    ("418.39", "10.2", "10.1", "incompatible"),             # CUDA 10 has no MVC
    ("565.57.01", "12.7", "12.7", "compatible"),             # R565 reports 12.7 although no toolkit exists
    ("570.124.06", "12.9", "12.8", "minor-version-compatibility"),
    ("575.57.08", "13.0", "12.9", "incompatible"),
    ("580.65.06", "13.2", "13.0", "minor-version-compatibility"),
    ("580.65.06", "11.8", "13.0", "compatible"),
    ("390.48", "11.0", None, "incompatible"),                # older than every branch in the table
    ("999.1", "13.9", "13.3", "unknown"),                    # newer than the table: never guessed
])
def test_verdict_table(loaded: Loaded, driver: str, runtime: str, driver_cuda: str | None, verdict: str) -> None:
    v = loaded.kb.verdict(parse_cuda_version(runtime), driver=parse_driver_version(driver))
    assert v.verdict == verdict, v.reasons
    assert (str(v.driver_cuda.major_minor()) if v.driver_cuda else None) == driver_cuda


def test_verdict_from_driver_cuda_only(loaded: Loaded) -> None:
    kb = loaded.kb
    assert kb.verdict(parse_cuda_version("12.4"), driver_cuda=parse_cuda_version("12.2")).verdict == \
        "minor-version-compatibility"
    assert kb.verdict(parse_cuda_version("12.4"), driver_cuda=parse_cuda_version("11.4")).verdict == "incompatible"


@pytest.mark.parametrize(("image", "cuda"), [
    ("nvidia/cuda:12.4.1-base-ubuntu22.04", "12.4.1"),
    ("docker.io/nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04", "11.8.0"),
    ("nvidia/cuda:10.1-base-ubuntu18.04", "10.1"),
    ("nvcr.io/nvidia/cuda:13.0.0-cudnn-runtime-ubuntu24.04", "13.0.0"),
    ("pytorch/pytorch:2.7.0-cuda12.8-cudnn9-runtime", "12.8"),
    ("nvcr.io/nvidia/pytorch:24.05-py3", "12.4.1"),
    ("nvcr.io/nvidia/tritonserver:25.10-py3", "13.0.2"),
    ("nvcr.io/nvidia/tritonserver:25.10-trtllm-python-py3", "12.9.1"),
    ("nvcr.io/nvidia/cuda-dl-base:25.01-cuda12.8-devel-ubuntu24.04", "12.8"),
    ("tensorflow/tensorflow:2.15.0-gpu", "12.2"),
    ("tensorflow/tensorflow:2.4.0-gpu", "11.0"),
    ("vllm/vllm-openai:v0.9.2", "12.8.1"),
    ("vllm/vllm-openai:v0.20.0", "13.0.2"),
    ("vllm/vllm-openai:v0.6.3", "12.4.1"),
    ("ghcr.io/huggingface/text-generation-inference:2.2.0", "12.1"),
    ("ghcr.io/huggingface/text-generation-inference:3.0.1", "12.4"),
    ("paddlepaddle/paddle:3.0.0b1-gpu-cuda11.8-cudnn8.6-trt8.5", "11.8"),
    ("registry.baidubce.com/paddlepaddle/paddle:2.6.0-gpu-cuda12.0-cudnn8.9-trt8.6", "12.0"),
    ("nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04", "12.5.0"),
])
def test_image_table(loaded: Loaded, image: str, cuda: str) -> None:
    found = loaded.kb.image_cuda(image)
    assert found is not None and found.cuda is not None, found
    assert str(found.cuda) == cuda


@pytest.mark.parametrize(("image", "recognised"), [
    ("nvcr.io/nvidia/pytorch:24.06-py3", True),          # NGC month whose notes disagree: unknown, not guessed
    ("vllm/vllm-openai:v0.2.1", True),                   # older than the releases read
    ("quay.io/someone/llm-server:1.2", False),
])
def test_image_table_never_guesses(loaded: Loaded, image: str, recognised: bool) -> None:
    found = loaded.kb.image_cuda(image)
    assert found is None or found.cuda is None
    assert (found is not None) == recognised


@pytest.mark.parametrize("image", ["vllm/vllm-openai:latest", "tensorflow/tensorflow:latest-gpu-jupyter",
                                   "vllm/vllm-openai:v0.35.0"])
def test_floating_and_newer_tags_are_assumed_from_the_newest_release_and_say_so(loaded: Loaded, image: str) -> None:
    found = loaded.kb.image_facts(image)
    assert found is not None and found.cuda is not None and found.assumed is not None
    assert found.assumed.endswith(f"the newest {found.profile} release compatcheck knows, table dated "
                                  f"{image_table_as_of()}")
    assert found.assumed in found.origin


@pytest.mark.parametrize(("label", "cc"), [
    ("Tesla-T4", "7.5"), ("Tesla-T4-SHARED", "7.5"), ("NVIDIA-A100-SXM4-80GB", "8.0"),
    ("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", "8.0"), ("A100-SXM4-40GB", "8.0"), ("NVIDIA-A10", "8.6"),
    ("NVIDIA-H100-80GB-HBM3", "9.0"), ("NVIDIA-L4-SHARED", "8.9"), ("NVIDIA-L40S", "8.9"),
    ("NVIDIA-GeForce-RTX-5090", "12.0"), ("NVIDIA-B300-SXM6-AC", "10.3"), ("NVIDIA-GB300", "10.3"),
    ("Tesla-V100-PCIE-32GB", "7.0"), ("Tesla-P100-PCIE-12GB", "6.0"), ("Tesla-P4", "6.1"), ("Tesla-K80", "3.7"),
])
def test_products(loaded: Loaded, label: str, cc: str) -> None:
    p = loaded.kb.product(label)
    assert p is not None and str(p.compute_capability) == cc


@pytest.mark.parametrize(("label", "mig"), [
    # MIG user guide, supported GPUs (MIGUG610): the listed products offer MIG, no other does
    ("NVIDIA-A100-SXM4-80GB", True), ("NVIDIA-A30", True), ("NVIDIA-H100-80GB-HBM3", True), ("NVIDIA-H200", True),
    ("NVIDIA-H20", True), ("NVIDIA-B200", True), ("NVIDIA-GB200", True), ("NVIDIA-B300-SXM6-AC", True),
    ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", True), ("Tesla-T4", False), ("NVIDIA-A10", False),
    ("NVIDIA-A10G", False), ("NVIDIA-L4", False), ("NVIDIA-L40S", False), ("Tesla-V100-SXM2-32GB", False),
    ("NVIDIA-GeForce-RTX-4090", False), ("NVIDIA-RTX-A6000", False), ("NVIDIA-GB10", False),
    ("NVIDIA-RTX-PRO-4000-Blackwell", None),  # the RTX PRO Blackwell catch-all mixes MIG and non-MIG boards
])
def test_products_offer_mig(loaded: Loaded, label: str, mig: bool | None) -> None:
    p = loaded.kb.product(label)
    assert p is not None and p.mig is mig
    profiles = loaded.kb.mig_profiles_for(label)
    assert (profiles == frozenset()) is (mig is False)


@pytest.mark.parametrize(("label", "cc"), [("NVIDIA-GeForce-GTX-1080-Ti", "6.1"), ("NVIDIA-GeForce-GTX-1650", "7.5"),
                                           ("NVIDIA-GeForce-GTX-1660-SUPER", "7.5")])
def test_geforce_gtx_products(loaded: Loaded, label: str, cc: str) -> None:
    p = loaded.kb.product(label)
    assert p is not None and str(p.compute_capability) == cc and p.mig is False and not p.datacenter


@pytest.mark.parametrize("label", ["NVIDIA-L20Y", "Unknown-Card", "NVIDIA-H2000"])
def test_unknown_products_are_not_guessed(loaded: Loaded, label: str) -> None:
    assert loaded.kb.product(label) is None


@pytest.mark.parametrize(("cc", "first", "removed"), [
    ("3.7", None, "12.0"), ("7.0", "9.0", "13.0"), ("7.5", "10.0", None), ("9.0", "11.8", None),
    ("10.0", "12.8", None), ("12.0", "12.8", None),
])
def test_architectures(loaded: Loaded, cc: str, first: str | None, removed: str | None) -> None:
    arch = loaded.kb.architecture(parse_version(cc))
    assert arch is not None
    assert (str(arch.first_cuda) if arch.first_cuda else None) == first
    assert (str(arch.removed_in) if arch.removed_in else None) == removed


def test_every_table_row_has_a_known_source(loaded: Loaded) -> None:
    # Validation (run by load_rules(validate_builtin=True)) checks each source key; here: nothing empty.
    for name, rows in loaded.tables.items():
        for row in rows:
            assert row.get("source"), (name, row)


_MIG_POD = """apiVersion: v1
kind: Pod
metadata: {{name: mig}}
spec:
  nodeSelector: {{nvidia.com/gpu.product: {product}}}
  containers:
    - name: c
      image: nvcr.io/nvidia/pytorch:23.07-py3
      resources:
        limits: {{nvidia.com/mig-1g.5gb: 1}}
"""


@pytest.mark.parametrize(("product", "expected"), [
    ("Tesla-T4", [("mig-profile-unknown", "error", "MIG profile 1g.5gb is not offered by Tesla-T4")]),
    ("NVIDIA-L40S", [("mig-profile-unknown", "error", "MIG profile 1g.5gb is not offered by NVIDIA-L40S")]),
    ("NVIDIA-A100-SXM4-40GB", []),          # offers 1g.5gb
    ("NVIDIA-RTX-PRO-4000-Blackwell", []),  # MIG not recorded for this row: unknown, never guessed
])
def test_a_mig_resource_on_a_product_without_mig(loaded: Loaded, tmp_path: Path, product: str,
                                                 expected: list[tuple[str, str, str]]) -> None:
    """Only a nodeSelector names the product (no cluster profile): gpu-products' `mig: false` decides."""
    path = tmp_path / "pod.yaml"
    path.write_text(_MIG_POD.format(product=product), encoding="utf-8")
    report = run_lint([str(path)], loaded, LintOptions())
    assert not report.errors
    got = [(f.rule_id, f.severity.value, f.message) for f in report.findings if f.rule_id.startswith("mig-")]
    assert got == expected
