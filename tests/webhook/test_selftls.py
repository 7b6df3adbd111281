"""Self-managed TLS against the fake API server through the real kubernetes client: Secret creation,
caBundle patches, a second replica reusing the Secret, renewal before expiry, and a create race."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Iterator
from pathlib import Path

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


def tls(api: FakeAPIServer, tmp_path: Path, name: str = "r1") -> SelfManagedTLS:
    from kubernetes import config

    client = config.new_client_from_config(config_file=api.kubeconfig(str(tmp_path / f"kc-{name}")))
    return SelfManagedTLS(client, "cc", "compatcheck-tls", DNS, "compatcheck-validate", "compatcheck-mutate",
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
