"""Soak compatcheck with hostile input (issue #24), bounded in count and time.

Lint: N mutated inputs (real manifests from ../shared/corpus mutated by bytes and by structure, the fuzz suite's
mutators) linted in-process in batches; counts tracebacks (exceptions out of run_lint), internal errors, inputs
over the per-input time bound, and the slowest input.

Webhook: starts a real ``compatcheck webhook serve`` on loopback (TLS, with a throw-away certificate), sends M requests from C concurrent clients (recorded AdmissionReviews with mutated objects,
and malformed bodies), and counts 5xx, dropped connections, answers without their uid, and the worst time per
review; /healthz is asked after. Run it nice'd:

    nice -n 10 python benchmarks/soak.py --lint 100000 --webhook 20000 --clients 16 --max-seconds 1800
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_fuzz_hostile import CORPUS, _corpus_texts, mutate_object, mutate_text  # noqa: E402

SHARED = ROOT.parent / "shared"


def soak_lint(count: int, deadline: float, batch: int = 200) -> dict[str, Any]:
    from compatcheck.io.lint import LintOptions, run_lint
    from compatcheck.io.loader import load_rules

    loaded = load_rules()
    done = tracebacks = internal = slow_batches = 0
    worst = 0.0
    seed = 0
    started = time.perf_counter()
    while done < count and time.monotonic() < deadline:
        texts = _corpus_texts(seed, min(batch, count - done))
        seed += 1
        t0 = time.perf_counter()
        try:
            report = run_lint([], loaded, LintOptions(), texts=texts)
            internal += sum(1 for e in report.errors if e.kind == "internal")
        except Exception:
            tracebacks += 1
            traceback.print_exc()
        took = time.perf_counter() - t0
        per_input = took / max(len(texts), 1)
        worst = max(worst, took)
        slow_batches += per_input > 2.0
        done += len(texts)
    return {"inputs": done, "tracebacks": tracebacks, "internal_errors": internal, "slow_batches": slow_batches,
            "worst_batch_s": round(worst, 3), "seconds": round(time.perf_counter() - started, 1)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def soak_webhook(count: int, clients: int, deadline: float) -> dict[str, Any]:
    reviews = [json.loads(p.read_text()) for p in sorted((SHARED / "fixtures" / "admission").glob("*.json"))]
    tmp = Path(tempfile.mkdtemp(prefix="compatcheck-soak-"))
    subprocess.run([sys.executable, "-m", "compatcheck", "cert", "generate", "--out-dir", str(tmp), "--dns", "127.0.0.1",
                    "--dns", "localhost"], check=True, capture_output=True)
    port, metrics_port = _free_port(), _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "compatcheck", "webhook", "serve", "--cert-file", str(tmp / "tls.crt"),
                             "--key-file", str(tmp / "tls.key"), "--host", "127.0.0.1", "--port", str(port),
                             "--metrics-port", str(metrics_port)], stdout=subprocess.DEVNULL,
                            stderr=(tmp / "server.log").open("w"), text=True)  # (a pipe nobody reads fills up)
    ctx = ssl.create_default_context(cafile=str(tmp / "ca.crt"))
    ctx.check_hostname = False
    counts = {"requests": 0, "answered": 0, "refused_4xx": 0, "5xx": 0, "dropped": 0, "wrong_uid": 0}
    worst = [0.0]
    lock = threading.Lock()
    try:
        for _ in range(240):  # the server loads its rules first (seconds on a busy machine)
            try:
                conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.5)
        else:
            raise SystemExit("the webhook did not start")
        started = time.perf_counter()

        def client(n: int, seed: int) -> None:
            rng = random.Random(seed)
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
            for _ in range(n):
                if time.monotonic() > deadline:
                    return
                review = json.loads(json.dumps(rng.choice(reviews)))
                uid = review["request"]["uid"]
                if rng.random() < 0.8:
                    review["request"]["object"] = mutate_object(review["request"].get("object") or {}, rng)
                    try:
                        raw = json.dumps(review, default=str).encode()
                    except (ValueError, RecursionError):
                        continue
                    expect: str | None = uid
                else:
                    raw = mutate_text(json.dumps(review), rng).encode("utf-8", "surrogatepass")
                    expect = None
                t0 = time.perf_counter()
                try:
                    conn.request("POST", rng.choice(["/validate", "/mutate"]), body=raw,
                                 headers={"Content-Type": "application/json"})
                    resp = conn.getresponse()
                    body = resp.read()
                except (OSError, http.client.HTTPException):
                    with lock:
                        counts["dropped"] += 1
                    conn.close()
                    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
                    continue
                took = time.perf_counter() - t0
                with lock:
                    counts["requests"] += 1
                    worst[0] = max(worst[0], took)
                    if resp.status >= 500:
                        counts["5xx"] += 1
                    elif resp.status >= 400:
                        counts["refused_4xx"] += 1
                    else:
                        counts["answered"] += 1
                        if expect is not None and json.loads(body)["response"]["uid"] != expect:
                            counts["wrong_uid"] += 1
                if resp.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)

        threads = [threading.Thread(target=client, args=(count // clients, i)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        try:
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
            conn.request("GET", "/healthz")
            healthy = conn.getresponse().status == 200
        except OSError:
            healthy = False
        alive = proc.poll() is None
        result = {**counts, "worst_request_s": round(worst[0], 3), "healthz_after": healthy, "alive_after": alive,
                  "seconds": round(time.perf_counter() - started, 1)}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log = (tmp / "server.log").read_text(errors="replace")
        if "Traceback" in log:
            print(log[-4000:], file=sys.stderr)
    # The server's own time per review (its decision log's durationMs: decoding to answer, queueing excluded).
    durations = [float(m) for m in re.findall(r'"durationMs":([0-9.]+)', log)]
    result["server_tracebacks"] = log.count("Traceback")
    result["worst_review_ms"] = max(durations, default=0.0)
    result["reviews_over_budget"] = sum(1 for d in durations if d > 2000)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lint", type=int, default=100_000, help="lint inputs (default 100000)")
    parser.add_argument("--webhook", type=int, default=20_000, help="webhook requests (default 20000)")
    parser.add_argument("--clients", type=int, default=16, help="concurrent webhook clients (default 16)")
    parser.add_argument("--max-seconds", type=float, default=1800, help="stop each part after this long")
    args = parser.parse_args()
    if not CORPUS:
        print("../shared/corpus is absent", file=sys.stderr)
        return 2
    os.environ.setdefault("PYTHONHASHSEED", "0")
    out: dict[str, Any] = {}
    if args.lint:
        out["lint"] = soak_lint(args.lint, time.monotonic() + args.max_seconds)
        print(json.dumps(out["lint"]), flush=True)
    if args.webhook:
        out["webhook"] = soak_webhook(args.webhook, args.clients, time.monotonic() + args.max_seconds)
        print(json.dumps(out["webhook"]), flush=True)
    bad = out.get("lint", {}).get("tracebacks", 0) + out.get("lint", {}).get("internal_errors", 0) + \
        out.get("webhook", {}).get("5xx", 0) + out.get("webhook", {}).get("dropped", 0)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
