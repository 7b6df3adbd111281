"""Where pod specs live in each kind: the kind -> pod-spec path table, built from the data table
``rules/data/workload-kinds.yaml`` (and an admin's rows, ``<rules-dir>/data/*.yaml`` of table ``workload-kinds``).

Every consumer (engine, fixes, webhook, CLI) finds pod specs and containers through this module; no
other module may hard-code a path such as ``/spec/template/spec``. Pure: no I/O. The table is built from rows
(``build_kind_table``) that ``compatcheck.io.loader`` reads; the built-in one is installed there as the default of
``pod_targets`` (``install_default_kinds``), and an evaluation with admin rows passes its own (``EvalContext.kinds``).

A ``template`` location holds ``{metadata, spec}`` (a PodTemplateSpec); a ``podspec`` location holds the
PodSpec fields directly (KServe predictors, LLMInferenceService templates, ServingRuntimes); a ``flat`` location is
an operator's spec that describes one container in its own fields (NIM Operator's NIMService, Kubeflow Trainer's
TrainJob trainer, production-stack's VLLMRuntime), read as that container (``FlatContainer``) with the placement
fields (nodeSelector, affinity, tolerations) the spec itself has.
``*`` in a pattern matches every key of a mapping or every item of a list.

GPU requests written outside a container's resources count as the container's: an operator's own fields
(``PodLocation.gpu_fields``: Dynamo v1alpha1's ``services.<name>.resources.limits.gpu``, MPIJob v1alpha1's
``gpus``, a MIG partition or an instance-type name), and KAI Scheduler's GPU sharing annotations ``gpu-fraction`` /
``gpu-memory`` (one shared GPU for the first container, or the one ``gpu-fraction-container-name`` names;
https://github.com/NVIDIA/KAI-Scheduler/tree/main/docs/gpu-sharing). KAI's stay code: which container they give
the GPU to is a rule over annotations of any kind (they are a scheduler's, not a kind's), not a path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from compatcheck.core.jsonutil import Json, JsonObject, mapping, sequence, text
from compatcheck.core.model import ObjectRef
from compatcheck.core.pointers import escape_token, split_pointer

Shape = Literal["template", "podspec", "flat"]


@dataclass(frozen=True)
class FlatContainer:
    """How a ``flat`` location describes its one container: its name (for messages), the image (a string field,
    or an object whose ``image_parts`` are joined by ``image_sep``), the resources field (Kubernetes
    ResourceRequirements, or, with ``gpu_count``, an object with a GPU count and the field naming its resource)."""

    name: str
    image_parts: tuple[str, ...] = ()  # () : ``image`` is a string
    image_sep: str = ":"
    resources: str = "resources"  # a field of the location, or a path below it ("backendRuntimeConfig/resources")
    # (count field of a non-Kubernetes resources, or a path below it: "gpu/count"; the resource it counts)
    gpu_count: tuple[str, str] | None = None
    # Command-line flags the operator builds from its fields, in its order: (flag, or "" for a positional argument;
    # pointer relative to the location, ".." up), then a field of extra args as written. Findings on them point at
    # those fields.
    flags: tuple[tuple[str, str], ...] = ()
    extra_args: str | None = None


@dataclass(frozen=True)
class GpuField:
    """A GPU request an operator writes outside the containers, relative to the location (``..`` goes up): a count
    of ``resource``; a value naming one unit of ``resource_from_value`` (``{}`` is the value: a MIG partition); or a
    name that ``values`` maps to resources (a resource profile, an instance type). ``per_pod`` False: the count is
    the whole job's, which the operator spreads over its pods (read as at least one GPU per pod)."""

    path: str
    resource: str | None = None
    resource_from_value: str | None = None
    values: tuple[tuple[str, tuple[tuple[str, Json], ...]], ...] = ()
    per_pod: bool = True
    share: bool = False  # the value is a fraction of one shared GPU (KubeShare's "0.4"): one GPU when above 0


@dataclass(frozen=True)
class PodLocation:
    pattern: str
    shape: Shape = "template"
    # Fields of a podspec location that each hold ONE container (KServe's framework shortcuts).
    single_containers: tuple[str, ...] = ()
    # GPU requests the operator writes beside the pod spec (for its single containers, or else its first container).
    gpu_fields: tuple[GpuField, ...] = ()
    flat: FlatContainer | None = None
    # Lists of containers a podspec location holds besides containers/initContainers (Argo Workflows' template
    # ``sidecars`` and ``containerSet/containers``), read as regular containers: paths below the location.
    container_lists: tuple[str, ...] = ()
    # Fields the operator fills into the pod spec when absent: (pointer from the pod spec, value).
    defaults: tuple[tuple[str, Json], ...] = ()


@dataclass(frozen=True)
class WorkloadKind:
    groups: tuple[str, ...]
    kind: str
    locations: tuple[PodLocation, ...]
    versions: tuple[str, ...] = ()  # () : every version
    resource: str = ""  # the plural (default: the kind in lower case + "s")
    scope: str = "Namespaced"
    not_served: tuple[str, ...] = ()  # groups no supported API server serves (the chart routes nothing for them)
    source: str = ""

    @property
    def plural(self) -> str:
        return self.resource or self.kind.lower() + "s"


class KindTableError(ValueError):
    """A row of the workload-kinds table that cannot be used (what the schema cannot see)."""


class KindTable:
    """The kinds, looked up by (API group, kind, version): the first row of a group and kind whose versions hold
    the object's version (or that names none) wins, so an admin's row (read first) replaces the built-in one. An
    object of a version no row names is read with every location its group and kind have in any row."""

    def __init__(self, kinds: Sequence[WorkloadKind]) -> None:
        self.kinds = tuple(kinds)
        self._by_key: dict[tuple[str, str], list[WorkloadKind]] = {}
        for wk in self.kinds:
            for g in wk.groups:
                self._by_key.setdefault((g, wk.kind), []).append(wk)
        self._union: dict[tuple[str, str], WorkloadKind] = {}
        for key, rows in self._by_key.items():
            if len(rows) > 1:
                locations: list[PodLocation] = []  # in row order, each once (a location's defaults may be unhashable)
                for loc in (loc for wk in rows for loc in wk.locations):
                    if loc not in locations:
                        locations.append(loc)
                self._union[key] = WorkloadKind(rows[0].groups, key[1], tuple(locations), (), rows[0].resource,
                                                rows[0].scope, rows[0].not_served, rows[0].source)
        self.names = frozenset(kind for _group, kind in self._by_key)

    def lookup(self, group: str, kind: str, version: str) -> WorkloadKind | None:
        rows = self._by_key.get((group, kind))
        if not rows:
            return None
        for wk in rows:
            if not wk.versions or version in wk.versions:
                return wk
        return self._union.get((group, kind), rows[0])

    def keys(self) -> frozenset[tuple[str, str]]:
        return frozenset(self._by_key)


# Groups whose kinds the chart routes in its own rules (built-in Kubernetes APIs); every other group of the table is
# a custom resource, routed by webhook.customResources.
BUILTIN_GROUPS = frozenset({"", "apps", "batch", "extensions"})


def custom_resource_routes(kinds: KindTable) -> list[dict[str, Any]]:
    """The chart's ``webhook.customResources`` for ``kinds``: one rule per API group and scope, in table order, of
    every custom resource with a pod location in a group some API server still serves."""
    routes: dict[tuple[str, str], list[str]] = {}
    for wk in kinds.kinds:
        if not wk.locations:
            continue
        for g in wk.groups:
            if g in BUILTIN_GROUPS or g in wk.not_served:
                continue
            plurals = routes.setdefault((g, wk.scope), [])
            if wk.plural not in plurals:
                plurals.append(wk.plural)
    out: list[dict[str, Any]] = []
    for (g, scope), plurals in routes.items():
        rule: dict[str, Any] = {"apiGroups": [g], "resources": plurals}
        if scope != "Namespaced":
            rule["scope"] = scope
        out.append(rule)
    return out


def _ptr_ok(p: Any, what: str) -> str:
    if not isinstance(p, str):
        raise KindTableError(f"{what}: expected a string")
    return p


def build_kind_table(rows: Sequence[Mapping[str, Any]]) -> KindTable:
    """The table from rows of ``workload-kinds`` (schema-valid; an admin's first)."""
    kinds: list[WorkloadKind] = []
    for i, row in enumerate(rows):
        where = f"workload-kinds rows[{i}]"
        groups, names = tuple(row["groups"]), tuple(row["kinds"])
        plurals = tuple(row.get("resources") or ())
        if plurals and len(plurals) != len(names):
            raise KindTableError(f"{where}: resources must name one resource per kind ({len(names)})")
        locations = tuple(_location(loc, f"{where} locations[{j}]") for j, loc in enumerate(row["locations"]))
        for k, name in enumerate(names):
            kinds.append(WorkloadKind(groups, name, locations, tuple(row.get("versions") or ()),
                                      plurals[k] if plurals else "", row.get("scope", "Namespaced"),
                                      tuple(row.get("notServed") or ()), str(row.get("source", ""))))
    return KindTable(kinds)


def _location(loc: Mapping[str, Any], where: str) -> PodLocation:
    shape = loc.get("shape", "template")
    flat: FlatContainer | None = None
    if shape == "flat":
        c = loc["container"]
        image = c.get("image") or {}
        count = c.get("gpuCount")
        flat = FlatContainer(c["name"], tuple(image.get("parts") or ()), image.get("separator", ":"),
                             c.get("resources", "resources"),
                             (count["field"], count["resource"]) if count else None,
                             tuple((f["flag"], _ptr_ok(f["path"], where)) for f in c.get("flags") or ()),
                             c.get("extraArgs"))
    gpu_fields = tuple(GpuField(_ptr_ok(g["path"], where), g.get("resource"), g.get("resourceFromValue"),
                                tuple((str(k), tuple(v.items())) for k, v in (g.get("values") or {}).items()),
                                bool(g.get("perPod", True)), bool(g.get("share", False)))
                       for g in loc.get("gpuFields") or ())
    return PodLocation(_ptr_ok(loc["path"], where), shape, tuple(loc.get("singleContainers") or ()), gpu_fields, flat,
                       tuple(loc.get("containerLists") or ()), tuple((loc.get("defaults") or {}).items()))


_default: KindTable | None = None
_provider: Callable[[], KindTable] | None = None


def install_default_kinds(provider: Callable[[], KindTable]) -> None:
    """Where the built-in table comes from (``compatcheck.io.loader`` reads it, once, when first needed)."""
    global _default, _provider
    _default, _provider = None, provider


def default_kinds() -> KindTable:
    global _default
    if _default is None:
        if _provider is None:
            raise RuntimeError("no workload-kinds table installed (import compatcheck.io.loader)")
        _default = _provider()
    return _default


def known_kind_names(kinds: KindTable | None = None) -> frozenset[str]:
    """Every kind name in the table (for bounding metric labels to a closed set)."""
    return (kinds or default_kinds()).names


def api_group(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def api_version_of(api_version: str) -> str:
    return api_version.rsplit("/", 1)[1] if "/" in api_version else api_version


def workload_kind(obj: JsonObject, kinds: KindTable | None = None) -> WorkloadKind | None:
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    return (kinds or default_kinds()).lookup(api_group(api_version), kind, api_version_of(api_version))


def object_ref(obj: JsonObject) -> ObjectRef:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    name = text(meta.get("name"))
    if name is None and isinstance(meta.get("generateName"), str):
        name = meta["generateName"] + "*"
    ns = text(meta.get("namespace"))
    api_version = text(obj.get("apiVersion"))
    kind = text(obj.get("kind"))
    return ObjectRef(api_version, kind, ns, name)


@dataclass
class ContainerTarget:
    name: str
    pointer: str
    data: JsonObject  # the container; for a ``flat`` location, the container its operator's fields describe
    init: bool
    # Pointer relative to the pod spec, e.g. /containers/0 or /predictor-style /model.
    rel: str
    # GPU requests written outside the container's resources (KAI's sharing annotations, Dynamo's service
    # resources), and where.
    implied_gpu: dict[str, Json] = field(default_factory=dict)
    implied_pointer: str = ""
    # Where an element of a ``flat`` container's synthesised command or args really is ("args/1" -> pointer).
    field_pointers: dict[str, str] = field(default_factory=dict)

    def pointer_at(self, key: str, index: int) -> str:
        """The pointer of ``key[index]`` (``args``, ``command``) in the object."""
        return self.field_pointers.get(f"{key}/{index}") or f"{self.pointer}/{key}/{index}"


@dataclass
class PodTarget:
    """One pod spec inside an object, with the metadata that governs it."""

    ref: ObjectRef
    obj: JsonObject
    pointer: str  # absolute pointer of the PodSpec inside the object
    spec: JsonObject
    annotations: dict[str, str]  # object annotations with the template's merged over them
    labels: dict[str, str]
    containers: list[ContainerTarget]
    # The pod template ({metadata, spec}) this spec belongs to, when it is not the object itself (a Deployment's
    # /spec/template); None for Pods and for specs without their own metadata (KServe predictors).
    template_pointer: str | None = None
    template_annotations: JsonObject | None = None
    flat: bool = False  # an operator's flat spec, read as one container (FlatContainer)
    # GPU requests of the operator's own fields that the table cannot read (pointer, why): not checked, said so.
    unknown_gpu: list[tuple[str, str]] = field(default_factory=list)
    # Images an operator takes from another object that is not in the input (pointer, why): not checked, said so.
    unknown_image: list[tuple[str, str]] = field(default_factory=list)


def _walk(node: Json, tokens: list[str], prefix: str) -> Iterator[tuple[str, Json]]:
    if not tokens:
        yield prefix, node
        return
    head, rest = tokens[0], tokens[1:]
    if head == "*":
        if isinstance(node, dict):
            for k, v in node.items():
                yield from _walk(v, rest, f"{prefix}/{escape_token(str(k))}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                yield from _walk(v, rest, f"{prefix}/{i}")
        return
    if isinstance(node, dict) and head in node:
        yield from _walk(node[head], rest, f"{prefix}/{escape_token(head)}")
    elif isinstance(node, list) and head.isdigit() and int(head) < len(node):
        yield from _walk(node[int(head)], rest, f"{prefix}/{head}")


def _str_map(value: Json) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {str(k): v if isinstance(v, str) else str(v) for k, v in value.items() if v is not None}


def pod_targets(obj: JsonObject, kinds: KindTable | None = None) -> list[PodTarget]:
    """Every pod spec in ``obj`` (empty for kinds that carry none, and for kinds not in ``kinds``: the built-in
    table when None)."""
    wk = workload_kind(obj, kinds)
    if wk is None:
        return []
    return targets_at(obj, wk.locations)


def targets_at(obj: JsonObject, locations: Sequence[PodLocation]) -> list[PodTarget]:
    """The pod targets of ``obj`` at ``locations`` (a kind's, or those structural discovery found)."""
    ref = object_ref(obj)
    meta = mapping(obj.get("metadata"))
    obj_annotations = _str_map(meta.get("annotations"))
    obj_labels = _str_map(meta.get("labels"))
    out: list[PodTarget] = []
    for loc in locations:
        for pointer, node in _walk(obj, split_pointer(loc.pattern), ""):
            if not isinstance(node, dict):
                continue
            template_pointer: str | None = None
            template_annotations: JsonObject | None = None
            if loc.shape == "template":
                spec = node.get("spec")
                spec_pointer = f"{pointer}/spec"
                tmeta = mapping(node.get("metadata"))
                if pointer:
                    template_pointer, template_annotations = pointer, mapping(tmeta.get("annotations"))
                annotations = obj_annotations if pointer == "" else {**obj_annotations,
                                                                     **_str_map(tmeta.get("annotations"))}
                labels = _str_map(tmeta.get("labels"))
            else:
                spec, spec_pointer = node, pointer
                annotations, labels = obj_annotations, obj_labels
            if not isinstance(spec, dict):
                continue
            if loc.defaults:
                spec = _with_defaults(spec, loc.defaults)
            if loc.flat is not None:
                containers = [_flat_container(obj, spec, spec_pointer, loc.flat)]
            else:
                containers = _containers(spec, spec_pointer, loc.single_containers, loc.container_lists)
            unknown: list[tuple[str, str]] = []
            for gf in loc.gpu_fields:
                _operator_gpu(obj, pointer, gf, loc.single_containers, containers, unknown)
            _kai_sharing(containers, annotations, template_pointer or "")
            out.append(PodTarget(ref, obj, spec_pointer, spec, annotations, labels, containers, template_pointer,
                                 template_annotations, loc.flat is not None, unknown))
    return out


def _with_defaults(spec: JsonObject, defaults: tuple[tuple[str, Json], ...]) -> JsonObject:
    """``spec`` with the fields its operator fills in where absent (copied along each default's path only: the
    containers stay the objects written, so pointers and fixes still reach them)."""
    out = dict(spec)
    for pointer, value in defaults:
        tokens = split_pointer(pointer)
        node = out
        for t in tokens[:-1]:
            child = node.get(t)
            if child is None:
                child = {}
            elif not isinstance(child, dict):
                break
            node[t] = child = dict(child)
            node = child
        else:
            node.setdefault(tokens[-1], value)
    return out


def _operator_gpu(obj: JsonObject, pointer: str, gf: GpuField, singles: tuple[str, ...],
                  containers: list[ContainerTarget], unknown: list[tuple[str, str]]) -> None:
    """An operator's own GPU field: its request counts as the single containers' (or else the first regular
    container's)."""
    where = _relative(pointer, gf.path)
    value = _at(obj, where)
    if value is None or isinstance(value, bool):
        return
    implied: dict[str, Json] = {}
    if gf.resource is not None:
        if gf.share:
            try:
                fraction = float(str(value))
            except ValueError:
                fraction = None  # not a number (a placeholder): kept as written, so the request is not read as 0
            if fraction is not None and fraction <= 0:
                return
            value = 1 if fraction is not None else value
        elif not gf.per_pod and isinstance(value, int | float) and value > 0:
            value = 1  # the job's total: each pod gets part of it, at least one
        implied = {gf.resource: value}
    elif gf.resource_from_value is not None:
        if not isinstance(value, str) or not value.strip():
            return
        implied = {gf.resource_from_value.replace("{}", value.strip()): 1}
    else:
        found = dict(gf.values).get(str(value))
        if found is None:
            unknown.append((where, f"{value!r} is not a profile the workload-kinds table knows: its GPUs are unknown"))
            return
        implied = dict(found)
    chosen = [c for c in containers if c.rel.count("/") == 1 and c.rel[1:] in singles] or \
        [c for c in containers if not c.init][:1]
    for c in chosen:
        if not c.implied_gpu:
            c.implied_gpu, c.implied_pointer = implied, where


KAI_FRACTION, KAI_MEMORY, KAI_CONTAINER = "gpu-fraction", "gpu-memory", "gpu-fraction-container-name"


def _kai_sharing(containers: list[ContainerTarget], annotations: dict[str, str], template_pointer: str) -> None:
    """KAI Scheduler's GPU sharing: a ``gpu-fraction`` or ``gpu-memory`` annotation asks for part of one GPU (a
    whole device that KAI's reservation pod holds on the node), for the first container or the one named."""
    key = KAI_FRACTION if KAI_FRACTION in annotations else KAI_MEMORY if KAI_MEMORY in annotations else None
    if key is None or not containers:
        return
    named = annotations.get(KAI_CONTAINER)
    regular = [c for c in containers if not c.init]
    chosen = next((c for c in containers if c.name == named), None) if named else (regular or containers)[0]
    if chosen is None or chosen.implied_gpu:
        return
    chosen.implied_gpu = {"nvidia.com/gpu": 1}
    chosen.implied_pointer = f"{template_pointer}/metadata/annotations/{escape_token(key)}"


def _relative(pointer: str, rel: str) -> str:
    tokens = split_pointer(pointer)
    for t in rel.split("/"):
        if t == "..":
            tokens = tokens[:-1]
        elif t:
            tokens.append(t.replace("~1", "/").replace("~0", "~"))
    return "".join(f"/{escape_token(t)}" for t in tokens)


def _at(obj: Json, pointer: str) -> Json:
    node: Json = obj
    for t in split_pointer(pointer):
        if isinstance(node, dict) and t in node:
            node = node[t]
        else:
            return None
    return node


def _flat_container(obj: JsonObject, spec: JsonObject, pointer: str, flat: FlatContainer) -> ContainerTarget:
    """The container an operator's flat spec describes, as Kubernetes would write it."""
    data: JsonObject = {"name": flat.name}
    where: dict[str, str] = {}
    image = spec.get("image")
    if flat.image_parts:
        parts = mapping(image)
        if all(isinstance(parts.get(k), str | int | float) and str(parts[k]) for k in flat.image_parts):
            data["image"] = flat.image_sep.join(str(parts[k]) for k in flat.image_parts)
    elif isinstance(image, str):
        data["image"] = image
    for key in ("command", "args", "env"):
        if isinstance(spec.get(key), list):
            data[key] = spec[key]
    resources = mapping(_at(spec, "/" + flat.resources))
    claims: list[Json] = []
    for i, entry in enumerate(sequence(spec.get("draResources"))):
        only = [r for r in sequence(mapping(entry).get("requests")) if isinstance(r, str)]
        claims.extend([{"name": f"draResources[{i}]", "request": r} for r in only] or [{"name": f"draResources[{i}]"}])
    if claims:  # NIM: every DRA resource is the model container's (as compatcheck.core.dra names them)
        resources = {**resources, "claims": claims}
    if flat.gpu_count is not None:
        count = _at(resources, "/" + flat.gpu_count[0])
        if count is not None:
            data["resources"] = {"limits": {flat.gpu_count[1]: count}}
    elif resources:
        data["resources"] = resources
    args: list[Json] = list(sequence(data.get("args")))
    for flag, rel in flat.flags:
        at = _relative(pointer, rel)
        value = _at(obj, at)
        if isinstance(value, str | int | float) and not isinstance(value, bool) and str(value) and value != 0:
            words = [flag, str(value)] if flag else [str(value)]
            for word in words:
                where[f"args/{len(args)}"] = at
                args.append(word)
    if flat.extra_args is not None:
        at = _relative(pointer, flat.extra_args)
        for i, extra in enumerate(sequence(_at(obj, at))):
            where[f"args/{len(args)}"] = f"{at}/{i}"
            args.append(extra)
    if args:
        data["args"] = args
    return ContainerTarget(flat.name, pointer, data, False, "", field_pointers=where)


def _containers(spec: JsonObject, spec_pointer: str, singles: tuple[str, ...],
                lists: tuple[str, ...] = ()) -> list[ContainerTarget]:
    out: list[ContainerTarget] = []
    fields = (("initContainers", True), ("containers", False), *((f, False) for f in lists))
    for field_name, init in fields:
        rel_list = "".join(f"/{t}" for t in field_name.split("/"))  # written escaped: a path below the pod spec
        items = _at(spec, rel_list)
        if not isinstance(items, list):
            continue
        for i, c in enumerate(items):
            if isinstance(c, dict):
                name = text(c.get("name")) or f"{field_name}[{i}]"
                rel = f"{rel_list}/{i}"
                out.append(ContainerTarget(name, spec_pointer + rel, c, init, rel))
    for field_name in singles:
        c = spec.get(field_name)
        if isinstance(c, dict):
            name = text(c.get("name")) or field_name
            rel = f"/{field_name}"
            out.append(ContainerTarget(name, spec_pointer + rel, c, False, rel))
    return out
