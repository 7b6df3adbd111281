"""The workload-kinds data table (rules/data/workload-kinds.yaml): its rows are schema-valid and sourced, older API
versions of known operators read as they were written, an admin's row adds a custom resource end to end (lint,
webhook review, the chart's routing) without code, and the chart's webhook.customResources is the table's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from compatcheck.core.admission import AdmissionSettings, review
from compatcheck.core.checks.base import EvalContext
from compatcheck.core.crl import CrlIndex
from compatcheck.core.workloads import custom_resource_routes, pod_targets, workload_kind
from compatcheck.io.loader import RuleLoadError, builtin_kinds, load_rules
from tests.conftest import ROOT, admission_review

TABLE = ROOT / "rules" / "data" / "workload-kinds.yaml"
R470 = {"nvidia.com/cuda.driver-version.major": "470"}
MESSAGE = ("the pod's node selection admits only drivers for CUDA 11.4, too old for image CUDA 12.4 (image "
           "nvidia/cuda:12.4.1-base-ubuntu22.04); it needs a driver from branch >= 550")  # (the minor-version hint only
# where the platform declares it: docs/driver-policy.md)


def rows() -> list[dict[str, Any]]:
    data: dict[str, Any] = YAML(typ="safe").load(TABLE.read_text())
    out: list[dict[str, Any]] = data["rows"]
    return out


def test_every_row_names_a_source_of_the_table() -> None:
    data = YAML(typ="safe").load(TABLE.read_text())
    assert [r for r in data["rows"] if r["source"] not in data["sources"]] == []


def test_no_two_built_in_rows_claim_the_same_version_of_a_kind() -> None:
    seen: dict[tuple[str, str, str], int] = {}
    clashes = []
    for i, row in enumerate(rows()):
        for g in row["groups"]:
            for k in row["kinds"]:
                for v in row.get("versions") or ["*"]:
                    if (g, k, v) in seen or (g, k, "*") in seen:
                        clashes.append((g, k, v, seen.get((g, k, v)), i))
                    seen[(g, k, v)] = i
    assert clashes == []


def test_the_charts_custom_resources_are_the_tables() -> None:
    """values.yaml's webhook.customResources is what ``compatcheck rules kinds --format chart-values`` prints for
    the built-in table, rule for rule, in order."""
    values = YAML(typ="safe").load((ROOT / "charts" / "compatcheck" / "values.yaml").read_text())
    assert values["webhook"]["customResources"] == custom_resource_routes(builtin_kinds())
    printed = subprocess.run([sys.executable, "-m", "compatcheck", "rules", "kinds", "--format", "chart-values"],
                             capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert YAML(typ="safe").load(printed)["customResources"] == values["webhook"]["customResources"]


# ---------------------------------------------------------------------------------------------- older versions


def container(name: str = "main", gpus: Any = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "nvidia/cuda:12.4.1-base-ubuntu22.04"}
    if gpus is not None:
        c["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    return c


def template(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"nodeSelector": R470, "containers": list(containers)}}


def test_mpijob_v1alpha1_reads_its_template_and_the_jobs_gpu_total() -> None:
    """kubeflow.org/v1alpha1 MPIJob: one spec.template, and spec.gpus, the job's total GPUs (the operator spread
    them over its workers): each pod asks for at least one."""
    job = {"apiVersion": "kubeflow.org/v1alpha1", "kind": "MPIJob", "metadata": {"name": "m"},
           "spec": {"gpus": 16, "template": template(container("tf"))}}
    (t,) = pod_targets(job)
    assert t.pointer == "/spec/template/spec"
    assert [(c.name, c.implied_gpu, c.implied_pointer) for c in t.containers] == [
        ("tf", {"nvidia.com/gpu": 1}, "/spec/gpus")]
    newer = {**job, "apiVersion": "kubeflow.org/v2beta1",
             "spec": {"mpiReplicaSpecs": {"Worker": {"template": template(container("w", 1))}}}}
    assert [t.pointer for t in pod_targets(newer)] == ["/spec/mpiReplicaSpecs/Worker/template/spec"]


def test_tfjob_v1alpha1_reads_the_replica_spec_list() -> None:
    job = {"apiVersion": "kubeflow.org/v1alpha1", "kind": "TFJob", "metadata": {"name": "t"},
           "spec": {"replicaSpecs": [{"tfReplicaType": "MASTER", "template": template(container("tensorflow", 1))},
                                     {"tfReplicaType": "WORKER", "template": template(container("tensorflow", 1))}]}}
    assert [t.pointer for t in pod_targets(job)] == ["/spec/replicaSpecs/0/template/spec",
                                                     "/spec/replicaSpecs/1/template/spec"]
    # v1 has no replicaSpecs list: the same object as v1 has no pod spec where v1 keeps it
    assert pod_targets({**job, "apiVersion": "kubeflow.org/v1"}) == []


@pytest.mark.parametrize("version", ["v1alpha1", "v1"])
def test_ray_v1alpha1_reads_as_v1(version: str) -> None:
    ray = {"apiVersion": f"ray.io/{version}", "kind": "RayCluster", "metadata": {"name": "r"},
           "spec": {"headGroupSpec": {"template": template(container("head"))},
                    "workerGroupSpecs": [{"template": template(container("w", 1))}]}}
    assert [t.pointer for t in pod_targets(ray)] == ["/spec/headGroupSpec/template/spec",
                                                     "/spec/workerGroupSpecs/0/template/spec"]


def test_dynamo_versions_read_their_own_layout_and_an_unknown_version_reads_both() -> None:
    spec = {"services": {"decode": {"resources": {"limits": {"gpu": "2"}},
                                    "extraPodSpec": {"mainContainer": {"image": "nvcr.io/x:1"}}}},
            "components": [{"podTemplate": template(container("worker", 1))}]}
    obj = {"kind": "DynamoGraphDeployment", "metadata": {"name": "d"}, "spec": spec}
    assert [t.pointer for t in pod_targets({**obj, "apiVersion": "nvidia.com/v1alpha1"})] == [
        "/spec/services/decode/extraPodSpec"]
    assert [t.pointer for t in pod_targets({**obj, "apiVersion": "nvidia.com/v1beta1"})] == [
        "/spec/components/0/podTemplate/spec"]
    assert [t.pointer for t in pod_targets({**obj, "apiVersion": "nvidia.com/v2"})] == [
        "/spec/services/decode/extraPodSpec", "/spec/components/0/podTemplate/spec"]


def test_kfserving_v1alpha2_reads_default_and_canary_components() -> None:
    """serving.kubeflow.org/v1alpha2: spec.default and spec.canary, each component a framework field or
    custom.container, one container each."""
    isvc = {"apiVersion": "serving.kubeflow.org/v1alpha2", "kind": "InferenceService", "metadata": {"name": "i"},
            "spec": {"default": {"predictor": {"tensorflow": {"storageUri": "s3://m", "resources": {
                "limits": {"nvidia.com/gpu": 1}}}}},
                     "canary": {"predictor": {"custom": {"container": container("c", 1)}},
                                "transformer": {"custom": {"container": container("t")}}}}}
    assert [(t.pointer, [(c.name, c.pointer) for c in t.containers]) for t in pod_targets(isvc)] == [
        ("/spec/default/predictor", [("tensorflow", "/spec/default/predictor/tensorflow")]),
        ("/spec/canary/predictor", []),
        ("/spec/canary/predictor/custom", [("c", "/spec/canary/predictor/custom/container")]),
        ("/spec/canary/transformer/custom", [("t", "/spec/canary/transformer/custom/container")])]


@pytest.mark.parametrize(("api_version", "kind", "group"), [
    ("apps/v1beta2", "Deployment", "apps"), ("apps/v1beta1", "StatefulSet", "apps"),
    ("batch/v1beta1", "CronJob", "batch"), ("kubeflow.org/v1beta2", "PyTorchJob", "kubeflow.org"),
    ("kubeflow.org/v1alpha2", "MPIJob", "kubeflow.org"), ("ray.io/v1alpha1", "RayJob", "ray.io"),
    ("serving.kubeflow.org/v1beta1", "InferenceService", "serving.kubeflow.org")])
def test_older_versions_are_rows_of_the_table(api_version: str, kind: str, group: str) -> None:
    wk = workload_kind({"apiVersion": api_version, "kind": kind})
    assert wk is not None and group in wk.groups and api_version.split("/")[1] in wk.versions


# ---------------------------------------------------------------------------------------------- an admin's kinds

ADMIN_TABLE = """\
apiVersion: compatcheck/v1
table: workload-kinds
sources:
  MINE: our platform team's ModelServer operator, api/v1/modelserver_types.go
rows:
  - groups: [serving.example.com]
    kinds: [ModelServer]
    versions: [v1]
    locations:
      - path: /spec/server/template
      - path: /spec/canary
        shape: podspec
        singleContainers: [container]
        gpuFields:
          - {path: ../profile, values: {a100-small: {nvidia.com/gpu: 1}, a100-large: {nvidia.com/gpu: 4}}}
          - {path: ../migProfile, resourceFromValue: "nvidia.com/mig-{}"}
        defaults: {/nodeSelector: {nvidia.com/cuda.driver-version.major: "470"}}
    source: MINE
"""


def model_server() -> dict[str, Any]:
    return {"apiVersion": "serving.example.com/v1", "kind": "ModelServer",
            "metadata": {"name": "llm", "namespace": "team-a"},
            "spec": {"server": {"replicas": 2, "template": template(container("server", 1))}}}


@pytest.fixture
def admin_dir(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "kinds.yaml").write_text(ADMIN_TABLE)
    return tmp_path


def test_an_admin_kind_is_linted_end_to_end(admin_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    manifest = tmp_path / "in" / "m.yaml"  # not in the rules directory (tmp_path too)
    YAML().dump(model_server(), manifest)
    args = [sys.executable, "-m", "compatcheck", "lint", str(manifest), "--format", "json"]
    with_row = subprocess.run([*args, "--rules-dir", str(admin_dir)], capture_output=True, text=True, cwd=ROOT)
    found = [(f["rule"], f["pointer"], f["container"], f["message"]) for f in json.loads(with_row.stdout)["findings"]]
    assert found == [("cuda-affinity-mismatch", "/spec/server/template/spec/nodeSelector", "server", MESSAGE)]
    assert with_row.returncode == 1


def test_an_admin_kind_is_reviewed_by_the_webhook(admin_dir: Path) -> None:
    loaded = load_rules([str(admin_dir)])
    ctx = EvalContext(loaded.kb, None, CrlIndex())
    body, decision = review(admission_review(model_server(), uid="adm"), "validate", loaded.ruleset, ctx,
                            AdmissionSettings())
    assert [(f.rule_id, f.pointer, f.container, f.message) for f in decision.findings] == [
        ("cuda-affinity-mismatch", "/spec/server/template/spec/nodeSelector", "server", MESSAGE)]
    assert body["response"]["allowed"] is False
    # the built-in table alone does not know the kind: its pod template is found by its shape (tests/test_discovery.py)
    builtin = load_rules()
    assert workload_kind(model_server(), builtin.kb.kinds) is None
    assert workload_kind(model_server(), loaded.kb.kinds) is not None


def test_an_admin_kind_is_routed_by_the_chart_values_it_prints(admin_dir: Path) -> None:
    printed = subprocess.run([sys.executable, "-m", "compatcheck", "rules", "kinds", "--rules-dir", str(admin_dir),
                              "--format", "chart-values"], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    routes = YAML(typ="safe").load(printed)["customResources"]
    assert routes[0] == {"apiGroups": ["serving.example.com"], "resources": ["modelservers"]}
    assert routes[1:] == custom_resource_routes(builtin_kinds())


def test_an_admin_rows_gpu_fields_and_defaults(admin_dir: Path) -> None:
    kinds = load_rules([str(admin_dir)]).kb.kinds
    obj = model_server()
    obj["spec"]["canary"] = {"container": container("canary")}
    for profile, mig, implied, pointer in [
            ("a100-large", None, {"nvidia.com/gpu": 4}, "/spec/profile"),
            (None, "1g.10gb", {"nvidia.com/mig-1g.10gb": 1}, "/spec/migProfile")]:
        obj["spec"].pop("profile", None)
        obj["spec"].pop("migProfile", None)
        if profile:
            obj["spec"]["profile"] = profile
        if mig:
            obj["spec"]["migProfile"] = mig
        _server, canary = pod_targets(obj, kinds)
        assert [(c.name, c.implied_gpu, c.implied_pointer) for c in canary.containers] == [
            ("canary", implied, pointer)]
        assert canary.unknown_gpu == []
        # the operator's default node selector, filled in where the spec has none; the object is not changed
        assert canary.spec["nodeSelector"] == R470 and "nodeSelector" not in obj["spec"]["canary"]
    obj["spec"] = {"profile": "h100-huge", "canary": {"container": container("canary")}}
    (canary,) = pod_targets(obj, kinds)
    assert [c.implied_gpu for c in canary.containers] == [{}]
    assert canary.unknown_gpu == [("/spec/profile", "'h100-huge' is not a profile the workload-kinds table knows: "
                                                    "its GPUs are unknown")]


@pytest.mark.parametrize(("row", "message"), [
    ("{groups: [x.io], kinds: [A], locations: [{path: /spec, shape: flat}], source: MINE}",
     "rows[0]: /locations/0: 'container' is a required property"),
    ("{groups: [x.io], kinds: [A], locations: [{path: spec}], source: MINE}",
     "rows[0]: /locations/0/path: 'spec' does not match"),
    ("{groups: [x.io], kinds: [A], locations: [], source: ELSEWHERE}",
     "rows[0]: source 'ELSEWHERE' is neither a key of sources nor a URL"),
])
def test_a_bad_admin_row_is_one_located_error(tmp_path: Path, row: str, message: str) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "kinds.yaml").write_text(ADMIN_TABLE.split("rows:")[0] + f"rows:\n  - {row}\n")
    with pytest.raises(RuleLoadError) as info:
        load_rules([str(tmp_path)])
    (problem,) = info.value.problems
    assert problem.path.endswith("kinds.yaml") and problem.line == 6
    assert message in problem.message


def test_the_chart_routes_an_admin_kind_from_the_values_it_prints(admin_dir: Path, tmp_path: Path,
                                                                   helm_dir: str) -> None:
    """The printed chart values, given to the chart as they are: the webhook configurations send ModelServers (in
    one rule of the custom-resources webhook) besides every built-in kind."""
    from tests.test_chart import by_kind, chart_routes, table_routes, template

    printed = subprocess.run([sys.executable, "-m", "compatcheck", "rules", "kinds", "--rules-dir", str(admin_dir),
                              "--format", "chart-values"], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    values = tmp_path / "values.yaml"
    values.write_text("webhook:\n" + "".join(f"  {line}\n" for line in printed.splitlines()))
    objs = template(str(Path(helm_dir) / "helm"), "-f", str(values))
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        (cfg,) = by_kind(objs, kind)
        routes = chart_routes(cfg)
        assert routes.pop(("serving.example.com", "modelservers")) == {"Namespaced"}
        assert set(routes) == set(table_routes())


def test_an_unknown_version_of_a_kind_with_defaults_in_two_rows_reads_both() -> None:
    from compatcheck.core.workloads import build_kind_table

    base: dict[str, Any] = {"groups": ["x.io"], "kinds": ["Srv"], "source": "s"}
    kinds = build_kind_table([
        {**base, "versions": ["v1"], "locations": [{"path": "/spec/a", "defaults": {"/nodeSelector": R470}}]},
        {**base, "versions": ["v2"], "locations": [{"path": "/spec/b"}]}])
    obj = {"apiVersion": "x.io/v3", "kind": "Srv", "metadata": {"name": "s"},
           "spec": {"a": template(container()), "b": template(container())}}
    assert [(t.pointer, t.spec["nodeSelector"]) for t in pod_targets(obj, kinds)] == [
        ("/spec/a/spec", R470), ("/spec/b/spec", R470)]
    assert [t.pointer for t in pod_targets({**obj, "apiVersion": "x.io/v2"}, kinds)] == ["/spec/b/spec"]
