"""The Helm chart in a real cluster (issue #10): rendered by real helm, applied with real kubectl to a real
kube-apiserver, the webhook run as the chart's ServiceAccount with the args of the chart's Deployment, and
objects sent by kubectl through the chart's own webhook configurations (rules, CEL matchConditions,
namespace and object selectors, failure policies).

No kubelet runs here and the API server cannot reach a Service, so the chart is rendered with ``webhook.url``
(a url clientConfig on loopback) and its Deployment's pod is played by local processes: one per replica, with
the container's args, env and mounts (ConfigMaps and Secrets read back from the API server into local
directories, as the kubelet would) and a TokenRequest token of the chart's ServiceAccount; only ``--in-cluster``
becomes ``--kubeconfig``, and ports and host are local. Everything else is what ``helm install`` creates.

Two installs, never at once (each would see every namespace): the cert-file mode in warn mode
(``TestSecretMode``, class-scoped, first) and then the chart's defaults, live view + self-managed TLS in
enforce mode (module-scoped), shared by the tests below it, each in its own namespace. This module must not
leave a webhook configuration behind: the other e2e modules share the API server.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import ssl
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from compatcheck.webhook import certs
from tests.conftest import FIXTURES, ROOT
from tests.e2e.conftest import WebhookProcess, create_node, gpu_node, gpu_pod, namespace, wait_until
from tests.e2e.kapi import KubeAPIServer, free_port
from tests.test_chart import CLUSTER_SCOPED_KINDS as CHART_CLUSTER_SCOPED_KINDS

CHART = ROOT / "charts" / "compatcheck"
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration",
                  "MutatingWebhookConfiguration", "Namespace"}
CRL = FIXTURES / "crl-default-missing" / "crl.yaml"

CUDA13 = "nvidia/cuda:13.0.0-base-ubuntu24.04"  # needs driver >= 580: an error on the R560 pool
CUDA12_2 = "nvidia/cuda:12.2.2-base-ubuntu22.04"  # what R560 runs: no finding
CUDA11_8 = "nvidia/cuda:11.8.0-base-ubuntu22.04"  # on R580 (CUDA 13): a major skew, a warning only
VCUDA = "nvidia/cuda:11.4.3-base-ubuntu20.04"  # the GPU-Manager pool's vGPU baseline
T4, H100, VGPU = "chart-t4", "chart-h100", "chart-vgpu"  # node pools (label pool=...) of this module
EXCLUDED = f"excluded-{uuid.uuid4().hex[:8]}"  # in webhook.excludeNamespaces of the self-managed install
KINDS = ["Pod", "Deployment", "Job", "CronJob"]
ENDPOINTS = ("validate", "mutate")

# What kubectl prints, exactly: denial lines are cut at 200 characters, warnings at 120 (compatcheck.core.admission).
TOO_OLD = ("- cuda-driver-too-old: image CUDA 13.0 (image nvidia/cuda:13.0.0-base-ubuntu24.04) needs a driver from "
           "branch >= 580; eligible nodes run 560.35.03 (CUDA 12.6) on chart-t4-0; the image's forward compa…\n")
SKEW = ("Warning: cuda-driver-major-skew: driver CUDA 13.0 is more than 1 major version ahead of image CUDA 11.8 on "
        "580.65.06 (CUDA 13.0)…\n")
MUTATED = ("Warning: compatcheck fixed crl-default-missing: set limits.example.com/vcuda-priority to the CRL default "
           "1 (and requests, policy…\n")


# ---------------------------------------------------------------------------------------------- objects


def workload(kind: str, name: str, pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` as a ``kind`` (its pod spec as the template)."""
    if kind == "Pod":
        return {**pod, "metadata": {**pod["metadata"], "name": name}}
    template = {"metadata": {"labels": {"app": name}}, "spec": {**pod["spec"], "restartPolicy": "Never"}}
    if kind == "Deployment":
        template["spec"]["restartPolicy"] = "Always"
        return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": {
            "selector": {"matchLabels": {"app": name}}, "template": template}}
    if kind == "Job":
        return {"apiVersion": "batch/v1", "kind": kind, "metadata": {"name": name}, "spec": {"template": template}}
    if kind == "PodTemplate":
        return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name}, "template": template}
    return {"apiVersion": "batch/v1", "kind": kind, "metadata": {"name": name}, "spec": {
        "schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": template}}}}


def kubectl_name(kind: str) -> str:
    """How kubectl names the resource of ``kind`` in its messages."""
    return {"Pod": "pod", "Deployment": "deployment.apps", "Job": "job.batch", "CronJob": "cronjob.batch"}[kind]


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]
    if obj["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    return spec if obj["kind"] == "Pod" else spec["template"]["spec"]  # type: ignore[no-any-return]


def vgpu_pod(name: str = "v") -> dict[str, Any]:
    """fixtures/crl-default-missing/fail.optional.yaml on the GPU-Manager pool: vcuda-priority is missing."""
    pod = gpu_pod(name, VCUDA, limits={"tencent.com/vcuda-core": "50", "tencent.com/vcuda-memory": "4"},
                  nodeSelector={"pool": VGPU})
    pod["spec"]["containers"][0]["resources"]["requests"] = {"tencent.com/vcuda-core": "50",
                                                             "tencent.com/vcuda-memory": "4"}
    return pod


WITH_CRL_DEFAULTS = {  # fixtures/crl-default-missing/fixed.optional.yaml
    "limits": {"tencent.com/vcuda-core": "50", "tencent.com/vcuda-memory": "4", "example.com/vcuda-priority": "1"},
    "requests": {"tencent.com/vcuda-core": "50", "tencent.com/vcuda-memory": "4", "example.com/vcuda-priority": "1"}}


def denied(kind: str, ns: str, name: str, findings: str = TOO_OLD) -> str:
    """kubectl's stderr when the chart's validating webhook for ``kind`` denies creating it."""
    webhook = {"Pod": "pods", "CronJob": "cronjobs", "PodTemplate": "podtemplates"}.get(kind, "workloads")
    return (f'Error from server (Forbidden): error when creating "STDIN": admission webhook "{webhook}.validate.'
            f'compatcheck.io" denied the request: compatcheck denied {kind} {ns}/{name}:\n{findings}')


def kubectl_apply(kapi: KubeAPIServer, ns: str, obj: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    return kapi.kubectl("apply", "-n", ns, *args, "-f", "-", stdin=json.dumps(obj), check=False)


def get(kapi: KubeAPIServer, ns: str, kind: str, name: str) -> dict[str, Any]:
    return json.loads(kapi.kubectl("get", "-n", ns, kind.lower(), name, "-o", "json", "--show-managed-fields").stdout)  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------------------------- the chart


@dataclass
class Install:
    """One release of the chart: what was applied, and the processes playing its Deployment's replicas."""

    kapi: KubeAPIServer
    release: str
    namespace: str
    docs: list[dict[str, Any]]
    deployment: dict[str, Any]
    sa_kubeconfig: Path
    replicas: list[WebhookProcess] = field(default_factory=list)

    @property
    def fullname(self) -> str:
        return str(self.deployment["metadata"]["name"])

    @property
    def service_account(self) -> str:
        """The user name of the Deployment's ServiceAccount (for ``--as``)."""
        return f"system:serviceaccount:{self.namespace}:{self.pod_spec['serviceAccountName']}"

    @property
    def pod_spec(self) -> dict[str, Any]:
        return self.deployment["spec"]["template"]["spec"]  # type: ignore[no-any-return]

    @property
    def hook(self) -> WebhookProcess:
        """The replica that webhook.url points at."""
        return self.replicas[0]

    def admission_requests(self) -> float:
        return self.hook.metric("compatcheck_admission_requests_total")

    def uninstall(self) -> None:
        # Webhook configurations first (as helm does): with failurePolicy Fail and no webhook behind them they
        # would refuse GPU objects in every namespace of the shared API server.
        order = sorted(self.docs, key=lambda d: not d["kind"].endswith("WebhookConfiguration"))
        self.kapi.kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-",
                          stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": order}))
        for wh in self.replicas:
            wh.kill()

    def wait_called(self, ns: str) -> None:
        """Until the API server calls both webhooks: it loads a configuration (and a caBundle patch) a moment
        after the write. Probes with dry runs of a GPU Pod, and counts the calls on the webhook's side."""
        def both() -> bool:
            before = [self.hook.metric("compatcheck_admission_requests_total", endpoint=e) for e in ENDPOINTS]
            kubectl_apply(self.kapi, ns, vgpu_pod("probe"), "--dry-run=server")
            return all(self.hook.metric("compatcheck_admission_requests_total", endpoint=e) > b
                       for e, b in zip(ENDPOINTS, before, strict=True))

        wait_until(both, 15, step=0.1, what="the API server calls both webhooks")


def render(helm: str, release: str, ns: str, values: dict[str, Any]) -> list[dict[str, Any]]:
    proc = subprocess.run([helm, "template", release, str(CHART), "--namespace", ns, "-f", "-"],
                          input=json.dumps(values), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [d for d in YAML(typ="safe").load_all(proc.stdout) if d]


def _mounts(kapi: KubeAPIServer, ns: str, pod: dict[str, Any], container: dict[str, Any], root: Path) -> list[str]:
    """The container's volumes under ``root`` (mountPath /x lands at root/x), filled as the kubelet fills them:
    ConfigMaps and Secrets from the API server, emptyDirs empty. Returns the mount paths."""
    volumes = {v["name"]: v for v in pod["volumes"]}
    paths = []
    for mount in container["volumeMounts"]:
        target = root / mount["mountPath"].lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        volume = volumes[mount["name"]]
        if "configMap" in volume or "secret" in volume:
            kind, name = ("configmap", volume["configMap"]["name"]) if "configMap" in volume else (
                "secret", volume["secret"]["secretName"])
            source = volume.get("configMap") or volume["secret"]
            data = json.loads(kapi.kubectl("get", "-n", ns, kind, name, "-o", "json").stdout)["data"]
            # items: only the keys named, each at its path (a missing key fails the mount, as the kubelet's does)
            files = [(i["key"], i["path"]) for i in source["items"]] if source.get("items") else [(k, k) for k in data]
            for key, path in files:
                value = data[key]
                (target / path).write_bytes(base64.b64decode(value) if kind == "secret" else value.encode())
                if kind == "secret":
                    (target / path).chmod(volume["secret"].get("defaultMode", 0o644))
        else:
            assert set(volume) == {"name", "emptyDir"}, f"a volume this harness cannot play: {volume}"
        paths.append(mount["mountPath"])
    return paths


def replica_argv(install: Install, root: Path, port: int, metrics_port: int) -> tuple[list[str], dict[str, str]]:
    """The Deployment container's args and env for a local replica: paths under its mounts moved under
    ``root``, ``--in-cluster`` replaced by the ServiceAccount's kubeconfig, ports and host local."""
    pod = install.pod_spec
    (container,) = pod["containers"]
    mounts = sorted(_mounts(install.kapi, install.namespace, pod, container, root), key=len, reverse=True)
    argv: list[str] = []
    for arg in container["args"]:
        flag, eq, value = arg.partition("=")
        if flag == "--in-cluster":
            arg = f"--kubeconfig={install.sa_kubeconfig}"
        elif flag == "--port":
            assert int(value) == next(p["containerPort"] for p in container["ports"] if p["name"] == "https")
            arg = f"--port={port}"
        elif flag == "--metrics-port":
            arg = f"--metrics-port={metrics_port}"
        elif flag in ("--host", "--metrics-host"):
            arg = f"{flag}=127.0.0.1"
        elif eq and any(value == m or value.startswith(m.rstrip("/") + "/") for m in mounts):
            arg = f"{flag}={root}{value}"
        argv.append(arg)
    if not any(a.startswith("--host=") for a in argv):
        argv.append("--host=127.0.0.1")  # the container listens on 0.0.0.0; a local process keeps to loopback
    env = {}
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = var["value"]
        else:
            assert var["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}, var
            env[var["name"]] = install.namespace
    return argv, env


def install_chart(kapi: KubeAPIServer, helm: str, tmp: Path, release: str, values: dict[str, Any],
                  prepare: Callable[[str], None] | None = None, ca_file: Path | None = None) -> Install:
    """``helm install`` minus the Deployment, whose replicas run as local processes (started, ready).
    ``prepare(namespace)`` runs once the release namespace exists (to create what the chart expects there);
    ``ca_file`` verifies the webhook's certificate (default: the self-managed ``--tls-dir``)."""
    from kubernetes import client

    tmp.mkdir(parents=True, exist_ok=True)
    others = client.AdmissionregistrationV1Api(kapi.client()).list_validating_webhook_configuration(
        label_selector="app.kubernetes.io/name=compatcheck").items
    assert not others, f"another chart install is active: {[o.metadata.name for o in others]}"
    ns = f"{release}-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(kapi.client()).create_namespace({"metadata": {"name": ns}})
    port = free_port()
    # Installs that are not about registry lookups make none: what they decide must not depend on whether this
    # machine reaches Docker Hub (the chart's default is on, for the public registries).
    values = {"registry": {"lookups": False}, **values}
    docs = render(helm, release, ns, {**values, "webhook": {**values.get("webhook", {}),
                                                            "url": f"https://127.0.0.1:{port}"}})
    (deploy,) = [d for d in docs if d["kind"] == "Deployment"]
    rest = [d for d in docs if d["kind"] != "Deployment"]
    # Applied without -n (-n cannot help: the CRL Role lives in kube-public), so every other namespaced object
    # must name the release namespace, or it would land in the kubeconfig's.
    elsewhere = [f"{d['kind']}/{d['metadata']['name']}" for d in rest if d["kind"] not in CLUSTER_SCOPED
                 and d["metadata"].get("namespace") not in (ns, "kube-public")]
    assert not elsewhere, f"not in the release namespace: {elsewhere}"
    if prepare is not None:
        prepare(ns)
    kapi.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": rest}))
    sa = deploy["spec"]["template"]["spec"]["serviceAccountName"]
    install = Install(kapi, release, ns, rest, deploy, kapi.service_account_kubeconfig(ns, sa, tmp / "sa.kubeconfig"))
    try:
        for i in range(deploy["spec"]["replicas"]):
            root = tmp / f"replica-{i}"
            replica_port, metrics_port = (port if i == 0 else free_port()), free_port()
            argv, env = replica_argv(install, root, replica_port, metrics_port)
            tls_dir = next((a.split("=", 1)[1] for a in argv if a.startswith("--tls-dir=")), None)
            install.replicas.append(WebhookProcess(kapi, root, argv, port=replica_port, metrics_port=metrics_port,
                                                   ca_file=ca_file or Path(str(tls_dir)) / "ca.crt", env=env))
        for wh in install.replicas:  # all at once, as a rollout starts them: self-managed TLS must not race
            wh.start(ready=False)
        for wh in install.replicas:
            wait_until(lambda w=wh: w.get("/readyz")[0] == 200, 30, what=f"replica ready ({wh.logs()})")
    except BaseException:
        install.uninstall()
        raise
    return install


@pytest.fixture(scope="module")
def helm(helm_dir: str) -> str:
    return str(Path(helm_dir) / "helm")


@pytest.fixture(scope="module")
def pools(kapi: KubeAPIServer) -> None:
    """The module's nodes, created before any webhook starts (its first list has them)."""
    api = kapi.client()
    create_node(api, gpu_node(f"{T4}-0", labels={"pool": T4}))
    create_node(api, gpu_node(f"{H100}-0", product="NVIDIA-H100-80GB-HBM3", driver="580.65.06",
                              labels={"pool": H100}))
    vgpu = gpu_node(f"{VGPU}-0", driver="470.82.01", labels={"pool": VGPU,
                                                              "compatcheck.io/vgpu-baseline-cuda": "11.4"})
    vgpu["status"] = {"capacity": {"tencent.com/vcuda-core": "400", "tencent.com/vcuda-memory": "256", "cpu": "16"},
                      "allocatable": {"tencent.com/vcuda-core": "400", "tencent.com/vcuda-memory": "256",
                                      "cpu": "16"}}
    create_node(api, vgpu)


# ---------------------------------------------------------------------------------------------- RBAC


EVERYONE = {  # what system:basic-user gives every authenticated user: not the chart's doing
    ("selfsubjectreviews.authentication.k8s.io", (), ("create",)),
    ("selfsubjectaccessreviews.authorization.k8s.io", (), ("create",)),
    ("selfsubjectrulesreviews.authorization.k8s.io", (), ("create",))}


def can_i_list(kapi: KubeAPIServer, user: str, ns: str) -> set[tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """``kubectl auth can-i --list --as=user -n ns`` as {(resource, resource names, verbs)}, without the
    rows every authenticated user has (self reviews, discovery and health URLs)."""
    header, *lines = kapi.kubectl("auth", "can-i", "--list", f"--as={user}", "-n", ns).stdout.splitlines()
    starts = [header.index(col) for col in ("Resources", "Non-Resource URLs", "Resource Names", "Verbs")]
    rows = set()
    for line in lines:
        resource, urls, names, verbs = (line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True))
        if urls != "[]":
            assert not resource, line
            continue
        row = (resource, tuple(names.strip("[]").split()), tuple(verbs.strip("[]").split()))
        if row not in EVERYONE:
            rows.add(row)
    return rows


def logged(wh: WebhookProcess, msg: str) -> list[dict[str, Any]]:
    """The webhook's JSON log lines with this message."""
    lines = (json.loads(line) for line in wh.log.read_text().splitlines() if line.startswith("{"))
    return [line for line in lines if line.get("msg") == msg]


# ---------------------------------------------------------------------------------------------- cert-file mode


@pytest.fixture(scope="class")
def secret_chart(kapi: KubeAPIServer, helm: str, pools: None,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[Install]:
    """tls.mode=secret with your certificate (for 127.0.0.1, where the API server calls it) in your Secret,
    created before the install, and its CA as tls.caBundle; one replica; config.webhook.mode=warn."""
    tmp = tmp_path_factory.mktemp("chart-secret")
    tls = tmp / "tls"
    certs.write(str(tls), certs.generate(["127.0.0.1"]))

    def secret(ns: str) -> None:  # what this mode expects to find in the release namespace
        kapi.kubectl("create", "secret", "tls", "corp-tls", "-n", ns, f"--cert={tls / 'tls.crt'}",
                     f"--key={tls / 'tls.key'}")

    install = install_chart(kapi, helm, tmp, "ccs", {
        "replicaCount": 1,
        "tls": {"mode": "secret", "secretName": "corp-tls",
                "caBundle": base64.b64encode((tls / "ca.crt").read_bytes()).decode()},
        "config": {"apiVersion": "compatcheck/v1", "webhook": {"mode": "warn"}}}, secret, tls / "ca.crt")
    yield install
    install.uninstall()


class TestSecretMode:
    """``tls.mode=secret`` (the certificate files from your own Secret, your caBundle) with the live view,
    ``config.webhook.mode=warn``. First in the module: its install is gone before the next one starts."""

    def test_the_live_view_is_all_it_may_do(self, kapi: KubeAPIServer, secret_chart: Install) -> None:
        """The chart's RBAC in this mode: read Nodes, the DRA objects and KServe's runtimes, read ConfigMaps in
        kube-public; no Secret, no webhook configuration (the caBundle is yours), nothing else. The webhook lists
        them as that ServiceAccount."""
        read = ("get", "list", "watch")
        cluster = {("nodes", (), read), *((f"{r}.resource.k8s.io", (), read) for r in (
            "resourceslices", "deviceclasses", "resourceclaims", "resourceclaimtemplates")),
                   *((f"{r}.serving.kserve.io", (), read) for r in ("servingruntimes", "clusterservingruntimes"))}
        assert can_i_list(kapi, secret_chart.service_account, "default") == cluster
        assert can_i_list(kapi, secret_chart.service_account, secret_chart.namespace) == cluster
        assert can_i_list(kapi, secret_chart.service_account, "kube-public") == {
            *cluster, ("configmaps", (), read)}
        status, text = secret_chart.hook.get("/readyz")
        assert status == 200 and text.startswith("ok: "), text  # both lists done: nothing is decided before
        bundle = base64.b64encode(secret_chart.hook.ca).decode()
        for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
            cfg = json.loads(kapi.kubectl("get", kind, secret_chart.fullname, "-o", "json").stdout)
            assert {w["clientConfig"]["caBundle"] for w in cfg["webhooks"]} == {bundle}

    def test_warn_mode_admits_errors_as_kubectl_warnings(self, kapi: KubeAPIServer, secret_chart: Install) -> None:
        ns = namespace(kapi.client(), "chart-warn")
        secret_chart.wait_called(ns)
        bf16 = gpu_pod("bf16", "vllm/vllm-openai:v0.9.2", args=["--dtype=bfloat16"], nodeSelector={"pool": T4})
        out = kubectl_apply(kapi, ns, bf16)
        assert (out.returncode, out.stdout) == (0, "pod/bf16 created\n"), out.stderr
        # one line each, cut at 120 characters (see compatcheck.core.admission.MAX_WARNING); CUDA 12.8 on R560 is an
        # error by the default driver policy (driver >= runtime), admitted here as a warning by the warn mode
        assert out.stderr == (
            "Warning: cuda-driver-behind-runtime: image CUDA 12.8 (image vllm/vllm-openai:v0.9.2) is newer than the "
            "driver's CUDA on 560.35.0…\n"
            "Warning: dtype-unsupported-by-gpu: --dtype bfloat16 needs compute capability >= 8.0 (bf16); eligible "
            "GPUs: Tesla-T4 (compute cap…\n")
        assert get(kapi, ns, "Pod", "bf16")["spec"]["containers"][0]["args"] == ["--dtype=bfloat16"]  # not fixed


# ---------------------------------------------------------------------------------------------- registry lookups


@dataclass
class RegistryInstall:
    install: Install
    registry: Any  # tests.registry.harness.Registry
    serving: Any  # the pushed custom image (harness.Pushed)

    def image(self, by_digest: bool = False) -> str:
        ref = f"@{self.serving.digest}" if by_digest else ":2025-10-14"
        return f"{self.registry.host}/ml/serving{ref}"


@pytest.fixture(scope="class")
def registry_chart(kapi: KubeAPIServer, helm: str, pools: None,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryInstall]:
    """A real distribution registry (TLS from a test CA, htpasswd) holding a custom image built "FROM" CUDA 13.0,
    and the chart with registry lookups allowed there only, its credentials in the Secret registry.pullSecret
    names (created with kubectl create secret docker-registry) and its CA in registry.caConfigMap."""
    from tests.registry.conftest import CUDA13_ENV, registry_binary
    from tests.registry.harness import USERS, Registry, RegistryCA

    tmp = tmp_path_factory.mktemp("chart-registry")
    ca = RegistryCA(tmp / "pki")
    reg = Registry(registry_binary(), tmp / "registry", ca, "htpasswd").start()
    try:
        serving = reg.push_image("ml/serving", "2025-10-14", CUDA13_ENV)

        def prepare(ns: str) -> None:  # what the values name, in the release namespace
            kapi.kubectl("create", "secret", "docker-registry", "corp-pull", "-n", ns, f"--docker-server={reg.host}",
                         "--docker-username=reader", f"--docker-password={USERS['reader']}")
            kapi.kubectl("create", "configmap", "corp-ca", "-n", ns, f"--from-file=ca.crt={ca.ca_file}")

        install = install_chart(kapi, helm, tmp, "ccr", {
            "replicaCount": 1, "registry": {"allow": [reg.host], "pullSecret": "corp-pull", "caConfigMap": "corp-ca"}},
            prepare)
        try:
            yield RegistryInstall(install, reg, serving)
        finally:
            install.uninstall()
    finally:
        reg.stop()


class TestRegistryLookups:
    """The chart with registry lookups: a custom image built FROM CUDA 13.0, pushed to a real registry, is denied
    through the real API server with the CUDA its config states, read with the credentials of the one Secret the
    values name (mounted, never readable through the API by the webhook); a registry off the allowlist gets no
    connection. Before the defaults: its install is gone before the next one starts."""

    def test_the_pull_secret_is_mounted_not_granted(self, kapi: KubeAPIServer, registry_chart: RegistryInstall) -> None:
        chart = registry_chart.install
        secrets = {r for r in can_i_list(kapi, chart.service_account, chart.namespace) if r[0] == "secrets"}
        assert secrets == {("secrets", (), ("create",)), ("secrets", ("ccr-compatcheck-tls",), ("get", "update"))}
        args = chart.pod_spec["containers"][0]["args"]
        assert "--registry-auth-file=/etc/compatcheck/registry-auth/config.json" in args
        mounted = json.loads((chart.hook.dir / "etc/compatcheck/registry-auth/config.json").read_text())
        assert list(mounted["auths"]) == [registry_chart.registry.host]

    @pytest.mark.parametrize("by_digest", [False, True], ids=["tag", "digest"])
    def test_a_custom_cuda13_image_is_denied_by_its_config(self, kapi: KubeAPIServer,
                                                           registry_chart: RegistryInstall, by_digest: bool) -> None:
        chart, image = registry_chart.install, registry_chart.image(by_digest)
        ns = namespace(kapi.client(), "chart-registry")
        chart.wait_called(ns)
        before = chart.hook.metric("compatcheck_registry_fetches_total", outcome="ok")
        pod = gpu_pod("serve", image, nodeSelector={"pool": T4})
        kubectl_apply(kapi, ns, pod, "--dry-run=server")  # the first review fetches (within the budget, or after)
        wait_until(lambda: chart.hook.metric("compatcheck_registry_fetches_total", outcome="ok") > before, 15,
                   what=f"the config fetched ({chart.hook.logs()})")
        out = kubectl_apply(kapi, ns, pod)
        line = (f"- cuda-driver-too-old: image CUDA 13.0 (image {image} (manifest {registry_chart.serving.digest[:19]}"
                "), whose config sets CUDA_VERSION=13.0.0) needs a driver from branch >= 580; eligible nodes run "
                "560.35.03 (CUDA 12.6) on chart-t4-0; the image's forward compatibility lists driver branches 535, "
                "550, 565, 570, 575 only")
        assert (out.returncode, out.stdout, out.stderr) == (1, "", denied("Pod", ns, "serve", line[:199] + "…\n"))

    def test_a_registry_off_the_allowlist_gets_no_connection(self, kapi: KubeAPIServer,
                                                             registry_chart: RegistryInstall) -> None:
        from tests.registry.harness import Listener

        chart = registry_chart.install
        rec = Listener("record")
        try:
            ns = namespace(kapi.client(), "chart-registry-off")
            chart.wait_called(ns)
            before = chart.hook.metric("compatcheck_registry_lookups_total", result="not-allowed")
            out = kubectl_apply(kapi, ns, gpu_pod("other", f"{rec.host}/ml/serving:1", nodeSelector={"pool": T4}))
            assert (out.returncode, out.stdout, out.stderr) == (0, "pod/other created\n", "")
            # once by the validating webhook, once by the mutating one; neither connects
            assert chart.hook.metric("compatcheck_registry_lookups_total", result="not-allowed") == before + 2
            assert rec.connections == 0
        finally:
            rec.close()


# ---------------------------------------------------------------------------------------------- the defaults


@pytest.fixture(scope="module")
def chart(kapi: KubeAPIServer, helm: str, pools: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Install]:
    """The chart's defaults (live view, self-managed TLS, enforce, 2 replicas) plus webhook.url and one
    excluded namespace; the CRL ConfigMaps applied through its own CRL webhook once it serves."""
    from kubernetes import client

    install = install_chart(kapi, helm, tmp_path_factory.mktemp("chart"), "cc",
                            {"webhook": {"excludeNamespaces": [EXCLUDED]}})
    try:
        # Through the chart's CRL webhook (failurePolicy Fail): this passes once the API server trusts the CA
        # the webhook patched in, a moment after the patch.
        crl = wait_until(lambda: (lambda r: r if "failed calling webhook" not in r.stderr else None)(
            kapi.kubectl("apply", "-f", str(CRL), check=False)), 10, step=0.1, what="the API server trusts the CA")
        assert crl.returncode == 0 and crl.stderr == "", crl.stderr
        try:
            wait_until(lambda: "4 CRL keys" in install.hook.get("/readyz")[1], 10)
        except AssertionError:
            raise AssertionError(f"the CRL ConfigMaps are not in view: {install.hook.get('/readyz')[1]}") from None
        install.wait_called(namespace(kapi.client(), "chart-probe"))
        yield install
    finally:
        install.uninstall()
        core = client.CoreV1Api(kapi.client())
        for doc in YAML(typ="safe").load_all(CRL.read_text()):
            core.delete_namespaced_config_map(doc["metadata"]["name"], "kube-public")


def test_self_managed_tls_converges_on_one_secret_without_renewing(kapi: KubeAPIServer, chart: Install) -> None:
    """Both replicas started at once, as the chart's ServiceAccount: one Secret (created by one of them, read by
    the other), its CA in every webhook of the chart's two configurations (patched: the chart renders none), its
    certificate served by both, for the Service names and the url's IP. Nothing renews: an IP in --tls-dns
    used to renew on every check, so replicas fought over the Secret and gave up (#10)."""
    from cryptography import x509

    service = f"cc-compatcheck.{chart.namespace}.svc"
    assert [a for a in chart.pod_spec["containers"][0]["args"] if a.startswith("--tls-dns=")] == [
        f"--tls-dns={service}", f"--tls-dns={service}.cluster.local", "--tls-dns=127.0.0.1"]  # webhook.url's host
    assert all("caBundle" not in w["clientConfig"] for d in chart.docs if d["kind"].endswith("WebhookConfiguration")
               for w in d["webhooks"])
    secret = json.loads(kapi.kubectl("get", "secret", f"{chart.fullname}-tls", "-n", chart.namespace,
                                     "-o", "json").stdout)
    assert secret["type"] == "kubernetes.io/tls" and sorted(secret["data"]) == ["ca.crt", "ca.key", "tls.crt",
                                                                               "tls.key"]
    assert secret["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "compatcheck"}
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    san = x509.load_pem_x509_certificate(data["tls.crt"]).extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value
    assert [n.value for n in san] == [service, f"{service}.cluster.local", ipaddress.ip_address("127.0.0.1")]
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        cfg = json.loads(kapi.kubectl("get", kind, chart.fullname, "-o", "json").stdout)
        assert [w["clientConfig"]["caBundle"] for w in cfg["webhooks"]] == [secret["data"]["ca.crt"]] * len(
            cfg["webhooks"])
    serving = x509.load_pem_x509_certificate(data["tls.crt"])

    def served(wh: WebhookProcess) -> x509.Certificate:
        return x509.load_pem_x509_certificate(ssl.get_server_certificate(("127.0.0.1", wh.port)).encode())

    assert [served(wh) for wh in chart.replicas] == [serving, serving]
    assert sum(len(logged(wh, "created TLS secret")) for wh in chart.replicas) == 1
    assert [logged(wh, "renewed serving certificate") for wh in chart.replicas] == [[], []]
    # The API server trusts it: a CUDA 13 Pod on the R560 pool is denied, not failed (failurePolicy Fail).
    ns = namespace(kapi.client(), "chart-tls")
    out = kubectl_apply(kapi, ns, gpu_pod("p", CUDA13, nodeSelector={"pool": T4}), "--dry-run=server")
    assert (out.returncode, out.stderr) == (1, denied("Pod", ns, "p"))
    # A replica restarted (a rollout, an eviction) takes the Secret as it is.
    rv = secret["metadata"]["resourceVersion"]
    chart.replicas[1].kill()
    chart.replicas[1].start()
    again = json.loads(kapi.kubectl("get", "secret", f"{chart.fullname}-tls", "-n", chart.namespace,
                                    "-o", "json").stdout)
    assert again["metadata"]["resourceVersion"] == rv and served(chart.replicas[1]) == serving
    assert sum(len(logged(wh, "created TLS secret")) for wh in chart.replicas) == 1
    assert logged(chart.replicas[1], "renewed serving certificate") == []


@pytest.mark.parametrize("apply", [["apply"], ["apply", "--server-side", "--field-manager=helm"]],
                         ids=["client-side", "server-side"])
def test_an_upgrade_keeps_the_patched_ca_bundle(kapi: KubeAPIServer, chart: Install, apply: list[str]) -> None:
    """The chart renders no caBundle, so re-applying it (helm upgrade: a three-way merge in helm 3, server-side
    apply in helm 4) must leave the webhook's patch alone: the webhook re-patches only every 12 hours, and
    until then a failurePolicy Fail configuration without its CA refuses every GPU object."""
    def bundles() -> list[str]:
        return [w["clientConfig"].get("caBundle", "") for kind in ("validatingwebhookconfiguration",
                                                                   "mutatingwebhookconfiguration")
                for w in json.loads(kapi.kubectl("get", kind, chart.fullname, "-o", "json").stdout)["webhooks"]]

    before = bundles()
    assert len(set(before)) == 1 and before[0]
    kapi.kubectl(*apply, "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": chart.docs}))
    assert bundles() == before
    ns = namespace(kapi.client(), "chart-upgrade")
    out = kubectl_apply(kapi, ns, gpu_pod("p", CUDA13, nodeSelector={"pool": T4}), "--dry-run=server")
    assert (out.returncode, out.stderr) == (1, denied("Pod", ns, "p"))


def test_rbac_is_exactly_enough(kapi: KubeAPIServer, chart: Install) -> None:
    """What the webhook just did as its ServiceAccount (list and watch Nodes, the DRA objects, KServe's runtimes and
    the kube-public CRL ConfigMaps, create, read and keep its Secret, patch its two configurations) is all it may
    do: no Secret but its own to read, no ConfigMap outside kube-public, no Pod, no other webhook configuration."""
    read = ("get", "list", "watch")
    nodes = ("nodes", (), read)
    own = [(f"{r}.resource.k8s.io", (), read) for r in (
        "resourceslices", "deviceclasses", "resourceclaims", "resourceclaimtemplates")]
    own += [(f"{r}.serving.kserve.io", (), read) for r in ("servingruntimes", "clusterservingruntimes")]
    own += [(f"{kind}webhookconfigurations.admissionregistration.k8s.io", ("cc-compatcheck",), ("get", "patch"))
            for kind in ("mutating", "validating")]
    assert can_i_list(kapi, chart.service_account, "default") == {nodes, *own}
    assert can_i_list(kapi, chart.service_account, "kube-public") == {
        nodes, *own, ("configmaps", (), ("get", "list", "watch"))}
    assert can_i_list(kapi, chart.service_account, chart.namespace) == {
        nodes, *own, ("secrets", (), ("create",)), ("secrets", ("cc-compatcheck-tls",), ("get", "update"))}
    assert chart.hook.get("/readyz")[1].startswith("ok: ")  # it did list both, as this ServiceAccount


@pytest.mark.parametrize("kind", KINDS)
def test_an_error_finding_denies(kapi: KubeAPIServer, chart: Install, kind: str) -> None:
    """Each kind reaches its webhook of the chart (rules, CEL) and kubectl exits 1 with the finding."""
    ns = namespace(kapi.client(), "chart-deny")
    out = kubectl_apply(kapi, ns, workload(kind, "bad", gpu_pod("p", CUDA13, nodeSelector={"pool": T4})))
    assert (out.returncode, out.stdout, out.stderr) == (1, "", denied(kind, ns, "bad"))


@pytest.mark.parametrize("kind", KINDS)
def test_a_warning_finding_is_a_kubectl_warning(kapi: KubeAPIServer, chart: Install, kind: str) -> None:
    ns = namespace(kapi.client(), "chart-warn")
    out = kubectl_apply(kapi, ns, workload(kind, "skew", gpu_pod("p", CUDA11_8, nodeSelector={"pool": H100})))
    assert (out.returncode, out.stdout) == (0, f"{kubectl_name(kind)}/skew created\n")
    assert out.stderr == SKEW


@pytest.mark.parametrize("kind", KINDS)
def test_crl_defaults_are_filled_in(kapi: KubeAPIServer, chart: Install, kind: str) -> None:
    """The mutating webhook adds exactly the CRL defaults (fixtures/crl-default-missing/fixed.optional.yaml):
    the stored object differs from the same object stored without the webhook (opted out) by those fields."""
    import jsonpatch

    ns = namespace(kapi.client(), "chart-crl")
    obj = workload(kind, "v", vgpu_pod())
    out = kubectl_apply(kapi, ns, obj, "-o", "json")
    assert out.returncode == 0, out.stderr
    assert out.stderr == MUTATED
    stored = json.loads(out.stdout)
    assert pod_spec(stored)["containers"][0]["resources"] == WITH_CRL_DEFAULTS
    # The same object opted out (label): what the API server alone makes of it. The containers differ by
    # exactly the two fields (the Pod's own token volume name differs too, so volumeMounts are left out).
    alone = {**obj, "metadata": {"name": "alone", "labels": {"compatcheck.io/ignore": "true"}}}
    plain = json.loads(kubectl_apply(kapi, ns, alone, "-o", "json").stdout)

    def containers(o: dict[str, Any]) -> list[dict[str, Any]]:
        return [{k: v for k, v in c.items() if k != "volumeMounts"} for c in pod_spec(o)["containers"]]

    assert jsonpatch.make_patch(containers(plain), containers(stored)).patch == [
        {"op": "add", "path": "/0/resources/limits/example.com~1vcuda-priority", "value": "1"},
        {"op": "add", "path": "/0/resources/requests/example.com~1vcuda-priority", "value": "1"}]


R535, R535_FC = "chart-r535", "chart-r535-fc"  # T4 pools on R535; the second declares forward compatibility


@pytest.fixture
def r535_pools(kapi: KubeAPIServer) -> Iterator[None]:
    """Two T4 pools on R535 (CUDA 12.2), a branch CUDA 13.0's NVIDIA_REQUIRE_CUDA lists for forward compatibility; the
    admin labelled the second compatcheck.io/forward-compatibility=true. Deleted afterwards: the other modules share
    the API server, and their pods without a selector would land on them."""
    from kubernetes import client

    api = kapi.client()
    names = [f"{R535}-0", f"{R535_FC}-0"]
    create_node(api, gpu_node(names[0], driver="535.104.05", labels={"pool": R535}))
    create_node(api, gpu_node(names[1], driver="535.104.05", labels={
        "pool": R535_FC, "compatcheck.io/forward-compatibility": "true"}))
    try:
        yield
    finally:
        core = client.CoreV1Api(api)
        for name in names:
            core.delete_node(name)


def test_cuda13_on_r535_is_denied_unless_the_pool_declares_forward_compatibility(
        kapi: KubeAPIServer, chart: Install, r535_pools: None) -> None:
    """The platform's rule (driver >= runtime) is the default: the CUDA 13.0 pod on the R535 pool is denied, and the
    denial says NVIDIA forward compatibility could bridge it; on the pool whose label declares that the platform
    enables forward compatibility, the same pod is admitted with the warning cuda-driver-needs-forward-compat. The
    live view learns the new Nodes from its watch: until then no node matches the selector (gpu-no-eligible-node),
    so each answer is awaited by what it must name."""
    ns = namespace(kapi.client(), "chart-fwd")
    chart.wait_called(ns)

    def answer(pool: str, wanted: str) -> subprocess.CompletedProcess[str]:
        def attempt() -> subprocess.CompletedProcess[str] | None:
            out = kubectl_apply(kapi, ns, gpu_pod("p", CUDA13, nodeSelector={"pool": pool}), "--dry-run=server")
            return out if wanted in out.stderr else None
        found: subprocess.CompletedProcess[str] = wait_until(attempt, 10, step=0.1, what=f"the webhook sees {pool}")
        return found

    out = answer(R535, "cuda-driver-too-old")
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr == denied("Pod", ns, "p", (
        "- cuda-driver-too-old: image CUDA 13.0 (image nvidia/cuda:13.0.0-base-ubuntu24.04) needs a driver from branch "
        ">= 580; eligible nodes run 535.104.05 (CUDA 12.2) on chart-r535-0; NVIDIA forward compati…\n"))
    out = answer(R535_FC, "cuda-driver-needs-forward-compat")
    assert (out.returncode, out.stdout) == (0, "pod/p created (server dry run)\n"), out.stderr
    assert out.stderr == ("Warning: cuda-driver-needs-forward-compat: image CUDA 13.0 (image "
                          "nvidia/cuda:13.0.0-base-ubuntu24.04) is newer than the driver …\n")


def test_update_of_an_object_with_a_stored_problem(kapi: KubeAPIServer, chart: Install) -> None:
    """The ratchet through kubectl's own UPDATE (client-side apply, a three-way merge): a Deployment stored
    before the policy applied to it (opted out then) takes an unrelated change, with its finding as a warning;
    changing the offending value is denied. The objectSelector sends the update once the label is gone."""
    ns = namespace(kapi.client(), "chart-update")
    old = workload("Deployment", "d", gpu_pod("p", CUDA13, nodeSelector={"pool": T4}))
    old["metadata"]["labels"] = {"compatcheck.io/ignore": "true"}
    before = chart.admission_requests()
    assert kubectl_apply(kapi, ns, old).stdout == "deployment.apps/d created\n"
    assert chart.admission_requests() == before  # opted out: not sent at all
    unrelated = json.loads(json.dumps(old))
    unrelated["metadata"]["labels"] = {"team": "ml"}
    out = kubectl_apply(kapi, ns, unrelated)
    assert (out.returncode, out.stdout) == (0, "deployment.apps/d configured\n"), out.stderr
    assert out.stderr == ("Warning: cuda-driver-too-old: image CUDA 13.0 (image nvidia/cuda:13.0.0-base-ubuntu24.04) "
                          "needs a driver from branch >= 580; eli…\n")
    changed = json.loads(json.dumps(unrelated))
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "nvidia/cuda:13.1.0-base-ubuntu24.04"
    out = kubectl_apply(kapi, ns, changed)
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr.startswith("Error from server (Forbidden): error when applying patch:\n")
    assert out.stderr.endswith(
        f'error when patching "STDIN": admission webhook "workloads.validate.compatcheck.io" denied the request: '
        f"compatcheck denied Deployment {ns}/d:\n- cuda-driver-too-old: image CUDA 13.1 (image "
        "nvidia/cuda:13.1.0-base-ubuntu24.04) needs a driver from branch >= 590; eligible nodes run 560.35.03 (CUDA "
        "12.6) on chart-t4-0; NVIDIA forward compatibil…\n"), out.stderr
    assert get(kapi, ns, "Deployment", "d")["spec"]["template"]["spec"]["containers"][0]["image"] == CUDA13


def test_server_side_apply_converges_with_the_mutation(kapi: KubeAPIServer, chart: Install) -> None:
    """Re-applied (server-side) with the same manifest, the object and its managed fields stay as they are:
    the mutation is neither dropped by the apply nor added again as a change (no flip-flop, no drift)."""
    ns = namespace(kapi.client(), "chart-ssa")
    obj = workload("Deployment", "v", vgpu_pod())
    first = kubectl_apply(kapi, ns, obj, "--server-side")
    assert (first.returncode, first.stdout, first.stderr) == (0, "deployment.apps/v serverside-applied\n", MUTATED)
    stored = get(kapi, ns, "Deployment", "v")
    assert pod_spec(stored)["containers"][0]["resources"] == WITH_CRL_DEFAULTS
    # The webhook's fields belong to no manager: a re-apply without them leaves them alone, so the webhook
    # finds nothing to do, and nothing changes (resourceVersion and managedFields included).
    assert "vcuda-priority" not in json.dumps(stored["metadata"]["managedFields"])
    for _ in range(3):
        again = kubectl_apply(kapi, ns, obj, "--server-side")
        assert (again.returncode, again.stdout, again.stderr) == (0, "deployment.apps/v serverside-applied\n", "")
        assert get(kapi, ns, "Deployment", "v") == stored


def test_server_dry_run_is_decided_and_stores_nothing(kapi: KubeAPIServer, chart: Install) -> None:
    ns = namespace(kapi.client(), "chart-dry")
    bad = gpu_pod("bad", CUDA13, nodeSelector={"pool": T4})
    out = kubectl_apply(kapi, ns, bad, "--dry-run=server")
    assert (out.returncode, out.stdout, out.stderr) == (1, "", denied("Pod", ns, "bad"))
    out = kubectl_apply(kapi, ns, vgpu_pod(), "--dry-run=server", "-o", "json")
    assert (out.returncode, out.stderr) == (0, MUTATED)
    assert json.loads(out.stdout)["spec"]["containers"][0]["resources"] == WITH_CRL_DEFAULTS
    assert kapi.kubectl("get", "pods", "-n", ns, "-o", "name").stdout == ""
    decisions = [(d["endpoint"], d["name"], d["dryRun"], d["allowed"]) for d in logged(chart.hook, "admission")
                 if d["namespace"] == ns]
    assert decisions == [("mutate", "bad", True, True), ("validate", "bad", True, False),
                         ("mutate", "v", True, True), ("validate", "v", True, True)]
def test_objects_without_gpus_are_never_sent(kapi: KubeAPIServer, chart: Install) -> None:
    """The chart's CEL matchConditions, run by the API server: Pods, Deployments, Jobs and CronJobs that
    request no extended resource are neither sent on create nor on update (the webhook's request counter
    stays flat); a GPU Pod right after is sent once to each endpoint."""
    ns = namespace(kapi.client(), "chart-cpu")
    before = chart.admission_requests()
    for kind in KINDS:
        obj = workload(kind, "cpu", gpu_pod("p", CUDA13, limits={"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "2Mi"}))
        assert kubectl_apply(kapi, ns, obj).stdout == f"{kubectl_name(kind)}/cpu created\n"
        obj["metadata"]["labels"] = {"team": "ml"}
        assert kubectl_apply(kapi, ns, obj).stdout == f"{kubectl_name(kind)}/cpu configured\n"
    assert chart.admission_requests() == before
    assert kubectl_apply(kapi, ns, gpu_pod("gpu", CUDA12_2, nodeSelector={"pool": T4})).returncode == 0
    assert chart.admission_requests() == before + 2
    assert chart.hook.metric("compatcheck_admission_requests_total", kind="Pod", result="allowed") >= 1


def test_opt_out_label_on_the_object_and_on_the_namespace(kapi: KubeAPIServer, chart: Install) -> None:
    """compatcheck.io/ignore=true, by the chart's objectSelector and namespaceSelector: not even sent."""
    from kubernetes import client

    api = kapi.client()
    ns, ignored_ns = namespace(api, "chart-optout"), namespace(api, "chart-optout-ns")
    client.CoreV1Api(api).patch_namespace(ignored_ns, {"metadata": {"labels": {"compatcheck.io/ignore": "true"}}})
    labelled = workload("Deployment", "bad", gpu_pod("p", CUDA13, nodeSelector={"pool": T4}))
    labelled["metadata"]["labels"] = {"compatcheck.io/ignore": "true"}
    before = chart.admission_requests()
    assert kubectl_apply(kapi, ns, labelled).stdout == "deployment.apps/bad created\n"
    assert kubectl_apply(kapi, ignored_ns, gpu_pod("bad", CUDA13, nodeSelector={"pool": T4})).stdout == \
        "pod/bad created\n"
    assert chart.admission_requests() == before
    # The label's value matters: anything but "true" is still checked.
    labelled["metadata"]["labels"] = {"compatcheck.io/ignore": "false"}
    out = kubectl_apply(kapi, ns, {**labelled, "metadata": {**labelled["metadata"], "name": "other"}})
    assert (out.returncode, out.stderr) == (1, denied("Deployment", ns, "other"))


def test_excluded_namespaces_are_never_sent(kapi: KubeAPIServer, chart: Install) -> None:
    """webhook.excludeNamespaces and the release namespace (where the webhook itself runs)."""
    from kubernetes import client

    core = client.CoreV1Api(kapi.client())
    core.create_namespace({"metadata": {"name": EXCLUDED}})
    bad = gpu_pod("bad", CUDA13, nodeSelector={"pool": T4})
    before = chart.admission_requests()
    for ns in (EXCLUDED, chart.namespace):
        core.create_namespaced_service_account(ns, {"metadata": {"name": "default"}})
        assert kubectl_apply(kapi, ns, bad).stdout == "pod/bad created\n"
    assert chart.admission_requests() == before


SUPPRESSED = [  # (annotations on the object, on its pod template; exit code, stderr (None: the denial))
    ({"compatcheck.io/ignore": "cuda-driver-too-old=driver upgrade to R580 booked for 1 March"}, {}, 0, ""),
    ({}, {"compatcheck.io/ignore.main": "cuda-driver-too-old=driver upgrade to R580 booked for 1 March"}, 0, ""),
    ({"compatcheck.io/ignore": "cuda-driver-too-old"}, {}, 0,
     "Warning: suppression-without-reason: suppression of cuda-driver-too-old has no reason: write "
     'compatcheck.io/ignore: "cuda-driver…\n'),
    ({"compatcheck.io/ignore.sidecar": "cuda-driver-too-old=not this container"}, {}, 1, None),
    ({"compatcheck.io/ignore": "dtype-unsupported-by-gpu=another rule"}, {}, 1, None),
]


@pytest.mark.parametrize(("annotations", "template", "rc", "stderr"), SUPPRESSED,
                         ids=["object", "template-container", "no-reason", "other-container", "other-rule"])
def test_suppression_annotations(kapi: KubeAPIServer, chart: Install, annotations: dict[str, str],
                                 template: dict[str, str], rc: int, stderr: str | None) -> None:
    """compatcheck.io/ignore[.<container>]: "rule=reason" on the Deployment or its pod template silences that
    rule there (a bare rule id too, with a warning); another container's or another rule's does not."""
    ns = namespace(kapi.client(), "chart-suppress")
    obj = workload("Deployment", "d", gpu_pod("p", CUDA13, nodeSelector={"pool": T4}))
    obj["metadata"]["annotations"] = annotations
    obj["spec"]["template"]["metadata"]["annotations"] = template
    out = kubectl_apply(kapi, ns, obj)
    assert (out.returncode, out.stderr) == (rc, denied("Deployment", ns, "d") if rc else stderr)
    assert out.stdout == ("deployment.apps/d created\n" if rc == 0 else "")


def test_crl_configmaps_are_validated_in_kube_public_only(kapi: KubeAPIServer, chart: Install) -> None:
    """The chart's CRL webhook: a change that breaks a CRL ConfigMap in kube-public is refused (the platform
    would silently drop the limits); ConfigMaps that do not claim to be CRLs, and CRL-shaped ones elsewhere,
    are not sent."""
    broken = kapi.kubectl("apply", "-f", str(FIXTURES / "crl-configmap-invalid" / "fail.bad-default.yaml"),
                          check=False)
    assert broken.returncode == 1 and broken.stderr.endswith(
        'admission webhook "crl-configmaps.validate.compatcheck.io" denied the request: compatcheck denied ConfigMap '
        "kube-public/cf-crl-gpu-manager-vcuda-core:\n- crl-configmap-invalid: CustomResourceLimitation ConfigMap "
        "breaks the cf-crl spec: defaultValue 'half' is not a valid integer\n"), broken.stderr
    stored = json.loads(kapi.kubectl("get", "configmap", "-n", "kube-public", "cf-crl-gpu-manager-vcuda-core",
                                     "-o", "json").stdout)
    assert stored["data"]["defaultValue"] == "100"
    ns = namespace(kapi.client(), "chart-cm")
    elsewhere = YAML(typ="safe").load((FIXTURES / "crl-configmap-invalid" / "fail.bad-default.yaml").read_text())
    elsewhere["metadata"]["namespace"] = ns
    plain = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"defaultValue": "half"},
             "metadata": {"name": f"settings-{ns}", "namespace": "kube-public"}}
    before = chart.admission_requests()
    for cm in (elsewhere, plain):
        assert kapi.kubectl("apply", "-f", "-", stdin=json.dumps(cm)).stdout.endswith(" created\n")
    assert chart.admission_requests() == before
    kapi.kubectl("delete", "configmap", "-n", "kube-public", plain["metadata"]["name"])


# ---------------------------------------------------------------------------------------------- every kind of the table

# fixtures/_workloads: one failing GPU manifest per kind of the workload table (tests/test_workload_kinds.py), each
# applied here with --dry-run=server through the chart's own webhook configurations. Not applied: the
# extensions/v1beta1 and mlkube.io ones (no API server serves those groups any more) and the InferenceGraph (no
# pod spec, not routed). Custom resources get a CRD each, with an open schema: the API server then matches them
# against the chart's rules (scope included: ClusterServingRuntime and ClusterTrainingRuntime are cluster-scoped)
# as it would in a cluster running the operator.
BUILTIN_GROUPS = ("", "apps", "batch")
# The kinds whose CRDs are cluster-scoped: the same list the chart's routing test holds the table to.
CLUSTER_SCOPED_KINDS = {kind for _, kind in CHART_CLUSTER_SCOPED_KINDS}


def workload_manifests(*, builtin: bool) -> list[Any]:
    from compatcheck.core.workloads import api_group
    from tests.test_workload_kinds import EXPECTED, GAPS, load

    out: list[Any] = []
    for name in sorted(EXPECTED):
        obj = load(name)
        group = api_group(obj["apiVersion"])
        if group in ("extensions", "mlkube.io") or not EXPECTED[name] or (group in BUILTIN_GROUPS) != builtin:
            continue
        out.append(pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=GAPS[name])) if name in GAPS
                   else name)
    return out


@pytest.fixture(scope="module")
def crds(kapi: KubeAPIServer) -> Iterator[None]:
    """A CRD with an open schema for every custom resource of fixtures/_workloads, removed at the end."""
    from tests.test_workload_kinds import load, resource_of

    names, items = [], []
    for param in workload_manifests(builtin=False):
        name = param if isinstance(param, str) else param.values[0]
        obj = load(name)
        group, version = obj["apiVersion"].split("/")
        plural = resource_of(obj["kind"])
        names.append(f"{plural}.{group}")
        items.append({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                      "metadata": {"name": f"{plural}.{group}", "labels": {"compatcheck-e2e": "kinds"}},
                      "spec": {"group": group, "scope": "Cluster" if obj["kind"] in CLUSTER_SCOPED_KINDS
                               else "Namespaced",
                               "names": {"kind": obj["kind"], "plural": plural, "singular": obj["kind"].lower(),
                                         "listKind": obj["kind"] + "List"},
                               "versions": [{"name": version, "served": True, "storage": True, "schema": {
                                   "openAPIV3Schema": {"type": "object",
                                                       "x-kubernetes-preserve-unknown-fields": True}}}]}})
    kapi.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    try:
        kapi.kubectl("wait", "--for=condition=Established", "--timeout=60s", *(f"crd/{n}" for n in names))
        yield
    finally:
        kapi.kubectl("delete", "crd", "--wait=false", "-l", "compatcheck-e2e=kinds")


def _denied_through_the_chart(kapi: KubeAPIServer, chart: Install, name: str, hook: str) -> None:
    """``name`` applied with --dry-run=server is denied by the chart's ``hook`` webhook with (at least) the
    findings tests/test_workload_kinds.py expects of it offline; the live view may add its own (here the R470
    pin matches only the GPU-Manager pool, which offers no nvidia.com/gpu: gpu-no-eligible-node)."""
    from tests.test_workload_kinds import EXPECTED, RULE, load

    obj = load(name)
    meta = obj["metadata"]
    args: list[str] = []
    if obj["kind"] not in CLUSTER_SCOPED_KINDS:
        ns = namespace(kapi.client(), "chart-kinds")
        meta["namespace"] = ns
        args = ["-n", ns]
    where = f"{meta['namespace']}/{meta['name']}" if "namespace" in meta else meta["name"]
    out = kapi.kubectl("apply", *args, "--dry-run=server", "-f", "-", stdin=json.dumps(obj), check=False)
    assert (out.returncode, out.stdout) == (1, ""), out.stderr
    head = (f'Error from server (Forbidden): error when creating "STDIN": admission webhook "{hook}.validate.'
            f'compatcheck.io" denied the request: compatcheck denied {obj["kind"]} {where}:\n')
    assert out.stderr.startswith(head), out.stderr
    lines = out.stderr[len(head):].splitlines()
    for _pointer, _container, message in EXPECTED[name]:
        line = f"- {RULE}: {message}"
        assert (line if len(line) <= 200 else line[:199] + "…") in lines, out.stderr


@pytest.mark.parametrize("name", workload_manifests(builtin=True))
def test_every_builtin_kind_of_the_table_is_denied_through_the_chart(kapi: KubeAPIServer, chart: Install,
                                                                      name: str) -> None:
    from tests.test_workload_kinds import load

    kind = load(name)["kind"]
    hook = {"Pod": "pods", "CronJob": "cronjobs", "PodTemplate": "podtemplates"}.get(kind, "workloads")
    _denied_through_the_chart(kapi, chart, name, hook)


@pytest.mark.parametrize("name", workload_manifests(builtin=False))
def test_every_custom_kind_of_the_table_is_denied_through_the_chart(kapi: KubeAPIServer, chart: Install,
                                                                     crds: None, name: str) -> None:
    _denied_through_the_chart(kapi, chart, name, "custom-resources")


def test_a_webhook_down_refuses_gpu_objects_only(kapi: KubeAPIServer, chart: Install) -> None:
    """The chart's failure policies with its webhook unreachable: validation is Fail, so a GPU object is
    refused rather than let through unchecked, while the matchConditions keep every other object out of the
    blast radius. Last in the module: it stops the replica behind webhook.url (and starts it again)."""
    ns = namespace(kapi.client(), "chart-down")
    chart.hook.kill()
    try:
        out = kubectl_apply(kapi, ns, gpu_pod("gpu", CUDA12_2, nodeSelector={"pool": T4}))
        assert out.returncode == 1 and out.stderr.startswith(
            'Error from server (InternalError): error when creating "STDIN": Internal error occurred: failed '
            'calling webhook "pods.validate.compatcheck.io": failed to call webhook: Post '
            f'"https://127.0.0.1:{chart.hook.port}/validate?timeout=5s": '), out.stderr
        cpu = gpu_pod("cpu", CUDA12_2, limits={"cpu": "1"})
        assert kubectl_apply(kapi, ns, cpu).stdout == "pod/cpu created\n"
    finally:
        chart.hook.start()
    assert kubectl_apply(kapi, ns, gpu_pod("gpu", CUDA12_2, nodeSelector={"pool": T4})).stdout == "pod/gpu created\n"


@pytest.mark.parametrize("kind", ["Pod", "Deployment", "CronJob", "PodTemplate"])
def test_a_kai_gpu_fraction_pod_reaches_the_webhook_through_the_charts_cel(kapi: KubeAPIServer, chart: Install,
                                                                          kind: str) -> None:
    """KAI Scheduler's GPU sharing: no container asks for nvidia.com/gpu, the gpu-fraction annotation on the pod
    template does (a CronJob's at spec.jobTemplate.spec.template.metadata, a PodTemplate's at template.metadata).
    The real API server evaluates the chart's matchConditions and sends it; the rules see a GPU pod and deny."""
    ns = namespace(kapi.client(), "chart-kai")
    pod = gpu_pod("p", CUDA13, nodeSelector={"pool": T4}, schedulerName="kai-scheduler")
    del pod["spec"]["containers"][0]["resources"]
    obj = workload(kind, "kai", pod)
    meta = {"Pod": lambda o: o["metadata"], "CronJob": lambda o: o["spec"]["jobTemplate"]["spec"]["template"][
        "metadata"], "PodTemplate": lambda o: o["template"]["metadata"]}.get(
        kind, lambda o: o["spec"]["template"]["metadata"])(obj)
    meta["annotations"] = {"gpu-fraction": "0.5"}
    out = kubectl_apply(kapi, ns, obj)
    assert (out.returncode, out.stdout, out.stderr) == (1, "", denied(kind, ns, "kai"))
    del meta["annotations"]
    out = kubectl_apply(kapi, ns, obj, "--dry-run=server")  # no annotation, no GPU request: admitted
    assert out.returncode == 0, out.stderr
