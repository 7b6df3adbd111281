"""Check types for GPU virtualisation (GPU-Manager ``tencent.com/vcuda-*``, HAMi): ``vgpu-compat`` and
``env-required`` (Paddle's allocator under GPU-Manager)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from compatcheck.core.checks import register
from compatcheck.core.checks.base import (
    CheckType,
    Params,
    PodAnalysis,
    Violation,
    add_env_ops,
    command_line,
    env_value,
    quantity_int,
)
from compatcheck.core.checks.resources import HAMI_RESOURCES, VCUDA_CORE
from compatcheck.core.cluster import NodeFacts
from compatcheck.core.model import Applicability, Fix
from compatcheck.core.versions import Version, cached_version, parse_cuda_version


def vgpu_kind(req: dict[str, Any]) -> str | None:
    """'gpu-manager' | 'hami' | None; whole-card GPU-Manager requests (multiples of 100) are not vGPU."""
    if any(k.startswith("tencent.com/vcuda") for k in req):
        core = quantity_int(req.get(VCUDA_CORE, 0)) or 0
        if core > 0 and core % 100 == 0:
            return None
        return "gpu-manager"
    if any(k in HAMI_RESOURCES for k in req):
        return "hami"
    return None


def _vgpu(a: PodAnalysis, params: Params) -> Iterator[Violation]:
    mode = params["mode"]
    default_baseline = cached_version(params["defaultBaselineCuda"]) if params.get("defaultBaselineCuda") else None
    ceiling = cached_version(params.get("ceiling", "12.4")) or parse_cuda_version("12.4")
    for c, req in a.gpu_containers:
        kind = vgpu_kind(req)
        if kind is None:
            continue
        rt = a.runtime(c)
        if rt.version is None:
            continue
        runtime = rt.version.major_minor()
        label = "GPU-Manager" if kind == "gpu-manager" else "HAMi"
        if mode == "cuda-unsupported":
            if kind == "gpu-manager" and runtime >= ceiling:
                yield Violation(f"GPU-Manager vGPU does not support CUDA {runtime} ({rt.origin}): its vcuda "
                                f"interposer works only below CUDA {ceiling}; use whole cards (vcuda-core multiples "
                                "of 100) or an older CUDA image", rt.pointer, c.name)
            continue
        baselines: list[tuple[Version, NodeFacts | None]] = [
            (f.vgpu_baseline, f) for f in a.scope if f.vgpu_baseline is not None]
        if not baselines and default_baseline is not None:
            baselines = [(default_baseline, None)]
        if mode == "baseline-too-old":
            bad = sorted({str(b.major_minor()) for b, _f in baselines if runtime > b.major_minor()})
            if bad:
                yield Violation(f"image CUDA {runtime} ({rt.origin}) is newer than the {label} vGPU baseline CUDA "
                                f"{', '.join(bad)} of the nodes it can land on; the vGPU layer cannot intercept it",
                                rt.pointer, c.name)
        elif mode == "major-mismatch":
            majors = {b.major for b, _ in baselines} | {f.driver_cuda.major for f in a.scope if f.driver_cuda}
            wrong = sorted(m for m in majors if m != runtime.major)
            if wrong:
                yield Violation(f"image CUDA {runtime} ({rt.origin}) is major {runtime.major} but the {label} "
                                f"nodes' driver/vGPU baseline is CUDA major {', '.join(map(str, wrong))}; vGPU "
                                "needs the same major", rt.pointer, c.name)


register(CheckType(
    name="vgpu-compat",
    description="Compares the CUDA runtime of GPU-Manager/HAMi vGPU containers with the nodes' vGPU baseline "
                "(label compatcheck.io/vgpu-baseline-cuda) and driver, and with GPU-Manager's CUDA ceiling.",
    target="pod",
    params_schema={"type": "object", "additionalProperties": False, "required": ["mode"], "properties": {
        "mode": {"enum": ["baseline-too-old", "major-mismatch", "cuda-unsupported"]},
        "ceiling": {"type": "string", "pattern": r"^\d+\.\d+$", "default": "12.4",
                    "description": "cuda-unsupported: first CUDA that GPU-Manager cannot virtualise."},
        "defaultBaselineCuda": {"type": "string", "pattern": r"^\d+\.\d+$",
                                "description": "Baseline assumed for nodes without the label (no --nodes)."}}},
    evaluate=_vgpu,
))


def _env_required(a: PodAnalysis, params: Params) -> Iterator[Violation]:
    image_re = re.compile(params["imagePattern"])
    cmd_re = re.compile(params["commandPattern"]) if params.get("commandPattern") else None
    name, value = params["env"], params["value"]
    for c, req in a.gpu_containers:
        if vgpu_kind(req) != params["when"]:
            continue
        image = c.data.get("image") if isinstance(c.data.get("image"), str) else ""
        if not image_re.search(image) and not (cmd_re and cmd_re.search(" ".join(command_line(c)))):
            continue
        found = env_value(c, name)
        if found is not None and isinstance(found[1], str) and found[1].strip() == value:
            continue
        current = "not set" if found is None else f"{found[1]!r}"
        ptr = f"{c.pointer}/env/{found[0]}/value" if found else (f"{c.pointer}/env" if "env" in c.data
                                                                 else c.pointer)
        yield Violation(f"{params['what']} on GPU-Manager vGPU needs {name}={value} ({name} is {current}); "
                        f"{params['why']}", ptr, c.name,
                        Fix(f"set {name}={value}", Applicability.SAFE, add_env_ops(c, name, value)))


register(CheckType(
    name="env-required",
    description="Requires an env var value for matching containers in a given vGPU mode (e.g. Paddle's "
                "allocator under GPU-Manager); offers a safe fix that sets it.",
    target="pod",
    fix_applicability=Applicability.SAFE,
    params_schema={"type": "object", "additionalProperties": False,
                   "required": ["when", "imagePattern", "env", "value", "what", "why"], "properties": {
                       "when": {"enum": ["gpu-manager", "hami"]},
                       "imagePattern": {"type": "string"}, "commandPattern": {"type": "string"},
                       "env": {"type": "string"}, "value": {"type": "string"},
                       "what": {"type": "string"}, "why": {"type": "string"}}},
    evaluate=_env_required,
))
