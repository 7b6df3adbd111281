"""Check types for the driver/runtime version matrix: ``cuda-driver-too-old``, ``cuda-driver-forward-compat``,
``cuda-driver-behind-runtime`` and ``cuda-driver-major-skew`` (the drivers of the nodes a pod can land on, with a
cluster view; each takes its own ``Path`` of a container's runtime to a node kind's driver), ``cuda-affinity-pin``
(the driver the pod's own selectors pin) and ``cuda-runtime-known``. The verdict itself comes from
``KnowledgeBase.verdict`` so that the CLI's ``versions`` command, the linter and the webhook always agree."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from compatcheck.core.checks import register
from compatcheck.core.checks.base import (
    NO_PARAMS_SCHEMA,
    CudaRuntime,
    EvalContext,
    InputProblem,
    NoParams,
    Outcome,
    PodAnalysis,
    PodCheck,
    RawParams,
    Violation,
    admits_projected,
    env_value,
    no_params,
)
from compatcheck.core.cluster import (
    DRIVER_CUDA_LABELS,
    DRIVER_FULL_LABEL,
    DRIVER_PART_LABELS,
    NodeClass,
    build_cluster,
    required_terms,
)
from compatcheck.core.jsonutil import JsonObject, sequence
from compatcheck.core.knowledge import DriverVerdict, KnowledgeBase, Verdict
from compatcheck.core.model import Applicability, Fix
from compatcheck.core.patches import set_path_ops
from compatcheck.core.policy import (
    FORWARD_COMPAT_KEY,
    FORWARD_COMPAT_LABEL,
    MINOR_VERSION_COMPAT_KEY,
    MINOR_VERSION_COMPAT_LABEL,
    Declared,
    Relaxation,
)
from compatcheck.core.versions import Version
from compatcheck.core.workloads import ContainerTarget

if TYPE_CHECKING:
    from compatcheck.core.dra import PodRequest

_FORWARD_COMPAT = ("; forward compatibility (cuda-compat libraries in the image) can bridge this on "
                   "datacenter GPUs only")
# How to declare each relaxation, in the messages of the errors that the default policy gives.
_HOW_FORWARD = (f"declare it in the config ({FORWARD_COMPAT_KEY}: true) or per node pool (label "
                f'{FORWARD_COMPAT_LABEL}: "true")')
_HOW_MVC = (f'declare it in the config ({MINOR_VERSION_COMPAT_KEY}: true) or per node pool (label '
            f'{MINOR_VERSION_COMPAT_LABEL}: "true")')
_FORWARD_UNDECLARED = ("; NVIDIA forward compatibility (cuda-compat libraries in the image) could bridge this on "
                       f"data-center GPUs if the platform enables it ({_HOW_FORWARD})")


def _gpu_runtimes(a: PodAnalysis) -> Iterator[tuple[ContainerTarget, CudaRuntime, Version]]:
    for c, _req in a.gpu_containers:
        rt = a.runtime(c)
        if rt.version is not None:
            yield c, rt, rt.version


@dataclass(frozen=True)
class _Mismatch:
    """A GPU container whose CUDA runtime the drivers of some eligible node kinds fail a check for."""

    c: ContainerTarget
    rt: CudaRuntime
    runtime: Version
    bad: list[tuple[NodeClass, DriverVerdict]]  # the failing node kinds, with their verdicts

    @property
    def where(self) -> str:
        where = "; ".join(f"{cls.facts.describe_driver()} on {cls.sample_names(2)}" for cls, _ in self.bad[:3])
        if len(self.bad) > 3:
            where += f" (+{len(self.bad) - 3} more node kinds)"
        return where


# How a node kind's driver meets a container's CUDA runtime, under the cluster's driver policy (core.policy):
#   compatible   the driver supports it;
#   forward      too old, but the image's forward compatibility bridges it (cuda-compat, a listed branch,
#                a data-center GPU, no vGPU) and the policy declares forward compatibility for the node kind;
#   mvc          older, same major, above the floor, and the policy declares minor-version compatibility: it runs
#                through it (no PTX JIT...);
#   behind       the same, but the policy does not declare it: the platform's driver >= runtime rule refuses it;
#   refused      minor-version compatibility would run it, but the image's NVIDIA_REQUIRE_CUDA (cuda>=X.Y) makes the
#                container runtime refuse to start it on that driver, and no listed alternative lets it in;
#   incompatible too old, and nothing (declared) bridges it.
Path = Literal["compatible", "mvc", "behind", "forward", "refused", "incompatible", "unknown"]


def _declared(ctx: EvalContext, cls: NodeClass, relaxation: Relaxation) -> Declared:
    """Whether the policy declares ``relaxation`` for this node kind: its label, else the config."""
    own = cls.facts.forward_compat if relaxation == "forward" else cls.facts.minor_version_compat
    return ctx.driver_policy.declared(relaxation, own)


def _path(a: PodAnalysis, ctx: EvalContext, c: ContainerTarget, cls: NodeClass, v: DriverVerdict,
          runtime: Version) -> Path:
    if v.verdict in ("compatible", "unknown"):
        return v.verdict
    if a.runtime(c).at_least:  # a floating tag: only "too old even for its lowest release" is certain
        return "incompatible" if v.verdict == "incompatible" else "unknown"
    bridged = _bridges(a, c, cls, runtime)
    if bridged and _declared(ctx, cls, "forward").on:
        return "forward"
    if v.verdict == "incompatible":
        return "incompatible"
    # A listed branch's brand=...,driver>=N alternative lets the container start on a data-center GPU.
    gate = None if bridged else _start_gate(a, c)
    if gate is not None and v.driver_cuda is not None and v.driver_cuda.major_minor() < gate.major_minor():
        return "refused"
    return "mvc" if _declared(ctx, cls, "minor-version").on else "behind"


def _start_gate(a: PodAnalysis, c: ContainerTarget) -> Version | None:
    """The ``cuda>=X.Y`` of the image's NVIDIA_REQUIRE_CUDA, which the NVIDIA container runtime checks before it
    starts the container (unless the container sets NVIDIA_DISABLE_REQUIRE=true, or the image sets it low: NGC
    images ask for cuda>=9.0)."""
    disabled = env_value(c, "NVIDIA_DISABLE_REQUIRE")
    if disabled is not None and isinstance(disabled[1], str) and disabled[1].strip().lower() in ("true", "1"):
        return None
    facts = a.image_facts(c)
    return facts.require_cuda if facts is not None else None


def _driver_mismatches(a: PodAnalysis, ctx: EvalContext,
                       select: Callable[[Path, DriverVerdict, Version], bool]) -> Iterator[_Mismatch]:
    """With a cluster view: each GPU container for which ``select(path, verdict, runtime)`` holds on some node kind
    in scope that has a known driver, with those node kinds."""
    classes = a.scope_classes() if ctx.cluster is not None else []
    if not classes:
        return
    kb = ctx.kb
    for c, rt, runtime in _gpu_runtimes(a):
        bad: list[tuple[NodeClass, DriverVerdict]] = []
        for cls in classes:
            f = cls.facts
            if f.driver is None and f.driver_cuda is None:
                continue
            v = kb.verdict(runtime, driver=f.driver, driver_cuda=f.driver_cuda)
            if select(_path(a, ctx, c, cls, v, runtime), v, runtime):
                bad.append((cls, v))
        if bad:
            yield _Mismatch(c, rt, runtime, bad)


def _bridges(a: PodAnalysis, c: ContainerTarget, cls: NodeClass, runtime: Version) -> bool:
    """Whether the image runs ``runtime`` on this node kind's older driver through forward compatibility: its
    cuda-compat libraries, a driver branch its NVIDIA_REQUIRE_CUDA lists, a data-center GPU, and no vGPU layer
    (GPU-Manager and HAMi interpose their own libcuda, which the image's would bypass). Whether the platform
    enables it is the policy's to say (``_declared``)."""
    facts = a.image_facts(c)
    fwd = facts.forward_compat if facts is not None else None
    return fwd is not None and not a.under_vgpu and fwd.bridges(runtime, cls.facts.driver, cls.facts.datacenter)


def _undeclared_forward(a: PodAnalysis, ctx: EvalContext, c: ContainerTarget, m: _Mismatch) -> str | None:
    """Where the image's forward compatibility would bridge the gap on some of the failing node kinds but the policy
    does not declare it there: what it could do and how to declare it (or that a pool's label turned it off)."""
    facts = a.image_facts(c)
    fwd = facts.forward_compat if facts is not None else None
    bridgeable = [cls for cls, _ in m.bad if _bridges(a, c, cls, m.runtime)]
    if fwd is None or not bridgeable:
        return None
    branches = ", ".join(str(b) for b in sorted({cls.facts.driver.major for cls in bridgeable
                                                  if cls.facts.driver is not None}))
    what = (f"the image's CUDA {fwd.compat_cuda.major_minor()} cuda-compat libraries, which list driver branch "
            f"{branches}")
    if all(_declared(ctx, cls, "forward").by == "label" for cls in bridgeable):
        return (f"; NVIDIA forward compatibility ({what}) could bridge this, but the nodes' label "
                f'{FORWARD_COMPAT_LABEL}: "false" says the platform does not enable it there')
    return (f"; NVIDIA forward compatibility ({what}) could bridge this on these data-center GPUs if the platform "
            f"enables it: {_HOW_FORWARD}")


def _why_not_bridged(a: PodAnalysis, ctx: EvalContext, c: ContainerTarget, m: _Mismatch) -> str:
    """Why forward compatibility does not save this container, in the words of the too-old finding."""
    undeclared = _undeclared_forward(a, ctx, c, m)
    if undeclared is not None:
        return undeclared
    gate = _start_gate(a, c)
    facts = a.image_facts(c)
    fwd = facts.forward_compat if facts is not None else None
    if gate is not None and all(v.verdict == "minor-version-compatibility" for _, v in m.bad):
        listed = sorted({cls.facts.driver.major for cls, _ in m.bad if cls.facts.driver is not None}
                        & set(fwd.branches if fwd is not None else ()))
        if listed and fwd is not None and all(cls.facts.datacenter is not True for cls, _ in m.bad):
            # The brand=B,driver>=N alternatives let the container start on a listed branch, but only so that
            # the image's cuda-compat libraries replace the driver's libcuda: off data-center GPUs they fail
            # (CUDA error 804), and from CUDA 12.5 GeForce/TITAN brands are not listed at all.
            return (f"; the image's NVIDIA_REQUIRE_CUDA admits driver branch {', '.join(map(str, listed))} only for "
                    "its forward compatibility, whose cuda-compat libraries work on data-center GPUs only (CUDA "
                    "error 804 'forward compatibility was attempted on non supported HW' elsewhere)")
        return (f"; minor-version compatibility would run it, but the image's NVIDIA_REQUIRE_CUDA (cuda>="
                f"{gate.major_minor()}) makes the NVIDIA container runtime refuse to start it on that driver "
                "(NVIDIA_DISABLE_REQUIRE=true in the container lifts the check)")
    if fwd is None:
        # forward compatibility (cuda-compat) began with CUDA 10.0: nothing bridges an older runtime
        if a.under_vgpu and m.runtime.major >= 10:
            return ("; forward compatibility (cuda-compat libraries in an image) does not apply under GPU-Manager/HAMi "
                    "vGPU: their libcuda would bypass the vGPU layer")
        if m.runtime.major < 10 or not any(cls.facts.datacenter is not False for cls, _ in m.bad):
            return ""
        declared = all(_declared(ctx, cls, "forward").on for cls, _ in m.bad if cls.facts.datacenter is not False)
        return _FORWARD_COMPAT if declared else _FORWARD_UNDECLARED
    if a.under_vgpu:
        return ("; the image's forward compatibility (cuda-compat) does not apply under GPU-Manager/HAMi vGPU: its "
                "libcuda would bypass the vGPU layer")
    if fwd.compat_cuda.major_minor() < m.runtime.major_minor():
        return (f"; the image's cuda-compat libraries bring CUDA {fwd.compat_cuda.major_minor()} only, older than "
                "the CUDA its framework loads")
    if any(cls.facts.datacenter is not True for cls, _ in m.bad):
        return "; forward compatibility (the image's cuda-compat libraries) works on data-center GPUs only"
    branches = ", ".join(str(b) for b in sorted(fwd.branches))
    return f"; the image's forward compatibility lists driver branches {branches} only"


def _needed_driver(kb: KnowledgeBase, runtime: Version) -> tuple[str, int | None]:
    """What ``runtime`` needs, in words, and the lowest driver branch that gives it (when the table knows)."""
    lowest = kb.lowest_branch_for(runtime)
    return (f"a driver from branch >= {lowest}" if lowest else f"a driver for CUDA >= {runtime.major_minor()}"), lowest


def _declared_by(ctx: EvalContext, m: _Mismatch, relaxation: Relaxation) -> str:
    """Who declares ``relaxation`` for the failing node kinds: the config, their label, or both."""
    key, label = ((FORWARD_COMPAT_KEY, FORWARD_COMPAT_LABEL) if relaxation == "forward"
                  else (MINOR_VERSION_COMPAT_KEY, MINOR_VERSION_COMPAT_LABEL))
    by = {_declared(ctx, cls, relaxation).by for cls, _ in m.bad}
    return " and ".join(w for b, w in (("config", f"the config's {key}"), ("label", f"the nodes' label {label}"))
                        if b in by)


def _too_old(a: PodAnalysis, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    for m in _driver_mismatches(a, ctx, lambda path, _v, _r: path in ("incompatible", "refused")):
        v0 = m.bad[0][1]
        need, lowest = _needed_driver(ctx.kb, m.runtime)
        mvc = any(_declared(ctx, cls, "minor-version").on for cls, _ in m.bad)
        floor = (f" (or >= {v0.mvc_floor} with minor-version compatibility)"
                 if mvc and v0.mvc_floor and str(v0.mvc_floor) != str(lowest) else "")
        fwd = _why_not_bridged(a, ctx, m.c, m)
        yield Violation(f"image CUDA {m.runtime.major_minor()} ({m.rt.origin}) needs {need}{floor}; eligible nodes "
                        f"run {m.where}{fwd}", m.rt.pointer, m.c.name, _affinity_fix(a, ctx, m.runtime))


def _forward_compat(a: PodAnalysis, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    for m in _driver_mismatches(a, ctx, lambda path, _v, _r: path == "forward"):
        facts = a.image_facts(m.c)
        fwd = facts.forward_compat if facts is not None else None
        assert fwd is not None  # bridged implies it
        branches = ", ".join(str(b) for b in sorted({cls.facts.driver.major for cls, _ in m.bad
                                                      if cls.facts.driver is not None}))
        # Same major and above the floor everywhere: without the cuda-compat libraries (a container toolkit that
        # does not load them, an image that removed them) minor-version compatibility still runs it, so "only"
        # would overstate the dependence.
        mvc = all(v.verdict == "minor-version-compatibility" for _cls, v in m.bad)
        yield Violation(f"image CUDA {m.runtime.major_minor()} ({m.rt.origin}) is newer than the driver on {m.where}: "
                        f"it runs {'' if mvc else 'only '}through forward compatibility (the image's CUDA "
                        f"{fwd.compat_cuda.major_minor()} cuda-compat libraries, which list driver branch {branches} "
                        "on data-center GPUs)"
                        + ("; without them, minor-version compatibility runs it (no PTX JIT, no newer-driver APIs)"
                           if mvc else "")
                        + f"; {_declared_by(ctx, m, 'forward')} declares that the platform enables it",
                        m.rt.pointer, m.c.name, _affinity_fix(a, ctx, m.runtime))


def _behind_runtime(a: PodAnalysis, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    for m in _driver_mismatches(a, ctx, lambda path, _v, _r: path == "behind"):
        need, _lowest = _needed_driver(ctx.kb, m.runtime)
        if all(_declared(ctx, cls, "minor-version").by == "label" for cls, _ in m.bad):
            mvc = ("; NVIDIA minor-version compatibility would run it (no PTX JIT, no newer-driver APIs), but the "
                   f"nodes' label {MINOR_VERSION_COMPAT_LABEL}: \"false\" says the platform does not accept it there")
        else:
            mvc = ("; NVIDIA minor-version compatibility would run it (no PTX JIT, no newer-driver APIs) if the "
                   f"platform accepts it: {_HOW_MVC}")
        fwd = _undeclared_forward(a, ctx, m.c, m) or ""
        yield Violation(f"image CUDA {m.runtime.major_minor()} ({m.rt.origin}) is newer than the driver's CUDA on "
                        f"{m.where}, and the platform requires a driver at least as new as the runtime; use {need}"
                        f"{mvc}{fwd}", m.rt.pointer, m.c.name, _affinity_fix(a, ctx, m.runtime))


def _minor_version_compat(a: PodAnalysis, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    for m in _driver_mismatches(a, ctx, lambda path, _v, _r: path == "mvc"):
        need, _lowest = _needed_driver(ctx.kb, m.runtime)
        yield Violation(f"image CUDA {m.runtime.major_minor()} ({m.rt.origin}) is newer than the driver's CUDA on "
                        f"{m.where}: it runs only through minor-version compatibility (no PTX JIT, no newer-driver "
                        f"APIs), which {_declared_by(ctx, m, 'minor-version')} declares the platform accepts; use "
                        f"{need} to stop depending on it", m.rt.pointer, m.c.name, _affinity_fix(a, ctx, m.runtime))


@dataclass(frozen=True)
class MajorSkewParams:
    max_major_skew: int  # largest supported driver-CUDA major minus runtime major


def _prepare_major_skew(raw: RawParams) -> MajorSkewParams:
    return MajorSkewParams(int(raw.get("maxMajorSkew", 1)))


def _major_skew(a: PodAnalysis, ctx: EvalContext, params: MajorSkewParams) -> Iterator[Violation]:
    skew = params.max_major_skew

    def too_far(path: Path, v: DriverVerdict, runtime: Version) -> bool:
        # a floating tag's lower bound would overstate the skew: its path is "unknown" unless incompatible
        return path != "unknown" and v.driver_cuda is not None and v.driver_cuda.major - runtime.major > skew

    for m in _driver_mismatches(a, ctx, too_far):
        yield Violation(f"driver CUDA {m.bad[0][1].driver_cuda} is more than {skew} major version ahead of image "
                        f"CUDA {m.runtime.major_minor()} on {m.where}; such a skew is outside what NVIDIA tests "
                        "and may be unstable",
                        m.rt.pointer, m.c.name)


GFD_KEYS, PLATFORM_KEYS = DRIVER_CUDA_LABELS[0], DRIVER_CUDA_LABELS[-1]


def _affinity_fix(a: PodAnalysis, ctx: EvalContext, runtime: Version) -> Fix | None:
    """Confine the pod to nodes whose driver supports ``runtime``: (major > X) OR (major == X AND minor >= Y),
    AND-ed into every existing required term (terms are OR-ed, expressions AND-ed). None for a pod that gets its
    GPUs only through DRA claims: node labels do not choose its devices, its claims' selectors do."""
    if a.dra_gpu_requests and not any(v > 0 for v in a.pod_requests.values()):
        return None
    classes = ctx.cluster.classes if ctx.cluster is not None else []
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
    terms: list[JsonObject] = []
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


_SCOPE = "each GPU container's CUDA runtime with the drivers of the nodes it can land on"


def _driver_path_check(name: str, evaluate: Callable[[PodAnalysis, EvalContext, NoParams], Iterator[Violation]],
                       description: str) -> None:
    """One of the check types that each report one path of the driver policy (docs/driver-policy.md): they differ
    only in the path they report, and offer the same unsafe fix (require nodes whose driver supports the runtime)."""
    register(PodCheck(name=name, description=description, needs_nodes=True, fix_applicability=Applicability.UNSAFE,
                      params_schema=NO_PARAMS_SCHEMA, prepare=no_params, evaluate=evaluate))


_driver_path_check("cuda-driver-too-old", _too_old,
                   f"Compares {_SCOPE}: reports drivers that cannot run it at all (incompatible), or only through a "
                   "relaxation the driver policy does not declare across a major version.")
_driver_path_check("cuda-driver-forward-compat", _forward_compat,
                   f"Compares {_SCOPE}: reports drivers too old for it that run it only through the image's forward "
                   "compatibility (cuda-compat libraries, a listed driver branch, a data-center GPU, no vGPU), where "
                   "the driver policy declares that the platform enables it.")
_driver_path_check("cuda-driver-behind-runtime", _behind_runtime,
                   f"Compares {_SCOPE}: reports drivers older than the runtime, of its major version, where the driver "
                   "policy does not declare minor-version compatibility (the platform requires driver >= runtime).")
_driver_path_check("cuda-driver-minor-version-compat", _minor_version_compat,
                   f"Compares {_SCOPE}: reports drivers older than the runtime, of its major version, that run it only "
                   "through minor-version compatibility where the driver policy declares that the platform accepts it.")
register(PodCheck(
    name="cuda-driver-major-skew",
    description=f"Compares {_SCOPE}: reports drivers whose CUDA major is ahead of the runtime's by more than "
                "maxMajorSkew.",
    needs_nodes=True,
    params_schema={"type": "object", "additionalProperties": False, "properties": {
        "maxMajorSkew": {"type": "integer", "minimum": 0, "default": 1,
                         "description": "Largest supported driver-major minus runtime-major."}}},
    prepare=_prepare_major_skew,
    evaluate=_major_skew,
))


DRIVER_KEYS = frozenset({*(k for pair in DRIVER_CUDA_LABELS for k in pair), DRIVER_FULL_LABEL,
                         *(prefix + "major" for prefix, _rev in DRIVER_PART_LABELS)})


def _universe(kb: KnowledgeBase) -> list[NodeClass]:
    """One synthetic node per known driver branch (plus any full driver version the pod names)."""
    nodes = []
    for branch, cuda in kb.branches:
        labels = {key: str(part) for keys in DRIVER_CUDA_LABELS for key, part in zip(keys, (cuda.major, cuda.minor),
                                                                                          strict=True)}
        labels.update({prefix + "major": str(branch) for prefix, _rev in DRIVER_PART_LABELS})
        nodes.append({"metadata": {"name": f"R{branch}", "labels": labels}})
    return build_cluster(nodes, kb).classes


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


@dataclass(frozen=True)
class AffinityPinParams:
    accept: frozenset[Verdict]  # verdicts that satisfy the check ("unknown" always does)


def _prepare_affinity_pin(raw: RawParams) -> AffinityPinParams:
    accept: list[Verdict] = raw.get("accept", ["compatible"])
    return AffinityPinParams(frozenset(accept))


def _accepted(ctx: EvalContext, params: AffinityPinParams) -> frozenset[Verdict]:
    """The verdicts a pin may admit: the rule's, and minor-version compatibility where the policy declares it."""
    if ctx.driver_policy.minor_version_compatibility:
        return params.accept | {"minor-version-compatibility"}
    return params.accept


def _affinity_pin(a: PodAnalysis, ctx: EvalContext, params: AffinityPinParams) -> Iterator[Violation]:
    if not a.is_gpu_pod:
        return
    kb = ctx.kb
    accept = _accepted(ctx, params)
    if _pins_driver(a):
        admitted = [cls for cls in _universe(kb) if admits_projected(a.pod.spec, cls)]
        ptr = a.pod.pointer + ("/nodeSelector" if isinstance(a.pod.spec.get("nodeSelector"), dict) and any(
            k in DRIVER_KEYS for k in a.pod.spec["nodeSelector"]) else "/affinity/nodeAffinity")
        if admitted:
            for c, rt, runtime in _gpu_runtimes(a):
                message = _pin_message(kb, accept, rt, runtime, admitted, "the pod's node selection")
                if message:
                    yield Violation(message, ptr, c.name)
    # What the selectors of its DRA claims pin (without an inventory: with one, the drivers rules read the devices).
    pins = _dra_driver_pins(a)
    for c, rt, runtime in _gpu_runtimes(a) if pins else ():
        from compatcheck.core.dra import container_claim_requests  # pins: the pod names claims

        used = {id(r) for r in container_claim_requests(c.data, a.dra)}
        for r, classes in pins:
            if id(r) not in used:
                continue
            message = _pin_message(kb, accept, rt, runtime, classes, f"the pod's claim {r.claim!r} ({r.what})")
            if message:
                yield Violation(message, r.pointer, c.name)


def _dra_driver_pins(a: PodAnalysis) -> list[tuple[PodRequest, list[NodeClass]]]:
    """The DRA requests whose selectors pin a driver, with the driver kinds they admit."""
    if a.dra_inventory_known:
        return []
    out: dict[int, tuple[PodRequest, list[NodeClass]]] = {}
    for cls, r in a.dra_pins:
        if cls.facts.driver_cuda is not None:
            out.setdefault(id(r), (r, []))[1].append(cls)
    return list(out.values())


def _pin_message(kb: KnowledgeBase, accept: frozenset[Verdict], rt: CudaRuntime, runtime: Version,
                 admitted: list[NodeClass], who: str) -> str | None:
    verdicts = [kb.verdict(runtime, driver_cuda=cls.facts.driver_cuda) for cls in admitted]
    if any(v.verdict in accept or v.verdict == "unknown" for v in verdicts):
        return None
    cudas = sorted({str(v.driver_cuda.major_minor()) for v in verdicts if v.driver_cuda}, key=lambda s:
                   tuple(int(x) for x in s.split(".")))
    shown = ", ".join(cudas[:6]) + (" ..." if len(cudas) > 6 else "")
    need, lowest = _needed_driver(kb, runtime)
    floor = kb.mvc_floor(runtime.major) if "minor-version-compatibility" in accept else None
    mvc = (f" (or >= {floor} with minor-version compatibility)"
           if floor is not None and str(floor) != str(lowest) else "")
    return (f"{who} admits only drivers for CUDA {shown}, too old for image CUDA {runtime.major_minor()} "
            f"({rt.origin}); it needs {need}{mvc}")


register(PodCheck(
    name="cuda-affinity-pin",
    description="Reads the driver the pod's own nodeSelector/affinity pins (platform cuda-*-version labels, "
                "GFD driver and runtime labels) and compares it with each GPU container's CUDA runtime.",
    params_schema={
        "type": "object", "additionalProperties": False,
        "properties": {"accept": {"type": "array", "items": {"enum": ["compatible", "minor-version-compatibility"]},
                                  "description": "Verdicts that satisfy the check (default compatible; "
                                                 "minor-version-compatibility is added where the config's "
                                                 "driverPolicy declares it)."}},
    },
    prepare=_prepare_affinity_pin,
    evaluate=_affinity_pin,
))


@dataclass(frozen=True)
class RuntimeKnownParams:
    annotation: str  # the annotation prefix the message suggests


def _prepare_runtime_known(raw: RawParams) -> RuntimeKnownParams:
    return RuntimeKnownParams(str(raw.get("annotation", "compatcheck.io/cuda-runtime")))


def _runtime_known(a: PodAnalysis, ctx: EvalContext, params: RuntimeKnownParams) -> Iterator[Outcome]:
    for c, _req in a.gpu_containers:
        rt = a.runtime(c)
        if rt.version is not None or rt.absent:
            continue
        if rt.origin.startswith(("annotation", "env")):
            # The manifest says which CUDA, unreadably: bad input, not an unknown runtime.
            yield InputProblem(f"{rt.origin}: {rt.problem}", rt.pointer)
            continue
        how = (f'declare it with the annotation {params.annotation}.{c.name}: "12.4" (or without .{c.name} for '
               "every container), set env CUDA_VERSION, or add an image pattern in your rules data directory")
        reason = f" ({rt.problem})" if rt.problem else ""
        yield Violation(f"CUDA runtime of container {c.name!r} is unknown{reason}; {how}", rt.pointer, c.name)


register(PodCheck(
    name="cuda-runtime-known",
    description="Reports GPU containers whose CUDA runtime cannot be determined from annotations, env or image.",
    params_schema={"type": "object", "additionalProperties": False,
                   "properties": {"annotation": {"type": "string", "description": "Annotation prefix to suggest."}}},
    prepare=_prepare_runtime_known,
    evaluate=_runtime_known,
))
