"""SARIF 2.1.0 (GitHub code scanning, GitLab, Azure DevOps): rule metadata plus results with regions."""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from compatcheck.report.model import LintReport

_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def _uri(path: str) -> str:
    rel = os.path.relpath(path) if os.path.isabs(path) else path
    return rel.replace(os.sep, "/") if not rel.startswith("..") else "file://" + os.path.abspath(path)


def render(report: LintReport) -> str:
    rules = sorted(report.rules, key=lambda r: r.id)
    index = {r.id: i for i, r in enumerate(rules)}
    results: list[dict[str, Any]] = []
    for f in report.findings:
        location: dict[str, Any] = {"physicalLocation": {"artifactLocation": {"uri": _uri(f.source.path)
                                                                                if f.source else "-"}}}
        if f.source and f.source.line:
            location["physicalLocation"]["artifactLocation"]["uriBaseId"] = "%SRCROOT%"
            location["physicalLocation"]["region"] = {"startLine": f.source.line, "startColumn": f.source.column or 1}
        name = "/".join(x for x in (f.obj.kind, f.obj.namespace, f.obj.name) if x)
        location["logicalLocations"] = [{"fullyQualifiedName": name + (f"[{f.container}]" if f.container else ""),
                                         "kind": "object"}]
        fingerprint = hashlib.sha256("|".join((f.rule_id, f.source.path if f.source else "", name,
                                               f.container or "", f.pointer)).encode()).hexdigest()[:32]
        result: dict[str, Any] = {
            "ruleId": f.rule_id, "level": _LEVEL[f.severity.value], "message": {"text": f.message},
            "locations": [location], "partialFingerprints": {"compatcheckFinding/v1": fingerprint},
            "properties": {"pointer": f.pointer},
        }
        if f.rule_id in index:
            result["ruleIndex"] = index[f.rule_id]
        if f.fix is not None:
            result["properties"]["fix"] = f.fix.to_json()
        results.append(result)
    notifications = [{"level": _LEVEL[e.severity.value], "message": {"text": e.message},
                      "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(e.path)},
                                                          **({"region": {"startLine": e.line}} if e.line else {})}}]}
                     for e in [*report.errors, *report.warnings]]
    run: dict[str, Any] = {
        "tool": {"driver": {
            "name": "compatcheck", "version": report.tool_version, "informationUri": report.docs_url,
            "rules": [{
                "id": r.id, "name": "".join(w.capitalize() for w in r.id.split("-")),
                "shortDescription": {"text": r.summary}, "fullDescription": {"text": r.rationale},
                "help": {"text": r.remediation,
                         "markdown": f"{r.remediation}\n\n[Rule reference]({report.rule_url(r.id)})"},
                "helpUri": report.rule_url(r.id),
                "defaultConfiguration": {"level": _LEVEL[r.severity.value]},
                "properties": {"tags": ["cuda", "gpu", "kubernetes"], "checkType": r.check.name},
            } for r in rules]}},
        "originalUriBaseIds": {"%SRCROOT%": {"uri": "file://" + os.getcwd().rstrip("/") + "/"}},
        "invocations": [{"executionSuccessful": not report.errors, "toolExecutionNotifications": notifications}],
        "results": results,
    }
    sarif = {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0", "runs": [run]}
    return json.dumps(sarif, indent=2) + "\n"
