"""Dynamic Resource Allocation against a real kube-apiserver (``resource.k8s.io/v1``): the webhook's live view
watches ResourceSlices, DeviceClasses and ResourceClaimTemplates, and ``kubectl apply`` is answered with the exact
denial for a pod whose claim gets a T4 and a template no device can serve."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.conftest import Webhook, create_node, gpu_node, namespace, wait_until
from tests.e2e.kapi import KubeAPIServer

NV = "gpu.nvidia.com"


def t4_slice(node: str, gpus: int = 2) -> dict[str, Any]:
    """What NVIDIA's DRA driver publishes for a node of T4s on driver 535.104.05 (cmd/gpu-kubelet-plugin)."""
    attrs = {"type": {"string": "gpu"}, "productName": {"string": "Tesla T4"}, "brand": {"string": "Nvidia"},
             "architecture": {"string": "Turing"}, "cudaComputeCapability": {"version": "7.5.0"},
             "driverVersion": {"version": "535.104.5"}, "cudaDriverVersion": {"version": "12.2.0"}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-{NV}"},
            "spec": {"driver": NV, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}", "attributes": {**attrs, "uuid": {"string": f"GPU-{node}-{i}"}},
                                  "capacity": {"memory": {"value": "15Gi"}}} for i in range(gpus)]}}


def template(name: str, device_class: str, *selectors: str) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": device_class}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}}


def vllm(name: str, claim_template: str, pool: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": {
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {
            "nodeSelector": {"pool": pool},
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": claim_template}],
            "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.6.3",
                            "args": ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--dtype", "bfloat16"],
                            "resources": {"claims": [{"name": "gpu"}]}}]}}}}


def apply(kapi: KubeAPIServer, ns: str, obj: dict[str, Any], *args: str) -> tuple[int, str]:
    out = kapi.kubectl("apply", "-n", ns, *(args or ("--dry-run=server",)), "-o", "json", "-f", "-",
                       stdin=json.dumps(obj), check=False)
    return out.returncode, out.stdout + out.stderr


def test_dra_claims_are_checked_against_the_live_resource_slices(kapi: KubeAPIServer,
                                                                 webhooks: Callable[..., Webhook]) -> None:
    from kubernetes import client

    api = kapi.client()
    tag = uuid.uuid4().hex[:6]
    node, pool, cls = f"dra-t4-{tag}", f"dra-{tag}", f"gpu-{tag}.example.com"
    create_node(api, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": {
        "kubernetes.io/hostname": node, "pool": pool}}, "status": {"allocatable": {"cpu": "8"}}})
    res = client.ResourceV1Api(api)
    res.create_resource_slice(t4_slice(node))
    res.create_device_class({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": cls},
                             "spec": {"selectors": [{"cel": {"expression": (
                                 f"device.driver == '{NV}' && device.attributes['{NV}'].type == 'gpu'")}}]}})
    wh = webhooks(kapi).start()
    wh.register("dra", mutate=False, extra_rules=[
        {"apiGroups": ["resource.k8s.io"], "apiVersions": ["v1"],
         "resources": ["resourceclaims", "resourceclaimtemplates"]}])
    ns = namespace(api, "dra")

    # A template any T4 serves is admitted, and created for real: the view must see it.
    assert apply(kapi, ns, template("one-gpu", cls), "--server-side")[0] == 0

    # vLLM with bf16 whose claim gets a T4: denied, at the pod's GPU, as for a node's nodeSelector.
    def denied() -> str:
        rc, out = apply(kapi, ns, vllm("vllm", "one-gpu", pool))
        return out if rc != 0 and "dtype-unsupported-by-gpu" in out else ""

    out = wait_until(denied, 10, what="the view to hold the template and the slices")
    # The slice's driver (R535, CUDA 12.2) is behind the image's CUDA 12.4: the platform's policy denies that too.
    assert (f'admission webhook "validate.dra.compatcheck.io" denied the request: compatcheck denied Deployment '
            f"{ns}/vllm:\n- cuda-driver-behind-runtime: image CUDA 12.4 (image vllm/vllm-openai:v0.6.3) is newer "
            "than the driver's CUDA on 535.104.05 (CUDA 12.2)") in out
    assert ("\n- dtype-unsupported-by-gpu: --dtype bfloat16 needs compute capability >= 8.0 (bf16); eligible GPUs: "
            "Tesla-T4 (compute capability 7.5)") in out

    # A template no device of the cluster can serve: denied with the allocator's reason (each denial line is cut
    # at 200 characters; the whole message is in fixtures/dra-request-unsatisfiable).
    h100 = template("h100", cls, f"device.attributes['{NV}'].productName == 'NVIDIA H100 80GB HBM3'")
    reason = (f"request 'gpu': no device of the cluster can serve it: 2 {NV} devices in reach: Tesla-T4, and none of "
              f"the 2 of DeviceClass {cls} satisfies the selector \"device.attributes['{NV}'].productName == "
              "'NVIDIA H100 80GB HBM3'\"")
    rc, out = apply(kapi, ns, h100)
    assert rc != 0
    assert f"compatcheck denied ResourceClaimTemplate {ns}/h100:\n- dra-request-unsatisfiable: {reason}"[:220] in out
    answer = wh.review("validate", h100, namespace=ns)
    assert answer["allowed"] is False
    assert answer["status"]["message"].endswith(f"- dra-request-unsatisfiable: {reason}"[:199] + "…")

    # A DeviceClass that does not exist: the live view is the whole cluster, so that is said.
    rc, out = apply(kapi, ns, template("nowhere", "no-such-class.example.com"))
    assert rc != 0
    assert ("- dra-request-unsatisfiable: request 'gpu': DeviceClass 'no-such-class.example.com' does not exist; no "
            "device can be allocated for it") in out

    # A template that does not exist (yet): a warning saying what was not checked, not a denial.
    rc, out = apply(kapi, ns, vllm("later", "not-yet", pool))
    assert rc == 0, out
    assert (f"Warning: ResourceClaimTemplate {ns}/not-yet (claim 'gpu') does not exist (yet): the "
            "devices it requests were not checked") in out

    # Two requests whose GPUs must be different products (distinctAttribute over both: the real API server, 1.36,
    # keeps the field, DRAConsumableCapacity being on): the node's two T4s are one product, so denied at the
    # constraint.
    mine = f"device.attributes['{NV}'].uuid.startsWith('GPU-{node}-')"
    pair = template("pair", cls, mine)
    pair["spec"]["spec"]["devices"]["requests"].append({"name": "other", "exactly": {
        "deviceClassName": cls, "selectors": [{"cel": {"expression": mine}}]}})
    pair["spec"]["spec"]["devices"]["constraints"] = [{"requests": ["gpu", "other"],
                                                       "distinctAttribute": f"{NV}/productName"}]
    rc, out = apply(kapi, ns, pair)
    assert rc != 0
    line = (f"- dra-request-unsatisfiable: distinctAttribute {NV}/productName over requests 'gpu', 'other': no devices "
            f"of the cluster can serve them together: they ask for 2 devices with distinct {NV}/productName on one "
            "node and at most 1 distinct value is on any node")
    assert f"compatcheck denied ResourceClaimTemplate {ns}/pair:\n{line}"[:220] in out, out
    pair["spec"]["spec"]["devices"]["constraints"][0]["distinctAttribute"] = f"{NV}/uuid"
    assert apply(kapi, ns, pair)[0] == 0  # two different uuids on the node: admitted

    # Once the slices say A100, the same Deployment is admitted (the view follows the slices' changes). Their driver
    # is R550 (CUDA 12.4), which runs vLLM 0.6.3's CUDA 12.4 itself: on R535 the default driver policy (driver >=
    # runtime) would deny it (cuda-driver-behind-runtime).
    a100 = t4_slice(node)
    for d in a100["spec"]["devices"]:
        d["attributes"].update({"productName": {"string": "NVIDIA A100-SXM4-80GB"},
                                "cudaComputeCapability": {"version": "8.0.0"},
                                "driverVersion": {"version": "550.54.15"}, "cudaDriverVersion": {"version": "12.4.0"}})
    res.delete_resource_slice(f"{node}-{NV}")
    res.create_resource_slice(a100)
    wait_until(lambda: apply(kapi, ns, vllm("vllm", "one-gpu", pool))[0] == 0, 10, what="the A100 slices seen")


def crd(group: str, version: str, kind: str, scope: str = "Namespaced") -> dict[str, Any]:
    plural = kind.lower() + "s"
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": scope, "names": {"kind": kind, "plural": plural,
                                                                "singular": kind.lower(), "listKind": kind + "List"},
                     "versions": [{"name": version, "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


def test_an_inference_service_naming_a_model_format_runs_the_live_serving_runtime(
        own_kapi: KubeAPIServer, webhooks: Callable[..., Webhook]) -> None:
    """KServe's CRDs (open schemas) on a real API server of its own: the webhook watches the ClusterServingRuntimes,
    and an InferenceService that names only the model format is checked with the runtime's image."""
    kapi = own_kapi
    kapi.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        crd("serving.kserve.io", "v1alpha1", "ServingRuntime"),
        crd("serving.kserve.io", "v1alpha1", "ClusterServingRuntime", "Cluster"),
        crd("serving.kserve.io", "v1beta1", "InferenceService")]}))
    kapi.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/servingruntimes.serving.kserve.io",
                 "crd/clusterservingruntimes.serving.kserve.io", "crd/inferenceservices.serving.kserve.io")
    api = kapi.client()
    create_node(api, gpu_node("t4-ks-0", labels={"pool": "ks"}))  # R560 (CUDA 12.6)
    wh = webhooks(kapi).start()
    wh.register("ks", mutate=False, extra_rules=[
        {"apiGroups": ["serving.kserve.io"], "apiVersions": ["v1beta1"], "resources": ["inferenceservices"]}])
    ns = namespace(api, "ks")
    isvc = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService", "metadata": {"name": "llama"},
            "spec": {"predictor": {"nodeSelector": {"pool": "ks"}, "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
                "model": {"modelFormat": {"name": "vllm"}, "storageUri": "hf://meta-llama/meta-llama-3-8b-instruct",
                          "resources": {"limits": {"nvidia.com/gpu": "1"}}}}}}
    # No runtime yet: the predictor's own container has no image, so nothing pins what runs.
    rc, out = apply(kapi, ns, isvc)
    assert rc == 0, out
    kapi.kubectl("apply", "-f", "-", stdin=json.dumps({
        "apiVersion": "serving.kserve.io/v1alpha1", "kind": "ClusterServingRuntime", "metadata": {"name": "vllm"},
        "spec": {"supportedModelFormats": [{"name": "vllm", "autoSelect": True}], "containers": [
            {"name": "kserve-container", "image": "nvidia/cuda:13.0.0-base-ubuntu24.04", "args": ["--port=8080"]}]}}))

    def denied() -> str:
        rc, out = apply(kapi, ns, isvc)
        return out if rc != 0 else ""

    out = wait_until(denied, 10, what="the view to hold the ClusterServingRuntime")
    line = ("- cuda-driver-too-old: image CUDA 13.0 (image nvidia/cuda:13.0.0-base-ubuntu24.04) needs a driver "
            "from branch >= 580; eligible nodes run 560.35.03 (CUDA 12.6) on t4-ks-0; the image's forward "
            "compatibility lists driver branches 535, 550, 565, 570, 575 only")
    assert f"compatcheck denied InferenceService {ns}/llama:\n{line[:199]}…\n" in out, out  # cut at 200


def test_the_dra_inventory_is_rebuilt_only_when_a_dra_object_changes(kapi: KubeAPIServer) -> None:
    """Nodes churn (GFD relabels them every minute); ResourceSlices rarely do. A Node event gives a new snapshot
    with the same inventory (and its allocator's cached selector results); a new ResourceSlice, a new one."""
    from kubernetes import client

    from compatcheck.io.loader import load_rules
    from compatcheck.webhook.clusterview import LiveView
    from compatcheck.webhook.metrics import Metrics

    api = kapi.client()
    tag = uuid.uuid4().hex[:6]
    view = LiveView(load_rules().kb, api, Metrics(), debounce=0.01)
    view.start()
    try:
        assert view.wait_synced(15)
        first = view.snapshot
        assert first.ctx.cluster is not None and first.ctx.cluster.dra is not None
        inventory = first.ctx.cluster.dra
        create_node(api, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"churn-{tag}"}})
        wait_until(lambda: view.snapshot is not first and any(
            m.name == f"churn-{tag}" for c in view.snapshot.ctx.cluster.classes for m in c.members), 10,  # type: ignore[union-attr]
            what="the new Node in the view")
        assert view.snapshot.ctx.cluster.dra is inventory  # type: ignore[union-attr]
        client.ResourceV1Api(api).create_resource_slice(t4_slice(f"churn-{tag}", gpus=1))
        wait_until(lambda: any(d.node == f"churn-{tag}" for d in view.snapshot.ctx.cluster.dra.devices), 10,  # type: ignore[union-attr]
                   what="the new ResourceSlice in the view")
        assert view.snapshot.ctx.cluster.dra is not inventory  # type: ignore[union-attr]
    finally:
        view.stop()


# Selectors the real API server accepts or refuses when a ResourceClaimTemplate is created, and what compatcheck's
# CEL says of them: a compile error (syntax, a field the device has not) is refused by both; what only fails on a
# device (a missing attribute, a Semver compared with a string) is accepted by both and fails at allocation.
SELECTORS = [
    ("device.driver == 'gpu.nvidia.com'", True),
    ("device.attributes['gpu.nvidia.com'].cudaComputeCapability.isGreaterThan(semver('7.5.0'))", True),
    ("device.attributes['gpu.nvidia.com'].cudaComputeCapability.compareTo(semver('8.0.0')) >= 0", True),
    ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0", True),
    ("device.attributes['gpu.nvidia.com'].productName.lowerAscii().contains('a100')", True),
    ("'profile' in device.attributes['gpu.nvidia.com']", True),
    ("device.attributes['gpu.nvidia.com'].driverVersion == '550.54.15'", True),
    ("device.driver ==", False),
    ("device.nosuchfield == 'x'", False),
    ("device.driver == 'a' &&", False),
]


def test_the_api_server_and_compatcheck_agree_on_which_selectors_compile(kapi: KubeAPIServer) -> None:
    from compatcheck.core.cel import CelError, compile_selector

    ns = namespace(kapi.client(), "cel-parity")  # no webhook watches it: the API server alone decides
    got = []
    for i, (expression, _) in enumerate(SELECTORS):
        rc, _out = apply(kapi, ns, template(f"t{i}", "gpu.nvidia.com", expression))
        try:
            compile_selector(expression)
            ours = True
        except CelError:
            ours = False
        got.append((expression, rc == 0, ours))
    assert got == [(e, ok, ok) for e, ok in SELECTORS]


def test_device_taints_tolerations_and_capacity_as_the_api_server_keeps_them(kapi: KubeAPIServer,
                                                                           tmp_path: Path) -> None:
    """Kubernetes 1.36 (DRADeviceTaints and DRAConsumableCapacity beta, on): the real API server stores a
    ResourceSlice's device taints, allowMultipleAllocations and capacity requestPolicy, and accepts templates with
    tolerations and capacity requests. compatcheck, reading back what the server stored (kubectl get -o json, as a
    user passes it to --nodes), decides on them as the scheduler's allocator would: the untolerated taint, the
    capacity no device has, and the third share of a GPU whose capacity two shares use up are unsatisfiable; the
    tolerating template and the two shares are not."""
    from kubernetes import client

    api = kapi.client()
    tag = uuid.uuid4().hex[:6]
    node = f"dra-cap-{tag}"
    create_node(api, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": {
        "kubernetes.io/hostname": node}}, "status": {"allocatable": {"cpu": "8"}}})
    attrs = {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA A100-SXM4-80GB"},
             "cudaComputeCapability": {"version": "8.0.0"}, "driverVersion": {"version": "550.54.15"},
             "cudaDriverVersion": {"version": "12.4.0"}, "uuid": {"string": f"GPU-{node}"}}
    client.ResourceV1Api(api).create_resource_slice({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-{NV}"},
        "spec": {"driver": NV, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [
                     {"name": "gpu-0", "attributes": attrs, "allowMultipleAllocations": True, "capacity": {"memory": {
                         "value": "80Gi", "requestPolicy": {"default": "10Gi", "validRange": {
                             "min": "10Gi", "step": "10Gi"}}}}},
                     {"name": "gpu-1", "attributes": {**attrs, "uuid": {"string": f"GPU-{node}-1"}},
                      "capacity": {"memory": {"value": "80Gi"}},
                      "taints": [{"key": "example.com/gpu-health", "value": "xid-79", "effect": "NoSchedule"}]}]}})
    stored = json.loads(kapi.kubectl("get", "resourceslice", f"{node}-{NV}", "-o", "json").stdout)
    gpu0, gpu1 = stored["spec"]["devices"]
    assert gpu0["allowMultipleAllocations"] is True and gpu0["capacity"]["memory"]["requestPolicy"]["validRange"] == {
        "min": "10Gi", "step": "10Gi"}
    assert [{k: t[k] for k in ("key", "value", "effect")} for t in gpu1["taints"]] == [
        {"key": "example.com/gpu-health", "value": "xid-79", "effect": "NoSchedule"}]
    (tmp_path / "cluster.json").write_text(kapi.kubectl("get", "nodes,resourceslices", "-o", "json").stdout)
    ns = namespace(api, "dra-cap")
    mine = f"device.attributes['{NV}'].uuid.startsWith('GPU-{node}')"
    tainted_only = f"device.attributes['{NV}'].uuid == 'GPU-{node}-1'"

    def tpl(name: str, *requests: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
                "spec": {"spec": {"devices": {"requests": list(requests)}}}}

    def request(name: str, selector: str, **exactly: Any) -> dict[str, Any]:
        return {"name": name, "exactly": {"deviceClassName": "gpu.nvidia.com", "selectors": [
            {"cel": {"expression": selector}}], **exactly}}

    share = {"capacity": {"requests": {"memory": "40Gi"}}}
    templates = [
        tpl("untolerated", request("gpu", tainted_only)),
        tpl("tolerated", request("gpu", tainted_only, tolerations=[
            {"key": "example.com/gpu-health", "operator": "Exists", "effect": "NoSchedule"}])),
        tpl("too-much", request("gpu", mine, capacity={"requests": {"memory": "96Gi"}})),
        tpl("two-shares", request("a", mine, **share), request("b", mine, **share)),
        tpl("three-shares", request("a", mine, **share), request("b", mine, **share), request("c", mine, **share)),
    ]
    accepted = []
    for t in templates:
        rc, out = apply(kapi, ns, t)
        assert rc == 0, out  # the API server accepts every one of them, fields kept
        server = json.loads(out)
        assert all(r["exactly"].get(k) == w["exactly"].get(k) for r, w in zip(
            server["spec"]["spec"]["devices"]["requests"], t["spec"]["spec"]["devices"]["requests"], strict=True)
            for k in ("tolerations", "capacity"))
        accepted.append(server)
    (tmp_path / "templates.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": accepted}))
    proc = subprocess.run([sys.executable, "-m", "compatcheck", "lint", str(tmp_path / "templates.json"), "--nodes",
                           str(tmp_path / "cluster.json"), "--format", "json", "--rule",
                           "dra-request-unsatisfiable"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NO_COLOR": "1"})
    assert "Traceback" not in proc.stderr, proc.stderr
    found = [(f["object"]["name"], f["pointer"], f["message"]) for f in json.loads(proc.stdout)["findings"]]
    assert found == [
        ("untolerated", "/spec/spec/devices/requests/0",
         "request 'gpu': no device of the cluster can serve it: the 1 matching device is tainted "
         "(example.com/gpu-health=xid-79:NoSchedule) and the request does not tolerate that taint"),
        ("too-much", "/spec/spec/devices/requests/0",
         "request 'gpu': no device of the cluster can serve it: it asks for capacity memory: 96Gi and none of the 2 "
         "matching devices can give it (gpu-0 has 80Gi of memory; gpu-1 has 80Gi of memory)"),
        ("three-shares", "/spec/spec/devices/requests/2",
         "request 'c' together with requests 'a', 'b': no devices of the cluster can serve them together: they ask "
         "for 3 devices on one node, and no node has devices that can serve them all (a device goes to one request, "
         "or, if it allows multiple allocations, to as many as its capacity lasts for)"),
    ]
