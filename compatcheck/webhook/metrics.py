"""Prometheus metrics of the webhook, on their own registry (no process-global state between app instances)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter("compatcheck_admission_requests_total", "Admission requests by outcome",
                                ["endpoint", "operation", "kind", "result"], registry=r)
        self.latency = Histogram("compatcheck_admission_duration_seconds", "Time to answer an admission request",
                                 ["endpoint"], registry=r,
                                 buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0))
        self.findings = Counter("compatcheck_findings_total", "Findings reported at admission",
                                ["rule", "severity", "endpoint"], registry=r)
        self.errors = Counter("compatcheck_internal_errors_total", "Requests answered by the failure mode",
                              ["endpoint"], registry=r)
        self.bad_requests = Counter("compatcheck_bad_requests_total", "Malformed or oversized bodies (HTTP 4xx)",
                                    ["endpoint", "reason"], registry=r)
        self.watch_restarts = Counter("compatcheck_watch_restarts_total", "Watch re-lists and reconnects",
                                      ["resource", "reason"], registry=r)
        self.crl_loaded = Gauge("compatcheck_crl_configmaps_loaded", "Valid CRL ConfigMaps in the view", registry=r)
        self.crl_invalid = Gauge("compatcheck_crl_configmaps_invalid", "Invalid CRL ConfigMaps ignored", registry=r)
        self.nodes = Gauge("compatcheck_nodes", "Nodes in the cluster view", registry=r)
        self.node_problems = Gauge("compatcheck_node_problems",
                                   "Distinct Node label or allocatable values in the view that cannot be read (the "
                                   "rules ignore them; the log names each)", registry=r)
        self.node_problems_seen = Counter("compatcheck_node_problems_reported_total",
                                          "Node label or allocatable values that cannot be read, counted once each "
                                          "when it appears, by the label or resource", ["field"], registry=r)
        self.node_classes = Gauge("compatcheck_node_classes", "Node equivalence classes in the cluster view",
                                  registry=r)
        self.view_stale_seconds = Gauge("compatcheck_view_stale_seconds",
                                        "Seconds the live cluster view has been unable to follow the API server "
                                        "(0: it follows)", registry=r)
        self.unsynced_answers = Counter("compatcheck_unsynced_answers_total",
                                        "Admission requests answered by the failure mode because the cluster view "
                                        "had not completed its first sync", ["endpoint"], registry=r)
        self.cert_expiry = Gauge("compatcheck_certificate_expiry_timestamp_seconds",
                                 "notAfter of the serving certificate (Unix time)", registry=r)
        self.cert_reloads = Counter("compatcheck_certificate_reloads_total", "Serving certificate reloads", registry=r)
        self.connections = Gauge("compatcheck_connections", "Open connections by listener (admission, metrics)",
                                 ["listener"], registry=r)
        self.connections_closed = Counter(
            "compatcheck_connections_closed_total",
            "Connections the server closed early: header-timeout (no request head in time), evicted (at the cap, "
            "to make room: it had sent no request yet), rejected (at the cap, nothing to evict)",
            ["listener", "reason"], registry=r)
        self.registry_lookups = Counter(
            "compatcheck_registry_lookups_total",
            "Image config lookups at admission by result: hit (in memory), miss (fetch started), failed-recently "
            "(a failure remembered for a minute), not-allowed (registry not on the allowlist: no request)",
            ["result"], registry=r)
        self.registry_fetches = Counter("compatcheck_registry_fetches_total",
                                        "Image config fetches by outcome (ok, or the failure's kind: denied, "
                                        "not-found, timeout, tls, network, too-large, digest, protocol, "
                                        "not-allowed, status)", ["outcome"], registry=r)
        self.registry_fetch_duration = Histogram(
            "compatcheck_registry_fetch_duration_seconds", "Time to fetch one image's config (manifest, index, "
            "config blob, tokens), in the background", registry=r,
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0))
        self.registry_wait = Histogram(
            "compatcheck_registry_wait_seconds", "Time an admission request waited for image config fetches "
            "(bounded by registry.webhookBudgetSeconds)", registry=r,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0))
        self.data_age = Gauge("compatcheck_data_age_seconds",
                              "Seconds since the knowledge in use (rules and data tables) was built: the pulled data "
                              "bundle's build time, or the built-in tables' newest asOf date", registry=r)
        self.data_refreshes = Counter("compatcheck_data_refreshes_total",
                                      "Pulls of data.source by result: updated (a new bundle verified and swapped "
                                      "in), unchanged (the same digest)", ["result"], registry=r)
        self.data_refresh_failures = Counter("compatcheck_data_refresh_failures_total",
                                             "Pulls of data.source that failed (registry, verification or "
                                             "validation): the webhook keeps the knowledge it had", registry=r)
        self.data_last_success = Gauge("compatcheck_data_last_refresh_success_timestamp_seconds",
                                       "When a pull of data.source last succeeded (Unix time; 0: never)", registry=r)
        self.data_info = Gauge("compatcheck_data_info", "The knowledge in use (value 1): source builtin or pulled, "
                               "the bundle's digest and reference", ["source", "digest", "ref"], registry=r)
        self._children: dict[tuple[Any, ...], Any] = {}

    def child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, remembered: prometheus-client re-validates the labels and takes a lock
        on every call, and the admission path asks for the same few children on every request. Label values
        come from a closed set (endpoints, operations, result, rule ids, kinds the webhook is registered for)."""
        key = (id(metric), *labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found
