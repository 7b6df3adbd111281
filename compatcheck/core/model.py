"""The findings/fixes model shared by the linter, ``fix`` and the admission webhook.

Plain frozen dataclasses with no third-party imports. Nothing here evaluates, formats or does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal

JsonValue = Any  # a JSON value (a patch value): Any for the reason given at compatcheck.core.jsonutil.Json


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


class Applicability(str, Enum):
    """After ruff: only SAFE fixes are applied unattended (``fix``, mutating webhook)."""

    SAFE = "safe"
    UNSAFE = "unsafe"
    DISPLAY_ONLY = "display-only"


@dataclass(frozen=True, slots=True)
class ObjectRef:
    api_version: str | None
    kind: str | None
    namespace: str | None
    name: str | None

    def to_json(self) -> dict[str, str | None]:
        return {"apiVersion": self.api_version, "kind": self.kind, "namespace": self.namespace, "name": self.name}

    def describe(self) -> str:
        ns = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind or '?'} {ns}{self.name or '<unnamed>'}"


@dataclass(frozen=True, slots=True)
class PatchOp:
    """One RFC 6902 operation. ``path`` is an RFC 6901 pointer (absolute once it leaves the engine)."""

    op: Literal["add", "remove", "replace", "test"]
    path: str
    value: JsonValue = None

    def to_json(self) -> dict[str, JsonValue]:
        out: dict[str, JsonValue] = {"op": self.op, "path": self.path}
        if self.op != "remove":
            out["value"] = self.value
        return out


@dataclass(frozen=True, slots=True)
class Fix:
    description: str
    applicability: Applicability
    ops: tuple[PatchOp, ...]

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "description": self.description,
            "applicability": self.applicability.value,
            "patch": [op.to_json() for op in self.ops],
        }


@dataclass(frozen=True, slots=True)
class SourceRef:
    path: str
    line: int | None = None
    column: int | None = None


@dataclass(frozen=True, slots=True)
class Finding:
    rule_id: str
    severity: Severity
    message: str
    obj: ObjectRef
    pointer: str
    container: str | None = None
    fix: Fix | None = None
    source: SourceRef | None = field(default=None, compare=False)

    def about(self, obj: ObjectRef) -> Finding:
        """The same finding about another object (dataclasses.replace, without its per-call introspection)."""
        return Finding(self.rule_id, self.severity, self.message, obj, self.pointer, self.container, self.fix,
                       self.source)


@dataclass(frozen=True, slots=True)
class DuplicateKey:
    """A key written twice in one YAML mapping of a manifest. kubectl (and the API server, which reads YAML the
    same way) keeps the last value; the reader does too, and records the duplicate for ``yaml-duplicate-key``."""

    pointer: str  # RFC 6901, of the key (and the value kept), inside the document
    key: str
    first_line: int
    line: int  # of the occurrence that was kept


# Where a diagnostic comes from. "input": a manifest or admitted object that cannot be read or understood (or a
# value inside it, such as an unreadable version annotation); "rules", "config", "nodes", "crl", "baseline": an
# invalid file of that kind; "internal": a check raised (a bug, answered by the webhook's failure mode); "note":
# something skipped on purpose (a non-Kubernetes document, an unrendered Helm template).
DiagnosticKind = Literal["input", "rules", "config", "nodes", "crl", "baseline", "internal", "note"]


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """Every problem that is not a finding, in every layer, with where it is and how bad it is. Errors make a
    lint exit 2 (the other files are still linted); warnings are shown; notes (severity info) say what was
    skipped. The CLI prints one kind of thing: these (and findings)."""

    path: str  # the file, or "" for an admitted object
    message: str
    line: int | None = None
    column: int | None = None
    pointer: str = ""  # RFC 6901, inside the document
    severity: Severity = Severity.ERROR
    kind: DiagnosticKind = "input"
    rule_id: str | None = None  # the rule that found it (input problems and internal errors of a check)
