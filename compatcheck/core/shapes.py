"""The JSON types of the pod spec fields the rules read, checked where a pod spec is read (``engine.evaluate``).

The API server decodes an object into its Go types before anything else looks at it: a list where a string
belongs (``matchExpressions: [{key: [a]}]``), ``matchExpressions: true`` or a number as a toleration is refused
("cannot unmarshal array into Go struct field ... of type string"). compatcheck answers such an object with an
input problem at the field's pointer (its file and line in a lint), and does not run the rules on that pod spec:
they would read a value that cannot exist. Only structural mismatches are problems here (a collection where a
scalar belongs, a scalar or the other collection where a collection belongs); a scalar of the wrong type is left to
the rules (``yaml-non-string-value`` reports ``value: true``, with a fix). A ``null`` is what Go reads as absent,
and is accepted. Pure.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from compatcheck.core.jsonutil import Json
from compatcheck.core.pointers import escape_token

MAX_PROBLEMS = 10  # per pod spec: the first few say what is wrong

# A schema is a type (str, int, bool), QUANTITY, a one-element list (a list of that schema), a dict of field
# schemas (an object; other fields are not looked at), or {str: schema} (a map with string keys).
QUANTITY = "quantity"  # a string or a number (resource.Quantity's UnmarshalJSON takes both)
_SELECTOR_REQUIREMENT = {"key": str, "operator": str, "values": [str]}
_NODE_SELECTOR_TERM = {"matchExpressions": [_SELECTOR_REQUIREMENT], "matchFields": [_SELECTOR_REQUIREMENT]}
_LABEL_SELECTOR = {"matchLabels": {str: str}, "matchExpressions": [_SELECTOR_REQUIREMENT]}
_POD_AFFINITY_TERM = {"labelSelector": _LABEL_SELECTOR, "namespaceSelector": _LABEL_SELECTOR, "namespaces": [str],
                      "topologyKey": str}
_POD_AFFINITY = {"requiredDuringSchedulingIgnoredDuringExecution": [_POD_AFFINITY_TERM],
                 "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": int,
                                                                      "podAffinityTerm": _POD_AFFINITY_TERM}]}
_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [_NODE_SELECTOR_TERM]},
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": int, "preference": _NODE_SELECTOR_TERM}],
    },
    "podAffinity": _POD_AFFINITY,
    "podAntiAffinity": _POD_AFFINITY,
}
_TOLERATION = {"key": str, "operator": str, "value": str, "effect": str, "tolerationSeconds": int}
_RESOURCES = {"limits": {str: QUANTITY}, "requests": {str: QUANTITY}, "claims": [{"name": str, "request": str}]}
_ENV = {"name": str, "value": str}
CONTAINER: dict[str, Any] = {"name": str, "image": str, "command": [str], "args": [str], "env": [_ENV],
                             "resources": _RESOURCES}
POD_SPEC: dict[str, Any] = {
    "affinity": _AFFINITY, "tolerations": [_TOLERATION], "nodeSelector": {str: str}, "runtimeClassName": str,
    "schedulerName": str, "priorityClassName": str, "containers": [CONTAINER], "initContainers": [CONTAINER],
    "resourceClaims": [{"name": str, "resourceClaimName": str, "resourceClaimTemplateName": str}],
}
_NAMES = {str: "a string", int: "an integer", bool: "a boolean", QUANTITY: "a quantity (a string or a number)"}


def kind_of(value: Json) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return "null"


def _fits(value: Json, expected: Any) -> bool:
    """Only a collection where a scalar belongs, or a scalar or the other collection where a collection belongs: a
    scalar of another type where a scalar belongs (``value: true`` for a string) is the finding of the rule
    ``yaml-non-string-value``, or an input problem of the check that reads it."""
    if expected in (str, int, bool, QUANTITY):
        return not isinstance(value, (list, dict))
    if isinstance(expected, list):
        return isinstance(value, list)
    return isinstance(value, dict)


def _expected(schema: Any) -> str:
    if isinstance(schema, list):
        return "a list"
    if isinstance(schema, dict):
        return "a mapping"
    return _NAMES[schema]


def problems(value: Json, schema: Any, pointer: str) -> Iterator[tuple[str, str]]:
    """(pointer, message) for each field of ``value`` whose JSON type ``schema`` refuses, depth first; iterative."""
    stack: list[tuple[Json, Any, str]] = [(value, schema, pointer)]
    while stack:
        node, expected, at = stack.pop()
        if node is None:
            continue
        if not _fits(node, expected):
            yield at, f"{_name(at)}: expected {_expected(expected)}, found {kind_of(node)}"
            continue
        if isinstance(expected, list):
            stack.extend((item, expected[0], f"{at}/{i}") for i, item in reversed(list(enumerate(node))))
        elif isinstance(expected, dict):
            if str in expected:
                stack.extend((v, expected[str], f"{at}/{escape_token(str(k))}") for k, v in node.items())
            else:
                stack.extend((node[k], sub, f"{at}/{escape_token(k)}") for k, sub in reversed(expected.items())
                             if k in node)


def _name(pointer: str) -> str:
    """A field's name for a message: its key, or its parent's key and index (``tolerations[1]``)."""
    parent, _, last = pointer.rpartition("/")
    if last.isascii() and last.isdigit():
        return f"{_name(parent)}[{last}]" if parent else f"[{last}]"
    return last.replace("~1", "/").replace("~0", "~") or "value"


def pod_spec_problems(spec: Json, pointer: str) -> list[tuple[str, str]]:
    """The first ``MAX_PROBLEMS`` type problems of a pod spec at ``pointer``."""
    out: list[tuple[str, str]] = []
    for found in problems(spec, POD_SPEC, pointer):
        out.append(found)
        if len(out) >= MAX_PROBLEMS:
            break
    return out
