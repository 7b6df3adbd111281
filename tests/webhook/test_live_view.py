"""The live cluster view through the real kubernetes client against the fake API server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from compatcheck.admission import AdmissionSettings
from compatcheck.loader import Loaded
from tests.webhook.fake_apiserver import FakeAPIServer, crl, node
from webhook.app import State, make_app
from webhook.clusterview import LiveView
from webhook.metrics import Metrics


def wait_for(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


@pytest.fixture
def api() -> Iterator[FakeAPIServer]:
    server = FakeAPIServer().start()
    for i in range(3):
        server.put("nodes", node(f"t4-{i}", "Tesla-T4", "535.104.05"))
    server.put("configmaps", crl("example.com/vgpu-a"))
    server.put("configmaps", crl("example.com/vgpu-b", valid=False))
    time.sleep(0.1)
    yield server
    server.stop()


@pytest.fixture
def view(api: FakeAPIServer, loaded: Loaded, tmp_path: Path) -> Iterator[tuple[LiveView, Metrics]]:
    from kubernetes import config

    client = config.new_client_from_config(config_file=api.kubeconfig(str(tmp_path / "kubeconfig")))
    metrics = Metrics()
    v = LiveView(loaded.kb, client, metrics, debounce=0.01)
    v.start()
    assert v.wait_synced(10)
    yield v, metrics
    v.stop()


def test_compact_nodes_build_the_same_cluster_and_share_pool_parts(loaded: Loaded) -> None:
    from compatcheck.cluster import build_cluster, build_cluster_from_records
    from webhook.clusterview import NodeCompactor

    raw = [node(f"t4-{i}", "Tesla-T4", "535.104.05") for i in range(3)] + [
        node("a100-0", "NVIDIA-A100-SXM4-80GB", "550.54.15")]
    raw[0]["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = "1700000000"  # per node: not shared
    raw[3]["spec"]["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule",
                                 "timeAdded": "2026-01-01T00:00:00Z"}]
    raw[3]["metadata"]["labels"]["drop-me"] = None
    compact = NodeCompactor()
    slim = [compact(n) for n in raw]
    assert slim[0].shared_labels is slim[1].shared_labels is slim[2].shared_labels
    assert slim[0].taints is slim[1].taints and slim[0].gpu_allocatable is slim[2].gpu_allocatable
    assert dict(slim[0].own_labels) == {"kubernetes.io/hostname": "t4-0", "nvidia.com/gfd.timestamp": "1700000000"}
    assert dict(slim[3].gpu_allocatable) == {"nvidia.com/gpu": "1"}  # cpu is not a GPU resource: dropped

    def shape(cluster: Any) -> list[Any]:
        return sorted(((sorted(c.labels.items()), c.taints, repr(c.facts), c.members) for c in cluster.classes),
                      key=repr)

    assert shape(build_cluster_from_records(slim, loaded.kb)) == shape(build_cluster(raw, loaded.kb))


def restarts(metrics: Metrics, resource: str, reason: str) -> float:
    return metrics.watch_restarts.labels(resource, reason)._value.get()  # type: ignore[no-any-return]


def test_paginated_initial_list(api: FakeAPIServer, loaded: Loaded, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    from kubernetes import config

    import webhook.clusterview as cv

    monkeypatch.setattr(cv, "LIST_PAGE", 2)  # 3 nodes -> 2 pages
    client = config.new_client_from_config(config_file=api.kubeconfig(str(tmp_path / "kubeconfig")))
    v = LiveView(loaded.kb, client, Metrics(), debounce=0.01)
    v.start()
    try:
        assert v.wait_synced(10) and v.snapshot.nodes == 3
    finally:
        v.stop()


def test_initial_list_builds_the_snapshot(view: tuple[LiveView, Metrics]) -> None:
    v, metrics = view
    snap = v.snapshot
    assert snap.synced and snap.nodes == 3 and snap.classes == 1
    assert snap.crl_valid == 1 and snap.crl_invalid == 1  # the invalid one is ignored whole, and counted
    assert metrics.crl_invalid._value.get() == 1
    facts = snap.ctx.cluster.classes[0].facts  # type: ignore[union-attr]
    assert str(facts.driver) == "535.104.05" and str(facts.compute_capability) == "7.5"


def test_watch_events_update_the_snapshot(view: tuple[LiveView, Metrics], api: FakeAPIServer) -> None:
    v, _ = view
    api.put("nodes", node("a100-0", "NVIDIA-A100-SXM4-80GB", "550.54.15"))
    wait_for(lambda: v.snapshot.nodes == 4 and v.snapshot.classes == 2)
    api.put("nodes", node("t4-0", "Tesla-T4", "535.104.05"), "DELETED")
    wait_for(lambda: v.snapshot.nodes == 3)
    api.put("configmaps", crl("example.com/vgpu-c"))
    wait_for(lambda: v.snapshot.crl_valid == 2)
    assert api.lists["nodes"] == 1  # no re-list for ordinary events: resourceVersion bookkeeping


def test_410_gone_relists(view: tuple[LiveView, Metrics], api: FakeAPIServer) -> None:
    v, metrics = view
    wait_for(lambda: len(api.queues["nodes"]) == 1)  # the watch is established
    api.gone("nodes")
    wait_for(lambda: restarts(metrics, "nodes", "gone") == 1 and api.lists["nodes"] == 2)
    api.put("nodes", node("late", "NVIDIA-L4", "550.54.15"))
    wait_for(lambda: v.snapshot.nodes == 4)


def test_dropped_watch_reconnects_from_its_resource_version(view: tuple[LiveView, Metrics],
                                                           api: FakeAPIServer) -> None:
    v, metrics = view
    api.put("nodes", node("x", "NVIDIA-L4", "550.54.15"))
    wait_for(lambda: v.snapshot.nodes == 4)
    watches_before = api.watches["nodes"]
    wait_for(lambda: len(api.queues["nodes"]) == 1)
    api.drop("nodes")
    wait_for(lambda: api.watches["nodes"] > watches_before, timeout=15)
    assert api.watch_rvs[-1] == str(api.rv)  # resumed where it was, not from scratch
    api.put("nodes", node("y", "NVIDIA-L4", "550.54.15"))
    wait_for(lambda: v.snapshot.nodes == 5)
    assert restarts(metrics, "nodes", "error") >= 1


def test_readyz_waits_for_the_first_sync(loaded: Loaded, tmp_path: Path) -> None:
    from kubernetes import config

    dead = FakeAPIServer()
    dead.port = 1  # nothing listens there: the view can never sync
    client = config.new_client_from_config(config_file=dead.kubeconfig(str(tmp_path / "kc")))
    v = LiveView(loaded.kb, client, Metrics())

    async def probe() -> tuple[int, int]:
        state = State(loaded.ruleset, AdmissionSettings(), v, Metrics())
        async with TestClient(TestServer(make_app(state))) as c:
            ready = (await c.get("/readyz")).status
            health = (await c.get("/healthz")).status
        return ready, health

    assert asyncio.run(probe()) == (503, 200)
