"""JSON output: the stable, versioned contract (``"version": 1``)."""

from __future__ import annotations

import json
from typing import Any

from compatcheck.core.model import Diagnostic
from compatcheck.report.model import LintReport


def _located(d: Diagnostic) -> dict[str, Any]:
    entry: dict[str, Any] = {"file": d.path, "message": d.message}
    if d.line is not None:
        entry["line"] = d.line
    return entry


def render(report: LintReport) -> str:
    findings: list[dict[str, Any]] = []
    for f in report.findings:
        item: dict[str, Any] = {
            "rule": f.rule_id, "severity": f.severity.value, "message": f.message,
            "file": f.source.path if f.source else None,
            "line": f.source.line if f.source else None,
            "column": f.source.column if f.source else None,
            "pointer": f.pointer, "object": f.obj.to_json(), "container": f.container,
        }
        if f.fix is not None:
            item["fix"] = f.fix.to_json()
        if report.audit is not None:  # compatcheck audit: the running pods of the owner the finding is about
            item["pods"] = report.audit["podsByOwner"].get(f"{f.obj.kind}/{f.obj.namespace or ''}/{f.obj.name}", 0)
        findings.append(item)
    errors = [_located(e) for e in report.errors]
    suppressed = [{"rule": s.finding.rule_id, "file": s.finding.source.path if s.finding.source else None,
                   "line": s.finding.source.line if s.finding.source else None, "pointer": s.finding.pointer,
                   "object": s.finding.obj.to_json(), "container": s.finding.container, "by": s.how,
                   "reason": s.reason} for s in report.suppressed] if report.show_suppressed else None
    out: dict[str, Any] = {"version": 1, "findings": findings, "errors": errors}
    if report.warnings:  # only when there are some: the output of a run without them is unchanged
        out["warnings"] = [_located(w) for w in report.warnings]
    out["skipped"] = [{"file": n.path, "line": n.line, "reason": n.message} for n in report.notes]
    out["summary"] = {"files": report.files, "objects": report.objects, "findings": report.counts(),
                      "suppressed": len(report.suppressed)}
    if report.audit is not None:
        out["summary"]["audit"] = {k: v for k, v in report.audit.items() if k != "podsByOwner"}
    if report.skipped:  # documents of kinds without pod specs, skipped unparsed (only when there are some)
        out["summary"]["documentsWithoutPodSpecs"] = report.skipped
    out["coverage"] = report.coverage_json()
    if suppressed is not None:
        out["suppressed"] = suppressed
    if report.what_if is not None:
        out["whatIf"] = {"changes": [{"change": text, "nodes": n} for text, n in report.what_if_changes],
                         **report.what_if.to_json()}
    return json.dumps(out, indent=2) + "\n"
