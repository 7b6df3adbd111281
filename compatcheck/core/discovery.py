"""Structural discovery: pod templates, pod specs and containers in a custom resource of a kind the workload-kinds
table does not know, found by their shape, so that a new operator's GPU workloads are linted the day it ships.

Pure: no I/O. Only custom resources are searched (an API group with a dot that is not one of Kubernetes' own
``*.k8s.io`` groups; ``x-k8s.io`` ones are SIG projects' custom resources), and only their ``spec``. Shapes, in the
order tried at each mapping:

- a pod template: a mapping whose ``spec`` holds a ``containers`` list with a container (``spec.containers`` under a
  template);
- a pod spec: a mapping with a ``containers`` list with a container;
- a single container: a field whose value is a container with ``resources`` (``image`` and ``resources``), read as
  that field of a pod spec (Argo Workflows' ``templates[].container``).

A container is a mapping with a non-empty string ``image``. Nothing inside a string is looked at (a script or a
manifest embedded as text), and what holds no container is never a workload however much it says about GPUs
(autoscaler node-pool limits, queue and quota objects, node objects). Whether the pods found ask for a GPU is the
engine's question (a count of 0 does not).
"""

from __future__ import annotations

from compatcheck.core.jsonutil import Json, JsonObject
from compatcheck.core.pointers import escape_token
from compatcheck.core.workloads import BUILTIN_GROUPS, PodLocation, api_group

MAX_DEPTH = 24  # mappings and lists below spec searched; deeper ones are not pod specs any operator writes
MAX_NODES = 20_000  # values visited per object, at most


def is_custom_resource(obj: JsonObject) -> bool:
    api_version = obj.get("apiVersion")
    if not isinstance(api_version, str) or not isinstance(obj.get("kind"), str):
        return False
    group = api_group(api_version)
    if group in BUILTIN_GROUPS or "." not in group:
        return False
    return not (group.endswith(".k8s.io") and not group.endswith(".x-k8s.io")) and group != "k8s.io"


def _container(value: Json) -> bool:
    return isinstance(value, dict) and isinstance(value.get("image"), str) and bool(value["image"].strip())


def _has_containers(node: JsonObject) -> bool:
    items = node.get("containers")
    return isinstance(items, list) and any(_container(c) for c in items)


def discover(obj: JsonObject) -> list[PodLocation]:
    """The pod locations found by shape in ``obj``'s spec (exact pointers, no wildcards), in document order."""
    spec = obj.get("spec")
    if not isinstance(spec, dict) or not is_custom_resource(obj):
        return []
    found: list[PodLocation] = []
    budget = [MAX_NODES]

    def walk(node: Json, pointer: str, depth: int) -> None:
        budget[0] -= 1
        if budget[0] < 0 or depth > MAX_DEPTH:
            return
        if isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{pointer}/{i}", depth + 1)
            return
        if not isinstance(node, dict):
            return
        inner = node.get("spec")
        if isinstance(inner, dict) and _has_containers(inner):
            found.append(PodLocation(pointer, "template"))
            return
        if _has_containers(node):
            found.append(PodLocation(pointer, "podspec"))
            return
        singles = tuple(k for k, v in node.items() if isinstance(k, str) and k != "*" and _container(v)
                        and isinstance(v.get("resources"), dict))
        if singles:
            found.append(PodLocation(pointer, "podspec", singles))
        for k, v in node.items():
            if isinstance(k, str) and k not in singles and k != "*":
                walk(v, f"{pointer}/{escape_token(k)}", depth + 1)

    walk(spec, "/spec", 0)
    return found


__all__ = ["discover", "is_custom_resource"]
