"""Check types about compatcheck's own annotations: ``suppression-annotations``."""

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
from compatcheck.core.suppress import IGNORE_ANNOTATION, suppressions


def _suppression_reasons(target: ObjectTarget, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    for s in suppressions(target.obj, target.pods):
        if not s.reason:
            where = f" for container {s.container!r}" if s.container else ""
            yield Violation(f"suppression of {s.rule_id}{where} has no reason: write {IGNORE_ANNOTATION}"
                            f"{'.' + s.container if s.container else ''}: \"{s.rule_id}=<why>\"", s.pointer,
                            s.container)


register(ObjectCheck(
    name="suppression-annotations",
    description="Reads compatcheck.io/ignore[.<container>] annotations and reports suppressions without a reason.",
    gpu_only=False,
    params_schema=NO_PARAMS_SCHEMA,
    prepare=no_params,
    evaluate=_suppression_reasons,
))
