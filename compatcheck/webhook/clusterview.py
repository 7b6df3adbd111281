"""The webhook's view of the cluster: Nodes, CRL ConfigMaps and the Dynamic Resource Allocation objects, as an
immutable snapshot.

``StaticView`` reads files once. ``LiveView`` lists and watches Nodes, the CRL ConfigMaps in kube-public and, where
the API server serves ``resource.k8s.io`` (v1, else v1beta2 or v1beta1: ``DRA_VERSIONS``), ResourceSlices,
DeviceClasses, ResourceClaimTemplates and ResourceClaims, and where KServe is installed its ServingRuntimes and
ClusterServingRuntimes, with the real ``kubernetes`` client, in background threads. It keeps resourceVersion
bookkeeping, re-lists on 410 Gone, and reconnects with capped, jittered backoff when a watch drops. Every change
builds a new snapshot that is swapped in atomically. The admission path only reads the current snapshot, so a watch
never blocks a request. An invalid CRL ConfigMap is ignored whole, logged and counted, never half-applied. A Node
label or allocatable value that cannot be read (a garbage driver version) is logged and counted once, when it
appears.

What the view promises the admission path:
- no snapshot is published before *every* watched resource has completed its first list (``synced``); until
  then admission answers per the failure mode, never from a half-read cluster;
- a re-list (410 Gone) builds the new set aside and swaps it in whole: the last good view serves meanwhile;
- when the API server cannot be reached the last good view keeps serving, and the view says since when it is
  stale (``health()``, /readyz, a gauge and a log line); it recovers within a few seconds of the API server.
"""

from __future__ import annotations

import contextlib
import logging
import random
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from compatcheck.core.cel import warm as warm_cel
from compatcheck.core.checks.base import EvalContext
from compatcheck.core.cluster import (
    Cluster,
    NodeClass,
    NodeRecord,
    about_node,
    build_cluster_from_records,
    node_problems,
    node_record,
)
from compatcheck.core.crl import CrlIndex, build_index
from compatcheck.core.dra import DraIndex, Inventory, build_inventory
from compatcheck.core.dra import build_index as build_dra_index
from compatcheck.core.jsonutil import loads_trusted
from compatcheck.core.knowledge import KnowledgeBase
from compatcheck.core.kserve import RuntimeIndex, build_runtime_index
from compatcheck.core.model import Diagnostic, Severity
from compatcheck.core.pointers import split_pointer
from compatcheck.core.policy import DEFAULT_POLICY, DriverPolicy
from compatcheck.io.loader import crl_index, load_crl_objects, load_nodes
from compatcheck.webhook.logs import log_event

log = logging.getLogger("compatcheck.webhook.view")

CRL_NAMESPACE = "kube-public"
LIST_PAGE = 100  # small pages bound the transient memory of the initial list (RSS with 5k nodes)
COMPACT_SLACK = 4096  # intern-table entries that churn may leave behind before a compaction is worth it
CRL_SELECTOR = "features.alauda.io/type=CustomResourceLimitation"


class ViewError(Exception):
    pass


@dataclass(frozen=True)
class Snapshot:
    ctx: EvalContext
    synced: bool
    nodes: int = 0
    classes: int = 0
    crl_valid: int = 0
    crl_invalid: int = 0
    nodes_version: str = ""  # the Nodes' resourceVersion the snapshot includes (live view; "" for files)
    node_problems: int = 0  # distinct problems of the nodes' labels and allocatable (see NodeProblemLog)

    @classmethod
    def of(cls, kb: KnowledgeBase, cluster: Cluster | None, index: CrlIndex, invalid: int,
           synced: bool = True, nodes_version: str = "", node_problems: int = 0,
           dra: DraIndex | None = None, runtimes: RuntimeIndex | None = None,
           admission_plugins: frozenset[str] = frozenset(), driver_policy: DriverPolicy = DEFAULT_POLICY) -> Snapshot:
        ctx = EvalContext(kb, cluster, index, admission_plugins=admission_plugins, driver_policy=driver_policy)
        if dra is not None:
            ctx.dra = dra
        if runtimes is not None:
            ctx.serving_runtimes = runtimes
        return cls(ctx, synced, cluster.node_count if cluster else 0,
                   len(cluster.classes) if cluster else 0, sum(len(g) for g in index.groups.values()), invalid,
                   nodes_version, node_problems)

    def publish(self, metrics: Any) -> None:
        """Set the view gauges (one place for the static and the live view)."""
        metrics.nodes.set(self.nodes)
        metrics.node_classes.set(self.classes)
        metrics.crl_loaded.set(self.crl_valid)
        metrics.crl_invalid.set(self.crl_invalid)
        metrics.node_problems.set(self.node_problems)


class NodeProblemLog:
    """Reports what the nodes say that cannot be read (a garbage driver label, a non-quantity allocatable): the
    rules ignore such a value, so an admin must hear of it. Each distinct problem gets one warning log line and
    one count (``compatcheck_node_problems_reported_total``) when it appears, not one per snapshot: a view
    rebuilds on every Node event. A problem that goes away and comes back is reported again."""

    def __init__(self, metrics: Any = None) -> None:
        self.metrics = metrics
        self._current: frozenset[Diagnostic] = frozenset()

    def update(self, cluster: Cluster | None) -> int:
        """Report the problems of ``cluster`` not reported since they last appeared; how many there are now."""
        current: dict[Diagnostic, NodeClass] = {}
        for cls, problem in node_problems(cluster) if cluster is not None else ():
            current.setdefault(problem, cls)
        for problem, cls in current.items():
            if problem in self._current:
                continue
            field = (split_pointer(problem.pointer) or ["?"])[-1]
            log_event(log, logging.WARNING, "a node value cannot be read; the rules ignore it",
                      node=cls.members[0].name, nodes=cls.count, field=field,
                      error=about_node(cls, problem).message)
            if self.metrics is not None:
                self.metrics.node_problems_seen.labels(field).inc()
        self._current = frozenset(current)
        return len(current)


# Reconnect backoff: doubling from BACKOFF_MIN, capped at BACKOFF_MAX, each pause drawn from [50 %, 100 %] of
# it (jitter, so replicas do not reconnect in step). With the cap at 2 s the view is back within ~2 s of the
# API server; an uncapped doubling reached 16-30 s after a short outage.
BACKOFF_MIN = 0.25
BACKOFF_MAX = 2.0
CONNECT_TIMEOUT = 5.0
LIST_READ_TIMEOUT = 60.0


@dataclass(frozen=True)
class ViewHealth:
    """What readiness reports: whether every resource has completed its first list, since when (Unix time) the
    view has been unable to follow the API server (None: it follows), and why."""

    synced: bool
    stale_since: float | None = None
    reason: str = ""
    waiting_for: tuple[str, ...] = ()


class StaticView:
    """Cluster view from --nodes / --crl files, read once at start-up."""

    def __init__(self, kb: KnowledgeBase, nodes: str | None, crl: list[str], max_bytes: int = 64 << 20,
                 metrics: Any = None, admission_plugins: frozenset[str] = frozenset(),
                 driver_policy: DriverPolicy = DEFAULT_POLICY) -> None:
        cluster: Cluster | None = None
        if nodes:
            cluster, found = load_nodes(nodes, kb, max_bytes)
            errors = [d for d in found if d.severity is Severity.ERROR]
            if errors:
                raise ViewError("; ".join(f"{e.path}: {e.message}" for e in errors))
        index = CrlIndex()
        invalid = 0
        if crl:
            objects, errors = load_crl_objects(crl, max_bytes)
            if errors:
                raise ViewError("; ".join(f"{e.path}: {e.message}" for e in errors))
            index, bad = crl_index(objects)
            for e in bad:
                log_event(log, logging.WARNING, "ignoring invalid CRL ConfigMap", file=e.path, error=e.message)
            invalid = len(bad)
        problems = NodeProblemLog(metrics).update(cluster)
        self.snapshot = Snapshot.of(kb, cluster, index, invalid, node_problems=problems,
                                    admission_plugins=admission_plugins, driver_policy=driver_policy)
        self._inputs = (nodes, crl, max_bytes, metrics, admission_plugins, driver_policy)

    def set_kb(self, kb: KnowledgeBase) -> None:
        """Judge with ``kb`` from now on (a data bundle swapped in): the files are read again against it."""
        nodes, crl, max_bytes, metrics, plugins, policy = self._inputs
        self.snapshot = StaticView(kb, nodes, crl, max_bytes, metrics, plugins, policy).snapshot

    def health(self) -> ViewHealth:
        return ViewHealth(True)

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


def _release_memory() -> None:
    """Hand the memory of a big initial list back to the OS (glibc keeps freed arenas otherwise)."""
    import ctypes
    import gc

    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class NodeCompactor:
    """Reads Nodes into NodeRecords whose equal parts are one object: the name, every placement label value, a
    pool's label keys, rule labels, taints and GPU allocatable. With 20,000 GFD-labelled nodes that carry a few
    unique labels each (instance id, rack, slot) a node costs ~700 bytes instead of a few KB of nested dicts.

    The intern table holds what the live records use, plus what churn left behind since the last ``compact``:
    each new value of a churning label adds an entry, and the records that held the old value are gone. So the
    owner calls ``compact`` with the records it still holds, and once the table has outgrown them by half it is
    rebuilt from them, dropping the dead entries (a blind reset instead would keep every live part alive twice:
    once in the old records, once as the new canonical copy). Thread-safe: the watcher thread reads Nodes while
    the publisher compacts."""

    def __init__(self, slack: int | None = None) -> None:
        self._table: dict[Any, Any] = {}
        self._base = 0  # table size when it was last rebuilt from the live records
        self._slack = COMPACT_SLACK if slack is None else slack
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._table)

    def _one(self, value: Any) -> Any:
        return self._table.setdefault(value, value)

    def __call__(self, node: dict[str, Any]) -> NodeRecord:
        with self._lock:
            return node_record(node, self._one)

    def compact(self, live: Iterable[NodeRecord]) -> bool:
        """Rebuild the table from ``live`` (every record still held) if it has outgrown them; True if it did.
        Records read after ``live`` was taken may lose their sharing with later ones: that costs memory until
        they are replaced, never correctness."""
        with self._lock:
            if len(self._table) <= self._base + max(self._slack, self._base // 2):
                return False
            table: dict[Any, Any] = {}
            one = table.setdefault
            for rec in live:
                for part in (rec.name, rec.rule_labels, rec.label_keys, rec.taints, rec.gpu_allocatable):
                    one(part, part)
                for value in rec.label_values:
                    one(value, value)
            self._table = table
            self._base = len(table)
            return True


class _Lister(Protocol):
    """A list call of the kubernetes client (``list_node``, ``list_namespaced_config_map``): its arguments are
    the client's (``kwargs`` below, then paging and streaming options), and its answer is read raw."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


def _key(obj: dict[str, Any]) -> str | None:
    """An object's key in a watcher: its name, behind its namespace for a namespaced one."""
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        return None
    return f"{meta['namespace']}/{name}" if meta.get("namespace") else str(name)


def _slim_spec(obj: dict[str, Any]) -> dict[str, Any]:
    """What compatcheck reads of a DRA object: kind, name, namespace and spec (no managedFields, no status)."""
    meta = obj.get("metadata") or {}
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
            "metadata": {k: meta[k] for k in ("name", "namespace") if k in meta}, "spec": obj.get("spec") or {}}


# The versions of resource.k8s.io the view reads, newest first (the kubernetes client's Resource<V>Api): v1 (GA in
# 1.34, the only one 1.36 serves by default), v1beta2 (1.33) and v1beta1 (1.32), whose shapes core.dra reads alike.
DRA_VERSIONS = ("V1", "V1beta2", "V1beta1")


# The list_* keyword arguments the view passes, and their query parameters (as the generated client names them).
_QUERY = {"limit": "limit", "_continue": "continue", "label_selector": "labelSelector", "watch": "watch",
          "resource_version": "resourceVersion", "allow_watch_bookmarks": "allowWatchBookmarks",
          "timeout_seconds": "timeoutSeconds"}


class _RawList:
    """A LIST or WATCH of one collection through the ApiClient (its configuration: auth, TLS, proxy), called as the
    generated ``list_*`` methods are with ``_preload_content=False``, answering their raw urllib3 response and
    raising ApiException for a non-2xx status as they do. The generated API classes are not imported: with the
    kubernetes client 3x, importing CoreV1Api and the three ResourceApi versions took ~1.4 s of CPU, a quarter of
    the webhook's time to ready with 20,000 Nodes, for four GET paths. No docstring on ``__call__``: the
    client's Watch then hands out plain dicts (see ``_Watcher.run``)."""

    def __init__(self, api_client: Any, path: str) -> None:
        self.api, self.path = api_client, path  # path: may hold {namespace}

    def __call__(self, _preload_content: bool = False, _request_timeout: Any = None, namespace: str = "",
                 **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException

        query = [(_QUERY[k], str(v).lower() if isinstance(v, bool) else v) for k, v in kwargs.items()
                 if v is not None]
        req = self.api.param_serialize(method="GET", resource_path=self.path.format(namespace=namespace),
                                       query_params=query, header_params={"Accept": "application/json"},
                                       auth_settings=["BearerToken"])
        resp = self.api.call_api(*req, _request_timeout=_request_timeout)
        if not 200 <= resp.status <= 299:
            resp.read()
            raise ApiException.from_response(http_resp=resp, body=None, data=None)
        return resp.response


class _FirstServed:
    """One resource listed through several API versions, newest first: a list (or a probe) uses the first version
    the API server serves (404: the next one; so an upgrade that adds v1, or one that stops serving a beta, is
    followed at the next re-list), a watch the version of the last list (a resourceVersion is the storage's, the
    same in every version). 404 from every version is the resource's 404."""

    def __init__(self, listers: list[Callable[..., Any]]) -> None:
        self.listers = listers
        self.current = 0

    def __call__(self, **kwargs: Any) -> Any:
        if kwargs.get("watch"):
            return self.listers[self.current](**kwargs)
        from kubernetes.client.exceptions import ApiException

        for i, lister in enumerate(self.listers):
            try:
                out = lister(**kwargs)
            except ApiException as exc:
                if exc.status != 404 or i == len(self.listers) - 1:
                    raise
                continue
            self.current = i
            return out
        raise AssertionError("no lister")  # pragma: no cover - the loop returns or raises


KSERVE_GROUP, KSERVE_VERSION = "serving.kserve.io", "v1alpha1"

# An optional resource (the DRA API, KServe's runtimes) that the API server does not serve (404) or that the chart
# gave no right to read (403): the view goes on without it and looks again this often.
ABSENT_RETRY = 60.0


class _Watcher(threading.Thread):
    """list + watch of one resource. It owns the current set of (slim) objects; after every change it calls
    ``changed()``, and readers take a copy with ``values()``. An ``optional`` resource that cannot be listed
    (404: not served; 403: not allowed) counts as synced and ``absent`` (nothing is known of it, which is not the
    same as none existing) until a later list succeeds."""

    def __init__(self, name: str, lister: _Lister, kwargs: dict[str, Any],
                 slim: Callable[[dict[str, Any]], Any], changed: Callable[[], None],
                 on_restart: Callable[[str], None], stop: threading.Event, timeout_seconds: int = 240,
                 optional: bool = False) -> None:
        super().__init__(name=f"watch-{name}", daemon=True)
        self.resource = name
        self.optional = optional
        self.absent = False
        self.lister, self.kwargs, self.slim, self.changed = lister, kwargs, slim, changed
        self.on_restart, self.stop_event, self.timeout_seconds = on_restart, stop, timeout_seconds
        self.items: dict[str, Any] = {}
        self.version = ""  # the resourceVersion ``items`` reflect (changed together, under the lock)
        self._lock = threading.Lock()
        self.synced = threading.Event()
        self.stale_since: float | None = None  # Unix time of the first failure since the view last followed
        self.stale_reason = ""
        self._watch: Any = None
        self._response: Any = None

    def _list(self) -> str:
        # Paginated (limit/continue, as kubectl does): only one page of full Node objects, with their long
        # status.images lists, is ever in memory; the view keeps the slim form. The new set is built aside and
        # swapped in whole, so the last good view serves until the list is complete.
        items: dict[str, Any] = {}
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": LIST_PAGE, **self.kwargs}
            if token:
                kwargs["_continue"] = token
            resp = self.lister(_preload_content=False, _request_timeout=(CONNECT_TIMEOUT, LIST_READ_TIMEOUT),
                               **kwargs)
            data = loads_trusted(resp.data)
            # The items of a LIST carry no apiVersion/kind (only the list does). Put them back, so that every
            # reader sees an object as a GET or a watch event gives it: the CRL schema requires both, and without
            # them every listed CRL ConfigMap was judged invalid (defaults lost on every start and re-list).
            list_kind = str(data.get("kind") or "")
            api_version = data.get("apiVersion") or "v1"
            kind = list_kind[:-4] if list_kind.endswith("List") else list_kind
            for item in data.get("items") or []:
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
                key = _key(item)
                if key is not None:
                    items[key] = self.slim(item)
            meta = data.get("metadata") or {}
            token = meta.get("continue")
            del data, resp
            if not token:
                break
        version = str(meta.get("resourceVersion") or "")
        with self._lock:
            self.items, self.version, self.absent = items, version, False
        self._followed()
        self.changed()
        self.synced.set()
        _release_memory()
        return version

    def _probe(self) -> None:
        """One cheap request after a failure: it proves the API server answers again before the watch resumes
        from its resourceVersion (a watch says nothing until an event comes, so it cannot tell by itself)."""
        self.lister(_preload_content=False, _request_timeout=(CONNECT_TIMEOUT, LIST_READ_TIMEOUT), limit=1,
                    **self.kwargs)
        self._followed()

    def _followed(self) -> None:
        if self.stale_since is not None:
            log_event(log, logging.INFO, "cluster view follows the API server again", resource=self.resource,
                      staleSeconds=round(time.time() - self.stale_since, 3))
        self.stale_since, self.stale_reason = None, ""

    def values(self) -> tuple[str, list[Any]]:
        """(the resourceVersion they reflect, the current objects)."""
        with self._lock:
            return self.version, list(self.items.values())

    def _raw_lister(self, **kw: Any) -> Any:
        self._response = self.lister(**kw)  # kept, so that halt() can end the streaming connection
        if self.stop_event.is_set():  # halt() came between the request and the line above: end it here
            self._end(self._response)
        return self._response

    def run(self) -> None:
        from kubernetes import watch
        from kubernetes.client.exceptions import ApiException

        rv: str | None = None
        failed = False
        backoff = BACKOFF_MIN
        while not self.stop_event.is_set():
            try:
                if rv is None:
                    rv = self._list()
                elif failed:
                    self._probe()
                failed = False
                self._watch = watch.Watch()
                # A wrapper without a docstring makes the client hand us plain dicts (no model objects: less
                # memory and CPU with thousands of nodes) while it still turns a 410 ERROR event into an
                # ApiException; its deserialize=False mode trips over ERROR events instead. The read timeout
                # outlasts the server's own watch timeout, so only a silent connection trips it.
                for event in self._watch.stream(self._raw_lister, resource_version=rv, allow_watch_bookmarks=True,
                                                timeout_seconds=self.timeout_seconds,
                                                _request_timeout=(CONNECT_TIMEOUT, self.timeout_seconds + 30),
                                                **self.kwargs):
                    if self.stop_event.is_set():
                        break
                    kind, obj = event.get("type"), event.get("object") or {}
                    rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                    name = _key(obj)
                    if kind in ("ADDED", "MODIFIED") and name:
                        slim = self.slim(obj)
                        with self._lock:
                            self.items[name], self.version = slim, rv
                    elif kind == "DELETED" and name:
                        with self._lock:
                            self.items.pop(name, None)
                            self.version = rv
                    else:  # BOOKMARK (nothing changed up to rv) or an event without a name
                        with self._lock:
                            self.version = rv
                        continue
                    self.changed()
                backoff = BACKOFF_MIN  # a watch that ends by its timeout is normal: resume from rv
            except ApiException as exc:
                if self.stop_event.is_set():
                    break
                if exc.status == 410:  # our resourceVersion is too old: start over from a fresh list
                    rv = None
                    self.on_restart("gone")
                    log_event(log, logging.INFO, "watch expired (410 Gone), re-listing", resource=self.resource)
                    continue
                if self.optional and rv is None and exc.status in (403, 404):
                    self._absent(exc.status)
                    continue
                failed = True
                self._pause(backoff, f"api error {exc.status}")
                backoff = min(backoff * 2, BACKOFF_MAX)
            except Exception as exc:  # dropped connections, DNS, TLS: reconnect with backoff, never die
                if self.stop_event.is_set():
                    break  # halt() closed the connection under us
                failed = True
                self._pause(backoff, f"{type(exc).__name__}: {exc}")
                backoff = min(backoff * 2, BACKOFF_MAX)

    def _absent(self, status: int) -> None:
        """The optional resource cannot be listed: the view goes on without it, and lists again later."""
        if not self.absent:
            why = "the webhook may not list it (RBAC)" if status == 403 else "the API server does not serve it"
            log_event(log, logging.WARNING if status == 403 else logging.INFO,
                      f"not following an optional resource: {why}", resource=self.resource, status=status)
        with self._lock:
            self.items, self.version, self.absent = {}, "", True
        self.changed()
        self.synced.set()
        self.stop_event.wait(ABSENT_RETRY)

    def _pause(self, backoff: float, reason: str) -> None:
        self.on_restart("error")
        if self.stale_since is None:
            self.stale_since = time.time()
            log_event(log, logging.WARNING, "cluster view is stale: cannot follow the API server; answering from "
                      "the last good view", resource=self.resource, error=reason)
        self.stale_reason = reason
        log_event(log, logging.WARNING, "watch failed, reconnecting", resource=self.resource, error=reason,
                  retryIn=round(backoff, 2))
        self.stop_event.wait(backoff * (0.5 + 0.5 * random.random()))

    def halt(self) -> None:
        """Stop now: a watch only looks at its stop flag between events, so end its connection too. Closing the
        socket from this thread would not wake the watcher blocked in recv(); shutting it down does."""
        if self._watch is not None:
            self._watch.stop()
        if self._response is not None:
            self._end(self._response)

    @staticmethod
    def _end(response: Any) -> None:
        with contextlib.suppress(Exception):
            response.connection.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(Exception):
            response.close()


class LiveView:
    """Nodes, CRL ConfigMaps and the DRA objects from the API server, kept current by watches."""

    def __init__(self, kb: KnowledgeBase, api_client: Any, metrics: Any = None, debounce: float = 0.2,
                 dra: bool = True, serving_runtimes: bool = True,
                 admission_plugins: frozenset[str] = frozenset(), driver_policy: DriverPolicy = DEFAULT_POLICY) -> None:
        self.kb = kb
        self.admission_plugins = admission_plugins
        self.driver_policy = driver_policy
        self.metrics = metrics
        self.debounce = debounce
        self._stop = threading.Event()
        self._dirty = threading.Event()
        self._rebuild_lock = threading.Lock()
        self.snapshot = Snapshot(EvalContext(kb, None, CrlIndex(), admission_plugins=admission_plugins,
                                             driver_policy=driver_policy), False)

        def restart(resource: str) -> Callable[[str], None]:
            return lambda reason: metrics.watch_restarts.labels(resource, reason).inc() if metrics else None

        self.node_problems = NodeProblemLog(metrics)
        self.compactor = NodeCompactor()
        self.node_watch = _Watcher("nodes", _RawList(api_client, "/api/v1/nodes"), {}, self.compactor,
                                   self._dirty.set, restart("nodes"), self._stop)
        self.crl_watch = _Watcher("configmaps", _RawList(api_client, "/api/v1/namespaces/{namespace}/configmaps"),
                                  {"namespace": CRL_NAMESPACE, "label_selector": CRL_SELECTOR}, lambda o: o,
                                  self._dirty.set, restart("configmaps"), self._stop)
        self._watchers: tuple[_Watcher, ...] = (self.node_watch, self.crl_watch)
        self.dra_watches: tuple[_Watcher, ...] = ()
        if dra:  # resource.k8s.io: where no version is served, the view goes on without it
            self.dra_watches = tuple(
                _Watcher(name, _FirstServed([_RawList(api_client, f"/apis/resource.k8s.io/{v.lower()}/{name}")
                                             for v in DRA_VERSIONS]), {}, _slim_spec, self._dirty.set,
                         restart(name), self._stop, optional=True)
                for name in ("resourceslices", "deviceclasses", "resourceclaimtemplates", "resourceclaims"))
            self._watchers += self.dra_watches
        self._dra_cache: tuple[tuple[str, ...], Inventory, DraIndex] | None = None
        self.runtime_watches: tuple[_Watcher, ...] = ()
        if serving_runtimes:  # KServe (where installed): what InferenceServices that name a model format run on
            self.runtime_watches = tuple(_Watcher(plural, _RawList(api_client, f"/apis/{KSERVE_GROUP}/{KSERVE_VERSION}/"
                                                                               f"{plural}"), {}, _slim_spec,
                                                  self._dirty.set, restart(plural), self._stop, optional=True)
                                         for plural in ("servingruntimes", "clusterservingruntimes"))
            self._watchers += self.runtime_watches
        self._publisher = threading.Thread(target=self._publish_loop, name="view-publisher", daemon=True)
        if metrics is not None:
            metrics.view_stale_seconds.set_function(self._stale_seconds)

    def _publish_loop(self) -> None:
        while not self._stop.is_set():
            if not self._dirty.wait(0.5):
                continue
            time.sleep(self.debounce)  # coalesce bursts of events into one rebuild
            self._dirty.clear()
            self.rebuild()

    def rebuild(self) -> None:
        """Build and publish a snapshot, but only once every resource has completed its first list: a snapshot
        of Nodes without CRL defaults, or of CRL defaults without Nodes, would decide from half a cluster."""
        if not all(w.synced.is_set() for w in self._watchers):
            return
        with self._rebuild_lock:  # the publisher and wait_synced may both get here
            (nodes_version, nodes), (_, crls) = self.node_watch.values(), self.crl_watch.values()
            self.compactor.compact(nodes)  # bound the intern table by what the view still holds
            # The last snapshot's placement indexes carry over, patched for the nodes that changed: under label
            # churn (GFD's timestamp, every node each minute) a snapshot costs the changes, not a pass per key.
            previous = self.snapshot.ctx.cluster if self.snapshot.ctx.kb is self.kb else None  # None: kb swapped
            cluster = build_cluster_from_records(nodes, self.kb, previous=previous)
            index, invalid = build_index(crls)
            for obj, why in invalid:
                log_event(log, logging.WARNING, "ignoring invalid CRL ConfigMap",
                          name=(obj.get("metadata") or {}).get("name"), error=why[0].message)
            dra = None
            if self.dra_watches and not any(w.absent for w in self.dra_watches):
                cluster.dra, dra = self._dra()
            runtimes = build_runtime_index([o for w in self.runtime_watches for o in w.values()[1]])
            unreadable = self.node_problems.update(cluster)
            self.snapshot = Snapshot.of(self.kb, cluster, index, len(invalid), True, nodes_version, unreadable, dra,
                                        runtimes, self.admission_plugins, self.driver_policy)
            if self.metrics is not None:
                self.snapshot.publish(self.metrics)

    def set_kb(self, kb: KnowledgeBase) -> None:
        """Judge with ``kb`` from now on (a data bundle swapped in): the next snapshot is built against it, at once
        when the view has synced."""
        self.kb = kb
        if all(w.synced.is_set() for w in self._watchers):
            self.rebuild()
        else:
            self.snapshot = replace(self.snapshot, ctx=EvalContext(kb, None, CrlIndex(),
                                                                    admission_plugins=self.admission_plugins,
                                                                    driver_policy=self.driver_policy))

    def _dra(self) -> tuple[Inventory, DraIndex]:
        """The DRA inventory and index, rebuilt only when a DRA watch has moved: Nodes change far more often (GFD
        relabels every node each minute) than ResourceSlices, and an inventory of 16,000 devices takes ~1 s to
        build. Its allocator keeps what each tuple of selectors makes of the devices, for the pods of every
        snapshot until then."""
        taken = [w.values() for w in self.dra_watches]
        versions = tuple(v for v, _objects in taken)
        if self._dra_cache is None or self._dra_cache[0] != versions:
            objects = [o for _v, objs in taken for o in objs]
            inventory = build_inventory(o for o in objects if o.get("kind") in ("ResourceSlice", "DeviceClass"))
            self._dra_cache = (versions, inventory, build_dra_index(objects, authoritative=True))
        return self._dra_cache[1], self._dra_cache[2]

    def health(self) -> ViewHealth:
        stale = [w for w in self._watchers if w.stale_since is not None]
        since = min((w.stale_since for w in stale if w.stale_since is not None), default=None)
        return ViewHealth(self.snapshot.synced, since, "; ".join(f"{w.resource}: {w.stale_reason}" for w in stale),
                          tuple(w.resource for w in self._watchers if not w.synced.is_set()))

    def _stale_seconds(self) -> float:
        since = self.health().stale_since
        return 0.0 if since is None else max(0.0, time.time() - since)

    def start(self) -> None:
        for w in self._watchers:
            w.start()
        self._publisher.start()
        if self.dra_watches:  # the CEL parser loads in the background, not in the first DRA pod's request
            threading.Thread(target=warm_cel, name="cel-warm", daemon=True).start()

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        ok = all(w.synced.wait(max(0.0, deadline - time.monotonic())) for w in self._watchers)
        if ok:
            self.rebuild()
        return ok

    def stop(self) -> None:
        self._stop.set()
        for w in self._watchers:
            w.halt()
