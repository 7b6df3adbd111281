"""discovery: which objects are custom resources, and the exact pod locations found by shape in one (templates,
pod specs, single containers), with the depth and size bounds of the search."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core.discovery import MAX_DEPTH, MAX_NODES, discover, is_custom_resource
from compatcheck.core.workloads import PodLocation

IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"
C = {"name": "c", "image": IMAGE}
SINGLE = {"image": IMAGE, "resources": {}}


def cr(spec: Any, api_version: Any = "tuning.example.ai/v1", kind: Any = "FineTune") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, "spec": spec}


def found(spec: Any) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(loc.pattern, loc.shape, loc.single_containers) for loc in discover(cr(spec))]


@pytest.mark.parametrize(("api_version", "kind", "custom"), [
    ("tuning.example.ai/v1", "FineTune", True), ("jobset.x-k8s.io/v1alpha2", "JobSet", True),
    ("kueue.x-k8s.io/v1beta1", "Workload", True), ("x-k8s.io/v1", "Thing", True),
    ("example.io", "Thing", False),  # no "/": a version of the core group
    ("tuning.example.ai/v1", None, False), ("tuning.example.ai/v1", 3, False), (None, "FineTune", False),
    ("v1", "Pod", False), ("apps/v1", "Deployment", False), ("batch/v1", "Job", False),
    ("extensions/v1beta1", "Deployment", False), ("policy/v1", "PodDisruptionBudget", False),
    ("networking.k8s.io/v1", "Ingress", False), ("resource.k8s.io/v1", "ResourceClaim", False),
    ("k8s.io/v1", "Thing", False), ("example.k8s.io.evil/v1", "Thing", True),
])
def test_only_custom_resources_are_searched(api_version: Any, kind: Any, custom: bool) -> None:
    obj = {"apiVersion": api_version, "kind": kind}
    assert is_custom_resource(obj) is custom
    spec = {"template": {"spec": {"containers": [C]}}}
    assert bool(discover({**obj, "spec": spec})) is custom


@pytest.mark.parametrize("spec", [None, [], "containers", 3])
def test_a_spec_that_is_no_mapping_holds_nothing(spec: Any) -> None:
    assert found(spec) == []


def test_a_template_a_pod_spec_and_single_containers_in_document_order() -> None:
    spec = {
        "launcher": {"template": {"spec": {"containers": [C]}}},
        "workers": [{"replicas": 2, "podSpec": {"containers": [{"image": " "}, C]}}, "text", 4],
        "steps": [{"a": SINGLE, "*": SINGLE, "b": {"image": IMAGE}, "c": {**SINGLE, "resources": []},
                   "d/e~f": SINGLE, "inner": {"x": {"containers": [C]}}}],
    }
    assert found(spec) == [
        ("/spec/launcher/template", "template", ()),
        ("/spec/workers/0/podSpec", "podspec", ()),
        ("/spec/steps/0", "podspec", ("a", "d/e~f")),
        ("/spec/steps/0/inner/x", "podspec", ()),
    ]


def test_the_spec_itself_can_be_the_pod_spec_or_hold_the_template() -> None:
    assert found({"containers": [C]}) == [("/spec", "podspec", ())]
    assert found({"spec": {"containers": [C]}}) == [("/spec", "template", ())]


def test_what_is_found_is_not_searched_again() -> None:
    nested = {"containers": [C], "sidecar": {"spec": {"containers": [C]}}}
    assert found({"t": {"spec": nested}}) == [("/spec/t", "template", ())]
    assert found({"p": nested}) == [("/spec/p", "podspec", ())]


@pytest.mark.parametrize("containers", [
    [], [{}], [{"image": ""}], [{"image": "  "}], [{"image": 5}], ["nvidia/cuda"], {"main": C}, "C", None,
])
def test_no_container_no_workload(containers: Any) -> None:
    assert found({"template": {"spec": {"containers": containers}}, "pod": {"containers": containers}}) == []


def test_keys_are_escaped_in_the_pointer() -> None:
    assert found({"a/b": {"c~d": {"containers": [C]}}}) == [("/spec/a~1b/c~0d", "podspec", ())]


def test_a_star_key_is_not_searched() -> None:
    assert found({"*": {"containers": [C]}, "ok": {"containers": [C]}}) == [("/spec/ok", "podspec", ())]


def nest(depth: int, leaf: Any) -> Any:
    """``leaf`` ``depth`` mappings below spec (spec itself is depth 0)."""
    for _ in range(depth):
        leaf = {"d": leaf}
    return leaf


def test_the_search_goes_down_max_depth_levels() -> None:
    assert MAX_DEPTH == 24
    pod = {"containers": [C]}
    assert found(nest(MAX_DEPTH, pod)) == [("/spec" + "/d" * MAX_DEPTH, "podspec", ())]
    assert found(nest(MAX_DEPTH + 1, pod)) == []
    assert found(nest(MAX_DEPTH - 1, [pod])) == [("/spec" + "/d" * (MAX_DEPTH - 1) + "/0", "podspec", ())]
    assert found(nest(MAX_DEPTH, [pod])) == []


def test_the_search_visits_at_most_max_nodes_values() -> None:
    assert MAX_NODES == 20_000
    pod = {"containers": [C]}
    # spec, the list and its items, then the pod spec: 1 + 1 + n + 1 values
    assert found({"a": [0] * (MAX_NODES - 3), "b": pod}) == [("/spec/b", "podspec", ())]
    assert found({"a": [0] * (MAX_NODES - 2), "b": pod}) == []


def test_locations_are_exact_pod_locations() -> None:
    assert discover(cr({"containers": [C]})) == [PodLocation("/spec", "podspec")]
