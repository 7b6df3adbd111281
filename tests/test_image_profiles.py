"""Table tests for what an image carries (image-profiles, torch-wheels, forward-compat) and for the tables the checks
read beside it (framework-features, gpu-products, mig-profiles): real references and labels resolve to exactly
the facts the cited sources give, and whatever is outside the tables stays unknown."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core.imageconfig import RegistryFacts
from compatcheck.core.images import ImageFacts
from compatcheck.core.knowledge import KnowledgeBase, KnowledgeError
from compatcheck.core.versions import parse_version
from compatcheck.io.loader import Loaded
from tests.conftest import image_table_as_of

KERNELS_V02 = (["7.0", "7.5", "8.0", "8.6", "8.9", "9.0"], ["9.0"])  # vLLM TORCH_CUDA_ARCH_LIST 7.0 ... 9.0+PTX
KERNELS_V092 = (["7.0", "7.5", "8.0", "8.9", "9.0", "10.0", "12.0"], [])
CU121 = (["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"], [])
CU128_28 = (["7.0", "7.5", "8.0", "8.6", "9.0", "10.0", "12.0"], [])
CU12X_NO_VOLTA = (["7.5", "8.0", "8.6", "9.0", "10.0", "12.0"], [])
TGI_KERNELS = (["8.0", "8.6", "9.0"], ["9.0"])


def facts(loaded: Loaded, ref: str) -> ImageFacts:
    found = loaded.kb.image_facts(ref)
    assert found is not None, f"no profile matches {ref}"
    return found


def binaries(f: ImageFacts) -> dict[str, tuple[list[str], list[str]]]:
    return {b.component: ([str(s) for s in b.sass], [str(p) for p in b.ptx]) for b in f.binaries}


def check(f: ImageFacts, expect: dict[str, Any]) -> None:
    """Every key given must hold exactly; ``binaries`` lists every binary the image has (none: {})."""
    got = {
        "profile": f.profile,
        "cuda": str(f.cuda) if f.cuda else None,
        "base": str(f.base_cuda) if f.base_cuda else None,
        "framework": f.framework,
        "version": str(f.framework_version) if f.framework_version else None,
        "binaries": binaries(f),
        "fwd": sorted(f.forward_compat.branches) if f.forward_compat else None,
        "toolkits": {b.component: str(b.toolkit) for b in f.binaries},
    }
    for key, want in expect.items():
        if key == "binaries":
            want = {k: (list(s), list(p)) for k, (s, p) in want.items()}
        assert got[key] == want, (f.reference, key, got[key], f.sources)
    assert not f.reason and not f.no_cuda_runtime


# ---------------------------------------------------------------------------------------------- vLLM

@pytest.mark.parametrize(("ref", "expect"), [
    ("vllm/vllm-openai:v0.2.4", dict(cuda="12.1.0", base="12.1.0", version="0.2.4",
                                     binaries={"vLLM kernels": KERNELS_V02})),
    ("vllm/vllm-openai:v0.4.0.post1", dict(cuda="12.1.0", base="12.1.0", version="0.4.0.post1",
                                           binaries={"torch 2.1.2+cu121": CU121, "vLLM kernels": KERNELS_V02})),
    ("vllm/vllm-openai:v0.4.2", dict(cuda="12.4.1", base="12.4.1",
                                     binaries={"torch 2.3.0+cu121": CU121, "vLLM kernels": KERNELS_V02})),
    ("vllm/vllm-openai:v0.6.3", dict(cuda="12.4.1", base="12.4.1",
                                     binaries={"torch 2.4.0+cu121": CU121, "vLLM kernels": KERNELS_V02})),
    ("vllm/vllm-openai:v0.6.4.post1", dict(cuda="12.4.1", version="0.6.4.post1",
                                           binaries={"torch 2.5.1+cu124": CU121, "vLLM kernels": KERNELS_V02})),
    # 0.6.5-0.7.3: the release base (12.1.0 vs 12.4.1) is not confirmed; torch from PyPI is cu124 either way.
    ("vllm/vllm-openai:v0.7.3", dict(cuda="12.4", base=None, fwd=None,
                                     binaries={"torch 2.5.1+cu124": CU121, "vLLM kernels": KERNELS_V02})),
    # torch 2.6 wheels are not in torch-wheels: only the kernels are known.
    ("vllm/vllm-openai:v0.8.5.post1", dict(cuda="12.4", base="12.4", version="0.8.5.post1",
                                           binaries={"vLLM kernels": KERNELS_V02})),
    ("vllm/vllm-openai:v0.9.0", dict(cuda="12.8.1", base="12.8.1", binaries={
        "torch 2.7.0+cu128": CU12X_NO_VOLTA,
        "vLLM kernels": (["7.0", "7.5", "8.0", "8.9", "9.0", "10.0"], ["10.0"])})),
    ("vllm/vllm-openai:v0.9.2", dict(cuda="12.8.1", binaries={"torch 2.7.0+cu128": CU12X_NO_VOLTA,
                                                              "vLLM kernels": KERNELS_V092})),
    ("vllm/vllm-openai:v0.10.1.1", dict(cuda="12.8.1", version="0.10.1.1",
                                        binaries={"torch 2.7.1+cu128": CU12X_NO_VOLTA, "vLLM kernels": KERNELS_V092})),
    ("vllm/vllm-openai:v0.11.0", dict(cuda="12.8.1", binaries={"torch 2.8.0+cu128": CU128_28,
                                                               "vLLM kernels": KERNELS_V092})),
    # torch 2.9/2.10 cu129 wheels are not in torch-wheels.
    ("vllm/vllm-openai:v0.11.1", dict(cuda="12.9.1", base="12.9.1", binaries={"vLLM kernels": KERNELS_V092})),
    ("vllm/vllm-openai:v0.19.1", dict(cuda="12.9.1", binaries={"vLLM kernels": KERNELS_V092})),
    ("vllm/vllm-openai:v0.15.1-cu130", dict(cuda="13.0.1", base="13.0.1", version="0.15.1", binaries={
        "torch 2.9.1+cu130": CU12X_NO_VOLTA,
        "vLLM kernels": (["7.5", "8.0", "8.9", "9.0", "10.0", "12.0"], [])})),
    ("vllm/vllm-openai:v0.18.0-x86_64-cu130", dict(cuda="13.0.1", binaries={
        "torch 2.10.0+cu130": CU12X_NO_VOLTA,
        "vLLM kernels": (["7.5", "8.0", "8.9", "9.0", "10.0", "12.0"], [])})),
    ("vllm/vllm-openai:v0.20.0", dict(cuda="13.0.2", base="13.0.2", binaries={
        "torch 2.11.0+cu130": CU12X_NO_VOLTA,
        "vLLM kernels": (["7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0"], ["12.0"])})),
    ("docker.io/vllm/vllm-openai:v0.21.0@sha256:" + "a" * 64, dict(cuda="13.0.2")),
    ("vllm/vllm-openai:v0.20.0-cu129", dict(cuda="12.9.1", base="12.9.1", binaries={
        "vLLM kernels": (["7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0"], [])})),
])
def test_vllm(loaded: Loaded, ref: str, expect: dict[str, Any]) -> None:
    check(facts(loaded, ref), {"profile": "vllm-openai", "framework": "vllm", **expect})


@pytest.mark.parametrize("ref", [
    "vllm/vllm-openai:v0.2.1",            # before the first release read
    "vllm/vllm-openai:v0.15.1-cu129",     # -cu129 exists from 0.20.0
    "vllm/vllm-openai:v0.20.0-aarch64",   # arm64 images carry other arch lists
    "vllm/vllm-openai:v0.19.0-ubuntu2404",
])
def test_vllm_outside_the_table_is_unknown(loaded: Loaded, ref: str) -> None:
    f = facts(loaded, ref)
    assert f.cuda is None and f.reason and not f.binaries


NEWEST = "the newest {} release compatcheck knows, table dated " + image_table_as_of()


@pytest.mark.parametrize(("ref", "assumed"), [
    # newer than every row of its family (variant): decided from the newest row, and said so (#20)
    ("vllm/vllm-openai:v0.34.0", "assumed from v0.33.0, " + NEWEST.format("vllm-openai")),
    ("vllm/vllm-openai:v0.33.0-cu129", "assumed from v0.27.0 to before v0.33.0, " + NEWEST.format("vllm-openai")),
    ("vllm/vllm-openai:v0.20.0-cu130", "assumed from v0.17.0 to before v0.20.0, " + NEWEST.format("vllm-openai")),
    ("vllm/vllm-openai:latest", "a floating tag, assumed from v0.33.0, " + NEWEST.format("vllm-openai")),
    ("vllm/vllm-openai:nightly", "a floating tag, assumed from v0.33.0, " + NEWEST.format("vllm-openai")),
    ("lmsysorg/sglang:latest", "a floating tag, assumed from v0.5.11 to before v0.5.20, " + NEWEST.format("sglang")),
    ("lmsysorg/sglang:v0.5.20", "assumed from v0.5.11 to before v0.5.20, " + NEWEST.format("sglang")),
])
def test_newer_and_floating_tags_are_assumed_from_the_newest_release(loaded: Loaded, ref: str, assumed: str) -> None:
    f = facts(loaded, ref)
    assert f.cuda is not None and f.assumed == assumed and f.origin.startswith(f"image {ref}, {assumed}")


@pytest.mark.parametrize("ref", [
    "nvcr.io/nvidia/tritonserver:26.08-vllm-python-py3", "nvcr.io/nvidia/tensorrt-llm/release:1.3.0",
    "nvcr.io/nvidia/tritonserver:23.03-py3-sdk", "nvcr.io/nvidia/sglang:26.05-py3",
    "ghcr.io/huggingface/text-generation-inference:3.3.8", "lmsysorg/sglang:v0.4.6.post2-cu118",
    "ghcr.io/huggingface/text-embeddings-inference:1.9.4",
    "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.10.0", "tensorflow/tensorflow:2.22.0-gpu",
])
def test_other_tags_newer_than_their_family_are_assumed(loaded: Loaded, ref: str) -> None:
    f = facts(loaded, ref)
    assert f.cuda is not None and f.assumed is not None
    assert f.assumed.startswith("assumed from v") and f.assumed.endswith(NEWEST.format(f.profile))


# ---------------------------------------------------------------------------------------------- NGC

@pytest.mark.parametrize(("ref", "expect"), [
    ("nvcr.io/nvidia/tritonserver:24.05-trtllm-python-py3",
     dict(profile="ngc-tritonserver-trtllm", framework="tensorrt-llm", version="0.9.0", cuda="12.3.2", base="12.3.2")),
    ("nvcr.io/nvidia/tritonserver:25.02-trtllm-python-py3",
     dict(framework="tensorrt-llm", version="0.17.0.1", cuda="12.8.0")),
    ("nvcr.io/nvidia/tritonserver:25.10-trtllm-python-py3", dict(version="1.0.0", cuda="12.9.1")),
    ("nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3", dict(version="1.2.1", cuda="13.1.0")),
    ("nvcr.io/nvidia/tritonserver:24.04-vllm-python-py3",
     dict(profile="ngc-tritonserver-vllm", framework="vllm", version="0.4.0.1", cuda="12.4.1")),
    ("nvcr.io/nvidia/tritonserver:25.09-vllm-python-py3", dict(version="0.10.1.1", cuda="13.0.1")),
    ("nvcr.io/nvidia/tritonserver:26.07-vllm-python-py3", dict(version="0.24.0", cuda="13.3.0")),
    # Triton py3: the notes' data-center branches where current (23.03-24.05) ...
    ("nvcr.io/nvidia/tritonserver:23.03-py3",
     dict(profile="ngc-tritonserver", framework="triton", version="23.03", cuda="12.1.0", base="12.1.0",
          fwd=[450, 470, 510, 515, 525, 530])),
    ("nvcr.io/nvidia/tritonserver:23.09-py3", dict(cuda="12.2.1", fwd=[450, 470, 510, 525, 535])),
    ("nvcr.io/nvidia/tritonserver:24.01-py3", dict(cuda="12.3.2", fwd=[470, 525, 535, 545])),
    ("nvcr.io/nvidia/tritonserver:24.05-py3", dict(cuda="12.4", fwd=[470, 525, 535, 545])),
    ("nvcr.io/nvidia/tritonserver:24.06-py3", dict(cuda="12.5.0")),
    ("nvcr.io/nvidia/tritonserver:25.10-py3", dict(cuda="13.0.2", base="13.0.2")),
    ("nvcr.io/nvidia/tritonserver:26.08-py3", dict(cuda="13.4.1")),
    # ... and the notes of 20.09-22.10 (TRITONRNOLD): "418.xx", "440.30", "450.xx" name branches.
    ("nvcr.io/nvidia/tritonserver:20.09-py3",
     dict(profile="ngc-tritonserver", framework="triton", version="20.09", cuda="11.0.3", base="11.0.3",
          fwd=[418, 440])),
    ("nvcr.io/nvidia/tritonserver:20.10-py3", dict(cuda="11.1.0", fwd=[418, 440, 450])),
    ("nvcr.io/nvidia/tritonserver:20.11-py3", dict(cuda="11.1.0", fwd=[418, 440, 450])),
    ("nvcr.io/nvidia/tritonserver:21.02-py3", dict(cuda="11.2.0", fwd=[418, 440, 450])),
    ("nvcr.io/nvidia/tritonserver:21.03-py3", dict(cuda="11.2.1", fwd=[418, 440, 450])),
    ("nvcr.io/nvidia/tritonserver:21.09-py3", dict(cuda="11.4.2", fwd=[418, 440, 450, 460])),
    ("nvcr.io/nvidia/tritonserver:21.10-py3", dict(cuda="11.4.2", base="11.4.2", fwd=[418, 440, 450, 460])),
    # The 21.10 SDK image is built FROM the same 21.10-py3-min base as the server (TRITONSDK, derived).
    ("nvcr.io/nvidia/tritonserver:21.10-py3-sdk",
     dict(profile="ngc-tritonserver", version="21.10", cuda="11.4.2", base="11.4.2", fwd=[418, 440, 450, 460])),
    ("nvcr.io/nvidia/tritonserver:21.11-py3", dict(cuda="11.5.0", fwd=[418, 440, 450, 460, 470])),
    ("nvcr.io/nvidia/tritonserver:21.12-py3", dict(cuda="11.5.0", fwd=[418, 440, 450, 460, 470])),
    ("nvcr.io/nvidia/tritonserver:22.09-py3", dict(cuda="11.8.0", fwd=[450, 470, 510, 515])),
    ("nvcr.io/nvidia/tritonserver:22.10-py3", dict(cuda="11.8.0", fwd=[450, 470, 510, 515])),
    # NGC SGLang 25.10: CUDA 13.0.2; the notes' 470/525/535/550 kept where the CUDA 13.0 bases agree (derived).
    ("nvcr.io/nvidia/sglang:25.10-py3",
     dict(profile="ngc-sglang", framework=None, version=None, cuda="13.0.2", base="13.0.2", fwd=[535, 550])),
    ("nvcr.io/nvidia/pytorch:24.05-py3",
     dict(profile="ngc-pytorch", framework="ngc-pytorch", cuda="12.4.1", base="12.4.1")),
    ("nvcr.io/nvidia/pytorch:24.03-py3", dict(cuda="12.4.0")),
    ("nvcr.io/nvidia/pytorch:24.11-py3", dict(cuda="12.6.3")),
    ("nvcr.io/nvidia/pytorch:25.01-py3", dict(cuda="12.8.0")),
    ("nvcr.io/nvidia/pytorch:25.12-py3", dict(cuda="13.1.0")),
    ("nvcr.io/nvidia/pytorch:26.03-py3", dict(cuda="13.2.0")),          # same month as CUDA DL 26.03 (derived)
    ("nvcr.io/nvidia/pytorch:24.01-py3", dict(cuda="12.3.2")),          # same month as Triton 24.01 (derived)
    ("nvcr.io/nvidia/pytorch:20.06-py3", dict(cuda="11.0.167")),
    ("nvcr.io/nvidia/tensorflow:22.10-tf2-py3",
     dict(profile="ngc-tensorflow", framework="ngc-tensorflow", cuda="11.8.0", fwd=[450, 470, 510, 515])),
    ("nvcr.io/nvidia/tensorflow:23.01-tf1-py3", dict(cuda="12.0.1", fwd=[450, 470, 510, 515, 525])),
    ("nvcr.io/nvidia/tensorflow:24.01-tf2-py3", dict(cuda="12.3.2")),
    ("nvcr.io/nvidia/mxnet:22.03-py3", dict(profile="ngc-mxnet", cuda="11.6.1")),
    ("nvcr.io/nvidia/dgl:23.07-py3", dict(profile="ngc-dgl", cuda="12.1.1", fwd=[450, 470, 510, 515, 525, 530])),
    ("nvcr.io/nvidia/cuda-dl-base:25.02-cuda12.5-devel-ubuntu24.04",
     dict(profile="ngc-cuda-dl-base", cuda="12.5", base=None)),
    ("nvcr.io/nvidia/tensorrt-llm/release:0.20.0", dict(profile="tensorrt-llm-release", cuda="12.9.0")),
    ("nvcr.io/nvidia/tensorrt-llm/release:0.21.0", dict(cuda="12.9.0")),    # base PyTorch 25.05 (derived)
    ("nvcr.io/nvidia/tensorrt-llm/release:1.0.0", dict(cuda="12.9.1")),
    ("nvcr.io/nvidia/tensorrt-llm/release:1.1.0", dict(cuda="13.0.2")),
    ("nvcr.io/nvidia/tensorrt-llm/release:1.2.0", dict(cuda="13.1.0")),
    ("nvcr.io/nvidia/tensorflow:22.06-tf2-py3", dict(cuda="11.7", fwd=[450, 470, 510])),
    ("nvcr.io/nvidia/tensorflow:21.05-tf1-py3", dict(cuda="11.3.0")),
    ("nvcr.io/nvidia/tritonserver:22.01-py3", dict(profile="ngc-tritonserver", framework="triton", cuda="11.6.0",
                                                   fwd=[418, 440, 450, 460, 470])),
])
def test_ngc(loaded: Loaded, ref: str, expect: dict[str, Any]) -> None:
    check(facts(loaded, ref), {"binaries": {}, **expect})


@pytest.mark.parametrize("ref", [
    "nvcr.io/nvidia/pytorch:24.06-py3",                 # the notes read disagree
    "nvcr.io/nvidia/pytorch:23.10-py3",                 # no note of that month read
    "nvcr.io/nvidia/tritonserver:24.02-py3",
    "nvcr.io/nvidia/tritonserver:24.03-trtllm-python-py3",
    "nvcr.io/nvidia/tritonserver:21.09-py3-sdk",        # the SDK's build files read for 21.10 only
])
def test_ngc_outside_the_table_is_unknown(loaded: Loaded, ref: str) -> None:
    f = facts(loaded, ref)
    assert f.cuda is None and f.reason


def test_ngc_triton_variants_other_than_sdk_are_not_claimed(loaded: Loaded) -> None:
    for ref in ("nvcr.io/nvidia/tritonserver:21.10-py3-min", "nvcr.io/nvidia/tritonserver:21.10-py3-igpu"):
        f = loaded.kb.image_facts(ref)
        assert f is None or f.profile != "ngc-tritonserver", ref


@pytest.mark.parametrize("ref", [
    "nvcr.io/nvidia/tritonserver:20.09-py3", "nvcr.io/nvidia/tritonserver:21.10-py3-sdk",
    "nvcr.io/nvidia/sglang:25.10-py3",
])
def test_new_ngc_rows_never_gate_on_the_driver(loaded: Loaded, ref: str) -> None:
    f = facts(loaded, ref)
    assert str(f.require_cuda) == "9.0"  # NGC images set NVIDIA_REQUIRE_CUDA=cuda>=9.0 (NGCENV)


def test_ngc_sglang_forward_compat_bridges_r535_on_datacenter_gpus_only(loaded: Loaded) -> None:
    fc = facts(loaded, "nvcr.io/nvidia/sglang:25.10-py3").forward_compat
    assert fc is not None
    runtime = parse_version("13.0.2")
    assert fc.bridges(runtime, parse_version("535.247.01"), datacenter=True)
    assert not fc.bridges(runtime, parse_version("535.247.01"), datacenter=False)
    assert not fc.bridges(runtime, parse_version("525.147.05"), datacenter=True)   # the notes' R525: not CUDA 13's
    assert not fc.bridges(runtime, parse_version("545.23.08"), datacenter=True)


def test_ngc_llm_variants_never_read_the_month_as_the_framework_version(loaded: Loaded) -> None:
    for row in loaded.tables["image-profiles"]:
        if row.get("framework") in ("vllm", "tensorrt-llm") and row["name"].startswith("ngc-"):
            assert all(r.get("frameworkVersion") for r in row["versions"]), row["name"]


# ---------------------------------------------------------------------------------------------- PyTorch wheels

TORCH_WHEEL_CASES = [
    ("2.0.1", "11.7", ["3.7", "5.0", "6.0", "7.0", "7.5", "8.0", "8.6"], []),
    ("2.0.0", "11.8", ["3.7", "5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"], []),
    ("2.3.1", "11.8", ["3.7", "5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"], []),
    ("2.1.0", "12.1", CU121[0], []),
    ("2.5.1", "12.1", CU121[0], []),
    ("2.4.0", "12.4", CU121[0], []),
    ("2.5.1", "12.4", CU121[0], []),
    ("2.7.0", "12.8", CU12X_NO_VOLTA[0], []),
    ("2.8.0", "12.6", CU121[0], []),
    ("2.14.0", "12.6", CU121[0], []),
    ("2.8.0", "12.8", CU128_28[0], []),
    ("2.10.0", "12.8", CU128_28[0], []),
    ("2.8.0", "12.9", CU128_28[0], []),
    ("2.11.0", "12.8", CU12X_NO_VOLTA[0], []),
    ("2.9.0", "13.0", CU12X_NO_VOLTA[0], []),
    ("2.10.0", "13.0", CU12X_NO_VOLTA[0], []),
    ("2.11.0", "13.0", CU12X_NO_VOLTA[0], []),
    ("2.12.1", "13.0", CU12X_NO_VOLTA[0], []),
    ("2.12.0", "13.2", CU12X_NO_VOLTA[0], []),
    ("2.13.0", "13.0", CU12X_NO_VOLTA[0], []),
    ("2.13.0", "13.2", CU12X_NO_VOLTA[0], []),
    ("2.14.0", "13.0", CU12X_NO_VOLTA[0], []),
    ("2.14.0", "13.2", CU12X_NO_VOLTA[0], []),
]


@pytest.mark.parametrize(("torch", "flavour", "sass", "ptx"), TORCH_WHEEL_CASES)
def test_torch_wheels(loaded: Loaded, torch: str, flavour: str, sass: list[str], ptx: list[str]) -> None:
    wheels = [w for w in loaded.kb.torch_wheels
              if w.cuda == parse_version(flavour) and parse_version(torch) in w.versions]
    assert len(wheels) == 1, wheels
    assert [str(s) for s in wheels[0].sass] == sass
    assert [str(p) for p in wheels[0].ptx] == ptx


@pytest.mark.parametrize(("torch", "flavour"), [
    ("2.6.0", "12.4"), ("2.6.0", "12.6"), ("2.7.0", "12.6"), ("2.7.1", "11.8"),   # arch lists not confirmed
    ("2.9.0", "12.9"), ("2.11.0", "12.9"), ("2.12.0", "12.8"), ("2.15.0", "13.2"), ("1.13.1", "11.7"),
])
def test_torch_wheels_not_in_the_table(loaded: Loaded, torch: str, flavour: str) -> None:
    assert not [w for w in loaded.kb.torch_wheels
                if w.cuda == parse_version(flavour) and parse_version(torch) in w.versions]


def test_every_torch_wheel_row_is_tested(loaded: Loaded) -> None:
    for w in loaded.kb.torch_wheels:
        assert any(parse_version(t) in w.versions and parse_version(f) == w.cuda
                   for t, f, _s, _p in TORCH_WHEEL_CASES), w


@pytest.mark.parametrize(("ref", "expect"), [
    ("pytorch/pytorch:2.7.0-cuda12.8-cudnn9-runtime",
     dict(profile="pytorch-official-wheels", cuda="12.8", base=None, version="2.7.0",
          binaries={"torch 2.7.0+cu128": CU12X_NO_VOLTA})),
    ("pytorch/pytorch:2.8.0-cuda12.6-cudnn9-devel", dict(cuda="12.6", binaries={"torch 2.8.0+cu126": CU121})),
    ("docker.io/pytorch/pytorch:2.9.1-cuda13.0-cudnn9-runtime",
     dict(cuda="13.0", binaries={"torch 2.9.1+cu130": CU12X_NO_VOLTA})),
    ("pytorch/pytorch:2.11.0-cuda12.8-cudnn9-runtime", dict(binaries={"torch 2.11.0+cu128": CU12X_NO_VOLTA})),
    # A release x flavour the wheel table does not know: the tag's CUDA, no binaries.
    ("pytorch/pytorch:2.7.1-cuda11.8-cudnn9-runtime", dict(cuda="11.8", binaries={})),
    ("pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime", dict(profile="pytorch-official", cuda="12.4", binaries={})),
    ("pytorch/pytorch:2.4.1-cuda12.1-cudnn9-runtime", dict(profile="pytorch-official", cuda="12.1", binaries={})),
])
def test_pytorch_official(loaded: Loaded, ref: str, expect: dict[str, Any]) -> None:
    check(facts(loaded, ref), expect)


# ---------------------------------------------------------------------------------------------- TGI, SGLang

@pytest.mark.parametrize(("ref", "expect"), [
    ("ghcr.io/huggingface/text-generation-inference:1.1.0",
     dict(cuda="11.8", base="11.8.0", binaries={"TGI kernels": (["8.0", "8.6"], ["8.6"])})),
    ("ghcr.io/huggingface/text-generation-inference:2.2.0",
     dict(cuda="12.1", base="12.1.0", binaries={"TGI kernels": (["8.0", "8.6"], ["8.6"])})),
    # v2.3.0-v3.1.0: torch for CUDA 12.4 inside a 12.1.0-base image.
    ("ghcr.io/huggingface/text-generation-inference:3.0.1",
     dict(cuda="12.4", base="12.1.0", binaries={"TGI kernels": TGI_KERNELS}, toolkits={"TGI kernels": "12.4.1"})),
    ("ghcr.io/huggingface/text-generation-inference:3.2.3",
     dict(cuda="12.4", base="12.4.0", binaries={"TGI kernels": TGI_KERNELS})),
    # v3.3.1+: torch 2.7.0+cu128 (no sm_70) in a 12.4.0-base image; the kernels' PTX is CUDA 12.4.1's.
    ("ghcr.io/huggingface/text-generation-inference:3.3.6",
     dict(cuda="12.8", base="12.4.0", version="3.3.6",
          binaries={"torch 2.7.0+cu128": CU12X_NO_VOLTA, "TGI kernels": TGI_KERNELS},
          toolkits={"torch 2.7.0+cu128": "12.8", "TGI kernels": "12.4.1"})),
])
def test_tgi(loaded: Loaded, ref: str, expect: dict[str, Any]) -> None:
    check(facts(loaded, ref), {"profile": "text-generation-inference", "framework": "tgi", **expect})


@pytest.mark.parametrize("ref", [
    "ghcr.io/huggingface/text-generation-inference:2.4.0-rocm",
    "ghcr.io/huggingface/text-generation-inference:0.9.4",
])
def test_tgi_outside_the_table_is_unknown(loaded: Loaded, ref: str) -> None:
    assert facts(loaded, ref).cuda is None


@pytest.mark.parametrize(("ref", "cuda", "base"), [
    ("lmsysorg/sglang:v0.2.8-cu121", "12.1.1", "12.1.1"),
    ("lmsysorg/sglang:v0.3.0-cu118-srt", "11.8.0", "11.8.0"),
    ("lmsysorg/sglang:v0.4.2.post1-cu125", "12.4", "12.5.1"),     # torch from the cu124 index on a 12.5.1 base
    ("lmsysorg/sglang:v0.4.5-cu125", "12.4", None),                # FROM tritonserver:24.04-py3-min
    ("lmsysorg/sglang:v0.4.6.post1-cu118", "11.8", None),
    ("lmsysorg/sglang:v0.4.7.post1-cu124", "12.4", None),
    ("lmsysorg/sglang:v0.4.9.post2-cu126", "12.6.1", "12.6.1"),
    ("lmsysorg/sglang:v0.5.1.post3-cu128-b200", "12.8.1", "12.8.1"),
    ("lmsysorg/sglang:v0.5.2", "12.9.1", "12.9.1"),
    ("lmsysorg/sglang:v0.5.3-cu129", "12.9.1", "12.9.1"),
    ("lmsysorg/sglang:v0.5.5.post3", "12.9.1", "12.9.1"),
    ("lmsysorg/sglang:v0.5.6.post2-cu129-arm64", "12.9.1", "12.9.1"),
    ("lmsysorg/sglang:v0.5.6.post1-cu130-runtime", "13.0.1", "13.0.1"),
])
def test_sglang(loaded: Loaded, ref: str, cuda: str, base: str | None) -> None:
    check(facts(loaded, ref), {"profile": "sglang", "framework": "sglang", "cuda": cuda, "base": base})


@pytest.mark.parametrize("ref", [
    "lmsysorg/sglang:v0.2.7-cu121",          # before the release workflow
    "lmsysorg/sglang:v0.5.1",                # no plain tag before 0.5.2
    "lmsysorg/sglang:v0.5.3",                # 0.5.3 pushed only -cu129 / -cu129-gb200
    "lmsysorg/sglang:v0.5.6-cu130-runtime",  # runtime images from 0.5.6.post1
])
def test_sglang_outside_the_table_is_unknown(loaded: Loaded, ref: str) -> None:
    assert facts(loaded, ref).cuda is None


def test_sglang_rc_tags_are_not_claimed(loaded: Loaded) -> None:
    rc = loaded.kb.image_facts("lmsysorg/sglang:v0.5.3rc0-cu126")  # only the cuXYZ heuristic reads it
    assert rc is not None and rc.profile == "cu-number-in-reference"


# ---------------------------------------------------------------------------------------------- TEI

def tei_backend(cap: str) -> dict[str, tuple[list[str], list[str]]]:
    return {f"TEI candle backend (compute cap {cap.replace('.', '')})": ([cap], [])}


@pytest.mark.parametrize(("ref", "expect"), [
    # The tag prefix names the compute capability the candle backend is built for (TEI: none = 8.0).
    ("ghcr.io/huggingface/text-embeddings-inference:0.2.2",
     dict(cuda="12.2.0", base="12.2.0", version="0.2.2", binaries=tei_backend("8.0"), fwd=[470, 525])),
    ("ghcr.io/huggingface/text-embeddings-inference:turing-0.2.2",
     dict(cuda="12.2.0", base="12.2.0", binaries=tei_backend("7.5"))),
    ("ghcr.io/huggingface/text-embeddings-inference:0.3.0", dict(cuda="12.2.0", binaries=tei_backend("8.0"))),
    # v0.4.0-v0.6.0: a CUDA 12.0.0 base.
    ("ghcr.io/huggingface/text-embeddings-inference:0.6", dict(cuda="12.0.0", base="12.0.0", version="0.6",
                                                             binaries=tei_backend("8.0"))),
    ("ghcr.io/huggingface/text-embeddings-inference:86-0.5.0", dict(cuda="12.0.0", binaries=tei_backend("8.6"))),
    # v1.0.0-v1.8.3: 12.2.0 again; two-part tags float within one minor, which shares the Dockerfile.
    ("ghcr.io/huggingface/text-embeddings-inference:1.2", dict(cuda="12.2.0", version="1.2",
                                                             binaries=tei_backend("8.0"))),
    ("ghcr.io/huggingface/text-embeddings-inference:89-1.5", dict(cuda="12.2.0", binaries=tei_backend("8.9"))),
    ("ghcr.io/huggingface/text-embeddings-inference:hopper-1.7", dict(cuda="12.2.0", binaries=tei_backend("9.0"))),
    ("ghcr.io/huggingface/text-embeddings-inference:1.8.3-grpc", dict(cuda="12.2.0", binaries=tei_backend("8.0"))),
    # v1.9.0-v1.9.3: a CUDA 12.9.1 runtime base, and 100-/120- tags whose check admits one exact capability.
    ("ghcr.io/huggingface/text-embeddings-inference:turing-1.9.3",
     dict(cuda="12.9.1", base="12.9.1", binaries=tei_backend("7.5"))),
    ("ghcr.io/huggingface/text-embeddings-inference:120-1.9", dict(cuda="12.9.1", binaries={})),
    ("ghcr.io/huggingface/text-embeddings-inference:100-1.9.0", dict(cuda="12.9.1", binaries={})),
])
def test_tei(loaded: Loaded, ref: str, expect: dict[str, Any]) -> None:
    check(facts(loaded, ref), {"profile": "text-embeddings-inference", "framework": "tei", **expect})


@pytest.mark.parametrize("ref", [
    "ghcr.io/huggingface/text-embeddings-inference:0.1.0",        # before the 89- matrix
    "ghcr.io/huggingface/text-embeddings-inference:100-1.8",      # no 100- images before 1.9.0
])
def test_tei_outside_the_table_is_unknown(loaded: Loaded, ref: str) -> None:
    f = facts(loaded, ref)
    assert f.cuda is None and f.reason


@pytest.mark.parametrize("ref", [
    "ghcr.io/huggingface/text-embeddings-inference:latest",
    "ghcr.io/huggingface/text-embeddings-inference:turing-latest",
    "ghcr.io/huggingface/text-embeddings-inference:cuda-1.8",    # Dockerfile-cuda-all: several architectures
    "ghcr.io/huggingface/text-embeddings-inference:cpu-1.8",
])
def test_tei_floating_multi_arch_and_cpu_tags_are_not_claimed(loaded: Loaded, ref: str) -> None:
    f = loaded.kb.image_facts(ref)
    assert f is None or f.profile != "text-embeddings-inference"


def test_tei_binaries_admit_what_compute_cap_matching_admits(loaded: Loaded) -> None:
    """TEI's compute_cap_matching: 75 only 7.5; 80 any 8.x; 86 8.6-8.9; 89 only 8.9; 90 only 9.0."""
    admitted = {"": ["8.0", "8.6", "8.7", "8.9"], "turing-": ["7.5"], "86-": ["8.6", "8.7", "8.9"], "89-": ["8.9"],
                "hopper-": ["9.0"]}
    for prefix, ok in admitted.items():
        f = facts(loaded, f"ghcr.io/huggingface/text-embeddings-inference:{prefix}1.8.0")
        for cc in ["5.2", "6.1", "7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "12.0"]:
            assert (not f.missing_arch(parse_version(cc))) == (cc in ok), (prefix, cc)


# ---------------------------------------------------------------------------------------------- others

@pytest.mark.parametrize("ref", [
    "ubuntu:18.04", "ubuntu", "docker.io/library/debian:12-slim", "busybox:1.36", "alpine:3.20@sha256:" + "b" * 64,
    "centos:7", "nginx:1.7.9", "python:3.11-slim", "registry.k8s.io/pause:3.9", "k8s.gcr.io/pause:3.2",
    "gcr.io/k8s-staging-perf-tests/sleep:latest",
])
def test_images_without_cuda(loaded: Loaded, ref: str) -> None:
    f = facts(loaded, ref)
    assert f.no_cuda_runtime and f.cuda is None and not f.reason


@pytest.mark.parametrize(("ref", "expect"), [
    ("nvcr.io/nvidia/cloud-native/gpu-operator-validator:v1.10.1",
     dict(profile="gpu-operator-validator", cuda="11.6.0", base="11.6.0", fwd=[470])),
    ("nvcr.io/nvidia/cloud-native/gpu-operator-validator:v23.6.2", dict(cuda="12.3.1", base="12.3.1")),
    ("nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.4", dict(cuda="13.0.1", base="13.0.1", fwd=None)),
    ("tensorflow/tensorflow:1.4.1-gpu", dict(profile="tensorflow-gpu", framework="tensorflow", cuda="8.0")),
    ("tensorflow/tensorflow:1.12.0-gpu-py3", dict(cuda="9.0")),
    ("tensorflow/tensorflow:2.15.0-gpu", dict(cuda="12.2")),
    ("tensorflow/tensorflow:2.20.0-gpu-jupyter", dict(cuda="12.5")),
    ("paddlepaddle/paddle:3.0.0b1-gpu-cuda11.8-cudnn8.6-trt8.5", dict(profile="paddlepaddle", cuda="11.8")),
])
def test_other_families(loaded: Loaded, ref: str, expect: dict[str, Any]) -> None:
    check(facts(loaded, ref), {"binaries": {}, **expect})


@pytest.mark.parametrize(("ref", "cuda"), [
    ("rayproject/ray-llm:2.52.0-py311-cu128", "12.8"),
    ("rayproject/ray-llm:2.56.0-py312-cu130", "13.0"),
    ("us-docker.pkg.dev/deeplearning-platform-release/gcr.io/"
     "huggingface-text-generation-inference-cu121.2-1.ubuntu2204.py310", "12.1"),
    ("us-docker.pkg.dev/deeplearning-platform-release/gcr.io/"
     "huggingface-text-generation-inference-cu124.2-3.ubuntu2204.py311", "12.4"),
    ("example.com/team/trainer:1.0-cu118", "11.8"),
])
def test_cu_number_heuristic(loaded: Loaded, ref: str, cuda: str) -> None:
    f = facts(loaded, ref)
    assert f.profile == "cu-number-in-reference" and str(f.cuda) == cuda


@pytest.mark.parametrize("ref", ["example.com/docu121:1.0", "example.com/app:v1-cu1280", "example.com/cuisine:2"])
def test_cu_number_heuristic_needs_a_word(loaded: Loaded, ref: str) -> None:
    f = loaded.kb.image_facts(ref)
    assert f is None or f.profile != "cu-number-in-reference"


def test_post_releases_sort_between_releases() -> None:
    from compatcheck.core.knowledge import _tag_version

    assert parse_version("0.4.6") < _tag_version("0.4.6.post2") < parse_version("0.4.7")
    assert _tag_version("v0.8.5.post1") == parse_version("0.8.5.1")
    assert str(_tag_version("v0.8.5.post1")) == "0.8.5.post1"


# ---------------------------------------------------------------------------------------------- forward compat

BRANDS_A = {"tesla", "unknown", "nvidia", "nvidiartx", "geforce", "geforcertx", "quadro", "quadrortx", "titan",
            "titanrtx"}
BRANDS_B = {"unknown", "grid", "tesla", "nvidia", "quadro", "quadrortx", "nvidiartx", "vapps", "vpc", "vcs", "vws",
            "cloudgaming"}


@pytest.mark.parametrize(("ref", "branches", "brands"), [
    ("nvidia/cuda:11.5.2-base-ubuntu20.04", [470], BRANDS_A),
    ("nvidia/cuda:11.6.2-runtime-ubuntu20.04", [470], BRANDS_A),
    ("nvidia/cuda:11.7.0-base-ubuntu22.04", [450, 470], BRANDS_A),     # the patch releases differ
    ("nvidia/cuda:11.7.1-base-ubuntu22.04", [470], BRANDS_A),
    ("nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04", [470], BRANDS_A),
    ("nvidia/cuda:11.8.0-base-ubuntu18.04", [450, 470, 510, 515], set()),  # the old ubuntu18.04 folder
    ("nvidia/cuda:12.0.1-base-ubuntu18.04", [450, 470, 510, 515], set()),
    ("nvidia/cuda:12.0.1-base-ubuntu22.04", [470], BRANDS_A),
    ("nvidia/cuda:12.1.1-devel-ubuntu22.04", [470, 525], BRANDS_A),
    ("nvidia/cuda:12.2.2-base-ubuntu22.04", [470, 525], BRANDS_A),
    ("nvidia/cuda:12.3.2-base-ubuntu22.04", [470, 525, 535], BRANDS_A),
    ("nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", [470, 525, 535], BRANDS_A),
    ("nvidia/cuda:12.5.0-base-ubuntu22.04", [470, 535, 550], BRANDS_B),
    ("nvidia/cuda:12.6.3-base-ubuntu24.04", [470, 535, 550], BRANDS_B),
    ("nvidia/cuda:12.8.1-base-ubuntu24.04", [470, 535, 550, 560, 565], BRANDS_B),
    ("nvidia/cuda:12.9.1-base-ubuntu24.04", [535, 550, 560, 565, 570], BRANDS_B),
    ("nvidia/cuda:13.0.0-cudnn-runtime-ubuntu24.04", [535, 550, 565, 570, 575], BRANDS_B),
    ("nvidia/cuda:13.1.1-base-ubuntu24.04", [535, 550, 570, 575, 580], BRANDS_B),
    # Images built FROM nvidia/cuda inherit its alternatives.
    ("vllm/vllm-openai:v0.9.2", [470, 535, 550, 560, 565], BRANDS_B),
    ("ghcr.io/huggingface/text-generation-inference:2.2.0", [470, 525], BRANDS_A),
])
def test_forward_compat(loaded: Loaded, ref: str, branches: list[int], brands: set[str]) -> None:
    fc = facts(loaded, ref).forward_compat
    assert fc is not None
    assert sorted(fc.branches) == branches and set(fc.brands) == brands


@pytest.mark.parametrize("ref", [
    "nvidia/cuda:11.4.3-base-ubuntu20.04",   # cuda>=11.4 only: no alternatives
    "nvidia/cuda:12.2.1-base-ubuntu22.04",   # patch release not read
    "nvidia/cuda:13.0.2-base-ubuntu24.04",   # 13.0.1, 13.0.2, 13.1.0, 13.2+ not confirmed
    "nvidia/cuda:13.2.0-base-ubuntu24.04",
    "nvidia/cuda:10.2-base-ubuntu18.04",
    "vllm/vllm-openai:v0.7.3",               # base not confirmed
])
def test_forward_compat_unknown(loaded: Loaded, ref: str) -> None:
    assert facts(loaded, ref).forward_compat is None


def test_forward_compat_bridges_only_listed_branches_on_datacenter_gpus(loaded: Loaded) -> None:
    fc = facts(loaded, "nvidia/cuda:12.4.1-base-ubuntu22.04").forward_compat
    assert fc is not None
    runtime = parse_version("12.4")
    assert fc.bridges(runtime, parse_version("535.104.05"), datacenter=True)
    assert not fc.bridges(runtime, parse_version("535.104.05"), datacenter=False)
    assert not fc.bridges(runtime, parse_version("545.23.08"), datacenter=True)
    assert not fc.bridges(parse_version("12.5"), parse_version("535.104.05"), datacenter=True)


# ---------------------------------------------------------------------------------------------- framework floors

@pytest.mark.parametrize(("framework", "feature", "version", "floor"), [
    ("vllm", "engine", "0.2.4", "7.0"),
    ("vllm", "engine", "0.19.1", "7.0"),
    ("vllm", "engine", "0.20.0", "7.5"),
    ("vllm", "engine", "0.21.0", "7.5"),
    ("vllm", "quantization:fp8", "0.4.2", "8.9"),
    ("vllm", "quantization:fp8", "0.5.0.1", "8.9"),     # 0.5.0.post1
    ("vllm", "quantization:fp8", "0.5.1", "8.0"),
    ("vllm", "quantization:fp8", "0.13.0", "8.0"),
    ("vllm", "quantization:fp8", "0.14.0", "7.5"),
    ("vllm", "quantization:modelopt", "0.6.1", "8.9"),
    ("vllm", "quantization:gptq", "0.2.7", "6.0"),
    ("vllm", "quantization:gptq_marlin", "0.10.0", "8.0"),
    ("vllm", "quantization:gptq_marlin", "0.14.1", "7.5"),
    ("vllm", "quantization:awq", "0.3.0", "7.5"),
    ("vllm", "quantization:awq_marlin", "0.5.3", "8.0"),
    ("vllm", "quantization:awq_marlin", "0.17.0", "7.5"),
    ("vllm", "quantization:marlin", "0.10.1.1", "8.0"),
    ("vllm", "quantization:bitsandbytes", "0.6.0", "7.0"),
    ("vllm", "quantization:compressed-tensors", "0.4.3", "6.0"),
    ("vllm", "quantization:compressed-tensors", "0.5.2", "7.5"),
    ("vllm", "quantization:compressed-tensors", "0.5.3", "7.0"),
    ("vllm", "dtype:bfloat16", "0.10.0", "8.0"),
    ("vllm", "dtype:auto", "0.8.5.1", "8.0"),           # before the fp16 fallback
    ("vllm", "engine", "0.33.0", "7.5"),
    ("vllm", "quantization:fp8", "0.33.0", "7.5"),
    ("vllm", "quantization:modelopt", "0.26.0", "8.9"),
    ("vllm", "quantization:modelopt", "0.27.0", "8.0"),
    ("vllm", "quantization:modelopt_fp4", "0.22.0", "7.5"),
    ("vllm", "quantization:mxfp4", "0.30.0", "8.0"),
    ("vllm", "quantization:gptq_marlin", "0.22.0", "7.5"),   # AutoGPTQConfig says 6.0; its Marlin check refuses < 7.5
    ("vllm", "quantization:gptq", "0.21.0", "6.0"),
    ("vllm", "quantization:gptq", "0.22.0", "7.5"),
    ("vllm", "quantization:gptq", "0.33.0", "7.5"),
    ("vllm", "quantization:awq_marlin", "0.33.0", "7.5"),
    ("vllm", "quantization:bitsandbytes", "0.27.1", "7.0"),
    ("vllm", "dtype:bfloat16", "0.33.0", "8.0"),
    ("vllm", "attention:flash_attn", "0.13.0", "8.0"),       # --attention-backend FLASH_ATTN: refused
    ("vllm", "attention:flash_attn", "0.33.0", "8.0"),
    ("vllm", "attention-env:flash_attn", "0.11.0", "8.0"),
    ("vllm", "attention-env:flash_attn", "0.14.1", "8.0"),
    ("sglang", "engine", "0.4.1", "7.5"),
    ("sglang", "engine", "0.5.1.2", "7.5"),
    ("sglang", "engine", "0.5.1.3", "8.0"),
    ("sglang", "quantization:fp8", "0.5.0", "8.0"),
    ("tgi", "quantization:fp8", "2.2.0", "8.0"),
    ("triton", "engine", "24.10", "6.0"),
    ("triton", "engine", "25.01", "7.5"),
    ("triton", "engine", "26.08", "7.5"),
    ("tensorrt-llm", "engine", "0.15.0", "7.5"),
    ("tensorrt-llm", "engine", "1.2.1", "7.5"),
    ("tensorrt-llm", "quantization:fp8", "0.18.2", "8.9"),
    ("ngc-tensorflow", "engine", "22.06", "6.0"),
    ("triton", "engine", "22.01", "6.0"),
    ("flash-attn", "attention:flash-attn", "2.7.4", "8.0"),
    ("flash-attn", "attention:flash-attn-3", "3.0.0", "9.0"),
])
def test_framework_floors(loaded: Loaded, framework: str, feature: str, version: str, floor: str) -> None:
    row = loaded.kb.framework_floor(framework, feature, parse_version(version))
    assert row is not None and str(row.min_cc) == floor, row


@pytest.mark.parametrize(("framework", "feature", "version"), [
    ("vllm", "dtype:auto", "0.9.0"),                    # falls back to float16: no floor
    ("vllm", "kv-cache-dtype:fp8", "0.10.0"),           # storage, no FP8-compute floor
    ("vllm", "quantization:marlin", "0.10.2"),          # the format is gone
    ("vllm", "attention-env:flash_attn", "0.10.2"),     # FLASH_ATTN by env: XFORMERS on Volta/Turing (fall-back)
    ("vllm", "attention-env:flash_attn", "0.16.0"),     # the env var is no longer read
    ("vllm", "kv-cache-dtype:fp8", "0.33.0"),
])
def test_framework_no_floor(loaded: Loaded, framework: str, feature: str, version: str) -> None:
    row = loaded.kb.framework_floor(framework, feature, parse_version(version))
    assert row is None or row.min_cc is None


@pytest.mark.parametrize(("framework", "feature", "version"), [
    ("vllm", "engine", "0.34.0"),                       # newer than the releases read
    ("vllm", "quantization:bitsandbytes", "0.28.0"),    # not a method of 0.28.0 and later
    ("vllm", "attention-env:flash_attn", "0.15.1"),     # no sdist of 0.15.x: not read
    ("vllm", "quantization:fp8", "0.4.1"),              # fp8 did not exist yet
    ("sglang", "engine", "0.4.0"),                      # vLLM's kernels then
    ("triton", "engine", "24.12"),                      # notes not read
    ("tensorrt-llm", "engine", "0.14.0"),
    ("tgi", "engine", "3.0.0"),                         # no TGI-wide floor is encoded
])
def test_framework_floor_unknown(loaded: Loaded, framework: str, feature: str, version: str) -> None:
    assert loaded.kb.framework_floor(framework, feature, parse_version(version)) is None


@pytest.mark.parametrize(("framework", "feature", "floor"), [
    ("vllm", "engine", "7.0"),                          # the lowest floor of any version
    ("vllm", "quantization:fp8", "7.5"),
    ("vllm", "quantization:compressed-tensors", "6.0"),
    ("sglang", "engine", "7.5"),
    ("triton", "engine", "6.0"),
    ("vllm", "dtype:bfloat16", "8.0"),
    ("vllm", "dtype:auto", None),                       # no floor from v0.9.0: nothing holds for every version
    ("vllm", "kv-cache-dtype:fp8", None),
])
def test_framework_floor_of_an_unknown_version(loaded: Loaded, framework: str, feature: str,
                                               floor: str | None) -> None:
    row = loaded.kb.framework_floor(framework, feature, None)
    assert (str(row.min_cc) if row is not None and row.min_cc is not None else None) == floor


@pytest.mark.parametrize(("framework", "feature", "version", "floor", "fallback", "below"), [
    ("vllm", "quantization:fp8", "0.5.1", "8.0", "FP8 Marlin (weight-only W8A16)", "8.9"),
    ("vllm", "quantization:fp8", "0.33.0", "7.5", "FP8 Marlin (weight-only W8A16)", "8.9"),
    ("vllm", "quantization:fp8", "0.5.0", "8.9", None, None),       # W8A8 only: no fall-back yet
    ("vllm", "quantization:modelopt_fp4", "0.30.0", "7.5", "FP4 Marlin (weight-only W4A16)", "10.0"),
    ("vllm", "attention-env:flash_attn", "0.6.3", None, "the XFORMERS attention backend", "8.0"),
    ("vllm", "attention-env:flash_attn", "0.12.0", "8.0", None, None),  # refused from 0.12.0
    ("tgi", "quantization:fp8", "3.3.7", "8.0", "FP8 Marlin (weight-only W8A16)", "8.9"),
    ("sglang", "quantization:fp8", "0.5.1", "8.0", "FP8 Marlin (weight-only W8A16)", "8.9"),
    ("sglang", "quantization:fp8", "0.5.6.2", "8.0", "FP8 Marlin (weight-only W8A16)", "8.9"),
    ("sglang", "quantization:fp8", "0.4.10.2", "8.0", None, None),    # Marlin only when forced by env
])
def test_framework_fallbacks(loaded: Loaded, framework: str, feature: str, version: str, floor: str | None,
                             fallback: str | None, below: str | None) -> None:
    row = loaded.kb.framework_floor(framework, feature, parse_version(version))
    assert row is not None
    assert (str(row.min_cc) if row.min_cc else None, row.fallback, str(row.full_cc) if row.full_cc else None) == \
        (floor, fallback, below)


def test_an_unknown_version_assumes_no_fallback(loaded: Loaded) -> None:
    row = loaded.kb.framework_floor("vllm", "quantization:fp8", None)
    assert row is not None and (str(row.min_cc), row.fallback, row.full_cc) == ("7.5", None, None)


def test_a_fallback_must_be_above_the_floor() -> None:
    row = {"framework": "x", "feature": "q", "from": "1.0", "minComputeCapability": "8.0", "source": "S",
           "fallback": {"kernel": "k", "below": "8.0"}}
    with pytest.raises(KnowledgeError, match=r"^framework-features x q: fallback.below 8.0 must be above "
                                             r"minComputeCapability 8.0$"):
        KnowledgeBase.from_tables({"framework-features": [row]})


def test_framework_names_match_the_image_profiles(loaded: Loaded) -> None:
    image_frameworks = {r["framework"] for r in loaded.tables["image-profiles"] if r.get("framework")}
    floors = {r["framework"] for r in loaded.tables["framework-features"]}
    assert floors - image_frameworks == {"flash-attn"}  # a library, not an image


# ---------------------------------------------------------------------------------------------- GPU products, MIG

@pytest.mark.parametrize(("label", "product", "cc", "datacenter"), [
    ("NVIDIA-A10G", "A10G", "8.6", True),
    ("NVIDIA-A10G-SHARED", "A10G", "8.6", True),
    ("NVIDIA-A10", "A40/A10/A16/A2", "8.6", True),
    ("NVIDIA-A800-SXM4-80GB", "A800", "8.0", True),
    ("NVIDIA-A800-80GB-PCIe", "A800", "8.0", True),
    ("NVIDIA-A800-40GB-Active", "A800 40GB Active", "8.0", False),
    ("NVIDIA-H800", "H800", "9.0", True),
    ("NVIDIA-H800-PCIe", "H800", "9.0", True),
    ("NVIDIA-H800-NVL", "H800", "9.0", True),
    ("NVIDIA-H20", "H20", "9.0", True),
    ("NVIDIA-H20-3e", "H20", "9.0", True),
    ("NVIDIA-H20-MIG-1g.12gb", "H20", "9.0", True),
    ("NVIDIA-L20", "L20", "8.9", True),
    ("NVIDIA-L40S", "L4/L40/L40S", "8.9", True),
    ("Tesla-V100S-PCIE-32GB", "Tesla V100S", "7.0", True),
    ("Tesla-V100-SXM2-32GB", "Tesla V100", "7.0", True),
    ("NVIDIA-H100-NVL", "H100 NVL", "9.0", True),
    ("NVIDIA-H100-NVL-MIG-1g.12gb", "H100 NVL", "9.0", True),
    ("NVIDIA-H100-80GB-HBM3", "H100 SXM5 80GB", "9.0", True),
    ("NVIDIA-H100-PCIe", "H100 PCIe", "9.0", True),
    ("NVIDIA-H200", "H200 SXM", "9.0", True),
    ("NVIDIA-H200-NVL", "H200 NVL", "9.0", True),
    ("NVIDIA-GH200-480GB", "GH200", "9.0", True),
    ("NVIDIA-GH200-144G-HBM3e", "GH200", "9.0", True),
    ("NVIDIA-B200", "B200", "10.0", True),
    ("NVIDIA-GB200", "GB200", "10.0", True),
    ("NVIDIA-B300-SXM6-AC", "B300", "10.3", True),
    ("NVIDIA-GB300", "GB300", "10.3", True),
    ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "RTX PRO 6000 Blackwell Server Edition", "12.0", False),
    ("NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Workstation-Edition", "RTX PRO 6000 Blackwell Workstation Edition", "12.0",
     False),
    ("NVIDIA-RTX-PRO-6000-Blackwell-Workstation-Edition", "RTX PRO 6000 Blackwell Workstation Edition", "12.0", False),
    ("NVIDIA-RTX-PRO-4500-Blackwell", "RTX PRO Blackwell", "12.0", False),
])
def test_gpu_products(loaded: Loaded, label: str, product: str, cc: str, datacenter: bool) -> None:
    p = loaded.kb.product(label)
    assert p is not None, label
    assert (p.product, str(p.compute_capability), p.datacenter, p.brand) == (product, cc, datacenter, None)


@pytest.mark.parametrize(("label", "profiles"), [
    ("NVIDIA-A30", {"1g.6gb", "1g.6gb.me", "2g.12gb", "2g.12gb.me", "4g.24gb"}),
    ("NVIDIA-A100-SXM4-40GB", {"1g.5gb", "1g.5gb.me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}),
    ("NVIDIA-A800-40GB-Active", {"1g.5gb", "1g.5gb.me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}),
    ("NVIDIA-A100-80GB-PCIe", {"1g.10gb", "1g.10gb.me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}),
    ("NVIDIA-A800-SXM4-80GB", {"1g.10gb", "1g.10gb.me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}),
    ("NVIDIA-H100-80GB-HBM3", {"1g.10gb", "1g.10gb.me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}),
    ("NVIDIA-H800", {"1g.10gb", "1g.10gb.me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}),
    ("NVIDIA-H100-NVL", {"1g.12gb", "1g.12gb.me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"}),
    ("NVIDIA-H100-NVL-MIG-1g.12gb", {"1g.12gb", "1g.12gb.me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"}),
    ("NVIDIA-GH200-480GB", {"1g.12gb", "1g.12gb.me", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"}),
    ("NVIDIA-H20", {"1g.12gb", "1g.12gb.me", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"}),
    ("NVIDIA-GH200-144G-HBM3e", {"1g.18gb", "1g.18gb.me", "1g.36gb", "2g.36gb", "3g.72gb", "4g.72gb", "7g.144gb"}),
    ("NVIDIA-H200", {"1g.18gb", "1g.18gb.me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"}),
    ("NVIDIA-H200-NVL", {"1g.18gb", "1g.18gb.me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"}),
    ("NVIDIA-B200", {"1g.23gb", "1g.23gb.me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"}),
    ("NVIDIA-GB200", {"1g.23gb", "1g.23gb.me", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb"}),
    ("NVIDIA-B300-SXM6-AC", {"1g.34gb", "1g.34gb.me", "1g.67gb", "2g.67gb", "3g.135gb", "4g.135gb", "7g.269gb"}),
    ("NVIDIA-GB300", {"1g.35gb", "1g.35gb.me", "1g.70gb", "2g.70gb", "3g.139gb", "4g.139gb", "7g.278gb"}),
    ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition",
     {"1g.24gb", "1g.24gb.gfx", "1g.24gb-me", "1g.24gb.me.all", "2g.48gb", "2g.48gb.gfx", "2g.48gb-me",
      "2g.48gb.me.all", "4g.96gb", "4g.96gb.gfx"}),
    ("NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Workstation-Edition", {"1g.24gb", "2g.48gb", "4g.96gb"}),
])
def test_mig_profiles(loaded: Loaded, label: str, profiles: set[str]) -> None:
    assert loaded.kb.mig_profiles_for(label) == profiles


@pytest.mark.parametrize("label", [
    "NVIDIA-H100",                 # 0x2339: which SKU is not stated
    "NVIDIA-H20-3e",               # 0x232C is in no mig-parted filter
    "NVIDIA-A800-SXM4-40GB",
    "NVIDIA-RTX-PRO-5000-Blackwell",
])
def test_mig_profiles_unknown(loaded: Loaded, label: str) -> None:
    assert loaded.kb.mig_profiles_for(label) is None


@pytest.mark.parametrize("label", ["NVIDIA-L40S", "Tesla-T4", "NVIDIA-A10G"])
def test_products_without_mig_offer_no_profile(loaded: Loaded, label: str) -> None:
    assert loaded.kb.mig_profiles_for(label) == frozenset()  # gpu-products: mig: false (MIG user guide)


def test_mig_resource_form() -> None:
    from compatcheck.core.knowledge import mig_resource_profile

    assert mig_resource_profile("1g.10gb+me") == "1g.10gb.me"
    assert mig_resource_profile("1g.24gb+me.all") == "1g.24gb.me.all"
    assert mig_resource_profile("1g.24gb-me") == "1g.24gb-me"


# ------------------------------------------------------------------------- the version an image's config states

def _env(ref: str, **env: str) -> RegistryFacts:
    return RegistryFacts(ref, "sha256:" + "b" * 64, "linux/amd64", env=tuple(env.items()))


@pytest.mark.parametrize(("ref", "env", "cuda", "stated", "assumed"), [
    # vLLM release images from 0.22.0 carry their public tag in VLLM_IMAGE_TAG: latest is read as that release
    ("vllm/vllm-openai:latest", {"VLLM_IMAGE_TAG": "vllm/vllm-openai:v0.28.0"}, "13.0.2",
     "0.28.0, from its config's env VLLM_IMAGE_TAG", None),
    ("vllm/vllm-openai:latest", {"VLLM_IMAGE_TAG": "vllm/vllm-openai:v0.28.0-cu129"}, "12.9.1",
     "0.28.0, from its config's env VLLM_IMAGE_TAG", None),
    # a nightly says no version, another variant is not claimed: the tag's assumption stands
    ("vllm/vllm-openai:latest", {"VLLM_IMAGE_TAG": "vllm/vllm-openai:nightly-0123abcd"}, "13.0.2", None,
     "a floating tag, assumed from v0.33.0, the newest vllm-openai release compatcheck knows, table dated "
     + image_table_as_of()),
    ("vllm/vllm-openai:latest", {"VLLM_IMAGE_TAG": "vllm/vllm-openai:v0.28.0-ubuntu2404"}, "13.0.2", None,
     "a floating tag, assumed from v0.33.0, the newest vllm-openai release compatcheck knows, table dated "
     + image_table_as_of()),
    # NGC Triton states its month; a month newer than the table is still assumed, and said to be stated
    ("nvcr.io/nvidia/tritonserver:26.11-py3", {"NVIDIA_TRITON_SERVER_VERSION": "26.11"}, "13.4.3",
     "26.11, from its config's env NVIDIA_TRITON_SERVER_VERSION",
     "assumed from v26.10, the newest ngc-tritonserver release compatcheck knows, table dated " + image_table_as_of()),
    ("nvcr.io/nvidia/tritonserver:26.11-py3", {"NVIDIA_TRITON_SERVER_VERSION": "26.11dev"}, "13.4.3", None,
     "assumed from v26.10, the newest ngc-tritonserver release compatcheck knows, table dated " + image_table_as_of()),
])
def test_the_version_a_family_states_in_its_config(loaded: Loaded, ref: str, env: dict[str, str], cuda: str,
                                                   stated: str | None, assumed: str | None) -> None:
    found = loaded.kb.with_stated_version(ref, loaded.kb.image_facts(ref), _env(ref, **env))
    assert found is not None
    assert (str(found.cuda), found.stated_version, found.assumed) == (cuda, stated, assumed)


def test_a_version_source_regex_needs_a_version_group() -> None:
    row = {"name": "x", "pattern": r"^x:(?P<version>[\d.]+)$", "source": "S",
           "versionFrom": [{"env": "X_TAG", "match": r"x:v[\d.]+"}], "versions": [{"equals": "1.0", "source": "S"}]}
    with pytest.raises(KnowledgeError, match=r"needs a \(\?P<version>\) group"):
        KnowledgeBase.from_tables({"image-profiles": [row]})
