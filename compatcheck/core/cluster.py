"""The cluster view: node facts, equivalence classes of nodes, and scheduling eligibility.

Nodes come from ``kubectl get nodes`` output, a hand-written ClusterProfile (converted to synthetic Nodes by
``core.profiles.profile_to_nodes``) or the webhook's live view, so one code path reads GFD labels.

A node has two kinds of labels. *Rule labels* (``is_rule_label``: the GFD/NVIDIA and platform labels that
``node_facts`` and the checks read, and ``compatcheck.io/*``) decide what a rule can say about it; together with
its policy taints and GPU allocatable they key its ``NodeClass``, so rules cost the number of node *kinds*. Every
other label (hostname, instance id, rack, zone, ...) is read only by placement (nodeSelector, node affinity) and
stays on the node's ``NodeRecord``: a label that is unique per node never splits a class.

``Cluster.placement`` evaluates a pod's placement on an inverted index of the placement labels it references
(see ``_NodeIndex``), so a review never scans every node.

Pure: takes dicts, returns dataclasses; no I/O. It must not learn where nodes come from (files, the API server).
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from compatcheck.core.jsonutil import Json, JsonObject, mapping, sequence
from compatcheck.core.knowledge import KnowledgeBase, normalise_product
from compatcheck.core.model import Diagnostic, Severity
from compatcheck.core.pointers import escape_token
from compatcheck.core.policy import FORWARD_COMPAT_LABEL, MINOR_VERSION_COMPAT_LABEL, parse_flag
from compatcheck.core.quantities import QuantityError, parse_quantity
from compatcheck.core.versions import (
    Version,
    VersionError,
    parse_compute_capability,
    parse_cuda_version,
    parse_driver_version,
)

if TYPE_CHECKING:  # the DRA inventory is built (and core.dra imported) only where DRA objects are read
    from compatcheck.core.dra import Inventory

# Taints that Kubernetes itself puts on a Node to say how it is *now* (NotReady, unreachable, under pressure,
# cordoned, not yet initialised by its cloud provider, shut down): the node lifecycle controller, the kubelet,
# the TaintNodesByCondition admission plugin and cloud controllers add and remove them. They describe transient
# health, not placement policy: a pool that is rebooting for a driver upgrade, or cordoned, is still where a GPU
# pod will run once it is back. So they never take nodes out of scope, never count as untolerated and are
# never offered as tolerations. Source: https://kubernetes.io/docs/reference/labels-annotations-taints/ and
# https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/#taint-based-evictions
CONDITION_TAINT_KEYS = frozenset({
    "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable", "node.kubernetes.io/unschedulable",
    "node.kubernetes.io/memory-pressure", "node.kubernetes.io/disk-pressure", "node.kubernetes.io/pid-pressure",
    "node.kubernetes.io/network-unavailable", "node.kubernetes.io/out-of-service",
    "node.cloudprovider.kubernetes.io/uninitialized", "node.cloudprovider.kubernetes.io/shutdown",
})
VGPU_BASELINE_LABEL = "compatcheck.io/vgpu-baseline-cuda"


_NATIVE_PREFIXES = ("hugepages-", "requests.", "limits.")
_NATIVE = {"cpu", "memory", "ephemeral-storage", "storage", "pods"}


def is_extended_resource(name: str) -> bool:
    """Kubernetes' IsExtendedResourceName: a domain-qualified name outside kubernetes.io."""
    if name in _NATIVE or name.startswith(_NATIVE_PREFIXES) or "/" not in name:
        return False
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


# The extended resources that are GPUs (or slices of one). ``nvidia.com/`` is not a GPU domain by itself: NVIDIA's
# Network Operator advertises RDMA and SR-IOV devices under it too (``nvidia.com/rdma_shared_device_a``,
# ``nvidia.com/hostdev``, ``nvidia.com/sriov_*``, any name a SriovNetworkNodePolicy gives), and a pod asking only
# for those is a network pod, not a GPU pod. Sources:
# - NVIDIA device plugin: nvidia.com/gpu, nvidia.com/mig-<profile> (mixed strategy), and the ``.shared`` suffix
#   that ``renameByDefault`` gives time-sliced and MPS replicas
#   (https://github.com/NVIDIA/k8s-device-plugin#shared-access-to-gpus);
# - HAMi: nvidia.com/gpumem, gpumem-percentage, gpucores, priority (its device config: resourceMemoryName,
#   resourceMemoryPercentageName, resourceCoreName, resourcePriorityName,
#   https://github.com/Project-HAMi/HAMi/blob/master/charts/hami/templates/scheduler/device-configmap.yaml);
# - GPU-Manager: tencent.com/vcuda-core, vcuda-memory (https://github.com/tkestack/gpu-manager);
# - Volcano: volcano.sh/vgpu-number, vgpu-memory, vgpu-cores and the older gpu-share volcano.sh/gpu-memory,
#   gpu-number (https://github.com/volcano-sh/volcano/blob/master/docs/user-guide/how_to_use_volcano_vgpu.md,
#   .../how_to_use_gpu_sharing.md);
# - Kubernetes' own alpha.kubernetes.io/nvidia-gpu (removed in 1.11; old manifests still carry it).
GPU_RESOURCES = frozenset({
    "nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores",
    "nvidia.com/priority", "alpha.kubernetes.io/nvidia-gpu",
})
GPU_RESOURCE_PREFIXES = ("nvidia.com/mig-", "tencent.com/vcuda", "volcano.sh/vgpu", "volcano.sh/gpu")


# GPUs of other vendors: not NVIDIA GPUs, so never read by the CUDA checks, but a workload that asks for one is a GPU
# workload compatcheck did not check, and says so (a coverage not-checked record, "not an NVIDIA GPU"). AMD's
# device plugin advertises amd.com/gpu (https://github.com/ROCm/k8s-device-plugin, README); Intel's GPU plugin
# gpu.intel.com/i915, xe, millicores, memory.max, tiles (https://github.com/intel/intel-device-plugins-for-kubernetes,
# cmd/gpu_plugin/README.md). The same names compatcheck.io.templates counts in unrendered templates.
OTHER_VENDOR_GPU_RESOURCES = frozenset({"amd.com/gpu"})
OTHER_VENDOR_GPU_PREFIXES = ("gpu.intel.com/",)


def is_other_vendor_gpu_resource(name: str) -> bool:
    """Whether an extended resource is a GPU of another vendor than NVIDIA (AMD, Intel): not one CUDA runs on."""
    return name in OTHER_VENDOR_GPU_RESOURCES or name.startswith(OTHER_VENDOR_GPU_PREFIXES)


def is_gpu_resource(name: str) -> bool:
    """Whether an extended resource is a GPU or a slice of one (see ``GPU_RESOURCES``)."""
    if name in GPU_RESOURCES or name.startswith(GPU_RESOURCE_PREFIXES):  # mig-<profile>.shared included
        return True
    return name == "nvidia.com/gpu.shared"


@dataclass(frozen=True)
class NodeFacts:
    driver: Version | None
    driver_cuda: Version | None
    compute_capability: Version | None
    product: str | None
    datacenter: bool | None
    sharing_strategy: str | None
    mig_strategy: str | None
    replicas: int | None
    vgpu_baseline: Version | None
    gpu_resources: tuple[tuple[str, int], ...]
    # Labels and allocatable values that cannot be read (and so were not): warnings of kind "nodes", with a
    # pointer into the Node (see ``node_problems``).
    problems: tuple[Diagnostic, ...] = ()
    # What the pool's compatcheck.io/forward-compatibility and minor-version-compatibility labels declare (None:
    # no label, the config's driverPolicy decides; see compatcheck.core.policy).
    forward_compat: bool | None = None
    minor_version_compat: bool | None = None

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpu_resources) or self.product is not None or self.driver is not None

    def resource(self, name: str) -> int:
        for n, v in self.gpu_resources:
            if n == name:
                return v
        return 0

    def describe_driver(self) -> str:
        if self.driver is not None and self.driver_cuda is not None:
            return f"{self.driver} (CUDA {self.driver_cuda.major_minor()})"
        if self.driver is not None:
            return str(self.driver)
        if self.driver_cuda is not None:
            return f"a driver for CUDA {self.driver_cuda.major_minor()}"
        return "an unknown driver"

    def describe_gpu(self) -> str:
        name = self.product or "GPU"
        cc = f" (compute capability {self.compute_capability})" if self.compute_capability else ""
        return name + cc


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass
class NodeClass:
    """Nodes that look alike to every rule: equal rule labels, policy taints and GPU allocatable. ``labels``
    holds the rule labels only (``is_rule_label``); each member keeps its own placement labels."""

    labels: dict[str, str]
    taints: tuple[Taint, ...]
    facts: NodeFacts
    members: list[NodeRecord] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.members)

    def sample_names(self, limit: int = 3) -> str:
        names = [m.name for m in self.members[:limit]]
        more = f" and {self.count - limit} more" if self.count > limit else ""
        return ", ".join(names) + more


# Where a node says which CUDA its driver supports, in order of preference: GPU feature discovery's current
# and older names, then the platform's own labels. The driver version: GFD's full label, else its parts.
DRIVER_CUDA_LABELS = (("nvidia.com/cuda.runtime-version.major", "nvidia.com/cuda.runtime-version.minor"),
                      ("nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime.minor"),
                      ("cuda-major-version", "cuda-minor-version"))
DRIVER_FULL_LABEL = "nvidia.com/cuda.driver-version.full"
DRIVER_PART_LABELS = (("nvidia.com/cuda.driver-version.", "revision"), ("nvidia.com/cuda.driver.", "rev"))
# Every label ``node_facts`` and the checks read (the driver check reads the CUDA labels to word its affinity fix),
# and compatcheck's own prefix, which admins set per pool for rules. A class is keyed by these: a check that
# starts reading another label must add it here (tests/test_cluster.py checks node_facts reads no other).
RULE_LABELS = frozenset({
    DRIVER_FULL_LABEL, *(prefix + part for prefix, rev in DRIVER_PART_LABELS for part in ("major", "minor", rev)),
    *(key for pair in DRIVER_CUDA_LABELS for key in pair),
    "nvidia.com/gpu.product", "nvidia.com/gpu.compute.major", "nvidia.com/gpu.compute.minor",
    "nvidia.com/gpu.sharing-strategy", "nvidia.com/mig.strategy", "nvidia.com/gpu.replicas", VGPU_BASELINE_LABEL,
    FORWARD_COMPAT_LABEL, MINOR_VERSION_COMPAT_LABEL,
})
RULE_LABEL_PREFIXES = ("compatcheck.io/",)


def is_rule_label(key: object) -> bool:
    """Whether rules read this label (else only placement does). A non-string key is no label at all."""
    return isinstance(key, str) and (key in RULE_LABELS or key.startswith(RULE_LABEL_PREFIXES))


def _label_problem(key: str, message: str) -> Diagnostic:
    return Diagnostic("", f"label {key}: {message}", pointer=f"/metadata/labels/{escape_token(key)}",
                      severity=Severity.WARNING, kind="nodes")


def _label_int(labels: dict[str, str], key: str, problems: list[Diagnostic] | None = None) -> int | None:
    v = labels.get(key)
    if v is None:
        return None
    try:
        return int(str(v).strip())
    except ValueError:
        if problems is not None:
            problems.append(_label_problem(key, f"{v!r} is not a whole number"))
        return None


def _label_flag(labels: dict[str, str], key: str, problems: list[Diagnostic]) -> bool | None:
    """A policy label ("true" / "false"); another value is a warning, and the config's driverPolicy decides."""
    v = labels.get(key)
    if v is None:
        return None
    flag = parse_flag(str(v))
    if flag is None:
        problems.append(_label_problem(key, f'{v!r} is neither "true" nor "false"; the config\'s driverPolicy '
                                            "applies to this node"))
    return flag


def node_facts(labels: dict[str, str], allocatable: JsonObject, kb: KnowledgeBase) -> NodeFacts:
    problems: list[Diagnostic] = []
    driver: Version | None = None
    full = labels.get(DRIVER_FULL_LABEL)
    parts = None
    if full:
        try:
            driver = parse_driver_version(full)
        except VersionError as exc:
            problems.append(_label_problem(DRIVER_FULL_LABEL, str(exc)))
    if driver is None:
        for prefix, rev in DRIVER_PART_LABELS:
            major = labels.get(prefix + "major")
            if major:
                parts = [major, labels.get(prefix + "minor"), labels.get(prefix + rev)]
                text = ".".join(str(p) for p in parts if p not in (None, ""))
                try:
                    driver = parse_driver_version(text)
                except VersionError as exc:
                    problems.append(_label_problem(f"{prefix}major", f"{exc} (with .minor and .{rev})"))
                break
    driver_cuda: Version | None = None
    for maj_key, min_key in DRIVER_CUDA_LABELS:
        major_i, minor_i = _label_int(labels, maj_key, problems), _label_int(labels, min_key, problems)
        if major_i is not None:
            try:
                driver_cuda = parse_cuda_version(f"{major_i}.{minor_i or 0}")
            except VersionError as exc:
                problems.append(_label_problem(maj_key, str(exc)))
            break
    if driver_cuda is None and driver is not None:
        driver_cuda, _ = kb.driver_cuda(driver)
    product_label = labels.get("nvidia.com/gpu.product")
    product = normalise_product(product_label) if product_label else None
    known = kb.product(product) if product else None
    cc: Version | None = None
    cmaj = _label_int(labels, "nvidia.com/gpu.compute.major", problems)
    cmin = _label_int(labels, "nvidia.com/gpu.compute.minor", problems)
    if cmaj is not None:
        try:
            cc = parse_compute_capability(f"{cmaj}.{cmin or 0}")
        except VersionError as exc:
            problems.append(_label_problem("nvidia.com/gpu.compute.major", str(exc)))
    if cc is None and known is not None:
        cc = known.compute_capability
    baseline: Version | None = None
    if labels.get(VGPU_BASELINE_LABEL):
        try:
            baseline = parse_cuda_version(labels[VGPU_BASELINE_LABEL])
        except VersionError as exc:
            problems.append(_label_problem(VGPU_BASELINE_LABEL, str(exc)))
    resources: list[tuple[str, int]] = []
    for name, qty in sorted(allocatable.items()):
        if not is_gpu_resource(str(name)):
            continue
        try:
            resources.append((str(name), int(parse_quantity(qty))))
        except QuantityError:
            problems.append(Diagnostic("", f"allocatable {name}: {qty!r} is not a quantity",
                                       pointer=f"/status/allocatable/{escape_token(str(name))}",
                                       severity=Severity.WARNING, kind="nodes"))
    strategy = labels.get("nvidia.com/gpu.sharing-strategy")
    return NodeFacts(
        driver=driver, driver_cuda=driver_cuda, compute_capability=cc, product=product,
        datacenter=known.datacenter if known else None, sharing_strategy=strategy,
        mig_strategy=labels.get("nvidia.com/mig.strategy"),
        replicas=_label_int(labels, "nvidia.com/gpu.replicas", problems),
        vgpu_baseline=baseline, gpu_resources=tuple(resources),
        forward_compat=_label_flag(labels, FORWARD_COMPAT_LABEL, problems),
        minor_version_compat=_label_flag(labels, MINOR_VERSION_COMPAT_LABEL, problems), problems=tuple(problems),
    )


Pairs = tuple[tuple[str, str], ...]
T = TypeVar("T")


class Intern(Protocol):
    """Maps a value to the one object kept for every value equal to it (the value itself, the first time)."""

    def __call__(self, value: T, /) -> T: ...


def _same(value: T) -> T:
    return value


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """What compatcheck reads of a Node, in a form that a holder of many (the webhook's live view) keeps small.
    ``class_key`` is what rules read; nodes of one pool have equal ones, so one shared tuple each can serve the
    whole pool. The placement labels are two aligned tuples, sorted by key: the keys tuple is the same for a
    pool even when every node has unique values (instance id, rack), and a lookup is a bisect. Condition taints
    (CONDITION_TAINT_KEYS) are left out: they say how a node is now, not where a pod may go."""

    name: str
    rule_labels: Pairs  # sorted; is_rule_label only
    label_keys: tuple[str, ...]  # sorted; every other label
    label_values: tuple[str, ...]  # label_keys' values, in the same order
    taints: tuple[Taint, ...]
    gpu_allocatable: Pairs  # sorted; GPU resources only

    @property
    def class_key(self) -> tuple[Pairs, tuple[Taint, ...], Pairs]:
        return (self.rule_labels, self.taints, self.gpu_allocatable)

    def label(self, key: str) -> str | None:
        """The value of a placement label, None when the node has none."""
        keys = self.label_keys
        i = bisect_left(keys, key)
        return self.label_values[i] if i < len(keys) and keys[i] == key else None

    def placement_labels(self) -> dict[str, str]:
        return dict(zip(self.label_keys, self.label_values, strict=True))


def node_record(node: JsonObject, intern: Intern = _same) -> NodeRecord:
    """Read a Node. ``intern`` maps each part (the name, each placement value, the keys tuple, the class key's
    tuples) to a canonical equal object, so that equal parts of many records are one object."""
    meta = mapping(node.get("metadata"))
    labels = {str(k): str(v) for k, v in mapping(meta.get("labels")).items() if v is not None}
    status = mapping(node.get("status"))
    alloc = status.get("allocatable") or status.get("capacity") or {}
    alloc = alloc if isinstance(alloc, dict) else {}
    taints = tuple(
        Taint(str(t.get("key", "")), str(t.get("value", "") or ""), str(t.get("effect", "")))
        for t in sequence(mapping(node.get("spec")).get("taints"))
        if isinstance(t, dict) and t.get("key") not in CONDITION_TAINT_KEYS
    )
    rule: list[tuple[str, str]] = []
    other: list[tuple[str, str]] = []
    for kv in sorted(labels.items()):
        (rule if is_rule_label(kv[0]) else other).append(kv)
    return NodeRecord(
        intern(str(meta.get("name", "")) or labels.get("kubernetes.io/hostname", "<unnamed>")),
        intern(tuple(rule)),
        intern(tuple(k for k, _ in other)),
        tuple(intern(v) for _, v in other),
        intern(taints),
        intern(tuple(sorted((str(k), str(v)) for k, v in alloc.items() if is_gpu_resource(str(k))))))


def build_cluster(nodes: Iterable[JsonObject], kb: KnowledgeBase) -> Cluster:
    table: dict[Any, Any] = {}  # shares the keys tuples and label values of one list's nodes

    def intern(value: T) -> T:
        found: T = table.setdefault(value, value)
        return found

    return build_cluster_from_records((node_record(n, intern) for n in nodes if isinstance(n, dict)), kb)


def build_cluster_from_records(records: Iterable[NodeRecord], kb: KnowledgeBase,
                               previous: Cluster | None = None) -> Cluster:
    """The node classes of ``records``. ``previous``: the cluster this one replaces (the live view's last
    snapshot); its placement indexes are carried over, patched for the nodes that changed, when the nodes kept
    their positions."""
    by_key: dict[Any, NodeClass] = {}
    # Records from one compactor share their class-key tuples, so their ids find the class without hashing
    # ~20 label pairs per node (a 20,000-node rebuild: 4.1 instead of 6.4 ms). Safe: every record stays
    # referenced by its class until the end, so no id is reused meanwhile.
    by_ids: dict[tuple[int, int, int], NodeClass] = {}
    count = 0
    for rec in records:
        count += 1
        ids = (id(rec.rule_labels), id(rec.taints), id(rec.gpu_allocatable))
        cls = by_ids.get(ids)
        if cls is None:
            key = rec.class_key
            cls = by_key.get(key)
            if cls is None:
                labels = dict(rec.rule_labels)
                cls = by_key[key] = NodeClass(labels, rec.taints, node_facts(labels, dict(rec.gpu_allocatable), kb))
            by_ids[ids] = cls
        cls.members.append(rec)
    cluster = Cluster(list(by_key.values()), count)
    if previous is not None:
        cluster.carry_over(previous)
    return cluster


def node_problems(cluster: Cluster) -> Iterator[tuple[NodeClass, Diagnostic]]:
    """What the nodes say that cannot be read, once per node class: (the class, the warning, whose pointer is into
    any of its nodes). Equal problems of different classes are equal diagnostics (a consumer that reports each
    distinct problem once can key on them); ``about_node`` words one for a reader."""
    for cls in cluster.classes:
        for problem in cls.facts.problems:
            yield cls, problem


def about_node(cls: NodeClass, problem: Diagnostic) -> Diagnostic:
    """``problem`` naming the first node of ``cls`` (and how many more share its labels)."""
    more = f" (and {cls.count - 1} more with the same labels)" if cls.count > 1 else ""
    return replace(problem, message=f"node {cls.members[0].name}{more}: {problem.message}")


# ---------------------------------------------------------------------------------------- scheduling


def _expr_matches(expr: JsonObject, labels: Mapping[str, str]) -> bool:
    key = expr.get("key")
    op = expr.get("operator")
    values = [str(v) for v in sequence(expr.get("values"))]
    present = key in labels
    value = labels.get(str(key))
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(values) != 1:
            return False
        try:
            have, want = int(str(value)), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def required_terms(spec: JsonObject) -> list[JsonObject] | None:
    aff = spec.get("affinity")
    if not isinstance(aff, dict):
        return None
    na = aff.get("nodeAffinity")
    if not isinstance(na, dict):
        return None
    req = na.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(req, dict):
        return None
    terms = req.get("nodeSelectorTerms")
    return [t for t in terms if isinstance(t, dict)] if isinstance(terms, list) else None


def _exprs(term: JsonObject, part: str) -> list[JsonObject]:
    return [e for e in sequence(term.get(part)) if isinstance(e, dict)]


def _per_node_key(key: object) -> bool:
    """A placement label: members of one class may differ in it. Rule labels are equal across a class, and a
    key that is no string matches no label (as in ``_expr_matches``): both are decided per class."""
    return isinstance(key, str) and not is_rule_label(key)


@dataclass(frozen=True)
class _Placement:
    """What placement reads of a pod spec: nodeSelector, nodeName and the required node affinity terms."""

    selector: JsonObject | None
    node_name: str | None
    terms: list[JsonObject] | None
    per_node: bool  # reads the node name, a field or a placement label: one class's members may differ

    @classmethod
    def of(cls, spec: JsonObject) -> _Placement:
        sel = spec.get("nodeSelector")
        selector = sel if isinstance(sel, dict) else None
        name = spec.get("nodeName")
        node_name = name if isinstance(name, str) and name else None
        terms = required_terms(spec)
        per_node = (node_name is not None or any(_per_node_key(str(k)) for k in selector or ())
                    or any(_exprs(t, "matchFields") or any(_per_node_key(e.get("key"))
                                                           for e in _exprs(t, "matchExpressions"))
                           for t in terms or ()))
        return cls(selector, node_name, terms, per_node)

    def admits(self, name: str | None, labels: Mapping[str, str]) -> bool:
        """Kubernetes' reading, for one node (or a class, when not ``per_node``): the selector's pairs ANDed,
        then nodeName, then the terms ORed, each term's expressions and fields ANDed; an empty term matches
        nothing."""
        if self.selector is not None and not all(labels.get(str(k)) == str(v) for k, v in self.selector.items()):
            return False
        if self.node_name is not None and name != self.node_name:
            return False
        if self.terms is None:
            return True
        for term in self.terms:
            exprs, fields = _exprs(term, "matchExpressions"), _exprs(term, "matchFields")
            if (exprs or fields) and all(_expr_matches(e, labels) for e in exprs) and all(
                    _expr_matches(f, {"metadata.name": str(name)}) for f in fields):
                return True
        return False


def placement_matches(spec: JsonObject, cls: NodeClass) -> bool:
    """Whether nodeSelector and required node affinity admit any member of ``cls`` (tolerations are separate:
    see ``untolerated_taints``). Looks at each member when the spec reads per-node labels: for a whole
    cluster use ``Cluster.placement``, which is indexed."""
    p = _Placement.of(spec)
    if not p.per_node:
        return p.admits(None, cls.labels)
    return any(p.admits(rec.name, {**cls.labels, **rec.placement_labels()}) for rec in cls.members)


# Placement-label indexes kept per cluster snapshot, least recently used first out. A pod's placement
# references a few keys and a webhook sees few pod shapes; one index costs at most ~90 bytes per node (a
# hostname-like key, every value distinct), so 16 bound the memo at ~30 MB with 20,000 nodes.
MAX_INDEXED_KEYS = 16
_SMALL_UNION = 8  # positions up to which single-bit ORs beat filling a bytearray of a bit per node
_BITSET_FROM = 64  # buckets this big are kept as bitsets: at most one per 64 nodes, each a bit per node


class _Bits(int):
    """A bucket kept as a bitset (an int that is one position is a lone node)."""


Bucket = int | list[int] | _Bits  # one node's position, a few positions, or a bitset of many


class _NodeIndex:
    """Placement over every node of a cluster, as bitsets (Python ints, bit ``p`` = the node at position
    ``p``; each class's members are one contiguous run of positions).

    Why this design: an expression on a placement label is answered from an inverted index of that one key,
    value -> positions (big buckets as bitsets), built in one pass over the nodes (~0.2 µs a node) and kept in
    an LRU. In/NotIn/Exists/DoesNotExist are unions of a few buckets, so an equality on a hostname-like key costs
    one dict lookup however many nodes there are; Gt/Lt visit the key's distinct values. Expressions on rule
    labels are decided per class and contribute their classes' runs. ANDs and ORs of terms are then whole-int
    operations (~1 µs for 20,000 nodes), and the placed classes are read off the set bits. The alternative,
    projecting the members of each class onto the keys a pod references and evaluating its terms on the
    distinct value tuples, needs the same pass per *key set* rather than per key, and degenerates to one
    evaluation per node when a key is unique per node (hostname, instance id), where this stays a lookup.

    A live cluster changes a few nodes at a time (GPU Feature Discovery rewrites its timestamp label on every
    node each minute: 333 changes a second with 20,000 nodes), and each change is a new snapshot. So a snapshot
    whose nodes kept their positions takes over its predecessor's indexes, patched for the nodes that changed
    (``carried``): a pass comparing record identities and a few bucket edits, instead of a pass per key.
    """

    def __init__(self, classes: list[NodeClass]) -> None:
        self.classes = classes
        self.nodes = [rec for cls in classes for rec in cls.members]
        self.starts = [0]
        for cls in classes:
            self.starts.append(self.starts[-1] + cls.count)
        self.all = (1 << len(self.nodes)) - 1
        self.nbytes = (len(self.nodes) + 7) // 8
        self._keys: OrderedDict[str, dict[str | None, Bucket]] = OrderedDict()
        self._names: dict[str | None, Bucket] | None = None
        self._lock = threading.Lock()  # the webhook may evaluate on more than one thread

    def carried(self, old: _NodeIndex) -> bool:
        """Take over ``old``'s indexes if every position still holds the same node, by name, and no more than
        64 or 1 in 8 of them changed (past that, building afresh is as cheap): True if it did. A node added,
        removed or moved to another class shifts the positions: then the indexes are built when first used."""
        if old.starts != self.starts:
            return False
        changed = [p for p, (new, was) in enumerate(zip(self.nodes, old.nodes, strict=True)) if new is not was]
        if len(changed) > max(64, len(self.nodes) // 8) or any(self.nodes[p].name != old.nodes[p].name
                                                                 for p in changed):
            return False
        with old._lock:
            keys, names = list(old._keys.items()), old._names
        for key, index in keys:
            moves = [(p, v, n) for p in changed if (v := old.nodes[p].label(key)) != (n := self.nodes[p].label(key))]
            self._keys[key] = _moved(index, moves) if moves else index  # indexes are never edited in place
        self._names = names
        return True

    def placed(self, p: _Placement) -> list[NodeClass]:
        bits = self._bits(p)
        out: list[NodeClass] = []
        starts = self.starts
        while bits:
            i = bisect_right(starts, (bits & -bits).bit_length() - 1) - 1  # the class of the lowest set bit
            out.append(self.classes[i])
            end = starts[i + 1]
            bits = (bits >> end) << end
        return out

    def count(self, p: _Placement) -> int:
        """How many nodes ``p`` admits."""
        return self._bits(p).bit_count()

    def _bits(self, p: _Placement) -> int:
        acc = self.all
        for k, v in (p.selector or {}).items():
            acc &= self._equal(str(k), str(v))
        if p.node_name is not None:
            acc &= self._union([self._name_index().get(p.node_name)])
        if p.terms is not None and acc:
            anyof = 0
            for term in p.terms:
                anyof |= self._term(term)
            acc &= anyof
        return acc

    def _term(self, term: JsonObject) -> int:
        exprs, fields = _exprs(term, "matchExpressions"), _exprs(term, "matchFields")
        if not exprs and not fields:
            return 0  # an empty term matches no objects (Kubernetes semantics)
        acc = self.all
        for e in exprs:
            if not acc:
                break
            key = e.get("key")
            if _per_node_key(key):
                acc &= self._indexed(e, self._key_index(str(key)))
            else:
                acc &= self._classes_where(partial(_expr_matches, e))
        for f in fields:
            if not acc:
                break
            if f.get("key") == "metadata.name":
                acc &= self._indexed(f, self._name_index())
            elif not _expr_matches(f, {}):  # any other field is absent from every node
                acc = 0
        return acc

    def _equal(self, key: str, value: str) -> int:
        if _per_node_key(key):
            return self._union([self._key_index(key).get(value)])
        return self._classes_where(lambda labels: labels.get(key) == value)

    def _indexed(self, expr: JsonObject, index: dict[str | None, Bucket]) -> int:
        """``_expr_matches`` for every node at once, from the key's inverted index (None: the key is absent)."""
        op = expr.get("operator")
        values = [str(v) for v in sequence(expr.get("values"))]
        if op == "In":
            return self._union([index.get(v) for v in set(values)])
        if op == "NotIn":
            return self.all ^ self._union([index.get(v) for v in set(values)])
        if op == "Exists":
            return self.all ^ self._union([index.get(None)])
        if op == "DoesNotExist":
            return self._union([index.get(None)])
        if op in ("Gt", "Lt") and len(values) == 1:
            try:
                want = int(values[0])
            except ValueError:
                return 0
            chosen = []
            for value, bucket in index.items():
                if value is None:
                    continue
                try:
                    have = int(value)
                except ValueError:
                    continue
                if have > want if op == "Gt" else have < want:
                    chosen.append(bucket)
            return self._union(chosen)
        return 0

    def _classes_where(self, test: Callable[[dict[str, str]], bool]) -> int:
        acc = 0
        for i, cls in enumerate(self.classes):
            if test(cls.labels):
                acc |= ((1 << cls.count) - 1) << self.starts[i]
        return acc

    def _union(self, buckets: Sequence[Bucket | None]) -> int:
        acc = 0
        positions: list[int] = []
        for b in buckets:
            if type(b) is _Bits:
                acc |= b
            elif type(b) is int:
                positions.append(b)
            elif type(b) is list:
                positions.extend(b)
        if len(positions) <= _SMALL_UNION:
            for pos in positions:
                acc |= 1 << pos
            return acc
        return acc | _bitset(positions, self.nbytes)

    def _key_index(self, key: str) -> dict[str | None, Bucket]:
        with self._lock:
            index = self._keys.get(key)
            if index is not None:
                self._keys.move_to_end(key)
                return index
            index = self._keys[key] = _invert(_column(self.nodes, key), self.nbytes)
            if len(self._keys) > MAX_INDEXED_KEYS:
                self._keys.popitem(last=False)
            return index

    def _name_index(self) -> dict[str | None, Bucket]:
        with self._lock:
            if self._names is None:
                self._names = _invert([rec.name for rec in self.nodes], self.nbytes)
            return self._names

    def indexed_keys(self) -> list[str]:
        with self._lock:
            return list(self._keys)


def _column(nodes: list[NodeRecord], key: str) -> list[str | None]:
    """Each node's value of ``key``. The nodes of a pool share their keys tuple, so the key's place in it is
    looked up once per pool (the records stay alive meanwhile: their ids are not reused)."""
    where: dict[int, int] = {}
    out: list[str | None] = []
    for rec in nodes:
        keys = rec.label_keys
        i = where.get(id(keys))
        if i is None:
            j = bisect_left(keys, key)
            i = where[id(keys)] = j if j < len(keys) and keys[j] == key else -1
        out.append(rec.label_values[i] if i >= 0 else None)
    return out


def _invert(values: list[str | None], nbytes: int) -> dict[str | None, Bucket]:
    """value -> the positions that have it: an int for a lone position (most values of a per-node key), a list
    for a few, a bitset from _BITSET_FROM on."""
    index: dict[str | None, Any] = {}
    get = index.get
    for pos, value in enumerate(values):
        found = get(value)
        if found is None:
            index[value] = pos
        elif type(found) is int:
            index[value] = [found, pos]
        else:
            found.append(pos)
    for value, found in index.items():
        if type(found) is list and len(found) >= _BITSET_FROM:
            index[value] = _Bits(_bitset(found, nbytes))
    return index


def _bitset(positions: Iterable[int], nbytes: int) -> int:
    field = bytearray(nbytes)
    for pos in positions:
        field[pos >> 3] |= 1 << (pos & 7)
    return int.from_bytes(field, "little")


def _moved(index: dict[str | None, Bucket], moves: list[tuple[int, str | None, str | None]]) -> dict[
        str | None, Bucket]:
    """A copy of ``index`` in which each (position, old value, new value) has moved buckets; the buckets it
    touches are copied too, as the old snapshot may still be reading them."""
    out = dict(index)
    for pos, was, now in moves:
        left = _without(out[was], pos)
        if left is None:
            del out[was]
        else:
            out[was] = left
        out[now] = _with(out.get(now), pos)
    return out


def _without(bucket: Bucket, pos: int) -> Bucket | None:
    if type(bucket) is _Bits:
        bits = bucket & ~(1 << pos)
        return _Bits(bits) if bits else None
    if isinstance(bucket, list):
        rest = [p for p in bucket if p != pos]
        return rest if len(rest) > 1 else rest[0]
    return None  # the lone position


def _with(bucket: Bucket | None, pos: int) -> Bucket:
    if bucket is None:
        return pos
    if type(bucket) is _Bits:
        return _Bits(bucket | 1 << pos)
    if isinstance(bucket, list):
        return [*bucket, pos]
    return [bucket, pos]


class Cluster:
    """Node classes of one snapshot of a cluster, and placement over all its nodes."""

    def __init__(self, classes: list[NodeClass], node_count: int, dra: Inventory | None = None) -> None:
        self.classes = classes
        self.node_count = node_count
        # The DRA devices ResourceSlices publish; None when nothing says (no slices were read, none are watched).
        self.dra = dra
        # Admission plugins the cluster's API server runs that change what a pod tolerates (a ClusterProfile's
        # ``admissionPlugins``; see ``ADMISSION_PLUGINS``).
        self.admission_plugins: frozenset[str] = frozenset()
        # Label keys the description of the cluster is silent about (a ClusterProfile that gives no zone): every
        # real node has them, with values nobody wrote down, so selectors on them are not judged.
        self.unknown_keys: frozenset[str] = frozenset()
        # Where each DeviceClass of the description was written (name -> (its spec, file, line)), so that one the
        # linted input defines again, differently, can name both places.
        self.device_class_origins: dict[str, tuple[Json, str, int | None]] = {}
        self._index: _NodeIndex | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Cluster({len(self.classes)} classes, {self.node_count} nodes)"

    def placement(self, spec: JsonObject) -> list[NodeClass]:
        """The classes with a node that nodeSelector, nodeName and required node affinity admit, in class
        order (what ``placement_matches`` says of each class, without looking at every node)."""
        p = _Placement.of(self._known(spec))
        if not p.per_node:
            return [cls for cls in self.classes if p.admits(None, cls.labels)]
        return self._node_index().placed(p)

    def placed_node_count(self, spec: JsonObject) -> int:
        """How many nodes nodeSelector, nodeName and required node affinity admit (not how many classes: a
        hostname selector admits one node of its class)."""
        p = _Placement.of(self._known(spec))
        if not p.per_node:
            return sum(cls.count for cls in self.classes if p.admits(None, cls.labels))
        return self._node_index().count(p)

    def admitted_nodes(self, spec: JsonObject) -> dict[str, tuple[NodeClass, NodeRecord]]:
        """The nodes a pod can land on, by name: nodeSelector, nodeName and required affinity admit them and the
        pod tolerates their taints (for the devices DRA can give it there)."""
        p = _Placement.of(self._known(spec))
        out: dict[str, tuple[NodeClass, NodeRecord]] = {}
        if not p.per_node:
            for cls in self.placement(spec):
                if not untolerated_taints(spec, cls):
                    out.update((rec.name, (cls, rec)) for rec in cls.members)
            return out
        index = self._node_index()  # the admitted positions, read off the placement bitset
        bits = index._bits(p)
        for i, cls in enumerate(index.classes):
            run = (bits >> index.starts[i]) & ((1 << cls.count) - 1)
            if not run or untolerated_taints(spec, cls):
                continue
            for k, rec in enumerate(cls.members):
                if run >> k & 1:
                    out[rec.name] = (cls, rec)
        return out

    def _known(self, spec: JsonObject) -> JsonObject:
        """``spec``'s placement without what it says about ``unknown_keys`` (a term that said nothing else admits
        every node: the terms are ORed)."""
        if not self.unknown_keys:
            return spec
        unknown = self.unknown_keys
        sel = spec.get("nodeSelector")
        terms = required_terms(spec)
        if not (isinstance(sel, dict) and unknown & set(map(str, sel))) and not any(
                e.get("key") in unknown for t in terms or () for e in _exprs(t, "matchExpressions")):
            return spec
        out = dict(spec)
        if isinstance(sel, dict):
            out["nodeSelector"] = {k: v for k, v in sel.items() if str(k) not in unknown}
        if terms is not None:
            kept = []
            for t in terms:
                exprs = [e for e in _exprs(t, "matchExpressions") if e.get("key") not in unknown]
                fields = _exprs(t, "matchFields")
                if not exprs and not fields and _exprs(t, "matchExpressions"):
                    out.pop("affinity", None)  # this term admits every node, so the OR does
                    return out
                kept.append({**t, "matchExpressions": exprs})
            out["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": kept}}}
        return out

    def carry_over(self, previous: Cluster) -> None:
        """Start from ``previous``'s placement indexes where they still hold (see ``_NodeIndex.carried``)."""
        with previous._lock:
            old = previous._index
        if old is not None:
            index = _NodeIndex(self.classes)
            if index.carried(old):
                with self._lock:
                    self._index = index

    def _node_index(self) -> _NodeIndex:
        with self._lock:
            if self._index is None:
                self._index = _NodeIndex(self.classes)
            return self._index


def _tolerates(tol: JsonObject, taint: Taint) -> bool:
    effect = tol.get("effect")
    if effect and effect != taint.effect:
        return False
    op = tol.get("operator", "Equal")
    key = tol.get("key")
    if not key:
        return bool(op == "Exists")
    if key != taint.key:
        return False
    if op == "Exists":
        return True
    return str(tol.get("value", "") or "") == taint.value


def untolerated_taints(spec: JsonObject, cls: NodeClass, implied: Sequence[JsonObject] = ()) -> list[Taint]:
    """The NoSchedule/NoExecute taints of ``cls`` that neither the pod's tolerations nor ``implied`` ones (those an
    admission plugin adds, see ``implied_tolerations``) tolerate."""
    tols = [t for t in sequence(spec.get("tolerations")) if isinstance(t, dict)]
    tols.extend(implied)
    return [t for t in cls.taints
            if t.effect in ("NoSchedule", "NoExecute") and not any(_tolerates(tol, t) for tol in tols)]


# Admission plugins of kube-apiserver that compatcheck knows how to apply (a config's or a ClusterProfile's
# ``admissionPlugins``).
#
# ExtendedResourceToleration (off by default in kube-apiserver; GKE and others enable it): for every extended
# resource in the requests of a pod's containers and init containers (requests are defaulted from limits before
# admission), it adds the toleration {key: <resource name>, operator: Exists, effect: NoSchedule}. Source:
# https://github.com/kubernetes/kubernetes/blob/master/plugin/pkg/admission/extendedresourcetoleration/admission.go
# It is a mutating plugin, and kube-apiserver runs every mutating plugin (in the order of AllOrderedPlugins,
# where it precedes MutatingAdmissionWebhook) before any validating one, so a validating webhook already sees the
# tolerations it adds on a Pod (pkg/kubeapiserver/options/plugins.go). It acts on Pods only: a Deployment's pod
# template gets them when its Pods are created, which is why a linter (or a webhook reviewing the Deployment)
# must add them itself.
EXTENDED_RESOURCE_TOLERATION = "ExtendedResourceToleration"
ADMISSION_PLUGINS = (EXTENDED_RESOURCE_TOLERATION,)


def implied_tolerations(plugins: frozenset[str], extended_resources: Iterable[str]) -> list[JsonObject]:
    """The tolerations the enabled ``plugins`` add to a pod that requests ``extended_resources``."""
    if EXTENDED_RESOURCE_TOLERATION not in plugins:
        return []
    return [{"key": name, "operator": "Exists", "effect": "NoSchedule"} for name in sorted(set(extended_resources))]


def offers_resources(requests: dict[str, int], cls: NodeClass) -> bool:
    return all(cls.facts.resource(name) >= amount for name, amount in requests.items() if amount > 0)
