"""Check types about the GPU hardware a pod can land on: ``gpu-arch-support`` (CUDA too old for the GPU,
or no longer supporting it), ``dtype-capability``, ``framework-capability``, ``mps-requirements`` and
``mig-profile``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from compatcheck.core.checks import register
from compatcheck.core.checks.base import (
    CheckType,
    Params,
    PodAnalysis,
    Violation,
    command_line,
    env_value,
    flag_values,
)
from compatcheck.core.cluster import NodeFacts
from compatcheck.core.model import Applicability, Fix, PatchOp
from compatcheck.core.versions import Version, parse_compute_capability, parse_version, try_parse_version


def _gpus(facts: list[NodeFacts]) -> str:
    names = []
    for f in facts:
        d = f.describe_gpu()
        if d not in names:
            names.append(d)
    return ", ".join(names[:4]) + (" ..." if len(names) > 4 else "")


def _arch_support(a: PodAnalysis, params: Params) -> Iterator[Violation]:
    mode = params["mode"]
    kb = a.ctx.kb
    for c, _req in a.gpu_containers:
        rt = a.runtime(c)
        if rt.version is None:
            continue
        cuda = rt.version.major_minor()
        bad: list[NodeFacts] = []
        arch_names = set()
        for f in a.scope:
            if f.compute_capability is None:
                continue
            arch = kb.architecture(f.compute_capability)
            if arch is None:
                continue
            if mode == "too-new" and arch.first_cuda is not None and cuda < arch.first_cuda.major_minor():
                bad.append(f)
                arch_names.add(f"{arch.name} needs CUDA >= {arch.first_cuda}")
            elif mode == "dropped" and arch.removed_in is not None and cuda >= arch.removed_in.major_minor():
                bad.append(f)
                arch_names.add(f"{arch.name} support was removed in CUDA {arch.removed_in}")
        if not bad:
            continue
        why = "; ".join(sorted(arch_names))
        if mode == "too-new":
            msg = (f"image CUDA {cuda} ({rt.origin}) predates the GPU {_gpus(bad)}: {why}; code built with it "
                   "carries no kernels for this GPU")
        else:
            msg = f"image CUDA {cuda} ({rt.origin}) no longer supports the GPU {_gpus(bad)}: {why}"
        yield Violation(msg, rt.pointer, c.name)


register(CheckType(
    name="gpu-arch-support",
    description="Compares each GPU container's CUDA with the first and last CUDA releases that support the "
                "compute capability of the GPUs it can land on.",
    target="pod",
    params_schema={"type": "object", "additionalProperties": False, "required": ["mode"],
                   "properties": {"mode": {"enum": ["too-new", "dropped"],
                                           "description": "too-new: GPU newer than the image's CUDA; "
                                                          "dropped: CUDA no longer supports the GPU."}}},
    evaluate=_arch_support,
))

_SOURCE_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["values"],
    "properties": {
        "flags": {"type": "array", "items": {"type": "string", "pattern": "^-"}, "minItems": 1},
        "env": {"type": "string", "minLength": 1},
        "values": {"type": "object", "additionalProperties": {"type": "string"},
                   "description": "Flag or env value (lower-case) -> feature in the features table."},
        "fix": {"type": "object", "additionalProperties": {"type": "string"},
                "description": "Feature -> replacement value offered as an unsafe fix."},
    },
    "oneOf": [{"required": ["flags"]}, {"required": ["env"]}],
}


@dataclass(frozen=True)
class _DtypeSource:
    flags: tuple[str, ...] | None
    env: str | None
    values: dict[str, str]  # lower-cased flag or env value -> feature
    fixes: dict[str, str]


def _prepare_dtype(params: Params) -> list[_DtypeSource]:
    return [_DtypeSource(tuple(src["flags"]) if "flags" in src else None, src.get("env"),
                         {k.lower(): v for k, v in src["values"].items()}, dict(src.get("fix", {})))
            for src in params["sources"]]


def _requested_features(c: Any, sources: list[_DtypeSource]) -> Iterator[tuple[str, str, str, str | None]]:
    """(feature, pointer, what, replacement) for each dtype/quantization the container asks for."""
    argv = command_line(c)
    keys = [k for k in ("command", "args") if isinstance(c.data.get(k), list)]
    offsets: list[tuple[str, int]] = []
    for k in keys:
        offsets.extend((k, i) for i in range(len(c.data[k])))
    for src in sources:
        mapping, fixes = src.values, src.fixes
        if src.flags is not None:
            for idx, flag, value in flag_values(argv, src.flags):
                feature = mapping.get(value.lower())
                if feature and idx < len(offsets):
                    key, i = offsets[idx]
                    yield feature, f"{c.pointer}/{key}/{i}", f"{flag} {value}", fixes.get(feature)
        elif src.env is not None:
            found = env_value(c, src.env)
            if found is not None and isinstance(found[1], str):
                feature = mapping.get(found[1].strip().lower())
                if feature:
                    yield feature, f"{c.pointer}/env/{found[0]}/value", f"{src.env}={found[1]}", \
                        fixes.get(feature)


def _dtype(a: PodAnalysis, sources: list[_DtypeSource]) -> Iterator[Violation]:
    scope = [f for f in a.scope if f.compute_capability is not None]
    if not scope:
        return
    kb = a.ctx.kb
    for c, _req in a.gpu_containers:
        for feature, pointer, what, replacement in _requested_features(c, sources):
            need = kb.feature_min_cc(feature)
            if need is None:
                continue
            bad = [f for f in scope if f.compute_capability is not None and f.compute_capability < need]
            if not bad:
                continue
            fix = None
            if replacement is not None:
                fix = _replace_value_fix(c, pointer, what, replacement)
            yield Violation(f"{what} needs compute capability >= {need} ({feature}); eligible GPUs: {_gpus(bad)}",
                            pointer, c.name, fix)


def _replace_value_fix(c: Any, pointer: str, what: str, replacement: str) -> Fix | None:
    key, _, idx = pointer[len(c.pointer) + 1:].partition("/")
    if key == "env":
        return Fix(f"set {what.split('=')[0]}={replacement}", Applicability.UNSAFE,
                   (PatchOp("replace", pointer, replacement),))
    try:
        items = c.data[key]
        i = int(idx)
        old = str(items[i])
    except (KeyError, ValueError, IndexError, TypeError):
        return None
    flag = what.split()[0]
    if old.startswith(flag + "="):
        return Fix(f"use {flag}={replacement}", Applicability.UNSAFE,
                   (PatchOp("replace", pointer, f"{flag}={replacement}"),))
    if old == flag and i + 1 < len(items):
        return Fix(f"use {flag} {replacement}", Applicability.UNSAFE,
                   (PatchOp("replace", f"{c.pointer}/{key}/{i + 1}", replacement),))
    if flag in old:  # inside a shell string
        new = re.sub(re.escape(flag) + r"([= ])\S+", lambda m: f"{flag}{m.group(1)}{replacement}", old, count=1)
        return Fix(f"use {flag} {replacement}", Applicability.UNSAFE, (PatchOp("replace", pointer, new),))
    return None


register(CheckType(
    name="dtype-capability",
    description="Finds data types and quantization formats requested through serving flags or env vars and "
                "compares their minimum compute capability with the GPUs the pod can land on.",
    target="pod",
    fix_applicability=Applicability.UNSAFE,
    params_schema={"type": "object", "additionalProperties": False, "required": ["sources"],
                   "properties": {"sources": {"type": "array", "items": _SOURCE_SCHEMA, "minItems": 1}}},
    evaluate=_dtype,
    prepare=_prepare_dtype,
))


@dataclass(frozen=True)
class _Framework:
    name: str
    need: Version  # minimum compute capability
    image: re.Pattern[str] | None
    min_version: Version | None
    command: re.Pattern[str] | None
    env: str | None
    env_value: re.Pattern[str]


def _prepare_frameworks(params: Params) -> list[_Framework]:
    return [_Framework(
        fw["name"], parse_compute_capability(fw["minComputeCapability"]),
        re.compile(fw["image"]) if "image" in fw else None,
        parse_version(fw["minVersion"], what="minVersion") if "minVersion" in fw else None,
        re.compile(fw["command"]) if "command" in fw else None, fw.get("env"), re.compile(fw.get("envValue", ".*")),
    ) for fw in params["frameworks"]]


def _framework(a: PodAnalysis, frameworks: list[_Framework]) -> Iterator[Violation]:
    scope = [f for f in a.scope if f.compute_capability is not None]
    if not scope:
        return
    for c, _req in a.gpu_containers:
        image = c.data.get("image") if isinstance(c.data.get("image"), str) else ""
        argv = " ".join(command_line(c))
        for fw in frameworks:
            if not _framework_matches(c, fw, image or "", argv):
                continue
            bad = [f for f in scope if f.compute_capability is not None and f.compute_capability < fw.need]
            if bad:
                yield Violation(f"{fw.name} needs compute capability >= {fw.need}; eligible GPUs: {_gpus(bad)}",
                                f"{c.pointer}/image", c.name)


def _framework_matches(c: Any, fw: _Framework, image: str, argv: str) -> bool:
    if fw.image is not None:
        m = fw.image.search(image)
        if not m:
            return False
        if fw.min_version is not None:
            have = try_parse_version(m.groupdict().get("version"))
            if have is None or have < fw.min_version:
                return False
        return True
    if fw.command is not None:
        return fw.command.search(argv) is not None
    if fw.env is not None:
        found = env_value(c, fw.env)
        return found is not None and isinstance(found[1], str) and fw.env_value.fullmatch(found[1].strip()) is not None
    return False


register(CheckType(
    name="framework-capability",
    description="Recognises serving frameworks (by image, command or env) and compares their minimum compute "
                "capability with the GPUs the pod can land on.",
    target="pod",
    params_schema={"type": "object", "additionalProperties": False, "required": ["frameworks"], "properties": {
        "frameworks": {"type": "array", "minItems": 1, "items": {
            "type": "object", "additionalProperties": False, "required": ["name", "minComputeCapability", "source"],
            "properties": {
                "name": {"type": "string"},
                "image": {"type": "string", "description": "regex on the image; (?P<version>) for minVersion"},
                "minVersion": {"type": "string", "pattern": r"^\d+(\.\d+)*$"},
                "command": {"type": "string", "description": "regex on command + args"},
                "env": {"type": "string"}, "envValue": {"type": "string"},
                "minComputeCapability": {"type": "string", "pattern": r"^\d+\.\d+$"},
                "source": {"type": "string"},
            }, "oneOf": [{"required": ["image"]}, {"required": ["command"]}, {"required": ["env"]}]}}}},
    evaluate=_framework,
    prepare=_prepare_frameworks,
))

_PINNED_MEM = re.compile(r"^\s*\d+\s*=\s*\d+[KMGT]?\s*$", re.IGNORECASE)


def _mps(a: PodAnalysis, params: Params) -> Iterator[Violation]:
    for c in a.pod.containers:
        found = env_value(c, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")
        if found is not None:
            v = found[1]
            ok = False
            try:
                ok = 0 < float(str(v).strip()) <= 100
            except ValueError:
                ok = False
            if not ok:
                yield Violation(f"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={v!r} must be a percentage in (0, 100]",
                                f"{c.pointer}/env/{found[0]}/value", c.name)
        found = env_value(c, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT")
        if found is not None:
            v = found[1]
            parts = str(v).split(",") if isinstance(v, str) else [""]
            if not all(_PINNED_MEM.match(p) for p in parts):
                yield Violation(f"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT={v!r} must look like <device>=<size>[K|M|G|T], "
                                "e.g. 0=1G", f"{c.pointer}/env/{found[0]}/value", c.name)
    if not a.is_gpu_pod:
        return
    mps = [f for f in a.scope if f.sharing_strategy == "mps"]
    sel = a.pod.spec.get("nodeSelector")
    pinned_mps = isinstance(sel, dict) and sel.get("nvidia.com/gpu.sharing-strategy") == "mps"
    if not mps and not pinned_mps:
        return
    min_cc = parse_compute_capability(params.get("minComputeCapability", "7.0"))
    min_cuda = try_parse_version(params.get("minDriverCuda", "11.5"))
    old_gpu = [f for f in mps if f.compute_capability is not None and f.compute_capability < min_cc]
    if old_gpu:
        yield Violation(f"MPS sharing on {_gpus(old_gpu)}: MPS isolation (thread-percentage and memory limits) "
                        f"needs compute capability >= {min_cc} (Volta)", a.pod.pointer, None)
    old_drv = [f for f in mps if f.driver_cuda is not None and min_cuda is not None and f.driver_cuda < min_cuda]
    if old_drv:
        drivers = ", ".join(sorted({f.describe_driver() for f in old_drv}))
        yield Violation(f"MPS sharing through the device plugin needs a driver for CUDA >= {min_cuda}; nodes run "
                        f"{drivers}", a.pod.pointer, None)


register(CheckType(
    name="mps-requirements",
    description="Checks MPS env var formats, and that MPS-shared nodes have Volta+ GPUs and recent drivers.",
    target="pod",
    gpu_only=False,
    params_schema={"type": "object", "additionalProperties": False, "properties": {
        "minComputeCapability": {"type": "string", "default": "7.0"},
        "minDriverCuda": {"type": "string", "default": "11.5"}}},
    evaluate=_mps,
))

_MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-(?P<profile>.+)$")


def _mig(a: PodAnalysis, params: Params) -> Iterator[Violation]:
    kb = a.ctx.kb
    for c, req in a.gpu_containers:
        for name in req:
            m = _MIG_RESOURCE.match(name)
            if not m:
                continue
            profile = m.group("profile")
            ptr = f"{c.pointer}/resources/limits/{name.replace('/', '~1')}"
            if a.ctx.cluster is not None:
                offered = [cls for cls in a.placement_classes if cls.facts.resource(name) > 0]
                if not offered:
                    kinds = sorted({n for cls in a.placement_classes for n, _ in cls.facts.gpu_resources
                                    if n.startswith("nvidia.com/mig-")})
                    have = f"; nodes offer {', '.join(kinds)}" if kinds else "; no node offers MIG devices"
                    yield Violation(f"MIG profile {profile} is offered by no node the pod can land on{have}", ptr,
                                    c.name)
                continue
            products = [f.product for f in a.scope if f.product]
            known = [kb.mig_profiles_for(p) for p in products]
            if products and all(k is not None for k in known):
                if not any(profile in k for k in known if k is not None):
                    yield Violation(f"MIG profile {profile} is not offered by {', '.join(products)}", ptr, c.name)
            elif profile not in kb.all_mig_profiles():
                yield Violation(f"MIG profile {profile} is offered by no GPU in the MIG table "
                                f"(known: {', '.join(sorted(kb.all_mig_profiles())[:8])} ...)", ptr, c.name)


register(CheckType(
    name="mig-profile",
    description="Checks that each nvidia.com/mig-<profile> request names a profile the GPUs in scope offer.",
    target="pod",
    params_schema={"type": "object", "additionalProperties": False, "properties": {}},
    evaluate=_mig,
))
