"""Self-managed TLS against a real kube-apiserver: Secret creation, caBundle patches of real webhook
configurations, a second replica reusing the Secret, renewal before expiry, a create race (a real 409), and
``compatcheck webhook serve --tls-secret`` as the chart runs it. The pure renewal decision (IP SANs) is tested
in tests/webhook/test_selftls.py."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compatcheck.webhook import certs
from compatcheck.webhook.selftls import SelfManagedTLS
from tests.e2e.conftest import create_node, gpu_node, wait_until
from tests.e2e.kapi import KubeAPIServer, free_port

DNS = ["compatcheck.cc.svc", "compatcheck.cc.svc.cluster.local"]


class Setup:
    """A namespace and two webhook configurations of a test's own, and admin read access to them."""

    def __init__(self, kapi: KubeAPIServer) -> None:
        from kubernetes import client

        self.kapi = kapi
        self.api = kapi.client()
        self.core = client.CoreV1Api(self.api)
        self.adm = client.AdmissionregistrationV1Api(self.api)
        suffix = uuid.uuid4().hex[:8]
        self.ns, self.validating, self.mutating = f"cc-{suffix}", f"cc-validate-{suffix}", f"cc-mutate-{suffix}"
        self.core.create_namespace({"metadata": {"name": self.ns}})
        hook = {"admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Ignore",
                "clientConfig": {"url": "https://127.0.0.1:1/validate"},
                # nothing is ever sent: these configurations exist for their caBundle only
                "objectSelector": {"matchLabels": {"never": suffix}},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
                           "operations": ["CREATE"]}]}
        self.adm.create_validating_webhook_configuration({"metadata": {"name": self.validating}, "webhooks": [
            {**hook, "name": "a.cc.io"}, {**hook, "name": "b.cc.io"}]})
        self.adm.create_mutating_webhook_configuration({"metadata": {"name": self.mutating}, "webhooks": [
            {**hook, "name": "a.cc.io"}]})

    def tls(self, tmp_path: Path, name: str = "r1", dns: list[str] = DNS) -> SelfManagedTLS:
        return SelfManagedTLS(self.kapi.client(), self.ns, "compatcheck-tls", dns, self.validating, self.mutating,
                              str(tmp_path / name))

    def secret(self) -> dict[str, Any]:
        return json.loads(self.core.read_namespaced_secret("compatcheck-tls", self.ns, _preload_content=False).data)

    def configs(self) -> list[dict[str, Any]]:
        return [json.loads(self.adm.read_validating_webhook_configuration(self.validating,
                                                                          _preload_content=False).data),
                json.loads(self.adm.read_mutating_webhook_configuration(self.mutating, _preload_content=False).data)]

    def bundles(self) -> set[str]:
        return {w["clientConfig"].get("caBundle", "") for c in self.configs() for w in c["webhooks"]}

    def versions(self) -> list[str]:
        """resourceVersions of the Secret and both configurations: equal before and after means nothing was
        written."""
        return [self.secret()["metadata"]["resourceVersion"], *(c["metadata"]["resourceVersion"]
                                                                for c in self.configs())]


@pytest.fixture
def setup(kapi: KubeAPIServer) -> Iterator[Setup]:
    yield Setup(kapi)


def test_first_replica_creates_secret_and_patches_ca_bundles(setup: Setup, tmp_path: Path) -> None:
    cert_file, key_file = setup.tls(tmp_path).bootstrap()
    secret = setup.secret()
    assert secret["type"] == "kubernetes.io/tls"
    assert set(secret["data"]) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    assert secret["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "compatcheck"}
    assert setup.bundles() == {secret["data"]["ca.crt"]}  # every webhook of both configurations
    assert Path(cert_file).read_bytes() == base64.b64decode(secret["data"]["tls.crt"])
    assert Path(key_file).stat().st_mode & 0o777 == 0o600
    assert set(certs.dns_names_of(Path(cert_file).read_bytes())) == set(DNS)


def test_second_replica_reuses_everything(setup: Setup, tmp_path: Path) -> None:
    setup.tls(tmp_path, "r1").bootstrap()
    before, data = setup.versions(), setup.secret()["data"]
    cert_file, _ = setup.tls(tmp_path, "r2").bootstrap()
    assert setup.versions() == before  # nothing written twice
    assert Path(cert_file).read_bytes() == base64.b64decode(data["tls.crt"])


def test_a_second_replica_with_ip_names_renews_nothing(setup: Setup, tmp_path: Path) -> None:
    """An IP in --tls-dns made every start renew the certificate (and a renewal loop exit the process)."""
    names = [*DNS, "127.0.0.1", "::1"]
    setup.tls(tmp_path, "r1", names).bootstrap()
    before = setup.versions()
    setup.tls(tmp_path, "r2", names).bootstrap()
    assert setup.versions() == before


def test_renews_before_expiry_keeping_the_ca(setup: Setup, tmp_path: Path) -> None:
    t = setup.tls(tmp_path)
    t.bootstrap()
    secret = setup.secret()
    ca, ca_key = (base64.b64decode(secret["data"][k]) for k in ("ca.crt", "ca.key"))
    short, short_key = certs.issue(ca, ca_key, DNS, days=10)  # inside the 30-day renewal window
    secret["data"]["tls.crt"] = base64.b64encode(short).decode()
    secret["data"]["tls.key"] = base64.b64encode(short_key).decode()
    setup.core.replace_namespaced_secret("compatcheck-tls", setup.ns, secret)
    configs_before = [c["metadata"]["resourceVersion"] for c in setup.configs()]
    t.bootstrap()
    renewed = setup.secret()
    assert certs.not_after(base64.b64decode(renewed["data"]["tls.crt"])) - dt.datetime.now(dt.timezone.utc) \
        > dt.timedelta(days=300)
    assert renewed["data"]["ca.crt"] == secret["data"]["ca.crt"]
    assert [c["metadata"]["resourceVersion"] for c in setup.configs()] == configs_before  # same CA: no patch


def test_create_race_is_settled_by_reading_the_winner(setup: Setup, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    winner, loser = setup.tls(tmp_path, "winner"), setup.tls(tmp_path, "loser")
    real_read = loser._read
    reads = {"n": 0}

    def stale_read() -> dict[str, Any] | None:  # the loser saw no Secret, then the winner created it
        reads["n"] += 1
        if reads["n"] == 1:
            winner.ensure_secret()
            return None
        return real_read()

    monkeypatch.setattr(loser, "_read", stale_read)
    secret = loser.ensure_secret()  # its create gets a real 409 from the API server, then it reads theirs
    assert secret["data"] == setup.secret()["data"] and reads["n"] == 2


def test_serve_with_self_managed_tls(setup: Setup, kapi: KubeAPIServer, tmp_path: Path) -> None:
    """`compatcheck webhook serve --tls-secret ...` as the chart runs it, with an IP among its names: it
    bootstraps the Secret, patches the caBundles, serves HTTPS with that certificate (and the live view from the
    same API server), stays up, and with no --tls-dir keeps its files in a private directory removed at exit."""
    from tests.conftest import ROOT

    create_node(setup.api, gpu_node(f"t4-tls-{setup.ns}"))
    port = free_port()
    log = tmp_path / "serve.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "compatcheck", "webhook", "serve", "--kubeconfig", str(kapi.kubeconfig),
         "--tls-secret", "compatcheck-tls", "--tls-namespace", setup.ns, "--tls-dns", "localhost",
         "--tls-dns", "127.0.0.1", "--validating-config", setup.validating, "--mutating-config", setup.mutating,
         "--tls-check-interval", "0.5", "--host", "127.0.0.1", "--port", str(port), "--metrics-port", "0"], cwd=ROOT,
        stderr=log.open("w"), stdout=subprocess.DEVNULL, env={**os.environ, "TMPDIR": str(tmp_path)})
    try:
        def ready() -> bytes | None:
            try:
                ca = base64.b64decode(setup.secret()["data"]["ca.crt"]).decode()
                ctx = ssl.create_default_context(cadata=ca)
                return urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=ctx, timeout=2).read()
            except Exception:
                return None

        body = wait_until(ready, 30, step=0.2, what=f"serving ({log.read_text()[-500:]})")
        assert body.startswith(b"ok: "), body
        assert setup.bundles() == {setup.secret()["data"]["ca.crt"]}
        logs = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
        assert [e["msg"] for e in logs].count("created TLS secret") == 1
        assert not any(e.get("msg") == "renewed serving certificate" for e in logs)
        (tls_dir,) = tmp_path.glob("compatcheck-tls-*")
        assert tls_dir.stat().st_mode & 0o777 == 0o700
        assert (tls_dir / "tls.key").stat().st_mode & 0o777 == 0o600
        # A GitOps tool replaces the configuration from Git, without the caBundle: the webhook puts it back.
        cfg = setup.configs()[0]
        for w in cfg["webhooks"]:
            w["clientConfig"].pop("caBundle")
        setup.adm.replace_validating_webhook_configuration(setup.validating, cfg)
        wait_until(lambda: setup.bundles() == {setup.secret()["data"]["ca.crt"]}, 5, what="caBundle restored")
        key_written = (tls_dir / "tls.key").stat().st_mtime_ns
        wait_until(lambda: log.read_text().count("patched caBundle") >= 3, 5)  # 2 at start, 1 now
        time.sleep(1.2)  # two more checks: nothing to do, so nothing is rewritten or reloaded
        assert (tls_dir / "tls.key").stat().st_mtime_ns == key_written
        assert "certificate reloaded" not in log.read_text()
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()[-2000:]
    assert list(tmp_path.glob("compatcheck-tls-*")) == []  # the key material went with the process
