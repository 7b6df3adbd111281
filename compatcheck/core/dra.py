"""Dynamic Resource Allocation (``resource.k8s.io/v1``, GA in Kubernetes 1.34): the GPUs a pod gets through
ResourceClaims instead of extended resources.

- Reading: ``DeviceClass`` (its selectors and ``extendedResourceName``), ``ResourceClaim`` and
  ``ResourceClaimTemplate`` (``spec.devices.requests[]``: ``exactly`` or ``firstAvailable``, ``deviceClassName``,
  ``count``, ``allocationMode``, ``selectors[].cel.expression``; ``spec.devices.config`` for the sharing strategy of
  NVIDIA's driver), and ``ResourceSlice`` (the inventory: each device's driver, node, attributes, capacity with its
  requestPolicy, taints and allowMultipleAllocations; the v1 shape and v1beta1's ``basic``), and DeviceTaintRules.
- NVIDIA's DRA driver (``gpu.nvidia.com``) publishes, per GPU and MIG device, ``type`` (gpu | mig),
  ``productName``, ``brand``, ``architecture``, ``cudaComputeCapability``, ``driverVersion`` and
  ``cudaDriverVersion`` (versions), ``profile`` (MIG), and capacity ``memory``
  (``cmd/gpu-kubelet-plugin/deviceinfo.go`` and ``mig.go`` in NVIDIA/k8s-dra-driver-gpu). ``device_labels`` maps them
  onto the GPU Feature Discovery labels that ``cluster.node_facts`` reads, so every rule reads a DRA device as it
  reads a node: one code path, no rule rewritten.
- Resolving a pod's claims (``pod_claims``); what the scheduler's structured allocator decides for them
  (``Allocator``: class then request selectors, evaluated with ``core.cel``, a selector that errors on a device
  aborting the allocation; then, per node, the allocator's backtracking search over the claims' requests and
  ``firstAvailable`` subrequests, with constraints, allocationMode All, device taints and tolerations, consumable
  capacity); and, without an inventory, what the selectors themselves pin (``pinned_points``: the known products,
  compute capabilities and driver branches that satisfy them).

Pure: no I/O. Where objects come from (files, the live view) is the caller's business.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import cached_property
from typing import Any, TypeVar

from compatcheck.core.cel import CelError, CelUnsupported, DeviceInput, Semver, compile_selector, normalise_semver
from compatcheck.core.drakinds import (  # noqa: F401  (re-exported: what the linter reads without this module)
    GROUP,
    INVENTORY_KINDS,
    KINDS,
    REVIEWED_KINDS,
    UNSERVED_NOTES,
    V1ALPHA2_KINDS,
    api_version_note,
    has_claims,
    is_dra,
)
from compatcheck.core.jsonutil import Json, JsonObject, mapping, sequence, text
from compatcheck.core.quantities import QuantityError, parse_quantity

NVIDIA_DRIVER = "gpu.nvidia.com"
# Every DeviceClass is also an extended resource of this name (KEP-5004, DRAExtendedResource).
IMPLICIT_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"
CHART_SOURCE = ("https://github.com/NVIDIA/k8s-dra-driver-gpu/tree/main/deployments/helm/dra-driver-nvidia-gpu/"
                "templates (deviceclass-gpu.yaml, deviceclass-mig.yaml)")
DEVICE_SOURCE = "https://github.com/NVIDIA/k8s-dra-driver-gpu/blob/main/cmd/gpu-kubelet-plugin/deviceinfo.go"


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
    taints: tuple[DeviceTaint, ...] = ()  # spec.devices[].taints (DRADeviceTaints)
    # capacity (domain, name) -> its requestPolicy (DRAConsumableCapacity)
    policies: tuple[tuple[tuple[str, str], CapacityPolicy], ...] = ()

    def where(self) -> str:
        return self.node or f"pool {self.pool}"

    @property
    def shared(self) -> bool:
        """allowMultipleAllocations: the device may be allocated more than once while its capacity lasts."""
        return self.input.allow_multiple_allocations


@dataclass(frozen=True)
class DeviceTaint:
    """A taint of a device (``spec.devices[].taints``, or a DeviceTaintRule's): NoSchedule and NoExecute keep a
    request that does not tolerate it off the device; other effects (None) do not."""

    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"

    @property
    def prevents_allocation(self) -> bool:
        return self.effect in ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class DeviceToleration:
    """A request's ``tolerations[]`` entry, matched as k8s.io/dynamic-resource-allocation/resourceclaim
    ToleratesTaint does: an empty effect matches every effect, an empty key every key, Exists every value, Equal
    (or no operator) the same value."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: DeviceTaint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


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


@dataclass(frozen=True)
class CapacityPolicy:
    """A device capacity's ``requestPolicy``: what an unspecified request consumes (``default``), and how a request
    is rounded up and bounded (``validRange`` min/max/step, or ``validValues``)."""

    default: Fraction | None = None
    valid_values: tuple[Fraction, ...] = ()
    has_range: bool = False
    minimum: Fraction | None = None
    maximum: Fraction | None = None
    step: Fraction | None = None

    def consumed(self, requested: Fraction | None, total: Fraction) -> Fraction:
        """What a request consumes of the capacity (calculateConsumedCapacity)."""
        if requested is None:
            return self.default if self.default is not None else total
        if self.has_range and self.minimum is not None:
            if requested < self.minimum:
                return self.minimum
            if not self.step:
                return requested
            steps = -((self.minimum - requested) // self.step)  # ceil
            return self.minimum + steps * self.step
        if self.valid_values:
            return next((v for v in self.valid_values if requested <= v), requested)
        return requested

    def violated_by(self, consumed: Fraction) -> bool:
        """violatesPolicy: above validRange's max, off its step, or not one of validValues (the default is
        always allowed)."""
        if self.default is not None and consumed == self.default:
            return False
        if self.has_range:
            if self.maximum is not None and consumed > self.maximum:
                return True
            return bool(self.step) and (consumed - (self.minimum or 0)) % self.step != 0  # type: ignore[operator]
        if self.valid_values:
            return consumed not in self.valid_values
        return False


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
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity: tuple[tuple[str, Fraction], ...] = ()  # capacity.requests: name (as written) -> quantity

    @property
    def sub(self) -> str:
        """The subrequest's own name ('' for an ``exactly`` request)."""
        return self.name.partition("/")[2]


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
    names: tuple[str, ...] = ()  # the ``requests`` it names, as written ("req" or "req/sub"); () is every request

    def covers(self, request: str) -> bool:
        return request in self.requests

    def applies(self, request: str, sub: str) -> bool:
        """Whether a device allocated for ``request`` (its subrequest ``sub``, '' for none) counts: the request's
        name, or the subrequest's "request/sub", is named, or no request is."""
        return not self.names or request in self.names or (bool(sub) and f"{request}/{sub}" in self.names)


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
    # pod claim name -> the constraints of its claim (the allocator applies them to the devices of the requests
    # they name)
    constraints: dict[str, tuple[ClaimConstraint, ...]] = field(default_factory=dict)
    pointers: dict[str, str] = field(default_factory=dict)  # pod claim name -> its resourceClaims entry


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
    pointers: dict[str, str] = {}
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
        pointers[claim_name] = ptr
        requests.extend(mine)
        every = tuple(read_constraints(*found))
        if every:
            constraints[claim_name] = every
    return PodClaims(tuple(requests), by_claim, tuple(notes), constraints, pointers)


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

    places: tuple[Place, ...] | None = None  # ``placements``, when the allocator knows them already

    @cached_property
    def placements(self) -> tuple[Place, ...]:
        """The distinct (labels, node, where) of ``devices`` (devices of another NVIDIA type or MIG profile apart),
        in their order, each with its first device: what the rules read of them (the devices of a node are mostly
        alike)."""
        if self.places is not None:
            return self.places
        return _places(self.devices)


# A device's labels, node, where() for messages, and the device (the first of those alike)
Place = tuple[tuple[tuple[str, str], ...], str | None, str, "Device"]


def _places(devices: Iterable[Device]) -> tuple[Place, ...]:
    out: dict[Any, Place] = {}
    for d in devices:
        attrs = d.input.attributes.get(NVIDIA_DRIVER, {})
        key = (d.labels, d.node, attrs.get("type"), attrs.get("profile"))
        if key not in out:
            out[key] = (d.labels, d.node, d.where(), d)
    return tuple(out.values())


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


@dataclass(frozen=True)
class ClaimRequests:
    """One claim as the allocator sees it: the requests compatcheck checks, in the claim's order, and the claim's
    constraints. ``pointer``: where a failure of the claim as a whole is reported on a pod (its resourceClaims
    entry)."""

    name: str
    requests: tuple[PodRequest, ...]
    constraints: tuple[ClaimConstraint, ...] = ()
    pointer: str = ""


@dataclass(frozen=True)
class Failure:
    """Requests each of which can be served alone, but not together: ``kind`` "constraint" (a constraint over
    several requests), "overlap" (the requests of one claim compete for the same devices), or "claims" (the pod's
    claims compete for them). ``pointer``: inside the claim object (the constraint, or the request left without a
    device), or for "claims" the pod's resourceClaims entry of the claim left without devices."""

    kind: str
    claim: str
    pointer: str
    subject: str  # e.g. "matchAttribute X over requests 'a', 'b'", "request 'b' together with request 'a'"
    reason: str


@dataclass(frozen=True)
class Diagnosis:
    """What the allocator decides for a pod's claims (or one claim): per request the devices it can get (on the
    nodes where every claim can be allocated, or, where they cannot, what it can get alone) or why it cannot be
    served at all, and the failures of requests that can each be served alone but not together."""

    outcomes: tuple[tuple[PodRequest, Allocation], ...]
    failures: tuple[Failure, ...] = ()


Node = str | None  # None: the one place of an inventory whose slices are bound to no node


@dataclass
class _AltIndex:
    """One alternative's devices across the inventory, by node (None: slices not bound to one node): ``every``
    what its selectors and capacity requests admit (allocationMode All takes all of them), ``usable`` those of
    them whose taints it tolerates, ``consumption`` what it consumes of each shared device's capacity."""

    every: dict[Node, tuple[int, ...]]
    usable: dict[Node, tuple[int, ...]]
    errors: dict[Node, tuple[int, CelError]]
    consumption: dict[int, tuple[tuple[tuple[str, str], Fraction], ...]]
    no_capacity: dict[int, str]  # device -> why it cannot give the capacity asked for


class _NodeAlt:
    __slots__ = ("blocked", "cands", "count", "sub")

    def __init__(self, count: int | None, cands: tuple[int, ...], blocked: bool, sub: str) -> None:
        self.count = count  # None: All
        self.cands = cands
        self.blocked = blocked  # All: a device it must take is tainted, or a selector fails on the node
        self.sub = sub


class _Slot:
    __slots__ = ("alts", "claim", "name")

    def __init__(self, claim: int, name: str, alts: list[_NodeAlt]) -> None:
        self.claim = claim
        self.name = name
        self.alts = alts


Kind = tuple[Any, ...]  # what the search sees of a device (Allocator._kinds)
MAX_RESULTS = 32  # devices one claim can be allocated (resource.k8s.io AllocationResultsMaxSize)


class _Budget(Exception):
    pass


class _Abort(Exception):
    """allocationMode All met a device a constraint refuses: the allocator treats that as an error and stops
    allocating on the node, without trying other devices for the earlier requests."""


def _typed(d: Device, attribute: str) -> tuple[str, Any] | None:
    """A device's value of a fully qualified attribute, tagged with its type (values of different types never
    match); None when it has none (lookupAttribute: the qualified name, or the bare one in the driver's domain)."""
    domain, name = _qualified(attribute, d.driver)
    value = d.input.attributes.get(domain, {}).get(name)
    if value is None:
        return None
    if isinstance(value, Semver):
        return ("version", value)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    return ("string", value)


def _same(a: tuple[str, Any], b: tuple[str, Any]) -> bool:
    """matchAttribute: same type and value (versions as written: semver's minimal form makes that exact)."""
    if a[0] != b[0]:
        return False
    return bool(a[1].text == b[1].text) if a[0] == "version" else bool(a[1] == b[1])


def _distinct_from(existing: list[tuple[str, Any]], value: tuple[str, Any]) -> bool:
    """distinctAttribute as the allocator checks a new device (constraint.go): against the values allocated so far,
    in order, a value of another type ends the check as distinct; one of the same type and value is a duplicate
    (versions compare by precedence: build metadata does not count)."""
    for tag, v in existing:
        if tag != value[0]:
            return True
        if v == value[1]:
            return False
    return True


class _Search:
    """The allocator's backtracking search on one node (allocateOne): the claims in order, each request in order,
    each ``firstAvailable`` subrequest in order, and for each the devices as combinations in inventory order (a
    device once per request); a device goes to one request of the pod unless it allows multiple allocations (then
    while its capacity lasts); each device added must keep every constraint of its claim that applies to it. Two
    devices the search cannot tell apart (same candidacy, constraint values and capacity) are tried once at a
    level: what fails with one fails with the other."""

    def __init__(self, allocator: Allocator, slots: list[_Slot], constraints: list[tuple[ClaimConstraint, ...]],
                 kinds: dict[int, Kind], budget: int, fixed: tuple[int, ...] | None = None,
                 forced: tuple[int, Kind] | None = None) -> None:
        self.devices = allocator.devices
        self.slots = slots
        self.constraints = constraints
        self.kinds = kinds
        self.budget = budget
        self.fixed = fixed  # the alternative of each slot, when fixed
        self.forced = forced  # (slot, kind): the slot must take a device of this kind
        self.used: set[int] = set()
        self.consumed: dict[int, dict[tuple[str, str], Fraction]] = {}
        self.state: list[list[list[Any]]] = [[[None, 0] if c.kind == "matchAttribute" else [] for c in cs]
                                             for cs in constraints]
        self.violated = False  # the last _add failed on a constraint
        self.results = [0] * len(constraints)  # devices allocated per claim (at most MAX_RESULTS)
        self.consumption: dict[tuple[int, int], tuple[tuple[tuple[str, str], Fraction], ...]] = {}

    def run(self) -> bool:
        return self._slot(0)

    def _slot(self, s: int) -> bool:
        if s == len(self.slots):
            return True
        slot = self.slots[s]
        alts = [self.fixed[s]] if self.fixed is not None else range(len(slot.alts))
        for a in alts:
            alt = slot.alts[a]
            if alt.count is None:
                if self._all(s, alt):
                    return True
            elif self._pick(s, alt, 0, 0, []):
                return True
        return False

    def _tick(self) -> None:
        self.budget -= 1
        if self.budget < 0:
            raise _Budget

    def _all(self, s: int, alt: _NodeAlt) -> bool:
        self._tick()
        if alt.blocked or not alt.cands:  # All needs at least one device, and every one of them
            return False
        if self.results[self.slots[s].claim] + len(alt.cands) > MAX_RESULTS:
            return False
        added: list[int] = []
        for d in alt.cands:
            self.violated = False
            if not self._add(s, alt, d):
                if self.violated:
                    raise _Abort
                for e in reversed(added):
                    self._remove(s, alt, e)
                return False
            added.append(d)
        if self.forced is not None and self.forced[0] == s and not any(
                self.kinds[d] == self.forced[1] for d in added):
            ok = False
        else:
            ok = self._slot(s + 1)
        if not ok:
            for e in reversed(added):
                self._remove(s, alt, e)
        return ok

    def _pick(self, s: int, alt: _NodeAlt, k: int, start: int, chosen: list[int]) -> bool:
        self._tick()
        assert alt.count is not None
        if k == alt.count:
            if self.forced is not None and self.forced[0] == s and not any(
                    self.kinds[d] == self.forced[1] for d in chosen):
                return False
            return self._slot(s + 1)
        if k == 0 and self.results[self.slots[s].claim] + alt.count > MAX_RESULTS:
            return False
        cands = alt.cands
        tried: set[Any] = set()
        for i in range(start, len(cands) - (alt.count - k) + 1):
            d = cands[i]
            key = (self.kinds[d], tuple(sorted(self.consumed.get(d, {}).items())))
            if key in tried:
                continue
            if not self._add(s, alt, d):
                continue
            chosen.append(d)
            if self._pick(s, alt, k + 1, i + 1, chosen):
                return True
            chosen.pop()
            self._remove(s, alt, d)
            tried.add(key)
        return False

    def _add(self, s: int, alt: _NodeAlt, d: int) -> bool:
        device = self.devices[d]
        slot = self.slots[s]
        shared = device.shared
        if not shared and d in self.used:
            return False
        use = self.consumption.get((s, d)) if shared else None
        if use:
            have = self.consumed.get(d, {})
            totals = {(dom, ident): q for dom, ids in device.input.capacity.items() for ident, q in ids.items()}
            if any(have.get(key, 0) + q > totals[key] for key, q in use):
                return False
        states = self.state[slot.claim]
        done = 0
        ok = True
        for c, st in zip(self.constraints[slot.claim], states, strict=True):
            if not c.applies(slot.name, alt.sub):
                done += 1
                continue
            value = _typed(device, c.attribute)
            if value is None:
                ok = False
            elif c.kind == "matchAttribute":
                if st[1] == 0:
                    st[0], st[1] = value, 1
                elif _same(st[0], value):
                    st[1] += 1
                else:
                    ok = False
            elif _distinct_from(st, value):
                st.append(value)
            else:
                ok = False
            if not ok:
                break
            done += 1
        if not ok:
            self._undo_constraints(slot, alt, states, done)
            self.violated = True
            return False
        if shared:
            if use:
                have = self.consumed.setdefault(d, {})
                for key, q in use:
                    have[key] = have.get(key, 0) + q
        else:
            self.used.add(d)
        self.results[slot.claim] += 1
        return True

    def _undo_constraints(self, slot: _Slot, alt: _NodeAlt, states: list[list[Any]], upto: int) -> None:
        for c, st in list(zip(self.constraints[slot.claim], states, strict=True))[:upto]:
            if not c.applies(slot.name, alt.sub):
                continue
            if c.kind == "matchAttribute":
                st[1] -= 1
            else:
                st.pop()

    def _remove(self, s: int, alt: _NodeAlt, d: int) -> None:
        slot = self.slots[s]
        self._undo_constraints(slot, alt, self.state[slot.claim], len(self.constraints[slot.claim]))
        if self.devices[d].shared:
            use = self.consumption.get((s, d))
            if use:
                have = self.consumed[d]
                for key, q in use:
                    have[key] -= q
                    if not have[key]:
                        del have[key]
                if not have:
                    del self.consumed[d]
        else:
            self.used.discard(d)
        self.results[slot.claim] -= 1


@dataclass
class _Shape:
    """What one node offers a problem's requests: per request, per alternative, its candidate devices there and
    whether (allocationMode All) it is blocked; the devices' kinds, and the signature (what the search sees)."""

    alts: list[list[tuple[tuple[int, ...], bool]]]
    consumption: dict[tuple[int, int], tuple[tuple[tuple[str, str], Fraction], ...]]
    kinds: dict[int, Kind]
    signature: tuple[Any, ...]
    # (request, alternative, kinds) -> the devices it gets here, and their distinct places
    picked: dict[Any, tuple[tuple[Device, ...], tuple[Place, ...]]] = field(default_factory=dict)


@dataclass
class _Solved:
    """What the search says of one node: "ok", "no", or "undecided" (over its budget); for "ok" the alternative
    each request gets (the first that works, in order) and the kinds of devices each can get in some allocation."""

    state: str
    alternatives: tuple[int, ...] = ()
    kinds: tuple[frozenset[Kind], ...] = ()


_K = TypeVar("_K")
_V = TypeVar("_V")


def _remember(cache: dict[_K, _V], key: _K, value: _V) -> _V:
    """Store ``value`` in one of the allocator's bounded caches: a full cache is emptied first (what it held is only
    work that is done again when asked again)."""
    if len(cache) >= Allocator.MAX_CACHED:
        cache.clear()
    cache[key] = value
    return value


class Allocator:
    """What the scheduler's structured allocator (k8s.io/dynamic-resource-allocation/structured, the incubating
    variant Kubernetes 1.36 runs with its beta DRA features on) decides for a pod's claims, node by node.

    Selectors: a selector is evaluated once per distinct projection of the devices onto the names it mentions
    (devices that differ only in uuid or PCI address are one evaluation), and what a tuple of selectors makes of
    the whole inventory is kept for the inventory's life. Then, per alternative, its devices by node after the
    capacity it asks for and the taints it tolerates; per node the backtracking search (``_Search``). Nodes whose
    devices the search cannot tell apart are searched once, and what a pod's claims get on the nodes it can land on
    is kept too: the pods of a Deployment pay for the search once."""

    MAX_CACHED = 1024
    BUDGET = 20_000  # search steps per node (and kind of node); past it the node is "undecided": no finding

    def __init__(self, devices: list[Device]) -> None:
        self.devices = devices
        self._flat = [_flatten(d.input) for d in devices]
        self._selected: dict[tuple[str, ...], _Selected] = {}
        self._alt_index: dict[tuple[Any, ...], _AltIndex] = {}
        self._by_node: dict[Node, list[int]] = {}
        for i, d in enumerate(devices):
            self._by_node.setdefault(None if d.node is None else d.node, []).append(i)
        self._node_names = sorted(n for n in self._by_node if n is not None)
        self._has_selector = any(d.node is None and not d.all_nodes and d.node_selector is not None
                                 for d in devices)
        self._solved: dict[tuple[Any, ...], dict[Any, Any]] = {}
        self._shapes: dict[tuple[Any, ...], dict[Any, _Shape | None]] = {}
        self._diagnosed: dict[tuple[Any, ...], Diagnosis] = {}

    # ------------------------------------------------------------------ selectors
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
        return _remember(self._selected, selectors, found)

    def _index(self, ra: ResolvedAlternative) -> _AltIndex:
        key = (ra.selectors, ra.alt.tolerations, ra.alt.capacity)
        found = self._alt_index.get(key)
        if found is not None:
            return found
        sel = self.select(ra.selectors)
        every: dict[Node, list[int]] = {}
        usable: dict[Node, list[int]] = {}
        consumption = {}
        no_capacity = {}
        for i in sel.matching:
            d = self.devices[i]
            use = _consumption(d, ra.alt.capacity)
            if isinstance(use, str):
                no_capacity[i] = use
                continue
            if d.shared:
                consumption[i] = use
            every.setdefault(d.node, []).append(i)
            if not _untolerated(d, ra.alt.tolerations):
                usable.setdefault(d.node, []).append(i)
        errors: dict[Node, tuple[int, CelError]] = {}
        for i, exc in sel.errors:
            errors.setdefault(self.devices[i].node, (i, exc))
        found = _AltIndex({k: tuple(v) for k, v in every.items()}, {k: tuple(v) for k, v in usable.items()},
                          errors, consumption, no_capacity)
        return _remember(self._alt_index, key, found)

    # ------------------------------------------------------------------ nodes
    def _places(self, nodes: Collection[str] | None) -> list[Node]:
        if nodes is None:
            return list(self._node_names) or [None]
        return list(sorted(nodes))

    def _reaches(self, i: int, node: Node, labels: Callable[[str], Mapping[str, str]] | None) -> bool:
        """Whether a device of a slice bound to no node serves ``node``: allNodes, or its nodeSelector matches
        the node's labels (when they are known)."""
        d = self.devices[i]
        if d.all_nodes or d.node_selector is None or node is None or labels is None:
            return True
        return _node_selector_matches(d.node_selector, node, labels(node))

    def _local(self, table: Mapping[Node, tuple[int, ...]], node: Node,
               labels: Callable[[str], Mapping[str, str]] | None) -> tuple[int, ...]:
        own = table.get(node, ()) if node is not None else ()
        shared = table.get(None, ())
        if shared and self._has_selector:
            shared = tuple(i for i in shared if self._reaches(i, node, labels))
        return own + shared

    # ------------------------------------------------------------------ the search
    def _shape(self, claims: Sequence[ClaimRequests], node: Node,
               labels: Callable[[str], Mapping[str, str]] | None, table: dict[Any, _Shape | None]) -> _Shape | None:
        """What one node offers the claims' alternatives (their counts aside): None when some request has no
        candidate there."""
        at = (node, tuple(sorted(labels(node).items())) if self._has_selector and labels is not None and
              node is not None else ())
        if at in table:
            return table[at]
        alts_of: list[list[tuple[tuple[int, ...], bool]]] = []
        consumption = {}
        found: _Shape | None = None
        for claim in claims:
            for r in claim.requests:
                alts = []
                for ra in r.alternatives:
                    idx = self._index(ra)
                    error = idx.errors.get(node) if node is not None else None
                    if error is None:
                        error = next((e for e in [idx.errors.get(None)] if e is not None and
                                      self._reaches(e[0], node, labels)), None)
                    if _count(r, ra) is None:
                        cands = self._local(idx.every, node, labels)
                        blocked = error is not None or len(cands) != len(self._local(idx.usable, node, labels))
                    else:
                        cands = () if error is not None else self._local(idx.usable, node, labels)
                        blocked = False
                    for d in cands:
                        if d in idx.consumption:
                            consumption[(len(alts_of), d)] = idx.consumption[d]
                    alts.append((cands, blocked))
                if not any(c for c, _b in alts):
                    table[at] = None
                    return None
                alts_of.append(alts)
        kinds = self._kinds(alts_of, claims, consumption)
        signature = tuple(tuple((blocked, frozenset(Counter(kinds[d] for d in cands).items()))
                                for cands, blocked in alts) for alts in alts_of)
        found = _Shape(alts_of, consumption, kinds, signature)
        table[at] = found
        return found

    def _kinds(self, alts_of: list[list[tuple[tuple[int, ...], bool]]], claims: Sequence[ClaimRequests],
               consumption: dict[tuple[int, int], Any]) -> dict[int, Kind]:
        """Each candidate device's kind: devices of one kind are interchangeable in the search. A kind is canonical
        for the node: which alternatives the device is a candidate of, and for each constraint attribute its type and
        which of the node's values it has (numbered in order of appearance, so that two nodes whose devices relate
        alike have the same kinds whatever their uuids), and, for a shared device, its capacity and what each
        request would consume of it."""
        attributes = sorted({c.attribute for claim in claims for c in claim.constraints})
        members: dict[int, list[int]] = {}
        bit = 0
        for alts in alts_of:
            for cands, _blocked in alts:
                for d in cands:
                    members.setdefault(d, []).append(bit)
                bit += 1
        numbers: list[dict[Any, int]] = [{} for _ in attributes]
        kinds: dict[int, Kind] = {}
        for d, bits in members.items():
            dev = self.devices[d]
            values: list[Any] = []
            for a, seen in zip(attributes, numbers, strict=True):
                v = _typed(dev, a)
                if v is None:
                    values.append(None)
                elif v[0] == "version":  # as written (matchAttribute), and by precedence (distinctAttribute)
                    values.append((v[0], seen.setdefault(("text", v[1].text), len(seen)),
                                   seen.setdefault(("key", v[1].key), len(seen))))
                else:
                    values.append((v[0], seen.setdefault((v[0], v[1]), len(seen))))
            key: Kind = (tuple(bits), tuple(values))
            if dev.shared:
                key += (tuple(sorted((k, q) for ids in dev.input.capacity.values() for k, q in ids.items())),
                        tuple(consumption.get((s, d)) for s in range(len(alts_of))))
            kinds[d] = key
        return kinds

    @staticmethod
    def _slots(claims: Sequence[ClaimRequests], shape: _Shape) -> list[_Slot]:
        slots: list[_Slot] = []
        for c, claim in enumerate(claims):
            for r in claim.requests:
                alts = shape.alts[len(slots)]
                slots.append(_Slot(c, r.request, [_NodeAlt(_count(r, ra), cands, blocked, ra.alt.sub)
                                                  for ra, (cands, blocked) in zip(r.alternatives, alts, strict=True)]))
        return slots

    def _solve_node(self, claims: Sequence[ClaimRequests], node: Node,
                    labels: Callable[[str], Mapping[str, str]] | None, cache: dict[Any, Any],
                    shapes: dict[Any, _Shape | None], counts: tuple[Any, ...],
                    want_kinds: bool) -> tuple[_Solved, _Shape | None]:
        shape = self._shape(claims, node, labels, shapes)
        if shape is None:
            return _Solved("no"), None
        signature = (want_kinds, counts, shape.signature)
        found = cache.get(signature)
        if found is None:
            found = cache[signature] = self._search(self._slots(claims, shape), claims, shape.kinds,
                                                    shape.consumption, want_kinds)
        return found, shape

    def _search(self, slots: list[_Slot], claims: Sequence[ClaimRequests], kinds: dict[int, Kind],
                consumption: dict[tuple[int, int], Any], want_kinds: bool) -> _Solved:
        constraints = [claim.constraints for claim in claims]
        budget = [self.BUDGET]

        def run(fixed: tuple[int, ...] | None = None, forced: tuple[int, Kind] | None = None) -> bool:
            search = _Search(self, slots, constraints, kinds, budget[0], fixed, forced)
            search.consumption = consumption
            try:
                return search.run()
            except _Abort:
                return False
            finally:
                budget[0] = search.budget

        try:
            if not run():
                return _Solved("no")
        except _Budget:
            return _Solved("undecided")
        if not want_kinds:
            return _Solved("ok")
        budget[0] = self.BUDGET  # what the request gets: a budget of its own; past it, more than it gets
        chosen: list[int] = []
        if all(len(t.alts) == 1 for t in slots):
            chosen = [0] * len(slots)
        try:
            for s, slot in enumerate(slots[len(chosen):], start=len(chosen)):  # the first alternative that works
                chosen.append(next((a for a in range(len(slot.alts)) if self._fixed_ok(run, chosen, a, s, slots)),
                                   0))
        except _Budget:
            chosen += [0] * (len(slots) - len(chosen))
        alternatives = tuple(chosen)
        simple = len(slots) == 1 and not any(c.constraints for c in claims)
        got = []
        for s, slot in enumerate(slots):
            alt = slot.alts[alternatives[s]]
            mine = {kinds[d] for d in alt.cands}
            if simple or alt.count is None or budget[0] <= 0:
                got.append(frozenset(mine))
                continue
            try:
                got.append(frozenset(k for k in mine if self._fixed_forced(run, alternatives, s, k, slots)))
            except _Budget:
                got.append(frozenset(mine))
        return _Solved("ok", alternatives, tuple(got))

    @staticmethod
    def _fixed_ok(run: Callable[..., bool], chosen: list[int], a: int, s: int, slots: list[_Slot]) -> bool:
        """Whether some allocation gives the first ``s`` requests their chosen alternatives and request ``s``
        alternative ``a`` (the later requests any of theirs)."""
        for rest in itertools.product(*(range(len(t.alts)) for t in slots[s + 1:])):
            if run(fixed=(*chosen, a, *rest)):
                return True
        return False

    @staticmethod
    def _fixed_forced(run: Callable[..., bool], alternatives: tuple[int, ...], s: int, kind: Kind,
                      slots: list[_Slot]) -> bool:
        return bool(run(fixed=alternatives, forced=(s, kind)))

    def _solve(self, claims: Sequence[ClaimRequests], places: list[Node],
               labels: Callable[[str], Mapping[str, str]] | None, want_kinds: bool = False,
               stop_at_first: bool = True) -> tuple[str, dict[Node, tuple[_Solved, _Shape | None]]]:
        """The search on every place: "ok" when some node can serve the claims, "undecided" when none can but
        some node was not decided, else "no"."""
        key = _problem_key(claims)
        cache = self._solved.get(key)
        if cache is None:
            cache = _remember(self._solved, key, {})
        shape_key = _shape_key(claims)
        shapes = self._shapes.get(shape_key)
        if shapes is None:
            shapes = _remember(self._shapes, shape_key, {})
        counts = tuple(tuple(_count(r, ra) for ra in r.alternatives) for c in claims for r in c.requests)
        results = {}
        state = "no"
        for node in places:
            solved = self._solve_node(claims, node, labels, cache, shapes, counts, want_kinds)
            if solved[0].state == "ok":
                state = "ok"
                results[node] = solved
                if stop_at_first:
                    break
            elif solved[0].state == "undecided" and state == "no":
                state = "undecided"
        return state, results

    # ------------------------------------------------------------------ what a pod gets
    def diagnose(self, claims: Sequence[ClaimRequests], nodes: Collection[str] | None = None,
                 labels: Callable[[str], Mapping[str, str]] | None = None) -> Diagnosis:
        """Allocate the pod's claims together on one node, as the scheduler does (``nodes``: the nodes the pod can
        land on; None: every node of the inventory). ``labels``: a node's labels, for slices with a
        nodeSelector."""
        # The claims themselves (names, pointers, classes: what the outcomes and failures carry back), not only
        # what the search sees: two pods with the same claims share the decision, and each gets its own requests.
        key = (tuple(claims), frozenset(nodes) if nodes is not None else None,
               tuple((n, tuple(sorted(labels(n).items()))) for n in sorted(nodes or ()))
               if self._has_selector and labels is not None else ())
        found = self._diagnosed.get(key)
        if found is None:
            found = _remember(self._diagnosed, key, self._diagnose(claims, nodes, labels))
        return found

    def _diagnose(self, claims: Sequence[ClaimRequests], nodes: Collection[str] | None,
                  labels: Callable[[str], Mapping[str, str]] | None) -> Diagnosis:
        places = self._places(nodes)
        outcomes: dict[tuple[int, str], Allocation] = {}
        kept: list[ClaimRequests] = []
        for c, claim in enumerate(claims):
            mine = []
            for r in claim.requests:
                unknown = self._unknown(r)
                if unknown:
                    outcomes[(c, r.request)] = Allocation((), unknown=unknown)
                else:
                    mine.append(r)
            kept.append(replace(claim, requests=tuple(mine)))
        # Each request alone (with the constraints of its claim, which then constrain its own devices only).
        alone_ok = True
        for c, claim in enumerate(kept):
            for r in claim.requests:
                single = [replace(claim, requests=(r,))]
                state, results = self._solve(single, places, labels, want_kinds=True, stop_at_first=False)
                if state == "ok":
                    outcomes[(c, r.request)] = self._allocation(results, 0, r)
                elif state == "undecided":
                    outcomes[(c, r.request)] = Allocation((), unknown=self._undecided())
                    alone_ok = False
                else:
                    outcomes[(c, r.request)] = Allocation((), self._explain(r, claim.constraints, places, labels))
                    alone_ok = False
        failures: list[Failure] = []
        if alone_ok:
            failures = self._together(kept, places, labels)
        whole = len(kept) == 1 and len(kept[0].requests) == 1  # the request alone is the whole problem
        if alone_ok and not failures and not whole and any(claim.requests for claim in kept):
            state, results = self._solve(kept, places, labels, want_kinds=True, stop_at_first=False)
            if state == "ok":
                slot = 0
                for c, claim in enumerate(kept):
                    for r in claim.requests:
                        outcomes[(c, r.request)] = self._allocation(results, slot, r)
                        slot += 1
        ordered = [(r, outcomes[(c, r.request)]) for c, claim in enumerate(claims) for r in claim.requests]
        return Diagnosis(tuple(ordered), tuple(failures))

    @staticmethod
    def _undecided() -> str:
        return (f"the allocation search did not finish within {Allocator.BUDGET} steps on a node (the scheduler's "
                "own search has a time limit too)")

    def _unknown(self, r: PodRequest) -> str:
        for ra in r.alternatives:
            if ra.device_class is None:
                return f"DeviceClass {ra.alt.class_name!r} is unknown"
            selected = self.select(ra.selectors)
            if selected.unsupported is not None:
                return f"{selected.unsupported}"
        return ""

    def _allocation(self, results: dict[Node, tuple[_Solved, _Shape | None]], slot: int,
                    request: PodRequest) -> Allocation:
        """The devices request ``slot`` can get on the nodes where the search succeeded."""
        devices: list[Device] = []
        places: list[Place] = []
        chosen: int | None = None
        for solved, shape in results.values():
            assert shape is not None
            alt = solved.alternatives[slot]
            chosen = alt if chosen is None else chosen
            wanted = solved.kinds[slot]
            key = (slot, alt, wanted)
            picked = shape.picked.get(key)
            if picked is None:
                kinds = shape.kinds
                mine = tuple(self.devices[d] for d in shape.alts[slot][alt][0] if kinds[d] in wanted)
                picked = shape.picked[key] = (mine, _places(mine))
            devices.extend(picked[0])
            places.extend(picked[1])
        return Allocation(tuple(devices), count=_count(request, request.alternatives[chosen or 0]),
                          places=tuple(places))

    def _together(self, claims: list[ClaimRequests], places: list[Node],
                  labels: Callable[[str], Mapping[str, str]] | None) -> list[Failure]:
        """Claims whose requests can each be served alone: those that cannot be served together, and why."""
        out: list[Failure] = []
        for claim in claims:
            failure = self._claim_failure(claim, places, labels)
            if failure is not None:
                out.append(failure)
        if out or len([c for c in claims if c.requests]) < 2:
            return out
        for k in range(1, len(claims)):
            if not claims[k].requests:
                continue
            state, _ = self._solve(claims[: k + 1], places, labels)
            if state == "no":
                before = [c.name for c in claims[:k] if c.requests]
                total = _least_devices([r for c in claims[: k + 1] for r in c.requests])
                return [Failure("claims", claims[k].name, claims[k].pointer,
                                f"claim {claims[k].name!r} together with claim{'s' if len(before) > 1 else ''} "
                                f"{', '.join(map(repr, before))}",
                                f"together they ask for {_devices(total)} on one node, and no node has devices that "
                                f"can serve them all ({ONE_EACH.format('claim')})")]
            if state == "undecided":
                return []
        return out

    def _claim_failure(self, claim: ClaimRequests, places: list[Node],
                       labels: Callable[[str], Mapping[str, str]] | None) -> Failure | None:
        reqs = claim.requests
        if len(reqs) < 2:
            return None
        for j in range(1, len(reqs)):  # the requests alone compete for devices
            state, _ = self._solve([replace(claim, requests=reqs[: j + 1], constraints=())], places, labels)
            if state == "undecided":
                return None
            if state == "no":
                before = [r.request for r in reqs[:j]]
                total = _least_devices(list(reqs[: j + 1]))
                if total > MAX_RESULTS:
                    return Failure("overlap", claim.name, _request_pointer(reqs[j]),
                                   f"request {reqs[j].request!r} together with request"
                                   f"{'s' if len(before) > 1 else ''} {', '.join(map(repr, before))}",
                                   f"they ask for {_devices(total)} and a claim can be allocated at most "
                                   f"{MAX_RESULTS}")
                return Failure("overlap", claim.name, _request_pointer(reqs[j]),
                               f"request {reqs[j].request!r} together with request{'s' if len(before) > 1 else ''} "
                               f"{', '.join(map(repr, before))}",
                               f"they ask for {_devices(total)} on one node, and no node has devices that can serve "
                               f"them all ({ONE_EACH.format('request')})")
        for c in claim.constraints:  # one constraint with the requests competing for devices
            state, _ = self._solve([replace(claim, constraints=(c,))], places, labels)
            if state == "undecided":
                return None
            if state == "no":
                covered = [r.request for r in reqs if c.covers(r.request)]
                every = any(_count(r, ra) is None for r in reqs if c.covers(r.request) for ra in r.alternatives)
                return Failure("constraint", claim.name, c.pointer,
                               f"{c.kind} {c.attribute} over request{'s' if len(covered) != 1 else ''} "
                               f"{', '.join(map(repr, covered))}",
                               (self._constraint_reason(c, reqs, places, labels) if len(covered) > 1 else
                                _CONSTRAINT_WITH_ALL) + (_ALL_STOPS if every else ""))
        state, _ = self._solve([claim], places, labels)
        if state == "no":
            named = [c for c in claim.constraints]
            return Failure("constraint", claim.name, named[-1].pointer if named else _request_pointer(reqs[-1]),
                           f"constraints {', '.join(f'{c.kind} {c.attribute}' for c in named)}",
                           "each can be met alone, and no node has devices that meet them together")
        return None

    def _constraint_reason(self, c: ClaimConstraint, reqs: tuple[PodRequest, ...], places: list[Node],
                           labels: Callable[[str], Mapping[str, str]] | None) -> str:
        served = []
        for r in reqs:
            if not c.covers(r.request):
                continue
            options = []  # the alternatives the constraint applies to: the one asking for the fewest devices
            for ra in [a for a in r.alternatives if c.applies(r.request, a.alt.sub)] or list(r.alternatives):
                idx = self._index(ra)
                mine = tuple({i: None for node in places for i in self._local(idx.usable, node, labels)})
                count = _count(r, ra)
                options.append((count if count is not None else len(mine), tuple(self.devices[i] for i in mine)))
            count, devices = min(options, key=lambda o: o[0])
            served.append((devices, count))
        reason = constraint_reason(c, served)
        if reason is not None:
            return reason
        return _CONSTRAINT_WITH_ALL

    # ------------------------------------------------------------------ why a request cannot be served alone
    def _explain(self, r: PodRequest, constraints: tuple[ClaimConstraint, ...], places: list[Node],
                 labels: Callable[[str], Mapping[str, str]] | None) -> str:
        return "; or ".join(self._explain_alt(r, ra, constraints, places, labels) for ra in r.alternatives)

    def _explain_alt(self, r: PodRequest, ra: ResolvedAlternative, constraints: tuple[ClaimConstraint, ...],
                     places: list[Node], labels: Callable[[str], Mapping[str, str]] | None) -> str:
        count = r.count_override if r.count_override is not None else ra.alt.count
        table = {k: tuple(v) for k, v in self._by_node.items()}
        everything = {i: None for node in places for i in self._local(table, node, labels)}
        placed = list(everything)
        sel = self.select(ra.selectors)
        error = next(((i, exc) for i, exc in sel.errors if i in everything), None)
        if error is not None:
            d = self.devices[error[0]]
            return (f"a selector fails on device {d.name} ({d.where()}): {error[1]}, and the scheduler aborts the "
                    "allocation")
        idx = self._index(ra)
        matching = [i for i in sel.matching if i in everything]
        if not matching:
            return self._none_reason(ra, placed)
        fits = [i for i in matching if i not in idx.no_capacity]
        if not fits:
            return self._capacity_reason(ra, matching, idx)
        tainted = [i for i in fits if _untolerated(self.devices[i], ra.alt.tolerations)]
        mine = tuple(c for c in constraints if c.applies(r.request, ra.alt.sub))
        if count is None:
            if tainted:
                d = self.devices[tainted[0]]
                return (f"allocationMode All takes every matching device, and device {d.name} ({d.where()}) has the "
                        f"taint {_untolerated(d, ra.alt.tolerations)[0]}, which the request does not tolerate")
            sizes = [(len(taken), node) for node in places if (taken := self._local(idx.every, node, labels))]
            if sizes and min(n for n, _node in sizes) > MAX_RESULTS:
                fewest, where = min(sizes, key=lambda m: m[0])
                return (f"allocationMode All takes every matching device, {fewest} on {where or 'the shared pools'} "
                        f"(the fewest on any node), and a claim can be allocated at most {MAX_RESULTS}")
            for c in mine:
                for node in places:
                    here = [self.devices[i] for i in self._local(idx.every, node, labels)]
                    if here and not _all_meet(c, here):
                        return (f"allocationMode All takes all {len(here)} matching devices on "
                                f"{node or 'the shared pools'}, and they do not all "
                                f"{'share' if c.kind == 'matchAttribute' else 'have distinct'} {c.attribute}")
            return "allocationMode All: no node has devices for it"
        usable = [i for i in fits if i not in set(tainted)]
        if not usable:
            shown = sorted({str(t) for i in tainted for t in _untolerated(self.devices[i], ra.alt.tolerations)})
            return (f"the {len(tainted)} matching device{'s are' if len(tainted) != 1 else ' is'} tainted "
                    f"({', '.join(shown[:3])}{' ...' if len(shown) > 3 else ''}) and the request "
                    f"{'tolerates none of these taints' if len(shown) > 1 else 'does not tolerate that taint'}")
        assert count is not None
        if count > MAX_RESULTS:
            return f"it asks for {count} devices and a claim can be allocated at most {MAX_RESULTS}"
        chosen = [self.devices[i] for i in usable]
        match = tuple(c.attribute for c in mine if c.kind == "matchAttribute")
        distinct = tuple(c.attribute for c in mine if c.kind == "distinctAttribute")
        per_node: dict[tuple[str | None, tuple[str, ...]], int] = {}
        for d in chosen:
            values = _match_values(d, match)
            if values is not None:  # a device without a matchAttribute attribute cannot be allocated with it
                per_node[(d.node, values)] = per_node.get((d.node, values), 0) + 1
        shared = {v: n for (node, v), n in per_node.items() if node is None}
        best = max((n + shared.get(v, 0) for (node, v), n in per_node.items() if node is not None),
                   default=max(shared.values(), default=0))
        note = (f" ({len(tainted)} more {'are' if len(tainted) != 1 else 'is'} tainted and not tolerated)"
                if tainted else "")
        if best < count:
            same = f" with the same {', '.join(match)}" if match else ""
            return (f"it asks for {count} devices{same} on one node and at most {best} "
                    f"{'matches' if best == 1 else 'match'} on any node{note}")
        if distinct:
            most = _distinct_best([chosen], distinct)
            if most < count:
                return (f"it asks for {count} devices with distinct {', '.join(distinct)} on one node and "
                        f"{_values(most)} on any node{note}")
        if mine:
            return (f"no node has {count} devices for it that meet its constraints "
                    f"({', '.join(f'{c.kind} {c.attribute}' for c in mine)})")
        return f"no node has {count} devices for it"

    def _capacity_reason(self, ra: ResolvedAlternative, matching: list[int], idx: _AltIndex) -> str:
        asked = ", ".join(f"{name}: {_quantity_text(q)}" for name, q in ra.alt.capacity)
        why = sorted({idx.no_capacity[i] for i in matching})
        more = " ..." if len(why) > 3 else ""
        which = (f"none of the {len(matching)} matching devices can" if len(matching) != 1 else
                 "the 1 matching device cannot")
        return f"it asks for capacity {asked} and {which} give it ({'; '.join(why[:3])}{more})"

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


def _count(r: PodRequest, ra: ResolvedAlternative) -> int | None:
    return r.count_override if r.count_override is not None else ra.alt.count


def _shape_key(claims: Sequence[ClaimRequests]) -> tuple[Any, ...]:
    """What decides a node's candidates for the claims and which of them the search can tell apart."""
    return (tuple(tuple(tuple((ra.selectors, ra.alt.tolerations, ra.alt.capacity, _count(r, ra) is None)
                              for ra in r.alternatives) for r in c.requests) for c in claims),
            tuple(sorted({k.attribute for c in claims for k in c.constraints})))


def _problem_key(claims: Sequence[ClaimRequests]) -> tuple[Any, ...]:
    return tuple((tuple((r.request, r.count_override, tuple((ra.selectors, ra.alt.count, ra.alt.sub,
                                                              ra.alt.tolerations, ra.alt.capacity)
                                                             for ra in r.alternatives)) for r in c.requests),
                  tuple((k.kind, k.attribute, k.names) for k in c.constraints)) for c in claims)


_CONSTRAINT_WITH_ALL = ("each request can be served alone, and no node has devices that serve every request of the "
                        "claim while meeting it")
_ALL_STOPS = (" (with allocationMode All, a device the request must take that does not meet the constraint stops the "
              "allocation on the node: the allocator does not try other devices for the requests before it)")
ONE_EACH = ("a device goes to one {0}, or, if it allows multiple allocations, to as many as its capacity lasts "
            "for")


def _request_pointer(r: PodRequest) -> str:
    """A request's pointer inside its claim object (its first alternative's, less the alternative part)."""
    pointer = r.alternatives[0].alt.pointer if r.alternatives else ""
    for tail in ("/exactly", "/firstAvailable/0"):
        if pointer.endswith(tail):
            return pointer[: -len(tail)]
    return pointer


def _least_devices(requests: list[PodRequest]) -> int:
    """The fewest devices the requests ask for together (allocationMode All: at least one)."""
    total = 0
    for r in requests:
        counts = [r.count_override if r.count_override is not None else ra.alt.count for ra in r.alternatives]
        total += min((c if c is not None else 1) for c in counts) if counts else 0
    return total


def _devices(n: int) -> str:
    return f"{n} device{'s' if n != 1 else ''}"


def _untolerated(d: Device, tolerations: tuple[DeviceToleration, ...]) -> list[DeviceTaint]:
    """The device's taints that keep a request with these tolerations off it."""
    return [t for t in d.taints if t.prevents_allocation and not any(tol.tolerates(t) for tol in tolerations)]


def _all_meet(c: ClaimConstraint, devices: list[Device]) -> bool:
    """Whether every one of ``devices`` can be allocated under the constraint, in order."""
    values: list[tuple[str, Any]] = []
    for d in devices:
        v = _typed(d, c.attribute)
        if v is None:
            return False
        if c.kind == "matchAttribute":
            if values and not _same(values[0], v):
                return False
        elif not _distinct_from(values, v):
            return False
        values.append(v)
    return True


def _consumption(d: Device, requests: tuple[tuple[str, Fraction], ...]) -> tuple[tuple[tuple[str, str],
                                                                                          Fraction], ...] | str:
    """What a request consumes of each capacity of a device (CmpRequestOverCapacity with nothing allocated yet), or
    why the device cannot give it: a capacity it does not publish, a request its requestPolicy does not allow, or
    more than it has. A name without a domain is the device driver's."""
    capacity = d.input.capacity
    resolved = {}
    for name, q in requests:
        key = _qualified(name, d.driver)
        if key[1] not in capacity.get(key[0], {}):
            return f"{d.name} publishes no capacity {name}"
        resolved[key] = q
    policies = dict(d.policies)
    out = []
    for domain, ids in capacity.items():
        for ident, total in ids.items():
            key = (domain, ident)
            policy = policies.get(key)
            asked = resolved.get(key)
            used = policy.consumed(asked, total) if policy is not None else asked if asked is not None else total
            if policy is not None and policy.violated_by(used):
                return f"the requestPolicy of {d.name}'s {ident} does not allow {_quantity_text(used)}"
            if used > total:
                return f"{d.name} has {_quantity_text(total)} of {ident}"
            out.append((key, used))
    return tuple(out)


def _quantity_text(q: Fraction) -> str:
    """A quantity as Kubernetes would write it (binary suffixes for whole multiples of 1024)."""
    if q.denominator == 1:
        n = q.numerator
        for suffix, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if n and n % factor == 0:
                return f"{n // factor}{suffix}"
        return str(n)
    milli = q * 1000
    return f"{milli.numerator // milli.denominator}m" if milli.denominator == 1 else str(float(q))


def _node_selector_matches(selector: JsonObject, name: str, labels: Mapping[str, str]) -> bool:
    """A core/v1 NodeSelector: any term whose matchExpressions (labels) and matchFields (metadata.name) all hold."""
    for term in sequence(selector.get("nodeSelectorTerms")):
        term = mapping(term)
        ok = True
        for part, values in (("matchExpressions", labels), ("matchFields", {"metadata.name": name})):
            for expr in sequence(term.get(part)):
                expr = mapping(expr)
                key, op = text(expr.get("key")) or "", text(expr.get("operator")) or ""
                wanted = [str(v) for v in sequence(expr.get("values"))]
                have = values.get(key)
                if op == "In":
                    ok = have is not None and have in wanted
                elif op == "NotIn":
                    ok = have is None or have not in wanted
                elif op == "Exists":
                    ok = have is not None
                elif op == "DoesNotExist":
                    ok = have is None
                elif op in ("Gt", "Lt") and have is not None and have.lstrip("-").isdigit() and len(wanted) == 1 \
                        and wanted[0].lstrip("-").isdigit():
                    ok = int(have) > int(wanted[0]) if op == "Gt" else int(have) < int(wanted[0])
                else:
                    ok = False
                if not ok:
                    break
            if not ok:
                break
        if ok:
            return True
    return False


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
            counts.append(len({_distinct_value(v) for d in unique if (v := _typed(d, attribute)) is not None}))
        best = max(best, min(counts, default=0))
    return best


def _distinct_value(value: tuple[str, Any]) -> tuple[str, Any]:
    """A typed value as distinctAttribute tells values apart: versions by precedence (build metadata aside)."""
    return (value[0], value[1].key) if value[0] == "version" else value


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
    """ResourceSlices, DeviceClasses and DeviceTaintRules (any other object is ignored)."""
    devices: list[Device] = []
    classes: dict[str, DeviceClassInfo] = {}
    rules: list[tuple[tuple[str | None, str | None, str | None], DeviceTaint]] = []
    for obj in objects:
        if obj.get("kind") == "ResourceSlice":
            devices.extend(read_slice(obj))
        elif obj.get("kind") == "DeviceClass":
            found = read_device_class(obj, source)
            if found is not None:
                classes[found.name] = found
        elif obj.get("kind") == "DeviceTaintRule":
            rule = read_taint_rule(obj)
            if rule is not None:
                rules.append(rule)
    if rules:
        devices = [replace(d, taints=d.taints + tuple(t for (driver, pool, name), t in rules if (
            driver in (None, d.driver) and pool in (None, d.pool) and name in (None, d.name)))) for d in devices]
    return Inventory(devices, classes)


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
