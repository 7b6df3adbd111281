"""Dynamic Resource Allocation (``resource.k8s.io/v1``, GA in Kubernetes 1.34): the GPUs a pod gets through
ResourceClaims instead of extended resources.

- Reading: ``DeviceClass`` (its selectors and ``extendedResourceName``), ``ResourceClaim`` and
  ``ResourceClaimTemplate`` (``spec.devices.requests[]``: ``exactly`` or ``firstAvailable``, ``deviceClassName``,
  ``count``, ``allocationMode``, ``selectors[].cel.expression``; ``spec.devices.config`` for the sharing strategy of
  NVIDIA's driver), and ``ResourceSlice`` (the inventory: each device's driver, node, attributes and capacity;
  the v1 shape and v1beta1's ``basic``).
- NVIDIA's DRA driver (``gpu.nvidia.com``) publishes, per GPU and MIG device, ``type`` (gpu | mig),
  ``productName``, ``brand``, ``architecture``, ``cudaComputeCapability``, ``driverVersion`` and
  ``cudaDriverVersion`` (versions), ``profile`` (MIG), and capacity ``memory``
  (``cmd/gpu-kubelet-plugin/deviceinfo.go`` and ``mig.go`` in NVIDIA/k8s-dra-driver-gpu). ``device_labels`` maps them
  onto the GPU Feature Discovery labels that ``cluster.node_facts`` reads, so every rule reads a DRA device as it
  reads a node: one code path, no rule rewritten.
- Resolving a pod's claims (``pod_claims``), the devices that can serve each request (``Allocator``: class then
  request selectors, evaluated with ``core.cel``; a selector that errors on a device aborts the allocation, as in
  the scheduler), and, without an inventory, what the selectors themselves pin (``pinned_points``: the known
  products, compute capabilities and driver branches that satisfy them).

Pure: no I/O. Where objects come from (files, the live view) is the caller's business.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from compatcheck.core.cel import CelError, CelUnsupported, DeviceInput, Semver, compile_selector, normalise_semver
from compatcheck.core.jsonutil import Json, JsonObject, mapping, sequence, text
from compatcheck.core.quantities import QuantityError, parse_quantity

GROUP = "resource.k8s.io"
NVIDIA_DRIVER = "gpu.nvidia.com"
# The DRA kinds compatcheck reads of its own (the webhook also reviews claims and templates).
KINDS = ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice")
REVIEWED_KINDS = ("ResourceClaim", "ResourceClaimTemplate")
# Every DeviceClass is also an extended resource of this name (KEP-5004, DRAExtendedResource).
IMPLICIT_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"
CHART_SOURCE = ("https://github.com/NVIDIA/k8s-dra-driver-gpu/tree/main/deployments/helm/dra-driver-nvidia-gpu/"
                "templates (deviceclass-gpu.yaml, deviceclass-mig.yaml)")
DEVICE_SOURCE = "https://github.com/NVIDIA/k8s-dra-driver-gpu/blob/main/cmd/gpu-kubelet-plugin/deviceinfo.go"


def is_dra(obj: JsonObject) -> bool:
    api_version = obj.get("apiVersion")
    return isinstance(api_version, str) and api_version.startswith(GROUP + "/") and obj.get("kind") in KINDS


# API versions of resource.k8s.io read into the same model: v1 (GA in 1.34) and v1beta2 have the same shape; v1beta1
# and v1alpha3 write a request's deviceClassName, selectors, count and allocationMode on the request itself (no
# ``exactly``) and a slice's devices under ``basic``. What Kubernetes 1.36 serves of them, asked of a real
# kube-apiserver v1.36 (tests/e2e/test_dra_versions.py): v1 by default; v1beta1 and v1beta2 only with
# --runtime-config; v1alpha3 only DeviceTaintRule and ResourcePoolStatusRequest; v1alpha2 not at all ("group version
# resource.k8s.io/v1alpha2 that has not been registered"): the API of "classic" DRA that 1.31 replaced with
# structured parameters (https://github.com/kubernetes/enhancements/pull/4709).
UNSERVED_NOTES = {
    # the API server's own deprecation warning for each beta (kube-apiserver v1.36)
    "v1beta2": ("{kind} of resource.k8s.io/v1beta2 is deprecated in Kubernetes 1.36+ and unavailable in 1.39+ (1.36 "
                "serves it only with --runtime-config): read as v1, apply it as resource.k8s.io/v1"),
    "v1beta1": ("{kind} of resource.k8s.io/v1beta1 is deprecated in Kubernetes 1.35+ and unavailable in 1.38+ (1.36 "
                "serves it only with --runtime-config): read as v1, apply it as resource.k8s.io/v1"),
    "v1alpha3": ("{kind} of resource.k8s.io/v1alpha3 (Kubernetes 1.31) is no longer served (1.36 serves v1alpha3 "
                 "only for DeviceTaintRule and ResourcePoolStatusRequest): read as v1beta1, apply it as "
                 "resource.k8s.io/v1"),
    "v1alpha2": ("{kind} of resource.k8s.io/v1alpha2 (the \"classic\" DRA API) is not served since Kubernetes "
                 "1.31: not checked"),
}


# The kinds only resource.k8s.io/v1alpha2 had (read to say they are not checked).
V1ALPHA2_KINDS = ("ResourceClass", "ResourceClassParameters", "ResourceClaimParameters", "PodSchedulingContext")


def api_version_note(obj: JsonObject) -> str | None:
    """What to say of a resource.k8s.io object in an API version Kubernetes 1.36 does not serve by default (None
    for v1)."""
    api_version = obj.get("apiVersion")
    if not isinstance(api_version, str) or not api_version.startswith(GROUP + "/"):
        return None
    note = UNSERVED_NOTES.get(api_version.split("/", 1)[1])
    return note.format(kind=text(obj.get("kind")) or "an object") if note else None


def _v1alpha2(obj: JsonObject) -> bool:
    return obj.get("apiVersion") == f"{GROUP}/v1alpha2"


# ---------------------------------------------------------------------------------------------- classes


@dataclass(frozen=True)
class DeviceClassInfo:
    name: str
    selectors: tuple[str, ...]
    extended_resource: str | None
    source: str  # "input", "cluster", or where a built-in one is documented


# The DeviceClasses NVIDIA's DRA driver chart installs, for claims whose class is not in the input.
BUILTIN_CLASSES = {c.name: c for c in (
    DeviceClassInfo("gpu.nvidia.com", ("device.driver == 'gpu.nvidia.com' && "
                                       "device.attributes['gpu.nvidia.com'].type == 'gpu'",), None, CHART_SOURCE),
    DeviceClassInfo("mig.nvidia.com", ("device.driver == 'gpu.nvidia.com' && "
                                       "device.attributes['gpu.nvidia.com'].type == 'mig'",), None, CHART_SOURCE),
)}


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


# ---------------------------------------------------------------------------------------------- devices


@dataclass(frozen=True)
class Device:
    """One device of a ResourceSlice: where it is and what a selector sees."""

    driver: str
    pool: str
    name: str
    node: str | None  # spec.nodeName (or the device's own nodeName)
    all_nodes: bool  # spec.allNodes: reachable from every node
    node_selector: JsonObject | None  # spec.nodeSelector: reachable from the nodes it selects
    input: DeviceInput
    labels: tuple[tuple[str, str], ...]  # the GFD labels of an NVIDIA GPU (device_labels); () for other devices

    def where(self) -> str:
        return self.node or f"pool {self.pool}"


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


def _qualified(name: str, driver: str) -> tuple[str, str]:
    domain, slash, ident = name.rpartition("/")
    return (domain, ident) if slash else (driver, name)


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
        for key, value in mapping(body.get("capacity")).items():
            raw = mapping(value).get("value") if isinstance(value, dict) else value
            try:
                q = parse_quantity(raw)
            except QuantityError:
                continue
            domain, ident = _qualified(str(key), driver)
            capacity.setdefault(domain, {})[ident] = q
        dev_node = text(body.get("nodeName")) or node
        dev_all = all_nodes or body.get("allNodes") is True
        dev_sel = body.get("nodeSelector") if isinstance(body.get("nodeSelector"), dict) else selector
        inp = DeviceInput(driver, attributes, capacity, body.get("allowMultipleAllocations") is True)
        out.append(Device(driver, pool, name, dev_node, dev_all, dev_sel, inp, device_labels(inp)))
    return out


def _driver_text(v: Semver) -> str:
    """A driver version as NVIDIA writes it: the driver publishes 535.104.05 as the semver 535.104.5."""
    return f"{v.major}.{v.minor}.{v.patch:02d}" if v.patch else f"{v.major}.{v.minor}"


def device_labels(device: DeviceInput) -> tuple[tuple[str, str], ...]:
    """NVIDIA's DRA device attributes as the GPU Feature Discovery labels ``cluster.node_facts`` reads (the
    product label is NVML's name with spaces as dashes, as GFD writes it); () for a device of another driver."""
    if device.driver != NVIDIA_DRIVER:
        return ()
    attrs = device.attributes.get(NVIDIA_DRIVER, {})
    labels: dict[str, str] = {}
    product = attrs.get("productName")
    if isinstance(product, str) and product:
        labels["nvidia.com/gpu.product"] = product.strip().replace(" ", "-")
    cc = attrs.get("cudaComputeCapability")
    if isinstance(cc, Semver):
        labels["nvidia.com/gpu.compute.major"], labels["nvidia.com/gpu.compute.minor"] = str(cc.major), str(cc.minor)
    drv = attrs.get("driverVersion")
    if isinstance(drv, Semver):
        labels["nvidia.com/cuda.driver-version.full"] = _driver_text(drv)
    cuda = attrs.get("cudaDriverVersion")
    if isinstance(cuda, Semver):
        labels["nvidia.com/cuda.runtime-version.major"] = str(cuda.major)
        labels["nvidia.com/cuda.runtime-version.minor"] = str(cuda.minor)
    if mig_profile(device) is not None:
        # A MIG device named by its profile is what the device plugin's mixed strategy offers (and GFD labels).
        labels["nvidia.com/mig.strategy"] = "mixed"
    return tuple(sorted(labels.items()))


def mig_profile(device: DeviceInput) -> str | None:
    """The MIG profile of an NVIDIA MIG device (``type`` mig, ``profile`` such as 1g.10gb; MigDeviceInfo.GetDevice
    in cmd/gpu-kubelet-plugin/deviceinfo.go of NVIDIA/k8s-dra-driver-gpu), else None."""
    if device.driver != NVIDIA_DRIVER:
        return None
    attrs = device.attributes.get(NVIDIA_DRIVER, {})
    profile = attrs.get("profile")
    return profile if attrs.get("type") == "mig" and isinstance(profile, str) and profile else None


def resource_profile(profile: str) -> str:
    """A MIG profile as NVML and the DRA driver write it (1g.10gb+me: go-nvlib's MigProfileInfo.String) in the form
    of the device plugin's resource names and the mig-profiles table (1g.10gb.me: '+' becomes '.')."""
    return profile.replace("+", ".")


def device_resources(device: DeviceInput) -> tuple[tuple[str, int], ...]:
    """What a device is as a device-plugin resource, for the rules that read allocatable: an NVIDIA MIG device is one
    ``nvidia.com/mig-<profile>`` (the mixed strategy's name for it); () for any other device."""
    profile = mig_profile(device)
    return ((f"nvidia.com/mig-{resource_profile(profile)}", 1),) if profile is not None else ()


_PROFILE_PIN = re.compile(r"""\.\s*profile\s*==\s*["']([^"']+)["']|["']([^"']+)["']\s*==\s*[^&|]*\.\s*profile\b""")


_MIG_TYPE = re.compile(r"""\.\s*type\s*==\s*["']mig["']|["']mig["']\s*==\s*[^&|]*\.\s*type\b""")


def is_mig_request(request: PodRequest) -> bool:
    """Whether every alternative of an NVIDIA request gets a MIG device: DeviceClass mig.nvidia.com, or selectors
    (the class's and its own) that pin ``type == "mig"`` or a MIG ``profile``."""
    return bool(request.alternatives) and all(
        ra.alt.class_name == "mig.nvidia.com" or any(_MIG_TYPE.search(s) for s in ra.selectors)
        or bool(pinned_profiles(ra.selectors)) for ra in request.alternatives)


def pinned_profiles(selectors: Iterable[str]) -> frozenset[str]:
    """The MIG profiles selectors pin with ``...profile == "1g.10gb"`` (either side)."""
    return frozenset(m.group(1) or m.group(2) for s in selectors for m in _PROFILE_PIN.finditer(s))


# ---------------------------------------------------------------------------------------------- claims


@dataclass(frozen=True)
class Alternative:
    """What one request (or one ``firstAvailable`` subrequest) asks for."""

    name: str
    class_name: str
    selectors: tuple[str, ...]  # the request's own
    count: int | None  # None: allocationMode All
    pointer: str  # inside the claim or template object


@dataclass(frozen=True)
class DeviceRequest:
    name: str
    alternatives: tuple[Alternative, ...]  # one for ``exactly``; the subrequests of ``firstAvailable``
    pointer: str
    # ``constraints[].matchAttribute`` that name this request (or every request): its devices share the value.
    match_attributes: tuple[str, ...] = ()
    # ``constraints[].distinctAttribute`` that name it: its devices all have different values.
    distinct_attributes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClaimConstraint:
    """One ``constraints[]`` entry of a claim: ``matchAttribute`` (the devices of the requests it names share the
    attribute's value) or ``distinctAttribute`` (they all have different values; KEP-5075). As in the scheduler's
    allocator (k8s.io/dynamic-resource-allocation/structured), a device without the attribute cannot be allocated
    under it, and no ``requests`` means every request of the claim."""

    kind: str  # "matchAttribute" | "distinctAttribute"
    attribute: str
    requests: tuple[str, ...]  # the request names it covers (all of them when the constraint names none)
    pointer: str

    def covers(self, request: str) -> bool:
        return request in self.requests


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
            out.append(ClaimConstraint(kind, attribute, covered, f"{base}/devices/constraints/{i}"))
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
    return Alternative(name, text(body.get("deviceClassName")) or "", _selectors(body.get("selectors")),
                       None if mode == "All" else count if isinstance(count, int) and count > 0 else 1, pointer)


def claim_spec_of(obj: JsonObject) -> tuple[JsonObject, str] | None:
    """The ResourceClaimSpec of a ResourceClaim (``/spec``) or a ResourceClaimTemplate (``/spec/spec``)."""
    if obj.get("kind") == "ResourceClaim":
        return mapping(obj.get("spec")), "/spec"
    if obj.get("kind") == "ResourceClaimTemplate":
        return mapping(mapping(obj.get("spec")).get("spec")), "/spec/spec"
    return None


# ---------------------------------------------------------------------------------------------- the index


Key = tuple[str | None, str]  # (namespace, name)


@dataclass
class DraIndex:
    """DeviceClasses, ResourceClaims and ResourceClaimTemplates known to an evaluation: from the files linted
    together, or the webhook's live view (``authoritative``: what is not here does not exist)."""

    classes: dict[str, DeviceClassInfo] = field(default_factory=dict)
    claims: dict[Key, JsonObject] = field(default_factory=dict)
    templates: dict[Key, JsonObject] = field(default_factory=dict)
    authoritative: bool = False

    def add(self, obj: JsonObject, source: str = "input") -> None:
        kind = obj.get("kind")
        meta = mapping(obj.get("metadata"))
        name = text(meta.get("name"))
        if name is None:
            return
        if kind == "DeviceClass":
            found = read_device_class(obj, source)
            if found is not None:
                self.classes[name] = found
        elif kind == "ResourceClaim":
            self.claims[(text(meta.get("namespace")), name)] = obj
        elif kind == "ResourceClaimTemplate":
            self.templates[(text(meta.get("namespace")), name)] = obj

    def device_class(self, name: str, extra: dict[str, DeviceClassInfo] | None = None) -> DeviceClassInfo | None:
        found = self.classes.get(name) or (extra or {}).get(name)
        if found is None and not self.authoritative:
            return BUILTIN_CLASSES.get(name)
        return found

    @staticmethod
    def _find(table: dict[Key, JsonObject], namespace: str | None, name: str) -> JsonObject | None:
        found = table.get((namespace, name))
        if found is not None:
            return found
        if namespace is not None:
            return table.get((None, name))  # a manifest without a namespace, applied to the pod's
        matches = [obj for (_ns, n), obj in table.items() if n == name]
        return matches[0] if len(matches) == 1 else None

    def claim(self, namespace: str | None, name: str) -> JsonObject | None:
        return self._find(self.claims, namespace, name)

    def template(self, namespace: str | None, name: str) -> JsonObject | None:
        return self._find(self.templates, namespace, name)

    def extended_resources(self, extra: dict[str, DeviceClassInfo] | None = None) -> dict[str, DeviceClassInfo]:
        """Extended resource name -> the DeviceClass that maps it (explicit or implicit names)."""
        out: dict[str, DeviceClassInfo] = {}
        for cls in [*(extra or {}).values(), *self.classes.values()]:
            out[IMPLICIT_EXTENDED_PREFIX + cls.name] = cls
            if cls.extended_resource:
                out[cls.extended_resource] = cls
        return out


def build_index(objects: Iterable[JsonObject], *, authoritative: bool = False) -> DraIndex:
    index = DraIndex(authoritative=authoritative)
    for obj in objects:
        if isinstance(obj, dict):
            index.add(obj)
    return index


EMPTY_INDEX = DraIndex()


# ---------------------------------------------------------------------------------------------- a pod's claims


@dataclass(frozen=True)
class ResolvedAlternative:
    alt: Alternative
    device_class: DeviceClassInfo | None

    @property
    def selectors(self) -> tuple[str, ...]:
        """Class selectors first, then the request's: the order the allocator evaluates them in."""
        return (self.device_class.selectors if self.device_class else ()) + self.alt.selectors

    @property
    def nvidia_gpu(self) -> bool:
        if self.alt.class_name in BUILTIN_CLASSES:
            return True
        return any(NVIDIA_DRIVER in s and "compute-domain" not in s for s in self.selectors)


@dataclass(frozen=True)
class PodRequest:
    """One device request a pod makes: through one of its claims, or an extended resource a DeviceClass maps."""

    claim: str  # the pod's claim name (or the extended resource)
    request: str
    what: str  # e.g. "ResourceClaimTemplate ml/t4 request gpu", for messages
    pointer: str  # inside the pod's object: its resourceClaims entry, or the container's resource
    alternatives: tuple[ResolvedAlternative, ...]
    sharing: str | None = None
    count_override: int | None = None  # an extended resource: the quantity asked for
    match_attributes: tuple[str, ...] = ()  # constraints: the devices allocated share these attributes' values
    distinct_attributes: tuple[str, ...] = ()  # constraints: the devices allocated all differ in these attributes

    @property
    def nvidia_gpu(self) -> bool:
        return any(a.nvidia_gpu for a in self.alternatives)


@dataclass(frozen=True)
class PodClaims:
    requests: tuple[PodRequest, ...]  # every resolved request
    by_claim: dict[str, tuple[PodRequest, ...]]  # pod claim name -> its requests
    notes: tuple[tuple[str, str], ...]  # (pointer, message): what could not be checked
    # pod claim name -> the constraints of its claim that cover several requests (checked across them)
    constraints: dict[str, tuple[ClaimConstraint, ...]] = field(default_factory=dict)


def has_claims(spec: JsonObject) -> bool:
    """Whether a pod spec names DRA claims: ``resourceClaims``, or a NIMService's ``draResources``."""
    return "resourceClaims" in spec or "draResources" in spec


def _nim_selectors(device: JsonObject) -> tuple[str, ...]:
    """The CEL the NIM Operator writes for a ``claimCreationSpec`` device (``GetDRADeviceCELExpressions`` in
    internal/shared/resourceclaims.go and ``BuildExpr`` in internal/k8sutil/cel/cel.go of NVIDIA/k8s-nim-operator):
    the driver, then its CEL expressions, or one expression per attribute and capacity selector."""
    driver = text(device.get("driverName")) or NVIDIA_DRIVER
    out = [f"device.driver == {_go_quote(driver)}"]
    if sequence(device.get("celExpressions")):
        return (*out, *(str(e) for e in sequence(device.get("celExpressions")) if isinstance(e, str)))
    ops = {"Equal": "==", "NotEqual": "!=", "GreaterThan": ">", "GreaterThanOrEqual": ">=", "LessThan": "<",
           "LessThanOrEqual": "<="}
    for field_name, table in (("attributeSelectors", "attributes"), ("capacitySelectors", "capacity")):
        for sel in sequence(device.get(field_name)):
            sel = mapping(sel)
            key = text(sel.get("key"))
            op = ops.get(text(sel.get("op")) or "Equal")
            if key is None or op is None:
                continue
            domain, name = _qualified(key, driver)
            attr = f"device.{table}[{_go_quote(domain)}].{name}"
            value = sel.get("value")
            if table == "capacity":
                out.append(f"({attr}).compareTo(quantity({_go_quote(str(value))})) {op} 0")
                continue
            v = mapping(value)
            if isinstance(v.get("boolValue"), bool) and op in ("==", "!="):
                out.append(f"{attr} {op} {'true' if v['boolValue'] else 'false'}")
            elif isinstance(v.get("intValue"), int):
                out.append(f"{attr} {op} {v['intValue']}")
            elif isinstance(v.get("stringValue"), str) and op in ("==", "!="):
                out.append(f"{attr} {op} {_go_quote(v['stringValue'])}")
            elif isinstance(v.get("versionValue"), str):
                out.append(f"({attr}).compareTo(semver({_go_quote(v['versionValue'])})) {op} 0")
    return tuple(out)


def _go_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _nim_claim_spec(creation: JsonObject) -> JsonObject:
    """The ResourceClaimSpec the NIM Operator generates from a ``claimCreationSpec``."""
    return {"devices": {"requests": [
        {"name": text(mapping(d).get("name")) or f"device{i}", "exactly": {
            "deviceClassName": text(mapping(d).get("deviceClassName")) or NVIDIA_DRIVER,
            "count": mapping(d).get("count", 1),
            "selectors": [{"cel": {"expression": e}} for e in _nim_selectors(mapping(d))]}}
        for i, d in enumerate(sequence(creation.get("devices")))]}}


def _claim_entries(spec: JsonObject, pointer: str) -> Iterator[tuple[str, str, JsonObject]]:
    """(pod claim name, pointer, entry) of ``resourceClaims`` and, for a NIMService, ``draResources`` (named as
    compatcheck's flat NIMService container refers to them)."""
    for i, entry in enumerate(sequence(spec.get("resourceClaims"))):
        entry = mapping(entry)
        name = text(entry.get("name"))
        if name is not None:
            yield name, f"{pointer}/resourceClaims/{i}", entry
    for i, entry in enumerate(sequence(spec.get("draResources"))):
        yield f"draResources[{i}]", f"{pointer}/draResources/{i}", mapping(entry)


def pod_claims(spec: JsonObject, pointer: str, namespace: str | None, index: DraIndex,
               extra_classes: dict[str, DeviceClassInfo] | None = None) -> PodClaims:
    """Resolve ``spec.resourceClaims`` (a PodSpec at ``pointer``) against ``index``."""
    requests: list[PodRequest] = []
    by_claim: dict[str, tuple[PodRequest, ...]] = {}
    notes: list[tuple[str, str]] = []
    constraints: dict[str, tuple[ClaimConstraint, ...]] = {}
    for claim_name, ptr, entry in _claim_entries(spec, pointer):
        template_name = text(entry.get("resourceClaimTemplateName"))
        direct_name = text(entry.get("resourceClaimName"))
        creation = entry.get("claimCreationSpec")
        old = mapping(entry.get("source"))
        if template_name is None and direct_name is None and creation is None and old:
            named = next((f"{kind} {text(old.get(key))}" for key, kind in (
                ("resourceClaimTemplateName", "ResourceClaimTemplate"), ("resourceClaimName", "ResourceClaim"))
                if text(old.get(key)) is not None), "its claim")
            notes.append((f"{ptr}/source", f"claim {claim_name!r} names {named} under 'source', the shape before "
                                           "Kubernetes 1.31 (kubernetes/kubernetes#125116): current API servers do "
                                           "not read it (strict validation rejects the unknown field; without it "
                                           "the entry names no claim and the pod is invalid), so its devices were "
                                           "not checked; write the name on the entry itself"))
            continue
        obj: JsonObject | None
        if template_name is not None:
            kind, ref_name, obj = "ResourceClaimTemplate", template_name, index.template(namespace, template_name)
        elif direct_name is not None:
            kind, ref_name, obj = "ResourceClaim", direct_name, index.claim(namespace, direct_name)
        elif isinstance(creation, dict):  # NIM Operator: the template it generates
            kind, ref_name = "the ResourceClaimTemplate of", claim_name
            obj = {"kind": "ResourceClaimTemplate", "spec": {"spec": _nim_claim_spec(creation)}}
        else:
            continue
        where = f"{kind} {namespace + '/' if namespace and obj is not None and creation is None else ''}{ref_name}"
        if obj is None:
            where = f"{kind} {namespace + '/' if namespace else ''}{ref_name}"
            missing = "does not exist (yet)" if index.authoritative else "is not in the input"
            notes.append((ptr, f"{where} (claim {claim_name!r}) {missing}: the devices it requests were not checked"))
            continue
        if _v1alpha2(obj):
            notes.append((ptr, f"{where} (claim {claim_name!r}) is resource.k8s.io/v1alpha2, not served since "
                               "Kubernetes 1.31: the devices it requests were not checked"))
            continue
        found = claim_spec_of(obj)
        if found is None:
            continue
        reqs, sharing = read_claim_spec(*found)
        mine = []
        for r in reqs:
            alts = []
            for alt in r.alternatives:
                cls = index.device_class(alt.class_name, extra_classes)
                if cls is None or cls.source not in ("input", "cluster"):
                    missing = "does not exist" if index.authoritative else "is not in the input"
                    if cls is None:
                        notes.append((ptr, f"DeviceClass {alt.class_name!r} of {where} request {alt.name!r} "
                                           f"{missing}: its selectors were not applied"))
                alts.append(ResolvedAlternative(alt, cls))
            mine.append(PodRequest(claim_name, r.name, f"{where} request {r.name!r}", ptr, tuple(alts), sharing,
                                   match_attributes=r.match_attributes, distinct_attributes=r.distinct_attributes))
        by_claim[claim_name] = tuple(mine)
        requests.extend(mine)
        across = tuple(c for c in read_constraints(*found) if len(c.requests) > 1)
        if across:
            constraints[claim_name] = across
    return PodClaims(tuple(requests), by_claim, tuple(notes), constraints)


def container_claim_requests(container: JsonObject, claims: PodClaims) -> list[PodRequest]:
    """The requests a container uses (``resources.claims[].name``, narrowed by ``request``)."""
    out: list[PodRequest] = []
    for ref in sequence(mapping(container.get("resources")).get("claims")):
        ref = mapping(ref)
        name = text(ref.get("name"))
        if name is None:
            continue
        only = text(ref.get("request"))
        out.extend(r for r in claims.by_claim.get(name, ()) if only is None or r.request == only)
    return out


# ---------------------------------------------------------------------------------------------- allocation


@dataclass(frozen=True)
class Allocation:
    """What the allocator would do with one request: the devices that can serve it, or why none can."""

    devices: tuple[Device, ...]
    reason: str = ""  # why none can (empty when some can)
    unknown: str = ""  # compatcheck cannot tell (a selector its CEL evaluator cannot run)
    count: int | None = None  # how many of ``devices`` the alternative that can serve asks for (None: All)


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _referenced(expression: str) -> frozenset[str]:
    """Every identifier and string literal of an expression: the attribute names a projection must keep."""
    return frozenset(_IDENT.findall(expression))


@dataclass(frozen=True)
class _Selected:
    """What a tuple of selectors makes of every device of an inventory (indices into ``Allocator.devices``)."""

    matching: tuple[int, ...]
    errors: tuple[tuple[int, CelError], ...]  # devices on which a selector fails (the scheduler aborts)
    unsupported: CelUnsupported | None = None


class Allocator:
    """Which devices of an inventory can serve a request: placement, then the class's and the request's
    selectors, then the count on one node.

    A selector is evaluated once per distinct projection of the devices onto the names it mentions (devices that
    differ only in uuid or PCI address are one evaluation), and what a tuple of selectors makes of the whole
    inventory is kept for the inventory's life: the pods of a snapshot share it, and each pod pays only for its
    placement. (16,000 devices: ~0.3 s for a new tuple of selectors, then a few ms a pod.)"""

    MAX_CACHED = 1024

    def __init__(self, devices: list[Device]) -> None:
        self.devices = devices
        self._flat = [_flatten(d.input) for d in devices]
        self._selected: dict[tuple[str, ...], _Selected] = {}

    def select(self, selectors: tuple[str, ...]) -> _Selected:
        found = self._selected.get(selectors)
        if found is not None:
            return found
        candidates = list(range(len(self.devices)))
        errors: list[tuple[int, CelError]] = []
        unsupported: CelUnsupported | None = None
        for expression in selectors:  # in order: a device a selector rejects meets no later one (as in all())
            names = _referenced(expression)
            groups: dict[tuple[Any, ...], list[int]] = {}
            for i in candidates:
                key = tuple(x for x in self._flat[i] if x[1] in names or x[0] == "")
                groups.setdefault(key, []).append(i)
            passed: list[int] = []
            for members in groups.values():
                try:
                    if compile_selector(expression).matches(self.devices[members[0]].input):
                        passed.extend(members)
                except CelUnsupported as exc:
                    unsupported = unsupported or exc
                except CelError as exc:
                    errors.extend((i, exc) for i in members)
            candidates = sorted(passed)
        found = _Selected(tuple(candidates), tuple(sorted(errors, key=lambda e: e[0])), unsupported)
        if len(self._selected) >= self.MAX_CACHED:
            self._selected.clear()
        self._selected[selectors] = found
        return found

    def serve(self, request: PodRequest, node_ok: Callable[[Device], bool] | None = None) -> Allocation:
        """The devices that can serve ``request`` (any of its alternatives), on nodes ``node_ok`` admits."""
        reasons = []
        placed = [i for i, d in enumerate(self.devices) if node_ok is None or node_ok(d)]
        in_reach = set(placed)
        for ra in request.alternatives:
            count = request.count_override if request.count_override is not None else ra.alt.count
            if ra.device_class is None:
                return Allocation((), unknown=f"DeviceClass {ra.alt.class_name!r} is unknown")
            selected = self.select(ra.selectors)
            if selected.unsupported is not None:
                return Allocation((), unknown=f"{selected.unsupported}")
            error = next(((i, exc) for i, exc in selected.errors if i in in_reach), None)
            if error is not None:
                d = self.devices[error[0]]
                reasons.append(f"a selector fails on device {d.name} ({d.where()}): {error[1]}, and the scheduler "
                               "aborts the allocation")
                continue
            chosen = [self.devices[i] for i in selected.matching if i in in_reach]
            if not chosen:
                reasons.append(self._none_reason(ra, placed))
                continue
            per_node: dict[tuple[str | None, tuple[str, ...]], int] = {}
            for d in chosen:
                values = _match_values(d, request.match_attributes)
                if values is not None:  # a device without a matchAttribute attribute cannot be allocated with it
                    key = (d.node, values)
                    per_node[key] = per_node.get(key, 0) + 1
            shared = {v: n for (node, v), n in per_node.items() if node is None}
            best = max((n + shared.get(v, 0) for (node, v), n in per_node.items() if node is not None),
                       default=max(shared.values(), default=0))
            if count is not None and best < count:
                same = (f" with the same {', '.join(request.match_attributes)}" if request.match_attributes
                        else "")
                reasons.append(f"it asks for {count} devices{same} on one node and at most {best} "
                               f"{'matches' if best == 1 else 'match'} on any node")
                continue
            if count is not None and request.distinct_attributes:
                distinct = _distinct_best([chosen], request.distinct_attributes)
                if distinct < count:
                    names = ", ".join(request.distinct_attributes)
                    reasons.append(f"it asks for {count} devices with distinct {names} on one node and "
                                   f"{_values(distinct)} on any node")
                    continue
            return Allocation(tuple(chosen), count=count)
        return Allocation((), "; or ".join(reasons))

    def _none_reason(self, ra: ResolvedAlternative, placed: list[int]) -> str:
        cls = ra.device_class
        name = cls.name if cls else ra.alt.class_name
        if not placed:
            return ("no ResourceSlice publishes a device on a node the pod can land on (its nodeSelector, affinity "
                    "and tolerations)")
        devices = [self.devices[i] for i in placed]
        drivers = sorted({d.driver for d in devices})
        products = sorted({dict(d.labels).get("nvidia.com/gpu.product", "") for d in devices} - {""})
        shown = f": {', '.join(products[:4])}{' ...' if len(products) > 4 else ''}" if products else ""
        have = f"{len(placed)} {'/'.join(drivers)} device{'s' if len(placed) != 1 else ''} in reach{shown}"
        if cls is not None and cls.selectors:
            in_reach = set(placed)
            in_class = [i for i in self.select(cls.selectors).matching if i in in_reach]
            if not in_class:
                return f"no device is in DeviceClass {name} ({have})"
            if ra.alt.selectors:
                return (f"{have}, and none of the {len(in_class)} of DeviceClass {name} satisfies the selector "
                        f"{_short(' && '.join(ra.alt.selectors))}")
        return f"no device satisfies DeviceClass {name} ({have})"


def _values(n: int) -> str:
    return f"at most {n} distinct value{'s' if n != 1 else ''} {'are' if n != 1 else 'is'}" if n else "none has it"


def _on_node(groups: list[tuple[Device, ...]], node: str | None) -> list[list[Device]]:
    """Each group's devices reachable on ``node`` (its own, and those of slices not bound to one node)."""
    return [[d for d in g if d.node is None or d.node == node] for g in groups]


def _nodes(groups: list[tuple[Device, ...]] | list[list[Device]]) -> list[str | None]:
    named = sorted({d.node for g in groups for d in g if d.node is not None})
    return list(named) or [None]


def _distinct_best(groups: list[list[Device]] | list[tuple[Device, ...]], attributes: tuple[str, ...]) -> int:
    """The most devices with pairwise different values of every one of ``attributes`` that the union of
    ``groups`` can offer on one node (an upper bound: the fewest distinct values of any of the attributes)."""
    best = 0
    for node in _nodes(groups):
        here = [d for g in _on_node(list(map(tuple, groups)), node) for d in g]
        unique = {id(d): d for d in here}.values()
        counts = []
        for attribute in attributes:
            counts.append(len({v for d in unique if (v := _match_values(d, (attribute,))) is not None}))
        best = max(best, min(counts, default=0))
    return best


def constraint_reason(constraint: ClaimConstraint, served: list[tuple[tuple[Device, ...], int]]) -> str | None:
    """Why a constraint that covers several requests cannot be met by the devices that can serve each of them
    (``served``: each request's candidate devices and count); None when it may be. Necessary conditions only, on
    one node: for matchAttribute some value that every request gets its count of (and enough devices in all);
    for distinctAttribute as many distinct values as the requests ask for devices in all. A finding is sure."""
    total = sum(count for _devices, count in served)
    groups = [devices for devices, _count in served]
    if constraint.kind == "distinctAttribute":
        best = _distinct_best(groups, (constraint.attribute,))
        if best >= total:
            return None
        return (f"they ask for {total} devices with distinct {constraint.attribute} on one node and "
                f"{_values(best)} on any node")
    for node in _nodes(groups):
        here = _on_node(groups, node)
        by_value: list[dict[tuple[str, ...], list[Device]]] = []
        for devices in here:
            table: dict[tuple[str, ...], list[Device]] = {}
            for d in devices:
                v = _match_values(d, (constraint.attribute,))
                if v is not None:
                    table.setdefault(v, []).append(d)
            by_value.append(table)
        for value in set.intersection(*(set(t) for t in by_value)) if by_value else set():
            enough = all(len(t[value]) >= count for t, (_d, count) in zip(by_value, served, strict=True))
            union = {id(d) for t in by_value for d in t[value]}
            if enough and len(union) >= total:
                return None
    return (f"they ask for {total} devices with the same {constraint.attribute} on one node and no node "
            "has them")


def _match_values(d: Device, attributes: tuple[str, ...]) -> tuple[str, ...] | None:
    """The values of the ``matchAttribute`` attributes (fully qualified: domain/name) on a device; None when one is
    missing (the scheduler cannot allocate such a device under the constraint)."""
    out = []
    for qualified in attributes:
        domain, name = _qualified(qualified, d.driver)
        value = d.input.attributes.get(domain, {}).get(name)
        if value is None:
            return None
        # typed: values of different types are never equal (as in the allocator's constraints)
        out.append(f"semver:{value.text}" if isinstance(value, Semver) else repr(value))
    return tuple(out)


def _flatten(device: DeviceInput) -> tuple[tuple[str, str, str], ...]:
    """A device as (domain, name, value) triples, sorted; ("", field, value) for the fields every selector may read
    (driver, allowMultipleAllocations, the domains present: an unknown domain is an empty map, not an error)."""
    out = [("", "driver", device.driver), ("", "allowMultipleAllocations", str(device.allow_multiple_allocations)),
           ("", "domains", " ".join(sorted({*device.attributes, *device.capacity})))]
    for domain, ids in device.attributes.items():
        out.extend((domain, k, v.text if isinstance(v, Semver) else repr(v)) for k, v in ids.items())
    for domain, caps in device.capacity.items():
        out.extend((f"capacity:{domain}", k, str(v)) for k, v in caps.items())
    return tuple(sorted(out))


def _short(expression: str, limit: int = 90) -> str:
    flat = " ".join(expression.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")


# ---------------------------------------------------------------------------------------------- pins


_NV_ATTR = re.compile(r"""attributes\s*\[\s*["']gpu\.nvidia\.com["']\s*\]\s*(?:\.\s*(\w+)|\[\s*["'](\w+)["']\s*\])""")
_STRING = re.compile(r"""(?<!\\)(["'])(.*?)(?<!\\)\1""")
_SEMVER_CALL = re.compile(r"""semver\(\s*(["'])([^"']+)\1\s*(,\s*true\s*)?\)""")
PINNABLE = ("productName", "cudaComputeCapability", "driverVersion", "cudaDriverVersion", "type", "profile",
            "architecture", "brand")
MAX_GRID = 4096


@dataclass(frozen=True)
class KnownValues:
    """What the knowledge base says devices can be: candidate values of each pinnable attribute."""

    products: tuple[str, ...]  # NVML-style names
    compute_capabilities: tuple[str, ...]  # "8.0"
    drivers: tuple[tuple[int, str], ...]  # (branch, max CUDA "12.2")


def nvidia_attributes(expressions: Iterable[str]) -> frozenset[str]:
    """The gpu.nvidia.com attributes the expressions read."""
    out: set[str] = set()
    for e in expressions:
        for m in _NV_ATTR.finditer(e):
            out.add(m.group(1) or m.group(2))
    return frozenset(out)


def pinned_points(selectors: tuple[str, ...], known: KnownValues) -> tuple[list[dict[str, str]], bool]:
    """Without an inventory: the devices the selectors admit among those the knowledge base can describe, as
    GFD label sets (the attributes the selectors leave free are left out), and whether the driver is pinned.
    ([], False) when the selectors pin nothing compatcheck can read (or read an attribute it cannot vary)."""
    used = nvidia_attributes(selectors)
    if not used or not used <= set(PINNABLE) or not ({"productName", "cudaComputeCapability", "driverVersion",
                                                       "cudaDriverVersion"} & used):
        return [], False
    literals = [m.group(2) for s in selectors for m in _STRING.finditer(s)]
    semvers = []
    for s in selectors:
        for m in _SEMVER_CALL.finditer(s):
            try:
                semvers.append(Semver(normalise_semver(m.group(2)) if m.group(3) else m.group(2)))
            except CelError:
                continue
    axes: dict[str, list[Any]] = {}
    if "productName" in used:
        axes["productName"] = sorted(set(known.products) | {x for x in literals if len(x) > 2})
    if "cudaComputeCapability" in used:
        axes["cudaComputeCapability"] = _versions([Semver(f"{cc}.0") for cc in known.compute_capabilities] + semvers)
    if "driverVersion" in used or "cudaDriverVersion" in used:
        # A driver branch and the CUDA it supports go together: one axis.
        drivers: list[tuple[Semver, Semver | None]] = [(Semver(f"{b}.0.0"), Semver(f"{c}.0")) for b, c in known.drivers]
        drivers += [(v, _branch_cuda(v, known)) for v in semvers if v.major >= 100]
        axes["driver"] = [d for d in drivers if d[1] is not None]
    if "type" in used:
        axes["type"] = ["gpu", "mig"]
    for attr in ("profile", "architecture", "brand"):
        if attr in used:
            axes[attr] = sorted({x for x in literals if x})
            if not axes[attr]:
                return [], False
    names = list(axes)
    size = 1
    for n in names:
        size *= max(len(axes[n]), 1)
    if size > MAX_GRID or size == 0:
        return [], False
    admitted: list[tuple[Any, ...]] = []
    for point in itertools.product(*(axes[n] for n in names)):
        attrs: dict[str, Any] = {}
        for n, v in zip(names, point, strict=True):
            if n == "driver":
                attrs["driverVersion"], attrs["cudaDriverVersion"] = v
            else:
                attrs[n] = v
        device = DeviceInput(NVIDIA_DRIVER, {NVIDIA_DRIVER: attrs}, {})
        try:
            if all(compile_selector(s).matches(device) for s in selectors):
                admitted.append(point)
        except CelUnsupported:
            return [], False
        except CelError:
            continue
    if not admitted:
        return [], False
    # An axis every value of which is admitted alongside the same others is not pinned: leave it out.
    free = set()
    for i, n in enumerate(names):
        rest = {p[:i] + p[i + 1:] for p in admitted}
        if len(rest) * len(axes[n]) == len(admitted):
            free.add(i)
    out: list[dict[str, str]] = []
    seen = set()
    driver_pinned = False
    for point in admitted:
        labels: dict[str, str] = {}
        for i, (n, v) in enumerate(zip(names, point, strict=True)):
            if i in free:
                continue
            if n == "productName":
                labels["nvidia.com/gpu.product"] = str(v).replace(" ", "-")
            elif n == "cudaComputeCapability":
                labels["nvidia.com/gpu.compute.major"], labels["nvidia.com/gpu.compute.minor"] = str(v.major), str(
                    v.minor)
            elif n == "driver":
                driver_pinned = True
                drv, cuda = v
                labels["nvidia.com/cuda.driver-version.full"] = _driver_text(drv) if drv.minor else str(drv.major)
                labels["nvidia.com/cuda.runtime-version.major"] = str(cuda.major)
                labels["nvidia.com/cuda.runtime-version.minor"] = str(cuda.minor)
        key = tuple(sorted(labels.items()))
        if labels and key not in seen:
            seen.add(key)
            out.append(labels)
    return out, driver_pinned


def _versions(values: list[Semver]) -> list[Semver]:
    seen: dict[Any, Semver] = {}
    for v in values:
        seen.setdefault(v.key, v)
    return [seen[k] for k in sorted(seen)]


def _branch_cuda(v: Semver, known: KnownValues) -> Semver | None:
    for branch, cuda in known.drivers:
        if branch == v.major:
            return Semver(f"{cuda}.0")
    return None


def iter_requests(obj: JsonObject) -> Iterator[tuple[DeviceRequest, JsonObject]]:
    """The requests of a ResourceClaim or ResourceClaimTemplate object, with its spec."""
    found = claim_spec_of(obj)
    if found is None:
        return
    reqs, _sharing = read_claim_spec(*found)
    for r in reqs:
        yield r, found[0]


@dataclass
class Inventory:
    """The devices ResourceSlices publish (and the DeviceClasses read beside them), for one cluster snapshot."""

    devices: list[Device]
    classes: dict[str, DeviceClassInfo] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.allocator = Allocator(self.devices)


def build_inventory(objects: Iterable[JsonObject], source: str = "cluster") -> Inventory:
    """ResourceSlices and DeviceClasses (any other object is ignored)."""
    devices: list[Device] = []
    classes: dict[str, DeviceClassInfo] = {}
    for obj in objects:
        if obj.get("kind") == "ResourceSlice":
            devices.extend(read_slice(obj))
        elif obj.get("kind") == "DeviceClass":
            found = read_device_class(obj, source)
            if found is not None:
                classes[found.name] = found
    return Inventory(devices, classes)
