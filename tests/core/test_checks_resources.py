"""checks/resources.py: extended resources as the API server validates them, GPU-Manager's vcuda rules, sharing
modes, shared request sizes, eligible nodes and taint tolerations, with exact findings and fixes."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core.checks.resources import is_extended_resource
from compatcheck.core.model import Applicability, Fix, PatchOp
from tests.core.helpers import container, found, messages, node, pod, rule, run

RES = "/spec/containers/0/resources"


@pytest.mark.parametrize(("name", "extended"), [
    ("nvidia.com/gpu", True), ("example.com/foo", True), ("cpu", False), ("memory", False), ("pods", False),
    ("storage", False), ("ephemeral-storage", False), ("hugepages-2Mi", False), ("requests.nvidia.com/gpu", False),
    ("limits.x/y", False), ("gpu", False), ("kubernetes.io/foo", False), ("node.kubernetes.io/foo", False),
    ("notkubernetes.io/foo", True), ("kubernetes.io/a/b", False)])
def test_is_extended_resource(name: str, extended: bool) -> None:
    assert is_extended_resource(name) is extended


def extended(resources: Any) -> list[Any]:
    return found("extended-resources", pod(container(gpus=None, resources=resources)))


def ext_ptr(section: str, name: str) -> str:
    return f"{RES}/{section}/{name.replace('/', '~1')}"


@pytest.mark.parametrize(("resources", "expected"), [
    ({"limits": {"nvidia.com/gpu": 2, "cpu": "0.5"}, "requests": {"nvidia.com/gpu": "2"}}, []),
    ({"limits": {"nvidia.com/gpu": "x", "example.com/a": "0.5", "example.com/b": -1, "example.com/c": "1k"}}, [
        (ext_ptr("limits", "nvidia.com/gpu"), "c", "limits.nvidia.com/gpu: 'x' is not a valid quantity", None),
        (ext_ptr("limits", "example.com/a"), "c", "limits.example.com/a: 0.5 must be an integer (extended "
                                                  "resources are whole numbers)", None),
        (ext_ptr("limits", "example.com/b"), "c", "limits.example.com/b: -1 must be greater than or equal to 0",
         None)]),
    ({"requests": {"example.com/a": 0.5}, "limits": {"example.com/a": 0.5}}, [
        (ext_ptr("limits", "example.com/a"), "c", "limits.example.com/a: 0.5 must be an integer (extended "
                                                  "resources are whole numbers)", None),
        (ext_ptr("requests", "example.com/a"), "c", "requests.example.com/a: 0.5 must be an integer (extended "
                                                    "resources are whole numbers)", None)]),
    ({"requests": {"example.com/a": "2", "cpu": "1"}, "limits": {"cpu": "1"}}, [
        (ext_ptr("requests", "example.com/a"), "c", "requests.example.com/a is set without a limit: the API server "
                                                    "rejects it (Limit must be set for non overcommitable resources)",
         Fix("set limits.example.com/a to the request", Applicability.SAFE,
             (PatchOp("add", ext_ptr("limits", "example.com/a"), "2"),)))]),
    ({"requests": {"example.com/a": 1}}, [
        (ext_ptr("requests", "example.com/a"), "c", "requests.example.com/a is set without a limit: the API server "
                                                    "rejects it (Limit must be set for non overcommitable resources)",
         Fix("set limits.example.com/a to the request", Applicability.SAFE,
             (PatchOp("add", f"{RES}/limits", {"example.com/a": 1}),)))]),
    ({"requests": {"example.com/a": "1", "example.com/b": "x"}, "limits": {"example.com/a": "2", "example.com/b": "1",
                                                                           "example.com/c": 1}}, [
        (ext_ptr("requests", "example.com/b"), "c", "requests.example.com/b: 'x' is not a valid quantity", None),
        (ext_ptr("requests", "example.com/a"), "c", "requests.example.com/a 1 must be equal to example.com/a "
                                                    "limit of 2 (extended resources cannot be overcommitted)",
         Fix("set requests.example.com/a to the limit", Applicability.UNSAFE,
             (PatchOp("replace", ext_ptr("requests", "example.com/a"), "2"),)))]),
    ({"requests": {"example.com/a": 1000}, "limits": {"example.com/a": "1k"}}, []),
    ({"limits": {"cpu": "x", "example.com/a": "0.5"}, "requests": {"memory": "1", "example.com/b": "x",
                                                                  "example.com/c": 1, "example.com/a": "0.5"}}, [
        (ext_ptr("limits", "example.com/a"), "c", "limits.example.com/a: 0.5 must be an integer (extended "
                                                  "resources are whole numbers)", None),
        (ext_ptr("requests", "example.com/b"), "c", "requests.example.com/b: 'x' is not a valid quantity", None),
        (ext_ptr("requests", "example.com/a"), "c", "requests.example.com/a: 0.5 must be an integer (extended "
                                                    "resources are whole numbers)", None),
        (ext_ptr("requests", "example.com/b"), "c", "requests.example.com/b is set without a limit: the API server "
                                                    "rejects it (Limit must be set for non overcommitable resources)",
         Fix("set limits.example.com/b to the request", Applicability.SAFE,
             (PatchOp("add", ext_ptr("limits", "example.com/b"), "x"),))),
        (ext_ptr("requests", "example.com/c"), "c", "requests.example.com/c is set without a limit: the API server "
                                                    "rejects it (Limit must be set for non overcommitable resources)",
         Fix("set limits.example.com/c to the request", Applicability.SAFE,
             (PatchOp("add", ext_ptr("limits", "example.com/c"), 1),)))]),
    ({"requests": {"example.com/a": "x", "example.com/b": "2"}, "limits": {"example.com/a": "1", "example.com/b": 1}}, [
        (ext_ptr("requests", "example.com/a"), "c", "requests.example.com/a: 'x' is not a valid quantity", None),
        (ext_ptr("requests", "example.com/b"), "c", "requests.example.com/b 2 must be equal to example.com/b "
                                                    "limit of 1 (extended resources cannot be overcommitted)",
         Fix("set requests.example.com/b to the limit", Applicability.UNSAFE,
             (PatchOp("replace", ext_ptr("requests", "example.com/b"), 1),)))]),
    # Past 2^63: the API server's integer check overflows (it accepts 1e32, rejects forty 1s), so the message says
    # only that no node has that many; a negative one is below zero whatever its size.
    ({"limits": {"nvidia.com/gpu": 1e32, "example.com/a": "-1e32", "example.com/b": "1" * 50}}, [
        (ext_ptr("limits", "nvidia.com/gpu"), "c", "limits.nvidia.com/gpu: 1e+32 is more than any node offers (past "
                                                   "2^63): the API server may even accept it, but the pod can never "
                                                   "be scheduled", None),
        (ext_ptr("limits", "example.com/a"), "c", "limits.example.com/a: -1e32 must be greater than or equal to 0",
         None),
        (ext_ptr("limits", "example.com/b"), "c", "limits.example.com/b: 11111111111111111111... (50 characters) is "
                                                  "more than any node offers (past 2^63): the API server may even "
                                                  "accept it, but the pod can never be scheduled", None)]),
])
def test_extended_resources(resources: Any, expected: list[Any]) -> None:
    assert extended(resources) == expected


REFUSED = " (the API server refuses the object; its pod spec was not checked)"


@pytest.mark.parametrize(("resources", "problems"), [
    ({"requests": "junk", "limits": ["x"]}, [(f"{RES}/limits", "limits: expected a mapping, found a list"),
                                             (f"{RES}/requests", "requests: expected a mapping, found a string")]),
    ("junk", [(RES, "resources: expected a mapping, found a string")]),
])
def test_resources_of_the_wrong_shape_are_input_problems(resources: Any, problems: list[tuple[str, str]]) -> None:
    # (compatcheck.core.shapes: the API server refuses such a pod, and no rule reads it)
    result = run("extended-resources", pod(container(gpus=None, resources=resources)))
    assert [(p.pointer, p.message, p.kind) for p in result.problems] == [(ptr, m + REFUSED, "input")
                                                                          for ptr, m in problems]
    assert result.findings == []


def test_extended_resources_of_every_container_gpu_or_not() -> None:
    obj = pod(container("a", gpus=None, resources={"limits": {"example.com/x": "y"}}), container("b", gpus=None),
              container("d", gpus=None, resources={"limits": {"example.com/x": "z"}}))
    assert [(p, ct) for p, ct, _m, _f in found("extended-resources", obj)] == [
        ("/spec/containers/0/resources/limits/example.com~1x", "a"), ("/spec/containers/2/resources/limits/"
                                                                      "example.com~1x", "d")]


# ---------------------------------------------------------------------------------------- vcuda

CORE = f"{RES}/limits/tencent.com~1vcuda-core"


@pytest.mark.parametrize(("limits", "expected"), [
    ({"tencent.com/vcuda-core": 50, "tencent.com/vcuda-memory": 4}, []),
    ({"tencent.com/vcuda-core": 100}, []), ({"tencent.com/vcuda-core": 200}, []),
    ({"tencent.com/vcuda-core": 0, "tencent.com/vcuda-memory": 4}, ["tencent.com/vcuda-core 0 must be positive (100 = "
                                                                    "one whole GPU)"]),
    ({"tencent.com/vcuda-core": 1, "tencent.com/vcuda-memory": 4}, []),
    ({"tencent.com/vcuda-core": 150}, ["tencent.com/vcuda-core 150: values above 100 must be multiples of 100 (whole "
                                       "GPUs); GPU-Manager refuses it"]),
    ({"tencent.com/vcuda-core": 101}, ["tencent.com/vcuda-core 101: values above 100 must be multiples of 100 (whole "
                                       "GPUs); GPU-Manager refuses it"]),
    ({"tencent.com/vcuda-core": 99}, ["tencent.com/vcuda-core 99 is a fraction of a GPU but tencent.com/vcuda-memory "
                                      "is not set: shared mode needs both (1 unit of tencent.com/vcuda-memory = 256 "
                                      "MiB)"]),
    ({"tencent.com/vcuda-core": 50, "tencent.com/vcuda-memory": "x"}, [
        "tencent.com/vcuda-core 50 is a fraction of a GPU but tencent.com/vcuda-memory is not set: shared mode needs "
        "both (1 unit of tencent.com/vcuda-memory = 256 MiB)"]),
    ({"tencent.com/vcuda-core": 50, "tencent.com/vcuda-memory": 1}, []),
    ({"tencent.com/vcuda-core": "0.5"}, []),  # not an integer: extended-resource-invalid says so
    ({"tencent.com/vcuda-memory": 4}, []),
])
def test_vcuda_core(limits: dict[str, Any], expected: list[str]) -> None:
    assert found("vcuda-core", pod(container(resources={"limits": limits}))) == [(CORE, "c", m, None)
                                                                                 for m in expected]


def test_vcuda_core_of_every_container() -> None:
    obj = pod(container("a", resources={"limits": {"nvidia.com/gpu": 1}}),
              container("b", resources={"limits": {"tencent.com/vcuda-core": "x", "nvidia.com/gpu": 1}}),
              container("d", resources={"limits": {"tencent.com/vcuda-core": 150}}))
    assert [(p, ct) for p, ct, _m, _f in found("vcuda-core", obj)] == [(CORE.replace("/0/", "/2/"), "d")]


# ---------------------------------------------------------------------------------------- sharing modes

MIX = "container mixes GPU sharing modes {}; a GPU is either MIG-partitioned or virtualised, not both"


@pytest.mark.parametrize(("limits", "env", "modes"), [
    ({"nvidia.com/mig-1g.5gb": 1, "tencent.com/vcuda-core": 50}, None,
     "MIG (nvidia.com/mig-*) and GPU-Manager vGPU (tencent.com/vcuda-*)"),
    ({"nvidia.com/mig-1g.5gb": 1, "nvidia.com/gpumem": 1000}, None, "MIG (nvidia.com/mig-*) and HAMi "
                                                                     "(nvidia.com/gpumem/gpucores)"),
    ({"tencent.com/vcuda-core": 50, "nvidia.com/gpucores": 10}, {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=1G"},
     "GPU-Manager vGPU (tencent.com/vcuda-*) and HAMi (nvidia.com/gpumem/gpucores) and MPS (CUDA_MPS_* env)"),
    ({"nvidia.com/mig-1g.5gb": 1}, {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50"},
     "MIG (nvidia.com/mig-*) and MPS (CUDA_MPS_* env)"),
    ({"nvidia.com/gpumem-percentage": 10, "nvidia.com/gpu": 1}, {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50"}, None),
    ({"nvidia.com/mig-1g.5gb": 1, "nvidia.com/gpu": 1}, None, None),
    ({"tencent.com/vcuda-core": 50}, None, None),
])
def test_sharing_modes(limits: dict[str, Any], env: dict[str, str] | None, modes: str | None) -> None:
    obj = pod(container(resources={"limits": limits}, env=env))
    assert found("sharing-mode", obj) == ([(f"{RES}", "c", MIX.format(modes), None)] if modes else [])


# ---------------------------------------------------------------------------------------- shared request size

SHARING = "nvidia.com/gpu.sharing-strategy"


def shared_node(strategy: str, name: str = "n", **labels: str) -> dict[str, Any]:
    return node(name, {SHARING: strategy, **labels}, {"nvidia.com/gpu": 4, "nvidia.com/gpu.shared": 4})


def refused(name: str, n: int, strategies: str) -> str:
    return (f"{name}: {n} on {strategies}-shared GPUs: the device plugin refuses requests above 1 (maximum request "
            "size for shared resources is 1) and the pod fails with UnexpectedAdmissionError")


@pytest.mark.parametrize(("limits", "nodes", "spec", "params", "expected"), [
    ({"nvidia.com/gpu": 2}, [shared_node("mps")], {}, {}, [("nvidia.com~1gpu", refused("nvidia.com/gpu", 2, "mps"))]),
    ({"nvidia.com/gpu": 1}, [shared_node("mps")], {}, {}, []),
    ({"nvidia.com/gpu.shared": "3"}, [shared_node("mps"), shared_node("time-slicing", "t")], {},
     {"timeSlicingFailsRequestsGreaterThanOne": True},
     [("nvidia.com~1gpu.shared", refused("nvidia.com/gpu.shared", 3, "mps/time-slicing"))]),
    ({"nvidia.com/gpu": 2}, [shared_node("time-slicing")], {}, {}, []),
    ({"nvidia.com/gpu": 2}, [shared_node("time-slicing")], {}, {"timeSlicingFailsRequestsGreaterThanOne": True},
     [("nvidia.com~1gpu", refused("nvidia.com/gpu", 2, "time-slicing"))]),
    ({"nvidia.com/gpu": 2}, [shared_node("none")], {SHARING: "mps"}, {},
     [("nvidia.com~1gpu", refused("nvidia.com/gpu", 2, "mps"))]),
    ({"nvidia.com/gpu": 2, "nvidia.com/gpu.shared": 2}, None, {SHARING: "mps"}, {},
     [("nvidia.com~1gpu", refused("nvidia.com/gpu", 2, "mps")),
      ("nvidia.com~1gpu.shared", refused("nvidia.com/gpu.shared", 2, "mps"))]),
    ({"nvidia.com/gpu": 2}, None, {}, {}, []),
    ({"nvidia.com/gpu": "x", "tencent.com/vcuda-core": 50}, [shared_node("mps")], {}, {}, []),
])
def test_shared_request_size(limits: dict[str, Any], nodes: list[dict[str, Any]] | None, spec: dict[str, str],
                             params: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    obj = pod(container(resources={"limits": limits}), **({"nodeSelector": spec} if spec else {}))
    assert found("shared-request-size", obj, params, nodes=nodes) == [
        (f"{RES}/limits/{p}", "c", m, None) for p, m in expected]


def test_shared_request_size_params() -> None:
    assert rule("shared-request-size").prepared.time_slicing_fails_gt_one is False
    assert rule("shared-request-size", {"timeSlicingFailsRequestsGreaterThanOne": True}
                ).prepared.time_slicing_fails_gt_one is True


# ---------------------------------------------------------------------------------------- eligible nodes, taints

GPU_NODES = [node("a0", {"pool": "a"}, {"nvidia.com/gpu": 1}), node("a1", {"pool": "a"}, {"nvidia.com/gpu": 1}),
             node("b0", {"pool": "b"}, {"nvidia.com/gpu": 8}), node("cpu", {"pool": "c"}, {})]


@pytest.mark.parametrize(("spec", "gpus", "expected"), [
    ({}, 1, []),
    ({}, 16, [("/spec", "no node can run this pod: 4 nodes match its nodeSelector/affinity but none offers "
                        "nvidia.com/gpu: 16; it would stay Pending")]),
    ({"nodeSelector": {"pool": "a"}}, 2, [("/spec", "no node can run this pod: 2 nodes match its nodeSelector/affinity "
                                                    "but none offers nvidia.com/gpu: 2; it would stay Pending")]),
    ({"nodeSelector": {"kubernetes.io/hostname": "a1"}}, 2, [
        ("/spec", "no node can run this pod: 1 node matches its nodeSelector/affinity but none offers nvidia.com/gpu: "
                  "2; it would stay Pending")]),
    ({"nodeSelector": {"pool": "z"}}, 1, [("/spec/nodeSelector", "no node can run this pod: none of the 4 nodes "
                                                                 "matches its nodeSelector/affinity; it would stay "
                                                                 "Pending")]),
    ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["z"]}]}]}}}}, 1,
     [("/spec", "no node can run this pod: none of the 4 nodes matches its nodeSelector/affinity; it would stay "
                "Pending")]),
    ({}, 0, []),  # not a GPU pod
])
def test_eligible_node(spec: dict[str, Any], gpus: int, expected: list[tuple[str, str]]) -> None:
    obj = pod(container(gpus=gpus), **spec)
    assert found("eligible-node", obj, nodes=GPU_NODES) == [(p, None, m, None) for p, m in expected]


def test_eligible_node_names_every_request() -> None:
    obj = pod(container(resources={"limits": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 100}}))
    assert messages("eligible-node", obj, nodes=GPU_NODES) == [
        "no node can run this pod: 4 nodes match its nodeSelector/affinity but none offers nvidia.com/gpu: 1, "
        "nvidia.com/gpumem: 100; it would stay Pending"]


TAINTED = [node("t0", {"pool": "t"}, {"nvidia.com/gpu": 4}, [{"key": "gpu", "value": "yes", "effect": "NoSchedule"},
                                                            {"key": "soft", "effect": "PreferNoSchedule"}]),
           node("t1", {"pool": "u"}, {"nvidia.com/gpu": 4}, [{"key": "gpu", "value": "yes", "effect": "NoSchedule"},
                                                            {"key": "dedicated", "effect": "NoExecute"}]),
           node("cpu", {}, {})]


def tolerate(*tols: dict[str, Any]) -> Fix:
    return Fix("add tolerations for the GPU node taints", Applicability.UNSAFE, tuple(
        PatchOp("add", "/spec/tolerations/-", t) for t in tols))


@pytest.mark.parametrize(("spec", "expected"), [
    ({}, [("/spec", "every GPU node offering nvidia.com/gpu: 1 is tainted (gpu=yes:NoSchedule, dedicated:NoExecute) "
                    "and the pod tolerates none of them",
           Fix("add tolerations for the GPU node taints", Applicability.UNSAFE, (PatchOp("add", "/spec/tolerations", [
               {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
               {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}]),)))]),
    ({"tolerations": [{"key": "other", "operator": "Exists"}]}, [
        ("/spec/tolerations", "every GPU node offering nvidia.com/gpu: 1 is tainted (gpu=yes:NoSchedule, "
                              "dedicated:NoExecute) and the pod tolerates none of them",
         tolerate({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
                  {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}))]),
    ({"tolerations": [{"key": "gpu", "operator": "Exists"}]}, []),  # t0 is then tolerated
    ({"nodeSelector": {"pool": "u"}, "tolerations": [{"key": "gpu", "operator": "Exists"}]}, [
        ("/spec/tolerations", "every GPU node offering nvidia.com/gpu: 1 is tainted (dedicated:NoExecute) and the pod "
                              "tolerates none of them",
         tolerate({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}))]),
    ({"nodeSelector": {"pool": "nowhere"}}, []),  # eligible-node's finding, not this one
])
def test_gpu_taint_toleration(spec: dict[str, Any], expected: list[Any]) -> None:
    assert found("gpu-taint-toleration", pod(container(), **spec), nodes=TAINTED) == [
        (p, None, m, f) for p, m, f in expected]


def test_taints_only_matter_for_gpu_pods_with_a_cluster_view() -> None:
    assert found("gpu-taint-toleration", pod(container(gpus=0)), nodes=TAINTED) == []
    assert found("eligible-node", pod(container(gpus=0)), nodes=[]) == []
