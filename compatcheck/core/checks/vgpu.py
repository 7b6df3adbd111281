"""Check types for GPU virtualisation (GPU-Manager ``tencent.com/vcuda-*``, HAMi): ``vgpu-cuda-ceiling``
(GPU-Manager's own CUDA limit), ``vgpu-baseline`` and ``vgpu-major`` (the image's CUDA against the nodes' vGPU
baseline and driver), and ``env-required`` (Paddle's allocator under GPU-Manager)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from compatcheck.core.checks import register
from compatcheck.core.checks.base import (
    HAMI_RESOURCES,
    CudaRuntime,
    EvalContext,
    PodAnalysis,
    PodCheck,
    RawParams,
    Violation,
    add_env_ops,
    command_line,
    env_value,
    quantity_int,
)
from compatcheck.core.checks.resources import VCUDA_CORE
from compatcheck.core.jsonutil import JsonObject, text
from compatcheck.core.model import Applicability, Fix
from compatcheck.core.versions import Version, parse_version
from compatcheck.core.workloads import ContainerTarget

VgpuKind = Literal["gpu-manager", "hami"]
_LABEL: dict[VgpuKind, str] = {"gpu-manager": "GPU-Manager", "hami": "HAMi"}


def vgpu_kind(req: JsonObject) -> VgpuKind | None:
    """The vGPU layer a container's GPU requests use; whole-card GPU-Manager requests (multiples of 100) are not
    vGPU."""
    if any(k.startswith("tencent.com/vcuda") for k in req):
        core = quantity_int(req.get(VCUDA_CORE, 0)) or 0
        if core > 0 and core % 100 == 0:
            return None
        return "gpu-manager"
    if any(k in HAMI_RESOURCES for k in req):
        return "hami"
    return None


def _vgpu_runtimes(a: PodAnalysis) -> Iterator[tuple[ContainerTarget, VgpuKind, CudaRuntime, Version]]:
    """(container, vGPU kind, runtime, its CUDA major.minor) for each vGPU container whose CUDA is known."""
    for c, req in a.gpu_containers:
        kind = vgpu_kind(req)
        if kind is None:
            continue
        rt = a.runtime(c)
        if rt.version is not None:
            yield c, kind, rt, rt.version.major_minor()


_CUDA_MM = {"type": "string", "pattern": r"^\d+\.\d+$"}


@dataclass(frozen=True)
class CeilingParams:
    ceiling: Version  # the first CUDA that GPU-Manager cannot virtualise


def _prepare_ceiling(raw: RawParams) -> CeilingParams:
    return CeilingParams(parse_version(raw.get("ceiling", "12.4"), what="ceiling"))


def _cuda_ceiling(a: PodAnalysis, ctx: EvalContext, params: CeilingParams) -> Iterator[Violation]:
    ceiling = params.ceiling
    for c, kind, rt, runtime in _vgpu_runtimes(a):
        if kind == "gpu-manager" and runtime >= ceiling:
            yield Violation(f"GPU-Manager vGPU does not support CUDA {runtime} ({rt.origin}): its vcuda "
                            f"interposer works only below CUDA {ceiling}; use whole cards (vcuda-core multiples "
                            "of 100) or an older CUDA image", rt.pointer, c.name)


register(PodCheck(
    name="vgpu-cuda-ceiling",
    description="Reports GPU-Manager vGPU containers whose CUDA runtime is at or above the CUDA that GPU-Manager's "
                "vcuda interposer cannot virtualise.",
    params_schema={"type": "object", "additionalProperties": False, "properties": {
        "ceiling": {**_CUDA_MM, "default": "12.4", "description": "First CUDA that GPU-Manager cannot virtualise."}}},
    prepare=_prepare_ceiling,
    evaluate=_cuda_ceiling,
))


@dataclass(frozen=True)
class BaselineParams:
    default_baseline: Version | None  # assumed for nodes without the baseline label (no --nodes)


def _prepare_baseline(raw: RawParams) -> BaselineParams:
    text = raw.get("defaultBaselineCuda")
    return BaselineParams(parse_version(text, what="defaultBaselineCuda") if text else None)


def _baselines(a: PodAnalysis, params: BaselineParams) -> list[Version]:
    """The vGPU baseline CUDA of each node in scope that declares one; else the default, if any."""
    found = [f.vgpu_baseline for f in a.scope if f.vgpu_baseline is not None]
    if not found and params.default_baseline is not None:
        return [params.default_baseline]
    return found


_BASELINE_SCHEMA: JsonObject = {"type": "object", "additionalProperties": False, "properties": {
    "defaultBaselineCuda": {**_CUDA_MM, "description": "Baseline assumed for nodes without the label (no --nodes)."}}}


def _baseline_too_old(a: PodAnalysis, ctx: EvalContext, params: BaselineParams) -> Iterator[Violation]:
    for c, kind, rt, runtime in _vgpu_runtimes(a):
        bad = sorted({str(b.major_minor()) for b in _baselines(a, params) if runtime > b.major_minor()})
        if bad:
            yield Violation(f"image CUDA {runtime} ({rt.origin}) is newer than the {_LABEL[kind]} vGPU baseline CUDA "
                            f"{', '.join(bad)} of the nodes it can land on; the vGPU layer cannot intercept it",
                            rt.pointer, c.name)


def _major_mismatch(a: PodAnalysis, ctx: EvalContext, params: BaselineParams) -> Iterator[Violation]:
    for c, kind, rt, runtime in _vgpu_runtimes(a):
        majors = {b.major for b in _baselines(a, params)} | {f.driver_cuda.major for f in a.scope if f.driver_cuda}
        # a floating tag's CUDA is a lower bound: only a major above every node's is certain
        wrong = sorted(m for m in majors if m < runtime.major or (m > runtime.major and not rt.at_least))
        if wrong:
            yield Violation(f"image CUDA {runtime} ({rt.origin}) is major {runtime.major} but the {_LABEL[kind]} "
                            f"nodes' driver/vGPU baseline is CUDA major {', '.join(map(str, wrong))}; vGPU "
                            "needs the same major", rt.pointer, c.name)


register(PodCheck(
    name="vgpu-baseline",
    description="Compares the CUDA runtime of GPU-Manager/HAMi vGPU containers with the vGPU baseline CUDA of the "
                "nodes they can land on (label compatcheck.io/vgpu-baseline-cuda): newer than it cannot run.",
    params_schema=_BASELINE_SCHEMA,
    prepare=_prepare_baseline,
    evaluate=_baseline_too_old,
))
register(PodCheck(
    name="vgpu-major",
    description="Compares the CUDA major of GPU-Manager/HAMi vGPU containers with the major of the nodes' vGPU "
                "baseline and driver CUDA: vGPU needs the same major.",
    params_schema=_BASELINE_SCHEMA,
    prepare=_prepare_baseline,
    evaluate=_major_mismatch,
))


@dataclass(frozen=True)
class EnvRequiredParams:
    when: VgpuKind
    image: re.Pattern[str]
    command: re.Pattern[str] | None
    env: str
    value: str
    what: str
    why: str
    forbidden: frozenset[str] | None = None  # only these values are wrong (unset or another value passes)


def _prepare_env_required(raw: RawParams) -> EnvRequiredParams:
    return EnvRequiredParams(raw["when"], re.compile(raw["imagePattern"]),
                             re.compile(raw["commandPattern"]) if raw.get("commandPattern") else None,
                             raw["env"], raw["value"], raw["what"], raw["why"],
                             frozenset(raw["forbidden"]) if "forbidden" in raw else None)


def _env_required(a: PodAnalysis, ctx: EvalContext, params: EnvRequiredParams) -> Iterator[Violation]:
    name, value = params.env, params.value
    for c, req in a.gpu_containers:
        if vgpu_kind(req) != params.when:
            continue
        image = text(c.data.get("image")) or ""
        if not params.image.search(image) and not (params.command and
                                                   params.command.search(" ".join(command_line(c)))):
            continue
        found = env_value(c, name)
        have = found[1].strip() if found is not None and isinstance(found[1], str) else None
        if have == value or (params.forbidden is not None and have not in params.forbidden):
            continue
        current = "not set" if found is None else f"{found[1]!r}"
        ptr = f"{c.pointer}/env/{found[0]}/value" if found else (f"{c.pointer}/env" if "env" in c.data
                                                                 else c.pointer)
        need = f"needs {name}={value}" if params.forbidden is None else f"must not run with {name}={have}"
        yield Violation(f"{params.what} on {_LABEL[params.when]} vGPU {need} ({name} is {current}); "
                        f"{params.why}", ptr, c.name,
                        Fix(f"set {name}={value}", Applicability.SAFE, add_env_ops(c, name, value)))


register(PodCheck(
    name="env-required",
    description="Requires an env var value for matching containers in a given vGPU mode (e.g. Paddle's "
                "allocator under GPU-Manager); offers a safe fix that sets it.",
    fix_applicability=Applicability.SAFE,
    params_schema={"type": "object", "additionalProperties": False,
                   "required": ["when", "imagePattern", "env", "value", "what", "why"], "properties": {
                       "when": {"enum": ["gpu-manager", "hami"], "description": "The vGPU layer it applies under."},
                       "imagePattern": {"type": "string", "description": "regex on the image that selects containers."},
                       "commandPattern": {"type": "string",
                                          "description": "regex on command + args that also selects containers."},
                       "env": {"type": "string", "description": "The env var required."},
                       "value": {"type": "string", "description": "Its required value (the fix sets it)."},
                       "forbidden": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                                     "description": "Only these values are wrong: an unset variable or another "
                                                    "value passes (the fix still sets 'value')."},
                       "what": {"type": "string", "description": "What the containers run, in the message."},
                       "why": {"type": "string", "description": "Why the value is needed, in the message."}}},
    prepare=_prepare_env_required,
    evaluate=_env_required,
))
