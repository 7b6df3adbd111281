"""Reading DRA objects (plain dicts) into the model: ``DeviceClass`` (``read_device_class``), ``ResourceClaim`` and
``ResourceClaimTemplate`` (``claim_spec_of``, ``read_claim_spec``: ``exactly`` or ``firstAvailable``,
``deviceClassName``, ``count``, ``allocationMode``, ``selectors[].cel.expression``, tolerations, capacity requests;
``read_constraints``; ``spec.devices.config`` for the sharing strategy of NVIDIA's driver), ``ResourceSlice``
(``read_slice``: each device's driver, node, attributes, capacity with its requestPolicy, taints and
allowMultipleAllocations; the v1 shape and v1beta1's ``basic``) and ``DeviceTaintRule`` (``read_taint_rule``), and
what to say of API versions Kubernetes 1.36 does not serve (``api_version_note``).

Reading is lenient: a field of the wrong type is absent, never an exception (the API server's schema is the
validator; compatcheck reads what it can). It must not resolve references between objects (``claims``), evaluate
CEL (``selectors``) or decide anything about allocation.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from fractions import Fraction
from typing import Any

from compatcheck.core.cel import CelError, DeviceInput, Semver
from compatcheck.core.dra.model import (
    NVIDIA_DRIVER,
    Alternative,
    CapacityPolicy,
    ClaimConstraint,
    Device,
    DeviceClassInfo,
    DeviceRequest,
    DeviceTaint,
    DeviceToleration,
    _qualified,
)
from compatcheck.core.dra.nvidia import device_labels
from compatcheck.core.drakinds import GROUP
from compatcheck.core.jsonutil import Json, JsonObject, mapping, sequence, text
from compatcheck.core.quantities import QuantityError, parse_quantity


def _v1alpha2(obj: JsonObject) -> bool:
    return obj.get("apiVersion") == f"{GROUP}/v1alpha2"


def _selectors(value: Json) -> tuple[str, ...]:
    out = []
    for s in sequence(value):
        expr = mapping(mapping(s).get("cel")).get("expression")
        if isinstance(expr, str):
            out.append(expr)
    return tuple(out)


def read_device_class(obj: JsonObject, source: str = "input") -> DeviceClassInfo | None:
    name = text(mapping(obj.get("metadata")).get("name"))
    if name is None:
        return None
    spec = mapping(obj.get("spec"))
    return DeviceClassInfo(name, _selectors(spec.get("selectors")), text(spec.get("extendedResourceName")), source)


def read_taints(value: Json) -> tuple[DeviceTaint, ...]:
    out = []
    for t in sequence(value):
        t = mapping(t)
        key, effect = text(t.get("key")), text(t.get("effect"))
        if key is not None and effect is not None:
            out.append(DeviceTaint(key, text(t.get("value")) or "", effect))
    return tuple(out)


def read_tolerations(value: Json) -> tuple[DeviceToleration, ...]:
    return tuple(DeviceToleration(text(mapping(t).get("key")) or "", text(mapping(t).get("operator")) or "Equal",
                                  text(mapping(t).get("value")) or "", text(mapping(t).get("effect")) or "")
                 for t in sequence(value))


def _quantity(value: Json) -> Fraction | None:
    try:
        return parse_quantity(value) if value is not None else None
    except QuantityError:
        return None


def read_policy(value: Json) -> CapacityPolicy | None:
    if not isinstance(value, dict):
        return None
    rng = value.get("validRange")
    values = tuple(q for v in sequence(value.get("validValues")) if (q := _quantity(v)) is not None)
    if isinstance(rng, dict):
        return CapacityPolicy(_quantity(value.get("default")), values, True, _quantity(rng.get("min")),
                              _quantity(rng.get("max")), _quantity(rng.get("step")))
    return CapacityPolicy(_quantity(value.get("default")), values)


def _attribute(value: Json) -> str | int | bool | Semver | None:
    v = mapping(value)
    if isinstance(v.get("string"), str):
        return str(v["string"])
    if isinstance(v.get("bool"), bool):
        return bool(v["bool"])
    if isinstance(v.get("int"), int) and not isinstance(v.get("int"), bool):
        return int(v["int"])
    if isinstance(v.get("version"), str):
        try:
            return Semver(str(v["version"]))
        except CelError:
            return None
    return None


def read_slice(obj: JsonObject) -> list[Device]:
    """The devices of a ResourceSlice (v1, or v1beta1's ``basic`` devices)."""
    spec = mapping(obj.get("spec"))
    driver = text(spec.get("driver")) or ""
    pool = text(mapping(spec.get("pool")).get("name")) or ""
    node = text(spec.get("nodeName"))
    all_nodes = spec.get("allNodes") is True
    selector = spec.get("nodeSelector") if isinstance(spec.get("nodeSelector"), dict) else None
    out = []
    for d in sequence(spec.get("devices")):
        d = mapping(d)
        body = mapping(d.get("basic")) if isinstance(d.get("basic"), dict) else d
        name = text(d.get("name"))
        if name is None:
            continue
        attributes: dict[str, dict[str, Any]] = {}
        for key, value in mapping(body.get("attributes")).items():
            v = _attribute(value)
            if v is not None:
                domain, ident = _qualified(str(key), driver)
                attributes.setdefault(domain, {})[ident] = v
        capacity: dict[str, dict[str, Fraction]] = {}
        policies = []
        for key, value in mapping(body.get("capacity")).items():
            raw = mapping(value).get("value") if isinstance(value, dict) else value
            try:
                q = parse_quantity(raw)
            except QuantityError:
                continue
            domain, ident = _qualified(str(key), driver)
            capacity.setdefault(domain, {})[ident] = q
            policy = read_policy(mapping(value).get("requestPolicy"))
            if policy is not None:
                policies.append(((domain, ident), policy))
        dev_node = text(body.get("nodeName")) or node
        dev_all = all_nodes or body.get("allNodes") is True
        dev_sel = body.get("nodeSelector") if isinstance(body.get("nodeSelector"), dict) else selector
        inp = DeviceInput(driver, attributes, capacity, body.get("allowMultipleAllocations") is True)
        out.append(Device(driver, pool, name, dev_node, dev_all, dev_sel, inp, device_labels(inp),
                          read_taints(body.get("taints")), tuple(policies)))
    return out


def read_constraints(spec: JsonObject, base: str) -> list[ClaimConstraint]:
    """The ``constraints`` of a ResourceClaimSpec at pointer ``base``."""
    devices = mapping(spec.get("devices"))
    names = [text(mapping(r).get("name")) or f"requests[{i}]" for i, r in enumerate(sequence(devices.get("requests")))]
    out = []
    for i, c in enumerate(sequence(devices.get("constraints"))):
        c = mapping(c)
        for kind in ("matchAttribute", "distinctAttribute"):
            attribute = text(c.get(kind))
            if attribute is None:
                continue
            named = {str(n) for n in sequence(c.get("requests"))}
            covered = tuple(n for n in names if not named or n in named or any(n == m.split("/")[0] for m in named))
            out.append(ClaimConstraint(kind, attribute, covered, f"{base}/devices/constraints/{i}",
                                       tuple(str(n) for n in sequence(c.get("requests")))))
    return out


def read_claim_spec(spec: JsonObject, base: str) -> tuple[list[DeviceRequest], str | None]:
    """The requests of a ResourceClaimSpec at pointer ``base``, and the sharing strategy its NVIDIA GPU config
    asks for (``mps`` or ``time-slicing``; None when it says nothing)."""
    devices = mapping(spec.get("devices"))
    out = []
    for i, r in enumerate(sequence(devices.get("requests"))):
        r = mapping(r)
        name = text(r.get("name")) or f"requests[{i}]"
        ptr = f"{base}/devices/requests/{i}"
        alts: list[Alternative] = []
        if isinstance(r.get("firstAvailable"), list):
            for j, sub in enumerate(sequence(r.get("firstAvailable"))):
                alts.append(_alternative(mapping(sub), f"{name}/{text(mapping(sub).get('name')) or j}",
                                         f"{ptr}/firstAvailable/{j}"))
        else:
            body = mapping(r.get("exactly")) if isinstance(r.get("exactly"), dict) else r  # v1beta1: inline
            alts.append(_alternative(body, name, f"{ptr}/exactly" if isinstance(r.get("exactly"), dict) else ptr))
        out.append(DeviceRequest(name, tuple(alts), ptr))
    for c in read_constraints(spec, base):
        if c.kind == "matchAttribute":
            out = [replace(r, match_attributes=(*r.match_attributes, c.attribute)) if c.covers(r.name) else r
                   for r in out]
        else:
            out = [replace(r, distinct_attributes=(*r.distinct_attributes, c.attribute)) if c.covers(r.name) else r
                   for r in out]
    sharing = None
    for cfg in sequence(devices.get("config")):
        opaque = mapping(mapping(cfg).get("opaque"))
        if opaque.get("driver") != NVIDIA_DRIVER:
            continue
        strategy = text(mapping(mapping(opaque.get("parameters")).get("sharing")).get("strategy"))
        if strategy is not None:
            sharing = {"mps": "mps", "timeslicing": "time-slicing"}.get(strategy.lower().replace("-", ""), sharing)
    return out, sharing


def _alternative(body: JsonObject, name: str, pointer: str) -> Alternative:
    mode = body.get("allocationMode")
    count = body.get("count", 1)
    capacity = tuple((str(k), q) for k, v in mapping(mapping(body.get("capacity")).get("requests")).items()
                     if (q := _quantity(v)) is not None)
    return Alternative(name, text(body.get("deviceClassName")) or "", _selectors(body.get("selectors")),
                       None if mode == "All" else count if isinstance(count, int) and count > 0 else 1, pointer,
                       read_tolerations(body.get("tolerations")), capacity)


def claim_spec_of(obj: JsonObject) -> tuple[JsonObject, str] | None:
    """The ResourceClaimSpec of a ResourceClaim (``/spec``) or a ResourceClaimTemplate (``/spec/spec``)."""
    if obj.get("kind") == "ResourceClaim":
        return mapping(obj.get("spec")), "/spec"
    if obj.get("kind") == "ResourceClaimTemplate":
        return mapping(mapping(obj.get("spec")).get("spec")), "/spec/spec"
    return None


def iter_requests(obj: JsonObject) -> Iterator[tuple[DeviceRequest, JsonObject]]:
    """The requests of a ResourceClaim or ResourceClaimTemplate object, with its spec."""
    found = claim_spec_of(obj)
    if found is None:
        return
    reqs, _sharing = read_claim_spec(*found)
    for r in reqs:
        yield r, found[0]


def read_taint_rule(obj: JsonObject) -> tuple[tuple[str | None, str | None, str | None], DeviceTaint] | None:
    """A DeviceTaintRule (DRADeviceTaintRules: alpha in Kubernetes 1.35, beta but off in 1.36): the taint it puts
    on the devices its ``deviceSelector`` picks by driver, pool and device name (each left out: any; no selector:
    none). A selector of the alpha API's other fields (deviceClassName, CEL selectors) is not read: such a rule is
    left out, so its taint is not checked."""
    spec = mapping(obj.get("spec"))
    selector = spec.get("deviceSelector")
    if not isinstance(selector, dict) or selector.get("deviceClassName") is not None or \
            selector.get("selectors") is not None:
        return None
    taints = read_taints([spec.get("taint")])
    if not taints:
        return None
    return (text(selector.get("driver")), text(selector.get("pool")), text(selector.get("device"))), taints[0]
