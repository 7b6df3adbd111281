"""``compatcheck audit --every SECONDS``: the audit as a long-running process (a Deployment), with Prometheus
metrics, re-run at once when a pool's driver (any label the rules read) changes.

Between audits it lists the Nodes every ``--node-poll`` seconds (paged, kept only as the fingerprint of what the
rules read of them: their rule labels, policy taints and GPU allocatable, ``core.cluster.NodeRecord.class_key``),
and starts the next audit once the fingerprint differs from the one the last audit saw and one more poll finds
it unchanged (a pool relabelled node by node is judged when it has settled, after at most ``SETTLE_POLLS``
polls): a driver upgrade of a pool is re-evaluated within two ``--node-poll`` periods (30 s by default) plus one
audit's time. GPU feature
discovery's timestamp label, which changes on every node each minute, is no rule label and triggers nothing.

Metrics (``--metrics-port``, its own registry): ``compatcheck_audit_findings{namespace,rule,severity}`` (the last
complete audit's findings), ``compatcheck_audit_pods_affected{namespace,rule}``,
``compatcheck_audit_last_complete_timestamp_seconds``, ``compatcheck_audit_duration_seconds``,
``compatcheck_audit_runs_total{result}`` (ok, error) and ``compatcheck_audit_node_changes_total``.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from compatcheck.core.audit import owner_key
from compatcheck.webhook.audit import Audit, AuditError, Lister, Resource
from compatcheck.webhook.clusterview import NodeCompactor

log = logging.getLogger("compatcheck.audit")
NODES = Resource("", "v1", "Node", "nodes", False)


class AuditMetrics:
    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge

        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.findings = Gauge("compatcheck_audit_findings", "Findings of the last complete audit, by owner's "
                              "namespace, rule and severity", ["namespace", "rule", "severity"], registry=r)
        self.pods = Gauge("compatcheck_audit_pods_affected", "Running pods of the owners with findings, by "
                          "namespace and rule (last complete audit)", ["namespace", "rule"], registry=r)
        self.last_complete = Gauge("compatcheck_audit_last_complete_timestamp_seconds",
                                   "Unix time the last complete audit ended", registry=r)
        self.duration = Gauge("compatcheck_audit_duration_seconds", "How long the last complete audit took",
                              registry=r)
        self.runs = Counter("compatcheck_audit_runs_total", "Audits run, by result", ["result"], registry=r)
        self.node_changes = Counter("compatcheck_audit_node_changes_total",
                                    "Audits started early because what the rules read of the Nodes changed",
                                    registry=r)

    def publish(self, audit: Audit, seconds: float) -> None:
        pods = {owner_key(o.ref): o.pods for o in audit.result.owners()}
        counts: dict[tuple[str, str, str], int] = {}
        affected: dict[tuple[str, str], int] = {}
        for f in audit.report.findings:
            ns = f.obj.namespace or ""
            counts[(ns, f.rule_id, f.severity.value)] = counts.get((ns, f.rule_id, f.severity.value), 0) + 1
            affected[(ns, f.rule_id)] = affected.get((ns, f.rule_id), 0) + pods.get(owner_key(f.obj), 0)
        self.findings.clear()  # findings that disappeared leave no stale series behind
        self.pods.clear()
        for labels, n in counts.items():
            self.findings.labels(*labels).set(n)
        for labels2, n in affected.items():
            self.pods.labels(*labels2).set(n)
        self.duration.set(seconds)
        self.last_complete.set(time.time())
        self.runs.labels("ok").inc()


def node_fingerprint(api: Any, page: int) -> str:
    """What the rules read of every Node (and their names), hashed: equal while no pool's driver, GPU, sharing,
    taints or GPU allocatable changed."""
    compactor = NodeCompactor()
    digest = hashlib.sha256()
    records = (compactor(n) for n in Lister(api, page).items(NODES))
    for key in sorted((rec.name, repr(rec.class_key)) for rec in records):
        digest.update(repr(key).encode())
    return digest.hexdigest()


def run_loop(api: Any, audit_once: Callable[[], tuple[Audit, int]], every: float, node_poll: float, page: int,
             metrics: AuditMetrics, max_runs: int = 0, stop: threading.Event | None = None) -> int:
    """Audit, publish, wait (``every`` seconds, or less when the Nodes change), again; ``max_runs`` audits (0:
    until ``stop``). The exit code of the last audit."""
    stop = stop or threading.Event()
    runs, code = 0, 0
    while not stop.is_set():
        started = time.monotonic()
        try:
            seen = node_fingerprint(api, page)
            audit, code = audit_once()
        except AuditError as exc:  # the API server is away, a right is missing: say so, try again later
            log.error("audit failed: %s", exc)
            metrics.runs.labels("error").inc()
            code = 2
        else:
            metrics.publish(audit, time.monotonic() - started)
        runs += 1
        if max_runs and runs >= max_runs:
            break
        deadline = started + every
        while not stop.is_set() and time.monotonic() < deadline:
            stop.wait(min(node_poll, max(0.0, deadline - time.monotonic())))
            if code == 2:  # the audit failed: wait for the period, there is no state to compare with
                continue
            try:
                now = node_fingerprint(api, page)
                if now != seen:
                    metrics.node_changes.inc()
                    _settle(api, page, now, node_poll, stop)
                    break
            except AuditError as exc:
                log.warning("cannot list the nodes: %s", exc)
    return code


# A rollout relabels a pool node by node (GPU feature discovery, an operator's upgrade): after a change, the audit
# waits until one poll sees the same Nodes as the one before, so that it judges the new state rather than a pool
# caught half-way; at most this many polls, so that a rollout that never pauses is still audited.
SETTLE_POLLS = 10


def _settle(api: Any, page: int, last: str, node_poll: float, stop: threading.Event) -> None:
    for _ in range(SETTLE_POLLS):
        stop.wait(node_poll)
        if stop.is_set():
            return
        now = node_fingerprint(api, page)
        if now == last:
            return
        last = now
