"""Check type ``dra-claim``: a ResourceClaim or ResourceClaimTemplate on its own (the webhook reviews them when
they are created, before any pod uses them). Each device request must be one the cluster's devices can serve:
its selectors compile, its DeviceClass exists, and some device published in a ResourceSlice satisfies the class's
and the request's selectors, enough of them on one node for its count. What a pod's claims get is judged on the
pod (``eligible-node``, and every rule through the devices in its scope)."""

from __future__ import annotations

from collections.abc import Iterator

from compatcheck.core.cel import CelError, CelUnsupported, compile_selector
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
from compatcheck.core.dra import (
    GROUP,
    REVIEWED_KINDS,
    Allocation,
    PodRequest,
    ResolvedAlternative,
    claim_spec_of,
    constraint_reason,
    iter_requests,
    read_constraints,
)
from compatcheck.core.workloads import api_group


def _claim(target: ObjectTarget, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    obj = target.obj
    if obj.get("kind") not in REVIEWED_KINDS or api_group(str(obj.get("apiVersion") or "")) != GROUP:
        return
    inventory = ctx.cluster.dra if ctx.cluster is not None else None
    kind = obj.get("kind")
    served: dict[str, Allocation] = {}
    for request, _spec in iter_requests(obj):
        broken = False
        for alt in request.alternatives:
            for i, expression in enumerate(alt.selectors):
                try:
                    compile_selector(expression)
                except CelUnsupported:
                    continue
                except CelError as exc:
                    broken = True
                    yield Violation(f"request {alt.name!r}: selector {i} is not valid CEL ({exc}); the API server "
                                    f"refuses the {kind}", f"{alt.pointer}/selectors/{i}/cel/expression")
        if broken or inventory is None:
            continue
        resolved = []
        for alt in request.alternatives:
            cls = ctx.dra.device_class(alt.class_name, inventory.classes)
            if cls is None or cls.source not in ("input", "cluster"):
                cls = None if ctx.dra.authoritative else cls
            resolved.append(ResolvedAlternative(alt, cls))
        if any(r.device_class is None for r in resolved):
            if ctx.dra.authoritative:
                missing = [r.alt.class_name for r in resolved if r.device_class is None]
                yield Violation(f"request {request.name!r}: DeviceClass {', '.join(map(repr, missing))} does not "
                                "exist; no device can be allocated for it", request.pointer)
            continue
        outcome = inventory.allocator.serve(PodRequest("", request.name, "", request.pointer, tuple(resolved),
                                                       match_attributes=request.match_attributes,
                                                       distinct_attributes=request.distinct_attributes))
        if not outcome.devices and not outcome.unknown:
            yield Violation(f"request {request.name!r}: no device of the cluster can serve it: "
                            f"{outcome.reason}", request.pointer)
        served[request.name] = outcome
    found = claim_spec_of(obj)
    if inventory is None or found is None:
        return
    # A constraint over several requests: each may be served alone and still not together.
    for c in read_constraints(*found):
        outcomes = [served.get(name) for name in c.requests]
        if len(outcomes) < 2 or any(o is None or not o.devices or o.count is None for o in outcomes):
            continue
        reason = constraint_reason(c, [(o.devices, o.count) for o in outcomes if o is not None and o.count])
        if reason is not None:
            names = ", ".join(map(repr, c.requests))
            yield Violation(f"{c.kind} {c.attribute} over requests {names}: no devices of the cluster can serve "
                            f"them together: {reason}", c.pointer)


register(ObjectCheck(
    name="dra-claim",
    description="A ResourceClaim or ResourceClaimTemplate: its selectors are valid CEL and, with the cluster's "
                "DRA devices (ResourceSlices), each request can be served by some device.",
    gpu_only=False,
    params_schema=NO_PARAMS_SCHEMA,
    prepare=no_params,
    evaluate=_claim,
))
