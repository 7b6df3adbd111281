"""checks/vgpu.py: which vGPU layer a container uses, GPU-Manager's CUDA ceiling, the vGPU baseline and major checks,
and env-required with its fix, each finding exact."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core.checks.vgpu import vgpu_kind
from compatcheck.core.model import Applicability, Fix, PatchOp
from compatcheck.core.rules import ParamsError
from compatcheck.core.versions import parse_version
from tests.core.helpers import container, found, node, pod, rule

CORE, MEMORY = "tencent.com/vcuda-core", "tencent.com/vcuda-memory"
IMAGE = "/spec/containers/0/image"


@pytest.mark.parametrize(("req", "kind"), [
    ({CORE: 50, MEMORY: 4}, "gpu-manager"), ({MEMORY: 4}, "gpu-manager"), ({CORE: "x"}, "gpu-manager"),
    ({CORE: 100}, None), ({CORE: "200"}, None), ({CORE: 150}, "gpu-manager"),
    ({"nvidia.com/gpumem": 1000}, "hami"), ({"nvidia.com/gpu": 1, "nvidia.com/gpucores": 30}, "hami"),
    ({"nvidia.com/gpumem-percentage": 10}, "hami"), ({"nvidia.com/gpu": 1}, None), ({}, None)])
def test_vgpu_kind(req: dict[str, Any], kind: str | None) -> None:
    assert vgpu_kind(req) == kind


def vgpu(name: str = "c", image: str = "nvidia/cuda:12.4.1-base", kind: str = "gpu-manager", **kw: Any) -> Any:
    limits = {CORE: 50, MEMORY: 4} if kind == "gpu-manager" else {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1000}
    return container(name, image=image, resources={"limits": limits}, **kw)


@pytest.mark.parametrize(("c", "params", "expected"), [
    (vgpu(), {}, ["GPU-Manager vGPU does not support CUDA 12.4 (image nvidia/cuda:12.4.1-base): its vcuda interposer "
                  "works only below CUDA 12.4; use whole cards (vcuda-core multiples of 100) or an older CUDA image"]),
    (vgpu(image="nvidia/cuda:12.3.2-base"), {}, []),
    (vgpu(image="nvidia/cuda:12.3.2-base"), {"ceiling": "12.2"}, [
        "GPU-Manager vGPU does not support CUDA 12.3 (image nvidia/cuda:12.3.2-base): its vcuda interposer works only "
        "below CUDA 12.2; use whole cards (vcuda-core multiples of 100) or an older CUDA image"]),
    (vgpu(kind="hami"), {}, []),
    (vgpu(image="busybox"), {}, []),
    (container(resources={"limits": {CORE: 100}}), {}, []),
])
def test_vgpu_cuda_ceiling(c: dict[str, Any], params: dict[str, Any], expected: list[str]) -> None:
    assert found("vgpu-cuda-ceiling", pod(c), params) == [(IMAGE, "c", m, None) for m in expected]


def test_vgpu_checks_skip_containers_that_are_not_vgpu() -> None:
    obj = pod(container("whole", resources={"limits": {CORE: 100}}), container("x", image="busybox",
                                                                               resources={"limits": {CORE: 10}}),
              vgpu("v"))
    assert [c for _p, c, _m, _f in found("vgpu-cuda-ceiling", obj)] == ["v"]


def test_vgpu_params() -> None:
    assert rule("vgpu-cuda-ceiling").prepared.ceiling == parse_version("12.4")
    assert rule("vgpu-baseline").prepared.default_baseline is None
    assert rule("vgpu-baseline", {"defaultBaselineCuda": "12.2"}).prepared.default_baseline == parse_version("12.2")
    with pytest.raises(ParamsError) as err:
        rule("vgpu-baseline", {"defaultBaselineCuda": "new"})
    assert str(err.value).startswith("check vgpu-baseline params: VersionError: defaultBaselineCuda 'new' is not a "
                                     "version number")
    with pytest.raises(ParamsError) as err:
        rule("vgpu-cuda-ceiling", {"ceiling": "x"})
    assert str(err.value).startswith("check vgpu-cuda-ceiling params: VersionError: ceiling 'x' is not a version "
                                     "number")


def vgpu_node(name: str, baseline: str | None = None, driver_cuda: str | None = None) -> dict[str, Any]:
    labels = {"nvidia.com/gpu.product": "Tesla-T4"}
    if baseline:
        labels["compatcheck.io/vgpu-baseline-cuda"] = baseline
    if driver_cuda:
        labels["nvidia.com/cuda.runtime-version.major"], labels["nvidia.com/cuda.runtime-version.minor"] = \
            driver_cuda.split(".")
    return node(name, labels, {CORE: 800, MEMORY: 64, "nvidia.com/gpu": 8, "nvidia.com/gpumem": 100000})


def baseline(c: dict[str, Any], nodes: list[dict[str, Any]] | None, params: dict[str, Any] | None = None,
             **spec: Any) -> list[str]:
    return [m for _p, _c, m, _f in found("vgpu-baseline", pod(c, **spec), params, nodes=nodes)]


@pytest.mark.parametrize(("c", "nodes", "params", "expected"), [
    (vgpu(), [vgpu_node("a", "12.2.1"), vgpu_node("b", "11.8"), vgpu_node("c", "12.4")], None, [
        "image CUDA 12.4 (image nvidia/cuda:12.4.1-base) is newer than the GPU-Manager vGPU baseline CUDA 11.8, 12.2 "
        "of the nodes it can land on; the vGPU layer cannot intercept it"]),
    (vgpu(kind="hami"), [vgpu_node("a", "12.2")], None, [
        "image CUDA 12.4 (image nvidia/cuda:12.4.1-base) is newer than the HAMi vGPU baseline CUDA 12.2 of the nodes "
        "it can land on; the vGPU layer cannot intercept it"]),
    (vgpu(), [vgpu_node("a", "12.4.9")], None, []),
    (vgpu(), [vgpu_node("a")], {"defaultBaselineCuda": "12.2"}, [  # no node says: the default stands for them
        "image CUDA 12.4 (image nvidia/cuda:12.4.1-base) is newer than the GPU-Manager vGPU baseline CUDA 12.2 of the "
        "nodes it can land on; the vGPU layer cannot intercept it"]),
    (vgpu(), [vgpu_node("a", "12.4"), vgpu_node("b")], {"defaultBaselineCuda": "12.2"}, []),  # one node says
    (vgpu(), [vgpu_node("a")], None, []),
    (vgpu(), None, {"defaultBaselineCuda": "12.2"}, [
        "image CUDA 12.4 (image nvidia/cuda:12.4.1-base) is newer than the GPU-Manager vGPU baseline CUDA 12.2 of the "
        "nodes it can land on; the vGPU layer cannot intercept it"]),
])
def test_vgpu_baseline(c: dict[str, Any], nodes: list[dict[str, Any]] | None, params: dict[str, Any] | None,
                       expected: list[str]) -> None:
    assert baseline(c, nodes, params) == expected


@pytest.mark.parametrize(("image", "nodes", "params", "expected"), [
    ("nvidia/cuda:12.4.1-base", [vgpu_node("a", "11.8"), vgpu_node("b", None, "13.0"), vgpu_node("c", "12.2", "12.4")],
     None, ["image CUDA 12.4 (image nvidia/cuda:12.4.1-base) is major 12 but the GPU-Manager nodes' driver/vGPU "
            "baseline is CUDA major 11, 13; vGPU needs the same major"]),
    ("nvidia/cuda:12.4.1-base", [vgpu_node("c", "12.2", "12.4")], None, []),
    ("nvidia/cuda:11.4.0-base", [vgpu_node("a")], {"defaultBaselineCuda": "12.2"}, [
        "image CUDA 11.4 (image nvidia/cuda:11.4.0-base) is major 11 but the GPU-Manager nodes' driver/vGPU baseline "
        "is CUDA major 12; vGPU needs the same major"]),
    ("nvidia/cuda:11.4.0-base", [vgpu_node("a", None, "11.8")], None, []),
])
def test_vgpu_major(image: str, nodes: list[dict[str, Any]], params: dict[str, Any] | None,
                    expected: list[str]) -> None:
    assert found("vgpu-major", pod(vgpu(image=image)), params, nodes=nodes) == [(IMAGE, "c", m, None)
                                                                                 for m in expected]


# ---------------------------------------------------------------------------------------- env-required

ENV_PARAMS = {"when": "gpu-manager", "imagePattern": "paddle", "commandPattern": r"-m\s+paddle", "env": "FLAGS",
              "value": "naive", "what": "Paddle", "why": "the allocator crashes"}


def needs(current: str) -> str:
    return f"Paddle on GPU-Manager vGPU needs FLAGS=naive (FLAGS is {current}); the allocator crashes"


def set_flags(*ops: PatchOp) -> Fix:
    return Fix("set FLAGS=naive", Applicability.SAFE, ops)


C0 = "/spec/containers/0"


@pytest.mark.parametrize(("c", "params", "expected"), [
    (vgpu(image="paddlepaddle/paddle:2.6"), ENV_PARAMS, [
        (C0, needs("not set"), set_flags(PatchOp("add", f"{C0}/env", [{"name": "FLAGS", "value": "naive"}])))]),
    (vgpu(image="paddlepaddle/paddle:2.6", env={"A": "1"}), ENV_PARAMS, [
        (f"{C0}/env", needs("not set"),
         set_flags(PatchOp("add", f"{C0}/env/-", {"name": "FLAGS", "value": "naive"})))]),
    (vgpu(image="paddlepaddle/paddle:2.6", env={"A": "1", "FLAGS": "auto_growth"}), ENV_PARAMS, [
        (f"{C0}/env/1/value", needs("'auto_growth'"), set_flags(PatchOp("replace", f"{C0}/env/1/value", "naive")))]),
    (vgpu(image="paddlepaddle/paddle:2.6", env={"FLAGS": None}), ENV_PARAMS, [
        (f"{C0}/env/0/value", needs("None"), set_flags(PatchOp("replace", f"{C0}/env/0/value", "naive")))]),
    (vgpu(image="paddlepaddle/paddle:2.6", env={"FLAGS": " naive "}), ENV_PARAMS, []),
    (vgpu(image="python:3", command=["python", "-m", "paddle.distributed"]), ENV_PARAMS, [
        (C0, needs("not set"), set_flags(PatchOp("add", f"{C0}/env", [{"name": "FLAGS", "value": "naive"}])))]),
    (vgpu(image="python:3", command=["python", "-m", "paddle"]), {**ENV_PARAMS, "commandPattern": ""}, []),
    (vgpu(image="python:3", command=["python", "-m"], args=["paddle"]), ENV_PARAMS, [
        (C0, needs("not set"), set_flags(PatchOp("add", f"{C0}/env", [{"name": "FLAGS", "value": "naive"}])))]),
    (vgpu(image="python:3"), ENV_PARAMS, []),
    (vgpu(image="paddlepaddle/paddle:2.6", kind="hami"), ENV_PARAMS, []),
    (vgpu(image="paddlepaddle/paddle:2.6", kind="hami"), {**ENV_PARAMS, "when": "hami"}, [
        (C0, "Paddle on HAMi vGPU needs FLAGS=naive (FLAGS is not set); the allocator crashes",
         set_flags(PatchOp("add", f"{C0}/env", [{"name": "FLAGS", "value": "naive"}])))]),
    (container(image="paddlepaddle/paddle:2.6", resources={"limits": {CORE: 100}}), ENV_PARAMS, []),
])
def test_env_required(c: dict[str, Any], params: dict[str, Any], expected: list[Any]) -> None:
    assert found("env-required", pod(c), params) == [(p, "c", m, f) for p, m, f in expected]


def test_env_required_checks_every_matching_container() -> None:
    nameless = vgpu("n", image="busybox", command=["python", "-m", "paddle"])
    del nameless["image"]
    obj = pod(container("gpu", image="paddle"), vgpu("a", image="busybox"),
              vgpu("b", image="paddle:1", env={"FLAGS": "naive"}), vgpu("d", image="paddle"), nameless)
    assert [c for _p, c, _m, _f in found("env-required", obj, ENV_PARAMS)] == ["d", "n"]


def test_a_container_without_an_image_matches_no_image_pattern() -> None:
    imageless = vgpu()
    del imageless["image"]
    assert found("env-required", pod(imageless), {**ENV_PARAMS, "imagePattern": "."}) == []
