"""ExtendedResourceToleration against the real kube-apiserver: with the plugin enabled, the tolerations the API
server adds to a Pod (seen in a server-side dry run, which runs every admission plugin) are exactly those
compatcheck adds when ``admissionPlugins: [ExtendedResourceToleration]`` is configured. Mutating admission runs
before validating admission, so this is also what a validating webhook receives."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from compatcheck.core.checks.base import EvalContext, PodAnalysis
from compatcheck.core.cluster import EXTENDED_RESOURCE_TOLERATION
from compatcheck.core.workloads import pod_targets
from compatcheck.io.loader import Loaded
from tests.e2e.conftest import binaries
from tests.e2e.kapi import KubeAPIServer

# Added to every Pod by DefaultTolerationSeconds (on by default), not by the plugin under test.
DEFAULT_TOLERATION_KEYS = {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}


@pytest.fixture(scope="module")
def ert_kapi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeAPIServer]:
    server = KubeAPIServer(binaries(), tmp_path_factory.mktemp("kapi-ert"), (EXTENDED_RESOURCE_TOLERATION,)).start()
    # The ServiceAccount admission plugin wants the namespace's default ServiceAccount (no controller makes it).
    server.kubectl("create", "serviceaccount", "default", "-n", "default")
    yield server
    server.stop()


def container(name: str, **resources: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "image": "nvidia/cuda:12.4.1-base-ubuntu22.04", "resources": resources}


@pytest.mark.parametrize("spec", [
    {"containers": [container("c", limits={"nvidia.com/gpu": "1"})]},  # requests defaulted from limits
    {"containers": [container("c", requests={"nvidia.com/gpu": "2"}, limits={"nvidia.com/gpu": "2",
                                                                           "nvidia.com/rdma_shared_device_a": "1"})]},
    {"initContainers": [container("i", limits={"nvidia.com/mig-1g.10gb": "1"})],
     "containers": [container("c", limits={"nvidia.com/gpu": "1", "cpu": "1", "hugepages-2Mi": "2Mi",
                                           "memory": "2Mi"})]},
    {"containers": [container("c", limits={"cpu": "1"})]},  # nothing extended: nothing added
    {"containers": [container("c", limits={"nvidia.com/gpu": "1"})],  # already tolerated: not added twice
     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
    {"containers": [container("c", limits={"tencent.com/vcuda-core": "50", "tencent.com/vcuda-memory": "8"})],
     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]},
], ids=["limits-only", "gpu-and-rdma", "init-container", "cpu-only", "already-tolerated", "vcuda"])
def test_compatcheck_adds_the_tolerations_the_api_server_adds(ert_kapi: KubeAPIServer, loaded: Loaded,
                                                              spec: dict[str, Any]) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": spec}
    out = ert_kapi.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(pod))
    admitted = json.loads(out.stdout)["spec"].get("tolerations", [])
    by_server = {json.dumps(t, sort_keys=True) for t in admitted if t.get("key") not in DEFAULT_TOLERATION_KEYS}
    (target,) = pod_targets(pod)
    ctx = EvalContext(loaded.kb, admission_plugins=frozenset({EXTENDED_RESOURCE_TOLERATION}))
    ours = [*spec.get("tolerations", []), *PodAnalysis(target, ctx).implied_tolerations]
    assert {json.dumps(t, sort_keys=True) for t in ours} == by_server
    without = PodAnalysis(target, EvalContext(loaded.kb)).implied_tolerations
    assert without == []
