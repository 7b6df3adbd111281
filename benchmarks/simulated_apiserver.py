"""A simulated API server for benchmarks/live_view_scale.py where no kube-apiserver is installed (``--simulated``):
N Nodes to LIST in pages and to WATCH, with GPU Feature Discovery's label churn, and nothing else.

    python benchmarks/simulated_apiserver.py --nodes 20000 --labels unique --port 0 --kubeconfig FILE
    python benchmarks/simulated_apiserver.py --churn URL RATE SECONDS   (starts the churn, prints the events sent)

What it speaks, as kube-apiserver does for these paths: ``GET /api/v1/nodes`` with ``limit``/``continue`` (items
without apiVersion/kind, the list's resourceVersion) and with ``watch=true`` from a ``resourceVersion`` (a chunked
stream of ``{"type": "MODIFIED", "object": ...}`` lines; 410 Gone as an ERROR event for a version older than the
events kept), the CRL ConfigMaps of kube-public (none), and 404 for everything else (the DRA and KServe
resources, which the view then follows as absent). ``POST /_churn?rate=R&seconds=S`` rewrites
``nvidia.com/gfd.timestamp`` of node ``k % N`` at the k-th tick (open loop), each a MODIFIED event of the whole
Node; ``GET /_churn`` says how many were sent.

It runs in a process of its own, and every LIST page of the initial sync is encoded before the webhook starts,
so that the time to ready is the webhook's (its requests, decoding and snapshot) and not this simulation's
JSON encoding; a watch event is encoded once, however many watchers read it. The Nodes are those of
benchmarks/webhook_load.py (``gfd_node``: ~40 labels, 30 status.images, GPU allocatable); with ``--labels
unique`` each also carries the four per-node labels of ``live_view_scale.unique_labels``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import urllib.request
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.webhook_load import gfd_node  # noqa: E402

PAGE = 100  # compatcheck.webhook.clusterview.LIST_PAGE: the pages prepared in advance (others are built on demand)
KEEP_EVENTS = 100_000  # watch events kept; a watch from an older resourceVersion gets 410 Gone
WATCH_CAP = 300.0  # seconds a watch stays open at most


def unique_labels(i: int) -> dict[str, str]:
    from benchmarks.live_view_scale import unique_labels as labels

    return labels(i)


class Simulated:
    def __init__(self, n: int, unique: bool) -> None:
        self.rv = 1000
        self.nodes: list[dict[str, Any]] = []
        for i in range(n):
            node = gfd_node(i)
            node.pop("apiVersion", None)
            node.pop("kind", None)
            if unique:
                node["metadata"]["labels"].update(unique_labels(i))
            node["metadata"]["resourceVersion"] = str(self.rv)
            self.nodes.append(node)
        self.pages = {start: self._page(start, PAGE) for start in range(0, max(n, 1), PAGE)}
        self.pages_rv = self.rv
        self.events: list[tuple[int, bytes]] = []
        self.oldest = self.rv  # a watch from below this resourceVersion is too old
        self.changed = asyncio.Event()
        self.churned = 0
        self.churn_task: asyncio.Task[None] | None = None

    def _page(self, start: int, limit: int) -> bytes:
        end = start + limit if limit else len(self.nodes)
        meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
        if end < len(self.nodes):
            meta["continue"] = str(end)
            meta["remainingItemCount"] = len(self.nodes) - end
        return orjson.dumps({"kind": "NodeList", "apiVersion": "v1", "metadata": meta, "items": self.nodes[start:end]})

    async def nodes_handler(self, request: web.Request) -> web.StreamResponse:
        q = request.query
        if q.get("watch") in ("true", "1"):
            return await self.watch(request, int(q.get("resourceVersion") or 0))
        start, limit = int(q.get("continue") or 0), int(q.get("limit") or 0)
        body = self.pages.get(start) if limit == PAGE and self.pages_rv == self.rv else None
        return web.Response(body=body or self._page(start, limit), content_type="application/json")

    async def watch(self, request: web.Request, since: int) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        if since < self.oldest:
            await resp.write(orjson.dumps({"type": "ERROR", "object": {
                "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired", "code": 410,
                "message": f"too old resource version: {since} ({self.oldest})"}}) + b"\n")
            return resp
        with contextlib.suppress(ConnectionError):  # the webhook went away (stopped, or it ended the watch)
            await self._follow(resp, since, float(request.query.get("timeoutSeconds") or WATCH_CAP))
        return resp

    async def _follow(self, resp: web.StreamResponse, since: int, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + min(timeout, WATCH_CAP)
        sent = 0  # index into events of the next one to look at
        while loop.time() < end:
            while sent < len(self.events) and self.events[sent][0] <= since:
                sent += 1
            if sent < len(self.events):
                batch = self.events[sent:]
                sent += len(batch)
                since = batch[-1][0]
                for _rv, line in batch:  # one chunk per event, as the API server frames them
                    await resp.write(line)
                continue
            changed = self.changed
            try:
                await asyncio.wait_for(changed.wait(), max(0.0, end - loop.time()))
            except asyncio.TimeoutError:
                break

    async def configmaps(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") in ("true", "1"):  # no CRL ConfigMaps: a watch that stays quiet
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            await asyncio.sleep(min(float(request.query.get("timeoutSeconds") or WATCH_CAP), WATCH_CAP))
            return resp
        return web.json_response({"kind": "ConfigMapList", "apiVersion": "v1",
                                  "metadata": {"resourceVersion": str(self.rv)}, "items": []})

    async def not_found(self, request: web.Request) -> web.Response:
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                                  "code": 404, "message": "the server could not find the requested resource"},
                                 status=404)

    def modify(self, i: int, stamp: str) -> None:
        node = self.nodes[i]
        self.rv += 1
        node["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = stamp
        node["metadata"]["resourceVersion"] = str(self.rv)
        obj = {"apiVersion": "v1", "kind": "Node", **node}
        self.events.append((self.rv, orjson.dumps({"type": "MODIFIED", "object": obj}) + b"\n"))
        if len(self.events) > KEEP_EVENTS:
            drop = len(self.events) - KEEP_EVENTS
            self.oldest = self.events[drop - 1][0] + 1
            del self.events[:drop]
        self.churned += 1

    async def churn(self, rate: float, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        start, total = loop.time(), int(rate * seconds)
        k = 0
        while k < total:
            now = loop.time()
            while k < total and start + k / rate <= now:  # every tick that is due, then one wake-up of the watches
                i = k % len(self.nodes)
                self.modify(i, str(1763700000 + i + (k // len(self.nodes) + 1) * 60))
                k += 1
            self.changed.set()
            self.changed = asyncio.Event()
            await asyncio.sleep(max(0.0, start + k / rate - loop.time()))

    async def churn_handler(self, request: web.Request) -> web.Response:
        if request.method == "POST":
            self.churn_task = asyncio.ensure_future(self.churn(float(request.query["rate"]),
                                                               float(request.query["seconds"])))
        return web.json_response({"churned": self.churned})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/api/v1/nodes", self.nodes_handler)
        app.router.add_get("/api/v1/namespaces/kube-public/configmaps", self.configmaps)
        app.router.add_route("*", "/_churn", self.churn_handler)
        app.router.add_route("*", "/{tail:.*}", self.not_found)
        return app


def kubeconfig(path: Path, url: str) -> None:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "simulated",
        "clusters": [{"name": "simulated", "cluster": {"server": url}}],
        "users": [{"name": "admin", "user": {"token": "admin"}}],
        "contexts": [{"name": "simulated", "context": {"cluster": "simulated", "user": "admin"}}]}))


async def serve(args: argparse.Namespace) -> None:
    sim = Simulated(args.nodes, args.labels == "unique")
    runner = web.AppRunner(sim.app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.port)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    kubeconfig(Path(args.kubeconfig), f"http://127.0.0.1:{port}")
    print(f"ready http://127.0.0.1:{port}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the parent closes stdin
    await runner.cleanup()


def churn_client(url: str, rate: str, seconds: str) -> None:
    import time

    with urllib.request.urlopen(urllib.request.Request(f"{url}/_churn?rate={rate}&seconds={seconds}",
                                                       method="POST")) as r:
        before = json.loads(r.read())["churned"]  # the server's count is for all its churns
    time.sleep(float(seconds) + 0.5)
    with urllib.request.urlopen(f"{url}/_churn") as r:
        print(json.loads(r.read())["churned"] - before)


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--churn":
        churn_client(*sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=20000)
    ap.add_argument("--labels", choices=["shared", "unique"], default="shared")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--kubeconfig", required=True)
    asyncio.run(serve(ap.parse_args()))


if __name__ == "__main__":
    main()
