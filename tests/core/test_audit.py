"""audit (the pure part): a controller's uid and reference, the walk up a chain of controllers to the owner, and how
an AuditResult folds objects and pods into owners (each finding once, running pods counted, GPU flag, order)."""

from __future__ import annotations

from typing import Any

import pytest

from compatcheck.core.audit import (
    MAX_OWNER_DEPTH,
    AuditResult,
    OwnerFindings,
    OwnerIndex,
    controller_uid,
    owner_key,
    pod_is_running,
)
from compatcheck.core.model import Finding, ObjectRef, Severity


def ctl(uid: Any, kind: str = "ReplicaSet", name: str = "rs", controller: Any = True, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid, "controller": controller, **extra}


def obj(kind: str, name: str, uid: str | None = None, owners: list[Any] | None = None, namespace: Any = "n",
        api_version: str = "apps/v1", phase: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if uid is not None:
        meta["uid"] = uid
    if owners is not None:
        meta["ownerReferences"] = owners
    out: dict[str, Any] = {"apiVersion": api_version, "kind": kind, "metadata": meta}
    if phase is not None:
        out["status"] = {"phase": phase}
    return out


def ref(kind: str, name: str, namespace: str | None = "n", api_version: str = "apps/v1") -> ObjectRef:
    return ObjectRef(api_version, kind, namespace, name)


def finding(rule: str, about: ObjectRef, severity: Severity = Severity.ERROR, pointer: str = "/spec",
            container: str | None = "main", message: str = "m") -> Finding:
    return Finding(rule, severity, message, about, pointer, container)


# ------------------------------------------------------------------------------------------------ controller_uid

@pytest.mark.parametrize(("o", "expected"), [
    ({"kind": "Pod"}, None),
    ({"metadata": "no"}, None),
    (obj("Pod", "p", owners=[]), None),
    (obj("Pod", "p", owners=["no", ctl("u", controller=False), ctl("u2", controller="true"), ctl(7)]), None),
    (obj("Pod", "p", owners=[ctl("a", controller=False, name="x"), ctl("b", name="y"), ctl("c", name="z")]),
     ("b", ref("ReplicaSet", "y"))),
    (obj("Pod", "p", owners=[{"uid": "u", "controller": True}]), ("u", ObjectRef("", "", "n", ""))),
    (obj("Pod", "p", owners=[{"uid": "u", "controller": True, "apiVersion": None, "kind": None, "name": None}]),
     ("u", ObjectRef("", "", "n", ""))),
    (obj("Pod", "p", owners=[ctl("u", kind="Job", name="j", apiVersion="batch/v1")], namespace=5),
     ("u", ObjectRef("batch/v1", "Job", None, "j"))),
])
def test_the_controller_is_the_first_reference_marked_controller_with_a_uid(
        o: dict[str, Any], expected: tuple[str, ObjectRef] | None) -> None:
    assert controller_uid(o) == expected


# ------------------------------------------------------------------------------------------------ OwnerIndex

def test_objects_without_a_uid_are_not_indexed() -> None:
    index = OwnerIndex()
    index.add(obj("Deployment", "d"))
    index.add({**obj("Deployment", "e"), "metadata": {"name": "e", "uid": 5}})
    index.add(obj("ReplicaSet", "r", "rs", [ctl("dep", kind="Deployment", name="d")]))
    index.add(obj("Deployment", "d", "dep"))
    assert index.objects == {"rs": (ref("ReplicaSet", "r"), "dep"), "dep": (ref("Deployment", "d"), None)}


def test_a_pod_without_a_controller_is_its_own_owner() -> None:
    index = OwnerIndex()
    pod = obj("Pod", "p", api_version="v1", owners=[ctl("x", controller=False)])
    assert index.owner(pod) == ref("Pod", "p", api_version="v1")
    assert not index.has_controller(pod)


def test_an_unlisted_controller_ends_the_chain_at_the_reference_the_pod_names() -> None:
    index = OwnerIndex()
    index.add(obj("Deployment", "other", "dep"))
    pod = obj("Pod", "p", api_version="v1", owners=[ctl("rs", kind="ReplicaSet", name="named-in-the-pod")])
    assert index.owner(pod) == ref("ReplicaSet", "named-in-the-pod")
    assert not index.has_controller(pod)


def test_the_chain_is_followed_to_the_object_without_a_controller() -> None:
    index = OwnerIndex()
    index.add(obj("ReplicaSet", "d-1", "rs", [ctl("dep", kind="Deployment", name="d")]))
    index.add(obj("Deployment", "d", "dep"))
    pod = obj("Pod", "p", api_version="v1", owners=[ctl("rs", name="as-the-pod-names-it")])
    assert index.owner(pod) == ref("Deployment", "d")
    assert index.has_controller(pod)


def test_a_chain_ends_at_the_last_listed_object_when_its_controller_was_not_listed() -> None:
    """As ``owners()`` reports a listed object whose controller was not listed: its pods are counted on it."""
    index = OwnerIndex()
    index.add(obj("Job", "j-1", "job", [ctl("cron", kind="CronJob", name="c")], api_version="batch/v1"))
    pod = obj("Pod", "p", api_version="v1", owners=[ctl("job", kind="Job", name="as-the-pod-names-it")])
    assert index.owner(pod) == ref("Job", "j-1", api_version="batch/v1")


def chain(length: int) -> OwnerIndex:
    """Objects o0 <- o1 <- ... : o{i} is controlled by o{i+1}; the last has no controller."""
    index = OwnerIndex()
    for i in range(length):
        owners = [ctl(f"u{i + 1}", kind="Thing", name=f"o{i + 1}")] if i + 1 < length else None
        index.add(obj("Thing", f"o{i}", f"u{i}", owners))
    return index


def test_a_chain_as_long_as_the_bound_is_followed_to_its_top() -> None:
    index = chain(MAX_OWNER_DEPTH)
    pod = obj("Pod", "p", api_version="v1", owners=[ctl("u0", kind="Thing", name="o0")])
    assert index.owner(pod) == ref("Thing", f"o{MAX_OWNER_DEPTH - 1}")


def test_a_chain_longer_than_the_bound_stops_after_the_bound() -> None:
    assert MAX_OWNER_DEPTH == 8
    index = chain(12)
    pod = obj("Pod", "p", api_version="v1", owners=[ctl("u0", kind="Thing", name="o0")])
    assert index.owner(pod) == ref("Thing", "o7")


def test_a_cycle_of_controllers_ends() -> None:
    index = OwnerIndex()
    index.add(obj("Thing", "a", "ua", [ctl("ub", kind="Thing", name="b")]))
    index.add(obj("Thing", "b", "ub", [ctl("ua", kind="Thing", name="a")]))
    pod = obj("Pod", "p", api_version="v1", owners=[ctl("ua", kind="Thing", name="a")])
    assert index.owner(pod) == ref("Thing", "b")  # eight steps: a, b, a, b, a, b, a, b


@pytest.mark.parametrize(("r", "key"), [
    (ObjectRef("v1", "Pod", "ns", "p"), ("Pod", "ns", "p")),
    (ObjectRef(None, None, None, None), ("", "", "")),
])
def test_owner_key(r: ObjectRef, key: tuple[str, str, str]) -> None:
    assert owner_key(r) == key


# ------------------------------------------------------------------------------------------------ OwnerFindings

def test_owner_findings_keep_the_first_of_each_rule_pointer_and_container_about_the_owner() -> None:
    owner = ref("Deployment", "d")
    rs = ref("ReplicaSet", "d-1")
    kept = OwnerFindings(owner, [{}, {}])
    mine = finding("r", owner, message="own")
    kept.add(1, [finding("r", rs, message="first"), mine, finding("r", rs, container="side"),
                 finding("r", rs, pointer="/spec/x", container=None)])
    assert kept.findings[0] == {}
    assert [(k, f.obj, f.message) for k, f in kept.findings[1].items()] == [
        (("r", "/spec", "main"), owner, "first"), (("r", "/spec", "side"), owner, "m"),
        (("r", "/spec/x", None), owner, "m")]
    kept.add(0, [mine])
    assert kept.findings[0][("r", "/spec", "main")] is mine  # about the owner already: the same finding


# ------------------------------------------------------------------------------------------------ pod_is_running

@pytest.mark.parametrize(("pod", "running"), [
    ({}, True), ({"status": "x"}, True), ({"status": {}}, True), ({"status": {"phase": "Running"}}, True),
    ({"status": {"phase": "Pending"}}, True), ({"status": {"phase": "Unknown"}}, True),
    ({"status": {"phase": "Succeeded"}}, False), ({"status": {"phase": "Failed"}}, False),
])
def test_a_pod_runs_unless_it_succeeded_or_failed(pod: dict[str, Any], running: bool) -> None:
    assert pod_is_running(pod) is running


# ------------------------------------------------------------------------------------------------ AuditResult

def summary(result: AuditResult) -> list[tuple[str | None, str | None, int, bool, list[list[tuple[Any, ...]]]]]:
    return [(o.ref.kind, o.ref.name, o.pods, o.gpu,
             [sorted((*k, f.obj.name, f.message) for k, f in v.items()) for v in o.findings])
            for o in result.owners()]


def test_an_audit_reports_owners_sorted_with_their_pods_and_findings_per_variant() -> None:
    result = AuditResult(variants=2)
    dep, rs = ref("Deployment", "web"), ref("ReplicaSet", "web-1")
    result.add_object(obj("ReplicaSet", "web-1", "rs", [ctl("dep", kind="Deployment", name="web")]),
                      [[finding("a", rs)], [finding("b", rs)]], gpu=True)
    result.add_object(obj("Deployment", "web", "dep"), [[finding("a", dep, message="dep")], []], gpu=False)
    # a StatefulSet whose controller (an operator's resource) was not listed: reported itself
    sts = ref("StatefulSet", "db")
    result.add_object(obj("StatefulSet", "db", "sts", [ctl("op", kind="Cluster", name="c")]),
                      [[], [finding("c", sts, Severity.WARNING)]], gpu=True)
    web_pod = obj("Pod", "web-1-x", api_version="v1", owners=[ctl("rs", name="web-1")], phase="Running")
    assert not result.pod_needs_evaluation(web_pod)
    result.add_pod(web_pod)
    result.add_pod(web_pod)
    result.add_pod(obj("Pod", "web-1-y", api_version="v1", owners=[ctl("rs", name="web-1")], phase="Succeeded"))
    bare = obj("Pod", "bare", api_version="v1", phase="Pending")
    assert result.pod_needs_evaluation(bare)
    assert not result.pod_needs_evaluation({**bare, "status": {"phase": "Failed"}})
    pod_ref = ref("Pod", "bare", api_version="v1")
    result.add_pod(bare, [[finding("d", pod_ref)], [finding("d", pod_ref), finding("e", pod_ref)]], gpu=True)
    result.add_pod({**bare, "status": {"phase": "Failed"}}, [[finding("f", pod_ref)], []], gpu=True)
    assert (result.pods, result.pods_evaluated) == (3, 1)
    assert summary(result) == [
        ("Deployment", "web", 2, False, [[("a", "/spec", "main", "web", "dep")], []]),
        ("Pod", "bare", 1, True, [[("d", "/spec", "main", "bare", "m")],
                                  [("d", "/spec", "main", "bare", "m"), ("e", "/spec", "main", "bare", "m")]]),
        ("StatefulSet", "db", 0, True, [[], [("c", "/spec", "main", "db", "m")]])]
    assert result.failing(0, Severity.ERROR.rank) == [(dep, "a"), (pod_ref, "d")]
    assert result.failing(1, Severity.ERROR.rank) == [(pod_ref, "d"), (pod_ref, "e")]
    assert result.failing(1, Severity.WARNING.rank) == [(pod_ref, "d"), (pod_ref, "e"), (sts, "c")]
    assert result.failing(1, Severity.ERROR.rank + 1) == []


def test_a_pod_of_an_unread_controller_is_counted_on_that_controller() -> None:
    result = AuditResult()
    pod = obj("Pod", "p", api_version="v1", owners=[ctl("op", kind="NIMService", name="nim")])
    assert result.pod_needs_evaluation(pod)
    nim = ref("NIMService", "nim")
    result.add_pod(pod, [[finding("r", ref("Pod", "p", api_version="v1"))]], gpu=False)
    result.add_pod(pod, [[finding("r", ref("Pod", "p", api_version="v1"), message="again")]], gpu=True)
    assert summary(result) == [("NIMService", "nim", 2, True, [[("r", "/spec", "main", "nim", "m")]])]
    assert result.owners()[0].ref == nim
    assert result.pods_evaluated == 2


def test_an_evaluated_pod_is_no_gpu_pod_unless_said() -> None:
    result = AuditResult()
    result.add_pod(obj("Pod", "p", api_version="v1"), [[]])
    assert summary(result) == [("Pod", "p", 1, False, [[]])]


def test_a_gpu_flag_once_set_stays() -> None:
    result = AuditResult()
    result.add_object(obj("Deployment", "d", "dep"), [[]], gpu=True)
    result.add_pod(obj("Pod", "p", api_version="v1", owners=[ctl("dep", kind="Deployment", name="d")]), [[]],
                   gpu=False)
    assert summary(result) == [("Deployment", "d", 1, True, [[]])]


def test_an_owner_without_findings_is_reported_and_the_result_is_final() -> None:
    result = AuditResult()
    assert result.variants == 1
    result.add_object(obj("Deployment", "quiet", "q"), [[]])
    first = result.owners()
    assert summary(result) == [("Deployment", "quiet", 0, False, [[]])]
    result.add_object(obj("Deployment", "late", "l"), [[finding("r", ref("Deployment", "late"))]])
    assert result.owners() is first
    assert [o.ref.name for o in first] == ["quiet"]
