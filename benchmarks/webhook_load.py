"""Admission webhook latency and throughput over real HTTPS with keep-alive, against a bare aiohttp baseline.

    python benchmarks/webhook_load.py [--duration 10] [--rates 100,500,1000] [--rounds 3] [--workloads distinct,mix]
                                      [--pin]

The load comes from benchmarks/loadgen.py, a process of its own (open loop at a fixed rate, or closed loop at
saturation; ~60 us of CPU per request); --pin runs the servers on CPU 0 and the generator on CPU 1 (taskset). Each
rate is measured over --rounds rounds alternating the webhook and the bare server. benchmarks/webhook_ab.py compares
this tree's webhook with another commit's in one run.

Sends recorded (../shared/fixtures/admission) and generated AdmissionReviews (GPU Pods and Deployments, 20 %
violating) to `compatcheck webhook serve` (static view from examples/cluster-profile.yaml), and reports:
  - p50/p99 latency and errors at fixed open-loop rates on /validate, each followed by the bare endpoint at the
    same rate (the p99 ratio is the goal's figure), and at 500 req/s on /mutate (latency from each request's
    scheduled start, so queueing shows up: no coordinated omission);
  - saturation throughput (closed loop, 64 connections) of the webhook and of a bare aiohttp endpoint that
    answers a constant AdmissionReview over the same TLS, alternated over several rounds, their median
    ratio, and each server's CPU time per request;
  - RSS of the webhook with its static view, and each request's handling time from its decision log (the time
    it held the event loop: p50, p99, p99.9, max, and how many took longer than --loop-bound). The live view (a real kube-apiserver, 5,000 and 20,000 Nodes carrying
    what a cloud provider and GPU Feature Discovery put there) is measured by benchmarks/live_view_scale.py.
The webhook logs as in production (one JSON line per decision, at the default level, to a discarded
stderr). Server and load generator share the machine's cores, so the figures are conservative.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import random
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT.parent / "shared" / "fixtures" / "admission"
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bodies(n: int = 200, distinct: bool = False) -> list[bytes]:
    """Recorded reviews plus generated ones. distinct=True makes every object differ beyond identity metadata
    (a unique env value), so the webhook's evaluation cache never hits: the worst case."""
    rng = random.Random(3)
    out = [p.read_bytes() for p in sorted(RECORDED.glob("*.json"))] if RECORDED.exists() and not distinct else []
    for i in range(n):
        bad = rng.random() < 0.2
        image = "vllm/vllm-openai:v0.9.2" if rng.random() < 0.5 else "nvidia/cuda:12.2.2-base-ubuntu22.04"
        container = {"name": "c", "image": image, "args": ["--dtype=bfloat16"] if bad else [],
                     "resources": {"limits": {"nvidia.com/gpu": "1"}},
                     "env": [{"name": "RUN_ID", "value": str(i if distinct else i % 7)}]}
        spec = {"nodeSelector": {"nvidia.com/gpu.product": "Tesla-T4"}, "containers": [container]}
        if rng.random() < 0.5:
            meta: dict[str, Any] = {"name": f"p{i}", "namespace": "d"}
            if not distinct:  # Pods of a ReplicaSet: same spec, a controller owner
                meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"rs{i % 7}",
                                            "uid": f"uid-{i % 7}", "controller": True}]
            obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
        else:
            obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"d{i}", "namespace": "d"},
                   "spec": {"selector": {"matchLabels": {"a": "b"}},
                            "template": {"metadata": {"labels": {"a": "b"}}, "spec": spec}}}
        out.append(json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": f"u{i}", "kind": {"group": "", "version": "v1", "kind": obj["kind"]}, "operation": "CREATE",
            "namespace": "d", "object": obj, "oldObject": None, "dryRun": False}}).encode())
    return out


async def wait_ready(url: str, ctx: ssl.SSLContext, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.time() + timeout
    async with aiohttp.ClientSession() as s:
        while time.time() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"server exited with {proc.returncode}")
            try:
                async with s.get(url + "/readyz", ssl=ctx) as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise SystemExit("server not ready")


GENERATOR = [sys.executable, str(ROOT / "benchmarks" / "loadgen.py")]  # main() prefixes taskset with --pin
_BODY_FILES: dict[int, tuple[list[bytes], str]] = {}  # id of a payload list -> (the list, kept alive; its file)


def _bodies_file(payloads: list[bytes]) -> str:
    kept = _BODY_FILES.get(id(payloads))
    if kept is None:
        from benchmarks.loadgen import write_bodies

        fd, path = tempfile.mkstemp(prefix="compatcheck-load-", suffix=".bodies")
        os.close(fd)
        write_bodies(path, payloads)
        atexit.register(os.unlink, path)
        kept = _BODY_FILES[id(payloads)] = (payloads, path)
    return kept[1]


async def _generate(url: str, payloads: list[bytes], *args: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(*GENERATOR, url, _bodies_file(payloads), *args,
                                                stdout=asyncio.subprocess.PIPE, cwd=ROOT)
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"load generator failed ({proc.returncode}) against {url}")
    result: dict[str, Any] = json.loads(out)
    return result


async def fixed_rate(url: str, ctx: ssl.SSLContext | None, payloads: list[bytes], rate: int, duration: float,
                     path: str = "/validate") -> dict[str, Any]:
    """Open loop at ``rate`` (benchmarks/loadgen.py, a process of its own): p50, p99, p99.9 and max latency (ms)
    from each request's scheduled start (queueing counts), the answers that were not 200 (``errors``), and how far
    the generator itself fell behind its schedule (``behindMs``). ``ctx`` is not used: the generator does not
    check the loopback server's certificate."""
    return await _generate(url + path, payloads, "--rate", str(rate), "--duration", str(duration))


async def saturate(url: str, ctx: ssl.SSLContext | None, payloads: list[bytes], duration: float,
                   concurrency: int = 64) -> float:
    """Closed loop on ``concurrency`` connections: answers per second."""
    result = await _generate(url + "/validate", payloads, "--saturate", str(concurrency), "--duration", str(duration))
    return float(result["achieved"])


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (from /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def compare(url: str, bare_url: str, ctx: ssl.SSLContext, load: list[bytes], duration: float, rounds: int,
                  wh_pid: int, bare_pid: int) -> dict[str, float]:
    """Saturation of the webhook and of the bare endpoint, alternated ``rounds`` times so that the VM's
    drifts hit both alike; medians, plus each server's CPU time per request."""
    sat, base, ratios, wh_cpu, bare_cpu = [], [], [], [], []
    for _ in range(rounds):
        c0 = cpu_seconds(wh_pid)
        w = await saturate(url, ctx, load, duration)
        wh_cpu.append((cpu_seconds(wh_pid) - c0) / (w * duration) * 1e6)
        c0 = cpu_seconds(bare_pid)
        b = await saturate(bare_url, ctx, load, duration)
        bare_cpu.append((cpu_seconds(bare_pid) - c0) / (b * duration) * 1e6)
        sat.append(w)
        base.append(b)
        ratios.append(w / b)
    med = statistics.median
    return {"webhook": med(sat), "bare": med(base), "ratio": med(ratios), "min": min(ratios), "max": max(ratios),
            "wh_cpu": med(wh_cpu), "bare_cpu": med(bare_cpu)}


POOLS = [  # product, driver, compute capability, memory MiB, GPUs per node, instance type
    ("Tesla-T4", "535.104.05", (7, 5), 15360, 1, "g4dn.xlarge"),
    ("NVIDIA-A100-SXM4-80GB", "550.54.15", (8, 0), 81920, 8, "p4de.24xlarge"),
    ("NVIDIA-H100-80GB-HBM3", "570.124.06", (9, 0), 81559, 8, "p5.48xlarge"),
    ("NVIDIA-L4", "550.54.15", (8, 9), 23034, 4, "g6.12xlarge"),
]


def gfd_node(i: int) -> dict[str, Any]:
    """A Node as a cloud provider and GPU Feature Discovery label it (~40 labels, a status with images), so
    the RSS figure is that of a real cluster's Nodes, not of toy ones."""
    product, driver, (cc_major, cc_minor), mem, gpus, itype = POOLS[i % len(POOLS)]
    name = f"ip-10-{i // 250}-{i % 250}-{i % 7}.ec2.internal"
    d_major, d_minor, d_rev = driver.split(".")
    zone = "us-east-1" + "abc"[i % 3]
    labels = {
        "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux", "kubernetes.io/hostname": name, "node.kubernetes.io/instance-type": itype,
        "beta.kubernetes.io/instance-type": itype, "topology.kubernetes.io/region": "us-east-1",
        "topology.kubernetes.io/zone": zone, "failure-domain.beta.kubernetes.io/zone": zone,
        "eks.amazonaws.com/nodegroup": f"gpu-{itype}", "eks.amazonaws.com/capacityType": "ON_DEMAND",
        "k8s.io/cloud-provider-aws": "a3f1e5c6d7b8", "feature.node.kubernetes.io/pci-10de.present": "true",
        "feature.node.kubernetes.io/kernel-version.major": "6", "feature.node.kubernetes.io/cpu-model.vendor_id": "Intel",
        "nvidia.com/gpu.present": "true", "nvidia.com/gpu.deploy.driver": "true",
        "nvidia.com/gpu.deploy.device-plugin": "true", "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
        "nvidia.com/gpu.deploy.dcgm-exporter": "true", "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": str(gpus), "nvidia.com/gpu.memory": str(mem), "nvidia.com/gpu.family": "ampere",
        "nvidia.com/gpu.compute.major": str(cc_major), "nvidia.com/gpu.compute.minor": str(cc_minor),
        "nvidia.com/gpu.machine": itype, "nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/cuda.driver.major": d_major, "nvidia.com/cuda.driver.minor": d_minor,
        "nvidia.com/cuda.driver.rev": d_rev, "nvidia.com/cuda.driver-version.full": driver,
        "nvidia.com/cuda.runtime.major": "12", "nvidia.com/cuda.runtime.minor": "4",
        "nvidia.com/mig.capable": "false", "nvidia.com/mps.capable": "false",
        "nvidia.com/gfd.timestamp": str(1763700000 + i),
    }
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels, "uid": f"uid-{i}"},
            "spec": {"providerID": f"aws:///{zone}/i-{i:017x}"},
            "status": {"allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "47", "memory": "186Gi", "pods": "110"},
                       "images": [{"names": [f"registry.example.com/team/img-{j}@sha256:{j:064x}"],
                                   "sizeBytes": 10**9 + j} for j in range(30)]}}


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start_webhook(certs: Path, port: int, *extra: str, log: Path | None = None,
                  prefix: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
    """The webhook as deployed; its decision log goes to ``log`` (else it is discarded)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    stderr: Any = open(log, "wb") if log is not None else subprocess.DEVNULL  # noqa: SIM115 (the child holds it)
    try:
        return subprocess.Popen([*prefix, sys.executable, "-m", "compatcheck", "webhook", "serve", "--cert-file",
                                 str(certs / "tls.crt"), "--key-file", str(certs / "tls.key"), "--host",
                                 "127.0.0.1", "--port", str(port), "--metrics-port", "0", *extra],
                                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    finally:
        if log is not None:
            stderr.close()


def handling_times(log: Path) -> list[float]:
    """Each admission's handling time (ms) from the decision log: from the request's body to its answer, run on
    the event loop (no registry lookups here), so the longest is the longest any request held the loop, plus
    any time the process waited for a core meanwhile."""
    out = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("msg") == "admission" and "durationMs" in entry:
            out.append(float(entry["durationMs"]))
    return sorted(out)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


async def latency_rounds(url: str, bare_url: str, ctx: ssl.SSLContext, load: list[bytes], rate: int,
                         args: argparse.Namespace, pids: tuple[int, int]) -> None:
    """The webhook and the bare server at ``rate``, alternated over ``--rounds`` rounds (which goes first swaps each
    round); each round's p99 ratio, and the medians; each server's CPU time per request at that rate."""
    med = statistics.median
    wh: list[dict[str, Any]] = []
    bare: list[dict[str, Any]] = []
    ratios = []
    for k in range(args.rounds):
        pair = [(url, wh, pids[0]), (bare_url, bare, pids[1])]
        for u, into, pid in (pair if k % 2 == 0 else pair[::-1]):
            c0 = cpu_seconds(pid)
            into.append(await fixed_rate(u, ctx, load, rate, args.duration))
            into[-1]["cpuUs"] = (cpu_seconds(pid) - c0) / max(1, into[-1]["n"]) * 1e6
        ratios.append(wh[-1]["p99"] / bare[-1]["p99"])
    errors = sum(r["errors"] for r in wh)
    behind = max(r["behindMs"] for r in wh + bare)
    print(f"  @ {rate:>5} req/s, median of {args.rounds} alternated rounds: webhook p50 {med(r['p50'] for r in wh):6.2f}"
          f" ms p99 {med(r['p99'] for r in wh):7.2f} ms (achieved {med(r['achieved'] for r in wh):.0f}/s, errors "
          f"{errors}); bare p50 {med(r['p50'] for r in bare):.2f} ms p99 {med(r['p99'] for r in bare):.2f} ms "
          f"(achieved {med(r['achieved'] for r in bare):.0f}/s) -> p99 ratio {med(ratios):.2f} (rounds "
          + ", ".join(f"{x:.2f}" for x in ratios) + f"; goal <= 2); generator at most {behind:.1f} ms behind; "
          f"server CPU per request: webhook {med(r['cpuUs'] for r in wh):.0f} us, bare "
          f"{med(r['cpuUs'] for r in bare):.0f} us")


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--rates", default="100,500,1000")
    ap.add_argument("--rounds", type=int, default=3, help="alternated saturation rounds (webhook, bare) per workload")
    ap.add_argument("--loop-bound", type=float, default=10.0, metavar="MS",
                    help="count the requests whose handling held the event loop longer (default 10 ms)")
    ap.add_argument("--workloads", default="distinct,mix", help="distinct, mix or both (comma-separated)")
    ap.add_argument("--pin", action="store_true",
                    help="pin the servers to CPU 0 and the load generator to CPU 1 (taskset), so they do not share")
    args = ap.parse_args()
    servers: list[str] = []
    if args.pin:
        servers = ["taskset", "-c", "0"]
        GENERATOR[:0] = ["taskset", "-c", "1"]
    payloads = bodies()
    distinct = bodies(40_000, distinct=True)
    with tempfile.TemporaryDirectory() as tmp:
        certs = Path(tmp) / "certs"
        subprocess.run([sys.executable, "-m", "compatcheck", "cert", "generate", "--out-dir", str(certs), "--dns",
                        "localhost", "--dns", "127.0.0.1"], check=True, capture_output=True, cwd=ROOT)
        ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        port, bare_port = free_port(), free_port()
        log = Path(tmp) / "webhook.log"
        wh = start_webhook(certs, port, "--nodes", "examples/cluster-profile.yaml", log=log, prefix=tuple(servers))
        bare = subprocess.Popen([*servers, sys.executable, str(ROOT / "benchmarks" / "bare_server.py"),
                                 str(certs / "tls.crt"), str(certs / "tls.key"), str(bare_port)], cwd=ROOT,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            url, bare_url = f"https://localhost:{port}", f"https://localhost:{bare_port}"
            await wait_ready(url, ctx, wh)
            await wait_ready(bare_url, ctx, bare)
            await fixed_rate(url, ctx, payloads, 100, 1.0)  # warm-up
            print(f"{args.duration:.0f} s per measurement, one server process, HTTPS keep-alive, 20 % violating; "
                  f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs"
                  + (" (servers on CPU 0, generator on CPU 1)" if args.pin else ""))
            workloads = {"distinct": ("all-distinct objects (cache never hits)", distinct),
                         "mix": ("replica-like mix: 47 recorded + Pods/Deployments repeating (cache hits)", payloads)}
            for name, load in (workloads[w] for w in args.workloads.split(",")):
                print(f" workload: {name}")
                await fixed_rate(url, ctx, load[-500:], 200, 2.0)  # warm-up on this workload's shapes
                for rate in (int(r) for r in args.rates.split(",")):
                    await latency_rounds(url, bare_url, ctx, load, rate, args, (wh.pid, bare.pid))
                r = await fixed_rate(url, ctx, load, 500, args.duration, "/mutate")
                print(f"  /mutate @   500 req/s: p50 {r['p50']:6.2f} ms   p99 {r['p99']:7.2f} ms   "
                      f"errors {r['errors']}/{r['n']}")
                c = await compare(url, bare_url, ctx, load, args.duration, args.rounds, wh.pid, bare.pid)
                print(f"  saturation (median of {args.rounds} alternated rounds): webhook {c['webhook']:7.0f} req/s, "
                      f"bare aiohttp constant AdmissionReview {c['bare']:7.0f} req/s -> ratio {c['ratio']:.2f} "
                      f"(rounds {c['min']:.2f}-{c['max']:.2f})")
                print(f"  server CPU per request: webhook {c['wh_cpu']:.0f} us, bare {c['bare_cpu']:.0f} us")
            print(f"  RSS, static view: {rss_mib(wh.pid):.0f} MiB")
            times = handling_times(log)
            if times:
                over = sum(t > args.loop_bound for t in times)
                print(f"  handling time per request (decision log, {len(times)} requests): p50 "
                      f"{statistics.median(times):.2f} ms, p99 {times[int(len(times) * 0.99) - 1]:.2f} ms, p99.9 "
                      f"{times[int(len(times) * 0.999) - 1]:.2f} ms, max {times[-1]:.2f} ms; "
                      f"{over} over {args.loop_bound:g} ms")
        finally:
            stop(wh)
            stop(bare)


if __name__ == "__main__":
    asyncio.run(main())
