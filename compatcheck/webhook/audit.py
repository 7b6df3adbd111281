"""``compatcheck audit``: the running cluster, read as kubectl reads it, judged once per owner.

Reading: the real ``kubernetes`` client (kubeconfig and context, or the in-cluster config), discovery (``/api/v1``,
``/apis``, ``/apis/<group>/<version>``) to list only the kinds the API server serves, and paged LISTs
(``limit``/``continue``, as kubectl does), so that only one page of objects is in memory at a time.

Order, and what is kept: Nodes (kept as compact ``NodeRecord``s: node classes and placement), the CRL ConfigMaps of
kube-public, the DRA objects (ResourceSlices, DeviceClasses, ResourceClaims and templates, slim) and KServe's
serving runtimes (what other objects resolve to), then the workload kinds of ``core.workloads`` (each evaluated as
it is read and dropped: only its reference and controller's uid are kept), then Pods last (a pod whose controller
was listed is only counted on its owner; any other pod is evaluated). ``core.audit`` reports each owner once.

Every failure to read is a ``AuditError`` with one line (an unreachable API server, a forbidden list), never a
traceback; a kind the server does not serve is skipped, and one that RBAC forbids is an error naming the verb,
resource and namespace, so the audit never passes on a half-read cluster.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from compatcheck.core.audit import AuditResult, owner_key
from compatcheck.core.checks.base import EvalContext, PodAnalysis
from compatcheck.core.cluster import Cluster, NodeRecord, build_cluster_from_records
from compatcheck.core.config import Config
from compatcheck.core.crl import build_index as build_crl_index
from compatcheck.core.dra import build_index as build_dra_index
from compatcheck.core.dra import build_inventory
from compatcheck.core.engine import evaluate
from compatcheck.core.jsonutil import loads_trusted
from compatcheck.core.knowledge import KnowledgeBase
from compatcheck.core.kserve import build_runtime_index
from compatcheck.core.matrix import build_matrix, pool_of, restrict
from compatcheck.core.model import Diagnostic, Finding, ObjectRef, Severity, SourceRef
from compatcheck.core.rules import RuleSet
from compatcheck.core.suppress import split_suppressed
from compatcheck.core.workloads import default_kinds, object_ref
from compatcheck.report.model import LintReport, NotChecked, Silenced
from compatcheck.webhook.clusterview import CRL_NAMESPACE, CRL_SELECTOR, NodeCompactor

PAGE = 500  # kubectl's chunk size (--chunk-size default)
CONNECT_TIMEOUT, READ_TIMEOUT = 10.0, 120.0
DRA_GROUP = "resource.k8s.io"
DRA_KINDS = ("ResourceSlice", "DeviceClass", "ResourceClaimTemplate", "ResourceClaim")
RUNTIME_KINDS = ("ServingRuntime", "ClusterServingRuntime")
# Kinds of the workload table that hold no running pods: PodTemplate is a template for others to copy.
NOT_AUDITED = frozenset({("", "PodTemplate")})


class AuditError(Exception):
    """What stops an audit, in one line."""


@dataclass(frozen=True)
class Resource:
    """A kind the API server serves: where to list it."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"


class Progress:
    """Objects read so far, on stderr (tqdm) when it is a terminal; nothing otherwise."""

    def __init__(self, enabled: bool) -> None:
        self._bar: Any = None
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:  # the audit extra brings it; without it, no bar
                return
            self._bar = tqdm(total=None, unit=" objects", file=sys.stderr, leave=False, dynamic_ncols=True)

    def update(self, what: str, n: int) -> None:
        if self._bar is not None:
            self._bar.set_description(what, refresh=False)
            self._bar.update(n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.refresh()  # the final count, however fast it went (tqdm redraws at most every 0.1 s)
            self._bar.close()


class Lister:
    """GET and paged LIST through the kubernetes client's ApiClient (its auth, TLS and proxy settings)."""

    def __init__(self, api: Any, page: int = PAGE, progress: Progress | None = None) -> None:
        self.api = api
        self.page = page
        self.progress = progress or Progress(False)
        self.requests = 0

    def get(self, path: str, query: list[tuple[str, Any]] | None = None) -> tuple[int, dict[str, Any]]:
        """(HTTP status, the decoded body) of a GET."""
        from urllib3.exceptions import HTTPError

        try:
            req = self.api.param_serialize(method="GET", resource_path=path, query_params=query or [],
                                           header_params={"Accept": "application/json"},
                                           auth_settings=["BearerToken"])
            resp = self.api.call_api(*req, _request_timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
            body = resp.read()
        except (HTTPError, OSError) as exc:
            host = getattr(self.api.configuration, "host", "?")
            raise AuditError(f"cannot reach the API server at {host}: {type(exc).__name__}: {exc}") from None
        self.requests += 1
        try:
            data = loads_trusted(body) if body else {}
        except (ValueError, RecursionError):
            data = {}
        if resp.status == 401:
            raise AuditError(f"GET {path}: 401 Unauthorized: the credentials were refused")
        return resp.status, data if isinstance(data, dict) else {}

    def items(self, resource: Resource, namespace: str | None = None,
              label_selector: str = "") -> Iterator[dict[str, Any]]:
        """Every object of ``resource`` (in ``namespace``, or all), one page in memory at a time."""
        path = resource.path(namespace)
        token = ""
        while True:
            query: list[tuple[str, Any]] = [("limit", self.page)]
            if token:
                query.append(("continue", token))
            if label_selector:
                query.append(("labelSelector", label_selector))
            status, data = self.get(path, query)
            if status == 403:
                where = f" in namespace {namespace}" if namespace and resource.namespaced else ""
                raise AuditError(f"forbidden: cannot list {resource.plural}.{resource.group or 'core'}{where} "
                                 f"({data.get('message', 'RBAC')}); the audit role lists what it needs "
                                 "(docs/audit.md)")
            if status == 410 and token:  # the continue token expired: kubectl starts over too
                raise AuditError(f"LIST {path}: the paging token expired (410 Gone); run the audit again")
            if not 200 <= status < 300:
                raise AuditError(f"LIST {path}: HTTP {status}: {data.get('message', '')}".rstrip(": "))
            page = data.get("items") or []
            self.progress.update(resource.plural, len(page))
            for item in page:
                if isinstance(item, dict):
                    item.setdefault("apiVersion", resource.api_version)
                    item.setdefault("kind", resource.kind)
                    yield item
            token = str((data.get("metadata") or {}).get("continue") or "")
            del data, page
            if not token:
                return


def discover(lister: Lister, wanted: set[tuple[str, str]]) -> dict[tuple[str, str], Resource]:
    """The served resource of each wanted (group, kind): the group's preferred version first, then its others."""
    found: dict[tuple[str, str], Resource] = {}
    groups: dict[str, list[str]] = {"": ["v1"]}
    status, data = lister.get("/apis")
    if status == 200:
        for g in data.get("groups") or []:
            name = g.get("name")
            preferred = (g.get("preferredVersion") or {}).get("version")
            versions = [v.get("version") for v in g.get("versions") or [] if v.get("version")]
            if preferred in versions:
                versions.remove(preferred)
                versions.insert(0, preferred)
            if isinstance(name, str):
                groups[name] = versions
    elif status == 403:
        raise AuditError("forbidden: cannot read the API discovery document /apis")
    for group, versions in groups.items():
        kinds = {k for g, k in wanted if g == group}
        if not kinds:
            continue
        for version in versions:
            path = f"/apis/{group}/{version}" if group else f"/api/{version}"
            status, data = lister.get(path)
            if status != 200:
                continue
            for r in data.get("resources") or []:
                kind, name = r.get("kind"), str(r.get("name") or "")
                if kind in kinds and "/" not in name and "list" in (r.get("verbs") or ["list"]) and \
                        (group, kind) not in found:
                    found[(group, kind)] = Resource(group, version, kind, name, bool(r.get("namespaced")))
    return found


@dataclass
class AuditOptions:
    namespace: str | None = None  # None: all namespaces
    label_selector: str = ""
    page: int = PAGE
    progress: bool = False
    matrix: bool = False  # also evaluate each owner on each node class alone (--format html)


@dataclass
class Audit:
    """What an audit read and found."""

    report: LintReport
    result: AuditResult
    nodes: int = 0
    cluster: Cluster | None = None
    resources: list[str] = field(default_factory=list)  # kind.group of each workload kind listed


def _located(f: Finding) -> Finding:
    ref = f.obj
    where = "/".join(p for p in (ref.namespace, ref.kind, ref.name) if p)
    return Finding(f.rule_id, f.severity, f.message, ref, f.pointer, f.container, f.fix, SourceRef(where))


def run_audit(api: Any, kb: KnowledgeBase, rules: RuleSet, config: Config, options: AuditOptions,
              change: Callable[[Cluster], Cluster] | None = None) -> Audit:
    """Read the cluster and evaluate it (twice per object with ``change``: before, then after it; the report's
    findings are the last variant's)."""
    progress = Progress(options.progress)
    lister = Lister(api, options.page, progress)
    try:
        return _run(lister, kb, rules, config, options, change)
    finally:
        progress.close()


def _run(lister: Lister, kb: KnowledgeBase, rules: RuleSet, config: Config, options: AuditOptions,
         change: Callable[[Cluster], Cluster] | None) -> Audit:
    # the workload-kinds table (an admin's rows too)
    workload_kinds = set((kb.kinds or default_kinds()).keys()) - NOT_AUDITED
    wanted = {("", "Node"), ("", "ConfigMap"), *((DRA_GROUP, k) for k in DRA_KINDS), *workload_kinds}
    served = discover(lister, wanted)
    if ("", "Node") not in served:
        raise AuditError("the API server does not list nodes (/api/v1 has no nodes resource)")
    ns = options.namespace
    compactor = NodeCompactor()
    records: list[NodeRecord] = [compactor(n) for n in lister.items(served[("", "Node")])]
    cluster = build_cluster_from_records(records, kb)
    del records
    crls = list(lister.items(served[("", "ConfigMap")], CRL_NAMESPACE, CRL_SELECTOR)) \
        if ("", "ConfigMap") in served else []
    crl, invalid = build_crl_index(crls)
    report = LintReport()
    for obj, problems in invalid:
        name = (obj.get("metadata") or {}).get("name")
        report.add(Diagnostic(f"configmap {CRL_NAMESPACE}/{name}", f"ignored: {p.message}", severity=Severity.WARNING,
                              kind="crl") for p in problems[:1])
    dra_objects: list[dict[str, Any]] = []
    for kind in DRA_KINDS:
        res = served.get((DRA_GROUP, kind))
        if res is not None:
            dra_objects.extend(_slim(o) for o in lister.items(res, ns if res.namespaced else None))
    if any(o.get("kind") == "ResourceSlice" for o in dra_objects):
        cluster.dra = build_inventory(o for o in dra_objects if o.get("kind") in ("ResourceSlice", "DeviceClass"))
    dra_index = build_dra_index(dra_objects, authoritative=(DRA_GROUP, "ResourceClaim") in served)
    runtimes_objects = [o for kind in RUNTIME_KINDS if ("serving.kserve.io", kind) in served
                        for o in lister.items(served[("serving.kserve.io", kind)],
                                              ns if served[("serving.kserve.io", kind)].namespaced else None)]
    runtimes = build_runtime_index(runtimes_objects)
    base = EvalContext(kb, cluster, crl, dra=dra_index, serving_runtimes=runtimes,
                       admission_plugins=config.admission_plugins, driver_policy=config.driver_policy)
    contexts = [base]
    if change is not None:
        contexts.append(base.with_cluster(change(cluster)))
    shown = len(contexts) - 1  # the view the report's findings are of (after the what-ifs)
    view = contexts[shown].cluster
    assert view is not None
    if options.matrix:  # each node class of that view alone, for the matrix's cells
        contexts.extend(base.with_cluster(restrict(view, i, kb)) for i in range(len(view.classes)))
    result = AuditResult(len(contexts))
    audit = Audit(report, result, cluster.node_count, cluster)

    gpu = [False]  # whether the last object judged runs GPU pods
    unchecked: dict[tuple[str | None, str | None, str | None], list[str]] = {}  # (kind, namespace, name) -> reasons

    def judge(obj: dict[str, Any]) -> list[list[Finding]]:
        out: list[list[Finding]] = []
        for ctx in contexts:
            evaluated = evaluate(obj, rules, ctx, severities=config.severities)
            if ctx is base:
                gpu[0] = any(PodAnalysis(p, base).is_gpu_pod for p in evaluated.pods or ())
                if evaluated.gpu and not evaluated.checked:  # coverage: what of it was not checked, per owner below
                    ref = object_ref(obj)
                    unchecked[(ref.kind, ref.namespace, ref.name)] = [r for _p, r in dict.fromkeys(evaluated.unchecked)]
            for p in evaluated.problems:
                if p.severity is Severity.ERROR and p.kind == "internal":
                    report.add([Diagnostic(_where(obj), p.message, severity=Severity.WARNING, kind="internal")])
            kept = []
            for f in evaluated.findings:
                if config.exempt(f, None):
                    if ctx is contexts[shown]:
                        report.suppressed.append(Silenced(_located(f), "config", "exemption in " +
                                                          (config.path or "config")))
                    continue
                kept.append(f)
            if config.annotation_exemptions:
                kept, silenced = split_suppressed(kept, obj, evaluated.pods)
                if ctx is contexts[shown]:
                    report.suppressed.extend(Silenced(_located(f), "annotation", s.reason) for f, s in silenced)
            out.append(kept)
        return out

    pods_kind = served.get(("", "Pod"))
    for group, kind in sorted(workload_kinds - {("", "Pod")}, ):
        res = served.get((group, kind))
        if res is None:
            continue
        audit.resources.append(f"{res.plural}.{group or 'core'}")
        for obj in (runtimes_objects if kind in RUNTIME_KINDS and group == "serving.kserve.io" else
                    lister.items(res, ns if res.namespaced else None, options.label_selector)):
            report.objects += 1
            result.add_object(obj, judge(obj), gpu[0])
    if pods_kind is not None:
        audit.resources.append("pods.core")
        for pod in lister.items(pods_kind, ns, options.label_selector):
            report.objects += 1
            if result.pod_needs_evaluation(pod):
                result.add_pod(pod, judge(pod), gpu[0])
            else:
                result.add_pod(pod)
    owners = result.owners()
    for owner in owners:  # coverage, once per owner as the findings are: each GPU workload, and what was not checked
        if owner.gpu:
            report.gpu_workloads += 1
            key = (owner.ref.kind, owner.ref.namespace, owner.ref.name)
            report.not_checked.extend(NotChecked(owner.ref, "/".join(p for p in key if p), None, reason)
                                      for reason in unchecked.get(key, ()))
    for owner in owners:
        for f in owner.findings[shown].values():
            pods = owner.pods
            plural = "s" if pods != 1 else ""
            f = Finding(f.rule_id, f.severity, f"{f.message} ({pods} running pod{plural} affected)", f.obj,
                        f.pointer, f.container, f.fix)
            report.findings.append(_located(f))
    if options.matrix:
        report.matrix = build_matrix([pool_of(c) for c in view.classes], [owner_key(o.ref) for o in owners if o.gpu],
                                     [[f for o in owners for f in o.findings[shown + 1 + i].values()]
                                      for i in range(len(view.classes))])
    report.audit = {"nodes": cluster.node_count, "nodeClasses": len(cluster.classes), "owners": len(owners),
                    "pods": result.pods, "podsEvaluated": result.pods_evaluated,
                    "podsByOwner": {"/".join(owner_key(o.ref)): o.pods for o in owners}}
    return audit


def _slim(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid") if k in meta}, "spec": obj.get("spec") or {}}


def _where(obj: dict[str, Any]) -> str:
    ref = ObjectRef(obj.get("apiVersion"), obj.get("kind"), (obj.get("metadata") or {}).get("namespace"),
                    (obj.get("metadata") or {}).get("name"))
    return "/".join(p for p in (ref.namespace, ref.kind, ref.name) if p)


def kube_api(kubeconfig: str | None, context: str | None, in_cluster: bool) -> Any:
    """The ApiClient kubectl's rules would pick: --kubeconfig, else $KUBECONFIG, else ~/.kube/config, with
    --context (else the current context); the in-cluster config (the pod's ServiceAccount) with --in-cluster or
    when there is no kubeconfig at all."""
    from kubernetes import client as kclient
    from kubernetes import config as kconfig
    from kubernetes.config.config_exception import ConfigException

    path = kubeconfig or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or os.path.expanduser("~/.kube/config")
    try:
        if in_cluster or (not kubeconfig and not os.path.exists(path)):
            kconfig.load_incluster_config()
            return kclient.ApiClient()
        if not os.path.exists(path):
            raise AuditError(f"--kubeconfig {path}: no such file")
        return kconfig.new_client_from_config(config_file=path, context=context)
    except ConfigException as exc:
        raise AuditError(f"cannot configure the kubernetes client: {exc}") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise AuditError(f"cannot read kubeconfig {path}: {type(exc).__name__}: {exc}") from None
