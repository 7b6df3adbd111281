"""``compatcheck versions``: what the driver/runtime matrix says about one pair, and why."""

from __future__ import annotations

import argparse

from compatcheck.io.setup import EXIT_FINDINGS, EXIT_OK, CommandError, rules


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    versions = sub.add_parser("versions", help="what the driver/runtime matrix says")
    versions.add_argument("--driver", required=True, help="driver version, e.g. 535.104.05")
    versions.add_argument("--runtime", required=True, help="CUDA runtime of the image, e.g. 12.4")
    versions.add_argument("--format", choices=["text", "json"], default="text")
    versions.set_defaults(handler=versions_command)


def versions_command(args: argparse.Namespace) -> int:
    import json

    from compatcheck.core.versions import VersionError, parse_cuda_version, parse_driver_version

    loaded = rules([])
    try:
        driver = parse_driver_version(args.driver)
        runtime = parse_cuda_version(args.runtime)
    except VersionError as exc:
        raise CommandError(str(exc)) from None
    v = loaded.kb.verdict(runtime, driver=driver)
    driver_cuda = str(v.driver_cuda.major_minor()) if v.driver_cuda else None
    if args.format == "json":
        print(json.dumps({"driver": str(driver), "driverCuda": driver_cuda, "runtime": str(runtime),
                          "verdict": v.verdict, "reasons": list(v.reasons)}, indent=2))
    else:
        print(f"driver {driver} (CUDA {driver_cuda or 'unknown'}) + runtime {runtime}: {v.verdict}")
        for r in v.reasons:
            print(f"  - {r}")
    return EXIT_OK if v.verdict in ("compatible", "minor-version-compatibility") else EXIT_FINDINGS
