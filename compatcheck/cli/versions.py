"""``compatcheck versions``: what the driver/runtime matrix says about one pair, and why."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from compatcheck.io.setup import EXIT_FINDINGS, EXIT_OK, CommandError

if TYPE_CHECKING:  # the command imports what it uses when it runs (start-up: tests/test_startup.py)
    from compatcheck.core.knowledge import DriverVerdict
    from compatcheck.core.policy import DriverPolicy


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    versions = sub.add_parser("versions", help="what the driver/runtime matrix says")
    versions.add_argument("--driver", required=True, help="driver version, e.g. 535.104.05")
    versions.add_argument("--runtime", required=True, help="CUDA runtime of the image, e.g. 12.4")
    versions.add_argument("--format", choices=["text", "json"], default="text")
    versions.add_argument("--config", help="config file whose driverPolicy applies (default: .compatcheck.yaml found "
                                           "walking up)")
    versions.set_defaults(handler=versions_command)


def versions_command(args: argparse.Namespace) -> int:
    import json

    from compatcheck.core.versions import VersionError, parse_cuda_version, parse_driver_version
    from compatcheck.io.config import find_config
    from compatcheck.io.setup import configure

    configured = configure(args.config or find_config(), [])
    try:
        driver = parse_driver_version(args.driver)
        runtime = parse_cuda_version(args.runtime)
    except VersionError as exc:
        raise CommandError(str(exc)) from None
    v = configured.loaded.kb.verdict(runtime, driver=driver)
    allowed, policy = _by_policy(v, configured.config.driver_policy)
    driver_cuda = str(v.driver_cuda.major_minor()) if v.driver_cuda else None
    if args.format == "json":
        print(json.dumps({"driver": str(driver), "driverCuda": driver_cuda, "runtime": str(runtime),
                          "verdict": v.verdict, "reasons": list(v.reasons), "allowedByPolicy": allowed,
                          "policy": policy}, indent=2))
    else:
        print(f"driver {driver} (CUDA {driver_cuda or 'unknown'}) + runtime {runtime}: {v.verdict}")
        for r in v.reasons:
            print(f"  - {r}")
        print(f"  policy: {policy}")
    return EXIT_OK if allowed else EXIT_FINDINGS


def _by_policy(v: DriverVerdict, policy: DriverPolicy) -> tuple[bool, str]:
    """Whether the driver policy (docs/driver-policy.md) accepts the verdict, and why, in words. Forward compatibility
    depends on the image (its cuda-compat libraries and the branches they list), which this command does not know."""
    if v.verdict == "compatible":
        return True, "allowed: the driver supports the runtime"
    from compatcheck.core.policy import MINOR_VERSION_COMPAT_KEY

    if v.verdict == "minor-version-compatibility":
        if policy.minor_version_compatibility:
            return True, (f"allowed with a warning: {MINOR_VERSION_COMPAT_KEY} declares minor-version compatibility "
                          "(cuda-driver-needs-minor-version-compat)")
        return False, ("an error: the platform requires a driver at least as new as the runtime, and "
                       f"{MINOR_VERSION_COMPAT_KEY} is not declared (cuda-driver-behind-runtime)")
    if v.verdict == "incompatible":
        return False, ("an error: the driver cannot run the runtime (cuda-driver-too-old), unless an image's "
                       "declared forward compatibility bridges it")
    return False, "unknown: the driver's CUDA version is not known"
