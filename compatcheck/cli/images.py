"""``compatcheck images explain IMAGE``: what compatcheck knows about an image (the CUDA its framework loads, the
framework and version, the GPU architectures of its binaries, forward compatibility, the framework's compute
capability floors) and where each fact comes from: the image's own config (registry and digest, the cache, or a
facts file) and the image table's row. ``compatcheck images fetch IMAGE... -o FILE`` reads configs from their
registries into a facts file for ``lint --image-facts`` (CI with network, pre-commit without).
``compatcheck rules explain`` stays for rules."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from compatcheck.cli.common import print_diagnostics
from compatcheck.cli.lint import add_registry_options, registry_settings
from compatcheck.io.setup import EXIT_FINDINGS, EXIT_OK, CommandError, configure

if TYPE_CHECKING:  # imported by the commands, not by building the parser (``--version``, ``lint``)
    from compatcheck.core.config import RegistrySettings
    from compatcheck.core.imageconfig import RegistryFacts
    from compatcheck.core.images import ImageFacts
    from compatcheck.core.jsonutil import JsonObject
    from compatcheck.core.knowledge import FrameworkFloor, KnowledgeBase
    from compatcheck.io import imagefacts

# Config env and labels worth showing: what decides CUDA, and the NVIDIA runtime's own settings.
_SHOWN_ENV = ("CUDA_VERSION", "NVIDIA_REQUIRE_CUDA", "NVIDIA_DISABLE_REQUIRE", "NV_CUDA_LIB_VERSION",
              "NV_CUDA_CUDART_VERSION", "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_VISIBLE_DEVICES", "PYTORCH_VERSION",
              "NVIDIA_PYTORCH_VERSION", "TRITON_SERVER_VERSION", "VLLM_VERSION")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    images = sub.add_parser("images", help="what compatcheck knows about container images")
    isub = images.add_subparsers(dest="images_command", required=True)
    explain = isub.add_parser("explain", help="the facts about an image and where each comes from",
                              epilog="exit codes: 0 a profile matched, 1 nothing is known about the image")
    explain.add_argument("image", nargs="+", help="image reference(s), e.g. vllm/vllm-openai:v0.9.2")
    explain.add_argument("--rules-dir", metavar="DIR", action="append", default=[],
                         help="admin rule directory whose data tables (image profiles...) come first")
    explain.add_argument("--format", choices=["text", "json"], default="text")
    explain.add_argument("--config", metavar="FILE", help="config file (its registry: section)")
    add_registry_options(explain)
    explain.set_defaults(handler=explain_command)

    fetch = isub.add_parser("fetch", help="read images' configs from their registries into a facts file",
                            epilog="exit codes: 0 every image read, 1 some could not be read (notes say why), "
                                   "2 usage errors")
    fetch.add_argument("image", nargs="+", help="image reference(s), e.g. registry.corp/ml/serving:2025-10-14")
    fetch.add_argument("-o", "--output", metavar="FILE", default="-", help="facts file to write (default: stdout)")
    fetch.add_argument("--config", metavar="FILE", help="config file (its registry: section)")
    fetch.add_argument("--registry-ca", metavar="FILE", help="CA bundle (PEM) added to the system's for registries")
    fetch.add_argument("--platform", metavar="OS/ARCH", default=None,
                       help="platform read from multi-platform images (default: registry.platform, else linux/amd64)")
    fetch.add_argument("--offline", action="store_true", help="from the cache only")
    fetch.set_defaults(handler=fetch_command, registry_lookups=True, image_facts=[])


def _floors(kb: KnowledgeBase, facts: ImageFacts) -> list[FrameworkFloor]:
    return kb.floors_of(facts.framework, facts.framework_version) if facts.framework else []


def _config(rf: RegistryFacts | None) -> JsonObject | None:
    if rf is None:
        return None
    return {"source": rf.source, "digest": rf.digest, "configDigest": rf.config_digest, "platform": rf.platform,
            "env": {k: v for k, v in rf.env if k in _SHOWN_ENV or k.startswith("NV_CUDA")},
            "labels": {k: v for k, v in rf.labels if k.startswith(("com.nvidia.", "org.opencontainers.image."))}}


def describe(kb: KnowledgeBase, image: str, rf: RegistryFacts | None = None) -> JsonObject:
    """The JSON form: every fact with its source; absent facts are null (unknown, not none). ``rf``: what the
    image's own config says, when it was read."""
    from compatcheck.core.imageconfig import image_facts_with_config
    from compatcheck.core.knowledge import VersionRange

    table = kb.image_facts(image)
    facts = image_facts_with_config(image, kb.with_stated_version(image, table, rf), rf) if rf is not None else table
    if facts is None:
        return {"image": image, "profile": None, "known": False, "config": None,
                "reason": "no image profile recognises it; add one in your rules data directory"}
    fwd = facts.forward_compat
    return {
        "image": image, "profile": facts.profile, "known": True, "sources": list(facts.sources),
        "config": _config(rf), "tableProfile": table.profile if table is not None else None,
        "noCudaRuntime": facts.no_cuda_runtime,
        "cuda": str(facts.cuda) if facts.cuda else None, "cudaOrigin": facts.origin,
        "cudaAtLeast": str(facts.cuda_at_least) if facts.cuda_at_least else None,
        "resolution": _resolution(facts), "assumed": facts.assumed, "statedVersion": facts.stated_version,
        "reason": facts.reason or None,
        "baseCuda": str(facts.base_cuda) if facts.base_cuda else None,
        "framework": facts.framework,
        "frameworkVersion": str(facts.framework_version) if facts.framework_version else None,
        "binaries": [{"component": b.component, "sass": [str(v) for v in b.sass], "ptx": [str(v) for v in b.ptx],
                      "toolkit": str(b.toolkit) if b.toolkit else None, "source": b.source}
                     for b in facts.binaries] or None,
        "forwardCompat": {"compatCuda": str(fwd.compat_cuda), "branches": sorted(fwd.branches),
                          "brands": sorted(fwd.brands), "source": fwd.source} if fwd else None,
        "floors": [{"feature": f.feature, "minComputeCapability": str(f.min_cc) if f.min_cc else None,
                    "versions": "this version" if f.versions != VersionRange() else "every version",
                    "source": f.source} for f in _floors(kb, facts)],
    }


def _resolution(facts: ImageFacts) -> str:
    """Which path decided the image's release: its config's version, the newest row (assumed), or its own row."""
    if facts.stated_version is not None:
        return "config-version" + ("-assumed" if facts.assumed else "")
    if facts.assumed is not None:
        return "floating-newest" if "a floating tag" in facts.origin else "newer-than-table"
    if facts.cuda_at_least is not None:
        return "floating-lower-bound"
    return "tag"


_RESOLUTION = {
    "tag": "the tag's own row of the image table",
    "newer-than-table": "the tag is newer than every row of the image table: decided from the newest row",
    "floating-newest": "a floating tag: decided from the newest row of the image table",
    "floating-lower-bound": "a floating tag: only the lowest CUDA of the family's releases holds",
    "config-version": "the version the image's own config states, looked up in the image table",
    "config-version-assumed": "the version the image's own config states, newer than every row: decided from the "
                              "newest row",
}


def _text(d: JsonObject) -> str:
    lines = [f"{d['image']}"]
    if not d["known"]:
        return "\n".join([*lines, f"  unknown: {d['reason']}", ""])
    cfg = d.get("config")
    if cfg:
        lines.append(f"  config: {cfg['platform']} manifest {cfg['digest'] or '(digest unknown)'}, config "
                     f"{cfg['configDigest'] or '(digest unknown)'}, from {cfg['source']}")
        for k, v in cfg["env"].items():
            lines.append(f"    env {k}={v}")
        for k, v in cfg["labels"].items():
            lines.append(f"    label {k}={v}")
    if cfg:  # what the table says beside the config (which decides is in the CUDA runtime's origin below)
        table = d.get("tableProfile")
        lines.append(f"  image table: {'profile ' + table if table else 'no profile recognises it'}")
    if d["profile"] or d["sources"]:
        lines.append(f"  profile: {d['profile'] or '(none)'} (sources: {', '.join(d['sources'])})")
    if d["profile"] and not d["noCudaRuntime"] and (d["cuda"] or d["cudaAtLeast"]):
        lines.append(f"  release: {_RESOLUTION[d['resolution']]}"
                     + (f" ({d['statedVersion']})" if d["statedVersion"] else "")
                     + (f"; {d['assumed']}" if d["assumed"] else ""))
    if d["noCudaRuntime"]:
        return "\n".join([*lines, "  carries no CUDA runtime (an OS or tool image): no driver or GPU rule applies", ""])
    if d["cudaAtLeast"]:
        lines.append(f"  CUDA runtime: {d['cudaAtLeast']} or newer ({d['reason']}: only the lowest release's holds)")
    else:
        lines.append(f"  CUDA runtime: {d['cuda'] or 'unknown'}" + (f" ({d['reason']})" if d["reason"] else "")
                     + (f" — from {d['cudaOrigin']}" if d["cuda"] else ""))
    if d["baseCuda"]:
        lines.append(f"  base image CUDA (cuda-compat, NVIDIA_REQUIRE_CUDA): {d['baseCuda']}")
    if d["framework"]:
        lines.append(f"  framework: {d['framework']} {d['frameworkVersion'] or '(version unknown)'}")
    if d["binaries"]:
        lines.append("  GPU binaries:")
        for b in d["binaries"]:
            sass = ", ".join(f"sm_{v.replace('.', '')}" for v in b["sass"]) or "none"
            ptx = f"; PTX {', '.join('compute_' + v.replace('.', '') for v in b['ptx'])}" if b["ptx"] else ""
            lines.append(f"    {b['component']}: {sass}{ptx} ({b['source']})")
    else:
        lines.append("  GPU binaries: unknown")
    fwd = d["forwardCompat"]
    if fwd:
        lines.append(f"  forward compatibility: cuda-compat CUDA {fwd['compatCuda']} on data-center GPUs with driver "
                     f"branches {', '.join(str(b) for b in fwd['branches'])} ({fwd['source']})")
    for f in d["floors"]:
        floor = f"compute capability >= {f['minComputeCapability']}" if f["minComputeCapability"] else "no floor"
        lines.append(f"  {f['feature']}: {floor} ({f['versions']}; {f['source']})")
    return "\n".join([*lines, ""])


def _lookup(images: list[str], settings: RegistrySettings, files: list[str]) -> imagefacts.LookupResult:
    """Facts of ``images`` per ``settings`` (network with lookups, the cache, ``files``)."""
    from compatcheck.core.images import parse_reference
    from compatcheck.core.model import Diagnostic
    from compatcheck.io import imagefacts
    from compatcheck.io.imagecache import ImageCache

    entries: list[imagefacts.FileEntry] = []
    problems: list[Diagnostic] = []
    for spec in files:
        try:
            entries.extend(imagefacts.load_facts_file(spec))
        except imagefacts.FactsFileError as exc:
            problems.extend(exc.problems)
    if problems:
        raise CommandError(problems=problems)
    for image in images:
        if parse_reference(image) is None:
            raise CommandError(f"{image!r} is not an image reference")
    use_cache = settings.lookups or settings.offline
    cache = ImageCache(tag_ttl=settings.tag_ttl, max_entries=settings.cache_entries) if use_cache else None
    platform = imagefacts.choose_platform(settings.platform, ())
    return imagefacts.lookup({i: imagefacts.Where() for i in images}, settings, platform=platform, files=entries,
                             cache=cache, network=settings.lookups and not settings.offline)


def explain_command(args: argparse.Namespace) -> int:
    import json

    from compatcheck.io.config import find_config

    configured = configure(args.config or find_config(), args.rules_dir)
    kb = configured.loaded.kb
    settings = registry_settings(args, configured.config.registry)
    found: dict[str, RegistryFacts] = {}
    if settings.lookups or settings.offline or args.image_facts:
        result = _lookup(args.image, settings, args.image_facts)
        print_diagnostics(result.notes)
        found = result.facts
    described = [describe(kb, image, found.get(image)) for image in args.image]
    if args.format == "json":
        print(json.dumps(described if len(described) > 1 else described[0], indent=2))
    else:
        sys.stdout.write("\n".join(_text(d) for d in described))
        if not (settings.lookups or settings.offline or args.image_facts) and not all(d["known"] for d in described):
            print("(registry lookups are off: --registry-lookups reads the image's own config)", file=sys.stderr)
    return EXIT_OK if all(d["known"] for d in described) else EXIT_FINDINGS


def fetch_command(args: argparse.Namespace) -> int:
    from compatcheck.io import imagefacts
    from compatcheck.io.config import find_config

    configured = configure(args.config or find_config(), [])
    settings = registry_settings(args, configured.config.registry)
    result = _lookup(args.image, settings, [])
    print_diagnostics(result.notes)
    text = imagefacts.dump_facts(result)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        try:
            imagefacts.write_atomic(args.output, text)
        except OSError as exc:
            raise CommandError(f"cannot write {args.output}: {exc.strerror or exc}") from None
        print(f"wrote {len(result.facts)} of {len(args.image)} images to {args.output}", file=sys.stderr)
    return EXIT_OK if len(result.facts) == len(args.image) else EXIT_FINDINGS
