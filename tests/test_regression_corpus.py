"""The regression corpus (tests/regression_corpus, real public files, sources in its README): linted as a user
would, with exactly the outcome kubectl and the API server imply."""

from __future__ import annotations

import json
from pathlib import Path

from tests.test_cli import run

CORPUS = Path(__file__).resolve().parent / "regression_corpus"


def test_the_regression_corpus_reads_as_kubernetes_does() -> None:
    proc = run("lint", "tests/regression_corpus", "--format", "json")
    out = json.loads(proc.stdout)
    assert proc.returncode == 0  # a warning only
    assert out["errors"] == [] and out["skipped"] == []
    assert [(Path(f["file"]).name, f["rule"], f["line"], f["pointer"]) for f in out["findings"]] == [
        ("kubeconform__duplicate_property.yaml", "yaml-duplicate-key", 16, "/spec/template/spec/containers")]
    # 6 objects linted: the DaemonSet (with the second containers list), two Deployments and Services of the GKE
    # samples, the ClusterServingRuntime; the CRD and the Secret are skipped unparsed.
    assert out["summary"]["objects"] == 6 and out["summary"]["documentsWithoutPodSpecs"] == 2


def test_the_duplicate_key_keeps_the_last_value() -> None:
    proc = run("lint", "tests/regression_corpus/kubeconform__duplicate_property.yaml", "--format", "junit")
    assert "DaemonSet" in proc.stdout
    from compatcheck.io.manifests import read_file

    (doc,) = read_file(str(CORPUS / "kubeconform__duplicate_property.yaml")).documents
    containers = doc.data["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["nginx"]
