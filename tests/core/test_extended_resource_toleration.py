"""The tolerations the ExtendedResourceToleration admission plugin adds to a Pod, as compatcheck adds them when
``admissionPlugins: [ExtendedResourceToleration]`` is configured: for every extended resource a container or init
container asks for (requests or limits), ``{key: <resource>, operator: Exists, effect: NoSchedule}`` unless the Pod
already has that toleration; nothing for cpu, memory or hugepages, and nothing at all without the plugin. The
expected lists are what a kube-apiserver with the plugin on returns from a server-side dry run of each Pod (besides
DefaultTolerationSeconds' not-ready/unreachable ones); tests/e2e/test_admission_plugins.py compares the two live."""

from __future__ import annotations

import json
from typing import Any

import pytest

from compatcheck.core.checks.base import EvalContext, PodAnalysis
from compatcheck.core.cluster import EXTENDED_RESOURCE_TOLERATION
from compatcheck.core.workloads import pod_targets
from compatcheck.io.loader import Loaded


def container(name: str, **resources: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "image": "nvidia/cuda:12.4.1-base-ubuntu22.04", "resources": resources}


def tolerate(key: str) -> dict[str, str]:
    return {"key": key, "operator": "Exists", "effect": "NoSchedule"}


@pytest.mark.parametrize(("spec", "admitted"), [
    ({"containers": [container("c", limits={"nvidia.com/gpu": "1"})]}, [tolerate("nvidia.com/gpu")]),
    ({"containers": [container("c", requests={"nvidia.com/gpu": "2"}, limits={
        "nvidia.com/gpu": "2", "nvidia.com/rdma_shared_device_a": "1"})]},
     [tolerate("nvidia.com/gpu"), tolerate("nvidia.com/rdma_shared_device_a")]),
    ({"initContainers": [container("i", limits={"nvidia.com/mig-1g.10gb": "1"})],
      "containers": [container("c", limits={"nvidia.com/gpu": "1", "cpu": "1", "hugepages-2Mi": "2Mi",
                                            "memory": "2Mi"})]},
     [tolerate("nvidia.com/gpu"), tolerate("nvidia.com/mig-1g.10gb")]),
    ({"containers": [container("c", limits={"cpu": "1"})]}, []),
    ({"containers": [container("c", limits={"nvidia.com/gpu": "1"})], "tolerations": [tolerate("nvidia.com/gpu")]},
     [tolerate("nvidia.com/gpu")]),
    ({"containers": [container("c", limits={"tencent.com/vcuda-core": "50", "tencent.com/vcuda-memory": "8"})],
      "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]},
     [{"key": "nvidia.com/gpu", "operator": "Exists"}, tolerate("tencent.com/vcuda-core"),
      tolerate("tencent.com/vcuda-memory")]),
], ids=["limits-only", "gpu-and-rdma", "init-container", "cpu-only", "already-tolerated", "vcuda"])
def test_the_tolerations_the_api_server_adds(loaded: Loaded, spec: dict[str, Any],
                                             admitted: list[dict[str, str]]) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": spec}
    (target,) = pod_targets(pod)
    ctx = EvalContext(loaded.kb, admission_plugins=frozenset({EXTENDED_RESOURCE_TOLERATION}))
    ours = [*spec.get("tolerations", []), *PodAnalysis(target, ctx).implied_tolerations]
    # As sets: the API server appends in its own order and does not add a toleration the Pod already has (the
    # scheduler reads the set).
    assert {json.dumps(t, sort_keys=True) for t in ours} == {json.dumps(t, sort_keys=True) for t in admitted}
    assert PodAnalysis(target, EvalContext(loaded.kb)).implied_tolerations == []
