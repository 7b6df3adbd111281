"""The webhook in live mode against a real kube-apiserver: what a fake API server hid.

Each test names the defect it guards against (issue #10); each fails on the code before its fix.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.e2e.conftest import (
    Webhook,
    create_node,
    deployment,
    gpu_node,
    gpu_pod,
    namespace,
    wait_until,
)
from tests.e2e.kapi import KubeAPIServer

CUDA13 = "nvidia/cuda:13.0.0-base-ubuntu24.04"  # needs driver >= 580; the nodes run R560
CUDA12_8 = "nvidia/cuda:12.8.1-base-ubuntu24.04"  # on R560: cuda-driver-behind-runtime, by the default policy


def apply(kapi: KubeAPIServer, ns: str, obj: dict[str, Any], *args: str) -> tuple[int, str]:
    """``kubectl apply`` (server-side dry run unless told otherwise); (exit code, stdout + stderr)."""
    out = kapi.kubectl("apply", "-n", ns, *(args or ("--dry-run=server",)), "-o", "json", "-f", "-",
                       stdin=json.dumps(obj), check=False)
    return out.returncode, out.stdout + out.stderr


def node_taints(kapi: KubeAPIServer, name: str, taints: list[dict[str, str]], unschedulable: bool = False) -> str:
    """Replace a Node's taints (and cordon state); the resourceVersion of the change."""
    from kubernetes import client

    core = client.CoreV1Api(kapi.client())
    patched = core.patch_node(name, {"spec": {"taints": taints or None, "unschedulable": unschedulable or None}},
                              _preload_content=False)
    return str(json.loads(patched.data)["metadata"]["resourceVersion"])


CONDITION_TAINTS = [
    [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
     {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}],
    [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
     {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}],
    [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
    [{"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"}],
    [{"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"}],
    [{"key": "node.kubernetes.io/pid-pressure", "effect": "NoSchedule"}],
    [{"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}],
    [{"key": "node.kubernetes.io/out-of-service", "effect": "NoExecute"}],
    [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}],
    [{"key": "node.cloudprovider.kubernetes.io/shutdown", "effect": "NoSchedule"}],
]


def test_not_ready_and_cordoned_pools_stay_in_scope(kapi: KubeAPIServer, webhooks: Callable[..., Webhook]) -> None:
    """Fail-open: condition taints used to take the pool out of scope, so a CUDA 13 image on R560 nodes was
    allowed (with a toleration warning for not-ready) while the nodes rebooted for a driver upgrade."""
    api = kapi.client()
    pool = [create_node(api, gpu_node(f"t4-cond-{i}", labels={"pool": "cond"})) for i in range(2)]
    # The real API server's TaintNodesByCondition admission has tainted every new Node not-ready.
    assert {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"} in pool[0]["spec"]["taints"]
    wh = webhooks(kapi).start()
    wh.register("cond")
    ns = namespace(api, "cond")
    pod = gpu_pod("p", CUDA13, nodeSelector={"pool": "cond"})
    policy = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    tolerant = gpu_pod("p", CUDA13, nodeSelector={"pool": "cond"},
                       tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
    for taints in CONDITION_TAINTS:
        cordon = taints[0]["key"] == "node.kubernetes.io/unschedulable"
        version = max(int(node_taints(kapi, n["metadata"]["name"], [*taints, policy], cordon)) for n in pool)
        wh.wait_for_nodes_version(version)
        for obj in (tolerant, deployment("d", tolerant)):
            rc, out = wait_until(lambda o=obj: (lambda r: r if "denied" in r[1] else None)(apply(kapi, ns, o)),
                                 what=f"denial under {taints[0]['key']}")
            assert rc == 1 and "cuda-driver-too-old" in out and "gpu-toleration-missing" not in out, out
        # The policy taint still counts: without its toleration the pool is out of reach, and only that is said.
        rc, out = apply(kapi, ns, pod)
        assert rc == 0 and "gpu-toleration-missing" in out and "node.kubernetes.io" not in out.split(
            "gpu-toleration-missing", 1)[1].split("\n", 1)[0], out


def test_crl_defaults_come_from_the_list_and_survive_an_apiserver_restart(
        own_kapi: KubeAPIServer, webhooks: Callable[..., Webhook]) -> None:
    """cf-crl defaults were lost on every start and re-list: LIST items carry no apiVersion/kind."""
    from kubernetes import client

    api = own_kapi.client()
    core = client.CoreV1Api(api)
    own_kapi.kubectl("apply", "-f", str(CRL_FIXTURE))  # before the webhook starts: it must come from the LIST
    wh = webhooks(own_kapi).start()
    assert "4 CRL keys" in wh.get("/readyz")[1] or "3 CRL keys" in wh.get("/readyz")[1], wh.get("/readyz")
    keys = wh.metric("compatcheck_crl_configmaps_loaded")
    assert keys >= 3 and wh.metric("compatcheck_crl_configmaps_invalid") == 0

    def mutated() -> dict[str, Any]:
        return wh.review("mutate", VCUDA_POD)

    assert "patch" in mutated(), mutated()
    # A restart gives the API server a fresh watch cache; the view's watches expire (410) and re-list.
    core.create_namespaced_config_map("default", {"metadata": {"name": "bump"}})  # the revision moves on
    gone_before = wh.metric("compatcheck_watch_restarts_total", resource="configmaps")
    own_kapi.restart_apiserver(down_for=1.0)
    core.create_namespaced_config_map("default", {"metadata": {"name": "bump-2"}})
    wait_until(lambda: wh.metric("compatcheck_watch_restarts_total", resource="configmaps") > gone_before,
               15, what="the CRL watch noticed the restart")
    wait_until(lambda: wh.get("/readyz")[0] == 200 and "stale" not in wh.get("/readyz")[1], 15,
               what="view follows again")
    assert wh.metric("compatcheck_crl_configmaps_loaded") == keys
    assert "patch" in mutated()


def test_no_decision_before_the_view_has_synced(kapi: KubeAPIServer, webhooks: Callable[..., Webhook],
                                                tmp_path: Any) -> None:
    """The port opened before the view had synced, and the first rebuild published half a cluster: a
    webhook that can list Nodes but not (yet) the CRL ConfigMaps decided from the Nodes alone."""
    from kubernetes import client

    api = kapi.client()
    create_node(api, gpu_node("t4-sync-0", labels={"pool": "sync"}))
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    core.create_namespaced_service_account("default", {"metadata": {"name": "nodes-only"}})
    rbac.create_cluster_role({"metadata": {"name": "nodes-only"}, "rules": [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]})
    rbac.create_cluster_role_binding({"metadata": {"name": "nodes-only"}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "nodes-only"},
        "subjects": [{"kind": "ServiceAccount", "name": "nodes-only", "namespace": "default"}]})
    kubeconfig = kapi.service_account_kubeconfig("default", "nodes-only", tmp_path / "sa.kubeconfig")
    pod = gpu_pod("p", CUDA13, nodeSelector={"pool": "sync"})
    for failure_mode, allowed in (("allow", True), ("deny", False)):
        wh = webhooks(kapi, f"wh-{failure_mode}", kubeconfig=kubeconfig,
                      config={"webhook": {"failureMode": failure_mode}}).start(ready=False)
        status, text = wh.get("/readyz")
        assert status == 503 and "listing configmaps" in text, text
        resp = wh.review("validate", pod)
        why = "the cluster view has not completed its first sync"
        assert resp["allowed"] is allowed, resp
        if allowed:
            assert resp["warnings"] == [f"compatcheck: not evaluated ({why})"]
        else:
            assert why in resp["status"]["message"] and "cuda-driver-too-old" not in resp["status"]["message"]
        assert wh.metric("compatcheck_unsynced_answers_total", endpoint="validate") == 1
        wh.stop()


def test_recovers_within_seconds_of_an_apiserver_outage(own_kapi: KubeAPIServer,
                                                        webhooks: Callable[..., Webhook]) -> None:
    """Re-list waited on a backoff that grew to 16-30 s, and /readyz said ok on a stale view throughout."""
    api = own_kapi.client()
    create_node(api, gpu_node("t4-rec-0"))
    wh = webhooks(own_kapi).start()
    assert wh.get("/readyz")[1].startswith("ok: 1 nodes")
    own_kapi.stop_apiserver()
    status, text = wait_until(lambda: (lambda r: r if "stale since" in r[1] else None)(wh.get("/readyz")),
                              10, what="readiness says the view is stale")
    assert status == 200 and "answering from the last good view of 1 nodes" in text
    assert wait_until(lambda: wh.metric("compatcheck_view_stale_seconds") > 0, 5)
    time.sleep(8)  # long enough for an uncapped backoff to grow well past the cap
    own_kapi.start_apiserver()
    back = time.monotonic()
    created = create_node(own_kapi.client(), gpu_node("t4-rec-1"))
    wh.wait_for_nodes_version(created["metadata"]["resourceVersion"], timeout=10)
    recovered = time.monotonic() - back
    assert recovered < 4.0, f"the view took {recovered:.1f} s to follow the API server again"
    assert wh.get("/readyz")[1].startswith("ok: 2 nodes") and wh.metric("compatcheck_view_stale_seconds") == 0


def test_a_driver_upgrade_is_seen_within_a_second(kapi: KubeAPIServer, webhooks: Callable[..., Webhook]) -> None:
    from kubernetes import client

    api = kapi.client()
    create_node(api, gpu_node("t4-upg-0", labels={"pool": "upgrade"}))
    wh = webhooks(kapi).start()
    pod = gpu_pod("p", CUDA13, nodeSelector={"pool": "upgrade"})
    assert wh.review("validate", pod)["allowed"] is False
    started = time.monotonic()
    client.CoreV1Api(api).patch_node("t4-upg-0", {"metadata": {"labels": {
        "nvidia.com/cuda.driver-version.full": "580.65.06", "nvidia.com/cuda.driver-version.major": "580"}}})
    wait_until(lambda: wh.review("validate", pod)["allowed"], 1.0, step=0.02, what="the new driver seen")
    assert time.monotonic() - started < 1.0


def test_update_ratchet_denies_a_changed_offending_value(kapi: KubeAPIServer,
                                                         webhooks: Callable[..., Webhook]) -> None:
    """The ratchet forgave (rule, pointer, container): swapping one incompatible CUDA for another passed."""
    api = kapi.client()
    create_node(api, gpu_node("t4-rat-0", labels={"pool": "ratchet"}))
    wh = webhooks(kapi).start()
    wh.register("ratchet", mutate=False)
    ns = namespace(api, "ratchet")
    old = deployment("d", gpu_pod("p", CUDA13, nodeSelector={"pool": "ratchet"}))
    old["metadata"]["labels"] = {"compatcheck.io/ignore": "true"}  # stored before the policy applied to it
    assert apply(kapi, ns, old, "--server-side")[0] == 0
    unrelated = json.loads(json.dumps(old))
    unrelated["metadata"]["labels"] = {"team": "ml"}
    rc, out = apply(kapi, ns, unrelated, "--server-side")
    assert rc == 0, out
    changed = json.loads(json.dumps(unrelated))
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "nvidia/cuda:13.1.0-base-ubuntu24.04"
    rc, out = apply(kapi, ns, changed, "--server-side")
    assert rc == 1 and "cuda-driver-too-old" in out and "CUDA 13.1" in out, out


@pytest.mark.parametrize("failure_policy", ["Fail", "Ignore"])
def test_webhook_killed_mid_stream_then_restarted(kapi: KubeAPIServer, webhooks: Callable[..., Webhook],
                                                  failure_policy: str) -> None:
    """Killed while requests are in flight: every request still gets an answer within the webhook timeout,
    the API server applies the failurePolicy, and a restarted webhook decides again."""
    from kubernetes import client

    api = kapi.client()
    create_node(api, gpu_node(f"t4-kill-{failure_policy.lower()}", labels={"pool": f"kill-{failure_policy}"}))
    wh = webhooks(kapi, "wh1").start()
    name = f"kill-{failure_policy.lower()}"
    wh.register(name, failure_policy=failure_policy, mutate=False, timeout_seconds=3)
    ns = namespace(api, name)
    core = client.CoreV1Api(api)
    bad = gpu_pod("p", CUDA13, nodeSelector={"pool": f"kill-{failure_policy}"})

    def attempt() -> tuple[str, float]:
        started = time.monotonic()
        try:
            core.create_namespaced_pod(ns, {**bad, "metadata": {"generateName": "p-"}}, dry_run="All")
            return "allowed", time.monotonic() - started
        except client.ApiException as exc:
            body = exc.body or ""
            if "denied the request" in body:
                return "denied", time.monotonic() - started
            if "failed calling webhook" in body:
                return "webhook-down", time.monotonic() - started
            return f"other {exc.status}: {body[:200]}", time.monotonic() - started

    wait_until(lambda: attempt()[0] == "denied", what="webhook registered")
    outcomes: list[tuple[str, float]] = []
    stop = threading.Event()

    def hammer() -> None:
        while not stop.is_set():
            outcomes.append(attempt())

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    wh.kill()  # SIGKILL with requests in flight
    time.sleep(1.5)
    stop.set()
    for t in threads:
        t.join(30)
    kinds = {o for o, _ in outcomes}
    after_kill = "webhook-down" if failure_policy == "Fail" else "allowed"
    assert kinds <= {"denied", after_kill}, kinds
    assert after_kill in kinds and max(d for _o, d in outcomes) < 3 + 2.0
    restarted = webhooks(kapi, "wh1", port=wh.port).start()
    wait_until(lambda: attempt()[0] == "denied", what="restarted webhook decides again")
    restarted.stop()


CRL_FIXTURE = __import__("pathlib").Path(__file__).resolve().parents[2] / "fixtures" / "crl-default-missing" / \
    "crl.yaml"
VCUDA_POD = gpu_pod("v", "nvidia/cuda:11.4.3-base-ubuntu20.04",
                    limits={"tencent.com/vcuda-core": "50", "tencent.com/vcuda-memory": "4"})
VCUDA_POD["spec"]["containers"][0]["resources"]["requests"] = {"tencent.com/vcuda-core": "50",
                                                                 "tencent.com/vcuda-memory": "4"}
