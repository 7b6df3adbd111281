"""Self-managed TLS against the fake API server through the real kubernetes client: Secret creation,
caBundle patches, a second replica reusing the Secret, renewal before expiry, and a create race."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from compatcheck import certs
from tests.webhook.fake_apiserver import FakeAPIServer
from webhook.selftls import SelfManagedTLS

DNS = ["compatcheck.cc.svc", "compatcheck.cc.svc.cluster.local"]
VAL, MUT = "validatingwebhookconfigurations", "mutatingwebhookconfigurations"


@pytest.fixture
def api() -> Iterator[FakeAPIServer]:
    server = FakeAPIServer().start()
    server.add_webhook_config(VAL, "compatcheck-validate")
    server.add_webhook_config(MUT, "compatcheck-mutate", webhooks=1)
    yield server
    server.stop()


def tls(api: FakeAPIServer, tmp_path: Path, name: str = "r1", dns: list[str] = DNS) -> SelfManagedTLS:
    from kubernetes import config

    client = config.new_client_from_config(config_file=api.kubeconfig(str(tmp_path / f"kc-{name}")))
    return SelfManagedTLS(client, "cc", "compatcheck-tls", dns, "compatcheck-validate", "compatcheck-mutate",
                          str(tmp_path / name))


def bundles(api: FakeAPIServer) -> set[str]:
    return {w["clientConfig"].get("caBundle", "") for kind in (VAL, MUT)
            for w in api.objects[kind][f"compatcheck-{'validate' if kind == VAL else 'mutate'}"]["webhooks"]}


def test_first_replica_creates_secret_and_patches_ca_bundles(api: FakeAPIServer, tmp_path: Path) -> None:
    cert_file, key_file = tls(api, tmp_path).bootstrap()
    secret = api.objects["secrets"]["compatcheck-tls"]
    assert secret["type"] == "kubernetes.io/tls"
    assert set(secret["data"]) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    ca = base64.b64decode(secret["data"]["ca.crt"])
    assert bundles(api) == {base64.b64encode(ca).decode()}  # every webhook of both configurations
    assert Path(cert_file).read_bytes() == base64.b64decode(secret["data"]["tls.crt"])
    assert Path(key_file).stat().st_mode & 0o777 == 0o600
    assert set(certs.dns_names_of(Path(cert_file).read_bytes())) == set(DNS)
    assert ("POST", "/api/v1/namespaces/cc/secrets") in api.calls
    patches = [c for c in api.calls if c[0] == "PATCH"]
    assert patches == [("PATCH", f"/apis/admissionregistration.k8s.io/v1/{VAL}/compatcheck-validate"),
                       ("PATCH", f"/apis/admissionregistration.k8s.io/v1/{MUT}/compatcheck-mutate")]


def test_second_replica_reuses_everything(api: FakeAPIServer, tmp_path: Path) -> None:
    tls(api, tmp_path, "r1").bootstrap()
    before = dict(api.objects["secrets"]["compatcheck-tls"]["data"])
    api.calls.clear()
    cert_file, _ = tls(api, tmp_path, "r2").bootstrap()
    assert api.objects["secrets"]["compatcheck-tls"]["data"] == before
    assert [c for c in api.calls if c[0] in ("POST", "PUT", "PATCH")] == []  # nothing written twice
    assert Path(cert_file).read_bytes() == base64.b64decode(before["tls.crt"])


def test_renews_before_expiry_keeping_the_ca(api: FakeAPIServer, tmp_path: Path) -> None:
    t = tls(api, tmp_path)
    t.bootstrap()
    secret = api.objects["secrets"]["compatcheck-tls"]
    ca, ca_key = (base64.b64decode(secret["data"][k]) for k in ("ca.crt", "ca.key"))
    short, short_key = certs.issue(ca, ca_key, DNS, days=10)  # inside the 30-day renewal window
    secret["data"]["tls.crt"] = base64.b64encode(short).decode()
    secret["data"]["tls.key"] = base64.b64encode(short_key).decode()
    api.calls.clear()
    t.bootstrap()
    renewed = base64.b64decode(api.objects["secrets"]["compatcheck-tls"]["data"]["tls.crt"])
    assert certs.not_after(renewed) - dt.datetime.now(dt.timezone.utc) > dt.timedelta(days=300)
    assert api.objects["secrets"]["compatcheck-tls"]["data"]["ca.crt"] == base64.b64encode(ca).decode()
    assert ("PUT", "/api/v1/namespaces/cc/secrets/compatcheck-tls") in api.calls
    assert [c for c in api.calls if c[0] == "PATCH"] == []  # same CA: caBundles already right


def test_ip_sans_count_as_names_the_certificate_has(tmp_path: Path) -> None:
    """An IP in --tls-dns is in an IP SAN: it must be found there, whatever its spelling, or every start renews."""
    names = ["compatcheck.ns.svc", "127.0.0.1", "::1"]
    ca, ca_key = certs.make_ca()
    t = SelfManagedTLS(None, "ns", "compatcheck-tls", names, None, None, str(tmp_path))

    def secret(crt: bytes) -> dict[str, Any]:
        return {"data": {"tls.crt": base64.b64encode(crt).decode(), "ca.key": base64.b64encode(ca_key).decode()}}

    crt, _key = certs.issue(ca, ca_key, names)
    assert not t._needs_renewal(secret(crt))
    assert not replace(t, dns_names=["Compatcheck.NS.svc", "127.0.0.1", "0:0:0:0:0:0:0:1"])._needs_renewal(secret(crt))
    assert replace(t, dns_names=[*names, "10.0.0.1"])._needs_renewal(secret(crt))
    assert replace(t, dns_names=[*names, "compatcheck.ns.svc.cluster.local"])._needs_renewal(secret(crt))
    short, _key = certs.issue(ca, ca_key, names, days=10)  # inside the 30-day renewal window
    assert t._needs_renewal(secret(short))


def test_a_second_replica_with_ip_names_renews_nothing(api: FakeAPIServer, tmp_path: Path) -> None:
    names = [*DNS, "127.0.0.1", "::1"]
    tls(api, tmp_path, "r1", names).bootstrap()
    before = dict(api.objects["secrets"]["compatcheck-tls"]["data"])
    api.calls.clear()
    tls(api, tmp_path, "r2", names).bootstrap()
    assert [c for c in api.calls if c[0] in ("POST", "PUT", "PATCH")] == []
    assert api.objects["secrets"]["compatcheck-tls"]["data"] == before


def test_create_race_is_settled_by_reading_the_winner(api: FakeAPIServer, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    winner = tls(api, tmp_path, "winner")
    loser = tls(api, tmp_path, "loser")
    real_read = loser._read
    calls = {"n": 0}

    def stale_read() -> dict | None:  # the loser saw no Secret, then the winner created it
        calls["n"] += 1
        if calls["n"] == 1:
            winner.ensure_secret()
            return None
        return real_read()

    monkeypatch.setattr(loser, "_read", stale_read)
    secret = loser.ensure_secret()
    assert secret["data"] == api.objects["secrets"]["compatcheck-tls"]["data"]
    assert sum(1 for c in api.calls if c[0] == "POST") == 2  # one created, one got 409 and read theirs


def test_serve_with_self_managed_tls_end_to_end(api: FakeAPIServer, tmp_path: Path) -> None:
    """`compatcheck webhook serve --tls-secret ...` as the chart runs it: bootstraps the Secret, patches the
    caBundles, and serves HTTPS with that certificate (and the live view from the same API server). With no
    --tls-dir, the files go to a new private directory in $TMPDIR, removed at exit."""
    import json
    import os
    import signal
    import ssl
    import subprocess
    import sys
    import time
    import urllib.request

    from tests.conftest import ROOT
    from tests.webhook.fake_apiserver import node
    from tests.webhook.test_server import free_port

    api.put("nodes", node("t4-0", "Tesla-T4", "535.104.05"))
    port = free_port()
    log = tmp_path / "serve.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "compatcheck", "webhook", "serve", "--kubeconfig", api.kubeconfig(str(tmp_path / "kc")),
         "--tls-secret", "compatcheck-tls", "--tls-namespace", "cc", "--tls-dns", "localhost",
         "--validating-config", "compatcheck-validate",
         "--mutating-config", "compatcheck-mutate", "--host", "127.0.0.1", "--port", str(port),
         "--metrics-port", "0"], cwd=ROOT, stderr=log.open("w"), stdout=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(tmp_path)})
    try:
        deadline = time.time() + 30
        body = None
        while time.time() < deadline and body is None:
            secret = api.objects.get("secrets", {}).get("compatcheck-tls")
            if secret:
                ctx = ssl.create_default_context(cadata=base64.b64decode(secret["data"]["ca.crt"]).decode())
                try:
                    body = urllib.request.urlopen(f"https://localhost:{port}/readyz", context=ctx, timeout=2).read()
                except OSError:
                    time.sleep(0.2)
            else:
                time.sleep(0.2)
        assert body is not None and body.startswith(b"ok: 1 nodes"), log.read_text()
        ca_b64 = api.objects["secrets"]["compatcheck-tls"]["data"]["ca.crt"]
        assert bundles(api) == {ca_b64}
        logs = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
        assert any(e.get("msg") == "created TLS secret" for e in logs)
        (tls_dir,) = tmp_path.glob("compatcheck-tls-*")
        assert tls_dir.stat().st_mode & 0o777 == 0o700
        assert (tls_dir / "tls.key").stat().st_mode & 0o777 == 0o600
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    assert list(tmp_path.glob("compatcheck-tls-*")) == []  # the key material went with the process
