"""The CUDA knowledge base: typed, indexed views of the data tables in ``rules/data``.

Built from already-loaded table dicts (``loader`` reads the files); pure lookups and the version
verdict live here so the linter, ``compatcheck versions`` and the webhook give one answer.
Must not read files, print, or know about Kubernetes objects.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from compatcheck.core.jsonutil import Json, JsonObject
from compatcheck.core.versions import (
    Version,
    VersionError,
    parse_compute_capability,
    parse_cuda_version,
    parse_driver_version,
    parse_version,
)

K = TypeVar("K")
V = TypeVar("V")


class KnowledgeError(ValueError):
    """A data table whose content cannot be used (bad version text, bad regex, duplicate key)."""


@dataclass(frozen=True)
class VersionRow:
    """One row of an image pattern's versions table, parsed once."""

    equals: Version | None
    lo: Version | None
    hi: Version | None
    cuda: Version


@dataclass(frozen=True)
class ImagePattern:
    name: str
    regex: re.Pattern[str]
    source: str
    versions: tuple[VersionRow, ...] = ()


@dataclass(frozen=True)
class GpuProduct:
    regex: re.Pattern[str]
    product: str
    compute_capability: Version
    datacenter: bool


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
    images: list[ImagePattern] = field(default_factory=list)
    mig_profiles: list[tuple[re.Pattern[str], str, frozenset[str]]] = field(default_factory=list)
    _image_cache: dict[str, ImageCuda | None] = field(default_factory=dict, repr=False)
    _branch_cache: dict[Version, int | None] = field(default_factory=dict, repr=False)
    _verdict_cache: dict[tuple[Version, Version | None, Version | None], DriverVerdict] = field(
        default_factory=dict, repr=False)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_tables(cls, tables: dict[str, list[JsonObject]]) -> KnowledgeBase:
        """``tables`` maps table name -> rows (admin rows first). Raises KnowledgeError on bad content."""
        kb = cls()
        for row in tables.get("cuda-toolkits", []):
            kb.toolkits.append((_cuda(row["version"], "cuda-toolkits"),
                                _driver(row["toolkitDriver"], "cuda-toolkits")))
        kb.toolkits.sort()
        for row in tables.get("cuda-majors", []):
            floor = row.get("mvcMinDriver")
            kb.mvc[int(row["major"])] = _driver(floor, "cuda-majors") if floor is not None else None
        seen: set[int] = set()
        for row in tables.get("driver-branches", []):
            branch = int(row["branch"])
            if branch in seen:
                continue  # an admin row shadows the built-in one
            seen.add(branch)
            kb.branches.append((branch, _cuda(row["maxCuda"], "driver-branches")))
        kb.branches.sort()
        for row in tables.get("gpu-products", []):
            kb.products.append(GpuProduct(_regex(row["match"], "gpu-products", re.IGNORECASE), row["product"],
                                          _cc(row["computeCapability"]), bool(row.get("datacenter", False))))
        for row in tables.get("architectures", []):
            cc = _cc(row["computeCapability"])
            kb.architectures.setdefault(cc, Architecture(
                cc, row["architecture"],
                _cuda(row["firstCuda"], "architectures") if row.get("firstCuda") else None,
                _cuda(row["removedIn"], "architectures") if row.get("removedIn") else None))
        for row in tables.get("features", []):
            kb.features.setdefault(row["feature"], _cc(row["minComputeCapability"]))
        for row in tables.get("image-patterns", []):
            regex = _regex(row["pattern"], f"image-patterns {row['name']}")
            groups = set(regex.groupindex)
            if "cuda" not in groups and "version" not in groups:
                raise KnowledgeError(f"image-patterns {row['name']}: pattern needs a (?P<cuda>) or (?P<version>) group")
            if "version" in groups and not row.get("versions"):
                raise KnowledgeError(f"image-patterns {row['name']}: (?P<version>) needs a versions table")
            where = f"image-patterns {row['name']}"
            versions = tuple(
                VersionRow(_ver(v.get("equals"), where), _ver(v.get("from"), where), _ver(v.get("before"), where),
                           _cuda(v["cuda"], where))
                for v in row.get("versions", []))
            kb.images.append(ImagePattern(row["name"], regex, row["source"], versions))
        for row in tables.get("mig-profiles", []):
            kb.mig_profiles.append((_regex(row["match"], "mig-profiles", re.IGNORECASE), row["gpu"],
                                    frozenset(row["profiles"])))
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
        key = cuda.major_minor()
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
        """Profiles of one product, or None when the product is not in the table."""
        if product is None:
            return None
        name = normalise_product(product)
        for regex, _gpu, profiles in self.mig_profiles:
            if regex.search(name):
                return profiles
        return None

    def all_mig_profiles(self) -> frozenset[str]:
        out: set[str] = set()
        for _r, _g, profiles in self.mig_profiles:
            out |= profiles
        return frozenset(out)

    # ------------------------------------------------------------------ images
    def image_cuda(self, image: str) -> ImageCuda | None:
        """CUDA runtime of an image reference per the pattern table; None if no pattern matches.
        Cached: the same images recur across thousands of manifests."""
        return memo(self._image_cache, image, lambda: self._image_cuda(image))

    def _image_cuda(self, image: str) -> ImageCuda | None:
        for pat in self.images:
            m = pat.regex.search(image)
            if not m:
                continue
            groups = m.groupdict()
            origin = f"image {image}"
            if groups.get("cuda"):
                try:
                    return ImageCuda(parse_cuda_version(groups["cuda"]), origin)
                except VersionError:
                    return ImageCuda(None, origin, f"tag CUDA {groups['cuda']!r} unreadable")
            try:
                version = parse_version(groups.get("version"))
            except VersionError:
                return ImageCuda(None, origin, "tag version unreadable")
            for row in pat.versions:
                if row.equals is not None:
                    if row.equals == version:
                        return ImageCuda(row.cuda, origin)
                elif (row.lo is None or version >= row.lo) and (row.hi is None or version < row.hi):
                    return ImageCuda(row.cuda, origin)
            return ImageCuda(None, origin, f"version {version} of {pat.name} is not in the image table")
        return None


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


def _driver(text: Json, where: str) -> Version:
    try:
        return parse_driver_version(text)
    except VersionError as exc:
        raise KnowledgeError(f"{where}: {exc}") from None


def _cc(text: Json) -> Version:
    try:
        return parse_compute_capability(text)
    except VersionError as exc:
        raise KnowledgeError(str(exc)) from None


def _regex(text: str, where: str, flags: int = 0) -> re.Pattern[str]:
    try:
        return re.compile(text, flags)
    except re.error as exc:
        raise KnowledgeError(f"{where}: bad regex {text!r}: {exc}") from None


_MIG_SUFFIX = re.compile(r"-MIG-\d+g\.\d+gb.*$", re.IGNORECASE)


def normalise_product(label: str) -> str:
    """GFD product label -> plain product: drop ``-SHARED`` and ``-MIG-<profile>`` suffixes."""
    name = label.strip()
    if name.upper().endswith("-SHARED"):
        name = name[: -len("-SHARED")]
    return _MIG_SUFFIX.sub("", name)
