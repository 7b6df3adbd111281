"""Lint throughput and cold start, with baselines measured in the same run.

    python benchmarks/lint_throughput.py [--docs 10000] [--nodes 2000] [--repeat 3]

Generates a corpus of mixed workload documents in multi-document files and a `kubectl get nodes -o yaml`
style node list, then reports:
  - documents/s for `lint` without nodes and with the node file (one process, one core), and the ratio to
    the bare YAML parse of the same files (the floor any YAML linter pays);
  - the cost of the node file at 200 vs 2,000 nodes, split into parsing and evaluation (evaluation must not
    grow with node count: nodes collapse into equivalence classes);
  - cold start of `compatcheck lint one-file.yaml` against `python -c pass`.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

IMAGES = ["nvidia/cuda:12.4.1-base-ubuntu22.04", "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
          "vllm/vllm-openai:v0.9.2", "nvcr.io/nvidia/pytorch:24.05-py3", "paddlepaddle/paddle:2.6.1-gpu-cuda12.0-cudnn8.9",
          "ghcr.io/huggingface/text-generation-inference:2.2.0", "corp/app:1.2", "nginx:1.27"]
PRODUCTS = ["Tesla-T4", "NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-L4"]


def pod_spec(rng: random.Random, indent: str) -> str:
    image = rng.choice(IMAGES)
    gpu = rng.choice(["nvidia.com/gpu: 1", "nvidia.com/gpu: 2", "tencent.com/vcuda-core: 50\n"
                      f"{indent}        tencent.com/vcuda-memory: 8", "cpu: 500m"])
    sel = f"{indent}nodeSelector:\n{indent}  nvidia.com/gpu.product: {rng.choice(PRODUCTS)}\n" if rng.random() < .5 else ""
    args = f"{indent}    args: [\"--model=m\", \"--dtype=bfloat16\"]\n" if "vllm" in image else ""
    return (f"{sel}{indent}containers:\n{indent}  - name: main\n{indent}    image: {image}\n{args}"
            f"{indent}    env:\n{indent}      - {{name: LOG_LEVEL, value: info}}\n"
            f"{indent}    resources:\n{indent}      limits:\n{indent}        {gpu}\n")


def workload(rng: random.Random, i: int) -> str:
    kind = rng.choice(["Pod", "Deployment", "Job", "CronJob", "StatefulSet", "PyTorchJob"])
    meta = f"metadata:\n  name: w{i}\n  namespace: team-{i % 7}\n  labels: {{app: w{i}}}\n"
    if kind == "Pod":
        return f"apiVersion: v1\nkind: Pod\n{meta}spec:\n{pod_spec(rng, '  ')}"
    if kind == "CronJob":
        return (f"apiVersion: batch/v1\nkind: CronJob\n{meta}spec:\n  schedule: '0 * * * *'\n  jobTemplate:\n"
                f"    spec:\n      template:\n        spec:\n          restartPolicy: Never\n{pod_spec(rng, '          ')}")
    if kind == "PyTorchJob":
        return (f"apiVersion: kubeflow.org/v1\nkind: PyTorchJob\n{meta}spec:\n  pytorchReplicaSpecs:\n    Master:\n"
                f"      replicas: 1\n      template:\n        spec:\n{pod_spec(rng, '          ')}    Worker:\n"
                f"      replicas: 3\n      template:\n        spec:\n{pod_spec(rng, '          ')}")
    group = {"Deployment": "apps/v1", "StatefulSet": "apps/v1", "Job": "batch/v1"}[kind]
    return (f"apiVersion: {group}\nkind: {kind}\n{meta}spec:\n  selector: {{matchLabels: {{app: w{i}}}}}\n"
            f"  template:\n    metadata: {{labels: {{app: w{i}}}}}\n    spec:\n{pod_spec(rng, '      ')}")


def node(rng: random.Random, i: int) -> str:
    product = PRODUCTS[i % len(PRODUCTS)]
    driver = {"Tesla-T4": "535.104.05", "NVIDIA-A100-SXM4-80GB": "550.54.15", "NVIDIA-H100-80GB-HBM3": "570.124.06",
              "NVIDIA-L4": "535.104.05"}[product]
    branch, minor, rev = driver.split(".")
    images = "".join(f"    - names:\n      - registry.example.com/img{j}:v{j}\n      sizeBytes: {10**8 + j}\n"
                     for j in range(8))
    taint = "    taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]\n" if "A100" in product else ""
    return (f"- apiVersion: v1\n  kind: Node\n  metadata:\n    name: node-{i}\n    labels:\n"
            f"      kubernetes.io/hostname: node-{i}\n      kubernetes.io/os: linux\n"
            f"      nvidia.com/gpu.product: {product}\n      nvidia.com/cuda.driver-version.full: \"{driver}\"\n"
            f"      nvidia.com/cuda.driver-version.major: \"{branch}\"\n      nvidia.com/gfd.timestamp: \"{1700000000 + i}\"\n"
            f"  spec:\n{taint}    podCIDR: 10.{i // 256}.{i % 256}.0/24\n"
            f"  status:\n    allocatable: {{cpu: '64', memory: 512Gi, nvidia.com/gpu: '8', pods: '110'}}\n"
            f"    capacity: {{cpu: '64', memory: 512Gi, nvidia.com/gpu: '8', pods: '110'}}\n    images:\n{images}")


def write_corpus(root: Path, docs: int, per_file: int = 25) -> list[Path]:
    rng = random.Random(42)
    files = []
    for f in range(0, docs, per_file):
        p = root / f"m{f // per_file:04d}.yaml"
        p.write_text("---\n".join(workload(rng, i) for i in range(f, min(f + per_file, docs))))
        files.append(p)
    return files


def write_nodes(path: Path, n: int) -> Path:
    rng = random.Random(7)
    path.write_text("apiVersion: v1\nkind: List\nitems:\n" + "".join(node(rng, i) for i in range(n)))
    return path


def best(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=10_000)
    ap.add_argument("--nodes", type=int, default=2_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from ruamel.yaml import YAML

    from compatcheck.lint import LintOptions, run_lint
    from compatcheck.loader import load_nodes, load_rules

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "m").mkdir()
        files = write_corpus(root / "m", args.docs)
        big = write_nodes(root / "nodes-big.yaml", args.nodes)
        small = write_nodes(root / "nodes-small.yaml", max(1, args.nodes // 10))
        loaded = load_rules()
        parser = YAML(typ="safe", pure=False)

        def parse_only() -> None:
            for f in files:
                for _ in parser.compose_all(f.read_text()):
                    pass

        t_parse = best(parse_only, args.repeat)
        paths = [str(root / "m")]
        t_plain = best(lambda: run_lint(paths, loaded, LintOptions()), args.repeat)
        t_big = best(lambda: run_lint(paths, loaded, LintOptions(nodes=str(big))), args.repeat)
        t_small = best(lambda: run_lint(paths, loaded, LintOptions(nodes=str(small))), args.repeat)
        t_nodes_big = best(lambda: load_nodes(str(big), loaded.kb, 1 << 30), args.repeat)
        t_nodes_small = best(lambda: load_nodes(str(small), loaded.kb, 1 << 30), args.repeat)
        cluster, _ = load_nodes(str(big), loaded.kb, 1 << 30)
        report = run_lint(paths, loaded, LintOptions(nodes=str(big)))
        n = args.docs
        print(f"corpus: {n} documents in {len(files)} files ({sum(f.stat().st_size for f in files) / 1e6:.1f} MB); "
              f"node file: {args.nodes} nodes ({big.stat().st_size / 1e6:.1f} MB) -> "
              f"{len(cluster.classes) if cluster else 0} node classes; {len(report.findings)} findings")
        print(f"YAML compose only (baseline)     : {n / t_parse:8.0f} docs/s  ({t_parse:.2f} s)")
        print(f"lint, no nodes                   : {n / t_plain:8.0f} docs/s  ({t_plain:.2f} s)  "
              f"= {t_parse / t_plain:.2f}x the parse-only rate")
        print(f"lint, --nodes {args.nodes:<5} nodes       : {n / t_big:8.0f} docs/s  ({t_big:.2f} s, incl. node file)")
        print(f"node file parse {args.nodes:>5} / {max(1, args.nodes // 10):>4} nodes : {t_nodes_big:.3f} s / "
              f"{t_nodes_small:.3f} s")
        eval_big, eval_small = t_big - t_nodes_big, t_small - t_nodes_small
        print(f"evaluation with {args.nodes} / {max(1, args.nodes // 10)} nodes     : {eval_big:.2f} s / "
              f"{eval_small:.2f} s  (ratio {eval_big / eval_small:.2f}; 1.00 = independent of node count)")

        one = files[0]
        cmd = [sys.executable, "-m", "compatcheck", "lint", str(one)]
        cold = statistics.median(_time_cmd(cmd) for _ in range(7))
        bare = statistics.median(_time_cmd([sys.executable, "-c", "pass"]) for _ in range(7))
        print(f"cold start `compatcheck lint one-file.yaml` ({one.stat().st_size // 1024} KiB): {cold * 1000:.0f} ms "
              f"(python -c pass: {bare * 1000:.0f} ms)")


def _time_cmd(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, capture_output=True, check=False)
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
