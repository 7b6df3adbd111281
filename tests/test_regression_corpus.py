"""The regression corpus (tests/regression_corpus, real public files, sources in its README): linted as a user
would, with exactly the outcome kubectl and the API server imply."""

from __future__ import annotations

import json
from pathlib import Path

from tests.test_cli import run

CORPUS = Path(__file__).resolve().parent / "regression_corpus"
# sha256 (first 16 hex digits) of each file, equal to that of the file in ../shared/corpus it was copied from.
DIGESTS = {
    "gke__tgi-7b-bitsandbytes-nf4__patch.yaml": "bf550ca1b2b9426c",
    "gke__vllm-3-27b-it.yaml": "cc922f13b08106d4",
    "gke__vllm-llama4-maverick-17b-128e-instruct.yaml": "aee8e9f8aa85a07b",
    "hami__mig_example.yaml": "55747827993c0180",
    "kserve__kserve-huggingfaceserver.yaml": "c9d1fccb36590f33",
    "kserve__llm-inference-service-dp-ep-deepseek-r1-gpu-deepep-ht.yaml": "bea5bee3849eb222",
    "kube-linter__container-with-merge.yaml": "268d62db302c7dd4",
    "kube-linter__invalid.yaml": "6ff1bc13afc4457d",
    "kubeconform__duplicate_property.yaml": "5fbaef21f87640bd",
    "kubeflow__crd-v1.yaml": "24c394622b45281c",
    "polaris__test_3__bad.yaml": "a99abed61d4005d4",
    "volcano__argo-mpi-hello-world.yaml": "6bf7bdd1886727cd",
}


def test_the_regression_corpus_reads_as_kubernetes_does() -> None:
    proc = run("lint", "tests/regression_corpus", "--format", "json")
    out = json.loads(proc.stdout)
    assert proc.returncode == 2  # three files kubectl cannot read either
    # Each error on its line, one line each: kubectl fails on each of these files too (tests/e2e/test_yaml_stream.py
    # checks the merge with the real kubectl).
    assert [(Path(e["file"]).name, e["line"], e["message"]) for e in out["errors"]] == [
        ("kube-linter__container-with-merge.yaml", 31, "document 1: merge key '<<' of an alias of a sequence: kubectl "
         "(go-yaml) takes a mapping, an alias of one, or a sequence of them written there"),
        ("kube-linter__invalid.yaml", 2, "invalid YAML: did not find expected ',' or '}'"),
        ("polaris__test_3__bad.yaml", 3, "invalid YAML: did not find expected <document start>")]
    assert out["skipped"] == []
    # The DaemonSet's duplicate key; the LLMInferenceService's two containers with no image (the controller fills it
    # in), and nothing about its rdma/roce_gdr beside nvidia.com/gpu: 8 (a non-GPU extended resource).
    assert [(Path(f["file"]).name, f["rule"], f["line"], f["pointer"]) for f in out["findings"]] == [
        ("kserve__llm-inference-service-dp-ep-deepseek-r1-gpu-deepep-ht.yaml", "cuda-runtime-unknown", 28,
         "/spec/template/containers/0/image"),
        ("kserve__llm-inference-service-dp-ep-deepseek-r1-gpu-deepep-ht.yaml", "cuda-runtime-unknown", 111,
         "/spec/worker/containers/0/image"),
        ("kubeconform__duplicate_property.yaml", "yaml-duplicate-key", 16, "/spec/template/spec/containers")]
    # 10 objects linted: the HAMi MIG Pod, the DaemonSet (with the second containers list), two Deployments and
    # Services of the GKE vLLM samples, the ClusterServingRuntime, the LLMInferenceService, the GKE kustomize patch
    # (a partial Deployment: no selector, no image, linted as it stands), and the Argo WorkflowTemplate (a kind the
    # table does not know, parsed for structural discovery as its text has containers, images and GPUs: its Volcano
    # Job with nvidia.com/gpu: 0 and rdma/ib: 0 is a string that Argo fills in with {{workflow.parameters...}} at run
    # time, which neither kubectl nor compatcheck reads as an object: no finding, no note). Skipped unparsed: the CRD,
    # the Secret holding {{HF_TOKEN}}.
    assert out["summary"]["objects"] == 10 and out["summary"]["documentsWithoutPodSpecs"] == 2


def test_a_mig_profile_no_node_offers_is_one_finding() -> None:
    # HAMi's MIG example on the T4 cluster profile (no node offers MIG): the specific cause only, not also
    # gpu-no-eligible-node.
    proc = run("lint", str(CORPUS / "hami__mig_example.yaml"), "--nodes", "examples/cluster-profile.yaml",
               "--format", "json")
    out = json.loads(proc.stdout)
    assert (proc.returncode, out["errors"]) == (1, [])
    assert [(f["rule"], f["line"], f["pointer"]) for f in out["findings"]] == [
        ("mig-profile-unknown", 12, "/spec/containers/0/resources/limits/nvidia.com~1mig-3g.20gb")]


def test_the_corpus_files_are_the_public_files_byte_for_byte() -> None:
    # The README names each file's source; the digests here pin the bytes that were copied.
    import hashlib

    digests = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:16] for p in sorted(CORPUS.glob("*.yaml"))}
    assert digests == DIGESTS


def test_the_duplicate_key_keeps_the_last_value() -> None:
    proc = run("lint", "tests/regression_corpus/kubeconform__duplicate_property.yaml", "--format", "junit")
    assert "DaemonSet" in proc.stdout
    from compatcheck.io.manifests import read_file

    (doc,) = read_file(str(CORPUS / "kubeconform__duplicate_property.yaml")).documents
    containers = doc.data["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["nginx"]
