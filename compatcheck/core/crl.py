"""cf-crl CustomResourceLimitation ConfigMaps: validation and the index of groups and keys.

A CRL ConfigMap declares one resource key of a group (``kube-public/cf-crl-{customName}-{keyName}``);
keys of one group are associated: a container that uses any of them is held to the policies of all.
Pure apart from reading the packaged JSON Schema; never half-applies an invalid ConfigMap.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from compatcheck.core.jsonutil import Json, JsonObject, mapping, text
from compatcheck.core.model import Diagnostic
from compatcheck.core.quantities import QuantityError, parse_quantity

CRL_TYPE_LABEL = "features.alauda.io/type"
CRL_GROUP_LABEL = "features.alauda.io/group"
CRL_ENABLED_LABEL = "features.alauda.io/enabled"
CRL_TYPE = "CustomResourceLimitation"


# The policies of crl.schema.json, which ``crl_problems`` holds every indexed ConfigMap to.
DataType = Literal["integer", "float", "quantity"]
LimitsPolicy = Literal["disabled", "required", "optional"]
RequestsPolicy = Literal["disabled", "required", "fromLimits"]


@dataclass(frozen=True)
class CrlKey:
    key: str
    data_type: DataType
    default: str | None
    limits: LimitsPolicy
    requests: RequestsPolicy
    group: str
    configmap: str


@dataclass
class CrlIndex:
    groups: dict[str, dict[str, CrlKey]] = field(default_factory=dict)

    def add(self, k: CrlKey) -> None:
        self.groups.setdefault(k.group, {})[k.key] = k

    def groups_using(self, keys: set[str]) -> list[str]:
        return sorted(g for g, members in self.groups.items() if keys & members.keys())

    def __bool__(self) -> bool:
        return bool(self.groups)


def claims_crl(obj: JsonObject) -> bool:
    if obj.get("kind") != "ConfigMap":
        return False
    meta = mapping(obj.get("metadata"))
    labels = mapping(meta.get("labels"))
    name = text(meta.get("name")) or ""
    return labels.get(CRL_TYPE_LABEL) == CRL_TYPE or name.startswith("cf-crl-")


@cache
def _validator() -> Any:  # a jsonschema validator (jsonschema ships no type hints)
    from importlib import resources  # only when a CRL is read (importlib.resources costs every start ~5 ms)

    from jsonschema import Draft202012Validator  # lazy: ~100 ms import, only when CRLs appear

    schema = json.loads(resources.files("compatcheck.schemas").joinpath("crl.schema.json").read_text("utf-8"))
    return Draft202012Validator(schema)


_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")  # one way to match: linear


def value_matches(data_type: DataType, value: Json) -> bool:
    if data_type == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]+", value.strip()) is not None)
    if data_type == "float":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        return isinstance(value, str) and _FLOAT.fullmatch(value.strip()) is not None
    try:
        parse_quantity(value)
        return True
    except QuantityError:
        return False


def crl_problems(obj: JsonObject, path: str = "") -> list[Diagnostic]:
    """Why ``obj`` is not a valid CRL ConfigMap (errors of kind ``crl``, with a pointer into it; ``path``: the file
    it came from, "" for an admitted or watched object); empty when it is valid."""
    problems: list[Diagnostic] = []
    for err in sorted(_validator().iter_errors(obj), key=lambda e: list(e.absolute_path)):
        pointer = "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in err.absolute_path)
        problems.append(Diagnostic(path, _short(err), pointer=pointer, kind="crl"))
    if problems:
        return problems
    meta, data = obj["metadata"], obj["data"]
    if data["group"] != meta["labels"][CRL_GROUP_LABEL]:
        problems.append(Diagnostic(path, f"data.group {data['group']!r} differs from label "
                                         f"{CRL_GROUP_LABEL}={meta['labels'][CRL_GROUP_LABEL]!r}",
                                   pointer="/data/group", kind="crl"))
    if "defaultValue" in data and not value_matches(data["dataType"], data["defaultValue"]):
        problems.append(Diagnostic(path, f"defaultValue {data['defaultValue']!r} is not a valid {data['dataType']}",
                                   pointer="/data/defaultValue", kind="crl"))
    if data["limits"] == "disabled" and data["requests"] == "fromLimits":
        problems.append(Diagnostic(path, "requests: fromLimits needs limits to be required or optional",
                                   pointer="/data/requests", kind="crl"))
    return problems


def _short(err: Any) -> str:  # a jsonschema ValidationError (untyped)
    where = ".".join(str(p) for p in err.absolute_path) or "(root)"
    msg = err.message if len(err.message) < 160 else err.message[:157] + "..."
    return f"{where}: {msg}"


def crl_key(obj: JsonObject) -> CrlKey:
    """The key of a ConfigMap that ``crl_problems`` accepted."""
    data = obj["data"]
    return CrlKey(data["key"], data["dataType"], data.get("defaultValue"), data["limits"], data["requests"],
                  data["group"], obj["metadata"]["name"])


def is_enabled(obj: JsonObject) -> bool:
    labels = obj.get("metadata", {}).get("labels", {})
    return isinstance(labels, dict) and labels.get(CRL_ENABLED_LABEL) == "true"


def build_index(objects: list[JsonObject]) -> tuple[CrlIndex, list[tuple[JsonObject, list[Diagnostic]]]]:
    """Index of the valid, enabled CRLs, and the invalid ones with their problems (ignored whole)."""
    index = CrlIndex()
    invalid = []
    for obj in objects:
        problems = crl_problems(obj)
        if problems:
            invalid.append((obj, problems))
        elif is_enabled(obj):
            index.add(crl_key(obj))
    return index, invalid
