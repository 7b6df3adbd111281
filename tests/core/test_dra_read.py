"""compatcheck.core.dra, reading: DeviceClasses, the attributes of v1 ResourceSlice devices and the GPU Feature
Discovery labels NVIDIA's GPU devices read as, the requests and constraints of a v1 ResourceClaimSpec, and the index
of classes, claims and templates. Exact return values on hand-written objects."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from compatcheck.core.cel import DeviceInput, Semver
from compatcheck.core.dra import (
    BUILTIN_CLASSES,
    CHART_SOURCE,
    IMPLICIT_EXTENDED_PREFIX,
    Alternative,
    ClaimConstraint,
    DeviceClassInfo,
    DeviceRequest,
    DraIndex,
    build_index,
    build_inventory,
    claim_spec_of,
    device_labels,
    is_dra,
    iter_requests,
    read_claim_spec,
    read_constraints,
    read_device_class,
    read_slice,
)

NV = "gpu.nvidia.com"


@pytest.mark.parametrize(("obj", "expected"), [
    ({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass"}, True),
    ({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim"}, True),
    ({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate"}, True),
    ({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice"}, True),
    ({"apiVersion": "resource.k8s.io/v1", "kind": "Pod"}, False),
    ({"apiVersion": "resource.k8s.iox/v1", "kind": "DeviceClass"}, False),
    ({"apiVersion": "resource.k8s.io", "kind": "DeviceClass"}, False),
    ({"apiVersion": 1, "kind": "DeviceClass"}, False),
])
def test_what_is_a_dra_object(obj: dict[str, Any], expected: bool) -> None:
    assert is_dra(obj) is expected


def test_device_classes_read_their_cel_selectors_and_extended_resource() -> None:
    obj = {"metadata": {"name": "a100"}, "spec": {
        "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}, {"cel": {"expression": 3}},
                      {"cel": "x"}, "junk", {"other": {}}, {"cel": {"expression": "true"}}],
        "extendedResourceName": "example.com/a100"}}
    assert read_device_class(obj) == DeviceClassInfo("a100", ("device.driver == 'gpu.nvidia.com'", "true"),
                                                     "example.com/a100", "input")
    assert read_device_class({"metadata": {"name": "x"}}, "cluster") == DeviceClassInfo("x", (), None, "cluster")
    assert read_device_class({"metadata": {"name": "x"}, "spec": {"selectors": "x", "extendedResourceName": 3}}) \
        == DeviceClassInfo("x", (), None, "input")
    assert read_device_class({"metadata": {}}) is None
    assert read_device_class({"spec": {}}) is None


def test_the_driver_charts_device_classes() -> None:
    assert dict(BUILTIN_CLASSES) == {
        "gpu.nvidia.com": DeviceClassInfo("gpu.nvidia.com", (
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",), None,
            CHART_SOURCE),
        "mig.nvidia.com": DeviceClassInfo("mig.nvidia.com", (
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",), None,
            CHART_SOURCE)}


def a_slice(devices: list[Any], driver: Any = NV, **spec: Any) -> dict[str, Any]:
    return {"kind": "ResourceSlice", "spec": {"driver": driver, "pool": {"name": "pool-a"}, "devices": devices,
                                              **spec}}


def attrs(device: Any) -> dict[str, dict[str, Any]]:
    """The attributes of a device, Semvers as their text (they compare only through their methods)."""
    return {domain: {k: ("semver", v.text) if isinstance(v, Semver) else v for k, v in ids.items()}
            for domain, ids in device.input.attributes.items()}


def test_attribute_values_keep_their_type() -> None:
    (d,) = read_slice(a_slice([{"name": "gpu-0", "attributes": {
        "productName": {"string": "Tesla T4"}, "index": {"int": 0}, "big": {"int": 1 << 40},
        "mig": {"bool": False}, "cudaComputeCapability": {"version": "7.5.0"},
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"}, "a/b/c": {"string": "x"},
        # a string wins over other members; a bool is no int; an invalid version and unknown types are dropped
        "both": {"string": "s", "int": 1}, "flag": {"int": True}, "v": {"version": "7.5"}, "n": {"float": 1.5},
        "none": {"string": None}, "scalar": "text", "empty": {"string": ""}, "zero": {"bool": True, "int": 0},
        "intversion": {"int": "1", "version": "1.2.3"}}}]))
    assert attrs(d) == {
        NV: {"productName": "Tesla T4", "index": 0, "big": 1 << 40, "mig": False,
             "cudaComputeCapability": ("semver", "7.5.0"), "both": "s", "empty": "", "zero": True,
             "intversion": ("semver", "1.2.3")},
        "resource.kubernetes.io": {"pcieRoot": "pci0000:00"}, "a/b": {"c": "x"}}
    assert type(attrs(d)[NV]["index"]) is int and type(attrs(d)[NV]["mig"]) is bool


def test_slice_devices_are_placed_and_measured() -> None:
    devices = read_slice(a_slice([
        {"name": "gpu-0", "capacity": {"memory": {"value": "16Gi"}, "example.com/slots": {"value": 4},
                                       "bad": {"value": "lots"}, "raw": "2", "missing": {}}},
        {"attributes": {"productName": {"string": "no name"}}},
        "junk",
        {"name": "gpu-1", "nodeName": "other", "allowMultipleAllocations": True},
        {"name": "gpu-2", "allNodes": True, "nodeSelector": {"nodeSelectorTerms": []},
         "allowMultipleAllocations": "yes"}], nodeName="n1"))
    assert [(d.driver, d.pool, d.name, d.node, d.all_nodes, d.node_selector, d.input.allow_multiple_allocations)
            for d in devices] == [
        (NV, "pool-a", "gpu-0", "n1", False, None, False),
        (NV, "pool-a", "gpu-1", "other", False, None, True),
        (NV, "pool-a", "gpu-2", "n1", True, {"nodeSelectorTerms": []}, False)]
    assert devices[0].input.capacity == {NV: {"memory": Fraction(16 * 2**30), "raw": Fraction(2)},
                                         "example.com": {"slots": Fraction(4)}}
    assert devices[1].input.capacity == {} and devices[0].input.driver == NV
    assert [d.where() for d in devices] == ["n1", "other", "n1"]


def test_slices_not_bound_to_a_node() -> None:
    selector = {"nodeSelectorTerms": [{"matchLabels": {"a": "b"}}]}
    everywhere = read_slice(a_slice([{"name": "d"}], allNodes=True))
    selected = read_slice(a_slice([{"name": "d"}], nodeSelector=selector, allNodes="true"))
    assert [(d.node, d.all_nodes, d.node_selector, d.where()) for d in everywhere + selected] == [
        (None, True, None, "pool pool-a"), (None, False, selector, "pool pool-a")]
    bare = read_slice({"spec": {"devices": [{"name": "d", "attributes": {"x": {"int": 1}}}],
                               "nodeSelector": "not a selector"}})
    assert [(d.driver, d.pool, d.node_selector, d.input.attributes, d.labels) for d in bare] == [
        ("", "", None, {"": {"x": 1}}, ())]
    assert read_slice({}) == [] and read_slice({"spec": {"devices": {"name": "d"}}}) == []


def gpu(**attributes: Any) -> DeviceInput:
    return DeviceInput(NV, {NV: attributes, "resource.kubernetes.io": {"productName": "ignored"}}, {})


@pytest.mark.parametrize(("device", "expected"), [
    (gpu(productName=" NVIDIA A100-SXM4-40GB ", cudaComputeCapability=Semver("8.0.0"),
         driverVersion=Semver("535.104.5"), cudaDriverVersion=Semver("12.2.0")), (
        ("nvidia.com/cuda.driver-version.full", "535.104.05"), ("nvidia.com/cuda.runtime-version.major", "12"),
        ("nvidia.com/cuda.runtime-version.minor", "2"), ("nvidia.com/gpu.compute.major", "8"),
        ("nvidia.com/gpu.compute.minor", "0"), ("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB"))),
    # a driver's patch level as NVIDIA writes it (two digits at least), none when it is 0
    (gpu(driverVersion=Semver("550.54.15")), (("nvidia.com/cuda.driver-version.full", "550.54.15"),)),
    (gpu(driverVersion=Semver("570.100.0")), (("nvidia.com/cuda.driver-version.full", "570.100"),)),
    (gpu(driverVersion=Semver("418.1.123")), (("nvidia.com/cuda.driver-version.full", "418.1.123"),)),
    (gpu(cudaComputeCapability=Semver("12.1.0"), productName="Tesla T4"), (
        ("nvidia.com/gpu.compute.major", "12"), ("nvidia.com/gpu.compute.minor", "1"),
        ("nvidia.com/gpu.product", "Tesla-T4"))),
    (gpu(cudaDriverVersion=Semver("13.0.1")), (("nvidia.com/cuda.runtime-version.major", "13"),
                                               ("nvidia.com/cuda.runtime-version.minor", "0"))),
    # values of the wrong type say nothing
    (gpu(productName="", cudaComputeCapability="8.0", driverVersion="535.104.05", cudaDriverVersion=12), ()),
    (gpu(productName=3), ()),
    (DeviceInput(NV, {}, {}), ()),
    # another driver's device has no GPU labels, whatever it publishes
    (DeviceInput("example.com", {NV: {"productName": "Tesla T4"}}, {}), ()),
])
def test_nvidia_gpu_attributes_read_as_gpu_feature_discovery_labels(device: DeviceInput,
                                                                     expected: tuple[Any, ...]) -> None:
    assert device_labels(device) == expected


def test_slice_devices_carry_their_labels() -> None:
    (d,) = read_slice(a_slice([{"name": "g", "attributes": {
        "productName": {"string": "Tesla T4"}, "driverVersion": {"version": "550.54.15"}}}]))
    assert d.labels == (("nvidia.com/cuda.driver-version.full", "550.54.15"), ("nvidia.com/gpu.product", "Tesla-T4"))
    (other,) = read_slice(a_slice([{"name": "g", "attributes": {"productName": {"string": "Tesla T4"}}}],
                                  driver="example.com"))
    assert other.labels == () and attrs(other) == {"example.com": {"productName": "Tesla T4"}}


# ------------------------------------------------------------------------------------------------ claim specs


def spec(*requests: Any, constraints: Any = None, config: Any = None) -> dict[str, Any]:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints is not None:
        devices["constraints"] = constraints
    if config is not None:
        devices["config"] = config
    return {"devices": devices}


def test_requests_exactly_and_first_available() -> None:
    requests, sharing = read_claim_spec(spec(
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2, "selectors": [
            {"cel": {"expression": "true"}}]}},
        {"exactly": {"deviceClassName": "mig.nvidia.com", "allocationMode": "All", "count": 3}},
        {"name": "any", "firstAvailable": [{"name": "big", "deviceClassName": "a", "count": 0},
                                           {"deviceClassName": "b", "count": -1},
                                           {"name": "", "count": "2", "allocationMode": "ExactCount"}]},
        "junk"), "/spec")
    assert requests == [
        DeviceRequest("gpu", (Alternative("gpu", "gpu.nvidia.com", ("true",), 2, "/spec/devices/requests/0/exactly"),),
                      "/spec/devices/requests/0"),
        DeviceRequest("requests[1]", (Alternative("requests[1]", "mig.nvidia.com", (), None,
                                                  "/spec/devices/requests/1/exactly"),), "/spec/devices/requests/1"),
        DeviceRequest("any", (
            Alternative("any/big", "a", (), 1, "/spec/devices/requests/2/firstAvailable/0"),
            Alternative("any/1", "b", (), 1, "/spec/devices/requests/2/firstAvailable/1"),
            Alternative("any/2", "", (), 1, "/spec/devices/requests/2/firstAvailable/2")),
            "/spec/devices/requests/2"),
        DeviceRequest("requests[3]", (Alternative("requests[3]", "", (), 1, "/spec/devices/requests/3"),),
                      "/spec/devices/requests/3")]
    assert sharing is None
    assert read_claim_spec({}, "/spec") == ([], None)
    assert read_claim_spec(spec(), "/x") == ([], None)


def test_v1beta1_requests_are_inline() -> None:
    (r,), _ = read_claim_spec(spec({"name": "g", "deviceClassName": "c", "count": 2, "allocationMode": "ExactCount",
                                    "selectors": [{"cel": {"expression": "true"}}]}), "/spec")
    assert r == DeviceRequest("g", (Alternative("g", "c", ("true",), 2, "/spec/devices/requests/0"),),
                              "/spec/devices/requests/0")


def test_a_count_of_one_is_the_default() -> None:
    (r,), _ = read_claim_spec(spec({"name": "g", "exactly": {"deviceClassName": "c"}}), "")
    (one,), _ = read_claim_spec(spec({"name": "g", "exactly": {"deviceClassName": "c", "count": 1}}), "")
    assert r.alternatives[0].count == 1 and one.alternatives[0].count == 1


CONSTRAINTS = [
    {"matchAttribute": "gpu.nvidia.com/productName"},
    {"distinctAttribute": "resource.kubernetes.io/pcieRoot", "requests": ["b", "c/small"]},
    {"matchAttribute": "gpu.nvidia.com/driverVersion", "distinctAttribute": "gpu.nvidia.com/uuid",
     "requests": ["a"]},
    {"requests": ["a"]}, {"matchAttribute": 3}, "junk",
    {"matchAttribute": "gpu.nvidia.com/architecture", "requests": ["nope"]},
]
THREE = spec({"name": "a", "exactly": {"deviceClassName": "x"}}, {"name": "b", "exactly": {"deviceClassName": "x"}},
             {"name": "c", "firstAvailable": [{"name": "small", "deviceClassName": "x"}]}, constraints=CONSTRAINTS)


def test_constraints_name_the_requests_they_cover() -> None:
    # names: the constraint's own `requests` list as written (request or request/subrequest; () means all)
    assert read_constraints(THREE, "/spec/spec") == [
        ClaimConstraint("matchAttribute", "gpu.nvidia.com/productName", ("a", "b", "c"),
                        "/spec/spec/devices/constraints/0"),
        ClaimConstraint("distinctAttribute", "resource.kubernetes.io/pcieRoot", ("b", "c"),
                        "/spec/spec/devices/constraints/1", ("b", "c/small")),
        ClaimConstraint("matchAttribute", "gpu.nvidia.com/driverVersion", ("a",), "/spec/spec/devices/constraints/2",
                        ("a",)),
        ClaimConstraint("distinctAttribute", "gpu.nvidia.com/uuid", ("a",), "/spec/spec/devices/constraints/2",
                        ("a",)),
        ClaimConstraint("matchAttribute", "gpu.nvidia.com/architecture", (), "/spec/spec/devices/constraints/6",
                        ("nope",))]
    assert read_constraints({}, "") == []
    # requests without a name are named by their index
    assert read_constraints(spec({"exactly": {}}, {"name": "b"}, constraints=[{"matchAttribute": "x/y"}]), "") == [
        ClaimConstraint("matchAttribute", "x/y", ("requests[0]", "b"), "/devices/constraints/0")]
    c = ClaimConstraint("matchAttribute", "x/y", ("a", "b"), "")
    assert (c.covers("a"), c.covers("b"), c.covers("c"), c.covers("a/b")) == (True, True, False, False)


def test_constraints_are_given_to_the_requests_they_cover() -> None:
    requests, _ = read_claim_spec(THREE, "/spec")
    assert [(r.name, r.match_attributes, r.distinct_attributes) for r in requests] == [
        ("a", ("gpu.nvidia.com/productName", "gpu.nvidia.com/driverVersion"), ("gpu.nvidia.com/uuid",)),
        ("b", ("gpu.nvidia.com/productName",), ("resource.kubernetes.io/pcieRoot",)),
        ("c", ("gpu.nvidia.com/productName",), ("resource.kubernetes.io/pcieRoot",))]


@pytest.mark.parametrize(("config", "expected"), [
    ([{"opaque": {"driver": NV, "parameters": {"sharing": {"strategy": "MPS"}}}}], "mps"),
    ([{"opaque": {"driver": NV, "parameters": {"sharing": {"strategy": "TimeSlicing"}}}}], "time-slicing"),
    ([{"opaque": {"driver": NV, "parameters": {"sharing": {"strategy": "time-slicing"}}}}], "time-slicing"),
    ([{"opaque": {"driver": NV, "parameters": {"sharing": {"strategy": "Time-Slicing"}}}}], "time-slicing"),
    # an unknown strategy or another driver's config changes nothing; the last known one wins
    ([{"opaque": {"driver": NV, "parameters": {"sharing": {"strategy": "Exclusive"}}}}], None),
    ([{"opaque": {"driver": "example.com", "parameters": {"sharing": {"strategy": "MPS"}}}}], None),
    ([{"opaque": {"driver": NV, "parameters": {"sharing": {"strategy": "MPS"}}}},
      {"opaque": {"driver": NV, "parameters": {"sharing": {"strategy": "Exclusive"}}}},
      {"opaque": {"driver": NV, "parameters": {"sharing": {}}}}, {"opaque": {"driver": NV}}, "junk"], "mps"),
    ([{"opaque": {"driver": NV, "parameters": {"sharing": {"strategy": "MPS"}}}},
      {"opaque": {"driver": NV, "parameters": {"sharing": {"strategy": "TimeSlicing"}}}}], "time-slicing"),
    ([{"opaque": {"driver": NV, "parameters": {"sharing": {"strategy": 1}}}}], None),
    ([{"opaque": {"driver": "example.com"}},
      {"opaque": {"driver": NV, "parameters": {"sharing": {"strategy": "MPS"}}}}], "mps"),
])
def test_the_sharing_strategy_of_nvidias_config(config: list[Any], expected: str | None) -> None:
    assert read_claim_spec(spec(config=config), "")[1] == expected


def test_claim_specs_of_claims_and_templates() -> None:
    inner = spec({"name": "g", "exactly": {"deviceClassName": "c"}})
    claim = {"kind": "ResourceClaim", "spec": inner}
    template = {"kind": "ResourceClaimTemplate", "spec": {"spec": inner}}
    assert claim_spec_of(claim) == (inner, "/spec")
    assert claim_spec_of(template) == (inner, "/spec/spec")
    assert claim_spec_of({"kind": "ResourceClaimTemplate"}) == ({}, "/spec/spec")
    assert claim_spec_of({"kind": "DeviceClass", "spec": inner}) is None
    assert [(r.name, r.pointer, s) for r, s in iter_requests(template)] == [("g", "/spec/spec/devices/requests/0",
                                                                            inner)]
    assert [(r.name, r.pointer) for r, _s in iter_requests(claim)] == [("g", "/spec/devices/requests/0")]
    assert list(iter_requests({"kind": "Pod", "spec": inner})) == []


# ------------------------------------------------------------------------------------------------ the index


def obj(kind: str, name: str | None, namespace: str | None = None, **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if name is not None:
        meta["name"] = name
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": meta, "spec": spec}


def test_the_index_keeps_classes_claims_and_templates() -> None:
    objects: list[Any] = [
        obj("DeviceClass", "a100", extendedResourceName="example.com/a100"), obj("DeviceClass", None),
        obj("ResourceClaim", "c", "ml"), obj("ResourceClaim", "c", "dev"), obj("ResourceClaim", "bare"),
        obj("ResourceClaimTemplate", "t", "ml"), obj("ResourceClaimTemplate", None, "ml"),
        obj("ResourceSlice", "s"), obj("Pod", "p"), "junk"]
    index = build_index(objects)
    assert index.classes == {"a100": DeviceClassInfo("a100", (), "example.com/a100", "input")}
    assert index.claims == {("ml", "c"): objects[2], ("dev", "c"): objects[3], (None, "bare"): objects[4]}
    assert index.templates == {("ml", "t"): objects[5]}
    assert index.authoritative is False and build_index([], authoritative=True).authoritative is True
    live = DraIndex()
    live.add(objects[0], "cluster")
    assert live.classes == {"a100": DeviceClassInfo("a100", (), "example.com/a100", "cluster")}
    # in the namespace, else written without one (applied to the pod's); without a namespace, one of that name
    assert index.claim("ml", "c") is objects[2] and index.claim("dev", "c") is objects[3]
    assert index.claim("ml", "bare") is objects[4] and index.claim(None, "bare") is objects[4]
    assert index.claim("other", "c") is None
    assert index.claim(None, "c") is None  # two of that name
    assert index.template(None, "t") is objects[5] and index.template("ml", "t") is objects[5]
    assert index.template("dev", "t") is None and index.template("ml", "c") is None


def test_device_classes_from_the_index_the_inventory_or_the_chart() -> None:
    own = DeviceClassInfo("gpu.nvidia.com", ("true",), None, "input")
    extra = {"gpu.nvidia.com": DeviceClassInfo("gpu.nvidia.com", ("false",), None, "cluster"),
             "x": DeviceClassInfo("x", (), None, "cluster")}
    index = DraIndex(classes={"gpu.nvidia.com": own})
    assert index.device_class("gpu.nvidia.com", extra) is own
    assert index.device_class("x", extra) is extra["x"]
    assert index.device_class("mig.nvidia.com", extra) is BUILTIN_CLASSES["mig.nvidia.com"]
    assert index.device_class("mig.nvidia.com") is BUILTIN_CLASSES["mig.nvidia.com"]
    assert index.device_class("y") is None
    live = DraIndex(authoritative=True)
    assert live.device_class("mig.nvidia.com") is None
    assert live.device_class("x", extra) is extra["x"]


def test_an_inventory_of_slices_and_classes() -> None:
    objects: list[Any] = [obj("DeviceClass", "a100", selectors=[{"cel": {"expression": "true"}}]),
                          obj("DeviceClass", None), a_slice([{"name": "g0"}, {"name": "g1"}], nodeName="n1"),
                          obj("ResourceClaim", "c"), a_slice([{"name": "g2"}], nodeName="n2")]
    inventory = build_inventory(objects)
    assert inventory.classes == {"a100": DeviceClassInfo("a100", ("true",), None, "cluster")}
    assert [(d.name, d.node) for d in inventory.devices] == [("g0", "n1"), ("g1", "n1"), ("g2", "n2")]
    assert inventory.allocator.devices is inventory.devices
    assert build_inventory(objects, "input").classes == {"a100": DeviceClassInfo("a100", ("true",), None, "input")}


def test_extended_resources_map_to_their_device_class() -> None:
    a = DeviceClassInfo("a", (), "example.com/gpu", "input")
    b = DeviceClassInfo("b", (), None, "input")
    cluster_a = DeviceClassInfo("a", (), "example.com/other", "cluster")
    index = DraIndex(classes={"a": a, "b": b})
    assert index.extended_resources() == {IMPLICIT_EXTENDED_PREFIX + "a": a, "example.com/gpu": a,
                                          IMPLICIT_EXTENDED_PREFIX + "b": b}
    # the index's own classes override the inventory's
    assert index.extended_resources({"a": cluster_a}) == {
        IMPLICIT_EXTENDED_PREFIX + "a": a, "example.com/other": cluster_a, "example.com/gpu": a,
        IMPLICIT_EXTENDED_PREFIX + "b": b}
    assert IMPLICIT_EXTENDED_PREFIX == "deviceclass.resource.kubernetes.io/"
    assert DraIndex().extended_resources() == {}
