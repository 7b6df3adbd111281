"""Check types about resource requests and scheduling: ``extended-resources`` (the API server's own
rules), ``vcuda-core``, ``sharing-mode``, ``shared-request-size``, and with a cluster view ``eligible-node``
(some node admits the pod and offers its GPU resources) and ``gpu-taint-toleration`` (the pod tolerates
those nodes' taints)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from compatcheck.core.checks import register
from compatcheck.core.checks.base import (
    HAMI_RESOURCES,
    NO_PARAMS_SCHEMA,
    EvalContext,
    NoParams,
    PodAnalysis,
    PodCheck,
    RawParams,
    Violation,
    env_value,
    no_params,
    quantity_int,
)
from compatcheck.core.cluster import NodeClass, is_extended_resource, offers_resources, untolerated_taints
from compatcheck.core.drakinds import has_claims
from compatcheck.core.jsonutil import Json, JsonObject, mapping
from compatcheck.core.model import Applicability, Fix, PatchOp
from compatcheck.core.patches import set_path_ops
from compatcheck.core.pointers import escape_token
from compatcheck.core.quantities import QuantityError, QuantityOutOfRange, parse_quantity

if TYPE_CHECKING:
    from compatcheck.core.dra import PodRequest


def _short(q: Json) -> str:
    text = _fmt(q)
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"


def _fmt(q: Json) -> str:
    return str(q) if not isinstance(q, str) else q


def _extended(a: PodAnalysis, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    for c in a.pod.containers:
        res = c.data.get("resources")
        if not isinstance(res, dict):
            continue
        limits = mapping(res.get("limits"))
        requests = mapping(res.get("requests"))
        for section, values in (("limits", limits), ("requests", requests)):
            for name, v in values.items():
                if not is_extended_resource(str(name)):
                    continue
                ptr = f"{c.pointer}/resources/{section}/{escape_token(str(name))}"
                try:
                    q = parse_quantity(v)
                except QuantityOutOfRange:
                    if _fmt(v).lstrip().startswith("-"):
                        yield Violation(f"{section}.{name}: {_short(v)} must be greater than or equal to 0", ptr,
                                        c.name)
                    else:
                        # Past 2^63 the API server's own integer check overflows: it accepts some such values (1e32)
                        # and rejects others, so the message claims only what holds for all of them.
                        yield Violation(f"{section}.{name}: {_short(v)} is more than any node offers (past 2^63): "
                                        "the API server may even accept it, but the pod can never be scheduled", ptr,
                                        c.name)
                    continue
                except QuantityError:
                    yield Violation(f"{section}.{name}: {v!r} is not a valid quantity", ptr, c.name)
                    continue
                if q.denominator != 1:
                    yield Violation(f"{section}.{name}: {_fmt(v)} must be an integer (extended resources are "
                                    "whole numbers)", ptr, c.name)
                elif q < 0:
                    yield Violation(f"{section}.{name}: {_fmt(v)} must be greater than or equal to 0", ptr, c.name)
        for name, v in requests.items():
            if not is_extended_resource(str(name)):
                continue
            ptr = f"{c.pointer}/resources/requests/{escape_token(str(name))}"
            if name not in limits:
                yield Violation(f"requests.{name} is set without a limit: the API server rejects it (Limit must be "
                                "set for non overcommitable resources)", ptr, c.name,
                                Fix(f"set limits.{name} to the request", Applicability.SAFE,
                                    set_path_ops(c.data, c.pointer, ("resources", "limits", str(name)), v)))
                continue
            try:
                equal = parse_quantity(v) == parse_quantity(limits[name])
            except QuantityError:
                continue
            if not equal:
                yield Violation(f"requests.{name} {_fmt(v)} must be equal to {name} limit of {_fmt(limits[name])} "
                                "(extended resources cannot be overcommitted)", ptr, c.name,
                                Fix(f"set requests.{name} to the limit", Applicability.UNSAFE,
                                    (PatchOp("replace", ptr, limits[name]),)))


register(PodCheck(
    name="extended-resources",
    description="The API server's validation of extended resources: integers, limits required, requests equal "
                "to limits.",
    fix_applicability=Applicability.SAFE,
    gpu_only=False,
    params_schema=NO_PARAMS_SCHEMA,
    prepare=no_params,
    evaluate=_extended,
))

VCUDA_CORE = "tencent.com/vcuda-core"
VCUDA_MEMORY = "tencent.com/vcuda-memory"


def _vcuda(a: PodAnalysis, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    for c, req in a.gpu_containers:
        if VCUDA_CORE not in req:
            continue
        ptr = f"{c.pointer}/resources/limits/{escape_token(VCUDA_CORE)}"
        core = quantity_int(req[VCUDA_CORE])
        if core is None:
            continue  # extended-resource-invalid reports non-integers
        if core <= 0:
            yield Violation(f"{VCUDA_CORE} {core} must be positive (100 = one whole GPU)", ptr, c.name)
        elif core > 100 and core % 100:
            yield Violation(f"{VCUDA_CORE} {core}: values above 100 must be multiples of 100 (whole GPUs); "
                            "GPU-Manager refuses it", ptr, c.name)
        elif core < 100 and not (quantity_int(req.get(VCUDA_MEMORY, 0)) or 0) > 0:
            yield Violation(f"{VCUDA_CORE} {core} is a fraction of a GPU but {VCUDA_MEMORY} is not set: shared "
                            f"mode needs both (1 unit of {VCUDA_MEMORY} = 256 MiB)", ptr, c.name)


register(PodCheck(
    name="vcuda-core",
    description="GPU-Manager's rules for tencent.com/vcuda-core and vcuda-memory.",
    params_schema=NO_PARAMS_SCHEMA,
    prepare=no_params,
    evaluate=_vcuda,
))



def _dra_mig(container: JsonObject, a: PodAnalysis) -> list[PodRequest]:
    """The container's requests of the pod's claims that get MIG devices (for a pod that names claims)."""
    from compatcheck.core.dra import container_claim_requests, is_mig_request

    return [r for r in container_claim_requests(container, a.dra) if is_mig_request(r)]


def _sharing_modes(a: PodAnalysis, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    for c, req in a.gpu_containers:
        modes = []
        # A DRA claim that gets MIG devices is MIG as a nvidia.com/mig-* request is (MPS on it is the driver's own
        # sharing config, MigDeviceConfig, so CUDA_MPS_* env beside it is no conflict).
        dra_mig = _dra_mig(c.data, a) if has_claims(a.pod.spec) else []
        if any(n.startswith("nvidia.com/mig-") for n in req):
            modes.append("MIG (nvidia.com/mig-*)")
        elif dra_mig:
            modes.append(f"MIG ({dra_mig[0].what})")
        if any(n.startswith("tencent.com/vcuda") for n in req):
            modes.append("GPU-Manager vGPU (tencent.com/vcuda-*)")
        if any(n in HAMI_RESOURCES for n in req):
            modes.append("HAMi (nvidia.com/gpumem/gpucores)")
        if (env_value(c, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") or env_value(c, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT")) and (
                not dra_mig or modes[0] != f"MIG ({dra_mig[0].what})"):
            modes.append("MPS (CUDA_MPS_* env)")
        if len(modes) > 1 and (modes[0].startswith("MIG") or modes[0].startswith("GPU-Manager")):
            yield Violation(f"container mixes GPU sharing modes {' and '.join(modes)}; a GPU is either MIG-"
                            "partitioned or virtualised, not both", f"{c.pointer}/resources", c.name)


register(PodCheck(
    name="sharing-mode",
    description="Detects containers that combine incompatible GPU sharing mechanisms.",
    params_schema=NO_PARAMS_SCHEMA,
    prepare=no_params,
    evaluate=_sharing_modes,
))


@dataclass(frozen=True)
class SharedRequestParams:
    time_slicing_fails_gt_one: bool  # the time-slicing config sets failRequestsGreaterThanOne


def _prepare_shared(raw: RawParams) -> SharedRequestParams:
    return SharedRequestParams(bool(raw.get("timeSlicingFailsRequestsGreaterThanOne", False)))


def _shared_gt_one(a: PodAnalysis, ctx: EvalContext, params: SharedRequestParams) -> Iterator[Violation]:
    fail_ts = params.time_slicing_fails_gt_one
    sel = a.pod.spec.get("nodeSelector")
    pinned = sel.get("nvidia.com/gpu.sharing-strategy") if isinstance(sel, dict) else None
    strategies = {f.sharing_strategy for f in a.scope if f.sharing_strategy} if ctx.cluster is not None else set()
    if pinned:
        strategies.add(str(pinned))
    refusing = {s for s in strategies if s == "mps" or (s == "time-slicing" and fail_ts)}
    if not refusing:
        return
    for c, req in a.gpu_containers:
        for name in ("nvidia.com/gpu", "nvidia.com/gpu.shared"):
            n = quantity_int(req.get(name, 0)) or 0
            if n > 1:
                yield Violation(
                    f"{name}: {n} on {'/'.join(sorted(refusing))}-shared GPUs: the device plugin refuses requests "
                    "above 1 (maximum request size for shared resources is 1) and the pod fails with "
                    "UnexpectedAdmissionError", f"{c.pointer}/resources/limits/{escape_token(name)}", c.name)


register(PodCheck(
    name="shared-request-size",
    description="Requests of more than one shared GPU replica where the device plugin fails them.",
    params_schema={"type": "object", "additionalProperties": False, "properties": {
        "timeSlicingFailsRequestsGreaterThanOne": {
            "type": "boolean", "default": False,
            "description": "Set true if your time-slicing config sets failRequestsGreaterThanOne (MPS always does)."}}},
    prepare=_prepare_shared,
    evaluate=_shared_gt_one,
))


def _offering(a: PodAnalysis) -> tuple[list[NodeClass], list[NodeClass], str]:
    """The node classes the pod's selectors and affinity admit, those of them that offer its GPU requests (an
    extended resource that a DeviceClass maps to DRA devices the pod can get needs no node to offer it), and the
    requests in words."""
    placed = a.placement_classes
    served = {r.claim for r, outcome in a.dra_outcomes if r.claim in a.dra_mapped and outcome.devices}
    requests = {k: v for k, v in a.pod_requests.items() if k not in served}
    offering = [c for c in placed if offers_resources(requests, c)]
    return placed, offering, ", ".join(f"{k}: {v}" for k, v in sorted(requests.items()))


def unoffered_mig(a: PodAnalysis, classes: list[NodeClass]) -> list[str]:
    """The nvidia.com/mig-<profile> resources the pod requests that none of ``classes`` offers."""
    return sorted(n for n, v in a.pod_requests.items()
                  if v > 0 and n.startswith("nvidia.com/mig-") and not any(c.facts.resource(n) for c in classes))


def _eligible_node(a: PodAnalysis, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    cluster = ctx.cluster
    if cluster is None or not a.is_gpu_pod:
        return
    by_profile = {id(r) for r, _missing, _offered, every in a.dra_unoffered_profiles if every}
    for r, outcome in a.dra_outcomes:
        # one cause, one finding: a MIG profile no device in reach is, in every alternative, is mig-profile-unknown's
        if r.claim not in a.dra_mapped and not outcome.devices and not outcome.unknown and id(r) not in by_profile:
            yield Violation(f"no device can be allocated for claim {r.claim!r} ({r.what}): {outcome.reason}; the pod "
                            "would stay Pending", r.pointer)
    for claim, pointer, reason in a.dra_constraint_failures:
        yield Violation(f"no devices can be allocated for claim {claim!r} ({reason}); the pod would stay Pending",
                        pointer)
    if cluster.node_count == 0:  # only ResourceSlices were read: nothing to say of nodes
        return
    placed, offering, wanted = _offering(a)
    if offering:
        return
    missing = unoffered_mig(a, placed)
    if placed and missing:
        rest = {k: v for k, v in a.pod_requests.items() if k not in missing}
        if any(offers_resources(rest, c) for c in placed):
            return  # one cause, one finding: mig-profile-unknown names the profile no node offers
    if not placed:
        why = f"none of the {cluster.node_count} nodes matches its nodeSelector/affinity"
    else:
        matched = cluster.placed_node_count(a.pod.spec)
        why = (f"{matched} {'node matches' if matched == 1 else 'nodes match'} its nodeSelector/affinity but none "
               f"offers {wanted}")
        for r, outcome in a.dra_outcomes:
            if r.claim in a.dra_mapped and not outcome.devices and outcome.reason:
                why += f", and no DRA device of DeviceClass {r.alternatives[0].alt.class_name} can serve " \
                       f"{r.claim}: {outcome.reason}"
    ptr = a.pod.pointer + ("/nodeSelector" if not placed and "nodeSelector" in a.pod.spec else "")
    yield Violation(f"no node can run this pod: {why}; it would stay Pending", ptr)


def _taint_toleration(a: PodAnalysis, ctx: EvalContext, params: NoParams) -> Iterator[Violation]:
    if ctx.cluster is None or not a.is_gpu_pod or not a.pod_requests:  # DRA devices: the allocator's reasons
        return
    _placed, offering, wanted = _offering(a)
    if not offering:
        return
    implied = a.implied_tolerations
    tolerated = [c for c in offering if not untolerated_taints(a.pod.spec, c, implied)]
    if tolerated:
        return
    taints = {}
    for c in offering:
        for t in untolerated_taints(a.pod.spec, c, implied):
            taints[(t.key, t.effect)] = t
    shown = ", ".join(f"{t.key}{'=' + t.value if t.value else ''}:{t.effect}" for t in taints.values())
    tols = [{"key": t.key, "operator": "Exists", "effect": t.effect} for t in taints.values()]
    existing = a.pod.spec.get("tolerations")
    if isinstance(existing, list):
        ops = tuple(PatchOp("add", f"{a.pod.pointer}/tolerations/-", t) for t in tols)
    else:
        ops = (PatchOp("add", f"{a.pod.pointer}/tolerations", tols),)
    yield Violation(f"every GPU node offering {wanted} is tainted ({shown}) and the pod tolerates none of them",
                    a.pod.pointer + ("/tolerations" if isinstance(existing, list) else ""), None,
                    Fix("add tolerations for the GPU node taints", Applicability.UNSAFE, ops))


register(PodCheck(
    name="eligible-node",
    description="With a cluster view: whether any node admits the pod (nodeSelector, affinity) and offers the GPU "
                "resources it requests. Taints are left to gpu-taint-toleration.",
    needs_nodes=True,
    params_schema=NO_PARAMS_SCHEMA,
    prepare=no_params,
    evaluate=_eligible_node,
))
register(PodCheck(
    name="gpu-taint-toleration",
    description="With a cluster view: whether the pod tolerates the taints of at least one node that admits it "
                "and offers its GPU resources; the unsafe fix adds tolerations.",
    needs_nodes=True,
    fix_applicability=Applicability.UNSAFE,
    params_schema=NO_PARAMS_SCHEMA,
    prepare=no_params,
    evaluate=_taint_toleration,
))
