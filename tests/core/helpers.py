"""Building blocks of the check tests: a rule of any registered check type with the params a test gives it, GPU
pods and nodes written inline, and the findings of one rule on one object, every field of them."""

from __future__ import annotations

from typing import Any

from compatcheck.core import checks
from compatcheck.core.checks.base import EvalContext, PodAnalysis
from compatcheck.core.cluster import build_cluster
from compatcheck.core.crl import CrlIndex
from compatcheck.core.engine import EvalResult, evaluate
from compatcheck.core.knowledge import KnowledgeBase
from compatcheck.core.model import Fix, Severity
from compatcheck.core.policy import DEFAULT_POLICY, DriverPolicy
from compatcheck.core.rules import Rule
from compatcheck.core.workloads import pod_targets
from tests.core.tables import make_kb

KB = make_kb()  # for reading tables only (its caches may be filled by other tests): contexts take a new one


def rule(check: str, params: dict[str, Any] | None = None, rule_id: str = "r") -> Rule:
    return Rule(rule_id, "summary", Severity.ERROR, checks.get(check), params or {}, "why", "how", (), "test")


def container(name: str = "c", image: str | None = "nvidia/cuda:12.4.1-base", gpus: Any = 1, *,
              resources: dict[str, Any] | None = None, env: dict[str, Any] | None = None,
              args: list[Any] | None = None, command: list[Any] | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name}
    if image is not None:
        c["image"] = image
    if resources is not None:
        c["resources"] = resources
    elif gpus is not None:
        c["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    if env is not None:
        c["env"] = [{"name": k, "value": v} if v is not None else {"name": k} for k, v in env.items()]
    if args is not None:
        c["args"] = args
    if command is not None:
        c["command"] = command
    return c


def pod(*containers: dict[str, Any], annotations: dict[str, str] | None = None, init: list[Any] | None = None,
        **spec: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ns"}
    if annotations:
        meta["annotations"] = annotations
    body: dict[str, Any] = {"containers": list(containers) or [container()], **spec}
    if init is not None:
        body["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body}


def node(name: str, labels: dict[str, str] | None = None, allocatable: dict[str, Any] | None = None,
         taints: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {"taints": taints or []},
            "status": {"allocatable": {"nvidia.com/gpu": 8} if allocatable is None else allocatable}}


def context(nodes: list[dict[str, Any]] | None = None, crl: CrlIndex | None = None,
            kb: KnowledgeBase | None = None, policy: DriverPolicy = DEFAULT_POLICY) -> EvalContext:
    kb = kb or make_kb()
    return EvalContext(kb, build_cluster(nodes, kb) if nodes is not None else None, crl or CrlIndex(),
                       driver_policy=policy)


def run(check: str, obj: dict[str, Any], params: dict[str, Any] | None = None, *,
        nodes: list[dict[str, Any]] | None = None, crl: CrlIndex | None = None,
        kb: KnowledgeBase | None = None, policy: DriverPolicy = DEFAULT_POLICY) -> EvalResult:
    return evaluate(obj, [rule(check, params)], context(nodes, crl, kb, policy))


def found(check: str, obj: dict[str, Any], params: dict[str, Any] | None = None, *,
          nodes: list[dict[str, Any]] | None = None, crl: CrlIndex | None = None, kb: KnowledgeBase | None = None,
          policy: DriverPolicy = DEFAULT_POLICY) -> list[tuple[str, str | None, str, Fix | None]]:
    """(pointer, container, message, fix) of each finding, and no problem."""
    result = run(check, obj, params, nodes=nodes, crl=crl, kb=kb, policy=policy)
    assert result.problems == [], result.problems
    return [(f.pointer, f.container, f.message, f.fix) for f in result.findings]


def messages(check: str, obj: dict[str, Any], params: dict[str, Any] | None = None, **kw: Any) -> list[str]:
    return [m for _p, _c, m, _f in found(check, obj, params, **kw)]


def analysis(obj: dict[str, Any], nodes: list[dict[str, Any]] | None = None, index: int = 0) -> PodAnalysis:
    return PodAnalysis(pod_targets(obj)[index], context(nodes))
