"""Self-managed TLS through the real kubernetes client against tests/webhook/fakekube.py, which creates, replaces and
patches objects with the API server's conflict rules (409 on a taken name or a stale resourceVersion, 422 on a failed
JSON Patch test): Secret creation, caBundle patches, a second replica, renewal before expiry, the create and the
replace races. tests/e2e/test_selftls.py proves the same against a real kube-apiserver (docs/testing-e2e.md)."""

from __future__ import annotations

import base64
import copy
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from compatcheck.webhook import certs
from compatcheck.webhook.selftls import SelfManagedTLS
from tests.webhook.fakekube import FakeKube

NS = "cc"
DNS = ["compatcheck.cc.svc", "compatcheck.cc.svc.cluster.local"]
SECRETS = f"/api/v1/namespaces/{NS}/secrets"
SECRET = f"{SECRETS}/compatcheck-tls"
ADM = "/apis/admissionregistration.k8s.io/v1"
VALIDATING = f"{ADM}/validatingwebhookconfigurations/cc-validate"
MUTATING = f"{ADM}/mutatingwebhookconfigurations/cc-mutate"


def hook(name: str) -> dict[str, Any]:
    return {"name": name, "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Ignore",
            "clientConfig": {"url": "https://127.0.0.1:1/validate"},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"]}]}


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    """A namespace's Secret collection and two webhook configurations (two webhooks and one) without a caBundle,
    as the chart renders them."""
    server = FakeKube()
    server.writable.add(SECRETS)
    server.put_object(f"{ADM}/validatingwebhookconfigurations", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "cc-validate"}, "webhooks": [hook("a.cc.io"), hook("b.cc.io")]})
    server.put_object(f"{ADM}/mutatingwebhookconfigurations", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "cc-mutate"}, "webhooks": [hook("a.cc.io")]})
    server.start()
    yield server
    server.stop()


def tls(kube: FakeKube, tmp_path: Path, name: str = "r1", dns: list[str] = DNS) -> SelfManagedTLS:
    return SelfManagedTLS(kube.client(), NS, "compatcheck-tls", dns, "cc-validate", "cc-mutate", str(tmp_path / name))


def bundles(kube: FakeKube) -> list[str]:
    return [w["clientConfig"].get("caBundle", "") for p in (VALIDATING, MUTATING) for w in kube.objects[p]["webhooks"]]


def versions(kube: FakeKube) -> list[str]:
    return [kube.objects[p]["metadata"]["resourceVersion"] for p in (SECRET, VALIDATING, MUTATING)]


def test_first_replica_creates_secret_and_patches_ca_bundles(kube: FakeKube, tmp_path: Path) -> None:
    cert_file, key_file = tls(kube, tmp_path).bootstrap()
    secret = kube.objects[SECRET]
    assert secret["type"] == "kubernetes.io/tls"
    assert set(secret["data"]) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    assert secret["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "compatcheck"}
    assert bundles(kube) == [secret["data"]["ca.crt"]] * 3  # every webhook of both configurations
    assert kube.writes == [("POST", SECRET), ("PATCH", VALIDATING), ("PATCH", MUTATING)]
    assert Path(cert_file).read_bytes() == base64.b64decode(secret["data"]["tls.crt"])
    assert Path(key_file).stat().st_mode & 0o777 == 0o600
    assert set(certs.dns_names_of(Path(cert_file).read_bytes())) == set(DNS)


def test_second_replica_reuses_everything(kube: FakeKube, tmp_path: Path) -> None:
    tls(kube, tmp_path, "r1").bootstrap()
    before, data, writes = versions(kube), kube.objects[SECRET]["data"], len(kube.writes)
    cert_file, _ = tls(kube, tmp_path, "r2").bootstrap()
    assert versions(kube) == before and len(kube.writes) == writes  # nothing written twice
    assert Path(cert_file).read_bytes() == base64.b64decode(data["tls.crt"])


def test_a_second_replica_with_ip_names_renews_nothing(kube: FakeKube, tmp_path: Path) -> None:
    names = [*DNS, "127.0.0.1", "::1"]
    tls(kube, tmp_path, "r1", names).bootstrap()
    before = versions(kube)
    tls(kube, tmp_path, "r2", names).bootstrap()
    assert versions(kube) == before


def test_renews_before_expiry_keeping_the_ca(kube: FakeKube, tmp_path: Path) -> None:
    t = tls(kube, tmp_path)
    t.bootstrap()
    secret = copy.deepcopy(kube.objects[SECRET])
    ca, ca_key = (base64.b64decode(secret["data"][k]) for k in ("ca.crt", "ca.key"))
    short, short_key = certs.issue(ca, ca_key, DNS, days=10)  # inside the 30-day renewal window
    secret["data"].update({"tls.crt": base64.b64encode(short).decode(),
                           "tls.key": base64.b64encode(short_key).decode()})
    kube.put_object(SECRETS, secret)
    configs_before = versions(kube)[1:]
    t.bootstrap()
    renewed = kube.objects[SECRET]
    assert kube.writes[-1] == ("PUT", SECRET)
    assert certs.not_after(base64.b64decode(renewed["data"]["tls.crt"])) - dt.datetime.now(dt.timezone.utc) \
        > dt.timedelta(days=300)
    assert renewed["data"]["ca.crt"] == secret["data"]["ca.crt"]
    assert versions(kube)[1:] == configs_before  # same CA: no patch


def test_create_race_is_settled_by_reading_the_winner(kube: FakeKube, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    winner, loser = tls(kube, tmp_path, "winner"), tls(kube, tmp_path, "loser")
    real_read = loser._read
    reads = {"n": 0}

    def stale_read() -> dict[str, Any] | None:  # the loser saw no Secret, then the winner created it
        reads["n"] += 1
        if reads["n"] == 1:
            winner.ensure_secret()
            return None
        return real_read()

    monkeypatch.setattr(loser, "_read", stale_read)
    secret = loser.ensure_secret()  # its create gets a 409, then it reads theirs
    assert secret["data"] == kube.objects[SECRET]["data"] and reads["n"] == 2
    assert [m for m, _ in kube.writes] == ["POST"]  # the winner's; the loser's was refused


def test_replace_race_is_settled_by_reading_the_renewal(kube: FakeKube, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Two replicas renew at once: the second replace carries a resourceVersion that is no longer current, gets
    409 and takes the first one's certificate."""
    first, second = tls(kube, tmp_path, "first"), tls(kube, tmp_path, "second")
    first.ensure_secret()
    stored = copy.deepcopy(kube.objects[SECRET])
    ca, ca_key = (base64.b64decode(stored["data"][k]) for k in ("ca.crt", "ca.key"))
    short, short_key = certs.issue(ca, ca_key, DNS, days=10)
    stored["data"].update({"tls.crt": base64.b64encode(short).decode(),
                           "tls.key": base64.b64encode(short_key).decode()})
    kube.put_object(SECRETS, stored)  # due for renewal
    real_read = second._read
    reads = {"n": 0}

    def read_then_lose() -> dict[str, Any] | None:  # the other replica renews right after this one read
        reads["n"] += 1
        got = real_read()
        if reads["n"] == 1:
            first.ensure_secret()
        return got

    monkeypatch.setattr(second, "_read", read_then_lose)
    puts = len([w for w in kube.writes if w[0] == "PUT"])
    secret = second.ensure_secret()
    assert reads["n"] == 2 and secret["data"] == kube.objects[SECRET]["data"]
    assert len([w for w in kube.writes if w[0] == "PUT"]) == puts + 1  # the first replica's renewal only


def test_a_ca_bundle_removed_by_a_reapply_is_patched_back(kube: FakeKube, tmp_path: Path) -> None:
    """A GitOps tool (or helm) re-applies the configurations as rendered, without the caBundle: the next round puts
    it back on every webhook; one that still has it is left alone."""
    t = tls(kube, tmp_path)
    t.bootstrap()
    ca = kube.objects[SECRET]["data"]["ca.crt"]
    bare = copy.deepcopy(kube.objects[VALIDATING])
    for w in bare["webhooks"]:
        w["clientConfig"].pop("caBundle")
    kube.put_object(f"{ADM}/validatingwebhookconfigurations", bare)
    mutating = versions(kube)[2]
    assert t.patch_ca_bundles(base64.b64decode(ca)) == 1
    assert bundles(kube) == [ca] * 3 and versions(kube)[2] == mutating


def test_a_configuration_changed_between_read_and_patch_is_not_patched_blind(kube: FakeKube, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The patch addresses webhooks by index: if another writer changed the list after our read, the test op on the
    resourceVersion fails it (422) and nothing is written; the next round reads the new list."""
    from kubernetes.client.exceptions import ApiException

    t = tls(kube, tmp_path)
    real_adm = t._adm
    theirs: list[dict[str, Any]] = []

    def adm() -> Any:
        api = real_adm()
        read = api.read_validating_webhook_configuration

        def read_then_changed(name: str, **kw: Any) -> Any:
            got = read(name, **kw)
            moved = copy.deepcopy(kube.objects[VALIDATING])
            moved["webhooks"].insert(0, hook("first.other.io"))  # someone else's webhook, now at index 0
            theirs.append(kube.put_object(f"{ADM}/validatingwebhookconfigurations", moved))
            return got

        api.read_validating_webhook_configuration = read_then_changed
        return api

    monkeypatch.setattr(t, "_adm", adm)
    ca, _key = certs.make_ca()
    with pytest.raises(ApiException) as failed:
        t.patch_ca_bundles(ca)
    assert failed.value.status == 422 and kube.objects[VALIDATING] == theirs[0] and kube.writes == []
