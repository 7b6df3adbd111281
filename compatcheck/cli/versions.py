"""``compatcheck versions``: what the driver/runtime matrix says about one pair, and why; ``compatcheck versions
lowest-driver``: the lowest driver branch that runs the given workloads on a pool of a --nodes view."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from compatcheck.cli.common import print_diagnostics
from compatcheck.cli.lint import _add_input_options, _require_input, _setup
from compatcheck.io.setup import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, CommandError

if TYPE_CHECKING:  # the commands import what they use when they run (start-up: tests/test_startup.py)
    from compatcheck.core.knowledge import DriverVerdict
    from compatcheck.core.policy import DriverPolicy
    from compatcheck.io.lint import ClusterChange


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    versions = sub.add_parser("versions", help="what the driver/runtime matrix says",
                              description="compatcheck versions --driver D --runtime R: what the matrix says of one "
                                          "pair; compatcheck versions lowest-driver: the lowest branch for a pool")
    versions.add_argument("--driver", help="driver version, e.g. 535.104.05")
    versions.add_argument("--runtime", help="CUDA runtime of the image, e.g. 12.4")
    versions.add_argument("--format", choices=["text", "json"], default="text")
    versions.add_argument("--config", help="config file whose driverPolicy applies (default: .compatcheck.yaml found "
                                           "walking up)")
    versions.set_defaults(handler=versions_command)
    helpers = versions.add_subparsers(dest="helper")
    low = helpers.add_parser("lowest-driver", help="the lowest driver branch that runs the workloads on a pool",
                             epilog="exit codes: 0 the lowest branch runs everything, 1 some workloads still fail "
                                    "on it (listed), 2 errors")
    _add_input_options(low)  # the lint's inputs: files, --nodes, --config, ...
    low.add_argument("--selector", "-l", required=True, metavar="SELECTOR",
                     help="the pool: a label selector of the --nodes view, e.g. pool=t4")
    low.add_argument("--fail-on", choices=["error", "warning", "info"], help="what counts as failing")
    low.add_argument("--format", choices=["text", "json"], default="text")
    low.set_defaults(handler=lowest_driver_command)


def versions_command(args: argparse.Namespace) -> int:
    import json

    from compatcheck.core.versions import VersionError, parse_cuda_version, parse_driver_version
    from compatcheck.io.config import find_config
    from compatcheck.io.setup import configure

    if not args.driver or not args.runtime:
        raise CommandError("give --driver and --runtime (or a helper: compatcheck versions lowest-driver --help)")
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


def lowest_driver_command(args: argparse.Namespace) -> int:
    import json

    from compatcheck.core.model import Severity
    from compatcheck.core.selectors import SelectorError, parse_selector
    from compatcheck.core.whatif import WhatIf, apply_what_ifs, branch_drivers, failing, lowest_driver
    from compatcheck.io.lint import run_lint_variants

    config, loaded, options, texts = _setup(args)
    if not options.nodes:
        raise CommandError("lowest-driver changes a pool of the cluster view: give it with --nodes FILE")
    try:
        selector = parse_selector(args.selector)
    except SelectorError as exc:
        raise CommandError(f"--selector: {exc}") from None
    drivers = branch_drivers(loaded.kb)
    kb = loaded.kb
    matched: list[int] = []
    problems: list[Any] = []

    def on(driver: Any) -> ClusterChange:
        def change(cluster: Any) -> Any:
            applied = apply_what_ifs(cluster, [WhatIf(f"{args.selector}:driver={driver}", selector, "driver",
                                                      driver=driver)], kb)
            matched.append(next(iter(applied.matched.values())))
            problems.extend(p for p in applied.problems if p.severity is Severity.ERROR)
            return applied.cluster
        return change

    reports = run_lint_variants(args.paths, loaded, options, [on(d) for d in drivers], texts=texts)
    _require_input(args, reports[0], texts, options)
    if problems:  # the same for every driver: say it once
        print_diagnostics(problems[:1])
        return EXIT_ERROR
    print_diagnostics(reports[0].diagnostics())
    if reports[0].errors:
        return EXIT_ERROR
    threshold = Severity(args.fail_on or config.fail_on.value).rank
    per = [(d, failing((f.obj, f.rule_id) for f in r.findings if f.severity.rank >= threshold))
           for d, r in zip(drivers, reports, strict=True)]
    found = lowest_driver(per)
    assert found.driver is not None
    cuda, _exact = kb.driver_cuda(found.driver)
    nodes = matched[0] if matched else 0
    if args.format == "json":
        out: dict[str, Any] = {
            "selector": selector.text, "nodes": nodes, "lowestBranch": found.driver.major,
            "driver": str(found.driver), "cuda": str(cuda) if cuda else None,
            "workloads": [{"object": _obj(k), "lowestBranch": d.major, "driver": str(d)} for k, d in found.needs],
            "stillFailing": [e.to_json() for e in found.still_failing]}
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        print(f"lowest driver branch for nodes matching {selector.text!r} ({nodes} node{'s' if nodes != 1 else ''}): "
              f"R{found.driver.major} (tried {found.driver}, CUDA {cuda or 'unknown'})")
        for k, d in sorted(found.needs, key=lambda kd: (-kd[1].major, kd[0])):
            print(f"  {k[0]} {k[1] + '/' if k[1] else ''}{k[2]} needs R{d.major}")
        if found.still_failing:
            print(f"still failing on R{found.driver.major} (no newer driver fixes them):")
            for e in found.still_failing:
                print(f"  {e.workload[0]} {e.workload[1] + '/' if e.workload[1] else ''}{e.workload[2]}: "
                      f"{', '.join(e.rules)}")
    return EXIT_FINDINGS if found.still_failing else EXIT_OK


def _obj(key: tuple[str, str, str]) -> dict[str, str | None]:
    return {"kind": key[0], "namespace": key[1] or None, "name": key[2]}
