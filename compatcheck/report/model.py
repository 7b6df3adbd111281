"""What a lint run produced, as handed to formatters."""

from __future__ import annotations

from dataclasses import dataclass, field

from compatcheck.model import Finding, InputError, Severity


@dataclass
class LintReport:
    findings: list[Finding] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    notes: list[InputError] = field(default_factory=list)
    files: int = 0
    objects: int = 0
    color: bool = False

    def counts(self) -> dict[str, int]:
        out = {s.value: 0 for s in Severity}
        for f in self.findings:
            out[f.severity.value] += 1
        return out
