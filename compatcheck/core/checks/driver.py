"""Check types for the driver/runtime version matrix: ``cuda-driver-compat``, ``cuda-affinity-pin``,
``cuda-runtime-known``. The verdict itself comes from ``KnowledgeBase.verdict`` so that the CLI's
``versions`` command, the linter and the webhook always agree."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from compatcheck.core.checks import register
from compatcheck.core.checks.base import CheckType, CudaRuntime, Params, PodAnalysis, Violation, admits_projected
from compatcheck.core.cluster import (
    DRIVER_CUDA_LABELS,
    DRIVER_FULL_LABEL,
    DRIVER_PART_LABELS,
    NodeClass,
    build_cluster,
    required_terms,
)
from compatcheck.core.jsonutil import sequence
from compatcheck.core.knowledge import DriverVerdict
from compatcheck.core.model import Applicability, Fix
from compatcheck.core.patches import set_path_ops
from compatcheck.core.versions import Version
from compatcheck.core.workloads import ContainerTarget

_FORWARD_COMPAT = ("; forward compatibility (cuda-compat libraries in the image) can bridge this on "
                   "datacenter GPUs only")


def _gpu_runtimes(a: PodAnalysis) -> Iterator[tuple[ContainerTarget, CudaRuntime, Version]]:
    for c, _req in a.gpu_containers:
        rt = a.runtime(c)
        if rt.version is not None:
            yield c, rt, rt.version


def _matches_mode(mode: str, v: DriverVerdict, runtime: Version, max_skew: int) -> bool:
    if mode == "too-old":
        return v.verdict == "incompatible"
    if mode == "behind-runtime":
        return v.verdict == "minor-version-compatibility"
    return v.driver_cuda is not None and v.driver_cuda.major - runtime.major > max_skew


def _driver_compat(a: PodAnalysis, params: Params) -> Iterator[Violation]:
    mode = params["mode"]
    classes = a.scope_classes() if a.ctx.cluster is not None else []
    if not classes:
        return
    kb = a.ctx.kb
    for c, rt, runtime in _gpu_runtimes(a):
        bad: list[tuple[NodeClass, DriverVerdict]] = []
        for cls in classes:
            f = cls.facts
            if f.driver is None and f.driver_cuda is None:
                continue
            v = kb.verdict(runtime, driver=f.driver, driver_cuda=f.driver_cuda)
            if _matches_mode(mode, v, runtime, params.get("maxMajorSkew", 1)):
                bad.append((cls, v))
        if not bad:
            continue
        v0 = bad[0][1]
        where = "; ".join(f"{cls.facts.describe_driver()} on {cls.sample_names(2)}" for cls, _ in bad[:3])
        if len(bad) > 3:
            where += f" (+{len(bad) - 3} more node kinds)"
        rtmm = runtime.major_minor()
        lowest = kb.lowest_branch_for(runtime)
        need = f"a driver from branch >= {lowest}" if lowest else f"a driver for CUDA >= {rtmm}"
        if mode == "too-old":
            floor = (f" (or >= {v0.mvc_floor} with minor-version compatibility)"
                     if v0.mvc_floor and str(v0.mvc_floor) != str(lowest) else "")
            fwd = _FORWARD_COMPAT if any(cls.facts.datacenter is not False for cls, _ in bad) else ""
            msg = f"image CUDA {rtmm} ({rt.origin}) needs {need}{floor}; eligible nodes run {where}{fwd}"
        elif mode == "behind-runtime":
            msg = (f"image CUDA {rtmm} ({rt.origin}) is newer than the driver's CUDA on {where}: it runs only "
                   f"through minor-version compatibility (no PTX JIT, no newer-driver APIs); use {need}")
        else:
            msg = (f"driver CUDA {v0.driver_cuda} is more than {params.get('maxMajorSkew', 1)} major version "
                   f"ahead of image CUDA {rtmm} on {where}; NVIDIA does not support this skew")
        fix = _affinity_fix(a, runtime) if mode in ("too-old", "behind-runtime") else None
        yield Violation(msg, rt.pointer, c.name, fix)


GFD_KEYS, PLATFORM_KEYS = DRIVER_CUDA_LABELS[0], DRIVER_CUDA_LABELS[-1]


def _affinity_fix(a: PodAnalysis, runtime: Version) -> Fix:
    """Confine the pod to nodes whose driver supports ``runtime``: (major > X) OR (major == X AND minor >= Y),
    AND-ed into every existing required term (terms are OR-ed, expressions AND-ed)."""
    classes = a.ctx.cluster.classes if a.ctx.cluster is not None else []
    uses_platform = any(PLATFORM_KEYS[0] in c.labels for c in classes) and not any(
        GFD_KEYS[0] in c.labels for c in classes)
    major_key, minor_key = PLATFORM_KEYS if uses_platform else GFD_KEYS
    rt = runtime.major_minor()
    if rt.minor == 0:
        ours = [[{"key": major_key, "operator": "Gt", "values": [str(rt.major - 1)]}]]
    else:
        ours = [[{"key": major_key, "operator": "Gt", "values": [str(rt.major)]}],
                [{"key": major_key, "operator": "In", "values": [str(rt.major)]},
                 {"key": minor_key, "operator": "Gt", "values": [str(rt.minor - 1)]}]]
    existing = required_terms(a.pod.spec) or []
    terms: list[dict[str, Any]] = []
    if existing:
        for term in existing:
            for extra in ours:
                merged = {k: v for k, v in term.items()}
                merged["matchExpressions"] = [*sequence(term.get("matchExpressions")), *extra]
                terms.append(merged)
    else:
        terms = [{"matchExpressions": extra} for extra in ours]
    ops = set_path_ops(a.pod.spec, a.pod.pointer, ("affinity", "nodeAffinity",
                                               "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"),
                   terms)
    return Fix(f"require nodes whose driver supports CUDA {rt} ({major_key}/{minor_key.rsplit('.', 1)[-1]})",
               Applicability.UNSAFE, ops)


register(CheckType(
    name="cuda-driver-compat",
    description="Compares each GPU container's CUDA runtime with the drivers of the nodes it can land on.",
    target="pod",
    needs_nodes=True,
    params_schema={
        "type": "object", "additionalProperties": False, "required": ["mode"],
        "properties": {
            "mode": {"enum": ["too-old", "behind-runtime", "major-skew"],
                     "description": "too-old: incompatible; behind-runtime: only minor-version compatible; "
                                    "major-skew: driver CUDA major ahead by more than maxMajorSkew."},
            "maxMajorSkew": {"type": "integer", "minimum": 0, "default": 1,
                             "description": "Largest supported driver-major minus runtime-major (major-skew)."},
        },
    },
    evaluate=_driver_compat,
    fix_applicability=Applicability.UNSAFE,
    fix_modes=("too-old", "behind-runtime"),
))


DRIVER_KEYS = frozenset({*(k for pair in DRIVER_CUDA_LABELS for k in pair), DRIVER_FULL_LABEL,
                         *(prefix + "major" for prefix, _rev in DRIVER_PART_LABELS)})


def _universe(a: PodAnalysis) -> list[NodeClass]:
    """One synthetic node per known driver branch (plus any full driver version the pod names)."""
    nodes = []
    for branch, cuda in a.ctx.kb.branches:
        labels = {key: str(part) for keys in DRIVER_CUDA_LABELS for key, part in zip(keys, (cuda.major, cuda.minor),
                                                                                          strict=True)}
        labels.update({prefix + "major": str(branch) for prefix, _rev in DRIVER_PART_LABELS})
        nodes.append({"metadata": {"name": f"R{branch}", "labels": labels}})
    return build_cluster(nodes, a.ctx.kb).classes


def _pins_driver(a: PodAnalysis) -> bool:
    sel = a.pod.spec.get("nodeSelector")
    if isinstance(sel, dict) and any(k in DRIVER_KEYS for k in sel):
        return True
    terms = required_terms(a.pod.spec)
    if not terms:
        return False
    # Pinned only if every OR-branch constrains a driver key.
    return all(any(isinstance(e, dict) and e.get("key") in DRIVER_KEYS for e in sequence(t.get("matchExpressions")))
               for t in terms)


def _affinity_pin(a: PodAnalysis, params: Params) -> Iterator[Violation]:
    if not a.is_gpu_pod or not _pins_driver(a):
        return
    admitted = [cls for cls in _universe(a) if admits_projected(a.pod.spec, cls)]
    if not admitted:
        return
    kb = a.ctx.kb
    accept = set(params.get("accept", ["compatible", "minor-version-compatibility"]))
    for c, rt, runtime in _gpu_runtimes(a):
        verdicts = [kb.verdict(runtime, driver_cuda=cls.facts.driver_cuda) for cls in admitted]
        if any(v.verdict in accept or v.verdict == "unknown" for v in verdicts):
            continue
        cudas = sorted({str(v.driver_cuda.major_minor()) for v in verdicts if v.driver_cuda}, key=lambda s:
                       tuple(int(x) for x in s.split(".")))
        shown = ", ".join(cudas[:6]) + (" ..." if len(cudas) > 6 else "")
        ptr = a.pod.pointer + ("/nodeSelector" if isinstance(a.pod.spec.get("nodeSelector"), dict) and any(
            k in DRIVER_KEYS for k in a.pod.spec["nodeSelector"]) else "/affinity/nodeAffinity")
        lowest = kb.lowest_branch_for(runtime)
        yield Violation(
            f"the pod's node selection admits only drivers for CUDA {shown}, too old for image CUDA "
            f"{runtime.major_minor()} ({rt.origin}); it needs a driver from branch >= {lowest}",
            ptr, c.name)


register(CheckType(
    name="cuda-affinity-pin",
    description="Reads the driver the pod's own nodeSelector/affinity pins (platform cuda-*-version labels, "
                "GFD driver and runtime labels) and compares it with each GPU container's CUDA runtime.",
    target="pod",
    params_schema={
        "type": "object", "additionalProperties": False,
        "properties": {"accept": {"type": "array", "items": {"enum": ["compatible", "minor-version-compatibility"]},
                                  "description": "Verdicts that satisfy the check (default both)."}},
    },
    evaluate=_affinity_pin,
))


def _runtime_known(a: PodAnalysis, params: Params) -> Iterator[Violation]:
    for c, _req in a.gpu_containers:
        rt = a.runtime(c)
        if rt.version is not None:
            continue
        if rt.origin.startswith(("annotation", "env")):
            yield Violation(f"{rt.origin}: {rt.problem}", rt.pointer, c.name, input_error=True)
            continue
        how = (f'declare it with the annotation {params.get("annotation", "compatcheck.io/cuda-runtime")}'
               f'.{c.name}: "12.4" (or without .{c.name} for every container), set env CUDA_VERSION, '
               "or add an image pattern in your rules data directory")
        reason = f" ({rt.problem})" if rt.problem else ""
        yield Violation(f"CUDA runtime of container {c.name!r} is unknown{reason}; {how}", rt.pointer, c.name)


register(CheckType(
    name="cuda-runtime-known",
    description="Reports GPU containers whose CUDA runtime cannot be determined from annotations, env or image.",
    target="pod",
    params_schema={"type": "object", "additionalProperties": False,
                   "properties": {"annotation": {"type": "string", "description": "Annotation prefix to suggest."}}},
    evaluate=_runtime_known,
))
