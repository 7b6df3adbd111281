"""whatif: what-ifs parsed into exact changes, each change applied to synthetic nodes (labels and allocatable as
GFD and the device plugin would write them, the GPUs of a node, the reasons a change cannot be made), the
difference of two runs and the lowest driver, against the hand-written tables of tests/core/tables.py."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core.cluster import Cluster, build_cluster
from compatcheck.core.knowledge import KnowledgeBase
from compatcheck.core.model import ObjectRef
from compatcheck.core.versions import parse_driver_version
from compatcheck.core.whatif import (
    Entry,
    RecordingChange,
    WhatIfDiff,
    WhatIfError,
    apply_what_ifs,
    branch_drivers,
    diff_results,
    failing,
    lowest_driver,
    parse_what_if,
)
from tests.core.tables import TABLES, make_kb

KB = make_kb()


@pytest.mark.parametrize(("text", "fields", "describe"), [
    ("pool=t4:driver=550.54.15", ("driver", "550.54.15", None, None, (), None), "nodes matching 'pool=t4': "
                                                                               "driver=550.54.15"),
    (" : driver = 550.54.15 ", ("driver", "550.54.15", None, None, (), None), "every node:  driver = 550.54.15 "),
    ("pool=a:product=Tesla-T4", ("product", None, "Tesla-T4", "7.5", (), None), "nodes matching 'pool=a': "
                                                                              "product=Tesla-T4"),
    ("a:mig.strategy=none", ("mig.strategy", None, None, None, (), None), "nodes matching 'a': mig.strategy=none"),
    ("a:mig.single=7x1g.5gb", ("mig.single", None, None, None, (("1g.5gb", 7),), None), None),
    ("a:mig.single=1x1g.5gb, 2X1G.5GB", ("mig.single", None, None, None, (("1g.5gb", 3),), None), None),
    ("a:mig.mixed=2x2g.10gb,99x1g.5gb,1x1g.10gb+me", ("mig.mixed", None, None, None,
                                                      (("1g.10gb.me", 1), ("1g.5gb", 99), ("2g.10gb", 2)), None), None),
    ("a:replicas=1", ("replicas", None, None, None, (), 1), None),
    ("a:replicas=1024", ("replicas", None, None, None, (), 1024), None),
    ("a:remove", ("remove", None, None, None, (), None), "nodes matching 'a': remove"),
    ("a: remove ", ("remove", None, None, None, (), None), None),
    (":product=GeForce-RTX:3090", ("product", None, "GeForce-RTX:3090", "8.6", (), None),
     "every node: product=GeForce-RTX:3090"),
])
def test_a_what_if_is_read_into_its_change(text: str, fields: tuple[Any, ...], describe: str | None) -> None:
    w = parse_what_if(text, KB)
    assert (w.change, w.driver and w.driver.text, w.product, w.compute and w.compute.text, w.layout,
            w.replicas) == fields
    assert w.text == text
    if describe is not None:
        assert w.describe() == describe


@pytest.mark.parametrize(("text", "message"), [
    ("a:remove=", "--what-if 'a:remove=': remove takes no value"),
    ("a:", "--what-if 'a:': unknown change '' (expected one of driver, product, mig.strategy, mig.single, mig.mixed, "
           "replicas, remove)"),
    ("a:product", "--what-if 'a:product': product needs a value (product=...)"),
    ("a:product= ", "--what-if 'a:product= ': product needs a value (product=...)"),
    ("a:product=Mystery", "--what-if 'a:product=Mystery': GPU 'Mystery' is not in the gpu-products table, so its "
                          "compute capability is unknown (add a row with --rules-dir)"),
    ("a:mig.strategy=single", "--what-if 'a:mig.strategy=single': mig.strategy takes none; turn MIG on with "
                              "mig.single=NxPROFILE or mig.mixed=NxPROFILE,..."),
    ("a:mig.mixed=0x1g.5gb", "--what-if 'a:mig.mixed=0x1g.5gb': '0x1g.5gb' is not COUNTxPROFILE (e.g. 7x1g.10gb)"),
    ("a:mig.mixed=100x1g.5gb", "--what-if 'a:mig.mixed=100x1g.5gb': '100x1g.5gb' is not COUNTxPROFILE (e.g. "
                               "7x1g.10gb)"),
    ("a:mig.mixed=1x1g.5gb, ", "--what-if 'a:mig.mixed=1x1g.5gb, ': '' is not COUNTxPROFILE (e.g. 7x1g.10gb)"),
    ("a:mig.mixed=1x1g.5gbx", "--what-if 'a:mig.mixed=1x1g.5gbx': '1x1g.5gbx' is not COUNTxPROFILE (e.g. "
                              "7x1g.10gb)"),
    ("a:mig.single=1x1g.5gb,1x2g.10gb", "--what-if 'a:mig.single=1x1g.5gb,1x2g.10gb': the single strategy gives one "
                                        "profile per GPU; use mig.mixed for several"),
    ("a:replicas=1025", "--what-if 'a:replicas=1025': replicas must be a whole number from 1 to 1024"),
    ("a:replicas=-2", "--what-if 'a:replicas=-2': replicas must be a whole number from 1 to 1024"),
    ("a:replicas=two", "--what-if 'a:replicas=two': replicas must be a whole number from 1 to 1024"),
    ("a:driver=5x", "--what-if 'a:driver=5x': driver version '5x' is not a version number (expected digits and dots, "
                    "e.g. 12.4)"),
    ("a in (x:remove", "--what-if 'a in (x:remove': selector 'a in (x': '(' without ')'"),
    ("pool=t4:driver=5:5", "--what-if 'pool=t4:driver=5:5': driver version '5:5' is not a version number (expected "
                           "digits and dots, e.g. 12.4)"),
])
def test_a_what_if_that_cannot_be_read_says_why(text: str, message: str) -> None:
    with pytest.raises(WhatIfError) as exc:
        parse_what_if(text, KB)
    assert str(exc.value) == message


# ------------------------------------------------------------------------------------------------ applying

T4 = {"pool": "t4", "nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.compute.major": "7",
      "nvidia.com/gpu.compute.minor": "5", "nvidia.com/cuda.driver-version.full": "470.42.01",
      "nvidia.com/cuda.driver-version.major": "470", "nvidia.com/cuda.driver-version.minor": "42",
      "nvidia.com/cuda.driver-version.revision": "01", "nvidia.com/cuda.driver.major": "470",
      "nvidia.com/cuda.driver.minor": "42", "nvidia.com/cuda.driver.rev": "01",
      "nvidia.com/cuda.runtime-version.major": "11", "nvidia.com/cuda.runtime-version.minor": "4",
      "nvidia.com/cuda.runtime-version.full": "11.4", "cuda-major-version": "11", "cuda-minor-version": "4"}


def node(name: str, labels: dict[str, str], alloc: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": {"cpu": "8", **alloc}}}


def view(*nodes: dict[str, Any]) -> Cluster:
    return build_cluster(list(nodes), KB)


def after(cluster: Cluster, *texts: str) -> tuple[dict[str, tuple[dict[str, str], dict[str, Any]]], list[Any]]:
    """Each node's GPU labels (nvidia.com/..., cuda-...) and GPU allocatable after the what-ifs, and the problems."""
    applied = apply_what_ifs(cluster, [parse_what_if(t, KB) for t in texts], KB)
    out = {}
    for cls in applied.cluster.classes:
        for rec in cls.members:
            out[rec.name] = ({k: v for k, v in rec.rule_labels},
                             {k: int(v) if str(v).isdigit() else v for k, v in rec.gpu_allocatable})
    return out, [(d.path, d.message, d.severity.value, d.kind) for d in applied.problems]


def test_a_driver_change_rewrites_every_driver_label_and_the_cuda_of_its_branch() -> None:
    nodes, problems = after(view(node("n", T4, {"nvidia.com/gpu": "1"})), "pool=t4:driver=550.54.15")
    labels, alloc = nodes["n"]
    assert problems == []
    assert labels == {
        "nvidia.com/gpu.product": "Tesla-T4", "nvidia.com/gpu.compute.major": "7", "nvidia.com/gpu.compute.minor": "5",
        "nvidia.com/cuda.driver-version.full": "550.54.15", "nvidia.com/cuda.driver-version.major": "550",
        "nvidia.com/cuda.driver-version.minor": "54", "nvidia.com/cuda.driver-version.revision": "15",
        "nvidia.com/cuda.driver.major": "550", "nvidia.com/cuda.driver.minor": "54", "nvidia.com/cuda.driver.rev": "15",
        "nvidia.com/cuda.runtime-version.major": "12", "nvidia.com/cuda.runtime-version.minor": "4",
        "nvidia.com/cuda.runtime.major": "12", "nvidia.com/cuda.runtime.minor": "4"}
    assert alloc == {"nvidia.com/gpu": 1}


def test_a_short_driver_version_writes_only_its_parts_and_an_unknown_branch_no_cuda() -> None:
    nodes, problems = after(view(node("n", T4, {"nvidia.com/gpu": "1"})), ":driver=390")
    labels = nodes["n"][0]
    assert {k: v for k, v in labels.items() if "cuda" in k} == {
        "nvidia.com/cuda.driver-version.full": "390", "nvidia.com/cuda.driver-version.major": "390",
        "nvidia.com/cuda.driver.major": "390"}
    assert problems == [("--what-if :driver=390", "the driver-branches table does not say which CUDA driver 390 "
                                                  "supports: the nodes' CUDA is unknown", "warning", "nodes")]
    two, _ = after(view(node("n", T4, {"nvidia.com/gpu": "1"})), ":driver=550.54")
    assert {k: v for k, v in two["n"][0].items() if "driver" in k} == {
        "nvidia.com/cuda.driver-version.full": "550.54", "nvidia.com/cuda.driver-version.major": "550",
        "nvidia.com/cuda.driver-version.minor": "54", "nvidia.com/cuda.driver.major": "550",
        "nvidia.com/cuda.driver.minor": "54"}


def test_a_product_change_keeps_gfds_suffix_and_writes_the_compute_capability() -> None:
    mig = {"nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-1g.5gb", "nvidia.com/mig.strategy": "single",
           "nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "0"}
    nodes, problems = after(view(node("m", mig, {"nvidia.com/gpu": "7"}), node("bare", {"x": "y"}, {})),
                            ":product=NVIDIA-H100-80GB")
    assert problems == []
    assert nodes["m"][0] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-MIG-1g.5gb",
                             "nvidia.com/mig.strategy": "single", "nvidia.com/gpu.compute.major": "9",
                             "nvidia.com/gpu.compute.minor": "0"}
    assert nodes["bare"][0] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB", "nvidia.com/gpu.compute.major": "9",
                                "nvidia.com/gpu.compute.minor": "0"}


A100 = {"pool": "a", "nvidia.com/gpu.product": "A100-SXM4-40GB", "nvidia.com/gpu.count": "2"}


def test_mig_single_mixed_and_off() -> None:
    start = view(node("a", {**A100, "nvidia.com/gpu.replicas": "2", "nvidia.com/gpu.sharing-strategy": "time-slicing"},
                      {"nvidia.com/gpu": "4", "nvidia.com/gpu.shared": "4", "example.com/fpga": "1"}))
    single, problems = after(start, "pool=a:mig.single=7x1g.5gb")
    assert problems == []
    assert single["a"] == ({"nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-1g.5gb",
                            "nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/mig.strategy": "single"},
                           {"nvidia.com/gpu": 14})
    mixed, _ = after(start, "pool=a:mig.mixed=3x1g.5gb,1x7g.40gb")
    assert mixed["a"] == ({"nvidia.com/gpu.product": "A100-SXM4-40GB", "nvidia.com/gpu.sharing-strategy": "none",
                           "nvidia.com/mig.strategy": "mixed"},
                          {"nvidia.com/mig-1g.5gb": 6, "nvidia.com/mig-7g.40gb": 2})
    off, _ = after(start, "pool=a:mig.mixed=3x1g.5gb", "pool=a:mig.strategy=none")
    assert off["a"] == ({"nvidia.com/gpu.product": "A100-SXM4-40GB", "nvidia.com/gpu.sharing-strategy": "none",
                         "nvidia.com/mig.strategy": "none"}, {"nvidia.com/gpu": 2})
    to_single, _ = after(start, "pool=a:mig.mixed=3x1g.5gb,1x7g.40gb", "pool=a:mig.single=7x1g.5gb")
    assert to_single["a"][1] == {"nvidia.com/gpu": 14}  # the mixed layout's resources are gone
    back, _ = after(start, "pool=a:mig.single=7x1g.5gb", "pool=a:mig.mixed=1x7g.40gb")
    assert back["a"][0]["nvidia.com/gpu.product"] == "A100-SXM4-40GB"


def test_mig_on_a_node_without_a_product_takes_any_profile_whatever_the_table() -> None:
    tables = {**TABLES, "mig-profiles": [{"match": ".*", "gpu": "any", "profiles": ["1g.5gb"]}]}
    kb = KnowledgeBase.from_tables(tables)
    cluster = build_cluster([node("n", {"nvidia.com/gpu.count": "1"}, {"nvidia.com/gpu": "1"})], kb)
    applied = apply_what_ifs(cluster, [parse_what_if(":mig.single=2x3g.20gb", kb)], kb)
    assert applied.problems == []


def test_mig_on_a_node_without_a_product_takes_any_profile() -> None:
    nodes, problems = after(view(node("n", {"nvidia.com/gpu.count": "1"}, {"nvidia.com/gpu": "1"})),
                            ":mig.single=2x3g.20gb")
    assert problems == []
    assert nodes["n"] == ({"nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/mig.strategy": "single"},
                          {"nvidia.com/gpu": 2})
    off, _ = after(view(node("n", {"nvidia.com/gpu.count": "1", "nvidia.com/mig.strategy": "single"},
                             {"nvidia.com/gpu": "7"})), ":mig.strategy=none")
    assert off["n"] == ({"nvidia.com/mig.strategy": "none"}, {"nvidia.com/gpu": 1})


@pytest.mark.parametrize(("labels", "what_if", "reason"), [
    (A100, "pool=a:mig.mixed=1x1g.5gb,1x2g.10gb,1x3g.20gb", "A100-SXM4-40GB has no MIG profile 2g.10gb, 3g.20gb "
                                                      "(the mig-profiles table)"),
    ({**A100, "nvidia.com/gpu.product": "Tesla-T4"}, "pool=a:mig.single=1x1g.5gb",
     "Tesla-T4 has no MIG profile 1g.5gb (the mig-profiles table)"),
    ({**A100, "nvidia.com/gpu.product": "RTX-3090"}, "pool=a:mig.single=1x1g.5gb",
     "the mig-profiles table does not say which MIG profiles RTX-3090 has"),
    ({**A100, "nvidia.com/mig.strategy": "mixed"}, "pool=a:replicas=2",
     "its GPUs are MIG-partitioned (turn MIG off first: mig.strategy=none)"),
    ({**A100, "nvidia.com/mig.strategy": "single"}, "pool=a:replicas=1",
     "its GPUs are MIG-partitioned (turn MIG off first: mig.strategy=none)"),
])
def test_a_change_that_cannot_be_made_to_a_node_is_an_error(labels: dict[str, str], what_if: str,
                                                            reason: str) -> None:
    nodes, problems = after(view(node("n-1", labels, {"nvidia.com/gpu": "2"})), what_if)
    assert problems == [(f"--what-if {what_if}", f"cannot apply to node n-1: {reason}", "error", "nodes")]
    assert nodes["n-1"] == ({k: v for k, v in labels.items() if k.startswith("nvidia.com/gpu.p")
                             or k.startswith("nvidia.com/mig")}, {"nvidia.com/gpu": 2})


def test_the_first_node_that_fails_is_named_with_how_many_more() -> None:
    t4 = {"pool": "x", "nvidia.com/gpu.product": "RTX-3090", "nvidia.com/gpu.count": "1"}
    three = view(*(node(f"n-{i}", t4, {"nvidia.com/gpu": "1"}) for i in range(3)))
    _, problems = after(three, "pool=x:mig.single=1x1g.5gb")
    assert [p[1] for p in problems] == [
        "cannot apply to node n-0 (and 2 more nodes): the mig-profiles table does not say which MIG profiles "
        "RTX-3090 has"]
    _, problems = after(view(*(node(f"n-{i}", t4, {"nvidia.com/gpu": "1"}) for i in range(2))),
                        "pool=x:mig.single=1x1g.5gb")
    assert [p[1] for p in problems] == [
        "cannot apply to node n-0 (and 1 more nodes): the mig-profiles table does not say which MIG profiles "
        "RTX-3090 has"]


@pytest.mark.parametrize(("labels", "alloc", "gpus"), [
    ({"nvidia.com/gpu.count": "3"}, {"nvidia.com/gpu": "8"}, 3),  # GFD's count wins
    ({"nvidia.com/gpu.count": "x"}, {"nvidia.com/gpu": "8"}, 8),
    ({}, {"nvidia.com/gpu": "8"}, 8),
    ({}, {"nvidia.com/gpu.shared": "8"}, 8),
    ({"nvidia.com/gpu.replicas": "4"}, {"nvidia.com/gpu": "8"}, 2),
    ({"nvidia.com/gpu.replicas": "0"}, {"nvidia.com/gpu": "8"}, 8),
    ({"nvidia.com/gpu.replicas": "x"}, {"nvidia.com/gpu": "8"}, 8),
    ({"nvidia.com/gpu.replicas": "3"}, {"nvidia.com/gpu": "8"}, 2),
    ({"nvidia.com/mig.strategy": "none"}, {"nvidia.com/gpu": "2", "nvidia.com/mig-1g.5gb": "7"}, 2),
    ({"nvidia.com/mig.strategy": ""}, {"nvidia.com/gpu": "2", "nvidia.com/mig-1g.5gb": "7"}, 2),
    ({"nvidia.com/mig.strategy": "mixed"}, {"nvidia.com/gpu": "2"}, 2),
    ({}, {"nvidia.com/gpu": "2", "nvidia.com/mig-1g.5gb": "7"}, 2),
    ({"nvidia.com/mig.strategy": "mixed"}, {"nvidia.com/gpu": "2", "nvidia.com/mig-1g.5gb": "7"}, None),
    ({"nvidia.com/mig.strategy": "single"}, {"nvidia.com/gpu": "7"}, None),
    ({"nvidia.com/mig.strategy": "single", "nvidia.com/gpu.count": "1"}, {"nvidia.com/gpu": "7"}, 1),
    ({}, {}, None),
    ({}, {"nvidia.com/gpu": "1.5"}, None),
])
def test_the_gpus_of_a_node(labels: dict[str, str], alloc: dict[str, str], gpus: int | None) -> None:
    """Seen through mig.strategy=none, which gives each GPU whole."""
    nodes, problems = after(view(node("n", labels, alloc)), ":mig.strategy=none")
    if gpus is None:
        assert [p[1] for p in problems] == [
            "cannot apply to node n: cannot tell how many GPUs it has (no nvidia.com/gpu.count label, and its "
            "allocatable is shared or MIG)"]
    else:
        assert problems == []
        assert nodes["n"][1] == {"nvidia.com/gpu": gpus}


@pytest.mark.parametrize(("alloc", "what_if", "expected"), [
    ({"nvidia.com/gpu": "2"}, ":replicas=4", ({"nvidia.com/gpu.replicas": "4",
                                              "nvidia.com/gpu.sharing-strategy": "time-slicing"},
                                             {"nvidia.com/gpu": 8})),
    ({"nvidia.com/gpu.shared": "2"}, ":replicas=3", ({"nvidia.com/gpu.replicas": "3",
                                                     "nvidia.com/gpu.sharing-strategy": "time-slicing"},
                                                    {"nvidia.com/gpu.shared": 6})),
    ({"nvidia.com/gpu": "2", "nvidia.com/gpu.shared": "2"}, ":replicas=3", (
        {"nvidia.com/gpu.replicas": "3", "nvidia.com/gpu.sharing-strategy": "time-slicing"},
        {"nvidia.com/gpu.shared": 6})),
    ({"nvidia.com/gpu.shared": "2"}, ":replicas=2", ({"nvidia.com/gpu.replicas": "2",
                                                     "nvidia.com/gpu.sharing-strategy": "time-slicing"},
                                                    {"nvidia.com/gpu.shared": 4})),
    ({"nvidia.com/gpu.shared": "4"}, ":replicas=1", ({"nvidia.com/gpu.replicas": "1",
                                                     "nvidia.com/gpu.sharing-strategy": "none"},
                                                    {"nvidia.com/gpu": 4})),
])
def test_time_slicing(alloc: dict[str, str], what_if: str, expected: Any) -> None:
    nodes, problems = after(view(node("n", {}, alloc)), what_if)
    assert problems == []
    assert nodes["n"] == expected
    empty, problems = after(view(node("n", {"nvidia.com/mig.strategy": ""}, alloc)), what_if)
    assert problems == []  # an empty strategy label is no MIG
    assert empty["n"] == ({"nvidia.com/mig.strategy": "", **expected[0]}, expected[1])


def test_placement_labels_select_and_stay_and_removed_nodes_are_gone() -> None:
    cluster = view(node("t", T4, {"nvidia.com/gpu": "1"}), node("a", A100, {"nvidia.com/gpu": "2"}))
    applied = apply_what_ifs(cluster, [parse_what_if("pool=a:remove", KB), parse_what_if("pool=a:driver=550.54.15", KB),
                                       parse_what_if("pool=t4:driver=550.54.15", KB)], KB)
    assert applied.matched == {"pool=a:remove": 1, "pool=a:driver=550.54.15": 0, "pool=t4:driver=550.54.15": 1}
    assert [(d.path, d.message) for d in applied.problems] == [
        ("--what-if pool=a:driver=550.54.15", "the selector 'pool=a' matches no node")]
    assert applied.cluster.node_count == 1
    assert applied.cluster.classes[0].members[0].label("pool") == "t4"


def test_the_views_beside_the_nodes_are_carried_and_dra_gets_a_note() -> None:
    cluster = view(node("t", T4, {"nvidia.com/gpu": "1"}))
    cluster.admission_plugins = frozenset({"ExtendedResourceToleration"})
    cluster.unknown_keys = frozenset({"zone"})
    cluster.device_class_origins = {"c": ({}, "f.yaml", 1)}
    applied = apply_what_ifs(cluster, [parse_what_if(":driver=550.54.15", KB)], KB)
    assert (applied.cluster.admission_plugins, applied.cluster.unknown_keys, applied.cluster.device_class_origins,
            applied.cluster.dra, applied.problems) == (
        frozenset({"ExtendedResourceToleration"}), frozenset({"zone"}), {"c": ({}, "f.yaml", 1)}, None, [])
    assert applied.cluster.device_class_origins is not cluster.device_class_origins
    dra: Any = object()
    cluster.dra = dra
    noted = apply_what_ifs(cluster, [parse_what_if(":remove", KB), parse_what_if("x:driver=550.54.15", KB)], KB)
    assert noted.cluster.dra is dra
    assert [(d.path, d.message, d.severity.value, d.kind) for d in noted.problems] == [
        ("--what-if x:driver=550.54.15", "the selector 'x' matches no node", "error", "nodes"),
        ("--what-if", "the DRA ResourceSlices of the changed nodes are read as they are (a what-if changes node labels "
                      "and allocatable only)", "info", "note")]
    assert apply_what_ifs(cluster, [parse_what_if(":remove", KB)], KB).problems == []


def test_a_recording_change_keeps_what_each_application_found() -> None:
    cluster = view(node("t", T4, {"nvidia.com/gpu": "1"}))
    change = RecordingChange([parse_what_if("pool=t4:driver=390", KB), parse_what_if("pool=x:remove", KB)], KB)
    assert change.what_ifs[0].text == "pool=t4:driver=390" and change.kb is KB
    first = change(cluster)
    assert first.node_count == 1
    change(cluster)
    assert change.matched == {"pool=t4:driver=390": 1, "pool=x:remove": 0}
    assert [d.message for d in change.problems] == [
        "the driver-branches table does not say which CUDA driver 390 supports: the nodes' CUDA is unknown",
        "the selector 'pool=x' matches no node"] * 2


# ------------------------------------------------------------------------------------------------ the difference

def ref(name: str, kind: str = "Job", namespace: str | None = "ns") -> ObjectRef:
    return ObjectRef("batch/v1", kind, namespace, name)


def test_failing_groups_rules_per_workload() -> None:
    assert failing([(ref("a"), "r1"), (ref("a"), "r2"), (ref("a"), "r1"), (ObjectRef(None, None, None, None), "r")]) \
        == {("Job", "ns", "a"): frozenset({"r1", "r2"}), ("", "", ""): frozenset({"r"})}


def test_the_difference_of_two_runs() -> None:
    a, b, c, d, e = (("Job", "ns", n) for n in "abcde")
    diff = diff_results({a: frozenset({"x"}), b: frozenset({"x", "y"}), c: frozenset({"x"}), e: frozenset()},
                        {a: frozenset({"x", "z"}), b: frozenset({"y"}), d: frozenset({"w", "v"}), e: frozenset()})
    assert diff == WhatIfDiff(newly_broken=(Entry(a, ("z",)), Entry(d, ("v", "w"))), newly_fixed=(Entry(c, ("x",)),),
                              still_failing=(Entry(b, ("y",)),))
    assert diff.changes() == {a: "newly-broken", d: "newly-broken", c: "newly-fixed", b: "still-failing"}
    assert Entry(("Pod", "", "p"), ("r",)).to_json() == {"object": {"kind": "Pod", "namespace": None, "name": "p"},
                                                         "rules": ["r"]}


def test_a_workload_in_two_lists_is_reported_by_the_strongest_word() -> None:
    w = ("Job", "ns", "w")
    diff = WhatIfDiff((Entry(w, ("a",)),), (Entry(w, ("b",)),), (Entry(w, ("c",)),))
    assert diff.changes() == {w: "newly-broken"}
    assert WhatIfDiff((), (Entry(w, ("b",)),), (Entry(w, ("c",)),)).changes() == {w: "newly-fixed"}


# ------------------------------------------------------------------------------------------------ lowest driver

def test_branch_drivers_are_the_newest_bundled_release_of_each_branch_oldest_first() -> None:
    assert [v.text for v in branch_drivers(KB)] == ["440.33", "470.42.01", "525.60.13", "550.54.15"]


def test_of_two_equal_releases_of_a_branch_the_older_toolkits_is_kept() -> None:
    tables = {**TABLES, "cuda-toolkits": [{"version": "12.4.1", "toolkitDriver": "550.54.0"},
                                          {"version": "12.4.0", "toolkitDriver": "550.54"}]}
    assert [v.text for v in branch_drivers(KnowledgeBase.from_tables(tables))] == ["550.54"]


def test_lowest_driver() -> None:
    v = [parse_driver_version(t) for t in ("470.42.01", "525.60.13", "550.54.15")]
    a, b, c = ("Job", "ns", "a"), ("Job", "ns", "b"), ("Job", "ns", "c")
    assert lowest_driver([]) == lowest_driver(()) == type(lowest_driver([]))(None, (), ())
    found = lowest_driver([(v[0], {a: frozenset({"old"}), c: frozenset({"x", "y"})}),
                           (v[1], {c: frozenset({"x", "y"})}),
                           (v[2], {b: frozenset({"new"}), c: frozenset({"x"})})])
    # a needs v1; c needs v2 (it fails y below it, not on the newest); b fails only on the newest: needs nothing
    assert (found.driver, found.needs, found.still_failing) == (v[2], ((a, v[1]), (c, v[2])),
                                                                (Entry(b, ("new",)), Entry(c, ("x",))))
    same = lowest_driver([(v[0], {a: frozenset({"r"})}), (v[1], {a: frozenset({"r"})})])
    assert (same.driver, same.needs, same.still_failing) == (v[0], (), (Entry(a, ("r",)),))
    one = lowest_driver([(v[1], {a: frozenset()})])
    assert (one.driver, one.needs, one.still_failing) == (v[1], (), ())
