"""A pod's DRA claims: the ``DraIndex`` of DeviceClasses, ResourceClaims and ResourceClaimTemplates known to an
evaluation (the files linted together, or the webhook's live view, which is ``authoritative``), and ``pod_claims``,
which resolves a pod spec's ``resourceClaims`` (and a NIMService's ``draResources``, with the claim spec the NIM
Operator generates) against it into ``PodRequest``s with their classes, constraints and notes on what could not be
checked; ``container_claim_requests`` narrows them to one container.

It must not evaluate selectors or allocate: it says what a pod asks for, not what it gets.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from compatcheck.core.dra.model import (
    BUILTIN_CLASSES,
    IMPLICIT_EXTENDED_PREFIX,
    NVIDIA_DRIVER,
    Alternative,
    ClaimConstraint,
    DeviceClassInfo,
    _qualified,
)
from compatcheck.core.dra.read import _v1alpha2, claim_spec_of, read_claim_spec, read_constraints, read_device_class
from compatcheck.core.jsonutil import JsonObject, mapping, sequence, text

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
