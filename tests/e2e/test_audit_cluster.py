"""``compatcheck audit`` against a real kube-apiserver (issue #22): nodes in two pools, running workloads
(a Deployment with its ReplicaSet and pods, a Job and its pod, bare pods), each finding once per owner with its
pods; ``--what-if`` of a driver upgrade and of a GPU swap; the chart's audit ServiceAccount (exactly its role);
``--write-reports`` into the policy report CRDs (../shared/reference/crds), read back with kubectl, replaced after
the pool's driver labels change.

No controller-manager or kubelet runs here: the ReplicaSet and the pods are created as those controllers would
create them (ownerReferences with the owners' uids, ``nodeName`` set as the scheduler would), and pods stay
Pending, which the audit counts as running (not Succeeded or Failed). Workloads live in a namespace of their
own and the audit is scoped to it (``-n``): the other modules share the API server.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from compatcheck.cli.entry import main
from tests.conftest import ROOT, shared
from tests.e2e.conftest import create_node, gpu_node, namespace, wait_until
from tests.e2e.kapi import KubeAPIServer

CU128 = "nvidia/cuda:12.8.0-runtime-ubuntu22.04"  # R525 (CUDA 12.0) is too old: cuda-driver-too-old
CU117 = "nvidia/cuda:11.7.1-runtime-ubuntu22.04"  # fine on Turing; cannot target Hopper; a skew on R580
CU124 = "nvidia/cuda:12.4.1-runtime-ubuntu22.04"  # R550 runs it


def _pod_spec(image: str, pool: str, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeSelector": {"pool": pool}, "containers": [
        {"name": "main", "image": image, "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    if node:
        spec["nodeName"] = node
    return spec


def _owner(obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": True}


def _create(kapi: KubeAPIServer, ns: str, obj: dict[str, Any]) -> dict[str, Any]:
    out = kapi.kubectl("create", "-n", ns, "-o", "json", "-f", "-", stdin=json.dumps(obj))
    created: dict[str, Any] = json.loads(out.stdout)
    return created


@pytest.fixture(scope="module")
def cluster(kapi: KubeAPIServer) -> dict[str, str]:
    """Two pools (T4 on R525, A100 on R550) and the workloads of one namespace; their names."""
    api = kapi.client()
    suffix = uuid.uuid4().hex[:6]
    t4, a100 = f"audit-t4-{suffix}", f"audit-a100-{suffix}"
    for i in range(2):
        create_node(api, gpu_node(f"{t4}-{i}", product="Tesla-T4", driver="525.60.13", gpus=1,
                                  labels={"pool": t4}))
    create_node(api, gpu_node(f"{a100}-0", product="NVIDIA-A100-SXM4-40GB", driver="550.54.15", gpus=8,
                              labels={"pool": a100}))
    ns = namespace(api, "audit")
    dep = _create(kapi, ns, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "serve"}, "spec": {
        "replicas": 2, "selector": {"matchLabels": {"app": "serve"}},
        "template": {"metadata": {"labels": {"app": "serve"}}, "spec": _pod_spec(CU128, t4)}}})
    rs = _create(kapi, ns, {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {
        "name": "serve-6d5f", "labels": {"app": "serve"}, "ownerReferences": [_owner(dep)]}, "spec": {
        "replicas": 2, "selector": {"matchLabels": {"app": "serve"}},
        "template": {"metadata": {"labels": {"app": "serve"}}, "spec": _pod_spec(CU128, t4)}}})
    for i in range(2):
        _create(kapi, ns, {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"serve-6d5f-{i}", "labels": {"app": "serve"}, "ownerReferences": [_owner(rs)]},
            "spec": _pod_spec(CU128, t4, f"{t4}-{i}")})
    job = _create(kapi, ns, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"}, "spec": {
        "template": {"spec": {**_pod_spec(CU128, t4), "restartPolicy": "Never"}}}})
    _create(kapi, ns, {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "train-x1", "labels": job["spec"]["template"]["metadata"]["labels"],
        "ownerReferences": [_owner(job)]}, "spec": {**_pod_spec(CU128, t4, f"{t4}-0"), "restartPolicy": "Never"}})
    _create(kapi, ns, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "legacy"},
                       "spec": _pod_spec(CU117, t4, f"{t4}-1")})
    _create(kapi, ns, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big"},
                       "spec": _pod_spec(CU124, a100, f"{a100}-0")})
    return {"ns": ns, "t4": t4, "a100": a100}


def _audit(capsys: pytest.CaptureFixture[str], kubeconfig: Path, *args: str) -> tuple[int, dict[str, Any]]:
    code = main(["audit", "--kubeconfig", str(kubeconfig), "--format", "json", *args])
    out = capsys.readouterr()
    assert out.out, out.err
    return code, json.loads(out.out)


def _rows(doc: dict[str, Any]) -> list[tuple[str, str, str, int]]:
    return [(f["rule"], f["object"]["kind"], f["object"]["name"], f["pods"]) for f in doc["findings"]]


EXPECTED = [("cuda-driver-too-old", "Deployment", "serve", 2), ("cuda-driver-too-old", "Job", "train", 1)]


def test_audit_finds_the_incompatible_workloads_once_per_owner(kapi: KubeAPIServer, cluster: dict[str, str],
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = _audit(capsys, kapi.kubeconfig, "-n", cluster["ns"], "--chunk-size", "1")
    assert code == 1
    assert _rows(doc) == EXPECTED
    audit = doc["summary"]["audit"]
    assert (audit["pods"], audit["podsEvaluated"], audit["owners"]) == (5, 2, 4)


def test_what_if_driver_upgrade_and_gpu_swap(kapi: KubeAPIServer, cluster: dict[str, str],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    t4 = cluster["t4"]
    code, doc = _audit(capsys, kapi.kubeconfig, "-n", cluster["ns"], "--what-if", f"pool={t4}:driver=580.65.06")
    assert code == 0
    assert doc["whatIf"] == {
        "changes": [{"change": f"pool={t4}:driver=580.65.06", "nodes": 2}], "newlyBroken": [],
        "newlyFixed": [{"object": {"kind": "Deployment", "namespace": cluster["ns"], "name": "serve"},
                        "rules": ["cuda-driver-too-old"]},
                       {"object": {"kind": "Job", "namespace": cluster["ns"], "name": "train"},
                        "rules": ["cuda-driver-too-old"]}],
        "stillFailing": []}
    code, doc = _audit(capsys, kapi.kubeconfig, "-n", cluster["ns"], "--what-if",
                       f"pool={t4}:product=NVIDIA-H100-80GB-HBM3")
    assert code == 1
    assert doc["whatIf"]["newlyBroken"] == [
        {"object": {"kind": "Pod", "namespace": cluster["ns"], "name": "legacy"},
         "rules": ["gpu-arch-too-new-for-cuda"]}]


def test_audit_as_the_charts_audit_service_account(kapi: KubeAPIServer, cluster: dict[str, str], helm_dir: str,
                                                   tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    release_ns = namespace(kapi.client(), "audit-release")
    proc = subprocess.run([str(Path(helm_dir) / "helm"), "template", "cc", str(ROOT / "charts" / "compatcheck"),
                           "--namespace", release_ns, "--set", "audit.rbac=true", "--set", "clusterView.mode=none",
                           "--set", "tls.mode=secret", "--set", "tls.caBundle=QUJD"],
                          capture_output=True, text=True, timeout=120, check=True)
    objs = [o for o in YAML(typ="safe").load_all(proc.stdout)
            if o and o["metadata"]["name"] in ("cc-compatcheck-audit", "cc-compatcheck-audit-crl")]
    assert sorted(o["kind"] for o in objs) == ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                                               "ServiceAccount"]
    # Each object names its namespace (the release's; kube-public for the CRL Role): no -n, which would clash.
    kapi.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))
    kubeconfig = kapi.service_account_kubeconfig(release_ns, "cc-compatcheck-audit", tmp_path / "sa.kubeconfig")
    code, doc = wait_until(lambda: _try(capsys, kubeconfig, cluster["ns"]), timeout=30, what="RBAC in effect")
    assert (code, _rows(doc)) == (1, EXPECTED)
    # ... and exactly that role: without it, the same account is refused, in one line.
    kapi.kubectl("delete", "clusterrolebinding", "cc-compatcheck-audit")
    try:
        wait_until(lambda: main(["audit", "--kubeconfig", str(kubeconfig), "-n", cluster["ns"]]) == 2
                   and "forbidden: cannot list" in capsys.readouterr().err, timeout=30, what="refusal")
    finally:  # cluster-scoped: the other modules share the API server
        kapi.kubectl("delete", "clusterrole", "cc-compatcheck-audit", "--ignore-not-found")


def _try(capsys: pytest.CaptureFixture[str], kubeconfig: Path, ns: str) -> tuple[int, dict[str, Any]] | None:
    code = main(["audit", "--kubeconfig", str(kubeconfig), "-n", ns, "--format", "json"])
    out = capsys.readouterr()
    return (code, json.loads(out.out)) if code != 2 else None


def test_write_reports_read_back_and_replaced(kapi: KubeAPIServer, cluster: dict[str, str],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    for crd in ("wgpolicyk8s.io_policyreports.yaml", "wgpolicyk8s.io_clusterpolicyreports.yaml"):
        kapi.kubectl("apply", "--server-side", "-f", str(shared(f"reference/crds/{crd}")))
    kapi.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                 "crd/policyreports.wgpolicyk8s.io", "crd/clusterpolicyreports.wgpolicyk8s.io")
    ns = cluster["ns"]
    assert main(["audit", "--kubeconfig", str(kapi.kubeconfig), "-n", ns, "--write-reports"]) == 1
    capsys.readouterr()

    def results() -> list[tuple[str, str, str, str]]:
        out = kapi.kubectl("get", "policyreports.v1alpha2.wgpolicyk8s.io", "-n", ns, "-o", "json").stdout
        return sorted((r["policy"], r["resources"][0]["kind"], r["resources"][0]["name"], r["result"])
                      for item in json.loads(out)["items"] for r in item.get("results", []))

    assert results() == [("cuda-driver-too-old", "Deployment", "serve", "fail"),
                         ("cuda-driver-too-old", "Job", "train", "fail")]
    # The continuous audit (as the chart's audit.continuous runs it): the T4 pool gets R580 (GFD rewrites the
    # labels) and the report is replaced within the node poll, not at the next period.
    def version() -> str:
        out = kapi.kubectl("get", "policyreports.v1alpha2.wgpolicyk8s.io", "compatcheck", "-n", ns, "-o", "json")
        return str(json.loads(out.stdout)["metadata"]["resourceVersion"])

    written = version()
    time.sleep(1.1)  # the next report's timestamps (whole seconds) differ: its update is no no-op for the server
    codes: list[int] = []
    loop = threading.Thread(target=lambda: codes.append(main([
        "audit", "--kubeconfig", str(kapi.kubeconfig), "-n", ns, "--write-reports", "--every", "3600",
        "--node-poll", "0.5", "--max-runs", "2"])), daemon=True)
    loop.start()
    wait_until(lambda: version() != written, timeout=60, step=0.2, what="the loop's first audit written")
    changed = time.monotonic()
    for i in range(2):
        kapi.kubectl("label", "--overwrite", "node", f"{cluster['t4']}-{i}",
                     "nvidia.com/cuda.driver-version.full=580.65.06", "nvidia.com/cuda.driver-version.major=580")
    loop.join(60)
    assert not loop.is_alive() and codes == [0]
    assert time.monotonic() - changed < 60
    capsys.readouterr()
    assert results() == [("cuda-driver-major-skew", "Pod", "legacy", "warn")]
