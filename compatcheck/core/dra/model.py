"""The DRA model: the constants of ``resource.k8s.io`` and the frozen records compatcheck reads its objects into.

- ``DeviceClassInfo`` (a DeviceClass's selectors and ``extendedResourceName``) and ``BUILTIN_CLASSES`` (the two
  classes NVIDIA's DRA driver chart installs);
- ``Device`` (one device of a ResourceSlice: where it is, the ``DeviceInput`` a CEL selector sees, its GFD labels,
  taints and capacity request policies), ``DeviceTaint``, ``DeviceToleration`` and ``CapacityPolicy`` (the
  scheduler's rules for consumable capacity: ``consumed``, ``violated_by``);
- ``Alternative``, ``DeviceRequest`` and ``ClaimConstraint``: what a ResourceClaimSpec asks for;
- the small helpers the other modules share: ``_qualified`` (an attribute or capacity name in its domain),
  ``_node_selector_matches`` (whether a slice's core/v1 NodeSelector reaches a node) and ``_quantity_text`` (a
  quantity as Kubernetes writes it, for messages).

It must not read JSON (``read``), evaluate CEL (``selectors``), resolve a pod's claims (``claims``) or allocate
(``search``, ``allocator``): the records are plain data that those modules share.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from compatcheck.core.cel import DeviceInput
from compatcheck.core.jsonutil import JsonObject, mapping, sequence, text

NVIDIA_DRIVER = "gpu.nvidia.com"
# Every DeviceClass is also an extended resource of this name (KEP-5004, DRAExtendedResource).
IMPLICIT_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"
CHART_SOURCE = ("https://github.com/NVIDIA/k8s-dra-driver-gpu/tree/main/deployments/helm/dra-driver-nvidia-gpu/"
                "templates (deviceclass-gpu.yaml, deviceclass-mig.yaml)")
DEVICE_SOURCE = "https://github.com/NVIDIA/k8s-dra-driver-gpu/blob/main/cmd/gpu-kubelet-plugin/deviceinfo.go"


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


def _qualified(name: str, driver: str) -> tuple[str, str]:
    domain, slash, ident = name.rpartition("/")
    return (domain, ident) if slash else (driver, name)


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
