"""Dynamic Resource Allocation (``resource.k8s.io/v1``, GA in Kubernetes 1.34): the GPUs a pod gets through
ResourceClaims instead of extended resources. Pure: no I/O; where objects come from (files, the live view) is the
caller's business.

One responsibility per module, each importing only those above it in this list:

- ``model``: the constants of ``resource.k8s.io`` and the records its objects are read into (device classes,
  devices with their taints and capacity policies, requests, constraints);
- ``nvidia``: NVIDIA's DRA driver's device attributes as the GPU Feature Discovery labels and device-plugin resources
  the rules read, so a DRA device is read as a node is;
- ``read``: DeviceClass, ResourceClaim(Template), ResourceSlice and DeviceTaintRule objects (every served API
  version) into the model, and the notes on versions Kubernetes 1.36 does not serve;
- ``claims``: the index of classes, claims and templates, and a pod's claims resolved against it (``pod_claims``);
- ``selectors``: the CEL glue: selectors evaluated over an inventory's devices (through ``core.cel``), and what
  selectors pin without an inventory (``pinned_points``);
- ``search``: the backtracking search on one node (the scheduler's allocateOne), and what one device can give one
  request (taints, consumable capacity);
- ``explain``: the words of the allocator's findings (why a request, or requests together, cannot be served);
- ``allocator``: ``Allocator``, what the scheduler's structured allocator decides for a pod's claims, node by node,
  with its caches;
- ``inventory``: the devices, classes and device taint rules of one cluster snapshot, with its allocator.

The flow: objects --read--> model --claims--> a pod's ``PodRequest``s --allocator (selectors, search)--> a
``Diagnosis`` (``Allocation`` per request, ``Failure``s) --> the DRA checks (``core.checks.dra``), worded by
``explain``. This package's names are re-exported here, so ``from compatcheck.core.dra import X`` and ``dra.X`` keep
working; names with a leading underscore are the package's own (shared between its modules and its table tests).
"""

from __future__ import annotations

from compatcheck.core.dra.allocator import Allocation, Allocator, ClaimRequests, Diagnosis, Failure, Place
from compatcheck.core.dra.claims import (
    EMPTY_INDEX,
    DraIndex,
    Key,
    PodClaims,
    PodRequest,
    ResolvedAlternative,
    build_index,
    container_claim_requests,
    pod_claims,
)
from compatcheck.core.dra.explain import ONE_EACH, constraint_reason
from compatcheck.core.dra.inventory import Inventory, build_inventory
from compatcheck.core.dra.model import (
    BUILTIN_CLASSES,
    CHART_SOURCE,
    DEVICE_SOURCE,
    IMPLICIT_EXTENDED_PREFIX,
    NVIDIA_DRIVER,
    Alternative,
    CapacityPolicy,
    ClaimConstraint,
    Device,
    DeviceClassInfo,
    DeviceRequest,
    DeviceTaint,
    DeviceToleration,
)
from compatcheck.core.dra.nvidia import device_labels, device_resources, mig_profile, resource_profile
from compatcheck.core.dra.read import (
    claim_spec_of,
    iter_requests,
    read_claim_spec,
    read_constraints,
    read_device_class,
    read_policy,
    read_slice,
    read_taint_rule,
    read_taints,
    read_tolerations,
)
from compatcheck.core.dra.search import MAX_RESULTS, Kind, Node
from compatcheck.core.dra.selectors import (
    MAX_GRID,
    PINNABLE,
    KnownValues,
    is_mig_request,
    nvidia_attributes,
    pinned_points,
    pinned_profiles,
)
from compatcheck.core.drakinds import (
    GROUP,
    INVENTORY_KINDS,
    KINDS,
    REVIEWED_KINDS,
    UNSERVED_NOTES,
    V1ALPHA2_KINDS,
    api_version_note,
    has_claims,
    is_dra,
)

__all__ = [
    "BUILTIN_CLASSES", "CHART_SOURCE", "DEVICE_SOURCE", "EMPTY_INDEX", "GROUP", "IMPLICIT_EXTENDED_PREFIX",
    "INVENTORY_KINDS", "KINDS", "MAX_GRID", "MAX_RESULTS", "NVIDIA_DRIVER", "ONE_EACH", "PINNABLE", "REVIEWED_KINDS",
    "UNSERVED_NOTES", "V1ALPHA2_KINDS", "Allocation", "Allocator", "Alternative", "CapacityPolicy", "ClaimConstraint",
    "ClaimRequests", "Device", "DeviceClassInfo", "DeviceRequest", "DeviceTaint", "DeviceToleration", "Diagnosis",
    "DraIndex", "Failure", "Inventory", "Key", "Kind", "KnownValues", "Node", "Place", "PodClaims", "PodRequest",
    "ResolvedAlternative", "api_version_note", "build_index", "build_inventory", "claim_spec_of", "constraint_reason",
    "container_claim_requests", "device_labels", "device_resources", "has_claims", "is_dra", "is_mig_request",
    "iter_requests", "mig_profile", "nvidia_attributes", "pinned_points", "pinned_profiles", "pod_claims",
    "read_claim_spec", "read_constraints", "read_device_class", "read_policy", "read_slice", "read_taint_rule",
    "read_taints", "read_tolerations", "resource_profile",
]
