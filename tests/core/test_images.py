"""compatcheck.core.images: image references split as Docker splits them, which GPU binaries run on a compute
capability (SASS, PTX, neither), and when forward compatibility bridges a driver too old for the image's CUDA.
Exact return values of the pure functions, every branch."""

from __future__ import annotations

import pytest

from compatcheck.core.images import Binary, ForwardCompat, ImageFacts, ImageRef, canonical, parse_reference
from compatcheck.core.versions import Version, parse_compute_capability, parse_cuda_version, parse_driver_version


def cc(text: str) -> Version:
    return parse_compute_capability(text)


@pytest.mark.parametrize(("text", "expected"), [
    # Docker Hub: library/ for a name without a namespace, no tag or digest unless written
    ("ubuntu", ImageRef("docker.io", "library/ubuntu", None, None)),
    ("  ubuntu:22.04  ", ImageRef("docker.io", "library/ubuntu", "22.04", None)),
    ("nvidia/cuda:12.4.1-base-ubuntu22.04", ImageRef("docker.io", "nvidia/cuda", "12.4.1-base-ubuntu22.04", None)),
    # a first component with a dot, a colon (port) or "localhost" is a registry
    ("nvcr.io/nvidia/pytorch:24.05-py3", ImageRef("nvcr.io", "nvidia/pytorch", "24.05-py3", None)),
    ("localhost:5000/team/app:v1", ImageRef("localhost:5000", "team/app", "v1", None)),
    ("localhost/app", ImageRef("localhost", "app", None, None)),
    ("registry:5000/app", ImageRef("registry:5000", "app", None, None)),
    # without one of those it is a Docker Hub namespace; a registry host is never given library/
    ("team/app", ImageRef("docker.io", "team/app", None, None)),
    ("quay.io/app", ImageRef("quay.io", "app", None, None)),
    # the digest decides; a tag beside it is kept as a label
    ("vllm/vllm-openai@sha256:abc123", ImageRef("docker.io", "vllm/vllm-openai", None, "sha256:abc123")),
    ("vllm/vllm-openai:v0.6.0@sha256:0f", ImageRef("docker.io", "vllm/vllm-openai", "v0.6.0", "sha256:0f")),
    # separators inside path components
    ("a/b.c__d-e/f", ImageRef("docker.io", "a/b.c__d-e/f", None, None)),
    ("a_b", ImageRef("docker.io", "library/a_b", None, None)),
    # a tag of 128 characters is one; the first character of a tag is a word character
    ("app:" + "v" * 128, ImageRef("docker.io", "library/app", "v" * 128, None)),
])
def test_references_split_as_docker_does(text: str, expected: ImageRef) -> None:
    assert parse_reference(text) == expected


@pytest.mark.parametrize("text", [
    "{{ .Values.image }}",  # a template placeholder
    "my image",  # spaces
    "Nvidia/CUDA:12.4",  # upper case repository
    "app:" + "v" * 129,  # a tag longer than 128: the colon is then in the name, which is no repository
    "app:-x",  # a tag cannot start with a dash
    "-app",  # nor a component
    "app-",
    "a//b",
    "app@sha256:XYZ",  # the digest is hex
    "",
])
def test_what_is_not_a_reference(text: str) -> None:
    assert parse_reference(text) is None


@pytest.mark.parametrize(("text", "name", "spelt"), [
    ("ubuntu", "docker.io/library/ubuntu", "docker.io/library/ubuntu:latest"),
    ("nvcr.io/nvidia/pytorch:24.05-py3", "nvcr.io/nvidia/pytorch", "nvcr.io/nvidia/pytorch:24.05-py3"),
    ("app:v1@sha256:ab", "docker.io/library/app", "docker.io/library/app@sha256:ab"),
])
def test_canonical_names(text: str, name: str, spelt: str) -> None:
    ref = parse_reference(text)
    assert ref is not None and (ref.name, canonical(ref)) == (name, spelt)


TORCH = Binary("torch", (cc("8.0"), cc("9.0")), (cc("9.0"),), parse_cuda_version("12.4"), "S")


@pytest.mark.parametrize(("capability", "expected"), [
    ("8.0", True), ("8.6", True), ("8.9", True),  # sm_80 SASS runs on every 8.x at or above it
    ("9.0", True), ("9.1", True),
    ("7.5", False),  # older than every SASS and PTX
    ("10.0", None),  # only the compute_90 PTX can serve: the driver decides
    ("12.0", None),
])
def test_binaries_run_on_sass_of_the_same_major_or_ptx(capability: str, expected: bool | None) -> None:
    assert TORCH.runs_on(cc(capability)) is expected


def test_sass_of_a_higher_minor_does_not_run_on_a_lower_one() -> None:
    b = Binary("b", (cc("8.6"),))
    assert (b.runs_on(cc("8.0")), b.runs_on(cc("8.6")), b.runs_on(cc("8.9")), b.runs_on(cc("9.0"))) == (
        False, True, True, False)
    ptx = Binary("p", (), (cc("8.6"),))
    assert (ptx.runs_on(cc("8.0")), ptx.runs_on(cc("8.6")), ptx.runs_on(cc("9.0"))) == (False, None, None)


def test_binaries_describe_their_architectures() -> None:
    assert TORCH.describe() == "torch: sm_80, sm_90; PTX compute_90"
    assert Binary("flash-attn", (cc("8.0"),)).describe() == "flash-attn: sm_80"
    assert Binary("ptx-only", (), (cc("7.5"), cc("8.0"))).describe() == "ptx-only: none; PTX compute_75, compute_80"
    assert (TORCH.toolkit, TORCH.source, TORCH.optional) == (parse_cuda_version("12.4"), "S", False)
    assert (Binary("x", ()).ptx, Binary("x", ()).toolkit, Binary("x", ()).source) == ((), None, "")


COMPAT = ForwardCompat(parse_cuda_version("12.4"), frozenset({470, 535}), frozenset({"tesla"}), "S")


@pytest.mark.parametrize(("runtime", "driver", "datacenter", "expected"), [
    ("12.4", "535.104.05", True, True),
    ("12.4.1", "470.82.01", True, True),  # patch levels do not count
    ("12.2", "535.104.05", True, True),
    ("12.5", "535.104.05", True, False),  # the compat libraries bring 12.4 only
    ("12.4", "550.54.15", True, False),  # not a listed branch
    ("12.4", "535.104.05", False, False),  # GeForce: no forward compatibility
    ("12.4", "535.104.05", None, False),  # unknown: not assumed
    ("12.4", None, True, False),
])
def test_forward_compat_bridges_listed_branches_on_datacenter_gpus(runtime: str, driver: str | None,
                                                                    datacenter: bool | None, expected: bool) -> None:
    drv = parse_driver_version(driver) if driver is not None else None
    assert COMPAT.bridges(parse_cuda_version(runtime), drv, datacenter) is expected


def test_forward_compat_compares_major_minor_of_its_own_cuda() -> None:
    compat = ForwardCompat(parse_cuda_version("12.4.1"), frozenset({535}), frozenset(), "S")
    assert compat.bridges(parse_cuda_version("12.4"), parse_driver_version("535.1"), True) is True
    assert compat.bridges(parse_cuda_version("12.4.2"), parse_driver_version("535.1"), True) is True


def test_image_facts_list_the_required_binaries_that_miss_an_architecture() -> None:
    sass80 = Binary("torch", (cc("8.0"),))
    ptx75 = Binary("kernels", (), (cc("7.5"),))
    optional = Binary("flash", (cc("9.0"),), optional=True)
    facts = ImageFacts("img", binaries=(sass80, ptx75, optional))
    assert facts.missing_arch(cc("7.0")) == [sass80, ptx75]
    assert facts.missing_arch(cc("7.5")) == [sass80]
    assert facts.ptx_only(cc("7.5")) == [ptx75]
    assert facts.missing_arch(cc("8.0")) == [] and facts.ptx_only(cc("8.0")) == [ptx75]
    assert facts.ptx_only(cc("7.0")) == []
    # an optional binary never counts, however far off
    assert ImageFacts("img", binaries=(optional, Binary("p", (), (cc("8.0"),), optional=True))).missing_arch(
        cc("7.0")) == []
    assert ImageFacts("img", binaries=(Binary("p", (), (cc("8.0"),), optional=True),)).ptx_only(cc("9.0")) == []
