"""One diagnostic type (issue #11): every problem that is not a finding, in every layer, is a ``Diagnostic`` with
where it is, how bad it is and what kind of input it concerns, and the CLI prints them one way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compatcheck.core.config import Config, ConfigError, apply_to_ruleset
from compatcheck.core.crl import build_index
from compatcheck.core.model import Diagnostic, Severity
from compatcheck.io import baseline
from compatcheck.io.config import load_config
from compatcheck.io.loader import CrlSource, Loaded, RuleLoadError, crl_index, load_rules
from compatcheck.io.manifests import parse_text
from compatcheck.report.model import LintReport
from compatcheck.report.text import render
from tests.conftest import ROOT

VLLM = ROOT / "examples" / "manifests" / "vllm-bf16-on-t4.yaml"


def cc(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "COMPATCHECK_CONFIG")}
    proc = subprocess.run([sys.executable, "-m", "compatcheck", *args], capture_output=True, text=True, cwd=cwd,
                          env={**env, "NO_COLOR": "1"}, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_manifest_errors_and_notes_are_diagnostics() -> None:
    bad = parse_text("bad.yaml", "a: [\n")
    assert bad.errors == [Diagnostic("bad.yaml", bad.errors[0].message, 2, kind="input")]
    template = parse_text("t.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ .x }}\n")
    (note,) = template.notes
    assert (note.severity, note.kind, note.line) == (Severity.INFO, "note", 4)


def test_rule_and_table_problems_are_diagnostics_of_kind_rules(tmp_path: Path) -> None:
    d = tmp_path / "rules.d"
    (d / "data").mkdir(parents=True)
    (d / "my-rule.yaml").write_text("apiVersion: compatcheck/v1\nid: my-rule\nsummary: A rule with a typo here.\n"
                                    "severity: fatal\ncheck: {type: cuda-driver-compat}\n")
    with pytest.raises(RuleLoadError) as err:
        load_rules([str(d)])
    assert err.value.problems and all(isinstance(p, Diagnostic) and p.kind == "rules" and p.severity is Severity.ERROR
                                      for p in err.value.problems)
    severity = next(p for p in err.value.problems if p.pointer == "/severity")
    assert severity.line == 4 and severity.path == str(d / "my-rule.yaml")


def test_config_problems_are_diagnostics_of_kind_config(tmp_path: Path, loaded: Loaded) -> None:
    cfg = tmp_path / ".compatcheck.yaml"
    cfg.write_text("apiVersion: compatcheck/v1\nfailOn: never\n")
    with pytest.raises(ConfigError) as err:
        load_config(str(cfg))
    assert [(p.kind, p.pointer, p.line) for p in err.value.problems] == [("config", "/failOn", 2)]
    with pytest.raises(ConfigError) as err:
        apply_to_ruleset(Config(path="c.yaml", disabled=frozenset({"no-such-rule"})), loaded.ruleset)
    assert [(p.kind, p.pointer) for p in err.value.problems] == [("config", "/rules/no-such-rule")]


def test_config_problems_found_after_reading_are_located(tmp_path: Path) -> None:
    """Unknown rule ids and invalid params overrides are found against the rules, after the file was read: they
    named the file only, now its line too."""
    (tmp_path / ".git").mkdir()
    (tmp_path / ".compatcheck.yaml").write_text(
        "apiVersion: compatcheck/v1\nrules:\n  no-such-rule: off\n"
        "  vgpu-cuda-unsupported: {params: {ceiling: twelve}}\nfixes:\n  enabled: [also-missing]\n")
    proc = cc("lint", str(VLLM), cwd=tmp_path)
    assert proc.returncode == 2
    lines = [ln.replace(str(tmp_path) + "/", "") for ln in proc.stderr.splitlines()]
    assert ".compatcheck.yaml:3: error: unknown rule 'no-such-rule' (see compatcheck rules list)" in lines
    assert ".compatcheck.yaml:6: error: unknown rule 'also-missing' (see compatcheck rules list)" in lines
    assert any(ln.startswith(".compatcheck.yaml:4: error: rules.vgpu-cuda-unsupported.params") for ln in lines)


def test_crl_problems_are_diagnostics_of_kind_crl() -> None:
    broken = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cf-crl-a-b"}, "data": {}}
    _index, invalid = build_index([broken])
    ((obj, problems),) = invalid
    assert obj is broken and problems and all(p.kind == "crl" and p.path == "" for p in problems)
    _index, errors = crl_index([CrlSource("crl.yaml", broken)])
    assert [(e.path, e.kind) for e in errors] == [("crl.yaml", "crl")]
    assert errors[0].message.startswith("invalid CRL ConfigMap 'cf-crl-a-b' ignored: ")


def test_baseline_problems_are_diagnostics(tmp_path: Path) -> None:
    bad = tmp_path / "b.json"
    bad.write_text('{"version": 2}')
    with pytest.raises(baseline.BaselineError) as err:
        baseline.load(str(bad))
    assert err.value.problems == [Diagnostic(str(bad), "not a compatcheck baseline (version 1)", kind="baseline")]
    proc = cc("lint", str(VLLM), "--baseline", str(bad))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"{bad}: error: not a compatcheck baseline (version 1)"]


def test_one_printer_for_every_severity() -> None:
    report = LintReport()
    report.add([Diagnostic("n.yaml", "a warning", 3, severity=Severity.WARNING, kind="nodes"),
                Diagnostic("t.yaml", "skipped", 1, severity=Severity.INFO, kind="note"),
                Diagnostic("m.yaml", "an error", kind="input")])
    assert [len(report.errors), len(report.warnings), len(report.notes)] == [1, 1, 1]
    assert render(report).splitlines()[:3] == ["m.yaml: error: an error", "n.yaml:3: warning: a warning",
                                               "t.yaml:1: note: skipped"]


def test_a_run_without_warnings_keeps_the_json_contract() -> None:
    out = json.loads(cc("lint", str(VLLM), "--format", "json").stdout)
    assert list(out) == ["version", "findings", "errors", "skipped", "summary", "coverage"]


# ------------------------------------------------------------------------------------------- node problems

NODES = """\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: gpu-a-0
    labels:
      nvidia.com/gpu.product: Tesla-T4
      nvidia.com/cuda.driver-version.full: garbage
  status:
    allocatable: {nvidia.com/gpu: "1"}
- apiVersion: v1
  kind: Node
  metadata:
    name: gpu-a-1
    labels: {nvidia.com/gpu.product: Tesla-T4, nvidia.com/cuda.driver-version.full: garbage}
  status:
    allocatable: {nvidia.com/gpu: "1"}
- apiVersion: v1
  kind: Node
  metadata:
    name: gpu-b-0
    labels: {nvidia.com/gpu.product: Tesla-T4, nvidia.com/cuda.driver-version.full: "535.104.05"}
  status:
    allocatable:
      nvidia.com/gpu: lots
"""


def test_node_facts_say_which_label_cannot_be_read(loaded: Loaded) -> None:
    from compatcheck.core.cluster import node_facts

    facts = node_facts({"nvidia.com/cuda.driver-version.full": "garbage", "nvidia.com/gpu.compute.major": "seven"},
                       {"nvidia.com/gpu": "lots"}, loaded.kb)
    assert [(p.pointer, p.severity, p.kind) for p in facts.problems] == [
        ("/metadata/labels/nvidia.com~1cuda.driver-version.full", Severity.WARNING, "nodes"),
        ("/metadata/labels/nvidia.com~1gpu.compute.major", Severity.WARNING, "nodes"),
        ("/status/allocatable/nvidia.com~1gpu", Severity.WARNING, "nodes")]
    assert facts.problems[0].message.startswith("label nvidia.com/cuda.driver-version.full: driver version 'garbage'")
    assert facts.problems[1].message == "label nvidia.com/gpu.compute.major: 'seven' is not a whole number"


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_node_problems_are_warnings_located_in_the_nodes_file(tmp_path: Path, loaded: Loaded, suffix: str) -> None:
    """A garbage driver label or a non-quantity allocatable used to be computed and never reported: the rules
    silently treated the node as having no driver (or no GPUs)."""
    from compatcheck.io.loader import load_nodes
    from compatcheck.io.manifests import load_data

    nodes = tmp_path / f"nodes{suffix}"
    nodes.write_text(NODES if suffix == ".yaml" else json.dumps(load_data(NODES)[0], indent=2))
    cluster, diagnostics = load_nodes(str(nodes), loaded.kb, 1 << 20)
    assert cluster is not None and cluster.node_count == 3
    assert all((d.severity, d.kind, d.path) == (Severity.WARNING, "nodes", str(nodes)) for d in diagnostics)
    label = "nvidia.com/cuda.driver-version.full"
    assert [d.message.split(": ")[0] for d in diagnostics] == ["node gpu-a-0 (and 1 more with the same labels)",
                                                               "node gpu-b-0"]
    assert f"label {label}: driver version 'garbage' is not a version number" in diagnostics[0].message
    assert diagnostics[1].message.endswith("allocatable nvidia.com/gpu: 'lots' is not a quantity")
    lines = nodes.read_text().splitlines()
    assert label in lines[diagnostics[0].line - 1] and "lots" in lines[diagnostics[1].line - 1]


def test_lint_reports_node_problems_as_warnings(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(NODES)
    text = cc("lint", str(VLLM), "--nodes", str(nodes))
    assert text.returncode == 1, text.stderr  # a warning about an input is no error: the findings decide
    assert text.stdout.splitlines()[0] == (
        f"{nodes}:10: warning: node gpu-a-0 (and 1 more with the same labels): label "
        "nvidia.com/cuda.driver-version.full: driver version 'garbage' is not a version number (expected digits "
        "and dots, e.g. 12.4)")
    assert text.stdout.splitlines()[-2].endswith("; 2 input warnings")
    assert text.stdout.splitlines()[-1] == "GPU workloads: 1, checked 1, not checked 0"
    out = json.loads(cc("lint", str(VLLM), "--nodes", str(nodes), "--format", "json").stdout)
    assert out["errors"] == [] and [(w["file"], w["line"]) for w in out["warnings"]] == [
        (str(nodes), 10), (str(nodes), 27)]
    github = cc("lint", str(VLLM), "--nodes", str(nodes), "--format", "github").stdout.splitlines()
    assert github[0].startswith(f"::warning file={nodes},line=10,title=compatcheck input warning::node gpu-a-0")
    sarif = json.loads(cc("lint", str(VLLM), "--nodes", str(nodes), "--format", "sarif").stdout)
    invocation = sarif["runs"][0]["invocations"][0]
    assert invocation["executionSuccessful"] is True
    assert [n["level"] for n in invocation["toolExecutionNotifications"]] == ["warning", "warning"]
    fix = cc("fix", str(VLLM), "--nodes", str(nodes), "--diff")  # fix prints them too, and is not stopped
    assert fix.returncode == 0 and f"{nodes}:10: warning: node gpu-a-0" in fix.stderr


def test_node_problems_of_a_profile_point_at_the_pool(tmp_path: Path, loaded: Loaded) -> None:
    from compatcheck.io.loader import load_nodes

    profile = tmp_path / "profile.yaml"
    profile.write_text("apiVersion: compatcheck/v1\nkind: ClusterProfile\nnodePools:\n  - name: ok\n"
                       "    gpu: Tesla-T4\n  - name: odd\n    count: 3\n    gpu: Tesla-T4\n    labels:\n"
                       "      nvidia.com/gpu.compute.major: seven\n    resources:\n      nvidia.com/gpu: many\n")
    cluster, diagnostics = load_nodes(str(profile), loaded.kb, 1 << 20)
    assert cluster is not None
    assert [(d.line, d.pointer) for d in diagnostics] == [
        (10, "/nodePools/1/labels/nvidia.com~1gpu.compute.major"), (12, "/nodePools/1/resources/nvidia.com~1gpu")]
    assert diagnostics[0].message.startswith("node odd-0 (and 2 more with the same labels): label ")


# ------------------------------------------------------------------------------- user files, located by schema


def test_invalid_crl_files_are_located(tmp_path: Path) -> None:
    """An invalid CRL ConfigMap given with --crl named its file only; now the line of its first problem."""
    crl = tmp_path / "crl.yaml"
    crl.write_text("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n"
                   "    name: cf-crl-g-x\n    namespace: kube-public\n    labels:\n"
                   "      features.alauda.io/type: CustomResourceLimitation\n      features.alauda.io/group: g\n"
                   "  data:\n    key: example.com/x\n    dataType: integer\n    group: g\n    limits: sometimes\n"
                   "    requests: fromLimits\n")
    out = json.loads(cc("lint", str(VLLM), "--crl", str(crl), "--format", "json").stdout)
    assert out["errors"] == [{"file": str(crl), "line": 16, "message": "invalid CRL ConfigMap 'cf-crl-g-x' ignored: "
                              "data.limits: 'sometimes' is not one of ['disabled', 'required', 'optional']"}]


def test_a_broken_document_in_a_crl_file_loses_no_crl_after_it(tmp_path: Path) -> None:
    """--crl files were read as one stream: a tab-indented document before the CRL ConfigMaps dropped them all, so
    the CRL's policy went unchecked. Now they are read one '---' part at a time, as lint inputs are (kubectl's
    split): the broken document is an error on its line and the CRLs after it still apply."""
    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "crl-request-policy"
    crl = tmp_path / "crl.yaml"
    crl.write_text("apiVersion: v1\nkind: Service\nmetadata:\n\tname: x\n---\n" + (fixtures / "crl.yaml").read_text())
    proc = cc("lint", str(fixtures / "fail.from-limits.yaml"), "--crl", str(crl), "--format", "json")
    out = json.loads(proc.stdout)
    assert proc.returncode == 2
    assert out["errors"] == [{"file": str(crl), "line": 4,
                              "message": "invalid YAML: found character that cannot start any token"}]
    assert [(f["rule"], f["line"]) for f in out["findings"]] == [
        ("crl-request-policy", 14), ("extended-resource-invalid", 14)]


def test_the_baseline_is_validated_by_its_schema(tmp_path: Path) -> None:
    """Entries that were not mappings were skipped and missing fields read as "None": a hand-edited baseline
    silently matched nothing. Now every problem is an error at its line."""
    bad = tmp_path / "baseline.json"
    bad.write_text('{\n  "version": 1,\n  "findings": [\n    {"rule": "r", "file": "f", "kind": "Pod", "object": "a/b",'
                   '\n     "container": "c"},\n    "oops"\n  ]\n}\n')
    with pytest.raises(baseline.BaselineError) as err:
        baseline.load(str(bad))
    assert [(p.line, p.pointer, p.kind) for p in err.value.problems] == [
        (4, "/findings/0", "baseline"), (6, "/findings/1", "baseline")]
    assert err.value.problems[0].message == "/findings/0: 'pointer' is a required property"
    proc = cc("lint", str(VLLM), "--baseline", str(bad))
    assert proc.returncode == 2 and proc.stderr.splitlines() == [
        f"{bad}:4: error: /findings/0: 'pointer' is a required property",
        f"{bad}:6: error: /findings/1: 'oops' is not of type 'object'"]
    bad.write_text('{"version": 1, "findings": [}')
    with pytest.raises(baseline.BaselineError) as err:
        baseline.load(str(bad))
    assert err.value.problems[0].message.startswith("cannot read baseline: ") and err.value.problems[0].line == 1


def test_a_written_baseline_is_valid(tmp_path: Path) -> None:
    written = tmp_path / "b.json"
    assert cc("lint", str(VLLM), "--write-baseline", str(written)).returncode == 0
    assert sum(baseline.load(str(written)).values()) == 1


def test_the_cluster_profile_is_validated_by_its_schema_with_lines(tmp_path: Path, loaded: Loaded) -> None:
    """The hand-written isinstance checks let unknown keys (typos) through, silently, and named no line."""
    from compatcheck.io.loader import load_nodes

    profile = tmp_path / "profile.yaml"
    profile.write_text("apiVersion: compatcheck/v1\nkind: ClusterProfile\nnodePools:\n  - name: t4\n"
                       "    gpu: Tesla-T4\n    drivers: \"535.104.05\"\n    sharing: mps\n"
                       "  - name: x\n    gpu: Mystery-GPU\n    taints: [{key: a, effect: Sometimes}]\n")
    cluster, errors = load_nodes(str(profile), loaded.kb, 1 << 20)
    assert cluster is None
    assert [(e.line, e.message) for e in errors] == [
        (6, "ClusterProfile /nodePools/0/drivers: Additional properties are not allowed ('drivers' was unexpected) "
            "(did you mean 'driver'?)"),
        (10, "ClusterProfile /nodePools/1/taints/0/effect: 'Sometimes' is not one of ['NoSchedule', "
             "'PreferNoSchedule', 'NoExecute']")]
    # then what the schema cannot see, also located at its field
    profile.write_text("apiVersion: compatcheck/v1\nkind: ClusterProfile\nnodePools:\n  - name: t4\n"
                       "    gpu: Tesla-T4\n    sharing: mps\n  - name: x\n    gpu: Mystery-GPU\n"
                       "    vgpu: {baselineCuda: twelve}\n")
    cluster, errors = load_nodes(str(profile), loaded.kb, 1 << 20)
    assert cluster is None
    assert [(e.line, e.pointer) for e in errors] == [
        (6, "/nodePools/0/sharing"), (8, "/nodePools/1/gpu"), (9, "/nodePools/1/vgpu/baselineCuda")]
    assert errors[0].message == "ClusterProfile /nodePools/0/sharing: mps needs replicas >= 2"
    assert errors[1].message == ("ClusterProfile /nodePools/1/gpu: GPU 'Mystery-GPU' is not in the gpu-products "
                                 "table; add computeCapability")
    assert "CUDA version 'twelve' is not a version number" in errors[2].message
