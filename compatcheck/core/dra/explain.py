"""Explanations: the words of the allocator's findings. Why a request cannot be served alone (``explain``: a selector
that fails on a device, no device in the class or matching the selectors, capacity, taints, allocationMode All,
the 32-device limit, too few devices on any node, or with the same or distinct attribute values), why requests or
claims that can each be served alone cannot be served together (``claims_compete``, ``requests_compete``,
``constraint_fails``, ``constraints_together``: the subject and reason of a ``Failure``), and ``constraint_reason``,
the necessary conditions a constraint over several requests misses.

Each reason is computed from the same indices the search used (``Allocator._index``, ``Allocator._local``), so a
message never contradicts the decision. It must not decide: the allocator calls it only once the search has said
"no" (or, for ``undecided``, ran out of steps), and nothing here changes what is allocated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from compatcheck.core.cel import Semver
from compatcheck.core.dra.claims import PodRequest, ResolvedAlternative
from compatcheck.core.dra.model import ClaimConstraint, Device, _qualified, _quantity_text
from compatcheck.core.dra.search import (
    MAX_RESULTS,
    Node,
    _AltIndex,
    _count,
    _distinct_from,
    _same,
    _typed,
    _untolerated,
)

if TYPE_CHECKING:
    from compatcheck.core.dra.allocator import Allocator, ClaimRequests


_CONSTRAINT_WITH_ALL = ("each request can be served alone, and no node has devices that serve every request of the "
                        "claim while meeting it")
_ALL_STOPS = (" (with allocationMode All, a device the request must take that does not meet the constraint stops the "
              "allocation on the node: the allocator does not try other devices for the requests before it)")
ONE_EACH = ("a device goes to one {0}, or, if it allows multiple allocations, to as many as its capacity lasts "
            "for")


def claims_compete(claims: Sequence[ClaimRequests], k: int) -> tuple[str, str]:
    """The subject and reason of a "claims" failure: claim ``k`` cannot be served together with those before it."""
    before = [c.name for c in claims[:k] if c.requests]
    total = _least_devices([r for c in claims[: k + 1] for r in c.requests])
    return (f"claim {claims[k].name!r} together with claim{'s' if len(before) > 1 else ''} "
            f"{', '.join(map(repr, before))}",
            f"together they ask for {_devices(total)} on one node, and no node has devices that "
            f"can serve them all ({ONE_EACH.format('claim')})")


def requests_compete(reqs: tuple[PodRequest, ...], j: int) -> tuple[str, str]:
    """The subject and reason of an "overlap" failure: request ``j`` of a claim cannot be served together with the
    requests before it."""
    before = [r.request for r in reqs[:j]]
    total = _least_devices(list(reqs[: j + 1]))
    subject = (f"request {reqs[j].request!r} together with request{'s' if len(before) > 1 else ''} "
               f"{', '.join(map(repr, before))}")
    if total > MAX_RESULTS:
        return subject, f"they ask for {_devices(total)} and a claim can be allocated at most {MAX_RESULTS}"
    return subject, (f"they ask for {_devices(total)} on one node, and no node has devices that can serve "
                     f"them all ({ONE_EACH.format('request')})")


def constraint_fails(allocator: Allocator, c: ClaimConstraint, reqs: tuple[PodRequest, ...], places: list[Node],
                     labels: Callable[[str], Mapping[str, str]] | None) -> tuple[str, str]:
    """The subject and reason of a "constraint" failure: one constraint cannot be met with the requests it covers
    competing for devices."""
    covered = [r.request for r in reqs if c.covers(r.request)]
    every = any(_count(r, ra) is None for r in reqs if c.covers(r.request) for ra in r.alternatives)
    return (f"{c.kind} {c.attribute} over request{'s' if len(covered) != 1 else ''} "
            f"{', '.join(map(repr, covered))}",
            (_constraint_reason(allocator, c, reqs, places, labels) if len(covered) > 1 else
             _CONSTRAINT_WITH_ALL) + (_ALL_STOPS if every else ""))


def constraints_together(named: list[ClaimConstraint]) -> tuple[str, str]:
    """The subject and reason of a "constraint" failure: each constraint can be met alone, not all of them."""
    return (f"constraints {', '.join(f'{c.kind} {c.attribute}' for c in named)}",
            "each can be met alone, and no node has devices that meet them together")


def undecided(budget: int) -> str:
    """Why a request is not decided: the search ran out of steps."""
    return (f"the allocation search did not finish within {budget} steps on a node (the scheduler's "
            "own search has a time limit too)")


def explain(allocator: Allocator, r: PodRequest, constraints: tuple[ClaimConstraint, ...], places: list[Node],
            labels: Callable[[str], Mapping[str, str]] | None) -> str:
    """Why a request cannot be served alone, each alternative's reason joined with "; or "."""
    return "; or ".join(_explain_alt(allocator, r, ra, constraints, places, labels) for ra in r.alternatives)


def _explain_alt(allocator: Allocator, r: PodRequest, ra: ResolvedAlternative,
                 constraints: tuple[ClaimConstraint, ...], places: list[Node],
                 labels: Callable[[str], Mapping[str, str]] | None) -> str:
    count = r.count_override if r.count_override is not None else ra.alt.count
    table = {k: tuple(v) for k, v in allocator._by_node.items()}
    everything = {i: None for node in places for i in allocator._local(table, node, labels)}
    placed = list(everything)
    sel = allocator.select(ra.selectors)
    error = next(((i, exc) for i, exc in sel.errors if i in everything), None)
    if error is not None:
        d = allocator.devices[error[0]]
        return (f"a selector fails on device {d.name} ({d.where()}): {error[1]}, and the scheduler aborts the "
                "allocation")
    idx = allocator._index(ra)
    matching = [i for i in sel.matching if i in everything]
    if not matching:
        return _none_reason(allocator, ra, placed)
    fits = [i for i in matching if i not in idx.no_capacity]
    if not fits:
        return _capacity_reason(ra, matching, idx)
    tainted = [i for i in fits if _untolerated(allocator.devices[i], ra.alt.tolerations)]
    mine = tuple(c for c in constraints if c.applies(r.request, ra.alt.sub))
    if count is None:
        if tainted:
            d = allocator.devices[tainted[0]]
            return (f"allocationMode All takes every matching device, and device {d.name} ({d.where()}) has the "
                    f"taint {_untolerated(d, ra.alt.tolerations)[0]}, which the request does not tolerate")
        sizes = [(len(taken), node) for node in places if (taken := allocator._local(idx.every, node, labels))]
        if sizes and min(n for n, _node in sizes) > MAX_RESULTS:
            fewest, where = min(sizes, key=lambda m: m[0])
            return (f"allocationMode All takes every matching device, {fewest} on {where or 'the shared pools'} "
                    f"(the fewest on any node), and a claim can be allocated at most {MAX_RESULTS}")
        for c in mine:
            for node in places:
                here = [allocator.devices[i] for i in allocator._local(idx.every, node, labels)]
                if here and not _all_meet(c, here):
                    return (f"allocationMode All takes all {len(here)} matching devices on "
                            f"{node or 'the shared pools'}, and they do not all "
                            f"{'share' if c.kind == 'matchAttribute' else 'have distinct'} {c.attribute}")
        return "allocationMode All: no node has devices for it"
    usable = [i for i in fits if i not in set(tainted)]
    if not usable:
        shown = sorted({str(t) for i in tainted for t in _untolerated(allocator.devices[i], ra.alt.tolerations)})
        return (f"the {len(tainted)} matching device{'s are' if len(tainted) != 1 else ' is'} tainted "
                f"({', '.join(shown[:3])}{' ...' if len(shown) > 3 else ''}) and the request "
                f"{'tolerates none of these taints' if len(shown) > 1 else 'does not tolerate that taint'}")
    assert count is not None
    if count > MAX_RESULTS:
        return f"it asks for {count} devices and a claim can be allocated at most {MAX_RESULTS}"
    chosen = [allocator.devices[i] for i in usable]
    match = tuple(c.attribute for c in mine if c.kind == "matchAttribute")
    distinct = tuple(c.attribute for c in mine if c.kind == "distinctAttribute")
    per_node: dict[tuple[str | None, tuple[str, ...]], int] = {}
    for d in chosen:
        values = _match_values(d, match)
        if values is not None:  # a device without a matchAttribute attribute cannot be allocated with it
            per_node[(d.node, values)] = per_node.get((d.node, values), 0) + 1
    shared = {v: n for (node, v), n in per_node.items() if node is None}
    best = max((n + shared.get(v, 0) for (node, v), n in per_node.items() if node is not None),
               default=max(shared.values(), default=0))
    note = (f" ({len(tainted)} more {'are' if len(tainted) != 1 else 'is'} tainted and not tolerated)"
            if tainted else "")
    if best < count:
        same = f" with the same {', '.join(match)}" if match else ""
        return (f"it asks for {count} devices{same} on one node and at most {best} "
                f"{'matches' if best == 1 else 'match'} on any node{note}")
    if distinct:
        most = _distinct_best([chosen], distinct)
        if most < count:
            return (f"it asks for {count} devices with distinct {', '.join(distinct)} on one node and "
                    f"{_values(most)} on any node{note}")
    if mine:
        return (f"no node has {count} devices for it that meet its constraints "
                f"({', '.join(f'{c.kind} {c.attribute}' for c in mine)})")
    return f"no node has {count} devices for it"


def _capacity_reason(ra: ResolvedAlternative, matching: list[int], idx: _AltIndex) -> str:
    asked = ", ".join(f"{name}: {_quantity_text(q)}" for name, q in ra.alt.capacity)
    why = sorted({idx.no_capacity[i] for i in matching})
    more = " ..." if len(why) > 3 else ""
    which = (f"none of the {len(matching)} matching devices can" if len(matching) != 1 else
             "the 1 matching device cannot")
    return f"it asks for capacity {asked} and {which} give it ({'; '.join(why[:3])}{more})"


def _none_reason(allocator: Allocator, ra: ResolvedAlternative, placed: list[int]) -> str:
    cls = ra.device_class
    name = cls.name if cls else ra.alt.class_name
    if not placed:
        return ("no ResourceSlice publishes a device on a node the pod can land on (its nodeSelector, affinity "
                "and tolerations)")
    devices = [allocator.devices[i] for i in placed]
    drivers = sorted({d.driver for d in devices})
    products = sorted({dict(d.labels).get("nvidia.com/gpu.product", "") for d in devices} - {""})
    shown = f": {', '.join(products[:4])}{' ...' if len(products) > 4 else ''}" if products else ""
    have = f"{len(placed)} {'/'.join(drivers)} device{'s' if len(placed) != 1 else ''} in reach{shown}"
    if cls is not None and cls.selectors:
        in_reach = set(placed)
        in_class = [i for i in allocator.select(cls.selectors).matching if i in in_reach]
        if not in_class:
            return f"no device is in DeviceClass {name} ({have})"
        if ra.alt.selectors:
            return (f"{have}, and none of the {len(in_class)} of DeviceClass {name} satisfies the selector "
                    f"{_short(' && '.join(ra.alt.selectors))}")
    return f"no device satisfies DeviceClass {name} ({have})"


def _constraint_reason(allocator: Allocator, c: ClaimConstraint, reqs: tuple[PodRequest, ...],
                       places: list[Node], labels: Callable[[str], Mapping[str, str]] | None) -> str:
    served = []
    for r in reqs:
        if not c.covers(r.request):
            continue
        options = []  # the alternatives the constraint applies to: the one asking for the fewest devices
        for ra in [a for a in r.alternatives if c.applies(r.request, a.alt.sub)] or list(r.alternatives):
            idx = allocator._index(ra)
            mine = tuple({i: None for node in places for i in allocator._local(idx.usable, node, labels)})
            count = _count(r, ra)
            options.append((count if count is not None else len(mine), tuple(allocator.devices[i] for i in mine)))
        count, devices = min(options, key=lambda o: o[0])
        served.append((devices, count))
    reason = constraint_reason(c, served)
    if reason is not None:
        return reason
    return _CONSTRAINT_WITH_ALL


def _request_pointer(r: PodRequest) -> str:
    """A request's pointer inside its claim object (its first alternative's, less the alternative part)."""
    pointer = r.alternatives[0].alt.pointer if r.alternatives else ""
    for tail in ("/exactly", "/firstAvailable/0"):
        if pointer.endswith(tail):
            return pointer[: -len(tail)]
    return pointer


def _least_devices(requests: list[PodRequest]) -> int:
    """The fewest devices the requests ask for together (allocationMode All: at least one)."""
    total = 0
    for r in requests:
        counts = [r.count_override if r.count_override is not None else ra.alt.count for ra in r.alternatives]
        total += min((c if c is not None else 1) for c in counts) if counts else 0
    return total


def _devices(n: int) -> str:
    return f"{n} device{'s' if n != 1 else ''}"


def _all_meet(c: ClaimConstraint, devices: list[Device]) -> bool:
    """Whether every one of ``devices`` can be allocated under the constraint, in order."""
    values: list[tuple[str, Any]] = []
    for d in devices:
        v = _typed(d, c.attribute)
        if v is None:
            return False
        if c.kind == "matchAttribute":
            if values and not _same(values[0], v):
                return False
        elif not _distinct_from(values, v):
            return False
        values.append(v)
    return True


def _values(n: int) -> str:
    return f"at most {n} distinct value{'s' if n != 1 else ''} {'are' if n != 1 else 'is'}" if n else "none has it"


def _on_node(groups: list[tuple[Device, ...]], node: str | None) -> list[list[Device]]:
    """Each group's devices reachable on ``node`` (its own, and those of slices not bound to one node)."""
    return [[d for d in g if d.node is None or d.node == node] for g in groups]


def _nodes(groups: list[tuple[Device, ...]] | list[list[Device]]) -> list[str | None]:
    named = sorted({d.node for g in groups for d in g if d.node is not None})
    return list(named) or [None]


def _distinct_best(groups: list[list[Device]] | list[tuple[Device, ...]], attributes: tuple[str, ...]) -> int:
    """The most devices with pairwise different values of every one of ``attributes`` that the union of
    ``groups`` can offer on one node (an upper bound: the fewest distinct values of any of the attributes)."""
    best = 0
    for node in _nodes(groups):
        here = [d for g in _on_node(list(map(tuple, groups)), node) for d in g]
        unique = {id(d): d for d in here}.values()
        counts = []
        for attribute in attributes:
            counts.append(len({_distinct_value(v) for d in unique if (v := _typed(d, attribute)) is not None}))
        best = max(best, min(counts, default=0))
    return best


def _distinct_value(value: tuple[str, Any]) -> tuple[str, Any]:
    """A typed value as distinctAttribute tells values apart: versions by precedence (build metadata aside)."""
    return (value[0], value[1].key) if value[0] == "version" else value


def constraint_reason(constraint: ClaimConstraint, served: list[tuple[tuple[Device, ...], int]]) -> str | None:
    """Why a constraint that covers several requests cannot be met by the devices that can serve each of them
    (``served``: each request's candidate devices and count); None when it may be. Necessary conditions only, on
    one node: for matchAttribute some value that every request gets its count of (and enough devices in all);
    for distinctAttribute as many distinct values as the requests ask for devices in all. A finding is sure."""
    total = sum(count for _devices, count in served)
    groups = [devices for devices, _count in served]
    if constraint.kind == "distinctAttribute":
        best = _distinct_best(groups, (constraint.attribute,))
        if best >= total:
            return None
        return (f"they ask for {total} devices with distinct {constraint.attribute} on one node and "
                f"{_values(best)} on any node")
    for node in _nodes(groups):
        here = _on_node(groups, node)
        by_value: list[dict[tuple[str, ...], list[Device]]] = []
        for devices in here:
            table: dict[tuple[str, ...], list[Device]] = {}
            for d in devices:
                v = _match_values(d, (constraint.attribute,))
                if v is not None:
                    table.setdefault(v, []).append(d)
            by_value.append(table)
        for value in set.intersection(*(set(t) for t in by_value)) if by_value else set():
            enough = all(len(t[value]) >= count for t, (_d, count) in zip(by_value, served, strict=True))
            union = {id(d) for t in by_value for d in t[value]}
            if enough and len(union) >= total:
                return None
    return (f"they ask for {total} devices with the same {constraint.attribute} on one node and no node "
            "has them")


def _match_values(d: Device, attributes: tuple[str, ...]) -> tuple[str, ...] | None:
    """The values of the ``matchAttribute`` attributes (fully qualified: domain/name) on a device; None when one is
    missing (the scheduler cannot allocate such a device under the constraint)."""
    out = []
    for qualified in attributes:
        domain, name = _qualified(qualified, d.driver)
        value = d.input.attributes.get(domain, {}).get(name)
        if value is None:
            return None
        # typed: values of different types are never equal (as in the allocator's constraints)
        out.append(f"semver:{value.text}" if isinstance(value, Semver) else repr(value))
    return tuple(out)


def _short(expression: str, limit: int = 90) -> str:
    flat = " ".join(expression.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")
