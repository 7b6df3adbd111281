"""A loopback HTTP server that answers the Kubernetes API paths the live cluster view reads, as a kube-apiserver
answers them, for tests that CI runs without one (the end-to-end suite, tests/e2e, runs against the real server).

What it speaks, and only that: LIST (``limit``/``continue`` paging; ``labelSelector`` as ``key=value[,...]``; the
list's ``metadata.resourceVersion``; items without ``apiVersion``/``kind``) and WATCH (``watch=true`` from a
``resourceVersion``: a chunked stream of ``{"type", "object"}`` lines, ``ADDED``/``MODIFIED``/``DELETED``, ``BOOKMARK``
where ``allowWatchBookmarks=true``, and for a resourceVersion older than the oldest event kept the ``ERROR`` event
with a 410 ``Status``, after HTTP 200, as the real server sends it), 404 for a resource it does not serve, 403 for
one it is told to forbid, 503 while it is ``down``. One resourceVersion counter for every resource, as etcd's.
The shapes are the fixtures in tests/webhook/fixtures/kube-api (README there).

And for the objects self-managed TLS writes (``writable`` collections: a Secret, the webhook configurations): GET
of one object (404 when absent), POST to its collection (409 AlreadyExists when the name is taken), PUT carrying the
resourceVersion it read (409 Conflict when the object has moved on since), and a JSON Patch (a failed ``test`` op:
422), each write giving the object a new resourceVersion.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "kube-api"
WATCH_CAP = 2.0  # seconds a watch stays open at most (the view re-watches from its resourceVersion, as it must)


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


@dataclass
class Collection:
    """One resource at one path: its objects by key, and the events kept for watches."""

    api_version: str
    kind: str
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    oldest: int = 0  # a watch from a resourceVersion below this one gets 410 Gone


class FakeKube:
    """The API server's side. ``add``/``modify``/``delete`` change a resource as a client's write would (a new
    resourceVersion, an event for the watches), ``compact`` forgets the events so far (as etcd compaction does),
    ``bookmark`` sends a BOOKMARK to the open watches, ``down`` makes every request fail with 503 and ends the
    open watches. ``requests`` records (path, query) of every request."""

    def __init__(self) -> None:
        self.collections: dict[str, Collection] = {}
        self.forbidden: set[str] = set()
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.writable: set[str] = set()  # collection paths whose objects can be created and written
        self.objects: dict[str, dict[str, Any]] = {}  # object path -> object, in the writable collections
        self.writes: list[tuple[str, str]] = []  # (method, path) of every write that succeeded
        self.rv = 10
        self.down = False
        self.cond = threading.Condition()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.closed = False
        self._thread = threading.Thread(target=self.server.serve_forever, name="fakekube", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def serve(self, path: str, api_version: str, kind: str) -> None:
        self.collections[path] = Collection(api_version, kind)

    def _next(self) -> int:
        self.rv += 1
        return self.rv

    def add(self, path: str, obj: dict[str, Any], event: str = "ADDED") -> str:
        """Create or replace ``obj`` in the collection at ``path``; its new resourceVersion."""
        with self.cond:
            col = self.collections[path]
            obj = copy.deepcopy(obj)
            rv = self._next()
            obj.setdefault("metadata", {})["resourceVersion"] = str(rv)
            meta = obj["metadata"]
            key = f"{meta.get('namespace', '')}/{meta['name']}"
            col.objects[key] = obj
            col.events.append((rv, event, obj))
            self.cond.notify_all()
            return str(rv)

    def modify(self, path: str, obj: dict[str, Any]) -> str:
        return self.add(path, obj, "MODIFIED")

    def delete(self, path: str, name: str, namespace: str = "") -> str:
        with self.cond:
            col = self.collections[path]
            obj = col.objects.pop(f"{namespace}/{name}")
            rv = self._next()
            gone = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(rv)}}
            col.events.append((rv, "DELETED", gone))
            self.cond.notify_all()
            return str(rv)

    def compact(self, path: str) -> None:
        with self.cond:
            col = self.collections[path]
            col.events.clear()
            col.oldest = self._next()
            self.cond.notify_all()

    def bookmark(self, path: str) -> str:
        with self.cond:
            rv = self._next()
            self.collections[path].events.append((rv, "BOOKMARK", {}))
            self.cond.notify_all()
            return str(rv)

    def set_down(self, down: bool) -> None:
        with self.cond:
            self.down = down
            self.cond.notify_all()

    def start(self) -> FakeKube:
        self._thread.start()
        return self

    def stop(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)

    def client(self) -> Any:
        from kubernetes import client

        config = client.Configuration(host=self.url)
        config.retries = 0  # urllib3's own retries would hide how the view itself retries
        return client.ApiClient(config)

    def put_object(self, collection: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` in a writable collection as the API server would (server-set metadata, a new
        resourceVersion); what it stored."""
        with self.cond:
            self.writable.add(collection)
            stored = copy.deepcopy(obj)
            meta = stored.setdefault("metadata", {})
            meta["resourceVersion"] = str(self._next())
            meta.setdefault("uid", f"00000000-0000-4000-8000-{self.rv:012d}")
            meta.setdefault("creationTimestamp", "2026-01-05T10:00:00Z")
            self.objects[f"{collection}/{meta['name']}"] = stored
            return copy.deepcopy(stored)

    def write(self, method: str, path: str, body: Any) -> tuple[int, dict[str, Any]]:
        """A client's POST, PUT or PATCH: (HTTP status, answer)."""
        with self.cond:
            if method == "POST":
                if path not in self.writable:
                    return 404, _status(404, "NotFound", "the server could not find the requested resource")
                name = body["metadata"]["name"]
                if f"{path}/{name}" in self.objects:
                    return 409, _status(409, "AlreadyExists", f'"{name}" already exists')
                stored = self.put_object(path, body)
                self.writes.append((method, f"{path}/{name}"))
                return 201, stored
            current = self.objects.get(path)
            if current is None:
                return 404, _status(404, "NotFound", "not found")
            if method == "PUT":
                sent = (body.get("metadata") or {}).get("resourceVersion")
                if sent and sent != current["metadata"]["resourceVersion"]:
                    return 409, _status(409, "Conflict", "Operation cannot be fulfilled: the object has been "
                                                         "modified; please apply your changes to the latest version "
                                                         "and try again")
                stored = self.put_object(path.rsplit("/", 1)[0], body)
            else:  # PATCH, a JSON Patch
                patched = copy.deepcopy(current)
                for op in body:
                    *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
                    target: Any = patched
                    for part in parents:
                        target = target[int(part)] if isinstance(target, list) else target[part]
                    key: Any = int(last) if isinstance(target, list) else last
                    if op["op"] == "test":
                        if target[key] != op["value"]:
                            return 422, _status(422, "Invalid", f"the test of {op['path']} failed")
                    else:  # add, replace
                        target[key] = op["value"]
                stored = self.put_object(path.rsplit("/", 1)[0], patched)
            self.writes.append((method, path))
            return 200, stored

    # -------------------------------------------------------------------------------------------- answers

    def list(self, path: str, query: dict[str, str]) -> dict[str, Any]:
        col = self.collections[path]
        with self.cond:
            keys = sorted(k for k, o in col.objects.items() if _selected(o, query.get("labelSelector", "")))
            start = int(query.get("continue") or 0)
            limit = int(query.get("limit") or 0) or len(keys) or 1
            page = keys[start:start + limit]
            items = []
            for key in page:
                item = copy.deepcopy(col.objects[key])
                item.pop("apiVersion", None)  # a LIST's items carry neither: only the list does
                item.pop("kind", None)
                items.append(item)
            meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
            if start + limit < len(keys):
                meta["continue"] = str(start + limit)
            return {"kind": f"{col.kind}List", "apiVersion": col.api_version, "metadata": meta, "items": items}

    def watch(self, path: str, query: dict[str, str]) -> Iterator[dict[str, Any]]:
        col = self.collections[path]
        since = int(query.get("resourceVersion") or 0)
        bookmarks = query.get("allowWatchBookmarks") == "true"
        selector = query.get("labelSelector", "")
        deadline = time.monotonic() + min(float(query.get("timeoutSeconds") or WATCH_CAP), WATCH_CAP)
        while True:
            with self.cond:
                expired = since < col.oldest  # compacted (before or during the watch): 410 Gone
                fresh = [(rv, t, o) for rv, t, o in col.events if rv > since]
                if expired:
                    event = fixture("watch-expired.json")
                    event["object"]["message"] = f"too old resource version: {since} ({col.oldest})"
                elif not fresh:
                    left = deadline - time.monotonic()
                    if left <= 0 or self.down or self.closed:
                        return
                    self.cond.wait(left)
                    continue
            if expired:
                yield event
                return
            for rv, kind, obj in fresh:
                since = rv
                if kind == "BOOKMARK":
                    if bookmarks:
                        mark = fixture("watch-bookmark.json")
                        mark["object"].update(kind=col.kind, apiVersion=col.api_version)
                        mark["object"]["metadata"]["resourceVersion"] = str(rv)
                        yield mark
                elif _selected(obj, selector):
                    yield {"type": kind, "object": obj}


def _selected(obj: dict[str, Any], selector: str) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, _, v in (term.partition("=") for term in selector.split(",") if term))


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


def _handler(kube: FakeKube) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            kube.requests.append((url.path, query))
            if kube.down:
                self._send(503, _status(503, "ServiceUnavailable", "the server is currently unable to handle "
                                                                    "the request"))
                return
            if url.path in kube.forbidden:
                self._send(403, _status(403, "Forbidden", f"cannot list resource at {url.path}"))
                return
            if url.path in kube.objects:
                self._send(200, kube.objects[url.path])
                return
            if url.path not in kube.collections:
                self._send(404, _status(404, "NotFound", "the server could not find the requested resource"))
                return
            if query.get("watch") != "true":
                self._send(200, kube.list(url.path, query))
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for event in kube.watch(url.path, query):
                    line = json.dumps(event).encode() + b"\n"
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:  # the view ended the connection (halt)
                self.close_connection = True

        def _write(self) -> None:
            url = urlsplit(self.path)
            kube.requests.append((url.path, {"method": self.command}))
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
            if kube.down:
                self._send(503, _status(503, "ServiceUnavailable", "unavailable"))
                return
            self._send(*kube.write(self.command, url.path, body))

        do_POST = do_PUT = do_PATCH = _write

    return Handler


@contextmanager
def running(kube: FakeKube) -> Iterator[FakeKube]:
    kube.start()
    try:
        yield kube
    finally:
        kube.stop()
