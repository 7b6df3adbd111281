"""Scheduling semantics (selectors, affinity operators, tolerations) and node equivalence classes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from compatcheck.core.cluster import Taint, build_cluster, placement_matches, untolerated_taints
from compatcheck.core.profiles import profile_to_nodes
from compatcheck.io.loader import Loaded


def node(name: str, labels: dict[str, str], taints: list[dict[str, str]] | None = None,
         gpus: int = 1) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
            "spec": {"taints": taints or []}, "status": {"allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "8"}}}


def one_class(loaded: Loaded, labels: dict[str, str], taints: list[dict[str, str]] | None = None) -> Any:
    (cls,) = build_cluster([node("n1", labels, taints)], loaded.kb).classes
    return cls


def term(*exprs: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": list(exprs)}]}}}}


@pytest.mark.parametrize(("expr", "labels", "ok"), [
    ({"key": "a", "operator": "In", "values": ["x", "y"]}, {"a": "y"}, True),
    ({"key": "a", "operator": "In", "values": ["x"]}, {"a": "y"}, False),
    ({"key": "a", "operator": "NotIn", "values": ["x"]}, {}, True),
    ({"key": "a", "operator": "NotIn", "values": ["x"]}, {"a": "x"}, False),
    ({"key": "a", "operator": "Exists"}, {"a": ""}, True),
    ({"key": "a", "operator": "DoesNotExist"}, {"a": "1"}, False),
    ({"key": "cuda-major-version", "operator": "Gt", "values": ["11"]}, {"cuda-major-version": "12"}, True),
    ({"key": "cuda-major-version", "operator": "Gt", "values": ["12"]}, {"cuda-major-version": "12"}, False),
    ({"key": "cuda-major-version", "operator": "Lt", "values": ["12"]}, {"cuda-major-version": "11"}, True),
    ({"key": "cuda-major-version", "operator": "Gt", "values": ["x"]}, {"cuda-major-version": "12"}, False),
    ({"key": "cuda-major-version", "operator": "Gt", "values": ["11"]}, {}, False),
    ({"key": "a", "operator": "Bogus", "values": ["x"]}, {"a": "x"}, False),
])
def test_affinity_operators(loaded: Loaded, expr: dict[str, Any], labels: dict[str, str], ok: bool) -> None:
    assert placement_matches(term(expr), one_class(loaded, labels)) is ok


def test_terms_are_ored_and_expressions_anded(loaded: Loaded) -> None:
    cls = one_class(loaded, {"a": "1", "b": "2"})
    spec = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "a", "operator": "In", "values": ["9"]}]},
        {"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]},
                              {"key": "b", "operator": "In", "values": ["2"]}]}]}}}}
    assert placement_matches(spec, cls)
    spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][1][
        "matchExpressions"][1]["values"] = ["3"]
    assert not placement_matches(spec, cls)


def test_empty_term_matches_nothing(loaded: Loaded) -> None:
    spec = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{}]}}}}
    assert not placement_matches(spec, one_class(loaded, {}))


def test_node_selector_and_hostname(loaded: Loaded) -> None:
    cluster = build_cluster([node(f"gpu-{i}", {"pool": "a"}) for i in range(5)], loaded.kb)
    (cls,) = cluster.classes
    assert cls.count == 5
    assert placement_matches({"nodeSelector": {"pool": "a", "kubernetes.io/hostname": "gpu-3"}}, cls)
    assert not placement_matches({"nodeSelector": {"kubernetes.io/hostname": "gpu-9"}}, cls)
    assert placement_matches(term({"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-1"]}), cls)
    fields = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-4"]}]}]}}}}
    assert placement_matches(fields, cls)
    assert placement_matches({"nodeName": "gpu-2"}, cls) and not placement_matches({"nodeName": "x"}, cls)


@pytest.mark.parametrize(("tolerations", "left"), [
    ([], 2),
    ([{"key": "nvidia.com/gpu", "operator": "Exists"}], 1),
    ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}], 2),
    ([{"key": "nvidia.com/gpu", "value": "present"}], 1),
    ([{"key": "nvidia.com/gpu", "value": "other"}], 2),
    ([{"operator": "Exists"}], 0),
    ([{"key": "nvidia.com/gpu", "operator": "Exists"}, {"key": "dedicated", "operator": "Equal", "value": "ml"}], 0),
])
def test_tolerations(loaded: Loaded, tolerations: list[dict[str, str]], left: int) -> None:
    cls = one_class(loaded, {}, [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                                 {"key": "dedicated", "value": "ml", "effect": "NoExecute"},
                                 {"key": "soft", "value": "x", "effect": "PreferNoSchedule"}])
    assert len(untolerated_taints({"tolerations": tolerations}, cls)) == left


def test_equivalence_classes_do_not_grow_with_node_count(loaded: Loaded) -> None:
    nodes = [node(f"n{i}", {"nvidia.com/gpu.product": ["Tesla-T4", "NVIDIA-L4"][i % 2],
                            "nvidia.com/gfd.timestamp": str(i)}) for i in range(2000)]
    cluster = build_cluster(nodes, loaded.kb)
    assert cluster.node_count == 2000 and len(cluster.classes) == 2


def test_gfd_labels_old_and_new(loaded: Loaded) -> None:
    new = one_class(loaded, {"nvidia.com/cuda.driver-version.full": "550.54.15",
                             "nvidia.com/gpu.compute.major": "9", "nvidia.com/gpu.compute.minor": "0"})
    assert str(new.facts.driver) == "550.54.15" and str(new.facts.driver_cuda) == "12.4"
    assert str(new.facts.compute_capability) == "9.0"
    old = one_class(loaded, {"nvidia.com/cuda.driver.major": "535", "nvidia.com/cuda.driver.minor": "104",
                             "nvidia.com/cuda.driver.rev": "05", "nvidia.com/cuda.runtime.major": "12",
                             "nvidia.com/cuda.runtime.minor": "2"})
    assert str(old.facts.driver) == "535.104.05" and str(old.facts.driver_cuda) == "12.2"
    platform = one_class(loaded, {"cuda-major-version": "12", "cuda-minor-version": "4"})
    assert platform.facts.driver is None and str(platform.facts.driver_cuda) == "12.4"
    bad = one_class(loaded, {"nvidia.com/cuda.driver-version.full": "garbage"})
    assert bad.facts.driver is None and bad.facts.problems


@pytest.mark.parametrize(("pool", "message"), [
    ({"name": "x", "gpu": "Mystery-GPU"}, "not in the gpu-products table"),
    ({"name": "x", "gpu": "Tesla-T4", "sharing": "mps", "replicas": 1}, "needs replicas >= 2"),
    ({"name": "x", "gpu": "Tesla-T4", "driver": "latest"}, "not a version number"),
    ({"name": "x", "gpu": "NVIDIA-A100-SXM4-80GB", "sharing": "mig-mixed"}, "needs migProfiles"),
])
def test_profile_errors(loaded: Loaded, pool: dict[str, Any], message: str) -> None:
    # What the schema cannot see; the rest (sharing: magic, count: 0) is the schema's, below.
    _nodes, errors = profile_to_nodes({"kind": "ClusterProfile", "nodePools": [pool]}, loaded.kb)
    assert any(message in e.message for e in errors), errors


def test_profile_mig_mixed_and_time_slicing(loaded: Loaded) -> None:
    nodes, errors = profile_to_nodes({"nodePools": [
        {"name": "mig", "gpu": "NVIDIA-A100-SXM4-80GB", "gpusPerNode": 2, "sharing": "mig-mixed",
         "migProfiles": {"1g.10gb": 7}},
        {"name": "ts", "gpu": "Tesla-T4", "sharing": "time-slicing", "replicas": 4, "renameShared": True}]},
        loaded.kb)
    assert not errors
    assert nodes[0]["status"]["allocatable"] == {"nvidia.com/mig-1g.10gb": 14}
    assert nodes[1]["status"]["allocatable"] == {"nvidia.com/gpu.shared": 4}
    assert nodes[1]["metadata"]["labels"]["nvidia.com/gpu.sharing-strategy"] == "time-slicing"


# The schema (schemas/clusterprofile.schema.json) checks types, enums and ranges before the profile is read, and
# its messages name the field and the line: "nodePools[0]: labels must be a mapping" became
# "profile.yaml:6: error: ClusterProfile /nodePools/0/labels: ['a'] is not of type 'object'".
@pytest.mark.parametrize(("pool", "message"), [
    ({"name": "x", "labels": ["a"]}, "/nodePools/0/labels: ['a'] is not of type 'object'"),
    ({"name": "x", "resources": "8"}, "/nodePools/0/resources: '8' is not of type 'object'"),
    ({"name": "x", "taints": {"key": "a"}}, "/nodePools/0/taints: {'key': 'a'} is not of type 'array'"),
    ({"name": "x", "gpu": "Tesla-T4", "sharing": "mig-mixed", "migProfiles": {"1g.10gb": "seven"}},
     "/nodePools/0/migProfiles/1g.10gb: 'seven' is not of type 'integer'"),
    ({"name": "x", "gpu": "Tesla-T4", "vgpu": {"type": "hami", "memoryMiB": "lots"}},
     "/nodePools/0/vgpu/memoryMiB: 'lots' is not of type 'integer'"),
    ({"name": "x", "gpu": "Tesla-T4", "sharing": "magic"}, "/nodePools/0/sharing: 'magic' is not one of"),
    ({"name": "x", "gpu": "Tesla-T4", "count": 0}, "/nodePools/0/count: 0 is less than the minimum of 1"),
])
def test_profile_wrong_types_are_errors_not_crashes(loaded: Loaded, tmp_path: Path, pool: dict[str, Any],
                                                    message: str) -> None:
    from compatcheck.io.loader import load_nodes

    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"apiVersion": "compatcheck/v1", "kind": "ClusterProfile", "nodePools": [pool]},
                                  indent=1))
    cluster, errors = load_nodes(str(profile), loaded.kb, 1 << 20)
    assert cluster is None and len(errors) == 1, errors
    field = message.split(":")[0].rsplit("/", 1)[-1]
    assert message in errors[0].message and errors[0].message.startswith("ClusterProfile /nodePools/0/")
    assert f'"{field}"' in profile.read_text().splitlines()[errors[0].line - 1]  # located at the field


CONDITION_TAINTS = [
    ("node.kubernetes.io/not-ready", "NoSchedule"), ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoSchedule"), ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"), ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"), ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/network-unavailable", "NoSchedule"), ("node.kubernetes.io/out-of-service", "NoExecute"),
    ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule"),
    ("node.cloudprovider.kubernetes.io/shutdown", "NoSchedule"),
]


@pytest.mark.parametrize(("key", "effect"), CONDITION_TAINTS)
def test_condition_taints_neither_split_a_pool_nor_count_as_untolerated(loaded: Loaded, key: str,
                                                                         effect: str) -> None:
    # A node rebooting for a driver upgrade (NotReady), cordoned or under pressure is still where the pod runs.
    policy = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    nodes = [node("ready", {"pool": "a"}, [policy]),
             node("sick", {"pool": "a"}, [policy, {"key": key, "effect": effect}])]
    (cls,) = build_cluster(nodes, loaded.kb).classes
    assert cls.count == 2
    assert cls.taints == (Taint("nvidia.com/gpu", "present", "NoSchedule"),)
    assert untolerated_taints({"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}, cls) == []


def test_a_wholly_not_ready_pool_stays_in_scope(loaded: Loaded) -> None:
    nodes = [node(f"n{i}", {"nvidia.com/gpu.product": "Tesla-T4"},
                  [{"key": k, "effect": e} for k, e in CONDITION_TAINTS]) for i in range(3)]
    (cls,) = build_cluster(nodes, loaded.kb).classes
    assert cls.taints == () and untolerated_taints({}, cls) == []


# ---------------------------------------------------------------------------------------- per-node labels
# Rule labels key the classes; every other label is the node's own, read only by placement (issue #10).


def unique_node(i: int, product: str) -> dict[str, Any]:
    """A cloud node: the pool's labels plus labels unique to this node (instance id, rack, slot)."""
    return node(f"n{i}", {"nvidia.com/gpu.product": product, "node.kubernetes.io/instance-type": "g6.xlarge",
                          "example.com/instance-id": f"i-{i:08x}", "example.com/rack": f"r{i // 10}",
                          "example.com/slot": str(i % 10), "nvidia.com/gfd.timestamp": str(1700000000 + i)})


def test_classes_do_not_grow_with_unique_per_node_labels(loaded: Loaded) -> None:
    cluster = build_cluster([unique_node(i, ["Tesla-T4", "NVIDIA-L4"][i % 2]) for i in range(2000)], loaded.kb)
    assert cluster.node_count == 2000
    assert [(c.labels, c.count) for c in cluster.classes] == [
        ({"nvidia.com/gpu.product": "Tesla-T4"}, 1000), ({"nvidia.com/gpu.product": "NVIDIA-L4"}, 1000)]
    member = cluster.classes[0].members[7]
    assert member.placement_labels() == {
        "example.com/instance-id": "i-0000000e", "example.com/rack": "r1", "example.com/slot": "4",
        "kubernetes.io/hostname": "n14", "node.kubernetes.io/instance-type": "g6.xlarge",
        "nvidia.com/gfd.timestamp": "1700000014"}


def test_node_facts_read_only_rule_labels(loaded: Loaded) -> None:
    # A class is keyed by the rule labels alone: a label node_facts reads outside them would be read from
    # whichever member came first.
    from compatcheck.core.checks.driver import GFD_KEYS, PLATFORM_KEYS
    from compatcheck.core.cluster import RULE_LABELS, is_rule_label, node_facts

    class Reads(dict[str, str]):
        seen: set[str] = set()

        def get(self, key: str, default: Any = None) -> Any:
            self.seen.add(key)
            return super().get(key, default)

        def __getitem__(self, key: str) -> str:
            self.seen.add(key)
            return super().__getitem__(key)

        def __contains__(self, key: object) -> bool:
            self.seen.add(str(key))
            return super().__contains__(key)

    for labels in ({}, {"nvidia.com/cuda.driver.major": "535", "nvidia.com/gpu.product": "Tesla-T4",
                        "nvidia.com/gpu.compute.major": "7", "compatcheck.io/vgpu-baseline-cuda": "12.2"},
                   {"nvidia.com/cuda.driver-version.major": "550", "cuda-major-version": "12"}):
        node_facts(Reads(labels), {"nvidia.com/gpu": "1"}, loaded.kb)
    assert Reads.seen and Reads.seen <= RULE_LABELS
    assert set(GFD_KEYS) | set(PLATFORM_KEYS) <= RULE_LABELS  # what the driver check's fix reads
    assert is_rule_label("compatcheck.io/tier") and not is_rule_label("kubernetes.io/hostname")
    assert not is_rule_label("nvidia.com/gfd.timestamp") and not is_rule_label(5)


def affinity(*terms: list[dict[str, Any]], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out: list[dict[str, Any]] = [{"matchExpressions": t} for t in terms]
    if fields is not None:
        out.append({"matchFields": fields})
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": out}}}}


@pytest.mark.parametrize(("spec", "placed"), [
    ({"nodeSelector": {"example.com/instance-id": "i-00000007"}}, ["NVIDIA-L4"]),
    ({"nodeSelector": {"example.com/instance-id": "i-00000007", "nvidia.com/gpu.product": "Tesla-T4"}}, []),
    ({"nodeSelector": {"kubernetes.io/hostname": "n4"}}, ["Tesla-T4"]),
    ({"nodeSelector": {"kubernetes.io/hostname": "nope"}}, []),
    ({"nodeName": "n3"}, ["NVIDIA-L4"]),
    (affinity(fields=[{"key": "metadata.name", "operator": "In", "values": ["n2", "n9"]}]), ["Tesla-T4", "NVIDIA-L4"]),
    (affinity(fields=[{"key": "metadata.name", "operator": "NotIn", "values": ["n1", "n3", "n5", "n7", "n9"]}]),
     ["Tesla-T4"]),
    (affinity([{"key": "example.com/slot", "operator": "Gt", "values": ["8"]}]), ["NVIDIA-L4"]),  # only n9
    (affinity([{"key": "example.com/slot", "operator": "Lt", "values": ["1"]}]), ["Tesla-T4"]),  # only n0
    (affinity([{"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["n1", "n3", "n5", "n7", "n9"]}]),
     ["Tesla-T4"]),
    (affinity([{"key": "example.com/spare", "operator": "DoesNotExist"}]), ["NVIDIA-L4"]),  # only n0-n8 even have it
    (affinity([{"key": "example.com/spare", "operator": "Exists"},
               {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-L4"]}]), []),
    (affinity([{"key": "example.com/spare", "operator": "Exists"}],
              [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-L4"]}]),
     ["Tesla-T4", "NVIDIA-L4"]),
    (affinity([{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}], []), ["NVIDIA-L4"]),
    (affinity([]), []),  # an empty term matches nothing
])
def test_placement_on_per_node_labels(loaded: Loaded, spec: dict[str, Any], placed: list[str]) -> None:
    nodes = [unique_node(i, ["Tesla-T4", "NVIDIA-L4"][i % 2]) for i in range(10)]
    for n in nodes:
        if n["metadata"]["name"] in {f"n{i}" for i in (0, 2, 4, 6, 8)}:
            n["metadata"]["labels"]["example.com/spare"] = "yes"
    cluster = build_cluster(nodes, loaded.kb)
    assert [c.labels["nvidia.com/gpu.product"] for c in cluster.placement(spec)] == placed
    assert [c.labels["nvidia.com/gpu.product"] for c in cluster.classes if placement_matches(spec, c)] == placed


# A reference evaluator written from the Kubernetes documentation, one node at a time, with nothing shared with
# compatcheck.core.cluster: the indexed placement must say exactly what it says, class by class.


def ref_expr(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op = expr.get("key"), expr.get("operator")
    values = [str(v) for v in expr.get("values") or []] if isinstance(expr.get("values"), list) else []
    present = isinstance(key, str) and key in labels
    value = labels[key] if present else None
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not (present and value in values)
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(values) == 1:
        try:
            have, want = int(str(value)), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def ref_admits(spec: dict[str, Any], n: dict[str, Any]) -> bool:
    name, labels = n["metadata"]["name"], n["metadata"]["labels"]
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict) and any(labels.get(str(k)) != str(v) for k, v in selector.items()):
        return False
    if isinstance(spec.get("nodeName"), str) and spec["nodeName"] and spec["nodeName"] != name:
        return False
    terms = spec.get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution",
                                                                 {}).get("nodeSelectorTerms")
    if terms is None:
        return True
    for t in terms:
        exprs, fields = t.get("matchExpressions") or [], t.get("matchFields") or []
        if (exprs or fields) and all(ref_expr(e, labels) for e in exprs) and all(
                ref_expr(f, {"metadata.name": name}) for f in fields):
            return True
    return False


KEYS = {  # key -> values a node may carry (None: absent); rule labels and placement labels alike
    "nvidia.com/gpu.product": ["Tesla-T4", "NVIDIA-L4", "NVIDIA-A100-SXM4-80GB"],
    "cuda-major-version": ["11", "12", None],
    "compatcheck.io/tier": ["gold", "bronze", None],
    "topology.kubernetes.io/zone": ["a", "b", "c"],
    "example.com/rack": [f"r{i}" for i in range(6)] + [None],
    "example.com/slot": ["0", "3", "7", "12", "x", None],
    "example.com/pool": ["p", None],
}


def random_cluster(rng: Any, size: int) -> list[dict[str, Any]]:
    nodes = []
    for i in range(size):
        labels = {k: v for k, vs in KEYS.items() if (v := rng.choice(vs)) is not None}
        labels["example.com/instance-id"] = f"i-{i}"  # unique per node
        taints = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}] if rng.random() < .3 else []
        nodes.append(node(f"n{i}", labels, taints, gpus=rng.choice([1, 8])))
    return nodes


def values_of(key: object, names: list[str]) -> list[str]:
    """Values worth asking about: the key's own, the picked nodes' names and instance ids, a few others."""
    ids = [f"i-{name[1:]}" for name in names]
    own = {"kubernetes.io/hostname": names, "example.com/instance-id": ids}.get(str(key), [])
    return [v for v in KEYS.get(str(key), []) if v is not None] + own + ["0", "12", "zzz"]


def random_expr(rng: Any, names: list[str]) -> dict[str, Any]:
    key = rng.choice([*KEYS, "kubernetes.io/hostname", "example.com/instance-id", "example.com/nowhere", 5])
    op = rng.choice(["In", "In", "In", "NotIn", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus"])
    values: Any = rng.sample(values_of(key, names), rng.choice([0, 1, 1, 2, 3]))
    if op in ("Gt", "Lt") and rng.random() < .8:
        values = [rng.choice(["0", "3", "7", "11", "20", "x", 5])]
    return {"key": key, "operator": op, "values": values} if rng.random() < .9 else {"key": key, "operator": op}


def random_spec(rng: Any, names: list[str]) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if rng.random() < .5:
        keys = rng.sample([*KEYS, "kubernetes.io/hostname", "example.com/instance-id"], rng.choice([0, 1, 1, 2]))
        spec["nodeSelector"] = {k: rng.choice(values_of(k, names)[:-3]) for k in keys}
    if rng.random() < .15:
        spec["nodeName"] = rng.choice([*names, "absent"])
    if rng.random() < .7:
        terms = []
        for _ in range(rng.choice([1, 1, 2, 3])):
            term: dict[str, Any] = {}
            if rng.random() < .9:
                term["matchExpressions"] = [random_expr(rng, names) for _ in range(rng.choice([0, 1, 1, 1, 2, 3]))]
            if rng.random() < .25:
                term["matchFields"] = [{
                    "key": rng.choice(["metadata.name", "metadata.name", "spec.unschedulable"]),
                    "operator": rng.choice(["In", "NotIn", "Exists", "DoesNotExist", "Gt"]),
                    "values": rng.sample([*names, "7"], rng.choice([1, 2]))}]
            terms.append(term)
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": terms}}}
    return spec


@pytest.mark.parametrize("seed", range(40))
def test_indexed_placement_equals_a_node_by_node_evaluation(loaded: Loaded, seed: int) -> None:
    import random

    rng = random.Random(seed)
    nodes = random_cluster(rng, rng.choice([1, 7, 60, 200]))
    cluster = build_cluster(nodes, loaded.kb)
    by_name = {n["metadata"]["name"]: n for n in nodes}
    names = rng.sample(sorted(by_name), min(len(by_name), 5))
    assert sum(c.count for c in cluster.classes) == len(nodes)
    for _ in range(60):
        spec = random_spec(rng, names)
        expected = [c for c in cluster.classes if any(ref_admits(spec, by_name[m.name]) for m in c.members)]
        assert cluster.placement(spec) == expected, spec
        assert [c for c in cluster.classes if placement_matches(spec, c)] == expected, spec


@pytest.mark.parametrize("seed", range(12))
def test_indexes_carried_to_the_next_snapshot_stay_exact(loaded: Loaded, seed: int) -> None:
    # A live view replaces a few records per snapshot; the new cluster takes over the old one's indexes,
    # patched for them. Both snapshots must still answer exactly as a node-by-node evaluation of their nodes.
    import random

    from compatcheck.core.cluster import build_cluster_from_records, node_record

    rng = random.Random(100 + seed)
    table: dict[Any, Any] = {}

    def records(raw: list[dict[str, Any]]) -> list[Any]:
        return [node_record(n, lambda v: table.setdefault(v, v)) for n in raw]

    nodes = random_cluster(rng, 200)
    recs = records(nodes)
    names = rng.sample([n["metadata"]["name"] for n in nodes], 5)
    specs = [random_spec(rng, names) for _ in range(80)]
    before = build_cluster_from_records(recs, loaded.kb)
    answers = [before.placement(s) for s in specs]  # builds the indexes of every key the specs reference

    changed = rng.sample(range(200), 20)
    after_nodes = [dict(n) for n in nodes]
    for i in changed:  # new placement labels, same rule labels: every node keeps its class and position
        labels = {k: v for k, v in nodes[i]["metadata"]["labels"].items() if not k.startswith("example.com/")}
        labels.update({"example.com/rack": rng.choice(["r0", "r9", "new"]), "example.com/instance-id": f"x-{i}"})
        if rng.random() < .5:
            labels["example.com/slot"] = rng.choice(["1", "12", "y"])
        after_nodes[i] = {**nodes[i], "metadata": {"name": nodes[i]["metadata"]["name"], "labels": labels}}
    after_recs = list(recs)
    for i, rec in zip(changed, records([after_nodes[i] for i in changed]), strict=True):
        after_recs[i] = rec
    after = build_cluster_from_records(after_recs, loaded.kb, previous=before)
    assert after._index is not None and set(after._index.indexed_keys()) == set(before._index.indexed_keys())

    for cluster, raw, previous_answers in ((after, after_nodes, None), (before, nodes, answers)):
        by_name = {n["metadata"]["name"]: n for n in raw}
        for k, spec in enumerate(specs):
            expected = [c for c in cluster.classes if any(ref_admits(spec, by_name[m.name]) for m in c.members)]
            assert cluster.placement(spec) == expected, spec
            if previous_answers is not None:  # the old snapshot's indexes were not edited under it
                assert previous_answers[k] == expected


def test_indexes_are_not_carried_when_nodes_move(loaded: Loaded) -> None:
    from compatcheck.core.cluster import build_cluster_from_records, node_record

    nodes = [unique_node(i, "Tesla-T4") for i in range(40)]
    recs = [node_record(n) for n in nodes]
    before = build_cluster_from_records(recs, loaded.kb)
    spec = {"nodeSelector": {"example.com/rack": "r1"}}
    assert [c.count for c in before.placement(spec)] == [40]
    moved = unique_node(15, "NVIDIA-L4")  # a driver or GPU change moves a node to another class
    after = build_cluster_from_records([*recs[:15], node_record(moved), *recs[16:]], loaded.kb, previous=before)
    assert after._index is None  # positions shifted: rebuilt on first use
    assert [c.labels["nvidia.com/gpu.product"] for c in after.placement(spec)] == ["Tesla-T4", "NVIDIA-L4"]
    gone = build_cluster_from_records(recs[:39], loaded.kb, previous=before)
    assert gone._index is None and [c.count for c in gone.placement(spec)] == [39]
    assert [c.count for c in before.placement({"nodeName": "n39"})] == [40]  # builds the name index
    other = node_record(unique_node(99, "Tesla-T4"))  # another node in the last one's place: same positions
    swapped = build_cluster_from_records([*recs[:39], other], loaded.kb, previous=before)
    assert swapped._index is None
    assert swapped.placement({"nodeName": "n39"}) == []
    assert [c.count for c in swapped.placement({"nodeName": "n99"})] == [40]
