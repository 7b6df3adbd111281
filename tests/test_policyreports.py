"""``compatcheck audit --write-reports``: PolicyReports (wgpolicyk8s.io/v1alpha2, the default) or openreports.io
Reports, valid against the CRDs' own openAPIV3Schema (../shared/reference/crds, read in place), replaced on each
run and removed when their findings disappear; against the fake API server of tests/fake_apiserver.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from ruamel.yaml import YAML

from compatcheck.cli.entry import main
from compatcheck.core.model import Finding, ObjectRef, Severity
from compatcheck.report.policyreport import APIS, build_reports
from tests.conftest import shared
from tests.fake_apiserver import FakeApiServer
from tests.test_audit import audit_server


def _schema(crd_file: str, version: str) -> dict[str, Any]:
    docs = [d for d in YAML(typ="safe").load_all(shared(f"reference/crds/{crd_file}").read_text()) if d]
    (ver,) = [v for v in docs[0]["spec"]["versions"] if v["name"] == version]
    assert ver["served"] is True
    schema: dict[str, Any] = ver["schema"]["openAPIV3Schema"]
    return schema


CRDS = {("wgpolicyk8s.io", "PolicyReport"): ("wgpolicyk8s.io_policyreports.yaml", "v1alpha2"),
        ("wgpolicyk8s.io", "ClusterPolicyReport"): ("wgpolicyk8s.io_clusterpolicyreports.yaml", "v1alpha2"),
        ("openreports.io", "Report"): ("openreports.io_reports.yaml", "v1alpha1"),
        ("openreports.io", "ClusterReport"): ("openreports.io_clusterreports.yaml", "v1alpha1")}


def validate(report: dict[str, Any]) -> None:
    group = report["apiVersion"].split("/")[0]
    crd_file, version = CRDS[(group, report["kind"])]
    assert report["apiVersion"] == f"{group}/{version}"
    jsonschema.validate(report, _schema(crd_file, version))


def _findings() -> list[tuple[Finding, int]]:
    return [(Finding("cuda-driver-too-old", Severity.ERROR, "too old", ObjectRef("batch/v1", "Job", "ml", "train"),
                     "/spec/template/spec/containers/0/image", "main"), 2),
            (Finding("cuda-driver-major-skew", Severity.WARNING, "skew", ObjectRef("v1", "Pod", "research", "p"),
                     "/spec/containers/0/image", "main"), 1),
            (Finding("gpu-no-eligible-node", Severity.ERROR, "no node",
                     ObjectRef("serving.kserve.io/v1alpha1", "ClusterServingRuntime", None, "rt"), "/spec"), 0)]


@pytest.mark.parametrize("which", ["wgpolicyk8s", "openreports"])
def test_reports_are_valid_against_the_crd_schemas(which: str) -> None:
    reports = build_reports(_findings(), APIS[which], 1764200000, namespaces=["empty"])
    kinds = [(r["kind"], r["metadata"].get("namespace")) for r in reports]
    api = APIS[which]
    assert kinds == [(api.kind, "empty"), (api.kind, "ml"), (api.kind, "research"), (api.cluster_kind, None)]
    for r in reports:
        validate(r)
    ml = reports[1]
    assert ml["summary"] == {"pass": 0, "fail": 1, "warn": 0, "error": 0, "skip": 0}
    assert ml["results"] == [{
        "policy": "cuda-driver-too-old", "rule": "cuda-driver-too-old", "result": "fail", "severity": "high",
        "source": "compatcheck", "category": "CUDA compatibility", "scored": True, "message": "too old",
        "timestamp": {"seconds": 1764200000, "nanos": 0},
        "resources": [{"apiVersion": "batch/v1", "kind": "Job", "namespace": "ml", "name": "train"}],
        "properties": {"pods": "2", "pointer": "/spec/template/spec/containers/0/image", "container": "main"}}]
    assert reports[2]["results"][0]["result"] == "warn" and reports[2]["results"][0]["severity"] == "medium"
    assert ("source" in ml) is (which == "openreports")


def test_the_schema_check_can_fail() -> None:
    (report, *_rest) = build_reports(_findings()[:1], APIS["wgpolicyk8s"], 1)
    report["results"][0]["result"] = "broken"
    with pytest.raises(jsonschema.ValidationError, match="'broken' is not one of"):
        validate(report)


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    kyverno = {"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReport",  # someone else's: left alone
               "metadata": {"name": "kyverno-xyz", "namespace": "ml",
                            "labels": {"app.kubernetes.io/managed-by": "kyverno"}}, "results": []}
    srv = audit_server(None, [kyverno])
    yield srv
    srv.stop()


def _rows(server: FakeApiServer, plural: str = "policyreports", group: str = "wgpolicyk8s.io") -> dict[str, Any]:
    return {f"{o['metadata'].get('namespace')}/{o['metadata']['name']}":
            sorted((r["resources"][0]["kind"], r["resources"][0]["name"], r["policy"], r["result"],
                    r["properties"]["pods"]) for r in o.get("results", []))
            for o in server.objects(group, plural)}


def test_write_reports_replaces_and_removes(capsys: pytest.CaptureFixture[str], server: FakeApiServer,
                                            tmp_path: Path) -> None:
    kubeconfig = server.kubeconfig(str(tmp_path / "kc"))
    assert main(["audit", "--kubeconfig", kubeconfig, "--write-reports", "--format", "json"]) == 1
    assert capsys.readouterr().err == "compatcheck: wrote 2 PolicyReport/ClusterPolicyReport object(s)\n"
    assert _rows(server) == {
        "ml/compatcheck": [("CronJob", "nightly", "cuda-driver-too-old", "fail", "1"),
                           ("Deployment", "serve-cu122", "cuda-driver-needs-forward-compat", "warn", "3"),
                           ("Job", "train-cu128", "cuda-driver-too-old", "fail", "1")],
        "ml/kyverno-xyz": [],
        "research/compatcheck": [("Workflow", "wf", "cuda-driver-too-old", "fail", "1")]}
    for report in server.objects("wgpolicyk8s.io", "policyreports"):
        if report["metadata"]["name"] == "compatcheck":
            validate({k: v for k, v in report.items()})
    # The T4 pool's driver is upgraded to R580 (GFD rewrites its labels): the next run replaces the research
    # report (the CUDA 11.7 pod now has a major skew, a warning) and deletes the ml one (nothing left there).
    for node in server.objects("", "nodes"):
        labels = node["metadata"]["labels"]
        if labels.get("pool") == "t4":
            labels.update({"nvidia.com/cuda.driver-version.full": "580.65.06",
                           "nvidia.com/cuda.driver-version.major": "580",
                           "nvidia.com/cuda.driver-version.minor": "65",
                           "nvidia.com/cuda.driver-version.revision": "06",
                           "nvidia.com/cuda.runtime-version.major": "13",
                           "nvidia.com/cuda.runtime-version.minor": "0"})
    assert main(["audit", "--kubeconfig", kubeconfig, "--write-reports"]) == 0
    assert capsys.readouterr().err == ("compatcheck: wrote 1 PolicyReport/ClusterPolicyReport object(s), deleted 1 "
                                       "stale\n")
    assert _rows(server) == {
        "ml/kyverno-xyz": [],
        "research/compatcheck": [("Pod", "legacy-cu117", "cuda-driver-major-skew", "warn", "1")]}
    methods = [(m, p) for m, p, _q in server.requests if m in ("POST", "PUT", "DELETE")]
    assert methods == [
        ("POST", "/apis/wgpolicyk8s.io/v1alpha2/namespaces/ml/policyreports"),
        ("POST", "/apis/wgpolicyk8s.io/v1alpha2/namespaces/research/policyreports"),
        ("PUT", "/apis/wgpolicyk8s.io/v1alpha2/namespaces/research/policyreports/compatcheck"),
        ("DELETE", "/apis/wgpolicyk8s.io/v1alpha2/namespaces/ml/policyreports/compatcheck")]


def test_write_openreports(capsys: pytest.CaptureFixture[str], server: FakeApiServer, tmp_path: Path) -> None:
    kubeconfig = server.kubeconfig(str(tmp_path / "kc"))
    assert main(["audit", "--kubeconfig", kubeconfig, "-n", "research", "--write-reports", "openreports"]) == 1
    assert capsys.readouterr().err == "compatcheck: wrote 1 Report/ClusterReport object(s)\n"
    assert _rows(server, "reports", "openreports.io") == {
        "research/compatcheck": [("Workflow", "wf", "cuda-driver-too-old", "fail", "1")]}
    (report,) = server.objects("openreports.io", "reports")
    validate(json.loads(json.dumps(report)))


def test_writing_without_the_right_is_one_line(capsys: pytest.CaptureFixture[str], server: FakeApiServer,
                                               tmp_path: Path) -> None:
    from tests.test_audit import AUDIT_ROLE

    server.allowed["ro"] = set(AUDIT_ROLE) | {("list", "wgpolicyk8s.io", "policyreports"),
                                              ("list", "wgpolicyk8s.io", "clusterpolicyreports")}
    code = main(["audit", "--kubeconfig", server.kubeconfig(str(tmp_path / "kc"), "ro"), "--write-reports"])
    err = capsys.readouterr().err.splitlines()
    assert code == 2
    assert err == ['compatcheck: error: forbidden: cannot POST /apis/wgpolicyk8s.io/v1alpha2/namespaces/ml/'
                   'policyreports (policyreports.wgpolicyk8s.io is forbidden: User "system:serviceaccount:ro" cannot '
                   'create resource "policyreports" in API group "wgpolicyk8s.io")']
