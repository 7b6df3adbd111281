"""The handler of ``compatcheck audit`` (its arguments are described in ``compatcheck.cli.audit``): read the
cluster (``compatcheck.webhook.audit``), optionally with what-ifs, write the reports, exit as ``lint`` does."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from compatcheck import __version__
from compatcheck.core.model import Severity
from compatcheck.core.selectors import SelectorError, parse_selector
from compatcheck.core.whatif import RecordingChange, WhatIfError, diff_results, failing, parse_what_if
from compatcheck.io.config import find_config
from compatcheck.io.setup import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, CommandError, configure
from compatcheck.report import FORMATTERS
from compatcheck.report.model import LintReport
from compatcheck.webhook.audit import Audit, AuditError, AuditOptions, kube_api, run_audit


def audit_command(args: argparse.Namespace) -> int:
    configured = configure(args.config or find_config(), args.rules_dir)
    config, loaded = configured.config, configured.loaded
    if args.selector:
        try:
            parse_selector(args.selector)
        except SelectorError as exc:
            raise CommandError(f"-l/--selector: {exc}") from None
    try:
        what_ifs = [parse_what_if(t, loaded.kb) for t in args.what_if]
    except WhatIfError as exc:
        raise CommandError(str(exc)) from None
    change = RecordingChange(what_ifs, loaded.kb)

    namespace = None if args.all_namespaces else args.namespace
    progress = not args.no_progress and sys.stderr.isatty() and not args.every
    threshold = Severity(args.fail_on or config.fail_on.value).rank
    try:
        api = kube_api(args.kubeconfig, args.context, args.in_cluster)
    except AuditError as exc:
        raise CommandError(str(exc)) from None
    options = AuditOptions(namespace, args.selector or "", args.chunk_size, progress, "html" in (args.format or []))

    def audit_once() -> tuple[Audit, int]:
        change.problems.clear()
        audit = run_audit(api, loaded.kb, loaded.ruleset, config, options, change if what_ifs else None)
        report = audit.report
        report.rules = list(loaded.ruleset)
        report.add(change.problems)
        report.tool_version = __version__
        report.docs_url = config.docs_url
        report.show_suppressed = args.show_suppressed
        if what_ifs:
            report.what_if = diff_results(failing(audit.result.failing(0, threshold)),
                                          failing(audit.result.failing(1, threshold)))
            report.what_if_changes = [(w.text, change.matched.get(w.text, 0)) for w in what_ifs]
            if report.matrix is not None:
                report.matrix.changes = report.what_if.changes()
        if args.write_reports:
            from compatcheck.webhook.policyreports import write_reports

            written = write_reports(api, audit, args.write_reports, namespace)
            print(f"compatcheck: wrote {written.summary()}", file=sys.stderr)
        if not args.every or args.output:  # a long-running audit writes only its files (and its metrics)
            emit(args, report)
        if report.errors:
            return audit, EXIT_ERROR
        if what_ifs:
            return audit, EXIT_FINDINGS if report.what_if is not None and report.what_if.newly_broken else EXIT_OK
        return audit, EXIT_FINDINGS if any(f.severity.rank >= threshold for f in report.findings) else EXIT_OK

    if args.every:
        return _loop(args, api, audit_once)
    try:
        return audit_once()[1]
    except AuditError as exc:
        raise CommandError(str(exc)) from None


def _loop(args: argparse.Namespace, api: object, audit_once: Callable[[], tuple[Audit, int]]) -> int:
    import logging

    from prometheus_client import start_http_server

    from compatcheck.webhook.audit_loop import AuditMetrics, run_loop

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    metrics = AuditMetrics()
    if args.metrics_port:
        start_http_server(args.metrics_port, args.metrics_host, registry=metrics.registry)
    return run_loop(api, audit_once, args.every, args.node_poll, args.chunk_size, metrics, args.max_runs)


def emit(args: argparse.Namespace, report: LintReport) -> None:
    """Each --format to stdout or its --output, as ``lint`` writes them."""
    formats = list(args.format or ["text"])
    if len(args.output) > len(formats):
        raise CommandError("each --output needs its own --format before it (e.g. --format sarif -o out.sarif)")
    targets = args.output + ["-"] * (len(formats) - len(args.output))
    if targets.count("-") > 1:
        raise CommandError("only one format can go to stdout: give the others an --output FILE")
    for fmt, target in zip(formats, targets, strict=True):
        report.color = fmt == "text" and target == "-" and sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        text = FORMATTERS[fmt](report)
        if target == "-":
            sys.stdout.write(text)
            continue
        try:
            with open(target, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            raise CommandError(f"cannot write {target}: {exc.strerror or exc}") from None
