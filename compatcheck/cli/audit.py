"""``compatcheck audit`` in the command line: its arguments only. The handler is in
``compatcheck.webhook.audit_command`` (it needs the kubernetes client: the webhook extra, or the audit extra),
named here as a string and imported only when the command runs."""

from __future__ import annotations

import argparse

from compatcheck.cli.common import count, seconds

FORMATS = ("text", "json", "sarif", "junit", "github", "html")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    audit = sub.add_parser("audit", help="judge what runs in a cluster, once per owner (needs the audit extra)",
                           epilog="exit codes: 0 clean, 1 findings at or above --fail-on (with --what-if: a "
                                  "workload newly breaks), 2 errors")
    audit.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig (default: $KUBECONFIG, ~/.kube/config, else "
                                                            "the in-cluster config)")
    audit.add_argument("--context", help="the kubeconfig context (default: its current-context)")
    audit.add_argument("--in-cluster", action="store_true", help="use the pod's ServiceAccount")
    scope = audit.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", help="audit the workloads of one namespace (default: all)")
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace (the default)")
    audit.add_argument("-l", "--selector", metavar="SELECTOR",
                       help="only workloads and pods with these labels (a label selector, as kubectl -l)")
    audit.add_argument("--chunk-size", type=count, default=500, metavar="N",
                       help="objects per LIST page (limit/continue; default 500, as kubectl)")
    audit.add_argument("--config", metavar="FILE", help="config file (default: .compatcheck.yaml found walking up)")
    audit.add_argument("--rules-dir", metavar="DIR", action="append", default=[], help="extra rule directory")
    audit.add_argument("--what-if", metavar="SELECTOR:CHANGE", action="append", default=[],
                       help="change the live view of the nodes, then report the difference (as lint --what-if)")
    audit.add_argument("--format", action="append", choices=FORMATS, help="output format (repeat with --output)")
    audit.add_argument("-o", "--output", action="append", default=[], metavar="FILE",
                       help="write the matching --format to FILE")
    audit.add_argument("--fail-on", choices=["error", "warning", "info"], help="threshold for exit code 1")
    audit.add_argument("--show-suppressed", action="store_true", help="list suppressed findings and why")
    audit.add_argument("--no-progress", action="store_true", help="no progress bar on a terminal")
    audit.add_argument("--write-reports", nargs="?", const="wgpolicyk8s", choices=["wgpolicyk8s", "openreports"],
                       metavar="API", help="write the findings as policy reports: wgpolicyk8s.io/v1alpha2 "
                                           "PolicyReport/ClusterPolicyReport (default) or openreports.io/v1alpha1 "
                                           "Report/ClusterReport")
    loop = audit.add_argument_group("continuous audit (a Deployment: docs/audit.md)")
    loop.add_argument("--every", type=seconds, metavar="SECONDS",
                      help="audit again every SECONDS (and at once when what the rules read of the Nodes changes); "
                           "only -o files and metrics are written")
    loop.add_argument("--node-poll", type=seconds, default=30.0, metavar="SECONDS",
                      help="with --every: how often the Nodes are listed to notice a change (default 30)")
    loop.add_argument("--metrics-port", type=int, default=0, metavar="PORT",
                      help="with --every: serve Prometheus metrics on this port (0: none)")
    loop.add_argument("--metrics-host", default="127.0.0.1", help="address of the metrics port (default 127.0.0.1)")
    loop.add_argument("--max-runs", type=int, default=0, metavar="N", help="with --every: stop after N audits "
                                                                           "(0: run until stopped)")
    audit.set_defaults(handler="compatcheck.webhook.audit_command:audit_command")
