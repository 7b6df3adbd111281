"""Reading input the way Kubernetes does (issue #15): YAML 1.1 scalars and duplicate keys as kubectl reads them,
non-Kubernetes JSON, templates and Helm values files skipped, --exclude / exclude: with .gitignore semantics,
config paths relative to the config file, and documents without pod specs skipped before the full parse. All run
through the CLI, as a user runs it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from compatcheck.io.manifests import parse_text, resolve_plain
from tests.test_cli import run, write

GPU_POD = """apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    image: vllm/vllm-openai:v0.9.2
    args: [--dtype=bfloat16]
    resources: {limits: {nvidia.com/gpu: 1}}
"""
T4_NODES = Path(__file__).resolve().parents[1] / "examples" / "cluster-profile.yaml"


def lint_json(*args: str, cwd: Path | None = None) -> tuple[int, dict]:
    proc = run("lint", *args, "--format", "json", cwd=cwd)
    return proc.returncode, json.loads(proc.stdout)


def findings(out: dict) -> list[tuple[str, str, int]]:
    return sorted((Path(f["file"]).name, f["rule"], f["line"]) for f in out["findings"])


# ------------------------------------------------------------------------------------------ YAML 1.1 scalars

# (plain scalar, what kubectl makes of it): go-yaml v2's resolve table, spelling by spelling.
KUBECTL_SCALARS = [
    ("on", True), ("On", True), ("ON", True), ("oN", "oN"), ("yes", True), ("Yes", True), ("YES", True),
    ("yEs", "yEs"), ("y", True), ("Y", True), ("true", True), ("True", True), ("TRUE", True), ("tRUE", "tRUE"),
    ("off", False), ("Off", False), ("OFF", False), ("no", False), ("No", False), ("NO", False), ("n", False),
    ("N", False), ("false", False), ("~", None), ("null", None), ("NULL", None), ("nULL", "nULL"),
    ("0755", 493), ("0o17", 15), ("0x1F", 31), ("0b101", 5), ("-0x1F", -31), ("1_000", 1000), ("08", 8.0),
    ("1:20", "1:20"), ("2001-12-14", "2001-12-14"), ("12.4", 12.4), ("535.104.05", "535.104.05"), (".5", 0.5),
    ("1e3", 1000.0), ("+1", 1), ("-", "-"), ("0.5.1", "0.5.1"),
    # Past int64 and uint64 a digit run is a float (kubectl sends 1e+32, the API server stores 100e30); past the
    # largest float64 strconv.ParseFloat fails and the scalar stays a string (the API server then reads the digits).
    ("1" + "0" * 32, 1e32), ("1e308", 1e308), ("1e309", "1e309"), ("-1e400", "-1e400"), ("1" * 400, "1" * 400),
    ("1e-400", 0.0),
]


@pytest.mark.parametrize(("text", "value"), KUBECTL_SCALARS, ids=[t for t, _ in KUBECTL_SCALARS])
def test_plain_scalars_resolve_as_go_yaml_v2(text: str, value: object) -> None:
    got = resolve_plain(text)
    assert got == value and type(got) is type(value)


def test_gpu_on_in_a_node_selector_is_reported_as_the_api_server_rejects_it(tmp_path: Path) -> None:
    f = write(tmp_path, "p.yaml", GPU_POD.replace("spec:\n", "spec:\n  nodeSelector: {gpu: on}\n", 1))
    code, out = lint_json(str(f))
    assert code == 1
    (bad,) = [x for x in out["findings"] if x["rule"] == "yaml-non-string-value"]
    assert (bad["pointer"], bad["line"], bad["severity"]) == ("/spec/nodeSelector/gpu", 5, "error")
    assert bad["message"].startswith("nodeSelector 'gpu' is the boolean true")


# ------------------------------------------------------------------------------------------ duplicate keys


def test_a_duplicate_key_is_a_warning_with_both_lines_and_the_last_value_is_linted(tmp_path: Path) -> None:
    # The args written last say bfloat16 on a T4: the object is linted as the API server keeps it.
    f = write(tmp_path, "dup.yaml", GPU_POD.replace("    args: [--dtype=bfloat16]\n",
                                                    "    args: [--dtype=half]\n    args: [--dtype=bfloat16]\n"))
    code, out = lint_json(str(f), "--nodes", str(T4_NODES))
    assert code == 1 and out["errors"] == []
    (dup,) = [x for x in out["findings"] if x["rule"] == "yaml-duplicate-key"]
    assert (dup["pointer"], dup["line"], dup["severity"]) == ("/spec/containers/0/args", 9, "warning")
    assert dup["message"].startswith("key 'args' is written twice in one mapping (lines 8 and 9)")
    assert any(x["rule"] == "dtype-unsupported-by-gpu" and x["line"] == 9 for x in out["findings"])


def test_a_duplicate_key_in_a_list_item_names_the_item() -> None:
    text = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: a, name: b}\n"
    (doc,) = parse_text("l.yaml", text).documents
    assert [(d.pointer, d.first_line, d.line) for d in doc.duplicates] == [("/items/0/metadata/name", 6, 6)]
    assert doc.data["items"][0]["metadata"]["name"] == "b"


def test_duplicate_keys_stay_errors_in_compatchecks_own_files(tmp_path: Path) -> None:
    cfg = write(tmp_path, ".compatcheck.yaml", "apiVersion: compatcheck/v1\nfailOn: error\nfailOn: warning\n")
    proc = run("lint", "--config", str(cfg), str(write(tmp_path, "p.yaml", GPU_POD)))
    assert proc.returncode == 2
    assert "duplicate key 'failOn' (first defined on line 2)" in proc.stderr


# ------------------------------------------------------------------------------------------ what is skipped


def test_non_kubernetes_json_is_skipped_quietly_in_a_walk(tmp_path: Path) -> None:
    write(tmp_path, "tsconfig.json", '{\n  // comments are not JSON\n  "compilerOptions": {"strict": true,},\n}\n')
    write(tmp_path, "dashboard.json", json.dumps({"title": "GPUs", "panels": [{"type": "graph"}]}))
    container = {"name": "c", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
                 "resources": {"limits": {"nvidia.com/gpu": "0.5"}}}
    write(tmp_path, "pod.json", json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                            "spec": {"containers": [container]}}))
    code, out = lint_json(str(tmp_path))
    assert code == 1 and out["errors"] == [] and out["skipped"] == []
    assert out["summary"]["files"] == 3 and out["summary"]["objects"] == 1
    assert {x["rule"] for x in out["findings"]} == {"extended-resource-invalid"}


def test_broken_json_that_claims_to_be_kubernetes_is_still_an_error(tmp_path: Path) -> None:
    f = write(tmp_path, "pod.json", '{"apiVersion": "v1", "kind": "Pod",,}')
    code, out = lint_json(str(tmp_path))
    assert code == 2 and [(e["file"], e["line"]) for e in out["errors"]] == [(str(f), 1)]


def test_envsubst_and_go_templates_outside_a_chart_are_skipped_with_a_note(tmp_path: Path) -> None:
    write(tmp_path, "env.yaml", GPU_POD.replace("nvidia.com/gpu: 1", "nvidia.com/gpu: ${GPUS}"))
    write(tmp_path, "tag.yaml", GPU_POD.replace("v0.9.2", "${TAG}"))
    write(tmp_path, "go.yaml", GPU_POD.replace("nvidia.com/gpu: 1", 'nvidia.com/gpu: "{{ .gpus }}"'))
    # A shell script in args is no template: ${HOME} is the shell's.
    write(tmp_path, "shell.yaml", GPU_POD.replace("args: [--dtype=bfloat16]",
                                                  'args: ["sh", "-c", "cd ${HOME} && run"]'))
    _code, out = lint_json(str(tmp_path))
    assert out["errors"] == []
    assert sorted((Path(s["file"]).name, s["line"]) for s in out["skipped"]) == [
        ("env.yaml", 9), ("go.yaml", 1), ("tag.yaml", 1)]  # env.yaml: ${GPUS} in a flow mapping is no YAML
    assert all("looks like an unrendered template" in s["reason"] for s in out["skipped"])
    assert out["summary"]["objects"] == 1 and not any(x["rule"] == "extended-resource-invalid" for x in out["findings"])


def test_helm_values_files_are_skipped_with_a_note(tmp_path: Path) -> None:
    write(tmp_path, "values.yaml", "resources:\n  limits:\n    nvidia.com/gpu: '{{ .Values.gpus }}'\n"
                                   "image: {tag: on}\n")
    write(tmp_path, "values-prod.yml", "replicaCount: 2\n")
    write(tmp_path, "values-pod.yaml", GPU_POD)  # named like one, but a manifest: linted
    _code, out = lint_json(str(tmp_path))
    assert out["errors"] == []
    assert sorted(Path(s["file"]).name for s in out["skipped"]) == ["values-prod.yml", "values.yaml"]
    assert all(s["reason"].startswith("a Helm values file, not a manifest") for s in out["skipped"])
    assert out["summary"]["objects"] == 1


def test_prefixed_helm_values_files_are_skipped_with_a_note(tmp_path: Path) -> None:
    # g5-values.yaml (Slinky's), gpu_values.yml, a flattened charts__app__values.yaml; "myvalues.yaml" is no such name.
    for name in ("g5-values.yaml", "gpu_values.yml", "charts__app__values.yaml", "myvalues.yaml"):
        write(tmp_path, name, "nodeset:\n  resources:\n    limits:\n      nvidia.com/gpu: 1\n")
    _code, out = lint_json(str(tmp_path))
    assert out["errors"] == []
    assert sorted((Path(s["file"]).name, s["reason"]) for s in out["skipped"]) == [
        (name, f"a Helm values file, not a manifest: skipped (lint the chart with --helm-chart DIR -f {name})")
        for name in ("charts__app__values.yaml", "g5-values.yaml", "gpu_values.yml")]


def test_json_with_comments_before_the_brace_is_read_as_json(tmp_path: Path) -> None:
    # A devcontainer.json headed by '//' lines, a dashboard headed by a '/* ... */' licence (CRLF): no Kubernetes
    # object, skipped quietly as other non-Kubernetes JSON (read as YAML, the first was an error, exit 2).
    write(tmp_path, "devcontainer.json", '// see https://containers.dev\n{\n  "runArgs": ["--gpus=all"], // all\n}\n')
    (tmp_path / "dashboard.json").write_bytes(b'/*\r\n# Licence\r\n*/\r\n{"displayName": "${__interval}"}\r\n')
    code, out = lint_json(str(tmp_path))
    assert (code, out["errors"], out["skipped"], out["summary"]["objects"]) == (0, [], [], 0)
    # One that claims to be a Kubernetes object is still an error, on its line.
    write(tmp_path, "pod.json", '// a pod\n{"apiVersion": "v1", "kind": "Pod", // x\n "spec": {}}\n')
    code, out = lint_json(str(tmp_path / "pod.json"))
    assert code == 2 and [(Path(e["file"]).name, e["message"].split(":")[0]) for e in out["errors"]] == [
        ("pod.json", "invalid JSON")]


# ------------------------------------------------------------------------------------------ exclusions


def _tree(tmp_path: Path) -> Path:
    bad = GPU_POD.replace("nvidia.com/gpu: 1", "nvidia.com/gpu: 0.5")
    for rel in ("deploy/a.yaml", "deploy/vendor/b.yaml", "charts/x/templates/c.yaml", "deploy/keep/vendor.yaml",
                "legacy/d.yaml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(bad)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    return tmp_path


def _files(out: dict, root: Path) -> list[str]:
    return sorted({str((root / f["file"]).resolve().relative_to(root.resolve())) for f in out["findings"]})


def test_exclude_has_gitignore_semantics(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    # vendor/ matches a directory at any depth (not the file vendor.yaml); /legacy is anchored; ** spans dirs.
    _code, out = lint_json(".", "--exclude", "vendor/", "--exclude", "/legacy", "--exclude", "charts/**/templates",
                           cwd=root)
    assert _files(out, root) == ["deploy/a.yaml", "deploy/keep/vendor.yaml"]
    _code, out = lint_json(".", "--exclude", "*.yaml", "--exclude", "!a.yaml", cwd=root)
    assert _files(out, root) == ["deploy/a.yaml"]
    # Files named on the command line are excluded too (pre-commit passes them by name).
    _code, out = lint_json("deploy/vendor/b.yaml", "deploy/a.yaml", "--exclude", "vendor/", cwd=root)
    assert _files(out, root) == ["deploy/a.yaml"]


def test_config_paths_are_relative_to_the_config_file_from_a_subdirectory(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    (root / ".compatcheck.yaml").write_text(
        "apiVersion: compatcheck/v1\nexclude: [vendor/, /legacy]\n"
        "exemptions:\n- {rules: [extended-resource-invalid], paths: ['deploy/keep/**']}\n")
    for cwd in (root, root / "deploy", root / "deploy" / "keep"):
        _code, out = lint_json(str(root), cwd=cwd)
        assert _files(out, root) == ["charts/x/templates/c.yaml", "deploy/a.yaml"], cwd


def test_a_baseline_matches_from_any_working_directory(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    run("lint", "deploy", "--write-baseline", "baseline.json", cwd=root)
    entries = json.loads((root / "baseline.json").read_text())["findings"]
    assert sorted(e["file"] for e in entries) == ["deploy/a.yaml", "deploy/keep/vendor.yaml", "deploy/vendor/b.yaml"]
    for cwd in (root, root / "deploy" / "vendor"):
        code, out = lint_json(str(root / "deploy"), "--baseline", str(root / "baseline.json"), cwd=cwd)
        assert code == 0 and out["findings"] == [], cwd


def test_input_left_out_on_purpose_is_no_empty_input_error(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    (root / ".compatcheck.yaml").write_text("apiVersion: compatcheck/v1\nexclude: [vendor/]\n")
    # pre-commit passes a changed file that the config leaves out: nothing to lint, and that is fine; the note
    # says which pattern of which file left it out.
    for cmd in ("lint", "fix"):
        proc = run(cmd, "deploy/vendor/b.yaml", cwd=root)
        assert (proc.returncode, proc.stdout if cmd == "fix" else "") == (0, ""), proc.stderr
        assert proc.stderr.splitlines()[0] == (
            "compatcheck: note: nothing to lint: every input path was excluded (1 by 'vendor/' (exclude: in "
            f"{root}/.compatcheck.yaml))")
    proc = run("lint", "deploy/a.yaml", "deploy/vendor", "deploy/keep", "--exclude", "a.yaml", "--exclude", "keep/",
               cwd=root)
    assert (proc.returncode, proc.stderr) == (0, "compatcheck: note: nothing to lint: every input path was excluded "
                                                 "(1 by 'a.yaml' (--exclude); 1 by 'vendor/' (exclude: in "
                                                 f"{root}/.compatcheck.yaml); 1 by 'keep/' (--exclude))\n")
    # A path that holds nothing at all is still the mistake it was.
    (root / "empty").mkdir()
    proc = run("lint", "empty", cwd=root)
    assert (proc.returncode, proc.stderr) == (
        2, "compatcheck: error: no files to lint: empty holds no *.yaml, *.yml or *.json file\n")
    # Even with patterns that left nothing out.
    proc = run("lint", "empty", "--exclude", "vendor/", cwd=root)
    assert (proc.returncode, proc.stderr) == (
        2, "compatcheck: error: no files to lint: empty holds no *.yaml, *.yml or *.json file\n")


# ------------------------------------------------------------------------------------------ big repositories

CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.example.io}
spec:
  versions:
  - name: v1
    schema:
      openAPIV3Schema: {type: object, description: "not: [valid YAML"
"""
VALID_CRD = CRD.replace('"not: [valid YAML"', '"ok"}')
BROKEN_CRD = CRD.replace('"not: [valid YAML"', '*undefined}')  # an error only composing finds


class _CountBuilds:
    """Counts the documents built (composed with positions) while it is in place of the builder."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from compatcheck.io import manifests

        self.kinds: list[object] = []
        real = manifests._DocumentBuilder

        def counting(*args: object, **kwargs: object) -> object:
            builder = real(*args, **kwargs)  # type: ignore[arg-type]
            build = builder.build

            def once(node: object) -> object:
                builder.build = build  # type: ignore[method-assign]
                data = build(node)  # type: ignore[arg-type]
                self.kinds.append(data.get("kind") if isinstance(data, dict) else data)
                return data

            builder.build = once  # type: ignore[method-assign]
            return builder

        monkeypatch.setattr(manifests, "_DocumentBuilder", counting)


def test_documents_without_pod_specs_are_skipped_before_the_full_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    # The CRD and the ConfigMap are never composed (only the pods are built); the documents after them keep their
    # file lines and document numbers.
    text = f"{VALID_CRD}---\n{GPU_POD}---\nkind: 'ConfigMap'\napiVersion: v1\ndata: {{a: b}}\n---\n{GPU_POD}"
    from compatcheck.io.lint import may_matter

    may_matter("Pod", "")  # the workload-kinds table is read once, before counting (its own file is built too)
    built = _CountBuilds(monkeypatch)
    result = parse_text("repo.yaml", text, wanted=may_matter)
    assert result.errors == [] and result.skipped == 2
    assert built.kinds == ["Pod", "Pod"]
    assert [(d.index, d.line, d.locate("/spec/containers/0/image")[0]) for d in result.documents] == [
        (1, 10, 16), (3, 24, 30)]


def test_an_error_only_composing_finds_is_reported_in_a_skipped_document() -> None:
    # An alias to an anchor nobody defined is no error of the YAML syntax: kubectl (go-yaml) finds it when it
    # decodes, and stops there ("yaml: unknown anchor 'x' referenced"); compatcheck composes a skipped document
    # whose text could hold one, and reports it on its line, as the full parse does.
    from compatcheck.io.lint import may_matter

    text = f"{BROKEN_CRD}---\n{GPU_POD}"
    result = parse_text("repo.yaml", text, wanted=may_matter)
    assert [(e.message, e.line) for e in result.errors] == [("invalid YAML: found undefined alias", 8)]
    assert [(e.message, e.line) for e in parse_text("repo.yaml", text).errors] == [
        ("invalid YAML: found undefined alias", 8)]
    assert (result.skipped, [d.index for d in result.documents]) == (0, [1])


def test_a_skipped_document_that_is_not_yaml_is_still_an_error() -> None:
    # Syntax errors the cheap scan can see (an unclosed flow mapping, a tab in the indentation, a quoted scalar
    # left open) are checked by the YAML parser even in documents whose kind cannot matter: reported as the full
    # parse reports them, with the line in the file; the documents after them are still linted.
    from compatcheck.io.lint import may_matter

    tabbed = "apiVersion: v1\nkind: ClusterRole\nmetadata:\n\tname: s\n"
    quoted = "apiVersion: v1\nkind: ConfigMap\ndata:\n  a: \"open\n  b: c\n"
    text = f"{CRD}---\n{GPU_POD}---\n{tabbed}---\n{quoted}---\n{GPU_POD}"
    result = parse_text("repo.yaml", text, wanted=may_matter)
    assert [(e.path, e.message, e.line) for e in result.errors] == [
        ("repo.yaml", "invalid YAML: did not find expected ',' or '}'", 9),
        ("repo.yaml", "invalid YAML: found character that cannot start any token", 23),
        ("repo.yaml", "invalid YAML: found unexpected end of stream", 30)]
    assert (result.skipped, [(d.index, d.line) for d in result.documents]) == (0, [(1, 10), (4, 31)])
    # The same errors, document by document, as the full parse finds them.
    for doc, line in ((CRD, 9), (tabbed, 4), (quoted, 6)):
        assert [e.line for e in parse_text("d.yaml", doc).errors] == [line]
    # Tabs in a block scalar, a quoted scalar or a flow collection over several lines are legal: the parser
    # confirms it, and the documents are skipped.
    legal = ("apiVersion: v1\nkind: ConfigMap\ndata:\n  run.sh: |\n    if true; then\n    \techo 'a: b'\n    fi\n"
             "  a: \"two\n    lines\"\n  b: [x,\n    y]\n  c: {k: v, # comment\n    l: w}\n")
    result = parse_text("repo.yaml", f"{legal}---\n{GPU_POD}", wanted=may_matter)
    assert (result.errors, result.skipped, [d.index for d in result.documents]) == ([], 1, [1])
    # An unrendered template among them stays quiet, as its kind cannot matter.
    result = parse_text("repo.yaml", "apiVersion: v1\nkind: Secret\ndata: {token: {{ .Values.token }}\n",
                        wanted=may_matter)
    assert (result.errors, result.notes, result.skipped) == ([], [], 1)


def test_cli_reports_a_broken_skipped_document(tmp_path: Path) -> None:
    write(tmp_path, "role.yaml", f"apiVersion: v1\nkind: ClusterRole\nmetadata:\n\tname: s\n---\n{GPU_POD}")
    code, out = lint_json(str(tmp_path / "role.yaml"))
    assert (code, out["summary"]["objects"]) == (2, 1)
    assert [(e["file"].rsplit("/", 1)[-1], e["line"], e["message"]) for e in out["errors"]] == [
        ("role.yaml", 4, "invalid YAML: found character that cannot start any token")]


def _indent(text: str, by: str) -> str:
    return "".join(by + line if line.strip() else line for line in text.splitlines(keepends=True))


def _as_list(*docs: str, dash: int = 0) -> str:
    """A ``kind: List`` of the documents, in block style, its entries at column ``dash``."""
    pad = " " * dash
    items = "".join(pad + "- " + _indent(d, pad + "  ")[dash + 2:] for d in docs)
    return f"apiVersion: v1\nkind: List\nitems:\n{items}metadata: {{resourceVersion: ''}}\n"


CRL_CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cf-crl-gpu}\n"
DRA_CLAIM = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\nspec: {}\n"


def test_a_list_whose_items_hold_no_pod_spec_is_skipped_unparsed(monkeypatch: pytest.MonkeyPatch) -> None:
    from compatcheck.io.lint import may_matter

    configmap = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: m}\ndata: {a: b}\n"
    # Two CRDs and a ConfigMap: skipped, never composed, like the documents themselves. As does a *List kind, with
    # its items indented under 'items:'.
    for text in (_as_list(VALID_CRD, VALID_CRD, configmap),
                 _as_list(VALID_CRD, configmap, dash=2).replace("kind: List", "kind: CustomResourceDefinitionList")):
        built = _CountBuilds(monkeypatch)
        result = parse_text("l.yaml", f"{text}---\n{GPU_POD}", wanted=may_matter)
        assert (result.errors, result.skipped, [d.index for d in result.documents]) == ([], 1, [1]), text
        assert built.kinds == ["Pod"]
    # A List holding anything that can matter is parsed: a pod, a cf-crl ConfigMap, a DRA claim, a List.
    for item in (GPU_POD, CRL_CONFIGMAP, DRA_CLAIM, _as_list(configmap)):
        result = parse_text("l.yaml", _as_list(configmap, VALID_CRD, item),
                            wanted=may_matter)
        assert (result.skipped, len(result.documents)) == (0, 1), item
    # A List whose items the scan cannot tell for sure (flow style, an item without a kind) is parsed too.
    for text in ("apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: ConfigMap}]\n",
                 "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap}\n",
                 "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  metadata: {name: x}\n",
                 "apiVersion: v1\nkind: List\nitems:\n-\n  apiVersion: v1\n  kind: ConfigMap\n",
                 # A quoted scalar going on at column 0 (ruamel and kubectl accept it) must not end the items early.
                 "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  data:\n    a: \"one\n"
                 "two\"\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n"):
        result = parse_text("l.yaml", text, wanted=may_matter)
        assert (result.skipped, len(result.documents)) == (0, 1), text


def test_a_json_list_whose_items_hold_no_pod_spec_is_skipped_unparsed() -> None:
    from compatcheck.io.lint import may_matter

    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "x"}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": []}}
    skipped = parse_text("l.json", json.dumps({"apiVersion": "v1", "kind": "List", "items": [crd, crd]}),
                         wanted=may_matter)
    assert (skipped.skipped, skipped.documents) == (1, [])
    kept = parse_text("l.json", json.dumps({"apiVersion": "v1", "kind": "List", "items": [crd, pod]}),
                      wanted=may_matter)
    assert (kept.skipped, len(kept.documents)) == (0, 1)


def test_a_list_of_crds_is_linted_as_kubectl_reads_it(tmp_path: Path) -> None:
    # Through the CLI: the List of CRDs counts as one document without pod specs; the GPU pod in a List is linted.
    write(tmp_path, "crds.yaml", _as_list(VALID_CRD, VALID_CRD))
    write(tmp_path, "pods.yaml", _as_list(CRL_CONFIGMAP.replace("cf-crl-", ""), GPU_POD))
    _code, out = lint_json(str(tmp_path), "--nodes", str(T4_NODES))
    assert (out["summary"]["objects"], out["summary"]["documentsWithoutPodSpecs"], out["errors"]) == (2, 1, [])
    assert sorted((f["file"].rsplit("/", 1)[-1], f["rule"], f["line"]) for f in out["findings"]) == [
        ("pods.yaml", "cuda-driver-behind-runtime", 13), ("pods.yaml", "dtype-unsupported-by-gpu", 14)]


def test_a_repository_of_crds_lints_in_bounded_memory(tmp_path: Path) -> None:
    import subprocess
    import sys

    schema = "".join(f"          f{i}: {{type: string, description: '{'x' * 200}'}}\n" for i in range(12_000))
    for i in range(12):  # 12 files of ~3 MB of CRD, one GPU Pod at the end of each
        body = CRD.replace('{type: object, description: "not: [valid YAML"', "\n        type: object\n"
                                                                             "        properties:\n" + schema)
        write(tmp_path, f"crds{i}.yaml", f"{body}---\n{GPU_POD.replace('name: p', f'name: p{i}')}")
    # The lint runs as the child of a small parent that reports the peak RSS of its children (this one only).
    parent = ("import json, resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True, "
              "text=True); print(json.dumps([resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, p.stdout]))")
    proc = subprocess.run([sys.executable, "-c", parent, sys.executable, "-m", "compatcheck", "lint", str(tmp_path),
                           "--format", "json"], capture_output=True, text=True, timeout=300)
    peak_kb, stdout = json.loads(proc.stdout)
    out = json.loads(stdout)
    assert out["errors"] == [] and out["summary"]["objects"] == 12
    assert out["summary"]["documentsWithoutPodSpecs"] == 12
    size_mb = sum(p.stat().st_size for p in tmp_path.iterdir()) / 1e6
    assert peak_kb / 1024 < 100, f"peak RSS {peak_kb / 1024:.0f} MB for {size_mb:.0f} MB of CRDs"


def test_fix_writes_nothing_into_a_file_with_a_duplicate_key(tmp_path: Path) -> None:
    # ruamel's round-trip loader would keep the first value where kubectl keeps the last: no fix goes in.
    crl = Path(__file__).resolve().parents[1] / "fixtures" / "crl-default-missing" / "crl.yaml"
    text = (Path(__file__).resolve().parents[1] / "fixtures" / "crl-default-missing" / "fail.optional.yaml").read_text()
    f = write(tmp_path, "dup.yaml", text.replace("  name: app\n", "  name: app\n  name: app2\n", 1))
    proc = run("fix", str(f), "--crl", str(crl))
    assert f.read_text() == text.replace("  name: app\n", "  name: app\n  name: app2\n", 1)
    assert "skipped fix for crl-default-missing: a key is written twice in it (yaml-duplicate-key): remove the " \
           "duplicate first" in proc.stderr


# ------------------------------------------------------------------------------------------ the kind scan, fooled?

_POD_BODY = "metadata:\n  name: {name}\n  annotations:\n    note: {note}\nspec:\n  containers:\n  - name: c\n" \
            "    image: nvidia/cuda:12.4.1-base-ubuntu22.04\n    resources: {{limits: {{nvidia.com/gpu: 1}}}}\n"


def _pod(name: str, kind_line: str = "kind: Pod", note: str = "x") -> str:
    return f"apiVersion: v1\n{kind_line}\n" + _POD_BODY.format(name=name, note=note)


# Pods written so that a line 'kind: <a kind without pod specs>' stands at column 0 without being the top-level kind
# (a quoted scalar or flow collection going on at column 0, which libyaml and go-yaml accept), while the real kind
# is written in a way a line scan does not read; and kinds a line scan misreads. Each must be parsed (kubectl reads a
# Pod: tests/e2e/test_yaml_stream.py), never skipped.
FAKE = '"x\nkind: CustomResourceDefinition"'
TRICKY_PODS = [
    ("quoted-key", _pod("t1", '"kind": Pod', FAKE)),
    ("space-before-colon", _pod("t2", "kind : Pod", FAKE)),
    ("value-below", _pod("t3", "kind:\n  Pod", "'x\nkind: ConfigMap'")),
    ("tagged-value", _pod("t4", "kind: !!str Pod", FAKE)),
    ("anchored-value", _pod("t5", "kind: &k Pod", FAKE)),
    ("escaped-value", _pod("t6", 'kind: "\\x50od"', FAKE)),
    ("fake-in-flow", _pod("t7", "'kind': Pod").replace("  annotations:\n    note: x\n",
                                                       "  labels: {a: b,\nkind: CustomResourceDefinition\n}\n")),
    ("flow-root", "{apiVersion: v1,\nkind: Pod,\nmetadata: {name: t8},\n"
                  "spec: {containers: [{name: c, image: 'nvidia/cuda:12.4.1-base-ubuntu22.04'}]}}\n"),
    ("alias-value", _pod("t9", "kind: *k", "&k Pod").replace("apiVersion: v1\nkind: *k\n", "apiVersion: v1\n")
     .replace("spec:\n", "kind: *k\nspec:\n")),
    ("crlf", _pod("t10").replace("\n", "\r\n")),
    ("indented-root", "".join("  " + line + "\n" for line in _pod("t11", "kind: Pod", FAKE.replace(
        "kind:", "  kind:")).splitlines()).replace("  kind: Pod\n", "  'kind': Pod\n")),
]


@pytest.mark.parametrize(("case", "text"), TRICKY_PODS, ids=[c for c, _ in TRICKY_PODS])
def test_the_kind_scan_never_skips_a_pod(case: str, text: str) -> None:
    from compatcheck.io.lint import may_matter

    # After a CRD that is skipped (so the scan runs on the Pod as a later document, too).
    for body in (text, f"{VALID_CRD}---\n{text}"):
        result = parse_text("p.yaml", body, wanted=may_matter)
        assert result.errors == [], result.errors
        assert [d.data["kind"] for d in result.documents] == ["Pod"], case
        assert result.skipped == (1 if body != text else 0)


def test_the_kind_scan_still_skips_what_it_can_tell() -> None:
    from compatcheck.io.lint import may_matter

    # A CRD in CRLF, with a comment after the kind, quoted, after '--- # comment', after a BOM (read_file strips it).
    for crd in (VALID_CRD.replace("\n", "\r\n"), VALID_CRD.replace("Definition\n", "Definition  # a CRD\n"),
                VALID_CRD.replace("kind: CustomResourceDefinition", "kind: 'CustomResourceDefinition'")):
        result = parse_text("c.yaml", f"{GPU_POD}--- # the CRD\n{crd}", wanted=may_matter)
        assert (result.errors, result.skipped, len(result.documents)) == ([], 1, 1), crd


BOM_LATER = f"{VALID_CRD}---\n\ufeff{_pod('bom')}"  # files joined with cat, the second one saved with a BOM


def test_a_bom_starting_a_later_document_is_skipped_as_kubectl_skips_it() -> None:
    from compatcheck.io.lint import may_matter

    result = parse_text("p.yaml", BOM_LATER, wanted=may_matter)
    assert (result.errors, result.notes, result.skipped) == ([], [], 1)
    assert [(d.data["kind"], d.line) for d in result.documents] == [("Pod", 10)]


def test_what_follows_an_end_marker_is_skipped_with_a_note_as_kubectl_ignores_it() -> None:
    # Text after '...' (kubectl, through go-yaml, reads the first document of each '---' part): a document the
    # parser would read, or text it cannot, is skipped with a note, neither linted nor an error.
    for after in ("apiVersion: v1\nkind: Pod\nmetadata: {name: q}\n", "not: [closed\n"):
        result = parse_text("p.yaml", f"{GPU_POD}...\n{after}", wanted=lambda kind, _text: True)
        assert [d.data["metadata"]["name"] for d in result.documents] == ["p"]
        assert result.errors == []
        assert [(n.line, n.message) for n in result.notes] == [
            (11, "text after a '...' end marker and before the next '---' line: kubectl reads nothing there (go-yaml "
                 "reads the first document of each '---' part); skipped")]
