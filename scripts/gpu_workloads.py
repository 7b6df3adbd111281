"""Count the GPU workloads compatcheck recognises in a tree of manifests, and how it sees their GPUs.

    python scripts/gpu_workloads.py DIR [DIR ...]

For each directory (files linted together, as ``compatcheck lint DIR`` does: the ResourceClaims, templates and
DeviceClasses of the directory are what its pods' claims resolve to): the objects that carry a pod spec, those of
them compatcheck treats as GPU workloads, and through what (an extended resource such as nvidia.com/gpu, a DRA
claim for an NVIDIA GPU, KAI Scheduler's sharing annotations, an operator's own GPU field). A GPU workload is
one the rules check; the others get no GPU finding.

Then the coverage of ``compatcheck lint DIR`` (no --nodes): how many GPU workloads it counts (kinds of the table,
kinds found by their shape, unrendered templates that ask for GPUs), how many were checked and how many not, by
reason (docs/coverage.md). With ``--not-checked`` every not-checked record is listed.
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

from compatcheck.core.checks.base import EvalContext, PodAnalysis, container_gpu_requests, quantity_int
from compatcheck.core.cluster import is_other_vendor_gpu_resource
from compatcheck.core.crl import CrlIndex
from compatcheck.core.dra import build_index, is_dra
from compatcheck.core.knowledge import KnowledgeBase
from compatcheck.core.workloads import pod_targets
from compatcheck.io.lint import LintOptions, run_lint
from compatcheck.io.loader import Loaded, load_rules
from compatcheck.io.manifests import expand_paths, iter_objects, read_file


def _other_vendor(container: dict[str, Any]) -> bool:
    """Whether a container asks for an AMD or Intel GPU (a GPU workload compatcheck does not check)."""
    resources = container.get("resources") or {}
    for section in ("limits", "requests"):
        for k, v in (resources.get(section) or {}).items():
            q = quantity_int(v)
            if is_other_vendor_gpu_resource(str(k)) and (q is None or q > 0):
                return True
    return False


def count(directory: str, kb: KnowledgeBase) -> tuple[Counter[str], list[str]]:
    paths, _problems = expand_paths([directory])
    objects: list[tuple[str, dict[str, Any]]] = []
    unreadable: list[str] = []
    for path in paths:
        parsed = read_file(path)
        unreadable.extend(f"{e.path}:{e.line or ''} {e.message}" for e in parsed.errors)
        objects.extend((path, obj) for doc in parsed.documents for _p, obj in iter_objects(doc))
    ctx = EvalContext(kb, None, CrlIndex(), dra=build_index(o for _p, o in objects if is_dra(o)))
    tally: Counter[str] = Counter()
    not_gpu: list[str] = []
    for path, obj in objects:
        pods = pod_targets(obj)
        if not pods:
            continue
        tally["objects with a pod spec"] += 1
        how: set[str] = set()
        for pod in pods:
            a = PodAnalysis(pod, ctx)
            if not a.is_gpu_pod:
                continue
            for c, _req in a.gpu_containers:
                own = container_gpu_requests(c)
                if c.implied_gpu and not (own.keys() - c.implied_gpu.keys()):
                    how.add("KAI annotation" if "annotations" in c.implied_pointer else "operator GPU field")
                elif own:
                    how.add("extended resource")
                else:
                    how.add("DRA claim")
        if not how and any(_other_vendor(c.data) for pod in pods for c in pod.containers):
            how.add("another vendor's GPU (not checked: not an NVIDIA GPU)")
        if how:
            tally["GPU workloads"] += 1
            for h in how:
                tally[f"  through {h}"] += 1
        else:
            not_gpu.append(f"{path}: {obj.get('kind')} {(obj.get('metadata') or {}).get('name')}")
    return tally, not_gpu + [f"(not read) {u}" for u in unreadable]


def coverage(directory: str, loaded: Loaded, *, records: bool = False) -> list[str]:
    """The coverage lines of ``compatcheck lint DIR``: GPU workloads, checked, not checked by reason."""
    report = run_lint([directory], loaded, LintOptions())
    unchecked = report.unchecked_objects()
    out = [f"  coverage: GPU workloads {report.gpu_workloads}, checked {report.gpu_workloads - unchecked}, "
           f"not checked {unchecked}"]
    by: dict[str, set[tuple[str, Any]]] = {}
    for n in report.not_checked:
        by.setdefault(n.category, set()).add((n.path, n.obj))
    out.extend(f"    not checked, {reason}: {len(objs)}" for reason, objs in sorted(by.items()))
    if records:
        out.extend(f"    {n.path}:{n.line or ''} {n.obj.describe()}: {n.reason}" for n in report.not_checked)
    return out


def main(argv: list[str]) -> int:
    records = "--not-checked" in argv
    argv = [a for a in argv if a != "--not-checked"]
    if not argv:
        print(__doc__)
        return 2
    loaded = load_rules()
    kb = loaded.kb
    for directory in argv:
        tally, not_gpu = count(directory, kb)
        print(f"{directory}:")
        for key in ("objects with a pod spec", "GPU workloads"):
            print(f"  {key}: {tally[key]}")
        for key in sorted(k for k in tally if k.startswith("  through")):
            print(f"  {key}: {tally[key]}")
        for line in not_gpu:
            print(f"  {'could not read' if line.startswith('(not read) ') else 'not a GPU workload'}: "
                  f"{line.removeprefix('(not read) ')}")
        for line in coverage(directory, loaded, records=records):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
