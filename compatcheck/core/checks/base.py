"""What every check type shares: the contract (``CheckType``, its ``Outcome``s and ``prepare``d params), and
``PodAnalysis``, the per-pod facts computed once and reused by every check (GPU requests, CUDA runtime per
container, the node classes the pod can land on).

The contract, one signature for every check type::

    prepare(params: RawParams) -> P                                    # once per rule, at load time
    evaluate(target: T, ctx: EvalContext, params: P) -> Iterable[Outcome]  # once per object or pod

``T`` is ``PodAnalysis`` for a ``PodCheck`` (run once per pod spec) and ``ObjectTarget`` for an
``ObjectCheck`` (run once per object); ``P`` is the type's own frozen params dataclass, so no ``evaluate``
reads a dict and mypy checks each ``evaluate`` against what its ``prepare`` returns. An ``Outcome`` is a
``Violation`` (a finding to be) or an ``InputProblem`` (bad input inside the object, such as an unreadable
annotation: a diagnostic, never a finding).

Pure: no I/O, no printing. Pointers produced here are absolute within the object, built only from
the targets that ``workloads`` located, so no check knows a kind's layout.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, ClassVar, Generic, Literal, TypeVar, overload

from compatcheck.core.cluster import (
    Cluster,
    NodeClass,
    NodeFacts,
    NodeRecord,
    build_cluster,
    implied_tolerations,
    is_extended_resource,
    is_gpu_resource,
    node_facts,
    offers_resources,
    placement_matches,
    required_terms,
    untolerated_taints,
)
from compatcheck.core.crl import CrlIndex
from compatcheck.core.drakinds import has_claims
from compatcheck.core.imageconfig import RegistryFacts, image_facts_with_config
from compatcheck.core.images import ImageFacts, parse_reference
from compatcheck.core.jsonutil import Json, JsonObject, dumps, sequence
from compatcheck.core.knowledge import KnowledgeBase, memo
from compatcheck.core.kserve import EMPTY_RUNTIMES, RuntimeIndex
from compatcheck.core.llmaz import EMPTY as EMPTY_LLMAZ
from compatcheck.core.llmaz import LlmazIndex
from compatcheck.core.model import Applicability, DuplicateKey, Fix, PatchOp
from compatcheck.core.pointers import escape_token
from compatcheck.core.policy import DEFAULT_POLICY, POLICY_LABELS, DriverPolicy
from compatcheck.core.quantities import QuantityError, parse_quantity
from compatcheck.core.versions import Version, VersionError, parse_cuda_version
from compatcheck.core.workloads import ContainerTarget, KindTable, PodTarget, pod_targets

if TYPE_CHECKING:  # core.dra (claims, CEL selectors, the allocator) is imported where a pod names claims
    from compatcheck.core.dra import (
        Allocation,
        Device,
        Diagnosis,
        DraIndex,
        KnownValues,
        PodClaims,
        PodRequest,
    )

# A DRA device class as the rules read it: (GFD labels, device-plugin resources it counts as).
DraClassKey = tuple[tuple[tuple[str, str], ...], tuple[tuple[str, int], ...]]


class UnknownCheckType(LookupError):
    pass


@dataclass(frozen=True)
class Violation:
    """A finding to be: the engine adds the rule, its severity and the object."""

    message: str
    pointer: str
    container: str | None = None
    fix: Fix | None = None


@dataclass(frozen=True)
class InputProblem:
    """Bad input inside the object (an unreadable version annotation): reported as an input diagnostic naming
    the rule (an error, exit 2), never as a finding."""

    message: str
    pointer: str


Outcome = Violation | InputProblem

# A rule's ``check.params`` as written, once valid against the type's ``params_schema``; only ``prepare`` reads it.
RawParams = JsonObject


@dataclass
class EvalContext:
    kb: KnowledgeBase
    cluster: Cluster | None = None
    crl: CrlIndex = field(default_factory=CrlIndex)
    # Synthetic node classes for manifest-pinned GPU labels, shared across pods (same pins recur).
    pinned_memo: dict[tuple[tuple[tuple[str, str], ...], ...], list[NodeClass]] = field(default_factory=dict,
                                                                                        repr=False)
    # (placement classes, eligible classes) by everything that decides them: a webhook sees the same
    # selectors, affinities, tolerations and GPU requests on most pods, however much else differs.
    placement_memo: dict[bytes, tuple[list[NodeClass], list[NodeClass]]] = field(default_factory=dict,
                                                                                 repr=False)
    # DeviceClasses, ResourceClaims and ResourceClaimTemplates (files linted together, or the live view).
    # None: no DRA object was read (``core.dra`` is then never imported: see ``core.drakinds``).
    dra: DraIndex | None = None
    # KServe ServingRuntimes and ClusterServingRuntimes (files linted together): what a model format runs on.
    serving_runtimes: RuntimeIndex = field(default_factory=lambda: EMPTY_RUNTIMES)
    # llmaz OpenModels and BackendRuntimes (files linted together): a Playground's GPUs and image.
    llmaz: LlmazIndex = field(default_factory=lambda: EMPTY_LLMAZ)
    # What DRA selectors pin without an inventory, by selectors; the facts of DRA device label sets.
    dra_memo: dict[tuple[str, ...], tuple[list[NodeClass], bool]] = field(default_factory=dict, repr=False)
    dra_facts: dict[DraClassKey, NodeFacts] = field(default_factory=dict, repr=False)
    # kube-apiserver admission plugins that change what a pod tolerates (config ``admissionPlugins``); a
    # ClusterProfile's own list (``Cluster.admission_plugins``) adds to it.
    admission_plugins: frozenset[str] = frozenset()
    # The driver/runtime relaxations the cluster declares (config ``driverPolicy``); a node pool's labels
    # override them for that pool (NodeFacts.forward_compat, minor_version_compat).
    driver_policy: DriverPolicy = DEFAULT_POLICY

    @property
    def plugins(self) -> frozenset[str]:
        if self.cluster is not None and self.cluster.admission_plugins:
            return self.admission_plugins | self.cluster.admission_plugins
        return self.admission_plugins

    # What images' own configs say (read from their registries, a cache or a file before evaluation), keyed by
    # the image reference as containers write it. Empty: the image table alone speaks, as without lookups.
    registry: Mapping[str, RegistryFacts] = field(default_factory=dict)
    # The context this one adds registry facts to (``with_registry``): the same cluster, tables and memos.
    base: EvalContext | None = field(default=None, repr=False)
    facts_memo: dict[tuple[str, RegistryFacts], ImageFacts] = field(default_factory=dict, repr=False)

    def with_registry(self, facts: Mapping[str, RegistryFacts]) -> EvalContext:
        """This context with ``facts`` as its registry facts, sharing everything else (memos included)."""
        root = self.base or self
        return replace(root, registry=facts, base=root)

    @property
    def root(self) -> EvalContext:
        return self.base or self

    def with_cluster(self, cluster: Cluster) -> EvalContext:
        """The same inputs (knowledge, CRLs, DRA claims, serving runtimes, plugins, driver policy and registry facts)
        judged against another cluster view: a what-if, or one pool of the compatibility matrix. The memos start
        empty, as they hold node classes of a view."""
        root = self.root
        ctx = EvalContext(root.kb, cluster, root.crl, dra=root.dra, serving_runtimes=root.serving_runtimes,
                          llmaz=root.llmaz,
                          admission_plugins=root.admission_plugins, driver_policy=root.driver_policy)
        return ctx.with_registry(self.registry) if self.registry else ctx

    def registry_key(self) -> tuple[tuple[str, str], ...]:
        """What the registry facts are, in a few bytes, for caches of evaluations."""
        return tuple(sorted((image, f"{rf.digest}/{rf.config_digest}") for image, rf in self.registry.items()))

    def image_facts(self, image: str) -> ImageFacts | None:
        """What is known about an image: its config (when looked up) with the image table, else the table alone."""
        rf = self.registry.get(image)
        table = self.kb.image_facts(image)
        if rf is None:
            return table
        return memo(self.facts_memo, (image, rf), lambda: image_facts_with_config(
            image, self.kb.with_stated_version(image, table, rf), rf))


RUNTIME_ANNOTATION = "compatcheck.io/cuda-runtime"
# HAMi's per-container GPU memory and core resources (its nvidia.com/gpu alone is a whole GPU).
HAMI_RESOURCES = ("nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores")
_REQUIRE_CUDA_RE = re.compile(r"(?:^|\s)cuda>=\s*(\d+\.\d+(?:\.\d+)?)", re.ASCII)


@dataclass(frozen=True)
class CudaRuntime:
    version: Version | None
    origin: str
    pointer: str
    problem: str = ""
    absent: bool = False  # the image carries no CUDA runtime at all (an OS or tool image): nothing to check
    # ``version`` is only a lower bound (a floating tag such as latest): a check may use it only where every
    # newer CUDA would give the same finding (a driver too old even for the lowest release).
    at_least: bool = False


def lookup_images(obj: JsonObject, kinds: KindTable | None = None) -> dict[str, str]:
    """The images whose config could decide a CUDA runtime in ``obj``: those of GPU containers whose runtime no
    annotation or container env states (those win over the image), in order, each once. Callers fetch their
    configs before evaluation (a lint run, the webhook). Each image maps to the pointer of its first mention."""
    out: dict[str, str] = {}
    for pod in pod_targets(obj, kinds):
        if RUNTIME_ANNOTATION in pod.annotations:
            continue
        for c in pod.containers:
            image = c.data.get("image")
            if not isinstance(image, str) or not image or f"{RUNTIME_ANNOTATION}.{c.name}" in pod.annotations:
                continue
            if any((found := env_value(c, var)) is not None and isinstance(found[1], str)
                   for var in ("NVIDIA_REQUIRE_CUDA", "CUDA_VERSION")):
                continue
            if any((quantity_int(v) or 0) > 0 or quantity_int(v) is None for v in container_gpu_requests(c).values()):
                out.setdefault(image, f"{c.pointer}/image")
    return out


def container_gpu_requests(c: ContainerTarget) -> JsonObject:
    """GPU-type resources of a container: limits, else requests (the API server defaults one from the other)."""
    res = c.data.get("resources")
    if not isinstance(res, dict):
        return dict(c.implied_gpu)
    out: JsonObject = dict(c.implied_gpu)  # KAI's sharing annotations, Dynamo's service resources
    for section in ("requests", "limits"):  # limits win
        values = res.get(section)
        if isinstance(values, dict):
            for k, v in values.items():
                if is_gpu_resource(str(k)):
                    out[str(k)] = v
    return out


def quantity_int(value: Json) -> int | None:
    # Fast path: almost every GPU request is a small integer or a digit string.
    if type(value) is int:
        return value
    if type(value) is str and len(value) < 19 and value.isascii() and value.isdigit():  # ('²'.isdigit() too)
        return int(value)
    try:
        q = parse_quantity(value)
    except QuantityError:
        return None
    return int(q) if q.denominator == 1 else None


def quantity_ceil(value: Json) -> int:
    """Whole units a request needs (an invalid 0.5 GPU still needs a GPU node); 0 when unreadable."""
    n = quantity_int(value)
    if n is not None:
        return n
    try:
        q = parse_quantity(value)
    except QuantityError:
        return 0
    return max(0, -(-q.numerator // q.denominator))


def env_value(c: ContainerTarget, name: str) -> tuple[int, Json] | None:
    env = c.data.get("env")
    if not isinstance(env, list):
        return None
    found = None
    for i, e in enumerate(env):
        if isinstance(e, dict) and e.get("name") == name:
            found = (i, e.get("value"))  # the last definition wins, as in Kubernetes
    return found


def command_line(c: ContainerTarget) -> list[str]:
    out: list[str] = []
    for key in ("command", "args"):
        v = c.data.get(key)
        if isinstance(v, list):
            out.extend(str(x) for x in v if x is not None)
    return out


def flag_values(argv: list[str], flags: Iterable[str]) -> Iterator[tuple[int, str, str]]:
    """(argv index, flag, value) for ``--flag=v`` and ``--flag v``; also inside ``sh -c`` strings."""
    wanted = set(flags)
    tokens: list[tuple[int, str]] = []
    for i, a in enumerate(argv):
        if " " in a and "--" in a:
            tokens.extend((i, t) for t in a.split())
        else:
            tokens.append((i, a))
    for j, (i, tok) in enumerate(tokens):
        name, eq, value = tok.partition("=")
        if name in wanted:
            if eq:
                yield i, name, value.strip("'\"")
            elif j + 1 < len(tokens):
                yield tokens[j + 1][0], name, tokens[j + 1][1].strip("'\"")


def add_env_ops(c: ContainerTarget, name: str, value: str) -> tuple[PatchOp, ...]:
    env = c.data.get("env")
    if isinstance(env, list):
        found = env_value(c, name)
        if found is not None:
            return (PatchOp("replace", f"{c.pointer}/env/{found[0]}/value", value),)
        return (PatchOp("add", f"{c.pointer}/env/-", {"name": name, "value": value}),)
    return (PatchOp("add", f"{c.pointer}/env", [{"name": name, "value": value}]),)


T = TypeVar("T")


class once(Generic[T]):
    """functools.cached_property without its per-access lock (Python < 3.12 takes an RLock on every first
    read): a PodAnalysis lives inside one evaluation on one thread, and admission reads its facts dozens
    of times per request."""

    def __init__(self, compute: Callable[[PodAnalysis], T]) -> None:
        self.compute = compute
        self.name = compute.__name__

    @overload
    def __get__(self, instance: None, owner: type) -> once[T]: ...
    @overload
    def __get__(self, instance: PodAnalysis, owner: type) -> T: ...
    def __get__(self, instance: PodAnalysis | None, owner: type) -> T | once[T]:
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.compute(instance)
        return value


class PodAnalysis:
    """Facts about one pod spec, computed lazily and at most once per pod."""

    def __init__(self, pod: PodTarget, ctx: EvalContext) -> None:
        self.pod = pod
        self.ctx = ctx

    @once
    def gpu_containers(self) -> list[tuple[ContainerTarget, JsonObject]]:
        """Containers that ask for a GPU: an extended GPU resource, or a DRA claim for an NVIDIA GPU."""
        out = []
        claims = self.dra if has_claims(self.pod.spec) else None
        for c in self.pod.containers:
            req = container_gpu_requests(c)
            if any((quantity_int(v) or 0) > 0 or quantity_int(v) is None for v in req.values()) or (
                    claims is not None and _claims_gpu(c.data, claims)):
                out.append((c, req))
        return out

    @property
    def is_gpu_pod(self) -> bool:
        return bool(self.gpu_containers)

    @once
    def implied_tolerations(self) -> list[JsonObject]:
        """Tolerations the API server's admission plugins add to this pod (``EvalContext.plugins``): with
        ExtendedResourceToleration, one per extended resource any container or init container requests."""
        plugins = self.ctx.plugins
        if not plugins:
            return []
        names: set[str] = set()
        for c in self.pod.containers:
            res = c.data.get("resources")
            if isinstance(res, dict):
                for section in ("requests", "limits"):  # requests are defaulted from limits before admission
                    values = res.get(section)
                    if isinstance(values, dict):
                        names.update(str(k) for k in values if is_extended_resource(str(k)))
        return implied_tolerations(plugins, names)

    @once
    def pod_requests(self) -> dict[str, int]:
        """Effective pod request per GPU resource: max(sum of containers, largest init container)."""
        regular: dict[str, int] = {}
        init: dict[str, int] = {}
        for c, req in self.gpu_containers:
            for k, v in req.items():
                n = quantity_ceil(v)
                if c.init:
                    init[k] = max(init.get(k, 0), n)
                else:
                    regular[k] = regular.get(k, 0) + n
        return {k: max(regular.get(k, 0), init.get(k, 0)) for k in set(regular) | set(init)}

    def runtime(self, c: ContainerTarget) -> CudaRuntime:
        found = self._runtimes.get(c.pointer)
        if found is None:
            found = self._runtimes[c.pointer] = self._resolve_runtime(c)
        return found

    @once
    def _runtimes(self) -> dict[str, CudaRuntime]:
        return {}

    def _resolve_runtime(self, c: ContainerTarget) -> CudaRuntime:
        ann = self.pod.annotations
        template = self.pod.template_annotations or {}
        for key in (f"{RUNTIME_ANNOTATION}.{c.name}", RUNTIME_ANNOTATION):
            if key in ann:
                # The pod template's annotations win over the object's (workloads.pod_targets): point where it is.
                meta = f"{self.pod.template_pointer}/metadata" if key in template else "/metadata"
                ptr = f"{meta}/annotations/{escape_token(key)}"
                try:
                    return CudaRuntime(parse_cuda_version(ann[key]), f"annotation {key}", ptr)
                except VersionError as exc:
                    return CudaRuntime(None, f"annotation {key}", ptr, str(exc))
        for var in ("NVIDIA_REQUIRE_CUDA", "CUDA_VERSION"):
            found = env_value(c, var)
            if found is None or not isinstance(found[1], str):
                continue
            ptr = f"{c.pointer}/env/{found[0]}/value"
            text = found[1]
            if var == "NVIDIA_REQUIRE_CUDA":
                m = _REQUIRE_CUDA_RE.search(text)
                if not m:
                    return CudaRuntime(None, f"env {var}", ptr, f"{var}={text!r} has no cuda>= term")
                text = m.group(1)
            try:
                return CudaRuntime(parse_cuda_version(text), f"env {var}", ptr)
            except VersionError as exc:
                return CudaRuntime(None, f"env {var}", ptr, str(exc))
        image = c.data.get("image")
        ptr = f"{c.pointer}/image"
        if not isinstance(image, str) or not image:
            return CudaRuntime(None, "image", ptr, "the container has no image")
        if parse_reference(image) is None:  # a template placeholder (<image>, ${IMAGE}): nothing to judge yet
            return CudaRuntime(None, f"image {image}", ptr, f"{image!r} is not an image reference", absent=True)
        facts = self.image_facts(c)
        if facts is None:
            return CudaRuntime(None, f"image {image}", ptr, f"no image pattern recognises {image!r}")
        if facts.no_cuda_runtime:
            return CudaRuntime(None, facts.origin, ptr, f"{image} carries no CUDA runtime", absent=True)
        if facts.cuda is None and facts.cuda_at_least is not None:
            return CudaRuntime(facts.cuda_at_least, facts.origin, ptr, facts.reason, at_least=True)
        return CudaRuntime(facts.cuda, facts.origin, ptr, facts.reason)

    def image_facts(self, c: ContainerTarget) -> ImageFacts | None:
        """What the image's config (when looked up) and the image profiles say about the container's image (None:
        no image, or nothing is known about it)."""
        image = c.data.get("image")
        return self.ctx.image_facts(image) if isinstance(image, str) and image else None

    @once
    def under_vgpu(self) -> bool:
        """Whether the pod asks for virtual GPUs (GPU-Manager's tencent.com/vcuda-*, HAMi's nvidia.com/gpumem,
        gpucores): their libcuda interposer must be the one loaded, so an image's own libcuda (cuda-compat) would
        bypass the vGPU layer."""
        return any(name.startswith("tencent.com/vcuda") or name in HAMI_RESOURCES
                   for _c, req in self.gpu_containers for name in req)

    # ------------------------------------------------------------------ Dynamic Resource Allocation
    @once
    def dra(self) -> PodClaims:
        """The pod's resource claims, resolved against the claims, templates and DeviceClasses known."""
        from compatcheck.core.dra import EMPTY_INDEX, pod_claims

        cluster = self.ctx.cluster
        extra = cluster.dra.classes if cluster is not None and cluster.dra is not None else None
        index = self.ctx.dra if self.ctx.dra is not None else EMPTY_INDEX
        return pod_claims(self.pod.spec, self.pod.pointer, self.pod.ref.namespace, index, extra)

    @once
    def dra_gpu_requests(self) -> list[PodRequest]:
        """The NVIDIA GPU requests of the claims the pod's containers use, and (with an inventory) the extended
        resources it asks for that a DeviceClass maps to DRA devices (``extendedResourceName``)."""
        out: list[PodRequest] = []
        if has_claims(self.pod.spec):
            from compatcheck.core.dra import container_claim_requests

            used = {id(r): r for c in self.pod.containers for r in container_claim_requests(c.data, self.dra)}
            out.extend(r for r in used.values() if r.nvidia_gpu)
        out.extend(self.dra_mapped.values())
        return out

    @once
    def dra_mapped(self) -> dict[str, PodRequest]:
        """Extended resources of the pod that a DeviceClass of the input or the cluster maps (with an inventory:
        without one, the mapping adds nothing to check), as the request the scheduler would generate."""
        cluster = self.ctx.cluster
        if cluster is None or cluster.dra is None or not self.pod_requests:
            return {}
        from compatcheck.core.dra import EMPTY_INDEX, Alternative, PodRequest, ResolvedAlternative

        mapping = (self.ctx.dra if self.ctx.dra is not None else EMPTY_INDEX).extended_resources(cluster.dra.classes)
        out = {}
        for name, amount in self.pod_requests.items():
            cls = mapping.get(name)
            if cls is None or amount <= 0:
                continue
            ptr = next((f"{c.pointer}/resources/limits/{escape_token(name)}" for c, req in self.gpu_containers
                        if name in req), self.pod.pointer)
            alt = Alternative(name, cls.name, (), amount, ptr)
            out[name] = PodRequest(name, name, f"extended resource {name} (DeviceClass {cls.name})", ptr,
                                   (ResolvedAlternative(alt, cls),), count_override=amount)
        return out

    @property
    def dra_inventory_known(self) -> bool:
        return self.ctx.cluster is not None and self.ctx.cluster.dra is not None

    @once
    def dra_diagnosis(self) -> Diagnosis | None:
        """With an inventory: what the scheduler's allocator decides for the pod's NVIDIA GPU requests (its claims
        allocated together, on one of the nodes the pod can land on)."""
        cluster = self.ctx.cluster
        if cluster is None or cluster.dra is None or not self.dra_gpu_requests:
            return None
        from compatcheck.core.dra import ClaimRequests

        wanted = {id(r) for r in self.dra_gpu_requests}
        claims = []
        for name, requests in self.dra.by_claim.items():
            mine = tuple(r for r in requests if id(r) in wanted)
            if mine:
                claims.append(ClaimRequests(name, mine, self.dra.constraints.get(name, ()),
                                            self.dra.pointers.get(name, mine[0].pointer)))
        for name, r in self.dra_mapped.items():
            claims.append(ClaimRequests(name, (r,), (), r.pointer))
        if cluster.node_count == 0:  # only ResourceSlices were read: where their nodes are is unknown
            return cluster.dra.allocator.diagnose(claims)
        admitted = self._admitted_nodes

        def labels(node: str) -> dict[str, str]:
            record = admitted[node][1]
            return {**dict(record.rule_labels), **record.placement_labels()}

        return cluster.dra.allocator.diagnose(claims, admitted.keys(), labels)

    @once
    def dra_outcomes(self) -> list[tuple[PodRequest, Allocation]]:
        """With an inventory: what the allocator would do with each NVIDIA GPU request, on the nodes the pod can
        land on."""
        diagnosis = self.dra_diagnosis
        return list(diagnosis.outcomes) if diagnosis is not None else []

    @once
    def dra_constraint_failures(self) -> list[tuple[str, str, str]]:
        """With an inventory: (pod claim name, pointer, reason) for requests that can each be served alone but not
        together: a constraint of a claim over several of its requests, requests of one claim that compete for the
        same devices, or claims of the pod that do."""
        diagnosis = self.dra_diagnosis
        out = []
        for f in diagnosis.failures if diagnosis is not None else ():
            if f.kind == "claims":
                out.append((f.claim, f.pointer, f"{f.subject}: {f.reason}"))
                continue
            first = self.dra.by_claim[f.claim][0]
            out.append((f.claim, self.dra.pointers.get(f.claim, first.pointer),
                        f"{first.what.rsplit(' request ', 1)[0]}: {f.subject}: {f.reason}"))
        return out

    def _device_node_ok(self) -> Callable[[Device], bool] | None:
        """Whether a device is on a node the pod can land on (None: no Nodes were read, so any is); the allocator
        decides this itself for the requests, this is for what else is asked of the devices there."""
        cluster = self.ctx.cluster
        if cluster is None or cluster.node_count == 0:
            return None  # only ResourceSlices were read: where their nodes are, and what they carry, is unknown
        admitted = self._admitted_nodes

        def ok(d: Device) -> bool:
            if d.node is not None:
                return d.node in admitted
            return bool(admitted)

        return ok

    @once
    def _admitted_nodes(self) -> dict[str, tuple[NodeClass, NodeRecord]]:
        assert self.ctx.cluster is not None
        return self.ctx.cluster.admitted_nodes(self.pod.spec)

    @once
    def dra_classes(self) -> list[NodeClass]:
        """The DRA devices the pod's GPU requests can get, as node classes (what every rule reads): with an
        inventory, those the allocator would choose from; without one, what their selectors pin."""
        if not self.dra_gpu_requests:
            return []
        if not self.dra_inventory_known:
            return [cls for cls, _pinned in self.dra_pins]
        from compatcheck.core.dra import device_resources

        cluster = self.ctx.cluster
        assert cluster is not None
        admitted = self._admitted_nodes if cluster.node_count else {}
        groups: dict[DraClassKey, tuple[NodeClass, set[str]]] = {}
        for request, outcome in self.dra_outcomes:
            # (device labels, resources, the host's policy labels) -> class key
            keys: dict[tuple[tuple[tuple[str, str], ...], tuple[tuple[str, int], ...], tuple[tuple[str, str], ...]],
                       DraClassKey] = {}
            for device_labels, node, where, device in outcome.placements:
                if not device_labels:
                    continue
                host = admitted.get(node or "")
                # The driver policy an admin declares on the device's Node (compatcheck.io/forward-compatibility...).
                policy = tuple((k, v) for k, v in host[0].labels.items() if k in POLICY_LABELS) if host else ()
                # A MIG device is also the nvidia.com/mig-<profile> the device plugin would offer for it.
                own = (device_labels, device_resources(device.input), policy)
                key = keys.get(own)
                if key is None:
                    labels = dict(device_labels)
                    labels.update(policy)
                    if request.sharing:
                        labels["nvidia.com/gpu.sharing-strategy"] = request.sharing
                    key = keys[own] = (tuple(sorted(labels.items())), own[1])
                found = groups.get(key)
                if found is None:
                    facts = self.ctx.dra_facts.get(key)
                    if facts is None:
                        facts = self.ctx.dra_facts[key] = node_facts(dict(key[0]), dict(key[1]), self.ctx.kb)
                    found = groups[key] = (NodeClass(dict(key[0]), host[0].taints if host else (), facts), set())
                cls, names = found
                where = host[1].name if host else where
                if where not in names:
                    names.add(where)
                    cls.members.append(host[1] if host else NodeRecord(where, (), (), (), (), ()))
        return [cls for cls, _names in groups.values()]

    @once
    def dra_pins(self) -> list[tuple[NodeClass, PodRequest]]:
        """Without an inventory: the devices each NVIDIA GPU request's selectors pin (product, compute
        capability, driver), as synthetic node classes, with the request that pins them."""
        out: list[tuple[NodeClass, PodRequest]] = []
        for r in self.dra_gpu_requests:
            for ra in r.alternatives:
                classes, _driver = memo(self.ctx.dra_memo, ra.selectors, partial(self._pin, ra.selectors))
                out.extend((cls, r) for cls in classes)
        return out

    def _pin(self, selectors: tuple[str, ...]) -> tuple[list[NodeClass], bool]:
        from compatcheck.core.dra import pinned_points

        points, driver = pinned_points(selectors, known_values(self.ctx.kb))
        if not points:
            return [], False
        nodes = ({"metadata": {"name": f"dra-pinned-{i}", "labels": ls}} for i, ls in enumerate(points))
        return build_cluster(nodes, self.ctx.kb).classes, driver

    @once
    def dra_notes(self) -> list[tuple[str, str]]:
        """What could not be checked (a claim or template not in the input, a selector compatcheck cannot
        evaluate): notes, never silence."""
        if not has_claims(self.pod.spec) and not self.dra_mapped:
            return []
        notes = list(self.dra.notes)
        for r, outcome in self.dra_outcomes:
            if outcome.unknown:
                notes.append((r.pointer, f"{r.what}: {outcome.unknown}; not checked"))
        return notes

    @once
    def dra_offered_profiles(self) -> tuple[str, ...]:
        """With an inventory: the MIG profiles of the NVIDIA MIG devices on the nodes the pod can land on."""
        cluster = self.ctx.cluster
        if cluster is None or cluster.dra is None:
            return ()
        from compatcheck.core.dra import mig_profile

        ok = self._device_node_ok()
        return tuple(sorted({p for d in cluster.dra.devices if ok is None or ok(d)
                             if (p := mig_profile(d.input)) is not None}))

    @once
    def dra_unoffered_profiles(self) -> list[tuple[PodRequest, tuple[str, ...], tuple[str, ...], bool]]:
        """With an inventory, for each NVIDIA GPU request no device can serve whose selectors pin MIG profiles that
        no MIG device in reach (on the nodes the pod can land on) is: (request, those profiles, the profiles
        offered, whether every alternative of the request pins one of them). What mig-profile-unknown says, as of
        nodes whose device plugin offers no nvidia.com/mig-<profile> of it; when every alternative pins one, the
        profile is the cause and gpu-no-eligible-node leaves the request to it."""
        offered = self.dra_offered_profiles
        out = []
        for r, outcome in self.dra_outcomes:
            if outcome.devices or outcome.unknown:
                continue
            from compatcheck.core.dra import pinned_profiles

            per_alt = [pinned_profiles(ra.selectors) - set(offered) for ra in r.alternatives]
            missing = tuple(sorted(set().union(*per_alt)))
            if missing:
                out.append((r, missing, offered, all(per_alt)))
        return out

    # ------------------------------------------------------------------ where can it run?
    @property
    def placement_classes(self) -> list[NodeClass]:
        """Node classes admitted by nodeSelector/affinity (with --nodes)."""
        return self._placement[0]

    @property
    def eligible_classes(self) -> list[NodeClass]:
        """Classes that admit the pod, tolerate-wise, and offer the GPU resources it requests."""
        return self._placement[1]

    @once
    def _placement(self) -> tuple[list[NodeClass], list[NodeClass]]:
        cluster = self.ctx.cluster
        if cluster is None:
            return [], []
        spec = self.pod.spec
        # Exactly what placement_matches, untolerated_taints and offers_resources read.
        implied = self.implied_tolerations
        key = dumps((spec.get("nodeSelector"), spec.get("affinity"), spec.get("nodeName"), spec.get("tolerations"),
                     sorted(self.pod_requests.items()), implied))

        def place() -> tuple[list[NodeClass], list[NodeClass]]:
            placed = cluster.placement(spec)  # indexed: never a scan of every node
            return placed, [c for c in placed
                            if not untolerated_taints(spec, c, implied) and offers_resources(self.pod_requests, c)]

        return memo(self.ctx.placement_memo, key, place)

    @once
    def pinned_classes(self) -> list[NodeClass]:
        """Without --nodes: GPU facts the manifest itself pins through selectors, affinity or HAMi
        annotations (synthetic node classes); empty when it pins nothing."""
        values: dict[str, set[str]] = {}

        def note(key: str, vals: Iterable[Json]) -> None:
            values.setdefault(key, set()).update(str(v) for v in vals)

        sel = self.pod.spec.get("nodeSelector")
        if isinstance(sel, dict):
            for k, v in sel.items():
                note(str(k), [v])
        for term in required_terms(self.pod.spec) or []:
            for e in term.get("matchExpressions") or []:
                if isinstance(e, dict) and e.get("operator") == "In":
                    note(str(e.get("key")), sequence(e.get("values")))
        use = self.pod.annotations.get("nvidia.com/use-gputype")
        products = set(values.get("nvidia.com/gpu.product", set()))
        hami_types = [t.strip() for t in use.split(",") if t.strip()] if use else []
        labelsets: list[dict[str, str]] = [{"nvidia.com/gpu.product": p} for p in sorted(products)]
        majors = values.get("nvidia.com/gpu.compute.major", set())
        minors = values.get("nvidia.com/gpu.compute.minor", set()) or {"0"}
        if not labelsets and majors:
            labelsets = [{"nvidia.com/gpu.compute.major": a, "nvidia.com/gpu.compute.minor": b}
                         for a in sorted(majors) for b in sorted(minors)]
        if not labelsets and hami_types:
            # HAMi matches use-gputype as a substring of the card name ("A100" -> "NVIDIA-A100-...").
            labelsets = [{"nvidia.com/gpu.product": t} for t in hami_types]
        key = tuple(tuple(sorted(ls.items())) for ls in labelsets[:32])
        classes = memo(self.ctx.pinned_memo, key, lambda: build_cluster(
            ({"metadata": {"name": f"pinned-{i}", "labels": ls}} for i, ls in enumerate(labelsets[:32])),
            self.ctx.kb).classes)
        if not classes:
            return []
        if hami_types and products:
            return classes
        # Keep only those the pod's own placement really admits (projection of the real terms).
        return [c for c in classes if admits_projected(self.pod.spec, c)]

    @once
    def scope(self) -> list[NodeFacts]:
        """GPU facts this pod can meet: eligible node classes with --nodes, else the pinned ones; and the DRA
        devices its claims can get (from the inventory, else what their selectors pin)."""
        dra = [c.facts for c in self.dra_classes]
        if self.ctx.cluster is not None:
            return [c.facts for c in self._node_scope if c.facts.has_gpu] + dra
        return [c.facts for c in self.pinned_classes] + dra

    def scope_classes(self) -> list[NodeClass]:
        return self._scope_classes

    @property
    def _node_scope(self) -> list[NodeClass]:
        """Eligible node classes, when the pod asks for GPUs as extended resources (a pod that asks only through
        DRA claims gets its GPUs from devices, not from whatever GPU nodes its selectors admit)."""
        if self.dra_gpu_requests and not any(n not in self.dra_mapped for n, v in self.pod_requests.items() if v > 0):
            return []
        return self.eligible_classes

    @once
    def _scope_classes(self) -> list[NodeClass]:
        if self.ctx.cluster is not None:
            # Pinned DRA classes (no inventory) are not nodes: the driver rules that name nodes leave them to
            # cuda-affinity-mismatch, which reads pins.
            dra = self.dra_classes if self.dra_inventory_known else []
            return [c for c in self._node_scope if c.facts.has_gpu] + dra
        return self.pinned_classes + self.dra_classes


def _claims_gpu(container: JsonObject, claims: PodClaims) -> bool:
    """Whether a container uses an NVIDIA GPU request of the pod's claims."""
    from compatcheck.core.dra import container_claim_requests

    return any(r.nvidia_gpu for r in container_claim_requests(container, claims))


def known_values(kb: KnowledgeBase) -> KnownValues:
    """What DRA devices can be, per the knowledge base, for pinning selectors without an inventory: products
    by the names NVML gives them (the gpu-products rows, each alternative of "A40/A10/A16/A2" apart, kept where
    the table recognises the name back), compute capabilities, driver branches and the CUDA each supports."""
    from compatcheck.core.dra import KnownValues

    cached = kb.__dict__.get("_dra_known")
    if isinstance(cached, KnownValues):
        return cached
    products: set[str] = set()
    for p in kb.products:
        head, _, rest = p.product.rpartition(" ") if "/" in p.product else ("", "", p.product)
        for alt in rest.split("/"):
            name = f"{head} {alt}".strip()
            nvml = name if name.startswith(("Tesla", "NVIDIA", "Quadro", "TITAN", "GeForce")) else f"NVIDIA {name}"
            if kb.product(nvml.replace(" ", "-")) is not None:
                products.add(nvml)
    known = KnownValues(tuple(sorted(products)), tuple(sorted(f"{cc.major}.{cc.minor}" for cc in kb.architectures)),
                        tuple((b, f"{c.major}.{c.minor}") for b, c in kb.branches))
    kb.__dict__["_dra_known"] = known
    return known


def admits_projected(spec: JsonObject, cls: NodeClass) -> bool:
    """Placement restricted to the label keys the synthetic class carries (other keys are unknowable)."""
    keys = set(cls.labels)
    projected: JsonObject = {}
    sel = spec.get("nodeSelector")
    if isinstance(sel, dict):
        projected["nodeSelector"] = {k: v for k, v in sel.items() if k in keys}
    terms = required_terms(spec)
    if terms is not None:
        new_terms = []
        for t in terms:
            exprs = [e for e in sequence(t.get("matchExpressions")) if isinstance(e, dict) and e.get("key") in keys]
            if not exprs:
                return True  # this OR-branch does not constrain the pinned keys
            new_terms.append({"matchExpressions": exprs})
        projected["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": new_terms}}}
    return placement_matches(projected, cls)


@dataclass(frozen=True)
class ObjectTarget:
    """What object checks receive: the object, the pod targets the engine found in it, and the keys its YAML
    source wrote twice (the reader kept the last, as kubectl does; empty for JSON from the API server)."""

    obj: JsonObject
    pods: list[PodTarget]
    duplicates: tuple[DuplicateKey, ...] = ()


# ------------------------------------------------------------------ the check contract
TargetT = TypeVar("TargetT", PodAnalysis, ObjectTarget)
ParamsT = TypeVar("ParamsT")


@dataclass(frozen=True, kw_only=True)
class CheckType(Generic[TargetT, ParamsT]):
    """A reviewed check, generic over what it inspects (``TargetT``) and its prepared params (``ParamsT``).
    Declare one as a ``PodCheck`` or an ``ObjectCheck``, which fix ``TargetT`` and ``target``; mypy then infers
    ``ParamsT`` from ``prepare`` and checks ``evaluate`` against both."""

    target: ClassVar[Literal["pod", "object"]]
    name: str
    description: str
    params_schema: JsonObject  # JSON Schema of RawParams: additionalProperties false, a description per property
    # Validated params -> what ``evaluate`` receives (compiled regexes, parsed versions), once per rule at load
    # time; whatever it raises is a located rule error, never a per-object internal error.
    prepare: Callable[[RawParams], ParamsT]
    evaluate: Callable[[TargetT, EvalContext, ParamsT], Iterable[Outcome]]
    needs_nodes: bool = False  # says nothing without a cluster view (the engine skips it then)
    fix_applicability: Applicability | None = None  # the fixes its violations can carry; None: it has none
    # Only meaningful for pods that request GPU resources (the engine skips the rest).
    gpu_only: bool = True


@dataclass(frozen=True, kw_only=True)
class PodCheck(CheckType[PodAnalysis, ParamsT]):
    """Runs once per pod spec of an object, with that pod's ``PodAnalysis``."""

    target: ClassVar[Literal["pod", "object"]] = "pod"


@dataclass(frozen=True, kw_only=True)
class ObjectCheck(CheckType[ObjectTarget, ParamsT]):
    """Runs once per object, pods or not (a ConfigMap, an object's own annotations)."""

    target: ClassVar[Literal["pod", "object"]] = "object"


@dataclass(frozen=True)
class NoParams:
    """The params of a check type that takes none (its schema allows no property)."""


NO_PARAMS = NoParams()
NO_PARAMS_SCHEMA: JsonObject = {"type": "object", "additionalProperties": False, "properties": {}}


def no_params(raw: RawParams) -> NoParams:
    return NO_PARAMS
