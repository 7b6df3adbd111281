"""Check types for cf-crl CustomResourceLimitation: ``crl-configmap`` (the ConfigMap itself), and one type per
policy that containers using a CRL group's resources are held to: ``crl-limit-required``, ``crl-limit-disabled``,
``crl-request-policy``, ``crl-defaults`` and ``crl-value-type``. They share ``_uses``, the walk over every key of
every group a container uses."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from compatcheck.core.checks import register
from compatcheck.core.checks.base import (
    NO_PARAMS_SCHEMA,
    EvalContext,
    NoParams,
    ObjectCheck,
    ObjectTarget,
    PodAnalysis,
    PodCheck,
    Violation,
    no_params,
)
from compatcheck.core.crl import CrlKey, claims_crl, crl_problems, value_matches
from compatcheck.core.jsonutil import Json, mapping
from compatcheck.core.model import Applicability, Fix, PatchOp
from compatcheck.core.patches import set_path_ops, set_paths_ops
from compatcheck.core.pointers import escape_token
from compatcheck.core.workloads import ContainerTarget


def _configmap(target: ObjectTarget, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    obj = target.obj
    if not claims_crl(obj):
        return
    for problem in crl_problems(obj):
        yield Violation(f"CustomResourceLimitation ConfigMap breaks the cf-crl spec: {problem.message}",
                        problem.pointer)


register(ObjectCheck(
    name="crl-configmap",
    description="Validates ConfigMaps that claim to be cf-crl CustomResourceLimitations against the CRL schema.",
    params_schema=NO_PARAMS_SCHEMA,
    prepare=no_params,
    evaluate=_configmap,
))


@dataclass(frozen=True)
class _Use:
    """One key of a CRL group that a container uses (through any key of the group), with its values there."""

    c: ContainerTarget
    group: str
    key: str
    spec: CrlKey
    lim: Json  # the container's limit for the key, None when unset
    req: Json  # its request, None when unset
    lptr: str
    rptr: str
    src: str  # names the group and the ConfigMap, for messages


def _uses(a: PodAnalysis, ctx: EvalContext) -> Iterator[_Use]:
    index = ctx.crl
    if not index:
        return
    for c in a.pod.containers:
        res = mapping(c.data.get("resources"))
        limits = mapping(res.get("limits"))
        requests = mapping(res.get("requests"))
        used = {str(k) for k in limits} | {str(k) for k in requests}
        for group in index.groups_using(used):
            for key, spec in sorted(index.groups[group].items()):
                yield _Use(c, group, key, spec, limits.get(key), requests.get(key),
                           f"{c.pointer}/resources/limits/{escape_token(key)}",
                           f"{c.pointer}/resources/requests/{escape_token(key)}",
                           f"(CRL group {group}, ConfigMap {spec.configmap})")


def _limit_required(a: PodAnalysis, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    for u in _uses(a, ctx):
        if u.spec.limits == "required" and u.lim is None:
            default = u.spec.default
            fix = None
            if default is not None:
                fix = Fix(f"set limits.{u.key} to the CRL default {default}", Applicability.SAFE,
                          set_path_ops(u.c.data, u.c.pointer, ("resources", "limits", u.key), default))
            yield Violation(f"limits.{u.key} is required because the container uses {u.group} resources {u.src}",
                            u.lptr, u.c.name, fix)


def _limit_disabled(a: PodAnalysis, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    for u in _uses(a, ctx):
        if u.spec.limits == "disabled" and u.lim is not None:
            yield Violation(f"limits.{u.key} is not allowed {u.src}", u.lptr, u.c.name)


def _request_policy(a: PodAnalysis, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    for u in _uses(a, ctx):
        key, req, lim = u.key, u.req, u.lim
        if u.spec.requests == "disabled" and req is not None:
            yield Violation(f"requests.{key} is not allowed {u.src}", u.rptr, u.c.name)
        elif u.spec.requests == "required" and req is None:
            yield Violation(f"requests.{key} is required {u.src}", u.rptr, u.c.name)
        elif u.spec.requests == "fromLimits" and req is not None and lim is not None and str(req) != str(lim):
            yield Violation(f"requests.{key} {req} must equal limits.{key} {lim} (policy fromLimits) {u.src}",
                            u.rptr, u.c.name, Fix(f"set requests.{key} from limits", Applicability.SAFE,
                                                  (PatchOp("replace", u.rptr, lim),)))


def _defaults(a: PodAnalysis, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    for u in _uses(a, ctx):
        c, key, spec, req, lim = u.c, u.key, u.spec, u.req, u.lim
        if lim is None and spec.limits == "optional" and spec.default is not None:
            # One pass must converge (the API server may reinvoke us): set the request too when it follows limits.
            ops = set_path_ops(c.data, c.pointer, ("resources", "limits", key), spec.default)
            also = ""
            if spec.requests == "fromLimits" and req is None:
                ops = set_paths_ops(c.data, c.pointer, {("resources", "limits", key): spec.default,
                                                        ("resources", "requests", key): spec.default})
                also = " (and requests, policy fromLimits)"
            yield Violation(f"limits.{key} is not set; the CRL default is {spec.default} {u.src}", u.lptr, c.name,
                            Fix(f"set limits.{key} to the CRL default {spec.default}{also}", Applicability.SAFE,
                                ops))
        elif req is None and lim is not None and spec.requests == "fromLimits":
            ops = set_path_ops(c.data, c.pointer, ("resources", "requests", key), lim)
            yield Violation(f"requests.{key} is not set; policy fromLimits sets it to {lim} {u.src}", u.rptr,
                            c.name, Fix(f"set requests.{key} from limits", Applicability.SAFE, ops))


def _value_type(a: PodAnalysis, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    for u in _uses(a, ctx):
        for section, value, ptr in (("limits", u.lim, u.lptr), ("requests", u.req, u.rptr)):
            if value is not None and not value_matches(u.spec.data_type, value):
                yield Violation(f"{section}.{u.key} {value!r} is not a valid {u.spec.data_type} {u.src}", ptr,
                                u.c.name)


_USERS = "Containers that use any resource of a CRL group (any of its keys)"

register(PodCheck(
    name="crl-limit-required",
    description=f"{_USERS} must set every limit whose policy is required; the safe fix sets the CRL default.",
    fix_applicability=Applicability.SAFE,
    gpu_only=False,
    params_schema=NO_PARAMS_SCHEMA,
    prepare=no_params,
    evaluate=_limit_required,
))
register(PodCheck(
    name="crl-limit-disabled",
    description=f"{_USERS} must not set a limit whose policy is disabled.",
    gpu_only=False,
    params_schema=NO_PARAMS_SCHEMA,
    prepare=no_params,
    evaluate=_limit_disabled,
))
register(PodCheck(
    name="crl-request-policy",
    description=f"{_USERS} follow each key's requests policy (disabled, required, fromLimits); the safe fix "
                "copies the limit for fromLimits.",
    fix_applicability=Applicability.SAFE,
    gpu_only=False,
    params_schema=NO_PARAMS_SCHEMA,
    prepare=no_params,
    evaluate=_request_policy,
))
register(PodCheck(
    name="crl-defaults",
    description=f"{_USERS} get the defaults the platform would set: optional limits with a defaultValue, and "
                "requests that follow limits (fromLimits); safe fixes set them.",
    fix_applicability=Applicability.SAFE,
    gpu_only=False,
    params_schema=NO_PARAMS_SCHEMA,
    prepare=no_params,
    evaluate=_defaults,
))
register(PodCheck(
    name="crl-value-type",
    description=f"{_USERS} give each key's limit and request a value of its dataType (integer, float, quantity).",
    gpu_only=False,
    params_schema=NO_PARAMS_SCHEMA,
    prepare=no_params,
    evaluate=_value_type,
))
