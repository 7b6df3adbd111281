"""checks/driver.py: the driver/runtime checks on small clusters (too old, behind the runtime, major skew) with their
affinity fixes, the driver a pod pins by itself, and unknown runtimes, each finding exact."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core.knowledge import KnowledgeBase
from compatcheck.core.model import Applicability, Fix, PatchOp, Severity
from compatcheck.core.policy import DriverPolicy
from tests.core.helpers import container, found, messages, node, pod, rule, run
from tests.core.tables import TABLES

FULL = "nvidia.com/cuda.driver-version.full"
GFD_MAJOR, GFD_MINOR = "nvidia.com/cuda.runtime-version.major", "nvidia.com/cuda.runtime-version.minor"
IMAGE = "/spec/containers/0/image"
CUDA_124 = "image nvidia/cuda:12.4.1-base"
FORWARD = "; forward compatibility (cuda-compat libraries in the image) can bridge this on datacenter GPUs only"
HOW_FORWARD = ('declare it in the config (driverPolicy.forwardCompatibility: true) or per node pool (label '
               'compatcheck.io/forward-compatibility: "true")')
HOW_MVC = ('declare it in the config (driverPolicy.minorVersionCompatibility: true) or per node pool (label '
           'compatcheck.io/minor-version-compatibility: "true")')
# The default policy: forward compatibility is not declared, so the too-old finding says how to.
UNDECLARED = ("; NVIDIA forward compatibility (cuda-compat libraries in the image) could bridge this on data-center "
              f"GPUs if the platform enables it ({HOW_FORWARD})")
MVC_HINT = ("; NVIDIA minor-version compatibility would run it (no PTX JIT, no newer-driver APIs) if the platform "
            f"accepts it: {HOW_MVC}")


def driver_node(name: str, driver: str | None = None, product: str | None = "Tesla-T4", **labels: str) -> Any:
    extra = dict(labels)
    if driver:
        extra[FULL] = driver
    if product:
        extra["nvidia.com/gpu.product"] = product
    return node(name, extra, {"nvidia.com/gpu": 8})


def affinity_fix(runtime: str, terms: list[list[dict[str, Any]]], keys: str = f"{GFD_MAJOR}/minor", *,
                 path: str = "/spec/affinity", wrap: bool = True) -> Fix:
    value: Any = [{"matchExpressions": t} for t in terms]
    if wrap:
        value = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": value}}}
    return Fix(f"require nodes whose driver supports CUDA {runtime} ({keys})", Applicability.UNSAFE,
               (PatchOp("add", path, value),))


def gt(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "operator": "Gt", "values": [value]}


def is_(key: str, value: str) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": [value]}


FIX_124 = affinity_fix("12.4", [[gt(GFD_MAJOR, "12")], [is_(GFD_MAJOR, "12"), gt(GFD_MINOR, "3")]])


@pytest.mark.parametrize(("image", "nodes", "message"), [
    ("nvidia/cuda:12.4.1-base", [driver_node("old", "470.82.01")],
     f"image CUDA 12.4 ({CUDA_124}) needs a driver from branch >= 550; "
     f"eligible nodes run 470.82.01 (CUDA 11.4) on old{UNDECLARED}"),
    ("nvidia/cuda:12.4.1-base", [driver_node("old", "470.82.01", "GeForce-RTX"),
                                 driver_node("new", "550.54.15", "GeForce-RTX")],
     f"image CUDA 12.4 ({CUDA_124}) needs a driver from branch >= 550; "
     "eligible nodes run 470.82.01 (CUDA 11.4) on old"),  # no datacenter GPU: no forward compatibility
    ("nvidia/cuda:12.4.1-base", [driver_node("p", None, "Mystery", **{"cuda-major-version": "11",
                                                                     "cuda-minor-version": "2"})],
     f"image CUDA 12.4 ({CUDA_124}) needs a driver from branch >= 550; "
     f"eligible nodes run a driver for CUDA 11.2 on p{UNDECLARED}"),
    ("nvidia/cuda:11.4.0-base", [driver_node("old", "450.51.06", **{GFD_MAJOR: "11", GFD_MINOR: "0"})],
     "image CUDA 11.4 (image nvidia/cuda:11.4.0-base) needs a driver from branch >= 470; eligible nodes run "
     f"450.51.06 (CUDA 11.0) on old{UNDECLARED}"),
    ("nvidia/cuda:12.6.0-base", [driver_node("old", "470.82.01")],
     "image CUDA 12.6 (image nvidia/cuda:12.6.0-base) needs a driver for CUDA >= 12.6; eligible nodes run 470.82.01 "
     f"(CUDA 11.4) on old{UNDECLARED}"),
    ("nvidia/cuda:10.2.0-base", [driver_node("old", "418.39", **{GFD_MAJOR: "10", GFD_MINOR: "1"})],
     "image CUDA 10.2 (image nvidia/cuda:10.2.0-base) needs a driver from branch >= 440; eligible nodes run 418.39 "
     f"(CUDA 10.1) on old{UNDECLARED}"),
])
def test_cuda_driver_too_old(image: str, nodes: list[Any], message: str) -> None:
    ((pointer, c, got, fix),) = found("cuda-driver-too-old", pod(container(image=image)), nodes=nodes)
    assert (pointer, c, got) == (IMAGE, "c", message)
    assert fix is not None and fix.applicability is Applicability.UNSAFE


def test_cuda_driver_too_old_names_at_most_three_node_kinds() -> None:
    nodes = [driver_node(f"n{i}-{j}", f"47{i}.1") for i in range(5) for j in range(3)]
    (message,) = messages("cuda-driver-too-old", pod(container()), nodes=nodes)
    assert message.split("eligible nodes run ")[1] == (
        "470.1 (CUDA 11.4) on n0-0, n0-1 and 1 more; 471.1 (CUDA 11.4) on n1-0, n1-1 and 1 more; 472.1 (CUDA 11.4) on "
        f"n2-0, n2-1 and 1 more (+2 more node kinds){UNDECLARED}")
    three = [driver_node(f"n{i}", f"47{i}.1") for i in range(3)]
    (message,) = messages("cuda-driver-too-old", pod(container()), nodes=three)
    assert message.endswith(f"472.1 (CUDA 11.4) on n2{UNDECLARED}")


def test_nodes_without_a_known_driver_are_left_out() -> None:
    assert found("cuda-driver-too-old", pod(container()), nodes=[driver_node("x", None)]) == []
    assert found("cuda-driver-too-old", pod(container(image="busybox")), nodes=[driver_node("o", "470.82.01")]) == []
    assert found("cuda-driver-too-old", pod(container()), nodes=[driver_node("new", "550.54.15")]) == []


@pytest.mark.parametrize(("spec", "nodes", "fix"), [
    ({}, [driver_node("old", "470.82.01")], FIX_124),
    ({}, [driver_node("old", None, **{"cuda-major-version": "11", "cuda-minor-version": "4"})],
     affinity_fix("12.4", [[gt("cuda-major-version", "12")], [is_("cuda-major-version", "12"),
                                                              gt("cuda-minor-version", "3")]],
                  "cuda-major-version/cuda-minor-version")),
    ({}, [driver_node("old", None, **{"cuda-major-version": "11", "cuda-minor-version": "4"}),
          driver_node("gfd", "470.82.01", **{GFD_MAJOR: "11", GFD_MINOR: "4"})], FIX_124),  # GFD labels win
    ({"nodeSelector": {"pool": "x"}, "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [is_("pool", "x")], "matchFields": []},
                              {"matchExpressions": [is_("zone", "z")]}]}}}},
     [driver_node("old", "470.82.01", pool="x", zone="z")],
     Fix("require nodes whose driver supports CUDA 12.4 (nvidia.com/cuda.runtime-version.major/minor)",
         Applicability.UNSAFE, (PatchOp("replace", "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnored"
                                                   "DuringExecution/nodeSelectorTerms", [
             {"matchExpressions": [is_("pool", "x"), gt(GFD_MAJOR, "12")], "matchFields": []},
             {"matchExpressions": [is_("pool", "x"), is_(GFD_MAJOR, "12"), gt(GFD_MINOR, "3")], "matchFields": []},
             {"matchExpressions": [is_("zone", "z"), gt(GFD_MAJOR, "12")]},
             {"matchExpressions": [is_("zone", "z"), is_(GFD_MAJOR, "12"), gt(GFD_MINOR, "3")]}]),))),
])
def test_the_affinity_fix(spec: dict[str, Any], nodes: list[Any], fix: Fix) -> None:
    ((_p, _c, _m, got),) = found("cuda-driver-too-old", pod(container(), **spec), nodes=nodes)
    assert got == fix


def test_the_affinity_fix_for_a_dot_zero_runtime() -> None:
    ((_p, _c, _m, got),) = found("cuda-driver-too-old", pod(container(image="nvidia/cuda:12.0.1-base")),
                                 nodes=[driver_node("old", "470.82.01")])
    assert got == affinity_fix("12.0", [[gt(GFD_MAJOR, "11")]])


def test_cuda_driver_behind_runtime() -> None:
    nodes = [driver_node("mvc", "525.60.13"), driver_node("new", "550.54.15"),
             driver_node("label", "550.54.15", **{GFD_MAJOR: "12", GFD_MINOR: "2"})]  # the label says more
    assert found("cuda-driver-behind-runtime", pod(container()), nodes=nodes) == [(
        IMAGE, "c", f"image CUDA 12.4 ({CUDA_124}) is newer than the driver's CUDA on 525.60.13 (CUDA 12.0) on mvc; "
                    "550.54.15 (CUDA 12.2) on label, and the platform requires a driver at least as new as the "
                    f"runtime; use a driver from branch >= 550{MVC_HINT}", FIX_124)]
    assert found("cuda-driver-behind-runtime", pod(container()), nodes=[driver_node("old", "470.82.01")]) == []


@pytest.mark.parametrize(("image", "params", "expected"), [
    ("nvidia/cuda:11.4.0-base", {}, ["driver CUDA 13.0 is more than 1 major version ahead of image CUDA 11.4 on a "
                                     "driver for CUDA 13.0 on n13; such a skew is outside what NVIDIA tests and may be "
                                     "unstable"]),
    ("nvidia/cuda:11.4.0-base", {"maxMajorSkew": 2}, []),
    ("nvidia/cuda:10.2.0-base", {"maxMajorSkew": 2}, [
        "driver CUDA 13.0 is more than 2 major version ahead of image CUDA 10.2 on a driver for CUDA 13.0 on n13; such "
        "a skew is outside what NVIDIA tests and may be unstable"]),
    ("nvidia/cuda:12.4.1-base", {}, []),
])
def test_cuda_driver_major_skew(image: str, params: dict[str, Any], expected: list[str]) -> None:
    nodes = [driver_node("n13", None, **{GFD_MAJOR: "13", GFD_MINOR: "0"}), driver_node("n12", None, **{
        GFD_MAJOR: "12", GFD_MINOR: "0"}), driver_node("unknown", None)]
    assert found("cuda-driver-major-skew", pod(container(image=image)), params, nodes=nodes) == [
        (IMAGE, "c", m, None) for m in expected]


def test_major_skew_default() -> None:
    assert rule("cuda-driver-major-skew").prepared.max_major_skew == 1
    assert rule("cuda-driver-major-skew", {"maxMajorSkew": 0}).prepared.max_major_skew == 0


def test_driver_checks_look_only_at_eligible_gpu_nodes() -> None:
    nodes = [driver_node("old", "470.82.01", pool="a"), driver_node("new", "550.54.15", pool="b"),
             node("cpu", {FULL: "470.82.01", "pool": "b"}, {})]
    assert messages("cuda-driver-too-old", pod(container(), nodeSelector={"pool": "b"}), nodes=nodes) == []
    assert len(messages("cuda-driver-too-old", pod(container(), nodeSelector={"pool": "a"}), nodes=nodes)) == 1


# ---------------------------------------------------------------------------------------- the pinned driver


def pin(image: str = "nvidia/cuda:12.4.1-base", params: dict[str, Any] | None = None, kb: KnowledgeBase | None = None,
        **spec: Any) -> list[Any]:
    return found("cuda-affinity-pin", pod(container(image=image), **spec), params, **({"kb": kb} if kb else {}))


def terms(*terms_: list[dict[str, Any]]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": t} for t in terms_]}}}


TOO_OLD_11 = (f"the pod's node selection admits only drivers for CUDA 11.4, too old for image CUDA 12.4 ({CUDA_124}); "
              "it needs a driver from branch >= 550")
TOO_OLD_12_0 = (f"the pod's node selection admits only drivers for CUDA 12.0, too old for image CUDA 12.4 "
                f"({CUDA_124}); it needs a driver from branch >= 550")


@pytest.mark.parametrize(("spec", "params", "expected"), [
    ({"nodeSelector": {"cuda-major-version": "11"}}, None, [("/spec/nodeSelector", TOO_OLD_11)]),
    ({"nodeSelector": {"nvidia.com/cuda.driver-version.major": "470", "pool": "x"}}, None,
     [("/spec/nodeSelector", TOO_OLD_11)]),
    ({"affinity": terms([{"key": GFD_MAJOR, "operator": "In", "values": ["11"]}])}, None,
     [("/spec/affinity/nodeAffinity", TOO_OLD_11)]),
    ({"nodeSelector": {"pool": "x"}, "affinity": terms([{"key": "nvidia.com/cuda.driver.major", "operator": "In",
                                                          "values": ["470", "440"]}])}, None,
     [("/spec/affinity/nodeAffinity", f"the pod's node selection admits only drivers for CUDA 10.2, 11.4, too old for "
                                      f"image CUDA 12.4 ({CUDA_124}); it needs a driver from branch >= 550")]),
    ({"nodeSelector": {"cuda-major-version": "12"}}, None, []),  # 550 is among them
    # minor-version compatible: not accepted unless the rule (or the driver policy, below) accepts it
    ({"nodeSelector": {"cuda-major-version": "12", "cuda-minor-version": "0"}}, None,
     [("/spec/nodeSelector", TOO_OLD_12_0)]),
    ({"nodeSelector": {"cuda-major-version": "12", "cuda-minor-version": "0"}},
     {"accept": ["compatible", "minor-version-compatibility"]}, []),
    ({"nodeSelector": {"cuda-major-version": "9"}}, None, []),  # no known driver is admitted
    ({"nodeSelector": {"pool": "x"}}, None, []),  # no driver pinned
    ({"affinity": terms([{"key": "cuda-major-version", "operator": "In", "values": ["11"]}], [
        {"key": "pool", "operator": "In", "values": ["x"]}])}, None, []),  # one OR-branch pins no driver
    ({"affinity": terms()}, None, []),
    ({}, None, []),
])
def test_cuda_affinity_pin(spec: dict[str, Any], params: dict[str, Any] | None, expected: list[Any]) -> None:
    assert pin(params=params, **spec) == [(p, "c", m, None) for p, m in expected]


def test_an_unpinned_pod_is_never_judged_against_every_driver() -> None:
    assert pin("nvidia/cuda:13.0.0-base") == []  # no branch of the table runs CUDA 13
    assert pin("nvidia/cuda:13.0.0-base", affinity=terms([{"key": "cuda-major-version", "operator": "Gt",
                                                             "values": ["1"]}]))[0][2].startswith(
        "the pod's node selection admits only drivers for CUDA 10.2, 11.4, 12.0, 12.4, too old for image CUDA 13.0")


def test_the_affinity_pin_names_at_most_six_cudas_in_numeric_order() -> None:
    branches = [(384, "9.0"), (390, "9.1"), (396, "9.2"), (410, "10.0"), (418, "10.1"), (440, "10.2"), (450, "11.0")]
    kb = KnowledgeBase.from_tables({"driver-branches": [{"branch": b, "maxCuda": c} for b, c in branches],
                                    "image-profiles": [{"name": "cuda", "pattern": r"^nvidia/cuda:(?P<cuda>[^-]+)-",
                                                        "source": "s"}]})
    wide = terms([{"key": "cuda-major-version", "operator": "Lt", "values": ["12"]}])
    (finding,) = pin(kb=kb, affinity=wide)
    assert finding[2] == ("the pod's node selection admits only drivers for CUDA 9.0, 9.1, 9.2, 10.0, 10.1, 10.2 ..., "
                          f"too old for image CUDA 12.4 ({CUDA_124}); it needs a driver for CUDA >= 12.4")
    six = terms([{"key": "cuda-major-version", "operator": "Lt", "values": ["11"]}])
    assert pin(kb=kb, affinity=six)[0][2].startswith(
        "the pod's node selection admits only drivers for CUDA 9.0, 9.1, 9.2, 10.0, 10.1, 10.2, too old")


def test_the_affinity_pin_checks_each_gpu_container() -> None:
    obj = pod(container("old", image="nvidia/cuda:11.2.0-base"), container("new"), container("x", image="busybox"),
              nodeSelector={"cuda-major-version": "11"})
    assert [(c, m.split(";")[0]) for _p, c, m, _f in found("cuda-affinity-pin", obj)] == [
        ("new", "the pod's node selection admits only drivers for CUDA 11.4, too old for image CUDA 12.4 "
                f"({CUDA_124})")]


def test_affinity_pin_params() -> None:
    assert rule("cuda-affinity-pin").prepared.accept == {"compatible"}
    assert rule("cuda-affinity-pin", {"accept": ["compatible"]}).prepared.accept == {"compatible"}


# ---------------------------------------------------------------------------------------- unknown runtimes

HOW = ('declare it with the annotation {a}.c: "12.4" (or without .c for every container), set env CUDA_VERSION, or '
       "add an image pattern in your rules data directory")


@pytest.mark.parametrize(("c", "params", "expected"), [
    (container(image="busybox"), None, [(IMAGE, "CUDA runtime of container 'c' is unknown (no image pattern "
                                                 "recognises 'busybox'); " +
                                         HOW.format(a="compatcheck.io/cuda-runtime"))]),
    (container(image=None), {"annotation": "example.com/cuda"},
     [(IMAGE, "CUDA runtime of container 'c' is unknown (the container has no image); " +
       HOW.format(a="example.com/cuda"))]),
    (container(), None, []),
    (container(image="busybox", gpus=0), None, []),
])
def test_cuda_runtime_known(c: dict[str, Any], params: dict[str, Any] | None, expected: list[Any]) -> None:
    assert found("cuda-runtime-known", pod(c), params) == [(p, "c", m, None) for p, m in expected]


def test_an_unreadable_declared_runtime_is_an_input_problem() -> None:
    from tests.core.helpers import run

    obj = pod(container("a", image="busybox", env={"CUDA_VERSION": "x"}), container("b", image="busybox"),
              annotations={"compatcheck.io/cuda-runtime.b": "twelve"})
    result = run("cuda-runtime-known", obj)
    assert result.findings == []
    assert [(p.pointer, p.message, p.rule_id) for p in result.problems] == [
        ("/spec/containers/0/env/0/value", "env CUDA_VERSION: CUDA version 'x' is not a version number (expected "
                                           "digits and dots, e.g. 12.4)", "r"),
        ("/metadata/annotations/compatcheck.io~1cuda-runtime.b", "annotation compatcheck.io/cuda-runtime.b: CUDA "
         "version 'twelve' is not a version number (expected digits and dots, e.g. 12.4)", "r")]


def test_every_unknown_container_is_reported() -> None:
    obj = pod(container("a"), container("b", image="busybox"), container("d", image="x"))
    assert [c for _p, c, _m, _f in found("cuda-runtime-known", obj)] == ["b", "d"]


def test_the_affinity_fix_reads_the_major_labels() -> None:
    platform_major_only = driver_node("p", None, **{"cuda-major-version": "11"})
    ((_p, _c, _m, fix),) = found("cuda-driver-too-old", pod(container()), nodes=[platform_major_only])
    assert fix is not None and fix.description.endswith("(cuda-major-version/cuda-minor-version)")
    gfd_major_only = driver_node("g", None, **{GFD_MAJOR: "11"})
    platform = driver_node("q", None, **{"cuda-major-version": "11", "cuda-minor-version": "4"})
    ((_p, _c, _m, fix),) = found("cuda-driver-too-old", pod(container()), nodes=[platform, gfd_major_only])
    assert fix == FIX_124


def test_a_driver_older_than_the_table_is_too_old_whatever_comes_first() -> None:
    nodes = [driver_node("unknown", None), driver_node("old", "418.39")]
    assert messages("cuda-driver-too-old", pod(container()), nodes=nodes) == [
        f"image CUDA 12.4 ({CUDA_124}) needs a driver from branch >= 550; eligible nodes run 418.39 on old{UNDECLARED}"]


def test_expressions_that_are_not_mappings_are_input_problems() -> None:
    # (compatcheck.core.shapes: the API server refuses such a pod, and no rule reads it)
    obj = pod(container(image="nvidia/cuda:12.4.1-base"),
              affinity=terms(["junk", {"key": "cuda-major-version", "operator": "In", "values": ["11"]}]))
    result = run("cuda-affinity-pin", obj)
    assert [(p.pointer, p.message, p.kind) for p in result.problems] == [(
        "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/"
        "matchExpressions/0", "matchExpressions[0]: expected a mapping, found a string (the API server refuses the "
        "object; its pod spec was not checked)", "input")]
    assert result.findings == []


# ---------------------------------------------------------------------------------------- the driver policy
# docs/driver-policy.md's table, case by case: which rule each driver rule gives under each policy, and its words.
# ``compat/cuda`` carries cuda-compat libraries (CUDA 12.4.1) listing branches 470 and 525 for Tesla brands, and an
# NVIDIA_REQUIRE_CUDA of cuda>=12.4.1; ``nvidia/cuda`` (the small tables' profile) says neither.
POLICY_KB = {**TABLES, "forward-compat": [{"cuda": "12.4", "branches": [470, 525], "brands": ["tesla"],
                                           "source": "FC"}],
             "image-profiles": [{"name": "compat", "pattern": r"^compat/cuda:(?P<cuda>[^-]+)$", "compatLibs": True,
                                 "source": "C"}, *TABLES["image-profiles"]]}
DRIVER_RULES = ("cuda-driver-too-old", "cuda-driver-behind-runtime", "cuda-driver-forward-compat",
                "cuda-driver-minor-version-compat")
DEFAULT = DriverPolicy()
FWD = DriverPolicy(forward_compatibility=True)
MVC = DriverPolicy(minor_version_compatibility=True)
COMPAT = "compat/cuda:12.4.1"
C_ORIGIN = f"image {COMPAT}"
LISTED_470 = "the image's CUDA 12.4 cuda-compat libraries, which list driver branch 470"
LISTED_525 = "the image's CUDA 12.4 cuda-compat libraries, which list driver branch 525"


def driver_findings(image: str, nodes: list[Any], policy: DriverPolicy, *,
                    resources: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """(check, message) of every driver rule's findings."""
    kb = KnowledgeBase.from_tables(POLICY_KB)
    obj = pod(container(image=image, resources=resources))
    return [(check, m) for check in DRIVER_RULES for m in messages(check, obj, nodes=nodes, kb=kb, policy=policy)]


SAME_MAJOR = [driver_node("t4", "525.60.13")]  # CUDA 12.0: minor-version compatible with 12.4, branch listed
OLDER_MAJOR = [driver_node("t4", "470.82.01")]  # CUDA 11.4: branch listed
NOT_LISTED = [driver_node("t4", "440.33")]  # CUDA 10.2
HAMI = {"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4096}}


def hami_node(driver: str) -> Any:
    return node("t4", {FULL: driver, "nvidia.com/gpu.product": "Tesla-T4"},
                {"nvidia.com/gpu": 8, "nvidia.com/gpumem": 16384})


@pytest.mark.parametrize(("image", "nodes", "policy", "expected"), [
    # the same major, an older minor, no forward compatibility in the image
    ("nvidia/cuda:12.4.1-base", SAME_MAJOR, DEFAULT, [("cuda-driver-behind-runtime", (
        f"image CUDA 12.4 ({CUDA_124}) is newer than the driver's CUDA on 525.60.13 (CUDA 12.0) on t4, and the "
        f"platform requires a driver at least as new as the runtime; use a driver from branch >= 550{MVC_HINT}"))]),
    ("nvidia/cuda:12.4.1-base", SAME_MAJOR, FWD, [("cuda-driver-behind-runtime", (
        f"image CUDA 12.4 ({CUDA_124}) is newer than the driver's CUDA on 525.60.13 (CUDA 12.0) on t4, and the "
        f"platform requires a driver at least as new as the runtime; use a driver from branch >= 550{MVC_HINT}"))]),
    ("nvidia/cuda:12.4.1-base", SAME_MAJOR, MVC, [("cuda-driver-minor-version-compat", (
        f"image CUDA 12.4 ({CUDA_124}) is newer than the driver's CUDA on 525.60.13 (CUDA 12.0) on t4: it runs only "
        "through minor-version compatibility (no PTX JIT, no newer-driver APIs), which the config's "
        "driverPolicy.minorVersionCompatibility declares the platform accepts; use a driver from branch >= 550 to stop "
        "depending on it"))]),
    # an older major, no forward compatibility in the image
    ("nvidia/cuda:12.4.1-base", OLDER_MAJOR, DEFAULT, [("cuda-driver-too-old", (
        f"image CUDA 12.4 ({CUDA_124}) needs a driver from branch >= 550; eligible nodes run 470.82.01 (CUDA 11.4) on "
        f"t4{UNDECLARED}"))]),
    ("nvidia/cuda:12.4.1-base", OLDER_MAJOR, FWD, [("cuda-driver-too-old", (
        f"image CUDA 12.4 ({CUDA_124}) needs a driver from branch >= 550; eligible nodes run 470.82.01 (CUDA 11.4) on "
        f"t4{FORWARD}"))]),
    ("nvidia/cuda:12.4.1-base", OLDER_MAJOR, MVC, [("cuda-driver-too-old", (
        f"image CUDA 12.4 ({CUDA_124}) needs a driver from branch >= 550 (or >= 525 with minor-version compatibility); "
        f"eligible nodes run 470.82.01 (CUDA 11.4) on t4{UNDECLARED}"))]),
    # forward compatibility lists the branch, across a major version
    (COMPAT, OLDER_MAJOR, DEFAULT, [("cuda-driver-too-old", (
        f"image CUDA 12.4 ({C_ORIGIN}) needs a driver from branch >= 550; eligible nodes run 470.82.01 (CUDA 11.4) on "
        f"t4; NVIDIA forward compatibility ({LISTED_470}) could bridge this on these data-center GPUs if the platform "
        f"enables it: {HOW_FORWARD}"))]),
    (COMPAT, OLDER_MAJOR, FWD, [("cuda-driver-forward-compat", (
        f"image CUDA 12.4 ({C_ORIGIN}) is newer than the driver on 470.82.01 (CUDA 11.4) on t4: it runs only through "
        "forward compatibility (the image's CUDA 12.4 cuda-compat libraries, which list driver branch 470 on "
        "data-center GPUs); the config's driverPolicy.forwardCompatibility declares that the platform enables it"))]),
    (COMPAT, OLDER_MAJOR, MVC, [("cuda-driver-too-old", (
        f"image CUDA 12.4 ({C_ORIGIN}) needs a driver from branch >= 550 (or >= 525 with minor-version compatibility); "
        f"eligible nodes run 470.82.01 (CUDA 11.4) on t4; NVIDIA forward compatibility ({LISTED_470}) could bridge "
        f"this on these data-center GPUs if the platform enables it: {HOW_FORWARD}"))]),
    # forward compatibility lists the branch, within the major version: the listed alternative lets it start
    (COMPAT, SAME_MAJOR, DEFAULT, [("cuda-driver-behind-runtime", (
        f"image CUDA 12.4 ({C_ORIGIN}) is newer than the driver's CUDA on 525.60.13 (CUDA 12.0) on t4, and the "
        "platform requires a driver at least as new as the runtime; use a driver from branch >= 550"
        f"{MVC_HINT}; NVIDIA forward compatibility ({LISTED_525}) could bridge this on these data-center GPUs if the "
        f"platform enables it: {HOW_FORWARD}"))]),
    (COMPAT, SAME_MAJOR, FWD, [("cuda-driver-forward-compat", (
        f"image CUDA 12.4 ({C_ORIGIN}) is newer than the driver on 525.60.13 (CUDA 12.0) on t4: it runs through "
        "forward compatibility (the image's CUDA 12.4 cuda-compat libraries, which list driver branch 525 on "
        "data-center GPUs); without them, minor-version compatibility runs it (no PTX JIT, no newer-driver APIs); the "
        "config's driverPolicy.forwardCompatibility declares that the platform enables it"))]),
    (COMPAT, SAME_MAJOR, MVC, [("cuda-driver-minor-version-compat", (
        f"image CUDA 12.4 ({C_ORIGIN}) is newer than the driver's CUDA on 525.60.13 (CUDA 12.0) on t4: it runs only "
        "through minor-version compatibility (no PTX JIT, no newer-driver APIs), which the config's "
        "driverPolicy.minorVersionCompatibility declares the platform accepts; use a driver from branch >= 550 to stop "
        "depending on it"))]),
    # a branch the image's forward compatibility does not list: an error whatever the policy
    *[(COMPAT, NOT_LISTED, policy, [("cuda-driver-too-old", (
        f"image CUDA 12.4 ({C_ORIGIN}) needs a driver from branch >= 550{floor}; eligible nodes run 440.33 (CUDA 10.2) "
        "on t4; the image's forward compatibility lists driver branches 470, 525 only"))])
      for policy, floor in ((DEFAULT, ""), (FWD, ""), (MVC, " (or >= 525 with minor-version compatibility)"))],
    # within the major version, a branch not listed: NVIDIA_REQUIRE_CUDA refuses to start it, whatever the policy
    *[(COMPAT, [driver_node("t4", "535.104.05", **{GFD_MAJOR: "12", GFD_MINOR: "2"})], policy,
       [("cuda-driver-too-old", (
           f"image CUDA 12.4 ({C_ORIGIN}) needs a driver from branch >= 550{floor}; eligible nodes run 535.104.05 "
           "(CUDA 12.2) on t4; minor-version compatibility would run it, but the image's NVIDIA_REQUIRE_CUDA "
           "(cuda>=12.4) makes the NVIDIA container runtime refuse to start it on that driver "
           "(NVIDIA_DISABLE_REQUIRE=true in the container lifts the check)"))])
      for policy, floor in ((DEFAULT, ""), (FWD, ""), (MVC, " (or >= 525 with minor-version compatibility)"))],
    # under a vGPU layer (HAMi): the image's libcuda would bypass it, so forward compatibility never bridges
    *[(COMPAT, [hami_node("470.82.01")], policy, [("cuda-driver-too-old", (
        f"image CUDA 12.4 ({C_ORIGIN}) needs a driver from branch >= 550; eligible nodes run 470.82.01 (CUDA 11.4) on "
        "t4; the image's forward compatibility (cuda-compat) does not apply under GPU-Manager/HAMi vGPU: its libcuda "
        "would bypass the vGPU layer"))]) for policy in (DEFAULT, FWD)],
])
def test_the_driver_policy(image: str, nodes: list[Any], policy: DriverPolicy,
                           expected: list[tuple[str, str]]) -> None:
    resources = HAMI if expected and "vGPU" in expected[0][1] else None
    assert driver_findings(image, nodes, policy, resources=resources) == expected


@pytest.mark.parametrize("policy", [DEFAULT, FWD, MVC])
def test_a_vgpu_container_within_the_major_is_refused_by_the_gate_whatever_the_policy(policy: DriverPolicy) -> None:
    # Under HAMi the image's forward compatibility does not count, so its listed alternative does not either, and
    # the cuda>=12.4 of its NVIDIA_REQUIRE_CUDA stops the container on a CUDA 12.0 driver.
    floor = " (or >= 525 with minor-version compatibility)" if policy is MVC else ""
    assert driver_findings(COMPAT, [hami_node("525.60.13")], policy, resources=HAMI) == [("cuda-driver-too-old", (
        f"image CUDA 12.4 ({C_ORIGIN}) needs a driver from branch >= 550{floor}; eligible nodes run 525.60.13 (CUDA "
        "12.0) on t4; minor-version compatibility would run it, but the image's NVIDIA_REQUIRE_CUDA (cuda>=12.4) makes "
        "the NVIDIA container runtime refuse to start it on that driver (NVIDIA_DISABLE_REQUIRE=true in the container "
        "lifts the check)"))]


FC_LABEL, MVC_LABEL = "compatcheck.io/forward-compatibility", "compatcheck.io/minor-version-compatibility"


@pytest.mark.parametrize(("nodes", "policy", "expected"), [
    # a pool's label declares forward compatibility where the config does not
    ([driver_node("t4", "470.82.01", **{FC_LABEL: "true"})], DEFAULT, [("cuda-driver-forward-compat", (
        f"image CUDA 12.4 ({C_ORIGIN}) is newer than the driver on 470.82.01 (CUDA 11.4) on t4: it runs only through "
        "forward compatibility (the image's CUDA 12.4 cuda-compat libraries, which list driver branch 470 on "
        "data-center GPUs); the nodes' label compatcheck.io/forward-compatibility declares that the platform enables "
        "it"))]),
    # ... and turns it off where the config declares it; a pool without the label follows the config
    ([driver_node("off", "470.82.01", pool="a", **{FC_LABEL: "False"}), driver_node("on", "470.82.01", pool="b")],
     FWD, [("cuda-driver-too-old", (
         f"image CUDA 12.4 ({C_ORIGIN}) needs a driver from branch >= 550; eligible nodes run 470.82.01 (CUDA 11.4) on "
         f"off; NVIDIA forward compatibility ({LISTED_470}) could bridge this, but the nodes' label "
         'compatcheck.io/forward-compatibility: "false" says the platform does not enable it there')),
           ("cuda-driver-forward-compat", (
               f"image CUDA 12.4 ({C_ORIGIN}) is newer than the driver on 470.82.01 (CUDA 11.4) on on: it runs only "
               "through forward compatibility (the image's CUDA 12.4 cuda-compat libraries, which list driver branch "
               "470 on data-center GPUs); the config's driverPolicy.forwardCompatibility declares that the platform "
               "enables it"))]),
    # the minor-version label, both ways; the config and a label together are both named
    ([driver_node("t4", "525.60.13", **{MVC_LABEL: "true"})], DEFAULT, [("cuda-driver-minor-version-compat", (
        f"image CUDA 12.4 ({CUDA_124}) is newer than the driver's CUDA on 525.60.13 (CUDA 12.0) on t4: it runs only "
        "through minor-version compatibility (no PTX JIT, no newer-driver APIs), which the nodes' label "
        "compatcheck.io/minor-version-compatibility declares the platform accepts; use a driver from branch >= 550 to "
        "stop depending on it"))]),
    ([driver_node("a", "525.60.13", **{MVC_LABEL: "true"}), driver_node("b", "525.85.12")], MVC, [
        ("cuda-driver-minor-version-compat", (
            f"image CUDA 12.4 ({CUDA_124}) is newer than the driver's CUDA on 525.60.13 (CUDA 12.0) on a; 525.85.12 "
            "(CUDA 12.0) on b: it runs only through minor-version compatibility (no PTX JIT, no newer-driver APIs), "
            "which the config's driverPolicy.minorVersionCompatibility and the nodes' label "
            "compatcheck.io/minor-version-compatibility declares the platform accepts; use a driver from branch >= "
            "550 to stop depending on it"))]),
    ([driver_node("t4", "525.60.13", **{MVC_LABEL: "false"})], MVC, [("cuda-driver-behind-runtime", (
        f"image CUDA 12.4 ({CUDA_124}) is newer than the driver's CUDA on 525.60.13 (CUDA 12.0) on t4, and the "
        "platform requires a driver at least as new as the runtime; use a driver from branch >= 550; NVIDIA "
        "minor-version compatibility would run it (no PTX JIT, no newer-driver APIs), but the nodes' label "
        'compatcheck.io/minor-version-compatibility: "false" says the platform does not accept it there'))]),
])
def test_a_pools_label_overrides_the_driver_policy(nodes: list[Any], policy: DriverPolicy,
                                                   expected: list[tuple[str, str]]) -> None:
    image = COMPAT if expected[0][1].startswith(f"image CUDA 12.4 ({C_ORIGIN})") else "nvidia/cuda:12.4.1-base"
    assert driver_findings(image, nodes, policy) == expected


def test_the_affinity_pin_accepts_minor_version_compatibility_where_the_policy_declares_it() -> None:
    selector = {"cuda-major-version": "12", "cuda-minor-version": "0"}
    obj = pod(container(), nodeSelector=selector)
    assert messages("cuda-affinity-pin", obj) == [TOO_OLD_12_0]
    assert messages("cuda-affinity-pin", obj, policy=MVC) == []
    # the floor is offered only where minor-version compatibility is accepted
    old = pod(container(), nodeSelector={"cuda-major-version": "11"})
    assert messages("cuda-affinity-pin", old, policy=MVC) == [
        f"{TOO_OLD_11} (or >= 525 with minor-version compatibility)"]
    assert messages("cuda-affinity-pin", old, policy=FWD) == [TOO_OLD_11]


@pytest.mark.parametrize("policy", [DEFAULT, FWD])
def test_no_declaration_is_offered_under_vgpu_for_an_image_of_unknown_compat_libraries(policy: DriverPolicy) -> None:
    assert driver_findings("nvidia/cuda:12.4.1-base", [hami_node("470.82.01")], policy, resources=HAMI) == [(
        "cuda-driver-too-old", f"image CUDA 12.4 ({CUDA_124}) needs a driver from branch >= 550; eligible nodes run "
                               "470.82.01 (CUDA 11.4) on t4; forward compatibility (cuda-compat libraries in an image) "
                               "does not apply under GPU-Manager/HAMi vGPU: their libcuda would bypass the vGPU layer")]


# ---------------------------------------------------------------------------------------- assumed releases
ASSUMED_KB = {**TABLES, "image-profiles": [
    {"name": "serve", "pattern": r"^serve:v(?P<version>[\d.]+)$", "floating": r"^serve:latest$", "source": "S",
     "asOf": "2026-01-01", "versions": [{"from": "1.0", "before": "2.0", "cuda": "12.4", "source": "R"}]}]}
SERVE_NOTE = "assumed from v1.0 to before v2.0, the newest serve release compatcheck knows, table dated 2026-01-01"


@pytest.mark.parametrize(("image", "origin"), [
    ("serve:v1.5", "image serve:v1.5"),
    ("serve:v3.0", f"image serve:v3.0, {SERVE_NOTE}"),
    ("serve:latest", f"image serve:latest, a floating tag, {SERVE_NOTE}"),
])
@pytest.mark.parametrize("severity", [None, Severity.WARNING, Severity.INFO])
def test_a_finding_assumed_from_the_newest_release_says_so_and_takes_the_policys_severity(
        image: str, origin: str, severity: Severity | None) -> None:
    from tests.core.helpers import run

    kb = KnowledgeBase.from_tables(ASSUMED_KB)
    result = run("cuda-driver-too-old", pod(container(image=image)), nodes=[driver_node("old", "470.82.01")], kb=kb,
                 policy=DriverPolicy(assumed_severity=severity))
    ((finding),) = result.findings
    assert finding.message == (f"image CUDA 12.4 ({origin}) needs a driver from branch >= 550; eligible nodes run "
                               f"470.82.01 (CUDA 11.4) on old{UNDECLARED}")
    # the rule's own severity (the helper's rules are errors) unless the finding is assumed and the policy says
    assert finding.severity is (severity if severity is not None and image != "serve:v1.5" else Severity.ERROR)
