"""The CUDA knowledge base: typed, indexed views of the data tables in ``rules/data``.

Built from already-loaded table dicts (``loader`` reads the files); pure lookups and the version
verdict live here so the linter, ``compatcheck versions`` and the webhook give one answer.
Must not read files, print, or know about Kubernetes objects.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar

from compatcheck.core.imageconfig import RegistryFacts
from compatcheck.core.images import Binary, ForwardCompat, ImageFacts
from compatcheck.core.jsonutil import Json, JsonObject
from compatcheck.core.versions import (
    Version,
    VersionError,
    parse_compute_capability,
    parse_cuda_version,
    parse_driver_version,
    parse_version,
)
from compatcheck.core.workloads import KindTable, KindTableError, build_kind_table

K = TypeVar("K")
V = TypeVar("V")


class KnowledgeError(ValueError):
    """A data table whose content cannot be used (bad version text, bad regex, duplicate key)."""


class TablePattern:
    """A table row's regular expression (``match``, ``pattern``, ``floating``), compiled when it is first searched
    with, or at once (``from_tables`` compiles every row's but those of trusted rows, the built-in files the test
    suite checks). A lint without ``--nodes`` searches none of the 62 GPU-product and MIG patterns, and compiling
    all 92 patterns was a twentieth of a one-file lint's start-up. Equal when the text and flags are."""

    __slots__ = ("_compiled", "_needle", "flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0, *, lazy: bool = False) -> None:
        self.pattern, self.flags = pattern, flags
        self._compiled: re.Pattern[str] | None = None if lazy else re.compile(pattern, flags)
        # Until it is compiled, a text without the pattern's required literal is no match: an image reference that
        # matches no profile, or a product label, does not compile every pattern before the one it matches.
        self._needle = required_literal(pattern, flags) if lazy else None

    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self.flags)
        return self._compiled

    def search(self, text: str) -> re.Match[str] | None:
        if self._compiled is None and self._needle is not None:
            if self.flags & re.IGNORECASE:
                if text.isascii() and self._needle.lower() not in text.lower():
                    return None  # (an ASCII needle in ASCII text: case-insensitive matching is ASCII's)
            elif self._needle not in text:
                return None
        return (self._compiled or self.compiled()).search(text)

    @property
    def groupindex(self) -> Mapping[str, int]:
        return self.compiled().groupindex

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TablePattern):
            return NotImplemented
        return (self.pattern, self.flags) == (other.pattern, other.flags)

    def __hash__(self) -> int:
        return hash((self.pattern, self.flags))

    def __repr__(self) -> str:
        return f"TablePattern({self.pattern!r}{f', {self.flags!r}' if self.flags else ''})"


@dataclass(frozen=True)
class VersionRange:
    """``equals``, or ``from`` <= v < ``before`` (either end open), as the tables write version ranges."""

    equals: Version | None = None
    lo: Version | None = None
    hi: Version | None = None

    def __contains__(self, version: Version) -> bool:
        if self.equals is not None:
            return self.equals == version
        return (self.lo is None or version >= self.lo) and (self.hi is None or version < self.hi)

    @classmethod
    def of(cls, row: JsonObject, where: str) -> VersionRange:
        return cls(_ver(row.get("equals"), where), _ver(row.get("from"), where), _ver(row.get("before"), where))


@dataclass(frozen=True)
class BinarySpec:
    """A row's binaries as written: explicit architectures, or a PyTorch wheel looked up in ``torch-wheels``."""

    component: str
    sass: tuple[Version, ...]
    ptx: tuple[Version, ...]
    torch: Version | None
    torch_cuda: Version | None
    source: str
    toolkit: Version | None = None  # CUDA that compiled explicit sass/ptx, when not the release's runtime
    optional: bool = False  # kernels used when they fit, with a fallback otherwise


@dataclass(frozen=True)
class ForwardSpec:
    cuda: Version | None
    branches: frozenset[int]
    brands: frozenset[str]
    source: str


@dataclass(frozen=True)
class Release:
    """One version row of an image profile."""

    versions: VersionRange
    variant: str | None
    cuda: Version | None
    base: Version | None
    framework_version: Version | None
    no_cuda: bool
    binaries: tuple[BinarySpec, ...] | None
    forward: ForwardSpec | None
    source: str


@dataclass(frozen=True)
class VersionSource:
    """Where a family's images state their version in their config: an OCI label or an env variable, and, where the
    value is more than the version (vLLM's VLLM_IMAGE_TAG is the whole public reference), a regex whose
    (?P<version>) group (and optional (?P<variant>) group) reads it."""

    kind: Literal["label", "env"]
    name: str
    match: re.Pattern[str] | None = None

    def read(self, text: str) -> tuple[str, str | None] | None:
        """(version text, variant or None) from the value, or None when the value does not say."""
        if self.match is None:
            return text.strip(), None
        m = self.match.search(text)
        if m is None or not m.groupdict().get("version"):
            return None
        return m.group("version"), m.groupdict().get("variant") or None


@dataclass(frozen=True)
class ImageProfile:
    """A family of images (``image-profiles`` row): how its references look, and what each release carries."""

    name: str
    regex: TablePattern
    source: str
    framework: str | None = None
    no_cuda: bool = False
    compat_libs: bool = False
    # NVIDIA_REQUIRE_CUDA's cuda>= term when it is not the base's (NGC images ask for cuda>=9.0); None: the base's
    require_cuda: Version | None = None
    require_cuda_set: bool = False  # the row says (``requireCuda``: a version, or null for no gate)
    floating: TablePattern | None = None  # references whose tag floats (latest, main, nightly)
    binaries: tuple[BinarySpec, ...] = ()
    versions: tuple[Release, ...] = ()
    as_of: str | None = None  # the asOf date of the table the row came from
    # Where an image's own config states the family's version (registry lookups): ("label", name) or ("env", name),
    # tried in order. Only what a source says the family's images set: a base image's inherited label would lie.
    version_from: tuple[VersionSource, ...] = ()

    def newest(self, variant: str | None) -> Release | None:
        """The release row of ``variant`` that reaches the newest version (None: the family lists no such row)."""
        rows = [r for r in self.versions if r.variant == variant]
        return max(rows, key=_reach) if rows else None

    def beyond(self, version: Version, variant: str | None) -> bool:
        """Whether ``version`` is newer than every release row of ``variant`` (and so in none of them)."""
        rows = [r for r in self.versions if r.variant == variant]
        return bool(rows) and all(_below(r.versions, version) for r in rows)


# Every finding decided from the newest row the table knows says so in these words (the engine recognises it, for
# the policy's assumedSeverity): "assumed from v0.17.0 to before v0.20.0, the newest vllm-openai release compatcheck
# knows, table dated 2026-11-21".
ASSUMED_MARK = " release compatcheck knows"


def assumed_note(name: str, label: str, as_of: str | None) -> str:
    dated = f", table dated {as_of}" if as_of else ", table undated"
    return f"assumed from {label}, the newest {name}{ASSUMED_MARK}{dated}"


def _reach(r: Release) -> tuple[Version, int]:
    return _reach_range(r.versions)


def _reach_range(v: VersionRange) -> tuple[Version, int]:
    """How far a version range reaches: its exact version, else its upper end (before), else its lower end."""
    if v.equals is not None:
        return v.equals, 1
    if v.hi is not None:
        return v.hi, 0
    return (v.lo, 2) if v.lo is not None else (Version((0,), "0"), 0)


def _below(r: VersionRange, version: Version) -> bool:
    """Whether every version of ``r`` is older than ``version``."""
    if r.equals is not None:
        return r.equals < version
    return r.hi is not None and r.hi <= version


def release_label(r: Release) -> str:
    return range_label(r.versions)


def range_label(v: VersionRange) -> str:
    """A release row in words: v0.10.0, or v0.17.0 to before v0.20.0."""
    if v.equals is not None:
        return f"v{v.equals}"
    if v.lo is not None and v.hi is not None:
        return f"v{v.lo} to before v{v.hi}"
    return f"v{v.lo} and later" if v.lo is not None else f"before v{v.hi}"


@dataclass(frozen=True)
class TorchWheel:
    versions: VersionRange
    cuda: Version
    sass: tuple[Version, ...]
    ptx: tuple[Version, ...]
    source: str


@dataclass(frozen=True)
class FrameworkFloor:
    framework: str
    feature: str
    versions: VersionRange
    min_cc: Version | None  # None: no floor in this range
    source: str
    # Below ``full_cc`` (and at or above ``min_cc``) the framework does not fail: it runs ``fallback`` instead (a
    # slower kernel or backend, e.g. FP8 Marlin weight-only below 8.9, XFORMERS for FlashAttention below 8.0).
    fallback: str | None = None
    full_cc: Version | None = None


@dataclass(frozen=True)
class GpuProduct:
    regex: TablePattern
    product: str
    compute_capability: Version
    datacenter: bool
    brand: str | None = None  # NVML brand (tesla, nvidia, nvidiartx, geforce...), when the table knows it
    mig: bool | None = None  # whether the product offers MIG at all; None: not recorded


@dataclass(frozen=True)
class Architecture:
    compute_capability: Version
    name: str
    first_cuda: Version | None
    removed_in: Version | None


@dataclass(frozen=True)
class ImageCuda:
    """What an image says about its CUDA runtime. ``cuda`` is None when the image is recognised but the
    version is not in the table (``reason`` says why)."""

    cuda: Version | None
    origin: str
    reason: str = ""


Verdict = Literal["compatible", "minor-version-compatibility", "incompatible", "unknown"]


@dataclass(frozen=True)
class DriverVerdict:
    driver: Version | None
    driver_cuda: Version | None
    runtime: Version
    verdict: Verdict
    reasons: tuple[str, ...]
    toolkit_driver: Version | None = None
    mvc_floor: Version | None = None


def _cuda(text: Json, where: str) -> Version:
    try:
        return parse_cuda_version(text)
    except VersionError as exc:
        raise KnowledgeError(f"{where}: {exc}") from None


@dataclass
class KnowledgeBase:
    toolkits: list[tuple[Version, Version]] = field(default_factory=list)  # (cuda, toolkit driver), sorted
    mvc: dict[int, Version | None] = field(default_factory=dict)
    branches: list[tuple[int, Version]] = field(default_factory=list)  # (branch, max cuda), sorted
    products: list[GpuProduct] = field(default_factory=list)
    architectures: dict[Version, Architecture] = field(default_factory=dict)
    features: dict[str, Version] = field(default_factory=dict)
    images: list[ImageProfile] = field(default_factory=list)
    torch_wheels: list[TorchWheel] = field(default_factory=list)
    framework_floors: list[FrameworkFloor] = field(default_factory=list)
    # nvidia/cuda base -> its alternatives, keyed by the row's version as written: (X, Y) for every X.Y.* release,
    # (X, Y, Z) for that release only (NVIDIA_REQUIRE_CUDA differs between some patch releases: 11.7.0 vs 11.7.1).
    forward_compat: dict[tuple[int, ...], ForwardSpec] = field(default_factory=dict)
    mig_profiles: list[tuple[TablePattern, str, frozenset[str]]] = field(default_factory=list)
    # Workload kinds (table workload-kinds, an admin's rows first); None: the built-in table (workloads.default_kinds).
    kinds: KindTable | None = None
    _image_cache: dict[str, ImageFacts | None] = field(default_factory=dict, repr=False)
    _branch_cache: dict[Version, int | None] = field(default_factory=dict, repr=False)
    _verdict_cache: dict[tuple[Version, Version | None, Version | None], DriverVerdict] = field(
        default_factory=dict, repr=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_tables(cls, tables: dict[str, list[JsonObject]],
                    trusted: Callable[[JsonObject], bool] | None = None) -> KnowledgeBase:
        """``tables`` maps table name -> rows, an admin's rows first. In every table an admin row overrides the
        built-in row with the same key (the first one read wins), and in the tables searched in order (products,
        images, wheels, floors, MIG) an admin row is tried first. Raises KnowledgeError on bad content.

        The regular expressions of the rows ``trusted`` accepts (built-in rows that have passed these checks
        before, see ``io.loader``) are compiled on first use and their groups are not checked here."""
        kb = cls()
        lazy = trusted or _never
        toolkits: dict[Version, Version] = {}
        for row in tables.get("cuda-toolkits", []):
            toolkits.setdefault(_cuda(row["version"], "cuda-toolkits"), _driver(row["toolkitDriver"], "cuda-toolkits"))
        kb.toolkits = sorted(toolkits.items())
        for row in tables.get("cuda-majors", []):
            floor = row.get("mvcMinDriver")
            kb.mvc.setdefault(int(row["major"]), _driver(floor, "cuda-majors") if floor is not None else None)
        seen: set[int] = set()
        for row in tables.get("driver-branches", []):
            branch = int(row["branch"])
            if branch in seen:
                continue  # an admin row shadows the built-in one
            seen.add(branch)
            kb.branches.append((branch, _cuda(row["maxCuda"], "driver-branches")))
        kb.branches.sort()
        for row in tables.get("gpu-products", []):
            kb.products.append(GpuProduct(_regex(row["match"], "gpu-products", re.IGNORECASE, lazy(row)),
                                          row["product"], _cc(row["computeCapability"]),
                                          bool(row.get("datacenter", False)), row.get("brand"), row.get("mig")))
        for row in tables.get("architectures", []):
            cc = _cc(row["computeCapability"])
            kb.architectures.setdefault(cc, Architecture(
                cc, row["architecture"],
                _cuda(row["firstCuda"], "architectures") if row.get("firstCuda") else None,
                _cuda(row["removedIn"], "architectures") if row.get("removedIn") else None))
        for row in tables.get("features", []):
            kb.features.setdefault(row["feature"], _cc(row["minComputeCapability"]))
        for row in tables.get("image-profiles", []):
            kb.images.append(_profile(row, lazy(row)))
        wheels: dict[tuple[VersionRange, Version], TorchWheel] = {}  # an admin row replaces one of the same key
        for row in tables.get("torch-wheels", []):
            where = "torch-wheels"
            wheel = TorchWheel(VersionRange.of(row, where), _cuda(row["cuda"], where), _ccs(row["sass"]),
                               _ccs(row.get("ptx", [])), row["source"])
            wheels.setdefault((wheel.versions, wheel.cuda), wheel)
        kb.torch_wheels = list(wheels.values())
        floors: dict[tuple[str, str, VersionRange], FrameworkFloor] = {}
        for row in tables.get("framework-features", []):
            where = f"framework-features {row['framework']} {row['feature']}"
            floor = row["minComputeCapability"]
            fallback = row.get("fallback")
            ff = FrameworkFloor(row["framework"], row["feature"], VersionRange.of(row, where),
                                _cc(floor) if floor is not None else None, row["source"],
                                fallback["kernel"] if fallback else None,
                                _cc(fallback["below"]) if fallback else None)
            if ff.min_cc is not None and ff.full_cc is not None and ff.full_cc <= ff.min_cc:
                raise KnowledgeError(f"{where}: fallback.below {ff.full_cc} must be above minComputeCapability "
                                     f"{ff.min_cc}")
            floors.setdefault((ff.framework, ff.feature, ff.versions), ff)
        kb.framework_floors = list(floors.values())
        for row in tables.get("forward-compat", []):
            cuda = _cuda(row["cuda"], "forward-compat")
            # Keyed by X.Y.Z for a row about one patch release, else X.Y. The spec's cuda stays None: the compat
            # libraries are the base image's own CUDA (12.4.1 for a 12.4 row).
            key = cuda.parts[:3] if len(cuda.parts) >= 3 else cuda.major_minor().parts
            kb.forward_compat.setdefault(key, ForwardSpec(None, frozenset(int(b) for b in row["branches"]),
                                                          frozenset(row.get("brands", [])), row["source"]))
        for row in tables.get("mig-profiles", []):
            # The table writes profiles as NVML names them (1g.10gb+me); requests and GFD labels use the resource
            # form, '+' replaced by '.' (nvidia.com/mig-1g.10gb.me); '-me' stays as it is.
            kb.mig_profiles.append((_regex(row["match"], "mig-profiles", re.IGNORECASE, lazy(row)), row["gpu"],
                                    frozenset(mig_resource_profile(p) for p in row["profiles"])))
        if "workload-kinds" in tables:
            try:
                kb.kinds = build_kind_table(tables["workload-kinds"])
            except KindTableError as exc:
                raise KnowledgeError(str(exc)) from exc
        return kb

    # ------------------------------------------------------------------ driver / runtime
    def driver_cuda(self, driver: Version) -> tuple[Version | None, bool]:
        """Newest CUDA the driver supports, and whether its branch is in the table exactly."""
        best: Version | None = None
        exact = False
        for branch, cuda in self.branches:
            if branch <= driver.major:
                best, exact = cuda, branch == driver.major
        return best, exact

    def lowest_branch_for(self, cuda: Version) -> int | None:
        """The lowest listed branch that supports ``cuda``; None when the table cannot say: a CUDA older than its
        first branch's (CUDA 8 needs R367, a branch before the table's first) or newer than every branch's."""
        key = cuda.major_minor()
        if self.branches and key < self.branches[0][1].major_minor():
            return None
        return memo(self._branch_cache, key, lambda: next(
            (branch for branch, max_cuda in self.branches if max_cuda.major_minor() >= key), None))

    def toolkit_driver(self, cuda: Version) -> Version | None:
        """Driver bundled with the toolkit; for ``X.Y`` the lowest of the X.Y.* releases."""
        candidates = [d for c, d in self.toolkits
                      if c.major_minor() == cuda.major_minor() and (len(cuda.parts) < 3 or c == cuda)]
        if not candidates:
            candidates = [d for c, d in self.toolkits if c.major_minor() == cuda.major_minor()]
        return min(candidates) if candidates else None

    def mvc_floor(self, major: int) -> Version | None:
        return self.mvc.get(major)

    def verdict(self, runtime: Version, *, driver: Version | None = None,
                driver_cuda: Version | None = None) -> DriverVerdict:
        """Can a node whose driver is ``driver`` (or whose driver CUDA is ``driver_cuda``) run ``runtime``?
        Memoised: a cluster has few (runtime, driver) pairs and every pod asks again."""
        return memo(self._verdict_cache, (runtime, driver, driver_cuda),
                     lambda: self._verdict(runtime, driver, driver_cuda))

    def _verdict(self, runtime: Version, driver: Version | None, driver_cuda: Version | None) -> DriverVerdict:
        exact = True
        if driver is not None:
            derived, exact = self.driver_cuda(driver)
            if driver_cuda is None:
                driver_cuda = derived
        rt = runtime.major_minor()
        toolkit = self.toolkit_driver(runtime)
        floor = self.mvc_floor(runtime.major)
        reasons: list[str] = []
        lowest = self.lowest_branch_for(runtime)
        if lowest is not None:
            reasons.append(f"CUDA {rt} needs a driver from branch >= {lowest} for full compatibility"
                           + (f" (toolkit driver {toolkit})" if toolkit else ""))
        if driver_cuda is None:
            if driver is not None and self.branches and driver.major < self.branches[0][0]:
                oldest = self.branches[0]
                if rt > oldest[1]:
                    reasons.append(f"driver {driver} is older than branch {oldest[0]} (CUDA {oldest[1]})")
                    return DriverVerdict(driver, None, runtime, "incompatible", tuple(reasons), toolkit, floor)
            reasons.append("the driver's CUDA version is not known")
            return DriverVerdict(driver, None, runtime, "unknown", tuple(reasons), toolkit, floor)
        dc = driver_cuda.major_minor()
        if dc >= rt:
            reasons.append(f"the driver supports CUDA {dc}")
            return DriverVerdict(driver, driver_cuda, runtime, "compatible", tuple(reasons), toolkit, floor)
        if driver is not None and not exact and self.branches and driver.major > self.branches[-1][0]:
            reasons.append(f"driver branch {driver.major} is newer than every branch in the table "
                           f"(supports at least CUDA {dc})")
            return DriverVerdict(driver, driver_cuda, runtime, "unknown", tuple(reasons), toolkit, floor)
        reasons.append(f"the driver supports CUDA {dc} only")
        if dc.major == rt.major and floor is not None:
            effective = driver if driver is not None else _branch_floor(self, dc)
            if effective is not None and effective >= floor:
                reasons.append(f"same major: minor-version compatibility applies (driver >= {floor}); "
                               "no PTX JIT of newer PTX, no APIs that need a newer driver")
                return DriverVerdict(driver, driver_cuda, runtime, "minor-version-compatibility",
                                     tuple(reasons), toolkit, floor)
            reasons.append(f"below the minor-version-compatibility floor {floor} of CUDA {rt.major}.x")
        elif dc.major == rt.major:
            reasons.append(f"CUDA {rt.major}.x has no minor-version compatibility")
        else:
            reasons.append("minor-version compatibility never crosses a major version")
        return DriverVerdict(driver, driver_cuda, runtime, "incompatible", tuple(reasons), toolkit, floor)

    # ------------------------------------------------------------------ GPUs
    def product(self, label: str) -> GpuProduct | None:
        name = normalise_product(label)
        for p in self.products:
            if p.regex.search(name):
                return p
        return None

    def architecture(self, cc: Version) -> Architecture | None:
        return self.architectures.get(cc.major_minor())

    def feature_min_cc(self, feature: str) -> Version | None:
        return self.features.get(feature)

    def mig_profiles_for(self, product: str | None) -> frozenset[str] | None:
        """Profiles of one product: none for a product gpu-products records as offering no MIG at all, None when
        neither table knows it."""
        if product is None:
            return None
        name = normalise_product(product)
        for regex, _gpu, profiles in self.mig_profiles:
            if regex.search(name):
                return profiles
        known = self.product(product)
        if known is not None and known.mig is False:
            return frozenset()
        return None

    def all_mig_profiles(self) -> frozenset[str]:
        out: set[str] = set()
        for _r, _g, profiles in self.mig_profiles:
            out |= profiles
        return frozenset(out)

    # ------------------------------------------------------------------ images
    def image_facts(self, image: str) -> ImageFacts | None:
        """What the tables say about an image reference; None when no profile matches it. Cached: the same
        images recur across thousands of manifests."""
        return memo(self._image_cache, image, lambda: self._image_facts(image))

    def image_cuda(self, image: str) -> ImageCuda | None:
        """The CUDA runtime of an image reference (from ``image_facts``); None if no profile matches."""
        facts = self.image_facts(image)
        if facts is None:
            return None
        return ImageCuda(facts.cuda, facts.origin, facts.reason)

    def _image_facts(self, image: str) -> ImageFacts | None:
        for prof in self.images:
            m = prof.regex.search(image)
            if m:
                return self._resolve(prof, image, m.groupdict())
            if prof.floating is not None and prof.floating.search(image):
                return self._floating(prof, image)
        return None

    def _floating(self, prof: ImageProfile, image: str) -> ImageFacts:
        """A floating tag (latest, main, nightly): it may be any release, so decided from the newest release the
        table knows, and said so. A family whose rows say no CUDA: what holds for every release, the lowest CUDA."""
        newest = prof.newest(None)
        if newest is not None and (newest.cuda is not None or newest.no_cuda):
            return self._facts(prof, image, newest, newest.versions.equals or newest.versions.lo, None,
                               f"a floating tag, {self._assumed(prof, newest)}")
        cudas = [r.cuda for r in prof.versions if r.cuda is not None]
        floor = min(cudas) if cudas else None
        origin = f"image {image}"
        if floor is None:
            return ImageFacts(image, prof.name, origin=origin, framework=prof.framework,
                              reason=f"{image} floats over {prof.name} releases", sources=(prof.source,))
        return ImageFacts(image, prof.name, origin=f"{origin}, a floating tag: every {prof.name} release in the "
                          f"table carries CUDA {floor.major_minor()} or newer", cuda_at_least=floor,
                          framework=prof.framework, reason=f"{image} floats over {prof.name} releases",
                          sources=(prof.source,))

    @staticmethod
    def _assumed(prof: ImageProfile, release: Release) -> str:
        return assumed_note(prof.name, release_label(release), prof.as_of)

    def with_stated_version(self, image: str, table: ImageFacts | None, rf: RegistryFacts) -> ImageFacts | None:
        """``table`` (the facts of ``image`` by its tag), or, where the tag does not say which release it is (a
        floating tag, a version newer than the table) and the image's config states the family's version where its
        ``versionFrom`` says, the facts of that exact version."""
        if table is None or table.profile is None or (table.assumed is None and table.cuda_at_least is None):
            return table
        prof = next((p for p in self.images if p.name == table.profile), None)
        if prof is None or not prof.versions:
            return table
        for src in prof.version_from:
            text = rf.label(src.name) if src.kind == "label" else rf.env_value(src.name)
            read = src.read(text) if text else None
            if read is None:
                continue
            try:
                version = _tag_version(read[0])
            except VersionError:
                continue
            m = prof.regex.search(image)
            variant = read[1] or ((m.groupdict().get("variant") or None) if m is not None else None)
            stated = f"{version}, from its config's {src.kind} {src.name}"
            facts = self._release_facts(prof, image, version, variant, None)
            return replace(facts, origin=facts.origin.replace(f"image {image}", f"image {image} (version {stated})", 1),
                           stated_version=stated)
        return table

    def _resolve(self, prof: ImageProfile, image: str, groups: dict[str, str | None]) -> ImageFacts:
        origin = f"image {image}"
        if prof.no_cuda:
            return ImageFacts(image, prof.name, origin=origin, no_cuda_runtime=True, sources=(prof.source,))
        tag_cuda: Version | None = None
        if groups.get("cuda"):
            try:
                tag_cuda = parse_cuda_version(groups["cuda"])
            except VersionError:
                return ImageFacts(image, prof.name, origin=origin, reason=f"tag CUDA {groups['cuda']!r} unreadable")
        version: Version | None = None
        if "version" in groups:
            try:
                version = _tag_version(groups.get("version"))
            except VersionError:
                return ImageFacts(image, prof.name, origin=origin, reason="tag version unreadable")
        if prof.versions:
            return self._release_facts(prof, image, version, groups.get("variant") or None, tag_cuda)
        return self._facts(prof, image, None, version, tag_cuda, None)

    def _release_facts(self, prof: ImageProfile, image: str, version: Version | None, variant: str | None,
                       tag_cuda: Version | None) -> ImageFacts:
        """The facts of the release row for ``version``; for a version newer than every row of its variant, the
        newest row's, said to be assumed; else unknown (a version between rows, or older than them all)."""
        release = next((r for r in prof.versions if r.variant == variant
                        and (version is None or version in r.versions)), None)
        assumed = None
        if release is None and version is not None and prof.beyond(version, variant):
            release = prof.newest(variant)
            assumed = self._assumed(prof, release) if release is not None else None
        if release is None:
            shown = f"{version}{variant or ''}" if version is not None else variant or "this tag"
            return ImageFacts(image, prof.name, origin=f"image {image}", framework=prof.framework,
                              framework_version=version if prof.framework else None,
                              reason=f"version {shown} of {prof.name} is not in the image table")
        return self._facts(prof, image, release, version, tag_cuda, assumed)

    def _facts(self, prof: ImageProfile, image: str, release: Release | None, version: Version | None,
               tag_cuda: Version | None, assumed: str | None) -> ImageFacts:
        origin = f"image {image}" + (f", {assumed}" if assumed else "")
        if release is not None and release.no_cuda:
            return ImageFacts(image, prof.name, origin=origin, no_cuda_runtime=True, sources=(release.source,),
                              assumed=assumed)
        cuda = release.cuda if release is not None and release.cuda is not None else tag_cuda
        base = release.base if release is not None and release.base is not None else (
            cuda if prof.compat_libs else None)
        sources = tuple(dict.fromkeys(s for s in (prof.source, release.source if release else None) if s))
        binaries = self._binaries(release.binaries if release is not None and release.binaries is not None
                                  else prof.binaries, cuda)
        if base is not None and cuda is not None and base.major_minor() != cuda.major_minor():
            origin += f", whose wheels load CUDA {cuda.major_minor()} over its CUDA {base.major_minor()} base"
        framework_version = release.framework_version if release and release.framework_version else version
        if assumed and release is not None and release.framework_version:
            framework_version = None  # the row names its own framework's version, not the tag's: unknown
        return ImageFacts(image, prof.name, cuda=cuda, origin=origin,
                          reason="" if cuda is not None else f"{prof.name} does not say which CUDA this tag carries",
                          framework=prof.framework, framework_version=framework_version if prof.framework else None,
                          base_cuda=base, binaries=binaries,
                          require_cuda=prof.require_cuda if prof.require_cuda_set else base,
                          forward_compat=self._forward(release.forward if release else None, base), sources=sources,
                          assumed=assumed)

    def _binaries(self, specs: tuple[BinarySpec, ...], cuda: Version | None) -> tuple[Binary, ...]:
        out: list[Binary] = []
        for spec in specs:
            if spec.torch is None:
                out.append(Binary(spec.component, spec.sass, spec.ptx, spec.toolkit or cuda, spec.source,
                                  spec.optional))
                continue
            flavour = spec.torch_cuda or cuda
            wheel = next((w for w in self.torch_wheels if flavour is not None
                          and w.cuda.major_minor() == flavour.major_minor() and spec.torch in w.versions), None)
            if wheel is not None:  # a wheel the table does not know stays unknown: no binary, no guess
                name = f"torch {spec.torch}+cu{wheel.cuda.major}{wheel.cuda.minor}"
                out.append(Binary(name, wheel.sass, wheel.ptx, wheel.cuda, wheel.source))
        return tuple(out)

    def _forward(self, spec: ForwardSpec | None, base: Version | None) -> ForwardCompat | None:
        if spec is None and base is not None:
            # A row for this exact patch release first, then one for every X.Y.* release.
            spec = (self.forward_compat.get(base.parts[:3]) if len(base.parts) >= 3 else None) \
                or self.forward_compat.get(base.major_minor().parts)
        if spec is None:
            return None
        compat = spec.cuda or base
        if compat is None or not spec.branches:
            return None
        return ForwardCompat(compat, spec.branches, spec.brands, spec.source)

    def floors_of(self, framework: str, version: Version | None) -> list[FrameworkFloor]:
        """Every feature's floor for one framework version (``framework_floor`` of each feature the table has)."""
        features = dict.fromkeys(r.feature for r in self.framework_floors if r.framework == framework)
        return [f for f in (self.framework_floor(framework, feat, version) for feat in features) if f is not None]

    def framework_floor(self, framework: str, feature: str, version: Version | None) -> FrameworkFloor | None:
        """The floor a framework puts on ``feature`` in ``version`` (``min_cc`` None: none in that version), or
        None when the table says nothing about it: no row for that framework and feature, or a known version
        outside every row (a release newer than those read, a feature that did not exist yet). With the version
        unknown (``latest``, a custom build), only what holds for every version the table lists: the lowest floor
        among them, and none if some version has none. A floor is never guessed."""
        rows = [r for r in self.framework_floors if r.framework == framework and r.feature == feature]
        if not rows:
            return None
        if version is not None:
            # A version newer than every row stays unknown here: a range that ends can mean "not read further" or
            # "the format is gone" (vLLM's marlin), which the table does not tell apart.
            return next((r for r in rows if version in r.versions), None)
        if any(r.min_cc is None for r in rows):
            return FrameworkFloor(framework, feature, VersionRange(), None, rows[0].source)
        lowest = min(rows, key=lambda r: r.min_cc or Version((0,), "0"))
        return FrameworkFloor(framework, feature, VersionRange(), lowest.min_cc, lowest.source)


def _branch_floor(kb: KnowledgeBase, driver_cuda: Version) -> Version | None:
    branch = kb.lowest_branch_for(driver_cuda)
    return Version((branch, 999, 999), f"{branch}.x") if branch is not None else None


_MISSING: Any = object()  # a sentinel: equal to nothing a cache holds
MEMO_LIMIT = 100_000  # entries per memo: inputs come from manifests, so the key space is not ours to bound


def memo(cache: dict[K, V], key: K, compute: Callable[[], V]) -> V:
    """``cache[key]``, computed on first use (None is a valid answer); stops growing at MEMO_LIMIT."""
    found = cache.get(key, _MISSING)
    if found is _MISSING:
        found = compute()
        if len(cache) < MEMO_LIMIT:
            cache[key] = found
    return found  # type: ignore[no-any-return]


def _ver(text: Json, where: str) -> Version | None:
    if text is None:
        return None
    try:
        return parse_version(text)
    except VersionError as exc:
        raise KnowledgeError(f"{where}: {exc}") from None


_POST = re.compile(r"^(?P<release>v?\d+(?:\.\d+){0,2})\.post(?P<post>\d+)$", re.ASCII)


def _tag_version(text: str | None) -> Version:
    """A tag's version; a PEP 440 post release (``0.4.6.post2``) reads as a fourth number (0.4.6.2), which sorts
    where it belongs, after 0.4.6 and before 0.4.7. The tables write post releases that way."""
    m = _POST.match(text or "")
    if m is None:
        return parse_version(text)
    release = parse_version(m.group("release"))
    return Version((*release.parts, *(0,) * (3 - len(release.parts)), int(m.group("post"))), (text or "").lstrip("v"))


def mig_resource_profile(profile: str) -> str:
    """A MIG profile as the device plugin names its resource and GFD its product suffix: '+' becomes '.'
    (``1g.10gb+me`` -> ``1g.10gb.me``, ``1g.24gb+me.all`` -> ``1g.24gb.me.all``); ``-me`` is unchanged."""
    return profile.replace("+", ".")


def _driver(text: Json, where: str) -> Version:
    try:
        return parse_driver_version(text)
    except VersionError as exc:
        raise KnowledgeError(f"{where}: {exc}") from None


def _ccs(texts: list[Json]) -> tuple[Version, ...]:
    return tuple(sorted({_cc(t) for t in texts}))


def _binary_specs(rows: list[JsonObject], where: str) -> tuple[BinarySpec, ...]:
    return tuple(BinarySpec(b["component"], _ccs(b.get("sass", [])), _ccs(b.get("ptx", [])),
                            _ver(b.get("torch"), where), _ver(b.get("torchCuda"), where), b["source"],
                            _cuda(b["toolkit"], where) if b.get("toolkit") else None, bool(b.get("optional")))
                 for b in rows)


def _profile(row: JsonObject, trusted: bool = False) -> ImageProfile:
    where = f"image-profiles {row['name']}"
    regex = _regex(row["pattern"], where, lazy=trusted)
    if not trusted:
        groups = set(regex.groupindex)
        if not row.get("noCudaRuntime") and "cuda" not in groups and "version" not in groups \
                and not row.get("versions"):
            raise KnowledgeError(f"{where}: pattern needs a (?P<cuda>) or (?P<version>) group, or versions")
        if "version" in groups and not row.get("versions"):
            raise KnowledgeError(f"{where}: (?P<version>) needs a versions table")
    releases = []
    for v in row.get("versions", []):
        fwd = v.get("forwardCompat")
        releases.append(Release(
            VersionRange.of(v, where), v.get("variant"), _cuda(v["cuda"], where) if v.get("cuda") else None,
            _cuda(v["base"], where) if v.get("base") else None, _ver(v.get("frameworkVersion"), where),
            bool(v.get("noCudaRuntime", False)),
            _binary_specs(v["binaries"], where) if "binaries" in v else None,
            ForwardSpec(_cuda(fwd["cuda"], where) if fwd.get("cuda") else None,
                        frozenset(int(b) for b in fwd["branches"]), frozenset(fwd.get("brands", [])), fwd["source"])
            if fwd else None, v["source"]))
    return ImageProfile(row["name"], regex, row["source"], row.get("framework"), bool(row.get("noCudaRuntime")),
                        bool(row.get("compatLibs")), _cuda(row["requireCuda"], where) if row.get("requireCuda")
                        else None, "requireCuda" in row,
                        _regex(row["floating"], where, lazy=trusted) if row.get("floating") else None,
                        _binary_specs(row.get("binaries", []), where), tuple(releases), row.get("asOf"),
                        tuple(_version_source(f, where) for f in row.get("versionFrom", [])))


def _version_source(f: JsonObject, where: str) -> VersionSource:
    match = _regex(f["match"], f"{where} versionFrom") if f.get("match") else None
    if match is not None and "version" not in match.groupindex:
        raise KnowledgeError(f"{where}: versionFrom match {f['match']!r} needs a (?P<version>) group")
    compiled = match.compiled() if match is not None else None
    return VersionSource("label", str(f["label"]), compiled) if "label" in f \
        else VersionSource("env", str(f["env"]), compiled)


_LITERAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/:-_@=,;<>!%&~'\"`")
_ESCAPED_LITERAL = frozenset(".-/:@_+*?()[]{}|^$\\")  # \. and the like: the character itself
_CLASS_ESCAPE = frozenset("dwsDWSbBAZ")  # one character (or none) of a class, or an anchor: ends a run


def required_literal(pattern: str, flags: int = 0) -> str | None:
    """The longest run of plain characters (at least two, all ASCII) that every match of ``pattern`` contains, or
    None when it cannot say. Only what is certain counts: characters at the top level (outside groups and
    classes), not followed by a quantifier that allows zero of them (``?``, ``*``, ``{``), in a pattern without a
    top-level alternation, inline flags or verbose mode. Anything it does not recognise gives None."""
    if flags & re.VERBOSE:
        return None
    best, run, depth, i, n = "", "", 0, 0, len(pattern)

    def end() -> None:
        nonlocal best, run
        if len(run) > len(best):
            best = run
        run = ""

    while i < n:
        c = pattern[i]
        if c == "[":  # a class, at any depth: skipped whole
            end()
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            if j >= n:
                return None
            i = j + 1
            continue
        if c == "\\":
            if i + 1 >= n:
                return None
            escaped = pattern[i + 1]
            if depth:
                i += 2
                continue
            if escaped in _CLASS_ESCAPE:
                end()
                i += 2
                continue
            if escaped not in _ESCAPED_LITERAL:
                return None  # a back reference, \x41, \N{...}, \u...: not read here
            literal, i = escaped, i + 2
        elif c == "(":
            if i + 2 < n and pattern[i + 1] == "?" and pattern[i + 2] in "aiLmsux-":
                return None  # inline flags
            end()
            depth += 1
            i += 1
            continue
        elif c == ")":
            end()
            depth -= 1
            if depth < 0:
                return None
            i += 1
            continue
        elif c == "|":
            if not depth:
                return None
            i += 1
            continue
        elif depth:
            i += 1
            continue
        elif c == "{":  # a quantifier of what came before (already left out of the run)
            end()
            j = i + 1
            while j < n and (pattern[j].isdigit() or pattern[j] == ","):
                j += 1
            if j >= n or pattern[j] != "}":
                return None  # a literal brace: not read here
            i = j + 1
            continue
        elif c in _LITERAL:
            literal, i = c, i + 1
        else:  # . ^ $ * + ? and anything else
            end()
            i += 1
            continue
        following = pattern[i] if i < n else ""
        if following in ("?", "*", "{"):  # zero of it may match: not required
            end()
        elif following == "+":  # one at least, then maybe more: required, and the run ends with it
            run += literal
            end()
        else:
            run += literal
    end()
    return best if depth == 0 and len(best) >= 2 else None


def _never(_row: JsonObject) -> bool:
    return False


def _cc(text: Json) -> Version:
    try:
        return parse_compute_capability(text)
    except VersionError as exc:
        raise KnowledgeError(str(exc)) from None


def _regex(text: str, where: str, flags: int = 0, lazy: bool = False) -> TablePattern:
    try:
        return TablePattern(text, flags, lazy=lazy)
    except re.error as exc:
        raise KnowledgeError(f"{where}: bad regex {text!r}: {exc}") from None


_MIG_SUFFIX = re.compile(r"-MIG-\d+g\.\d+gb.*$", re.IGNORECASE | re.ASCII)


def normalise_product(label: str) -> str:
    """GFD product label -> plain product: drop ``-SHARED`` and ``-MIG-<profile>`` suffixes."""
    name = label.strip()
    if name.upper().endswith("-SHARED"):
        name = name[: -len("-SHARED")]
    return _MIG_SUFFIX.sub("", name)
