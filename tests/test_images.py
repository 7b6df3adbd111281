"""Image facts (compatcheck.core.images and KnowledgeBase.image_facts) on inline tables: references parsed as Docker
does, architectures judged as CUDA's binary compatibility does, forward compatibility only where it applies, and
a tag the tables do not list staying unknown. The shipped tables' rows are tested in tests/test_image_profiles.py."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core.images import Binary, ForwardCompat, ImageRef, parse_reference
from compatcheck.core.knowledge import KnowledgeBase
from compatcheck.core.versions import (
    Version,
    parse_compute_capability,
    parse_cuda_version,
    parse_driver_version,
    parse_version,
)


def cc(text: str) -> Version:
    return parse_compute_capability(text)


@pytest.mark.parametrize(("text", "ref"), [
    ("ubuntu", ImageRef("docker.io", "library/ubuntu", None, None)),
    ("ubuntu:22.04", ImageRef("docker.io", "library/ubuntu", "22.04", None)),
    ("vllm/vllm-openai:v0.9.2", ImageRef("docker.io", "vllm/vllm-openai", "v0.9.2", None)),
    ("nvcr.io/nvidia/pytorch:24.05-py3", ImageRef("nvcr.io", "nvidia/pytorch", "24.05-py3", None)),
    ("localhost:5000/ml/serve:1@sha256:" + "a" * 64,
     ImageRef("localhost:5000", "ml/serve", "1", "sha256:" + "a" * 64)),
    ("registry.corp/ml/serving:2025-10-14", ImageRef("registry.corp", "ml/serving", "2025-10-14", None)),
])
def test_references_are_split_as_docker_does(text: str, ref: ImageRef) -> None:
    assert parse_reference(text) == ref


@pytest.mark.parametrize("text", ["<your-registry>/x:latest", "has space:1", "UPPER/case:1", ""])
def test_what_is_no_reference(text: str) -> None:
    assert parse_reference(text) is None


@pytest.mark.parametrize(("sass", "ptx", "gpu", "runs"), [
    (["8.0"], [], "8.6", True),  # sm_80 machine code runs on 8.6 and 8.9 ...
    (["8.0"], [], "8.9", True),
    (["8.0"], [], "9.0", False),  # ... never on another major
    (["8.6"], [], "8.0", False),  # nor on a lower minor
    (["9.0", "10.0"], [], "12.0", False),  # Blackwell consumer parts need sm_120
    (["7.0"], ["9.0"], "12.0", None),  # only PTX: the driver's JIT decides
    (["7.0"], ["9.0"], "8.0", False),  # PTX for a higher capability is no use
])
def test_binary_compatibility(sass: list[str], ptx: list[str], gpu: str, runs: bool | None) -> None:
    binary = Binary("x", tuple(cc(s) for s in sass), tuple(cc(p) for p in ptx))
    assert binary.runs_on(cc(gpu)) is runs


@pytest.mark.parametrize(("driver", "datacenter", "runtime", "bridges"), [
    ("535.104.05", True, "12.4", True),
    ("535.104.05", False, "12.4", False),  # GeForce and TITAN never qualify
    ("535.104.05", None, "12.4", False),  # unknown product: not claimed
    ("470.82.01", True, "12.4", False),  # branch not listed
    ("535.104.05", True, "12.8", False),  # the compat libraries bring 12.4 only
    (None, True, "12.4", False),
])
def test_forward_compatibility_applies_only_where_nvidia_says(driver: str | None, datacenter: bool | None,
                                                              runtime: str, bridges: bool) -> None:
    fwd = ForwardCompat(parse_cuda_version("12.4"), frozenset({525, 535}), frozenset({"tesla"}), "x")
    got = fwd.bridges(parse_cuda_version(runtime), parse_driver_version(driver) if driver else None, datacenter)
    assert got is bridges


def kb(**tables: list[dict[str, Any]]) -> KnowledgeBase:
    return KnowledgeBase.from_tables({k.replace("_", "-"): v for k, v in tables.items()})


SERVE = {
    "name": "serve", "framework": "serve", "source": "S",
    "pattern": r"^example\.io/serve:v(?P<version>\d+\.\d+\.\d+)(?P<variant>-cu\d+)?$",
    "versions": [
        {"from": "1.0.0", "before": "2.0.0", "variant": "-cu126", "cuda": "12.6", "base": "12.6.3",
         "binaries": [{"component": "wheel", "torch": "2.8.0", "source": "S"}], "source": "S"},
        {"from": "1.0.0", "before": "2.0.0", "cuda": "12.8", "base": "12.4.1",
         "binaries": [{"component": "wheel", "torch": "2.8.0", "source": "S"},
                      {"component": "serve kernels", "sass": ["8.0", "9.0"], "ptx": ["9.0"], "source": "S"}],
         "source": "S"},
    ],
}
WHEELS = [{"from": "2.8.0", "before": "2.11.0", "cuda": "12.8", "sass": ["7.0", "8.0", "9.0", "12.0"], "source": "W"},
          {"from": "2.8.0", "cuda": "12.6", "sass": ["5.0", "8.0", "9.0"], "source": "W"}]
FORWARD = [{"cuda": "12.4", "branches": [470, 525, 535], "brands": ["tesla"], "source": "F"},
           {"cuda": "12.6", "branches": [470, 535, 550], "source": "F"}]


def test_a_release_gives_the_cuda_its_wheels_load_and_their_architectures() -> None:
    facts = kb(image_profiles=[SERVE], torch_wheels=WHEELS, forward_compat=FORWARD).image_facts(
        "example.io/serve:v1.2.3")
    assert facts is not None
    assert (facts.profile, str(facts.cuda), str(facts.base_cuda), facts.framework, str(facts.framework_version)) == (
        "serve", "12.8", "12.4.1", "serve", "1.2.3")
    assert facts.origin == "image example.io/serve:v1.2.3, whose wheels load CUDA 12.8 over its CUDA 12.4 base"
    assert [(b.component, [str(s) for s in b.sass], [str(p) for p in b.ptx]) for b in facts.binaries] == [
        ("torch 2.8.0+cu128", ["7.0", "8.0", "9.0", "12.0"], []), ("serve kernels", ["8.0", "9.0"], ["9.0"])]
    # forward compatibility is the base's: its cuda-compat brings 12.4, older than the 12.8 the wheels load
    assert facts.forward_compat is not None and str(facts.forward_compat.compat_cuda) == "12.4.1"
    assert sorted(facts.forward_compat.branches) == [470, 525, 535]
    assert [b.component for b in facts.missing_arch(cc("7.5"))] == ["serve kernels"]  # sm_70 code runs on 7.5
    assert [b.component for b in facts.missing_arch(cc("6.1"))] == ["torch 2.8.0+cu128", "serve kernels"]
    assert [b.component for b in facts.ptx_only(cc("12.0"))] == ["serve kernels"]


def test_a_variant_tag_has_its_own_row() -> None:
    facts = kb(image_profiles=[SERVE], torch_wheels=WHEELS, forward_compat=FORWARD).image_facts(
        "example.io/serve:v1.0.0-cu126")
    assert facts is not None and str(facts.cuda) == "12.6"
    assert [b.component for b in facts.binaries] == ["torch 2.8.0+cu126"]
    assert facts.forward_compat is not None and sorted(facts.forward_compat.branches) == [470, 535, 550]


@pytest.mark.parametrize(("image", "reason"), [
    ("example.io/serve:v0.5.0", "version 0.5.0 of serve is not in the image table"),  # older than every row
    ("example.io/serve:v1.0.0-cu999", "version 1.0.0-cu999 of serve is not in the image table"),
])
def test_a_tag_the_table_does_not_list_stays_unknown(image: str, reason: str) -> None:
    facts = kb(image_profiles=[SERVE], torch_wheels=WHEELS).image_facts(image)
    assert facts is not None and facts.cuda is None and facts.binaries == () and facts.reason == reason


def test_a_wheel_the_table_does_not_know_is_no_binary_not_a_guess() -> None:
    facts = kb(image_profiles=[SERVE], torch_wheels=WHEELS[1:]).image_facts("example.io/serve:v1.0.0")
    assert facts is not None and [b.component for b in facts.binaries] == ["serve kernels"]


def test_images_without_cuda_and_admin_rows_first() -> None:
    base = kb(image_profiles=[
        {"name": "corp", "pattern": r"^registry\.corp/ml/serve:", "source": "A", "versions": [
            {"cuda": "12.2", "source": "A"}]},
        {"name": "os", "pattern": r"^(?:docker\.io/)?(?:library/)?ubuntu(?::|$)", "noCudaRuntime": True,
         "source": "O"},
        {"name": "general", "pattern": r":cu(?P<cuda>\d+\.\d)", "source": "G"}])
    ubuntu = base.image_facts("ubuntu:22.04")
    assert ubuntu is not None and ubuntu.no_cuda_runtime and ubuntu.cuda is None
    corp = base.image_facts("registry.corp/ml/serve:cu12.8")
    assert corp is not None and (corp.profile, str(corp.cuda)) == ("corp", "12.2")


@pytest.mark.parametrize(("version", "floor"), [
    ("0.4.2", "8.9"), ("0.9.2", "8.0"), ("0.14.0", "7.5"), ("0.33.0", "7.5"),
    (None, "7.5"),  # unknown version: what holds for every version (the lowest floor)
    ("0.1.0", None),  # a known version outside every row: the table says nothing
])
def test_framework_floors_by_version(version: str | None, floor: str | None) -> None:
    base = kb(framework_features=[
        {"framework": "vllm", "feature": "quantization:fp8", "from": "0.4.2", "before": "0.5.1",
         "minComputeCapability": "8.9", "source": "V"},
        {"framework": "vllm", "feature": "quantization:fp8", "from": "0.5.1", "before": "0.14.0",
         "minComputeCapability": "8.0", "source": "V"},
        {"framework": "vllm", "feature": "quantization:fp8", "from": "0.14.0", "minComputeCapability": "7.5",
         "source": "V"}])
    got = base.framework_floor("vllm", "quantization:fp8", parse_version(version) if version else None)
    assert (str(got.min_cc) if got is not None else None) == floor
    assert base.framework_floor("vllm", "quantization:awq", None) is None


def test_a_version_without_a_floor_gives_none_for_the_unknown_version() -> None:
    base = kb(framework_features=[
        {"framework": "f", "feature": "kv-cache-dtype:fp8", "minComputeCapability": None, "source": "V"}])
    got = base.framework_floor("f", "kv-cache-dtype:fp8", None)
    assert got is not None and got.min_cc is None


def test_admin_rows_override_built_in_ones_in_every_keyed_table() -> None:
    # the tables list admin rows first; the first row with a key wins (cuda-majors used to keep the built-in one)
    base = kb(cuda_majors=[{"major": 12, "mvcMinDriver": "530.30.02", "source": "admin"},
                           {"major": 12, "mvcMinDriver": "525.60.13", "source": "builtin"}],
              cuda_toolkits=[{"version": "12.4", "toolkitDriver": "551.0", "source": "admin"},
                             {"version": "12.4", "toolkitDriver": "550.54.14", "source": "builtin"}],
              forward_compat=[{"cuda": "12.4", "branches": [535], "source": "admin"},
                              {"cuda": "12.4", "branches": [470, 525, 535], "source": "builtin"}])
    assert str(base.mvc_floor(12)) == "530.30.02"
    assert str(base.toolkit_driver(parse_cuda_version("12.4"))) == "551.0"
    assert sorted(base.forward_compat[(12, 4)].branches) == [535]


def test_a_floating_tag_and_a_newer_tag_are_decided_from_the_newest_release() -> None:
    floating = {**SERVE, "floating": r"^example\.io/serve(?::latest)?$"}
    note = "assumed from v1.0.0 to before v2.0.0, the newest serve release compatcheck knows, table undated"
    for image, prefix in (("example.io/serve:latest", "a floating tag, "), ("example.io/serve:v2.0.0", "")):
        facts = kb(image_profiles=[floating], torch_wheels=WHEELS).image_facts(image)
        assert facts is not None and str(facts.cuda) == "12.8" and facts.cuda_at_least is None
        assert facts.assumed == prefix + note and facts.origin.startswith(f"image {image}, {prefix}{note}")


def test_an_admin_row_overrides_the_built_in_one_in_each_table() -> None:
    """Admin rows come first in every table (the loader puts them there) and win, each table by its own key."""
    base = kb(
        driver_branches=[{"branch": 535, "maxCuda": "12.3", "source": "admin"},
                         {"branch": 535, "maxCuda": "12.2", "source": "builtin"}],
        gpu_products=[{"match": "^Tesla-T4$", "product": "T4 (admin)", "computeCapability": "7.5",
                       "datacenter": False, "source": "admin"},
                      {"match": "^Tesla-T4$", "product": "T4", "computeCapability": "7.5", "datacenter": True,
                       "source": "builtin"}],
        architectures=[{"computeCapability": "7.5", "architecture": "Turing (admin)", "firstCuda": "10.0",
                        "removedIn": None, "source": "admin"},
                       {"computeCapability": "7.5", "architecture": "Turing", "firstCuda": "10.0",
                        "removedIn": None, "source": "builtin"}],
        features=[{"feature": "bf16", "minComputeCapability": "9.0", "source": "admin"},
                  {"feature": "bf16", "minComputeCapability": "8.0", "source": "builtin"}],
        image_profiles=[{"name": "admin", "pattern": r"^nvidia/cuda:(?P<cuda>\d+\.\d+)", "source": "admin",
                         "versions": [{"cuda": "12.0", "source": "admin"}]},
                        {"name": "builtin", "pattern": r"^nvidia/cuda:(?P<cuda>\d+\.\d+)", "source": "builtin"}],
        torch_wheels=[{"equals": "2.8.0", "cuda": "12.8", "sass": ["8.0"], "source": "admin"},
                      {"equals": "2.8.0", "cuda": "12.8", "sass": ["7.0", "8.0"], "source": "builtin"}],
        framework_features=[{"framework": "vllm", "feature": "engine", "minComputeCapability": "8.0",
                             "source": "admin"},
                            {"framework": "vllm", "feature": "engine", "minComputeCapability": "7.0",
                             "source": "builtin"}],
        mig_profiles=[{"match": "A100", "gpu": "A100 (admin)", "profiles": ["7g.80gb"], "source": "admin"},
                      {"match": "A100", "gpu": "A100", "profiles": ["1g.10gb", "7g.80gb"], "source": "builtin"}])
    assert str(base.driver_cuda(parse_driver_version("535.104.05"))[0]) == "12.3"
    product = base.product("Tesla-T4")
    assert product is not None and product.product == "T4 (admin)" and product.datacenter is False
    arch = base.architecture(cc("7.5"))
    assert arch is not None and arch.name == "Turing (admin)"
    assert str(base.feature_min_cc("bf16")) == "9.0"
    facts = base.image_facts("nvidia/cuda:12.4.1-base")
    assert facts is not None and (facts.profile, str(facts.cuda)) == ("admin", "12.0")
    assert [str(w.sass[0]) for w in base.torch_wheels][:1] == ["8.0"]
    floor = base.framework_floor("vllm", "engine", None)
    assert floor is not None and str(floor.min_cc) == "8.0" and floor.source == "admin"
    assert base.mig_profiles_for("NVIDIA-A100-SXM4-80GB") == frozenset({"7g.80gb"})
