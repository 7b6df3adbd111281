"""End-to-end fixtures: a real kube-apiserver + etcd (``kapi.py``), ``compatcheck webhook serve`` as a real
process in live mode, and webhook configurations with a ``url`` clientConfig on loopback.

Every test here skips with a one-line reason when no kube-apiserver is available (see ``kapi.py``:
``KAPI_APISERVER_BIN``, ``KUBEBUILDER_ASSETS`` or PATH; nothing ships or builds one), and fails instead where
``COMPATCHECK_E2E_REQUIRED`` is set. Tests that restart the API server take their own
(``own_kapi``); the others share one per session and use their own namespace.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from compatcheck.webhook import certs
from tests.e2e.kapi import Binaries, KubeAPIServer, find_binaries, free_port

NS_LABEL = "compatcheck-e2e"


def binaries() -> Binaries:
    """The binaries, or a skip with the one-line reason; a failure instead where whoever runs the suite set
    COMPATCHECK_E2E_REQUIRED (CI does not: no package registry it reaches ships a kube-apiserver)."""
    found = find_binaries()
    if isinstance(found, str):
        if os.environ.get("COMPATCHECK_E2E_REQUIRED"):
            pytest.fail(f"end-to-end suite required but {found}")
        pytest.skip(found)
    return found


def _server(tmp: Path) -> KubeAPIServer:
    return KubeAPIServer(binaries(), tmp).start()


@pytest.fixture(scope="session")
def kapi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeAPIServer]:
    server = _server(tmp_path_factory.mktemp("kapi"))
    yield server
    server.stop()


@pytest.fixture
def own_kapi(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeAPIServer]:
    """An API server of the test's own, for tests that restart it."""
    server = _server(tmp_path_factory.mktemp("kapi-own"))
    yield server
    server.stop()


def wait_until(cond: Callable[[], Any], timeout: float = 10.0, step: float = 0.05, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(step)
    raise AssertionError(f"{what} not reached within {timeout} s (last: {last!r})")


# ---------------------------------------------------------------------------------------------- objects


def gpu_node(name: str, *, product: str = "Tesla-T4", driver: str = "560.35.03", gpus: int = 4,
             labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """A Node as GPU Feature Discovery labels it."""
    major = driver.split(".")[0]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "nvidia.com/gpu.product": product,
        "nvidia.com/cuda.driver-version.full": driver, "nvidia.com/cuda.driver-version.major": major,
        "nvidia.com/gpu.count": str(gpus), **(labels or {})}},
        "spec": {"taints": taints or []}, "status": {"capacity": {"nvidia.com/gpu": str(gpus), "cpu": "16"},
                                                      "allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "16"}}}


def create_node(api: Any, node: dict[str, Any]) -> dict[str, Any]:
    """Create a Node and set its status (a subresource: create drops it), as a kubelet would."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    status = node.get("status")
    created = json.loads(core.create_node(node, _preload_content=False).data)
    if status:
        created = json.loads(core.patch_node_status(node["metadata"]["name"], {"status": status},
                                                    _preload_content=False).data)
    return created  # type: ignore[no-any-return]


def namespace(api: Any, hook: str) -> str:
    """A fresh namespace that the webhook configurations registered as ``hook`` (and only those) watch, with the
    ``default`` ServiceAccount (no controller-manager runs to create it, and the ServiceAccount admission plugin
    wants it for Pods)."""
    from kubernetes import client

    name = f"{hook}-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": name, "labels": {NS_LABEL: hook}}})
    core.create_namespaced_service_account(name, {"metadata": {"name": "default"}})
    return name


def gpu_pod(name: str, image: str, *, args: list[str] | None = None, limits: dict[str, str] | None = None,
            **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "containers": [{"name": "main", "image": image, "args": args or [],
                        "resources": {"limits": limits or {"nvidia.com/gpu": "1"}}}], **spec}}


def deployment(name: str, pod: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": {
        "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": pod["spec"]}}}


# ---------------------------------------------------------------------------------------------- the webhook


class WebhookProcess:
    """A ``compatcheck webhook serve`` process run with ``argv`` (after ``compatcheck webhook serve``), serving
    HTTPS on ``port`` with a certificate that ``ca_file`` (read when first needed: self-managed TLS writes it at
    start) verifies for 127.0.0.1, and /metrics on ``metrics_port``."""

    def __init__(self, kapi: KubeAPIServer, workdir: Path, argv: list[str], *, port: int, metrics_port: int,
                 ca_file: Path, env: dict[str, str] | None = None) -> None:
        self.kapi = kapi
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port, self.metrics_port, self.ca_file = port, metrics_port, ca_file
        self.args = [sys.executable, "-m", "compatcheck", "webhook", "serve", *argv]
        self.env = env or {}
        self.log = self.dir / "webhook.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.registered: list[str] = []

    @property
    def ca(self) -> bytes:
        return self.ca_file.read_bytes()

    def start(self, *, ready: bool = True, timeout: float = 30) -> WebhookProcess:
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT, env={**env, **self.env},
                                         start_new_session=True)

        def up(path: str) -> bool:
            if self.proc is not None and self.proc.poll() is not None:  # say why at once, not after the timeout
                raise AssertionError(f"webhook exited with {self.proc.returncode}: {self.logs()}")
            return self.get(path)[0] == 200

        wait_until(lambda: up("/healthz"), timeout, what=f"webhook up ({self.logs()})")
        if ready:
            wait_until(lambda: up("/readyz"), timeout, what=f"webhook ready ({self.logs()})")
        return self

    def logs(self, lines: int = 8) -> str:
        try:
            return " | ".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(30)

    def stop(self) -> None:
        self.kill(signal.SIGTERM)

    # -------------------------------------------------------------- talking to it directly
    def _ctx(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{self.port}{path}", context=self._ctx(), timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except OSError:
            return 0, ""

    def review(self, endpoint: str, obj: dict[str, Any], *, operation: str = "CREATE",
               old: dict[str, Any] | None = None, namespace: str = "default") -> dict[str, Any]:
        body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": str(uuid.uuid4()), "kind": {"group": "", "version": "v1", "kind": obj.get("kind")},
            "operation": operation, "namespace": namespace, "object": {**obj, "metadata": {
                **obj.get("metadata", {}), "namespace": namespace}}, "oldObject": old, "dryRun": False}}
        req = urllib.request.Request(f"https://127.0.0.1:{self.port}/{endpoint}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, context=self._ctx(), timeout=5) as r:
            return json.loads(r.read())["response"]  # type: ignore[no-any-return]

    def metric(self, name: str, **labels: str) -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
        want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        total = 0.0
        for line in text.splitlines():
            if not line.startswith(name):
                continue
            head, _, value = line.rpartition(" ")
            rest = head[len(name):]
            if rest and not rest.startswith("{"):
                continue  # another metric whose name starts with ours
            got = ",".join(sorted(rest.strip("{}").split(","))) if rest else ""
            if all(part in got.split(",") for part in want.split(",") if part):
                total += float(value)
        return total

    def wait_for_nodes_version(self, version: str | int, timeout: float = 5.0) -> None:
        """Until the webhook's view includes the Nodes at ``version`` (from /readyz)."""
        def seen() -> bool:
            status, text = self.get("/readyz")
            marker = "resourceVersion "
            if status != 200 or marker not in text:
                return False
            return int(text.split(marker, 1)[1].split(")", 1)[0]) >= int(version)

        wait_until(seen, timeout, what=f"view at nodes resourceVersion {version}")

    # -------------------------------------------------------------- registration with the API server
    def register(self, name: str, *, failure_policy: str = "Fail", mutate: bool = True,
                 timeout_seconds: int = 5, extra_rules: list[dict[str, Any]] | None = None) -> None:
        """Validating (and mutating) webhook configurations for Pods, workloads and Jobs/CronJobs (and
        ``extra_rules``) in the namespaces made by ``namespace(api, name)``, calling this webhook through a ``url``
        clientConfig. They are deleted at the end of the test."""
        from kubernetes import client

        bundle = base64.b64encode(self.ca).decode()
        rules = [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]},
                 {"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]},
                 {"apiGroups": ["batch"], "apiVersions": ["v1"], "resources": ["jobs", "cronjobs"]},
                 *(extra_rules or [])]

        def hook(kind: str) -> dict[str, Any]:
            return {"name": f"{kind}.{name}.compatcheck.io", "admissionReviewVersions": ["v1"],
                    "sideEffects": "None", "failurePolicy": failure_policy, "timeoutSeconds": timeout_seconds,
                    "clientConfig": {"url": f"https://127.0.0.1:{self.port}/{kind}", "caBundle": bundle},
                    "namespaceSelector": {"matchLabels": {NS_LABEL: name}},
                    "rules": [{**r, "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"} for r in rules]}

        adm = client.AdmissionregistrationV1Api(self.kapi.client())
        adm.create_validating_webhook_configuration({"metadata": {"name": name}, "webhooks": [hook("validate")]})
        self.registered.append(name)
        if mutate:
            adm.create_mutating_webhook_configuration({"metadata": {"name": name}, "webhooks": [
                {**hook("mutate"), "reinvocationPolicy": "IfNeeded"}]})

    def unregister(self, name: str) -> None:
        from kubernetes import client

        adm = client.AdmissionregistrationV1Api(self.kapi.client())
        for delete in (adm.delete_validating_webhook_configuration, adm.delete_mutating_webhook_configuration):
            try:
                delete(name)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise


class Webhook(WebhookProcess):
    """``compatcheck webhook serve`` as a process, HTTPS on a loopback port with a certificate for 127.0.0.1."""

    def __init__(self, kapi: KubeAPIServer, workdir: Path, *, kubeconfig: Path | None = None,
                 config: dict[str, Any] | None = None, args: list[str] | None = None, port: int | None = None) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        tls = workdir / "tls"
        if not (tls / "tls.crt").exists():
            certs.write(str(tls), certs.generate(["127.0.0.1"]))
        cfg = workdir / "config.yaml"
        cfg.write_text(json.dumps({"apiVersion": "compatcheck/v1", **(config or {})}))
        port, metrics_port = port or free_port(), free_port()
        super().__init__(kapi, workdir, [
            "--host", "127.0.0.1", "--port", str(port), "--metrics-port", str(metrics_port),
            "--cert-file", str(tls / "tls.crt"), "--key-file", str(tls / "tls.key"), "--config", str(cfg),
            *(args if args is not None else ["--kubeconfig", str(kubeconfig or kapi.kubeconfig)])],
            port=port, metrics_port=metrics_port, ca_file=tls / "ca.crt")

    def start(self, *, ready: bool = True, timeout: float = 30) -> Webhook:
        super().start(ready=ready, timeout=timeout)
        return self


@pytest.fixture
def webhooks(tmp_path: Path) -> Iterator[Callable[..., Webhook]]:
    """A factory of webhook processes, all stopped at the end of the test."""
    started: list[Webhook] = []

    def make(kapi: KubeAPIServer, name: str = "wh", **kw: Any) -> Webhook:
        wh = Webhook(kapi, tmp_path / name, **kw)
        started.append(wh)
        return wh

    yield make
    for wh in started:
        wh.kill()
        for name in wh.registered:
            wh.unregister(name)
