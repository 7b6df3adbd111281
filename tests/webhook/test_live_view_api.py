"""The live cluster view (``LiveView``) through the real kubernetes client against ``tests/webhook/fakekube.py``, a
loopback server that answers LIST and WATCH as a kube-apiserver does (paging, items without apiVersion/kind,
bookmarks, 410 Gone after compaction, 404 for what is not served, 403, 503). What tests/e2e/test_live_view.py,
test_live_cluster.py and test_dra_versions.py prove against a real API server, CI proves here without one
(docs/testing-e2e.md maps each)."""

from __future__ import annotations

import asyncio
import copy
import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import compatcheck.webhook.clusterview as cv
from compatcheck.core.admission import AdmissionSettings, review
from compatcheck.io.loader import Loaded
from compatcheck.webhook.clusterview import LiveView
from compatcheck.webhook.metrics import Metrics
from tests.conftest import admission_review
from tests.webhook import fakekube
from tests.webhook.fakekube import FakeKube, fixture

NODES = "/api/v1/nodes"
CRLS = "/api/v1/namespaces/kube-public/configmaps"
DRA = "/apis/resource.k8s.io/{version}/{plural}"
DRA_KINDS = {"resourceslices": "ResourceSlice", "deviceclasses": "DeviceClass",
             "resourceclaimtemplates": "ResourceClaimTemplate", "resourceclaims": "ResourceClaim"}
CUDA13 = "nvidia/cuda:13.0.0-base-ubuntu24.04"  # needs driver >= 580; the nodes run R560


def node(name: str, **labels: str) -> dict[str, Any]:
    obj = fixture("node-t4.json")
    obj["metadata"]["name"] = name
    obj["metadata"]["labels"].update({"kubernetes.io/hostname": name, **labels})
    return obj


def crl(key: str, *, valid: bool = True) -> dict[str, Any]:
    obj = fixture("crl-configmap.json")
    obj["metadata"]["name"] = f"cf-crl-g-{key.split('/')[-1]}"
    obj["data"] = {**obj["data"], "key": key} if valid else {"resourceName": key}
    return obj


def wait_until(check: Callable[[], Any], timeout: float = 10.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what or check}")


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    """Five T4 nodes on R560 and two CRL ConfigMaps (one invalid) in kube-public beside a ConfigMap that is no CRL;
    neither resource.k8s.io nor KServe is served (404)."""
    server = FakeKube()
    server.serve(NODES, "v1", "Node")
    server.serve(CRLS, "v1", "ConfigMap")
    for i in range(5):
        server.add(NODES, node(f"t4-{i}"))
    server.add(CRLS, crl("example.com/vgpu-a"))
    server.add(CRLS, crl("example.com/vgpu-b", valid=False))
    server.add(CRLS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other",
                                                                            "namespace": "kube-public"}})
    server.start()
    yield server
    server.stop()


class Recorder(Metrics):
    """Metrics that remember the node and CRL gauges of every snapshot the view published."""

    def __init__(self) -> None:
        super().__init__()
        self.published: list[tuple[float, float]] = []
        nodes, keys = self.nodes.set, self.crl_loaded.set

        def set_nodes(value: float) -> None:
            nodes(value)
            self.published.append((value, -1))

        def set_keys(value: float) -> None:
            keys(value)
            self.published.append((-1, value))

        self.nodes.set = set_nodes  # type: ignore[method-assign]
        self.crl_loaded.set = set_keys  # type: ignore[method-assign]


def started(kube: FakeKube, loaded: Loaded, metrics: Metrics | None = None, **kw: Any) -> LiveView:
    view = LiveView(loaded.kb, kube.client(), metrics or Metrics(), debounce=0.0, **kw)
    view.start()
    assert view.wait_synced(10)
    return view


def lists(kube: FakeKube, path: str) -> list[dict[str, str]]:
    return [q for p, q in kube.requests if p == path and q.get("watch") != "true"]


def watches(kube: FakeKube, path: str) -> list[dict[str, str]]:
    return [q for p, q in kube.requests if p == path and q.get("watch") == "true"]


def test_the_first_list_is_paged_and_builds_a_whole_snapshot(kube: FakeKube, loaded: Loaded,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cv, "LIST_PAGE", 2)  # 5 nodes: 3 pages
    metrics = Recorder()
    view = started(kube, loaded, metrics)
    try:
        snap = view.snapshot
        assert (snap.synced, snap.nodes, snap.classes) == (True, 5, 1)
        # The LIST's items come without apiVersion/kind: put back, the CRL one is valid (its defaults apply), the
        # invalid one is ignored whole and counted, the ConfigMap outside the label selector is not listed.
        assert (snap.crl_valid, snap.crl_invalid) == (1, 1)
        assert [(q["limit"], q.get("continue")) for q in lists(kube, NODES)] == [("2", None), ("2", "2"),
                                                                                  ("2", "4")]
        assert lists(kube, CRLS)[0]["labelSelector"] == "features.alauda.io/type=CustomResourceLimitation"
        assert snap.nodes_version == str(kube.rv)  # the list's resourceVersion
        facts = snap.ctx.cluster.classes[0].facts  # type: ignore[union-attr]
        assert (str(facts.driver), str(facts.compute_capability)) == ("560.35.03", "7.5")
        # Never half a cluster: every snapshot ever published had all the Nodes and the CRL defaults.
        assert metrics.published and all(v in (-1, 5) for v, _ in metrics.published)
        assert all(v in (-1, 1) for _, v in metrics.published)
        # Neither the DRA API nor KServe is served: each tried (newest DRA version first), then followed as absent.
        assert [p for p, _ in kube.requests if "resourceslices" in p][:3] == [
            DRA.format(version=v, plural="resourceslices") for v in ("v1", "v1beta2", "v1beta1")]
        assert all(w.absent for w in view.dra_watches + view.runtime_watches)
        # The watch resumes from the list's resourceVersion, asking for bookmarks.
        first = wait_until(lambda: watches(kube, NODES), what="the node watch")[0]
        assert (first["resourceVersion"], first["allowWatchBookmarks"]) == (snap.nodes_version, "true")
    finally:
        view.stop()


def test_watch_events_update_the_snapshot_without_a_relist(kube: FakeKube, loaded: Loaded) -> None:
    view = started(kube, loaded)
    try:
        a100 = node("a100-0", **{"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                                 "nvidia.com/cuda.driver-version.full": "550.54.15",
                                 "nvidia.com/cuda.driver-version.major": "550"})
        kube.add(NODES, a100)
        wait_until(lambda: view.snapshot.nodes == 6 and view.snapshot.classes == 2, what="ADDED")
        upgraded = copy.deepcopy(a100)
        upgraded["metadata"]["labels"]["nvidia.com/cuda.driver-version.full"] = "580.65.06"
        version = kube.modify(NODES, upgraded)
        wait_until(lambda: view.snapshot.nodes_version == version, what="MODIFIED")
        drivers = sorted(str(c.facts.driver) for c in view.snapshot.ctx.cluster.classes)  # type: ignore[union-attr]
        assert drivers == ["560.35.03", "580.65.06"]
        kube.delete(NODES, "a100-0")
        wait_until(lambda: view.snapshot.nodes == 5, what="DELETED")
        kube.add(CRLS, crl("example.com/vgpu-c"))
        wait_until(lambda: view.snapshot.crl_valid == 2, what="a CRL ADDED")
        kube.delete(CRLS, "cf-crl-g-vgpu-c", "kube-public")
        wait_until(lambda: view.snapshot.crl_valid == 1, what="a CRL DELETED")
        # resourceVersion bookkeeping: ordinary events never cost a re-list.
        assert (len(lists(kube, NODES)), len(lists(kube, CRLS))) == (1, 1)
        assert view.snapshot.nodes_version == view.node_watch.version == str(kube.rv - 2)  # the node DELETED
    finally:
        view.stop()


def test_a_bookmark_moves_the_resource_version_without_a_rebuild(kube: FakeKube, loaded: Loaded) -> None:
    view = started(kube, loaded)
    try:
        time.sleep(0.3)  # the publisher's own rebuild after the first list
        before = view.snapshot
        mark = kube.bookmark(NODES)
        wait_until(lambda: view.node_watch.version == mark, what="the bookmark's resourceVersion")
        time.sleep(0.1)
        assert view.snapshot is before and before.nodes_version != mark  # nothing changed: no new snapshot
        # The next watch (the server ends each within fakekube.WATCH_CAP) resumes from the bookmark, not from the
        # list: a long-quiet resource is not re-listed for a resourceVersion the server has compacted since.
        resumed = wait_until(lambda: [q for q in watches(kube, NODES) if q["resourceVersion"] == mark],
                             fakekube.WATCH_CAP + 3, "a watch from the bookmark")
        assert resumed and len(lists(kube, NODES)) == 1
    finally:
        view.stop()


def test_410_gone_relists_and_swaps_in_the_new_set_whole(kube: FakeKube, loaded: Loaded) -> None:
    metrics = Metrics()
    view = started(kube, loaded, metrics)

    def restarts(resource: str) -> float | None:
        return metrics.registry.get_sample_value("compatcheck_watch_restarts_total",
                                                 {"resource": resource, "reason": "gone"})

    try:
        wait_until(lambda: watches(kube, NODES) and watches(kube, CRLS), what="both watches")
        with kube.cond:  # changes whose events are compacted away before the view saw them: only a re-list tells
            kube.delete(NODES, "t4-4")
            kube.add(NODES, node("h100-0", **{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}))
            kube.compact(NODES)
            kube.compact(CRLS)
        wait_until(lambda: restarts("nodes") == 1 and restarts("configmaps") == 1, what="410 Gone seen")
        wait_until(lambda: {r.name for r in view.node_watch.values()[1]} == {
            "t4-0", "t4-1", "t4-2", "t4-3", "h100-0"}, what="the re-listed nodes")
        wait_until(lambda: view.snapshot.ctx.cluster is not None and view.snapshot.classes == 2, what="rebuilt")
        assert (len(lists(kube, NODES)), len(lists(kube, CRLS))) == (2, 2)
        # The re-listed CRL ConfigMaps (LIST items again without apiVersion/kind) keep their defaults.
        assert (view.snapshot.crl_valid, view.snapshot.crl_invalid) == (1, 1)
        assert view.health().stale_since is None  # 410 is the protocol, not an outage
    finally:
        view.stop()


def test_a_stale_view_keeps_serving_and_recovers_within_seconds(kube: FakeKube, loaded: Loaded,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from compatcheck.webhook.app import State, make_app

    monkeypatch.setattr(random, "random", lambda: 1.0)  # no jitter: each pause is the whole backoff
    metrics = Metrics()
    view = started(kube, loaded, metrics)

    async def readyz() -> tuple[int, str]:
        state = State(loaded.ruleset, AdmissionSettings(), view, metrics)
        async with TestClient(TestServer(make_app(state))) as c:
            resp = await c.get("/readyz")
            return resp.status, await resp.text()

    try:
        assert asyncio.run(readyz()) == (200, f"ok: 5 nodes in 1 classes, 1 CRL keys (nodes at resourceVersion "
                                              f"{view.snapshot.nodes_version})\n")
        kube.set_down(True)  # every request 503, the open watches end
        wait_until(lambda: view.health().stale_since is not None, 5, "the view to say it is stale")
        status, text = asyncio.run(readyz())
        assert status == 200 and text.startswith("ok, stale since ") and "api error 503" in text, text
        assert "answering from the last good view of 5 nodes" in text
        assert view.snapshot.nodes == 5  # the last good view serves meanwhile
        wait_until(lambda: (metrics.registry.get_sample_value("compatcheck_view_stale_seconds") or 0) > 0, 5)
        # Down for 9 s: with the backoff capped at 2 s the view retries every 2 s; an uncapped doubling (0.25, 0.5,
        # 1, 2, 4, then 8 s from 7.75 s on) would next look at 15.75 s, nearly 7 s after the server is back.
        time.sleep(4.5 * cv.BACKOFF_MAX)
        kube.set_down(False)
        back = time.monotonic()
        version = kube.add(NODES, node("t4-5"))
        wait_until(lambda: view.snapshot.nodes_version == version and view.health().stale_since is None, 10,
                   "the view to follow again")
        assert time.monotonic() - back < 2 * cv.BACKOFF_MAX + 1  # capped backoff: back within seconds
        assert view.snapshot.nodes == 6
        assert metrics.registry.get_sample_value("compatcheck_view_stale_seconds") == 0
        assert asyncio.run(readyz())[1].startswith("ok: 6 nodes")
    finally:
        view.stop()


@pytest.mark.parametrize(("failure_mode", "allowed"), [("allow", True), ("deny", False)])
def test_no_decision_before_every_resource_has_listed(kube: FakeKube, loaded: Loaded, failure_mode: str,
                                                      allowed: bool) -> None:
    """A webhook that may list Nodes but not (yet) the CRL ConfigMaps publishes nothing: no decision from half a
    cluster; readiness says what it is waiting for, and a review is answered by the failure mode."""
    from aiohttp.test_utils import TestClient, TestServer

    from compatcheck.webhook.app import State, make_app

    kube.forbidden.add(CRLS)  # a ClusterRole that grants nodes only
    metrics = Metrics()
    view = LiveView(loaded.kb, kube.client(), metrics, debounce=0.0)
    view.start()
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": {
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        "containers": [{"name": "c", "image": CUDA13, "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}

    async def ask() -> tuple[int, str, dict[str, Any]]:
        state = State(loaded.ruleset, AdmissionSettings(failure_mode=failure_mode), view, metrics)
        async with TestClient(TestServer(make_app(state))) as c:
            ready = await c.get("/readyz")
            answer = await (await c.post("/validate", json=admission_review(pod))).json()
            return ready.status, await ready.text(), answer["response"]

    try:
        wait_until(lambda: view.node_watch.synced.is_set() and view.health().waiting_for == ("configmaps",), 5)
        wait_until(lambda: "configmaps: api error 403" in view.health().reason, 5, "the 403 said")
        status, text, resp = asyncio.run(ask())
        assert (status, text) == (503, "cluster view not synced yet (listing configmaps)\n")
        assert view.snapshot.synced is False and view.snapshot.ctx.cluster is None
        why = "the cluster view has not completed its first sync"
        assert resp["allowed"] is allowed, resp
        if allowed:
            assert resp["warnings"] == [f"compatcheck: not evaluated ({why})"]
        else:
            assert why in resp["status"]["message"] and "cuda-driver-too-old" not in resp["status"]["message"]
        assert metrics.registry.get_sample_value("compatcheck_unsynced_answers_total", {"endpoint": "validate"}) == 1
        kube.forbidden.clear()  # granted: the view syncs and decides
        wait_until(lambda: view.snapshot.synced, 10, "the first sync")
        out, decision = review(admission_review(pod), "validate", loaded.ruleset, view.snapshot.ctx,
                               AdmissionSettings(failure_mode=failure_mode))
        assert out["response"]["allowed"] is False and {f.rule_id for f in decision.findings} == {
            "cuda-driver-too-old"}
    finally:
        view.stop()


def beta(obj: dict[str, Any]) -> dict[str, Any]:
    """The resource.k8s.io/v1beta1 form of a v1 object, as a 1.32 API server serves it: a slice's device fields
    under ``basic``, a request's ``exactly`` inline."""
    out = copy.deepcopy(obj)
    out["apiVersion"] = "resource.k8s.io/v1beta1"
    if out["kind"] == "ResourceSlice":
        out["spec"]["devices"] = [{"name": d["name"], "basic": {k: v for k, v in d.items() if k != "name"}}
                                  for d in out["spec"]["devices"]]
    if out["kind"] == "ResourceClaimTemplate":
        out["spec"]["spec"]["devices"]["requests"] = [
            {"name": r["name"], **r["exactly"]} for r in out["spec"]["spec"]["devices"]["requests"]]
    return out


@pytest.mark.parametrize("served", ["v1", "v1beta2", "v1beta1"])
def test_dra_is_read_from_the_newest_version_the_api_server_serves(kube: FakeKube, loaded: Loaded,
                                                                   served: str) -> None:
    """Where no resource.k8s.io/v1 is served (Kubernetes 1.32, 1.33) the view lists and watches the newest version
    that is, and the pods' claims resolve against the slices, class and template it holds."""
    for plural, kind in DRA_KINDS.items():
        kube.serve(DRA.format(version=served, plural=plural), f"resource.k8s.io/{served}", kind)
    shape = beta if served == "v1beta1" else (lambda o: {**o, "apiVersion": f"resource.k8s.io/{served}"})
    kube.add(DRA.format(version=served, plural="resourceslices"), shape(fixture("resourceslice-v1.json")))
    kube.add(DRA.format(version=served, plural="deviceclasses"), shape(fixture("deviceclass-v1.json")))
    kube.add(DRA.format(version=served, plural="resourceclaimtemplates"),
             shape(fixture("resourceclaimtemplate-v1.json")))
    view = started(kube, loaded)
    try:
        assert not any(w.absent for w in view.dra_watches)
        tried = [p for p, q in kube.requests if p.endswith("/resourceslices") and q.get("watch") != "true"]
        newest_first = ["v1", "v1beta2", "v1beta1"]
        assert tried[:newest_first.index(served) + 1] == [
            DRA.format(version=v, plural="resourceslices") for v in newest_first[:newest_first.index(served) + 1]]
        wait_until(lambda: watches(kube, DRA.format(version=served, plural="resourceslices")), what="a DRA watch")
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "vllm",
                                                                                   "namespace": "serving"},
                      "spec": {"selector": {"matchLabels": {"app": "vllm"}}, "template": {
                          "metadata": {"labels": {"app": "vllm"}}, "spec": {
                              "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                              "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                              "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.6.3",
                                              "args": ["--dtype", "bfloat16"],
                                              "resources": {"claims": [{"name": "gpu"}]}}]}}}}
        _, decision = review(admission_review(deployment), "validate", loaded.ruleset, view.snapshot.ctx,
                             AdmissionSettings())
        # Both facts come from the slice the view holds (the node's own labels say R560 and nothing of DRA): the
        # T4's compute capability, and the driver the DRA driver publishes.
        found = {f.rule_id: f.message for f in decision.findings}
        assert sorted(found) == ["cuda-driver-behind-runtime", "dtype-unsupported-by-gpu"]  # the platform's policy
        assert found["dtype-unsupported-by-gpu"] == ("--dtype bfloat16 needs compute capability >= 8.0 (bf16); "
                                                     "eligible GPUs: Tesla-T4 (compute capability 7.5)")
        assert found["cuda-driver-behind-runtime"].startswith(
            "image CUDA 12.4 (image vllm/vllm-openai:v0.6.3) is newer than the driver's CUDA on 535.104.05 (CUDA 12.2) "
            "on t4-0, and the platform requires a driver at least as new as the runtime")
    finally:
        view.stop()


def test_stop_ends_the_open_watches_at_once(kube: FakeKube, loaded: Loaded, monkeypatch: pytest.MonkeyPatch) -> None:
    # A watch looks at its stop flag only between events: stop() must end the connections, or threads and API
    # server connections linger until the server's watch timeout (here as long as the view asks for).
    monkeypatch.setattr(fakekube, "WATCH_CAP", 60.0)
    views = [LiveView(loaded.kb, kube.client(), Metrics(), debounce=0.0) for _ in range(2)]
    starters = [threading.Thread(target=v.start) for v in views]
    for t in starters:
        t.start()
    for t in starters:
        t.join()
    try:
        assert all(v.wait_synced(10) for v in views) and {v.snapshot.nodes for v in views} == {5}
        wait_until(lambda: len(watches(kube, NODES)) == 2, what="both node watches open")
    finally:
        for v in views:
            v.stop()
    for v in views:
        for w in v._watchers:
            w.join(2)
            assert not w.is_alive(), f"{w.resource} watch still running after stop()"


def test_the_dra_inventory_is_rebuilt_only_when_a_dra_object_changes(kube: FakeKube, loaded: Loaded) -> None:
    """Nodes churn (GFD relabels them every minute); ResourceSlices rarely do. A Node event gives a new snapshot
    with the same inventory (and its allocator's cached selector results); a new ResourceSlice, a new one."""
    for plural, kind in DRA_KINDS.items():
        kube.serve(DRA.format(version="v1", plural=plural), "resource.k8s.io/v1", kind)
    slices = DRA.format(version="v1", plural="resourceslices")
    kube.add(slices, fixture("resourceslice-v1.json"))
    view = started(kube, loaded)
    try:
        first = view.snapshot
        assert first.ctx.cluster is not None and first.ctx.cluster.dra is not None
        inventory = first.ctx.cluster.dra
        version = kube.add(NODES, node("t4-churn"))
        wait_until(lambda: view.snapshot.nodes_version == version, what="the new Node in the view")
        assert view.snapshot is not first and view.snapshot.ctx.cluster.dra is inventory  # type: ignore[union-attr]
        more = fixture("resourceslice-v1.json")
        more["metadata"]["name"] = "t4-churn-gpu.nvidia.com-q8m4z"
        more["spec"].update(nodeName="t4-churn", pool={"name": "t4-churn", "generation": 1, "resourceSliceCount": 1})
        kube.add(slices, more)
        wait_until(lambda: any(d.node == "t4-churn" for d in view.snapshot.ctx.cluster.dra.devices),  # type: ignore[union-attr]
                   what="the new ResourceSlice in the view")
        assert view.snapshot.ctx.cluster.dra is not inventory  # type: ignore[union-attr]
    finally:
        view.stop()


def test_an_inference_service_naming_a_model_format_runs_the_watched_serving_runtime(kube: FakeKube,
                                                                                       loaded: Loaded) -> None:
    """Where KServe is installed the view watches its ClusterServingRuntimes: an InferenceService that names only a
    model format is checked with the image of the runtime KServe would pick, as soon as the runtime appears."""
    runtimes = "/apis/serving.kserve.io/v1alpha1/clusterservingruntimes"
    kube.serve("/apis/serving.kserve.io/v1alpha1/servingruntimes", "serving.kserve.io/v1alpha1", "ServingRuntime")
    kube.serve(runtimes, "serving.kserve.io/v1alpha1", "ClusterServingRuntime")
    view = started(kube, loaded)
    isvc = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "llama", "namespace": "serving"},
            "spec": {"predictor": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                                   "model": {"modelFormat": {"name": "vllm"}, "storageUri": "s3://models/llama",
                                             "resources": {"limits": {"nvidia.com/gpu": "1"}}}}}}

    def findings() -> list[tuple[str, str]]:
        _, decision = review(admission_review(isvc), "validate", loaded.ruleset, view.snapshot.ctx,
                             AdmissionSettings())
        return [(f.rule_id, f.message) for f in decision.findings if f.severity.value == "error"]

    try:
        assert findings() == []  # no runtime yet: nothing says what image runs
        kube.add(runtimes, {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ClusterServingRuntime",
                            "metadata": {"name": "vllm"}, "spec": {
                                "supportedModelFormats": [{"name": "vllm", "autoSelect": True}],
                                "containers": [{"name": "kserve-container", "image": CUDA13}]}})
        (found,) = wait_until(findings, what="the runtime's image checked")
        assert found[0] == "cuda-driver-too-old"
        assert found[1].startswith(f"image CUDA 13.0 (image {CUDA13}) needs a driver from branch >= 580; eligible "
                                   "nodes run 560.35.03 (CUDA 12.6) on ")
    finally:
        view.stop()


@pytest.mark.parametrize("taints", [
    [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
     {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}],
    [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}],
    [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
    [{"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"}],
    [{"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}],
], ids=["not-ready", "unreachable", "cordoned", "memory-pressure", "uninitialized"])
def test_not_ready_and_cordoned_nodes_stay_in_scope(kube: FakeKube, loaded: Loaded,
                                                    taints: list[dict[str, str]]) -> None:
    """Fail-open guard: while every node of the pool reboots for a driver upgrade (condition taints, cordoned), a
    CUDA 13 image on R560 nodes is still denied, for the driver, not for a toleration it could not have."""
    view = started(kube, loaded)
    try:
        cordon = taints[0]["key"] == "node.kubernetes.io/unschedulable"
        for i in range(5):
            changed = node(f"t4-{i}")
            changed["spec"]["taints"] = [*changed["spec"]["taints"], *taints]
            if cordon:
                changed["spec"]["unschedulable"] = True
            version = kube.modify(NODES, changed)
        wait_until(lambda: view.snapshot.nodes_version == version, what="the tainted nodes")
        for tolerations, rules in (([{"key": "nvidia.com/gpu", "operator": "Exists"}], {"cuda-driver-too-old"}),
                                   ([], {"gpu-toleration-missing"})):
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": {
                "tolerations": tolerations,
                "containers": [{"name": "c", "image": CUDA13, "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
            _, decision = review(admission_review(pod), "validate", loaded.ruleset, view.snapshot.ctx,
                                 AdmissionSettings())
            assert {f.rule_id for f in decision.findings} == rules
            # Only the policy taint is what the pod lacks: the condition taints are not named.
            assert not any("node.kubernetes.io" in f.message or "cloudprovider" in f.message
                           for f in decision.findings)
    finally:
        view.stop()


def test_snapshots_carry_the_placement_indexes_over(kube: FakeKube, loaded: Loaded) -> None:
    view = started(kube, loaded)
    try:
        first = view.snapshot.ctx.cluster
        assert first is not None
        assert [c.count for c in first.placement({"nodeSelector": {"kubernetes.io/hostname": "t4-1"}})] == [5]
        version = kube.modify(NODES, node("t4-1", **{"nvidia.com/gfd.timestamp": "1700000060"}))
        wait_until(lambda: view.snapshot.nodes_version == version, what="the relabelled node")
        now = view.snapshot.ctx.cluster
        assert now is not None and now is not first
        assert now._index is not None  # carried over: the next review does not rebuild it
        assert now._index.indexed_keys() == ["kubernetes.io/hostname"]
    finally:
        view.stop()
