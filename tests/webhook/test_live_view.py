"""The live view's compact node records (pure). The view's list/watch behaviour is tested against a real
kube-apiserver in tests/e2e/test_live_view.py."""

from __future__ import annotations

from typing import Any

from compatcheck.io.loader import Loaded


def node(name: str, product: str, driver: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name, "nvidia.com/gpu.product": product,
        "nvidia.com/cuda.driver-version.full": driver}},
            "spec": {}, "status": {"allocatable": {"nvidia.com/gpu": "1", "cpu": "8"},
                                   "images": [{"names": [f"img-{i}"], "sizeBytes": i} for i in range(20)]}}


def test_compact_nodes_build_the_same_cluster_and_share_pool_parts(loaded: Loaded) -> None:
    from compatcheck.core.cluster import build_cluster, build_cluster_from_records
    from compatcheck.webhook.clusterview import NodeCompactor

    raw = [node(f"t4-{i}", "Tesla-T4", "535.104.05") for i in range(3)] + [
        node("a100-0", "NVIDIA-A100-SXM4-80GB", "550.54.15")]
    raw[0]["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = "1700000000"  # per node: not shared
    for i, n in enumerate(raw[:3]):
        n["metadata"]["labels"]["rack"] = f"r{i}"  # unique per node, but its key is the pool's
    raw[1]["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = "1700000001"
    raw[2]["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = "1700000002"
    raw[3]["spec"]["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule",
                                 "timeAdded": "2026-01-01T00:00:00Z"}]
    raw[3]["metadata"]["labels"]["drop-me"] = None
    compact = NodeCompactor()
    slim = [compact(n) for n in raw]
    assert slim[0].rule_labels is slim[1].rule_labels is slim[2].rule_labels
    assert slim[0].label_keys is slim[1].label_keys is slim[2].label_keys
    assert slim[0].taints is slim[1].taints and slim[0].gpu_allocatable is slim[2].gpu_allocatable
    assert slim[0].name is slim[0].label("kubernetes.io/hostname")  # one string for the name and the hostname
    assert slim[0].rule_labels == (("nvidia.com/cuda.driver-version.full", "535.104.05"),
                                   ("nvidia.com/gpu.product", "Tesla-T4"))
    assert slim[0].placement_labels() == {"kubernetes.io/hostname": "t4-0", "nvidia.com/gfd.timestamp": "1700000000",
                                          "rack": "r0"}
    assert slim[3].placement_labels() == {"kubernetes.io/hostname": "a100-0"}  # a None value is no label
    assert dict(slim[3].gpu_allocatable) == {"nvidia.com/gpu": "1"}  # cpu is not a GPU resource: dropped

    def shape(cluster: Any) -> list[Any]:
        return sorted(((sorted(c.labels.items()), c.taints, repr(c.facts), c.members) for c in cluster.classes),
                      key=repr)

    assert shape(build_cluster_from_records(slim, loaded.kb)) == shape(build_cluster(raw, loaded.kb))
    assert [c.count for c in build_cluster_from_records(slim, loaded.kb).classes] == [3, 1]


def test_the_intern_table_tracks_the_live_records_under_label_churn() -> None:
    from compatcheck.webhook.clusterview import NodeCompactor

    def parts(recs: Any) -> int:  # distinct objects the live records hold (all interned: equal means same)
        seen = {id(p) for r in recs for p in (r.name, r.rule_labels, r.label_keys, r.taints, r.gpu_allocatable)}
        return len(seen | {id(v) for r in recs for v in r.label_values})

    compact = NodeCompactor(slack=200)
    live: dict[str, Any] = {}
    sizes = []
    for generation in range(30):  # every node gets a new value of its unique label, 30 times over
        for i in range(100):
            n = node(f"n{i}", "Tesla-T4", "535.104.05")
            n["metadata"]["labels"]["example.com/lease"] = f"lease-{generation}-{i}"
            live[f"n{i}"] = compact(n)
        compact.compact(live.values())
        sizes.append(len(compact))
        assert len(compact) <= parts(live.values()) + max(200, parts(live.values()) // 2)
    # 100 names (each also its hostname), 100 leases, the keys tuple, the rule labels, taints, allocatable.
    assert parts(live.values()) == 204
    # Grows by the 100 dead leases of each generation until it outgrows the live parts by the slack (200), then
    # is rebuilt from them: bounded by the live records, not by the churn (3,000 leases seen).
    assert sizes == [204, 304, 404] * 10
    before = live["n0"]
    again = compact(node("n0", "Tesla-T4", "535.104.05"))
    # A compaction keeps the live objects as the canonical ones: a node read after it shares them.
    assert again.rule_labels is before.rule_labels and again.gpu_allocatable is before.gpu_allocatable
    assert again.name is before.name


def test_node_problems_are_logged_and_counted_once_each(loaded: Loaded, caplog: Any) -> None:
    """A garbage driver label or a non-quantity allocatable was computed on every rebuild and never reported. The
    view rebuilds on every Node event, so each distinct problem is reported once, when it appears."""
    import logging

    from compatcheck.webhook.clusterview import LiveView
    from compatcheck.webhook.metrics import Metrics

    metrics = Metrics()
    view = LiveView(loaded.kb, None, metrics)  # never started: its watchers' state is set by hand

    def observe(nodes: list[dict[str, Any]]) -> list[str]:
        caplog.clear()
        view.node_watch.items = {n["metadata"]["name"]: view.compactor(n) for n in nodes}
        for w in view._watchers:
            w.synced.set()
        view.rebuild()
        return [r.getMessage() + " " + str(getattr(r, "fields", {}).get("error")) for r in caplog.records
                if r.name == "compatcheck.webhook.view"]

    def seen(field: str) -> float | None:
        return metrics.registry.get_sample_value("compatcheck_node_problems_reported_total", {"field": field})

    caplog.set_level(logging.WARNING, "compatcheck.webhook.view")
    good = [node(f"t4-{i}", "Tesla-T4", "535.104.05") for i in range(3)]
    bad = [node(f"bad-{i}", "Tesla-T4", "garbage") for i in range(2)]
    label = "nvidia.com/cuda.driver-version.full"
    logged = observe(good + bad)
    assert logged == [f"a node value cannot be read; the rules ignore it node bad-0 (and 1 more with the same "
                      f"labels): label {label}: driver version 'garbage' is not a version number (expected digits "
                      "and dots, e.g. 12.4)"]
    assert seen(label) == 1 and metrics.registry.get_sample_value("compatcheck_node_problems") == 1
    for i in range(3):  # rebuilds (another node joins, the same problem on a new node): nothing new to say
        assert observe([*good, *bad, node(f"bad-{i + 2}", "Tesla-T4", "garbage")]) == []
    assert seen(label) == 1
    alloc = node("odd", "Tesla-T4", "535.104.05")
    alloc["status"]["allocatable"]["nvidia.com/gpu"] = "lots"
    assert [m.split(": ", 1)[1] for m in observe([*good, *bad, alloc])] == [
        "allocatable nvidia.com/gpu: 'lots' is not a quantity"]
    assert seen("nvidia.com/gpu") == 1 and metrics.registry.get_sample_value("compatcheck_node_problems") == 2
    assert observe(good) == [] and metrics.registry.get_sample_value("compatcheck_node_problems") == 0
    assert len(observe(good + bad)) == 1 and seen(label) == 2  # gone and back: reported again


def test_the_static_view_reports_node_problems_too(loaded: Loaded, tmp_path: Any, caplog: Any) -> None:
    import json
    import logging

    from compatcheck.webhook.clusterview import StaticView
    from compatcheck.webhook.metrics import Metrics

    caplog.set_level(logging.WARNING, "compatcheck.webhook.view")
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [node("n0", "Tesla-T4", "garbage")]}))
    metrics = Metrics()
    view = StaticView(loaded.kb, str(nodes), [], metrics=metrics)
    view.snapshot.publish(metrics)
    assert view.snapshot.node_problems == 1 and metrics.registry.get_sample_value("compatcheck_node_problems") == 1
    assert [getattr(r, "fields", {}).get("node") for r in caplog.records] == ["n0"]
