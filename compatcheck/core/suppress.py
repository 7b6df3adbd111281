"""Suppression annotations, shared by the linter and the webhook (YAML comments never reach a webhook).

``compatcheck.io/ignore: "rule-id=reason, other-rule=reason"`` on an object or its pod template silences
those rules there; ``compatcheck.io/ignore.<container>`` only for that container. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from compatcheck.core.jsonutil import Json, JsonObject, mapping
from compatcheck.core.model import Finding
from compatcheck.core.pointers import escape_token
from compatcheck.core.workloads import PodTarget, pod_targets

IGNORE_ANNOTATION = "compatcheck.io/ignore"
# A comma starts a new entry only before "id=" or a hyphenated bare id, so reasons may contain commas.
_ENTRY_SPLIT = re.compile(r",\s*(?=[a-z0-9]+(?:-[a-z0-9]+)*\s*=|[a-z0-9]+(?:-[a-z0-9]+)+\s*(?:,|$))")
_RULE_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


@dataclass(frozen=True)
class Suppression:
    rule_id: str
    reason: str
    container: str | None
    pointer: str  # of the annotation value
    scope: str  # pointer prefix of the object part it governs ("" = whole object)


def parse_ignore(value: str) -> list[tuple[str, str]]:
    """``"a=why, b"`` -> [("a", "why"), ("b", "")]; entries that are not rule ids are dropped."""
    out = []
    for entry in _ENTRY_SPLIT.split(value.strip()):
        rule, _, reason = entry.partition("=")
        rule = rule.strip()
        if _RULE_ID.match(rule) and (reason or "-" in rule):
            out.append((rule, reason.strip()))
    return out


def _from_annotations(annotations: Json, meta_pointer: str, scope: str) -> list[Suppression]:
    out: list[Suppression] = []
    for key, value in mapping(annotations).items():
        if not isinstance(value, str):
            continue
        if key == IGNORE_ANNOTATION:
            container = None
        elif isinstance(key, str) and key.startswith(IGNORE_ANNOTATION + "."):
            container = key[len(IGNORE_ANNOTATION) + 1:]
        else:
            continue
        pointer = f"{meta_pointer}/annotations/{escape_token(key)}"
        out.extend(Suppression(rule, reason, container, pointer, scope) for rule, reason in parse_ignore(value))
    return out


def _mentions_ignore(annotations: Json) -> bool:
    return any(isinstance(k, str) and k.startswith(IGNORE_ANNOTATION) for k in mapping(annotations))


def suppressions(obj: JsonObject, pods: list[PodTarget] | None = None) -> list[Suppression]:
    """Every suppression on the object and its pod templates. ``pods``: the object's pod targets, when the
    caller has them already (the engine does)."""
    if pods is None:
        pods = pod_targets(obj)
    own = mapping(obj.get("metadata")).get("annotations")
    # Pod targets carry their template's annotations merged in: a quick way to see there is nothing to do.
    if not _mentions_ignore(own) and not any(_mentions_ignore(p.annotations) for p in pods):
        return []
    found = _from_annotations(own, "/metadata", "")
    for pod in pods:
        if pod.template_pointer is not None:
            found += _from_annotations(pod.template_annotations, f"{pod.template_pointer}/metadata",
                                       pod.template_pointer)
    return found


def split_suppressed(findings: list[Finding], obj: JsonObject, pods: list[PodTarget] | None = None) -> tuple[
        list[Finding], list[tuple[Finding, Suppression]]]:
    rules = {f.rule_id for f in findings}
    sups = [s for s in suppressions(obj, pods) if s.rule_id in rules] if findings else []
    if not sups:
        return findings, []
    kept: list[Finding] = []
    silenced: list[tuple[Finding, Suppression]] = []
    for f in findings:
        match = next((s for s in sups if s.rule_id == f.rule_id and f.pointer.startswith(s.scope)
                      and (s.container is None or s.container == f.container)), None)
        if match is None:
            kept.append(f)
        else:
            silenced.append((f, match))
    return kept, silenced
