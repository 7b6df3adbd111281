"""compatcheck.core.dra, a pod's claims: ``resourceClaims`` resolved against an index of templates, claims and
DeviceClasses (with the notes for what is missing), a NIMService's ``draResources`` and the CEL the NIM Operator
writes for a ``claimCreationSpec``, and the requests each container uses. Exact results."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core.dra import (
    BUILTIN_CLASSES,
    Alternative,
    ClaimConstraint,
    DeviceClassInfo,
    PodClaims,
    PodRequest,
    ResolvedAlternative,
    build_index,
    container_claim_requests,
    has_claims,
    pod_claims,
)

NV = "gpu.nvidia.com"
GPU = BUILTIN_CLASSES[NV]


def template(name: str, namespace: str | None, *requests: Any, kind: str = "ResourceClaimTemplate",
             constraints: Any = None, config: Any = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints is not None:
        devices["constraints"] = constraints
    if config is not None:
        devices["config"] = config
    inner = {"devices": devices}
    return {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": meta,
            "spec": inner if kind == "ResourceClaim" else {"spec": inner}}


def exactly(name: str, cls: str = NV, *selectors: str, count: int = 1) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": cls, "count": count,
                                      "selectors": [{"cel": {"expression": s}} for s in selectors]}}


A100 = DeviceClassInfo("a100", ("device.attributes['gpu.nvidia.com'].productName.contains('A100')",), None, "input")
OBJECTS = [
    template("t4", "ml", exactly("gpu", NV, "true", count=2),
             config=[{"opaque": {"driver": NV, "parameters": {"sharing": {"strategy": "MPS"}}}}]),
    template("pair", "ml", exactly("a", "a100"), exactly("b", "mig.nvidia.com"), exactly("c", "missing"),
             constraints=[{"matchAttribute": "gpu.nvidia.com/productName", "requests": ["a", "b"]},
                          {"distinctAttribute": "gpu.nvidia.com/uuid", "requests": ["c"]}]),
    template("shared", "ml", exactly("gpu"), kind="ResourceClaim"),
    template("shared", "dev", exactly("other", "mig.nvidia.com"), kind="ResourceClaim"),
    {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "a100"},
     "spec": {"selectors": [{"cel": {"expression": A100.selectors[0]}}]}},
]


def claims(entries: list[Any], namespace: str | None = "ml", *, authoritative: bool = False,
           extra: dict[str, DeviceClassInfo] | None = None, **spec: Any) -> PodClaims:
    return pod_claims({"resourceClaims": entries, **spec}, "/spec/template/spec", namespace,
                      build_index(OBJECTS, authoritative=authoritative), extra)


def test_a_template_and_a_claim_resolved() -> None:
    pc = claims([{"name": "gpus", "resourceClaimTemplateName": "t4"}, {"name": "one", "resourceClaimName": "shared"}])
    t4 = PodRequest("gpus", "gpu", "ResourceClaimTemplate ml/t4 request 'gpu'", "/spec/template/spec/resourceClaims/0",
                    (ResolvedAlternative(Alternative("gpu", NV, ("true",), 2, "/spec/spec/devices/requests/0/exactly"),
                                         GPU),), "mps")
    shared = PodRequest("one", "gpu", "ResourceClaim ml/shared request 'gpu'", "/spec/template/spec/resourceClaims/1",
                        (ResolvedAlternative(Alternative("gpu", NV, (), 1, "/spec/devices/requests/0/exactly"), GPU),))
    pointers = {"gpus": "/spec/template/spec/resourceClaims/0", "one": "/spec/template/spec/resourceClaims/1"}
    assert pc == PodClaims((t4, shared), {"gpus": (t4,), "one": (shared,)}, (), {}, pointers)


def test_classes_constraints_and_notes_of_a_template() -> None:
    pc = claims([{"name": "p", "resourceClaimTemplateName": "pair"}])
    where = "ResourceClaimTemplate ml/pair"
    ptr = "/spec/template/spec/resourceClaims/0"
    assert [(r.claim, r.request, r.what, r.pointer, [ra.device_class for ra in r.alternatives], r.sharing,
             r.match_attributes, r.distinct_attributes) for r in pc.requests] == [
        ("p", "a", f"{where} request 'a'", ptr, [A100], None, ("gpu.nvidia.com/productName",), ()),
        ("p", "b", f"{where} request 'b'", ptr, [BUILTIN_CLASSES["mig.nvidia.com"]], None,
         ("gpu.nvidia.com/productName",), ()),
        ("p", "c", f"{where} request 'c'", ptr, [None], None, (), ("gpu.nvidia.com/uuid",))]
    assert pc.notes == ((ptr, "DeviceClass 'missing' of ResourceClaimTemplate ml/pair request 'c' is not in the "
                              "input: its selectors were not applied"),)
    # every constraint, with the requests (or request/subrequest names) it covers, for the allocator
    assert pc.constraints == {"p": (
        ClaimConstraint("matchAttribute", "gpu.nvidia.com/productName", ("a", "b"), "/spec/spec/devices/constraints/0",
                        ("a", "b")),
        ClaimConstraint("distinctAttribute", "gpu.nvidia.com/uuid", ("c",), "/spec/spec/devices/constraints/1",
                        ("c",)))}
    assert pc.by_claim == {"p": pc.requests}


def test_the_live_views_notes_say_what_does_not_exist() -> None:
    pc = claims([{"name": "p", "resourceClaimTemplateName": "pair"}, {"name": "x", "resourceClaimName": "gone"},
                 {"name": "y", "resourceClaimTemplateName": "gone"}], authoritative=True)
    assert pc.notes == (
        ("/spec/template/spec/resourceClaims/0", "DeviceClass 'mig.nvidia.com' of ResourceClaimTemplate ml/pair "
                                                 "request 'b' does not exist: its selectors were not applied"),
        ("/spec/template/spec/resourceClaims/0", "DeviceClass 'missing' of ResourceClaimTemplate ml/pair request 'c' "
                                                 "does not exist: its selectors were not applied"),
        ("/spec/template/spec/resourceClaims/1", "ResourceClaim ml/gone (claim 'x') does not exist (yet): the devices "
                                                 "it requests were not checked"),
        ("/spec/template/spec/resourceClaims/2", "ResourceClaimTemplate ml/gone (claim 'y') does not exist (yet): "
                                                 "the devices it requests were not checked"))
    assert [ra.device_class for r in pc.requests for ra in r.alternatives] == [A100, None, None]
    assert list(pc.by_claim) == ["p"]


def test_the_inventorys_classes_resolve_too() -> None:
    cluster_cls = DeviceClassInfo("missing", ("true",), None, "cluster")
    pc = claims([{"name": "p", "resourceClaimTemplateName": "pair"}], extra={"missing": cluster_cls})
    assert [ra.device_class for r in pc.requests for ra in r.alternatives] == [
        A100, BUILTIN_CLASSES["mig.nvidia.com"], cluster_cls]
    assert pc.notes == ()


def test_missing_claims_are_notes_and_unnamed_entries_are_skipped() -> None:
    pc = claims([{"name": "a", "resourceClaimName": "nope"}, {"resourceClaimName": "shared"}, {"name": "b"},
                 "junk", {"name": "c", "resourceClaimTemplateName": "t4", "resourceClaimName": "shared"}],
                namespace=None)
    assert [r.claim for r in claims([{"name": "b"}, {"name": "c", "resourceClaimName": "shared"}]).requests] == ["c"]
    assert pc.notes == (("/spec/template/spec/resourceClaims/0", "ResourceClaim nope (claim 'a') is not in the "
                                                                 "input: the devices it requests were not checked"),)
    # a template wins over a claim of the same entry; without a namespace the one of that name is found
    assert [(r.claim, r.what) for r in pc.requests] == [("c", "ResourceClaimTemplate t4 request 'gpu'")]


def test_a_claim_that_is_not_a_claim() -> None:
    index = build_index([{"kind": "ResourceClaim", "metadata": {"name": "c"}}])
    index.claims[(None, "odd")] = {"kind": "DeviceClass"}
    pc = pod_claims({"resourceClaims": [{"name": "b", "resourceClaimName": "odd"},
                                        {"name": "a", "resourceClaimName": "c"}]}, "/spec", "ml", index)
    assert pc == PodClaims((), {"a": ()}, (), {}, {"a": "/spec/resourceClaims/1"})


def test_what_names_claims() -> None:
    assert has_claims({"resourceClaims": []}) is True
    assert has_claims({"draResources": None}) is True
    assert has_claims({"containers": []}) is False


# ------------------------------------------------------------------------------------------------ NIM Operator


def nim(*resources: Any, namespace: str | None = "ml") -> PodClaims:
    return pod_claims({"draResources": list(resources)}, "/spec", namespace, build_index(OBJECTS))


def selectors_of(pc: PodClaims) -> list[tuple[str, str, str, int | None, tuple[str, ...]]]:
    return [(r.claim, r.request, ra.alt.class_name, ra.alt.count, ra.alt.selectors)
            for r in pc.requests for ra in r.alternatives]


def test_nim_dra_resources_name_claims_and_templates() -> None:
    pc = nim({"resourceClaimTemplateName": "t4"}, {"resourceClaimName": "shared"}, {"resourceClaimName": "gone"}, {})
    assert [(r.claim, r.what, r.pointer) for r in pc.requests] == [
        ("draResources[0]", "ResourceClaimTemplate ml/t4 request 'gpu'", "/spec/draResources/0"),
        ("draResources[1]", "ResourceClaim ml/shared request 'gpu'", "/spec/draResources/1")]
    assert pc.notes == (("/spec/draResources/2", "ResourceClaim ml/gone (claim 'draResources[2]') is not in the "
                                                 "input: the devices it requests were not checked"),)


def test_the_template_the_nim_operator_generates() -> None:
    pc = nim({"claimCreationSpec": {"devices": [
        {"name": "gpu", "deviceClassName": "a100", "count": 2, "attributeSelectors": [
            {"key": "index", "op": "Between", "value": {"intValue": 1}}, {"op": "Equal", "value": {"intValue": 1}},
            {"key": "productName", "op": "Equal", "value": {"stringValue": "NVIDIA \"A100\" \\ 80GB"}},
            {"key": "resource.kubernetes.io/pcieRoot", "op": "NotEqual", "value": {"stringValue": "pci0"}},
            {"key": "mig", "value": {"boolValue": False}},
            {"key": "mig", "op": "NotEqual", "value": {"boolValue": True}},
            {"key": "index", "op": "GreaterThan", "value": {"intValue": 0}},
            {"key": "index", "op": "LessThanOrEqual", "value": {"intValue": 7}},
            {"key": "driverVersion", "op": "GreaterThanOrEqual", "value": {"versionValue": "550.0.0"}},
            {"key": "cudaComputeCapability", "op": "LessThan", "value": {"versionValue": "9.0.0"}},
            # a string or bool compared for order, an unknown operator, no key, no value: no expression
            {"key": "productName", "op": "LessThan", "value": {"stringValue": "x"}},
            {"key": "mig", "op": "GreaterThan", "value": {"boolValue": True}},
            {"key": "index", "op": "Between", "value": {"intValue": 1}},
            {"op": "Equal", "value": {"intValue": 1}},
            {"key": "index", "op": "Equal"}, "junk"],
         "capacitySelectors": [{"key": "memory", "op": "GreaterThanOrEqual", "value": "40Gi"},
                               {"key": "example.com/slots", "value": 2}]}]}})
    assert selectors_of(pc) == [("draResources[0]", "gpu", "a100", 2, (
        'device.driver == "gpu.nvidia.com"',
        'device.attributes["gpu.nvidia.com"].productName == "NVIDIA \\"A100\\" \\\\ 80GB"',
        'device.attributes["resource.kubernetes.io"].pcieRoot != "pci0"',
        'device.attributes["gpu.nvidia.com"].mig == false',
        'device.attributes["gpu.nvidia.com"].mig != true',
        'device.attributes["gpu.nvidia.com"].index > 0',
        'device.attributes["gpu.nvidia.com"].index <= 7',
        '(device.attributes["gpu.nvidia.com"].driverVersion).compareTo(semver("550.0.0")) >= 0',
        '(device.attributes["gpu.nvidia.com"].cudaComputeCapability).compareTo(semver("9.0.0")) < 0',
        '(device.capacity["gpu.nvidia.com"].memory).compareTo(quantity("40Gi")) >= 0',
        '(device.capacity["example.com"].slots).compareTo(quantity("2")) == 0'))]
    (request,) = pc.requests
    assert (request.what, request.pointer, request.alternatives[0].device_class, request.alternatives[0].alt.pointer) \
        == ("the ResourceClaimTemplate of draResources[0] request 'gpu'", "/spec/draResources/0", A100,
            "/spec/spec/devices/requests/0/exactly")
    assert pc.notes == ()


def test_nim_cel_expressions_and_defaults() -> None:
    pc = nim({"claimCreationSpec": {"devices": [
        {"driverName": "example.com", "celExpressions": ["a", 3, "b"],
         "attributeSelectors": [{"key": "x", "value": {"intValue": 1}}]},
        {"driverName": "ex\"am\\ple", "attributeSelectors": [{"key": "x", "op": "Equal", "value": {"intValue": 1}}]},
        {"celExpressions": []}, "junk"]}}, namespace=None)
    assert selectors_of(pc) == [
        ("draResources[0]", "device0", NV, 1, ('device.driver == "example.com"', "a", "b")),
        ("draResources[0]", "device1", NV, 1, ('device.driver == "ex\\"am\\\\ple"',
                                               'device.attributes["ex\\"am\\\\ple"].x == 1')),
        ("draResources[0]", "device2", NV, 1, ('device.driver == "gpu.nvidia.com"',)),
        ("draResources[0]", "device3", NV, 1, ('device.driver == "gpu.nvidia.com"',))]
    assert pc.requests[0].what == "the ResourceClaimTemplate of draResources[0] request 'device0'"


def test_a_nim_class_not_in_the_input_is_a_note_without_namespace() -> None:
    pc = nim({"claimCreationSpec": {"devices": [{"name": "d", "deviceClassName": "nope"}]}})
    assert pc.notes == (("/spec/draResources/0", "DeviceClass 'nope' of the ResourceClaimTemplate of draResources[0] "
                                                 "request 'd' is not in the input: its selectors were not applied"),)


def test_a_nim_entry_without_a_spec_is_skipped() -> None:
    assert nim({"claimCreationSpec": "x"}, {"name": "ignored"}) == PodClaims((), {}, (), {})


# ------------------------------------------------------------------------------------------------ containers


@pytest.mark.parametrize(("refs", "expected"), [
    ([{"name": "gpus"}], [("gpus", "gpu")]),
    ([{"name": "p"}], [("p", "a"), ("p", "b"), ("p", "c")]),
    ([{"name": "p", "request": "b"}, {"name": "gpus", "request": "other"}], [("p", "b")]),
    ([{"name": "p", "request": "c"}, {"name": "gpus"}], [("p", "c"), ("gpus", "gpu")]),
    ([{"request": "a"}, "junk", {"name": "unknown"}], []),
    ([{"request": "a"}, {"name": "gpus"}], [("gpus", "gpu")]),
    ([], []),
])
def test_the_requests_a_container_uses(refs: list[Any], expected: list[tuple[str, str]]) -> None:
    pc = claims([{"name": "gpus", "resourceClaimTemplateName": "t4"},
                 {"name": "p", "resourceClaimTemplateName": "pair"}])
    container = {"name": "c", "resources": {"claims": refs}}
    assert [(r.claim, r.request) for r in container_claim_requests(container, pc)] == expected
    assert container_claim_requests({"name": "c"}, pc) == []
