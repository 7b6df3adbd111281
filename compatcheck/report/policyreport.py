"""Audit findings as policy reports (pure: objects in, Kubernetes objects out; ``compatcheck.webhook.policyreports``
writes them).

Two APIs: ``wgpolicyk8s.io/v1alpha2`` PolicyReport / ClusterPolicyReport (what Kyverno writes and Policy Reporter
shows; the CRDs of kubernetes-sigs/wg-policy-prototypes) and ``openreports.io/v1alpha1`` Report / ClusterReport
(their successor, openreports/reports-api). One report per namespace, named ``compatcheck``, holds a result per
finding about a namespaced owner; one cluster report holds those about cluster-scoped owners. Each result names
the owner (``resources``), the rule (``policy`` and ``rule``), its outcome (error: ``fail``, warning and info:
``warn``) and severity (error: high, warning: medium, info: info), and in ``properties`` the running pods it affects,
the pointer and the container.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from compatcheck.core.model import Finding, Severity

REPORT_NAME = "compatcheck"
MANAGED_BY = {"app.kubernetes.io/managed-by": "compatcheck"}
SOURCE = "compatcheck"
CATEGORY = "CUDA compatibility"


@dataclass(frozen=True)
class ReportApi:
    group: str
    version: str
    kind: str
    cluster_kind: str
    plural: str
    cluster_plural: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


APIS = {
    "wgpolicyk8s": ReportApi("wgpolicyk8s.io", "v1alpha2", "PolicyReport", "ClusterPolicyReport", "policyreports",
                             "clusterpolicyreports"),
    "openreports": ReportApi("openreports.io", "v1alpha1", "Report", "ClusterReport", "reports", "clusterreports"),
}
_RESULT = {Severity.ERROR: "fail", Severity.WARNING: "warn", Severity.INFO: "warn"}
_SEVERITY = {Severity.ERROR: "high", Severity.WARNING: "medium", Severity.INFO: "info"}


def result(f: Finding, pods: int, seconds: int) -> dict[str, Any]:
    ref = f.obj
    resource = {k: v for k, v in (("apiVersion", ref.api_version), ("kind", ref.kind), ("namespace", ref.namespace),
                                  ("name", ref.name)) if v}
    properties = {"pods": str(pods), "pointer": f.pointer}
    if f.container:
        properties["container"] = f.container
    return {"policy": f.rule_id, "rule": f.rule_id, "result": _RESULT[f.severity], "severity": _SEVERITY[f.severity],
            "source": SOURCE, "category": CATEGORY, "scored": True, "message": f.message,
            "timestamp": {"seconds": seconds, "nanos": 0}, "resources": [resource], "properties": properties}


def build_reports(findings: Iterable[tuple[Finding, int]], api: ReportApi, seconds: int,
                  namespaces: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The reports for ``findings`` (each with the running pods of its owner): one per namespace with findings, and
    one for ``namespaces`` without (empty: so that an audit that finds nothing there replaces the last one), then
    the cluster report when a cluster-scoped owner has findings. Sorted, so that a run writes them in one order."""
    by_ns: dict[str | None, list[dict[str, Any]]] = {ns: [] for ns in namespaces}
    for f, pods in findings:
        by_ns.setdefault(f.obj.namespace or None, []).append(result(f, pods, seconds))
    out = []
    for ns in sorted(by_ns, key=lambda n: (n is None, n or "")):
        results = sorted(by_ns[ns], key=lambda r: (r["resources"][0].get("kind", ""), r["resources"][0]["name"],
                                                   r["policy"], r["properties"]["pointer"]))
        summary = {"pass": 0, "fail": 0, "warn": 0, "error": 0, "skip": 0}
        for r in results:
            summary[r["result"]] += 1
        meta: dict[str, Any] = {"name": REPORT_NAME, "labels": dict(MANAGED_BY)}
        if ns is not None:
            meta["namespace"] = ns
        report: dict[str, Any] = {"apiVersion": api.api_version, "kind": api.kind if ns is not None else
                                  api.cluster_kind, "metadata": meta, "summary": summary, "results": results}
        if api.group == "openreports.io":
            report["source"] = SOURCE
        out.append(report)
    return out
