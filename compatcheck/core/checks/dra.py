"""Check type ``dra-claim``: a ResourceClaim or ResourceClaimTemplate on its own (the webhook reviews them when
they are created, before any pod uses them). Each device request must be one the cluster's devices can serve:
its selectors compile, its DeviceClass exists, and some device published in a ResourceSlice satisfies the class's
and the request's selectors, enough of them on one node for its count. What a pod's claims get is judged on the
pod (``eligible-node``, and every rule through the devices in its scope)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

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
from compatcheck.core.drakinds import GROUP, REVIEWED_KINDS
from compatcheck.core.workloads import api_group

if TYPE_CHECKING:
    from compatcheck.core.dra import PodRequest


def _claim(target: ObjectTarget, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    obj = target.obj
    if obj.get("kind") not in REVIEWED_KINDS or api_group(str(obj.get("apiVersion") or "")) != GROUP:
        return
    # Only now, for a claim or template: the CEL compiler and the allocator (see core.drakinds).
    from compatcheck.core.cel import CelError, CelUnsupported, compile_selector
    from compatcheck.core.dra import (
        EMPTY_INDEX,
        ClaimRequests,
        PodRequest,
        ResolvedAlternative,
        claim_spec_of,
        iter_requests,
        read_constraints,
    )

    index = ctx.dra if ctx.dra is not None else EMPTY_INDEX
    inventory = ctx.cluster.dra if ctx.cluster is not None else None
    kind = obj.get("kind")
    checked: list[PodRequest] = []
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
            cls = index.device_class(alt.class_name, inventory.classes)
            if cls is None or cls.source not in ("input", "cluster"):
                cls = None if index.authoritative else cls
            resolved.append(ResolvedAlternative(alt, cls))
        if any(r.device_class is None for r in resolved):
            if index.authoritative:
                missing = [r.alt.class_name for r in resolved if r.device_class is None]
                yield Violation(f"request {request.name!r}: DeviceClass {', '.join(map(repr, missing))} does not "
                                "exist; no device can be allocated for it", request.pointer)
            continue
        checked.append(PodRequest("", request.name, "", request.pointer, tuple(resolved)))
    found = claim_spec_of(obj)
    if inventory is None or found is None or not checked:
        return
    # The claim's requests allocated together, as the scheduler does for the first pod that uses it.
    diagnosis = inventory.allocator.diagnose([ClaimRequests("", tuple(checked), tuple(read_constraints(*found)))])
    for served, outcome in diagnosis.outcomes:
        if not outcome.devices and not outcome.unknown:
            yield Violation(f"request {served.request!r}: no device of the cluster can serve it: "
                            f"{outcome.reason}", served.pointer)
    for failure in diagnosis.failures:
        yield Violation(f"{failure.subject}: no devices of the cluster can serve them together: {failure.reason}",
                        failure.pointer)


register(ObjectCheck(
    name="dra-claim",
    description="A ResourceClaim or ResourceClaimTemplate: its selectors are valid CEL and, with the cluster's "
                "DRA devices (ResourceSlices), each request can be served by some device.",
    gpu_only=False,
    params_schema=NO_PARAMS_SCHEMA,
    prepare=no_params,
    evaluate=_claim,
))
