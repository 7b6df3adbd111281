"""The CLI run as a user runs it: subprocesses on real files, exit codes, output contracts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, image_table_as_of

EXAMPLES = ROOT / "examples"


def run(*args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.run([sys.executable, "-m", "compatcheck", *args], input=stdin, capture_output=True, text=True,
                          cwd=cwd or ROOT, env=env, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def write(tmp: Path, name: str, text: str) -> Path:
    p = tmp / name
    p.write_text(text)
    return p


def test_lint_examples_json_contract() -> None:
    proc = run("lint", "examples/manifests", "--nodes", "examples/cluster-profile.yaml", "--format", "json")
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    assert out["version"] == 1
    assert out["summary"]["files"] == 3 and out["summary"]["objects"] == 3
    by_rule = {f["rule"]: f for f in out["findings"]}
    dtype = by_rule["dtype-unsupported-by-gpu"]
    assert dtype["file"] == "examples/manifests/vllm-bf16-on-t4.yaml"
    assert (dtype["line"], dtype["column"]) == (20, 52)
    assert dtype["pointer"] == "/spec/template/spec/containers/0/args/1"
    assert dtype["object"] == {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "serving", "name": "vllm"}
    assert dtype["container"] == "vllm"
    assert dtype["fix"] == {"description": "use --dtype=half", "applicability": "unsafe",
                            "patch": [{"op": "replace", "path": "/spec/template/spec/containers/0/args/1",
                                       "value": "--dtype=half"}]}
    paddle = by_rule["paddle-allocator-conflict"]
    assert paddle["fix"]["patch"] == [{"op": "add", "path": "/spec/template/spec/containers/0/env",
                                       "value": [{"name": "FLAGS_allocator_strategy", "value": "naive_best_fit"}]}]
    assert "eligible nodes run 470.82.01 (CUDA 11.4)" in by_rule["cuda-driver-too-old"]["message"]
    # The default driver policy (driver >= runtime): vLLM 0.9.2's CUDA 12.8 on the R535 T4s is an error
    assert set(by_rule) >= {"vgpu-baseline-too-old", "vgpu-major-mismatch", "cuda-driver-behind-runtime"}
    assert "cuda-driver-needs-forward-compat" not in by_rule
    assert not any(f["file"].endswith("training-job.yaml") for f in out["findings"])


@pytest.mark.parametrize(("policy", "rule", "severity"), [
    ("{}", "cuda-driver-behind-runtime", "error"),
    ("{forwardCompatibility: true}", "cuda-driver-needs-forward-compat", "warning"),
    ("{minorVersionCompatibility: true}", "cuda-driver-needs-minor-version-compat", "warning"),
    # both declared: forward compatibility (the image's cuda-compat libraries list R535) is what runs it
    ("{forwardCompatibility: true, minorVersionCompatibility: true}", "cuda-driver-needs-forward-compat", "warning"),
])
def test_the_configs_driver_policy_decides_the_driver_rule(tmp_path: Path, policy: str, rule: str,
                                                          severity: str) -> None:
    config = write(tmp_path, "c.yaml", f"apiVersion: compatcheck/v1\ndriverPolicy: {policy}\n")
    proc = run("lint", "examples/manifests/vllm-bf16-on-t4.yaml", "--nodes", "examples/cluster-profile.yaml",
               "--config", str(config), "--format", "json")
    drivers = [(f["rule"], f["severity"], f["line"]) for f in json.loads(proc.stdout)["findings"]
               if f["rule"].startswith("cuda-driver-")]
    assert drivers == [(rule, severity, 19)]
    assert proc.returncode == 1  # dtype-unsupported-by-gpu stays an error


def test_an_invalid_driver_policy_is_a_located_config_error(tmp_path: Path) -> None:
    config = write(tmp_path, "c.yaml", "apiVersion: compatcheck/v1\ndriverPolicy:\n  forwardCompatibility: yes-ish\n")
    proc = run("lint", "examples/manifests/training-job.yaml", "--config", str(config))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[0] == (
        f"{config}:3: error: /driverPolicy/forwardCompatibility: 'yes-ish' is not of type 'boolean'")


def test_clean_file_exits_zero_and_text_summary() -> None:
    proc = run("lint", "examples/manifests/training-job.yaml", "--nodes", "examples/cluster-profile.yaml")
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.strip().endswith("1 files, 1 objects: 0 errors, 0 warnings, 0 info\n"
                                        "GPU workloads: 1, checked 1, not checked 0")


def test_fail_on_threshold(tmp_path: Path) -> None:
    f = write(tmp_path, "p.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
                                  "  - name: c\n    image: corp/app:1\n    resources: {limits: {nvidia.com/gpu: 1}}\n")
    assert run("lint", str(f)).returncode == 0  # only an info finding
    assert run("lint", str(f), "--fail-on", "info").returncode == 1


def test_stdin(tmp_path: Path) -> None:
    text = (EXAMPLES / "manifests" / "vllm-bf16-on-t4.yaml").read_text()
    proc = run("lint", "-", "--format", "json", stdin=text)
    assert proc.returncode == 1
    assert {f["rule"] for f in json.loads(proc.stdout)["findings"]} == {"dtype-unsupported-by-gpu"}


@pytest.mark.parametrize(("name", "content", "message", "line"), [
    ("broken.yaml", "apiVersion: v1\nkind: Pod\nspec: {containers: [\n", "invalid YAML", 4),
    ("nullkey.yaml", "apiVersion: v1\nkind: Pod\n~: x\n", "a null mapping key (kubectl cannot convert it to JSON)", 3),
    ("tabs.json", "{\n\t\"kind\": \"Pod\",\n\t\"apiVersion\": \"v1\",,\n}", "invalid JSON", 3),
    ("bin.yaml", b"\x00\x01\x02binary".decode("latin-1"), "binary file", None),
    ("version.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations:\n"
                     "    compatcheck.io/cuda-runtime: \"12.x\"\nspec:\n  containers:\n  - name: c\n    image: x\n"
                     "    resources: {limits: {nvidia.com/gpu: 1}}\n", "'12.x' is not a version number", 6),
    ("latest.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n"
                    "    image: x\n    env: [{name: CUDA_VERSION, value: latest}]\n"
                    "    resources: {limits: {nvidia.com/gpu: 1}}\n", "'latest' is not a version number", 8),
])
def test_bad_input_is_one_line_with_file_and_line(tmp_path: Path, name: str, content: str, message: str,
                                                  line: int | None) -> None:
    bad = tmp_path / name
    bad.write_bytes(content.encode("latin-1") if "\x00" in content else content.encode())
    good = EXAMPLES / "manifests" / "vllm-bf16-on-t4.yaml"
    proc = run("lint", str(bad), str(good), "--format", "json")
    assert proc.returncode == 2
    out = json.loads(proc.stdout)
    assert len(out["errors"]) == 1
    err = out["errors"][0]
    assert err["file"] == str(bad) and message in err["message"] and "\n" not in err["message"]
    assert err.get("line") == line
    assert any(f["rule"] == "dtype-unsupported-by-gpu" for f in out["findings"]), "other files still linted"
    text = run("lint", str(bad))
    first = text.stdout.splitlines()[0]
    assert first.startswith(f"{bad}:{line}: error:" if line else f"{bad}: error:")


def test_oversized_file(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with big.open("w") as fh:
        chunk = "# " + "x" * 1000 + "\n"
        for _ in range(51_000):
            fh.write(chunk)
    proc = run("lint", str(big))
    assert proc.returncode == 2
    assert "over the 16 MiB limit" in proc.stdout


def test_absurd_numbers_and_wrong_types_do_not_crash(tmp_path: Path) -> None:
    f = write(tmp_path, "odd.yaml", """
apiVersion: v1
kind: Pod
metadata: {name: odd, annotations: [not, a, map]}
spec:
  nodeSelector: {cuda-major-version: 99999999999999999999}
  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "oops"}}}
  tolerations: 7
  containers:
  - name: a
    image: nvidia/cuda:9999.1-base
    resources: {limits: {nvidia.com/gpu: 1e400}, requests: "x"}
  - "not a container"
  - name: b
    env: {FLAGS: 1}
    resources: {limits: {nvidia.com/gpu: 99999999999999999999999}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
spec: {template: [1, 2]}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: c}
spec: {jobTemplate: {spec: null}}
""")
    proc = run("lint", str(f), "--nodes", "examples/cluster-profile.yaml", "--format", "json")
    assert proc.returncode in (0, 1, 2)
    out = json.loads(proc.stdout)
    assert not any("internal error" in e["message"] for e in out["errors"]), out["errors"]


def test_unrendered_helm_template_is_skipped_with_note(tmp_path: Path) -> None:
    f = write(tmp_path, "deployment.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n"
                                           "  name: {{ include \"x.fullname\" . }}\n  {{- with .Values.labels }}\n")
    proc = run("lint", str(f), "--format", "json")
    assert proc.returncode == 0
    out = json.loads(proc.stdout)
    assert out["errors"] == [] and out["skipped"][0]["file"] == str(f)
    assert "unrendered template" in out["skipped"][0]["reason"]


def test_non_kubernetes_yaml_is_skipped_quietly(tmp_path: Path) -> None:
    f = write(tmp_path, "values.yaml", "replicaCount: 2\nimage: {repository: nginx}\n---\n- a\n- b\n")
    proc = run("lint", str(f), "--format", "json")
    assert proc.returncode == 0
    out = json.loads(proc.stdout)
    assert out["findings"] == [] and out["errors"] == [] and out["summary"]["objects"] == 0


def test_kind_list_and_multi_document(tmp_path: Path) -> None:
    pod = ("{apiVersion: v1, kind: Pod, metadata: {name: p%d}, spec: {containers: [{name: c, image: "
           "'nvidia/cuda:12.4.1-base-ubuntu22.04', resources: {limits: {nvidia.com/gpu: 0.5}}}]}}")
    f = write(tmp_path, "list.yaml", f"---\n---\napiVersion: v1\nkind: List\nitems:\n- {pod % 1}\n- {pod % 2}\n"
                                     f"---\n{pod % 3}\n")
    out = json.loads(run("lint", str(f), "--format", "json").stdout)
    found = [(x["object"]["name"], x["line"], x["pointer"]) for x in out["findings"]
             if x["rule"] == "extended-resource-invalid"]
    assert [n for n, _l, _p in found] == ["p1", "p2", "p3"]
    assert found[0][1] == 6 and found[1][1] == 7 and found[2][1] == 9
    assert found[0][2] == "/spec/containers/0/resources/limits/nvidia.com~1gpu"


def test_versions_command() -> None:
    proc = run("versions", "--driver", "535.104.05", "--runtime", "12.4", "--format", "json")
    assert proc.returncode == 1  # the default driver policy: driver >= runtime
    out = json.loads(proc.stdout)
    assert out["driverCuda"] == "12.2" and out["verdict"] == "minor-version-compatibility"
    assert out["driver"] == "535.104.05" and out["runtime"] == "12.4" and out["reasons"]
    assert (out["allowedByPolicy"], out["policy"]) == (False, (
        "an error: the platform requires a driver at least as new as the runtime, and "
        "driverPolicy.minorVersionCompatibility is not declared (cuda-driver-behind-runtime)"))
    assert json.loads(run("versions", "--driver", "565.57.01", "--runtime", "12.7", "--format", "json")
                      .stdout)["verdict"] == "compatible"
    bad = run("versions", "--driver", "latest", "--runtime", "12.4")
    assert bad.returncode == 2 and "not a version number" in bad.stderr
    assert run("versions", "--driver", "470.82.01", "--runtime", "12.0").returncode == 1


def test_versions_follows_the_declared_minor_version_policy(tmp_path: Path) -> None:
    config = write(tmp_path, "c.yaml", "apiVersion: compatcheck/v1\ndriverPolicy: {minorVersionCompatibility: true}\n")
    proc = run("versions", "--driver", "535.104.05", "--runtime", "12.4", "--config", str(config))
    assert proc.returncode == 0
    assert proc.stdout.splitlines()[0] == "driver 535.104.05 (CUDA 12.2) + runtime 12.4: minor-version-compatibility"
    assert proc.stdout.splitlines()[-1] == (
        "  policy: allowed with a warning: driverPolicy.minorVersionCompatibility declares minor-version "
        "compatibility (cuda-driver-needs-minor-version-compat)")
    across = run("versions", "--driver", "470.82.01", "--runtime", "12.0", "--config", str(config))
    assert across.returncode == 1 and across.stdout.splitlines()[-1] == (
        "  policy: an error: the driver cannot run the runtime (cuda-driver-too-old), unless an image's declared "
        "forward compatibility bridges it")


def test_rules_list_and_explain_pipe() -> None:
    listing = run("rules", "list")
    assert listing.returncode == 0 and "cuda-driver-too-old" in listing.stdout
    one = "\n".join(ln for ln in listing.stdout.splitlines() if ln.startswith("cuda-driver-too-old"))
    explained = run("rules", "explain", stdin=one)
    assert explained.returncode == 0 and "forward compatibility" in explained.stdout.lower()
    assert run("rules", "explain", "no-such-rule").returncode == 2


def test_generated_rule_docs_have_not_drifted() -> None:
    proc = run("rules", "list", "--format", "markdown", "--examples", "fixtures")
    assert proc.returncode == 0
    committed = (ROOT / "docs" / "rules.md").read_text()
    assert proc.stdout == committed, ("docs/rules.md is stale: compatcheck rules list --format markdown "
                                      "--examples fixtures > docs/rules.md")


def test_invalid_admin_rules_stop_with_every_error_listed(tmp_path: Path) -> None:
    d = tmp_path / "rules.d"
    (d / "data").mkdir(parents=True)
    write(d, "my-rule.yaml", "apiVersion: compatcheck/v1\nid: my-rule\nsummary: A rule with a typo in it here.\n"
                             "severity: fatal\ncheck: {type: cuda-driver-too-old}\n"
                             "docs: {rationale: 'long enough rationale text', remediation: Fix it., references: ['x://y']}\n"
                             "colour: red\n")
    write(d, "other.yaml", "apiVersion: compatcheck/v1\nid: not-other\nsummary: Mismatched id and file name.\n"
                           "severity: error\ncheck: {type: no-such-type}\n"
                           "docs: {rationale: 'long enough rationale text', remediation: Fix it., references: ['x://y']}\n")
    write(d, "cuda-driver-too-old.yaml", (ROOT / "rules" / "cuda-driver-too-old.yaml").read_text())
    write(d / "data", "images.yaml", "apiVersion: compatcheck/v1\ntable: image-patterns\nsources: {ME: internal}\n"
                                     "rows:\n  - {name: corp, pattern: '^corp/', source: NOPE}\n")
    proc = run("lint", "examples/manifests", "--rules-dir", str(d))
    assert proc.returncode == 2
    err = proc.stderr
    assert f"{d}/my-rule.yaml:7: error:" in err and "colour" in err
    assert "fatal" in err
    assert "no such check type" in err
    assert "already defined" in err and "overrides" in err
    assert "neither a key of sources nor a URL" in err
    assert proc.stdout == ""


def test_admin_image_pattern_without_python(tmp_path: Path) -> None:
    d = tmp_path / "rules.d"
    (d / "data").mkdir(parents=True)
    write(d / "data", "images.yaml", "apiVersion: compatcheck/v1\ntable: image-patterns\n"
                                     "sources: {INTERNAL: 'https://wiki.example.com/images'}\nrows:\n"
                                     "  - {name: corp, pattern: '^registry.corp/ml/torch:cu(?P<cuda>\\d+\\.\\d+)-', "
                                     "source: INTERNAL}\n")
    pod = write(tmp_path, "p.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
                                    "  - name: c\n    image: registry.corp/ml/torch:cu12.8-2\n"
                                    "    resources: {limits: {nvidia.com/gpu: 1}}\n")
    proc = run("lint", str(pod), "--rules-dir", str(d), "--nodes", "examples/cluster-profile.yaml",
               "--format", "json")
    rules = {f["rule"] for f in json.loads(proc.stdout)["findings"]}
    assert "cuda-driver-behind-runtime" in rules and "cuda-runtime-unknown" not in rules


def test_rules_validate() -> None:
    proc = run("rules", "validate")
    assert proc.returncode == 0 and f"{len(list((ROOT / 'rules').glob('*.yaml')))} rules" in proc.stdout


@pytest.mark.parametrize(("module", "args"), [
    ("cryptography", ["cert", "generate", "--out-dir", "OUT", "--dns", "x"]),
    ("prometheus_client", ["review", "../shared/fixtures/admission/0002-Pod-CREATE.json"]),
    ("aiohttp", ["webhook", "serve", "--cert-file", "x", "--key-file", "y"]),
])
def test_core_install_without_webhook_extra_says_what_to_install(tmp_path: Path, module: str,
                                                                 args: list[str]) -> None:
    args = [a.replace("OUT", str(tmp_path / "c")) for a in args]
    code = (f"import sys; sys.modules[{module!r}] = None\n"
            "from compatcheck.cli.entry import main\nsys.exit(main(sys.argv[1:]))")
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2
    assert "pip install 'compatcheck[webhook]'" in proc.stderr


def test_readme_opens_with_the_two_commands_and_ci_runs_the_second() -> None:
    readme = (ROOT / "README.md").read_text().splitlines()
    block = readme[readme.index("```sh") + 1: readme.index("```sh") + 3]
    assert block[0].endswith("compatcheck lint examples/manifests --nodes examples/cluster-profile.yaml")
    test_command = ("python3 -m venv .venv && . .venv/bin/activate"
                    " && pip install -e '.[test]' && python -m pytest -q")
    assert block[1] == test_command
    assert block[1] in (ROOT / ".ci" / "run").read_text().splitlines()


def test_images_explain_says_each_fact_and_its_source() -> None:
    proc = run("images", "explain", "vllm/vllm-openai:v0.9.0", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["profile"], out["cuda"], out["baseCuda"], out["framework"], out["frameworkVersion"]) == (
        "vllm-openai", "12.8.1", "12.8.1", "vllm", "0.9.0")
    torch = next(b for b in out["binaries"] if b["component"].startswith("torch"))
    assert torch["component"] == "torch 2.7.0+cu128" and "7.0" not in torch["sass"] and torch["source"]
    assert out["forwardCompat"]["branches"] == [470, 535, 550, 560, 565]
    floors = {f["feature"]: f for f in out["floors"]}
    assert floors["quantization:fp8"]["minComputeCapability"] == "8.0"
    assert floors["kv-cache-dtype:fp8"]["minComputeCapability"] is None
    text = run("images", "explain", "vllm/vllm-openai:v0.9.0").stdout
    assert "  CUDA runtime: 12.8.1 — from image vllm/vllm-openai:v0.9.0" in text
    assert "    torch 2.7.0+cu128: sm_75, sm_80, sm_86, sm_90, sm_100, sm_120 (" in text


NEWEST = ("assumed from v0.33.0, the newest vllm-openai release compatcheck knows, table dated "
          f"{image_table_as_of()}")


@pytest.mark.parametrize(("image", "resolution", "assumed", "line"), [
    ("vllm/vllm-openai:v0.10.1", "tag", None, "  release: the tag's own row of the image table"),
    ("vllm/vllm-openai:v0.99.0", "newer-than-table", NEWEST,
     "  release: the tag is newer than every row of the image table: decided from the newest row; " + NEWEST),
    ("vllm/vllm-openai:latest", "floating-newest", f"a floating tag, {NEWEST}",
     "  release: a floating tag: decided from the newest row of the image table; a floating tag, " + NEWEST),
    ("vllm/vllm-openai:nightly", "floating-newest", f"a floating tag, {NEWEST}",
     "  release: a floating tag: decided from the newest row of the image table; a floating tag, " + NEWEST),
])
def test_images_explain_shows_which_path_decided_the_release(image: str, resolution: str, assumed: str | None,
                                                             line: str) -> None:
    out = json.loads(run("images", "explain", image, "--format", "json").stdout)
    assert (out["resolution"], out["assumed"], out["statedVersion"]) == (resolution, assumed, None)
    assert run("images", "explain", image).stdout.splitlines()[2] == line


@pytest.mark.parametrize(("setting", "severity"), [("rule", "error"), ("warning", "warning"), ("info", "info")])
def test_the_severity_of_assumed_findings_is_a_policy_setting(tmp_path: Path, setting: str, severity: str) -> None:
    config = write(tmp_path, "c.yaml", f"apiVersion: compatcheck/v1\ndriverPolicy: {{assumedSeverity: {setting}}}\n")
    proc = run("lint", "fixtures/cuda-driver-too-old/fail.newer-than-the-table.yaml", "fixtures/cuda-driver-too-old/"
               "fail.nvidia-cuda.yaml", "--nodes", "fixtures/cuda-driver-too-old/nodes.yaml", "--config", str(config),
               "--format", "json")
    found = [(f["file"].rsplit("/", 1)[1], f["rule"], f["severity"]) for f in json.loads(proc.stdout)["findings"]]
    assert found == [("fail.newer-than-the-table.yaml", "cuda-driver-too-old", severity),
                     ("fail.nvidia-cuda.yaml", "cuda-driver-too-old", "error")]  # not assumed: the rule's own


def test_images_explain_an_unknown_image_exits_1_and_admin_rows_come_first(tmp_path: Path) -> None:
    unknown = run("images", "explain", "registry.corp/ml/serve:7", "--format", "json")
    assert unknown.returncode == 1 and json.loads(unknown.stdout)["known"] is False
    d = tmp_path / "rules.d"
    (d / "data").mkdir(parents=True)
    write(d / "data", "images.yaml", "apiVersion: compatcheck/v1\ntable: image-profiles\n"
                                     "sources: {WIKI: 'https://wiki.example.com/images'}\nrows:\n"
                                     "  - {name: corp, pattern: '^registry\\.corp/ml/serve:', source: WIKI,\n"
                                     "     versions: [{cuda: '12.4', base: '12.4.1', source: WIKI}]}\n")
    known = run("images", "explain", "registry.corp/ml/serve:7", "--rules-dir", str(d), "--format", "json")
    assert known.returncode == 0, known.stderr
    out = json.loads(known.stdout)
    assert (out["profile"], out["cuda"], out["sources"]) == ("corp", "12.4", ["WIKI"])
    assert out["forwardCompat"]["branches"] == [470, 525, 535]  # the nvidia/cuda 12.4 base's alternatives
