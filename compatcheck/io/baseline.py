"""Baseline files: adopt the linter on a big repository and fail only on new findings.

A finding's identity is (rule, file, object, container, pointer): no line numbers, so unrelated edits
do not resurrect old findings. Counts are kept, so a second identical finding is still new.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

from compatcheck.core.model import Diagnostic, Finding

Key = tuple[str, str, str, str, str, str]


def _norm(path: str) -> str:
    return os.path.normpath(os.path.relpath(path)) if os.path.isabs(path) else os.path.normpath(path)


def key(f: Finding) -> Key:
    return (f.rule_id, _norm(f.source.path) if f.source else "", f.obj.kind or "",
            f"{f.obj.namespace or ''}/{f.obj.name or ''}", f.container or "", f.pointer)


def dump(findings: list[Finding]) -> str:
    entries = sorted(key(f) for f in findings)
    data = {"version": 1, "findings": [
        {"rule": r, "file": p, "kind": k, "object": o, "container": c, "pointer": ptr}
        for r, p, k, o, c, ptr in entries]}
    return json.dumps(data, indent=2) + "\n"


class BaselineError(ValueError):
    """A baseline file that cannot be used: its problems, as diagnostics of kind ``baseline``."""

    def __init__(self, problems: list[Diagnostic]) -> None:
        super().__init__("; ".join(f"{p.path}: {p.message}" for p in problems))
        self.problems = problems


def load(path: str) -> Counter[Key]:
    try:
        with open(path, encoding="utf-8") as fh:
            data: Any = json.load(fh)
    except (OSError, json.JSONDecodeError) as exc:
        raise BaselineError([Diagnostic(path, f"cannot read baseline: {exc}", kind="baseline")]) from None
    if not isinstance(data, dict) or data.get("version") != 1 or not isinstance(data.get("findings"), list):
        raise BaselineError([Diagnostic(path, "not a compatcheck baseline (version 1)", kind="baseline")])
    out: Counter[Key] = Counter()
    for e in data["findings"]:
        if isinstance(e, dict):
            out[(str(e.get("rule")), str(e.get("file")), str(e.get("kind")), str(e.get("object")),
                 str(e.get("container")), str(e.get("pointer")))] += 1
    return out
