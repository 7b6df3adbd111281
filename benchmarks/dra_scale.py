"""Cost of a DRA pod's evaluation against a large inventory (what the webhook pays per pod).

    python benchmarks/dra_scale.py [--nodes 2000] [--gpus 8] [--repeat 5]

Builds NODES Nodes and one ResourceSlice each with GPUS devices of NVIDIA's DRA driver (T4, A100, H100 in turn,
every device with its own uuid and PCI address), a ResourceClaimTemplate asking for 2 GPUs of compute capability
>= 8.0, and a vLLM pod using it. Reports the inventory build, the first evaluation (it evaluates the selectors
over the inventory, once per distinct device projection, and compiles them), the following ones (a new pod of
the same snapshot and template: the allocator's decision for those claims on those nodes is kept), and pods whose
claims are new (the same selectors, another count each: the allocation search runs again on every node).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from compatcheck.core.checks.base import EvalContext
from compatcheck.core.cluster import build_cluster
from compatcheck.core.crl import CrlIndex
from compatcheck.core.dra import build_index, build_inventory
from compatcheck.core.engine import evaluate
from compatcheck.io.loader import load_rules

PRODUCTS = (("Tesla T4", "7.5.0"), ("NVIDIA A100-SXM4-80GB", "8.0.0"), ("NVIDIA H100 80GB HBM3", "9.0.0"))


def inventory(nodes: int, gpus: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    node_objs, slices = [], []
    for i in range(nodes):
        name = f"n{i}"
        product, cc = PRODUCTS[i % len(PRODUCTS)]
        node_objs.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "pool": "gpu"}}, "status": {"allocatable": {"cpu": "64"}}})
        slices.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{name}-gpu"},
                       "spec": {"driver": "gpu.nvidia.com", "nodeName": name,
                                "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                                "devices": [{"name": f"gpu-{k}", "attributes": {
                                    "type": {"string": "gpu"}, "productName": {"string": product},
                                    "cudaComputeCapability": {"version": cc}, "driverVersion": {"version": "550.54.15"},
                                    "cudaDriverVersion": {"version": "12.4.0"}, "uuid": {"string": f"GPU-{i}-{k}"},
                                    "resource.kubernetes.io/pciBusID": {"string": f"0000:{k:02x}:00.0"}},
                                    "capacity": {"memory": {"value": "80Gi"}}} for k in range(gpus)]}})
    return node_objs, slices


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    loaded = load_rules()
    nodes, slices = inventory(args.nodes, args.gpus)
    t = time.perf_counter()
    cluster = build_cluster(nodes, loaded.kb)
    cluster.dra = build_inventory(slices)
    build = time.perf_counter() - t
    counts = [2, *(1 + k % args.gpus for k in range(2, args.repeat + 2))]
    templates = [template(f"gpus-{n}-{k}", n) for k, n in enumerate(counts)]
    ctx = EvalContext(loaded.kb, cluster, CrlIndex(), dra=build_index(templates))
    times = []
    for _ in range(args.repeat + 1):
        t = time.perf_counter()
        evaluate(pod(templates[0]), loaded.ruleset, ctx)
        times.append(time.perf_counter() - t)
    fresh = []
    for tpl in templates[1:]:
        t = time.perf_counter()
        evaluate(pod(tpl), loaded.ruleset, ctx)
        fresh.append(time.perf_counter() - t)
    devices = len(cluster.dra.devices)
    print(f"{args.nodes} nodes, {devices} devices: inventory built in {build * 1000:.0f} ms; first pod "
          f"{times[0] * 1000:.0f} ms; then median {statistics.median(times[1:]) * 1000:.1f} ms a pod; a pod with "
          f"new claims (same selectors): median {statistics.median(fresh) * 1000:.1f} ms")


def template(name: str, count: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "ml"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.nvidia.com", "count": count, "selectors": [{"cel": {"expression": (
                    "device.attributes['gpu.nvidia.com'].cudaComputeCapability"
                    ".compareTo(semver('8.0.0')) >= 0")}}]}}]}}}}


def pod(claim_template: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": {
        "nodeSelector": {"pool": "gpu"},
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": claim_template["metadata"]["name"]}],
        "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.6.3", "args": ["--dtype", "bfloat16"],
                        "resources": {"claims": [{"name": "gpu"}]}}]}}


if __name__ == "__main__":
    main()
