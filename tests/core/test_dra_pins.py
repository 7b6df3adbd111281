"""compatcheck.core.dra without an inventory: the gpu.nvidia.com attributes selectors read, and the devices they pin
among those a hand-written KnownValues describes (products, compute capabilities, driver branches), as GPU Feature
Discovery label sets. Exact results."""

from __future__ import annotations

import pytest

from compatcheck.core.dra import MAX_GRID, PINNABLE, KnownValues, nvidia_attributes, pinned_points
from compatcheck.core.dra import selectors as dra_selectors

P = "device.attributes['gpu.nvidia.com']"
KNOWN = KnownValues(("NVIDIA A100-SXM4-40GB", "Tesla T4"), ("7.5", "8.0", "9.0"),
                    ((470, "11.4"), (535, "12.2"), (550, "12.4")))
T4 = {"nvidia.com/gpu.product": "Tesla-T4"}
A100 = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}


def cc(major: int, minor: int) -> dict[str, str]:
    return {"nvidia.com/gpu.compute.major": str(major), "nvidia.com/gpu.compute.minor": str(minor)}


def driver(full: str, major: int, minor: int) -> dict[str, str]:
    return {"nvidia.com/cuda.driver-version.full": full, "nvidia.com/cuda.runtime-version.major": str(major),
            "nvidia.com/cuda.runtime-version.minor": str(minor)}


@pytest.mark.parametrize(("expressions", "expected"), [
    ([f"{P}.productName == 'x'", 'device.attributes["gpu.nvidia.com"]["driverVersion"]',
      "device.attributes[ 'gpu.nvidia.com' ] . type", "device.attributes['other.io'].x",
      "device.attributes['gpu.nvidia.com'].cudaComputeCapability"],
     {"productName", "driverVersion", "type", "cudaComputeCapability"}),
    ([], set()),
    (["device.driver == 'gpu.nvidia.com'", "device.capacity['gpu.nvidia.com'].memory"], set()),
])
def test_the_nvidia_attributes_an_expression_reads(expressions: list[str], expected: set[str]) -> None:
    assert nvidia_attributes(expressions) == frozenset(expected)


@pytest.mark.parametrize(("selectors", "expected"), [
    # a product, named or through an NVML name the table knows; a literal of two characters is no product
    ((f"{P}.productName == 'Tesla T4'",), ([T4], False)),
    ((f"{P}['productName'] == 'H100'",), ([{"nvidia.com/gpu.product": "H100"}], False)),
    # every string literal longer than two characters is a candidate product: a prefix may be a product's name
    ((f"{P}.productName.startsWith('NVIDIA')",), ([{"nvidia.com/gpu.product": "NVIDIA"}, A100], False)),
    ((f"{P}.productName.startsWith('NV')",), ([A100], False)),
    ((f"{P}.productName.startsWith('NVI')",), ([{"nvidia.com/gpu.product": "NVI"}, A100], False)),
    # compute capabilities: the table's and those the selectors name
    ((f"{P}.cudaComputeCapability.isGreaterThan(semver('7.5.0'))",), ([cc(8, 0), cc(9, 0)], False)),
    ((f"{P}.cudaComputeCapability.compareTo(semver('8.6.0')) >= 0",), ([cc(8, 6), cc(9, 0)], False)),
    ((f"{P}.cudaComputeCapability == semver('8', true)",), ([cc(8, 0)], False)),
    ((f"{P}.cudaComputeCapability.isLessThan(semver('v07.05', true))",), ([], False)),
    # a driver branch and the CUDA it supports, pinned together; a semver of another branch is not a driver
    ((f"{P}.driverVersion.isLessThan(semver('535.0.0'))",), ([driver("470", 11, 4)], True)),
    ((f"{P}.driverVersion.isGreaterThan(semver('545.23.8'))",), ([driver("550", 12, 4)], True)),
    ((f"{P}.driverVersion == semver('550', true)",), ([driver("550", 12, 4)], True)),
    ((f"{P}.driverVersion == semver('550.54.15')",), ([driver("550.54.15", 12, 4)], True)),
    ((f"{P}.driverVersion == semver('535.104.5')",), ([driver("535.104.05", 12, 2)], True)),
    ((f"{P}.driverVersion == semver('99.1.0') || {P}.driverVersion == semver('470.0.0')",),
     ([driver("470", 11, 4)], True)),
    ((f"{P}.cudaDriverVersion.isLessThan(semver('12.3.0'))",), ([driver("470", 11, 4), driver("535", 12, 2)], True)),
    # several axes: only the combinations the selectors admit
    ((f"{P}.productName == 'Tesla T4'", f"{P}.cudaComputeCapability.isLessThan(semver('8.0.0'))"),
     ([{**T4, **cc(7, 5)}], False)),
    ((f"{P}.productName.startsWith('NVIDIA A1')", f"{P}.driverVersion.isGreaterThan(semver('500.0.0'))"),
     ([{"nvidia.com/gpu.product": "NVIDIA-A1", **driver("535", 12, 2)},
       {"nvidia.com/gpu.product": "NVIDIA-A1", **driver("550", 12, 4)}, {**A100, **driver("535", 12, 2)},
       {**A100, **driver("550", 12, 4)}], True)),
    ((f"{P}.productName == 'Tesla T4' || {P}.cudaComputeCapability == semver('9.0.0')",),
     ([{"nvidia.com/gpu.product": "9.0.0", **cc(9, 0)}, {**A100, **cc(9, 0)}, {**T4, **cc(7, 5)},
       {**T4, **cc(8, 0)}, {**T4, **cc(9, 0)}, {"nvidia.com/gpu.product": "gpu.nvidia.com", **cc(9, 0)}], False)),
    # an axis admitted whatever the others are is not pinned
    ((f"{P}.productName != '' && {P}.cudaComputeCapability.isLessThan(semver('8.0.0'))",), ([cc(7, 5)], False)),
    ((f"{P}.productName.size() > 0 && {P}.driverVersion.isLessThan(semver('500.0.0'))",),
     ([driver("470", 11, 4)], True)),
    ((f"{P}.productName.size() > 0 && {P}.cudaComputeCapability.isLessThan(semver('9.0.0')) && "
      f"{P}.driverVersion.isGreaterThan(semver('500.0.0'))",),
     ([{**cc(7, 5), **driver("535", 12, 2)}, {**cc(7, 5), **driver("550", 12, 4)},
       {**cc(8, 0), **driver("535", 12, 2)}, {**cc(8, 0), **driver("550", 12, 4)}], True)),
    # semver(s, true) is normalised
    ((f"{P}.cudaComputeCapability == semver('8.6', true)",), ([cc(8, 6)], False)),
    ((f"{P}.cudaComputeCapability == semver('v9.1', true)",), ([cc(9, 1)], False)),
    # a literal that is no semantic version is skipped, the next one still read; only semver(s, true) normalises
    ((f"(false && semver('x.y') == semver('1.0.0')) || {P}.cudaComputeCapability == semver('8.6.0')",),
     ([cc(8, 6)], False)),
    ((f"{P}.cudaComputeCapability.isGreaterThan(semver('8.5.0')) || (false && semver('v9.1.0') == semver('1.0.0'))",),
     ([cc(9, 0)], False)),
    # type, profile, architecture and brand are checked, never labels
    ((f"{P}.type == 'gpu' && {P}.productName == 'Tesla T4'",), ([T4], False)),
    ((f"{P}.type == 'mig' && {P}.profile == '1g.5gb' && {P}.cudaComputeCapability == semver('8.0.0')",),
     ([cc(8, 0)], False)),
    ((f"{P}.architecture == 'Ampere' && {P}.productName.startsWith('NVIDIA ')",),
     ([{"nvidia.com/gpu.product": "NVIDIA-"}, A100], False)),
    ((f"{P}.brand == 'Tesla' && {P}.productName == 'Tesla T4'",), ([T4], False)),
    # an attribute read with no literal to try it with, or not pinnable at all: nothing pinned
    ((f"{P}.brand == '' && {P}.productName == 'Tesla T4'",), ([], False)),
    ((f"{P}.architecture.startsWith(x) && {P}.productName == 'Tesla T4'",), ([], False)),
    ((f"{P}.architecture == 'Ampere'",), ([], False)),
    ((f"{P}.type == 'gpu'",), ([], False)),
    ((f"{P}.uuid == 'x' && {P}.productName == 'Tesla T4'",), ([], False)),
    ((f"!has({P}.uuid) && {P}.productName == 'Tesla T4'",), ([], False)),
    (("device.driver == 'gpu.nvidia.com'",), ([], False)),
    # no device of the table satisfies them; an expression compatcheck cannot evaluate
    ((f"{P}.productName == 'Tesla T4'", f"{P}.productName == 'NVIDIA A100-SXM4-40GB'"), ([], False)),
    ((f"{P}.productName == 'Tesla T4' && cel.bind(a, 1, a == 1)",), ([], False)),
    # an error on some devices excludes them only
    ((f"{P}.productName == 'Tesla T4' || {P}.productName.matches('[')",), ([T4], False)),
    ((f"{P}.productName.matches('[')",), ([], False)),
])
def test_what_selectors_pin(selectors: tuple[str, ...], expected: tuple[list[dict[str, str]], bool]) -> None:
    assert pinned_points(selectors, KNOWN) == expected


def test_literals_alone_make_the_product_axis() -> None:
    assert pinned_points((f"{P}.productName == 'Tesla T4'",), KnownValues((), (), ())) == ([T4], False)


def test_the_grid_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    assert MAX_GRID == 4096
    monkeypatch.setattr(dra_selectors, "MAX_GRID", 4)  # a grid of 4096 points takes seconds to evaluate
    # every string literal of the selectors is a candidate product too, 'gpu.nvidia.com' included
    selector = (f"{P}.productName == 'P1'",)
    assert pinned_points(selector, KnownValues(("P1", "P2", "P3"), (), ())) == ([{"nvidia.com/gpu.product": "P1"}],
                                                                               False)
    assert pinned_points(selector, KnownValues(("P1", "P2", "P3", "P4"), (), ())) == ([], False)
    # the size is the product of the axes ('8.0.0' is a candidate product too)
    two = (f"{P}.productName == 'P1' && {P}.cudaComputeCapability == semver('8.0.0')",)
    monkeypatch.setattr(dra_selectors, "MAX_GRID", 6)
    assert pinned_points(two, KnownValues(("P1",), ("8.0", "9.0"), ())) == (
        [{"nvidia.com/gpu.product": "P1", **cc(8, 0)}], False)
    assert pinned_points(two, KnownValues(("P1", "P2"), ("8.0", "9.0"), ())) == ([], False)
    assert pinned_points(two, KnownValues(("P1",), ("7.5", "8.0", "9.0"), ())) == ([], False)
    # an axis of one value counts once
    monkeypatch.setattr(dra_selectors, "MAX_GRID", 3)
    assert pinned_points(two, KnownValues(("P1",), ("8.0",), ())) == ([{"nvidia.com/gpu.product": "P1"}], False)


def test_a_driver_without_a_known_branch_is_left_out() -> None:
    assert pinned_points((f"{P}.driverVersion.isGreaterThan(semver('100.0.0'))",), KnownValues((), (), ())) == (
        [], False)
    assert pinned_points((f"{P}.driverVersion == semver('550.0.0')",), KnownValues((), (), ((535, "12.2"),))) == (
        [], False)
    assert pinned_points((f"{P}.driverVersion == semver('535.1.0')",), KnownValues((), (), ((535, "12.2"),))) == (
        [driver("535.1", 12, 2)], True)
    # a semver literal from branch 100 up may be a driver
    assert pinned_points((f"{P}.driverVersion == semver('100.1.0')",), KnownValues((), (), ((100, "9.0"),))) == (
        [driver("100.1", 9, 0)], True)
    assert pinned_points((f"{P}.driverVersion == semver('99.1.0')",), KnownValues((), (), ((99, "9.0"),))) == (
        [], False)


def test_every_pinnable_attribute_at_once() -> None:
    # string literals: 'gpu.nvidia.com' and 'gpu', the candidates of every string axis
    selector = (f"{P}.productName == 'gpu' && {P}.type == 'gpu' && {P}.profile == 'gpu' && {P}.architecture == 'gpu' "
                f"&& {P}.brand == 'gpu' && {P}.cudaComputeCapability == {P}.cudaComputeCapability && "
                f"{P}.driverVersion == {P}.driverVersion && {P}.cudaDriverVersion == {P}.cudaDriverVersion",)
    assert nvidia_attributes(selector) == frozenset(PINNABLE)
    assert pinned_points(selector, KnownValues((), ("7.5",), ((535, "12.2"),))) == (
        [{"nvidia.com/gpu.product": "gpu"}], False)


def test_the_pinnable_attributes() -> None:
    assert PINNABLE == ("productName", "cudaComputeCapability", "driverVersion", "cudaDriverVersion", "type",
                        "profile", "architecture", "brand")
