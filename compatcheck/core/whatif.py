"""What-if: change the cluster view (``SELECTOR:CHANGE``), and say what the change does to the workloads.

A what-if names nodes with a Kubernetes label selector (``compatcheck.core.selectors``) and one change, applied to
each matching node's labels and GPU allocatable as GPU feature discovery and the device plugin would write them
after that change happened on the node:

- ``driver=VERSION``: the GFD driver labels (``nvidia.com/cuda.driver-version.*``, ``nvidia.com/cuda.driver.*``)
  say VERSION and the CUDA labels (``nvidia.com/cuda.runtime-version.*``, ``nvidia.com/cuda.runtime.*``) the
  newest CUDA its branch supports, from the driver-branches table (none when the table cannot say: unknown);
- ``product=NAME``: ``nvidia.com/gpu.product`` is NAME and ``nvidia.com/gpu.compute.*`` its compute capability
  from the gpu-products table (a product the table does not know is an error: the capability would be a guess);
- ``mig.strategy=none``: MIG off, every GPU whole (``nvidia.com/gpu`` = the node's GPUs);
- ``mig.single=NxPROFILE``: MIG on with the single strategy, N instances of PROFILE per GPU;
- ``mig.mixed=NxPROFILE[,NxPROFILE...]``: MIG on with the mixed strategy, that layout per GPU;
- ``replicas=N``: time-slicing with N replicas per GPU (N = 1: no sharing);
- ``remove``: the nodes are gone.

Changes apply in the order given, each to the view the previous ones left. ``diff_results`` compares what fails
before and after. Pure: a cluster in, a cluster out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from compatcheck.core.cluster import (
    DRIVER_CUDA_LABELS,
    DRIVER_FULL_LABEL,
    DRIVER_PART_LABELS,
    Cluster,
    NodeRecord,
    build_cluster_from_records,
)
from compatcheck.core.knowledge import KnowledgeBase, mig_resource_profile, normalise_product
from compatcheck.core.model import Diagnostic, ObjectRef, Severity
from compatcheck.core.selectors import Selector, SelectorError, parse_selector
from compatcheck.core.versions import Version, VersionError, parse_driver_version

CHANGES = ("driver", "product", "mig.strategy", "mig.single", "mig.mixed", "replicas", "remove")
GPU_COUNT_LABEL = "nvidia.com/gpu.count"  # GFD: physical GPUs on the node (a placement label)
_LAYOUT_ITEM = re.compile(r"^(?P<n>[1-9]\d?)x(?P<profile>\d+g\.\d+gb(?:[.+-][a-z0-9.+-]+)?)$", re.IGNORECASE)


class WhatIfError(ValueError):
    """A ``--what-if`` that cannot be read; the message names it and says why."""


@dataclass(frozen=True)
class WhatIf:
    text: str
    selector: Selector
    change: str  # one of CHANGES
    driver: Version | None = None
    product: str | None = None
    compute: Version | None = None
    layout: tuple[tuple[str, int], ...] = ()  # (MIG profile as the resource names it, instances per GPU)
    replicas: int | None = None

    def describe(self) -> str:
        where = f"nodes matching {self.selector.text!r}" if self.selector.text else "every node"
        return f"{where}: {self.text.partition(':')[2]}"


def parse_what_if(text: str, kb: KnowledgeBase) -> WhatIf:
    """``SELECTOR:CHANGE`` -> a WhatIf. The selector ends at the first ':' (no label key or value has one)."""
    selector_text, colon, change_text = text.partition(":")
    if not colon:
        raise WhatIfError(f"--what-if {text!r}: expected SELECTOR:CHANGE, e.g. pool=t4:driver=580.65.06")
    try:
        selector = parse_selector(selector_text)
    except SelectorError as exc:
        raise WhatIfError(f"--what-if {text!r}: {exc}") from None
    change, eq, value = change_text.strip().partition("=")
    change, value = change.strip(), value.strip()
    bad = f"--what-if {text!r}"
    if change == "remove":
        if eq:
            raise WhatIfError(f"{bad}: remove takes no value")
        return WhatIf(text, selector, "remove")
    if change not in CHANGES:
        raise WhatIfError(f"{bad}: unknown change {change!r} (expected one of {', '.join(CHANGES)})")
    if not eq or not value:
        raise WhatIfError(f"{bad}: {change} needs a value ({change}=...)")
    if change == "driver":
        try:
            driver = parse_driver_version(value)
        except VersionError as exc:
            raise WhatIfError(f"{bad}: {exc}") from None
        return WhatIf(text, selector, change, driver=driver)
    if change == "product":
        known = kb.product(value)
        if known is None:
            raise WhatIfError(f"{bad}: GPU {value!r} is not in the gpu-products table, so its compute capability "
                              "is unknown (add a row with --rules-dir)")
        return WhatIf(text, selector, change, product=value, compute=known.compute_capability)
    if change == "mig.strategy":
        if value != "none":
            raise WhatIfError(f"{bad}: mig.strategy takes none; turn MIG on with mig.single=NxPROFILE or "
                              "mig.mixed=NxPROFILE,...")
        return WhatIf(text, selector, change)
    if change in ("mig.single", "mig.mixed"):
        layout: dict[str, int] = {}
        for item in value.split(","):
            m = _LAYOUT_ITEM.match(item.strip())
            if not m:
                raise WhatIfError(f"{bad}: {item.strip()!r} is not COUNTxPROFILE (e.g. 7x1g.10gb)")
            profile = mig_resource_profile(m.group("profile").lower())
            layout[profile] = layout.get(profile, 0) + int(m.group("n"))
        if change == "mig.single" and len(layout) != 1:
            raise WhatIfError(f"{bad}: the single strategy gives one profile per GPU; use mig.mixed for several")
        return WhatIf(text, selector, change, layout=tuple(sorted(layout.items())))
    try:  # replicas
        replicas = int(value)
    except ValueError:
        replicas = 0
    if not 1 <= replicas <= 1024:
        raise WhatIfError(f"{bad}: replicas must be a whole number from 1 to 1024")
    return WhatIf(text, selector, change, replicas=replicas)


# ------------------------------------------------------------------------------------------------ applying


@dataclass
class _Node:
    """A node being changed: its rule labels and GPU allocatable as dicts."""

    record: NodeRecord
    labels: dict[str, str]
    alloc: dict[str, str]

    def all_labels(self) -> dict[str, str]:
        return {**self.record.placement_labels(), **self.labels}

    def gpus(self) -> int | None:
        """Physical GPUs: GFD's count label, else what a node without MIG or sharing advertises."""
        count = self.record.label(GPU_COUNT_LABEL)
        if count is not None and count.isdigit():
            return int(count)
        if self.labels.get("nvidia.com/mig.strategy", "none") not in ("none", "") and any(
                k.startswith("nvidia.com/mig-") for k in self.alloc):
            return None
        if self.labels.get("nvidia.com/mig.strategy") == "single":
            return None
        whole = self.alloc.get("nvidia.com/gpu", self.alloc.get("nvidia.com/gpu.shared"))
        if whole is None or not whole.isdigit():
            return None
        replicas = self.labels.get("nvidia.com/gpu.replicas", "1")
        per = int(replicas) if replicas.isdigit() and int(replicas) > 0 else 1
        return int(whole) // per

    def record_out(self) -> NodeRecord:
        return NodeRecord(self.record.name, tuple(sorted(self.labels.items())), self.record.label_keys,
                          self.record.label_values, self.record.taints, tuple(sorted(self.alloc.items())))


_DRIVER_LABELS = frozenset({DRIVER_FULL_LABEL, *(p + part for p, rev in DRIVER_PART_LABELS
                                                   for part in ("major", "minor", rev)),
                            *(k for pair in DRIVER_CUDA_LABELS for k in pair),
                            "nvidia.com/cuda.runtime-version.full"})


def _set_driver(node: _Node, w: WhatIf, kb: KnowledgeBase) -> None:
    assert w.driver is not None
    for key in _DRIVER_LABELS:
        node.labels.pop(key, None)
    parts = [*w.driver.text.split("."), "", ""]
    major, minor, rev = parts[0], parts[1], parts[2]
    node.labels[DRIVER_FULL_LABEL] = w.driver.text
    for prefix, rev_name in DRIVER_PART_LABELS:
        node.labels[prefix + "major"] = major
        if minor:
            node.labels[prefix + "minor"] = minor
        if rev:
            node.labels[prefix + rev_name] = rev
    cuda, _exact = kb.driver_cuda(w.driver)
    if cuda is not None:
        for maj_key, min_key in DRIVER_CUDA_LABELS[:2]:  # GFD's two names; the platform's are dropped
            node.labels[maj_key] = str(cuda.major)
            node.labels[min_key] = str(cuda.minor)


def _whole_gpus(node: _Node, gpus: int, per_gpu: int, shared: bool) -> None:
    for key in [k for k in node.alloc if k.startswith("nvidia.com/mig-") or k in ("nvidia.com/gpu",
                                                                                  "nvidia.com/gpu.shared")]:
        del node.alloc[key]
    node.alloc["nvidia.com/gpu.shared" if shared else "nvidia.com/gpu"] = str(gpus * per_gpu)


def _apply(node: _Node, w: WhatIf, kb: KnowledgeBase) -> str | None:
    """Change one node; a reason when the change cannot be made to it."""
    if w.change == "driver":
        _set_driver(node, w, kb)
        return None
    if w.change == "product":
        assert w.product is not None and w.compute is not None
        old = node.labels.get("nvidia.com/gpu.product", "")
        suffix = old[len(normalise_product(old)):] if old else ""  # -MIG-<profile> or -SHARED, as GFD writes
        node.labels["nvidia.com/gpu.product"] = w.product + suffix
        node.labels["nvidia.com/gpu.compute.major"] = str(w.compute.major)
        node.labels["nvidia.com/gpu.compute.minor"] = str(w.compute.minor)
        return None
    gpus = node.gpus()
    if gpus is None:
        return (f"cannot tell how many GPUs it has (no {GPU_COUNT_LABEL} label, and its allocatable is shared or "
                "MIG)")
    product = normalise_product(node.labels.get("nvidia.com/gpu.product", ""))
    if w.change == "mig.strategy":  # none
        node.labels["nvidia.com/mig.strategy"] = "none"
        if product:
            node.labels["nvidia.com/gpu.product"] = product
        _whole_gpus(node, gpus, 1, False)
        return None
    if w.change in ("mig.single", "mig.mixed"):
        allowed = kb.mig_profiles_for(product) if product else None
        if allowed is not None:
            unknown = [p for p, _n in w.layout if p not in allowed]
            if unknown:
                return f"{product} has no MIG profile {', '.join(unknown)} (the mig-profiles table)"
        elif product:
            return f"the mig-profiles table does not say which MIG profiles {product} has"
        for key in [k for k in node.alloc if k.startswith("nvidia.com/mig-") or k in ("nvidia.com/gpu",
                                                                                      "nvidia.com/gpu.shared")]:
            del node.alloc[key]
        node.labels.pop("nvidia.com/gpu.replicas", None)
        node.labels["nvidia.com/gpu.sharing-strategy"] = "none"
        if w.change == "mig.single":
            profile, n = w.layout[0]
            node.labels["nvidia.com/mig.strategy"] = "single"
            if product:
                node.labels["nvidia.com/gpu.product"] = f"{product}-MIG-{profile}"
            node.alloc["nvidia.com/gpu"] = str(gpus * n)
        else:
            node.labels["nvidia.com/mig.strategy"] = "mixed"
            if product:
                node.labels["nvidia.com/gpu.product"] = product
            for profile, n in w.layout:
                node.alloc[f"nvidia.com/mig-{profile}"] = str(gpus * n)
        return None
    if w.change == "replicas":
        assert w.replicas is not None
        if node.labels.get("nvidia.com/mig.strategy", "none") not in ("none", ""):
            return "its GPUs are MIG-partitioned (turn MIG off first: mig.strategy=none)"
        shared = "nvidia.com/gpu.shared" in node.alloc and w.replicas > 1
        node.labels["nvidia.com/gpu.replicas"] = str(w.replicas)
        node.labels["nvidia.com/gpu.sharing-strategy"] = "time-slicing" if w.replicas > 1 else "none"
        _whole_gpus(node, gpus, w.replicas, shared)
        return None
    raise AssertionError(w.change)  # remove is handled by the caller


@dataclass
class Applied:
    """The changed cluster, and what each what-if did: nodes matched, and problems (errors stop the run)."""

    cluster: Cluster
    matched: dict[str, int] = field(default_factory=dict)  # what-if text -> nodes it changed
    problems: list[Diagnostic] = field(default_factory=list)


class RecordingChange:
    """The cluster change a run evaluates its second view with: ``what_ifs`` applied, and what they matched and said
    kept for the report (a run may build the view more than once; each application adds what it found)."""

    def __init__(self, what_ifs: Sequence[WhatIf], kb: KnowledgeBase) -> None:
        self.what_ifs, self.kb = what_ifs, kb
        self.problems: list[Diagnostic] = []
        self.matched: dict[str, int] = {}

    def __call__(self, cluster: Cluster) -> Cluster:
        applied = apply_what_ifs(cluster, self.what_ifs, self.kb)
        self.problems.extend(applied.problems)
        self.matched.update(applied.matched)
        return applied.cluster


def apply_what_ifs(cluster: Cluster, what_ifs: Sequence[WhatIf], kb: KnowledgeBase) -> Applied:
    """``cluster`` with every what-if applied in order. A what-if that matches no node, or that cannot be made to
    a node it matches, is an error (the run would answer another question than the one asked)."""
    nodes = [_Node(rec, dict(rec.rule_labels), dict(rec.gpu_allocatable)) for cls in cluster.classes
             for rec in cls.members]
    matched: dict[str, int] = {}
    problems: list[Diagnostic] = []
    for w in what_ifs:
        where = f"--what-if {w.text}"
        hit = [n for n in nodes if w.selector.matches(n.all_labels())]
        matched[w.text] = len(hit)
        if not hit:
            problems.append(Diagnostic(where, f"the selector {w.selector.text!r} matches no node", kind="nodes"))
            continue
        if w.change == "remove":
            gone = {id(n) for n in hit}
            nodes = [n for n in nodes if id(n) not in gone]
            continue
        failed: list[tuple[str, str]] = []
        for n in hit:
            reason = _apply(n, w, kb)
            if reason is not None:
                failed.append((n.record.name, reason))
        if failed:
            name, reason = failed[0]
            more = f" (and {len(failed) - 1} more nodes)" if len(failed) > 1 else ""
            problems.append(Diagnostic(where, f"cannot apply to node {name}{more}: {reason}", kind="nodes"))
        if w.change == "driver" and w.driver is not None and kb.driver_cuda(w.driver)[0] is None:
            problems.append(Diagnostic(where, f"the driver-branches table does not say which CUDA driver {w.driver} "
                                              "supports: the nodes' CUDA is unknown", severity=Severity.WARNING,
                                       kind="nodes"))
    if cluster.dra is not None and any(w.change != "remove" for w in what_ifs):
        problems.append(Diagnostic("--what-if", "the DRA ResourceSlices of the changed nodes are read as they are "
                                                "(a what-if changes node labels and allocatable only)",
                                   severity=Severity.INFO, kind="note"))
    out = build_cluster_from_records((n.record_out() for n in nodes), kb)
    out.dra = cluster.dra
    out.admission_plugins = cluster.admission_plugins
    out.unknown_keys = cluster.unknown_keys
    out.device_class_origins = dict(cluster.device_class_origins)
    return Applied(out, matched, problems)


# ------------------------------------------------------------------------------------------------ the difference

WorkloadKey = tuple[str, str, str]  # (kind, namespace, name)


def workload_key(ref: ObjectRef) -> WorkloadKey:
    return (ref.kind or "", ref.namespace or "", ref.name or "")


@dataclass(frozen=True)
class Entry:
    workload: WorkloadKey
    rules: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        kind, namespace, name = self.workload
        return {"object": {"kind": kind, "namespace": namespace or None, "name": name}, "rules": list(self.rules)}


@dataclass(frozen=True)
class WhatIfDiff:
    """Each workload that fails before or after the change is in exactly one list:

    - ``newly_broken``: it fails a rule after that it did not fail before (``rules``: those rules; it may have
      failed others before);
    - ``newly_fixed``: it failed before and fails nothing after (``rules``: what it failed before);
    - ``still_failing``: it fails before and after, and no rule is new (``rules``: what it fails after)."""

    newly_broken: tuple[Entry, ...]
    newly_fixed: tuple[Entry, ...]
    still_failing: tuple[Entry, ...]

    def changes(self) -> dict[WorkloadKey, str]:
        """Each workload's list, as a word: newly-broken, newly-fixed, still-failing."""
        out = {e.workload: "still-failing" for e in self.still_failing}
        out.update((e.workload, "newly-fixed") for e in self.newly_fixed)
        out.update((e.workload, "newly-broken") for e in self.newly_broken)
        return out

    def to_json(self) -> dict[str, list[dict[str, object]]]:
        return {"newlyBroken": [e.to_json() for e in self.newly_broken],
                "newlyFixed": [e.to_json() for e in self.newly_fixed],
                "stillFailing": [e.to_json() for e in self.still_failing]}


def failing(findings: Iterable[tuple[ObjectRef, str]]) -> dict[WorkloadKey, frozenset[str]]:
    """(object, rule) pairs of the findings that count as failing -> the rules each workload fails."""
    out: dict[WorkloadKey, set[str]] = {}
    for ref, rule in findings:
        out.setdefault(workload_key(ref), set()).add(rule)
    return {k: frozenset(v) for k, v in out.items()}


def diff_results(before: Mapping[WorkloadKey, frozenset[str]],
                 after: Mapping[WorkloadKey, frozenset[str]]) -> WhatIfDiff:
    broken: list[Entry] = []
    fixed: list[Entry] = []
    still: list[Entry] = []
    for key in sorted(set(before) | set(after)):
        was, now = before.get(key, frozenset()), after.get(key, frozenset())
        if now - was:
            broken.append(Entry(key, tuple(sorted(now - was))))
        elif was and not now:
            fixed.append(Entry(key, tuple(sorted(was))))
        elif now:
            still.append(Entry(key, tuple(sorted(now))))
    return WhatIfDiff(tuple(broken), tuple(fixed), tuple(still))


# ------------------------------------------------------------------------------------------------ lowest driver


def branch_drivers(kb: KnowledgeBase) -> list[Version]:
    """One driver per branch of the driver-branches table, oldest first: the newest release of the branch that the
    cuda-toolkits table names (a toolkit bundled it). A branch no toolkit bundled has no known release and is left
    out (R565)."""
    newest: dict[int, Version] = {}
    for _cuda, driver in kb.toolkits:
        if driver.major not in newest or newest[driver.major] < driver:
            newest[driver.major] = driver
    return [newest[b] for b, _cuda in kb.branches if b in newest]


@dataclass(frozen=True)
class LowestDriver:
    """What ``lowest_driver`` found: the lowest branch (its tried driver) that fails nothing a newer branch does
    not also fail, for every workload; the driver each workload needs (those above the oldest tried); and the
    workloads that still fail on that driver (no newer driver fixes them: another rule, or the GPU)."""

    driver: Version | None
    needs: tuple[tuple[WorkloadKey, Version], ...]
    still_failing: tuple[Entry, ...]


def lowest_driver(per_driver: Sequence[tuple[Version, Mapping[WorkloadKey, frozenset[str]]]]) -> LowestDriver:
    """``per_driver``: (driver, what fails with the pool on it), oldest driver first. A workload needs the lowest
    driver from which on, up to the newest, it fails nothing the newest does not fail too."""
    if not per_driver:
        return LowestDriver(None, (), ())
    drivers = [d for d, _f in per_driver]
    top = per_driver[-1][1]
    keys = sorted({k for _d, f in per_driver for k in f})
    needs: list[tuple[WorkloadKey, Version]] = []
    overall = 0
    for key in keys:
        best = top.get(key, frozenset())
        need = len(per_driver) - 1
        while need > 0 and per_driver[need - 1][1].get(key, frozenset()) <= best:
            need -= 1
        overall = max(overall, need)
        if need > 0:
            needs.append((key, drivers[need]))
    chosen = per_driver[overall][1]
    still = tuple(Entry(k, tuple(sorted(chosen[k]))) for k in keys if chosen.get(k))
    return LowestDriver(drivers[overall], tuple(needs), still)
