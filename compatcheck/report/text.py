"""Human-readable output grouped by file, coloured on a terminal."""

from __future__ import annotations

from collections.abc import Callable
from itertools import groupby

from compatcheck.core.model import Diagnostic
from compatcheck.report.model import LintReport

_COLORS = {"error": "\033[31m", "warning": "\033[33m", "info": "\033[36m", "note": "\033[2m"}
_RESET = "\033[0m"


def diagnostic_line(d: Diagnostic, color: bool = False) -> str:
    """``file:line: error|warning|info|note: message``: how a diagnostic reads, here and on the CLI's stderr."""
    where = f"{d.path}:{d.line}" if d.line else d.path
    label = "note" if d.kind == "note" else d.severity.value
    prefix = f"{where}: " if where else ""  # about no file (a registry, an image named on the command line)
    return f"{prefix}{_COLORS[label]}{label}{_RESET}: {d.message}" if color else f"{prefix}{label}: {d.message}"


def what_if_lines(report: LintReport, paint: Callable[[str, str], str]) -> list[str]:
    """The what-if section: each change, then the workloads newly broken, newly fixed and still failing."""
    assert report.what_if is not None
    lines = [paint("what-if", "note")]
    for text, n in report.what_if_changes:
        lines.append(f"  {text}  ({n} node{'s' if n != 1 else ''})")
    for title, entries, kind in (("newly broken", report.what_if.newly_broken, "error"),
                                 ("newly fixed", report.what_if.newly_fixed, "info"),
                                 ("still failing", report.what_if.still_failing, "warning")):
        lines.append(paint(f"{title} ({len(entries)})", kind) if entries else f"{title} (0)")
        for e in entries:
            kind_, namespace, name = e.workload
            lines.append(f"  {kind_} {namespace + '/' if namespace else ''}{name}: {', '.join(e.rules)}")
    return lines


def render(report: LintReport) -> str:
    def paint(text: str, kind: str) -> str:
        return f"{_COLORS[kind]}{text}{_RESET}" if report.color else text

    lines = [diagnostic_line(d, report.color) for d in report.diagnostics()]
    ordered = sorted(report.findings, key=lambda f: (f.source.path if f.source else "",
                                                     (f.source.line or 0) if f.source else 0, f.rule_id))
    for path, group in groupby(ordered, key=lambda f: f.source.path if f.source else "<input>"):
        lines.append(paint(path, "note") if report.color else path)
        for f in group:
            loc = f"{f.source.line}:{f.source.column}" if f.source and f.source.line else "-"
            ctr = f" [{f.container}]" if f.container else ""
            lines.append(f"  {loc:>8}  {paint(f.severity.value, f.severity.value):<7}  {f.message}  "
                         f"({f.rule_id}; {f.obj.describe()}{ctr})")
            if f.fix is not None:
                lines.append(f"            fix ({f.fix.applicability.value}): {f.fix.description}")
    if report.show_suppressed and report.suppressed:
        lines.append(paint("suppressed", "note"))
        for s in report.suppressed:
            f = s.finding
            loc = f"{f.source.path}:{f.source.line}" if f.source else "-"
            lines.append(f"  {loc}  {f.rule_id} ({f.obj.describe()}) by {s.how}: {s.reason or '(no reason)'}")
    if report.what_if is not None:
        lines.extend(what_if_lines(report, paint))
    c = report.counts()
    skipped = f" (and {report.skipped} documents without pod specs, not parsed)" if report.skipped else ""
    read = f"{report.files} files, {report.objects} objects{skipped}"
    if report.audit is not None:
        a = report.audit
        read = (f"{a['nodes']} nodes ({a['nodeClasses']} classes), {report.objects} objects, {a['owners']} owners, "
                f"{a['pods']} running pods")
    lines.append(f"{read}: {c['error']} errors, "
                 f"{c['warning']} warnings, "
                 f"{c['info']} info" + (f"; {len(report.errors)} input errors" if report.errors else "")
                 + (f"; {len(report.warnings)} input warnings" if report.warnings else "")
                 + (f"; {len(report.suppressed)} suppressed" if report.suppressed else ""))
    for n in report.not_checked:
        where = f"{n.path}:{n.line}" if n.line else n.path
        lines.append(f"{where}: not checked: {n.obj.describe()}: {n.reason}")
    lines.append(report.coverage_line())
    return "\n".join(lines) + "\n"
