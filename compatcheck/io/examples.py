"""The per-rule examples of docs/rules.md, read from the rule fixtures (``fixtures/<rule-id>/``): the first failing
case with what compatcheck says about it (its golden findings) and the first passing case, each with the cluster
view it is linted against. Reads files; renders nothing (``compatcheck.report.ruledocs`` does)."""

from __future__ import annotations

import json
import os

from compatcheck.report.ruledocs import Example, RuleExamples

_SCHEMA_COMMENT = "# yaml-language-server:"


def _example(directory: str, shown: str, name: str) -> Example:
    with open(os.path.join(directory, name), encoding="utf-8") as fh:
        text = "".join(ln for ln in fh if not ln.startswith(_SCHEMA_COMMENT))
    case = name.split(".")[1]
    nodes = next((n for n in (f"nodes.{case}.yaml", "nodes.yaml") if os.path.isfile(os.path.join(directory, n))),
                 None)
    messages: tuple[str, ...] = ()
    golden = os.path.join(directory, f"fail.{case}.findings.json")
    if name.startswith("fail.") and os.path.isfile(golden):
        with open(golden, encoding="utf-8") as fh:
            messages = tuple(str(f["message"]) for f in json.load(fh))
    return Example(f"{shown}/{name}", text.strip("\n") + "\n", f"{shown}/{nodes}" if nodes else None, messages)


def rule_examples(fixtures: str) -> dict[str, RuleExamples]:
    """Rule id -> its first failing and first passing fixture (alphabetical order), for every rule directory of
    ``fixtures`` (directories starting with ``_`` are shared material, not a rule's)."""
    out: dict[str, RuleExamples] = {}
    if not os.path.isdir(fixtures):
        return out
    for rule_id in sorted(os.listdir(fixtures)):
        directory = os.path.join(fixtures, rule_id)
        if rule_id.startswith(("_", ".")) or not os.path.isdir(directory):
            continue
        shown = f"{fixtures.rstrip('/')}/{rule_id}"
        names = sorted(os.listdir(directory))
        fail = next((n for n in names if n.startswith("fail.") and n.endswith(".yaml")), None)
        good = next((n for n in names if n.startswith("pass.") and n.endswith(".yaml")), None)
        out[rule_id] = RuleExamples(_example(directory, shown, fail) if fail else None,
                                    _example(directory, shown, good) if good else None)
    return out
