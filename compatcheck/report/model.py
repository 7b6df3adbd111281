"""What a lint run produced, as handed to formatters (which evaluate nothing)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from compatcheck.core.model import Diagnostic, Finding, ObjectRef, Severity

if TYPE_CHECKING:  # the matrix and what-if: only reports that have them import them (a plain lint starts without)
    from compatcheck.core.matrix import Matrix
    from compatcheck.core.rules import Rule
    from compatcheck.core.whatif import WhatIfDiff


@dataclass(frozen=True)
class Silenced:
    finding: Finding
    how: str  # "annotation", "config" or "baseline"
    reason: str


@dataclass(frozen=True)
class NotChecked:
    """A GPU workload (or part of one) that could not be checked, and why: the coverage's explicit record."""

    obj: ObjectRef
    path: str
    line: int | None
    reason: str

    @property
    def category(self) -> str:
        """The reason's kind (its text before the first colon: "image CUDA unknown", "DRA", ...)."""
        return self.reason.split(":", 1)[0]

    def to_json(self) -> dict[str, object]:
        return {"object": {"kind": self.obj.kind, "namespace": self.obj.namespace, "name": self.obj.name},
                "file": self.path, "line": self.line, "reason": self.reason}


@dataclass
class LintReport:
    findings: list[Finding] = field(default_factory=list)
    # Diagnostics by severity: errors make the run exit 2 (the other files are still linted), warnings are shown,
    # notes (severity info) say what was skipped on purpose.
    errors: list[Diagnostic] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    notes: list[Diagnostic] = field(default_factory=list)
    suppressed: list[Silenced] = field(default_factory=list)
    objects_seen: list[tuple[str, ObjectRef]] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    files: int = 0
    objects: int = 0
    skipped: int = 0  # documents of kinds that hold no pod spec (CRDs, Services, ...), skipped unparsed
    color: bool = False
    show_suppressed: bool = False
    docs_url: str = ""
    tool_version: str = ""
    # The repository root (absolute) that SARIF names files relative to; "" = the working directory.
    source_root: str = ""
    # Coverage: the objects that ask for a GPU, and those of them not checked (one record per reason).
    gpu_workloads: int = 0
    not_checked: list[NotChecked] = field(default_factory=list)
    # --what-if: the difference the changes make (the findings are those after the changes), and each change with
    # the number of nodes it matched.
    what_if: WhatIfDiff | None = None
    what_if_changes: list[tuple[str, int]] = field(default_factory=list)
    # compatcheck audit: what was read (nodes, node classes, owners, pods, pods per owner); None for a lint.
    audit: dict[str, Any] | None = None
    # --format html: the compatibility matrix (GPU workloads x node pools) of the run's view; None when not asked.
    matrix: Matrix | None = None

    def add(self, diagnostics: Iterable[Diagnostic]) -> None:
        """File each diagnostic under its severity."""
        for d in diagnostics:
            (self.errors if d.severity is Severity.ERROR else
             self.warnings if d.severity is Severity.WARNING else self.notes).append(d)

    def diagnostics(self) -> list[Diagnostic]:
        """Errors, then warnings, then notes: the order every format lists them in."""
        return [*self.errors, *self.warnings, *self.notes]

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in Severity}
        for f in self.findings:
            out[f.severity.value] += 1
        return out

    def unchecked_objects(self) -> int:
        return len({(n.path, n.obj) for n in self.not_checked})

    def coverage_line(self) -> str:
        """``GPU workloads: N, checked C, not checked U (reason: count, ...)``."""
        unchecked = self.unchecked_objects()
        by: dict[str, set[tuple[str, ObjectRef]]] = {}
        for n in self.not_checked:
            by.setdefault(n.category, set()).add((n.path, n.obj))
        reasons = ", ".join(f"{k}: {len(v)}" for k, v in sorted(by.items()))
        return (f"GPU workloads: {self.gpu_workloads}, checked {self.gpu_workloads - unchecked}, not checked "
                f"{unchecked}" + (f" ({reasons})" if reasons else ""))

    def coverage_json(self) -> dict[str, object]:
        return {"gpuWorkloads": self.gpu_workloads, "checked": self.gpu_workloads - self.unchecked_objects(),
                "notChecked": [n.to_json() for n in self.not_checked]}

    def rule_url(self, rule_id: str) -> str:
        return f"{self.docs_url}#{rule_id}"
