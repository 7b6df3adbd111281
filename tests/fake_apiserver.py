"""A local stand-in for kube-apiserver's read API, for tests that CI runs without one (aiohttp, loopback only).

It speaks what ``compatcheck audit`` uses, as the real server does: discovery (``/api/v1`` and ``/apis`` and
``/apis/<group>/<version>``), LIST of cluster-scoped and namespaced resources (all namespaces, or one) with
``limit``/``continue`` paging and ``labelSelector``, list items without apiVersion/kind (the server puts them on
the list only), bearer-token authentication (401 without), and RBAC per token (403 with a Status, as the
authorizer answers). Writes (create, update, delete of policy reports) are kept per resource. Every request is
recorded, so that tests can assert the paging.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from compatcheck.core.selectors import parse_selector


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool


KINDS = (
    Kind("", "v1", "Node", "nodes", False), Kind("", "v1", "Pod", "pods", True),
    Kind("", "v1", "ConfigMap", "configmaps", True), Kind("", "v1", "Service", "services", True),
    Kind("", "v1", "ReplicationController", "replicationcontrollers", True),
    Kind("apps", "v1", "Deployment", "deployments", True), Kind("apps", "v1", "ReplicaSet", "replicasets", True),
    Kind("apps", "v1", "StatefulSet", "statefulsets", True), Kind("apps", "v1", "DaemonSet", "daemonsets", True),
    Kind("batch", "v1", "Job", "jobs", True), Kind("batch", "v1", "CronJob", "cronjobs", True),
    Kind("resource.k8s.io", "v1", "ResourceSlice", "resourceslices", False),
    Kind("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", False),
    Kind("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", True),
    Kind("resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates", True),
    Kind("wgpolicyk8s.io", "v1alpha2", "PolicyReport", "policyreports", True),
    Kind("wgpolicyk8s.io", "v1alpha2", "ClusterPolicyReport", "clusterpolicyreports", False),
    Kind("openreports.io", "v1alpha1", "Report", "reports", True),
    Kind("openreports.io", "v1alpha1", "ClusterReport", "clusterreports", False),
)


@dataclass
class FakeApiServer:
    """Objects by (group, plural); ``allowed``: token -> the (verb, group, plural) it may use (None: anything)."""

    allowed: dict[str, set[tuple[str, str, str]] | None] = field(default_factory=lambda: {"admin": None})
    kinds: tuple[Kind, ...] = KINDS
    store: dict[tuple[str, str], dict[tuple[str, str], dict[str, Any]]] = field(default_factory=dict)
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _runner: web.AppRunner | None = None
    _thread: threading.Thread | None = None
    _version: int = 1000
    _lists: dict[tuple[str, str, str | None, str, int], list[dict[str, Any]]] = field(default_factory=dict)

    def add(self, objects: Iterable[dict[str, Any]]) -> None:
        by_kind = {(k.group, k.kind): k for k in self.kinds}
        for obj in objects:
            group = obj["apiVersion"].rpartition("/")[0]
            k = by_kind[(group, obj["kind"])]
            meta = obj["metadata"]
            self.store.setdefault((k.group, k.plural), {})[(meta.get("namespace", ""), meta["name"])] = obj
        self._version += 1

    def objects(self, group: str, plural: str) -> list[dict[str, Any]]:
        return list(self.store.get((group, plural), {}).values())

    # ------------------------------------------------------------------ HTTP
    def _kind(self, group: str, version: str, plural: str) -> Kind | None:
        return next((k for k in self.kinds if (k.group, k.version, k.plural) == (group, version, plural)), None)

    def _auth(self, request: web.Request, verb: str, group: str, plural: str) -> web.Response | None:
        header = request.headers.get("Authorization", "")
        token = header[len("Bearer "):] if header.startswith("Bearer ") else None
        if token is None or token not in self.allowed:
            return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                      "message": "Unauthorized", "reason": "Unauthorized", "code": 401}, status=401)
        rights = self.allowed[token]
        if rights is not None and (verb, group, plural) not in rights:
            user = f"system:serviceaccount:{token}"
            message = (f'{plural}{"." + group if group else ""} is forbidden: User "{user}" cannot {verb} '
                       f'resource "{plural}" in API group "{group}"')
            return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
                                      "reason": "Forbidden", "code": 403}, status=403)
        return None

    def _authenticated(self, request: web.Request) -> web.Response | None:
        """Discovery is open to every authenticated user (system:discovery), so only the token is checked."""
        return self._auth(request, "get", "", "") if not self._known(request) else None

    def _known(self, request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        return header.startswith("Bearer ") and header[len("Bearer "):] in self.allowed

    async def _discovery_core(self, request: web.Request) -> web.Response:
        self.requests.append(("GET", request.path, dict(request.query)))
        if (denied := self._authenticated(request)) is not None:
            return denied
        return web.json_response({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
            {"name": k.plural, "kind": k.kind, "namespaced": k.namespaced, "verbs": ["get", "list", "watch"]}
            for k in self.kinds if not k.group]})

    async def _discovery_groups(self, request: web.Request) -> web.Response:
        self.requests.append(("GET", request.path, dict(request.query)))
        if (denied := self._authenticated(request)) is not None:
            return denied
        groups: dict[str, list[str]] = {}
        for k in self.kinds:
            if k.group and k.version not in groups.setdefault(k.group, []):
                groups[k.group].append(k.version)
        return web.json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
             "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]}} for g, vs in groups.items()]})

    async def _discovery_group(self, request: web.Request) -> web.Response:
        self.requests.append(("GET", request.path, dict(request.query)))
        if (denied := self._authenticated(request)) is not None:
            return denied
        group, version = request.match_info["group"], request.match_info["version"]
        kinds = [k for k in self.kinds if (k.group, k.version) == (group, version)]
        if not kinds:
            raise web.HTTPNotFound()
        return web.json_response({"kind": "APIResourceList", "groupVersion": f"{group}/{version}", "resources": [
            {"name": k.plural, "kind": k.kind, "namespaced": k.namespaced,
             "verbs": ["create", "delete", "get", "list", "update", "watch"]} for k in kinds]})

    def _target(self, request: web.Request) -> tuple[Kind, str | None] | web.Response:
        info = request.match_info
        kind = self._kind(info.get("group", ""), info["version"], info["plural"])
        if kind is None:
            return web.json_response({"kind": "Status", "code": 404, "message": "the server could not find the "
                                                                                  "requested resource"}, status=404)
        return kind, info.get("namespace")

    async def _collection(self, request: web.Request) -> web.Response:
        self.requests.append((request.method, request.path, dict(request.query)))
        found = self._target(request)
        if isinstance(found, web.Response):
            return found
        kind, namespace = found
        verb = "list" if request.method == "GET" else "create"
        denied = self._auth(request, verb, kind.group, kind.plural)
        if denied is not None:
            return denied
        if request.method == "POST":
            obj = await request.json()
            obj["metadata"]["namespace"] = namespace or obj["metadata"].get("namespace")
            if not kind.namespaced:
                obj["metadata"].pop("namespace", None)
            key = (obj["metadata"].get("namespace", "") or "", obj["metadata"]["name"])
            store = self.store.setdefault((kind.group, kind.plural), {})
            if key in store:
                return web.json_response({"kind": "Status", "code": 409, "reason": "AlreadyExists",
                                          "message": f"{kind.plural} {key[1]!r} already exists"}, status=409)
            self._version += 1
            obj["metadata"]["resourceVersion"] = str(self._version)
            store[key] = obj
            return web.json_response(obj, status=201)
        selector = request.query.get("labelSelector") or ""
        start = int(base64.b64decode(request.query["continue"]).decode()) if request.query.get("continue") else 0
        limit = int(request.query.get("limit", "0") or 0)
        return web.json_response(self.list_page(kind, namespace, selector, start, limit))

    def list_page(self, kind: Kind, namespace: str | None, selector: str, start: int, limit: int) -> dict[str, Any]:
        """The body of one LIST page: ``limit`` objects (0: all) from offset ``start`` (the continue token's)."""
        api_version = f"{kind.group}/{kind.version}" if kind.group else kind.version
        key = (kind.group, kind.plural, namespace, selector, self._version)
        items = self._lists.get(key)
        if items is None:  # one filter and sort per LIST (all its pages), not per page
            items = [o for o in self.objects(kind.group, kind.plural)
                     if namespace is None or o["metadata"].get("namespace") == namespace]
            if selector:
                sel = parse_selector(selector)
                items = [o for o in items if sel.matches(o["metadata"].get("labels") or {})]
            items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
            self._lists = {key: items}
        end = start + limit if limit else len(items)
        # List items carry no apiVersion/kind: the list does (a shallow copy: the page is only encoded).
        page = [{k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in items[start:end]]
        meta: dict[str, Any] = {"resourceVersion": str(self._version)}
        if end < len(items):
            meta["continue"] = base64.b64encode(str(end).encode()).decode()
            meta["remainingItemCount"] = len(items) - end
        return {"kind": f"{kind.kind}List", "apiVersion": api_version, "metadata": meta, "items": page}

    async def _member(self, request: web.Request) -> web.Response:
        self.requests.append((request.method, request.path, dict(request.query)))
        found = self._target(request)
        if isinstance(found, web.Response):
            return found
        kind, namespace = found
        verb = {"GET": "get", "PUT": "update", "DELETE": "delete"}[request.method]
        denied = self._auth(request, verb, kind.group, kind.plural)
        if denied is not None:
            return denied
        store = self.store.setdefault((kind.group, kind.plural), {})
        key = (namespace or "", request.match_info["name"])
        if key not in store:
            return web.json_response({"kind": "Status", "code": 404, "reason": "NotFound",
                                      "message": f"{kind.plural} {key[1]!r} not found"}, status=404)
        if request.method == "GET":
            return web.json_response(store[key])
        if request.method == "DELETE":
            del store[key]
            self._version += 1
            return web.json_response({"kind": "Status", "status": "Success", "code": 200})
        obj = await request.json()
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)
        store[key] = obj
        return web.json_response(obj)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/api/v1", self._discovery_core)
        app.router.add_get("/apis", self._discovery_groups)
        app.router.add_get("/apis/{group}/{version}", self._discovery_group)
        for base in ("/api/{version}", "/apis/{group}/{version}"):
            for scope in ("", "/namespaces/{namespace}"):
                app.router.add_route("*", f"{base}{scope}/{{plural}}", self._collection)
                app.router.add_route("*", f"{base}{scope}/{{plural}}/{{name}}", self._member)
        return app

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> FakeApiServer:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            runner = web.AppRunner(self.app(), access_log=None)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, "127.0.0.1", 0)
            loop.run_until_complete(site.start())
            self._runner = runner
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, name="fake-apiserver", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the fake API server did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kubeconfig(self, path: str, token: str = "admin", context: str = "fake") -> str:
        """A kubeconfig for the server with a bearer token; JSON is YAML."""
        config = {"apiVersion": "v1", "kind": "Config", "current-context": context,
                  "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                  "users": [{"name": token, "user": {"token": token}}],
                  "contexts": [{"name": context, "context": {"cluster": "fake", "user": token}}]}
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(config, fh)
        return path

    def lists(self, plural: str) -> list[dict[str, str]]:
        """The query of each LIST of ``plural`` received, in order."""
        return [q for method, path, q in self.requests if method == "GET" and path.endswith("/" + plural)]
