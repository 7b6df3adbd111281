"""The lint pipeline shared by ``compatcheck lint`` (and later ``fix``): read files, build the context,
evaluate every object, attach file/line/column. I/O lives in ``manifests``/``loader``; this module only
orchestrates and never prints."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from compatcheck.checks.base import EvalContext
from compatcheck.crl import CrlIndex, claims_crl
from compatcheck.engine import evaluate
from compatcheck.loader import Loaded, crl_index, load_crl_objects, load_nodes
from compatcheck.manifests import (
    DEFAULT_MAX_FILE_BYTES,
    Document,
    ParsedFile,
    expand_paths,
    iter_objects,
    read_file,
)
from compatcheck.model import InputError, Severity, SourceRef
from compatcheck.report.model import LintReport


@dataclass
class LintOptions:
    nodes: str | None = None
    crl: list[str] = field(default_factory=list)
    max_bytes: int = DEFAULT_MAX_FILE_BYTES
    severities: dict[str, Severity] = field(default_factory=dict)
    only: set[str] | None = None


def run_lint(paths: list[str], loaded: Loaded, options: LintOptions) -> LintReport:
    report = LintReport()
    cluster = None
    if options.nodes:
        cluster, errors = load_nodes(options.nodes, loaded.kb, options.max_bytes)
        report.errors.extend(errors)
    files, errors = expand_paths(paths)
    report.errors.extend(errors)
    parsed: list[ParsedFile] = []
    for f in files:
        pf = read_file(f, options.max_bytes)
        report.errors.extend(pf.errors)
        report.notes.extend(pf.notes)
        parsed.append(pf)
    report.files = len(files)
    crl_objects, crl_errors = load_crl_objects(options.crl, options.max_bytes) if options.crl else ([], [])
    report.errors.extend(crl_errors)
    for pf in parsed:
        for doc in pf.documents:
            for _prefix, obj in iter_objects(doc):
                if claims_crl(obj):
                    crl_objects.append((pf.path, obj))
    index, invalid = crl_index(crl_objects) if crl_objects else (CrlIndex(), [])
    # Invalid CRLs among the linted files are findings (crl-configmap-invalid); only --crl ones are errors.
    linted = {pf.path for pf in parsed}
    report.errors.extend(e for e in invalid if e.path not in linted)
    ctx = EvalContext(loaded.kb, cluster, index)
    rules = [r for r in loaded.ruleset if options.only is None or r.id in options.only]
    for pf in parsed:
        for doc in pf.documents:
            _lint_document(doc, rules, ctx, options, report)
    return report


def _lint_document(doc: Document, rules: list, ctx: EvalContext, options: LintOptions,  # type: ignore[type-arg]
                   report: LintReport) -> None:
    for prefix, obj in iter_objects(doc):
        report.objects += 1
        result = evaluate(obj, rules, ctx, severities=options.severities)
        for finding in result.findings:
            line, col = doc.locate(prefix + finding.pointer)
            report.findings.append(replace(finding, source=SourceRef(doc.path, line, col)))
        for problem in result.problems:
            line, _col = doc.locate(prefix + problem.pointer)
            report.errors.append(InputError(doc.path, problem.message, line))
