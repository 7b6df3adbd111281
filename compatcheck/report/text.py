"""Human-readable output grouped by file, coloured on a terminal."""

from __future__ import annotations

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
    c = report.counts()
    skipped = f" (and {report.skipped} documents without pod specs, not parsed)" if report.skipped else ""
    lines.append(f"{report.files} files, {report.objects} objects{skipped}: {c['error']} errors, "
                 f"{c['warning']} warnings, "
                 f"{c['info']} info" + (f"; {len(report.errors)} input errors" if report.errors else "")
                 + (f"; {len(report.warnings)} input warnings" if report.warnings else "")
                 + (f"; {len(report.suppressed)} suppressed" if report.suppressed else ""))
    for n in report.not_checked:
        where = f"{n.path}:{n.line}" if n.line else n.path
        lines.append(f"{where}: not checked: {n.obj.describe()}: {n.reason}")
    lines.append(report.coverage_line())
    return "\n".join(lines) + "\n"
