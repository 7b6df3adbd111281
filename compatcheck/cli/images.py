"""``compatcheck images explain IMAGE``: what compatcheck knows about an image (the CUDA its framework loads, the
framework and version, the GPU architectures of its binaries, forward compatibility, the framework's compute
capability floors) and where each fact comes from. ``compatcheck rules explain`` stays for rules."""

from __future__ import annotations

import argparse
import json
import sys

from compatcheck.core.images import ImageFacts
from compatcheck.core.jsonutil import JsonObject
from compatcheck.core.knowledge import FrameworkFloor, KnowledgeBase, VersionRange
from compatcheck.io.setup import EXIT_FINDINGS, EXIT_OK, rules


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    images = sub.add_parser("images", help="what compatcheck knows about container images")
    isub = images.add_subparsers(dest="images_command", required=True)
    explain = isub.add_parser("explain", help="the facts about an image and where each comes from",
                              epilog="exit codes: 0 a profile matched, 1 nothing is known about the image")
    explain.add_argument("image", nargs="+", help="image reference(s), e.g. vllm/vllm-openai:v0.9.2")
    explain.add_argument("--rules-dir", metavar="DIR", action="append", default=[],
                         help="admin rule directory whose data tables (image profiles...) come first")
    explain.add_argument("--format", choices=["text", "json"], default="text")
    explain.set_defaults(handler=explain_command)


def _floors(kb: KnowledgeBase, facts: ImageFacts) -> list[FrameworkFloor]:
    return kb.floors_of(facts.framework, facts.framework_version) if facts.framework else []


def describe(kb: KnowledgeBase, image: str) -> JsonObject:
    """The JSON form: every fact with its source; absent facts are null (unknown, not none)."""
    facts = kb.image_facts(image)
    if facts is None:
        return {"image": image, "profile": None, "known": False,
                "reason": "no image profile recognises it; add one in your rules data directory"}
    fwd = facts.forward_compat
    return {
        "image": image, "profile": facts.profile, "known": True, "sources": list(facts.sources),
        "noCudaRuntime": facts.no_cuda_runtime,
        "cuda": str(facts.cuda) if facts.cuda else None, "cudaOrigin": facts.origin,
        "cudaAtLeast": str(facts.cuda_at_least) if facts.cuda_at_least else None,
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


def _text(d: JsonObject) -> str:
    lines = [f"{d['image']}"]
    if not d["known"]:
        return "\n".join([*lines, f"  unknown: {d['reason']}", ""])
    lines.append(f"  profile: {d['profile']} (sources: {', '.join(d['sources'])})")
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


def explain_command(args: argparse.Namespace) -> int:
    kb = rules(args.rules_dir).kb
    described = [describe(kb, image) for image in args.image]
    if args.format == "json":
        print(json.dumps(described if len(described) > 1 else described[0], indent=2))
    else:
        sys.stdout.write("\n".join(_text(d) for d in described))
    return EXIT_OK if all(d["known"] for d in described) else EXIT_FINDINGS
