"""``compatcheck fix`` as a user runs it: golden text per fix, idempotency, comments and formatting kept,
--diff, multi-document files and lists, and nothing written when nothing is safe to fix."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT

GOLDENS = sorted(p for p in FIXTURES.glob("*/fixed.*.yaml"))


def fix(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "compatcheck", "fix", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def context(rule_dir: Path, case: str | None = None) -> list[str]:
    out = []
    if (rule_dir / "nodes.yaml").exists():
        out += ["--nodes", str(rule_dir / "nodes.yaml")]
    if (rule_dir / "crl.yaml").exists():
        out += ["--crl", str(rule_dir / "crl.yaml")]
    # the driver policy the case runs under (tests/test_fixtures.py reads the same files)
    config = rule_dir / f"config.{case}.yaml"
    config = config if config.exists() else rule_dir / "config.yaml"
    if config.exists():
        out += ["--config", str(config)]
    return out


@pytest.mark.parametrize("golden", GOLDENS, ids=[f"{p.parent.name}/{p.name}" for p in GOLDENS])
def test_fix_golden_text_and_idempotent(golden: Path, tmp_path: Path) -> None:
    rule = golden.parent.name
    case = golden.name.split(".")[1]
    target = tmp_path / f"{case}.yaml"
    shutil.copy(golden.with_name(f"fail.{case}.yaml"), target)
    args = [str(target), "--unsafe-fixes", "--rule", rule, *context(golden.parent, case)]
    first = fix(*args)
    assert first.returncode == 0, first.stderr
    assert target.read_text() == golden.read_text()
    second = fix(*args)
    assert second.returncode == 0 and "0 fixes applied" in second.stderr
    assert target.read_text() == golden.read_text()


def test_unsafe_fixes_need_the_flag(tmp_path: Path) -> None:
    target = tmp_path / "p.yaml"
    shutil.copy(FIXTURES / "dtype-unsupported-by-gpu" / "fail.bf16-t4.yaml", target)
    before = target.read_text()
    proc = fix(str(target))
    assert proc.returncode == 0 and "0 fixes applied" in proc.stderr
    assert target.read_text() == before


COMMENTED = """\
# Team A's training stack. Keep this header.
apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: paddle     # the legacy one
    labels: {app: paddle, tier: "gold"}
  spec:
    template:
      spec:
        containers:
        - name: paddle
          image: 'paddlepaddle/paddle:2.6.1-gpu-cuda12.0-cudnn8.9-trt8.6'
          resources:
            limits: {tencent.com/vcuda-core: "50", tencent.com/vcuda-memory: "8"}
        tolerations:
        - {key: nvidia.com/gpu, operator: Exists}
---
# an unrelated document, odd formatting on purpose
apiVersion:   v1
kind: ConfigMap
metadata: { name: "settings" }
data:
    key: 'value'   # trailing comment
"""


def test_comments_order_quoting_and_untouched_documents_survive(tmp_path: Path) -> None:
    target = tmp_path / "stack.yaml"
    target.write_text(COMMENTED)
    proc = fix(str(target))
    assert proc.returncode == 0, proc.stderr
    out = target.read_text()
    second_doc = COMMENTED.split("---\n", 1)[1]
    assert out.endswith("---\n" + second_doc), "untouched documents keep their exact text"
    assert out.startswith("# Team A's training stack. Keep this header.\napiVersion: v1\nkind: List\n")
    assert "name: paddle     # the legacy one" in out
    assert "labels: {app: paddle, tier: \"gold\"}" in out
    assert "image: 'paddlepaddle/paddle:2.6.1-gpu-cuda12.0-cudnn8.9-trt8.6'" in out
    assert "        - name: paddle\n" in out  # the file's own sequence indentation
    assert "          env:\n          - name: FLAGS_allocator_strategy\n            value: naive_best_fit\n" in out
    assert "        tolerations:\n        - {key: nvidia.com/gpu, operator: Exists}\n" in out
    assert fix(str(target)).stderr.startswith("0 fixes applied")


def test_diff_does_not_write(tmp_path: Path) -> None:
    target = tmp_path / "p.yaml"
    shutil.copy(FIXTURES / "paddle-allocator-conflict" / "fail.auto-growth.yaml", target)
    before = target.read_text()
    proc = fix(str(target), "--diff")
    assert proc.returncode == 1  # fixes are pending: CI can gate on it, like ruff --diff
    assert target.read_text() == before
    assert proc.stdout.startswith(f"--- a/{target}\n+++ b/{target}\n")
    assert "-          value: auto_growth\n+          value: naive_best_fit\n" in proc.stdout
    assert proc.stderr.endswith("1 fixes pending; 0 findings left\n")
    fix(str(target))
    clean = fix(str(target), "--diff")
    assert (clean.returncode, clean.stdout) == (0, "")


def test_config_can_disable_a_fix(tmp_path: Path) -> None:
    target = tmp_path / "p.yaml"
    shutil.copy(FIXTURES / "paddle-allocator-conflict" / "fail.missing.yaml", target)
    (tmp_path / ".compatcheck.yaml").write_text(
        "apiVersion: compatcheck/v1\nfixes:\n  disabled: [paddle-allocator-conflict]\n")
    before = target.read_text()
    proc = fix(str(target), cwd=tmp_path)
    assert proc.returncode == 0 and target.read_text() == before


def test_a_fix_whose_later_op_fails_leaves_the_document_as_it_was() -> None:
    from compatcheck.core.model import Applicability, Finding, Fix, ObjectRef, PatchOp, Severity
    from compatcheck.io.fixer import fix_file
    from compatcheck.io.lint import LintedObject
    from compatcheck.io.manifests import parse_text

    text = "kind: Pod  # keep me\nspec:\n  containers:\n  - name: a\n"
    parsed = parse_text("pod.yaml", text)
    ops = (PatchOp("add", "/spec/containers/0/image", "x"), PatchOp("replace", "/spec/missing/path", 1))
    half = Finding("demo", Severity.ERROR, "m", ObjectRef("v1", "Pod", None, None), "/spec",
                   fix=Fix("two ops", Applicability.SAFE, ops))
    whole = Finding("demo2", Severity.ERROR, "m", ObjectRef("v1", "Pod", None, None), "/spec",
                    fix=Fix("one op", Applicability.SAFE, (PatchOp("add", "/spec/nodeName", "n1"),)))
    doc = parsed.documents[0]
    result = fix_file("pod.yaml", text, [LintedObject(parsed, doc, "", doc.data, [half, whole])],
                      {Applicability.SAFE})
    assert [f.rule_id for f in result.applied] == ["demo2"]
    assert [f.rule_id for f, _why in result.skipped] == ["demo"]
    assert "image" not in result.fixed and "nodeName: n1" in result.fixed and "# keep me" in result.fixed
