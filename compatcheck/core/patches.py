"""Applying fixes: RFC 6902 ops on a deep copy, conflicts detected, never half-applied.

``apply_fixes`` is shared by ``compatcheck fix`` and the mutating webhook (which then diffs the
original against the result to emit the final patch). Pure.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from compatcheck.core.jsonutil import Json
from compatcheck.core.model import Applicability, Finding, PatchOp
from compatcheck.core.pointers import escape_token, split_pointer


class FixError(ValueError):
    pass


def apply_ops(doc: Json, ops: Iterable[PatchOp]) -> Json:
    """Apply ops to a deep copy of ``doc``; raise FixError (and change nothing) if any op fails."""
    out = copy.deepcopy(doc)
    for op in ops:
        out = _apply(out, op)
    return out


def _apply(doc: Json, op: PatchOp) -> Json:
    tokens = split_pointer(op.path)
    if not tokens:
        if op.op in ("add", "replace"):
            return copy.deepcopy(op.value)
        raise FixError(f"cannot {op.op} the document root")
    parent: Json = doc
    for t in tokens[:-1]:
        if isinstance(parent, dict) and t in parent:
            parent = parent[t]
        elif isinstance(parent, list) and t.isdigit() and int(t) < len(parent):
            parent = parent[int(t)]
        else:
            raise FixError(f"{op.op} {op.path}: parent does not exist")
    last = tokens[-1]
    value = copy.deepcopy(op.value)
    if isinstance(parent, dict):
        if op.op == "add":
            parent[last] = value
        elif op.op == "replace":
            if last not in parent:
                raise FixError(f"replace {op.path}: no such member")
            parent[last] = value
        elif op.op == "remove":
            if last not in parent:
                raise FixError(f"remove {op.path}: no such member")
            del parent[last]
        elif op.op == "test" and parent.get(last) != value:
            raise FixError(f"test {op.path} failed")
    elif isinstance(parent, list):
        if last == "-" and op.op == "add":
            parent.append(value)
            return doc
        if not last.isdigit():
            raise FixError(f"{op.op} {op.path}: bad list index")
        i = int(last)
        if op.op == "add" and i <= len(parent):
            parent.insert(i, value)
        elif op.op == "replace" and i < len(parent):
            parent[i] = value
        elif op.op == "remove" and i < len(parent):
            del parent[i]
        elif op.op == "test" and (i >= len(parent) or parent[i] != value):
            raise FixError(f"test {op.path} failed")
        elif op.op in ("add", "replace", "remove"):
            raise FixError(f"{op.op} {op.path}: index out of range")
    else:
        raise FixError(f"{op.op} {op.path}: parent is not a container")
    return doc


def set_path_ops(data: Json, base: str, path: tuple[str, ...], value: Json) -> tuple[PatchOp, ...]:
    """The op that sets ``path`` under ``data`` (found at pointer ``base``) to ``value``, creating the missing
    parents as one nested value: RFC 6902 ``add`` needs the parent to exist."""
    node: Json = data
    pointer = base
    for i, token in enumerate(path):
        pointer += "/" + escape_token(token)
        if not isinstance(node, dict) or token not in node or (i < len(path) - 1 and not isinstance(node[token], dict)):
            rest: Json = value
            for t in reversed(path[i + 1:]):
                rest = {t: rest}
            return (PatchOp("replace" if isinstance(node, dict) and token in node else "add", pointer, rest),)
        node = node[token]
    return (PatchOp("replace", pointer, value),)


def set_paths_ops(data: Json, base: str, values: dict[tuple[str, ...], Json]) -> tuple[PatchOp, ...]:
    """``set_path_ops`` for several paths, each computed against the data as the previous ones left it."""
    current = copy.deepcopy(data)
    ops: list[PatchOp] = []
    for path, value in values.items():
        step = set_path_ops(current, "", path, value)
        current = apply_ops(current, step)
        ops.extend(PatchOp(op.op, base + op.path, op.value) for op in step)
    return tuple(ops)


def select_fixes(findings: Iterable[Finding], allow: set[Applicability]) -> list[Finding]:
    """Findings whose fix may be applied, one per target path: a second fix writing the same path is a
    conflict and is skipped (reported by the caller), never applied in arbitrary order."""
    chosen: list[Finding] = []
    written: set[str] = set()
    for f in findings:
        if f.fix is None or f.fix.applicability not in allow:
            continue
        paths = {op.path.rstrip("-") for op in f.fix.ops}
        if paths & written:
            continue
        written |= paths
        chosen.append(f)
    return chosen


def apply_fixes(obj: Json, findings: Iterable[Finding], allow: set[Applicability]) -> tuple[Json, list[Finding]]:
    """Apply the allowed fixes; each fix is all-or-nothing. Returns the new object and the fixes applied."""
    current = obj
    applied = []
    for f in select_fixes(findings, allow):
        assert f.fix is not None
        try:
            current = apply_ops(current, f.fix.ops)
        except FixError:
            continue
        applied.append(f)
    return current, applied
