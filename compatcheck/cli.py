"""Command line: ``compatcheck lint | versions | rules``.

Only this module knows about argv, stdout/stderr and exit codes. Exit codes: 0 = nothing at or above
the failure threshold, 1 = findings at or above it, 2 = usage, config, rule or input errors (other
files are still linted and reported).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from compatcheck import __version__
from compatcheck.model import Severity

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="compatcheck",
        description="CUDA compatibility linter for Kubernetes GPU workloads.",
        epilog="exit codes: 0 clean, 1 findings at or above --fail-on, 2 usage/config/rule/input errors",
    )
    p.add_argument("--version", action="version", version=f"compatcheck {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    lint = sub.add_parser("lint", help="lint manifests", epilog="exit codes: 0 clean, 1 findings, 2 errors")
    lint.add_argument("paths", nargs="+", help="files, directories (recursive *.yaml *.yml *.json) or - for stdin")
    lint.add_argument("--nodes", metavar="FILE", help="kubectl get nodes -o yaml|json output, or a ClusterProfile")
    lint.add_argument("--crl", metavar="PATH", action="append", default=[],
                      help="file or directory with cf-crl CustomResourceLimitation ConfigMaps (repeatable)")
    lint.add_argument("--rules-dir", metavar="DIR", action="append", default=[],
                      help="extra rule directory: <dir>/*.yaml rules, <dir>/data/*.yaml tables (repeatable)")
    lint.add_argument("--format", choices=["text", "json"], default="text")
    lint.add_argument("--fail-on", choices=["error", "warning", "info"], default="error")
    lint.add_argument("--rule", metavar="ID", action="append", help="run only these rules (repeatable)")
    lint.add_argument("--max-file-size", metavar="MIB", type=int, default=16, help="largest file read (MiB)")
    lint.add_argument("--color", choices=["auto", "always", "never"], default="auto")

    versions = sub.add_parser("versions", help="what the driver/runtime matrix says")
    versions.add_argument("--driver", required=True, help="driver version, e.g. 535.104.05")
    versions.add_argument("--runtime", required=True, help="CUDA runtime of the image, e.g. 12.4")
    versions.add_argument("--format", choices=["text", "json"], default="text")

    rules = sub.add_parser("rules", help="list, explain or validate rules")
    rsub = rules.add_subparsers(dest="rules_command", required=True)
    rl = rsub.add_parser("list")
    rl.add_argument("--format", choices=["text", "json", "markdown"], default="text")
    rl.add_argument("--rules-dir", action="append", default=[])
    re_ = rsub.add_parser("explain")
    re_.add_argument("rule_id", nargs="?", help="rule id (or read from stdin, e.g. piped from rules list)")
    re_.add_argument("--rules-dir", action="append", default=[])
    rv = rsub.add_parser("validate", help="validate rule directories (built-ins included)")
    rv.add_argument("dirs", nargs="*")
    return p


def _err(msg: str) -> None:
    print(f"compatcheck: error: {msg}", file=sys.stderr)


def _load(rule_dirs: list[str], validate_builtin: bool = False) -> Any:
    from compatcheck.loader import RuleLoadError, load_rules

    try:
        return load_rules(rule_dirs, validate_builtin=validate_builtin)
    except RuleLoadError as exc:
        for prob in exc.problems:
            where = f"{prob.path}:{prob.line}" if prob.line else prob.path
            print(f"{where}: error: {prob.message}", file=sys.stderr)
        return None


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "lint":
            return _lint(args)
        if args.command == "versions":
            return _versions(args)
        return _rules(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


def _lint(args: argparse.Namespace) -> int:
    from compatcheck.lint import LintOptions, run_lint
    from compatcheck.report import FORMATTERS

    loaded = _load(args.rules_dir)
    if loaded is None:
        return EXIT_ERROR
    if args.rule:
        unknown = [r for r in args.rule if r not in loaded.ruleset.rules]
        if unknown:
            _err(f"unknown rule(s): {', '.join(unknown)}")
            return EXIT_ERROR
    if args.max_file_size <= 0:
        _err("--max-file-size must be positive")
        return EXIT_ERROR
    options = LintOptions(nodes=args.nodes, crl=args.crl, max_bytes=args.max_file_size * 1024 * 1024,
                          only=set(args.rule) if args.rule else None)
    report = run_lint(args.paths, loaded, options)
    report.color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty()
                                              and not os.environ.get("NO_COLOR"))
    sys.stdout.write(FORMATTERS[args.format](report))
    threshold = Severity(args.fail_on).rank
    if report.errors:
        return EXIT_ERROR
    if any(f.severity.rank >= threshold for f in report.findings):
        return EXIT_FINDINGS
    return EXIT_OK


def _versions(args: argparse.Namespace) -> int:
    from compatcheck.versions import VersionError, parse_cuda_version, parse_driver_version

    loaded = _load([])
    if loaded is None:
        return EXIT_ERROR
    try:
        driver = parse_driver_version(args.driver)
        runtime = parse_cuda_version(args.runtime)
    except VersionError as exc:
        _err(str(exc))
        return EXIT_ERROR
    v = loaded.kb.verdict(runtime, driver=driver)
    out = {"driver": str(driver), "driverCuda": str(v.driver_cuda.major_minor()) if v.driver_cuda else None,
           "runtime": str(runtime), "verdict": v.verdict, "reasons": list(v.reasons)}
    if args.format == "json":
        print(json.dumps(out, indent=2))
    else:
        print(f"driver {out['driver']} (CUDA {out['driverCuda'] or 'unknown'}) + runtime {out['runtime']}: "
              f"{out['verdict']}")
        for r in out["reasons"]:
            print(f"  - {r}")
    return EXIT_OK if v.verdict in ("compatible", "minor-version-compatibility") else EXIT_FINDINGS


def _rules(args: argparse.Namespace) -> int:
    from compatcheck import docs

    if args.rules_command == "validate":
        loaded = _load(args.dirs, validate_builtin=True)
        if loaded is None:
            return EXIT_ERROR
        print(f"{len(loaded.ruleset)} rules and {sum(len(v) for v in loaded.tables.values())} table rows are valid")
        return EXIT_OK
    loaded = _load(args.rules_dir)
    if loaded is None:
        return EXIT_ERROR
    if args.rules_command == "list":
        if args.format == "markdown":
            sys.stdout.write(docs.markdown(loaded.ruleset))
        elif args.format == "json":
            print(json.dumps([docs.rule_json(r) for r in loaded.ruleset], indent=2))
        else:
            for r in loaded.ruleset:
                print(f"{r.id:<28} {r.severity.value:<8} {r.summary}")
        return EXIT_OK
    ids = [args.rule_id] if args.rule_id else [ln.split()[0] for ln in sys.stdin.read().splitlines() if ln.strip()]
    status = EXIT_OK
    for rid in ids:
        if rid not in loaded.ruleset.rules:
            _err(f"no such rule: {rid!r} (see compatcheck rules list)")
            status = EXIT_ERROR
            continue
        sys.stdout.write(docs.explain(loaded.ruleset.get(rid)))
    return status
