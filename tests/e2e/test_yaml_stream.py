"""A multi-document file with a syntax error, read by the real kubectl (``kubectl apply --dry-run=server`` against the
real kube-apiserver) and by compatcheck (issue #15, no dropped input).

kubectl splits the file at '---' lines itself, decodes the documents in order and stops at the first one it cannot
decode: the documents before it are applied, the one with the error and every one after it are not, and the exit
status is 1. Its message counts lines from the '---' line before the document. compatcheck reports the same error
on the same line, counted in the file (whatever the document's kind, also one skipped before the full parse), exits
2, and still lints the documents after it (docs/getting-started.md, "What it checks"): each test here checks both
sides.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import ROOT, shared
from tests.e2e.conftest import namespace
from tests.e2e.kapi import KubeAPIServer
from tests.test_reading import TRICKY_PODS

GPU_POD = """apiVersion: v1
kind: Pod
metadata:
  name: gpu
spec:
  containers:
  - name: c
    image: nvidia/cuda:12.4.1-base-ubuntu22.04
    resources:
      limits:
        nvidia.com/gpu: 1
"""


def configmap(name: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\ndata:\n  a: b\n"


# (case, a document kubectl cannot decode, compatcheck's message, what kubectl says). The kinds are ones compatcheck
# skips before the full parse (ConfigMap, Service, ClusterRole) and one it parses (Pod).
BROKEN = [
    ("undefined-alias", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\ndata:\n  a: *x\n",
     "invalid YAML: found undefined alias", "yaml: unknown anchor 'x' referenced"),
    ("tab-indent", "apiVersion: v1\nkind: Service\nmetadata:\n\tname: bad\n",
     "invalid YAML: found character that cannot start any token", "found character that cannot start any token"),
    ("bad-indent", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: bad\n rules: []\n",
     "invalid YAML: did not find expected key", "did not find expected key"),
    ("mapping-value", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\ndata:\n  cmd: echo a: b\n",
     "invalid YAML: mapping values are not allowed in this context", "mapping values are not allowed in this context"),
    ("open-quote", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\ndata:\n  a: \"open\n  b: c\n",
     "invalid YAML: found unexpected end of stream", "found unexpected end of stream"),
    ("block-sequence", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\ndata:\n  a: b\n  - c\n",
     "invalid YAML: did not find expected key", "did not find expected key"),
    ("pod-bad-indent", GPU_POD.replace("  name: gpu\n", "  name: bad\n   labels: {}\n"),
     "invalid YAML: mapping values are not allowed in this context", "mapping values are not allowed in this context"),
    # Keys kubectl cannot turn into JSON (sigs.k8s.io/yaml): a null key, a sequence as a key.
    ("null-key", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\ndata:\n  ~: x\n",
     "invalid YAML: a null mapping key (kubectl cannot convert it to JSON)", "unsupported map key of type"),
    ("sequence-key", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\ndata:\n  ? [a]\n  : b\n",
     "invalid YAML: mapping keys must be plain scalars", "yaml: invalid map key"),
    ("flow-sequence-key", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\ndata: {[a]: b}\n",
     "invalid YAML: mapping keys must be plain scalars", "yaml: invalid map key"),
]
# Where kubectl names no line: the line of the broken document compatcheck names.
NO_LINE = {"undefined-alias": 6, "null-key": 6, "sequence-key": 6, "flow-sequence-key": 5}


@pytest.fixture(scope="module")
def ns(kapi: KubeAPIServer) -> Iterator[str]:
    yield namespace(kapi.client(), "stream")


def kubectl_apply(kapi: KubeAPIServer, ns: str, text: str) -> tuple[int, list[str], str]:
    out = kapi.kubectl("apply", "--dry-run=server", "-n", ns, "-o", "name", "-f", "-", stdin=text, check=False)
    return out.returncode, out.stdout.split(), out.stderr.strip()


def lint(text: str) -> tuple[int, dict[str, Any]]:
    proc = subprocess.run([sys.executable, "-m", "compatcheck", "lint", "-", "--format", "json"], input=text,
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@pytest.mark.parametrize(("case", "bad", "message", "kubectl_says"), BROKEN, ids=[c[0] for c in BROKEN])
def test_a_syntax_error_is_reported_on_kubectls_line(kapi: KubeAPIServer, ns: str, case: str, bad: str,
                                                      message: str, kubectl_says: str) -> None:
    text = f"{configmap('before')}---\n{bad}---\n{GPU_POD}---\n{configmap('after')}"
    separator = configmap("before").count("\n") + 1  # the '---' line before the broken document
    code, applied, stderr = kubectl_apply(kapi, ns, text)
    # kubectl: the document before is applied, then it stops (nothing after the broken document is).
    assert (code, applied) == (1, ["configmap/before"]), stderr
    assert kubectl_says in stderr
    status, out = lint(text)
    assert status == 2
    (error,) = out["errors"]
    assert error["message"] == message
    m = re.search(r"yaml: line (\d+):", stderr)
    if m is not None:
        # kubectl counts from the '---' line before the document, compatcheck in the file. go-yaml gives the
        # parser's errors ("did not find expected key") 0-based lines, the scanner's 1-based ones.
        assert error["line"] == separator + int(m.group(1)) + (kubectl_says == "did not find expected key")
    else:  # kubectl names no line; compatcheck the alias's, the key's
        assert error["line"] == separator + NO_LINE[case]
    # compatcheck lints the documents after it too (the GPU Pod; the ConfigMaps hold no pod spec).
    # (The broken document is neither linted nor counted as skipped: it is the error.)
    assert (out["summary"]["objects"], out["summary"]["documentsWithoutPodSpecs"]) == (1, 2)


def test_a_tab_indented_service_before_a_gpu_pod(kapi: KubeAPIServer, ns: str) -> None:
    # The case of issue #15: the tab-indented Service used to take the GPU Pod after it down with it (0 objects).
    text = f"apiVersion: v1\nkind: Service\nmetadata:\n\tname: s\n---\n{GPU_POD}"
    code, applied, stderr = kubectl_apply(kapi, ns, text)
    assert (code, applied) == (1, []) and "yaml: line 4: found character that cannot start any token" in stderr
    status, out = lint(text)
    assert (status, [(e["line"], e["message"]) for e in out["errors"]], out["summary"]["objects"]) == (
        2, [(4, "invalid YAML: found character that cannot start any token")], 1)


def test_what_kubectls_document_splitter_rejects(kapi: KubeAPIServer, ns: str) -> None:
    # kubectl reads '---' lines itself: content after '---' on the same line, or a %YAML directive (left alone in
    # a document of its own), fails the file. compatcheck reports each on its line, exit 2.
    block = f"{configmap('one')}---\n{configmap('two')}--- |\n  text\n---\n{configmap('three')}"
    code, applied, stderr = kubectl_apply(kapi, ns, block)
    assert (code, applied) == (1, ["configmap/one"]) and "invalid Yaml document separator: |" in stderr
    status, out = lint(block)
    assert (status, [(e["line"], e["message"]) for e in out["errors"]]) == (2, [
        (14, "'--- |': kubectl reads a line starting with '---' as a document separator, and only blanks or a "
             "comment may follow it (invalid Yaml document separator)")])
    directive = f"%YAML 1.1\n---\n{configmap('one')}"
    code, applied, stderr = kubectl_apply(kapi, ns, directive)
    assert (code, applied) == (1, []) and "did not find expected <document start>" in stderr
    status, out = lint(directive)
    assert (status, [(e["line"], e["message"]) for e in out["errors"]]) == (2, [
        (1, "'%YAML 1.1': kubectl cannot read a YAML directive (it splits documents at '---' lines, and the "
            "directive alone is no document)")])
    # '---foo: x' is a separator to kubectl (a bad one), not a key of the document before: one error, no noise.
    foo = f"{configmap('one')}---foo: x\n{configmap('two')}"
    code, applied, stderr = kubectl_apply(kapi, ns, foo)
    assert (code, applied) == (1, []) and "invalid Yaml document separator: foo: x" in stderr
    status, out = lint(foo)
    assert (status, [e["line"] for e in out["errors"]], out["findings"]) == (2, [7], [])
    # A comment after '---' is fine for both, with a blank before it or not ('---#x' would be a scalar to YAML).
    for fine in (f"{configmap('one')}--- # two\n{configmap('two')}", f"{configmap('one')}---# two\n{configmap('two')}"):
        assert kubectl_apply(kapi, ns, fine)[:2] == (0, ["configmap/one", "configmap/two"])
        status, out = lint(fine)
        assert (status, out["errors"], out["summary"]["documentsWithoutPodSpecs"]) == (0, [], 2)


def test_a_document_after_an_end_marker_is_ignored_as_kubectl_ignores_it(kapi: KubeAPIServer, ns: str) -> None:
    # go-yaml reads the first document of each '---' part: a GPU Pod after '...' (and no '---') is never applied.
    text = f"{configmap('one')}...\n{GPU_POD}---\n{configmap('two')}"
    code, applied, _stderr = kubectl_apply(kapi, ns, text)
    assert (code, applied) == (0, ["configmap/one", "configmap/two"])
    status, out = lint(text)
    assert (status, out["errors"], out["summary"]["objects"]) == (0, [], 1)  # the ConfigMap before '...' is parsed
    assert [(s["line"], s["reason"]) for s in out["skipped"]] == [
        (8, "text after a '...' end marker and before the next '---' line: kubectl reads nothing there (go-yaml "
            "reads the first document of each '---' part); skipped")]


def test_an_anchor_defined_twice_is_accepted_and_the_latest_wins(kapi: KubeAPIServer, ns: str) -> None:
    # go-yaml accepts an anchor defined again (an alias names the latest definition); ruamel's C composer rejects
    # it, so compatcheck composes such a document with ruamel's Python composer, which reads it as go-yaml does.
    text = GPU_POD.replace("  name: gpu\n", "  name: twice\n  labels:\n    image: &img busybox\n").replace(
        "    image: nvidia/cuda:12.4.1-base-ubuntu22.04\n",
        "    image: &img nvidia/cuda:12.4.1-base-ubuntu22.04\n  - name: d\n    image: *img\n")
    out = kapi.kubectl("apply", "--dry-run=server", "-n", ns, "-o", "json", "-f", "-", stdin=text)
    stored = json.loads(out.stdout)["spec"]["containers"][1]["image"]
    status, linted = lint(text)
    assert (status, linted["errors"], linted["summary"]["objects"]) == (0, [], 1)
    from compatcheck.io.manifests import parse_text

    (doc,) = parse_text("p.yaml", text, wanted=lambda kind, _text: True).documents
    assert doc.data["spec"]["containers"][1]["image"] == stored == "nvidia/cuda:12.4.1-base-ubuntu22.04"


@pytest.mark.parametrize(("case", "text"), TRICKY_PODS, ids=[c for c, _ in TRICKY_PODS])
def test_kubectl_reads_a_pod_where_the_kind_scan_could_be_fooled(kapi: KubeAPIServer, ns: str, case: str,
                                                                 text: str) -> None:
    # The Pods of tests/test_reading.py's TRICKY_PODS (a column-0 'kind: CustomResourceDefinition' inside a quoted
    # scalar or flow collection, the real kind written so a line scan misses it): kubectl applies each as a Pod,
    # and compatcheck lints each as one.
    code, applied, stderr = kubectl_apply(kapi, ns, text)
    assert (code, [a.split("/")[0] for a in applied]) == (0, ["pod"]), stderr
    _status, out = lint(text)
    assert (out["errors"], out["skipped"], out["summary"]["objects"]) == ([], [], 1)


def test_a_bom_starting_a_later_document(kapi: KubeAPIServer, ns: str) -> None:
    from tests.test_reading import BOM_LATER

    code, applied, stderr = kubectl_apply(kapi, ns, BOM_LATER)
    # (The test CRD is no valid CRD, which the server says; the Pod after it, with its BOM, is applied.)
    assert (code, applied) == (1, ["pod/bom"]) and 'CustomResourceDefinition "things.example.io" is invalid' in stderr
    status, out = lint(BOM_LATER)
    assert (status, out["errors"], out["skipped"], out["summary"]["objects"]) == (0, [], [], 1)


# kube-linter's container-with-merge.yaml, read in place (tests/test_regression_corpus.py pins its sha256).
MERGE_FILE = "corpus/stackrox__kube-linter/pkg__templates__sortedkeys__testdata__container-with-merge.yaml"


def kubectl_reads(kapi: KubeAPIServer, ns: str, text: str) -> Any:
    """The object as kubectl decodes it (``create --dry-run=client -o json``: kubectl's own YAML reading)."""
    out = kapi.kubectl("create", "--dry-run=client", "-n", ns, "-o", "json", "-f", "-", stdin=text, check=False)
    return json.loads(out.stdout) if out.returncode == 0 else out.stderr.strip()


def test_merge_keys_are_read_as_kubectl_reads_them(kapi: KubeAPIServer, ns: str) -> None:
    # kube-linter's container-with-merge.yaml (../shared/corpus): '- <<: *common-env' merges an alias of a sequence,
    # which go-yaml refuses. compatcheck refuses it too, on its line.
    text = shared(MERGE_FILE).read_text()
    said = kubectl_reads(kapi, ns, text)
    assert isinstance(said, str) and "map merge requires map or sequence of maps as the value" in said
    status, out = lint(text)
    assert (status, [(e["line"], e["message"]) for e in out["errors"]]) == (2, [
        (31, "document 1: merge key '<<' of an alias of a sequence: kubectl (go-yaml) takes a mapping, an alias of "
             "one, or a sequence of them written there")])
    from compatcheck.io.manifests import parse_text

    # Without that line, every merge (aliases of mappings, overridden keys after and before the merge, a sequence of
    # aliases written there, where the first wins) reads exactly as kubectl reads it.
    fixed = text.replace("            - <<: *common-env\n", "")
    more = fixed.replace("        - <<: *app-container\n          name: worker\n",
                         "        - <<: [{name: first, image: 'a:1'}, *app-container]\n          image: b:2\n"
                         "        - name: before\n          <<: *app-container\n          image: c:3\n"
                         "        - <<: *app-container\n          name: worker\n")
    for variant in (fixed, more):
        said = kubectl_reads(kapi, ns, variant)
        assert isinstance(said, dict), said
        (doc,) = parse_text("m.yaml", variant, wanted=lambda kind, _text: True).documents
        assert doc.data["spec"]["template"]["spec"]["containers"] == said["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in said["spec"]["template"]["spec"]["containers"]] == [
        "app", "sidecar", "first", "app", "worker"]
