"""``compatcheck audit`` at scale: time and peak RSS of one audit of N Nodes and M Pods, served by a simulated API
server (tests/fake_apiserver.py: discovery and paged LISTs, as kube-apiserver answers them).

    python benchmarks/audit_scale.py [--nodes 10000] [--pods 100000,10000] [--chunk-size 500] [--what-if]

The Nodes are those of benchmarks/webhook_load.py (a cloud provider's and GPU feature discovery's ~40 labels and a
status with images, four GPU pools). The pods are what controllers create: 80 % in Deployments of 20 replicas
(with their ReplicaSets), 10 % in Jobs of 5, 5 % in StatefulSets of 10, 5 % bare; each with labels, an
ownerReference, env, mounts and a status with conditions and container statuses (~2.5 KB of JSON), images of
several CUDA versions, pinned to a pool by instance type, so that some owners have findings.

Each size runs ``python -m compatcheck audit --kubeconfig ... --format json -o FILE`` as its own process and
reports wall time, its CPU time, peak RSS (VmHWM, sampled every 0.1 s), the LIST requests and what it found. The server
runs in this process (another core's worth of work on a shared machine): figures are conservative. Comparing the
pod counts shows that memory does not grow with the pods (they are streamed, never kept).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from aiohttp import web  # noqa: E402

from benchmarks.webhook_load import POOLS, gfd_node  # noqa: E402
from tests.fake_apiserver import FakeApiServer  # noqa: E402

IMAGES = ["nvidia/cuda:12.2.2-runtime-ubuntu22.04", "nvidia/cuda:12.4.1-runtime-ubuntu22.04",
          "nvidia/cuda:12.8.0-runtime-ubuntu22.04", "nvidia/cuda:11.8.0-runtime-ubuntu22.04",
          "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"]


def _spec(i: int) -> dict[str, Any]:
    pool = POOLS[i % len(POOLS)]
    return {"nodeSelector": {"node.kubernetes.io/instance-type": pool[5]},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": IMAGES[i % len(IMAGES)], "args": ["--port", "8000"],
                            "env": [{"name": f"VAR_{k}", "value": f"value-{i}-{k}"} for k in range(6)],
                            "ports": [{"containerPort": 8000, "protocol": "TCP"}],
                            "volumeMounts": [{"name": "data", "mountPath": "/data"},
                                             {"name": "kube-api-access", "mountPath": "/var/run/secrets/x",
                                              "readOnly": True}],
                            "resources": {"limits": {"nvidia.com/gpu": "1", "memory": "16Gi"},
                                          "requests": {"nvidia.com/gpu": "1", "cpu": "2", "memory": "16Gi"}}}],
            "volumes": [{"name": "data", "emptyDir": {}}, {"name": "kube-api-access", "projected": {"sources": []}}]}


def _meta(name: str, ns: str, uid: str, labels: dict[str, str], owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": uid, "labels": labels, "resourceVersion": "1",
                            "creationTimestamp": "2026-11-27T10:00:00Z",
                            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-27T10:00:00Z"}}
    if owner is not None:
        meta["ownerReferences"] = [{**owner, "controller": True, "blockOwnerDeletion": True}]
    return meta


def _pod(name: str, ns: str, i: int, owner: dict[str, Any] | None, node: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": _meta(name, ns, f"pod-{name}", {"app": name.rsplit("-", 1)[0], "team": f"t{i % 10}"},
                              owner),
            "spec": {**_spec(i), "nodeName": node},
            "status": {"phase": "Running", "podIP": f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}",
                       "conditions": [{"type": t, "status": "True", "lastTransitionTime": "2026-11-27T10:00:05Z"}
                                      for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
                       "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0,
                                              "image": IMAGES[i % len(IMAGES)], "imageID": "sha256:" + "ab" * 32,
                                              "containerID": "containerd://" + "cd" * 32,
                                              "state": {"running": {"startedAt": "2026-11-27T10:00:04Z"}}}]}}


def cluster(nodes: int, pods: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [gfd_node(i) for i in range(nodes)]
    names = [n["metadata"]["name"] for n in out]
    made = 0

    def node(i: int) -> str:
        return names[i % len(names)]

    def controller(api: str, kind: str, name: str, ns: str, spec: dict[str, Any], i: int,
                   owner: dict[str, Any] | None = None) -> dict[str, Any]:
        obj = {"apiVersion": api, "kind": kind, "metadata": _meta(name, ns, f"{kind}-{name}", {"app": name}, owner),
               "spec": spec}
        out.append(obj)
        return {"apiVersion": api, "kind": kind, "name": name, "uid": f"{kind}-{name}"}

    i = 0
    while made < pods * 0.8:  # Deployments of 20
        ns, name = f"team-{i % 50}", f"serve-{i}"
        template = {"metadata": {"labels": {"app": name}}, "spec": _spec(i)}
        dep = controller("apps/v1", "Deployment", name, ns, {"replicas": 20, "selector": {"matchLabels": {
            "app": name}}, "template": template}, i)
        rs = controller("apps/v1", "ReplicaSet", f"{name}-7d9f", ns, {"replicas": 20, "selector": {"matchLabels": {
            "app": name}}, "template": template}, i, dep)
        for k in range(20):
            out.append(_pod(f"{name}-7d9f-{k}", ns, i, rs, node(made)))
            made += 1
        i += 1
    while made < pods * 0.9:  # Jobs of 5
        ns, name = f"team-{i % 50}", f"train-{i}"
        job = controller("batch/v1", "Job", name, ns, {"template": {"spec": {**_spec(i), "restartPolicy": "Never"}}},
                         i)
        for k in range(5):
            out.append(_pod(f"{name}-{k}", ns, i, job, node(made)))
            made += 1
        i += 1
    while made < pods * 0.95:  # StatefulSets of 10
        ns, name = f"team-{i % 50}", f"db-{i}"
        sts = controller("apps/v1", "StatefulSet", name, ns, {"replicas": 10, "serviceName": name, "selector": {
            "matchLabels": {"app": name}}, "template": {"metadata": {"labels": {"app": name}}, "spec": _spec(i)}},
            i)
        for k in range(10):
            out.append(_pod(f"{name}-{k}", ns, i, sts, node(made)))
            made += 1
        i += 1
    while made < pods:  # bare pods
        out.append(_pod(f"bare-{made}", f"team-{made % 50}", made, None, node(made)))
        made += 1
    return out


class PreparedApiServer(FakeApiServer):
    """The simulated API server with every page of the audit's LISTs (all namespaces, no selector, ``limit`` of the
    chunk size) encoded before the audit starts, by the same code that answers them (``FakeApiServer.list_page``):
    the audit then waits only for the bytes to cross loopback, as it would for a kube-apiserver serving from its
    watch cache on another machine, so the figures are compatcheck's, not the simulation's JSON encoding (which,
    in a thread of this process, took 4x the audit's own CPU time). Other requests are answered as the base
    class does."""

    def prepare(self, chunk: int) -> None:
        import orjson

        self.pages: dict[tuple[str, frozenset[tuple[str, str]]], bytes] = {}
        for kind in self.kinds:
            total = len(self.store.get((kind.group, kind.plural), {}))
            base = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
            for start in range(0, max(total, 1), chunk):
                body = self.list_page(kind, None, "", start, chunk)
                query = {"limit": str(chunk)}
                if start:
                    query["continue"] = base64.b64encode(str(start).encode()).decode()
                self.pages[(f"{base}/{kind.plural}", frozenset(query.items()))] = orjson.dumps(body)
        self._lists.clear()

    async def _collection(self, request: web.Request) -> web.Response:
        body = self.pages.get((request.path, frozenset(request.query.items()))) if request.method == "GET" else None
        if body is None or self._auth(request, "list", "", "") is not None:
            return await super()._collection(request)
        self.requests.append((request.method, request.path, dict(request.query)))
        return web.Response(body=body, content_type="application/json")


def run(nodes: int, pods: int, chunk: int, what_if: bool) -> dict[str, Any]:
    server = PreparedApiServer()
    objects = cluster(nodes, pods)
    server.add(objects)
    controllers = sum(1 for o in objects if o["kind"] not in ("Node", "Pod"))
    del objects
    server.prepare(chunk)
    server.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = server.kubeconfig(f"{tmp}/kubeconfig")
            report = f"{tmp}/audit.json"
            argv = [sys.executable, "-m", "compatcheck", "audit", "--kubeconfig", kubeconfig, "--chunk-size",
                    str(chunk), "--no-progress", "--format", "json", "-o", report]
            if what_if:
                argv += ["--what-if", "node.kubernetes.io/instance-type=g4dn.xlarge:driver=580.65.06"]
            start = time.monotonic()
            proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            # Peak RSS of the audit's own image: VmHWM after exec (ru_maxrss would also count the pages of this
            # process, which holds the simulated cluster, that the child shared between fork and exec).
            peak = 0
            while True:
                try:
                    status_text = Path(f"/proc/{proc.pid}/status").read_text()
                    peak = max([peak] + [int(line.split()[1]) for line in status_text.splitlines()
                                         if line.startswith("VmHWM:")])
                except (OSError, ValueError):
                    pass
                finished, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if finished:
                    break
                time.sleep(0.1)
            wall = time.monotonic() - start
            stderr = proc.stderr.read().decode() if proc.stderr else ""
            code = os.waitstatus_to_exitcode(status)
            if code not in (0, 1):
                raise SystemExit(f"audit failed ({code}): {stderr}")
            doc = json.loads(Path(report).read_text())
    finally:
        server.stop()
    summary = doc["summary"]["audit"]
    return {"nodes": nodes, "pods": pods, "controllers": controllers, "chunk": chunk, "whatIf": what_if,
            "seconds": round(wall, 1), "peakRssMiB": round(peak / 1024), "cpuSeconds":
            round(usage.ru_utime + usage.ru_stime, 1), "lists": sum(1 for _m, _p, q in server.requests if "limit" in q),
            "findings": len(doc["findings"]), "owners": summary["owners"], "nodeClasses": summary["nodeClasses"],
            "runningPods": summary["pods"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=10000)
    p.add_argument("--pods", default="100000,10000", help="pod counts, comma-separated")
    p.add_argument("--chunk-size", type=int, default=500)
    p.add_argument("--what-if", action="store_true", help="also a what-if (each object evaluated twice)")
    args = p.parse_args()
    for pods in (int(n) for n in args.pods.split(",")):
        print(json.dumps(run(args.nodes, pods, args.chunk_size, args.what_if)), flush=True)


if __name__ == "__main__":
    main()
