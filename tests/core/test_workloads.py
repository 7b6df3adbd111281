"""workloads: the kind table's lookups, object references, and every field of the pod targets and containers
found (pointers, annotations, labels, template pointers, container names and order)."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core.model import ObjectRef
from compatcheck.core.workloads import (
    ContainerTarget,
    PodLocation,
    _walk,
    api_group,
    known_kind_names,
    object_ref,
    pod_targets,
    workload_kind,
)
from compatcheck.io.loader import builtin_kinds

WORKLOAD_KINDS = builtin_kinds().kinds  # the built-in table (rules/data/workload-kinds.yaml)


def test_known_kind_names_is_every_kind_of_the_table() -> None:
    names = known_kind_names()
    assert names == {wk.kind for wk in WORKLOAD_KINDS}
    assert {"Pod", "Deployment", "PaddleJob", "Job", "InferenceGraph", "Service"} <= names


def test_template_locations_default_to_the_template_shape() -> None:
    (deployment,) = [wk for wk in WORKLOAD_KINDS if wk.kind == "Deployment"]
    assert deployment.locations == (PodLocation("/spec/template", "template", ()),)


@pytest.mark.parametrize(("api_version", "group"), [
    ("apps/v1", "apps"), ("v1", ""), ("batch.volcano.sh/v1alpha1", "batch.volcano.sh"), ("a/b/v1", "a/b"), ("", "")])
def test_api_group(api_version: str, group: str) -> None:
    assert api_group(api_version) == group


@pytest.mark.parametrize(("obj", "kind"), [
    ({"apiVersion": "apps/v1", "kind": "Deployment"}, ("apps", "Deployment")),
    ({"apiVersion": "extensions/v1beta1", "kind": "Deployment"}, ("apps", "Deployment")),
    ({"apiVersion": "v1", "kind": "Pod"}, ("", "Pod")),
    ({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job"}, ("batch.volcano.sh", "Job")),
    ({"apiVersion": "apps/v1", "kind": "Pod"}, None),
    ({"apiVersion": "v1", "kind": "Deployment"}, None),
    ({"apiVersion": 1, "kind": "Pod"}, None),
    ({"apiVersion": "v1", "kind": ["Pod"]}, None),
    ({"kind": "Pod"}, None),
    ({"apiVersion": "v1"}, None),
])
def test_workload_kind(obj: dict[str, Any], kind: tuple[str, str] | None) -> None:
    wk = workload_kind(obj)
    assert (None if wk is None else (wk.groups[0], wk.kind)) == kind


@pytest.mark.parametrize(("obj", "ref"), [
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "generateName": "g-"}},
     ObjectRef("v1", "Pod", "ns", "p")),
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "g-"}}, ObjectRef("v1", "Pod", None, "g-*")),
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": 5, "generateName": 6, "namespace": 7}},
     ObjectRef("v1", "Pod", None, None)),
    ({"apiVersion": 2, "kind": None, "metadata": ["x"]}, ObjectRef(None, None, None, None)),
    ({}, ObjectRef(None, None, None, None)),
])
def test_object_ref(obj: dict[str, Any], ref: ObjectRef) -> None:
    assert object_ref(obj) == ref


def deployment() -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ns", "annotations": {"k": "obj", "o": 1, "none": None},
                         "labels": {"obj-label": "x"}},
            "spec": {"template": {"metadata": {"annotations": {"k": "tpl", "n": 2}, "labels": {"app": "a", "v": 3}},
                                  "spec": {"initContainers": [{"name": "init"}],
                                           "containers": [{"name": "main"}, "junk", {"image": "noname"}]}}}}


def test_a_template_pod_target_has_every_field() -> None:
    obj = deployment()
    (t,) = pod_targets(obj)
    assert t.ref == ObjectRef("apps/v1", "Deployment", "ns", "d") and t.obj is obj
    assert t.pointer == "/spec/template/spec" and t.spec is obj["spec"]["template"]["spec"]
    assert t.annotations == {"k": "tpl", "o": "1", "n": "2"}  # the template's over the object's, as strings
    assert t.labels == {"app": "a", "v": "3"}  # the pod's labels are the template's
    assert t.template_pointer == "/spec/template"
    assert t.template_annotations == {"k": "tpl", "n": 2}  # as written
    spec = obj["spec"]["template"]["spec"]
    assert t.containers == [
        ContainerTarget("init", "/spec/template/spec/initContainers/0", spec["initContainers"][0], True,
                        "/initContainers/0"),
        ContainerTarget("main", "/spec/template/spec/containers/0", spec["containers"][0], False, "/containers/0"),
        ContainerTarget("containers[2]", "/spec/template/spec/containers/2", spec["containers"][2], False,
                        "/containers/2")]


def test_a_template_without_metadata() -> None:
    obj = deployment()
    del obj["spec"]["template"]["metadata"]
    (t,) = pod_targets(obj)
    assert t.annotations == {"k": "obj", "o": "1"} and t.labels == {}
    assert t.template_pointer == "/spec/template" and t.template_annotations == {}


def test_a_pod_is_its_own_template() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": {"a": "1"},
                                                           "labels": {"l": "2"}},
           "spec": {"containers": [{"name": "c"}], "initContainers": "not a list"}}
    (t,) = pod_targets(pod)
    assert (t.pointer, t.annotations, t.labels) == ("/spec", {"a": "1"}, {"l": "2"})
    assert (t.template_pointer, t.template_annotations) == (None, None)
    assert [(c.name, c.pointer, c.init, c.rel) for c in t.containers] == [("c", "/spec/containers/0", False,
                                                                          "/containers/0")]


def test_podspec_locations_take_the_objects_annotations_and_labels() -> None:
    isvc = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "m", "annotations": {"a": "1"}, "labels": {"l": "2"}},
            "spec": {"predictor": {"containers": [{"name": "kserve-container"}], "model": {"name": "named"},
                                   "pytorch": "not a container", "tensorflow": {}},
                     "transformer": {"containers": [{"name": "t"}]}}}
    predictor, transformer = pod_targets(isvc)
    assert (predictor.pointer, predictor.annotations, predictor.labels) == ("/spec/predictor", {"a": "1"}, {"l": "2"})
    assert (predictor.template_pointer, predictor.template_annotations) == (None, None)
    assert [(c.name, c.pointer, c.rel, c.init) for c in predictor.containers] == [
        ("kserve-container", "/spec/predictor/containers/0", "/containers/0", False),
        ("named", "/spec/predictor/model", "/model", False),
        ("tensorflow", "/spec/predictor/tensorflow", "/tensorflow", False)]
    assert transformer.pointer == "/spec/transformer"


def test_wildcards_walk_maps_and_lists_with_escaped_keys() -> None:
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j"}, "spec": {
        "pytorchReplicaSpecs": {"NoTemplate": {}, "Broken": {"template": {"spec": ["not", "a", "spec"]}},
                                "Bare": {"template": "not a template"},
                                "a/b~c": {"template": {"spec": {"containers": [{"name": "x"}]}}}}}}
    (t,) = pod_targets(job)
    assert t.pointer == "/spec/pytorchReplicaSpecs/a~1b~0c/template/spec"
    assert t.template_pointer == "/spec/pytorchReplicaSpecs/a~1b~0c/template"
    ray = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r"}, "spec": {
        "headGroupSpec": {"template": {"spec": {"containers": [{"name": "head"}]}}},
        "workerGroupSpecs": [{"template": {"spec": {"containers": [{"name": "w0"}]}}}, {},
                             {"template": {"spec": {"containers": [{"name": "w2"}]}}}]}}
    assert [t.pointer for t in pod_targets(ray)] == [
        "/spec/headGroupSpec/template/spec", "/spec/workerGroupSpecs/0/template/spec",
        "/spec/workerGroupSpecs/2/template/spec"]
    ray["spec"]["workerGroupSpecs"] = {"not": "a list"}  # '*' on a map walks its values too
    assert [t.pointer for t in pod_targets(ray)] == ["/spec/headGroupSpec/template/spec"]


def test_a_wildcard_over_a_scalar_and_a_missing_path_find_nothing() -> None:
    job = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "spec": {"tfReplicaSpecs": "scalar"}}
    assert pod_targets(job) == []
    assert pod_targets({"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": 5}}) == []
    assert pod_targets({"apiVersion": "batch/v1", "kind": "Job"}) == []
    assert pod_targets({"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceGraph", "spec": {}}) == []


def test_object_metadata_of_the_wrong_type_reads_as_empty() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"annotations": ["x"], "labels": "y"},
           "spec": {"containers": [{"name": 7}]}}
    (t,) = pod_targets(pod)
    assert (t.annotations, t.labels) == ({}, {})
    assert t.containers[0].name == "containers[0]"  # a name that is not a string is no name


@pytest.mark.parametrize(("tokens", "found"), [
    (["a", "1", "b"], [("/a/1/b", 2)]),
    (["a", "2"], []),  # past the end
    (["a", "x"], []),
    (["m", "1"], [("/m/1", "one")]),  # a digit is a key in a mapping
    (["a", "*", "b"], [("/a/0/b", 1), ("/a/1/b", 2)]),
    (["s", "0"], []),
])
def test_pattern_tokens_walk_lists_by_index(tokens: list[str], found: list[tuple[str, Any]]) -> None:
    doc = {"a": [{"b": 1}, {"b": 2}], "m": {"1": "one"}, "s": "text"}
    assert list(_walk(doc, tokens, "")) == found
