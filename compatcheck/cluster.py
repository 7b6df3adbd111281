"""The cluster view: node facts, equivalence classes of nodes, and scheduling eligibility.

Nodes come from ``kubectl get nodes`` output or a hand-written ClusterProfile (converted to synthetic
Nodes by ``profile_to_nodes``), so one code path reads GFD labels. Nodes that differ only in per-node
labels (hostname, GFD timestamp) collapse into one ``NodeClass``: evaluation cost follows the number of
node *kinds*, not node count. Pure: takes dicts, returns dataclasses.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from compatcheck.jsonutil import mapping, sequence
from compatcheck.knowledge import KnowledgeBase, normalise_product
from compatcheck.quantities import QuantityError, parse_quantity
from compatcheck.versions import (
    Version,
    VersionError,
    parse_compute_capability,
    parse_cuda_version,
    parse_driver_version,
)

PER_NODE_LABELS = frozenset({"kubernetes.io/hostname", "nvidia.com/gfd.timestamp"})
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


def is_gpu_resource(name: str) -> bool:
    return (
        name.startswith(("nvidia.com/", "tencent.com/vcuda", "volcano.sh/vgpu", "volcano.sh/gpu"))
        or name == "alpha.kubernetes.io/nvidia-gpu"
    )


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
    problems: tuple[str, ...] = ()

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
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    facts: NodeFacts
    members: list[tuple[str, dict[str, str]]] = field(default_factory=list)  # (name, per-node labels)

    @property
    def count(self) -> int:
        return len(self.members)

    def sample_names(self, limit: int = 3) -> str:
        names = [m[0] for m in self.members[:limit]]
        more = f" and {self.count - limit} more" if self.count > limit else ""
        return ", ".join(names) + more


@dataclass
class Cluster:
    classes: list[NodeClass]
    node_count: int


# Where a node says which CUDA its driver supports, in order of preference: GPU feature discovery's current
# and older names, then the platform's own labels. The driver version: GFD's full label, else its parts.
DRIVER_CUDA_LABELS = (("nvidia.com/cuda.runtime-version.major", "nvidia.com/cuda.runtime-version.minor"),
                      ("nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime.minor"),
                      ("cuda-major-version", "cuda-minor-version"))
DRIVER_FULL_LABEL = "nvidia.com/cuda.driver-version.full"
DRIVER_PART_LABELS = (("nvidia.com/cuda.driver-version.", "revision"), ("nvidia.com/cuda.driver.", "rev"))


def _label_int(labels: dict[str, str], key: str) -> int | None:
    v = labels.get(key)
    if v is None:
        return None
    try:
        return int(str(v).strip())
    except ValueError:
        return None


def node_facts(labels: dict[str, str], allocatable: dict[str, Any], kb: KnowledgeBase) -> NodeFacts:
    problems: list[str] = []
    driver: Version | None = None
    full = labels.get(DRIVER_FULL_LABEL)
    parts = None
    if full:
        try:
            driver = parse_driver_version(full)
        except VersionError as exc:
            problems.append(str(exc))
    if driver is None:
        for prefix, rev in DRIVER_PART_LABELS:
            major = labels.get(prefix + "major")
            if major:
                parts = [major, labels.get(prefix + "minor"), labels.get(prefix + rev)]
                text = ".".join(str(p) for p in parts if p not in (None, ""))
                try:
                    driver = parse_driver_version(text)
                except VersionError as exc:
                    problems.append(str(exc))
                break
    driver_cuda: Version | None = None
    for maj_key, min_key in DRIVER_CUDA_LABELS:
        major_i, minor_i = _label_int(labels, maj_key), _label_int(labels, min_key)
        if major_i is not None:
            try:
                driver_cuda = parse_cuda_version(f"{major_i}.{minor_i or 0}")
            except VersionError as exc:
                problems.append(str(exc))
            break
    if driver_cuda is None and driver is not None:
        driver_cuda, _ = kb.driver_cuda(driver)
    product_label = labels.get("nvidia.com/gpu.product")
    product = normalise_product(product_label) if product_label else None
    known = kb.product(product) if product else None
    cc: Version | None = None
    cmaj, cmin = _label_int(labels, "nvidia.com/gpu.compute.major"), _label_int(labels, "nvidia.com/gpu.compute.minor")
    if cmaj is not None:
        try:
            cc = parse_compute_capability(f"{cmaj}.{cmin or 0}")
        except VersionError as exc:
            problems.append(str(exc))
    if cc is None and known is not None:
        cc = known.compute_capability
    baseline: Version | None = None
    if labels.get(VGPU_BASELINE_LABEL):
        try:
            baseline = parse_cuda_version(labels[VGPU_BASELINE_LABEL])
        except VersionError as exc:
            problems.append(str(exc))
    resources: list[tuple[str, int]] = []
    for name, qty in sorted(allocatable.items()):
        if not is_gpu_resource(str(name)):
            continue
        try:
            resources.append((str(name), int(parse_quantity(qty))))
        except QuantityError:
            problems.append(f"allocatable {name}: {qty!r} is not a quantity")
    strategy = labels.get("nvidia.com/gpu.sharing-strategy")
    return NodeFacts(
        driver=driver, driver_cuda=driver_cuda, compute_capability=cc, product=product,
        datacenter=known.datacenter if known else None, sharing_strategy=strategy,
        mig_strategy=labels.get("nvidia.com/mig.strategy"), replicas=_label_int(labels, "nvidia.com/gpu.replicas"),
        vgpu_baseline=baseline, gpu_resources=tuple(resources), problems=tuple(problems),
    )


Pairs = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """What compatcheck reads of a Node. The nodes of one pool differ only in ``name`` and ``own_labels``
    (PER_NODE_LABELS); the other parts are equal tuples, so a holder of many records (the webhook's live
    view) can keep one shared object per pool for each of them. Condition taints (CONDITION_TAINT_KEYS) are
    left out: they say how a node is now, not where a pod may go."""

    name: str
    shared_labels: Pairs  # sorted; every label but PER_NODE_LABELS
    own_labels: Pairs
    taints: tuple[Taint, ...]
    gpu_allocatable: Pairs  # sorted; GPU resources only

    @property
    def class_key(self) -> tuple[Pairs, tuple[Taint, ...], Pairs]:
        return (self.shared_labels, self.taints, self.gpu_allocatable)


def node_record(node: dict[str, Any]) -> NodeRecord:
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
    return NodeRecord(
        str(meta.get("name", "")) or labels.get("kubernetes.io/hostname", "<unnamed>"),
        tuple(sorted((k, v) for k, v in labels.items() if k not in PER_NODE_LABELS)),
        tuple((k, labels[k]) for k in sorted(PER_NODE_LABELS) if k in labels),
        taints,
        tuple(sorted((str(k), str(v)) for k, v in alloc.items() if is_gpu_resource(str(k)))))


def build_cluster(nodes: Iterable[dict[str, Any]], kb: KnowledgeBase) -> Cluster:
    return build_cluster_from_records((node_record(n) for n in nodes if isinstance(n, dict)), kb)


def build_cluster_from_records(records: Iterable[NodeRecord], kb: KnowledgeBase) -> Cluster:
    by_key: dict[Any, NodeClass] = {}
    count = 0
    for rec in records:
        count += 1
        key = rec.class_key
        cls = by_key.get(key)
        if cls is None:
            cls = NodeClass(dict(rec.shared_labels), rec.taints,
                            node_facts(dict(rec.shared_labels + rec.own_labels), dict(rec.gpu_allocatable), kb))
            by_key[key] = cls
        cls.members.append((rec.name, dict(rec.own_labels)))
    return Cluster(list(by_key.values()), count)


# ---------------------------------------------------------------------------------------- scheduling


def _expr_matches(expr: dict[str, Any], labels: dict[str, str]) -> bool:
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


def _term_matches(term: dict[str, Any], cls: NodeClass) -> bool:
    exprs = [e for e in sequence(term.get("matchExpressions")) if isinstance(e, dict)]
    fields = [e for e in sequence(term.get("matchFields")) if isinstance(e, dict)]
    if not exprs and not fields:
        return False  # an empty term matches no objects (Kubernetes semantics)
    per_node = fields or any(e.get("key") in PER_NODE_LABELS for e in exprs)
    if not per_node:
        return all(_expr_matches(e, cls.labels) for e in exprs)
    for name, own in cls.members:
        labels = {**cls.labels, **own}
        if all(_expr_matches(e, labels) for e in exprs) and all(
            _expr_matches(f, {"metadata.name": name}) for f in fields
        ):
            return True
    return False


def _selector_matches(selector: dict[str, Any], cls: NodeClass) -> bool:
    needs_member = any(k in PER_NODE_LABELS for k in selector)
    if not needs_member:
        return all(cls.labels.get(str(k)) == str(v) for k, v in selector.items())
    return any(all({**cls.labels, **own}.get(str(k)) == str(v) for k, v in selector.items())
               for _n, own in cls.members)


def required_terms(spec: dict[str, Any]) -> list[dict[str, Any]] | None:
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


def placement_matches(spec: dict[str, Any], cls: NodeClass) -> bool:
    """nodeSelector and required node affinity (tolerations are separate: see ``untolerated_taints``)."""
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict) and not _selector_matches(selector, cls):
        return False
    node_name = spec.get("nodeName")
    if isinstance(node_name, str) and node_name and not any(name == node_name for name, _ in cls.members):
        return False
    terms = required_terms(spec)
    return not (terms is not None and not any(_term_matches(t, cls) for t in terms))


def _tolerates(tol: dict[str, Any], taint: Taint) -> bool:
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


def untolerated_taints(spec: dict[str, Any], cls: NodeClass) -> list[Taint]:
    tols = [t for t in sequence(spec.get("tolerations")) if isinstance(t, dict)]
    return [t for t in cls.taints
            if t.effect in ("NoSchedule", "NoExecute") and not any(_tolerates(tol, t) for tol in tols)]


def offers_resources(requests: dict[str, int], cls: NodeClass) -> bool:
    return all(cls.facts.resource(name) >= amount for name, amount in requests.items() if amount > 0)


# ---------------------------------------------------------------------------------------- profiles

_SHARING = {"none", "time-slicing", "mps", "mig-single", "mig-mixed"}


def _set_version(labels: dict[str, str], prefix: str, version: Version) -> None:
    labels[f"{prefix}.major"] = str(version.major)
    labels[f"{prefix}.minor"] = str(version.minor)


def profile_to_nodes(profile: dict[str, Any], kb: KnowledgeBase) -> tuple[list[dict[str, Any]], list[str]]:
    """A ClusterProfile (compact, hand-written) -> synthetic Node objects carrying GFD labels."""
    errors: list[str] = []
    nodes: list[dict[str, Any]] = []
    pools = profile.get("nodePools")
    if not isinstance(pools, list) or not pools:
        return [], ["ClusterProfile needs a non-empty nodePools list"]
    for i, pool in enumerate(pools):
        where = f"nodePools[{i}]"
        if not isinstance(pool, dict):
            errors.append(f"{where}: must be a mapping")
            continue
        name = str(pool.get("name") or f"pool{i}")
        bad_type = next((f for f, kind in (("labels", dict), ("resources", dict), ("taints", list),
                                           ("migProfiles", dict)) if f in pool and not isinstance(pool[f], kind)), None)
        if bad_type:
            errors.append(f"{where}: {bad_type} must be a {'mapping' if bad_type != 'taints' else 'list'}")
            continue
        labels: dict[str, str] = {str(k): str(v) for k, v in (pool.get("labels") or {}).items()}
        allocatable: dict[str, Any] = {str(k): v for k, v in (pool.get("resources") or {}).items()}
        gpus = pool.get("gpusPerNode", 1)
        if not isinstance(gpus, int) or gpus < 0:
            errors.append(f"{where}: gpusPerNode must be a non-negative integer")
            continue
        if "gpu" in pool:
            labels["nvidia.com/gpu.product"] = str(pool["gpu"])
            known = kb.product(str(pool["gpu"]))
            if known is None and "computeCapability" not in pool:
                errors.append(f"{where}: GPU {pool['gpu']!r} is not in the gpu-products table; add computeCapability")
        try:
            if "computeCapability" in pool:
                _set_version(labels, "nvidia.com/gpu.compute", parse_compute_capability(pool["computeCapability"]))
            if "driver" in pool:
                drv = parse_driver_version(pool["driver"])
                labels[DRIVER_FULL_LABEL] = str(drv)
                cuda, _ = kb.driver_cuda(drv)
                if cuda is not None:
                    _set_version(labels, "nvidia.com/cuda.runtime-version", cuda)
            elif "driverCuda" in pool:
                _set_version(labels, "nvidia.com/cuda.runtime-version", parse_cuda_version(pool["driverCuda"]))
        except VersionError as exc:
            errors.append(f"{where}: {exc}")
        sharing = str(pool.get("sharing", "none"))
        if sharing not in _SHARING:
            errors.append(f"{where}: sharing must be one of {sorted(_SHARING)}")
            continue
        replicas = pool.get("replicas", 1)
        if sharing in ("time-slicing", "mps"):
            if not isinstance(replicas, int) or replicas < 2:
                errors.append(f"{where}: {sharing} needs replicas >= 2")
                continue
            labels["nvidia.com/gpu.sharing-strategy"] = sharing
            labels["nvidia.com/gpu.replicas"] = str(replicas)
            resource = "nvidia.com/gpu.shared" if pool.get("renameShared") else "nvidia.com/gpu"
            allocatable.setdefault(resource, gpus * replicas)
        elif sharing.startswith("mig-"):
            labels["nvidia.com/mig.strategy"] = sharing[4:]
            mig = pool.get("migProfiles") or {}
            if not mig or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in mig.values()):
                errors.append(f"{where}: {sharing} needs migProfiles with positive counts, e.g. {{1g.10gb: 7}}")
                continue
            if sharing == "mig-mixed":
                for prof, n in mig.items():
                    allocatable.setdefault(f"nvidia.com/mig-{prof}", int(n) * gpus)
            else:
                allocatable.setdefault("nvidia.com/gpu", sum(int(n) for n in mig.values()) * gpus)
        else:
            labels["nvidia.com/gpu.sharing-strategy"] = "none"
            # GPU-Manager nodes advertise only tencent.com/vcuda-*; HAMi keeps nvidia.com/gpu.
            if gpus and not (isinstance(pool.get("vgpu"), dict) and pool["vgpu"].get("type") == "gpu-manager"):
                allocatable.setdefault("nvidia.com/gpu", gpus)
        vgpu = pool.get("vgpu")
        if isinstance(vgpu, dict) and not all(isinstance(vgpu.get(k, 1), int) for k in ("memoryUnits", "memoryMiB")):
            errors.append(f"{where}: vgpu memoryUnits/memoryMiB must be integers")
            continue
        if isinstance(vgpu, dict):
            if "baselineCuda" in vgpu:
                labels[VGPU_BASELINE_LABEL] = str(vgpu["baselineCuda"])
            if vgpu.get("type") == "gpu-manager":
                allocatable.setdefault("tencent.com/vcuda-core", 100 * gpus)
                allocatable.setdefault("tencent.com/vcuda-memory", int(vgpu.get("memoryUnits", 64)) * gpus)
            elif vgpu.get("type") == "hami":
                allocatable.setdefault("nvidia.com/gpumem", int(vgpu.get("memoryMiB", 16384)) * gpus)
                allocatable.setdefault("nvidia.com/gpucores", 100 * gpus)
        elif vgpu is not None:
            errors.append(f"{where}: vgpu must be a mapping (type: gpu-manager|hami, baselineCuda)")
        taints = pool.get("taints") or []
        count = pool.get("count", 1)
        if not isinstance(count, int) or count < 1:
            errors.append(f"{where}: count must be a positive integer")
            continue
        for n in range(count):
            node_name = f"{name}-{n}"
            nodes.append({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node_name, "labels": {**labels, "kubernetes.io/hostname": node_name}},
                "spec": {"taints": taints},
                "status": {"allocatable": allocatable},
            })
    return nodes, errors
