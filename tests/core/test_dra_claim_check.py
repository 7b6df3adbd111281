"""Check type ``dra-claim`` (compatcheck.core.checks.dra) on hand-written claims, templates and ResourceSlices:
which objects it reads, invalid CEL, missing DeviceClasses, requests no device serves, and constraints across
requests. Every finding exact (pointer and message)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from compatcheck.core.checks.base import EvalContext
from compatcheck.core.cluster import build_cluster
from compatcheck.core.dra import BUILTIN_CLASSES, Inventory, build_index, build_inventory
from compatcheck.core.engine import evaluate
from tests.core.helpers import rule
from tests.core.tables import make_kb

NV = "gpu.nvidia.com"
PRODUCT = "device.attributes['gpu.nvidia.com'].productName"


def device(name: str, product: str = "Tesla T4", cc: str = "7.5.0") -> dict[str, Any]:
    return {"name": name, "attributes": {"productName": {"string": product}, "type": {"string": "gpu"},
                                         "cudaComputeCapability": {"version": cc}}}


def resource_slice(node: str, *devices: dict[str, Any], driver: str = NV) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"s-{node}"},
            "spec": {"driver": driver, "nodeName": node, "pool": {"name": node}, "devices": list(devices)}}


def device_class(name: str, *selectors: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": s}} for s in selectors]}}


# Two T4s on n1, one A100 on n2.
SLICES = [resource_slice("n1", device("t0"), device("t1")),
          resource_slice("n2", device("a0", "NVIDIA A100-SXM4-40GB", "8.0.0"))]


def request(name: str, cls: str = NV, *selectors: str, count: int | None = None,
            mode: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": cls}
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if count is not None:
        body["count"] = count
    if mode is not None:
        body["allocationMode"] = mode
    return {"name": name, "exactly": body}


def claim(*requests: dict[str, Any], constraints: list[Any] | None = None, kind: str = "ResourceClaim",
          api_version: str = "resource.k8s.io/v1") -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints is not None:
        devices["constraints"] = constraints
    spec = {"devices": devices}
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "c", "namespace": "ml"},
            "spec": {"spec": spec} if kind == "ResourceClaimTemplate" else spec}


def found(obj: dict[str, Any], slices: list[dict[str, Any]] | None = None, others: Sequence[dict[str, Any]] = (),
          *, authoritative: bool = False, cluster: bool = True) -> list[tuple[str, str]]:
    kb = make_kb()
    c = None
    if cluster:
        c = build_cluster([], kb)
        c.dra = build_inventory(slices) if slices is not None else None
    ctx = EvalContext(kb, c, dra=build_index(others, authoritative=authoritative))
    result = evaluate(obj, [rule("dra-claim")], ctx)
    assert result.problems == [], result.problems
    assert all((f.rule_id, f.container, f.fix) == ("r", None, None) for f in result.findings)
    return [(f.pointer, f.message) for f in result.findings]


BAD = f"{PRODUCT} =="
BAD_ERROR = "syntax error at line 1, column 49"
UNSUPPORTED = "cel.bind(x, 1, x == 1)"
H100 = f"{PRODUCT} == 'H100'"


@pytest.mark.parametrize("obj", [
    # only claims and templates of resource.k8s.io are read
    claim(request("gpu", NV, BAD), api_version="example.com/v1"),
    claim(request("gpu", NV, BAD), api_version="resource.k8s.io"),
    claim(request("gpu", NV, BAD), kind="DeviceClass"),
    claim(request("gpu", NV, BAD), kind="ResourceSlice"),
    {"kind": "ResourceClaim", "spec": {"devices": {"requests": [request("gpu", NV, BAD)]}}},
])
def test_other_objects_are_not_read(obj: dict[str, Any]) -> None:
    assert found(obj, SLICES) == []


def test_a_selector_that_is_not_cel_is_refused_by_the_api_server() -> None:
    # with or without an inventory; an unsupported one is skipped, the next one is still compiled
    obj = claim(request("gpu", NV, UNSUPPORTED, BAD, H100))
    expected = [("/spec/devices/requests/0/exactly/selectors/1/cel/expression",
                 f"request 'gpu': selector 1 is not valid CEL ({BAD_ERROR}); the API server refuses the "
                 "ResourceClaim")]
    assert found(obj, SLICES) == expected
    assert found(obj, cluster=False) == expected
    assert found(obj, None) == expected


def test_each_broken_selector_of_each_alternative_is_named() -> None:
    obj = claim({"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": NV, "selectors": [{"cel": {"expression": BAD}},
                                                              {"cel": {"expression": "device.driver ="}}]},
        {"name": "small", "deviceClassName": NV, "selectors": [{"cel": {"expression": BAD}}]}]},
        kind="ResourceClaimTemplate")
    base = "/spec/spec/devices/requests/0/firstAvailable"
    assert found(obj, SLICES) == [
        (f"{base}/0/selectors/0/cel/expression", f"request 'gpu/big': selector 0 is not valid CEL ({BAD_ERROR}); "
                                                 "the API server refuses the ResourceClaimTemplate"),
        (f"{base}/0/selectors/1/cel/expression", "request 'gpu/big': selector 1 is not valid CEL (syntax error at "
                                                 "line 1, column 15); the API server refuses the "
                                                 "ResourceClaimTemplate"),
        (f"{base}/1/selectors/0/cel/expression", f"request 'gpu/small': selector 0 is not valid CEL ({BAD_ERROR}); "
                                                 "the API server refuses the ResourceClaimTemplate")]


def test_a_broken_request_is_not_served_but_the_next_one_is() -> None:
    obj = claim(request("bad", NV, BAD, H100), request("big", count=3))
    assert found(obj, SLICES) == [
        ("/spec/devices/requests/0/exactly/selectors/0/cel/expression",
         f"request 'bad': selector 0 is not valid CEL ({BAD_ERROR}); the API server refuses the ResourceClaim"),
        ("/spec/devices/requests/1", "request 'big': no device of the cluster can serve it: it asks for 3 devices "
                                     "on one node and at most 2 match on any node")]


def test_without_an_inventory_only_the_cel_is_checked() -> None:
    obj = claim(request("gpu", NV, H100), request("x", "missing"))
    assert found(obj, None) == []
    assert found(obj, cluster=False) == []
    assert found(obj, None, authoritative=True) == []


def test_a_request_no_device_serves() -> None:
    obj = claim(request("gpu", NV, H100), kind="ResourceClaimTemplate")
    assert found(obj, SLICES) == [(
        "/spec/spec/devices/requests/0",
        "request 'gpu': no device of the cluster can serve it: 3 gpu.nvidia.com devices in reach: "
        "NVIDIA-A100-SXM4-40GB, Tesla-T4, and none of the 3 of DeviceClass gpu.nvidia.com satisfies the selector "
        f"\"{H100}\"")]


@pytest.mark.parametrize("obj", [
    claim(request("gpu", NV, f"{PRODUCT} == 'Tesla T4'", count=2)),
    claim(request("gpu", NV, mode="All")),
    claim(request("gpu", NV, UNSUPPORTED)),  # compatcheck cannot tell: no finding
    claim({"name": "gpu", "firstAvailable": [{"name": "h", "deviceClassName": NV, "selectors": [
        {"cel": {"expression": H100}}]}, {"name": "t", "deviceClassName": NV}]}),
])
def test_requests_some_device_serves(obj: dict[str, Any]) -> None:
    assert found(obj, SLICES) == []


def test_device_classes_come_from_the_input_the_inventory_or_the_driver_chart() -> None:
    a100 = device_class("a100", f"{PRODUCT}.startsWith('NVIDIA A100')")
    obj = claim(request("gpu", "a100", count=2))
    message = [("/spec/devices/requests/0", "request 'gpu': no device of the cluster can serve it: it asks for 2 "
                                            "devices on one node and at most 1 matches on any node")]
    assert found(obj, SLICES, [a100]) == message
    assert found(obj, SLICES, [a100], authoritative=True) == message
    assert found(obj, [*SLICES, a100]) == message
    assert found(obj, [*SLICES, a100], authoritative=True) == message
    # the chart's class when the input has none, unless the index is the cluster's own (authoritative)
    chart = claim(request("gpu", NV, count=3))
    assert found(chart, SLICES) == [("/spec/devices/requests/0", "request 'gpu': no device of the cluster can "
                                     "serve it: it asks for 3 devices on one node and at most 2 match on any node")]
    assert found(chart, SLICES, authoritative=True) == [(
        "/spec/devices/requests/0", "request 'gpu': DeviceClass 'gpu.nvidia.com' does not exist; no device can be "
                                    "allocated for it")]


def test_a_missing_device_class_is_a_finding_only_when_the_index_is_authoritative() -> None:
    obj = claim({"name": "gpu", "firstAvailable": [{"name": "x", "deviceClassName": "x"},
                                                   {"name": "t", "deviceClassName": NV},
                                                   {"name": "y", "deviceClassName": "y"}]})
    assert found(obj, SLICES) == []
    assert found(obj, SLICES, authoritative=True) == [(
        "/spec/devices/requests/0", "request 'gpu': DeviceClass 'x', 'gpu.nvidia.com', 'y' does not exist; no "
                                    "device can be allocated for it")]
    assert found(obj, SLICES, [device_class(NV)], authoritative=True) == [(
        "/spec/devices/requests/0", "request 'gpu': DeviceClass 'x', 'y' does not exist; no device can be "
                                    "allocated for it")]


MATCH = {"matchAttribute": "gpu.nvidia.com/productName"}
# n2 holds two A100s of different products: requests 'a' and 'b' fit there by count, so only a constraint can fail
TWO_A100 = [SLICES[0], resource_slice("n2", device("a0", "NVIDIA A100-SXM4-40GB", "8.0.0"),
                                      device("a1", "NVIDIA A100-SXM4-80GB", "8.0.0"))]


def test_a_constraint_across_requests_no_node_can_meet() -> None:
    a100 = f"{PRODUCT}.startsWith('NVIDIA A100')"
    obj = claim(request("a"), request("b", NV, a100), constraints=[MATCH])
    assert found(obj, TWO_A100) == [(
        "/spec/devices/constraints/0",
        "matchAttribute gpu.nvidia.com/productName over requests 'a', 'b': no devices of the cluster can serve them "
        "together: they ask for 2 devices with the same gpu.nvidia.com/productName on one node and no node has "
        "them")]
    template = claim(request("a"), request("b"), kind="ResourceClaimTemplate",
                     constraints=[{"distinctAttribute": "gpu.nvidia.com/productName", "requests": ["a", "b"]}])
    assert found(template, SLICES) == [(
        "/spec/spec/devices/constraints/0",
        "distinctAttribute gpu.nvidia.com/productName over requests 'a', 'b': no devices of the cluster can serve "
        "them together: they ask for 2 devices with distinct gpu.nvidia.com/productName on one node and at most 1 "
        "distinct value is on any node")]


@pytest.mark.parametrize("obj", [
    # met: two T4s on n1
    claim(request("a"), request("b"), constraints=[MATCH]),
    # a constraint over one request is the request's own (served above)
    claim(request("a"), request("b", NV, f"{PRODUCT}.startsWith('NVIDIA A100')"),
          constraints=[{**MATCH, "requests": ["b"]}]),
    # a request that is not served (broken, unservable, unknown, All) leaves the constraint to the pod
    claim(request("a"), request("b", NV, BAD), constraints=[MATCH]),
    claim(request("a"), request("b", NV, UNSUPPORTED), constraints=[MATCH]),
    claim(request("a"), request("b", NV, mode="All"), constraints=[MATCH]),
])
def test_constraints_that_are_not_judged_across_requests(obj: dict[str, Any]) -> None:
    broken = [f for f in found(obj, SLICES) if "constraints" in f[0]]
    assert broken == []


def test_a_constraint_with_an_unservable_request_is_left_to_that_request() -> None:
    obj = claim(request("a"), request("b", NV, H100), constraints=[MATCH])
    assert [p for p, _m in found(obj, SLICES)] == ["/spec/devices/requests/1"]
    assert found(obj, None) == []


def test_long_selectors_are_shortened_in_the_reason() -> None:
    # the request's selectors joined with &&, white space collapsed, cut at 90 characters
    obj = claim(request("gpu", NV, f"{PRODUCT}   ==\n  'H100'", f"{PRODUCT}.startsWith('NVIDIA H')"))
    joined = f"{PRODUCT} == 'H100' && {PRODUCT}.startsWith('NVIDIA H')"
    assert found(obj, SLICES) == [(
        "/spec/devices/requests/0",
        "request 'gpu': no device of the cluster can serve it: 3 gpu.nvidia.com devices in reach: "
        "NVIDIA-A100-SXM4-40GB, Tesla-T4, and none of the 3 of DeviceClass gpu.nvidia.com satisfies the selector "
        f"{joined[:89] + '…'!r}")]
    exact = f"{PRODUCT} == '{'H' * 37}'"
    assert len(exact) == 90
    assert found(claim(request("gpu", NV, exact)), SLICES)[0][1].endswith(f"satisfies the selector {exact!r}")
    longer = f"{PRODUCT} == '{'H' * 38}'"
    assert found(claim(request("gpu", NV, longer)), SLICES)[0][1].endswith(
        f"satisfies the selector {longer[:89] + '…'!r}")


def test_a_class_known_only_from_the_chart_is_none_of_the_live_clusters() -> None:
    kb = make_kb()
    cluster = build_cluster([], kb)
    chart = build_inventory(SLICES)
    cluster.dra = Inventory(chart.devices, {NV: BUILTIN_CLASSES[NV]})
    obj = claim(request("gpu", NV))
    live = evaluate(obj, [rule("dra-claim")], EvalContext(kb, cluster, dra=build_index([], authoritative=True)))
    assert [(f.pointer, f.message) for f in live.findings] == [(
        "/spec/devices/requests/0", "request 'gpu': DeviceClass 'gpu.nvidia.com' does not exist; no device can be "
                                    "allocated for it")]
    files = evaluate(obj, [rule("dra-claim")], EvalContext(kb, cluster, dra=build_index([])))
    assert files.findings == []


def test_a_request_without_its_class_does_not_stop_the_next() -> None:
    obj = claim(request("x", "missing"), request("big", count=3))
    assert found(obj, SLICES) == [("/spec/devices/requests/1", "request 'big': no device of the cluster can serve "
                                                               "it: it asks for 3 devices on one node and at most 2 "
                                                               "match on any node")]


def test_constraints_naming_no_request_or_a_request_of_all_devices_are_not_judged() -> None:
    a100 = f"{PRODUCT}.startsWith('NVIDIA A100')"
    assert found(claim(request("a"), constraints=[{**MATCH, "requests": ["nope"]}]), SLICES) == []
    # a (a T4) and b (an A100) are never on one node: the allocator finds that before any constraint
    assert found(claim(request("a", NV, f"{PRODUCT} == 'Tesla T4'"), request("b", NV, a100), request("c", mode="All"),
                       constraints=[MATCH]), SLICES) == [(
        "/spec/devices/requests/1", "request 'b' together with request 'a': no devices of the cluster can serve them "
        "together: they ask for 2 devices on one node, and no node has devices that can serve them all (a device goes "
        "to one request, or, if it allows multiple allocations, to as many as its capacity lasts for)")]


def test_each_constraint_is_judged() -> None:
    a100 = f"{PRODUCT}.startsWith('NVIDIA A100')"
    obj = claim(request("a"), request("b", NV, a100),
                constraints=[{**MATCH, "requests": ["a"]}, {**MATCH, "requests": ["a", "b"]}])
    assert found(obj, TWO_A100) == [(
        "/spec/devices/constraints/1",
        "matchAttribute gpu.nvidia.com/productName over requests 'a', 'b': no devices of the cluster can serve them "
        "together: they ask for 2 devices with the same gpu.nvidia.com/productName on one node and no node has "
        "them")]
