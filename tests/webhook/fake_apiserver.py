"""A small fake Kubernetes API server (aiohttp, plain HTTP on loopback) for Nodes and ConfigMaps:
list, and watch streams that tests drive event by event, including 410 Gone and dropped connections."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from aiohttp import web


class FakeAPIServer:
    def __init__(self) -> None:
        self.rv = 100
        self.objects: dict[str, dict[str, dict[str, Any]]] = {"nodes": {}, "configmaps": {}}
        self.queues: dict[str, list[asyncio.Queue[Any]]] = {"nodes": [], "configmaps": []}
        # Event history, so a watch from resourceVersion N replays what happened after N (as etcd does).
        self.history: dict[str, list[tuple[int, dict[str, Any]]]] = {"nodes": [], "configmaps": []}
        self.lists = {"nodes": 0, "configmaps": 0}
        self.watches = {"nodes": 0, "configmaps": 0}
        self.watch_rvs: list[str] = []
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> FakeAPIServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        async def nodes(r: web.Request) -> web.StreamResponse:
            return await self._handle(r, "nodes")

        async def configmaps(r: web.Request) -> web.StreamResponse:
            return await self._handle(r, "configmaps")

        app.router.add_get("/api/v1/nodes", nodes)
        app.router.add_get("/api/v1/namespaces/{ns}/configmaps", configmaps)
        app.router.add_route("*", "/api/v1/namespaces/{ns}/secrets", self._secrets)
        app.router.add_route("*", "/api/v1/namespaces/{ns}/secrets/{name}", self._secrets)
        base = "/apis/admissionregistration.k8s.io/v1/{kind}/{name}"
        app.router.add_route("*", base, self._webhook_configs)
        self.runner = web.AppRunner(app, shutdown_timeout=1)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        self.loop.run_forever()

    def stop(self) -> None:
        async def close() -> None:
            for queues in self.queues.values():
                for q in queues:
                    q.put_nowait("DROP")
            await self.runner.cleanup()

        asyncio.run_coroutine_threadsafe(close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)

    # ------------------------------------------------------------------ secrets and webhook configurations
    calls: list[tuple[str, str]]

    def record(self, method: str, path: str) -> None:
        if not hasattr(self, "calls"):
            self.calls = []
        self.calls.append((method, path))

    async def _secrets(self, request: web.Request) -> web.Response:
        self.record(request.method, request.path)
        store = self.objects.setdefault("secrets", {})
        name = request.match_info.get("name")
        if request.method == "GET":
            if name not in store:
                return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                          "reason": "NotFound", "code": 404}, status=404)
            return web.json_response(store[name])
        body = await request.json()
        key = body["metadata"]["name"]
        if request.method == "POST":
            if key in store:
                return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                          "reason": "AlreadyExists", "code": 409}, status=409)
        elif request.method == "PUT" and store.get(key, {}).get("metadata", {}).get("resourceVersion") != body[
                "metadata"].get("resourceVersion"):
            return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                      "reason": "Conflict", "code": 409}, status=409)
        body["metadata"]["resourceVersion"] = self._bump()
        store[key] = body
        return web.json_response(body, status=201 if request.method == "POST" else 200)

    async def _webhook_configs(self, request: web.Request) -> web.Response:
        self.record(request.method, request.path)
        store = self.objects.setdefault(request.match_info["kind"], {})
        name = request.match_info["name"]
        if name not in store:
            return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                      "reason": "NotFound", "code": 404}, status=404)
        if request.method == "GET":
            return web.json_response(store[name])
        if request.method == "PATCH":
            assert request.content_type == "application/json-patch+json", request.content_type
            import jsonpatch

            try:
                patched = jsonpatch.apply_patch(store[name], await request.json())
            except (jsonpatch.JsonPatchTestFailed, jsonpatch.JsonPatchConflict):
                return web.json_response({"kind": "Status", "code": 422, "status": "Failure"}, status=422)
            patched["metadata"]["resourceVersion"] = self._bump()
            store[name] = patched
            return web.json_response(patched)
        return web.json_response({"kind": "Status", "code": 405}, status=405)

    def add_webhook_config(self, kind: str, name: str, webhooks: int = 2) -> None:
        self.objects.setdefault(kind, {})[name] = {
            "apiVersion": "admissionregistration.k8s.io/v1", "metadata": {"name": name, "resourceVersion": "1"},
            "webhooks": [{"name": f"w{i}.compatcheck.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                          "clientConfig": {"service": {"name": "compatcheck", "namespace": "cc"}}}
                         for i in range(webhooks)]}

    def kubeconfig(self, path: str) -> str:
        with open(path, "w") as fh:
            json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "fake",
                       "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{self.port}"}}],
                       "users": [{"name": "u", "user": {"token": "t"}}],
                       "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}]}, fh)
        return path

    # ------------------------------------------------------------------ state changes (thread-safe)
    def _bump(self) -> str:
        self.rv += 1
        return str(self.rv)

    def put(self, resource: str, obj: dict[str, Any], kind: str = "ADDED") -> None:
        def do() -> None:
            obj.setdefault("metadata", {})["resourceVersion"] = self._bump()
            name = obj["metadata"]["name"]
            if kind == "DELETED":
                self.objects[resource].pop(name, None)
            else:
                self.objects[resource][name] = obj
            event = {"type": kind, "object": json.loads(json.dumps(obj))}
            self.history[resource].append((self.rv, event))
            for q in self.queues[resource]:
                q.put_nowait(event)

        self.loop.call_soon_threadsafe(do)

    def gone(self, resource: str) -> None:
        """Expire every open watch of ``resource`` with a 410 ERROR event (as etcd compaction does)."""
        self.loop.call_soon_threadsafe(lambda: [q.put_nowait("GONE") for q in self.queues[resource]])

    def drop(self, resource: str) -> None:
        """Cut every open watch of ``resource`` without a word (a dropped connection)."""
        self.loop.call_soon_threadsafe(lambda: [q.put_nowait("DROP") for q in self.queues[resource]])

    # ------------------------------------------------------------------ HTTP
    async def _handle(self, request: web.Request, resource: str) -> web.StreamResponse:
        if request.query.get("watch") in ("true", "1"):
            return await self._watch(request, resource)
        if not request.query.get("continue"):
            self.lists[resource] += 1
        selector = request.query.get("labelSelector")
        items = list(self.objects[resource].values())
        if selector:
            key, _, value = selector.partition("=")
            items = [o for o in items if (o.get("metadata", {}).get("labels") or {}).get(key) == value]
        kind = "NodeList" if resource == "nodes" else "ConfigMapList"
        meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
        limit = int(request.query.get("limit") or 0)
        if limit:  # chunked lists: limit + continue (an offset here; opaque to clients)
            offset = int(request.query.get("continue") or 0)
            items = items[offset: offset + limit]
            if offset + limit < len(self.objects[resource]):
                meta["continue"] = str(offset + limit)
        return web.json_response({"apiVersion": "v1", "kind": kind, "metadata": meta, "items": items})

    async def _watch(self, request: web.Request, resource: str) -> web.StreamResponse:
        self.watches[resource] += 1
        self.watch_rvs.append(request.query.get("resourceVersion", ""))
        transport = request.transport
        q: asyncio.Queue[Any] = asyncio.Queue()
        since = int(request.query.get("resourceVersion") or 0)
        for rv, event in self.history[resource]:
            if rv > since:
                q.put_nowait(event)
        self.queues[resource].append(q)
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()  # as the API server streams watches: one chunk per event
        await resp.prepare(request)
        try:
            while True:
                item = await q.get()
                if item == "DROP":
                    if transport is not None:
                        transport.abort()  # mid-stream, no chunk terminator: a dropped connection
                    return resp
                if item == "GONE":
                    event = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                                         "message": "too old resource version", "reason": "Expired",
                                                         "code": 410}}
                    await resp.write((json.dumps(event) + "\n").encode())
                    return resp
                await resp.write((json.dumps(item) + "\n").encode())
        finally:
            self.queues[resource].remove(q)


def node(name: str, product: str, driver: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name, "nvidia.com/gpu.product": product,
        "nvidia.com/cuda.driver-version.full": driver}},
            "spec": {}, "status": {"allocatable": {"nvidia.com/gpu": "1", "cpu": "8"},
                                   "images": [{"names": [f"img-{i}"], "sizeBytes": i} for i in range(20)]}}


def crl(key: str, *, valid: bool = True) -> dict[str, Any]:
    short = key.split("/")[-1]
    data = {"key": key, "dataType": "integer", "defaultValue": "1", "group": "g", "limits": "optional",
            "requests": "fromLimits"}
    if not valid:
        data = {"resourceName": key}
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"cf-crl-g-{short}", "namespace": "kube-public", "labels": {
                "features.alauda.io/type": "CustomResourceLimitation", "features.alauda.io/group": "g",
                "features.alauda.io/enabled": "true"}}, "data": data}
