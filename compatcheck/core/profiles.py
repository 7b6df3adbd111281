"""ClusterProfiles: a compact, hand-written description of a cluster's node pools (``--nodes`` with
``kind: ClusterProfile``) turned into the synthetic Node objects, and for ``dra: true`` pools the ResourceSlices of
NVIDIA's DRA driver, that ``core.cluster`` reads as it reads ``kubectl get nodes`` output: GFD labels, the
well-known labels every real Node carries (``well_known_labels``), taints and GPU allocatable. One code path reads
nodes, whatever their source.

Pure: dicts in, dicts and diagnostics out. It must not build the cluster view itself (``core.cluster`` does, from
the nodes this returns) or read files (``io.loader`` reads the profile and calls ``profile_to_nodes``).
"""

from __future__ import annotations

from compatcheck.core.cluster import DRIVER_FULL_LABEL, VGPU_BASELINE_LABEL
from compatcheck.core.jsonutil import JsonObject
from compatcheck.core.knowledge import KnowledgeBase
from compatcheck.core.model import Diagnostic
from compatcheck.core.policy import FORWARD_COMPAT_LABEL, MINOR_VERSION_COMPAT_LABEL
from compatcheck.core.versions import (
    Version,
    VersionError,
    parse_compute_capability,
    parse_cuda_version,
    parse_driver_version,
)


def _set_version(labels: dict[str, str], prefix: str, version: Version) -> None:
    labels[f"{prefix}.major"] = str(version.major)
    labels[f"{prefix}.minor"] = str(version.minor)


def profile_to_nodes(profile: JsonObject, kb: KnowledgeBase) -> tuple[list[JsonObject], list[Diagnostic]]:
    """A ClusterProfile (compact, hand-written) -> synthetic Node objects carrying GFD labels, and the problems
    that a schema cannot see (errors of kind ``nodes`` with a pointer into the profile): a GPU the products table
    does not know, versions that do not parse, sharing without the replicas or MIG profiles it needs.

    ``profile`` must be valid against ``schemas/clusterprofile.schema.json`` (types, enums, ranges, unknown keys):
    ``compatcheck.io.loader`` validates it first, with located errors."""
    errors: list[Diagnostic] = []
    nodes: list[JsonObject] = []

    def problem(field: str, message: str) -> None:  # worded as the schema's problems: the field, then what is wrong
        pointer = f"/nodePools/{i}/{field}"  # i: the pool being read
        errors.append(Diagnostic("", f"{pointer}: {message}", pointer=pointer, kind="nodes"))

    for i, pool in enumerate(profile["nodePools"]):
        name = str(pool.get("name") or f"pool{i}")
        labels: dict[str, str] = {str(k): str(v) for k, v in (pool.get("labels") or {}).items()}
        allocatable: JsonObject = {str(k): v for k, v in (pool.get("resources") or {}).items()}
        gpus = pool.get("gpusPerNode", 1)
        if "gpu" in pool:
            labels["nvidia.com/gpu.product"] = str(pool["gpu"]).replace(" ", "-")  # GFD: NVML's name, dashed
            known = kb.product(labels["nvidia.com/gpu.product"])
            if known is None and "computeCapability" not in pool:
                problem("gpu", f"GPU {pool['gpu']!r} is not in the gpu-products table; add computeCapability")
        for key, parse in (("computeCapability", parse_compute_capability), ("driver", parse_driver_version),
                           ("driverCuda", parse_cuda_version)):
            if key not in pool or (key == "driverCuda" and "driver" in pool):  # the driver says more
                continue
            try:
                version = parse(pool[key])
            except VersionError as exc:
                problem(key, str(exc))
                continue
            if key == "computeCapability":
                _set_version(labels, "nvidia.com/gpu.compute", version)
            elif key == "driver":
                labels[DRIVER_FULL_LABEL] = str(version)
                cuda, _ = kb.driver_cuda(version)
                if cuda is not None:
                    _set_version(labels, "nvidia.com/cuda.runtime-version", cuda)
            else:
                _set_version(labels, "nvidia.com/cuda.runtime-version", version)
        sharing = pool.get("sharing", "none")
        if pool.get("dra") and (sharing != "none" or pool.get("vgpu")):
            problem("dra", "a DRA pool shares its GPUs per claim (the driver's sharing config), not with sharing or "
                           "vgpu")
            continue
        if sharing in ("time-slicing", "mps"):
            replicas = pool.get("replicas", 1)
            if replicas < 2:
                problem("replicas" if "replicas" in pool else "sharing", f"{sharing} needs replicas >= 2")
                continue
            labels["nvidia.com/gpu.sharing-strategy"] = sharing
            labels["nvidia.com/gpu.replicas"] = str(replicas)
            resource = "nvidia.com/gpu.shared" if pool.get("renameShared") else "nvidia.com/gpu"
            allocatable.setdefault(resource, gpus * replicas)
        elif sharing.startswith("mig-"):
            labels["nvidia.com/mig.strategy"] = sharing[4:]
            mig = pool.get("migProfiles") or {}
            if not mig:
                problem("migProfiles" if "migProfiles" in pool else "sharing",
                        f"{sharing} needs migProfiles with positive counts, e.g. {{1g.10gb: 7}}")
                continue
            if sharing == "mig-mixed":
                for prof, n in mig.items():
                    allocatable.setdefault(f"nvidia.com/mig-{prof}", n * gpus)
            else:
                allocatable.setdefault("nvidia.com/gpu", sum(mig.values()) * gpus)
        else:
            labels["nvidia.com/gpu.sharing-strategy"] = "none"
            # GPU-Manager nodes advertise only tencent.com/vcuda-*; HAMi keeps nvidia.com/gpu.
            if gpus and (pool.get("vgpu") or {}).get("type") != "gpu-manager" and not pool.get("dra"):
                allocatable.setdefault("nvidia.com/gpu", gpus)
        for key, label in (("forwardCompatibility", FORWARD_COMPAT_LABEL),
                           ("minorVersionCompatibility", MINOR_VERSION_COMPAT_LABEL)):
            if key in pool:  # the pool's policy, as the label an admin sets on such Nodes (an explicit label wins)
                labels.setdefault(label, "true" if pool[key] else "false")
        vgpu = pool.get("vgpu") or {}
        if "baselineCuda" in vgpu:
            try:
                parse_cuda_version(vgpu["baselineCuda"])
            except VersionError as exc:  # the label would be unreadable: say so now, where it was written
                problem("vgpu/baselineCuda", str(exc))
            labels[VGPU_BASELINE_LABEL] = str(vgpu["baselineCuda"])
        if vgpu.get("type") == "gpu-manager":
            allocatable.setdefault("tencent.com/vcuda-core", 100 * gpus)
            allocatable.setdefault("tencent.com/vcuda-memory", vgpu.get("memoryUnits", 64) * gpus)
        elif vgpu.get("type") == "hami":
            allocatable.setdefault("nvidia.com/gpumem", vgpu.get("memoryMiB", 16384) * gpus)
            allocatable.setdefault("nvidia.com/gpucores", 100 * gpus)
        taints = pool.get("taints") or []
        slices: list[JsonObject] = []
        os_name, arch = str(pool.get("os", "linux")), str(pool.get("arch", "amd64"))
        zones = [str(z) for z in pool.get("zones") or []]
        for n in range(pool.get("count", 1)):
            node_name = f"{name}-{n}"
            nodes.append({
                "apiVersion": "v1", "kind": "Node",
                # The pool's own labels win: a profile may say what its nodes really carry.
                "metadata": {"name": node_name, "labels": {
                    **well_known_labels(node_name, os_name, arch, zones[n % len(zones)] if zones else None,
                                        pool.get("region"), pool.get("instanceType")),
                    **labels}},
                "spec": {"taints": taints},
                "status": {"allocatable": allocatable, "nodeInfo": {"operatingSystem": os_name, "architecture": arch}},
            })
            if pool.get("dra") and gpus:
                slices.append(_dra_slice(node_name, gpus, labels, pool, kb))
        nodes.extend(slices)
    return nodes, errors


def _dra_slice(node: str, gpus: int, labels: dict[str, str], pool: JsonObject, kb: KnowledgeBase) -> JsonObject:
    """The ResourceSlice NVIDIA's DRA driver would publish for a node of a ``dra: true`` pool: ``gpus`` devices with
    the attributes of ``cmd/gpu-kubelet-plugin/deviceinfo.go`` that the profile knows (versions as the driver
    writes them: semver, without leading zeros)."""
    attrs: dict[str, JsonObject] = {"type": {"string": "gpu"}}
    if "gpu" in pool:
        attrs["productName"] = {"string": str(pool["gpu"])}
    known = kb.product(str(pool["gpu"]).replace(" ", "-")) if "gpu" in pool else None
    major, minor = labels.get("nvidia.com/gpu.compute.major"), labels.get("nvidia.com/gpu.compute.minor")
    cc = parse_compute_capability(f"{major}.{minor or 0}") if major else (
        known.compute_capability if known is not None else None)
    if cc is not None:
        attrs["cudaComputeCapability"] = {"version": f"{cc.major}.{cc.minor}.0"}
        arch = kb.architecture(cc)
        if arch is not None:
            attrs["architecture"] = {"string": arch.name}
    full = labels.get(DRIVER_FULL_LABEL)
    if full:
        parts = [int(p) for p in full.split(".")[:3]] + [0, 0]
        attrs["driverVersion"] = {"version": f"{parts[0]}.{parts[1]}.{parts[2]}"}
    cmaj = labels.get("nvidia.com/cuda.runtime-version.major")
    cmin = labels.get("nvidia.com/cuda.runtime-version.minor")
    if cmaj:
        attrs["cudaDriverVersion"] = {"version": f"{cmaj}.{cmin or 0}.0"}
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu.nvidia.com"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"gpu-{k}", "attributes": attrs} for k in range(gpus)]},
    }
# The cloud provider's labels of a Node, which a ClusterProfile gives only if its author says so (zones, region,
# instanceType). When no pool of a profile gives one, the cluster is silent about it (``Cluster.unknown_keys``).
PROVIDER_LABELS = frozenset({
    "topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/region", "node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type",
})


def well_known_labels(name: str, os_name: str, arch: str, zone: str | None, region: object,
                      instance_type: object) -> dict[str, str]:
    """The labels every real Node carries, as ``kubectl get nodes --show-labels`` shows them: the kubelet sets the
    hostname, OS and architecture (with their deprecated beta.kubernetes.io twins, still set), the cloud provider the
    zone, region and instance type (stable and deprecated names). Pods and charts select on them
    (``kubernetes.io/os: linux`` is in most charts), so a synthetic Node without them would admit nothing.
    Source: https://kubernetes.io/docs/reference/labels-annotations-taints/"""
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": os_name, "kubernetes.io/arch": arch,
              "beta.kubernetes.io/os": os_name, "beta.kubernetes.io/arch": arch}
    if zone is not None:
        labels["topology.kubernetes.io/zone"] = labels["failure-domain.beta.kubernetes.io/zone"] = zone
    if region is not None:
        labels["topology.kubernetes.io/region"] = labels["failure-domain.beta.kubernetes.io/region"] = str(region)
    if instance_type is not None:
        labels["node.kubernetes.io/instance-type"] = labels["beta.kubernetes.io/instance-type"] = str(instance_type)
    return labels
