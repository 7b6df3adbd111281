"""AdmissionReview in, AdmissionReview out: the webhook's decisions, with no HTTP in sight.

``review`` is a pure function of the request body, the rules, an immutable cluster snapshot and the
settings; ``webhook/`` only moves bytes. Two error channels, after kopf: a body that is not an
AdmissionReview raises ``ReviewError`` (HTTP 400), while a policy decision is always a valid
AdmissionReview (HTTP 200), denials included. Internal errors of a rule are answered per the configured
failure mode, never with a bare 500.
"""

from __future__ import annotations

import base64
import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Literal, TypedDict

from compatcheck.core.checks.base import EvalContext
from compatcheck.core.config import Config
from compatcheck.core.engine import evaluate
from compatcheck.core.jsonutil import Json, JsonObject, dumps, mapping
from compatcheck.core.model import Applicability, Diagnostic, Finding, ObjectRef, Severity
from compatcheck.core.patches import apply_fixes
from compatcheck.core.pointers import value_at
from compatcheck.core.rules import RuleSet
from compatcheck.core.suppress import split_suppressed
from compatcheck.core.workloads import KindTable, object_ref, pod_targets

API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
OPT_OUT_LABEL = "compatcheck.io/ignore"
MAX_WARNING = 120  # the API server cuts warnings over 256 characters; kubectl shows each on one line
MAX_WARNINGS_TOTAL = 4000  # past 4096 characters in all, the API server truncates and drops warnings
MAX_DENY_FINDINGS = 8

class CacheMiss(Exception):
    """From ``review_cached``: answering needs an evaluation that the cache does not hold."""


class ReviewError(ValueError):
    """The body is not an AdmissionReview we can answer: HTTP 400 with this message."""


class ResponsePayload(TypedDict, total=False):
    uid: str
    allowed: bool
    status: JsonObject
    warnings: list[str]
    patchType: str
    patch: str
    auditAnnotations: dict[str, str]


@dataclass(frozen=True)
class AdmissionSettings:
    mode: str = "enforce"  # enforce | warn | audit
    failure_mode: str = "allow"  # allow | deny, for internal errors
    owned_pods: str = "warn"  # warn | enforce | skip: Pods with a controller owner were admitted via their owner
    deny_on: Severity = Severity.ERROR
    annotation_exemptions: bool = True
    # The rules whose safe fixes the mutating webhook applies; None: those whose rule file says
    # ``webhook: {mutate: default}`` (``RuleSet.default_mutations`` of the rules under review).
    mutations: frozenset[str] | None = None
    allow_unsafe: frozenset[str] = frozenset()
    config: Config = field(default_factory=Config)
    warn_unchecked: bool = False  # webhook.warnUnchecked: a warning per reason a GPU object was not checked

    @classmethod
    def from_config(cls, config: Config, ruleset: RuleSet) -> AdmissionSettings:
        """The webhook's settings from the config, and the mutations from the rules: those that declare
        ``webhook: {mutate: default}``, or ``fixes.enabled`` when the config names them, less ``fixes.disabled``."""
        wh = config.webhook
        mutations = ruleset.default_mutations if config.fixes_enabled is None else config.fixes_enabled
        return cls(mode=wh.get("mode", "enforce"), failure_mode=wh.get("failureMode", "allow"),
                   owned_pods=wh.get("ownedPods", "warn"), deny_on=Severity(wh.get("denyOn", "error")),
                   annotation_exemptions=config.annotation_exemptions,
                   mutations=frozenset(mutations) - config.fixes_disabled,
                   allow_unsafe=config.allow_unsafe - config.fixes_disabled, config=config,
                   warn_unchecked=config.warn_unchecked)

    def mutations_in(self, ruleset: RuleSet) -> frozenset[str]:
        """The rules whose safe fixes are applied when reviewing with ``ruleset``."""
        return self.mutations if self.mutations is not None else ruleset.default_mutations


@dataclass
class Decision:
    """What the webhook decided, for the structured log line and the metrics."""

    uid: str
    endpoint: str
    kind: str
    namespace: str | None
    name: str | None
    operation: str
    allowed: bool
    dry_run: bool
    findings: list[Finding] = field(default_factory=list)
    denied_rules: list[str] = field(default_factory=list)
    patched_rules: list[str] = field(default_factory=list)
    internal_error: str | None = None
    skipped: str | None = None

    def log_fields(self) -> JsonObject:
        return {"uid": self.uid, "endpoint": self.endpoint, "kind": self.kind, "namespace": self.namespace,
                "name": self.name, "operation": self.operation, "dryRun": self.dry_run, "allowed": self.allowed,
                "rules": sorted({f.rule_id for f in self.findings}), "denied": self.denied_rules,
                "patched": self.patched_rules, **({"error": self.internal_error} if self.internal_error else {}),
                **({"skipped": self.skipped} if self.skipped else {})}


@dataclass
class Request:
    api_version: str
    uid: str
    operation: str
    kind: str
    obj: JsonObject | None
    old: JsonObject | None
    dry_run: bool


def parse_request(body: Json) -> Request:
    if not isinstance(body, dict):
        raise ReviewError("request body must be a JSON object (an AdmissionReview)")
    api_version, kind = body.get("apiVersion"), body.get("kind")
    if kind != "AdmissionReview" or api_version not in API_VERSIONS:
        raise ReviewError(f"expected kind AdmissionReview with apiVersion in {list(API_VERSIONS)}, got "
                          f"kind={kind!r} apiVersion={api_version!r}")
    req = body.get("request")
    if not isinstance(req, dict):
        raise ReviewError("AdmissionReview has no request object")
    uid = req.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("AdmissionReview request.uid must be a non-empty string")
    operation = req.get("operation")
    if operation not in ("CREATE", "UPDATE", "DELETE", "CONNECT"):
        raise ReviewError(f"AdmissionReview request.operation {operation!r} is not CREATE/UPDATE/DELETE/CONNECT")
    obj, old = req.get("object"), req.get("oldObject")
    if obj is not None and not isinstance(obj, dict):
        raise ReviewError("AdmissionReview request.object must be an object or null")
    if old is not None and not isinstance(old, dict):
        raise ReviewError("AdmissionReview request.oldObject must be an object or null")
    kind_info = mapping(req.get("kind"))
    req_kind = str(kind_info.get("kind") or mapping(obj or old).get("kind") or "")
    return Request(str(api_version), uid, str(operation), req_kind, obj, old, bool(req.get("dryRun", False)))


def _envelope(req: Request, payload: ResponsePayload) -> JsonObject:
    return {"apiVersion": req.api_version, "kind": "AdmissionReview", "response": {"uid": req.uid, **payload}}


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _warnings(findings: list[Finding], problems: list[str]) -> list[str]:
    """One short line per finding (within the API server's limits), then the input problems."""
    out: list[str] = []
    total = 0
    for i, f in enumerate(findings):
        w = _short(f"{f.rule_id}: {f.message}", MAX_WARNING)
        if total + len(w) > MAX_WARNINGS_TOTAL - 80:
            out.append(f"compatcheck: {len(findings) - i} more findings; run compatcheck lint for all of them")
            break
        out.append(w)
        total += len(w)
    return out + [_short(p, MAX_WARNING) for p in problems]


def _is_owned_pod(obj: JsonObject) -> bool:
    """A Pod with a controller owner, or a ResourceClaim the resourceclaim controller made for a Pod from its
    template: their owner (the template) was admitted already."""
    kind = obj.get("kind")
    if kind not in ("Pod", "ResourceClaim"):
        return False
    refs = mapping(obj.get("metadata")).get("ownerReferences")
    return isinstance(refs, list) and any(isinstance(r, dict) and r.get("controller") is True and (
        kind == "Pod" or r.get("kind") == "Pod") for r in refs)


def _opted_out(obj: JsonObject) -> bool:
    return mapping(mapping(obj.get("metadata")).get("labels")).get(OPT_OUT_LABEL) == "true"


@dataclass(frozen=True)
class Evaluated:
    """What admission needs from one evaluation: the findings left after suppression annotations (when
    honoured), and the problems (bad input, internal errors of a rule)."""

    findings: list[Finding]
    problems: list[Diagnostic]
    # A GPU object's blind spots (the coverage's not-checked reasons), when no finding gives a verdict on it.
    unchecked: tuple[str, ...] = ()


def _evaluate_fresh(obj: JsonObject, rules: RuleSet, ctx: EvalContext, severities: dict[str, Severity],
                    suppressions: bool) -> Evaluated:
    result = evaluate(obj, rules, ctx, severities=severities)
    findings = result.findings
    if suppressions and findings:
        findings, _silenced = split_suppressed(findings, obj, result.pods)
    unchecked = tuple(dict.fromkeys(r for _p, r in result.unchecked)) if result.gpu and not result.checked else ()
    return Evaluated(findings, result.problems, unchecked)


class EvaluationCache:
    """Memo of evaluations of objects that differ only in identity metadata.

    Admission traffic repeats itself: the Pods of one ReplicaSet or Job differ only in name, uid,
    ownerReferences and timestamps; a Deployment is re-applied unchanged by CI or GitOps; an UPDATE's
    oldObject was the object of an earlier request. No rule reads identity metadata, and suppression
    annotations are part of the key, so such objects share one evaluation. The key is a digest of the
    object minus that metadata; the cache is dropped whenever the cluster snapshot changes. A hit gives
    exactly what a fresh evaluation would: findings are re-bound to the object at hand, and config
    exemptions (which may name namespaces and objects) are applied after it, per object.
    """

    def __init__(self, size: int = 1024) -> None:
        self.size = size
        self._ctx: EvalContext | None = None
        self._severities: dict[str, Severity] | None = None
        self._data: OrderedDict[tuple[tuple[str, ...], bool, bytes, tuple[tuple[str, str], ...]], Evaluated] = (
            OrderedDict())
        self.hits = self.misses = 0
        # The event loop reads it (``review_cached``) while the review thread fills it: one lock for each use.
        self._lock = threading.Lock()

    @staticmethod
    def key(obj: JsonObject) -> bytes:
        """A 128-bit digest of the object without its identity metadata (memory: 16 bytes, not the JSON).
        Key order is kept as received: the API server serialises one object the same way every time, and a
        different order only costs a miss."""
        meta = mapping(obj.get("metadata"))
        reduced = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
        reduced["metadata"] = (meta.get("annotations"), meta.get("labels"))
        data = dumps(reduced)
        # DRA: the claims and templates a pod (or a NIMService) names are looked up in its namespace
        if b'"resourceClaims"' in data or b'"draResources"' in data:
            data += dumps(meta.get("namespace"))
        return hashlib.blake2b(data, digest_size=16).digest()

    def evaluate(self, obj: JsonObject, ref: ObjectRef, rules: RuleSet, ctx: EvalContext,
                 severities: dict[str, Severity], suppressions: bool, cached_only: bool = False) -> Evaluated:
        """The evaluation of ``obj`` (whose reference is ``ref``), from the cache when an equal object was seen;
        with ``cached_only``, CacheMiss rather than an evaluation."""
        # The image configs this evaluation may read (none without registry lookups) are part of the key.
        k = (rules.signature, suppressions, self.key(obj), ctx.registry_key())
        with self._lock:
            if ctx.root is not self._ctx or severities is not self._severities:  # a new snapshot or config
                self._data.clear()
                self._ctx, self._severities = ctx.root, severities
            cached = self._data.get(k)
            if cached is not None:
                self.hits += 1
                self._data.move_to_end(k)
                return Evaluated([f.about(ref) for f in cached.findings], list(cached.problems), cached.unchecked)
        if cached_only:
            raise CacheMiss()
        fresh = _evaluate_fresh(obj, rules, ctx, severities, suppressions)
        with self._lock:
            self.misses += 1
            if ctx.root is self._ctx and severities is self._severities:  # not for a snapshot replaced meanwhile
                self._data[k] = fresh
                if len(self._data) > self.size:
                    self._data.popitem(last=False)
        return Evaluated(list(fresh.findings), list(fresh.problems), fresh.unchecked)


def _evaluate(obj: JsonObject, rules: RuleSet, ctx: EvalContext, settings: AdmissionSettings,
              cache: EvaluationCache | None = None, ref: ObjectRef | None = None,
              cached_only: bool = False) -> Evaluated:
    severities, suppressions = settings.config.severities, settings.annotation_exemptions
    if cache is not None:
        done = cache.evaluate(obj, ref or object_ref(obj), rules, ctx, severities, suppressions, cached_only)
    elif cached_only:
        raise CacheMiss()
    else:
        done = _evaluate_fresh(obj, rules, ctx, severities, suppressions)
    if settings.config.exemptions and done.findings:
        return Evaluated([f for f in done.findings if not settings.config.exempt(f, None)], done.problems,
                         done.unchecked)
    return done


def _internal_errors(done: Evaluated) -> list[str]:
    return [p.message for p in done.problems if p.kind == "internal"]


def _failure(req: Request, decision: Decision, settings: AdmissionSettings, error: str) -> JsonObject:
    decision.internal_error = error
    if settings.failure_mode == "deny":
        decision.allowed = False
        return _envelope(req, {"allowed": False, "status": {
            "code": 500, "message": _short(f"compatcheck could not evaluate this object ({error}); failure mode "
                                           "is deny", 400)}})
    decision.allowed = True
    return _envelope(req, {"allowed": True, "warnings": [_short(f"compatcheck: not evaluated ({error})",
                                                                MAX_WARNING)]})


def unanswered(body: Json, endpoint: Literal["validate", "mutate"], settings: AdmissionSettings,
               error: str) -> tuple[JsonObject, Decision]:
    """The answer per the failure mode for a review that could not be made (it ran past its time budget, or too
    many wait): as for an internal error. Raises ReviewError for a malformed body."""
    req = parse_request(body)
    ref = object_ref((req.obj if req.obj is not None else req.old) or {})
    decision = Decision(req.uid, endpoint, req.kind or ref.kind or "", ref.namespace, ref.name, req.operation,
                        True, req.dry_run)
    return _failure(req, decision, settings, error), decision


def review(body: Json, endpoint: Literal["validate", "mutate"], ruleset: RuleSet, ctx: EvalContext,
           settings: AdmissionSettings, cache: EvaluationCache | None = None,
           undecidable: str | None = None) -> tuple[JsonObject, Decision]:
    """The AdmissionReview response for ``body``. Raises ReviewError for malformed bodies (HTTP 400).
    ``cache`` (optional) memoises evaluations of objects that differ only in identity metadata. ``undecidable``
    says why no decision can be made now (the cluster view has not synced): objects that would be evaluated
    are then answered per the failure mode, as for an internal error, never from a partial view."""
    return _review(body, endpoint, ruleset, ctx, settings, cache, undecidable, False)


def review_cached(body: Json, endpoint: Literal["validate", "mutate"], ruleset: RuleSet, ctx: EvalContext,
                  settings: AdmissionSettings, cache: EvaluationCache | None = None,
                  undecidable: str | None = None) -> tuple[JsonObject, Decision]:
    """``review``'s answer where it needs no evaluation: a skipped request (DELETE, opted out, an owned pod), one
    answered per the failure mode (``undecidable``), or a /validate whose object (and, for an UPDATE that would
    be denied, its old object) ``cache`` holds; CacheMiss otherwise. The webhook answers these on its event loop
    (a digest and a dictionary lookup: tens of microseconds for a Pod) and hands only the rest to its review
    thread. Raises ReviewError as ``review`` does."""
    return _review(body, endpoint, ruleset, ctx, settings, cache, undecidable, True)


def _review(body: Json, endpoint: Literal["validate", "mutate"], ruleset: RuleSet, ctx: EvalContext,
            settings: AdmissionSettings, cache: EvaluationCache | None, undecidable: str | None,
            cached_only: bool) -> tuple[JsonObject, Decision]:
    req = parse_request(body)
    target = req.obj if req.obj is not None else req.old
    ref = object_ref(target or {})
    decision = Decision(req.uid, endpoint, req.kind or ref.kind or "", ref.namespace, ref.name, req.operation,
                        True, req.dry_run)
    if req.operation in ("DELETE", "CONNECT") or req.obj is None:
        decision.skipped = "operation"
        return _envelope(req, {"allowed": True}), decision
    if _opted_out(req.obj):
        decision.skipped = f"label {OPT_OUT_LABEL}=true"
        return _envelope(req, {"allowed": True}), decision
    owned = _is_owned_pod(req.obj)
    if owned and settings.owned_pods == "skip":
        decision.skipped = "owned pod"
        return _envelope(req, {"allowed": True}), decision
    if undecidable is not None:
        return _failure(req, decision, settings, undecidable), decision
    if cached_only and endpoint == "mutate":  # fixes are applied and diffed: the review thread's work
        raise CacheMiss()
    try:
        if endpoint == "mutate":
            return _mutate(req, decision, ruleset, ctx, settings, cache, ref), decision
        return _validate(req, decision, ruleset, ctx, settings, owned, cache, ref, cached_only), decision
    except CacheMiss:
        raise
    except Exception as exc:  # never crash, never a bare 500: answer per the failure mode
        return _failure(req, decision, settings, f"{type(exc).__name__}: {exc}"), decision


def _offending(obj: JsonObject, findings: list[Finding],
               kinds: KindTable | None) -> list[tuple[str, str, str, str, bytes | None]]:
    """What each finding is about, for the UPDATE ratchet: its rule, container, pointer and message, and the
    value at its pointer. Where the pointer is a whole pod spec or container (placement, MPS, vGPU findings),
    any edit of that spec would change the value, so the message, which names what is wrong, stands for it."""
    if not findings:
        return []
    targets = pod_targets(obj, kinds)
    structural = {t.pointer for t in targets} | {c.pointer for t in targets for c in t.containers}
    return [(f.rule_id, f.container or "", f.pointer, f.message,
             None if f.pointer in structural else dumps(value_at(obj, f.pointer))) for f in findings]


def _validate(req: Request, decision: Decision, ruleset: RuleSet, ctx: EvalContext, settings: AdmissionSettings,
              owned: bool, cache: EvaluationCache | None, ref: ObjectRef, cached_only: bool = False) -> JsonObject:
    assert req.obj is not None
    done = _evaluate(req.obj, ruleset, ctx, settings, cache, ref, cached_only)
    findings = done.findings
    errors = _internal_errors(done)
    if errors:
        return _failure(req, decision, settings, errors[0])
    decision.findings = findings
    blocking = [f for f in findings if f.severity.rank >= settings.deny_on.rank]
    if blocking and req.operation == "UPDATE" and req.old is not None:
        # Ratchet: a problem the stored object already had, with the same offending value, never blocks an
        # update (people must be able to fix other things). Changing the offending value, even from one
        # incompatible value to another, is a new problem and denies.
        kinds = ctx.kb.kinds
        before = set(_offending(req.old, _evaluate(req.old, ruleset, ctx, settings, cache,
                                                   cached_only=cached_only).findings, kinds))
        now = _offending(req.obj, blocking, kinds)
        blocking = [f for f, key in zip(blocking, now, strict=True) if key not in before]
    if owned and settings.owned_pods == "warn":
        blocking = []
    visible = sorted((f for f in findings if f.severity.rank >= Severity.WARNING.rank),
                     key=lambda f: (-f.severity.rank, f.rule_id))
    payload: ResponsePayload = {"allowed": True}
    problems = [p.message for p in done.problems]
    if settings.warn_unchecked:  # config webhook.warnUnchecked: a GPU object with blind spots says so
        problems += [f"not checked: {reason}" for reason in done.unchecked]
    if settings.mode == "audit":
        if findings:
            payload["auditAnnotations"] = {
                "compatcheck.io/findings": _short("; ".join(f"{f.rule_id}: {f.message}" for f in visible or findings),
                                                  1000)}
        return _envelope(req, payload)
    if settings.mode == "enforce" and blocking:
        decision.allowed = False
        decision.denied_rules = sorted({f.rule_id for f in blocking})
        lines = [_short(f"- {f.rule_id}: {f.message}", 200) for f in blocking[:MAX_DENY_FINDINGS]]
        if len(blocking) > MAX_DENY_FINDINGS:
            lines.append(f"- ... and {len(blocking) - MAX_DENY_FINDINGS} more (compatcheck lint shows them all)")
        what = f"{req.kind} {decision.namespace + '/' if decision.namespace else ''}{decision.name or ''}".strip()
        payload = {"allowed": False, "status": {"code": 403, "reason": "Forbidden",
                                                "message": f"compatcheck denied {what}:\n" + "\n".join(lines)}}
        visible = [f for f in visible if f not in blocking]  # the denial message already lists those
    warnings = _warnings(visible, problems)
    if warnings:
        payload["warnings"] = warnings
    return _envelope(req, payload)


def _mutate(req: Request, decision: Decision, ruleset: RuleSet, ctx: EvalContext,
            settings: AdmissionSettings, cache: EvaluationCache | None, ref: ObjectRef) -> JsonObject:
    import jsonpatch  # the final patch is a diff, so it is valid RFC 6902 whatever order fixes were made in

    assert req.obj is not None
    mutations = settings.mutations_in(ruleset)
    rules = ruleset.fixable(mutations | settings.allow_unsafe)
    if not len(rules):
        return _envelope(req, {"allowed": True})
    original = req.obj
    current = original
    applied: list[Finding] = []
    for _round in range(3):  # fixes converge in one round by design; the bound only guards against a bad rule
        done = _evaluate(current, rules, ctx, settings, cache, ref)
        errors = _internal_errors(done)
        if errors:
            return _failure(req, decision, settings, errors[0])
        allowed = [f for f in done.findings if f.fix is not None and (
            (f.fix.applicability is Applicability.SAFE and f.rule_id in mutations)
            or (f.fix.applicability is Applicability.UNSAFE and f.rule_id in settings.allow_unsafe))]
        if not allowed:
            break
        current, fixed = apply_fixes(current, allowed, {Applicability.SAFE, Applicability.UNSAFE})
        if not fixed:
            break
        applied.extend(fixed)
    patch = jsonpatch.make_patch(original, current).patch if applied else []
    if not patch:
        return _envelope(req, {"allowed": True})
    decision.patched_rules = sorted({f.rule_id for f in applied})
    decision.findings = applied
    payload: ResponsePayload = {
        "allowed": True, "patchType": "JSONPatch",
        "patch": base64.b64encode(dumps(patch)).decode(),
        # The rule id leads, as in validation warnings: at the end, the cut to MAX_WARNING took it off the
        # long descriptions (a CRL default's is ~90 characters), and it is what a user looks up.
        "warnings": [_short(f"compatcheck fixed {f.rule_id}: {f.fix.description}", MAX_WARNING)
                     for f in applied if f.fix is not None][:20],
    }
    return _envelope(req, payload)
