"""CPU time of the admission path per request, in-process: what one request's synchronous work holds the event
loop for, measured as the thread's CPU time, which waiting for a core on a busy machine does not inflate (the
wall-clock handling time in the decision log does: see webhook_load.py).

    python benchmarks/admission_cpu.py [--requests 3000] [--bound-ms 10] [--profile]

For the workloads of webhook_load.py (all-distinct objects, the evaluation cache never hits; and the
replica-like mix, mostly hits) against the static view of examples/cluster-profile.yaml, each request is what
the webhook does on the loop: decode the body, ``review`` (parse, evaluate or hit the cache, answer), encode the
answer and the decision log line. Reports the median, p99, p99.9 and max CPU time per request, and how many
took longer than ``--bound-ms``. ``--profile`` prints where the all-distinct time goes (cProfile, by own time).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from webhook_load import bodies  # noqa: E402

from compatcheck.core.admission import EvaluationCache, review  # noqa: E402
from compatcheck.core.jsonutil import dumps, loads  # noqa: E402
from compatcheck.webhook.run import webhook_state  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=3000, help="measured requests per workload (default 3000)")
    ap.add_argument("--bound-ms", type=float, default=10.0, help="the bound to count requests over (default 10)")
    ap.add_argument("--profile", action="store_true", help="profile the all-distinct workload")
    args = ap.parse_args()
    state = webhook_state(None, [], str(ROOT / "examples" / "cluster-profile.yaml"), [])
    ctx = state.view.snapshot.ctx

    def one(raw: bytes, cache: EvaluationCache) -> None:
        body = loads(raw)
        response, decision = review(body, "validate", state.ruleset, ctx, state.settings, cache)
        dumps(response)
        dumps(decision.log_fields())

    workloads = {"all-distinct": bodies(args.requests + 500, distinct=True), "replica-like": bodies()}
    print(f"CPU time per request on the event loop (thread CPU time), {args.requests} requests per workload")
    worst = 0.0
    for name, load in workloads.items():
        cache = EvaluationCache()
        for raw in load[:500]:  # warm-up: memos of the snapshot, the cache for the replica-like mix
            one(raw, cache)
        samples = []
        for i in range(args.requests):
            raw = load[500 + i] if name == "all-distinct" else load[i % len(load)]
            start = time.thread_time()
            one(raw, cache)
            samples.append((time.thread_time() - start) * 1000)
        samples.sort()
        over = sum(s > args.bound_ms for s in samples)
        worst = max(worst, samples[-1])
        print(f"  {name:<13} median {statistics.median(samples):.3f} ms   p99 {samples[int(len(samples) * .99) - 1]:.3f} "
              f"ms   p99.9 {samples[int(len(samples) * .999) - 1]:.3f} ms   max {samples[-1]:.3f} ms   "
              f"over {args.bound_ms:g} ms: {over}")
    if args.profile:
        cache = EvaluationCache()
        load = bodies(args.requests, distinct=True)
        prof = cProfile.Profile()
        prof.enable()
        for raw in load:
            one(raw, cache)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    return 0 if worst <= args.bound_ms else 1


if __name__ == "__main__":
    raise SystemExit(main())
