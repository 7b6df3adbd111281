"""What a lint run produced, as handed to formatters (which evaluate nothing)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from compatcheck.core.model import Finding, InputError, ObjectRef, Severity

if TYPE_CHECKING:
    from compatcheck.core.rules import Rule


@dataclass(frozen=True)
class Silenced:
    finding: Finding
    how: str  # "annotation", "config" or "baseline"
    reason: str


@dataclass
class LintReport:
    findings: list[Finding] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    notes: list[InputError] = field(default_factory=list)
    suppressed: list[Silenced] = field(default_factory=list)
    objects_seen: list[tuple[str, ObjectRef]] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    files: int = 0
    objects: int = 0
    color: bool = False
    show_suppressed: bool = False
    docs_url: str = ""
    tool_version: str = ""

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in Severity}
        for f in self.findings:
            out[f.severity.value] += 1
        return out

    def rule_url(self, rule_id: str) -> str:
        return f"{self.docs_url}#{rule_id}"
