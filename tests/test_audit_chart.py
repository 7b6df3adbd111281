"""The chart's optional audit role (audit.rbac, audit.schedule) against what ``compatcheck audit`` lists: the role
names exactly the workload table's kinds, and an audit run with exactly the rendered rights (the fake API server
authorizes per rule) finds what an admin's finds; the CronJob runs a valid command line."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from compatcheck.cli.entry import main, parser
from compatcheck.core.audit import AUDIT_RESOURCES
from compatcheck.io.loader import builtin_kinds
from tests.fake_apiserver import FakeApiServer
from tests.test_audit import audit_server
from tests.test_chart import by_kind, template


@pytest.fixture(scope="module")
def helm(helm_dir: str) -> str:
    return str(Path(helm_dir) / "helm")


def test_audit_resources_are_the_workload_table() -> None:
    table = {(g, wk.plural) for wk in builtin_kinds().kinds for g in wk.groups
             if wk.kind != "PodTemplate" and g not in wk.not_served}
    listed = {(g, p) for g, plurals in AUDIT_RESOURCES.items() for p in plurals}
    extra = {("", "nodes"), *(("resource.k8s.io", p) for p in AUDIT_RESOURCES["resource.k8s.io"])}
    assert listed == table | extra


def test_the_chart_renders_no_audit_role_by_default(helm: str) -> None:
    assert not [o for o in template(helm) if o["metadata"]["name"].endswith("-audit")]


def test_the_chart_audit_role_is_exactly_what_the_audit_lists(helm: str) -> None:
    objs = template(helm, "--set", "audit.rbac=true")
    (role,) = [o for o in by_kind(objs, "ClusterRole") if o["metadata"]["name"] == "cc-compatcheck-audit"]
    rules = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert all(rule["verbs"] == ["list"] for rule in role["rules"])
    assert rules == {(g, p) for g, plurals in AUDIT_RESOURCES.items() for p in plurals}
    (crl,) = [o for o in by_kind(objs, "Role") if o["metadata"]["name"] == "cc-compatcheck-audit-crl"]
    assert (crl["metadata"]["namespace"], crl["rules"]) == (
        "kube-public", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}])
    (sa,) = [o for o in by_kind(objs, "ServiceAccount") if o["metadata"]["name"] == "cc-compatcheck-audit"]
    assert sa["automountServiceAccountToken"] is False and not by_kind(objs, "CronJob")


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    srv = audit_server()
    yield srv
    srv.stop()


@pytest.mark.parametrize("reports", ["wgpolicyk8s", "openreports"])
def test_an_audit_with_exactly_the_charts_rights(helm: str, server: FakeApiServer, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str], reports: str) -> None:
    objs = template(helm, "--set", "audit.schedule=*/15 * * * *", "--set", f"audit.reports={reports}")
    rights = {(verb, g, r) for o in [*by_kind(objs, "ClusterRole"), *by_kind(objs, "Role")]
              if o["metadata"]["name"].startswith("cc-compatcheck-audit")
              for rule in o["rules"] for g in rule["apiGroups"] for r in rule["resources"] for verb in rule["verbs"]}
    server.allowed["audit"] = rights
    (cron,) = by_kind(objs, "CronJob")
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "cc-compatcheck-audit"
    script = pod["containers"][0]["command"][2]
    argv = shlex.split(script.split(";")[0])
    assert argv[:2] == ["compatcheck", "audit"]
    args = parser().parse_args(argv[1:])  # the CronJob's command line is one the CLI accepts
    assert (args.in_cluster, args.write_reports, args.format, args.output) == (True, reports, ["json"],
                                                                               ["/tmp/audit.json"])
    kubeconfig = server.kubeconfig(str(tmp_path / "kc"), "audit")
    # The CronJob's own flags, with a kubeconfig for the fake server instead of the pod's in-cluster config and
    # the JSON on stdout instead of its file.
    code = main(["audit", "--kubeconfig", kubeconfig, *[a for a in argv[2:-2] if a != "--in-cluster"]])
    out = capsys.readouterr()
    assert code == 1, out.err
    assert [(f["rule"], f["object"]["name"]) for f in json.loads(out.out)["findings"]] == [
        ("cuda-driver-too-old", "nightly"), ("cuda-driver-needs-forward-compat", "serve-cu122"),
        ("cuda-driver-too-old", "train-cu128"), ("cuda-driver-too-old", "wf")]
    plural = "policyreports" if reports == "wgpolicyk8s" else "reports"
    group = "wgpolicyk8s.io" if reports == "wgpolicyk8s" else "openreports.io"
    assert sorted(o["metadata"]["namespace"] for o in server.objects(group, plural)) == ["ml", "research"]


def test_the_continuous_audit_deployment(helm: str) -> None:
    objs = template(helm, "--set", "audit.continuous=true", "--set", "audit.every=300", "--set",
                    "audit.schedule=0 * * * *")
    assert not by_kind(objs, "CronJob")  # continuous takes precedence
    (dep,) = [o for o in by_kind(objs, "Deployment") if o["metadata"]["name"] == "cc-compatcheck-audit"]
    container = dep["spec"]["template"]["spec"]["containers"][0]
    args = parser().parse_args(container["args"])
    assert (args.in_cluster, args.every, args.node_poll, args.metrics_port, args.metrics_host, args.write_reports) \
        == (True, 300.0, 30.0, 9091, "0.0.0.0", "wgpolicyk8s")
    assert container["ports"] == [{"name": "audit-metrics", "containerPort": 9091}]
    (role,) = [o for o in by_kind(objs, "ClusterRole") if o["metadata"]["name"] == "cc-compatcheck-audit"]
    assert {"apiGroups": ["wgpolicyk8s.io"], "resources": ["policyreports", "clusterpolicyreports"],
            "verbs": ["list", "create", "update", "delete"]} in role["rules"]
