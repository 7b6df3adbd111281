"""The regression corpus: real public files of ``../shared/corpus``, read in place (third-party files are never
copied into this repository; ``../shared/corpus/SOURCES.md`` gives each file's repository, commit and licence), each
standing for one way compatcheck used to read input differently from kubectl and the API server. Linted as a user
would, with exactly the outcome kubectl and the API server imply, and the bytes pinned by sha256."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.conftest import SHARED, shared
from tests.test_cli import run


class Case(NamedTuple):
    path: str  # under ../shared/corpus
    sha256: str  # of the file as the tests expect it
    errors: list[tuple[int, str]]  # (line, message)
    findings: list[tuple[str, int, str]]  # (rule, line, pointer)
    shows: str  # what the file stands for


MERGE = ("document 1: merge key '<<' of an alias of a sequence: kubectl (go-yaml) takes a mapping, an alias of one, "
         "or a sequence of them written there")
LLMISVC = ("kserve__kserve/docs__samples__llmisvc__dp-ep__deepseek-r1-gpu-rdma-roce__"
           "llm-inference-service-dp-ep-deepseek-r1-gpu-deepep-ht.yaml")
DUPLICATE = "yannh__kubeconform/fixtures__duplicate_property.yaml"
MIG = "Project-HAMi__HAMi/examples__nvidia__mig_example.yaml"
MERGE_FILE = "stackrox__kube-linter/pkg__templates__sortedkeys__testdata__container-with-merge.yaml"

CASES = [
    Case(DUPLICATE, "5fbaef21f87640bd68830be40bca5662f66b2e816fd9217e58bad13a4a36aee2",
         [], [("yaml-duplicate-key", 16, "/spec/template/spec/containers")],
         "A DaemonSet whose pod spec says containers: twice: the API server keeps the last; compatcheck lints that one "
         "and reports yaml-duplicate-key instead of dropping the object with an error."),
    Case("GoogleCloudPlatform__kubernetes-engine-samples/ai-ml__llm-serving-gemma__vllm__vllm-3-27b-it.yaml",
         "cc922f13b08106d4c29c5be20b68a2a1300b39a1ccf11defebc7ec1d1a5a910a", [], [],
         "value: ${LD_LIBRARY_PATH}:/usr/local/nvidia/lib64 in an env var is the program's, not an unrendered "
         "template: the Deployment is linted."),
    Case("GoogleCloudPlatform__kubernetes-engine-samples/"
         "ai-ml__llm-serving-llama__vllm__vllm-llama4-maverick-17b-128e-instruct.yaml",
         "aee8e9f8aa85a07b5c0e7807902f6abd044be4bc88ff9019735742970b74ed9e", [], [],
         "A Secret holding {{HF_TOKEN}} beside a GPU Deployment: the Secret cannot hold a pod spec and is skipped "
         "unparsed, the Deployment is linted, nothing is an error."),
    Case("kubeflow__training-operator/examples__crd__crd-v1.yaml",
         "24c394622b45281c514305e720f468d6fbfd89b3c89ad3a35ddf0f1a8ddbdd67", [], [],
         "A CustomResourceDefinition: skipped before the position-tracking parse (documentsWithoutPodSpecs)."),
    Case("kserve__kserve/config__runtimes__kserve-huggingfaceserver.yaml",
         "c9d1fccb36590f336af9f83276775adc9343a01738b0c95e406ee68c989edff1", [], [],
         "--model_name={{.Name}} in args is KServe's own runtime templating, not an unrendered Helm template: the "
         "ClusterServingRuntime is linted."),
    Case(MERGE_FILE, "268d62db302c7dd45d667edf9031fa686fe5f74fae5fbfbbb918a25715908bfe", [(31, MERGE)], [],
         "Merge keys, and '- <<: *common-env', a merge of an alias of a sequence, which go-yaml (kubectl) refuses: an "
         "error on its line, exit 2. tests/e2e/test_yaml_stream.py checks every other merge against the real kubectl."),
    Case("stackrox__kube-linter/pkg__command__lint__testdata__invalid.yaml",
         "6ff1bc13afc4457d1beee8d045d3411b67b9f5173cfe523db0e622a29ec7e0dc",
         [(2, "invalid YAML: did not find expected ',' or '}'")], [],
         "Malformed YAML (an unclosed flow mapping, no final newline): one error on the file's last line, where "
         "go-yaml also puts it, no traceback."),
    Case("FairwindsOps__polaris/pkg__kube__test_files__test_3__bad.yaml",
         "a99abed61d4005d45607d8912c178bffc2e822d032f20251e039a740a72f3820",
         [(3, "invalid YAML: did not find expected <document start>")], [],
         "'--' (a scalar, not a document separator) before a Deployment: one error, kubectl fails on it too."),
    Case("GoogleCloudPlatform__kubernetes-engine-samples/"
         "ai-ml__llm-serving-gemma__tgi__tgi-7b-bitsandbytes-nf4__patch.yaml",
         "bf550ca1b2b9426c7826a7dac9af8faff54494bb2e64c2d5b024c93011eec41e", [], [],
         "A kustomize strategic-merge patch: a partial Deployment (no selector, no image) is linted as it stands, "
         "without an error or a finding."),
    Case("volcano-sh__volcano/example__integrations__argo__mpi__hello-world.yaml",
         "6bf7bdd1886727cdd67aa729c5f04e14abea0019a716b45f681df4092efc92f6", [], [],
         "An Argo WorkflowTemplate whose Volcano Job (nvidia.com/gpu: 0, rdma/ib: 0) is a string holding Argo's "
         "{{workflow.parameters...}}: no template note, no error; parsed for structural discovery (its text has "
         "containers, images and GPUs), which finds no pod spec in a string."),
    Case(LLMISVC, "bea5bee3849eb222201b4fcf34cfe9efebb76338b5c0825c46bbdfa129c1b7c3", [],
         [("cuda-runtime-unknown", 28, "/spec/template/containers/0/image"),
          ("cuda-runtime-unknown", 111, "/spec/worker/containers/0/image")],
         "An LLMInferenceService asking for rdma/roce_gdr: 1 beside nvidia.com/gpu: 8: only the two "
         "cuda-runtime-unknown notes (the controller fills the image in), nothing about the RDMA resource."),
    Case(MIG, "55747827993c018095633f40b6c3171353b919d8ae1f57db1a93bda5c48c35c8", [], [],
         "A Pod asking for nvidia.com/mig-3g.20gb: on the T4 cluster profile one cause gives one finding, "
         "mig-profile-unknown (test_a_mig_profile_no_node_offers_is_one_finding)."),
]
IDS = [c.path.split("/", 1)[0] + "/" + c.path.rsplit("__", 1)[-1] for c in CASES]


@pytest.fixture(scope="module")
def linted() -> tuple[int, dict[str, Any]]:
    """All the files in one run, as a user would lint them."""
    corpus = shared("corpus")
    proc = run("lint", *(str(corpus / c.path) for c in CASES), "--format", "json")
    return proc.returncode, json.loads(proc.stdout)


def test_the_regression_corpus_reads_as_kubernetes_does(linted: tuple[int, dict[str, Any]]) -> None:
    status, out = linted
    assert status == 2  # three files kubectl cannot read either
    assert out["skipped"] == []
    # 10 objects linted: the HAMi MIG Pod, the DaemonSet (with the second containers list), two Deployments and
    # Services of the GKE vLLM samples, the ClusterServingRuntime, the LLMInferenceService, the GKE kustomize patch
    # (a partial Deployment: no selector, no image, linted as it stands), and the Argo WorkflowTemplate (a kind the
    # table does not know, parsed for structural discovery as its text has containers, images and GPUs: its Volcano
    # Job with nvidia.com/gpu: 0 and rdma/ib: 0 is a string that Argo fills in with {{workflow.parameters...}} at run
    # time, which neither kubectl nor compatcheck reads as an object: no finding, no note). Skipped unparsed: the CRD,
    # the Secret holding {{HF_TOKEN}}.
    assert out["summary"]["objects"] == 10 and out["summary"]["documentsWithoutPodSpecs"] == 2
    corpus = SHARED / "corpus"
    # Exactly the errors and findings the table names, nothing on any other file.
    assert sorted(Path(e["file"]).resolve().relative_to(corpus.resolve()).as_posix() for e in out["errors"]) == \
        sorted(c.path for c in CASES for _ in c.errors)
    assert sorted(Path(f["file"]).resolve().relative_to(corpus.resolve()).as_posix() for f in out["findings"]) == \
        sorted(c.path for c in CASES for _ in c.findings)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_each_file_has_its_outcome(case: Case, linted: tuple[int, dict[str, Any]]) -> None:
    _, out = linted
    mine = str(SHARED / "corpus" / case.path)
    # Each error on its line, one line each: kubectl fails on each of these files too.
    assert [(e["line"], e["message"]) for e in out["errors"] if e["file"] == mine] == case.errors, case.shows
    assert [(f["rule"], f["line"], f["pointer"]) for f in out["findings"] if f["file"] == mine] == case.findings, \
        case.shows


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_corpus_files_are_the_pinned_bytes(case: Case) -> None:
    # The tests above were written against these bytes: a changed ../shared/corpus file fails here, by name.
    path = shared("corpus") / case.path
    assert hashlib.sha256(path.read_bytes()).hexdigest() == case.sha256, f"../shared/corpus/{case.path} changed"


def test_a_mig_profile_no_node_offers_is_one_finding() -> None:
    # HAMi's MIG example on the T4 cluster profile (no node offers MIG): the specific cause only, not also
    # gpu-no-eligible-node.
    proc = run("lint", str(shared("corpus") / MIG), "--nodes", "examples/cluster-profile.yaml", "--format", "json")
    out = json.loads(proc.stdout)
    assert (proc.returncode, out["errors"]) == (1, [])
    assert [(f["rule"], f["line"], f["pointer"]) for f in out["findings"]] == [
        ("mig-profile-unknown", 12, "/spec/containers/0/resources/limits/nvidia.com~1mig-3g.20gb")]


def test_the_duplicate_key_keeps_the_last_value() -> None:
    path = shared("corpus") / DUPLICATE
    proc = run("lint", str(path), "--format", "junit")
    assert "DaemonSet" in proc.stdout
    from compatcheck.io.manifests import read_file

    (doc,) = read_file(str(path)).documents
    containers = doc.data["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["nginx"]
