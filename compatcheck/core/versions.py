"""Parsing and comparing CUDA and NVIDIA driver versions.

Pure functions; no tables (those live in ``knowledge``). Versions are compared numerically field by
field, missing fields counting as zero, exactly as libnvidia-container compares ``cuda>=`` terms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache, total_ordering

_VERSION_RE = re.compile(r"^v?(\d{1,4})(?:\.(\d{1,4}))?(?:\.(\d{1,4}))?(?:\.(\d{1,4}))?$", re.ASCII)


class VersionError(ValueError):
    """A version string that is not a plain dotted number (``12.x``, ``latest``, ``99999``...)."""


@total_ordering
@dataclass(frozen=True, slots=True)
class Version:
    parts: tuple[int, ...]
    text: str
    # The comparison key (missing fields as zero), computed once: versions are hashed and compared in every
    # driver verdict lookup.
    _cmp: tuple[int, ...] = field(init=False, repr=False, compare=False, hash=False)
    _mm: Version | None = field(init=False, repr=False, compare=False, hash=False)  # major_minor(), made once

    def __post_init__(self) -> None:
        object.__setattr__(self, "_cmp", self.parts + (0,) * (4 - len(self.parts)))
        object.__setattr__(self, "_mm", self if len(self.parts) == 2 else None)

    @property
    def major(self) -> int:
        return self.parts[0]

    @property
    def minor(self) -> int:
        return self.parts[1] if len(self.parts) > 1 else 0

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._cmp < other._cmp

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._cmp == other._cmp

    def __hash__(self) -> int:
        return hash(self._cmp)

    def __str__(self) -> str:
        return self.text

    def major_minor(self) -> Version:
        mm = self._mm
        if mm is None:
            mm = Version((self.major, self.minor), f"{self.major}.{self.minor}")
            object.__setattr__(self, "_mm", mm)
        return mm


def parse_version(text: object, *, what: str = "version") -> Version:
    """Parse ``12``, ``12.4``, ``12.4.1``, ``535.104.05``; raise VersionError with a readable reason."""
    if isinstance(text, bool) or text is None:
        raise VersionError(f"{what} {text!r} is not a version number")
    if isinstance(text, int):
        text = str(text)
    elif isinstance(text, float):
        # YAML turns an unquoted 12.4 into a float; 12.10 would become 12.1, so warn-free only for short ones.
        text = repr(text)
    if not isinstance(text, str):
        raise VersionError(f"{what} {text!r} is not a version number")
    found = _PARSED.get(text)
    if found is not None:
        return found
    stripped = text.strip()
    m = _VERSION_RE.match(stripped)
    if not m:
        raise VersionError(f"{what} {text!r} is not a version number (expected digits and dots, e.g. 12.4)")
    parts = tuple(int(g) for g in m.groups() if g is not None)
    version = Version(parts, stripped.lstrip("v"))
    if len(_PARSED) < _PARSED_LIMIT:
        _PARSED[text] = version
    return version


# Versions are immutable and the tables write the same ones many times (1,668 parses, ~600 distinct, at every
# start): each text is parsed once. Bounded, since the webhook parses what requests carry.
_PARSED: dict[str, Version] = {}
_PARSED_LIMIT = 8192


@lru_cache(maxsize=4096)
def cached_version(text: str) -> Version | None:
    """Memoised ``try_parse_version`` for strings that recur (rule params, label values)."""
    return try_parse_version(text)


def try_parse_version(text: object) -> Version | None:
    try:
        return parse_version(text)
    except VersionError:
        return None


def parse_cuda_version(text: object) -> Version:
    v = parse_version(text, what="CUDA version")
    if not 1 <= v.major <= 99:
        raise VersionError(f"CUDA version {text!r} is out of range")
    return v


def parse_driver_version(text: object) -> Version:
    v = parse_version(text, what="driver version")
    if not 100 <= v.major <= 9999:
        raise VersionError(f"driver version {text!r} is out of range (expected a branch such as 535.104.05)")
    return v


def parse_compute_capability(text: object) -> Version:
    v = parse_version(text, what="compute capability")
    if len(v.parts) > 2 or not 1 <= v.major <= 99:
        raise VersionError(f"compute capability {text!r} is not of the form MAJOR.MINOR")
    return v.major_minor()
