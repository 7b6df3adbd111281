"""Rules: the typed record of a rule file and the RuleSet (built-ins plus admin rules).

Validation of rule files against ``schemas/rule.schema.json`` and of ``check.params`` against the
check type's ``params_schema`` happens here; every problem is collected before failing. Pure: the
``loader`` module reads files and hands parsed documents in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from compatcheck.core import checks
from compatcheck.core.checks import AnyCheckType
from compatcheck.core.checks.base import EvalContext, ObjectTarget, Outcome, PodAnalysis, RawParams, UnknownCheckType
from compatcheck.core.jsonutil import Json, JsonObject
from compatcheck.core.model import Applicability, Diagnostic, DiagnosticKind, Severity
from compatcheck.core.suggest import did_you_mean


class ParamsError(ValueError):
    """Params that pass the schema but cannot be prepared (a regex that does not compile)."""


@dataclass(frozen=True)
class Rule:
    id: str
    summary: str
    severity: Severity
    check: AnyCheckType
    params: RawParams  # as written (and merged with config overrides): for docs and JSON output
    rationale: str
    remediation: str
    references: tuple[str, ...]
    origin: str  # file the rule came from
    builtin: bool = True
    # ``webhook: {mutate: default}``: the mutating webhook applies its safe fix unless the config turns it off.
    mutate_by_default: bool = False
    # ``check.prepare(params)``, made once (and again by dataclasses.replace): the check's own params type, which
    # a RuleSet of every check type erases; only ``evaluate`` below reads it, handing it back to that check.
    prepared: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "prepared", self.check.prepare(self.params))
        except Exception as exc:  # e.g. a regex that does not compile: the rule is unusable, say why
            raise ParamsError(f"check {self.check.name} params: {type(exc).__name__}: {exc}") from None

    def evaluate(self, target: PodAnalysis | ObjectTarget, ctx: EvalContext) -> Iterable[Outcome]:
        """The check's outcomes for ``target`` (a ``PodAnalysis`` for pod checks, else an ``ObjectTarget``)."""
        return self.check.evaluate(target, ctx, self.prepared)

    @property
    def needs_nodes(self) -> bool:
        return self.check.needs_nodes

    @property
    def fix_applicability(self) -> Applicability | None:
        return self.check.fix_applicability


def schema_problems(doc: Json, schema: JsonObject, path: str,
                    kind: DiagnosticKind = "rules") -> list[Diagnostic]:
    """Every way ``doc`` breaks ``schema``, as errors of ``kind`` with a pointer (the caller adds the line)."""
    from jsonschema import Draft202012Validator  # lazy: only when validating

    out = []
    for err in sorted(Draft202012Validator(schema).iter_errors(doc), key=lambda e: list(e.absolute_path)):
        pointer = "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in err.absolute_path)
        hint = ""
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            # Point at the first unexpected key (the typo), not at its parent mapping, and say what it may be.
            known = err.schema.get("properties", {})
            extra = sorted(set(err.instance) - set(known))
            if extra:
                pointer += "/" + str(extra[0]).replace("~", "~0").replace("/", "~1")
                hint = did_you_mean(str(extra[0]), known)
        elif err.validator == "enum" and isinstance(err.instance, str):
            hint = did_you_mean(err.instance, (str(v) for v in err.validator_value))
        msg = err.message if len(err.message) <= 200 else err.message[:197] + "..."
        msg += hint
        out.append(Diagnostic(path, f"{pointer or '/'}: {msg}", pointer=pointer, kind=kind))
    return out


def build_rule(doc: JsonObject, origin: str, *, builtin: bool, validate: bool,
               rule_schema: JsonObject | None = None) -> tuple[Rule | None, list[Diagnostic]]:
    problems: list[Diagnostic] = []
    if validate and rule_schema is not None:
        problems = schema_problems(doc, rule_schema, origin)
        if problems:
            return None, problems
    try:
        check_type = checks.get(doc["check"]["type"])
    except UnknownCheckType as exc:
        return None, [Diagnostic(origin, str(exc), pointer="/check/type", kind="rules")]
    params = dict(doc["check"].get("params") or {})
    if validate:
        for p in schema_problems(params, check_type.params_schema, origin):
            problems.append(Diagnostic(origin, f"check {check_type.name} params: {p.message}",
                                       pointer="/check/params" + p.pointer, kind="rules"))
        if problems:
            return None, problems
    docs = doc["docs"]
    try:
        rule = Rule(doc["id"], doc["summary"], Severity(doc["severity"]), check_type, params, docs["rationale"],
                    docs["remediation"], tuple(docs["references"]), origin, builtin,
                    mutate_by_default=(doc.get("webhook") or {}).get("mutate") == "default")
    except ParamsError as exc:
        return None, [Diagnostic(origin, str(exc), pointer="/check/params", kind="rules")]
    return rule, []


@dataclass
class RuleSet:
    """The rules in force, iterated in id order. Treat as immutable once built: the order is computed once
    (every admission request iterates it)."""

    rules: dict[str, Rule]
    ordered: tuple[Rule, ...] = field(init=False, repr=False, compare=False)
    # The same rules split by what the engine hands them, so evaluation does not re-split per object.
    object_rules: tuple[Rule, ...] = field(init=False, repr=False, compare=False)
    pod_rules: tuple[Rule, ...] = field(init=False, repr=False, compare=False)
    signature: tuple[str, ...] = field(init=False, repr=False, compare=False)  # the ids, for memo keys
    # The rules whose safe fix the mutating webhook applies unless the config says otherwise (rule files'
    # ``webhook: {mutate: default}``).
    default_mutations: frozenset[str] = field(init=False, repr=False, compare=False)
    # Pod rules by (GPU pod?, cluster view?): non-GPU pods only meet the rules that are not gpu_only, and
    # without nodes the rules that need them are left out.
    _pod_rules_by: dict[tuple[bool, bool], tuple[Rule, ...]] = field(init=False, repr=False, compare=False)
    _fixable: dict[frozenset[str], RuleSet] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.ordered = tuple(sorted(self.rules.values(), key=lambda r: r.id))
        self.object_rules = tuple(r for r in self.ordered if r.check.target == "object")
        self.pod_rules = tuple(r for r in self.ordered if r.check.target == "pod")
        self.signature = tuple(r.id for r in self.ordered)
        self.default_mutations = frozenset(r.id for r in self.ordered if r.mutate_by_default)
        self._pod_rules_by = {(gpu, online): tuple(r for r in self.pod_rules if (online or not r.needs_nodes)
                                                   and (gpu or not r.check.gpu_only))
                              for gpu in (False, True) for online in (False, True)}

    def pod_rules_for(self, *, gpu: bool, online: bool) -> tuple[Rule, ...]:
        """The pod rules that apply to a (non-)GPU pod, with or without a cluster view."""
        return self._pod_rules_by[(gpu, online)]

    def subset(self, keep: Callable[[Rule], bool]) -> RuleSet:
        return RuleSet({r.id: r for r in self.ordered if keep(r)})

    def fixable(self, wanted: frozenset[str]) -> RuleSet:
        """The rules among ``wanted`` that have a fix; memoised (the webhook asks on every mutation)."""
        found = self._fixable.get(wanted)
        if found is None:
            found = self._fixable[wanted] = self.subset(lambda r: r.id in wanted and r.fix_applicability is not None)
        return found

    def get(self, rule_id: str) -> Rule:
        try:
            return self.rules[rule_id]
        except KeyError:
            raise KeyError(f"no such rule: {rule_id!r}") from None

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.ordered)

    def __len__(self) -> int:
        return len(self.rules)
