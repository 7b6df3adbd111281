"""GitHub Actions workflow commands (``::error file=...,line=...,col=...::message``), chosen automatically
when GITHUB_ACTIONS=true."""

from __future__ import annotations

from compatcheck.report.model import LintReport

_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render(report: LintReport) -> str:
    lines = []
    for e in [*report.errors, *report.warnings]:
        loc = f"file={_prop(e.path)}" + (f",line={e.line}" if e.line else "")
        level = _LEVEL[e.severity.value]
        lines.append(f"::{level} {loc},title=compatcheck input {e.severity.value}::{_data(e.message)}")
    for f in report.findings:
        parts = []
        if f.source:
            parts.append(f"file={_prop(f.source.path)}")
            if f.source.line:
                parts.append(f"line={f.source.line}")
            if f.source.column:
                parts.append(f"col={f.source.column}")
        parts.append(f"title={_prop(f.rule_id)}")
        lines.append(f"::{_LEVEL[f.severity.value]} {','.join(parts)}::{_data(f.message)} ({f.obj.describe()}"
                     f"{' [' + f.container + ']' if f.container else ''}) {report.rule_url(f.rule_id)}")
    c = report.counts()
    lines.append(f"compatcheck: {report.files} files, {report.objects} objects: {c['error']} errors, "
                 f"{c['warning']} warnings, {c['info']} info")
    return "\n".join(lines) + "\n"
