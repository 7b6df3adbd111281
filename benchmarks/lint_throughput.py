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
import os
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
    branch = driver.split(".")[0]
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

    import json

    from ruamel.yaml import YAML

    from compatcheck.io.lint import LintOptions, run_lint
    from compatcheck.io.loader import load_nodes, load_rules
    from compatcheck.io.manifests import load_data

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "m").mkdir()
        files = write_corpus(root / "m", args.docs)
        big = write_nodes(root / "nodes-big.yaml", args.nodes)
        small_n = max(1, args.nodes // 10)
        small = write_nodes(root / "nodes-small.yaml", small_n)
        big_json = root / "nodes-big.json"
        big_json.write_text(json.dumps(load_data(big.read_text())[0]))
        small_json = root / "nodes-small.json"
        small_json.write_text(json.dumps(load_data(small.read_text())[0]))
        loaded = load_rules()
        n = args.docs
        paths = [str(root / "m")]

        def safe_load_all() -> None:  # what a plain ruamel.yaml-based linter pays just to read the files
            y = YAML(typ="safe", pure=False)
            for f in files:
                for _ in y.load_all(f.read_text()):
                    pass

        t_base = best(safe_load_all, args.repeat)
        t_plain = best(lambda: run_lint(paths, loaded, LintOptions()), args.repeat)
        t_json = best(lambda: run_lint(paths, loaded, LintOptions(nodes=str(big_json))), args.repeat)
        t_yaml = best(lambda: run_lint(paths, loaded, LintOptions(nodes=str(big))), args.repeat)
        t_json_small = best(lambda: run_lint(paths, loaded, LintOptions(nodes=str(small_json))), args.repeat)
        parse = {name: best(lambda p=p: load_nodes(str(p), loaded.kb, 1 << 30), args.repeat)
                 for name, p in (("yaml-big", big), ("yaml-small", small), ("json-big", big_json),
                                 ("json-small", small_json))}
        cluster, _ = load_nodes(str(big_json), loaded.kb, 1 << 30)
        report = run_lint(paths, loaded, LintOptions(nodes=str(big_json)))
        size = sum(f.stat().st_size for f in files) / 1e6
        print(f"corpus: {n} workload documents in {len(files)} files ({size:.1f} MB); node file: {args.nodes} nodes "
              f"({big.stat().st_size / 1e6:.1f} MB YAML, {big_json.stat().st_size / 1e6:.1f} MB JSON) -> "
              f"{len(cluster.classes) if cluster else 0} node classes; {len(report.findings)} findings")
        print(f"baseline: ruamel.yaml safe load_all only : {n / t_base:7.0f} docs/s  ({t_base:.2f} s)")
        print(f"lint, no nodes                            : {n / t_plain:7.0f} docs/s  ({t_plain:.2f} s)  "
              f"{t_base / t_plain:.2f}x the baseline")
        print(f"lint --nodes ({args.nodes} nodes, JSON)          : {n / t_json:7.0f} docs/s  ({t_json:.2f} s, node file "
              f"included)  {t_base / t_json:.2f}x the baseline")
        print(f"lint --nodes ({args.nodes} nodes, YAML)          : {n / t_yaml:7.0f} docs/s  ({t_yaml:.2f} s, node file "
              f"included)")
        print(f"node file parse, {args.nodes} vs {small_n} nodes      : YAML {parse['yaml-big']:.3f} s vs "
              f"{parse['yaml-small']:.3f} s; JSON {parse['json-big']:.3f} s vs {parse['json-small']:.3f} s")
        eval_big, eval_small = t_json - parse["json-big"], t_json_small - parse["json-small"]
        print(f"evaluation with {args.nodes} vs {small_n} nodes         : {eval_big:.2f} s vs {eval_small:.2f} s "
              f"(ratio {eval_big / eval_small:.2f}; 1.00 = independent of node count)")

        one = files[0]
        # An installed wheel has byte-compiled modules (pip compiles at install); match that.
        import compatcheck
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(compatcheck.__file__).parent)], check=True)
        cmd = [sys.executable, "-m", "compatcheck", "lint", str(one)]
        cold = statistics.median(_time_cmd(cmd) for _ in range(9))
        bare = statistics.median(_time_cmd([sys.executable, "-c", "pass"]) for _ in range(9))
        print(f"cold start `compatcheck lint one-file.yaml` ({one.stat().st_size // 1024} KiB, 25 docs): "
              f"{cold * 1000:.0f} ms median of 9 (python -c pass: {bare * 1000:.0f} ms)")


def _time_cmd(cmd: list[str]) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    t = time.perf_counter()
    subprocess.run(cmd, capture_output=True, check=False, env=env)
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
