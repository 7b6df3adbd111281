"""What-if (issue #22): label selectors, SELECTOR:CHANGE applied to a cluster view, the difference before/after,
the lowest driver branch of a pool, and ``lint --what-if`` / ``versions lowest-driver`` through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compatcheck.cli.entry import main
from compatcheck.core.cluster import build_cluster
from compatcheck.core.model import ObjectRef
from compatcheck.core.selectors import SelectorError, parse_selector
from compatcheck.core.versions import parse_driver_version
from compatcheck.core.whatif import (
    Entry,
    WhatIfError,
    apply_what_ifs,
    branch_drivers,
    diff_results,
    failing,
    lowest_driver,
    parse_what_if,
)
from compatcheck.io.loader import Loaded, load_nodes

DATA = Path(__file__).parent / "data" / "audit"
NODES = str(DATA / "nodes.yaml")
WORKLOADS = str(DATA / "workloads.yaml")


@pytest.mark.parametrize(("selector", "labels", "matches"), [
    ("pool=t4", {"pool": "t4"}, True),
    ("pool==t4", {"pool": "t4"}, True),
    ("pool=t4", {"pool": "a100"}, False),
    ("pool!=t4", {}, True),  # != matches a node without the key, as Kubernetes does
    ("pool!=t4", {"pool": "t4"}, False),
    ("pool in (t4, l4)", {"pool": "l4"}, True),
    ("pool notin (t4,l4)", {"pool": "l4"}, False),
    ("pool notin (t4,l4)", {}, True),
    ("pool", {"pool": ""}, True),
    ("!pool", {"pool": "x"}, False),
    ("pool=t4,nvidia.com/gpu.product=Tesla-T4", {"pool": "t4", "nvidia.com/gpu.product": "Tesla-T4"}, True),
    ("pool=t4,nvidia.com/gpu.product=Tesla-T4", {"pool": "t4", "nvidia.com/gpu.product": "Tesla-P4"}, False),
    ("", {"anything": "x"}, True),
])
def test_label_selectors_match_as_kubernetes_reads_them(selector: str, labels: dict[str, str],
                                                        matches: bool) -> None:
    assert parse_selector(selector).matches(labels) is matches


@pytest.mark.parametrize(("selector", "message"), [
    ("pool=t4,", "selector 'pool=t4,': an empty requirement (two commas, or one at an end)"),
    ("pool in (a,b", "selector 'pool in (a,b': '(' without ')'"),
    ("po ol=x", "selector 'po ol=x': 'po ol' is not a label key"),
    ("pool=a b", "selector 'pool=a b': 'a b' is not a label value"),
    ("pool in ()", "selector 'pool in ()': in () needs at least one value"),
])
def test_bad_selectors_say_which_part(selector: str, message: str) -> None:
    with pytest.raises(SelectorError) as exc:
        parse_selector(selector)
    assert str(exc.value) == message


@pytest.mark.parametrize(("text", "message"), [
    ("pool=t4", "--what-if 'pool=t4': expected SELECTOR:CHANGE, e.g. pool=t4:driver=580.65.06"),
    ("pool=t4:drivers=580", "--what-if 'pool=t4:drivers=580': unknown change 'drivers' (expected one of driver, "
                            "product, mig.strategy, mig.single, mig.mixed, replicas, remove)"),
    ("pool=t4:driver=latest", "--what-if 'pool=t4:driver=latest': driver version 'latest' is not a version number "
                              "(expected digits and dots, e.g. 12.4)"),
    ("pool=t4:driver=", "--what-if 'pool=t4:driver=': driver needs a value (driver=...)"),
    ("pool=t4:product=Fancy-GPU-9000", "--what-if 'pool=t4:product=Fancy-GPU-9000': GPU 'Fancy-GPU-9000' is not "
                                       "in the gpu-products table, so its compute capability is unknown (add a row "
                                       "with --rules-dir)"),
    ("pool=t4:mig.strategy=mixed", "--what-if 'pool=t4:mig.strategy=mixed': mig.strategy takes none; turn MIG on "
                                   "with mig.single=NxPROFILE or mig.mixed=NxPROFILE,..."),
    ("pool=t4:mig.single=7x1g.5gb,1x3g.20gb", "--what-if 'pool=t4:mig.single=7x1g.5gb,1x3g.20gb': the single "
                                              "strategy gives one profile per GPU; use mig.mixed for several"),
    ("pool=t4:mig.mixed=seven", "--what-if 'pool=t4:mig.mixed=seven': 'seven' is not COUNTxPROFILE (e.g. 7x1g.10gb)"),
    ("pool=t4:replicas=0", "--what-if 'pool=t4:replicas=0': replicas must be a whole number from 1 to 1024"),
    ("pool=t4:remove=yes", "--what-if 'pool=t4:remove=yes': remove takes no value"),
    ("pool=(t4:remove", "--what-if 'pool=(t4:remove': selector 'pool=(t4': '(' without ')'"),
])
def test_bad_what_ifs_say_why(loaded: Loaded, text: str, message: str) -> None:
    with pytest.raises(WhatIfError) as exc:
        parse_what_if(text, loaded.kb)
    assert str(exc.value) == message


def _cluster(loaded: Loaded):  # type: ignore[no-untyped-def]
    cluster, problems = load_nodes(NODES, loaded.kb, 1 << 20)
    assert cluster is not None and problems == []
    return cluster


def _pools(cluster) -> dict[str, object]:  # type: ignore[no-untyped-def]
    return {rec.name: cls for cls in cluster.classes for rec in cls.members}


def test_a_driver_change_writes_the_driver_and_the_cuda_its_branch_supports(loaded: Loaded) -> None:
    applied = apply_what_ifs(_cluster(loaded), [parse_what_if("pool=t4:driver=580.65.06", loaded.kb)], loaded.kb)
    assert applied.problems == [] and applied.matched == {"pool=t4:driver=580.65.06": 2}
    by_node = _pools(applied.cluster)
    t4 = by_node["t4-0"]
    assert by_node["t4-1"] is t4  # still one class
    assert str(t4.facts.driver) == "580.65.06" and str(t4.facts.driver_cuda) == "13.0"
    assert t4.labels["nvidia.com/cuda.driver.rev"] == "06" and t4.labels["nvidia.com/cuda.runtime.major"] == "13"
    assert str(by_node["a100-0"].facts.driver) == "550.54.15"  # not matched: unchanged
    assert t4.members[0].label("pool") == "t4"  # placement labels kept


def test_a_driver_the_tables_cannot_place_leaves_cuda_unknown(loaded: Loaded) -> None:
    applied = apply_what_ifs(_cluster(loaded), [parse_what_if("pool=t4:driver=390.48", loaded.kb)], loaded.kb)
    t4 = _pools(applied.cluster)["t4-0"]
    assert str(t4.facts.driver) == "390.48" and t4.facts.driver_cuda is None
    assert [(d.path, d.message, d.severity.value) for d in applied.problems] == [
        ("--what-if pool=t4:driver=390.48", "the driver-branches table does not say which CUDA driver 390.48 "
                                            "supports: the nodes' CUDA is unknown", "warning")]


def test_a_product_swap_takes_the_compute_capability_from_the_table(loaded: Loaded) -> None:
    applied = apply_what_ifs(_cluster(loaded), [parse_what_if("nvidia.com/gpu.product=Tesla-T4:"
                                                              "product=NVIDIA-H100-80GB-HBM3", loaded.kb)], loaded.kb)
    facts = _pools(applied.cluster)["t4-0"].facts
    assert facts.product == "NVIDIA-H100-80GB-HBM3" and str(facts.compute_capability) == "9.0"


def test_mig_layouts_time_slicing_and_removal(loaded: Loaded) -> None:
    kb = loaded.kb
    mixed = _pools(apply_what_ifs(_cluster(loaded), [parse_what_if("pool=a100:mig.mixed=3x1g.5gb,2x2g.10gb", kb)],
                                  kb).cluster)["a100-0"].facts
    assert (mixed.mig_strategy, mixed.gpu_resources) == ("mixed", (("nvidia.com/mig-1g.5gb", 24),
                                                                   ("nvidia.com/mig-2g.10gb", 16)))
    single = apply_what_ifs(_cluster(loaded), [parse_what_if("pool=a100:mig.single=7x1g.5gb", kb)], kb).cluster
    cls = _pools(single)["a100-0"]
    assert (cls.facts.mig_strategy, cls.facts.gpu_resources) == ("single", (("nvidia.com/gpu", 56),))
    assert cls.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
    back = apply_what_ifs(single, [parse_what_if("pool=a100:mig.strategy=none", kb)], kb).cluster
    assert _pools(back)["a100-0"].facts.gpu_resources == (("nvidia.com/gpu", 8),)
    sliced = _pools(apply_what_ifs(_cluster(loaded), [parse_what_if("pool=t4:replicas=4", kb)], kb).cluster)["t4-0"]
    assert (sliced.facts.sharing_strategy, sliced.facts.replicas, sliced.facts.gpu_resources) == (
        "time-slicing", 4, (("nvidia.com/gpu", 4),))
    gone = apply_what_ifs(_cluster(loaded), [parse_what_if("pool=a100:remove", kb)], kb).cluster
    assert sorted(_pools(gone)) == ["t4-0", "t4-1"] and gone.node_count == 2


def test_what_ifs_apply_in_order_and_a_selector_matching_nothing_is_an_error(loaded: Loaded) -> None:
    kb = loaded.kb
    applied = apply_what_ifs(_cluster(loaded), [parse_what_if("pool=t4:product=NVIDIA-L4", kb),
                                                parse_what_if("nvidia.com/gpu.product=NVIDIA-L4:driver=570.124.06",
                                                              kb),
                                                parse_what_if("pool=h100:remove", kb)], kb)
    assert applied.matched == {"pool=t4:product=NVIDIA-L4": 2,
                               "nvidia.com/gpu.product=NVIDIA-L4:driver=570.124.06": 2, "pool=h100:remove": 0}
    assert [(d.path, d.message) for d in applied.problems] == [
        ("--what-if pool=h100:remove", "the selector 'pool=h100' matches no node")]
    assert str(_pools(applied.cluster)["t4-0"].facts.driver_cuda) == "12.8"


def test_mig_profiles_are_checked_against_the_product(loaded: Loaded) -> None:
    applied = apply_what_ifs(_cluster(loaded), [parse_what_if("pool=a100:mig.mixed=1x1g.20gb", loaded.kb)],
                             loaded.kb)
    assert [d.message for d in applied.problems] == [
        "cannot apply to node a100-0: NVIDIA-A100-SXM4-40GB has no MIG profile 1g.20gb (the mig-profiles table)"]


def test_replicas_need_to_know_the_gpus_of_a_node(loaded: Loaded) -> None:
    node = {"metadata": {"name": "m", "labels": {"nvidia.com/mig.strategy": "single",
                                                 "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"}},
            "status": {"allocatable": {"nvidia.com/gpu": "7"}}}
    applied = apply_what_ifs(build_cluster([node], loaded.kb), [parse_what_if(":replicas=2", loaded.kb)], loaded.kb)
    assert [d.message for d in applied.problems] == [
        "cannot apply to node m: cannot tell how many GPUs it has (no nvidia.com/gpu.count label, and its "
        "allocatable is shared or MIG)"]


def _ref(kind: str, name: str) -> ObjectRef:
    return ObjectRef("v1", kind, "ns", name)


def test_the_difference_puts_each_workload_in_one_list() -> None:
    before = failing([(_ref("Job", "a"), "r1"), (_ref("Job", "b"), "r1"), (_ref("Job", "c"), "r1"),
                      (_ref("Job", "d"), "r1")])
    after = failing([(_ref("Job", "a"), "r2"), (_ref("Job", "c"), "r1"), (_ref("Job", "d"), "r1"),
                     (_ref("Job", "d"), "r3"), (_ref("Pod", "e"), "r4")])
    diff = diff_results(before, after)
    assert diff.to_json() == {
        "newlyBroken": [{"object": {"kind": "Job", "namespace": "ns", "name": "a"}, "rules": ["r2"]},
                        {"object": {"kind": "Job", "namespace": "ns", "name": "d"}, "rules": ["r3"]},
                        {"object": {"kind": "Pod", "namespace": "ns", "name": "e"}, "rules": ["r4"]}],
        "newlyFixed": [{"object": {"kind": "Job", "namespace": "ns", "name": "b"}, "rules": ["r1"]}],
        "stillFailing": [{"object": {"kind": "Job", "namespace": "ns", "name": "c"}, "rules": ["r1"]}]}


def test_lowest_driver_is_the_highest_need_of_any_workload(loaded: Loaded) -> None:
    d = [parse_driver_version(v) for v in ("525.60.13", "535.104.05", "550.54.15", "570.124.06")]
    a, b, c = ("Job", "ns", "a"), ("Job", "ns", "b"), ("Pod", "ns", "c")
    found = lowest_driver([
        (d[0], {a: frozenset({"too-old"}), b: frozenset({"too-old"}), c: frozenset({"arch"})}),
        (d[1], {a: frozenset({"too-old"}), c: frozenset({"arch"})}),
        (d[2], {c: frozenset({"arch"})}),
        (d[3], {b: frozenset({"skew"}), c: frozenset({"arch"})}),
    ])
    assert found.driver == d[2]
    assert found.needs == ((a, d[2]), (b, d[1]))
    assert found.still_failing == (Entry(c, ("arch",)),)
    drivers = [str(v) for v in branch_drivers(loaded.kb)]
    assert drivers[:2] == ["410.48", "418.39"] and "570.124.06" in drivers and "580.95.05" in drivers
    assert not any(v.startswith("565.") for v in drivers)  # no toolkit bundled R565: no release is known


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_lint_what_if_json_driver_upgrade(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = _main(capsys, "lint", "--nodes", NODES, WORKLOADS, "--what-if", "pool=t4:driver=580.65.06",
                            "--format", "json")
    assert code == 0  # at the default threshold (error) nothing newly breaks
    doc = json.loads(out)
    assert doc["whatIf"] == {
        "changes": [{"change": "pool=t4:driver=580.65.06", "nodes": 2}],
        "newlyBroken": [],
        "newlyFixed": [{"object": {"kind": "Job", "namespace": "ml", "name": "train-cu128"},
                        "rules": ["cuda-driver-too-old"]}],
        "stillFailing": []}
    code, out, _err = _main(capsys, "lint", "--nodes", NODES, WORKLOADS, "--what-if", "pool=t4:driver=580.65.06",
                            "--format", "json", "--fail-on", "warning")
    assert code == 1
    assert json.loads(out)["whatIf"]["newlyBroken"] == [
        {"object": {"kind": "Pod", "namespace": "research", "name": "legacy-cu117"},
         "rules": ["cuda-driver-major-skew"]}]
    assert [e["object"]["name"] for e in json.loads(out)["whatIf"]["newlyFixed"]] == ["serve-cu122", "train-cu128"]


def test_lint_what_if_text_gpu_swap_and_pool_removal(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = _main(capsys, "lint", "--nodes", NODES, WORKLOADS, "--what-if",
                            "pool=t4:product=NVIDIA-H100-80GB-HBM3", "--what-if", "pool=a100:remove")
    assert code == 1
    lines = out.splitlines()
    start = lines.index("what-if")
    assert lines[start:start + 10] == [
        "what-if",
        "  pool=t4:product=NVIDIA-H100-80GB-HBM3  (2 nodes)",
        "  pool=a100:remove  (1 node)",
        "newly broken (2)",
        "  Deployment ml/big-cu124: gpu-no-eligible-node",
        "  Pod research/legacy-cu117: gpu-arch-too-new-for-cuda",
        "newly fixed (0)",
        "still failing (1)",
        "  Job ml/train-cu128: cuda-driver-too-old",
        "1 files, 4 objects: 3 errors, 1 warnings, 0 info"]


@pytest.mark.parametrize(("args", "message"), [
    (["--what-if", "pool=t4:driver=580.65.06"],
     "compatcheck: error: --what-if changes the cluster view: give it with --nodes FILE (or nodes: in the config)"),
    (["--nodes", NODES, "--what-if", "pool=t4:turbo=on"],
     "compatcheck: error: --what-if 'pool=t4:turbo=on': unknown change 'turbo' (expected one of driver, product, "
     "mig.strategy, mig.single, mig.mixed, replicas, remove)"),
    (["--nodes", NODES, "--what-if", "pool=v100:remove"],
     "--what-if pool=v100:remove: error: the selector 'pool=v100' matches no node"),
])
def test_lint_what_if_errors_exit_2_with_one_line(capsys: pytest.CaptureFixture[str], args: list[str],
                                                  message: str) -> None:
    code, out, err = _main(capsys, "lint", WORKLOADS, *args)
    assert code == 2
    assert message in (err + out).splitlines()


def test_versions_lowest_driver(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = _main(capsys, "versions", "lowest-driver", "--nodes", NODES, "-l", "pool=t4", WORKLOADS)
    assert code == 0
    assert out.splitlines() == [
        "lowest driver branch for nodes matching 'pool=t4' (2 nodes): R560 (tried 560.35.05, CUDA 12.6)",
        "  Job ml/train-cu128 needs R560",
        "  Deployment ml/serve-cu122 needs R535",
        "  Pod research/legacy-cu117 needs R515"]
    code, out, _err = _main(capsys, "versions", "lowest-driver", "--nodes", NODES, "-l", "pool=t4", WORKLOADS,
                            "--fail-on", "warning", "--format", "json")
    doc = json.loads(out)
    assert (code, doc["lowestBranch"], doc["driver"], doc["cuda"], doc["nodes"]) == (0, 570, "570.124.06", "12.8", 2)
    # The T4 pool keeps R525: no driver of the A100 pool fixes the T4 job, which still fails on the lowest branch.
    code, out, _err = _main(capsys, "versions", "lowest-driver", "--nodes", NODES, "-l", "pool=a100", WORKLOADS,
                            "--format", "json")
    assert (code, json.loads(out)["lowestBranch"], json.loads(out)["stillFailing"]) == (1, 550, [
        {"object": {"kind": "Job", "namespace": "ml", "name": "train-cu128"}, "rules": ["cuda-driver-too-old"]}])


def test_versions_pair_still_works(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _err = _main(capsys, "versions", "--driver", "535.104.05", "--runtime", "12.2")
    assert (code, out.splitlines()[0]) == (0, "driver 535.104.05 (CUDA 12.2) + runtime 12.2: compatible")
    code, _out, err = _main(capsys, "versions")
    assert (code, err.strip()) == (2, "compatcheck: error: give --driver and --runtime (or a helper: compatcheck "
                                      "versions lowest-driver --help)")
