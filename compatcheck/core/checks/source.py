"""Check types about how a manifest was written, read as kubectl reads YAML (go-yaml v2, YAML 1.1):
``duplicate-keys`` (a key written twice: kubectl and the API server keep the last) and ``string-fields`` (a
field the API server reads as a string holds a boolean or a number, which YAML 1.1 makes of unquoted
on/off/yes/no/y/n and 0755: the API server rejects the object)."""

from __future__ import annotations

from collections.abc import Iterator

from compatcheck.core.checks import register
from compatcheck.core.checks.base import (
    NO_PARAMS_SCHEMA,
    EvalContext,
    NoParams,
    ObjectCheck,
    ObjectTarget,
    Violation,
    no_params,
)
from compatcheck.core.jsonutil import Json, mapping, sequence
from compatcheck.core.pointers import escape_token


def _duplicate_keys(target: ObjectTarget, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    for d in target.duplicates:
        yield Violation(f"key {d.key!r} is written twice in one mapping (lines {d.first_line} and {d.line}): "
                        f"kubectl and the API server keep the value on line {d.line} and drop the other without a "
                        "word; compatcheck lints the object as they do", d.pointer)


register(ObjectCheck(
    name="duplicate-keys",
    description="Reports the keys the YAML reader saw twice in one mapping of the object (it keeps the last, as "
                "kubectl and the API server do).",
    gpu_only=False,
    params_schema=NO_PARAMS_SCHEMA,
    prepare=no_params,
    evaluate=_duplicate_keys,
))


def _describe(value: Json) -> str | None:
    """What a non-string value is, in words; None for a string or null (the API server reads null as "")."""
    if isinstance(value, bool):
        word = "true" if value else "false"
        return f"the boolean {word} (kubectl reads the unquoted words y, yes, on, true, n, no, off and false, in " \
               "lower case, capitalised or upper case, as booleans, as YAML 1.1 does)"
    if isinstance(value, (int, float)):
        number = int(value) if isinstance(value, float) and value.is_integer() else value
        return f"the number {number} (kubectl reads unquoted numbers as numbers, a leading 0 as octal: 0755 is 493)"
    if isinstance(value, (dict, list)):
        return "a mapping" if isinstance(value, dict) else "a list"
    return None


def _string_map(value: Json, pointer: str, what: str) -> Iterator[Violation]:
    for k, v in mapping(value).items():
        found = _describe(v)
        if found is not None:
            yield _violation(f"{what} {k!r}", found, f"{pointer}/{escape_token(str(k))}")


def _string_list(value: Json, pointer: str, what: str, container: str | None = None) -> Iterator[Violation]:
    for i, v in enumerate(sequence(value)):
        found = _describe(v)
        if found is not None:
            yield _violation(f"{what}[{i}]", found, f"{pointer}/{i}", container)


def _string(value: Json, pointer: str, what: str, container: str | None = None) -> Iterator[Violation]:
    found = _describe(value)
    if found is not None:
        yield _violation(what, found, pointer, container)


def _violation(what: str, found: str, pointer: str, container: str | None = None) -> Violation:
    return Violation(f"{what} is {found}, not a string: the API server rejects the object; quote the value",
                     pointer, container)


def _string_fields(target: ObjectTarget, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    meta = mapping(target.obj.get("metadata"))
    yield from _string_map(meta.get("labels"), "/metadata/labels", "label")
    yield from _string_map(meta.get("annotations"), "/metadata/annotations", "annotation")
    for pod in target.pods:
        if pod.template_pointer is not None:
            tmeta = mapping(mapping(_at(target.obj, pod.template_pointer)).get("metadata"))
            base = f"{pod.template_pointer}/metadata"
            yield from _string_map(tmeta.get("labels"), f"{base}/labels", "pod template label")
            yield from _string_map(tmeta.get("annotations"), f"{base}/annotations", "pod template annotation")
        spec, at = pod.spec, pod.pointer
        yield from _string_map(spec.get("nodeSelector"), f"{at}/nodeSelector", "nodeSelector")
        for i, t in enumerate(sequence(spec.get("tolerations"))):
            for field in ("key", "operator", "value", "effect"):
                if field in mapping(t):
                    yield from _string(mapping(t)[field], f"{at}/tolerations/{i}/{field}", f"toleration {field}")
        for c in pod.containers:
            d, cp = c.data, c.pointer
            for field in ("name", "image", "workingDir"):
                if field in d:
                    yield from _string(d[field], f"{cp}/{field}", f"container {field}", c.name)
            for field in ("command", "args"):
                yield from _string_list(d.get(field), f"{cp}/{field}", field, c.name)
            for i, e in enumerate(sequence(d.get("env"))):
                env = mapping(e)
                if "value" in env:
                    yield from _string(env["value"], f"{cp}/env/{i}/value", f"env {env.get('name')!s} value", c.name)


def _at(obj: Json, pointer: str) -> Json:
    node = obj
    for token in pointer.strip("/").split("/") if pointer else ():
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict):
            node = node.get(token)
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return node


register(ObjectCheck(
    name="string-fields",
    description="Reports booleans and numbers in the fields of the object and its pod specs that the API server "
                "reads as strings (labels, annotations, nodeSelector, tolerations, container name, image, "
                "command, args, workingDir, env values).",
    gpu_only=False,
    params_schema=NO_PARAMS_SCHEMA,
    prepare=no_params,
    evaluate=_string_fields,
))
