"""The compatibility matrix: GPU workloads (rows) x node pools (columns), each cell what the rules say of the
workload on that pool alone. Pure: the pools of a cluster, a cluster restricted to one pool, and the cells from
findings; ``compatcheck.io.lint`` evaluates, ``compatcheck.report.html`` draws.

A *pool* is a node class (nodes that look alike to every rule: ``core.cluster``), named by a pool label its nodes
share (``POOL_LABELS``, in order), else by its GPU product and driver. A cell is ``n/a`` when the workload cannot
land on the pool (``gpu-no-eligible-node`` fires there), else ``error``/``warning`` by the worst finding, else
``ok``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from compatcheck.core.cluster import Cluster, NodeClass, build_cluster_from_records
from compatcheck.core.knowledge import KnowledgeBase
from compatcheck.core.model import Finding, Severity
from compatcheck.core.whatif import WorkloadKey, workload_key

# Labels that name a node's pool, as the platforms set them, tried in order (the first all members share wins).
POOL_LABELS = ("pool", "cloud.google.com/gke-nodepool", "eks.amazonaws.com/nodegroup", "kubernetes.azure.com/agentpool",
               "agentpool", "karpenter.sh/nodepool", "node.kubernetes.io/instance-type")
NOT_PLACED = frozenset({"gpu-no-eligible-node"})
Status = Literal["ok", "warning", "error", "n/a"]


@dataclass(frozen=True)
class Pool:
    name: str
    nodes: int
    gpu: str
    driver: str

    def describe(self) -> str:
        return f"{self.nodes} node{'s' if self.nodes != 1 else ''}, {self.gpu}, driver {self.driver}"


def pool_of(cls: NodeClass) -> Pool:
    name = None
    for key in POOL_LABELS:
        values = {rec.label(key) or cls.labels.get(key) for rec in cls.members}
        if len(values) == 1 and None not in values:
            name = f"{key}={values.pop()}" if key != "pool" else str(values.pop())
            break
    facts = cls.facts
    gpu = facts.describe_gpu() if facts.product or facts.compute_capability else "no GPU"
    return Pool(name or f"{facts.product or 'nodes'} / {facts.describe_driver()}", cls.count, gpu,
                facts.describe_driver())


def restrict(cluster: Cluster, index: int, kb: KnowledgeBase) -> Cluster:
    """``cluster`` with only its ``index``-th class (the same DRA inventory and admission plugins)."""
    out = build_cluster_from_records(list(cluster.classes[index].members), kb)
    out.dra = cluster.dra
    out.admission_plugins = cluster.admission_plugins
    out.unknown_keys = cluster.unknown_keys
    out.device_class_origins = dict(cluster.device_class_origins)
    return out


@dataclass(frozen=True)
class Cell:
    status: Status
    findings: tuple[tuple[str, str, str], ...] = ()  # (rule, severity, message)


def cell(findings: Iterable[Finding]) -> Cell:
    found = sorted({(f.rule_id, f.severity.value, f.message) for f in findings})
    rules = {r for r, _s, _m in found}
    if rules & NOT_PLACED:
        return Cell("n/a", tuple(f for f in found if f[0] in NOT_PLACED))
    if any(s == Severity.ERROR.value for _r, s, _m in found):
        return Cell("error", tuple(found))
    if any(s == Severity.WARNING.value for _r, s, _m in found):
        return Cell("warning", tuple(found))
    return Cell("ok", tuple(found))


@dataclass
class Matrix:
    pools: list[Pool]
    rows: list[WorkloadKey]
    cells: dict[tuple[WorkloadKey, int], Cell] = field(default_factory=dict)
    # A what-if run: each row's place in the difference ("newly-broken", "newly-fixed", "still-failing").
    changes: dict[WorkloadKey, str] = field(default_factory=dict)


def build_matrix(pools: list[Pool], rows: Iterable[WorkloadKey],
                 per_pool: Sequence[Iterable[Finding]]) -> Matrix:
    """The matrix of ``rows`` (the GPU workloads) from each pool's findings; pools sorted by name (a stable order
    whatever order the nodes were read in)."""
    order = sorted(range(len(pools)), key=lambda i: (pools[i].name, i))
    pools = [pools[i] for i in order]
    per_pool = [per_pool[i] for i in order]
    row_list = sorted(set(rows))
    by: list[dict[WorkloadKey, list[Finding]]] = []
    for findings in per_pool:
        grouped: dict[WorkloadKey, list[Finding]] = {}
        for f in findings:
            grouped.setdefault(workload_key(f.obj), []).append(f)
        by.append(grouped)
    m = Matrix(pools, row_list)
    for i, grouped in enumerate(by):
        for row in row_list:
            m.cells[(row, i)] = cell(grouped.get(row, ()))
    return m
