"""Self-managed TLS: the renewal decision (pure). Everything that talks to the API server (Secret creation,
caBundle patches, replicas, renewal, races, serve --tls-secret) is tested against a real kube-apiserver in
tests/e2e/test_selftls.py."""

from __future__ import annotations

import base64
from dataclasses import replace
from pathlib import Path
from typing import Any

from compatcheck.webhook import certs
from compatcheck.webhook.selftls import SelfManagedTLS


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
