"""The allocator: what the scheduler's structured allocator (k8s.io/dynamic-resource-allocation/structured, the
incubating variant Kubernetes 1.36 runs with its beta DRA features on) decides for a pod's claims, node by node
(``Allocator.diagnose`` -> ``Diagnosis``: per request an ``Allocation``, the devices it can get or why none can,
and the ``Failure``s of requests that can each be served alone but not together).

It prepares the search's inputs (the selectors' verdicts through ``selectors.select_devices``, each alternative's
devices by node after capacity and taints, the nodes a device reaches), runs ``search._Search`` on each node (once
per kind of node: nodes whose devices the search cannot tell apart are searched once) and keeps what it decided in
bounded caches, so the pods of a Deployment pay for the search once. The words of its findings are ``explain``'s.
It must not read objects or word a reason itself.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import cached_property
from typing import Any, TypeVar

from compatcheck.core.cel import CelError
from compatcheck.core.dra.claims import PodRequest, ResolvedAlternative
from compatcheck.core.dra.explain import (
    _request_pointer,
    claims_compete,
    constraint_fails,
    constraints_together,
    explain,
    requests_compete,
    undecided,
)
from compatcheck.core.dra.model import NVIDIA_DRIVER, ClaimConstraint, Device, _node_selector_matches
from compatcheck.core.dra.search import (
    Kind,
    Node,
    _Abort,
    _AltIndex,
    _Budget,
    _consumption,
    _count,
    _NodeAlt,
    _Search,
    _Slot,
    _typed,
    _untolerated,
)
from compatcheck.core.dra.selectors import _flatten, _Selected, select_devices


@dataclass(frozen=True)
class Allocation:
    """What the allocator would do with one request: the devices that can serve it, or why none can."""

    devices: tuple[Device, ...]
    reason: str = ""  # why none can (empty when some can)
    unknown: str = ""  # compatcheck cannot tell (a selector its CEL evaluator cannot run)
    count: int | None = None  # how many of ``devices`` the alternative that can serve asks for (None: All)

    places: tuple[Place, ...] | None = None  # ``placements``, when the allocator knows them already

    @cached_property
    def placements(self) -> tuple[Place, ...]:
        """The distinct (labels, node, where) of ``devices`` (devices of another NVIDIA type or MIG profile apart),
        in their order, each with its first device: what the rules read of them (the devices of a node are mostly
        alike)."""
        if self.places is not None:
            return self.places
        return _places(self.devices)


# A device's labels, node, where() for messages, and the device (the first of those alike)
Place = tuple[tuple[tuple[str, str], ...], str | None, str, "Device"]


def _places(devices: Iterable[Device]) -> tuple[Place, ...]:
    out: dict[Any, Place] = {}
    for d in devices:
        attrs = d.input.attributes.get(NVIDIA_DRIVER, {})
        key = (d.labels, d.node, attrs.get("type"), attrs.get("profile"))
        if key not in out:
            out[key] = (d.labels, d.node, d.where(), d)
    return tuple(out.values())


@dataclass(frozen=True)
class ClaimRequests:
    """One claim as the allocator sees it: the requests compatcheck checks, in the claim's order, and the claim's
    constraints. ``pointer``: where a failure of the claim as a whole is reported on a pod (its resourceClaims
    entry)."""

    name: str
    requests: tuple[PodRequest, ...]
    constraints: tuple[ClaimConstraint, ...] = ()
    pointer: str = ""


@dataclass(frozen=True)
class Failure:
    """Requests each of which can be served alone, but not together: ``kind`` "constraint" (a constraint over
    several requests), "overlap" (the requests of one claim compete for the same devices), or "claims" (the pod's
    claims compete for them). ``pointer``: inside the claim object (the constraint, or the request left without a
    device), or for "claims" the pod's resourceClaims entry of the claim left without devices."""

    kind: str
    claim: str
    pointer: str
    subject: str  # e.g. "matchAttribute X over requests 'a', 'b'", "request 'b' together with request 'a'"
    reason: str


@dataclass(frozen=True)
class Diagnosis:
    """What the allocator decides for a pod's claims (or one claim): per request the devices it can get (on the
    nodes where every claim can be allocated, or, where they cannot, what it can get alone) or why it cannot be
    served at all, and the failures of requests that can each be served alone but not together."""

    outcomes: tuple[tuple[PodRequest, Allocation], ...]
    failures: tuple[Failure, ...] = ()


@dataclass
class _Shape:
    """What one node offers a problem's requests: per request, per alternative, its candidate devices there and
    whether (allocationMode All) it is blocked; the devices' kinds, and the signature (what the search sees)."""

    alts: list[list[tuple[tuple[int, ...], bool]]]
    consumption: dict[tuple[int, int], tuple[tuple[tuple[str, str], Fraction], ...]]
    kinds: dict[int, Kind]
    signature: tuple[Any, ...]
    # (request, alternative, kinds) -> the devices it gets here, and their distinct places
    picked: dict[Any, tuple[tuple[Device, ...], tuple[Place, ...]]] = field(default_factory=dict)


@dataclass
class _Solved:
    """What the search says of one node: "ok", "no", or "undecided" (over its budget); for "ok" the alternative
    each request gets (the first that works, in order) and the kinds of devices each can get in some allocation."""

    state: str
    alternatives: tuple[int, ...] = ()
    kinds: tuple[frozenset[Kind], ...] = ()


_K = TypeVar("_K")
_V = TypeVar("_V")


def _remember(cache: dict[_K, _V], key: _K, value: _V) -> _V:
    """Store ``value`` in one of the allocator's bounded caches: a full cache is emptied first (what it held is only
    work that is done again when asked again)."""
    if len(cache) >= Allocator.MAX_CACHED:
        cache.clear()
    cache[key] = value
    return value


class Allocator:
    """What the scheduler's structured allocator (k8s.io/dynamic-resource-allocation/structured, the incubating
    variant Kubernetes 1.36 runs with its beta DRA features on) decides for a pod's claims, node by node.

    Selectors: a selector is evaluated once per distinct projection of the devices onto the names it mentions
    (devices that differ only in uuid or PCI address are one evaluation), and what a tuple of selectors makes of
    the whole inventory is kept for the inventory's life. Then, per alternative, its devices by node after the
    capacity it asks for and the taints it tolerates; per node the backtracking search (``_Search``). Nodes whose
    devices the search cannot tell apart are searched once, and what a pod's claims get on the nodes it can land on
    is kept too: the pods of a Deployment pay for the search once."""

    MAX_CACHED = 1024
    BUDGET = 20_000  # search steps per node (and kind of node); past it the node is "undecided": no finding

    def __init__(self, devices: list[Device]) -> None:
        self.devices = devices
        self._flat = [_flatten(d.input) for d in devices]
        self._selected: dict[tuple[str, ...], _Selected] = {}
        self._alt_index: dict[tuple[Any, ...], _AltIndex] = {}
        self._by_node: dict[Node, list[int]] = {}
        for i, d in enumerate(devices):
            self._by_node.setdefault(None if d.node is None else d.node, []).append(i)
        self._node_names = sorted(n for n in self._by_node if n is not None)
        self._has_selector = any(d.node is None and not d.all_nodes and d.node_selector is not None
                                 for d in devices)
        self._solved: dict[tuple[Any, ...], dict[Any, Any]] = {}
        self._shapes: dict[tuple[Any, ...], dict[Any, _Shape | None]] = {}
        self._diagnosed: dict[tuple[Any, ...], Diagnosis] = {}

    # ------------------------------------------------------------------ selectors
    def select(self, selectors: tuple[str, ...]) -> _Selected:
        found = self._selected.get(selectors)
        if found is not None:
            return found
        return _remember(self._selected, selectors, select_devices(self.devices, self._flat, selectors))

    def _index(self, ra: ResolvedAlternative) -> _AltIndex:
        key = (ra.selectors, ra.alt.tolerations, ra.alt.capacity)
        found = self._alt_index.get(key)
        if found is not None:
            return found
        sel = self.select(ra.selectors)
        every: dict[Node, list[int]] = {}
        usable: dict[Node, list[int]] = {}
        consumption = {}
        no_capacity = {}
        for i in sel.matching:
            d = self.devices[i]
            use = _consumption(d, ra.alt.capacity)
            if isinstance(use, str):
                no_capacity[i] = use
                continue
            if d.shared:
                consumption[i] = use
            every.setdefault(d.node, []).append(i)
            if not _untolerated(d, ra.alt.tolerations):
                usable.setdefault(d.node, []).append(i)
        errors: dict[Node, tuple[int, CelError]] = {}
        for i, exc in sel.errors:
            errors.setdefault(self.devices[i].node, (i, exc))
        found = _AltIndex({k: tuple(v) for k, v in every.items()}, {k: tuple(v) for k, v in usable.items()},
                          errors, consumption, no_capacity)
        return _remember(self._alt_index, key, found)

    # ------------------------------------------------------------------ nodes
    def _places(self, nodes: Collection[str] | None) -> list[Node]:
        if nodes is None:
            return list(self._node_names) or [None]
        return list(sorted(nodes))

    def _reaches(self, i: int, node: Node, labels: Callable[[str], Mapping[str, str]] | None) -> bool:
        """Whether a device of a slice bound to no node serves ``node``: allNodes, or its nodeSelector matches
        the node's labels (when they are known)."""
        d = self.devices[i]
        if d.all_nodes or d.node_selector is None or node is None or labels is None:
            return True
        return _node_selector_matches(d.node_selector, node, labels(node))

    def _local(self, table: Mapping[Node, tuple[int, ...]], node: Node,
               labels: Callable[[str], Mapping[str, str]] | None) -> tuple[int, ...]:
        own = table.get(node, ()) if node is not None else ()
        shared = table.get(None, ())
        if shared and self._has_selector:
            shared = tuple(i for i in shared if self._reaches(i, node, labels))
        return own + shared

    # ------------------------------------------------------------------ the search
    def _shape(self, claims: Sequence[ClaimRequests], node: Node,
               labels: Callable[[str], Mapping[str, str]] | None, table: dict[Any, _Shape | None]) -> _Shape | None:
        """What one node offers the claims' alternatives (their counts aside): None when some request has no
        candidate there."""
        at = (node, tuple(sorted(labels(node).items())) if self._has_selector and labels is not None and
              node is not None else ())
        if at in table:
            return table[at]
        alts_of: list[list[tuple[tuple[int, ...], bool]]] = []
        consumption = {}
        found: _Shape | None = None
        for claim in claims:
            for r in claim.requests:
                alts = []
                for ra in r.alternatives:
                    idx = self._index(ra)
                    error = idx.errors.get(node) if node is not None else None
                    if error is None:
                        error = next((e for e in [idx.errors.get(None)] if e is not None and
                                      self._reaches(e[0], node, labels)), None)
                    if _count(r, ra) is None:
                        cands = self._local(idx.every, node, labels)
                        blocked = error is not None or len(cands) != len(self._local(idx.usable, node, labels))
                    else:
                        cands = () if error is not None else self._local(idx.usable, node, labels)
                        blocked = False
                    for d in cands:
                        if d in idx.consumption:
                            consumption[(len(alts_of), d)] = idx.consumption[d]
                    alts.append((cands, blocked))
                if not any(c for c, _b in alts):
                    table[at] = None
                    return None
                alts_of.append(alts)
        kinds = self._kinds(alts_of, claims, consumption)
        signature = tuple(tuple((blocked, frozenset(Counter(kinds[d] for d in cands).items()))
                                for cands, blocked in alts) for alts in alts_of)
        found = _Shape(alts_of, consumption, kinds, signature)
        table[at] = found
        return found

    def _kinds(self, alts_of: list[list[tuple[tuple[int, ...], bool]]], claims: Sequence[ClaimRequests],
               consumption: dict[tuple[int, int], Any]) -> dict[int, Kind]:
        """Each candidate device's kind: devices of one kind are interchangeable in the search. A kind is canonical
        for the node: which alternatives the device is a candidate of, and for each constraint attribute its type and
        which of the node's values it has (numbered in order of appearance, so that two nodes whose devices relate
        alike have the same kinds whatever their uuids), and, for a shared device, its capacity and what each
        request would consume of it."""
        attributes = sorted({c.attribute for claim in claims for c in claim.constraints})
        members: dict[int, list[int]] = {}
        bit = 0
        for alts in alts_of:
            for cands, _blocked in alts:
                for d in cands:
                    members.setdefault(d, []).append(bit)
                bit += 1
        numbers: list[dict[Any, int]] = [{} for _ in attributes]
        kinds: dict[int, Kind] = {}
        for d, bits in members.items():
            dev = self.devices[d]
            values: list[Any] = []
            for a, seen in zip(attributes, numbers, strict=True):
                v = _typed(dev, a)
                if v is None:
                    values.append(None)
                elif v[0] == "version":  # as written (matchAttribute), and by precedence (distinctAttribute)
                    values.append((v[0], seen.setdefault(("text", v[1].text), len(seen)),
                                   seen.setdefault(("key", v[1].key), len(seen))))
                else:
                    values.append((v[0], seen.setdefault((v[0], v[1]), len(seen))))
            key: Kind = (tuple(bits), tuple(values))
            if dev.shared:
                key += (tuple(sorted((k, q) for ids in dev.input.capacity.values() for k, q in ids.items())),
                        tuple(consumption.get((s, d)) for s in range(len(alts_of))))
            kinds[d] = key
        return kinds

    @staticmethod
    def _slots(claims: Sequence[ClaimRequests], shape: _Shape) -> list[_Slot]:
        slots: list[_Slot] = []
        for c, claim in enumerate(claims):
            for r in claim.requests:
                alts = shape.alts[len(slots)]
                slots.append(_Slot(c, r.request, [_NodeAlt(_count(r, ra), cands, blocked, ra.alt.sub)
                                                  for ra, (cands, blocked) in zip(r.alternatives, alts, strict=True)]))
        return slots

    def _solve_node(self, claims: Sequence[ClaimRequests], node: Node,
                    labels: Callable[[str], Mapping[str, str]] | None, cache: dict[Any, Any],
                    shapes: dict[Any, _Shape | None], counts: tuple[Any, ...],
                    want_kinds: bool) -> tuple[_Solved, _Shape | None]:
        shape = self._shape(claims, node, labels, shapes)
        if shape is None:
            return _Solved("no"), None
        signature = (want_kinds, counts, shape.signature)
        found = cache.get(signature)
        if found is None:
            found = cache[signature] = self._search(self._slots(claims, shape), claims, shape.kinds,
                                                    shape.consumption, want_kinds)
        return found, shape

    def _search(self, slots: list[_Slot], claims: Sequence[ClaimRequests], kinds: dict[int, Kind],
                consumption: dict[tuple[int, int], Any], want_kinds: bool) -> _Solved:
        constraints = [claim.constraints for claim in claims]
        budget = [self.BUDGET]

        def run(fixed: tuple[int, ...] | None = None, forced: tuple[int, Kind] | None = None) -> bool:
            search = _Search(self.devices, slots, constraints, kinds, budget[0], fixed, forced)
            search.consumption = consumption
            try:
                return search.run()
            except _Abort:
                return False
            finally:
                budget[0] = search.budget

        try:
            if not run():
                return _Solved("no")
        except _Budget:
            return _Solved("undecided")
        if not want_kinds:
            return _Solved("ok")
        budget[0] = self.BUDGET  # what the request gets: a budget of its own; past it, more than it gets
        chosen: list[int] = []
        if all(len(t.alts) == 1 for t in slots):
            chosen = [0] * len(slots)
        try:
            for s, slot in enumerate(slots[len(chosen):], start=len(chosen)):  # the first alternative that works
                chosen.append(next((a for a in range(len(slot.alts)) if self._fixed_ok(run, chosen, a, s, slots)),
                                   0))
        except _Budget:
            chosen += [0] * (len(slots) - len(chosen))
        alternatives = tuple(chosen)
        simple = len(slots) == 1 and not any(c.constraints for c in claims)
        got = []
        for s, slot in enumerate(slots):
            alt = slot.alts[alternatives[s]]
            mine = {kinds[d] for d in alt.cands}
            if simple or alt.count is None or budget[0] <= 0:
                got.append(frozenset(mine))
                continue
            try:
                got.append(frozenset(k for k in mine if self._fixed_forced(run, alternatives, s, k, slots)))
            except _Budget:
                got.append(frozenset(mine))
        return _Solved("ok", alternatives, tuple(got))

    @staticmethod
    def _fixed_ok(run: Callable[..., bool], chosen: list[int], a: int, s: int, slots: list[_Slot]) -> bool:
        """Whether some allocation gives the first ``s`` requests their chosen alternatives and request ``s``
        alternative ``a`` (the later requests any of theirs)."""
        for rest in itertools.product(*(range(len(t.alts)) for t in slots[s + 1:])):
            if run(fixed=(*chosen, a, *rest)):
                return True
        return False

    @staticmethod
    def _fixed_forced(run: Callable[..., bool], alternatives: tuple[int, ...], s: int, kind: Kind,
                      slots: list[_Slot]) -> bool:
        return bool(run(fixed=alternatives, forced=(s, kind)))

    def _solve(self, claims: Sequence[ClaimRequests], places: list[Node],
               labels: Callable[[str], Mapping[str, str]] | None, want_kinds: bool = False,
               stop_at_first: bool = True) -> tuple[str, dict[Node, tuple[_Solved, _Shape | None]]]:
        """The search on every place: "ok" when some node can serve the claims, "undecided" when none can but
        some node was not decided, else "no"."""
        key = _problem_key(claims)
        cache = self._solved.get(key)
        if cache is None:
            cache = _remember(self._solved, key, {})
        shape_key = _shape_key(claims)
        shapes = self._shapes.get(shape_key)
        if shapes is None:
            shapes = _remember(self._shapes, shape_key, {})
        counts = tuple(tuple(_count(r, ra) for ra in r.alternatives) for c in claims for r in c.requests)
        results = {}
        state = "no"
        for node in places:
            solved = self._solve_node(claims, node, labels, cache, shapes, counts, want_kinds)
            if solved[0].state == "ok":
                state = "ok"
                results[node] = solved
                if stop_at_first:
                    break
            elif solved[0].state == "undecided" and state == "no":
                state = "undecided"
        return state, results

    # ------------------------------------------------------------------ what a pod gets
    def diagnose(self, claims: Sequence[ClaimRequests], nodes: Collection[str] | None = None,
                 labels: Callable[[str], Mapping[str, str]] | None = None) -> Diagnosis:
        """Allocate the pod's claims together on one node, as the scheduler does (``nodes``: the nodes the pod can
        land on; None: every node of the inventory). ``labels``: a node's labels, for slices with a
        nodeSelector."""
        # The claims themselves (names, pointers, classes: what the outcomes and failures carry back), not only
        # what the search sees: two pods with the same claims share the decision, and each gets its own requests.
        key = (tuple(claims), frozenset(nodes) if nodes is not None else None,
               tuple((n, tuple(sorted(labels(n).items()))) for n in sorted(nodes or ()))
               if self._has_selector and labels is not None else ())
        found = self._diagnosed.get(key)
        if found is None:
            found = _remember(self._diagnosed, key, self._diagnose(claims, nodes, labels))
        return found

    def _diagnose(self, claims: Sequence[ClaimRequests], nodes: Collection[str] | None,
                  labels: Callable[[str], Mapping[str, str]] | None) -> Diagnosis:
        places = self._places(nodes)
        outcomes: dict[tuple[int, str], Allocation] = {}
        kept: list[ClaimRequests] = []
        for c, claim in enumerate(claims):
            mine = []
            for r in claim.requests:
                unknown = self._unknown(r)
                if unknown:
                    outcomes[(c, r.request)] = Allocation((), unknown=unknown)
                else:
                    mine.append(r)
            kept.append(replace(claim, requests=tuple(mine)))
        # Each request alone (with the constraints of its claim, which then constrain its own devices only).
        alone_ok = True
        for c, claim in enumerate(kept):
            for r in claim.requests:
                single = [replace(claim, requests=(r,))]
                state, results = self._solve(single, places, labels, want_kinds=True, stop_at_first=False)
                if state == "ok":
                    outcomes[(c, r.request)] = self._allocation(results, 0, r)
                elif state == "undecided":
                    outcomes[(c, r.request)] = Allocation((), unknown=undecided(self.BUDGET))
                    alone_ok = False
                else:
                    outcomes[(c, r.request)] = Allocation((), explain(self, r, claim.constraints, places, labels))
                    alone_ok = False
        failures: list[Failure] = []
        if alone_ok:
            failures = self._together(kept, places, labels)
        whole = len(kept) == 1 and len(kept[0].requests) == 1  # the request alone is the whole problem
        if alone_ok and not failures and not whole and any(claim.requests for claim in kept):
            state, results = self._solve(kept, places, labels, want_kinds=True, stop_at_first=False)
            if state == "ok":
                slot = 0
                for c, claim in enumerate(kept):
                    for r in claim.requests:
                        outcomes[(c, r.request)] = self._allocation(results, slot, r)
                        slot += 1
        ordered = [(r, outcomes[(c, r.request)]) for c, claim in enumerate(claims) for r in claim.requests]
        return Diagnosis(tuple(ordered), tuple(failures))

    def _unknown(self, r: PodRequest) -> str:
        for ra in r.alternatives:
            if ra.device_class is None:
                return f"DeviceClass {ra.alt.class_name!r} is unknown"
            selected = self.select(ra.selectors)
            if selected.unsupported is not None:
                return f"{selected.unsupported}"
        return ""

    def _allocation(self, results: dict[Node, tuple[_Solved, _Shape | None]], slot: int,
                    request: PodRequest) -> Allocation:
        """The devices request ``slot`` can get on the nodes where the search succeeded."""
        devices: list[Device] = []
        places: list[Place] = []
        chosen: int | None = None
        for solved, shape in results.values():
            assert shape is not None
            alt = solved.alternatives[slot]
            chosen = alt if chosen is None else chosen
            wanted = solved.kinds[slot]
            key = (slot, alt, wanted)
            picked = shape.picked.get(key)
            if picked is None:
                kinds = shape.kinds
                mine = tuple(self.devices[d] for d in shape.alts[slot][alt][0] if kinds[d] in wanted)
                picked = shape.picked[key] = (mine, _places(mine))
            devices.extend(picked[0])
            places.extend(picked[1])
        return Allocation(tuple(devices), count=_count(request, request.alternatives[chosen or 0]),
                          places=tuple(places))

    def _together(self, claims: list[ClaimRequests], places: list[Node],
                  labels: Callable[[str], Mapping[str, str]] | None) -> list[Failure]:
        """Claims whose requests can each be served alone: those that cannot be served together, and why."""
        out: list[Failure] = []
        for claim in claims:
            failure = self._claim_failure(claim, places, labels)
            if failure is not None:
                out.append(failure)
        if out or len([c for c in claims if c.requests]) < 2:
            return out
        for k in range(1, len(claims)):
            if not claims[k].requests:
                continue
            state, _ = self._solve(claims[: k + 1], places, labels)
            if state == "no":
                return [Failure("claims", claims[k].name, claims[k].pointer, *claims_compete(claims, k))]
            if state == "undecided":
                return []
        return out

    def _claim_failure(self, claim: ClaimRequests, places: list[Node],
                       labels: Callable[[str], Mapping[str, str]] | None) -> Failure | None:
        reqs = claim.requests
        if len(reqs) < 2:
            return None
        for j in range(1, len(reqs)):  # the requests alone compete for devices
            state, _ = self._solve([replace(claim, requests=reqs[: j + 1], constraints=())], places, labels)
            if state == "undecided":
                return None
            if state == "no":
                return Failure("overlap", claim.name, _request_pointer(reqs[j]), *requests_compete(reqs, j))
        for c in claim.constraints:  # one constraint with the requests competing for devices
            state, _ = self._solve([replace(claim, constraints=(c,))], places, labels)
            if state == "undecided":
                return None
            if state == "no":
                return Failure("constraint", claim.name, c.pointer, *constraint_fails(self, c, reqs, places, labels))
        state, _ = self._solve([claim], places, labels)
        if state == "no":
            named = [c for c in claim.constraints]
            return Failure("constraint", claim.name, named[-1].pointer if named else _request_pointer(reqs[-1]),
                           *constraints_together(named))
        return None


def _shape_key(claims: Sequence[ClaimRequests]) -> tuple[Any, ...]:
    """What decides a node's candidates for the claims and which of them the search can tell apart."""
    return (tuple(tuple(tuple((ra.selectors, ra.alt.tolerations, ra.alt.capacity, _count(r, ra) is None)
                              for ra in r.alternatives) for r in c.requests) for c in claims),
            tuple(sorted({k.attribute for c in claims for k in c.constraints})))


def _problem_key(claims: Sequence[ClaimRequests]) -> tuple[Any, ...]:
    return tuple((tuple((r.request, r.count_override, tuple((ra.selectors, ra.alt.count, ra.alt.sub,
                                                              ra.alt.tolerations, ra.alt.capacity)
                                                             for ra in r.alternatives)) for r in c.requests),
                  tuple((k.kind, k.attribute, k.names) for k in c.constraints)) for c in claims)
