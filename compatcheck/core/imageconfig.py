"""What an image's own config says about its CUDA, and how that meets what the image table says.

An image built FROM nvidia/cuda or an NGC image inherits its base's environment: ``CUDA_VERSION`` (the CUDA
runtime it ships), ``NVIDIA_REQUIRE_CUDA`` (the ``cuda>=X.Y`` gate the NVIDIA container runtime checks before it
starts the container, and the ``brand=B,driver>=N,driver<N+1`` alternatives under which an older driver of branch
N runs it through the image's cuda-compat libraries) and, for NGC images, the ``com.nvidia.cuda.version`` label.
The config is read from the registry (or a cache, or a file made elsewhere) by ``compatcheck.io.imagefacts``
before evaluation; the core receives it as ``RegistryFacts`` in ``EvalContext.registry``, keyed by the image
reference as the container writes it, and ``image_facts_with_config`` turns it into ``ImageFacts``.

Which source decides, when both speak (the finding's origin says which, and why):

* the config alone, or the table with no CUDA for this tag: the config's ``CUDA_VERSION``;
* both, and they agree: the table's facts (richer: wheels, binaries), the config's gate and forward compatibility;
* the table says the image's framework loads another CUDA than its base (wheels built for cu128 over a 12.4
  base): the framework's CUDA is the runtime that meets the driver, and the config's ``CUDA_VERSION`` is its base;
* otherwise they disagree: the config is the image's own statement, the table a statement about its tag (a tag
  can be re-pushed, a row can be wrong), so the config wins and the table's binaries, written for another CUDA,
  are dropped (unknown, never a guess).

Pure: no I/O, no HTTP; never fetches anything and never guesses a version no source states.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from compatcheck.core.images import ForwardCompat, ImageFacts
from compatcheck.core.versions import Version, VersionError, parse_cuda_version

# "cuda>=12.4 brand=tesla,driver>=470,driver<471 brand=unknown,driver>=470,driver<471": space-separated
# alternatives (any one satisfies the gate), each a comma-separated conjunction.
_CUDA_TERM = re.compile(r"^cuda>=\s*(\d+\.\d+(?:\.\d+)?)$", re.ASCII)
_DRIVER_MIN = re.compile(r"^driver>=\s*(\d+)(?:\.\d+)*$", re.ASCII)
CUDA_LABEL = "com.nvidia.cuda.version"  # NGC images label their CUDA as well as setting CUDA_VERSION


@dataclass(frozen=True)
class RegistryFacts:
    """What one image's config says, as read for the platform the nodes run. ``digest`` is the platform
    manifest's digest (what a node pulls), ``config_digest`` the config blob's. ``source`` says where it was
    read (a registry, the cache, a file), for ``images explain``; findings name the digest, never the source, so
    a cold and a warm run word them the same."""

    reference: str
    digest: str | None
    platform: str
    env: tuple[tuple[str, str], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    config_digest: str | None = None
    source: str = "registry"

    def env_value(self, name: str) -> str | None:
        found = None
        for key, value in self.env:
            if key == name:
                found = value  # the last one wins, as in a Dockerfile
        return found

    def label(self, name: str) -> str | None:
        return next((v for k, v in self.labels if k == name), None)

    @property
    def short_digest(self) -> str:
        d = self.digest or self.config_digest
        return d[: len("sha256:") + 12] if d else "no digest"


@dataclass(frozen=True)
class RequireCuda:
    """``NVIDIA_REQUIRE_CUDA`` read: its ``cuda>=`` floor and the driver branches and brands of its alternatives."""

    cuda: Version | None
    branches: frozenset[int]
    brands: frozenset[str]


def parse_require_cuda(text: str) -> RequireCuda:
    """The gate and the forward-compatibility alternatives of an ``NVIDIA_REQUIRE_CUDA`` value. Terms it cannot
    read are ignored (the runtime ignores what it does not know too); a ``cuda>=`` it cannot read is no floor."""
    floor: Version | None = None
    branches: set[int] = set()
    brands: set[str] = set()
    for alternative in text.split():
        terms = [t.strip() for t in alternative.split(",") if t.strip()]
        cuda = [m.group(1) for t in terms if (m := _CUDA_TERM.match(t))]
        if cuda and len(terms) == 1:
            try:
                floor = parse_cuda_version(cuda[0])
            except VersionError:
                floor = None
            continue
        brand = next((t.split("=", 1)[1] for t in terms if t.startswith("brand=")), None)
        mins = [int(m.group(1)) for t in terms if (m := _DRIVER_MIN.match(t))]
        if brand is not None and mins:
            brands.add(brand)
            branches.update(mins)
    return RequireCuda(floor, frozenset(branches), frozenset(brands))


@dataclass(frozen=True)
class ConfigCuda:
    """The CUDA facts of a config: the runtime (``CUDA_VERSION``, else the NGC label), where that was read, the
    start gate (None: none, or ``NVIDIA_DISABLE_REQUIRE`` set in the image) and forward compatibility."""

    cuda: Version | None
    stated: str  # "CUDA_VERSION=12.4.1", or why there is no CUDA
    require: Version | None
    forward: ForwardCompat | None


def config_cuda(rf: RegistryFacts) -> ConfigCuda:
    cuda: Version | None = None
    stated = "no CUDA_VERSION"
    for name, value in (("CUDA_VERSION", rf.env_value("CUDA_VERSION")), (CUDA_LABEL, rf.label(CUDA_LABEL))):
        if value is None:
            continue
        try:
            cuda = parse_cuda_version(value)
            stated = f"{name}={value}"
            break
        except VersionError:
            stated = f"an unreadable {name}={value!r}"
    require_text = rf.env_value("NVIDIA_REQUIRE_CUDA")
    disabled = (rf.env_value("NVIDIA_DISABLE_REQUIRE") or "").strip().lower() in ("true", "1")
    parsed = parse_require_cuda(require_text) if require_text is not None else None
    require = parsed.cuda if parsed is not None and not disabled else None
    forward = None
    if parsed is not None and parsed.branches and cuda is not None:
        forward = ForwardCompat(cuda, parsed.branches, parsed.brands,
                                f"NVIDIA_REQUIRE_CUDA in the config of {rf.reference}"
                                + (f" (manifest {rf.short_digest})" if rf.digest else ""))
    return ConfigCuda(cuda, stated, require, forward)


def image_facts_with_config(image: str, table: ImageFacts | None, rf: RegistryFacts) -> ImageFacts:
    """``ImageFacts`` for ``image`` from its config ``rf`` and what the table says (``table``, None: no profile
    matches). See the module docstring for which decides."""
    cfg = config_cuda(rf)
    pinned = f" (manifest {rf.short_digest})" if rf.digest else ""
    source = f"{rf.reference}@{rf.digest}" if rf.digest else rf.reference
    if cfg.cuda is None:
        if table is not None:
            return table  # the config says nothing about CUDA: the table's facts stand
        return ImageFacts(image, origin=f"image {image}", reason=f"its config{pinned} sets {cfg.stated} and no "
                          f"image profile recognises {image!r}", sources=(source,))
    rt = cfg.cuda.major_minor()
    own = ImageFacts(image, cuda=cfg.cuda, origin=f"image {image}{pinned}, whose config sets {cfg.stated}",
                     base_cuda=cfg.cuda, require_cuda=cfg.require, forward_compat=cfg.forward, sources=(source,))
    if table is None:
        return own
    own = replace(own, profile=table.profile, framework=table.framework, framework_version=table.framework_version)
    if table.no_cuda_runtime:
        return replace(own, origin=f"{own.origin}; the image table ({table.profile}) says this image "
                       "carries no CUDA, but the config is the image's own")
    if table.cuda is None:
        if table.cuda_at_least is not None:
            return replace(own, origin=f"{own.origin} (a floating tag: the config is of the image it "
                           "names now)")
        return replace(own, sources=(*table.sources, source))
    tc = table.cuda.major_minor()
    base = table.base_cuda.major_minor() if table.base_cuda is not None else None
    forward = cfg.forward or (table.forward_compat if base == rt else None)
    if tc == rt:
        # Agreement: the table's facts stand (richer), the gate and forward compatibility are the config's.
        return replace(table, base_cuda=cfg.cuda, require_cuda=cfg.require, forward_compat=forward,
                       sources=(*table.sources, source))
    if base is not None and base != tc:
        # The framework loads its own CUDA over the base image's: that runtime meets the driver.
        return replace(table, base_cuda=cfg.cuda, require_cuda=cfg.require, forward_compat=cfg.forward,
                       origin=f"image {image}{pinned}, whose framework loads CUDA {tc} (image table: "
                              f"{table.profile}) over the CUDA its config sets ({cfg.stated}): the framework's runtime "
                              "is the one the driver must support", sources=(*table.sources, source))
    return replace(own, origin=f"{own.origin}; the image table ({table.profile}) says CUDA {tc} for this "
                   "tag, but the config is the image's own", sources=(*table.sources, source))
