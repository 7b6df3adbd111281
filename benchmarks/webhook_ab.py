"""The webhook of this tree against another commit's and the bare server, in one run: CPU per request at a fixed
rate (what the machine's load inflates least), p50/p99, and saturation throughput.

    python benchmarks/webhook_ab.py --ref 234dc2e [--rate 250] [--duration 6] [--rounds 3] [--workload mix]

The three servers (``--ref``'s tree exported with ``git archive``, this tree, benchmarks/bare_server.py) run at
once, each a process, with the static view of examples/cluster-profile.yaml; each round measures them in turn,
in the order ref, this, bare, this, ref, with benchmarks/loadgen.py (open loop at ``--rate``), then each once at
saturation (64 connections). Reported: the medians over the rounds, and each server's CPU time per request (from
/proc, over the measurement). The workloads are webhook_load.py's (``mix``: replica-like, the evaluation cache
hits; ``distinct``: it never does).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.live_view_scale import export_ref  # noqa: E402
from benchmarks.webhook_load import (  # noqa: E402
    _generate,
    bodies,
    cpu_seconds,
    free_port,
    stop,
    wait_ready,
)


def serve(code_root: Path, certs: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(code_root)}  # ahead of the editable install: that tree's code
    return subprocess.Popen([sys.executable, "-m", "compatcheck", "webhook", "serve", "--cert-file",
                             str(certs / "tls.crt"), "--key-file", str(certs / "tls.key"), "--host", "127.0.0.1",
                             "--port", str(port), "--metrics-port", "0", "--nodes", "examples/cluster-profile.yaml"],
                            cwd=code_root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ref", required=True, help="the commit to compare with (e.g. main)")
    ap.add_argument("--rate", type=int, default=250)
    ap.add_argument("--duration", type=float, default=6.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workload", choices=["mix", "distinct"], default="mix")
    args = ap.parse_args()
    load = bodies() if args.workload == "mix" else bodies(40_000, distinct=True)
    with tempfile.TemporaryDirectory() as tmp:
        certs = Path(tmp) / "certs"
        subprocess.run([sys.executable, "-m", "compatcheck", "cert", "generate", "--out-dir", str(certs), "--dns",
                        "localhost", "--dns", "127.0.0.1"], check=True, capture_output=True, cwd=ROOT)
        ref_root = export_ref(args.ref, Path(tmp) / "ref")
        ctx = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        ports = {"ref": free_port(), "this": free_port(), "bare": free_port()}
        procs = {"ref": serve(ref_root, certs, ports["ref"]), "this": serve(ROOT, certs, ports["this"]),
                 "bare": subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "bare_server.py"),
                                           str(certs / "tls.crt"), str(certs / "tls.key"), str(ports["bare"])],
                                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})}
        results: dict[str, list[dict[str, Any]]] = {k: [] for k in procs}
        saturation: dict[str, list[float]] = {k: [] for k in procs}
        try:
            for name, proc in procs.items():
                await wait_ready(f"https://localhost:{ports[name]}", ctx, proc)
                await _generate(f"https://127.0.0.1:{ports[name]}/validate", load, "--rate", "200", "--duration",
                                "2")  # warm-up: imports, caches
            print(f"{args.workload} workload; load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on "
                  f"{os.cpu_count()} CPUs")
            for _ in range(args.rounds):
                for name in ("ref", "this", "bare", "this", "ref"):
                    c0 = cpu_seconds(procs[name].pid)
                    r = await _generate(f"https://127.0.0.1:{ports[name]}/validate", load, "--rate", str(args.rate),
                                        "--duration", str(args.duration))
                    r["cpuUs"] = (cpu_seconds(procs[name].pid) - c0) / max(1, r["n"]) * 1e6
                    results[name].append(r)
                for name in ("ref", "this", "bare"):
                    r = await _generate(f"https://127.0.0.1:{ports[name]}/validate", load, "--saturate", "64",
                                        "--duration", str(args.duration))
                    saturation[name].append(float(r["achieved"]))
        finally:
            for proc in procs.values():
                stop(proc)
    med = statistics.median
    print(f"at {args.rate} req/s ({args.rounds} rounds, medians) and at saturation (64 connections); load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for name in ("ref", "this", "bare"):
        rs = results[name]
        print(f"  {name:4} ({args.ref if name == 'ref' else name}): CPU/request {med(r['cpuUs'] for r in rs):5.0f} us"
              f"  p50 {med(r['p50'] for r in rs):7.2f} ms  p99 {med(r['p99'] for r in rs):8.2f} ms  (p99s "
              + ", ".join(f"{r['p99']:.1f}" for r in rs) + f")  saturation {med(saturation[name]):6.0f} req/s"
              f" (rounds {', '.join(f'{x:.0f}' for x in saturation[name])})")
    bare_cpu, bare_p99 = med(r["cpuUs"] for r in results["bare"]), med(r["p99"] for r in results["bare"])
    for name in ("ref", "this"):
        print(f"  {name}/bare: CPU/request {med(r['cpuUs'] for r in results[name]) / bare_cpu:.2f}, "
              f"p99 {med(r['p99'] for r in results[name]) / bare_p99:.2f}, saturation "
              f"{med(saturation[name]) / med(saturation['bare']):.2f}")


if __name__ == "__main__":
    asyncio.run(main())
