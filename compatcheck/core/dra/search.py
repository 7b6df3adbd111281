"""The allocator's search on one node (``_Search``, the scheduler's allocateOne): the claims in order, each request in
order, each ``firstAvailable`` subrequest in order, devices as combinations in inventory order, with
``matchAttribute``/``distinctAttribute`` constraints, allocationMode All, shared devices while their capacity lasts
and the 32-device limit of a claim (``MAX_RESULTS``); and what one device can give one request: the taints a
request does not tolerate (``_untolerated``) and the capacity it would consume (``_consumption``, with why not).

Its inputs are indices into the inventory's devices, prepared by ``allocator`` (``_AltIndex``: an alternative's
devices by node; ``_Slot``/``_NodeAlt``: a request's alternatives on one node). It must not evaluate selectors,
look at nodes or cache: it answers one question, within a step budget (``_Budget``).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from compatcheck.core.cel import CelError, Semver
from compatcheck.core.dra.claims import PodRequest, ResolvedAlternative
from compatcheck.core.dra.model import (
    ClaimConstraint,
    Device,
    DeviceTaint,
    DeviceToleration,
    _qualified,
    _quantity_text,
)

Node = str | None  # None: the one place of an inventory whose slices are bound to no node


@dataclass
class _AltIndex:
    """One alternative's devices across the inventory, by node (None: slices not bound to one node): ``every``
    what its selectors and capacity requests admit (allocationMode All takes all of them), ``usable`` those of
    them whose taints it tolerates, ``consumption`` what it consumes of each shared device's capacity."""

    every: dict[Node, tuple[int, ...]]
    usable: dict[Node, tuple[int, ...]]
    errors: dict[Node, tuple[int, CelError]]
    consumption: dict[int, tuple[tuple[tuple[str, str], Fraction], ...]]
    no_capacity: dict[int, str]  # device -> why it cannot give the capacity asked for


class _NodeAlt:
    __slots__ = ("blocked", "cands", "count", "sub")

    def __init__(self, count: int | None, cands: tuple[int, ...], blocked: bool, sub: str) -> None:
        self.count = count  # None: All
        self.cands = cands
        self.blocked = blocked  # All: a device it must take is tainted, or a selector fails on the node
        self.sub = sub


class _Slot:
    __slots__ = ("alts", "claim", "name")

    def __init__(self, claim: int, name: str, alts: list[_NodeAlt]) -> None:
        self.claim = claim
        self.name = name
        self.alts = alts


Kind = tuple[Any, ...]  # what the search sees of a device (Allocator._kinds)
MAX_RESULTS = 32  # devices one claim can be allocated (resource.k8s.io AllocationResultsMaxSize)


class _Budget(Exception):
    pass


class _Abort(Exception):
    """allocationMode All met a device a constraint refuses: the allocator treats that as an error and stops
    allocating on the node, without trying other devices for the earlier requests."""


def _count(r: PodRequest, ra: ResolvedAlternative) -> int | None:
    return r.count_override if r.count_override is not None else ra.alt.count


def _typed(d: Device, attribute: str) -> tuple[str, Any] | None:
    """A device's value of a fully qualified attribute, tagged with its type (values of different types never
    match); None when it has none (lookupAttribute: the qualified name, or the bare one in the driver's domain)."""
    domain, name = _qualified(attribute, d.driver)
    value = d.input.attributes.get(domain, {}).get(name)
    if value is None:
        return None
    if isinstance(value, Semver):
        return ("version", value)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    return ("string", value)


def _same(a: tuple[str, Any], b: tuple[str, Any]) -> bool:
    """matchAttribute: same type and value (versions as written: semver's minimal form makes that exact)."""
    if a[0] != b[0]:
        return False
    return bool(a[1].text == b[1].text) if a[0] == "version" else bool(a[1] == b[1])


def _distinct_from(existing: list[tuple[str, Any]], value: tuple[str, Any]) -> bool:
    """distinctAttribute as the allocator checks a new device (constraint.go): against the values allocated so far,
    in order, a value of another type ends the check as distinct; one of the same type and value is a duplicate
    (versions compare by precedence: build metadata does not count)."""
    for tag, v in existing:
        if tag != value[0]:
            return True
        if v == value[1]:
            return False
    return True


def _untolerated(d: Device, tolerations: tuple[DeviceToleration, ...]) -> list[DeviceTaint]:
    """The device's taints that keep a request with these tolerations off it."""
    return [t for t in d.taints if t.prevents_allocation and not any(tol.tolerates(t) for tol in tolerations)]


def _consumption(d: Device, requests: tuple[tuple[str, Fraction], ...]) -> tuple[tuple[tuple[str, str],
                                                                                          Fraction], ...] | str:
    """What a request consumes of each capacity of a device (CmpRequestOverCapacity with nothing allocated yet), or
    why the device cannot give it: a capacity it does not publish, a request its requestPolicy does not allow, or
    more than it has. A name without a domain is the device driver's."""
    capacity = d.input.capacity
    resolved = {}
    for name, q in requests:
        key = _qualified(name, d.driver)
        if key[1] not in capacity.get(key[0], {}):
            return f"{d.name} publishes no capacity {name}"
        resolved[key] = q
    policies = dict(d.policies)
    out = []
    for domain, ids in capacity.items():
        for ident, total in ids.items():
            key = (domain, ident)
            policy = policies.get(key)
            asked = resolved.get(key)
            used = policy.consumed(asked, total) if policy is not None else asked if asked is not None else total
            if policy is not None and policy.violated_by(used):
                return f"the requestPolicy of {d.name}'s {ident} does not allow {_quantity_text(used)}"
            if used > total:
                return f"{d.name} has {_quantity_text(total)} of {ident}"
            out.append((key, used))
    return tuple(out)


class _Search:
    """The allocator's backtracking search on one node (allocateOne): the claims in order, each request in order,
    each ``firstAvailable`` subrequest in order, and for each the devices as combinations in inventory order (a
    device once per request); a device goes to one request of the pod unless it allows multiple allocations (then
    while its capacity lasts); each device added must keep every constraint of its claim that applies to it. Two
    devices the search cannot tell apart (same candidacy, constraint values and capacity) are tried once at a
    level: what fails with one fails with the other."""

    def __init__(self, devices: list[Device], slots: list[_Slot], constraints: list[tuple[ClaimConstraint, ...]],
                 kinds: dict[int, Kind], budget: int, fixed: tuple[int, ...] | None = None,
                 forced: tuple[int, Kind] | None = None) -> None:
        self.devices = devices
        self.slots = slots
        self.constraints = constraints
        self.kinds = kinds
        self.budget = budget
        self.fixed = fixed  # the alternative of each slot, when fixed
        self.forced = forced  # (slot, kind): the slot must take a device of this kind
        self.used: set[int] = set()
        self.consumed: dict[int, dict[tuple[str, str], Fraction]] = {}
        self.state: list[list[list[Any]]] = [[[None, 0] if c.kind == "matchAttribute" else [] for c in cs]
                                             for cs in constraints]
        self.violated = False  # the last _add failed on a constraint
        self.results = [0] * len(constraints)  # devices allocated per claim (at most MAX_RESULTS)
        self.consumption: dict[tuple[int, int], tuple[tuple[tuple[str, str], Fraction], ...]] = {}

    def run(self) -> bool:
        return self._slot(0)

    def _slot(self, s: int) -> bool:
        if s == len(self.slots):
            return True
        slot = self.slots[s]
        alts = [self.fixed[s]] if self.fixed is not None else range(len(slot.alts))
        for a in alts:
            alt = slot.alts[a]
            if alt.count is None:
                if self._all(s, alt):
                    return True
            elif self._pick(s, alt, 0, 0, []):
                return True
        return False

    def _tick(self) -> None:
        self.budget -= 1
        if self.budget < 0:
            raise _Budget

    def _all(self, s: int, alt: _NodeAlt) -> bool:
        self._tick()
        if alt.blocked or not alt.cands:  # All needs at least one device, and every one of them
            return False
        if self.results[self.slots[s].claim] + len(alt.cands) > MAX_RESULTS:
            return False
        added: list[int] = []
        for d in alt.cands:
            self.violated = False
            if not self._add(s, alt, d):
                if self.violated:
                    raise _Abort
                for e in reversed(added):
                    self._remove(s, alt, e)
                return False
            added.append(d)
        if self.forced is not None and self.forced[0] == s and not any(
                self.kinds[d] == self.forced[1] for d in added):
            ok = False
        else:
            ok = self._slot(s + 1)
        if not ok:
            for e in reversed(added):
                self._remove(s, alt, e)
        return ok

    def _pick(self, s: int, alt: _NodeAlt, k: int, start: int, chosen: list[int]) -> bool:
        self._tick()
        assert alt.count is not None
        if k == alt.count:
            if self.forced is not None and self.forced[0] == s and not any(
                    self.kinds[d] == self.forced[1] for d in chosen):
                return False
            return self._slot(s + 1)
        if k == 0 and self.results[self.slots[s].claim] + alt.count > MAX_RESULTS:
            return False
        cands = alt.cands
        tried: set[Any] = set()
        for i in range(start, len(cands) - (alt.count - k) + 1):
            d = cands[i]
            key = (self.kinds[d], tuple(sorted(self.consumed.get(d, {}).items())))
            if key in tried:
                continue
            if not self._add(s, alt, d):
                continue
            chosen.append(d)
            if self._pick(s, alt, k + 1, i + 1, chosen):
                return True
            chosen.pop()
            self._remove(s, alt, d)
            tried.add(key)
        return False

    def _add(self, s: int, alt: _NodeAlt, d: int) -> bool:
        device = self.devices[d]
        slot = self.slots[s]
        shared = device.shared
        if not shared and d in self.used:
            return False
        use = self.consumption.get((s, d)) if shared else None
        if use:
            have = self.consumed.get(d, {})
            totals = {(dom, ident): q for dom, ids in device.input.capacity.items() for ident, q in ids.items()}
            if any(have.get(key, 0) + q > totals[key] for key, q in use):
                return False
        states = self.state[slot.claim]
        done = 0
        ok = True
        for c, st in zip(self.constraints[slot.claim], states, strict=True):
            if not c.applies(slot.name, alt.sub):
                done += 1
                continue
            value = _typed(device, c.attribute)
            if value is None:
                ok = False
            elif c.kind == "matchAttribute":
                if st[1] == 0:
                    st[0], st[1] = value, 1
                elif _same(st[0], value):
                    st[1] += 1
                else:
                    ok = False
            elif _distinct_from(st, value):
                st.append(value)
            else:
                ok = False
            if not ok:
                break
            done += 1
        if not ok:
            self._undo_constraints(slot, alt, states, done)
            self.violated = True
            return False
        if shared:
            if use:
                have = self.consumed.setdefault(d, {})
                for key, q in use:
                    have[key] = have.get(key, 0) + q
        else:
            self.used.add(d)
        self.results[slot.claim] += 1
        return True

    def _undo_constraints(self, slot: _Slot, alt: _NodeAlt, states: list[list[Any]], upto: int) -> None:
        for c, st in list(zip(self.constraints[slot.claim], states, strict=True))[:upto]:
            if not c.applies(slot.name, alt.sub):
                continue
            if c.kind == "matchAttribute":
                st[1] -= 1
            else:
                st.pop()

    def _remove(self, s: int, alt: _NodeAlt, d: int) -> None:
        slot = self.slots[s]
        self._undo_constraints(slot, alt, self.state[slot.claim], len(self.constraints[slot.claim]))
        if self.devices[d].shared:
            use = self.consumption.get((s, d))
            if use:
                have = self.consumed[d]
                for key, q in use:
                    have[key] -= q
                    if not have[key]:
                        del have[key]
                if not have:
                    del self.consumed[d]
        else:
            self.used.discard(d)
        self.results[slot.claim] -= 1
