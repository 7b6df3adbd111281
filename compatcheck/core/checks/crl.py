"""Check types for cf-crl CustomResourceLimitation: ``crl-configmap`` (the ConfigMap itself) and
``crl-policy`` (containers that use a CRL group's resources)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from compatcheck.core.checks import register
from compatcheck.core.checks.base import CheckType, EvalContext, Params, PodAnalysis, Violation
from compatcheck.core.crl import claims_crl, validate_crl, value_matches
from compatcheck.core.jsonutil import mapping
from compatcheck.core.model import Applicability, Fix, PatchOp
from compatcheck.core.patches import set_path_ops, set_paths_ops
from compatcheck.core.pointers import escape_token


def _configmap(target: Any, ctx: EvalContext, params: Params) -> Iterator[Violation]:
    obj = target.obj
    if not claims_crl(obj):
        return
    for pointer, message in validate_crl(obj):
        yield Violation(f"CustomResourceLimitation ConfigMap breaks the cf-crl spec: {message}", pointer)


register(CheckType(
    name="crl-configmap",
    description="Validates ConfigMaps that claim to be cf-crl CustomResourceLimitations against the CRL schema.",
    target="object",
    params_schema={"type": "object", "additionalProperties": False, "properties": {}},
    evaluate=_configmap,
))


def _policy(a: PodAnalysis, params: Params) -> Iterator[Violation]:
    index = a.ctx.crl
    if not index:
        return
    mode = params["mode"]
    for c in a.pod.containers:
        res = mapping(c.data.get("resources"))
        limits = mapping(res.get("limits"))
        requests = mapping(res.get("requests"))
        used = {str(k) for k in limits} | {str(k) for k in requests}
        for group in index.groups_using(used):
            for key, spec in sorted(index.groups[group].items()):
                lim, req = limits.get(key), requests.get(key)
                lptr = f"{c.pointer}/resources/limits/{escape_token(key)}"
                rptr = f"{c.pointer}/resources/requests/{escape_token(key)}"
                src = f"(CRL group {group}, ConfigMap {spec.configmap})"
                if mode == "limit-required" and spec.limits == "required" and lim is None:
                    fix = None
                    if spec.default is not None:
                        fix = Fix(f"set limits.{key} to the CRL default {spec.default}", Applicability.SAFE,
                                  set_path_ops(c.data, c.pointer, ("resources", "limits", key), spec.default))
                    yield Violation(f"limits.{key} is required because the container uses {group} resources {src}",
                                    lptr, c.name, fix)
                elif mode == "limit-disabled" and spec.limits == "disabled" and lim is not None:
                    yield Violation(f"limits.{key} is not allowed {src}", lptr, c.name)
                elif mode == "request-policy":
                    if spec.requests == "disabled" and req is not None:
                        yield Violation(f"requests.{key} is not allowed {src}", rptr, c.name)
                    elif spec.requests == "required" and req is None:
                        yield Violation(f"requests.{key} is required {src}", rptr, c.name)
                    elif spec.requests == "fromLimits" and req is not None and lim is not None and \
                            str(req) != str(lim):
                        yield Violation(f"requests.{key} {req} must equal limits.{key} {lim} (policy fromLimits) "
                                        f"{src}", rptr, c.name,
                                        Fix(f"set requests.{key} from limits", Applicability.SAFE,
                                            (PatchOp("replace", rptr, lim),)))
                elif mode == "defaults":
                    if lim is None and spec.limits == "optional" and spec.default is not None:
                        # One pass must converge (the API server may reinvoke us): set the request too when
                        # it follows limits.
                        ops = set_path_ops(c.data, c.pointer, ("resources", "limits", key), spec.default)
                        also = ""
                        if spec.requests == "fromLimits" and req is None:
                            ops = set_paths_ops(c.data, c.pointer, {("resources", "limits", key): spec.default,
                                                                ("resources", "requests", key): spec.default})
                            also = " (and requests, policy fromLimits)"
                        yield Violation(f"limits.{key} is not set; the CRL default is {spec.default} {src}", lptr,
                                        c.name, Fix(f"set limits.{key} to the CRL default {spec.default}{also}",
                                                    Applicability.SAFE, ops))
                    elif req is None and lim is not None and spec.requests == "fromLimits":
                        ops = set_path_ops(c.data, c.pointer, ("resources", "requests", key), lim)
                        yield Violation(f"requests.{key} is not set; policy fromLimits sets it to {lim} {src}", rptr,
                                        c.name, Fix(f"set requests.{key} from limits", Applicability.SAFE, ops))
                elif mode == "value-type":
                    for section, value, ptr in (("limits", lim, lptr), ("requests", req, rptr)):
                        if value is not None and not value_matches(spec.data_type, value):
                            yield Violation(f"{section}.{key} {value!r} is not a valid {spec.data_type} {src}", ptr,
                                            c.name)


register(CheckType(
    name="crl-policy",
    description="Holds containers that use any resource of a CRL group to the limits/requests policies and data "
                "types of every key of that group.",
    target="pod",
    fix_applicability=Applicability.SAFE,
    fix_modes=("limit-required", "request-policy", "defaults"),
    gpu_only=False,
    params_schema={"type": "object", "additionalProperties": False, "required": ["mode"], "properties": {
        "mode": {"enum": ["limit-required", "limit-disabled", "request-policy", "value-type", "defaults"]}}},
    evaluate=_policy,
))
