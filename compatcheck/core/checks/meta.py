"""Check types about compatcheck's own annotations: ``suppression-annotations``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from compatcheck.core.checks import register
from compatcheck.core.checks.base import CheckType, EvalContext, Params, Violation
from compatcheck.core.suppress import IGNORE_ANNOTATION, suppressions


def _suppression_reasons(target: Any, ctx: EvalContext, params: Params) -> Iterator[Violation]:
    for s in suppressions(target.obj, target.pods):
        if not s.reason:
            where = f" for container {s.container!r}" if s.container else ""
            yield Violation(f"suppression of {s.rule_id}{where} has no reason: write {IGNORE_ANNOTATION}"
                            f"{'.' + s.container if s.container else ''}: \"{s.rule_id}=<why>\"", s.pointer,
                            s.container)


register(CheckType(
    name="suppression-annotations",
    description="Reads compatcheck.io/ignore[.<container>] annotations and reports suppressions without a reason.",
    target="object",
    gpu_only=False,
    params_schema={"type": "object", "additionalProperties": False, "properties": {}},
    evaluate=_suppression_reasons,
))
