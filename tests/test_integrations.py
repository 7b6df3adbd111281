"""Where users run it: CI formats, configuration, suppressions, baselines, Helm input and pre-commit,
all through the real CLI (and the real helm and pre-commit)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from tests.conftest import ROOT, shared

VLLM = ROOT / "examples" / "manifests" / "vllm-bf16-on-t4.yaml"
PROFILE = ROOT / "examples" / "cluster-profile.yaml"


def cc(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None,
       stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "COMPATCHECK_CONFIG")}
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "compatcheck", *args], capture_output=True, text=True, cwd=cwd,
                          env=full_env, input=stdin, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


# ------------------------------------------------------------------------------------------------ formats


def test_sarif_is_valid_2_1_0_with_rule_metadata_and_regions(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema_path = shared("reference/sarif-schema-2.1.0.json")
    proc = cc("lint", "examples/manifests", "--nodes", str(PROFILE), "--format", "sarif")
    assert proc.returncode == 1
    sarif = json.loads(proc.stdout)
    jsonschema.Draft7Validator(json.loads(schema_path.read_text())).validate(sarif)
    run = sarif["runs"][0]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert len(rules) == len(list((ROOT / "rules").glob("*.yaml")))  # every rule, with metadata
    dtype = rules["dtype-unsupported-by-gpu"]
    assert dtype["defaultConfiguration"]["level"] == "error"
    assert dtype["shortDescription"]["text"] and dtype["fullDescription"]["text"]
    assert dtype["helpUri"].endswith("docs/rules.md#dtype-unsupported-by-gpu")
    assert rules["cuda-runtime-unknown"]["defaultConfiguration"]["level"] == "note"
    result = next(r for r in run["results"] if r["ruleId"] == "dtype-unsupported-by-gpu")
    loc = result["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "examples/manifests/vllm-bf16-on-t4.yaml"
    assert loc["region"] == {"startLine": 20, "startColumn": 52}
    assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == "dtype-unsupported-by-gpu"


def test_junit_one_testcase_per_object_per_failing_rule() -> None:
    proc = cc("lint", "examples/manifests", "--nodes", str(PROFILE), "--format", "junit")
    root = ET.fromstring(proc.stdout)
    suite = root.find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    failing = [c for c in cases if c.find("failure") is not None]
    names = {c.get("name") for c in failing}
    assert "dtype-unsupported-by-gpu: Deployment serving/vllm" in names
    assert "paddle-allocator-conflict: Deployment paddle-vcuda" in names
    assert len(failing) == 6 and int(suite.get("failures", "0")) == 6
    passing = [c for c in cases if c.find("failure") is None and c.find("error") is None]
    assert [c.get("name") for c in passing] == ["compatcheck: Job train"]
    assert root.get("tests") == str(len(cases))


def test_github_annotations_chosen_automatically() -> None:
    proc = cc("lint", str(VLLM), env={"GITHUB_ACTIONS": "true"})
    first = proc.stdout.splitlines()[0]
    assert first.startswith(f"::error file={VLLM},line=20,col=52,title=dtype-unsupported-by-gpu::")
    assert "--dtype bfloat16 needs compute capability >= 8.0" in first
    # properties are escaped (',' and ':'), the message keeps its text
    weird = cc("lint", "-", env={"GITHUB_ACTIONS": "true"}, stdin="apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
               "spec:\n  containers:\n  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 0.5}}}\n")
    assert any(ln.startswith("::error file=-,line=6,col=46,title=extended-resource-invalid::")
               for ln in weird.stdout.splitlines()), weird.stdout
    assert any(ln.startswith("::notice file=-,line=6") for ln in weird.stdout.splitlines())


def test_several_formats_in_one_run(tmp_path: Path) -> None:
    sarif, junit = tmp_path / "out.sarif", tmp_path / "out.xml"
    proc = cc("lint", str(VLLM), "--format", "sarif", "-o", str(sarif), "--format", "junit", "-o", str(junit),
              "--format", "text")
    assert proc.returncode == 1
    assert json.loads(sarif.read_text())["version"] == "2.1.0"
    assert ET.fromstring(junit.read_text()).tag == "testsuites"
    assert "dtype-unsupported-by-gpu" in proc.stdout
    assert proc.stdout.rstrip().endswith("0 info\nGPU workloads: 1, checked 1, not checked 0")
    bad = cc("lint", str(VLLM), "--format", "json", "--format", "text")
    assert bad.returncode == 2 and "only one format can go to stdout" in bad.stderr


def test_text_colours_only_when_asked() -> None:
    assert "\x1b[" not in cc("lint", str(VLLM)).stdout
    assert "\x1b[31merror" in cc("lint", str(VLLM), "--color", "always").stdout


# ------------------------------------------------------------------------------------------------ config


def project(tmp_path: Path, config: str, manifest: Path = VLLM) -> Path:
    repo = tmp_path / "repo"
    (repo / "deploy" / "sub").mkdir(parents=True)
    (repo / ".git").mkdir()
    (repo / ".compatcheck.yaml").write_text(config)
    shutil.copy(manifest, repo / "deploy" / manifest.name)
    return repo


def test_config_found_walking_up_with_severity_and_params(tmp_path: Path) -> None:
    repo = project(tmp_path, "apiVersion: compatcheck/v1\nrules:\n  dtype-unsupported-by-gpu: warning\n"
                             "  cuda-runtime-unknown: off\n"
                             "  vgpu-cuda-unsupported: {params: {ceiling: '12.0'}}\n")
    proc = cc("lint", "../vllm-bf16-on-t4.yaml", "--format", "json", cwd=repo / "deploy" / "sub")
    assert proc.returncode == 0, proc.stderr  # a warning does not fail the default threshold
    out = json.loads(proc.stdout)
    assert [f["severity"] for f in out["findings"]] == ["warning"]
    assert cc("lint", "../vllm-bf16-on-t4.yaml", "--fail-on", "warning", cwd=repo / "deploy" / "sub").returncode == 1


@pytest.mark.parametrize(("config", "message", "line"), [
    ("apiVersion: compatcheck/v1\nrules:\n  dtype-unsupported-by-gpu: fatal\n", "is not valid under any", 3),
    ("apiVersion: compatcheck/v1\nfailOn: error\nexemptions:\n  - {namespaces: [a], colour: red}\n",
     "'colour' was unexpected", 4),
    ("apiVersion: compatcheck/v1\nrules:\n  no-such-rule: off\n", "unknown rule 'no-such-rule'", None),
    ("apiVersion: compatcheck/v1\nrules:\n  vgpu-cuda-unsupported: {params: {ceiling: twelve}}\n",
     "rules.vgpu-cuda-unsupported.params", None),
    ("apiVersion: compatcheck/v1\nrules:\n  gpu-below-framework-minimum: {params: {frameworks: [\n"
     "    {name: x, minComputeCapability: '7.0', source: s, image: '(?P<version'}]}}\n",
     "rules.gpu-below-framework-minimum.params: check framework-capability params: error: missing", None),
    ("apiVersion: compatcheck/v1\nrules: [\n", "invalid YAML", 3),
])
def test_invalid_config_is_located(tmp_path: Path, config: str, message: str, line: int | None) -> None:
    repo = project(tmp_path, config)
    proc = cc("lint", "deploy", cwd=repo)
    assert proc.returncode == 2
    assert message in proc.stderr
    if line:
        assert f".compatcheck.yaml:{line}: error:" in proc.stderr
    assert proc.stdout == ""


def test_exemptions_by_namespace_name_and_path(tmp_path: Path) -> None:
    repo = project(tmp_path, "apiVersion: compatcheck/v1\nexemptions:\n"
                             "  - {rules: [dtype-unsupported-by-gpu], namespaces: [serving], names: ['vll*']}\n")
    proc = cc("lint", "deploy", "--format", "json", "--show-suppressed", cwd=repo)
    out = json.loads(proc.stdout)
    assert proc.returncode == 0 and out["findings"] == []
    assert out["suppressed"][0]["by"] == "config"
    repo2 = project(tmp_path / "b", "apiVersion: compatcheck/v1\nexemptions:\n  - {paths: ['deploy/**']}\n")
    assert cc("lint", "deploy", cwd=repo2).returncode == 0
    repo3 = project(tmp_path / "c", "apiVersion: compatcheck/v1\nexemptions:\n  - {paths: ['other/**']}\n")
    assert cc("lint", "deploy", cwd=repo3).returncode == 1


# ------------------------------------------------------------------------------------------------ suppressions

SUPPRESSED = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: vllm
  annotations:
    compatcheck.io/ignore: "gpu-below-framework-minimum=checked on T4 by the platform team"
spec:
  selector: {matchLabels: {app: vllm}}
  template:
    metadata:
      labels: {app: vllm}
      annotations:
        compatcheck.io/ignore.vllm: "dtype-unsupported-by-gpu"
    spec:
      nodeSelector: {nvidia.com/gpu.product: Tesla-P100-PCIE-16GB}
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.6.3
          args: ["--dtype=bfloat16"]
          resources: {limits: {nvidia.com/gpu: 1}}
        - name: sidecar
          image: vllm/vllm-openai:v0.6.3
          args: ["--dtype=bfloat16"]
          resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_annotation_suppressions_container_scope_and_missing_reason(tmp_path: Path) -> None:
    f = tmp_path / "d.yaml"
    f.write_text(SUPPRESSED)
    out = json.loads(cc("lint", str(f), "--format", "json", "--show-suppressed").stdout)
    left = {(x["rule"], x["container"]) for x in out["findings"]}
    assert ("dtype-unsupported-by-gpu", "sidecar") in left        # the container-scoped ignore does not cover it
    assert ("dtype-unsupported-by-gpu", "vllm") not in left
    assert not any(r == "gpu-below-framework-minimum" for r, _c in left)
    missing = [x for x in out["findings"] if x["rule"] == "suppression-without-reason"]
    assert len(missing) == 1 and missing[0]["severity"] == "warning" and missing[0]["line"] == 13
    reasons = {(s["rule"], s["container"]): s["reason"] for s in out["suppressed"]}
    assert reasons[("gpu-below-framework-minimum", "vllm")] == "checked on T4 by the platform team"
    text = cc("lint", str(f), "--show-suppressed").stdout
    assert "by annotation: checked on T4 by the platform team" in text


def test_config_can_refuse_annotation_suppressions(tmp_path: Path) -> None:
    repo = project(tmp_path, "apiVersion: compatcheck/v1\nannotationExemptions: false\n")
    (repo / "deploy" / "d.yaml").write_text(SUPPRESSED)
    out = json.loads(cc("lint", "deploy/d.yaml", "--format", "json", cwd=repo).stdout)
    assert {x["rule"] for x in out["findings"]} >= {"gpu-below-framework-minimum", "dtype-unsupported-by-gpu"}


# ------------------------------------------------------------------------------------------------ baseline


def test_baseline_fails_only_on_new_findings(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    shutil.copytree(ROOT / "examples", repo / "examples")
    wrote = cc("lint", "examples/manifests", "--nodes", "examples/cluster-profile.yaml",
               "--write-baseline", "baseline.json", cwd=repo)
    assert wrote.returncode == 0 and "wrote 6 findings" in wrote.stderr
    again = cc("lint", "examples/manifests", "--nodes", "examples/cluster-profile.yaml", "--baseline",
               "baseline.json", cwd=repo)
    assert again.returncode == 0, again.stdout
    assert "6 suppressed" in again.stdout
    # edits that move lines keep the baseline valid; a new problem is reported alone
    target = repo / "examples" / "manifests" / "vllm-bf16-on-t4.yaml"
    target.write_text("# moved down\n\n" + target.read_text().replace("nvidia.com/gpu: 1", "nvidia.com/gpu: 0.5"))
    new = cc("lint", "examples/manifests", "--nodes", "examples/cluster-profile.yaml", "--baseline",
             "baseline.json", "--format", "json", cwd=repo)
    assert new.returncode == 1
    assert [f["rule"] for f in json.loads(new.stdout)["findings"]] == ["extended-resource-invalid"]
    broken = cc("lint", "examples/manifests", "--baseline", "missing.json", cwd=repo)
    assert broken.returncode == 2 and "cannot read baseline" in broken.stderr


# ------------------------------------------------------------------------------------------------ helm / kustomize


@pytest.fixture(scope="module")
def helm_path(helm_dir: str) -> str:
    return helm_dir


def test_helm_chart_findings_point_at_templates(helm_path: str) -> None:
    env = {"PATH": f"{helm_path}:{os.environ['PATH']}"}
    proc = cc("lint", "--helm-chart", "fixtures/_charts/gpu-app", "-f", "fixtures/_charts/bf16-values.yaml",
              "--set", "gpus=2", "--release", "demo", "--namespace", "ml", "--format", "json", env=env)
    assert proc.returncode == 1, proc.stderr
    (finding,) = json.loads(proc.stdout)["findings"]
    assert finding["rule"] == "dtype-unsupported-by-gpu"
    assert finding["file"] == "fixtures/_charts/gpu-app/templates/deployment.yaml"
    assert finding["line"] == 21
    assert finding["object"]["name"] == "demo-gpu-app"
    clean = cc("lint", "--helm-chart", "fixtures/_charts/gpu-app", "--set", "gpuProduct=NVIDIA-L4", env=env)
    assert clean.returncode == 0, clean.stdout
    piped = subprocess.run([f"{helm_path}/helm", "template", "x", "fixtures/_charts/gpu-app", "-f",
                            "fixtures/_charts/bf16-values.yaml"], capture_output=True, text=True, cwd=ROOT)
    assert cc("lint", "-", stdin=piped.stdout).returncode == 1


SERVING = "fixtures/_charts/serving"


def test_helm_findings_map_to_the_template_line_that_wrote_the_field(helm_path: str) -> None:
    """The template's structure is walked along the finding's pointer: the server's --dtype line, not the warm-up
    init container's identical-looking one (text matching picked the first); items behind {{- if }} and
    {{- range }} matched by content; a value written by toYaml maps to that action, one written by an include
    into the named template's define; one template rendering several
    objects (a range, helm sorting a Service first) maps each into its own document."""
    env = {"PATH": f"{helm_path}:{os.environ['PATH']}"}
    proc = cc("lint", "--helm-chart", SERVING, "--release", "demo", "--set", "dtype=bfloat16", "--set", "debug=true",
              "--set", "extraArgs={--max-model-len=4096}", "--set", "resources.limits.nvidia\\.com/gpu=0.5",
              "--set", "workers.dtype=bfloat16", "--format", "json", env=env)
    assert proc.returncode == 1, proc.stderr
    found = [(f["rule"], f["object"]["name"], f["file"], f["line"], f["column"])
             for f in json.loads(proc.stdout)["findings"]]
    deployment, workers = f"{SERVING}/templates/deployment.yaml", f"{SERVING}/templates/workers.yaml"
    lines = (ROOT / deployment).read_text().splitlines()
    assert lines[37] == "            - --dtype={{ .Values.dtype }}"
    assert lines[39] == "            {{- toYaml .Values.resources | nindent 12 }}"
    assert found == [
        ("dtype-unsupported-by-gpu", "demo-server", deployment, 38, 15),
        ("extended-resource-invalid", "demo-server", deployment, 40, 13),
        # args: ["--dtype={{ ... }}"]: the item inside the flow sequence, not the 'args' key
        ("dtype-unsupported-by-gpu", "demo-worker-a", workers, 19, 18),
        ("dtype-unsupported-by-gpu", "demo-worker-b", workers, 19, 18)]
    # A pod spec written by {{ include "serving.podSpec" . }}: the walk goes on in the named template's define.
    helper = cc("lint", "--helm-chart", SERVING, "--set", "embedder.dtype=bfloat16", "--set", "embedder.model=m",
                "--format", "json", env=env)
    (finding,) = json.loads(helper.stdout)["findings"]
    helpers = f"{SERVING}/templates/_helpers.tpl"
    assert (ROOT / helpers).read_text().splitlines()[16] == "      - --dtype={{ .Values.embedder.dtype }}"
    assert (finding["object"]["name"], finding["file"], finding["line"], finding["column"]) == (
        "release-embedder", helpers, 17, 9)


@pytest.mark.parametrize(("pointer", "line"), [
    ("/spec/template/spec/initContainers/0/args/1", 26),  # the warm-up's --dtype, same text as the server's
    ("/spec/template/spec/containers/0/args/0", 32),  # behind {{- if .Values.debug }}
    ("/spec/template/spec/containers/0/args/1", 35),  # from {{- range .Values.extraArgs }}
    ("/spec/template/spec/containers/0/args/3", 38),
    ("/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu", 40),  # written by toYaml
    ("/spec/template/spec/nodeSelector/nvidia.com~1gpu.product", 19),  # inside {{- with }}
    ("/spec/template/metadata/labels/app.kubernetes.io~1name", 15),  # written by an include
    ("/spec/template/spec/containers/0/image", 29),
    ("/spec/template/spec/containers/0/resources", 39),
    ("/metadata/name", 5),
])
def test_template_walker_follows_the_pointer_through_the_template(helm_path: str, pointer: str, line: int) -> None:
    from compatcheck.core.jsonutil import JsonObject
    from compatcheck.io.templatemap import TemplateWalker

    proc = subprocess.run([f"{helm_path}/helm", "template", "demo", SERVING, "--set", "debug=true", "--set",
                           "extraArgs={--max-model-len=4096}", "--show-only", "templates/deployment.yaml"],
                          capture_output=True, text=True, cwd=ROOT, check=True)
    obj: JsonObject = json.loads(json.dumps(__import__("ruamel.yaml").yaml.YAML(typ="safe").load(proc.stdout)))
    lines = (ROOT / SERVING / "templates" / "deployment.yaml").read_text().splitlines()
    assert TemplateWalker.of(lines, obj).line(pointer, obj) == line


FLOW = "fixtures/_charts/flowstyle"


def test_helm_findings_in_flow_collections_and_after_actions_over_several_lines(helm_path: str) -> None:
    """Flow-style values (args in brackets over two lines, resources in braces) map to the item's or key's own line
    and column; a container written by an include whose dict spans three lines maps into the named template's
    define (before, the walk stopped at the 'args:' key, and gave the sidecar the server's line)."""
    env = {"PATH": f"{helm_path}:{os.environ['PATH']}"}
    proc = cc("lint", "--helm-chart", FLOW, "--set", "dtype=bfloat16", "--set", "gpus=0.5", "--set",
              "sidecarDtype=bfloat16", "--format", "json", env=env)
    assert proc.returncode == 1, proc.stderr
    deployment, helpers = f"{FLOW}/templates/deployment.yaml", f"{FLOW}/templates/_helpers.tpl"
    lines = (ROOT / deployment).read_text().splitlines()
    assert lines[27][28:] == "{{ .Values.dtype | quote }}]"
    assert lines[28][39:].startswith("nvidia.com/gpu: {{ .Values.gpus }}")
    assert (ROOT / helpers).read_text().splitlines()[9][9:] == '"--dtype={{ .dtype }}"]'
    found = json.loads(proc.stdout)["findings"]
    assert [(f["rule"], f["pointer"], f["file"], f["line"], f["column"]) for f in found] == [
        ("dtype-unsupported-by-gpu", "/spec/template/spec/containers/0/args/3", deployment, 28, 29),
        ("dtype-unsupported-by-gpu", "/spec/template/spec/containers/1/args/1", helpers, 10, 10),
        ("extended-resource-invalid", "/spec/template/spec/containers/0/resources/limits/nvidia.com~1gpu",
         deployment, 29, 40)]


@pytest.mark.parametrize(("pointer", "where"), [
    ("/spec/template/spec/containers/0/args/1", (27, 29)),  # "Qwen/Qwen2-7B-Instruct", first line of the flow
    ("/spec/template/spec/containers/0/args/3", (28, 29)),  # the action on the flow's second line
    ("/spec/template/spec/containers/0/resources/limits/cpu", (29, 32)),
    ("/spec/template/spec/containers/0/image", (26, None)),
    ("/spec/template/spec/nodeSelector/nvidia.com~1gpu.product", (18, 22)),  # under a {{- with }} over two lines
    ("/spec/template/spec/tolerations/1/value", (22, 33)),  # a flow sequence of flow mappings over four lines
    ("/spec/template/spec/tolerations/0/effect", (21, 49)),
    ("/spec/selector/matchLabels/app", (11, 19)),
    ("/metadata/labels/app.kubernetes.io~1name", (6, None)),  # written by an include whose dict spans lines
])
def test_template_walker_in_flow_collections(helm_path: str, pointer: str, where: tuple[int, int | None]) -> None:
    from compatcheck.core.jsonutil import JsonObject
    from compatcheck.io.templatemap import TemplateWalker

    proc = subprocess.run([f"{helm_path}/helm", "template", "demo", FLOW, "--show-only", "templates/deployment.yaml"],
                          capture_output=True, text=True, cwd=ROOT, check=True)
    obj: JsonObject = json.loads(json.dumps(__import__("ruamel.yaml").yaml.YAML(typ="safe").load(proc.stdout)))
    path = str(ROOT / FLOW / "templates" / "deployment.yaml")
    lines = (ROOT / FLOW / "templates" / "deployment.yaml").read_text().splitlines()
    assert TemplateWalker.of(lines, obj, path=path).where_column(pointer, obj) == (path, *where)


def test_helm_errors_are_shown_whole(helm_path: str) -> None:
    env = {"PATH": f"{helm_path}:{os.environ['PATH']}"}
    proc = cc("lint", "--helm-chart", SERVING, "--set", "dtype=bf16", "--set", "warmup.dtype=fp8", env=env)
    assert (proc.returncode, proc.stdout) == (2, "")
    lines = proc.stderr.splitlines()
    assert lines[:3] == ["compatcheck: error: helm template failed (exit 1):",
                         "Error: values don't meet the specifications of the schema(s) in the following chart(s):",
                         "serving:"]
    assert sorted(lines[3:]) == [  # helm lists the violations in no fixed order
        "- at '/dtype': value must be one of 'auto', 'half', 'float16', 'bfloat16', 'float32'",
        "- at '/warmup/dtype': value must be one of 'auto', 'half', 'float16', 'bfloat16', 'float32'"]


def test_missing_tools_are_clear_errors() -> None:
    env = {"PATH": "/nonexistent"}
    helm = cc("lint", "--helm-chart", "fixtures/_charts/gpu-app", env=env)
    assert helm.returncode == 2 and "needs `helm` on PATH" in helm.stderr
    kust = cc("lint", "--kustomize", "fixtures", env=env)
    assert kust.returncode == 2 and "needs `kustomize` on PATH" in kust.stderr


# ------------------------------------------------------------------------------------------------ pre-commit


def test_pre_commit_hook_with_the_real_framework(tmp_path: Path) -> None:
    pc = shutil.which("pre-commit") or str(Path(sys.executable).parent / "pre-commit")
    if not Path(pc).exists():
        pytest.skip("pre-commit is not installed")
    repo = tmp_path / "work"
    repo.mkdir()
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    env.pop("GITHUB_ACTIONS", None)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    shutil.copy(VLLM, repo / "bad.yaml")
    shutil.copy(ROOT / "examples" / "manifests" / "training-job.yaml", repo / "good.yaml")
    subprocess.run(["git", "add", "."], cwd=repo, check=True)

    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    if head.returncode == 0 and not dirty:
        # The way users install it: a repo entry pinned to a revision (here: this checkout's HEAD).
        (repo / ".pre-commit-config.yaml").write_text(
            f"repos:\n- repo: {ROOT}\n  rev: {head.stdout.strip()}\n  hooks:\n  - id: compatcheck\n")
        cmd = [pc, "run", "--files"]
    else:  # uncommitted changes in this checkout: try-repo snapshots them
        cmd = [pc, "try-repo", str(ROOT), "compatcheck", "--files"]

    def hook(*files: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cmd, *files], cwd=repo, env=env, capture_output=True, text=True, timeout=900)

    bad = hook("bad.yaml", "good.yaml")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "dtype-unsupported-by-gpu" in bad.stdout and "bad.yaml" in bad.stdout
    t = time.perf_counter()
    good = hook("good.yaml")
    elapsed = time.perf_counter() - t
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Passed" in good.stdout
    print(f"pre-commit hook on 1 file (environment cached): {elapsed:.2f} s")

    # Only Kubernetes manifests: values files and CI/tool YAML are not even passed to the hook, so a values file
    # with a duplicate key (an input error, exit 2, if it were linted) or a pipeline makes no noise.
    noise = {"values.yaml": "resources:\n  limits: {nvidia.com/gpu: 1}\nresources:\n  requests: {cpu: 2}\n",
             "charts/app/values-prod.yaml": "gpus: 2\ngpus: 3\n",
             ".github/workflows/ci.yml": "on: [push]\non: [pull_request]\njobs: {}\n",
             ".gitlab-ci.yml": "lint:\n  script: [compatcheck lint deploy/]\nlint:\n  script: []\n",
             "docker-compose.yml": "services: {}\nservices: {}\n"}
    for name, text in noise.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    quiet = hook(*noise)
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert "(no files to check)Skipped" in quiet.stdout
    mixed = hook(*noise, "good.yaml")
    assert mixed.returncode == 0 and "Passed" in mixed.stdout, mixed.stdout + mixed.stderr
    failing = hook(*noise, "bad.yaml")
    assert failing.returncode == 1
    assert "bad.yaml" in failing.stdout and not any(name in failing.stdout for name in noise)


def test_kustomize_renders_with_kubectl(tmp_path: Path) -> None:
    """--kustomize runs `kubectl kustomize DIR` and lints what it prints. kubectl is not installed here, so a
    stand-in on PATH checks the arguments and prints a rendered manifest, as kubectl would."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(f"#!/bin/sh\n[ \"$1\" = kustomize ] && [ \"$2\" = \"{overlay}\" ] || exit 3\n"
                       f"cat {VLLM}\n")
    kubectl.chmod(0o755)
    proc = cc("lint", "--kustomize", str(overlay), "--format", "json", env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert proc.returncode == 1, proc.stderr
    (finding,) = json.loads(proc.stdout)["findings"]
    assert finding["rule"] == "dtype-unsupported-by-gpu" and finding["file"] == f"{overlay} (kustomize)"
    broken = cc("lint", "--kustomize", str(tmp_path / "other"), env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert broken.returncode == 2 and "kubectl kustomize failed (exit 3)" in broken.stderr


def test_sarif_names_files_relative_to_the_repository_root(tmp_path: Path) -> None:
    """Run from a subdirectory of a repository: every in-repo file is repo-relative under %SRCROOT% (what code
    scanning resolves against its checkout), never a file:// URI; a file outside the repository keeps one."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(shared("reference/sarif-schema-2.1.0.json").read_text())
    repo = tmp_path / "my repo"
    (repo / "deploy" / "serving").mkdir(parents=True)
    (repo / ".git").mkdir()
    shutil.copy(VLLM, repo / "deploy" / "serving" / "vllm.yaml")
    (repo / "deploy" / "broken.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: x\n")
    outside = tmp_path / "outside.yaml"
    shutil.copy(VLLM, outside)
    proc = cc("lint", "serving", "broken.yaml", str(outside), "--nodes", str(PROFILE), "--format", "sarif",
              cwd=repo / "deploy")
    assert proc.returncode == 2, proc.stderr
    sarif = json.loads(proc.stdout)
    jsonschema.Draft7Validator(schema).validate(sarif)
    run = sarif["runs"][0]
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": (repo.as_uri() + "/")}}
    located = {(r["ruleId"], json.dumps(r["locations"][0]["physicalLocation"]["artifactLocation"], sort_keys=True))
               for r in run["results"]}
    assert {("dtype-unsupported-by-gpu", json.dumps({"uri": "deploy/serving/vllm.yaml", "uriBaseId": "%SRCROOT%"},
                                                    sort_keys=True)),
            ("dtype-unsupported-by-gpu", json.dumps({"uri": outside.as_uri()}))} <= located
    (note,) = run["invocations"][0]["toolExecutionNotifications"]
    assert note["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "deploy/broken.yaml",
                                                                           "uriBaseId": "%SRCROOT%"}
    in_repo = [loc for r in run["results"] for loc in r["locations"]
               if not loc["physicalLocation"]["artifactLocation"]["uri"].endswith("outside.yaml")]
    assert in_repo and all(loc["physicalLocation"]["artifactLocation"]["uriBaseId"] == "%SRCROOT%" and
                           not loc["physicalLocation"]["artifactLocation"]["uri"].startswith("file:")
                           for loc in in_repo)
