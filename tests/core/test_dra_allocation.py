"""core/dra's Allocator decides what the scheduler's structured allocator (k8s.io/dynamic-resource-allocation/
structured) decides: full device-to-request matching per node with backtracking, constraints as constraint.go
checks them, allocationMode All, device taints and request tolerations, consumable capacity. Small hand-written
inventories; every outcome exact (pointer and message of each finding, or the devices a request gets)."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest

from compatcheck.core import checks
from compatcheck.core.checks.base import EvalContext
from compatcheck.core.cluster import build_cluster
from compatcheck.core.crl import CrlIndex
from compatcheck.core.dra import (
    Allocation,
    Allocator,
    CapacityPolicy,
    ClaimRequests,
    DeviceClassInfo,
    DeviceTaint,
    DeviceToleration,
    PodRequest,
    ResolvedAlternative,
    build_index,
    build_inventory,
    read_claim_spec,
    read_constraints,
    read_slice,
)
from compatcheck.core.dra.model import _node_selector_matches, _quantity_text
from compatcheck.core.engine import evaluate
from compatcheck.core.model import Severity
from compatcheck.core.rules import Rule
from tests.core.tables import make_kb

NV = "gpu.nvidia.com"
A100, T4 = "NVIDIA A100-SXM4-80GB", "Tesla T4"
GI = 2**30


def dev(name: str, product: str = A100, *, taints: list[dict[str, str]] | None = None, shared: bool = False,
        capacity: dict[str, Any] | None = None, **attributes: dict[str, Any]) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name, "attributes": {"type": {"string": "gpu"}, "productName": {"string": product},
                                                      **attributes},
                         "capacity": capacity or {"memory": {"value": "80Gi"}}}
    if taints is not None:
        d["taints"] = taints
    if shared:
        d["allowMultipleAllocations"] = True
    return d


def rslice(node: str | None, *devices: dict[str, Any], **spec: Any) -> dict[str, Any]:
    where = {"nodeName": node} if node is not None else spec
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-s"},
            "spec": {"driver": NV, **where, "pool": {"name": node or "shared", "generation": 1,
                                                     "resourceSliceCount": 1}, "devices": list(devices)}}


def req(name: str, count: int = 1, *selectors: str, **exactly: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": NV, "count": count, **exactly}
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name, "exactly": body}


def claim(*requests: dict[str, Any], constraints: list[dict[str, Any]] | None = None,
          name: str = "c") -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints is not None:
        devices["constraints"] = constraints
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"devices": devices}}


def findings(check: str, obj: dict[str, Any], slices: list[dict[str, Any]],
             extra: tuple[dict[str, Any], ...] = (), node_labels: dict[str, dict[str, str]] | None = None
             ) -> list[tuple[str, str]]:
    kb = make_kb()
    names = node_labels or {s["spec"]["nodeName"]: {} for s in slices if "nodeName" in s["spec"]}
    cluster = build_cluster([{"metadata": {"name": n, "labels": {"kubernetes.io/hostname": n, **labels}},
                              "status": {"allocatable": {"cpu": "8"}}} for n, labels in names.items()], kb)
    cluster.dra = build_inventory(slices)
    ctx = EvalContext(kb, cluster, CrlIndex(), dra=build_index([obj, *extra]))
    rule = Rule("r", "s", Severity.ERROR, checks.get(check), {}, "why", "how", (), "test")
    result = evaluate(obj, [rule], ctx)
    assert result.problems == []
    return [(f.pointer, f.message) for f in result.findings]


def unsatisfiable(pointer: str, message: str) -> list[tuple[str, str]]:
    return [(pointer, message)]


def alone(request: str, reason: str, index: int = 0) -> list[tuple[str, str]]:
    return [(f"/spec/devices/requests/{index}",
             f"request {request!r}: no device of the cluster can serve it: {reason}")]


ONE_EACH = "a device goes to one request, or, if it allows multiple allocations, to as many as its capacity lasts for"
T4_ONLY = f"device.attributes['{NV}'].productName == '{T4}'"
NO_SCHEDULE = {"key": "example.com/maintenance", "value": "fw", "effect": "NoSchedule"}
PAIR = [rslice("n0", dev("gpu-0"), dev("gpu-1", T4))]
ROOT = "resource.kubernetes.io/pcieRoot"
FORTY = [rslice("n0", *(dev(f"g{i}") for i in range(40)))]
K_TAINT = {"key": "k", "effect": "NoSchedule"}
SHARED = rslice(None, dev("x0"), dev("x1", T4), allNodes=True)
ONE = [rslice("n0", dev("gpu-0"))]


def overlap(index: int, request: str, before: str, total: int) -> list[tuple[str, str]]:
    return [(f"/spec/devices/requests/{index}",
             f"request {request!r} together with {before}: no devices of the cluster can serve them together: they "
             f"ask for {total} devices on one node, and no node has devices that can serve them all ({ONE_EACH})")]


CASES: list[tuple[str, dict[str, Any], list[dict[str, Any]], list[tuple[str, str]]]] = [
    # Overlapping candidates: two requests that can both take the node's one GPU.
    ("overlap", claim(req("a"), req("b")), ONE, overlap(1, "b", "request 'a'", 2)),
    ("overlap-two-gpus", claim(req("a"), req("b")), PAIR, []),
    # A first request that could take the T4 the second needs: the search backtracks.
    ("backtrack", claim(req("any"), req("t4", 1, T4_ONLY)), PAIR, []),
    ("both-want-the-t4", claim(req("t4", 1, T4_ONLY), req("also", 1, T4_ONLY)), PAIR,
     overlap(1, "also", "request 't4'", 2)),
    ("three-requests", claim(req("a"), req("b"), req("c")), PAIR, overlap(2, "c", "requests 'a', 'b'", 3)),
    ("counts-overlap", claim(req("a", 2), req("b")), PAIR, overlap(1, "b", "request 'a'", 3)),
    # allocationMode All under a constraint: every matching device must meet it.
    ("all-match-differs", claim(req("a", allocationMode="All"), constraints=[{"matchAttribute": f"{NV}/productName"}]),
     PAIR, alone("a", f"allocationMode All takes all 2 matching devices on n0, and they do not all share "
                      f"{NV}/productName")),
    ("all-match-same", claim(req("a", allocationMode="All"), constraints=[{"matchAttribute": f"{NV}/productName"}]),
     [rslice("n0", dev("gpu-0"), dev("gpu-1"))], []),
    ("all-distinct-same", claim(req("a", allocationMode="All"),
                                constraints=[{"distinctAttribute": f"{NV}/productName"}]),
     [rslice("n0", dev("gpu-0"), dev("gpu-1"))],
     alone("a", f"allocationMode All takes all 2 matching devices on n0, and they do not all have distinct "
                f"{NV}/productName")),
    ("all-missing-attribute", claim(req("a", allocationMode="All"),
                                    constraints=[{"matchAttribute": "resource.kubernetes.io/pcieRoot"}]),
     ONE, alone("a", "allocationMode All takes all 1 matching devices on n0, and they do not all share "
                     "resource.kubernetes.io/pcieRoot")),
    # All with no matching device on a node: that node cannot serve it; another with one can.
    ("all-one-node-has-none", claim(req("a", 1, T4_ONLY, allocationMode="All")),
     [rslice("n0", dev("gpu-0")), rslice("n1", dev("gpu-0", T4))], []),
    ("all-no-node-has-one", claim(req("a", 1, T4_ONLY, allocationMode="All")), ONE,
     alone("a", f"1 {NV} device in reach: NVIDIA-A100-SXM4-80GB, and none of the 1 of DeviceClass {NV} satisfies "
                f"the selector \"{T4_ONLY}\"")),
    # All takes a tainted device too: the request must tolerate it.
    ("all-tainted", claim(req("a", allocationMode="All")), [rslice("n0", dev("gpu-0"), dev("gpu-1", taints=[
        NO_SCHEDULE]))], alone("a", "allocationMode All takes every matching device, and device gpu-1 (n0) has "
                                    "the taint example.com/maintenance=fw:NoSchedule, which the request does not "
                                    "tolerate")),
    ("all-tainted-tolerated", claim(req("a", allocationMode="All", tolerations=[
        {"key": "example.com/maintenance", "operator": "Exists"}])), [rslice("n0", dev("gpu-0"), dev(
            "gpu-1", taints=[NO_SCHEDULE]))], []),
    # Device taints and request tolerations.
    ("tainted", claim(req("a")), [rslice("n0", dev("gpu-0", taints=[NO_SCHEDULE]))],
     alone("a", "the 1 matching device is tainted (example.com/maintenance=fw:NoSchedule) and the request does "
                "not tolerate that taint")),
    ("tainted-two-taints", claim(req("a")), [rslice("n0", dev("gpu-0", taints=[NO_SCHEDULE]), dev("gpu-1", taints=[
        {"key": "k", "effect": "NoExecute"}]))],
     alone("a", "the 2 matching devices are tainted (example.com/maintenance=fw:NoSchedule, k:NoExecute) and the "
                "request tolerates none of these taints")),
    ("taint-effect-none", claim(req("a")), [rslice("n0", dev("gpu-0", taints=[{"key": "k", "effect": "None"}]))], []),
    ("tolerated-equal", claim(req("a", tolerations=[{"key": "example.com/maintenance", "value": "fw"}])),
     [rslice("n0", dev("gpu-0", taints=[NO_SCHEDULE]))], []),
    ("tolerated-other-value", claim(req("a", tolerations=[
        {"key": "example.com/maintenance", "operator": "Equal", "value": "bios"}])),
     [rslice("n0", dev("gpu-0", taints=[NO_SCHEDULE]))],
     alone("a", "the 1 matching device is tainted (example.com/maintenance=fw:NoSchedule) and the request does "
                "not tolerate that taint")),
    ("one-of-two-tainted", claim(req("a", 2)), [rslice("n0", dev("gpu-0"), dev("gpu-1", taints=[NO_SCHEDULE]))],
     alone("a", "it asks for 2 devices on one node and at most 1 matches on any node (1 more is tainted and not "
                "tolerated)")),
    # Consumable capacity.
    ("capacity-too-much", claim(req("a", capacity={"requests": {"memory": "100Gi"}})), ONE,
     alone("a", "it asks for capacity memory: 100Gi and the 1 matching device cannot give it (gpu-0 has 80Gi of "
                "memory)")),
    ("capacity-unpublished", claim(req("a", capacity={"requests": {"example.com/bandwidth": "1"}})), ONE,
     alone("a", "it asks for capacity example.com/bandwidth: 1 and the 1 matching device cannot give it (gpu-0 "
                "publishes no capacity example.com/bandwidth)")),
    ("capacity-qualified-name", claim(req("a", capacity={"requests": {f"{NV}/memory": "40Gi"}})), ONE, []),
    ("capacity-shared-twice", claim(req("a", capacity={"requests": {"memory": "40Gi"}}),
                                    req("b", capacity={"requests": {"memory": "40Gi"}})),
     [rslice("n0", dev("gpu-0", shared=True))], []),
    ("capacity-shared-thrice", claim(req("a", capacity={"requests": {"memory": "40Gi"}}),
                                     req("b", capacity={"requests": {"memory": "40Gi"}}),
                                     req("c", capacity={"requests": {"memory": "1"}})),
     [rslice("n0", dev("gpu-0", shared=True))], overlap(2, "c", "requests 'a', 'b'", 3)),
    # Not shared: one request takes the device whole, whatever capacity it asks for.
    ("capacity-exclusive-twice", claim(req("a", capacity={"requests": {"memory": "40Gi"}}),
                                       req("b", capacity={"requests": {"memory": "40Gi"}})), ONE,
     overlap(1, "b", "request 'a'", 2)),
    ("capacity-valid-values", claim(req("a", capacity={"requests": {"memory": "30Gi"}})), [rslice("n0", dev(
        "gpu-0", shared=True, capacity={"memory": {"value": "80Gi", "requestPolicy": {
            "validValues": ["10Gi", "20Gi"]}}}))],
     alone("a", "it asks for capacity memory: 30Gi and the 1 matching device cannot give it (the requestPolicy of "
                "gpu-0's memory does not allow 30Gi)")),
    # 30Gi rounds up to 40Gi (min 10Gi, step 10Gi... no: step 15Gi from 10Gi: 10, 25, 40): two fit in 80Gi, three not.
    ("capacity-rounded-up", claim(*(req(n, capacity={"requests": {"memory": "30Gi"}}) for n in "abc")), [rslice(
        "n0", dev("gpu-0", shared=True, capacity={"memory": {"value": "80Gi", "requestPolicy": {
            "validRange": {"min": "10Gi", "step": "15Gi"}}}}))], overlap(2, "c", "requests 'a', 'b'", 3)),
    # firstAvailable: the first subrequest that can be allocated.
    ("first-available-falls-back", claim({"name": "g", "firstAvailable": [
        {"name": "big", "deviceClassName": NV, "count": 2}, {"name": "small", "deviceClassName": NV}]}), ONE, []),
    ("first-available-none", claim({"name": "g", "firstAvailable": [
        {"name": "big", "deviceClassName": NV, "count": 3}, {"name": "two", "deviceClassName": NV, "count": 2}]}),
     ONE, alone("g", "it asks for 3 devices on one node and at most 1 matches on any node; or it asks for 2 devices "
                     "on one node and at most 1 matches on any node")),
    # A constraint naming one subrequest applies to it only.
    ("subrequest-constraint", claim({"name": "g", "firstAvailable": [
        {"name": "big", "deviceClassName": NV, "count": 2}, {"name": "small", "deviceClassName": NV}]}, req("o"),
        constraints=[{"requests": ["g/small", "o"], "matchAttribute": f"{NV}/productName"}]), PAIR,
     [("/spec/devices/constraints/0", f"matchAttribute {NV}/productName over requests 'g', 'o': no devices of the "
                                      f"cluster can serve them together: they ask for 2 devices with the same "
                                      f"{NV}/productName on one node and no node has them")]),
    ("subrequest-constraint-unused", claim({"name": "g", "firstAvailable": [
        {"name": "big", "deviceClassName": NV, "count": 2}, {"name": "small", "deviceClassName": NV}]}, req("o"),
        constraints=[{"requests": ["g/big", "o"], "matchAttribute": f"{NV}/productName"}]), PAIR, []),
    # distinctAttribute as constraint.go checks it: a value of another type ends the check (distinct), so
    # string "1", int 1, int 1 in that order are allocated together; int 1, int 1, string "1" are not.
    ("distinct-types-first", claim(req("a", 3), constraints=[{"distinctAttribute": f"{NV}/index"}]), [rslice(
        "n0", dev("d0", index={"string": "1"}), dev("d1", index={"int": 1}), dev("d2", index={"int": 1}))], []),
    ("distinct-types-last", claim(req("a", 3), constraints=[{"distinctAttribute": f"{NV}/index"}]), [rslice(
        "n0", dev("d0", index={"int": 1}), dev("d1", index={"int": 1}), dev("d2", index={"string": "1"}))],
     alone("a", f"it asks for 3 devices with distinct {NV}/index on one node and at most 2 distinct values are on "
                "any node")),
    # matchAttribute over two requests whose devices overlap: each alone is fine, the constraint needs two devices
    # with one root and the node has one per root.
    ("match-across", claim(req("a"), req("b"), constraints=[{"matchAttribute": "resource.kubernetes.io/pcieRoot"}]),
     [rslice("n0", dev("gpu-0", **{"resource.kubernetes.io/pcieRoot": {"string": "pci0"}}),
             dev("gpu-1", **{"resource.kubernetes.io/pcieRoot": {"string": "pci1"}}))],
     [("/spec/devices/constraints/0", "matchAttribute resource.kubernetes.io/pcieRoot over requests 'a', 'b': no "
                                      "devices of the cluster can serve them together: they ask for 2 devices with "
                                      "the same resource.kubernetes.io/pcieRoot on one node and no node has them")]),
    ("match-across-ok", claim(req("a"), req("b"), constraints=[
        {"matchAttribute": "resource.kubernetes.io/pcieRoot"}]),
     [rslice("n0", dev("gpu-0", **{"resource.kubernetes.io/pcieRoot": {"string": "pci0"}}),
             dev("gpu-1", **{"resource.kubernetes.io/pcieRoot": {"string": "pci1"}}),
             dev("gpu-2", **{"resource.kubernetes.io/pcieRoot": {"string": "pci1"}}))], []),
    # A constraint on one request, with another competing for the device it needs.
    ("own-constraint-and-overlap", claim(req("a", 2), req("b", 1, f"device.attributes['{NV}'].index == 1"),
                                         constraints=[{"requests": ["a"], "distinctAttribute": f"{NV}/index"}]),
     [rslice("n0", dev("d0", index={"int": 0}), dev("d1", index={"int": 1}), dev("d2", index={"int": 0}))],
     [("/spec/devices/constraints/0", f"distinctAttribute {NV}/index over request 'a': no devices of the cluster can "
                                      "serve them together: each request can be served alone, and no node has "
                                      "devices that serve every request of the claim while meeting it")]),
    ("own-constraint-and-overlap-ok", claim(req("a", 2), req("b", 1, f"device.attributes['{NV}'].index == 1"),
                                            constraints=[{"requests": ["a"], "distinctAttribute": f"{NV}/index"}]),
     [rslice("n0", dev("d0", index={"int": 0}), dev("d1", index={"int": 1}), dev("d2", index={"int": 1}))], []),
    # Two constraints each of which can be met, not both: a and b share a root and have different products.
    ("two-constraints", claim(req("a"), req("b"), constraints=[
        {"matchAttribute": "resource.kubernetes.io/pcieRoot"}, {"distinctAttribute": f"{NV}/productName"}]),
     [rslice("n0", dev("gpu-0", **{"resource.kubernetes.io/pcieRoot": {"string": "pci0"}}),
             dev("gpu-1", **{"resource.kubernetes.io/pcieRoot": {"string": "pci0"}}),
             dev("gpu-2", T4, **{"resource.kubernetes.io/pcieRoot": {"string": "pci1"}}))],
     [("/spec/devices/constraints/1", f"constraints matchAttribute resource.kubernetes.io/pcieRoot, "
                                      f"distinctAttribute {NV}/productName: no devices of the cluster can serve them "
                                      "together: each can be met alone, and no node has devices that meet them "
                                      "together")]),
    # allocationMode All meeting a device the constraint refuses stops the allocation on the node (an error in the
    # allocator): the A100 on root X taken first for 'a' is not traded for the one on root Y.
    ("all-stops-the-node", claim(req("a", 1, f"device.attributes['{NV}'].productName != '{T4}'"),
                                 req("b", 1, T4_ONLY, allocationMode="All"), constraints=[{"matchAttribute": ROOT}]),
     [rslice("n0", dev("d0", **{ROOT: {"string": "X"}}), dev("d1", **{ROOT: {"string": "Y"}}),
             dev("d2", T4, **{ROOT: {"string": "Y"}}))],
     [("/spec/devices/constraints/0", f"matchAttribute {ROOT} over requests 'a', 'b': no devices of the cluster can "
                                      "serve them together: each request can be served alone, and no node has "
                                      "devices that serve every request of the claim while meeting it (with "
                                      "allocationMode All, a device the request must take that does not meet the "
                                      "constraint stops the allocation on the node: the allocator does not try other "
                                      "devices for the requests before it)")]),
    ("all-after-the-right-device", claim(req("a", 1, f"device.attributes['{NV}'].productName != '{T4}'"),
                                         req("b", 1, T4_ONLY, allocationMode="All"),
                                         constraints=[{"matchAttribute": ROOT}]),
     [rslice("n0", dev("d1", **{ROOT: {"string": "Y"}}), dev("d0", **{ROOT: {"string": "X"}}),
             dev("d2", T4, **{ROOT: {"string": "Y"}}))], []),
    # Two nodes whose devices look alike to the search only if it forgets that the A100s share a product: n0 cannot
    # serve the pair (A100 and T4), n1 can.
    ("nodes-that-only-look-alike", claim(req("a"), req("b"), constraints=[
        {"matchAttribute": f"{NV}/productName"}, {"distinctAttribute": f"{NV}/uuid"}]),
     [rslice("n0", dev("g0", uuid={"string": "u1"}), dev("g1", T4, uuid={"string": "u2"})),
      rslice("n1", dev("g0", uuid={"string": "u3"}), dev("g1", uuid={"string": "u4"}))], []),
    # Each constraint's own count is there (two A100s; two uuids), not both at once.
    ("constraints-within-a-request", claim(req("a", 2), constraints=[
        {"matchAttribute": f"{NV}/productName"}, {"distinctAttribute": f"{NV}/uuid"}]),
     [rslice("n0", dev("d0", uuid={"string": "1"}), dev("d1", uuid={"string": "1"}), dev("d2", T4, uuid={
         "string": "2"}))],
     alone("a", f"no node has 2 devices for it that meet its constraints (matchAttribute {NV}/productName, "
                f"distinctAttribute {NV}/uuid)")),
    ("many-taints", claim(req("a")), [rslice("n0", *(dev(f"d{i}", taints=[{"key": f"k{i}", "effect": "NoSchedule"}])
                                                     for i in range(5)))],
     alone("a", "the 5 matching devices are tainted (k0:NoSchedule, k1:NoSchedule, k2:NoSchedule ...) and the "
                "request tolerates none of these taints")),
    ("many-too-small", claim(req("a", capacity={"requests": {"memory": "10Gi"}})),
     [rslice("n0", *(dev(f"d{i}", capacity={"memory": {"value": f"{i + 1}Gi"}}) for i in range(5)))],
     alone("a", "it asks for capacity memory: 10Gi and none of the 5 matching devices can give it (d0 has 1Gi of "
                "memory; d1 has 2Gi of memory; d2 has 3Gi of memory ...)")),
    # allocationMode All that cannot take a device another request holds gives back what it took: the
    # subrequest after it gets the A100.
    ("all-gives-back", claim(req("t4", 1, T4_ONLY), {"name": "g", "firstAvailable": [
        {"name": "all", "deviceClassName": NV, "allocationMode": "All"}, {"name": "one", "deviceClassName": NV}]}),
     PAIR, []),
    ("all-then-nothing-left", claim(req("t4", 1, T4_ONLY), {"name": "g", "firstAvailable": [
        {"name": "all", "deviceClassName": NV, "allocationMode": "All"}, {"name": "two", "deviceClassName": NV,
                                                                          "count": 2}]}),
     PAIR, overlap(1, "g", "request 't4'", 2)),
    # A claim is allocated at most 32 devices (AllocationResultsMaxSize).
    ("more-than-32", claim(req("a", 33)), FORTY,
     alone("a", "it asks for 33 devices and a claim can be allocated at most 32")),
    ("all-more-than-32", claim(req("a", allocationMode="All")), FORTY,
     alone("a", "allocationMode All takes every matching device, 40 on n0 (the fewest on any node), and a claim can "
                "be allocated at most 32")),
    ("requests-more-than-32", claim(req("a", 20), req("b", 13)), FORTY,
     [("/spec/devices/requests/1", "request 'b' together with request 'a': no devices of the cluster can serve them "
                                   "together: they ask for 33 devices and a claim can be allocated at most 32")]),
    ("requests-32", claim(req("a", 20), req("b", 12)), FORTY, []),
    ("all-32", claim(req("a", allocationMode="All")), [rslice("n0", *(dev(f"g{i}") for i in range(32)))], []),
    ("all-33-then-fewer", claim({"name": "g", "firstAvailable": [
        {"name": "all", "deviceClassName": NV, "allocationMode": "All"}, {"name": "one", "deviceClassName": NV}]}),
     [rslice("n0", *(dev(f"g{i}") for i in range(33)))], []),
    # matchAttribute: values of different types never match; versions match as written (build metadata counts).
    ("match-types", claim(req("a"), req("b"), constraints=[{"matchAttribute": f"{NV}/index"}]),
     [rslice("n0", dev("d0", index={"int": 1}), dev("d1", index={"string": "1"}))],
     [("/spec/devices/constraints/0", f"matchAttribute {NV}/index over requests 'a', 'b': no devices of the "
                                      f"cluster can serve them together: they ask for 2 devices with the same "
                                      f"{NV}/index on one node and no node has them")]),
    ("match-version-build", claim(req("a"), req("b"), constraints=[{"matchAttribute": f"{NV}/fw"}]),
     [rslice("n0", dev("d0", fw={"version": "1.0.0"}), dev("d1", fw={"version": "1.0.0+b1"}))],
     [("/spec/devices/constraints/0", f"matchAttribute {NV}/fw over requests 'a', 'b': no devices of the "
                                      f"cluster can serve them together: they ask for 2 devices with the same "
                                      f"{NV}/fw on one node and no node has them")]),
    ("distinct-version-build", claim(req("a", 2), constraints=[{"distinctAttribute": f"{NV}/fw"}]),
     [rslice("n0", dev("d0", fw={"version": "1.0.0"}), dev("d1", fw={"version": "1.0.0+b1"}))],
     alone("a", f"it asks for 2 devices with distinct {NV}/fw on one node and at most 1 distinct value is on any "
                "node")),
    # A shared device gives all of its capacity to one request.
    ("capacity-whole-shared", claim(req("a", capacity={"requests": {"memory": "80Gi"}})),
     [rslice("n0", dev("gpu-0", shared=True))], []),
    # A constraint refusing a device after another accepted it gives the other's count back.
    ("constraints-undone", claim(req("a"), req("b"), req("c", 1, T4_ONLY), constraints=[
        {"requests": ["c"], "matchAttribute": f"{NV}/uuid"}, {"requests": ["a", "b"], "matchAttribute":
                                                              f"{NV}/productName"},
        {"requests": ["a", "b"], "distinctAttribute": f"{NV}/uuid"}]),
     [rslice("n0", dev("d0", uuid={"string": "u1"}), dev("d1", uuid={"string": "u1"}),
             dev("d2", T4, uuid={"string": "u2"}), dev("d3", T4, uuid={"string": "u3"}),
             dev("d4", T4, uuid={"string": "u4"}))], []),
    # Why a request alone cannot be served, in more shapes.
    ("subrequest-own-constraint", claim({"name": "g", "firstAvailable": [
        {"name": "big", "deviceClassName": NV, "count": 2}]}, constraints=[
        {"requests": ["g/big"], "matchAttribute": f"{NV}/productName"}]), PAIR,
     alone("g", f"it asks for 2 devices with the same {NV}/productName on one node and at most 1 matches on any "
                "node")),
    ("all-shared-pools", claim(req("a", allocationMode="All"), constraints=[{"matchAttribute": f"{NV}/productName"}]),
     [SHARED], alone("a", f"allocationMode All takes all 2 matching devices on the shared pools, and they do not all "
                          f"share {NV}/productName")),
    ("own-and-shared", claim(req("a", 4)), [rslice("n0", dev("g0")), SHARED],
     alone("a", "it asks for 4 devices on one node and at most 3 match on any node")),
    ("shared-only", claim(req("a", 2)), [rslice(None, dev("x0"), allNodes=True)],
     alone("a", "it asks for 2 devices on one node and at most 1 matches on any node")),
    ("two-tainted", claim(req("a", 2)), [rslice("n0", dev("g0"), dev("g1", taints=[K_TAINT]), dev("g2", taints=[
        K_TAINT]))],
     alone("a", "it asks for 2 devices on one node and at most 1 matches on any node (2 more are tainted and not "
                "tolerated)")),
    ("three-of-two", claim(req("a", 3)), PAIR, alone("a", "it asks for 3 devices on one node and at most 2 match on "
                                                          "any node")),
    ("two-distinct-attributes", claim(req("a", 2), constraints=[
        {"distinctAttribute": f"{NV}/uuid"}, {"distinctAttribute": f"{NV}/index"}]),
     [rslice("n0", dev("g0", uuid={"string": "u"}, index={"int": 0}), dev("g1", uuid={"string": "u"}, index={
         "int": 1}))],
     alone("a", f"it asks for 2 devices with distinct {NV}/uuid, {NV}/index on one node and at most 1 distinct value "
                "is on any node")),
    ("overlap-first-two-of-three", claim(req("a"), req("b"), req("c")), ONE, overlap(1, "b", "request 'a'", 2)),
    # Devices on two nodes never combine.
    ("two-nodes", claim(req("a"), req("b")), [rslice("n0", dev("gpu-0")), rslice("n1", dev("gpu-0"))],
     overlap(1, "b", "request 'a'", 2)),
    # A slice for all nodes serves every node, beside the node's own.
    ("all-nodes-slice", claim(req("a"), req("b")), [rslice("n0", dev("gpu-0")), rslice(None, dev("x-0"),
                                                                                         allNodes=True)], []),
]


@pytest.mark.parametrize(("case", "obj", "slices", "expected"), CASES, ids=[c[0] for c in CASES])
def test_claims_are_decided_as_the_allocator_decides(case: str, obj: dict[str, Any], slices: list[dict[str, Any]],
                                                     expected: list[tuple[str, str]]) -> None:
    assert findings("dra-claim", obj, slices) == expected


def pod_of(*claims: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}, "spec": {
        "resourceClaims": [{"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)],
        "containers": [{"name": "x", "image": "nvidia/cuda:12.4.1-base", "resources": {
            "claims": [{"name": f"c{i}"} for i in range(len(claims))]}}]}}


def test_a_pods_claims_are_allocated_together() -> None:
    """Two claims of one pod that each get the node's one GPU alone: not together (a device goes to one claim)."""
    a, b = claim(req("g"), name="a"), claim(req("g"), name="b")
    assert findings("eligible-node", pod_of("a", "b"), ONE, (a, b)) == [(
        "/spec/resourceClaims/1", f"no devices can be allocated for claim 'c1' (claim 'c1' together with claim 'c0': "
                                  f"together they ask for 2 devices on one node, and no node has devices that can "
                                  f"serve them all ({ONE_EACH.replace('request', 'claim')})); the pod would stay "
                                  "Pending")]
    assert findings("eligible-node", pod_of("a", "b"), PAIR, (a, b)) == []
    shared = [rslice("n0", dev("gpu-0", shared=True))]
    half = claim(req("g", capacity={"requests": {"memory": "40Gi"}}), name="a")
    other = claim(req("g", capacity={"requests": {"memory": "40Gi"}}), name="b")
    assert findings("eligible-node", pod_of("a", "b"), shared, (half, other)) == []


def test_three_claims_of_a_pod_name_the_ones_before() -> None:
    claims = tuple(claim(req("g"), name=n) for n in "abc")
    assert findings("eligible-node", pod_of("a", "b", "c"), PAIR, claims) == [(
        "/spec/resourceClaims/2", f"no devices can be allocated for claim 'c2' (claim 'c2' together with claims 'c0', "
                                  f"'c1': together they ask for 3 devices on one node, and no node has devices that "
                                  f"can serve them all ({ONE_EACH.replace('request', 'claim')})); the pod would stay "
                                  "Pending")]


def test_a_pods_claim_request_left_without_devices_and_its_taint_reason() -> None:
    overlapping = claim(req("a"), req("b"), name="a")
    assert findings("eligible-node", pod_of("a"), ONE, (overlapping,)) == [(
        "/spec/resourceClaims/0", f"no devices can be allocated for claim 'c0' (ResourceClaim ns/a: request 'b' "
                                  f"together with request 'a': they ask for 2 devices on one node, and no node has "
                                  f"devices that can serve them all ({ONE_EACH})); the pod would stay Pending")]
    tainted = claim(req("g"), name="a")
    assert findings("eligible-node", pod_of("a"), [rslice("n0", dev("gpu-0", taints=[NO_SCHEDULE]))], (tainted,)) == [(
        "/spec/resourceClaims/0", "no device can be allocated for claim 'c0' (ResourceClaim ns/a request 'g'): the 1 "
                                  "matching device is tainted (example.com/maintenance=fw:NoSchedule) and the request "
                                  "does not tolerate that taint; the pod would stay Pending")]


def test_a_slice_with_a_node_selector_serves_the_nodes_it_selects() -> None:
    """Two requests, each node has one GPU of its own, and a shared slice whose nodeSelector picks n1 only."""
    selector = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]}
    slices = [rslice("n0", dev("gpu-0")), rslice("n1", dev("gpu-0")), rslice(None, dev("x-0"), nodeSelector=selector)]
    two = claim(req("a"), req("b"), name="a")
    labels = {"n0": {"rack": "r0"}, "n1": {"rack": "r1"}}
    assert findings("eligible-node", pod_of("a"), slices, (two,), labels) == []
    only_n0 = {**pod_of("a"), "spec": {**pod_of("a")["spec"], "nodeSelector": {"rack": "r0"}}}
    assert findings("eligible-node", only_n0, slices, (two,), labels) == [(
        "/spec/resourceClaims/0", f"no devices can be allocated for claim 'c0' (ResourceClaim ns/a: request 'b' "
                                  f"together with request 'a': they ask for 2 devices on one node, and no node has "
                                  f"devices that can serve them all ({ONE_EACH})); the pod would stay Pending")]
    # On a node with no device of its own, the shared slice that does not select it is not in reach either.
    bare = [rslice("n1", dev("gpu-0")), rslice(None, dev("x-0"), nodeSelector=selector)]
    one = claim(req("a"), name="a")
    assert findings("eligible-node", only_n0, bare, (one,), labels) == [(
        "/spec/resourceClaims/0", "no device can be allocated for claim 'c0' (ResourceClaim ns/a request 'a'): no "
                                  "ResourceSlice publishes a device on a node the pod can land on (its nodeSelector, "
                                  "affinity and tolerations); the pod would stay Pending")]


@pytest.mark.parametrize(("selector", "name", "labels", "expected"), [
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}]}, "n",
     {"a": "2"}, True),
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}]}, "n",
     {"a": "2"}, False),
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}]}, "n",
     {}, True),
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}]}, "n",
     {"a": "1"}, False),
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists"}]}]}, "n", {"a": ""}, True),
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}]}, "n", {"a": ""},
     False),
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["3"]}]}]}, "n",
     {"a": "4"}, True),
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["4"]}]}]}, "n",
     {"a": "4"}, False),
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Lt", "values": ["5"]}]}]}, "n",
     {"a": "4"}, True),
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Lt", "values": ["x"]}]}]}, "n",
     {"a": "4"}, False),
    ({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}]}, "n",
     {}, True),
    ({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["m"]}]},
                            {"matchExpressions": [{"key": "a", "operator": "Exists"}]}]}, "n", {"a": "1"}, True),
    ({"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["m"]}]}]}, "n",
     {}, False),
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}]}, "n",
     {"a": "2"}, True),
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}]}, "n", {}, True),
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["-3"]}]}]}, "n",
     {"a": "-1"}, True),
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}]}, "n",
     {"a": "2-"}, False),
    ({"nodeSelectorTerms": []}, "n", {}, False),
    ({"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Bogus"}]}]}, "n", {"a": "1"}, False),
])
def test_node_selectors_of_slices(selector: dict[str, Any], name: str, labels: dict[str, str], expected: bool) -> None:
    assert _node_selector_matches(selector, name, labels) is expected


TAINT = DeviceTaint("k", "v", "NoSchedule")


@pytest.mark.parametrize(("toleration", "tolerated"), [
    (DeviceToleration("k", "Exists"), True),
    (DeviceToleration("k", "Equal", "v"), True),
    (DeviceToleration("k", "", "v"), True),  # no operator is Equal
    (DeviceToleration("k", "Equal", "w"), False),
    (DeviceToleration("other", "Exists"), False),
    (DeviceToleration("", "Exists"), True),  # an empty key with Exists tolerates every taint
    (DeviceToleration("", "Equal", "v"), True),  # an empty key matches every key; the value still counts
    (DeviceToleration("k", "Exists", effect="NoSchedule"), True),
    (DeviceToleration("k", "Exists", effect="NoExecute"), False),
    (DeviceToleration("k", "Bogus", "v"), False),
])
def test_tolerations_match_device_taints_as_kubernetes_does(toleration: DeviceToleration, tolerated: bool) -> None:
    assert toleration.tolerates(TAINT) is tolerated


@pytest.mark.parametrize(("effect", "prevents"), [("NoSchedule", True), ("NoExecute", True), ("None", False),
                                                  ("Other", False)])
def test_only_noschedule_and_noexecute_keep_a_request_off(effect: str, prevents: bool) -> None:
    assert DeviceTaint("k", "", effect).prevents_allocation is prevents
    assert str(DeviceTaint("k", "", effect)) == f"k:{effect}"


G = Fraction(GI)


@pytest.mark.parametrize(("policy", "requested", "consumed", "violated"), [
    (CapacityPolicy(), None, 80 * G, False),  # nothing asked, no policy: the whole capacity
    (CapacityPolicy(default=G), None, G, False),
    (CapacityPolicy(), 3 * G, 3 * G, False),
    (CapacityPolicy(valid_values=(10 * G, 20 * G)), 15 * G, 20 * G, False),  # rounded up to the next valid value
    (CapacityPolicy(valid_values=(10 * G, 20 * G)), 30 * G, 30 * G, True),  # above the largest: as asked, refused
    (CapacityPolicy(has_range=True, minimum=10 * G, step=15 * G), 30 * G, 40 * G, False),
    (CapacityPolicy(has_range=True, minimum=10 * G, step=15 * G), 5 * G, 10 * G, False),  # below min: min
    (CapacityPolicy(has_range=True, minimum=10 * G, step=15 * G), 25 * G, 25 * G, False),  # on a step
    (CapacityPolicy(has_range=True, minimum=10 * G), 33 * G, 33 * G, False),  # no step: as asked
    (CapacityPolicy(has_range=True, minimum=10 * G, maximum=40 * G, step=10 * G), 45 * G, 50 * G, True),
    (CapacityPolicy(has_range=True, minimum=10 * G, maximum=40 * G, step=10 * G), 40 * G, 40 * G, False),
    (CapacityPolicy(default=5 * G, has_range=True, minimum=10 * G, maximum=40 * G), None, 5 * G, False),
    # the default is allowed even where the range would not allow it
    (CapacityPolicy(default=5 * G, has_range=True, minimum=10 * G, step=10 * G), None, 5 * G, False),
    (CapacityPolicy(default=G, valid_values=(10 * G, 20 * G)), 30 * G, 30 * G, True),
    (CapacityPolicy(valid_values=(10 * G, 20 * G)), 10 * G, 10 * G, False),  # a valid value is itself
    (CapacityPolicy(minimum=10 * G), 5 * G, 5 * G, False),  # a minimum without validRange rounds nothing
])
def test_capacity_request_policies(policy: CapacityPolicy, requested: Fraction | None, consumed: Fraction,
                                   violated: bool) -> None:
    assert policy.consumed(requested, 80 * G) == consumed
    assert policy.violated_by(consumed) is violated


@pytest.mark.parametrize(("policy", "consumed", "violated"), [
    (CapacityPolicy(has_range=True, minimum=10 * G, step=10 * G), 15 * G, True),  # off the step from min
    (CapacityPolicy(has_range=True, minimum=10 * G, step=10 * G), 30 * G, False),
    (CapacityPolicy(has_range=True, step=10 * G), 20 * G, False),  # no min: steps from 0
    (CapacityPolicy(has_range=True, minimum=10 * G, maximum=40 * G), 41 * G, True),
])
def test_what_a_request_policy_refuses(policy: CapacityPolicy, consumed: Fraction, violated: bool) -> None:
    assert policy.violated_by(consumed) is violated


def test_slices_read_taints_and_request_policies() -> None:
    (device,) = read_slice(rslice("n0", dev("gpu-0", taints=[NO_SCHEDULE, {"key": "x"}], shared=True, capacity={
        "memory": {"value": "80Gi", "requestPolicy": {"default": "1Gi", "validRange": {
            "min": "1Gi", "max": "40Gi", "step": "1Gi"}}},
        "cores": {"value": "8", "requestPolicy": {"validValues": ["1", "2", "bogus"]}}, "plain": {"value": "1"}})))
    assert device.taints == (DeviceTaint("example.com/maintenance", "fw", "NoSchedule"),)  # no effect: not read
    assert device.shared is True
    assert dict(device.policies) == {
        (NV, "memory"): CapacityPolicy(G, (), True, G, 40 * G, G),
        (NV, "cores"): CapacityPolicy(None, (Fraction(1), Fraction(2)))}


def test_requests_read_tolerations_capacity_and_constraints_the_subrequests_they_name() -> None:
    spec = {"devices": {"requests": [
        req("a", tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule"}, {"value": "v"}],
            capacity={"requests": {"memory": "40Gi", "bad": "x"}}),
        {"name": "g", "firstAvailable": [{"name": "s", "deviceClassName": NV, "tolerations": [{"key": "k"}]}]}],
        "constraints": [{"requests": ["g/s"], "matchAttribute": "x/y"}]}}
    (a, g), _sharing = read_claim_spec(spec, "/spec")
    assert a.alternatives[0].tolerations == (DeviceToleration("k", "Exists", "", "NoSchedule"),
                                             DeviceToleration("", "Equal", "v", ""))
    assert a.alternatives[0].capacity == (("memory", 40 * G),)
    assert (a.alternatives[0].sub, g.alternatives[0].sub) == ("", "s")
    assert g.alternatives[0].tolerations == (DeviceToleration("k"),)
    (c,) = read_constraints(spec, "/spec")
    assert (c.names, c.requests) == (("g/s",), ("g",))
    assert [c.applies("g", "s"), c.applies("g", "t"), c.applies("g", ""), c.applies("a", "")] == [
        True, False, False, False]


GPU_CLASS = DeviceClassInfo(NV, (f"device.driver == '{NV}'",), None, "input")


def requests_of(obj: dict[str, Any]) -> ClaimRequests:
    spec = obj["spec"]
    reqs, _sharing = read_claim_spec(spec, "/spec")
    return ClaimRequests("c", tuple(PodRequest("c", r.name, f"claim request {r.name}", r.pointer, tuple(
        ResolvedAlternative(a, GPU_CLASS) for a in r.alternatives)) for r in reqs),
        tuple(read_constraints(spec, "/spec")))


def allocator(*slices: dict[str, Any]) -> Allocator:
    return build_inventory(list(slices)).allocator


def test_the_devices_a_request_gets_are_those_of_some_allocation() -> None:
    """The pod's rules read the devices a request can get: on nodes where the claims can be allocated, of the
    subrequest the allocator picks there, and only devices that take part in some allocation."""
    inv = allocator(rslice("n0", dev("gpu-0"), dev("gpu-1", T4)), rslice("n1", dev("gpu-0", T4)))
    # firstAvailable: n0 serves "two" (both its GPUs), n1 only "one".
    fa = claim({"name": "g", "firstAvailable": [{"name": "two", "deviceClassName": NV, "count": 2},
                                                {"name": "one", "deviceClassName": NV}]})
    ((_r, outcome),) = inv.diagnose([requests_of(fa)]).outcomes
    assert [(d.node, d.name) for d in outcome.devices] == [("n0", "gpu-0"), ("n0", "gpu-1"), ("n1", "gpu-0")]
    assert outcome.count == 2
    assert [(dict(labels)["nvidia.com/gpu.product"], node) for labels, node, _w, _d in outcome.placements] == [
        ("NVIDIA-A100-SXM4-80GB", "n0"), ("Tesla-T4", "n0"), ("Tesla-T4", "n1")]
    # Two requests of one product: n0 has one A100 and one T4, n1 one T4: no node can serve them.
    pair = claim(req("a"), req("b"), constraints=[{"matchAttribute": f"{NV}/productName"}])
    diagnosis = inv.diagnose([requests_of(pair)])
    assert [f.subject for f in diagnosis.failures] == [f"matchAttribute {NV}/productName over requests 'a', 'b'"]
    # With a second T4 on n0 they can, and only the T4s are ever allocated: the A100 has no partner.
    inv2 = allocator(rslice("n0", dev("gpu-0"), dev("gpu-1", T4), dev("gpu-2", T4)))
    outcomes = inv2.diagnose([requests_of(pair)]).outcomes
    assert [[d.name for d in o.devices] for _r, o in outcomes] == [["gpu-1", "gpu-2"], ["gpu-1", "gpu-2"]]
    # Two requests, no constraint: the T4 must go to the request only it serves, so the other gets the A100 only.
    split = inv2.diagnose([requests_of(claim(req("any"), req("t4", 1, T4_ONLY)))]).outcomes
    assert [[d.name for d in o.devices] for _r, o in split] == [["gpu-0", "gpu-1", "gpu-2"], ["gpu-1", "gpu-2"]]
    exclusive = allocator(rslice("n0", dev("gpu-0"), dev("gpu-1", T4))).diagnose(
        [requests_of(claim(req("any"), req("t4", 1, T4_ONLY)))]).outcomes
    assert [[d.name for d in o.devices] for _r, o in exclusive] == [["gpu-0"], ["gpu-1"]]
    # allocationMode All first: every device it takes; the request after it what is left.
    after_all = allocator(rslice("n0", dev("gpu-0"), dev("gpu-1", T4))).diagnose(
        [requests_of(claim(req("t4s", 1, T4_ONLY, allocationMode="All"), req("any")))]).outcomes
    assert [[d.name for d in o.devices] for _r, o in after_all] == [["gpu-1"], ["gpu-0"]]
    # The pod can land on n1 only: the subrequest n1 can serve, its devices there; on no node, nothing.
    ((_r, on_n1),) = inv.diagnose([requests_of(fa)], ["n1"]).outcomes
    assert ([d.name for d in on_n1.devices], on_n1.count) == (["gpu-0"], 1)
    ((_r, nowhere),) = inv.diagnose([requests_of(fa)], []).outcomes
    assert nowhere.devices == () and nowhere.reason.startswith("no ResourceSlice publishes a device on a node")


def test_a_search_past_its_budget_is_not_a_finding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight requests of one GPU each with distinct indices over seven GPUs whose indices repeat: the search runs
    out of steps before it proves there is none; that is said, never a finding."""
    slices = [rslice("n0", *(dev(f"gpu-{i}", index={"int": i % 4}) for i in range(7)))]
    obj = claim(*(req(f"r{i}") for i in range(5)), constraints=[{"distinctAttribute": f"{NV}/index"}])
    assert [p for p, _m in findings("dra-claim", obj, slices)] == ["/spec/devices/constraints/0"]
    monkeypatch.setattr(Allocator, "BUDGET", 3)
    assert findings("dra-claim", obj, slices) == []
    inv = allocator(*slices)
    outcomes = inv.diagnose([requests_of(claim(req("a", 5), constraints=[
        {"distinctAttribute": f"{NV}/index"}]))]).outcomes
    assert outcomes[0][1].unknown.startswith("the allocation search did not finish within 3 steps")
    # Found within the budget, but which devices it can get is past it: every candidate (the one without an index
    # too, which no allocation takes), not none.
    three = allocator(rslice("n0", dev("d0", index={"int": 0}), dev("d1", index={"int": 1}), dev("d2")))
    pair = [requests_of(claim(req("a", 2), constraints=[{"distinctAttribute": f"{NV}/index"}]))]
    ((_r, outcome),) = three.diagnose(pair).outcomes
    assert ([d.name for d in outcome.devices], outcome.unknown) == (["d0", "d1", "d2"], "")
    monkeypatch.setattr(Allocator, "BUDGET", 20_000)
    ((_r, outcome),) = allocator(rslice("n0", dev("d0", index={"int": 0}), dev("d1", index={"int": 1}),
                                        dev("d2"))).diagnose(pair).outcomes
    assert [d.name for d in outcome.devices] == ["d0", "d1"]


def test_a_decision_kept_for_one_pod_is_not_handed_to_another_with_other_names() -> None:
    """The same claims, the same nodes: the decision is kept; another pod whose claims have other names or live at
    other pointers (a Deployment's template) gets findings of its own."""
    slices = [rslice("n0", dev("gpu-0"))]
    inventory = build_inventory(slices)
    one = requests_of(claim(req("a"), req("b")))
    first = inventory.allocator.diagnose([one])
    assert inventory.allocator.diagnose([one]) is first
    entry = "/spec/template/spec/resourceClaims/0"
    moved = ClaimRequests("other", tuple(replace(r, claim="other", pointer=entry) for r in one.requests),
                          one.constraints, entry)
    second = inventory.allocator.diagnose([moved])
    assert [(r.claim, r.pointer) for r, _o in second.outcomes] == [("other", entry)] * 2
    assert [(f.claim, f.kind) for f in second.failures] == [("other", "overlap")]
    assert [(f.claim, f.kind) for f in first.failures] == [("c", "overlap")]


@pytest.mark.parametrize(("quantity", "written"), [
    (Fraction(3 * 2**40), "3Ti"), (Fraction(80 * 2**30), "80Gi"), (Fraction(512 * 2**20), "512Mi"),
    (Fraction(2048), "2Ki"), (Fraction(1000), "1000"), (Fraction(0), "0"), (Fraction(1, 2), "500m"),
    (Fraction(1, 3), "0.3333333333333333")])
def test_quantities_in_messages(quantity: Fraction, written: str) -> None:
    assert _quantity_text(quantity) == written


def test_an_allocation_without_known_places_reads_them_off_its_devices() -> None:
    """One place per node and kind of device, with the first device of the kind: a MIG device of another profile
    is another kind, even where its labels are its GPU's."""
    mig = {"type": {"string": "mig"}}
    devices = tuple(read_slice(rslice("n0", dev("gpu-0"), dev("gpu-1"), dev("gpu-2", T4), dev(
        "mig-0", **mig, profile={"string": "1g.10gb"}), dev("mig-1", **mig, profile={"string": "1g.10gb"}), dev(
        "mig-2", **mig, profile={"string": "3g.40gb"})))) + tuple(read_slice(rslice("n1", dev("gpu-0"))))
    places = Allocation(devices).placements
    assert [(dict(labels)["nvidia.com/gpu.product"], node, where, d.name) for labels, node, where, d in places] == [
        ("NVIDIA-A100-SXM4-80GB", "n0", "n0", "gpu-0"), ("Tesla-T4", "n0", "n0", "gpu-2"),
        ("NVIDIA-A100-SXM4-80GB", "n0", "n0", "mig-0"), ("NVIDIA-A100-SXM4-80GB", "n0", "n0", "mig-2"),
        ("NVIDIA-A100-SXM4-80GB", "n1", "n1", "gpu-0")]
    assert Allocation(devices, places=()).placements == ()


def reason_of(inventory: Allocator, cls: DeviceClassInfo, *selectors: str, nodes: list[str] | None = None) -> str:
    alt = read_claim_spec(claim(req("a", 1, *selectors))["spec"], "/spec")[0][0].alternatives[0]
    request = PodRequest("c", "a", "claim request a", "/p", (ResolvedAlternative(alt, cls),))
    ((_r, outcome),) = inventory.diagnose([ClaimRequests("c", (request,))], nodes).outcomes
    return outcome.reason


def test_why_no_device_serves_a_request() -> None:
    products = ["Tesla T4", "NVIDIA L4", "NVIDIA A10", "NVIDIA L40S", "NVIDIA H100 80GB HBM3"]
    five = allocator(rslice("n0", *(dev(f"gpu-{i}", p) for i, p in enumerate(products))))
    h200 = f"device.attributes['{NV}'].productName == 'NVIDIA H200'"
    assert reason_of(five, GPU_CLASS, h200) == (
        f"5 {NV} devices in reach: NVIDIA-A10, NVIDIA-H100-80GB-HBM3, NVIDIA-L4, NVIDIA-L40S ..., and none of the 5 "
        f"of DeviceClass {NV} satisfies the selector \"{h200}\"")
    one = allocator(rslice("n0", dev("gpu-0", T4)))
    mig_class = DeviceClassInfo("mig.nvidia.com", (f"device.attributes['{NV}'].type == 'mig'",), None, "input")
    assert reason_of(one, mig_class) == (f"no device is in DeviceClass mig.nvidia.com (1 {NV} device in reach: "
                                         "Tesla-T4)")
    bare = DeviceClassInfo("bare.example.com", (), None, "input")
    assert reason_of(one, bare, h200) == (f"no device satisfies DeviceClass bare.example.com (1 {NV} device in "
                                          "reach: Tesla-T4)")
    unnamed = allocator(rslice("n0", {"name": "x", "attributes": {"model": {"string": "x"}}}))
    assert reason_of(unnamed, bare, f"'productName' in device.attributes['{NV}']") == (
        f"no device satisfies DeviceClass bare.example.com (1 {NV} device in reach)")
    assert reason_of(unnamed, bare, h200) == (
        "a selector fails on device x (n0): no such key: 'productName', and the scheduler aborts the allocation")
    assert reason_of(one, GPU_CLASS, nodes=["elsewhere"]) == (
        "no ResourceSlice publishes a device on a node the pod can land on (its nodeSelector, affinity and "
        "tolerations)")


def test_slices_bound_to_no_node_reach_every_node_when_labels_are_unknown() -> None:
    selector = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]}
    inventory = allocator(rslice("n0", dev("gpu-0")), rslice(None, dev("x-0"), nodeSelector=selector))
    two = requests_of(claim(req("a"), req("b")))
    assert inventory.diagnose([two], ["n0"]).failures == ()  # no labels given: the selector is not evaluated
    assert [f.kind for f in inventory.diagnose([two], ["n0"], lambda n: {"rack": "r0"}).failures] == ["overlap"]
    assert inventory.diagnose([two], ["n0"], lambda n: {"rack": "r1"}).failures == ()
    assert inventory.diagnose([two]).failures == ()  # no Nodes read: every node of the slices
    shared_only = allocator(rslice(None, dev("x-0"), dev("x-1"), allNodes=True))
    ((_r, a), (_s, b)) = shared_only.diagnose([two]).outcomes
    assert [d.name for d in a.devices] == [d.name for d in b.devices] == ["x-0", "x-1"]


def taint_rule(selector: dict[str, Any] | None, effect: str = "NoSchedule") -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": {"key": "example.com/drain", "value": "rack-3", "effect": effect}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceTaintRule", "metadata": {"name": "drain"},
            "spec": spec}


@pytest.mark.parametrize(("rule", "tainted"), [
    (taint_rule({}), ["n0/gpu-0", "n0/gpu-1", "n1/gpu-0"]),  # the empty selector: every device
    (taint_rule(None), []),  # no selector: none
    (taint_rule({"driver": NV, "pool": "n0"}), ["n0/gpu-0", "n0/gpu-1"]),
    (taint_rule({"pool": "n0", "device": "gpu-1"}), ["n0/gpu-1"]),
    (taint_rule({"device": "gpu-0"}), ["n0/gpu-0", "n1/gpu-0"]),
    (taint_rule({"driver": "other.example.com"}), []),
    (taint_rule({"deviceClassName": NV}), []),  # the alpha API's class and CEL selectors are not read
    (taint_rule({"selectors": [{"cel": {"expression": "true"}}]}), []),
    ({"kind": "DeviceTaintRule", "spec": {"deviceSelector": {}, "taint": {"key": "k"}}}, []),  # no effect
])
def test_device_taint_rules_taint_the_devices_they_select(rule: dict[str, Any], tainted: list[str]) -> None:
    inventory = build_inventory([rslice("n0", dev("gpu-0"), dev("gpu-1")), rslice("n1", dev("gpu-0")), rule])
    assert [f"{d.pool}/{d.name}" for d in inventory.devices if d.taints] == tainted
    for d in inventory.devices:
        assert d.taints in ((), (DeviceTaint("example.com/drain", "rack-3", "NoSchedule"),))


def test_a_device_taint_rule_in_the_nodes_file_keeps_requests_off_the_devices() -> None:
    slices = [rslice("n0", dev("gpu-0")), taint_rule({"pool": "n0"}, "NoExecute")]
    assert findings("dra-claim", claim(req("a")), slices) == alone(
        "a", "the 1 matching device is tainted (example.com/drain=rack-3:NoExecute) and the request does not "
             "tolerate that taint")
    tolerating = claim(req("a", tolerations=[{"operator": "Exists"}]))
    assert findings("dra-claim", tolerating, slices) == []


def claim_findings(obj: dict[str, Any], slices: list[dict[str, Any]], *, authoritative: bool) -> list[tuple[str, str]]:
    kb = make_kb()
    cluster = build_cluster([{"metadata": {"name": "n0", "labels": {"kubernetes.io/hostname": "n0"}}}], kb)
    cluster.dra = build_inventory(slices)
    ctx = EvalContext(kb, cluster, CrlIndex(), dra=build_index([obj], authoritative=authoritative))
    rule = Rule("r", "s", Severity.ERROR, checks.get("dra-claim"), {}, "why", "how", (), "test")
    return [(f.pointer, f.message) for f in evaluate(obj, [rule], ctx).findings]


def test_the_device_class_of_a_request_is_the_clusters() -> None:
    """The webhook's live view is the whole cluster: a class it does not hold does not exist (the chart's built-in
    ones neither); lint's files are not: an unknown class is not checked. A class read beside the slices is
    applied."""
    other = claim(req("gpu"))
    other["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "nope.example.com"
    assert claim_findings(other, ONE, authoritative=True) == [
        ("/spec/devices/requests/0", "request 'gpu': DeviceClass 'nope.example.com' does not exist; no device can be "
                                     "allocated for it")]
    assert claim_findings(claim(req("gpu")), ONE, authoritative=True) == [
        ("/spec/devices/requests/0", f"request 'gpu': DeviceClass '{NV}' does not exist; no device can be allocated "
                                     "for it")]
    assert claim_findings(other, ONE, authoritative=False) == []
    assert claim_findings(claim(req("gpu", 2)), ONE, authoritative=False) == alone(
        "gpu", "it asks for 2 devices on one node and at most 1 matches on any node")
    t4_class = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "nope.example.com"},
                "spec": {"selectors": [{"cel": {"expression": T4_ONLY}}]}}
    assert claim_findings(other, [*ONE, t4_class], authoritative=True) == alone(
        "gpu", f"no device is in DeviceClass nope.example.com (1 {NV} device in reach: NVIDIA-A100-SXM4-80GB)")
    not_dra = {**claim(req("gpu", 2)), "apiVersion": "example.com/v1"}
    assert claim_findings(not_dra, ONE, authoritative=False) == []
