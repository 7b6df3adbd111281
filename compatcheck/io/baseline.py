"""Baseline files: adopt the linter on a big repository and fail only on new findings.

A finding's identity is (rule, file, object, container, pointer): no line numbers, so unrelated edits
do not resurrect old findings. Counts are kept, so a second identical finding is still new.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import replace
from typing import Any

from compatcheck.core.model import Diagnostic, Finding
from compatcheck.core.rules import schema_problems
from compatcheck.io.loader import packaged_schema
from compatcheck.io.manifests import parse_text

Key = tuple[str, str, str, str, str, str]


def _norm(path: str, root: str | None = None) -> str:
    if root is not None and path != "-":
        return os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/")
    return os.path.normpath(os.path.relpath(path)) if os.path.isabs(path) else os.path.normpath(path)


def root_of(baseline_path: str) -> str:
    """The directory a baseline's file paths are relative to: the baseline file's own, so that it matches from
    any working directory."""
    return os.path.dirname(os.path.abspath(baseline_path))


def key(f: Finding, root: str | None = None) -> Key:
    """A finding's identity; its file relative to ``root`` (a baseline's directory), else as given."""
    return (f.rule_id, _norm(f.source.path, root) if f.source else "", f.obj.kind or "",
            f"{f.obj.namespace or ''}/{f.obj.name or ''}", f.container or "", f.pointer)


def dump(findings: list[Finding], root: str | None = None) -> str:
    entries = sorted(key(f, root) for f in findings)
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
    """The findings of a baseline file, counted. Raises BaselineError with every located problem: the file is
    validated by ``schemas/baseline.schema.json``."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError([Diagnostic(path, f"cannot read baseline: {exc}", exc.lineno, kind="baseline")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError([Diagnostic(path, f"cannot read baseline: {exc}", kind="baseline")]) from None
    if not isinstance(data, dict) or data.get("version") != 1 or not isinstance(data.get("findings"), list):
        raise BaselineError([Diagnostic(path, "not a compatcheck baseline (version 1)", kind="baseline")])
    found = schema_problems(data, packaged_schema("baseline.schema.json"), path, "baseline")
    if found:  # rare: parse again, with positions, for the lines
        docs = parse_text(path, text).documents
        raise BaselineError([replace(p, line=docs[0].locate(p.pointer)[0]) if docs else p for p in found])
    out: Counter[Key] = Counter()
    for e in data["findings"]:
        out[(e["rule"], e["file"], e["kind"], e["object"], e["container"], e["pointer"])] += 1
    return out
