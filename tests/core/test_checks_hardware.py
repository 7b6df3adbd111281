"""checks/hardware.py: architecture support (too new, dropped), data types and their fixes, framework minimums,
MPS and MIG, each with the exact findings (pointer, container, message, fix) on small clusters."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core.model import Applicability, Fix, PatchOp
from compatcheck.core.rules import ParamsError
from compatcheck.core.versions import parse_compute_capability, parse_version
from tests.core.helpers import container, found, messages, node, pod, rule

PRODUCT = "nvidia.com/gpu.product"


def gpu_node(name: str, product: str | None = None, cc: str | None = None, **labels: str) -> dict[str, Any]:
    extra: dict[str, str] = dict(labels)
    if product:
        extra[PRODUCT] = product
    if cc:
        extra["nvidia.com/gpu.compute.major"], extra["nvidia.com/gpu.compute.minor"] = cc.split(".")
    return node(name, extra, {"nvidia.com/gpu": 8})


T4, H100, KEPLER = gpu_node("t4", "Tesla-T4"), gpu_node("h100", "H100"), gpu_node("k", "K", "3.5")
IMAGE = "/spec/containers/0/image"


# ---------------------------------------------------------------------------------------- architectures


@pytest.mark.parametrize(("image", "nodes", "expected"), [
    ("nvidia/cuda:11.4.0-base", [T4, H100], [(IMAGE, "c", "image CUDA 11.4 (image nvidia/cuda:11.4.0-base) predates "
                                              "the GPU H100 (compute capability 9.0): Hopper needs CUDA >= 11.8; code "
                                              "built with it carries no kernels for this GPU", None)]),
    ("nvidia/cuda:10.2.0-base", [T4, H100, gpu_node("a", "NVIDIA-A100")], [(
        IMAGE, "c", "image CUDA 10.2 (image nvidia/cuda:10.2.0-base) predates the GPU H100 (compute capability 9.0), "
                    "NVIDIA-A100 (compute capability 8.0): Ampere needs CUDA >= 11.0; Hopper needs CUDA >= 11.8; "
                    "code built with it carries no kernels for this GPU", None)]),
    ("nvidia/cuda:11.8.0-base", [H100], []),  # exactly the first CUDA that knows Hopper
    ("nvidia/cuda:11.4.0-base", [KEPLER, gpu_node("v", "V", "7.0"), gpu_node("x", "X")], []),  # not in the table
    ("busybox", [H100], []),
])
def test_gpu_arch_too_new(image: str, nodes: list[dict[str, Any]], expected: list[Any]) -> None:
    assert found("gpu-arch-too-new", pod(container(image=image)), nodes=nodes) == expected


def test_every_container_and_gpu_is_looked_at() -> None:
    obj = pod(container("unknown", image="busybox"), container("old", image="nvidia/cuda:11.4.0-base"))
    nodes = [gpu_node("nocc"), gpu_node("volta", "V", "7.0"), H100]  # no compute capability; not in the table
    assert [(c, m.split(":")[0]) for _p, c, m, _f in found("gpu-arch-too-new", obj, nodes=nodes)] == [
        ("old", "image CUDA 11.4 (image nvidia/cuda")]


@pytest.mark.parametrize(("image", "expected"), [
    ("nvidia/cuda:12.4.1-base", ["image CUDA 12.4 (image nvidia/cuda:12.4.1-base) no longer supports the GPU K "
                                 "(compute capability 3.5): Kepler support was removed in CUDA 12.0"]),
    ("nvidia/cuda:12.0.1-base", ["image CUDA 12.0 (image nvidia/cuda:12.0.1-base) no longer supports the GPU K "
                                 "(compute capability 3.5): Kepler support was removed in CUDA 12.0"]),
    ("nvidia/cuda:11.8.0-base", []),
])
def test_gpu_arch_dropped(image: str, expected: list[str]) -> None:
    assert messages("gpu-arch-dropped", pod(container(image=image)), nodes=[KEPLER, T4]) == expected


@pytest.mark.parametrize(("count", "shown"), [
    (1, "G0 (compute capability 3.5)"),
    (4, "G0 (compute capability 3.5), G1 (compute capability 3.5), G2 (compute capability 3.5), G3 (compute "
        "capability 3.5)"),
    (5, "G0 (compute capability 3.5), G1 (compute capability 3.5), G2 (compute capability 3.5), G3 (compute "
        "capability 3.5) ..."),
])
def test_at_most_four_gpus_are_named(count: int, shown: str) -> None:
    nodes = [gpu_node(f"n{i}", f"G{i}", "3.5") for i in range(count)] + [gpu_node("twin", "G0", "3.5")]
    (message,) = messages("gpu-arch-dropped", pod(container(image="nvidia/cuda:12.4.1-base")), nodes=nodes)
    assert message.split("the GPU ")[1] == f"{shown}: Kepler support was removed in CUDA 12.0"


# ---------------------------------------------------------------------------------------- data types

DTYPE = {"sources": [
    {"flags": ["--dtype"], "values": {"BFloat16": "bf16", "float4": "fp4"}, "fix": {"bf16": "half"}},
    {"flags": ["-q", "--quantization"], "values": {"fp8": "fp8", "fp9": "no-such-feature"}},
    {"env": "DTYPE", "values": {"bfloat16": "bf16"}, "fix": {"bf16": "float16"}},
]}


def dtype(c: dict[str, Any], nodes: list[dict[str, Any]] | None = None) -> list[Any]:
    return found("dtype-capability", pod(c), DTYPE, nodes=[T4] if nodes is None else nodes)


def unsafe(description: str, path: str, value: str) -> Fix:
    return Fix(description, Applicability.UNSAFE, (PatchOp("replace", path, value),))


NEEDS_BF16 = "needs compute capability >= 8.0 (bf16); eligible GPUs: Tesla-T4 (compute capability 7.5)"
ARGS = "/spec/containers/0/args"


@pytest.mark.parametrize(("c", "expected"), [
    (container(args=["--dtype=bfloat16"]),
     [(f"{ARGS}/0", "c", f"--dtype bfloat16 {NEEDS_BF16}", unsafe("use --dtype=half", f"{ARGS}/0", "--dtype=half"))]),
    (container(args=["serve", "--dtype", "BFLOAT16"]),  # two items: the value is replaced
     [(f"{ARGS}/2", "c", f"--dtype BFLOAT16 {NEEDS_BF16}", unsafe("use --dtype half", f"{ARGS}/2", "half"))]),
    (container(command=["sh", "-c"], args=["vllm serve --dtype bfloat16 --port 1"]),
     [(f"{ARGS}/0", "c", f"--dtype bfloat16 {NEEDS_BF16}",
       unsafe("use --dtype half", f"{ARGS}/0", "vllm serve --dtype half --port 1"))]),
    (container(command=["sh", "-c", "vllm serve --dtype=bfloat16"]),
     [("/spec/containers/0/command/2", "c", f"--dtype bfloat16 {NEEDS_BF16}",
       unsafe("use --dtype half", "/spec/containers/0/command/2", "vllm serve --dtype=half"))]),
    (container(args=["x --dtype", "bfloat16"]), [(f"{ARGS}/1", "c", f"--dtype bfloat16 {NEEDS_BF16}", None)]),
    (container(args=["-q", "fp8", "--quantization=fp9", "--dtype=float4"]), [
        (f"{ARGS}/1", "c", "-q fp8 needs compute capability >= 8.9 (fp8); eligible GPUs: Tesla-T4 (compute capability "
                           "7.5)", None)]),
    (container(env={"A": "1", "DTYPE": " BFloat16 "}), [(
        "/spec/containers/0/env/1/value", "c", f"DTYPE= BFloat16  {NEEDS_BF16}",
        unsafe("set DTYPE=float16", "/spec/containers/0/env/1/value", "float16"))]),
    (container(args=["--dtype=float4", "-q", "fp8"]), [
        (f"{ARGS}/2", "c", "-q fp8 needs compute capability >= 8.9 (fp8); eligible GPUs: Tesla-T4 (compute capability "
                           "7.5)", None)]),
    (container(args=["--dtype", "bfloat16"]),
     [(f"{ARGS}/1", "c", f"--dtype bfloat16 {NEEDS_BF16}", unsafe("use --dtype half", f"{ARGS}/1", "half"))]),
    (container(command=["sh", "-c"], args=["a --dtype=bfloat16 && b --dtype=bfloat16"]),  # one occurrence per fix
     [(f"{ARGS}/0", "c", f"--dtype bfloat16 {NEEDS_BF16}",
       unsafe("use --dtype half", f"{ARGS}/0", "a --dtype=half && b --dtype=bfloat16"))] * 2),
    (container(env={"DTYPE": None}), []),
    (container(args=["--dtype=half"]), []),
])
def test_dtype_findings_and_fixes(c: dict[str, Any], expected: list[Any]) -> None:
    assert dtype(c) == expected


def test_dtype_only_where_gpus_are_known() -> None:
    c = container(args=["--dtype=bfloat16"])
    assert dtype(c, [gpu_node("a", "NVIDIA-A100"), gpu_node("cpu")]) == []
    assert dtype(c, [gpu_node("x", "Mystery")]) == []
    assert [m for _p, _c, m, _f in dtype(c, [T4, gpu_node("a", "NVIDIA-A100")])] == [f"--dtype bfloat16 {NEEDS_BF16}"]
    assert dtype(container(gpus=0, args=["--dtype=bfloat16"])) == []


def test_dtype_checks_every_feature_a_container_asks_for() -> None:
    c = container(args=["--dtype=bfloat16", "-q", "fp8"])  # bf16 is fine on an A100 (8.0), fp8 is not
    assert [m.split(" needs")[0] for _p, _c, m, _f in dtype(c, [gpu_node("a", "NVIDIA-A100")])] == ["-q fp8"]


def test_dtype_checks_every_gpu_container() -> None:
    obj = pod(container("a", args=["--dtype=bfloat16"]), container("b", args=["-q", "fp8"]))
    assert [(ct, m.split(" needs")[0]) for _p, ct, m, _f in found("dtype-capability", obj, DTYPE, nodes=[T4])] == [
        ("a", "--dtype bfloat16"), ("b", "-q fp8")]


def test_dtype_without_a_cluster_view_uses_the_pinned_gpus() -> None:
    obj = pod(container(args=["--dtype=bfloat16"]), nodeSelector={PRODUCT: "Tesla-T4"})
    assert messages("dtype-capability", obj, DTYPE) == [f"--dtype bfloat16 {NEEDS_BF16}"]


# ---------------------------------------------------------------------------------------- frameworks

FRAMEWORKS = {"frameworks": [
    {"name": "Server", "image": r"^server:(?P<version>[\d.]+)", "minVersion": "2.5", "minComputeCapability": "8.0",
     "source": "s"},
    {"name": "Any server", "image": r"^anyserver:", "minComputeCapability": "8.0", "source": "s"},
    {"name": "CLI", "command": r"\bserve\b", "minComputeCapability": "9.0", "source": "s"},
    {"name": "Flash", "env": "BACKEND", "envValue": "FLASH.*", "minComputeCapability": "8.0", "source": "s"},
    {"name": "Anything", "env": "ANY", "minComputeCapability": "8.0", "source": "s"},
]}


def frameworks(c: dict[str, Any], nodes: list[dict[str, Any]] | None = None) -> list[str]:
    return [m for _p, _c, m, _f in found("framework-capability", pod(c), FRAMEWORKS,
                                         nodes=[T4, gpu_node("cpu")] if nodes is None else nodes)]


T4_ONLY = "eligible GPUs: Tesla-T4 (compute capability 7.5)"


@pytest.mark.parametrize(("c", "expected"), [
    (container(image="server:2.5"), [f"Server needs compute capability >= 8.0; {T4_ONLY}"]),
    (container(image="server:3.0.1"), [f"Server needs compute capability >= 8.0; {T4_ONLY}"]),
    (container(image="server:2.4.9"), []),
    (container(image="server:x"), []),
    (container(image="anyserver:1"), [f"Any server needs compute capability >= 8.0; {T4_ONLY}"]),
    (container(image="other", command=["python"], args=["serve", "-x"]),
     [f"CLI needs compute capability >= 9.0; {T4_ONLY}"]),
    (container(image="other", command=["observer"]), []),
    (container(image=None, args=["serve"]), [f"CLI needs compute capability >= 9.0; {T4_ONLY}"]),
    (container(env={"BACKEND": " FLASH_ATTN "}), [f"Flash needs compute capability >= 8.0; {T4_ONLY}"]),
    (container(env={"BACKEND": "XFORMERS"}), []),
    (container(env={"BACKEND": "NOFLASH"}), []),  # the whole value must match
    (container(env={"BACKEND": None}), []),
    (container(env={"ANY": ""}), [f"Anything needs compute capability >= 8.0; {T4_ONLY}"]),
    (container(image="server:2.5", env={"ANY": "1"}), [f"Server needs compute capability >= 8.0; {T4_ONLY}",
                                                        f"Anything needs compute capability >= 8.0; {T4_ONLY}"]),
])
def test_framework_minimums(c: dict[str, Any], expected: list[str]) -> None:
    assert frameworks(c) == expected


def test_a_container_without_an_image_matches_no_image_pattern() -> None:
    params = {"frameworks": [{"name": "Any image", "image": ".", "minComputeCapability": "8.0", "source": "s"}]}
    assert found("framework-capability", pod(container(image=None)), params, nodes=[T4]) == []
    assert found("framework-capability", pod(container(image="")), params, nodes=[T4]) == []
    assert found("framework-capability", pod(container(image=5)), params, nodes=[T4]) == []  # not a string
    assert len(found("framework-capability", pod(container(image="x")), params, nodes=[T4])) == 1


def test_framework_findings_point_at_the_image_and_need_known_gpus() -> None:
    assert found("framework-capability", pod(container(image="anyserver:1")), FRAMEWORKS, nodes=[T4]) == [
        (IMAGE, "c", f"Any server needs compute capability >= 8.0; {T4_ONLY}", None)]
    assert frameworks(container(image="anyserver:1"), [gpu_node("a", "NVIDIA-A100")]) == []
    assert frameworks(container(image="anyserver:1"), [gpu_node("x", "Mystery")]) == []
    assert frameworks(container(image="anyserver:1"), [T4, H100]) == [
        f"Any server needs compute capability >= 8.0; {T4_ONLY}"]


# ---------------------------------------------------------------------------------------- MPS

MPS_NODE = gpu_node("mps", "Tesla-T4", **{"nvidia.com/gpu.sharing-strategy": "mps",
                                          "nvidia.com/cuda.runtime-version.major": "11",
                                          "nvidia.com/cuda.runtime-version.minor": "4"})
ENV0 = "/spec/containers/0/env/0/value"


@pytest.mark.parametrize(("value", "ok"), [
    ("50", True), (" 100 ", True), ("0.5", True), (100, True), ("0", False), ("100.5", False), ("-1", False),
    ("x", False), (None, False), ("101", False)])
def test_mps_thread_percentage(value: Any, ok: bool) -> None:
    obj = pod(container(gpus=0, env={"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": value}))
    expected = [] if ok else [(ENV0, "c", f"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={value!r} must be a percentage in "
                                          "(0, 100]", None)]
    assert found("mps-requirements", obj) == expected


@pytest.mark.parametrize(("value", "ok"), [
    ("0=1G", True), ("0=1G,1=512M", True), (" 0 = 2048 ", True), ("0=1g", True), ("1G", False), ("0=1G;1=2G", False),
    ("0=1X", False), ("", False), (None, False), (5, False)])
def test_mps_pinned_memory(value: Any, ok: bool) -> None:
    obj = pod(container(gpus=0, env={"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": value}))
    expected = [] if ok else [(ENV0, "c", f"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT={value!r} must look like "
                                          "<device>=<size>[K|M|G|T], e.g. 0=1G", None)]
    assert found("mps-requirements", obj) == expected


def test_mps_env_of_every_container_is_checked() -> None:
    obj = pod(container("a", gpus=0, env={"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "0",
                                          "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "x"}),
              container("b", gpus=0, env={"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "200"}))
    assert [(p, ct) for p, ct, _m, _f in found("mps-requirements", obj)] == [
        (ENV0, "a"), ("/spec/containers/0/env/1/value", "a"), ("/spec/containers/1/env/0/value", "b")]


OLD_GPU = ("MPS sharing on Tesla-T4 (compute capability 7.5): MPS isolation (thread-percentage and memory limits) "
           "needs compute capability >= 8.0 (Volta)")
OLD_DRIVER = "MPS sharing through the device plugin needs a driver for CUDA >= 11.5; nodes run a driver for CUDA 11.4"
MPS_PARAMS = {"minComputeCapability": "8.0"}


@pytest.mark.parametrize(("spec", "nodes", "expected"), [
    ({}, [MPS_NODE], [OLD_GPU, OLD_DRIVER]),
    ({}, [MPS_NODE, T4], [OLD_GPU, OLD_DRIVER]),
    ({}, [T4], []),  # no MPS node
    ({"nodeSelector": {"nvidia.com/gpu.sharing-strategy": "mps"}}, [T4], []),  # pinned, but the nodes know better
    ({"nodeSelector": {"nvidia.com/gpu.sharing-strategy": "mps", PRODUCT: "Tesla-T4"}}, None, [OLD_GPU]),
    ({"nodeSelector": {"nvidia.com/gpu.sharing-strategy": "mps", PRODUCT: "NVIDIA-A100"}}, None, []),  # 8.0: enough
    ({"nodeSelector": {"nvidia.com/gpu.sharing-strategy": "time-slicing", PRODUCT: "Tesla-T4"}}, None, []),
    ({"nodeSelector": {PRODUCT: "Tesla-T4"}}, None, []),
])
def test_mps_nodes(spec: dict[str, Any], nodes: list[dict[str, Any]] | None, expected: list[str]) -> None:
    assert found("mps-requirements", pod(container(), **spec), MPS_PARAMS, nodes=nodes) == [
        ("/spec", None, m, None) for m in expected]


def test_mps_nodes_that_are_new_enough() -> None:
    new = gpu_node("new", "H100", **{"nvidia.com/gpu.sharing-strategy": "mps",
                                     "nvidia.com/cuda.runtime-version.major": "11",
                                     "nvidia.com/cuda.runtime-version.minor": "5"})
    assert found("mps-requirements", pod(container()), MPS_PARAMS, nodes=[new]) == []
    unknown = gpu_node("unknown", **{"nvidia.com/gpu.sharing-strategy": "mps"})
    assert found("mps-requirements", pod(container()), MPS_PARAMS, nodes=[unknown]) == []
    assert found("mps-requirements", pod(container(gpus=0)), MPS_PARAMS, nodes=[MPS_NODE]) == []


def test_mps_on_the_minimum_compute_capability_is_fine() -> None:
    a100 = gpu_node("a", "NVIDIA-A100", **{"nvidia.com/gpu.sharing-strategy": "mps"})
    assert found("mps-requirements", pod(container()), MPS_PARAMS, nodes=[a100]) == []


def test_mps_drivers_are_listed_once_sorted() -> None:
    other = gpu_node("o", "Tesla-T4", **{"nvidia.com/gpu.sharing-strategy": "mps",
                                         DRIVER_FULL: "470.82.01"})
    msgs = messages("mps-requirements", pod(container()), {"minComputeCapability": "7.0"},
                    nodes=[MPS_NODE, gpu_node("m2", "Tesla-T4", **MPS_NODE["metadata"]["labels"]), other])
    assert msgs == ["MPS sharing through the device plugin needs a driver for CUDA >= 11.5; nodes run 470.82.01 (CUDA "
                    "11.4), a driver for CUDA 11.4"]


DRIVER_FULL = "nvidia.com/cuda.driver-version.full"


# ---------------------------------------------------------------------------------------- MIG

MIG = "/spec/containers/0/resources/limits/nvidia.com~1mig-1g.5gb"


def mig_pod(profile: str = "1g.5gb", **spec: Any) -> dict[str, Any]:
    return pod(container(resources={"limits": {f"nvidia.com/mig-{profile}": 1, "cpu": 1}}), **spec)


def mig_node(name: str, product: str, offers: dict[str, int], **labels: str) -> dict[str, Any]:
    return node(name, {PRODUCT: product, **labels}, {f"nvidia.com/mig-{p}": n for p, n in offers.items()})


@pytest.mark.parametrize(("nodes", "expected"), [
    ([mig_node("a", "A100-SXM4-40GB", {"1g.5gb": 7})], []),
    ([mig_node("a", "A100-SXM4-40GB", {"1g.5gb": 0, "2g.10gb": 3}), mig_node("h", "H100", {"1g.10gb": 1}),
      node("plain", {PRODUCT: "H100"})],
     ["MIG profile 1g.5gb is offered by no node the pod can land on (nodes offer nvidia.com/mig-1g.10gb, "
      "nvidia.com/mig-1g.5gb, nvidia.com/mig-2g.10gb): the pod would stay Pending (Insufficient "
      "nvidia.com/mig-1g.5gb)"]),
    ([node("plain", {PRODUCT: "H100"})],
     ["MIG profile 1g.5gb is offered by no node the pod can land on (no node offers MIG devices): the pod would "
      "stay Pending (Insufficient nvidia.com/mig-1g.5gb)"]),
])
def test_mig_with_a_cluster_view(nodes: list[dict[str, Any]], expected: list[str]) -> None:
    assert found("mig-profile", mig_pod(), nodes=nodes) == [(MIG, "c", m, None) for m in expected]


def test_mig_with_a_cluster_view_checks_every_request_and_one_device_is_enough() -> None:
    nodes = [mig_node("a", "A100-SXM4-40GB", {"1g.5gb": 1})]
    assert messages("mig-profile", mig_pod(), nodes=nodes) == []
    obj = pod(container(resources={"limits": {"nvidia.com/mig-2g.10gb": 1, "nvidia.com/mig-3g.20gb": 1}}))
    assert [m.split(" is")[0] for m in messages("mig-profile", obj, nodes=nodes)] == [
        "MIG profile 2g.10gb", "MIG profile 3g.20gb"]


def test_mig_with_a_cluster_view_looks_where_the_pod_can_go() -> None:
    nodes = [mig_node("a", "A100-SXM4-40GB", {"1g.5gb": 7}, pool="a"), mig_node("b", "H100", {"1g.10gb": 7}, pool="b")]
    assert messages("mig-profile", mig_pod(nodeSelector={"pool": "b"}), nodes=nodes) == [
        "MIG profile 1g.5gb is offered by no node the pod can land on (nodes offer nvidia.com/mig-1g.10gb): the pod "
        "would stay Pending (Insufficient nvidia.com/mig-1g.5gb)"]
    assert messages("mig-profile", mig_pod(nodeSelector={"pool": "a"}), nodes=nodes) == []


@pytest.mark.parametrize(("profile", "spec", "expected"), [
    ("1g.5gb", {"nodeSelector": {PRODUCT: "A100-SXM4-40GB"}}, []),
    ("1g.10gb", {"nodeSelector": {PRODUCT: "A100-SXM4-40GB"}}, ["MIG profile 1g.10gb is not offered by "
                                                               "A100-SXM4-40GB"]),
    ("1g.5gb", {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": PRODUCT, "operator": "In", "values": [
            "H100", "A100-SXM4-40GB"]}]}]}}}}, []),  # one of the pinned GPUs offers it
    ("1g.5gb", {"nodeSelector": {PRODUCT: "H100"}}, ["MIG profile 1g.5gb is not offered by H100"]),
    ("2g.20gb", {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": PRODUCT, "operator": "In", "values": [
            "H100", "A100-SXM4-40GB"]}]}]}}}}, ["MIG profile 2g.20gb is not offered by A100-SXM4-40GB, H100"]),
    ("1g.10gb", {}, []),  # some GPU of the table offers it
    ("9g.99gb", {}, ["MIG profile 9g.99gb is offered by no GPU in the MIG table (known: 1g.10gb, 1g.5gb, 7g.40gb "
                     "...)"]),
    ("9g.99gb", {"nodeSelector": {PRODUCT: "Mystery"}}, [
        "MIG profile 9g.99gb is offered by no GPU in the MIG table (known: 1g.10gb, 1g.5gb, 7g.40gb ...)"]),
])
def test_mig_without_a_cluster_view(profile: str, spec: dict[str, Any], expected: list[str]) -> None:
    assert messages("mig-profile", mig_pod(profile, **spec)) == expected


def test_every_mig_request_of_every_container() -> None:
    obj = pod(container("a", resources={"limits": {"nvidia.com/gpu": 1, "nvidia.com/mig-9g.1gb": 1,
                                                   "nvidia.com/mig-8g.1gb": 2}}),
              container("b", resources={"limits": {"nvidia.com/mig-7g.1gb": 1}}))
    assert [(p, ct) for p, ct, _m, _f in found("mig-profile", obj)] == [
        ("/spec/containers/0/resources/limits/nvidia.com~1mig-9g.1gb", "a"),
        ("/spec/containers/0/resources/limits/nvidia.com~1mig-8g.1gb", "a"),
        ("/spec/containers/1/resources/limits/nvidia.com~1mig-7g.1gb", "b")]


# ---------------------------------------------------------------------------------------- params


@pytest.mark.parametrize(("check", "params", "prepared"), [
    ("mps-requirements", {}, (parse_compute_capability("7.0"), parse_version("11.5"))),
    ("mps-requirements", {"minComputeCapability": "8.6", "minDriverCuda": "12"},
     (parse_compute_capability("8.6"), parse_version("12"))),
])
def test_mps_params(check: str, params: dict[str, Any], prepared: tuple[Any, ...]) -> None:
    p = rule(check, params).prepared
    assert (p.min_compute_capability, p.min_driver_cuda) == prepared


def test_framework_and_dtype_params_are_prepared_once() -> None:
    p = rule("framework-capability", FRAMEWORKS).prepared
    server, anyserver, cli, flash, anything = p.frameworks
    assert (server.name, server.need, server.min_version, server.image.pattern, server.command, server.env) == (
        "Server", parse_compute_capability("8.0"), parse_version("2.5"), r"^server:(?P<version>[\d.]+)", None, None)
    assert (anyserver.min_version, cli.image, cli.command.pattern, flash.env, flash.env_value.pattern) == (
        None, None, r"\bserve\b", "BACKEND", "FLASH.*")
    assert anything.env_value.pattern == ".*"
    d = rule("dtype-capability", DTYPE).prepared
    assert [(s.flags, s.env, s.values, s.fixes) for s in d.sources] == [
        (("--dtype",), None, {"bfloat16": "bf16", "float4": "fp4"}, {"bf16": "half"}),
        (("-q", "--quantization"), None, {"fp8": "fp8", "fp9": "no-such-feature"}, {}),
        (None, "DTYPE", {"bfloat16": "bf16"}, {"bf16": "float16"})]


@pytest.mark.parametrize(("check", "params", "message"), [
    ("mps-requirements", {"minDriverCuda": "new"}, "check mps-requirements params: VersionError: minDriverCuda 'new' "
                                                   "is not a version number (expected digits and dots, e.g. 12.4)"),
    ("mps-requirements", {"minComputeCapability": "7.0.1"}, "check mps-requirements params: VersionError: compute "
                                                            "capability '7.0.1' is not of the form MAJOR.MINOR"),
    ("framework-capability", {"frameworks": [{"name": "n", "image": "x", "minVersion": "x1", "minComputeCapability":
                                              "8.0", "source": "s"}]},
     "check framework-capability params: VersionError: minVersion 'x1' is not a version number"),
])
def test_unusable_params_are_rule_errors(check: str, params: dict[str, Any], message: str) -> None:
    with pytest.raises(ParamsError) as err:
        rule(check, params)
    assert str(err.value).startswith(message)
