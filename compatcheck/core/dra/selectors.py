"""The CEL glue: everything that evaluates or reads DRA's CEL selectors, through ``compatcheck.core.cel`` (the one
module that imports the CEL library).

- ``select_devices``: what a tuple of selectors (class selectors first, then the request's) makes of an
  inventory's devices, in order, as the scheduler evaluates them: matching devices, devices on which a selector
  fails (the scheduler aborts such an allocation), and a selector compatcheck's CEL cannot run;
- without an inventory, what the selectors pin (``pinned_points``: the known products, compute capabilities and
  driver branches that satisfy them, evaluated on devices the knowledge base can describe), which NVIDIA attributes
  they read (``nvidia_attributes``), and the MIG profiles or type they name (``pinned_profiles``,
  ``is_mig_request``).

It must not cache (the allocator keeps what it evaluated for the inventory's life), allocate or word findings.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from compatcheck.core.cel import CelError, CelUnsupported, DeviceInput, Semver, compile_selector, normalise_semver
from compatcheck.core.dra.claims import PodRequest
from compatcheck.core.dra.model import NVIDIA_DRIVER, Device
from compatcheck.core.dra.nvidia import _driver_text

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _referenced(expression: str) -> frozenset[str]:
    """Every identifier and string literal of an expression: the attribute names a projection must keep."""
    return frozenset(_IDENT.findall(expression))


@dataclass(frozen=True)
class _Selected:
    """What a tuple of selectors makes of every device of an inventory (indices into ``Allocator.devices``)."""

    matching: tuple[int, ...]
    errors: tuple[tuple[int, CelError], ...]  # devices on which a selector fails (the scheduler aborts)
    unsupported: CelUnsupported | None = None


def _flatten(device: DeviceInput) -> tuple[tuple[str, str, str], ...]:
    """A device as (domain, name, value) triples, sorted; ("", field, value) for the fields every selector may read
    (driver, allowMultipleAllocations, the domains present: an unknown domain is an empty map, not an error)."""
    out = [("", "driver", device.driver), ("", "allowMultipleAllocations", str(device.allow_multiple_allocations)),
           ("", "domains", " ".join(sorted({*device.attributes, *device.capacity})))]
    for domain, ids in device.attributes.items():
        out.extend((domain, k, v.text if isinstance(v, Semver) else repr(v)) for k, v in ids.items())
    for domain, caps in device.capacity.items():
        out.extend((f"capacity:{domain}", k, str(v)) for k, v in caps.items())
    return tuple(sorted(out))


def select_devices(devices: Sequence[Device], flat: Sequence[tuple[tuple[str, str, str], ...]],
                   selectors: tuple[str, ...]) -> _Selected:
    """What a tuple of selectors makes of ``devices`` (``flat``: each device's ``_flatten``): the devices
    every selector matches, those on which one fails, and the first selector compatcheck's CEL cannot run.
    Each selector is evaluated once per distinct projection of the devices onto the names it mentions
    (devices that differ only in uuid or PCI address are one evaluation)."""
    candidates = list(range(len(devices)))
    errors: list[tuple[int, CelError]] = []
    unsupported: CelUnsupported | None = None
    for expression in selectors:  # in order: a device a selector rejects meets no later one (as in all())
        names = _referenced(expression)
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i in candidates:
            key = tuple(x for x in flat[i] if x[1] in names or x[0] == "")
            groups.setdefault(key, []).append(i)
        passed: list[int] = []
        for members in groups.values():
            try:
                if compile_selector(expression).matches(devices[members[0]].input):
                    passed.extend(members)
            except CelUnsupported as exc:
                unsupported = unsupported or exc
            except CelError as exc:
                errors.extend((i, exc) for i in members)
        candidates = sorted(passed)
    return _Selected(tuple(candidates), tuple(sorted(errors, key=lambda e: e[0])), unsupported)


_PROFILE_PIN = re.compile(r"""\.\s*profile\s*==\s*["']([^"']+)["']"""
                          r"""|["']([^"']+)["']\s*==\s*[^&|]{0,256}?\.\s*profile\b""")
_MIG_TYPE = re.compile(r"""\.\s*type\s*==\s*["']mig["']|["']mig["']\s*==\s*[^&|]{0,256}?\.\s*type\b""")


def is_mig_request(request: PodRequest) -> bool:
    """Whether every alternative of an NVIDIA request gets a MIG device: DeviceClass mig.nvidia.com, or selectors
    (the class's and its own) that pin ``type == "mig"`` or a MIG ``profile``."""
    return bool(request.alternatives) and all(
        ra.alt.class_name == "mig.nvidia.com" or any(_MIG_TYPE.search(s) for s in ra.selectors)
        or bool(pinned_profiles(ra.selectors)) for ra in request.alternatives)


def pinned_profiles(selectors: Iterable[str]) -> frozenset[str]:
    """The MIG profiles selectors pin with ``...profile == "1g.10gb"`` (either side)."""
    return frozenset(m.group(1) or m.group(2) for s in selectors for m in _PROFILE_PIN.finditer(s))


_NV_ATTR = re.compile(r"""attributes\s*\[\s*["']gpu\.nvidia\.com["']\s*\]\s*(?:\.\s*(\w+)|\[\s*["'](\w+)["']\s*\])""")
_STRING = re.compile(r"""(?<!\\)(["'])(.*?)(?<!\\)\1""")
_SEMVER_CALL = re.compile(r"""semver\(\s*(["'])([^"']+)\1\s*(,\s*true\s*)?\)""")
PINNABLE = ("productName", "cudaComputeCapability", "driverVersion", "cudaDriverVersion", "type", "profile",
            "architecture", "brand")
MAX_GRID = 4096


@dataclass(frozen=True)
class KnownValues:
    """What the knowledge base says devices can be: candidate values of each pinnable attribute."""

    products: tuple[str, ...]  # NVML-style names
    compute_capabilities: tuple[str, ...]  # "8.0"
    drivers: tuple[tuple[int, str], ...]  # (branch, max CUDA "12.2")


def nvidia_attributes(expressions: Iterable[str]) -> frozenset[str]:
    """The gpu.nvidia.com attributes the expressions read."""
    out: set[str] = set()
    for e in expressions:
        for m in _NV_ATTR.finditer(e):
            out.add(m.group(1) or m.group(2))
    return frozenset(out)


def pinned_points(selectors: tuple[str, ...], known: KnownValues) -> tuple[list[dict[str, str]], bool]:
    """Without an inventory: the devices the selectors admit among those the knowledge base can describe, as
    GFD label sets (the attributes the selectors leave free are left out), and whether the driver is pinned.
    ([], False) when the selectors pin nothing compatcheck can read (or read an attribute it cannot vary)."""
    used = nvidia_attributes(selectors)
    if not used or not used <= set(PINNABLE) or not ({"productName", "cudaComputeCapability", "driverVersion",
                                                       "cudaDriverVersion"} & used):
        return [], False
    literals = [m.group(2) for s in selectors for m in _STRING.finditer(s)]
    semvers = []
    for s in selectors:
        for m in _SEMVER_CALL.finditer(s):
            try:
                semvers.append(Semver(normalise_semver(m.group(2)) if m.group(3) else m.group(2)))
            except CelError:
                continue
    axes: dict[str, list[Any]] = {}
    if "productName" in used:
        axes["productName"] = sorted(set(known.products) | {x for x in literals if len(x) > 2})
    if "cudaComputeCapability" in used:
        axes["cudaComputeCapability"] = _versions([Semver(f"{cc}.0") for cc in known.compute_capabilities] + semvers)
    if "driverVersion" in used or "cudaDriverVersion" in used:
        # A driver branch and the CUDA it supports go together: one axis.
        drivers: list[tuple[Semver, Semver | None]] = [(Semver(f"{b}.0.0"), Semver(f"{c}.0")) for b, c in known.drivers]
        drivers += [(v, _branch_cuda(v, known)) for v in semvers if v.major >= 100]
        axes["driver"] = [d for d in drivers if d[1] is not None]
    if "type" in used:
        axes["type"] = ["gpu", "mig"]
    for attr in ("profile", "architecture", "brand"):
        if attr in used:
            axes[attr] = sorted({x for x in literals if x})
            if not axes[attr]:
                return [], False
    names = list(axes)
    size = 1
    for n in names:
        size *= max(len(axes[n]), 1)
    if size > MAX_GRID or size == 0:
        return [], False
    admitted: list[tuple[Any, ...]] = []
    for point in itertools.product(*(axes[n] for n in names)):
        attrs: dict[str, Any] = {}
        for n, v in zip(names, point, strict=True):
            if n == "driver":
                attrs["driverVersion"], attrs["cudaDriverVersion"] = v
            else:
                attrs[n] = v
        device = DeviceInput(NVIDIA_DRIVER, {NVIDIA_DRIVER: attrs}, {})
        try:
            if all(compile_selector(s).matches(device) for s in selectors):
                admitted.append(point)
        except CelUnsupported:
            return [], False
        except CelError:
            continue
    if not admitted:
        return [], False
    # An axis every value of which is admitted alongside the same others is not pinned: leave it out.
    free = set()
    for i, n in enumerate(names):
        rest = {p[:i] + p[i + 1:] for p in admitted}
        if len(rest) * len(axes[n]) == len(admitted):
            free.add(i)
    out: list[dict[str, str]] = []
    seen = set()
    driver_pinned = False
    for point in admitted:
        labels: dict[str, str] = {}
        for i, (n, v) in enumerate(zip(names, point, strict=True)):
            if i in free:
                continue
            if n == "productName":
                labels["nvidia.com/gpu.product"] = str(v).replace(" ", "-")
            elif n == "cudaComputeCapability":
                labels["nvidia.com/gpu.compute.major"], labels["nvidia.com/gpu.compute.minor"] = str(v.major), str(
                    v.minor)
            elif n == "driver":
                driver_pinned = True
                drv, cuda = v
                labels["nvidia.com/cuda.driver-version.full"] = _driver_text(drv) if drv.minor else str(drv.major)
                labels["nvidia.com/cuda.runtime-version.major"] = str(cuda.major)
                labels["nvidia.com/cuda.runtime-version.minor"] = str(cuda.minor)
        key = tuple(sorted(labels.items()))
        if labels and key not in seen:
            seen.add(key)
            out.append(labels)
    return out, driver_pinned


def _versions(values: list[Semver]) -> list[Semver]:
    seen: dict[Any, Semver] = {}
    for v in values:
        seen.setdefault(v.key, v)
    return [seen[k] for k in sorted(seen)]


def _branch_cuda(v: Semver, known: KnownValues) -> Semver | None:
    for branch, cuda in known.drivers:
        if branch == v.major:
            return Semver(f"{cuda}.0")
    return None
