"""SARIF 2.1.0 (GitHub code scanning, GitLab, Azure DevOps): rule metadata plus results with regions."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from compatcheck.report.model import LintReport

_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


SRCROOT = "%SRCROOT%"


def artifact(path: str, root: str) -> dict[str, str]:
    """A SARIF artifactLocation: a file inside the repository is named relative to its root, with the uriBaseId
    %SRCROOT% (what code scanning resolves against its checkout), never as an absolute file:// URI that names the
    CI runner's directories; only a file outside the repository gets one. Standard input is ``-``."""
    if path == "-":
        return {"uri": "-"}
    absolute = os.path.abspath(path)
    rel = os.path.relpath(absolute, root)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep):
        return {"uri": Path(absolute).as_uri()}
    return {"uri": quote(rel.replace(os.sep, "/")), "uriBaseId": SRCROOT}


def _directory_uri(root: str) -> str:
    uri = Path(root).as_uri()
    return uri if uri.endswith("/") else uri + "/"  # a base URI names a directory: it ends with a slash


def render(report: LintReport) -> str:
    rules = sorted(report.rules, key=lambda r: r.id)
    index = {r.id: i for i, r in enumerate(rules)}
    results: list[dict[str, Any]] = []
    root = report.source_root or os.getcwd()
    for f in report.findings:
        where = artifact(f.source.path if f.source else "-", root)
        location: dict[str, Any] = {"physicalLocation": {"artifactLocation": where}}
        if f.source and f.source.line:
            location["physicalLocation"]["region"] = {"startLine": f.source.line, "startColumn": f.source.column or 1}
        name = "/".join(x for x in (f.obj.kind, f.obj.namespace, f.obj.name) if x)
        location["logicalLocations"] = [{"fullyQualifiedName": name + (f"[{f.container}]" if f.container else ""),
                                         "kind": "object"}]
        fingerprint = hashlib.sha256("|".join((f.rule_id, where["uri"], name,
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
                      "locations": [{"physicalLocation": {"artifactLocation": artifact(e.path, root),
                                                          **({"region": {"startLine": e.line}} if e.line else {})}}]}
                     for e in [*report.errors, *report.warnings]]
    for n in report.not_checked:  # the coverage's blind spots: never a clean result that only means "not looked at"
        physical: dict[str, Any] = {"artifactLocation": artifact(n.path, root)}
        if n.line:
            physical["region"] = {"startLine": n.line}
        name = "/".join(x for x in (n.obj.kind, n.obj.namespace, n.obj.name) if x)
        notifications.append({"level": "note", "descriptor": {"id": "not-checked"},
                              "message": {"text": f"not checked: {name}: {n.reason}"},
                              "locations": [{"physicalLocation": physical,
                                             "logicalLocations": [{"fullyQualifiedName": name, "kind": "object"}]}],
                              "properties": {"reason": n.category}})
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
        "originalUriBaseIds": {SRCROOT: {"uri": _directory_uri(root)}},
        "invocations": [{"executionSuccessful": not report.errors, "toolExecutionNotifications": notifications,
                         "properties": {"coverage": {"gpuWorkloads": report.gpu_workloads,
                                                     "checked": report.gpu_workloads - report.unchecked_objects(),
                                                     "notChecked": report.unchecked_objects()}}}],
        "results": results,
    }
    sarif = {"$schema": "https://json.schemastore.org/sarif-2.1.0.json", "version": "2.1.0", "runs": [run]}
    return json.dumps(sarif, indent=2) + "\n"
