"""shapes: the JSON type problems of a pod spec, each at its pointer with the field's name, what was expected and
what was found, depth first and at most MAX_PROBLEMS."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core.shapes import MAX_PROBLEMS, POD_SPEC, QUANTITY, kind_of, pod_spec_problems, problems


@pytest.mark.parametrize(("value", "kind"), [
    (True, "a boolean"), (False, "a boolean"), (0, "an integer"), (1.5, "a number"), ("", "a string"),
    ([], "a list"), ({}, "a mapping"), (None, "null"),
])
def test_kind_of(value: Any, kind: str) -> None:
    assert kind_of(value) == kind


def test_pod_spec_problems_in_document_order_with_names() -> None:
    spec = {"tolerations": [1, [2], {"key": ["a"], "tolerationSeconds": "x"}, None], "nodeSelector": 3.5,
            "containers": {"a": 1}, "initContainers": [{"resources": {"limits": {"nvidia.com/gpu": {"n": 1}},
                                                                      "requests": [1]}}],
            "runtimeClassName": {"a": None}, "unknownField": [[[]]]}
    assert pod_spec_problems(spec, "/spec/template/spec") == [
        ("/spec/template/spec/tolerations/0", "tolerations[0]: expected a mapping, found an integer"),
        ("/spec/template/spec/tolerations/1", "tolerations[1]: expected a mapping, found a list"),
        ("/spec/template/spec/tolerations/2/key", "key: expected a string, found a list"),
        ("/spec/template/spec/nodeSelector", "nodeSelector: expected a mapping, found a number"),
        ("/spec/template/spec/runtimeClassName", "runtimeClassName: expected a string, found a mapping"),
        ("/spec/template/spec/containers", "containers: expected a list, found a mapping"),
        ("/spec/template/spec/initContainers/0/resources/limits/nvidia.com~1gpu",
         "nvidia.com/gpu: expected a quantity (a string or a number), found a mapping"),
        ("/spec/template/spec/initContainers/0/resources/requests", "requests: expected a mapping, found a list"),
    ]


def test_nested_indexes_and_escaped_keys_are_named() -> None:
    assert list(problems([[{"a": 1}]], [[str]], "")) == [("/0/0", "[0][0]: expected a string, found a mapping")]
    assert list(problems({"a~b/c": [1]}, {str: str}, "")) == [("/a~0b~1c", "a~b/c: expected a string, found a list")]
    assert list(problems([1], {"x": int}, "")) == [("", "value: expected a mapping, found a list")]
    assert list(problems({"x": [1]}, {"x": QUANTITY}, "/r")) == [
        ("/r/x", "x: expected a quantity (a string or a number), found a list")]
    assert list(problems({"x": {}}, {"x": bool}, "/r")) == [("/r/x", "x: expected a boolean, found a mapping")]
    assert list(problems({"x": []}, {"x": int}, "/r")) == [("/r/x", "x: expected an integer, found a list")]


def test_a_scalar_of_another_type_and_null_are_left_to_the_rules() -> None:
    assert pod_spec_problems({"schedulerName": 5, "tolerations": None, "nodeSelector": {"a": True},
                              "containers": [None, {"image": 3, "args": [1, None]}]}, "/spec") == []


def test_at_most_max_problems_per_pod_spec() -> None:
    assert MAX_PROBLEMS == 10
    spec = {"tolerations": list(range(12))}
    found = pod_spec_problems(spec, "")
    assert [p for p, _m in found] == [f"/tolerations/{i}" for i in range(10)]
    assert len(list(problems(spec, POD_SPEC, ""))) == 12
    assert len(pod_spec_problems({"tolerations": list(range(10))}, "")) == 10
