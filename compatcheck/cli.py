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


FORMATS = ("text", "json", "sarif", "junit", "github")


def _add_input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", help="files, directories (recursive *.yaml *.yml *.json) or - for stdin")
    p.add_argument("--config", metavar="FILE", help="config file (default: .compatcheck.yaml found walking up)")
    p.add_argument("--nodes", metavar="FILE", help="kubectl get nodes -o yaml|json output, or a ClusterProfile")
    p.add_argument("--crl", metavar="PATH", action="append", default=[],
                   help="file or directory with cf-crl CustomResourceLimitation ConfigMaps (repeatable)")
    p.add_argument("--rules-dir", metavar="DIR", action="append", default=[],
                   help="extra rule directory: <dir>/*.yaml rules, <dir>/data/*.yaml tables (repeatable)")
    p.add_argument("--rule", metavar="ID", action="append", help="run only these rules (repeatable)")
    p.add_argument("--max-file-size", metavar="MIB", type=int, default=16, help="largest file read (MiB)")
    p.add_argument("--helm-chart", metavar="DIR", help="render a chart with `helm template` and lint the result")
    p.add_argument("-f", "--values", metavar="FILE", action="append", default=[], help="helm values file (repeatable)")
    p.add_argument("--set", metavar="K=V", action="append", default=[], help="helm --set (repeatable)")
    p.add_argument("--release", metavar="NAME", default="release", help="helm release name (default: release)")
    p.add_argument("--namespace", metavar="NS", help="helm --namespace")
    p.add_argument("--kustomize", metavar="DIR", help="render with `kubectl kustomize DIR` and lint the result")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="compatcheck",
        description="CUDA compatibility linter for Kubernetes GPU workloads.",
        epilog="exit codes: 0 clean, 1 findings at or above --fail-on, 2 usage/config/rule/input errors",
    )
    p.add_argument("--version", action="version", version=f"compatcheck {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    lint = sub.add_parser("lint", help="lint manifests",
                          epilog="exit codes: 0 clean, 1 findings at or above --fail-on, 2 errors")
    _add_input_options(lint)
    lint.add_argument("--format", action="append", choices=FORMATS,
                      help="output format; repeat with --output to write several (default: text, or github "
                           "when GITHUB_ACTIONS=true)")
    lint.add_argument("-o", "--output", action="append", default=[], metavar="FILE",
                      help="write the matching --format to FILE (pairs in order; '-' = stdout)")
    lint.add_argument("--fail-on", choices=["error", "warning", "info"], help="threshold for exit code 1")
    lint.add_argument("--show-suppressed", action="store_true", help="list suppressed findings and why")
    lint.add_argument("--baseline", metavar="FILE", help="report only findings not in this baseline")
    lint.add_argument("--write-baseline", metavar="FILE", help="write the current findings as a baseline and exit 0")
    lint.add_argument("--color", choices=["auto", "always", "never"], default="auto")

    fix = sub.add_parser("fix", help="apply safe fixes to the files in place (ruamel round-trip)")
    _add_input_options(fix)
    fix.add_argument("--unsafe-fixes", action="store_true", help="also apply unsafe fixes")
    fix.add_argument("--diff", action="store_true", help="print a unified diff instead of writing")

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
    rv = rsub.add_parser("validate", help="validate rule directories and admin files (built-ins included)")
    rv.add_argument("dirs", nargs="*")
    rv.add_argument("--files", nargs="*", default=[], help="rule or data-table files (pre-commit passes these)")
    return p


def _err(msg: str) -> None:
    print(f"compatcheck: error: {msg}", file=sys.stderr)


def _print_problems(problems: Any) -> None:
    for prob in problems:
        where = f"{prob.path}:{prob.line}" if prob.line else prob.path
        print(f"{where}: error: {prob.message}", file=sys.stderr)


def _load(rule_dirs: list[str], validate_builtin: bool = False) -> Any:
    from compatcheck.loader import RuleLoadError, load_rules

    try:
        return load_rules(rule_dirs, validate_builtin=validate_builtin)
    except RuleLoadError as exc:
        _print_problems(exc.problems)
        return None


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command in ("lint", "fix"):
            return _lint_or_fix(args)
        if args.command == "versions":
            return _versions(args)
        return _rules(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


def _setup(args: argparse.Namespace) -> Any:
    """Config, rules and lint options shared by lint and fix; None after printing errors."""
    from compatcheck.config import ConfigError, apply_to_ruleset, find_config, load_config
    from compatcheck.lint import LintOptions

    try:
        config = load_config(args.config or find_config())
    except ConfigError as exc:
        _print_problems(exc.problems)
        return None
    loaded = _load([*config.rule_dirs, *args.rules_dir])
    if loaded is None:
        return None
    try:
        loaded.ruleset = apply_to_ruleset(config, loaded.ruleset)
    except ConfigError as exc:
        _print_problems(exc.problems)
        return None
    if args.rule:
        unknown = [r for r in args.rule if r not in loaded.ruleset.rules]
        if unknown:
            _err(f"unknown or disabled rule(s): {', '.join(unknown)}")
            return None
    if args.max_file_size <= 0:
        _err("--max-file-size must be positive")
        return None
    options = LintOptions(nodes=args.nodes or config.nodes, crl=[*config.crl, *args.crl],
                          max_bytes=args.max_file_size * 1024 * 1024, only=set(args.rule) if args.rule else None,
                          config=config)
    return config, loaded, options


def _render_input(args: argparse.Namespace, options: Any) -> Any:
    """Rendered text for --helm-chart / --kustomize (with its source map), or None for plain paths."""
    from compatcheck.render import RenderError, helm_template, kustomize

    try:
        if args.helm_chart:
            rendered = helm_template(args.helm_chart, args.values, args.set, args.release, args.namespace)
        elif args.kustomize:
            rendered = kustomize(args.kustomize)
        else:
            return None
    except RenderError as exc:
        _err(str(exc))
        return False
    options.source_map = rendered.locate
    return {rendered.name: rendered.text}


def _lint_or_fix(args: argparse.Namespace) -> int:
    from compatcheck import baseline as baseline_mod
    from compatcheck.lint import run_lint

    if not args.paths and not args.helm_chart and not args.kustomize:
        _err("give files or directories to lint (or - for stdin, --helm-chart DIR, --kustomize DIR)")
        return EXIT_ERROR
    setup = _setup(args)
    if setup is None:
        return EXIT_ERROR
    config, loaded, options = setup
    texts = _render_input(args, options)
    if texts is False:
        return EXIT_ERROR
    if args.command == "fix":
        return _fix(args, loaded, options, texts)
    baseline_file = args.baseline or (config.baseline if not args.write_baseline else None)
    if baseline_file:
        try:
            options.baseline = baseline_mod.load(baseline_file)
        except baseline_mod.BaselineError as exc:
            _err(str(exc))
            return EXIT_ERROR
    report = run_lint(args.paths, loaded, options, texts=texts)
    report.docs_url = config.docs_url
    report.tool_version = __version__
    report.show_suppressed = args.show_suppressed
    if args.write_baseline:
        with open(args.write_baseline, "w", encoding="utf-8") as fh:
            fh.write(baseline_mod.dump(report.findings))
        print(f"wrote {len(report.findings)} findings to {args.write_baseline}", file=sys.stderr)
        return EXIT_ERROR if report.errors else EXIT_OK
    status = _emit(args, report)
    if status is not None:
        return status
    threshold = Severity(args.fail_on or config.fail_on.value).rank
    if report.errors:
        return EXIT_ERROR
    if any(f.severity.rank >= threshold for f in report.findings):
        return EXIT_FINDINGS
    return EXIT_OK


def _emit(args: argparse.Namespace, report: Any) -> int | None:
    from compatcheck.report import FORMATTERS

    formats = list(args.format or [])
    if not formats:
        formats = ["github" if os.environ.get("GITHUB_ACTIONS") == "true" else "text"]
    if len(args.output) > len(formats):
        _err("each --output needs its own --format before it (e.g. --format sarif -o out.sarif --format text)")
        return EXIT_ERROR
    targets = args.output + ["-"] * (len(formats) - len(args.output))
    if targets.count("-") > 1:
        _err("only one format can go to stdout: give the others an --output FILE")
        return EXIT_ERROR
    for fmt, target in zip(formats, targets, strict=True):
        report.color = fmt == "text" and target == "-" and (
            args.color == "always" or (args.color == "auto" and sys.stdout.isatty() and not os.environ.get("NO_COLOR")))
        text = FORMATTERS[fmt](report)
        if target == "-":
            sys.stdout.write(text)
        else:
            try:
                with open(target, "w", encoding="utf-8") as fh:
                    fh.write(text)
            except OSError as exc:
                _err(f"cannot write {target}: {exc.strerror or exc}")
                return EXIT_ERROR
    return None


def _fix(args: argparse.Namespace, loaded: Any, options: Any, texts: Any) -> int:
    from compatcheck.fixer import fix_file
    from compatcheck.lint import LintedObject, run_lint
    from compatcheck.model import Applicability

    if texts is not None:
        _err("fix works on files; rendered --helm-chart/--kustomize output has no file to write back")
        return EXIT_ERROR
    keep: list[LintedObject] = []
    report = run_lint(args.paths, loaded, options, keep=keep)
    for e in report.errors:
        print(f"{e.path}{':' + str(e.line) if e.line else ''}: error: {e.message}", file=sys.stderr)
    allow = {Applicability.SAFE} | ({Applicability.UNSAFE} if args.unsafe_fixes else set())
    by_file: dict[str, list[LintedObject]] = {}
    for lo in keep:
        by_file.setdefault(lo.parsed.path, []).append(lo)
    applied = 0
    for path, objects in by_file.items():
        text = objects[0].parsed.text or ""
        result = fix_file(path, text, objects, allow, options.config.fix_allowed)
        for f, why in result.skipped:
            print(f"{path}: skipped fix for {f.rule_id}: {why}", file=sys.stderr)
        if not result.changed:
            continue
        applied += len(result.applied)
        if args.diff:
            sys.stdout.write(result.diff())
        elif path == "-":
            sys.stdout.write(result.fixed)
        else:
            tmp = f"{path}.compatcheck.tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(result.fixed)
            os.replace(tmp, path)  # atomic: never a half-written manifest
            print(f"fixed {path}: " + ", ".join(sorted({f.rule_id for f in result.applied})), file=sys.stderr)
    remaining = len(report.findings) - applied
    print(f"{applied} fixes applied{' (diff only)' if args.diff else ''}; {remaining} findings left", file=sys.stderr)
    return EXIT_ERROR if report.errors else EXIT_OK


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


def _dirs_for_files(files: list[str]) -> list[str]:
    """Rule directories holding the given files (a data table's directory is its parent's parent)."""
    out = []
    for f in files:
        d = os.path.dirname(os.path.abspath(f))
        out.append(os.path.dirname(d) if os.path.basename(d) == "data" else d)
    return out


def _rules(args: argparse.Namespace) -> int:
    from compatcheck import docs

    if args.rules_command == "validate":
        dirs = list(args.dirs)
        if args.files:
            dirs += _dirs_for_files(args.files)
        loaded = _load(sorted(set(dirs)), validate_builtin=True)
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
