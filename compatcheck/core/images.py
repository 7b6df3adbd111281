"""What is inside a container image, as far as the knowledge tables say: the CUDA runtime its framework loads, the
framework and its version, the GPU architectures its binaries carry (SASS, and PTX that a driver can JIT), and
whether it can run on an older driver through forward compatibility (cuda-compat in the image, and the
``brand=...,driver>=N,driver<N+1`` alternatives of its NVIDIA_REQUIRE_CUDA).

The facts come from rows of the ``image-profiles`` table, matched against the image reference, and from the
``torch-wheels`` and ``forward-compat`` tables those rows refer to. Every fact carries the source it came from,
and a fact no row states stays unknown: ``ImageFacts`` never guesses. Pure: ``KnowledgeBase.image_facts`` builds
them; this module defines what they are and how architectures and forward compatibility are judged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from compatcheck.core.versions import Version

# A reference as Docker reads it: [registry/]path[:tag][@digest]. The first component is a registry when it has a
# dot or a colon or is "localhost"; Docker Hub names without a namespace live under library/.
_REFERENCE = re.compile(r"^(?P<name>[^@\s]+?)(?::(?P<tag>[\w][\w.-]{0,127}))?(?:@(?P<digest>[a-z0-9]+:[a-f0-9]+))?$")


@dataclass(frozen=True)
class ImageRef:
    registry: str
    repository: str
    tag: str | None
    digest: str | None

    @property
    def name(self) -> str:
        """``registry/repository``, the canonical name (``docker.io/library/ubuntu`` for ``ubuntu``)."""
        return f"{self.registry}/{self.repository}"


def canonical(ref: ImageRef) -> str:
    """The reference spelt out: ``docker.io/library/ubuntu:latest`` for ``ubuntu``, ``name@digest`` when it has a
    digest (the digest decides; a tag beside it is only a label)."""
    return f"{ref.name}@{ref.digest}" if ref.digest else f"{ref.name}:{ref.tag or 'latest'}"


def parse_reference(text: str) -> ImageRef | None:
    """An image reference split as Docker does; None when it is not one (a template placeholder, spaces)."""
    m = _REFERENCE.match(text.strip())
    if not m:
        return None
    name = m.group("name")
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        registry, repository = first, rest
    else:
        registry, repository = "docker.io", name
    if registry == "docker.io" and "/" not in repository:
        repository = f"library/{repository}"
    if not re.fullmatch(r"[a-z0-9]+(?:[._-]+[a-z0-9]+)*(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*", repository):
        return None
    return ImageRef(registry, repository, m.group("tag"), m.group("digest"))


@dataclass(frozen=True)
class Binary:
    """One set of GPU binaries in an image (the PyTorch wheel, a framework's own kernels): the architectures it
    has machine code for (SASS), those it has PTX for, and the CUDA toolkit that produced the PTX (a driver must
    support that CUDA to JIT-compile it)."""

    component: str
    sass: tuple[Version, ...]
    ptx: tuple[Version, ...] = ()
    toolkit: Version | None = None
    source: str = ""
    # Kernels the framework uses when they fit and does without otherwise (a fallback path): informative only,
    # never a reason for gpu-arch-not-in-image.
    optional: bool = False

    def runs_on(self, cc: Version) -> bool | None:
        """Whether machine code for ``cc`` is there: SASS of the same major and a minor not above it (sm_80 code
        runs on 8.6 and 8.9, never on 9.0); None when only PTX could serve (the driver decides)."""
        if any(s.major == cc.major and s.minor <= cc.minor for s in self.sass):
            return True
        if any(p <= cc for p in self.ptx):
            return None
        return False

    def describe(self) -> str:
        archs = ", ".join(f"sm_{s.major}{s.minor}" for s in self.sass) or "none"
        ptx = f"; PTX {', '.join(f'compute_{p.major}{p.minor}' for p in self.ptx)}" if self.ptx else ""
        return f"{self.component}: {archs}{ptx}"


@dataclass(frozen=True)
class ForwardCompat:
    """The forward-compatibility alternatives an image declares (NVIDIA_REQUIRE_CUDA's ``brand=B,driver>=N,
    driver<N+1``) and the CUDA its cuda-compat libraries bring. Only data-center GPUs qualify (NVIDIA's
    forward-compatibility page), and only drivers of a listed branch."""

    compat_cuda: Version
    branches: frozenset[int]
    brands: frozenset[str]
    source: str

    def bridges(self, runtime: Version, driver: Version | None, datacenter: bool | None) -> bool:
        """Whether a driver too old for ``runtime`` still runs it through the image's cuda-compat libraries."""
        return (driver is not None and datacenter is True and driver.major in self.branches
                and self.compat_cuda.major_minor() >= runtime.major_minor())


@dataclass(frozen=True)
class ImageFacts:
    """Everything the tables say about one image reference. ``cuda`` is the runtime the framework loads (a
    framework's wheels can load a newer CUDA than the base image's CUDA_VERSION: ``origin`` says which was used
    and why). ``binaries`` empty means the architectures are unknown, not that there are none."""

    reference: str
    profile: str | None = None
    cuda: Version | None = None
    # A floating tag (latest): no exact CUDA, but every release of the family carries at least this one.
    cuda_at_least: Version | None = None
    origin: str = ""
    reason: str = ""  # why the CUDA runtime is unknown
    no_cuda_runtime: bool = False  # an OS or tool image with no CUDA at all: nothing to match a driver against
    framework: str | None = None
    framework_version: Version | None = None
    base_cuda: Version | None = None
    # The cuda>=X.Y of the image's NVIDIA_REQUIRE_CUDA, which the NVIDIA container runtime checks before it starts
    # the container (an image built FROM nvidia/cuda inherits its base's); None: no such gate known.
    require_cuda: Version | None = None
    binaries: tuple[Binary, ...] = ()
    forward_compat: ForwardCompat | None = None
    sources: tuple[str, ...] = field(default=(), compare=False)
    # Facts taken from the newest release the table knows, for a tag newer than every row or a floating tag (latest,
    # main, nightly): what was assumed, in words (the origin says it too); None: the tag's own row decided.
    assumed: str | None = None
    # The version the image's own config states (registry lookups; the family's versionFrom), in words.
    stated_version: str | None = None

    def missing_arch(self, cc: Version) -> list[Binary]:
        """The required binaries with neither machine code nor PTX for compute capability ``cc``."""
        return [b for b in self.binaries if not b.optional and b.runs_on(cc) is False]

    def ptx_only(self, cc: Version) -> list[Binary]:
        """The required binaries with no machine code for ``cc`` but PTX that a new enough driver can JIT."""
        return [b for b in self.binaries if not b.optional and b.runs_on(cc) is None]
