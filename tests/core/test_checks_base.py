"""checks/base.py and the registry: the shared readers (GPU requests, quantities, env, command lines, flags), the
env fix, and PodAnalysis (GPU containers, pod requests, where each container's CUDA runtime comes from, pinned
classes) with exact values."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core import checks
from compatcheck.core.checks.base import (
    NO_PARAMS_SCHEMA,
    CudaRuntime,
    PodCheck,
    UnknownCheckType,
    add_env_ops,
    admits_projected,
    command_line,
    container_gpu_requests,
    env_value,
    flag_values,
    no_params,
    quantity_ceil,
    quantity_int,
)
from compatcheck.core.cluster import build_cluster
from compatcheck.core.model import PatchOp
from compatcheck.core.versions import parse_cuda_version
from compatcheck.core.workloads import ContainerTarget
from tests.core.helpers import KB, analysis, container, node, pod


def target(data: dict[str, Any], pointer: str = "/spec/containers/0") -> ContainerTarget:
    return ContainerTarget(str(data.get("name", "c")), pointer, data, False, "/containers/0")


# ---------------------------------------------------------------------------------------- the registry


def test_a_registered_type_is_found_by_name() -> None:
    ctype = PodCheck(name="test-only-type", description="d", params_schema=NO_PARAMS_SCHEMA, prepare=no_params,
                     evaluate=lambda a, ctx, p: [])
    try:
        assert checks.register(ctype) is ctype
        assert checks.get("test-only-type") is ctype and ctype in checks.all_types()
    finally:
        checks._REGISTRY.pop("test-only-type", None)


def test_registry_errors_name_the_type() -> None:
    class Named:
        name = "named-thing"

    with pytest.raises(TypeError) as err:
        checks.register(object())  # type: ignore[arg-type]
    assert str(err.value) == "check type None: declare it as a PodCheck or an ObjectCheck"

    with pytest.raises(TypeError) as err:
        checks.register(Named())  # type: ignore[arg-type]
    assert str(err.value) == "check type 'named-thing': declare it as a PodCheck or an ObjectCheck"
    with pytest.raises(TypeError) as err:
        checks.register(PodCheck(name="t", description="d", params_schema={}, prepare=None,  # type: ignore[arg-type]
                                 evaluate=lambda a, c, p: []))
    assert str(err.value) == ("check type 't' has no prepare (every type has one: base.no_params for a type without "
                              "params)")
    with pytest.raises(UnknownCheckType) as unknown:
        checks.get("nope")
    known = ", ".join(sorted(c.name for c in checks.all_types()))
    assert str(unknown.value) == f'no such check type: "nope" (known: {known})'


# ---------------------------------------------------------------------------------------- readers


@pytest.mark.parametrize(("resources", "requests"), [
    ({"limits": {"nvidia.com/gpu": 1, "cpu": 2}}, {"nvidia.com/gpu": 1}),
    ({"requests": {"nvidia.com/gpu": 2, "tencent.com/vcuda-core": 50}, "limits": {"nvidia.com/gpu": 4}},
     {"nvidia.com/gpu": 4, "tencent.com/vcuda-core": 50}),  # limits win
    ({"requests": {"nvidia.com/gpu": 2}}, {"nvidia.com/gpu": 2}),
    ({"requests": "junk", "limits": None}, {}),
    ("junk", {}),
])
def test_container_gpu_requests(resources: Any, requests: dict[str, Any]) -> None:
    assert container_gpu_requests(target({"resources": resources})) == requests


@pytest.mark.parametrize(("value", "whole", "ceil"), [
    (2, 2, 2), ("3", 3, 3), ("2000m", 2, 2), ("0.5", None, 1), ("1.5", None, 2), ("-0.5", None, 0), ("x", None, 0),
    (None, None, 0), ("1k", 1000, 1000), (0, 0, 0)])
def test_quantities_in_whole_units(value: Any, whole: int | None, ceil: int) -> None:
    assert (quantity_int(value), quantity_ceil(value)) == (whole, ceil)


@pytest.mark.parametrize(("env", "found"), [
    ([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}], (1, "2")),
    ([{"name": "B", "value": "1"}, "junk", {"name": "B", "value": "3"}], (2, "3")),  # the last definition wins
    ([{"name": "B", "valueFrom": {}}], (0, None)),
    ([{"name": "A"}], None), ("junk", None)])
def test_env_value(env: Any, found: tuple[int, Any] | None) -> None:
    assert env_value(target({"env": env}), "B") == found


def test_command_line_is_command_then_args() -> None:
    assert command_line(target({"command": ["python", None, 3], "args": ["-m", "x"]})) == ["python", "3", "-m", "x"]
    assert command_line(target({"command": "python -m x", "args": ["a"]})) == ["a"]
    assert command_line(target({"command": ["c"]})) == ["c"]


@pytest.mark.parametrize(("argv", "found"), [
    (["serve", "--dtype=bf16", "--dtype", "'half'", "--other=1"], [(1, "--dtype", "bf16"), (3, "--dtype", "half")]),
    (["--dtype"], []),  # no value follows
    (["--dtype=a=b"], [(0, "--dtype", "a=b")]),
    (["--dtype='bf16'", '-q="fp8"'], [(0, "--dtype", "bf16"), (1, "-q", "fp8")]),
    (["sh", "-c", "vllm serve --dtype bfloat16 -q fp8 && x"], [(2, "--dtype", "bfloat16"), (2, "-q", "fp8")]),
    (["sh", "-c", "x --dtype", "bf16"], [(3, "--dtype", "bf16")]),  # a flag at the end of a string, value next
    (["a b", "-q", "fp8"], [(2, "-q", "fp8")]),  # a string without "--" is one token
    (["a --x", "-q=v"], [(1, "-q", "v")]),
    (["--dtypes=x", "-qq", "v"], []),
    (["sh -c", "echo -q fp8"], []),  # a string is split only when it holds a "--" flag
    (["--dtype=Xy", "--dtype", "yX"], [(0, "--dtype", "Xy"), (2, "--dtype", "yX")]),  # only quotes are stripped
])
def test_flag_values(argv: list[str], found: list[tuple[int, str, str]]) -> None:
    assert list(flag_values(argv, ["--dtype", "-q"])) == found


@pytest.mark.parametrize(("data", "ops"), [
    ({"env": [{"name": "A", "value": "1"}, {"name": "X", "value": "old"}]},
     (PatchOp("replace", "/c/env/1/value", "new"),)),
    ({"env": [{"name": "A", "value": "1"}]}, (PatchOp("add", "/c/env/-", {"name": "X", "value": "new"}),)),
    ({"env": []}, (PatchOp("add", "/c/env/-", {"name": "X", "value": "new"}),)),
    ({}, (PatchOp("add", "/c/env", [{"name": "X", "value": "new"}]),)),
    ({"env": "junk"}, (PatchOp("add", "/c/env", [{"name": "X", "value": "new"}]),)),
])
def test_add_env_ops(data: dict[str, Any], ops: tuple[PatchOp, ...]) -> None:
    assert add_env_ops(target(data, "/c"), "X", "new") == ops


# ---------------------------------------------------------------------------------------- PodAnalysis


def test_gpu_containers_and_pod_requests() -> None:
    obj = pod(container("a", gpus=2), container("b", gpus=0), container("c", gpus="0.5"), container("d", gpus=None),
              container("e", resources={"limits": {"nvidia.com/gpu": "x", "tencent.com/vcuda-core": "0"}}),
              init=[container("i", gpus=3), container("j", gpus=1)])
    a = analysis(obj)
    assert [(c.name, req) for c, req in a.gpu_containers] == [
        ("i", {"nvidia.com/gpu": 3}), ("j", {"nvidia.com/gpu": 1}), ("a", {"nvidia.com/gpu": 2}),
        ("c", {"nvidia.com/gpu": "0.5"}), ("e", {"nvidia.com/gpu": "x", "tencent.com/vcuda-core": "0"})]
    assert a.is_gpu_pod
    # containers add up (2 + 1 for 0.5 + 0 for unreadable), init containers take the largest: max(3, 3)
    assert a.pod_requests == {"nvidia.com/gpu": 3, "tencent.com/vcuda-core": 0}
    assert analysis(pod(container("a", gpus=4), init=[container("i", gpus=3)])).pod_requests == {"nvidia.com/gpu": 4}
    assert analysis(pod(container("a", gpus=1), init=[container("i", gpus=5)])).pod_requests == {"nvidia.com/gpu": 5}
    assert not analysis(pod(container("a", gpus=0))).is_gpu_pod


ANN = "/metadata/annotations/compatcheck.io~1cuda-runtime"
NO_VERSION = "is not a version number (expected digits and dots, e.g. 12.4)"


@pytest.mark.parametrize(("annotations", "c", "runtime"), [
    ({"compatcheck.io/cuda-runtime.c": "12.2", "compatcheck.io/cuda-runtime": "11.8"}, container(env={
        "CUDA_VERSION": "10.2"}), CudaRuntime(parse_cuda_version("12.2"), "annotation compatcheck.io/cuda-runtime.c",
                                              ANN + ".c")),
    ({"compatcheck.io/cuda-runtime.other": "12.2", "compatcheck.io/cuda-runtime": "11.8"}, container(),
     CudaRuntime(parse_cuda_version("11.8"), "annotation compatcheck.io/cuda-runtime", ANN)),
    ({"compatcheck.io/cuda-runtime": "eleven"}, container(),
     CudaRuntime(None, "annotation compatcheck.io/cuda-runtime", ANN, f"CUDA version 'eleven' {NO_VERSION}")),
    ({}, container(env={"A": "1", "NVIDIA_REQUIRE_CUDA": "brand=tesla cuda>=12.1 driver>=530", "CUDA_VERSION": "9"}),
     CudaRuntime(parse_cuda_version("12.1"), "env NVIDIA_REQUIRE_CUDA", "/spec/containers/0/env/1/value")),
    ({}, container(env={"NVIDIA_REQUIRE_CUDA": "cuda>= 11.8.1"}),
     CudaRuntime(parse_cuda_version("11.8.1"), "env NVIDIA_REQUIRE_CUDA", "/spec/containers/0/env/0/value")),
    ({}, container(env={"NVIDIA_REQUIRE_CUDA": "brand=tesla", "CUDA_VERSION": "12.2"}),
     CudaRuntime(None, "env NVIDIA_REQUIRE_CUDA", "/spec/containers/0/env/0/value",
                 "NVIDIA_REQUIRE_CUDA='brand=tesla' has no cuda>= term")),
    ({}, container(env={"NVIDIA_REQUIRE_CUDA": "xcuda>=12.1"}),
     CudaRuntime(None, "env NVIDIA_REQUIRE_CUDA", "/spec/containers/0/env/0/value",
                 "NVIDIA_REQUIRE_CUDA='xcuda>=12.1' has no cuda>= term")),
    ({}, container(env={"NVIDIA_REQUIRE_CUDA": "cuda>=100.0"}),
     CudaRuntime(None, "env NVIDIA_REQUIRE_CUDA", "/spec/containers/0/env/0/value",
                 "CUDA version '100.0' is out of range")),
    ({}, container(env={"NVIDIA_REQUIRE_CUDA": None, "CUDA_VERSION": "12.4.1"}),
     CudaRuntime(parse_cuda_version("12.4.1"), "env CUDA_VERSION", "/spec/containers/0/env/1/value")),
    ({}, container(env={"CUDA_VERSION": "latest"}),
     CudaRuntime(None, "env CUDA_VERSION", "/spec/containers/0/env/0/value", f"CUDA version 'latest' {NO_VERSION}")),
    ({}, container(image=None), CudaRuntime(None, "image", "/spec/containers/0/image", "the container has no image")),
    ({}, container(image=""), CudaRuntime(None, "image", "/spec/containers/0/image", "the container has no image")),
    ({}, container(image="busybox"), CudaRuntime(None, "image busybox", "/spec/containers/0/image",
                                                 "no image pattern recognises 'busybox'")),
    ({}, container(image="nvidia/cuda:12.2.0-base"), CudaRuntime(
        parse_cuda_version("12.2.0"), "image nvidia/cuda:12.2.0-base", "/spec/containers/0/image")),
    ({}, container(image="tritonserver:24.06-py3"), CudaRuntime(
        None, "image tritonserver:24.06-py3", "/spec/containers/0/image",
        "version 24.06 of triton is not in the image table")),
])
def test_where_a_containers_cuda_runtime_comes_from(annotations: dict[str, str], c: dict[str, Any],
                                                    runtime: CudaRuntime) -> None:
    a = analysis(pod(c, annotations=annotations))
    (ct,) = a.pod.containers
    assert a.runtime(ct) == runtime
    assert a.runtime(ct) is a.runtime(ct)  # resolved once per container


def test_runtimes_are_per_container() -> None:
    a = analysis(pod(container("a", image="nvidia/cuda:12.2.0-base"), container("b", image="busybox")))
    first, second = a.pod.containers
    assert str(a.runtime(first).version) == "12.2.0" and a.runtime(second).version is None


GPU = {"nvidia.com/gpu": 1}


def test_placement_with_a_cluster_view() -> None:
    nodes = [node("t4", {"nvidia.com/gpu.product": "Tesla-T4"}, GPU),
             node("a100", {"nvidia.com/gpu.product": "NVIDIA-A100"}, GPU,
                  [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]),
             node("small", {"nvidia.com/gpu.product": "NVIDIA-A100", "pool": "s"}, {"nvidia.com/gpu": 0}),
             node("cpu", {}, {})]
    a = analysis(pod(container(gpus=1)), nodes)
    assert [c.members[0].name for c in a.placement_classes] == ["t4", "a100", "small", "cpu"]
    assert [c.members[0].name for c in a.eligible_classes] == ["t4"]
    assert [f.product for f in a.scope] == ["Tesla-T4"] and a.scope_classes() == a.eligible_classes
    tolerant = analysis(pod(container(gpus=1), tolerations=[{"operator": "Exists"}]), nodes)
    assert [c.members[0].name for c in tolerant.scope_classes()] == ["t4", "a100"]
    assert [f.product for f in tolerant.scope] == ["Tesla-T4", "NVIDIA-A100"]
    cpu_only = analysis(pod(container(gpus=0)), nodes)  # no GPU request: every class offers it, but only GPUs count
    assert [c.members[0].name for c in cpu_only.eligible_classes] == ["t4", "small", "cpu"]
    assert [c.members[0].name for c in cpu_only.scope_classes()] == ["t4", "small"]


def test_the_placement_memo_is_shared_through_the_context() -> None:
    nodes = [node("t4", {"nvidia.com/gpu.product": "Tesla-T4"}, GPU)]
    a = analysis(pod(container(gpus=1)), nodes)
    assert a.placement_classes and len(a.ctx.placement_memo) == 1
    assert analysis(pod(container(gpus=1)), []).placement_classes == []


def pinned(obj: dict[str, Any]) -> list[dict[str, str]]:
    return [c.labels for c in analysis(obj).pinned_classes]


def affinity(*exprs: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": list(exprs)}]}}}


PRODUCT, MAJOR, MINOR = "nvidia.com/gpu.product", "nvidia.com/gpu.compute.major", "nvidia.com/gpu.compute.minor"


@pytest.mark.parametrize(("spec", "annotations", "classes"), [
    ({}, {}, []),
    ({"nodeSelector": {PRODUCT: "Tesla-T4", "pool": "x"}}, {}, [{PRODUCT: "Tesla-T4"}]),
    ({"affinity": affinity({"key": PRODUCT, "operator": "In", "values": ["NVIDIA-A100", "Tesla-T4"]})}, {},
     [{PRODUCT: "NVIDIA-A100"}, {PRODUCT: "Tesla-T4"}]),
    ({"affinity": affinity({"key": PRODUCT, "operator": "NotIn", "values": ["Tesla-T4"]})}, {}, []),
    ({"nodeSelector": {MAJOR: "8"}}, {}, [{MAJOR: "8", MINOR: "0"}]),
    ({"nodeSelector": {MAJOR: 8}, "affinity": affinity({"key": MINOR, "operator": "In", "values": ["6", "9"]})}, {},
     [{MAJOR: "8", MINOR: "6"}, {MAJOR: "8", MINOR: "9"}]),
    ({}, {"nvidia.com/use-gputype": "A100, T4,"}, [{PRODUCT: "A100"}, {PRODUCT: "T4"}]),
    ({"nodeSelector": {PRODUCT: "Tesla-T4"}}, {"nvidia.com/use-gputype": "A100"}, [{PRODUCT: "Tesla-T4"}]),
    # the selector pins one product, the affinity admits another: no class survives the real terms
    ({"nodeSelector": {PRODUCT: "Tesla-T4"}, "affinity": affinity(
        {"key": PRODUCT, "operator": "In", "values": ["NVIDIA-A100"]})}, {}, []),
])
def test_pinned_classes(spec: dict[str, Any], annotations: dict[str, str], classes: list[dict[str, str]]) -> None:
    assert pinned(pod(container(), annotations=annotations, **spec)) == classes


def test_pinned_classes_are_the_scope_without_a_cluster_view() -> None:
    a = analysis(pod(container(), nodeSelector={PRODUCT: "Tesla-T4"}))
    assert [f.product for f in a.scope] == ["Tesla-T4"] and a.scope_classes() == a.pinned_classes
    assert len(a.ctx.pinned_memo) == 1


def test_at_most_32_pinned_classes() -> None:
    values = [f"GPU-{i}" for i in range(40)]
    assert len(pinned(pod(container(), affinity=affinity({"key": PRODUCT, "operator": "In", "values": values})))) == 32


@pytest.mark.parametrize(("spec", "admitted"), [
    ({}, True),
    ({"nodeSelector": {PRODUCT: "Tesla-T4", "other": "x"}}, True),  # keys the class lacks are unknowable
    ({"nodeSelector": {PRODUCT: "NVIDIA-A100"}}, False),
    ({"affinity": affinity({"key": PRODUCT, "operator": "In", "values": ["NVIDIA-A100"]})}, False),
    ({"affinity": affinity({"key": "pool", "operator": "In", "values": ["x"]})}, True),  # unconstrained OR-branch
    ({"affinity": affinity("junk", {"key": PRODUCT, "operator": "In", "values": ["Tesla-T4"]})}, True),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": PRODUCT, "operator": "In", "values": ["NVIDIA-A100"]}]},
        {"matchExpressions": [{"key": PRODUCT, "operator": "In", "values": ["Tesla-T4"]}]}]}}}}, True),
])
def test_admits_projected(spec: dict[str, Any], admitted: bool) -> None:
    (cls,) = build_cluster([node("n", {PRODUCT: "Tesla-T4"})], KB).classes
    cls.labels = {PRODUCT: "Tesla-T4"}
    assert admits_projected(spec, cls) is admitted


@pytest.mark.parametrize(("object_annotations", "template_annotations", "runtime"), [
    ({"compatcheck.io/cuda-runtime": "11.8"}, {}, CudaRuntime(
        parse_cuda_version("11.8"), "annotation compatcheck.io/cuda-runtime", ANN)),
    ({"compatcheck.io/cuda-runtime": "11.8"}, {"compatcheck.io/cuda-runtime": "12.2"}, CudaRuntime(
        parse_cuda_version("12.2"), "annotation compatcheck.io/cuda-runtime", "/spec/template" + ANN)),
    ({"compatcheck.io/cuda-runtime": "11.8"}, {"compatcheck.io/cuda-runtime.c": "x"}, CudaRuntime(
        None, "annotation compatcheck.io/cuda-runtime.c", "/spec/template" + ANN + ".c",
        f"CUDA version 'x' {NO_VERSION}")),
])
def test_a_runtime_annotation_is_located_where_it_is_written(object_annotations: dict[str, str],
                                                             template_annotations: dict[str, str],
                                                             runtime: CudaRuntime) -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "d", "annotations": object_annotations},
                  "spec": {"template": {"metadata": {"annotations": template_annotations},
                                        "spec": {"containers": [container()]}}}}
    a = analysis(deployment)
    assert a.runtime(a.pod.containers[0]) == runtime
