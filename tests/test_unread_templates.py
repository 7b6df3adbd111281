"""Templates that do not read as YAML before rendering (a Helm template's ``{{- if }}`` lines): a document whose text
asks for a GPU in a container's limits or requests is a GPU workload, not checked, with a record at the request's
line (compatcheck.io.templates, compatcheck.io.lint); one that only mentions GPUs is not (never a false record)."""

from __future__ import annotations

import pytest

from compatcheck.io.lint import LintOptions, run_lint
from compatcheck.io.loader import Loaded
from compatcheck.io.templates import gpu_request

RENDER = "render it first: helm template, or lint the chart with --helm-chart DIR"

# An arena-style chart template: the GPU quantity inside {{- if }}, itself a template.
TFJOB = """\
{{- $gpuCount := .Values.gpuCount -}}
apiVersion: "kubeflow.org/v1"
kind: "TFJob"
metadata:
  name: {{ .Release.Name }}
  namespace: team-a
spec:
  tfReplicaSpecs:
    Worker:
      template:
        spec:
          containers:
            - name: tensorflow
              image: "{{ .Values.image }}"
              resources:
                limits:
                  {{- if gt (int $gpuCount) 0 }}
                  nvidia.com/gpu: {{ $gpuCount | quote }}
                  {{- end }}
"""

# A literal count in a template that does not parse ('{{- if }}' at column 0), then a Service in the same file.
DEPLOYMENT = """\
{{- if .Values.enabled }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: infer
spec:
  template:
    spec:
      containers:
        - name: server
          image: vllm/vllm-openai:v0.9.2
          resources:
            requests:
              cpu: 2
            limits:
              "nvidia.com/gpu": 2
{{- end }}
---
{{- if .Values.service }}
apiVersion: v1
kind: Service
metadata:
  name: infer
{{- end }}
"""

# Only mentions GPUs: a node selector label, a toleration, a comment, a count of 0, a quota, an autoscaler's limits,
# and a manifest embedded in a block scalar.
NOT_REQUESTS = {
    "selector.yaml": """\
{{- if .Values.gpu }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: labelled
spec:
  template:
    spec:
      nodeSelector:
        nvidia.com/gpu: "true"
      tolerations:
        - key: nvidia.com/gpu
          operator: Exists
      containers:
        - name: app
          image: busybox
          resources:
            limits:
              # nvidia.com/gpu: 1
              nvidia.com/gpu: 0
              cpu: 1
{{- end }}
""",
    "quota.yaml": """\
{{- if .Values.quota }}
apiVersion: v1
kind: ResourceQuota
metadata:
  name: gpus
spec:
  hard:
    requests.nvidia.com/gpu: 4
{{- end }}
""",
    "nodepool.yaml": """\
{{- if .Values.karpenter }}
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: gpu
spec:
  limits:
    nvidia.com/gpu: 8
{{- end }}
""",
    "embedded.yaml": """\
{{- if .Values.workflow }}
apiVersion: example.io/v1
kind: Pipeline
metadata:
  name: p
spec:
  script: |
    apiVersion: v1
    kind: Pod
    spec:
      containers:
        - image: nvidia/cuda:12.4.1-base-ubuntu22.04
          resources:
            limits:
              nvidia.com/gpu: 1
{{- end }}
""",
}


def lint(loaded: Loaded, texts: dict[str, str]) -> tuple[int, list[tuple[str | None, str | None, str | None, str,
                                                                       int | None, str]]]:
    report = run_lint(list(texts), loaded, LintOptions(), texts=texts)
    return report.gpu_workloads, [(n.obj.kind, n.obj.namespace, n.obj.name, n.path, n.line, n.reason)
                                  for n in report.not_checked]


def test_a_template_quantity_is_a_placeholder_record_at_its_line(loaded: Loaded) -> None:
    workloads, records = lint(loaded, {"charts/tfjob/templates/tfjob.yaml": TFJOB})
    assert workloads == 1
    assert records == [("TFJob", "team-a", None, "charts/tfjob/templates/tfjob.yaml", 18,
                        "placeholder in a quantity: nvidia.com/gpu: '{{ $gpuCount | quote }}' in a template that does "
                        f"not read as YAML ({RENDER})")]


def test_a_literal_count_is_a_template_not_rendered_record(loaded: Loaded) -> None:
    workloads, records = lint(loaded, {"templates/deployment.yaml": DEPLOYMENT})
    assert workloads == 1
    assert records == [("Deployment", None, "infer", "templates/deployment.yaml", 16,
                        "template not rendered: the document does not read as YAML before rendering; it asks for "
                        f"nvidia.com/gpu: 2 ({RENDER})")]


@pytest.mark.parametrize("name", sorted(NOT_REQUESTS))
def test_templates_that_only_mention_gpus_are_no_gpu_workload(loaded: Loaded, name: str) -> None:
    report = run_lint([name], loaded, LintOptions(), texts={name: NOT_REQUESTS[name]})
    assert (report.gpu_workloads, report.not_checked) == (0, [])
    assert [n.message for n in report.notes] == [
        "looks like an unrendered template ({{ ... }} or ${VAR}); skipped the rest of the document (render it first, "
        "e.g. helm template)"]


def test_each_document_of_a_file_is_one_workload(loaded: Loaded) -> None:
    # Two '---' parts asking for GPUs and one that does not: two records, each at its own request.
    text = DEPLOYMENT + "---\n" + TFJOB
    workloads, records = lint(loaded, {"t.yaml": text})
    assert workloads == 2
    assert [(kind, line) for kind, _ns, _n, _p, line, _r in records] == [("Deployment", 16), ("TFJob", 43)]


def test_the_text_reader_alone() -> None:
    found = gpu_request(TFJOB, line_offset=10)
    assert found is not None
    assert (found.line, found.resource, found.value, found.kind, found.api_version, found.name, found.namespace,
            found.has_container, found.placeholder) == (
        28, "nvidia.com/gpu", "{{ $gpuCount | quote }}", "TFJob", "kubeflow.org/v1", None, "team-a", True, True)
    mig = gpu_request("kind: Job\nspec:\n  containers:\n  - image: x\n    resources:\n      requests:\n"
                      "        nvidia.com/mig-1g.10gb: '1'\n")
    assert mig is not None and (mig.line, mig.resource, mig.value, mig.placeholder) == (
        7, "nvidia.com/mig-1g.10gb", "1", False)
    assert gpu_request("kind: Job\nspec:\n  resources:\n    limits:\n      nvidia.com/gpu:\n") is None
    assert all(gpu_request(t) is None for t in NOT_REQUESTS.values()
               if "NodePool" not in t and "ResourceQuota" not in t)


def test_a_template_of_a_kind_skipped_unparsed_is_still_read(loaded: Loaded) -> None:
    # A kind the table does not know whose text has no 'image' (the chart sets it in a helper) is skipped without
    # parsing; its containers' GPU request, indented under '{{- if }}', still makes it a GPU workload.
    text = """\
apiVersion: machinelearning.seldon.io/v1
kind: SeldonDeployment
metadata:
  name: sd
spec:
  predictors:
    - componentSpecs:
        - spec:
            containers:
              - name: inference
                resources:
                  limits:
                    {{- if gt (int .Values.gpus) 0 }}
                    nvidia.com/gpu: {{ .Values.gpus }}
                    {{- end }}
"""
    workloads, records = lint(loaded, {"sd.yaml": text})
    assert workloads == 1
    assert records == [("SeldonDeployment", None, "sd", "sd.yaml", 14,
                        "placeholder in a quantity: nvidia.com/gpu: '{{ .Values.gpus }}' in a template that does not "
                        f"read as YAML ({RENDER})")]
