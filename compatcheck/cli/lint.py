"""``compatcheck lint`` and ``compatcheck fix``: parse, run the lint (``compatcheck.io.lint``), write the reports
or the fixed files, exit. Exit codes: 0 nothing at or above the failure threshold, 1 findings at or above it,
2 usage, config, rule or input errors (the other files are still linted and reported)."""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import TYPE_CHECKING

from compatcheck import __version__
from compatcheck.cli.common import print_diagnostics, started, suggestion
from compatcheck.io.setup import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, CommandError, configure

if TYPE_CHECKING:  # the engine is imported by the commands, not by building the parser (``--version``)
    from compatcheck.core.config import Config, RegistrySettings
    from compatcheck.core.knowledge import KnowledgeBase
    from compatcheck.core.whatif import WhatIf, WorkloadKey
    from compatcheck.io.lint import LintedObject, LintOptions
    from compatcheck.io.loader import Loaded
    from compatcheck.report.model import LintReport

FORMATS = ("text", "json", "sarif", "junit", "github", "html")


def _add_input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", help="files, directories (recursive *.yaml *.yml *.json) or - for stdin")
    p.add_argument("--config", metavar="FILE", help="config file (default: .compatcheck.yaml found walking up)")
    p.add_argument("--nodes", metavar="FILE", help="kubectl get nodes -o yaml|json output, or a ClusterProfile")
    p.add_argument("--crl", metavar="PATH", action="append", default=[],
                   help="file or directory with cf-crl CustomResourceLimitation ConfigMaps (repeatable)")
    p.add_argument("--rules-dir", metavar="DIR", action="append", default=[],
                   help="extra rule directory: <dir>/*.yaml rules, <dir>/data/*.yaml tables (repeatable)")
    p.add_argument("--data", metavar="builtin|active|auto|DIR",
                   help="the knowledge to use: the built-in tables, the data bundle last pulled (compatcheck data "
                        "pull), auto (that bundle when there is one, else built-in), or a rules directory or bundle "
                        "layout (default: $COMPATCHECK_DATA, the config's data.use, else auto)")
    p.add_argument("--rule", metavar="ID", action="append", help="run only these rules (repeatable)")
    p.add_argument("--max-file-size", metavar="MIB", type=int, default=16, help="largest file read (MiB)")
    p.add_argument("--exclude", metavar="PATTERN", action="append", default=[],
                   help="leave out input paths matching this .gitignore-style pattern, relative to the working "
                        "directory (repeatable; adds to the config file's exclude:)")
    p.add_argument("--helm-chart", metavar="DIR", help="render a chart with `helm template` and lint the result")
    p.add_argument("-f", "--values", metavar="FILE", action="append", default=[], help="helm values file (repeatable)")
    p.add_argument("--set", metavar="K=V", action="append", default=[], help="helm --set (repeatable)")
    p.add_argument("--release", metavar="NAME", default="release", help="helm release name (default: release)")
    p.add_argument("--namespace", metavar="NS", help="helm --namespace")
    p.add_argument("--kustomize", metavar="DIR", help="render with `kubectl kustomize DIR` and lint the result")
    add_registry_options(p)


def add_registry_options(p: argparse.ArgumentParser) -> None:
    """Reading images' configs (the config file's registry: section sets the defaults)."""
    g = p.add_argument_group("image configs (registry lookups)")
    look = g.add_mutually_exclusive_group()
    look.add_argument("--registry-lookups", dest="registry_lookups", action="store_true", default=None,
                      help="read GPU containers' image configs (CUDA_VERSION, NVIDIA_REQUIRE_CUDA) from their "
                           "registries, through the cache (default: registry.lookups in the config, else off)")
    look.add_argument("--no-registry-lookups", dest="registry_lookups", action="store_false",
                      help="no registry request and no cache (--image-facts files are still read)")
    look.add_argument("--offline", action="store_true", help="use only the cache and --image-facts files")
    g.add_argument("--image-facts", metavar="FILE", action="append", default=[],
                   help="image facts made elsewhere: a `compatcheck images fetch -o` file, or IMAGE=FILE for an "
                        "image config (skopeo inspect --config); repeatable")
    g.add_argument("--registry-ca", metavar="FILE", help="CA bundle (PEM) added to the system's for registries")
    g.add_argument("--platform", metavar="OS/ARCH", help="platform read from multi-platform images (default: "
                                                         "registry.platform, auto: the GPU nodes' architecture)")


def registry_settings(args: argparse.Namespace, settings: RegistrySettings) -> RegistrySettings:
    """The config's registry settings with the command line's flags over them."""
    from dataclasses import replace

    if args.offline:
        settings = replace(settings, offline=True)
    elif args.registry_lookups is not None:
        settings = replace(settings, lookups=args.registry_lookups, offline=False)
    if args.registry_ca:
        if not os.path.isfile(args.registry_ca):
            raise CommandError(f"--registry-ca {args.registry_ca}: no such file")
        settings = replace(settings, ca_file=args.registry_ca)
    if args.platform:
        if not re.fullmatch(r"[a-z0-9]+/[a-z0-9_]+(/[a-z0-9]+)?", args.platform):
            raise CommandError(f"--platform {args.platform!r}: expected os/arch[/variant], e.g. linux/arm64")
        settings = replace(settings, platform=args.platform)
    return settings


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    lint = sub.add_parser("lint", help="lint manifests",
                          epilog="exit codes: 0 clean, 1 findings at or above --fail-on, 2 errors")
    _add_input_options(lint)
    lint.add_argument("--format", action="append", choices=FORMATS,
                      help="output format; repeat with --output to write several (default: text, or github "
                           "when GITHUB_ACTIONS=true)")
    lint.add_argument("-o", "--output", action="append", default=[], metavar="FILE",
                      help="write the matching --format to FILE (pairs in order; '-' = stdout)")
    lint.add_argument("--fail-on", choices=["error", "warning", "info"], help="threshold for exit code 1")
    lint.add_argument("--fail-on-unchecked", action="store_true", default=None,
                      help="exit 1 when a GPU workload could not be checked (config failOnUnchecked)")
    lint.add_argument("--show-suppressed", action="store_true", help="list suppressed findings and why")
    lint.add_argument("--baseline", metavar="FILE", help="report only findings not in this baseline")
    lint.add_argument("--write-baseline", metavar="FILE", help="write the current findings as a baseline and exit 0")
    lint.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    lint.add_argument("--what-if", metavar="SELECTOR:CHANGE", action="append", default=[],
                      help="change the --nodes view, then report the difference: workloads newly broken, newly "
                           "fixed, still failing (repeatable, applied in order; exit 1 when any newly breaks). "
                           "CHANGE: driver=VERSION, product=NAME, mig.strategy=none, mig.single=NxPROFILE, "
                           "mig.mixed=NxPROFILE,..., replicas=N or remove; e.g. 'pool=t4:driver=580.65.06' "
                           "(docs/audit.md)")
    lint.set_defaults(handler=lint_command)

    fix = sub.add_parser("fix", help="apply safe fixes to the files in place (ruamel round-trip)")
    _add_input_options(fix)
    fix.add_argument("--unsafe-fixes", action="store_true", help="also apply unsafe fixes")
    fix.add_argument("--diff", action="store_true", help="print a unified diff instead of writing")
    fix.set_defaults(handler=fix_command)


def _setup(args: argparse.Namespace) -> tuple[Config, Loaded, LintOptions, dict[str, str] | None]:
    """Config, rules, lint options and the rendered text of --helm-chart/--kustomize (None for plain paths)."""
    from dataclasses import replace

    from compatcheck.io.config import find_config
    from compatcheck.io.lint import LintOptions
    from compatcheck.io.manifests import PathFilter

    if not args.paths and not args.helm_chart and not args.kustomize:
        raise CommandError("give files or directories to lint (or - for stdin, --helm-chart DIR, --kustomize DIR)")
    config_file = args.config or find_config()
    configured = configure(config_file, args.rules_dir, args.data)
    config, loaded = configured.config, configured.loaded
    if args.rule:
        unknown = [r for r in args.rule if r not in loaded.ruleset.rules]
        if unknown:
            raise CommandError("unknown or disabled rule(s): " + ", ".join(
                r + suggestion(r, loaded.ruleset.rules) for r in unknown))
    if args.max_file_size <= 0:
        raise CommandError("--max-file-size must be positive")
    config = replace(config, registry=registry_settings(args, config.registry))
    exclude = PathFilter().add(config.exclude, config.root or os.getcwd(), f"exclude: in {config_file}").add(
        args.exclude, os.getcwd(), "--exclude")
    options = LintOptions(nodes=args.nodes or config.nodes, crl=[*config.crl, *args.crl],
                          max_bytes=args.max_file_size * 1024 * 1024, only=set(args.rule) if args.rule else None,
                          config=config, image_facts=list(args.image_facts), exclude=exclude or None)
    started()
    return config, loaded, options, _render_input(args, options)


def _render_input(args: argparse.Namespace, options: LintOptions) -> dict[str, str] | None:
    """Rendered text for --helm-chart / --kustomize (with its source map), or None for plain paths."""
    if not args.helm_chart and not args.kustomize:
        return None
    from compatcheck.io.render import RenderError, helm_template, kustomize

    try:
        if args.helm_chart:
            rendered = helm_template(args.helm_chart, args.values, args.set, args.release, args.namespace)
        elif args.kustomize:
            rendered = kustomize(args.kustomize)
        else:
            return None
    except RenderError as exc:
        raise CommandError(str(exc)) from None
    options.source_map = rendered.locate
    return {rendered.name: rendered.text}


def lint_command(args: argparse.Namespace) -> int:
    from compatcheck.core.model import Severity
    from compatcheck.io.lint import run_lint, run_lint_variants
    from compatcheck.io.repo import repository_root

    config, loaded, options, texts = _setup(args)
    baseline_file = args.baseline or (config.baseline if not args.write_baseline else None)
    if baseline_file:
        from compatcheck.io import baseline as baseline_mod

        try:
            options.baseline = baseline_mod.load(baseline_file)
            options.baseline_root = baseline_mod.root_of(baseline_file)
        except baseline_mod.BaselineError as exc:
            raise CommandError(problems=exc.problems) from None
    if args.what_if:
        return _what_if_lint(args, config, loaded, options, texts)
    if "html" in (args.format or []) and options.nodes:  # the matrix: each workload on each pool of the view
        (report,) = run_lint_variants(args.paths, loaded, options, [None], texts=texts, matrix=True)
    else:
        report = run_lint(args.paths, loaded, options, texts=texts)
    _require_input(args, report, texts, options)
    report.docs_url = config.docs_url
    report.source_root = repository_root() or os.getcwd()
    report.tool_version = __version__
    report.show_suppressed = args.show_suppressed
    if args.write_baseline:
        from compatcheck.io import baseline as baseline_mod

        with open(args.write_baseline, "w", encoding="utf-8") as fh:
            fh.write(baseline_mod.dump(report.findings, baseline_mod.root_of(args.write_baseline)))
        print(f"wrote {len(report.findings)} findings to {args.write_baseline}", file=sys.stderr)
        return EXIT_ERROR if report.errors else EXIT_OK
    _emit(args, report)
    threshold = Severity(args.fail_on or config.fail_on.value).rank
    if report.errors:
        return EXIT_ERROR
    if any(f.severity.rank >= threshold for f in report.findings):
        return EXIT_FINDINGS
    if (args.fail_on_unchecked or config.fail_on_unchecked) and report.not_checked:
        return EXIT_FINDINGS
    return EXIT_OK


def parse_what_ifs(texts: list[str], kb: KnowledgeBase) -> list[WhatIf]:
    from compatcheck.core.whatif import WhatIfError, parse_what_if

    try:
        return [parse_what_if(t, kb) for t in texts]
    except WhatIfError as exc:
        raise CommandError(str(exc)) from None


def what_if_exit(report: LintReport, threshold: int) -> int:
    """Exit code of a what-if run: 2 on errors, 1 when a workload newly breaks, else 0 (what still fails is
    reported, not gated on: it failed before the change too)."""
    if report.errors:
        return EXIT_ERROR
    return EXIT_FINDINGS if report.what_if is not None and report.what_if.newly_broken else EXIT_OK


def failing_of(report: LintReport, threshold: int) -> dict[WorkloadKey, frozenset[str]]:
    from compatcheck.core.whatif import failing

    return failing((f.obj, f.rule_id) for f in report.findings if f.severity.rank >= threshold)


def _what_if_lint(args: argparse.Namespace, config: Config, loaded: Loaded, options: LintOptions,
                  texts: dict[str, str] | None) -> int:
    from compatcheck.core.model import Severity
    from compatcheck.core.whatif import RecordingChange, diff_results
    from compatcheck.io.lint import run_lint_variants
    from compatcheck.io.repo import repository_root

    if not options.nodes:
        raise CommandError("--what-if changes the cluster view: give it with --nodes FILE (or nodes: in the config)")
    if args.write_baseline:
        raise CommandError("--what-if and --write-baseline do not go together")
    what_ifs = parse_what_ifs(args.what_if, loaded.kb)
    change = RecordingChange(what_ifs, loaded.kb)  # (the baseline, if any, was read by lint_command)
    before, after = run_lint_variants(args.paths, loaded, options, [None, change], texts=texts,
                                      matrix="html" in (args.format or []))
    _require_input(args, after, texts, options)
    after.add(change.problems)
    threshold = Severity(args.fail_on or config.fail_on.value).rank
    after.what_if = diff_results(failing_of(before, threshold), failing_of(after, threshold))
    if after.matrix is not None:
        after.matrix.changes = after.what_if.changes()
    after.what_if_changes = [(w.text, change.matched.get(w.text, 0)) for w in what_ifs]
    after.docs_url = config.docs_url
    after.source_root = repository_root() or os.getcwd()
    after.tool_version = __version__
    after.show_suppressed = args.show_suppressed
    _emit(args, after)
    return what_if_exit(after, threshold)


def _require_input(args: argparse.Namespace, report: LintReport, texts: dict[str, str] | None,
                   options: LintOptions) -> None:
    """An empty input set is an error, not a silent pass: a CI job whose glob or directory matched nothing
    would otherwise stay green forever. Input that --exclude or exclude: left out on purpose is no such mistake
    (pre-commit passing only excluded files): exit 0, with a note saying which patterns left it out."""
    if texts is not None or report.files or report.errors:
        return
    if options.exclude is not None and options.exclude.hits:
        left_out = "; ".join(f"{n} by {what}" for what, n in options.exclude.by_pattern.items())
        print(f"compatcheck: note: nothing to lint: every input path was excluded ({left_out})", file=sys.stderr)
        return
    where = ", ".join(args.paths)
    raise CommandError(f"no files to lint: {where} {'holds' if len(args.paths) == 1 else 'hold'} no *.yaml, "
                       "*.yml or *.json file")


def _emit(args: argparse.Namespace, report: LintReport) -> None:
    from compatcheck.report import FORMATTERS

    formats = list(args.format or [])
    if not formats:
        formats = ["github" if os.environ.get("GITHUB_ACTIONS") == "true" else "text"]
    if len(args.output) > len(formats):
        raise CommandError("each --output needs its own --format before it (e.g. --format sarif -o out.sarif "
                           "--format text)")
    targets = args.output + ["-"] * (len(formats) - len(args.output))
    if targets.count("-") > 1:
        raise CommandError("only one format can go to stdout: give the others an --output FILE")
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
                raise CommandError(f"cannot write {target}: {exc.strerror or exc}") from None


def fix_command(args: argparse.Namespace) -> int:
    from compatcheck.core.model import Applicability
    from compatcheck.io.fixer import fix_file
    from compatcheck.io.lint import run_lint

    _config, loaded, options, texts = _setup(args)
    if texts is not None:
        raise CommandError("fix works on files; rendered --helm-chart/--kustomize output has no file to write back")
    keep: list[LintedObject] = []
    report = run_lint(args.paths, loaded, options, keep=keep)
    _require_input(args, report, None, options)
    print_diagnostics([*report.errors, *report.warnings])
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
    print(f"{applied} fixes {'pending' if args.diff else 'applied'}; {remaining} findings left", file=sys.stderr)
    if report.errors:
        return EXIT_ERROR
    # Like ruff --diff: a diff that is not empty fails, so CI can gate on fixes nobody applied.
    return EXIT_FINDINGS if args.diff and applied else EXIT_OK
