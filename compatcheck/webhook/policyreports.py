"""``compatcheck audit --write-reports``: the audit's findings as policy reports in the cluster
(``compatcheck.report.policyreport`` builds them). Each run replaces the reports it wrote before (labelled
``app.kubernetes.io/managed-by: compatcheck``): a report is created or updated in place, and one whose namespace
has no finding any more is deleted, so findings that disappear are removed. With ``-n`` only that namespace's
report is touched."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from compatcheck.core.audit import owner_key
from compatcheck.report.policyreport import APIS, MANAGED_BY, REPORT_NAME, build_reports
from compatcheck.webhook.audit import Audit, AuditError, Lister, Resource


@dataclass
class Written:
    kind: str
    written: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    def summary(self) -> str:
        gone = f", deleted {len(self.deleted)} stale" if self.deleted else ""
        return f"{len(self.written)} {self.kind} object(s){gone}"


def _send(lister: Lister, method: str, path: str, body: dict[str, Any] | None) -> tuple[int, dict[str, Any]]:
    api = lister.api
    req = api.param_serialize(method=method, resource_path=path, header_params={
        "Accept": "application/json", "Content-Type": "application/json"}, body=body, auth_settings=["BearerToken"])
    resp = api.call_api(*req, _request_timeout=(10.0, 60.0))
    data = resp.read()
    try:
        decoded = json.loads(data) if data else {}
    except ValueError:
        decoded = {}
    if resp.status == 403:
        raise AuditError(f"forbidden: cannot {method} {path} ({decoded.get('message', 'RBAC')})")
    if resp.status == 404 and method != "DELETE":
        raise AuditError(f"{method} {path}: 404: is the report CRD installed? ({decoded.get('message', '')})")
    if resp.status >= 400 and resp.status != 404:
        raise AuditError(f"{method} {path}: HTTP {resp.status}: {decoded.get('message', '')}")
    return resp.status, decoded


def write_reports(api: Any, audit: Audit, which: str, namespace: str | None) -> Written:
    report_api = APIS[which]
    lister = Lister(api)
    ns_res = Resource(report_api.group, report_api.version, report_api.kind, report_api.plural, True)
    cluster_res = Resource(report_api.group, report_api.version, report_api.cluster_kind, report_api.cluster_plural,
                           False)
    selector = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
    existing = {(o["metadata"].get("namespace"), o["metadata"]["name"]): o
                for o in lister.items(ns_res, namespace, selector)}
    if namespace is None:
        existing.update(((None, o["metadata"]["name"]), o) for o in lister.items(cluster_res, None, selector))
    pods = {key: o.pods for o in audit.result.owners() for key in [owner_key(o.ref)]}
    findings = [(f, pods.get(owner_key(f.obj), 0)) for f in audit.report.findings
                if namespace is None or f.obj.namespace == namespace]
    reports = build_reports(findings, report_api, int(time.time()))
    out = Written(f"{report_api.kind}/{report_api.cluster_kind}")
    for report in reports:
        ns = report["metadata"].get("namespace")
        res = ns_res if ns is not None else cluster_res
        base = res.path(ns)
        old = existing.pop((ns, REPORT_NAME), None)
        if old is None:
            _send(lister, "POST", base, report)
        else:
            report["metadata"]["resourceVersion"] = old["metadata"].get("resourceVersion")
            _send(lister, "PUT", f"{base}/{REPORT_NAME}", report)
        out.written.append(f"{ns}/{REPORT_NAME}" if ns else REPORT_NAME)
    for (ns, name), _old in sorted(existing.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
        res = ns_res if ns is not None else cluster_res
        _send(lister, "DELETE", f"{res.path(ns)}/{name}", None)
        out.deleted.append(f"{ns}/{name}" if ns else name)
    return out
