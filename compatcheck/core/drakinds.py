"""What reading a manifest needs to know of Dynamic Resource Allocation: the kinds of ``resource.k8s.io`` that
compatcheck reads, the API versions it reads as v1 (with a note), and whether a pod spec names claims. Pure.

Kept apart from ``core.dra`` (the claims model, the CEL selectors and the scheduler's allocator) so that a lint
of files that hold no DRA object, or a pod without claims, never imports the allocator: it is the biggest module
of the engine, and start-up matters (``tests/test_startup.py``). ``core.dra`` re-exports all of this.
"""

from __future__ import annotations

from compatcheck.core.jsonutil import JsonObject, in_group, text

GROUP = "resource.k8s.io"
# The DRA kinds compatcheck reads of its own (the webhook also reviews claims and templates).
KINDS = ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice")
REVIEWED_KINDS = ("ResourceClaim", "ResourceClaimTemplate")
INVENTORY_KINDS = ("ResourceSlice", "DeviceClass", "DeviceTaintRule")  # what --nodes reads into the inventory


def is_dra(obj: JsonObject) -> bool:
    return in_group(obj, GROUP, KINDS)


# API versions of resource.k8s.io read into the same model: v1 (GA in 1.34) and v1beta2 have the same shape; v1beta1
# and v1alpha3 write a request's deviceClassName, selectors, count and allocationMode on the request itself (no
# ``exactly``) and a slice's devices under ``basic``. What Kubernetes 1.36 serves of them, asked of a real
# kube-apiserver v1.36 (tests/e2e/test_dra_versions.py): v1 by default; v1beta1 and v1beta2 only with
# --runtime-config; v1alpha3 only DeviceTaintRule and ResourcePoolStatusRequest; v1alpha2 not at all ("group version
# resource.k8s.io/v1alpha2 that has not been registered"): the API of "classic" DRA that 1.31 replaced with
# structured parameters (https://github.com/kubernetes/enhancements/pull/4709).
UNSERVED_NOTES = {
    # the API server's own deprecation warning for each beta (kube-apiserver v1.36)
    "v1beta2": ("{kind} of resource.k8s.io/v1beta2 is deprecated in Kubernetes 1.36+ and unavailable in 1.39+ (1.36 "
                "serves it only with --runtime-config): read as v1, apply it as resource.k8s.io/v1"),
    "v1beta1": ("{kind} of resource.k8s.io/v1beta1 is deprecated in Kubernetes 1.35+ and unavailable in 1.38+ (1.36 "
                "serves it only with --runtime-config): read as v1, apply it as resource.k8s.io/v1"),
    "v1alpha3": ("{kind} of resource.k8s.io/v1alpha3 (Kubernetes 1.31) is no longer served (1.36 serves v1alpha3 "
                 "only for DeviceTaintRule and ResourcePoolStatusRequest): read as v1beta1, apply it as "
                 "resource.k8s.io/v1"),
    "v1alpha2": ("{kind} of resource.k8s.io/v1alpha2 (the \"classic\" DRA API) is not served since Kubernetes "
                 "1.31: not checked"),
}


# The kinds only resource.k8s.io/v1alpha2 had (read to say they are not checked).
V1ALPHA2_KINDS = ("ResourceClass", "ResourceClassParameters", "ResourceClaimParameters", "PodSchedulingContext")


def api_version_note(obj: JsonObject) -> str | None:
    """What to say of a resource.k8s.io object in an API version Kubernetes 1.36 does not serve by default (None
    for v1)."""
    api_version = obj.get("apiVersion")
    if not isinstance(api_version, str) or not api_version.startswith(GROUP + "/"):
        return None
    note = UNSERVED_NOTES.get(api_version.split("/", 1)[1])
    return note.format(kind=text(obj.get("kind")) or "an object") if note else None


def has_claims(spec: JsonObject) -> bool:
    """Whether a pod spec names DRA claims: ``resourceClaims``, or a NIMService's ``draResources``."""
    return "resourceClaims" in spec or "draResources" in spec
