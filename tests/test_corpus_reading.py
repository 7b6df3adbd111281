"""How real files are read: the 30 public files of ``../shared/corpus-reading`` (its ``SOURCES.md`` gives each one's
repository, commit, licence and the lines that show its case), each read in place (never copied into this
repository) and linted as a user would, one at a time, with exactly the outcome kubectl and the API server imply:

* a value the API server rejects (an unquoted int in a nodeSelector) is ``yaml-non-string-value``;
* JSON that is no Kubernetes object (dashboards, schemas, package files, JSON with comments) is skipped quietly, as
  non-Kubernetes YAML is (``_parse_json``): no error, no finding, no object;
* Helm values files are skipped with the note to lint the chart with ``--helm-chart``; templates and envsubst
  placeholders are skipped with a note, and a GPU workload among them ends with a *not checked* record;
* kubectl's reading of CRLF, ``...``, anchors, aliases, merge keys and tabs in block scalars, without an error;
* RDMA, host-device and SR-IOV resources beside (or instead of) GPUs are no GPUs.

A case compatcheck gets wrong is an xfail (strict) that asserts the right outcome and names what is missing."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from tests.conftest import ROOT, shared
from tests.test_cli import run

FOLDER = "corpus-reading"
CHART = "triton-inference-server__server/deploy/gcp"


class Case(NamedTuple):
    ref: str  # its row in ../shared/corpus-reading/SOURCES.md
    path: str  # under ../shared/corpus-reading
    sha256: str  # of the file as the tests expect it
    status: int  # compatcheck lint's exit code
    errors: list[tuple[int | None, str]]  # (line, message)
    findings: list[tuple[str, int, str]]  # (rule, line, pointer)
    notes: list[tuple[int | None, str]]  # (line, reason) of the JSON report's "skipped"
    gpu_workloads: int  # coverage.gpuWorkloads
    not_checked: list[tuple[str, int, str | None]]  # (kind, line, reason) of coverage.notChecked; None: any reason
    objects: int  # summary.objects
    shows: str  # what the file stands for


CASES = [
    pytest.param(Case('R1',
             'GoogleCloudPlatform__kubernetes-engine-samples/ai-ml__verl-on-gke__'
             'ray-cluster-auto.yaml',
             '5431c8db3b5a89aa3f529f38b601cc329dd2a1ff493fd7bf5bd5f24a9fd1047f',
             1, [],
             [
              ('yaml-non-string-value', 104,
               '/spec/workerGroupSpecs/0/template/spec/nodeSelector/cloud.google.com~1gke-accelerator-count')],
             [
              (14, ("document 1 looks like an unrendered template ('${GPU_TYPE}'); skipped (render it "
                'first: envsubst, helm template)'))],
             1, [
              ('RayCluster', 14, "template not rendered: '${GPU_TYPE}' (render it first: envsubst, helm template)")], 0,
             "RayCluster for envsubst: after it, L104 'gke-accelerator-count: 8' is still an "
             'unquoted int in a nodeSelector, which the API server rejects (cannot unmarshal number '
             'into a string); the GPU worker is a not-checked record (template not rendered).'),
         marks=pytest.mark.xfail(strict=True, reason=(
             "compatcheck skips the whole document as an unrendered template ('${GPU_TYPE}') before "
             "the rules run, so the unquoted int 8 at L104 in the GPU worker's nodeSelector, which "
             'envsubst leaves as it is and the API server rejects, gets no yaml-non-string-value '
             'finding'))),
    Case('R2',
         'NVIDIA__dcgm-exporter/grafana__dcgm-exporter-dashboard.json',
         '7c2172e582524efb70d9f585502366f7fec22b2464c3b89f75418ca648353e71',
         0, [],
         [],
         [],
         0, [], 0,
         'A Grafana dashboard (strict JSON, no kind): not a Kubernetes object, skipped quietly like '
         'any non-Kubernetes JSON: no error, no finding, no object.'),
    Case('R3',
         'NVIDIA__dcgm-exporter/.devcontainer__devcontainer.json',
         '4793619e6abadaf101ab57444e60741abbf82b76422b91d474c6f384a86a1740',
         0, [],
         [],
         [],
         0, [], 0,
         "JSON with comments (a '//' line before the '{'): read as JSON, not YAML; not a Kubernetes "
         "object, skipped quietly (it used to be an 'invalid YAML' error, exit 2)."),
    Case('R4',
         'GoogleCloudPlatform__kubernetes-engine-samples/ai-ml__infw-gw__examples__getting-started__'
         'dashboard.json',
         '3ef13878e73a62c862865c7bb744693105131d60a944f42383e02f66c9c2c820',
         0, [],
         [],
         [],
         0, [], 0,
         "A Cloud Monitoring dashboard headed by a '/* ... */' licence, CRLF: read as JSON with "
         'comments, not a Kubernetes object, skipped quietly (it used to be read as YAML and named '
         "an unrendered template for '${__interval}')."),
    Case('R5',
         'kserve__kserve/charts__kserve-llmisvc-resources__values.schema.json',
         '4b030d7d8f5dcebcdf5f4096f82dd4537e1553f4fd41a079017a7c3a2963a7eb',
         0, [],
         [],
         [],
         0, [], 0,
         'A JSON Schema (Helm values schema): not a Kubernetes object, skipped quietly.'),
    Case('R6',
         'ray-project__kuberay/dashboard__package.json',
         '2c8c151082cca6f2b08bf8c7f1b41d8d5a0f56199d8805e3c4647f47b5ca260e',
         0, [],
         [],
         [],
         0, [], 0,
         'A package.json: not a Kubernetes object, skipped quietly.'),
    Case('R7',
         'triton-inference-server__server/deploy/gcp/Chart.yaml',
         '60663d5d2c859f2074f2ac18f9b1c95b91652df6829cc9ba692fd834a35c5075',
         0, [],
         [],
         [],
         0, [], 0,
         "A chart's Chart.yaml (apiVersion v1, no kind): no Kubernetes object, nothing to lint, no "
         'error.'),
    Case('R8',
         'triton-inference-server__server/deploy/gcp/values.yaml',
         '856c08e885f328ceb696f269daff2ec8f7c02861cdb79c9f3ab47f5f0f56b5c1',
         0, [],
         [],
         [
          (None, ('a Helm values file, not a manifest: skipped (lint the chart with --helm-chart DIR -f '
            'values.yaml)'))],
         0, [], 0,
         "A chart's values.yaml: skipped with the note to lint the chart with --helm-chart "
         '(test_the_triton_chart_renders_and_is_linted).'),
    Case('R9',
         'triton-inference-server__server/deploy/gcp/templates/_helpers.tpl',
         'db7beeb7b3577c9542251c470c77bca87c45e9566c5293da84e0bb7f44390e35',
         0, [],
         [],
         [
          (27, ('looks like an unrendered template ({{ ... }} or ${VAR}); skipped the rest of the '
            'document (render it first, e.g. helm template)'))],
         0, [], 0,
         "A chart's _helpers.tpl named on the command line: {{ define }} blocks read as an "
         'unrendered template, skipped with a note, no error.'),
    Case('R10',
         'triton-inference-server__server/deploy/gcp/templates/deployment.yaml',
         'ab2b90369b5fc0d31e7dc231d56d11130a7ca9fd465c583c7143c41174f0973a',
         0, [],
         [],
         [(30, 'document 1 looks like an unrendered template ({{ ... }}); skipped')],
         1, [
          ('Deployment', 57, ("placeholder in a quantity: nvidia.com/gpu: '{{ .Values.image.numGpus }}' in a "
                              'template that does not read as YAML (render it first: helm template, or lint the '
                              'chart with --helm-chart DIR)'))], 0,
         "The Triton chart's GPU Deployment template (nvidia.com/gpu: {{ .Values.image.numGpus "
         '}} at L57), linted without rendering: it does not read as YAML (name: {{ template ... }} is a flow '
         'mapping), so it is skipped with a template note; its text asks for a GPU in a container\'s limits, so it '
         'ends with a not-checked record at the request\'s line.'),
    Case('R11',
         'triton-inference-server__server/deploy/gcp/templates/service.yaml',
         '821766123786cd18c8f638f55e01a10ecd37c8c565afc29b2069adb7569a7b10',
         0, [],
         [],
         [
          (30, 'document 1 looks like an unrendered template ({{ ... }}); skipped'),
          (56, 'document 2 looks like an unrendered template ({{ ... }}); skipped')],
         0, [], 0,
         'Three templated documents: the two Services are skipped with template notes, the '
         'ServiceMonitor holds no pod spec; no error.'),
    Case('R12',
         'triton-inference-server__server/deploy/gcp/dashboard.json',
         'fb6dcccedb63637103943bcbfe22d71b876207582bb0b234a610f22fa5d14ee5',
         0, [],
         [],
         [],
         0, [], 0,
         "A Grafana dashboard in a chart's root folder: skipped quietly, as in R2."),
    Case('R13',
         'kubeai-project__kubeai/charts__kubeai__values.yaml',
         'a82d89225b123d94e11f2999f2ace31c3ecdc1a915030c232e40edff9ea87e8b',
         0, [],
         [],
         [
          (None, ('a Helm values file, not a manifest: skipped (lint the chart with --helm-chart DIR -f '
            'charts__kubeai__values.yaml)'))],
         0, [], 0,
         "KubeAI's chart values (resourceProfiles with nvidia.com/gpu) named '*__values.yaml': a "
         'Helm values file, skipped with the --helm-chart note.'),
    Case('R14',
         'kubeai-project__kubeai/charts__models__values.yaml',
         '5cf3e45ee141bd4906545643854778b8c7a9b20debdcd19f69757e8527642350',
         0, [],
         [],
         [
          (None, ('a Helm values file, not a manifest: skipped (lint the chart with --helm-chart DIR -f '
            'charts__models__values.yaml)'))],
         0, [], 0,
         "KubeAI's model catalogue values (no kind, no apiVersion): a Helm values file, skipped with "
         'the --helm-chart note.'),
    Case('R15',
         'aws-samples__awsome-distributed-training/1.architectures__7.sagemaker-hyperpod-eks__'
         'slinky-slurm__g5__g5-values.yaml',
         'f5c43162a4cc7bcdbac8df6016401da75e64876d2a5ba83957903a87d4a27a2f',
         0, [],
         [],
         [
          (None, ('a Helm values file, not a manifest: skipped (lint the chart with --helm-chart DIR -f '
            '1.architectures__7.sagemaker-hyperpod-eks__slinky-slurm__g5__g5-values.yaml)'))],
         0, [], 0,
         "Slinky Slurm Helm values 'g5-values.yaml' (anchors, kubernetes.io/os next to "
         'nvidia.com/gpu, no final newline): a Helm values file, skipped with the --helm-chart note.'),
    Case('R16',
         'llm-d__llm-d-benchmark/config__templates__values__defaults.yaml',
         '5d0472938f8ed432af03a026186189a9db1567bc3394d97aab4a6d0915e3c760',
         0, [],
         [],
         [
          (None, ('a Helm values file, not a manifest: skipped (lint the chart with --helm-chart DIR -f '
            'config__templates__values__defaults.yaml)'))],
         0, [], 0,
         "llm-d defaults from a 'values' folder (anchors, aliases and merge keys, all of which "
         'kubectl reads): no error; skipped with the --helm-chart note.'),
    Case('R17',
         'aws-samples__awsome-distributed-training/3.test_cases__pytorch__FSDP__kubernetes__'
         'llama3_1_8b-fsdp.yaml',
         '9a9ab05f9fa57a66e8b744b3573bcb13b16631c6db79ebacba64b4b8922d7dd5',
         0, [],
         [],
         [
          (1, ("document 1 looks like an unrendered template ('${IMAGE_URI}'); skipped (render it first: "
            'envsubst, helm template)'))],
         1, [
          ('PyTorchJob', 1, "template not rendered: '${IMAGE_URI}' (render it first: envsubst, helm template)")], 0,
         'A PyTorchJob for envsubst ($NUM_NODES, ${IMAGE_URI}, $GPU_PER_NODE beside an EFA '
         'resource): skipped with a template note and a not-checked record.'),
    Case('R18',
         'GoogleCloudPlatform__kubernetes-engine-samples/autoscaling__custom-compute-classes__'
         'reservations__deployment-gpu.yaml',
         'f70d9e697bce188947c6652811b3aa5ad2108039d9156f85287af503f5193e46',
         0, [],
         [],
         [
          (16, ("document 1 looks like an unrendered template ('${ACCELERATOR_QUANTITY}'); skipped "
            '(render it first: envsubst, helm template)'))],
         1, [
          ('Deployment', 16, ("placeholder in a quantity: '${ACCELERATOR_QUANTITY}' (render it first: envsubst, helm "
            'template)'))], 0,
         'A Deployment with nvidia.com/gpu: ${ACCELERATOR_QUANTITY} and a trailing empty document: '
         "not checked, 'placeholder in a quantity'."),
    Case('R19',
         'aws-samples__aws-do-eks/Container-Root__eks__deployment__gpu-profile__profile.yaml',
         '6c2abc34b9049fe28237f40d78b263651942abcc80b060fcfae8e3f548892226',
         0, [],
         [],
         [
          (1, ("document 1 looks like an unrendered template ('${REGISTRY}/gpu-profile'); skipped "
            '(render it first: envsubst, helm template)'))],
         1, [
          ('MPIJob', 1, ("template not rendered: '${REGISTRY}/gpu-profile' (render it first: envsubst, helm "
            'template)'))], 0,
         'An MPIJob v2beta1 with ${REGISTRY} images and odd (legal) indentation, nvidia.com/gpu: 8 '
         'beside EFA and hugepages: template not rendered, one not-checked record.'),
    Case('R20',
         'GoogleCloudPlatform__kubernetes-engine-samples/ai-ml__infw-gw__examples__getting-started__'
         'inference-pool-variables.yaml',
         '33d3b2bb9f009032413f721565ac7a1bbecd2a72852f10b440be299c205986de',
         0, [],
         [],
         [
          (28, ("document 2 looks like an unrendered template ('${SERVICE_TYPE:-ClusterIP}'); skipped "
            '(render it first: envsubst, helm template)')),
          (44, ("document 3 looks like an unrendered template ('${READINESS_PERIOD:-10}'); skipped "
            '(render it first: envsubst, helm template)'))],
         0, [], 0,
         'CRLF, ${VAR:-default} placeholders GNU envsubst leaves as they are, an InferencePool '
         'without apiVersion: no GPU; the templated Service and Deployment are skipped with notes, '
         'no error.'),
    Case('R21',
         'ray-project__kuberay/historyserver__config__raycluster-gcs.yaml',
         '2984e3d10569a82b376910b1825fc96f9ede6749779640542a7ec60c7c3ebce7',
         0, [],
         [],
         [
          (3, ("document 1 looks like an unrendered template ('${COLLECTOR_IMAGE}'); skipped (render it "
            'first: envsubst, helm template)'))],
         0, [], 0,
         'A RayCluster with an anchor on an env value reused as mountPath and value: read fine, '
         'skipped with a note for ${COLLECTOR_IMAGE}; no GPU, no record.'),
    Case('R22',
         'Azure__aks-engine/test__e2e__kubernetes__workloads__cuda-vector-add.yaml',
         'bebc0825938c5cdf62db137eedf3911b119012b02c1d0458728b8863d6edaddb',
         0, [],
         [],
         [],
         0, [], 1,
         'A CUDA Job with kubernetes.io/os and accelerator: nvidia selectors but no GPU request: '
         'linted, not a GPU workload, nothing to say.'),
    Case('R23',
         'Mellanox__network-operator/example__rdma-gpu-test-pod1.yml',
         'd002c26f6e08a151774689047ecfdcf11365cc529cab3ef7c18454a550b69da3',
         0, [],
         [('cuda-runtime-unknown', 20, '/spec/containers/0/image')],
         [],
         1, [
          ('Pod', 20, ("image CUDA unknown: no image pattern recognises 'mellanox/cuda-perftest' (container "
            'rdma-gpu-test-ctr)')),
          ('Pod', 14, 'no nodes known: no --nodes file, and its node selection pins no GPU or driver')], 1,
         'nvidia.com/gpu beside rdma/rdma_shared_device_a (GPUDirect RDMA): only '
         'cuda-runtime-unknown for the image, nothing about the RDMA resource; not checked (image, '
         'no nodes).'),
    Case('R24',
         'Mellanox__network-operator/example__hostdevice-network-pod1.yml',
         '4277d078ec6a08612cd82b215905c6b8644b6789ecf546940521fe2ba7af29ea',
         0, [],
         [],
         [],
         0, [], 1,
         'nvidia.com/hostdev (a NIC VF under nvidia.com): not a GPU, no finding, no record.'),
    Case('R25',
         'Mellanox__network-operator/example__sriov-network__sriov-network-pod1.yaml',
         '363ee83def88014941c4cf902ab3c759c674986f6e5e42d2651d8ac5fa032e51',
         0, [],
         [],
         [],
         0, [], 1,
         'nvidia.com/sriovlegacy (an SR-IOV VF under nvidia.com): not a GPU, no finding, no record.'),
    Case('R26',
         'Mellanox__k8s-rdma-shared-dev-plugin/example__test-hca-pod.yaml',
         '7e11609ebc39dfad35077cbeeafe0196b20e626bd875851917a40f3589ed7a76',
         0, [],
         [],
         [],
         0, [], 1,
         'rdma/hca_shared_devices_a in limits only: not a GPU, no finding, no record.'),
    Case('R27',
         'NVIDIA__deepops/workloads__examples__k8s__tensorflow-mpi-job.yml',
         'af1032aae7446c5209d95e80533c4b1e2d70ab9d37cec4fb11f598a68400e793',
         0, [],
         [
          ('cuda-runtime-unknown', 48, '/spec/mpiReplicaSpecs/Worker/template/spec/containers/0/image')],
         [],
         1, [
          ('MPIJob', 48, ('image CUDA unknown: version 21.03 of ngc-tensorflow is not in the image table (container '
            'tensorflow-mpi-job-container)')),
          ('MPIJob', 46, 'no nodes known: no --nodes file, and its node selection pins no GPU or driver')], 1,
         'A CRLF MPIJob kubeflow.org/v1alpha2 with nvidia.com/gpu: 1: read as kubectl reads it, '
         'linted; the NGC TF 21.03 image is not in the table (cuda-runtime-unknown).'),
    Case('R28',
         'kaito-project__kaito/examples__inference__arc-examples__kaito_workspace_phi_4_mini.yaml',
         'b7a6a7a853ba497c017db331c002bda6c4c5c92857905ecfd7ffb7f6928a05cb',
         0, [],
         [],
         [],
         1, [
          ('Workspace', 6, ("GPU request not read: '<your-vm-sku>' is not a profile the workload-kinds table "
                            'knows: its GPUs are unknown')),
          ('Workspace', 13, 'no nodes known: no --nodes file, and its node selection pins no GPU or driver')], 1,
         "A Kaito Workspace (GPU inference preset, instanceType '<your-vm-sku>' placeholder), "
         'CRLF with no final line end: read fine; its GPUs come from resource.instanceType (a VM SKU, '
         "which the Workspace row's table of Kaito's NVIDIA SKUs maps to GPUs), and a placeholder is no SKU: a "
         'not-checked record at L6 names it.'),
    Case('R29',
         'aws-samples__aws-do-eks/Container-Root__eks__deployment__aws-vpc-cni__cni-efa.yaml',
         '86603eb490806c6c84864d1070045d9a2304300f8bed8bda5b8034ddf4e67b42',
         0, [],
         [],
         [],
         0, [], 2,
         "Five documents ending with '...' and no newline, kubernetes.io/os affinity on the VPC CNI "
         'DaemonSet: read as kubectl reads them, 2 objects, no error.'),
    Case('R30',
         'awslabs__data-on-eks/data-stacks__starrocks-on-eks__examples__tpcds-benchmark.yaml',
         '603453e1dab69ed69ddd2adf7bff2c97c20fab25fb0fbf2537c293a4680c63db',
         0, [],
         [],
         [],
         0, [], 1,
         'Tabs inside block scalars (SQL in a ConfigMap), 5070 lines: legal YAML, read without '
         'error; the Job has no GPU.'),
]


def _case(param: Any) -> Case:
    return param if isinstance(param, Case) else param.values[0]


IDS = [f"{_case(c).ref}-{_case(c).path.rsplit('/', 1)[-1].rsplit('__', 1)[-1]}" for c in CASES]


def lint(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    if env is None:
        proc = run("lint", *args, "--format", "json")
    else:
        import subprocess
        import sys

        proc = subprocess.run([sys.executable, "-m", "compatcheck", "lint", *args, "--format", "json"],
                              capture_output=True, text=True, cwd=ROOT, env={**os.environ, **env}, timeout=300)
        assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_the_table_names_every_file() -> None:
    folder = shared(FOLDER)
    files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert files - {"SOURCES.md", ".gitattributes"} == {_case(c).path for c in CASES}
    assert [_case(c).ref for c in CASES] == [f"R{i}" for i in range(1, 31)]


@pytest.mark.parametrize("case", [_case(c) for c in CASES], ids=IDS)  # without the xfail marks: pins hold for all
def test_the_files_are_the_pinned_bytes(case: Case) -> None:
    # The outcomes below were decided for these bytes: a changed file fails here, by name.
    path = shared(FOLDER) / case.path
    assert hashlib.sha256(path.read_bytes()).hexdigest() == case.sha256, f"../shared/{FOLDER}/{case.path} changed"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_each_file_reads_as_kubectl_and_the_api_server_do(case: Case) -> None:
    path = str(shared(FOLDER) / case.path)
    status, out = lint(path)
    assert {e["file"] for e in out["errors"]} | {f["file"] for f in out["findings"]} <= {path}
    assert [(e["line"], e["message"]) for e in out["errors"]] == case.errors, case.shows
    assert [(f["rule"], f["line"], f["pointer"]) for f in out["findings"]] == case.findings, case.shows
    assert [(s["line"], s["reason"]) for s in out["skipped"]] == case.notes, case.shows
    coverage = out["coverage"]
    assert coverage["gpuWorkloads"] == case.gpu_workloads, case.shows
    assert [(n["object"]["kind"], n["line"], n["reason"] if reason is not None else None)
            for n, (_k, _l, reason) in zip(coverage["notChecked"], case.not_checked, strict=False)] == \
        case.not_checked and len(coverage["notChecked"]) == len(case.not_checked), case.shows
    assert out["summary"]["objects"] == case.objects, case.shows
    assert status == case.status, case.shows


def test_a_folder_walk_reads_them_all_without_an_error() -> None:
    # As CI over a monorepo would: the dotfile (JSON with comments) is read and skipped quietly, the templates are
    # read as plain YAML and skipped with notes, _helpers.tpl is not a manifest file; no error, exit 0.
    folder = shared(FOLDER)
    status, out = lint(str(folder))
    assert (status, out["errors"]) == (0, [])
    expected = {(c.path, rule, line, pointer) for c in CASES if isinstance(c, Case)
                for rule, line, pointer in c.findings}
    assert {(Path(f["file"]).relative_to(folder).as_posix(), f["rule"], f["line"], f["pointer"])
            for f in out["findings"]} == expected
    assert out["summary"]["files"] == len(CASES) - 1  # all but _helpers.tpl


def test_the_triton_chart_renders_and_is_linted(helm_dir: str) -> None:
    # The whole chart rendered with the real helm (values.yaml: one GPU, tritonserver 26.07): the Deployment, two
    # Services and the ServiceMonitor; the GPU Deployment's image is known, no node is, so one not-checked record on
    # the template's line, and dashboard.json in the chart's root is no template.
    chart = str(shared(FOLDER) / CHART)
    status, out = lint("--helm-chart", chart, env={"PATH": f"{helm_dir}:{os.environ['PATH']}"})
    assert (status, out["errors"], out["findings"], out["skipped"]) == (0, [], [], [])
    assert (out["summary"]["objects"], out["summary"]["documentsWithoutPodSpecs"]) == (3, 1)
    (record,) = out["coverage"]["notChecked"]
    # The template's own file, as the user would open it (named relative to the working directory).
    assert (ROOT / record.pop("file")).resolve() == (Path(chart) / "templates" / "deployment.yaml").resolve()
    assert out["coverage"] == {"gpuWorkloads": 1, "checked": 0, "notChecked": [{
        "object": {"kind": "Deployment", "namespace": "default", "name": "release-triton-inference-server"},
        "line": 49,
        "reason": "no nodes known: no --nodes file, and its node selection pins no GPU or driver"}]}

