"""``compatcheck audit`` against a local fake of the API server's read API (tests/fake_apiserver.py): discovery,
paged LISTs, ownership (a finding once per owner, with its running pods), namespaces and label selectors, what-if
on the live view, RBAC refusals and unreachable servers as one-line errors, every output format."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from compatcheck.cli.entry import main
from compatcheck.core.audit import AuditResult
from compatcheck.core.model import Finding, ObjectRef, Severity
from tests.fake_apiserver import FakeApiServer

DATA = Path(__file__).parent / "data" / "audit"
CU128 = "nvidia/cuda:12.8.0-runtime-ubuntu22.04"


def _load(name: str) -> list[dict[str, Any]]:
    doc = YAML(typ="safe").load((DATA / name).read_text())
    return json.loads(json.dumps(doc["items"]))  # plain dicts, merge keys resolved


def pod(name: str, namespace: str, owner: tuple[str, str, str, str] | None, node: str, image: str, pool: str,
        phase: str = "Running", labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"pod-{name}", "labels": labels or {}}
    if owner is not None:
        api_version, kind, owner_name, uid = owner
        meta["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": owner_name, "uid": uid,
                                    "controller": True}]
    gpus = 4 if pool == "a100" else 1
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "nodeSelector": {"pool": pool},
                     "containers": [{"name": "main", "image": image,
                                     "resources": {"limits": {"nvidia.com/gpu": gpus},
                                                   "requests": {"nvidia.com/gpu": gpus}}}]},
            "status": {"phase": phase}}


SERVE = ("apps/v1", "ReplicaSet", "serve-cu122-5d8f", "rs-serve")
PODS = [
    *(pod(f"serve-cu122-5d8f-{i}", "ml", SERVE, f"t4-{i % 2}", "nvidia/cuda:12.2.2-runtime-ubuntu22.04", "t4",
          labels={"app": "serve", "team": "serving"}) for i in range(3)),
    pod("train-cu128-x1", "ml", ("batch/v1", "Job", "train-cu128", "job-train"), "t4-0", CU128, "t4",
        labels={"team": "training"}),
    pod("nightly-2911-a", "ml", ("batch/v1", "Job", "nightly-2911", "job-nightly-2911"), "t4-1", CU128, "t4",
        labels={"team": "training"}),
    pod("nightly-2910-z", "ml", ("batch/v1", "Job", "nightly-2911", "job-nightly-2911"), "t4-1", CU128, "t4",
        phase="Succeeded", labels={"team": "training"}),
    pod("legacy-cu117", "research", None, "t4-1", "nvidia/cuda:11.7.1-runtime-ubuntu22.04", "t4"),
    pod("wf-step-1", "research", ("argoproj.io/v1alpha1", "Workflow", "wf", "wf-uid"), "t4-0", CU128, "t4"),
    *(pod(f"big-cu124-66c-{i}", "ml", ("apps/v1", "ReplicaSet", "big-cu124-66c", "rs-big"), "a100-0",
          "nvidia/cuda:12.4.1-runtime-ubuntu22.04", "a100") for i in range(2)),
]


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    srv = audit_server()
    yield srv
    srv.stop()


def audit_server(nodes: list[dict[str, Any]] | None = None, *extra: list[dict[str, Any]]) -> FakeApiServer:
    """The fake API server, started, serving the audit fixtures' two pools (or ``nodes``), their workloads and
    pods, and ``extra`` objects."""
    srv = FakeApiServer()
    srv.add(_load("nodes.yaml") if nodes is None else nodes)
    srv.add(_load("cluster.yaml"))
    srv.add(PODS)
    for objects in extra:
        srv.add(objects)
    srv.start()
    return srv


def _audit(capsys: pytest.CaptureFixture[str], server: FakeApiServer, tmp_path: Path, *args: str,
           token: str = "admin") -> tuple[int, str, str]:
    kubeconfig = server.kubeconfig(str(tmp_path / f"kubeconfig-{token}"), token)
    code = main(["audit", "--kubeconfig", kubeconfig, *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _rows(doc: dict[str, Any]) -> list[tuple[str, str, str, str, int]]:
    return [(f["rule"], f["object"]["kind"], f["object"]["namespace"], f["object"]["name"], f["pods"])
            for f in doc["findings"]]


def test_audit_reports_each_owner_once_with_its_running_pods(capsys: pytest.CaptureFixture[str],
                                                              server: FakeApiServer, tmp_path: Path) -> None:
    code, out, err = _audit(capsys, server, tmp_path, "--format", "json", "--chunk-size", "2")
    assert (code, err) == (1, "")
    doc = json.loads(out)
    assert _rows(doc) == [
        ("cuda-driver-too-old", "CronJob", "ml", "nightly", 1),  # its Job's Succeeded pod is not counted
        ("cuda-driver-needs-forward-compat", "Deployment", "ml", "serve-cu122", 3),  # not its ReplicaSet or pods
        ("cuda-driver-too-old", "Job", "ml", "train-cu128", 1),
        ("cuda-driver-too-old", "Workflow", "research", "wf", 1),  # a kind compatcheck does not read: its pod
    ]
    first = doc["findings"][0]
    assert (first["file"], first["line"], first["pointer"], first["container"]) == (
        "ml/CronJob/nightly", None, "/spec/jobTemplate/spec/template/spec/containers/0/image", "main")
    assert first["message"].endswith("(1 running pod affected)")
    assert doc["summary"]["audit"] == {"nodes": 3, "nodeClasses": 2, "owners": 6, "pods": 9, "podsEvaluated": 2}
    assert doc["summary"]["objects"] == 17  # 7 workload objects + 10 pods (the Service and ConfigMap are not listed)
    # Every LIST was paged: limit 2, then continue tokens until the last page.
    assert [q.get("limit") for q in server.lists("nodes")] == ["2", "2"]
    assert [q.get("continue", "") != "" for q in server.lists("pods")] == [False, True, True, True, True]
    assert server.lists("configmaps") == [{"limit": "2", "labelSelector":
                                           "features.alauda.io/type=CustomResourceLimitation"}]


def test_audit_exit_code_follows_fail_on(capsys: pytest.CaptureFixture[str], server: FakeApiServer,
                                         tmp_path: Path) -> None:
    code, out, _err = _audit(capsys, server, tmp_path, "--format", "json", "-n", "ml", "-l", "team=serving")
    assert code == 0  # a warning only
    assert _rows(json.loads(out)) == [("cuda-driver-needs-forward-compat", "Deployment", "ml", "serve-cu122", 3)]
    code, _out, _err = _audit(capsys, server, tmp_path, "--format", "json", "-n", "ml", "-l", "team=serving",
                              "--fail-on", "warning")
    assert code == 1


def test_audit_of_one_namespace_with_a_label_selector(capsys: pytest.CaptureFixture[str], server: FakeApiServer,
                                                      tmp_path: Path) -> None:
    code, out, _err = _audit(capsys, server, tmp_path, "--format", "json", "-n", "ml", "-l", "team=training")
    assert code == 1
    assert _rows(json.loads(out)) == [("cuda-driver-too-old", "CronJob", "ml", "nightly", 1),
                                      ("cuda-driver-too-old", "Job", "ml", "train-cu128", 1)]
    assert {q["labelSelector"] for q in server.lists("pods")} == {"team=training"}
    paths = {path for _m, path, _q in server.requests if path.endswith("/pods")}
    assert paths == {"/api/v1/namespaces/ml/pods"}


def test_audit_text_output(capsys: pytest.CaptureFixture[str], server: FakeApiServer, tmp_path: Path) -> None:
    code, out, _err = _audit(capsys, server, tmp_path)
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == "ml/CronJob/nightly"
    assert lines[1].startswith("         -  error    image CUDA 12.8 (image nvidia/cuda:12.8.0-runtime-ubuntu22.04) "
                               "needs a driver from branch >= 570")
    assert lines[1].endswith("(1 running pod affected)  (cuda-driver-too-old; CronJob ml/nightly [main])")
    assert lines[-2:] == ["3 nodes (2 classes), 17 objects, 6 owners, 9 running pods: 3 errors, 1 warnings, 0 info",
                          "GPU workloads: 6, checked 6, not checked 0"]


@pytest.mark.parametrize("fmt", ["sarif", "junit", "github"])
def test_audit_every_lint_format(capsys: pytest.CaptureFixture[str], server: FakeApiServer, tmp_path: Path,
                                 fmt: str) -> None:
    code, out, _err = _audit(capsys, server, tmp_path, "--format", fmt)
    assert code == 1
    assert out.count("cuda-driver-too-old") >= 3 and "running pod affected" in out


def test_audit_what_if_driver_upgrade(capsys: pytest.CaptureFixture[str], server: FakeApiServer,
                                      tmp_path: Path) -> None:
    code, out, _err = _audit(capsys, server, tmp_path, "--format", "json", "--what-if", "pool=t4:driver=580.65.06")
    assert code == 0
    doc = json.loads(out)
    assert _rows(doc) == [("cuda-driver-major-skew", "Pod", "research", "legacy-cu117", 1)]  # after: a warning
    assert doc["whatIf"] == {
        "changes": [{"change": "pool=t4:driver=580.65.06", "nodes": 2}],
        "newlyBroken": [],
        "newlyFixed": [
            {"object": {"kind": "CronJob", "namespace": "ml", "name": "nightly"}, "rules": ["cuda-driver-too-old"]},
            {"object": {"kind": "Job", "namespace": "ml", "name": "train-cu128"}, "rules": ["cuda-driver-too-old"]},
            {"object": {"kind": "Workflow", "namespace": "research", "name": "wf"},
             "rules": ["cuda-driver-too-old"]}],
        "stillFailing": []}
    code, out, _err = _audit(capsys, server, tmp_path, "--format", "json", "--fail-on", "warning",
                             "--what-if", "pool=t4:driver=580.65.06")
    assert code == 1
    assert json.loads(out)["whatIf"]["newlyBroken"] == [
        {"object": {"kind": "Pod", "namespace": "research", "name": "legacy-cu117"},
         "rules": ["cuda-driver-major-skew"]}]


AUDIT_ROLE = {("list", "", "nodes"), ("list", "", "pods"), ("list", "", "configmaps"),
              *(("list", "apps", p) for p in ("deployments", "replicasets", "statefulsets", "daemonsets")),
              *(("list", "batch", p) for p in ("jobs", "cronjobs")), ("list", "", "replicationcontrollers"),
              *(("list", "resource.k8s.io", p) for p in ("resourceslices", "deviceclasses", "resourceclaims",
                                                         "resourceclaimtemplates"))}


def test_audit_as_the_audit_role_and_a_refusal(capsys: pytest.CaptureFixture[str], server: FakeApiServer,
                                               tmp_path: Path) -> None:
    server.allowed["audit"] = set(AUDIT_ROLE)
    code, out, _err = _audit(capsys, server, tmp_path, "--format", "json", token="audit")
    assert code == 1 and len(json.loads(out)["findings"]) == 4
    server.allowed["no-jobs"] = AUDIT_ROLE - {("list", "batch", "cronjobs")}
    code, out, err = _audit(capsys, server, tmp_path, token="no-jobs")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        'compatcheck: error: forbidden: cannot list cronjobs.batch (cronjobs.batch is forbidden: User '
        '"system:serviceaccount:no-jobs" cannot list resource "cronjobs" in API group "batch"); the audit role '
        'lists what it needs (docs/audit.md)']
    code, _out, err = _audit(capsys, server, tmp_path, token="stranger")
    assert (code, err.splitlines()) == (2, ["compatcheck: error: GET /apis: 401 Unauthorized: the credentials were "
                                            "refused"])


def test_audit_errors_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["audit", "--kubeconfig", str(tmp_path / "missing")])
    assert (code, capsys.readouterr().err.splitlines()) == (2, [f"compatcheck: error: --kubeconfig "
                                                                f"{tmp_path / 'missing'}: no such file"])
    dead = FakeApiServer()
    dead.port = 1  # nothing listens there
    code = main(["audit", "--kubeconfig", dead.kubeconfig(str(tmp_path / "kc"))])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 1
    assert err[0].startswith("compatcheck: error: cannot reach the API server at http://127.0.0.1:1: ")
    code = main(["audit", "--kubeconfig", str(tmp_path / "kc"), "-l", "team in (a"])
    assert (code, capsys.readouterr().err.splitlines()) == (2, [
        "compatcheck: error: -l/--selector: selector 'team in (a': '(' without ')'"])


def _finding(rule: str, ref: ObjectRef) -> Finding:
    return Finding(rule, Severity.ERROR, "m", ref, "/spec", "main")


def test_owners_are_found_through_controllers_whatever_the_order() -> None:
    result = AuditResult()
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {
        "name": "d-1", "namespace": "n", "uid": "rs", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "dep", "controller": True}]}}
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n", "uid": "dep"}}
    result.add_object(rs, [[_finding("r", ObjectRef("apps/v1", "ReplicaSet", "n", "d-1"))]])  # before its owner
    result.add_object(dep, [[_finding("r", ObjectRef("apps/v1", "Deployment", "n", "d"))]])
    owned = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "n", "ownerReferences": [
        {"kind": "ReplicaSet", "name": "d-1", "uid": "rs", "controller": True}]}, "status": {"phase": "Running"}}
    assert not result.pod_needs_evaluation(owned)
    result.add_pod(owned)
    result.add_pod({**owned, "status": {"phase": "Failed"}})
    owners = result.owners()
    assert [(o.ref.kind, o.ref.name, o.pods, [list(f) for f in o.findings]) for o in owners] == [
        ("Deployment", "d", 1, [[("r", "/spec", "main")]])]


def test_audit_html_matrix(capsys: pytest.CaptureFixture[str], server: FakeApiServer, tmp_path: Path) -> None:
    from tests.test_html import Cells

    code, out, _err = _audit(capsys, server, tmp_path, "--format", "html", "--what-if", "pool=t4:driver=580.65.06")
    assert code == 0
    page = Cells()
    page.feed(out)
    assert page.pools == ["a100", "t4"]
    assert page.cells == {
        ("CronJob ml/nightly", 0): "n/a", ("CronJob ml/nightly", 1): "ok",
        ("Deployment ml/big-cu124", 0): "ok", ("Deployment ml/big-cu124", 1): "n/a",
        ("Deployment ml/serve-cu122", 0): "n/a", ("Deployment ml/serve-cu122", 1): "ok",
        ("Job ml/train-cu128", 0): "n/a", ("Job ml/train-cu128", 1): "ok",
        ("Pod research/legacy-cu117", 0): "n/a", ("Pod research/legacy-cu117", 1): "warning",  # R580: a skew
        ("Workflow research/wf", 0): "n/a", ("Workflow research/wf", 1): "ok"}
    assert page.rows == {"CronJob ml/nightly": "newly-fixed", "Deployment ml/big-cu124": "",
                         "Deployment ml/serve-cu122": "", "Job ml/train-cu128": "newly-fixed",
                         "Pod research/legacy-cu117": "", "Workflow research/wf": "newly-fixed"}


FIXTURES = Path(__file__).parent.parent / "fixtures"


def _docs(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for doc in YAML(typ="safe").load_all(path.read_text()):
        if doc:
            out.extend(doc["items"] if doc.get("kind") == "List" else [doc])
    return json.loads(json.dumps(out))


def test_audit_reads_dra_objects_and_crl_configmaps(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A DRA pool (ResourceSlices of R470 T4s, the DeviceClass), a Deployment whose pods claim a GPU through a
    ResourceClaimTemplate, the cf-crl ConfigMaps of kube-public and a vGPU pod they govern: the audit resolves the
    claims against the listed slices and the pod against the listed CRLs (the rules' own fixtures)."""
    srv = FakeApiServer()
    srv.add(_docs(FIXTURES / "cuda-driver-too-old" / "nodes.dra-r470.yaml"))
    srv.add(_docs(FIXTURES / "cuda-driver-too-old" / "fail.dra-r470.yaml"))
    srv.add(_docs(FIXTURES / "crl-default-missing" / "crl.yaml"))
    (vgpu,) = _docs(FIXTURES / "crl-default-missing" / "fail.optional.yaml")
    vgpu["metadata"].update(namespace="vgpu", uid="pod-app")
    srv.add([vgpu, {"apiVersion": "v1", "kind": "Node", "metadata": {  # a GPU-Manager (vCUDA) node for it
        "name": "vgpu-0", "labels": {"kubernetes.io/hostname": "vgpu-0", "nvidia.com/gpu.product": "Tesla-T4",
                                     "nvidia.com/cuda.driver-version.full": "470.82.01",
                                     "compatcheck.io/vgpu-baseline-cuda": "11.4"}},
        "status": {"allocatable": {"tencent.com/vcuda-core": "400", "tencent.com/vcuda-memory": "64"}}}])
    srv.start()
    try:
        code, out, _err = _audit(capsys, srv, tmp_path, "--format", "json", "--fail-on", "info")
    finally:
        srv.stop()
    assert code == 1
    doc = json.loads(out)
    assert [(f["rule"], f["object"]["kind"], f["object"]["namespace"], f["object"]["name"], f["pods"], f["pointer"])
            for f in doc["findings"]] == [
        ("cuda-driver-too-old", "Deployment", "ml", "trainer", 0, "/spec/template/spec/containers/0/image"),
        ("crl-default-missing", "Pod", "vgpu", "app", 1,
         "/spec/containers/0/resources/limits/example.com~1vcuda-priority")]
    assert doc["findings"][0]["message"].startswith("image CUDA 12.4 (image pytorch/pytorch:2.5.1-cuda12.4-cudnn9-"
                                                    "runtime) needs a driver from branch >= 550")
    assert "CRL group gpu-manager, ConfigMap cf-crl-gpu-manager-vcuda-priority" in doc["findings"][1]["message"]
    assert [q["labelSelector"] for q in srv.lists("configmaps")] == ["features.alauda.io/type=CustomResourceLimitation"]


def test_a_progress_bar_on_a_terminal_only(capsys: pytest.CaptureFixture[str], server: FakeApiServer,
                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    code, _out, err = _audit(capsys, server, tmp_path, "--format", "json")
    assert (code, err) == (1, "")  # not a terminal: no bar
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    code, _out, err = _audit(capsys, server, tmp_path, "--format", "json")
    assert code == 1
    assert "pods: " in err and " objects" in err  # tqdm's bar: the resource being listed and the objects read
    code, _out, err = _audit(capsys, server, tmp_path, "--format", "json", "--no-progress")
    assert err == ""


def test_without_the_pool_label_the_platform_policy_decides(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    """The same cluster, but the t4 pool's admin has not declared forward compatibility: the platform's policy
    (driver >= runtime) makes CUDA 12.2 on R525 an error, and the audit says so once for the Deployment."""
    nodes = _load("nodes.yaml")
    for node in nodes:
        node["metadata"]["labels"].pop("compatcheck.io/forward-compatibility", None)
    srv = audit_server(nodes)
    try:
        code, out, _err = _audit(capsys, srv, tmp_path, "--format", "json")
    finally:
        srv.stop()
    assert code == 1
    serve = [(r, sev) for (r, k, _ns, name, _n), sev in
             zip(_rows(json.loads(out)), (f["severity"] for f in json.loads(out)["findings"]), strict=True)
             if name == "serve-cu122"]
    assert serve == [("cuda-driver-behind-runtime", "error")]
