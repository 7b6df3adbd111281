"""What a real kube-apiserver v1.36 serves of resource.k8s.io, and that compatcheck reads every served shape of a
claim, template and slice into the same model as the v1 the API server converts it to (issue #14). Also what the
API server does with a pod that names its claim in the pre-1.31 ``source`` shape (compatcheck's note says it)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from compatcheck.core.dra import api_version_note, read_claim_spec, read_slice
from tests.e2e.conftest import Webhook, binaries, create_node, namespace, wait_until
from tests.e2e.kapi import KubeAPIServer

ALL_VERSIONS = ("resource.k8s.io/v1beta1=true", "resource.k8s.io/v1beta2=true", "resource.k8s.io/v1alpha3=true")
NV = "gpu.nvidia.com"


@pytest.fixture(scope="module")
def kapi_all(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeAPIServer]:
    """An API server that also serves every resource.k8s.io version it has (--runtime-config)."""
    server = KubeAPIServer(binaries(), tmp_path_factory.mktemp("kapi-dra-versions"),
                           runtime_config=ALL_VERSIONS).start()
    yield server
    server.stop()


def served(kapi: KubeAPIServer) -> dict[str, list[str]]:
    """resource.k8s.io version -> the kinds it serves (discovery, subresources left out)."""
    group = json.loads(kapi.kubectl("get", "--raw", "/apis/resource.k8s.io").stdout)
    out = {}
    for v in group["versions"]:
        found = json.loads(kapi.kubectl("get", "--raw", f"/apis/resource.k8s.io/{v['version']}").stdout)
        out[v["version"]] = sorted(r["kind"] for r in found["resources"] if "/" not in r["name"])
    return out


def test_what_kubernetes_1_36_serves_of_resource_k8s_io(kapi: KubeAPIServer, kapi_all: KubeAPIServer) -> None:
    """By default only v1; v1beta1 and v1beta2 (the same four kinds, v1beta2 DeviceTaintRule too) with
    --runtime-config; v1alpha3 has no claim,
    template, class or slice any more; v1alpha2 is not even registered (the note compatcheck gives those)."""
    four = ["DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice"]
    assert served(kapi) == {"v1": four}
    assert served(kapi_all) == {"v1": four, "v1beta2": sorted([*four, "DeviceTaintRule"]), "v1beta1": four,
                                "v1alpha3": ["DeviceTaintRule", "ResourcePoolStatusRequest"]}


TEMPLATE_V1BETA1: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaimTemplate", "metadata": {"name": "two-a100"},
    "spec": {"spec": {"devices": {
        "requests": [
            {"name": "gpus", "deviceClassName": NV, "allocationMode": "ExactCount", "count": 2, "selectors": [
                {"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName.contains('A100')"}}]},
            {"name": "any", "firstAvailable": [
                {"name": "mig", "deviceClassName": "mig.nvidia.com"}, {"name": "all", "deviceClassName": NV,
                                                                       "allocationMode": "All"}]}],
        "constraints": [{"requests": ["gpus"], "matchAttribute": "gpu.nvidia.com/parentUUID"}]}}}}
TEMPLATE_V1BETA2 = {**TEMPLATE_V1BETA1, "apiVersion": "resource.k8s.io/v1beta2", "spec": {"spec": {"devices": {
    **TEMPLATE_V1BETA1["spec"]["spec"]["devices"], "requests": [
        {"name": "gpus", "exactly": {k: v for k, v in TEMPLATE_V1BETA1["spec"]["spec"]["devices"]["requests"][0].items()
                                     if k != "name"}},
        TEMPLATE_V1BETA1["spec"]["spec"]["devices"]["requests"][1]]}}}}


def _model(obj: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What compatcheck reads of a template, without the pointers (they name each shape's own fields)."""
    requests, sharing = read_claim_spec(obj["spec"]["spec"], "/spec/spec")
    return [(r.name, r.match_attributes, r.distinct_attributes, sharing,
             [(a.name, a.class_name, a.selectors, a.count) for a in r.alternatives]) for r in requests]


@pytest.mark.parametrize("template", [TEMPLATE_V1BETA1, TEMPLATE_V1BETA2], ids=["v1beta1", "v1beta2"])
def test_a_template_of_each_served_version_reads_as_the_v1_the_api_server_makes_of_it(
        kapi_all: KubeAPIServer, template: dict[str, Any]) -> None:
    ns = namespace(kapi_all.client(), "dra-versions")
    created = kapi_all.kubectl("create", "-n", ns, "-f", "-", stdin=json.dumps(template))
    # the API server's deprecation warning says what compatcheck's note says
    version = template["apiVersion"].split("/")[1]
    since, until = {"v1beta1": ("1.35", "1.38"), "v1beta2": ("1.36", "1.39")}[version]
    assert created.stderr == (f"Warning: resource.k8s.io/{version} ResourceClaimTemplate is deprecated in v{since}+, "
                              f"unavailable in v{until}+\n")
    assert f"is deprecated in Kubernetes {since}+ and unavailable in {until}+" in str(api_version_note(template))
    v1 = json.loads(kapi_all.kubectl("get", "-n", ns, "resourceclaimtemplates.v1.resource.k8s.io", "two-a100",
                                     "-o", "json").stdout)
    assert v1["apiVersion"] == "resource.k8s.io/v1" and "exactly" in v1["spec"]["spec"]["devices"]["requests"][0]
    assert _model(template) == _model(v1) == [
        ("gpus", ("gpu.nvidia.com/parentUUID",), (), None, [
            ("gpus", NV, ("device.attributes['gpu.nvidia.com'].productName.contains('A100')",), 2)]),
        ("any", (), (), None, [("any/mig", "mig.nvidia.com", (), 1), ("any/all", NV, (), None)])]


def test_a_v1beta1_slice_reads_as_the_v1_the_api_server_makes_of_it(kapi_all: KubeAPIServer) -> None:
    """v1beta1 devices are under ``basic``; the API server serves the same slice as v1 without it."""
    device = {"attributes": {"type": {"string": "mig"}, "profile": {"string": "1g.5gb"},
                             "productName": {"string": "NVIDIA A100-SXM4-40GB"},
                             "cudaComputeCapability": {"version": "8.0.0"}, "driverVersion": {"version": "550.54.15"},
                             "cudaDriverVersion": {"version": "12.4.0"}},
              "capacity": {"memory": {"value": "4864Mi"}, "multiprocessors": {"value": "14"}}}
    beta = {"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceSlice", "metadata": {"name": "n0-versions"},
            "spec": {"driver": NV, "nodeName": "n0", "pool": {"name": "n0", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-0-mig-19-0-1", "basic": device}]}}
    kapi_all.kubectl("create", "-f", "-", stdin=json.dumps(beta))
    v1 = json.loads(kapi_all.kubectl("get", "resourceslices.v1.resource.k8s.io", "n0-versions", "-o", "json").stdout)
    assert "basic" not in v1["spec"]["devices"][0]

    def model(obj: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [(d.name, d.node, d.labels, d.input.attributes, d.input.capacity) for d in read_slice(obj)]

    assert model(beta) == model(v1)
    assert len(model(v1)) == 1


def test_a_pod_naming_its_claim_under_source_is_rejected(kapi: KubeAPIServer) -> None:
    """The pre-1.31 ``source`` shape (kubernetes/kubernetes#125116): strict field validation (kubectl's default)
    rejects the unknown field; without it the field is dropped and the entry names no claim, which is invalid."""
    ns = namespace(kapi.client(), "dra-source")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "old"}, "spec": {
        "resourceClaims": [{"name": "gpu", "source": {"resourceClaimTemplateName": "gpu-template"}}],
        "containers": [{"name": "c", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
                        "resources": {"claims": [{"name": "gpu"}]}}]}}
    strict = kapi.kubectl("create", "-n", ns, "-f", "-", stdin=json.dumps(pod), check=False)
    assert (strict.returncode, strict.stderr.strip()) == (1, (
        'Error from server (BadRequest): error when creating "STDIN": Pod in version "v1" cannot be handled as a Pod: '
        'strict decoding error: unknown field "spec.resourceClaims[0].source"'))
    lax = kapi.kubectl("create", "-n", ns, "--validate=false", "-f", "-", stdin=json.dumps(pod), check=False)
    assert (lax.returncode, lax.stderr.strip()) == (1, (
        'The Pod "old" is invalid: spec.resourceClaims[0]: Invalid value: {"Name":"gpu","ResourceClaimName":null,'
        '"ResourceClaimTemplateName":null}: must specify one of: `resourceClaimName`, `resourceClaimTemplateName`'))


def test_resource_k8s_io_v1alpha2_is_not_registered(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Asking the API server to serve v1alpha2 fails at start: the version no longer exists."""
    server = KubeAPIServer(binaries(), tmp_path_factory.mktemp("kapi-v1alpha2"),
                           runtime_config=("resource.k8s.io/v1alpha2=true",))
    try:
        with pytest.raises(RuntimeError) as failed:
            server.start(timeout=60)
        assert 'err="group version resource.k8s.io/v1alpha2 that has not been registered"' in str(failed.value)
    finally:
        server.stop()


def test_the_mig_fixture_slices_are_valid_resource_slices(kapi: KubeAPIServer) -> None:
    """The MIG ResourceSlices of fixtures/mig-profile-unknown (as NVIDIA's driver publishes them) are what the API
    server accepts (attribute and capacity names, device names, pool): a server-side dry run of each."""
    from ruamel.yaml import YAML

    from tests.conftest import FIXTURES

    files = sorted((FIXTURES / "mig-profile-unknown").glob("nodes.dra-*-slices.yaml")) + sorted(
        (FIXTURES / "mig-profile-unknown").glob("nodes.dra-gh200-*.yaml"))
    slices = [o for f in files for o in YAML(typ="safe").load(f.read_text())["items"] if o["kind"] == "ResourceSlice"]
    assert len(slices) == 4
    for obj in slices:
        out = kapi.kubectl("create", "--dry-run=server", "-f", "-", stdin=json.dumps(obj), check=False)
        assert (out.returncode, out.stderr) == (0, ""), obj["metadata"]["name"]


@pytest.fixture(scope="module")
def kapi_v1beta1(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeAPIServer]:
    """An API server that serves resource.k8s.io/v1beta1 only, as Kubernetes 1.32 does."""
    server = KubeAPIServer(binaries(), tmp_path_factory.mktemp("kapi-v1beta1"),
                           runtime_config=("resource.k8s.io/v1=false", "resource.k8s.io/v1beta1=true")).start()
    yield server
    server.stop()


def test_the_live_view_reads_dra_where_only_v1beta1_is_served(kapi_v1beta1: KubeAPIServer,
                                                              webhooks: Callable[..., Webhook]) -> None:
    """Where the API server serves no resource.k8s.io/v1 (Kubernetes 1.32/1.33), the live view watches the newest
    version it does serve: the v1beta1 slices (devices under ``basic``), class and template (requests inline) are
    what the pods' claims resolve to, and a v1beta1 template is reviewed as a v1 one."""
    from tests.e2e.test_dra_cluster import t4_slice, vllm

    kapi = kapi_v1beta1
    assert served(kapi) == {"v1beta1": ["DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice"]}
    api = kapi.client()
    tag = uuid.uuid4().hex[:6]
    node, pool, cls = f"beta-t4-{tag}", f"beta-{tag}", f"gpu-{tag}.example.com"
    create_node(api, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": {
        "kubernetes.io/hostname": node, "pool": pool}}, "status": {"allocatable": {"cpu": "8"}}})
    v1 = t4_slice(node)
    beta_slice = {**v1, "apiVersion": "resource.k8s.io/v1beta1", "spec": {**v1["spec"], "devices": [
        {"name": d["name"], "basic": {k: v for k, v in d.items() if k != "name"}} for d in v1["spec"]["devices"]]}}
    beta_class = {"apiVersion": "resource.k8s.io/v1beta1", "kind": "DeviceClass", "metadata": {"name": cls},
                  "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{NV}'"}}]}}
    for obj in (beta_slice, beta_class):
        kapi.kubectl("create", "-f", "-", stdin=json.dumps(obj))
    wh = webhooks(kapi).start()
    wh.register("dra-beta", mutate=False, extra_rules=[
        {"apiGroups": ["resource.k8s.io"], "apiVersions": ["v1beta1"],
         "resources": ["resourceclaims", "resourceclaimtemplates"]}])
    ns = namespace(api, "dra-beta")

    def template(name: str, *selectors: str) -> dict[str, Any]:
        request: dict[str, Any] = {"name": "gpu", "deviceClassName": cls}
        if selectors:
            request["selectors"] = [{"cel": {"expression": s}} for s in selectors]
        return {"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
                "spec": {"spec": {"devices": {"requests": [request]}}}}

    def apply(obj: dict[str, Any], *args: str) -> tuple[int, str]:
        out = kapi.kubectl("apply", "-n", ns, *(args or ("--dry-run=server",)), "-f", "-", stdin=json.dumps(obj),
                           check=False)
        return out.returncode, out.stdout + out.stderr

    assert apply(template("one-gpu"), "--server-side")[0] == 0

    def denied() -> str:
        rc, out = apply(vllm("vllm", "one-gpu", pool))
        return out if rc != 0 and "dtype-unsupported-by-gpu" in out else ""

    out = wait_until(denied, 10, what="the view to hold the v1beta1 template and slices")
    # The slice's driver (R535, CUDA 12.2) is behind the image's CUDA 12.4: the platform's policy denies that too.
    assert (f'admission webhook "validate.dra-beta.compatcheck.io" denied the request: compatcheck denied Deployment '
            f"{ns}/vllm:\n- cuda-driver-behind-runtime: image CUDA 12.4 (image vllm/vllm-openai:v0.6.3) is newer "
            "than the driver's CUDA on 535.104.05 (CUDA 12.2)") in out
    assert ("\n- dtype-unsupported-by-gpu: --dtype bfloat16 needs compute capability >= 8.0 (bf16); eligible GPUs: "
            "Tesla-T4 (compute capability 7.5)") in out
    rc, out = apply(template("h100", f"device.attributes['{NV}'].productName == 'NVIDIA H100 80GB HBM3'"))
    assert rc != 0
    assert out.startswith("Warning: resource.k8s.io/v1beta1 ResourceClaimTemplate is deprecated in v1.35+, "
                          "unavailable in v1.38+\n")
    line = (f"- dra-request-unsatisfiable: request 'gpu': no device of the cluster can serve it: 2 {NV} devices in "
            f"reach: Tesla-T4, and none of the 2 of DeviceClass {cls} satisfies the selector")
    assert f"compatcheck denied ResourceClaimTemplate {ns}/h100:\n{line[:199]}…\n" in out
