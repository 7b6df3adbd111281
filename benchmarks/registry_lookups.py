"""Registry lookups (image configs) in lint and in the webhook, against a real distribution registry, with baselines
measured in the same run.

    python benchmarks/registry_lookups.py [--images 50] [--repeat 5] [--rate 200] [--duration 10] [--rounds 3]

Starts Debian's ``docker-registry`` on loopback with TLS (a test CA) and token auth (a real ES256 token server,
tests/registry/harness.py), pushes ``--images`` custom images built "FROM" CUDA 13.0 (each its own config and
manifest), and reports:

  - lint of one file with a GPU Pod per image (R560 nodes: every Pod gets cuda-driver-too-old from its config),
    run as a subprocess, median of ``--repeat`` runs: without lookups (the baseline: the image table alone, every
    image unknown), cold (an empty cache: token, manifest and config per image, 8 at once), warm (the cache
    filled, tags within their TTL: no request) and ``--offline``; each with its ratio to the baseline;
  - one image's cold lookup in-process (a fresh client: token, manifest, config blob), median and max;
  - how late a 1 ms asyncio timer fires while the webhook's lookups fetch every image cold in-process, on 8 and
    on 2 threads (the fetch threads' share of the GIL, seen by the event loop);
  - the webhook under an open-loop ``--rate`` of reviews of those images (every object distinct, so the evaluation
    cache never hits), p50/p99/max latency from each request's scheduled start: a webhook without lookups (the
    baseline), the same with lookups from a cold start (each image's first review waits for its fetch, at most the
    150 ms budget), then warm (every image in memory), and cold again behind a relay that delays each connection
    by 1 s (the budget bounds the wait; the fetches finish in the background).
Everything shares the machine's cores (registry, token server, webhook, load generator); compare within a run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from webhook_load import fixed_rate, free_port, stop, wait_ready  # noqa: E402

from tests.registry.conftest import CUDA13_ENV  # noqa: E402
from tests.registry.harness import USERS, Registry, RegistryCA, SlowRelay, TokenServer, find_registry  # noqa: E402

NODES = """apiVersion: compatcheck/v1
kind: ClusterProfile
nodePools:
- {name: t4, count: 2, gpu: Tesla-T4, driver: "560.35.03", gpusPerNode: 4}
"""


def pod(i: int, image: str, run: int = 0) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"serve-{i}", "namespace": "ml"},
            "spec": {"containers": [{"name": "main", "image": image, "env": [{"name": "RUN", "value": str(run)}],
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def review(obj: dict[str, Any], uid: str) -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE",
        "namespace": "ml", "object": obj, "oldObject": None, "dryRun": False}}).encode()


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    took = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"lint failed ({proc.returncode}): {proc.stderr}")
    return took, json.loads(proc.stdout)


def lint_phase(work: Path, images: list[str], ca: Path, docker: Path, repeat: int) -> dict[str, Any]:
    manifest = work / "pods.yaml"
    manifest.write_text("---\n".join(json.dumps(pod(i, im)) + "\n" for i, im in enumerate(images)))
    (work / "nodes.yaml").write_text(NODES)
    cache = work / "cache"
    env = {**os.environ, "DOCKER_CONFIG": str(docker), "COMPATCHECK_CACHE_DIR": str(cache)}
    base = [sys.executable, "-m", "compatcheck", "lint", str(manifest), "--nodes", str(work / "nodes.yaml"),
            "--format", "json", "--registry-ca", str(ca)]
    out: dict[str, list[float]] = {"baseline": [], "cold": [], "warm": [], "offline": []}
    rules: dict[str, list[str]] = {}
    for _ in range(repeat):  # interleaved, so that drifts of the machine hit every mode alike
        t, rep = timed([*base, "--no-registry-lookups"], env, work)
        out["baseline"].append(t)
        rules["baseline"] = [f["rule"] for f in rep["findings"]]
        subprocess.run(["rm", "-rf", str(cache)], check=True)
        t, rep = timed([*base, "--registry-lookups"], env, work)
        out["cold"].append(t)
        rules["cold"] = [f["rule"] for f in rep["findings"]]
        t, rep = timed([*base, "--registry-lookups"], env, work)
        out["warm"].append(t)
        rules["warm"] = [f["rule"] for f in rep["findings"]]
        t, rep = timed([*base, "--offline"], env, work)
        out["offline"].append(t)
        rules["offline"] = [f["rule"] for f in rep["findings"]]
    n = len(images)
    assert rules["baseline"] == ["cuda-runtime-unknown"] * n, rules["baseline"][:3]
    for mode in ("cold", "warm", "offline"):
        assert rules[mode] == ["cuda-driver-too-old"] * n, (mode, rules[mode][:3])
    med = {k: statistics.median(v) for k, v in out.items()}
    return {"median_s": med, "ratio": {k: med[k] / med["baseline"] for k in med}, "runs": out}


def one_lookup(images: list[str], ca: Path, docker: Path) -> dict[str, float]:
    from compatcheck.core.config import RegistrySettings
    from compatcheck.core.images import parse_reference
    from compatcheck.io.dockerauth import Credentials
    from compatcheck.io.imagefacts import make_client

    times = []
    for image in images:
        client = make_client(RegistrySettings(ca_file=str(ca)), credentials=Credentials(docker / "config.json"))
        ref = parse_reference(image)
        assert ref is not None
        started = time.perf_counter()
        client.fetch(ref, "linux/amd64", time.monotonic() + 10)
        times.append((time.perf_counter() - started) * 1000)
        client.close()
    return {"median_ms": statistics.median(times), "max_ms": max(times)}


async def loop_lag(images: list[str], info: dict[str, Any], concurrency: int) -> dict[str, float]:
    """The webhook's lookups in-process: how late a 1 ms asyncio timer fires while ``images`` are fetched cold on
    ``concurrency`` threads (what the fetch threads' share of the GIL costs the event loop)."""
    from compatcheck.core.config import RegistrySettings
    from compatcheck.webhook.metrics import Metrics
    from compatcheck.webhook.registry import AdmissionLookups

    settings = RegistrySettings(lookups=True, allow=(info["host"],), redirect_hosts=(info["token"],),
                                ca_file=info["ca"], auth_file=str(Path(info["docker"]) / "config.json"),
                                concurrency=concurrency, webhook_budget=30.0)
    lookups = AdmissionLookups(settings, Metrics())
    lags: list[float] = []
    done = False

    async def probe() -> None:
        while not done:
            t = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append((time.perf_counter() - t) * 1000 - 1)

    task = asyncio.create_task(probe())
    started = time.perf_counter()
    found = await lookups.facts_for(images, "linux/amd64")
    took = time.perf_counter() - started
    done = True
    await task
    lookups.close()
    assert len(found) == len(images)
    lags.sort()
    return {"seconds": took, "p50_ms": lags[len(lags) // 2], "p99_ms": lags[int(len(lags) * 0.99)],
            "max_ms": lags[-1]}


def metric(port: int, name: str) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    return {line.split(" ")[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith(name)}


async def webhook_phase(work: Path, images: list[str], hosts: list[str], ca: Path, docker: Path, rate: int,
                        duration: float, relay_host: str, token_host: str, concurrency: int) -> dict[str, Any]:
    certs = work / "certs"
    subprocess.run([sys.executable, "-m", "compatcheck", "cert", "generate", "--out-dir", str(certs), "--dns",
                    "127.0.0.1"], check=True, capture_output=True, cwd=ROOT)
    ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    nodes = work / "nodes.yaml"
    nodes.write_text(NODES)
    config = work / "config.yaml"
    config.write_text(json.dumps({"apiVersion": "compatcheck/v1", "registry": {"concurrency": concurrency}}))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    results: dict[str, Any] = {}

    def start(*extra: str) -> tuple[subprocess.Popen[bytes], str, int]:
        port, mport = free_port(), free_port()
        proc = subprocess.Popen([sys.executable, "-m", "compatcheck", "webhook", "serve", "--cert-file",
                                 str(certs / "tls.crt"), "--key-file", str(certs / "tls.key"), "--host", "127.0.0.1",
                                 "--port", str(port), "--metrics-port", str(mport), "--nodes", str(nodes), "--config", str(config), *extra],
                                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return proc, f"https://127.0.0.1:{port}", mport

    def load(imgs: list[str], run: int) -> list[bytes]:
        total = int(rate * duration)  # every object distinct: the evaluation cache never hits
        return [review(pod(i, imgs[i % len(imgs)], run), f"u{run}-{i}") for i in range(total)]

    # The token service is on another port: a host the registry names, so it must be allowed like a CDN.
    lookups = ["--registry-lookups", "--registry-ca", str(ca), "--registry-redirect-host", token_host]
    warmup = [review(pod(i, "nvidia/cuda:12.4.1-base-ubuntu22.04", -1), f"w{i}") for i in range(rate)]

    async def ready(url: str, proc: subprocess.Popen[bytes]) -> None:
        """Ready, then a second of reviews of a public image (off the allowlist: no lookup) to warm the process."""
        await wait_ready(url, ctx, proc)
        await fixed_rate(url, ctx, warmup, rate, 1.0)

    proc, url, _m = start("--no-registry-lookups")
    try:
        await ready(url, proc)
        results["baseline"] = await fixed_rate(url, ctx, load(images, 0), rate, duration)
    finally:
        stop(proc)
    allow = [a for h in hosts for a in ("--registry-allow", h)]
    proc, url, mport = start(*lookups, "--registry-auth-file", str(docker / "config.json"), *allow)
    try:
        await ready(url, proc)
        results["cold"] = await fixed_rate(url, ctx, load(images, 1), rate, duration)
        results["cold_metrics"] = metric(mport, "compatcheck_registry_")
        ok = results["cold_metrics"].get('compatcheck_registry_fetches_total{outcome="ok"}', 0)
        assert ok == len(images), f"fetches: {results['cold_metrics']}"
        results["warm"] = await fixed_rate(url, ctx, load(images, 2), rate, duration)
    finally:
        stop(proc)
    slow = [im.replace(hosts[0], relay_host, 1) for im in images]
    sdocker = work / "docker-relay"
    sdocker.mkdir(exist_ok=True)
    auth = json.loads((docker / "config.json").read_text())["auths"]
    (sdocker / "config.json").write_text(json.dumps({"auths": {relay_host: next(iter(auth.values())), **auth}}))
    proc, url, mport = start(*lookups, "--registry-auth-file", str(sdocker / "config.json"), "--registry-allow",
                             relay_host, *allow)
    try:
        await ready(url, proc)
        results["cold_slow_registry"] = await fixed_rate(url, ctx, load(slow, 3), rate, duration)
        results["cold_slow_metrics"] = metric(mport, "compatcheck_registry_")
    finally:
        stop(proc)
    for k in ("cold", "warm", "cold_slow_registry"):
        results[k]["p50_ratio"] = results[k]["p50"] / results["baseline"]["p50"]
        results[k]["p99_ratio"] = results[k]["p99"] / results["baseline"]["p99"]
    return results


def serve_registry(work: Path, n: int) -> None:
    """The registry side, in its own process (the token server and the relay are Python threads: in the load
    generator's process they would take its GIL and inflate the latencies it measures). Prints what the
    measuring process needs as one JSON line, then serves until stdin closes."""
    binary = find_registry()
    if binary.startswith("no "):
        raise SystemExit(binary)
    ca = RegistryCA(work / "pki")
    token = TokenServer(ca).start()
    reg = Registry(binary, work / "registry", ca, "token", token).start()
    relay = SlowRelay(reg.port, 1.0)
    try:
        images = []
        for i in range(n):
            reg.push_image(f"ml/app-{i}", "2025-10-14", CUDA13_ENV,
                           labels={"org.opencontainers.image.revision": f"r{i}"})
            images.append(f"{reg.host}/ml/app-{i}:2025-10-14")
        docker = work / "docker"
        docker.mkdir()
        (docker / "config.json").write_text(json.dumps({"auths": {reg.host: {
            "username": "reader", "password": USERS["reader"]}}}))
        print(json.dumps({"host": reg.host, "relay": relay.host, "token": token.realm.split("/")[2],
                          "ca": str(ca.ca_file), "docker": str(docker), "images": images}), flush=True)
        sys.stdin.read()
    finally:
        relay.close()
        reg.stop()
        token.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rate", type=int, default=200)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3, help="webhook rounds (each: baseline, cold, warm, slow)")
    ap.add_argument("--webhook-only", action="store_true", help="skip the lint measurements")
    ap.add_argument("--concurrency", type=int, default=8, help="the webhook's fetches at once (registry.concurrency)")
    ap.add_argument("--serve-registry", metavar="DIR", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_registry:
        serve_registry(Path(args.serve_registry), args.images)
        return
    with tempfile.TemporaryDirectory(prefix="cc-registry-bench-") as tmp:
        work = Path(tmp)
        side = subprocess.Popen([sys.executable, __file__, "--serve-registry", str(work), "--images",
                                 str(args.images)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert side.stdout is not None
            line = side.stdout.readline()
            if not line:
                raise SystemExit("the registry side did not start")
            info = json.loads(line)
            images, ca, docker = info["images"], Path(info["ca"]), Path(info["docker"])
            report: dict[str, Any] = {"images": args.images, "cores": os.cpu_count()}
            if not args.webhook_only:
                report["lint"] = lint_phase(work, images, ca, docker, args.repeat)
                report["one_lookup"] = one_lookup(images, ca, docker)
            report["loop_lag"] = {c: asyncio.run(loop_lag(images, info, c)) for c in (8, 2)}
            rounds = []
            for r in range(args.rounds):  # webhook phases repeated: the shared machine's drifts hit every mode
                (work / f"wh{r}").mkdir()
                rounds.append(asyncio.run(webhook_phase(work / f"wh{r}", images, [info["host"]], ca, docker,
                                                        args.rate, args.duration, info["relay"], info["token"],
                                                        args.concurrency)))
            report["webhook_rounds"] = rounds
            report["webhook"] = {mode: {k: statistics.median(r[mode][k] for r in rounds)
                                        for k in ("p50", "p99", "max", "errors", "p50_ratio", "p99_ratio")
                                        if k in rounds[0][mode]}
                                 for mode in ("baseline", "cold", "warm", "cold_slow_registry")}
        finally:
            if side.stdin is not None:
                side.stdin.close()
            side.wait(60)
    print(json.dumps(report, indent=2))
    if "lint" in report:
        lint = report["lint"]
        print(f"\nlint, {args.images} GPU Pods, {args.images} distinct images (median of {args.repeat}):")
        for mode in ("baseline", "cold", "warm", "offline"):
            print(f"  {mode:9s} {lint['median_s'][mode]:6.3f} s  ({lint['ratio'][mode]:.2f}x the baseline)")
        one = report["one_lookup"]
        print(f"one cold lookup (token + manifest + config): median {one['median_ms']:.1f} ms, "
              f"max {one['max_ms']:.1f} ms")
    for c, lag in report["loop_lag"].items():
        print(f"{args.images} cold fetches on {c} threads in-process: {lag['seconds']:.2f} s; the event loop's 1 ms "
              f"timer late by {lag['p50_ms']:.1f} ms p50, {lag['p99_ms']:.1f} ms p99, {lag['max_ms']:.1f} ms max")
    wh = report["webhook"]
    print(f"webhook at {args.rate} req/s for {args.duration:g} s (ms from scheduled start; medians of "
          f"{args.rounds} rounds, ratios to the baseline of the same round):")
    for mode in ("baseline", "cold", "warm", "cold_slow_registry"):
        r = wh[mode]
        extra = f"  ({r['p50_ratio']:.2f}x / {r['p99_ratio']:.2f}x)" if mode != "baseline" else ""
        print(f"  {mode:18s} p50 {r['p50']:7.2f}  p99 {r['p99']:7.2f}  max {r['max']:7.1f}  errors {r['errors']}"
              f"{extra}")


if __name__ == "__main__":
    main()
