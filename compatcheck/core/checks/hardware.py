"""Check types about the GPU hardware a pod can land on: ``gpu-arch-too-new`` (CUDA too old for the GPU),
``gpu-arch-dropped`` (CUDA no longer supporting it), ``dtype-capability``, ``framework-capability``,
``mps-requirements`` and ``mig-profile``."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from compatcheck.core.checks import register
from compatcheck.core.checks.base import (
    NO_PARAMS_SCHEMA,
    CudaRuntime,
    EvalContext,
    NoParams,
    PodAnalysis,
    PodCheck,
    RawParams,
    Violation,
    command_line,
    env_value,
    flag_values,
    no_params,
)
from compatcheck.core.cluster import NodeFacts
from compatcheck.core.jsonutil import JsonObject
from compatcheck.core.knowledge import Architecture, FrameworkFloor, VersionRange
from compatcheck.core.model import Applicability, Fix, PatchOp
from compatcheck.core.versions import Version, parse_compute_capability, parse_version, try_parse_version
from compatcheck.core.workloads import ContainerTarget


def _gpus(facts: list[NodeFacts]) -> str:
    names = []
    for f in facts:
        d = f.describe_gpu()
        if d not in names:
            names.append(d)
    return ", ".join(names[:4]) + (" ..." if len(names) > 4 else "")


def _arch_mismatches(a: PodAnalysis, ctx: EvalContext, why: Callable[[Architecture, Version], str | None],
                     *, holds_for_newer: bool) -> Iterator[tuple[ContainerTarget, CudaRuntime, Version, list[NodeFacts],
                                                                  str]]:
    """(container, runtime, its CUDA major.minor, GPUs in scope, reasons) for each GPU container whose CUDA
    ``why(architecture, cuda)`` objects to on some GPU in scope; ``why`` returns the reason, or None."""
    kb = ctx.kb
    for c, _req in a.gpu_containers:
        rt = a.runtime(c)
        if rt.version is None or (rt.at_least and not holds_for_newer):  # a floating tag: a lower bound only
            continue
        cuda = rt.version.major_minor()
        bad: list[NodeFacts] = []
        reasons = set()
        for f in a.scope:
            if f.compute_capability is None:
                continue
            arch = kb.architecture(f.compute_capability)
            if arch is None:
                continue
            reason = why(arch, cuda)
            if reason is not None:
                bad.append(f)
                reasons.add(reason)
        if bad:
            yield c, rt, cuda, bad, "; ".join(sorted(reasons))


def _predates(arch: Architecture, cuda: Version) -> str | None:
    if arch.first_cuda is not None and cuda < arch.first_cuda.major_minor():
        return f"{arch.name} needs CUDA >= {arch.first_cuda}"
    return None


def _dropped(arch: Architecture, cuda: Version) -> str | None:
    if arch.removed_in is not None and cuda >= arch.removed_in.major_minor():
        return f"{arch.name} support was removed in CUDA {arch.removed_in}"
    return None


def _arch_too_new(a: PodAnalysis, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    for c, rt, cuda, bad, why in _arch_mismatches(a, ctx, _predates, holds_for_newer=False):
        yield Violation(f"image CUDA {cuda} ({rt.origin}) predates the GPU {_gpus(bad)}: {why}; code built with it "
                        "carries no kernels for this GPU", rt.pointer, c.name)


def _arch_dropped(a: PodAnalysis, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    for c, rt, cuda, bad, why in _arch_mismatches(a, ctx, _dropped, holds_for_newer=True):
        yield Violation(f"image CUDA {cuda} ({rt.origin}) no longer supports the GPU {_gpus(bad)}: {why}",
                        rt.pointer, c.name)


register(PodCheck(
    name="gpu-arch-too-new",
    description="Compares each GPU container's CUDA with the first CUDA release that supports the compute "
                "capability of the GPUs it can land on (GPU newer than the image's CUDA).",
    params_schema=NO_PARAMS_SCHEMA,
    prepare=no_params,
    evaluate=_arch_too_new,
))
register(PodCheck(
    name="gpu-arch-dropped",
    description="Compares each GPU container's CUDA with the CUDA release that removed support for the compute "
                "capability of the GPUs it can land on.",
    params_schema=NO_PARAMS_SCHEMA,
    prepare=no_params,
    evaluate=_arch_dropped,
))

def _arch_in_image(a: PodAnalysis, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    """The GPU's compute capability against the SASS and PTX of the image's binaries (per image profile)."""
    kb = ctx.kb
    for c, _req in a.gpu_containers:
        facts = a.image_facts(c)
        if facts is None or not facts.binaries:
            continue  # unknown architectures: never a guess
        bad: list[NodeFacts] = []
        lacking: list[str] = []
        for f in a.scope:
            cc = f.compute_capability
            if cc is None:
                continue
            missing = facts.missing_arch(cc)
            for b in facts.ptx_only(cc):
                # PTX runs after a JIT by the driver, which must know the toolkit that produced it.
                dc = f.driver_cuda or (kb.driver_cuda(f.driver)[0] if f.driver is not None else None)
                if b.toolkit is not None and dc is not None and dc.major_minor() < b.toolkit.major_minor():
                    missing.append(b)
            if missing:
                bad.append(f)
                lacking.extend(b.describe() for b in missing if b.describe() not in lacking)
        if bad:
            assumed = f" ({facts.assumed})" if facts.assumed else ""
            yield Violation(f"{facts.reference}{assumed} has no kernels for the GPUs it can land on, {_gpus(bad)}: "
                            f"{'; '.join(lacking)} (no kernel image is available for execution on the device)",
                            f"{c.pointer}/image", c.name)


register(PodCheck(
    name="arch-in-image",
    description="Compares the compute capability of the GPUs a pod can land on with the GPU architectures the "
                "image's binaries carry (machine code of the same major and an equal or lower minor, or PTX a new "
                "enough driver can JIT), per the image profiles and PyTorch wheel tables.",
    params_schema=NO_PARAMS_SCHEMA,
    prepare=no_params,
    evaluate=_arch_in_image,
))


_SOURCE_SCHEMA: JsonObject = {
    "type": "object", "additionalProperties": False, "required": ["values"],
    "properties": {
        "flags": {"type": "array", "items": {"type": "string", "pattern": "^-"}, "minItems": 1,
                  "description": "Command-line flags whose value names the dtype (--flag=v or --flag v)."},
        "env": {"type": "string", "minLength": 1, "description": "Env var whose value names the dtype."},
        "values": {"type": "object", "additionalProperties": {"type": "string"},
                   "description": "Flag or env value (lower-case) -> feature in the features table (the hardware "
                                  "floor, used when no framework floor applies)."},
        "frameworkFeature": {"type": "string", "minLength": 1,
                             "description": "Look the value up as '<this>:<value>' in the framework-features table "
                                            "for the framework and version of the container's image first (e.g. "
                                            "quantization: vLLM's fp8 floor changed over releases)."},
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
    framework_feature: str | None  # the framework-features key prefix ("quantization" -> "quantization:fp8")


@dataclass(frozen=True)
class DtypeParams:
    sources: tuple[_DtypeSource, ...]
    # framework id -> a regex on the container's command line that runs it, for images the profiles do not know
    # (vllm installed with pip into a PyTorch image): its floors then hold as for an unknown version.
    command_frameworks: tuple[tuple[str, re.Pattern[str]], ...]
    # False: the floors (below them the framework fails); True: the fall-backs (between a floor and the compute
    # capability its full kernel needs, the framework runs a slower kernel instead of failing).
    fallbacks: bool = False


def _prepare_dtype(raw: RawParams) -> DtypeParams:
    return DtypeParams(tuple(_DtypeSource(tuple(src["flags"]) if "flags" in src else None, src.get("env"),
                                          {k.lower(): v for k, v in src["values"].items()}, dict(src.get("fix", {})),
                                          src.get("frameworkFeature"))
                             for src in raw["sources"]),
                       tuple((fw, re.compile(rx)) for fw, rx in raw.get("commandFrameworks", {}).items()))


def _prepare_fallback(raw: RawParams) -> DtypeParams:
    return replace(_prepare_dtype(raw), fallbacks=True)


def _framework_of(a: PodAnalysis, c: ContainerTarget, params: DtypeParams) -> tuple[str, Version | None] | None:
    """The framework a container runs and its version: the image profile's, else the command line's (version
    unknown), else None."""
    facts = a.image_facts(c)
    if facts is not None and facts.framework:
        return facts.framework, facts.framework_version
    if params.command_frameworks:
        argv = " ".join(command_line(c))
        for fw, rx in params.command_frameworks:
            if rx.search(argv):
                return fw, None
    return None


@dataclass(frozen=True)
class _Requested:
    feature: str  # the hardware feature (features table)
    pointer: str
    what: str  # the flag or env as written, for messages
    replacement: str | None  # offered by the unsafe fix
    framework_key: str | None  # "<frameworkFeature>:<value>" (framework-features table)


def _requested_features(c: ContainerTarget, sources: tuple[_DtypeSource, ...]) -> Iterator[_Requested]:
    """Each dtype/quantization the container asks for."""
    argv = command_line(c)
    keys = [k for k in ("command", "args") if isinstance(c.data.get(k), list)]
    offsets: list[tuple[str, int]] = []
    for k in keys:
        offsets.extend((k, i) for i in range(len(c.data[k])))
    for src in sources:
        mapping, fixes = src.values, src.fixes
        if src.flags is not None:
            for idx, flag, value in flag_values(argv, src.flags):
                # A value with no hardware feature still counts when a framework may have a floor for it
                # (--quantization awq): the framework-features table decides.
                feature = mapping.get(value.lower(), "" if src.framework_feature else None)
                if feature is not None and idx < len(offsets):
                    key, i = offsets[idx]
                    yield _Requested(feature, c.pointer_at(key, i), f"{flag} {value}", fixes.get(feature),
                                     f"{src.framework_feature}:{value.lower()}" if src.framework_feature else None)
        elif src.env is not None:
            found = env_value(c, src.env)
            if found is not None and isinstance(found[1], str):
                value = found[1].strip().lower()
                feature = mapping.get(value, "" if src.framework_feature else None)
                if feature is not None:
                    yield _Requested(feature, f"{c.pointer}/env/{found[0]}/value", f"{src.env}={found[1]}",
                                     fixes.get(feature),
                                     f"{src.framework_feature}:{value}" if src.framework_feature else None)


def _dtype(a: PodAnalysis, ctx: EvalContext, params: DtypeParams) -> Iterator[Violation]:
    scope = [f for f in a.scope if f.compute_capability is not None]
    if not scope:
        return
    kb = ctx.kb
    for c, _req in a.gpu_containers:
        framework = _framework_of(a, c, params)
        for r in _requested_features(c, params.sources):
            need: Version | None = None
            why = r.feature
            floor = (kb.framework_floor(framework[0], r.framework_key, framework[1])
                     if r.framework_key and framework is not None else None)
            if params.fallbacks:
                yield from _fallback(a, c, r, floor, scope, framework)
                continue
            if floor is not None:  # the framework's own floor, for its version, wins over the hardware one
                if floor.min_cc is None:
                    continue  # no floor in this version (e.g. an FP8 KV cache: storage, not FP8 compute)
                need = floor.min_cc
                version = (f"{floor.framework} {framework[1]}" if framework is not None and framework[1] is not None
                           and floor.versions != VersionRange() else f"every {floor.framework} version")
                why = f"{r.framework_key} in {version}" + _assumed(a, c)
            elif r.feature:
                need = kb.feature_min_cc(r.feature)
            if need is None:
                continue
            bad = [f for f in scope if f.compute_capability is not None and f.compute_capability < need]
            if not bad:
                continue
            fix = _replace_value_fix(c, r.pointer, r.what, r.replacement) if r.replacement is not None else None
            yield Violation(f"{r.what} needs compute capability >= {need} ({why}); eligible GPUs: {_gpus(bad)}",
                            r.pointer, c.name, fix)


def _fallback(a: PodAnalysis, c: ContainerTarget, r: _Requested, floor: FrameworkFloor | None,
              scope: list[NodeFacts], framework: tuple[str, Version | None] | None) -> Iterator[Violation]:
    """The GPUs on which the framework version runs ``r`` with a fall-back kernel: at or above its floor (none:
    any) and below the compute capability its full kernel needs. Only for a version the table has a row for: with
    the version unknown the table's rows disagree, and a fall-back is never assumed."""
    if floor is None or floor.fallback is None or floor.full_cc is None or framework is None or framework[1] is None:
        return
    full, low = floor.full_cc, floor.min_cc
    slow = [f for f in scope if f.compute_capability is not None and f.compute_capability < full
            and (low is None or f.compute_capability >= low)]
    if slow:
        yield Violation(f"{r.what}: {floor.framework} {framework[1]} runs {floor.fallback} instead below compute "
                        f"capability {full} (slower{_assumed(a, c)}); eligible GPUs: {_gpus(slow)}", r.pointer, c.name)


def _assumed(a: PodAnalysis, c: ContainerTarget) -> str:
    """What a framework floor's version was decided from, when not the tag's own row: the newest release the image
    table knows (a floating tag)."""
    facts = a.image_facts(c)
    return f", {facts.assumed}" if facts is not None and facts.assumed else ""


def _replace_value_fix(c: ContainerTarget, pointer: str, what: str, replacement: str) -> Fix | None:
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
    if i > 0 and str(items[i - 1]) == flag:  # "--flag value" in two items: the pointer is at the value
        return Fix(f"use {flag} {replacement}", Applicability.UNSAFE, (PatchOp("replace", pointer, replacement),))
    if flag in old:  # inside a shell string
        new = re.sub(re.escape(flag) + r"([= ])\S+", lambda m: f"{flag}{m.group(1)}{replacement}", old, count=1)
        return Fix(f"use {flag} {replacement}", Applicability.UNSAFE, (PatchOp("replace", pointer, new),))
    return None


# The dtype-capability and kernel-fallback checks read data types from the same places.
_DTYPE_PARAMS_SCHEMA = {
    "type": "object", "additionalProperties": False, "required": ["sources"],
    "properties": {
        "sources": {"type": "array", "items": _SOURCE_SCHEMA, "minItems": 1,
                    "description": "Where containers name data types: flags or env vars, and their values."},
        "commandFrameworks": {
            "type": "object", "additionalProperties": {"type": "string", "format": "regex"},
            "description": "Framework id (as in the framework-features table) -> regex on the command line that "
                           "runs it, for images no profile knows."}}}


register(PodCheck(
    name="dtype-capability",
    description="Finds data types and quantization formats requested through serving flags or env vars and "
                "compares their minimum compute capability with the GPUs the pod can land on.",
    fix_applicability=Applicability.UNSAFE,
    params_schema=_DTYPE_PARAMS_SCHEMA,
    prepare=_prepare_dtype,
    evaluate=_dtype,
))


register(PodCheck(
    name="kernel-fallback",
    description="Finds quantization formats and kernel backends requested through serving flags or env vars that "
                "the framework version runs with a slower fall-back kernel on the GPUs the pod can land on "
                "(framework-features rows with a 'fallback').",
    params_schema=_DTYPE_PARAMS_SCHEMA,
    prepare=_prepare_fallback,
    evaluate=_dtype,
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


@dataclass(frozen=True)
class FrameworkParams:
    frameworks: tuple[_Framework, ...]
    image_frameworks: dict[str, str]  # framework id of the image profiles -> its name in messages


def _prepare_frameworks(raw: RawParams) -> FrameworkParams:
    return FrameworkParams(_frameworks(raw), dict(raw.get("imageFrameworks", {})))


def _frameworks(raw: RawParams) -> tuple[_Framework, ...]:
    return (tuple(_Framework(
        fw["name"], parse_compute_capability(fw["minComputeCapability"]),
        re.compile(fw["image"]) if "image" in fw else None,
        parse_version(fw["minVersion"], what="minVersion") if "minVersion" in fw else None,
        re.compile(fw["command"]) if "command" in fw else None, fw.get("env"), re.compile(fw.get("envValue", ".*")),
    ) for fw in raw.get("frameworks", [])))


def _framework(a: PodAnalysis, ctx: EvalContext, params: FrameworkParams) -> Iterator[Violation]:
    scope = [f for f in a.scope if f.compute_capability is not None]
    if not scope:
        return
    for c, _req in a.gpu_containers:
        facts = a.image_facts(c)
        name = params.image_frameworks.get(facts.framework or "") if facts is not None else None
        if facts is not None and facts.framework and name:
            floor = ctx.kb.framework_floor(facts.framework, "engine", facts.framework_version)
            need = floor.min_cc if floor is not None else None
            bad = [f for f in scope if need is not None and f.compute_capability is not None
                   and f.compute_capability < need]
            if floor is not None and bad:
                which = (f"{name} {facts.framework_version}" if facts.framework_version is not None
                         and floor.versions != VersionRange() else f"{name} (any version)") + _assumed(a, c)
                yield Violation(f"{which} needs compute capability >= {need}; eligible GPUs: {_gpus(bad)}",
                                f"{c.pointer}/image", c.name)
        image = c.data.get("image") if isinstance(c.data.get("image"), str) else ""
        argv = " ".join(command_line(c))
        for fw in params.frameworks:
            if not _framework_matches(c, fw, image or "", argv):
                continue
            bad = [f for f in scope if f.compute_capability is not None and f.compute_capability < fw.need]
            if bad:
                yield Violation(f"{fw.name} needs compute capability >= {fw.need}; eligible GPUs: {_gpus(bad)}",
                                f"{c.pointer}/image", c.name)


def _framework_matches(c: ContainerTarget, fw: _Framework, image: str, argv: str) -> bool:
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


register(PodCheck(
    name="framework-capability",
    description="Recognises serving frameworks (by image, command or env) and compares their minimum compute "
                "capability with the GPUs the pod can land on.",
    params_schema={"type": "object", "additionalProperties": False, "properties": {
        "imageFrameworks": {"type": "object", "additionalProperties": {"type": "string"},
                            "description": "Framework ids of the image profiles whose 'engine' floor, per version, "
                                           "comes from the framework-features table -> the name used in messages."},
        "frameworks": {"type": "array", "minItems": 1, "description": "Frameworks, how to recognise them, and their "
                       "minimum compute capability.", "items": {
            "type": "object", "additionalProperties": False, "required": ["name", "minComputeCapability", "source"],
            "properties": {
                "name": {"type": "string", "description": "The framework's name, in messages."},
                "image": {"type": "string", "description": "regex on the image; (?P<version>) for minVersion"},
                "minVersion": {"type": "string", "pattern": r"^\d+(\.\d+)*$",
                               "description": "Only images whose (?P<version>) is at least this."},
                "command": {"type": "string", "description": "regex on command + args"},
                "env": {"type": "string", "description": "Env var that marks the framework."},
                "envValue": {"type": "string", "description": "regex the env value must match (default any)"},
                "minComputeCapability": {"type": "string", "pattern": r"^\d+\.\d+$",
                                         "description": "Lowest compute capability the framework runs on."},
                "source": {"type": "string", "description": "Where the minimum is documented."},
            }, "oneOf": [{"required": ["image"]}, {"required": ["command"]}, {"required": ["env"]}]}}}},
    prepare=_prepare_frameworks,
    evaluate=_framework,
))

_PINNED_MEM = re.compile(r"^\s*\d+\s*=\s*\d+[KMGT]?\s*$", re.IGNORECASE | re.ASCII)


@dataclass(frozen=True)
class MpsParams:
    min_compute_capability: Version  # MPS isolation needs Volta
    min_driver_cuda: Version  # MPS through the device plugin


def _prepare_mps(raw: RawParams) -> MpsParams:
    return MpsParams(parse_compute_capability(raw.get("minComputeCapability", "7.0")),
                     parse_version(raw.get("minDriverCuda", "11.5"), what="minDriverCuda"))


def _mps(a: PodAnalysis, ctx: EvalContext, params: MpsParams) -> Iterator[Violation]:
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
    sel = a.pod.spec.get("nodeSelector")
    pinned_mps = isinstance(sel, dict) and sel.get("nvidia.com/gpu.sharing-strategy") == "mps"
    # Without --nodes the scope is the GPUs the pod pins, which say nothing of sharing: pinned to MPS, it shares them.
    mps = [f for f in a.scope if pinned_mps or f.sharing_strategy == "mps"]
    if not mps:
        return
    min_cc, min_cuda = params.min_compute_capability, params.min_driver_cuda
    old_gpu = [f for f in mps if f.compute_capability is not None and f.compute_capability < min_cc]
    if old_gpu:
        yield Violation(f"MPS sharing on {_gpus(old_gpu)}: MPS isolation (thread-percentage and memory limits) "
                        f"needs compute capability >= {min_cc} (Volta)", a.pod.pointer, None)
    old_drv = [f for f in mps if f.driver_cuda is not None and f.driver_cuda < min_cuda]
    if old_drv:
        drivers = ", ".join(sorted({f.describe_driver() for f in old_drv}))
        yield Violation(f"MPS sharing through the device plugin needs a driver for CUDA >= {min_cuda}; nodes run "
                        f"{drivers}", a.pod.pointer, None)


register(PodCheck(
    name="mps-requirements",
    description="Checks MPS env var formats, and that MPS-shared nodes have Volta+ GPUs and recent drivers.",
    gpu_only=False,
    params_schema={"type": "object", "additionalProperties": False, "properties": {
        "minComputeCapability": {"type": "string", "default": "7.0",
                                 "description": "Lowest compute capability MPS isolation works on (Volta)."},
        "minDriverCuda": {"type": "string", "default": "11.5",
                          "description": "Lowest driver CUDA for MPS through the device plugin."}}},
    prepare=_prepare_mps,
    evaluate=_mps,
))

_MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-(?P<profile>.+)$")


def _mig(a: PodAnalysis, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    kb = ctx.kb
    for c, req in a.gpu_containers:
        for name in req:
            m = _MIG_RESOURCE.match(name)
            if not m:
                continue
            profile = m.group("profile")
            ptr = f"{c.pointer}/resources/limits/{name.replace('/', '~1')}"
            if ctx.cluster is not None:
                # The placed classes when the pod's selectors admit some (gpu-no-eligible-node is then folded
                # into this finding when the profile is the only thing missing); else the whole cluster, since a
                # selector that admits no node is gpu-no-eligible-node's finding, not a MIG one. With ResourceSlices,
                # the MIG devices a DeviceClass that maps the resource (extendedResourceName) can get offer it too.
                classes = [*(a.placement_classes or ctx.cluster.classes), *a.dra_classes]
                if any(cls.facts.resource(name) > 0 for cls in classes):
                    continue
                kinds = sorted({n for cls in classes for n, _ in cls.facts.gpu_resources
                                if n.startswith("nvidia.com/mig-")} | {f"nvidia.com/mig-{p}"
                                                                       for p in a.dra_offered_profiles})
                have = f"nodes offer {', '.join(kinds)}" if kinds else "no node offers MIG devices"
                where = "no node the pod can land on" if a.placement_classes else "no node of the cluster"
                yield Violation(f"MIG profile {profile} is offered by {where} ({have}): the pod would stay Pending "
                                f"(Insufficient {name})", ptr, c.name)
                continue
            products = [f.product for f in a.scope if f.product]
            known = [kb.mig_profiles_for(p) for p in products]
            if products and all(k is not None for k in known):
                if not any(profile in k for k in known if k is not None):
                    yield Violation(f"MIG profile {profile} is not offered by {', '.join(products)}", ptr, c.name)
            elif profile not in kb.all_mig_profiles():
                yield Violation(f"MIG profile {profile} is offered by no GPU in the MIG table "
                                f"(known: {', '.join(sorted(kb.all_mig_profiles())[:8])} ...)", ptr, c.name)
    yield from _dra_mig(a, ctx)


def _dra_mig(a: PodAnalysis, ctx: EvalContext) -> Iterator[Violation]:
    """A DRA request whose selectors pin a MIG ``profile`` (NVIDIA's driver publishes it on MIG devices) that the
    GPUs they pin do not offer, or that no GPU offers; with ResourceSlices, that no MIG device in reach is (as a
    nvidia.com/mig-<profile> no node offers)."""
    if not a.dra_gpu_requests:
        return
    if a.dra_inventory_known:
        assert ctx.cluster is not None
        where = "on the nodes the pod can land on" if ctx.cluster.node_count else "of the ResourceSlices"
        for r, missing, offered, _all in a.dra_unoffered_profiles:
            if r.claim in a.dra_mapped:
                continue  # an extended resource a DeviceClass maps: said of the resource itself above
            from compatcheck.core.dra import container_claim_requests  # a pod with claims: see core.drakinds

            users = [c.name for c in a.pod.containers if any(u is r for u in container_claim_requests(c.data, a.dra))]
            have = f"they offer {', '.join(offered)}" if offered else "none is a MIG device"
            for profile in missing:
                yield Violation(f"{r.what} pins MIG profile {profile}, which no MIG device {where} is ({have}): no "
                                "device can be allocated; the pod would stay Pending", r.pointer,
                                users[0] if users else None)
        return
    kb = ctx.kb
    pinned: dict[int, list[str]] = {}
    for cls, r in a.dra_pins:
        if cls.facts.product:
            pinned.setdefault(id(r), []).append(cls.facts.product)
    for r in a.dra_gpu_requests:
        from compatcheck.core.dra import container_claim_requests, pinned_profiles, resource_profile

        users = [c.name for c in a.pod.containers if any(u is r for u in container_claim_requests(c.data, a.dra))]
        for ra in r.alternatives:
            profiles = pinned_profiles(ra.selectors)
            products = sorted(set(pinned.get(id(r), ())))
            for profile in sorted(profiles):
                known = [kb.mig_profiles_for(p) for p in products]
                table_name = resource_profile(profile)  # the driver writes 1g.10gb+me, the table 1g.10gb.me
                if products and all(k is not None for k in known):
                    if not any(table_name in k for k in known if k is not None):
                        yield Violation(f"{r.what} pins MIG profile {profile}, which {', '.join(products)} does not "
                                        "offer: no MIG device can match", r.pointer, users[0] if users else None)
                elif table_name not in kb.all_mig_profiles():
                    yield Violation(f"{r.what} pins MIG profile {profile}, which no GPU in the MIG table offers "
                                    f"(known: {', '.join(sorted(kb.all_mig_profiles())[:8])} ...)", r.pointer,
                                    users[0] if users else None)


register(PodCheck(
    name="mig-profile",
    description="Checks that each nvidia.com/mig-<profile> request names a profile the GPUs in scope offer.",
    params_schema=NO_PARAMS_SCHEMA,
    prepare=no_params,
    evaluate=_mig,
))
