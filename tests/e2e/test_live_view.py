"""The live cluster view in process (``LiveView``), through the real kubernetes client, against a real
kube-apiserver of its own (the view watches every Node, so no other test may add any)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compatcheck.io.loader import Loaded
from compatcheck.webhook.clusterview import LiveView
from compatcheck.webhook.metrics import Metrics
from tests.e2e.conftest import binaries, create_node, gpu_node, wait_until
from tests.e2e.kapi import KubeAPIServer


def crl(key: str, *, valid: bool = True) -> dict[str, Any]:
    data = {"key": key, "dataType": "integer", "defaultValue": "1", "group": "g", "limits": "optional",
            "requests": "fromLimits"} if valid else {"resourceName": key}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": f"cf-crl-g-{key.split('/')[-1]}", "namespace": "kube-public", "labels": {
            "features.alauda.io/type": "CustomResourceLimitation", "features.alauda.io/group": "g",
            "features.alauda.io/enabled": "true"}}, "data": data}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeAPIServer]:
    server = KubeAPIServer(binaries(), tmp_path_factory.mktemp("kapi-view")).start()
    from kubernetes import client

    api = server.client()
    for i in range(5):
        create_node(api, gpu_node(f"t4-{i}"))
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map("kube-public", crl("example.com/vgpu-a"))
    core.create_namespaced_config_map("kube-public", crl("example.com/vgpu-b", valid=False))
    yield server
    server.stop()


class Recorder(Metrics):
    """Metrics that remember every snapshot the view published (its node and CRL gauges)."""

    def __init__(self) -> None:
        super().__init__()
        self.published: list[tuple[float, float]] = []
        nodes, crl = self.nodes.set, self.crl_loaded.set
        self.nodes.set = lambda v: (nodes(v), self.published.append((v, -1)))  # type: ignore[method-assign]
        self.crl_loaded.set = lambda v: (crl(v), self.published.append((-1, v)))  # type: ignore[method-assign]


def started(cluster: KubeAPIServer, loaded: Loaded, metrics: Metrics | None = None) -> LiveView:
    view = LiveView(loaded.kb, cluster.client(), metrics or Metrics(), debounce=0.01)
    view.start()
    assert view.wait_synced(15)
    return view


def test_the_first_list_builds_a_whole_snapshot(cluster: KubeAPIServer, loaded: Loaded,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import compatcheck.webhook.clusterview as cv

    monkeypatch.setattr(cv, "LIST_PAGE", 2)  # 5 nodes -> 3 pages: the node list takes longest
    pages: list[dict[str, Any]] = []
    metrics = Recorder()
    view = LiveView(loaded.kb, cluster.client(), metrics, debounce=0.0)
    lister = view.node_watch.lister

    def counting(**kw: Any) -> Any:
        if "watch" not in kw and kw.get("limit") == 2:
            pages.append(kw)
        return lister(**kw)

    view.node_watch.lister = counting
    view.start()
    try:
        assert view.wait_synced(15)
        snap = view.snapshot
        assert (snap.synced, snap.nodes, snap.classes) == (True, 5, 1)
        assert (snap.crl_valid, snap.crl_invalid) == (1, 1)  # the invalid one is ignored whole, and counted
        assert len(pages) == 3 and pages[1].get("_continue")
        facts = snap.ctx.cluster.classes[0].facts  # type: ignore[union-attr]
        assert str(facts.driver) == "560.35.03" and str(facts.compute_capability) == "7.5"
        # Never half a cluster: every snapshot ever published had all the Nodes and the CRL defaults.
        assert metrics.published and all(v in (-1, 5) for v, _ in metrics.published)
        assert all(v in (-1, 1) for _, v in metrics.published)
    finally:
        view.stop()


def test_watch_events_update_the_snapshot(cluster: KubeAPIServer, loaded: Loaded) -> None:
    from kubernetes import client

    view = started(cluster, loaded)
    lists: list[int] = []
    lister = view.node_watch.lister
    view.node_watch.lister = lambda **kw: (lists.append(1) if "watch" not in kw else None, lister(**kw))[1]
    try:
        api = cluster.client()
        core = client.CoreV1Api(api)
        create_node(api, gpu_node("a100-0", product="NVIDIA-A100-SXM4-80GB", driver="550.54.15"))
        wait_until(lambda: view.snapshot.nodes == 6 and view.snapshot.classes == 2)
        core.delete_node("a100-0")
        wait_until(lambda: view.snapshot.nodes == 5)
        core.create_namespaced_config_map("kube-public", crl("example.com/vgpu-c"))
        wait_until(lambda: view.snapshot.crl_valid == 2)
        core.delete_namespaced_config_map("cf-crl-g-vgpu-c", "kube-public")
        wait_until(lambda: view.snapshot.crl_valid == 1)
        assert lists == []  # no re-list for ordinary events: resourceVersion bookkeeping
        version = view.snapshot.nodes_version
        assert version and int(version) > 0
    finally:
        view.stop()


def test_a_node_label_change_rebuilds_facts(cluster: KubeAPIServer, loaded: Loaded) -> None:
    from kubernetes import client

    view = started(cluster, loaded)
    try:
        core = client.CoreV1Api(cluster.client())
        patched = json.loads(core.patch_node("t4-0", {"metadata": {"labels": {
            "nvidia.com/cuda.driver-version.full": "580.65.06"}}}, _preload_content=False).data)
        wait_until(lambda: int(view.snapshot.nodes_version) >= int(patched["metadata"]["resourceVersion"]))
        drivers = sorted(str(c.facts.driver) for c in view.snapshot.ctx.cluster.classes)  # type: ignore[union-attr]
        assert drivers == ["560.35.03", "580.65.06"]
    finally:
        core.patch_node("t4-0", {"metadata": {"labels": {"nvidia.com/cuda.driver-version.full": "560.35.03"}}})
        view.stop()


def test_readyz_waits_for_the_first_sync(loaded: Loaded, tmp_path: Path) -> None:
    import asyncio

    from aiohttp.test_utils import TestClient, TestServer
    from kubernetes import config

    from compatcheck.core.admission import AdmissionSettings
    from compatcheck.webhook.app import State, make_app

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],  # nothing listens there
        "users": [{"name": "u", "user": {}}], "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    view = LiveView(loaded.kb, config.new_client_from_config(config_file=str(kubeconfig)), Metrics())
    view.start()

    async def probe() -> tuple[int, str, int]:
        state = State(loaded.ruleset, AdmissionSettings(), view, Metrics())
        async with TestClient(TestServer(make_app(state))) as c:
            ready = await c.get("/readyz")
            return ready.status, await ready.text(), (await c.get("/healthz")).status

    try:
        assert asyncio.run(probe()) == (503, "cluster view not synced yet (listing nodes, configmaps, resourceslices, "
                                             "deviceclasses, resourceclaimtemplates, resourceclaims, servingruntimes, "
                                             "clusterservingruntimes)\n", 200)
        # Each list fails on its own (after urllib3's retries), in either order: wait until both have, and say so.
        wait_until(lambda: all(w in view.health().reason for w in ("nodes: ", "configmaps: ")), 5)
        assert (view.health().stale_since or 0) > 0
    finally:
        view.stop()


def test_views_sync_side_by_side_and_stop_at_once(cluster: KubeAPIServer, loaded: Loaded) -> None:
    # Two views in one process, stopped right after their first sync: stop() must end the watch connections
    # (a watch looks at its stop flag only between events), or threads and API-server connections linger.
    views = [LiveView(loaded.kb, cluster.client(), Metrics(), debounce=0.01) for _ in range(2)]
    threads = [threading.Thread(target=v.start) for v in views]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert all(v.wait_synced(15) for v in views)
        assert {v.snapshot.nodes for v in views} == {5}
    finally:
        for v in views:
            v.stop()
    for v in views:
        for w in v._watchers:
            w.join(2)
            assert not w.is_alive(), f"{w.resource} watch still running after stop()"


def test_the_view_bounds_its_intern_table_by_the_live_nodes(cluster: KubeAPIServer, loaded: Loaded) -> None:
    # A label that churns (a lease, GFD's timestamp) leaves a dead value in the intern table at each change; the
    # view rebuilds the table from the records it holds once it has outgrown them (here by its slack of 10).
    from kubernetes import client

    core = client.CoreV1Api(cluster.client())
    view = started(cluster, loaded)
    view.compactor._slack = 10
    try:
        for generation in range(8):
            for i in range(5):
                patched = core.patch_node(f"t4-{i}", {"metadata": {"labels": {
                    "example.com/lease": f"lease-{generation}-{i}"}}}, _preload_content=False)
            version = int(json.loads(patched.data)["metadata"]["resourceVersion"])
            wait_until(lambda v=version: int(view.snapshot.nodes_version) >= v)
        # Live: 5 names (also the hostnames), 5 leases, "linux" and "4" (kubernetes.io/os, nvidia.com/gpu.count),
        # the keys tuple, the rule labels, the (empty) taints and the allocatable: 16. The 40 leases ever seen
        # would all be there without the compaction.
        assert len(view.compactor) <= 16 + 10
        assert {r.label("example.com/lease") for r in view.node_watch.values()[1]} == {
            f"lease-7-{i}" for i in range(5)}
    finally:
        for i in range(5):
            core.patch_node(f"t4-{i}", {"metadata": {"labels": {"example.com/lease": None}}})
        view.stop()


def test_snapshots_carry_the_placement_indexes_over(cluster: KubeAPIServer, loaded: Loaded) -> None:
    from kubernetes import client

    core = client.CoreV1Api(cluster.client())
    view = started(cluster, loaded)
    try:
        first = view.snapshot.ctx.cluster
        assert first is not None
        assert [c.count for c in first.placement({"nodeSelector": {"kubernetes.io/hostname": "t4-1"}})] == [5]
        patched = core.patch_node("t4-1", {"metadata": {"labels": {"nvidia.com/gfd.timestamp": "1700000060"}}},
                                  _preload_content=False)
        version = int(json.loads(patched.data)["metadata"]["resourceVersion"])
        wait_until(lambda: int(view.snapshot.nodes_version) >= version)
        now = view.snapshot.ctx.cluster
        assert now is not None and now is not first
        assert now._index is not None  # carried over: the next review does not rebuild it
        assert now._index.indexed_keys() == ["kubernetes.io/hostname"]
    finally:
        core.patch_node("t4-1", {"metadata": {"labels": {"nvidia.com/gfd.timestamp": None}}})
        view.stop()


def test_a_node_problem_is_logged_and_counted_once(cluster: KubeAPIServer, loaded: Loaded,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    # A garbage driver label was computed on every rebuild and never reported; every Node event rebuilds.
    import logging

    from kubernetes import client

    caplog.set_level(logging.WARNING, "compatcheck.webhook.view")
    core = client.CoreV1Api(cluster.client())
    metrics = Metrics()
    view = started(cluster, loaded, metrics)
    label = "nvidia.com/cuda.driver-version.full"
    try:
        core.patch_node("t4-0", {"metadata": {"labels": {label: "garbage"}}})
        wait_until(lambda: view.snapshot.node_problems == 1)
        for n in range(3):  # more events, more rebuilds: the problem is not new
            patched = core.patch_node("t4-1", {"metadata": {"labels": {"nvidia.com/gfd.timestamp": f"17{n}"}}},
                                      _preload_content=False)
            version = int(json.loads(patched.data)["metadata"]["resourceVersion"])
            wait_until(lambda v=version: int(view.snapshot.nodes_version) >= v)
        logged = [r for r in caplog.records if r.getMessage().startswith("a node value cannot be read")]
        assert [(getattr(r, "fields", {})["node"], getattr(r, "fields", {})["field"]) for r in logged] == [
            ("t4-0", label)]
        assert metrics.registry.get_sample_value("compatcheck_node_problems_reported_total", {"field": label}) == 1
        assert metrics.registry.get_sample_value("compatcheck_node_problems") == 1
    finally:
        core.patch_node("t4-0", {"metadata": {"labels": {label: "560.35.03"}}})
        core.patch_node("t4-1", {"metadata": {"labels": {"nvidia.com/gfd.timestamp": None}}})
        view.stop()
