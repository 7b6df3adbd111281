"""A KServe-like repository: many large CRD documents, Grafana dashboards in ConfigMaps, a few GPU workloads.

    python benchmarks/big_repository.py [--mb 135] [--files 782] [--baseline-files 60]

Linting the KServe repository (782 files, 135 MB, mostly CRDs) once took 134 s and 1.4 GB. This generates a tree of
that shape (CRDs with deep OpenAPI schemas, one to four per file; ConfigMaps holding dashboards; Services and RBAC;
some files holding their CRDs as one ``kind: List``; 12 GPU InferenceServices and Deployments
among them) and measures, each in its own process:
  - ``compatcheck lint DIR --format json``: MB/s and peak RSS (the goal: >= 20 MB/s, < 300 MB);
  - the baseline of the same run, what any ruamel.yaml-based reader pays just to read the files: ruamel's C
    ``safe`` ``load_all`` of a sample of the files (``--baseline-files``; it is slow), as MB/s, and its ratio to
    the lint.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GPU_WORKLOADS = [
    """apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: llm-{i}
spec:
  predictor:
    containers:
      - name: kserve-container
        image: vllm/vllm-openai:v0.9.2
        args: [--model=/mnt/models, --dtype=bfloat16]
        resources:
          limits: {{nvidia.com/gpu: "1"}}
""",
    """apiVersion: apps/v1
kind: Deployment
metadata:
  name: trainer-{i}
spec:
  selector: {{matchLabels: {{app: trainer-{i}}}}}
  template:
    metadata: {{labels: {{app: trainer-{i}}}}}
    spec:
      containers:
        - name: torch
          image: pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime
          resources:
            limits: {{nvidia.com/gpu: 2}}
""",
]


_NAMES = itertools.count()


def schema(rng: random.Random, depth: int, width: int, indent: str) -> str:
    """An OpenAPI v3 schema as controller-gen writes them: nested properties with long descriptions."""
    out = []
    for j in range(width):
        name = f"field{depth}{j}n{next(_NAMES)}"
        desc = " ".join(rng.choice(["the", "pod", "spec", "of", "container", "resource", "limits", "node",
                                    "affinity", "when", "set", "is", "used", "to", "override", "default"])
                        for _ in range(rng.randrange(10, 40)))
        out.append(f"{indent}{name}:\n{indent}  description: {desc}\n")
        if depth > 0 and rng.random() < 0.6:
            out.append(f"{indent}  type: object\n{indent}  properties:\n")
            out.append(schema(rng, depth - 1, width, indent + "    "))
        else:
            kind = rng.choice(["string", "integer", "boolean", "array"])
            out.append(f"{indent}  type: {kind}\n")
            if kind == "array":
                out.append(f"{indent}  items:\n{indent}    type: string\n")
            if kind == "integer":
                out.append(f"{indent}  format: int32\n")
    return "".join(out)


def crd(rng: random.Random, i: int, size: int) -> str:
    head = (f"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n"
            f"  annotations:\n    controller-gen.kubebuilder.io/version: v0.16.4\n  name: thing{i}s.serving.example.io\n"
            f"spec:\n  group: serving.example.io\n  names:\n    kind: Thing{i}\n    plural: thing{i}s\n  scope: Namespaced\n"
            f"  versions:\n  - name: v1beta1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n"
            f"        type: object\n        properties:\n")
    body = []
    total = len(head)
    while total < size:
        part = schema(rng, 2, 4, "          ")
        if body and total + len(part) > size * 1.05:
            break
        body.append(part)
        total += len(part)
    return head + "".join(body)


def dashboard(rng: random.Random, i: int, size: int) -> str:
    panels = []
    total = 0
    while total < size:
        p = json.dumps({"type": "timeseries", "title": f"GPU {len(panels)}", "targets": [
            {"expr": f"sum(rate(DCGM_FI_DEV_GPU_UTIL{{pod=~\"llm-{i}.*\"}}[5m])) by (gpu, instance, {k})"}
            for k in range(6)], "gridPos": {"h": 8, "w": 12, "x": 0, "y": len(panels) * 8}})
        panels.append(p)
        total += len(p)
    text = json.dumps({"title": f"dashboard {i}", "panels": [json.loads(p) for p in panels]}, indent=2)
    body = "\n".join("    " + line for line in text.splitlines())
    return (f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dashboard-{i}\n  labels: {{grafana_dashboard: \"1\"}}\n"
            f"data:\n  dashboard-{i}.json: |\n{body}\n")


def small(i: int) -> str:
    return (f"apiVersion: v1\nkind: Service\nmetadata:\n  name: svc-{i}\nspec:\n  ports: [{{port: 80}}]\n---\n"
            f"apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: role-{i}\nrules:\n"
            f"- apiGroups: ['']\n  resources: [pods]\n  verbs: [get, list, watch]\n")


def as_list(docs: list[str]) -> str:
    items = "".join("- " + "".join(("  " + line if n and line.strip() else line)
                                    for n, line in enumerate(d.splitlines(keepends=True))) for d in docs)
    return f"apiVersion: v1\nkind: List\nitems:\n{items}metadata:\n  resourceVersion: \"\"\n"


def write_tree(root: Path, total_mb: float, files: int) -> list[Path]:
    rng = random.Random(15)
    per_file = int(total_mb * 1e6 / files)
    out = []
    gpu_at = set(range(0, files, max(1, files // 12)))
    for f in range(files):
        d = root / ("config/crd" if f % 5 else "config/dashboards") / f"part{f // 100}"
        d.mkdir(parents=True, exist_ok=True)
        docs = []
        if f % 5:
            n = rng.randrange(1, 5)
            docs = [crd(rng, f * 10 + k, per_file // n) for k in range(n)]
        else:
            docs = [dashboard(rng, f, per_file - 400), small(f)]
        if f % 50 == 1:  # some files hold their CRDs as one kind: List (kubectl get crd -o yaml)
            docs = [as_list(docs)]
        if f in gpu_at:
            docs.append(GPU_WORKLOADS[f % 2].format(i=f))
        p = d / f"f{f:04d}.yaml"
        p.write_text("---\n".join(docs))
        out.append(p)
    return out


def peak_rss_mb(cmd: list[str]) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Wall time and peak RSS of ``cmd`` run alone (RUSAGE_CHILDREN read before and after: the maximum over the
    children waited for, so run the biggest first)."""
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    return wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, proc


BASELINE = """
import sys
from pathlib import Path
from ruamel.yaml import YAML
y = YAML(typ="safe", pure=False)
for f in sys.argv[1:]:
    for _ in y.load_all(Path(f).read_text()):
        pass
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=135)
    ap.add_argument("--files", type=int, default=782)
    ap.add_argument("--baseline-files", type=int, default=60, help="files read by the baseline (a sample)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        files = write_tree(root, args.mb, args.files)
        size = sum(p.stat().st_size for p in files) / 1e6
        wall, rss, proc = peak_rss_mb([sys.executable, "-m", "compatcheck", "lint", str(root), "--format", "json"])
        report = json.loads(proc.stdout)
        summary = report["summary"]
        sample = files[:: max(1, len(files) // args.baseline_files)][: args.baseline_files]
        sample_mb = sum(p.stat().st_size for p in sample) / 1e6
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", BASELINE, *map(str, sample)], check=True)
        base_wall = time.perf_counter() - t
        print(f"input: {len(files)} files, {size:.1f} MB (CRDs, dashboards in ConfigMaps, Services, RBAC, "
              f"{len(range(0, args.files, max(1, args.files // 12)))} GPU workloads)")
        print(f"compatcheck lint: {wall:.2f} s, {size / wall:.1f} MB/s, peak RSS {rss:.0f} MB; "
              f"{summary['objects']} objects linted, {summary.get('documentsWithoutPodSpecs', 0)} documents "
              f"without pod specs skipped, {len(report['findings'])} findings, {len(report['errors'])} errors "
              f"(exit {proc.returncode})")
        print(f"baseline: ruamel.yaml C safe load_all of {len(sample)} of the files ({sample_mb:.1f} MB): "
              f"{base_wall:.2f} s, {sample_mb / base_wall:.1f} MB/s (process start included)")
        print(f"lint / baseline: {(size / wall) / (sample_mb / base_wall):.1f}x")


if __name__ == "__main__":
    main()
