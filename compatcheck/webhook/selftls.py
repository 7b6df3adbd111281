"""Self-managed TLS for in-cluster installs (the chart's default): the webhook keeps its CA and serving
certificate in a Secret, creates them when missing, patches the caBundle of its own webhook configurations,
and renews the serving certificate before it expires.

Leader-safe without leader election: every write is create-if-absent (409 means another replica won, so read
theirs) or a replace that carries the resourceVersion it read (409 means it lost a race, so re-read). Both
replicas therefore converge on one Secret and one caBundle.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compatcheck.webhook import certs
from compatcheck.webhook.logs import log_event

log = logging.getLogger("compatcheck.webhook.tls")
RENEW_BEFORE = dt.timedelta(days=30)


@dataclass
class SelfManagedTLS:
    api_client: Any
    namespace: str
    secret_name: str
    dns_names: list[str]
    validating: str | None
    mutating: str | None
    out_dir: str

    def _core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api_client)

    def _adm(self) -> Any:
        from kubernetes import client

        return client.AdmissionregistrationV1Api(self.api_client)

    # ------------------------------------------------------------------ the Secret
    def _read(self) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            resp = self._core().read_namespaced_secret(self.secret_name, self.namespace, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        data: dict[str, Any] = json.loads(resp.data)
        return data

    @staticmethod
    def _decode(secret: dict[str, Any], key: str) -> bytes:
        return base64.b64decode((secret.get("data") or {}).get(key) or "")

    def _body(self, ca: bytes, ca_key: bytes, crt: bytes, key: bytes, rv: str | None = None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": self.secret_name, "namespace": self.namespace,
                                "labels": {"app.kubernetes.io/managed-by": "compatcheck"}}
        if rv:
            meta["resourceVersion"] = rv
        enc = {k: base64.b64encode(v).decode() for k, v in
               (("ca.crt", ca), ("ca.key", ca_key), ("tls.crt", crt), ("tls.key", key))}
        return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls", "metadata": meta, "data": enc}

    def _needs_renewal(self, secret: dict[str, Any]) -> bool:
        crt = self._decode(secret, "tls.crt")
        if not crt or not self._decode(secret, "ca.key"):
            return True
        try:
            expires = certs.not_after(crt)
            names = certs.san_names_of(crt)
        except ValueError:
            return True
        # Both kinds of SAN: an IP in --tls-dns sits in an IP SAN, and comparing it with the DNS SANs alone made
        # every replica renew on every start (and fight over the Secret).
        wanted = {certs.san_name(n) for n in self.dns_names}
        return expires - dt.datetime.now(dt.timezone.utc) < RENEW_BEFORE or not wanted <= names

    def ensure_secret(self) -> dict[str, Any]:
        """The current Secret, created or renewed as needed. Safe to run from every replica at once."""
        from kubernetes.client.exceptions import ApiException

        for _attempt in range(5):
            secret = self._read()
            if secret is None:
                ca, ca_key = certs.make_ca()
                crt, key = certs.issue(ca, ca_key, self.dns_names)
                try:
                    self._core().create_namespaced_secret(self.namespace, self._body(ca, ca_key, crt, key),
                                                          _preload_content=False)
                    log_event(log, logging.INFO, "created TLS secret", secret=self.secret_name)
                except ApiException as exc:
                    if exc.status != 409:  # 409: another replica created it first; use theirs
                        raise
                continue
            if not self._needs_renewal(secret):
                return secret
            ca, ca_key = self._decode(secret, "ca.crt"), self._decode(secret, "ca.key")
            if not ca or not ca_key:
                ca, ca_key = certs.make_ca()
            crt, key = certs.issue(ca, ca_key, self.dns_names)
            rv = (secret.get("metadata") or {}).get("resourceVersion")
            try:
                self._core().replace_namespaced_secret(self.secret_name, self.namespace,
                                                       self._body(ca, ca_key, crt, key, rv), _preload_content=False)
                log_event(log, logging.INFO, "renewed serving certificate", secret=self.secret_name)
            except ApiException as exc:
                if exc.status != 409:  # 409: someone else renewed in between; re-read theirs
                    raise
        raise RuntimeError(f"could not settle the TLS secret {self.namespace}/{self.secret_name}")

    # ------------------------------------------------------------------ files and caBundle
    def write_files(self, secret: dict[str, Any]) -> tuple[str, str]:
        """Write the Secret's certificate and key, unless the files already hold them: the server reloads its
        certificate whenever they change, and a periodic check must not make it reload for nothing."""
        d = Path(self.out_dir)
        wanted = certs.Generated(self._decode(secret, "ca.crt"), self._decode(secret, "tls.crt"),
                                 self._decode(secret, "tls.key"))
        try:
            same = ((d / "ca.crt").read_bytes(), (d / "tls.crt").read_bytes(), (d / "tls.key").read_bytes()) == (
                wanted.ca_pem, wanted.cert_pem, wanted.key_pem)
        except OSError:
            same = False
        if not same:
            certs.write(self.out_dir, wanted)
        return str(d / "tls.crt"), str(d / "tls.key")

    def patch_ca_bundles(self, ca_pem: bytes) -> int:
        """Set caBundle on every webhook of our two configurations; returns how many configurations changed."""
        from kubernetes.client.exceptions import ApiException

        bundle = base64.b64encode(ca_pem).decode()
        changed = 0
        adm = self._adm()
        for name, read, patch in ((self.validating, adm.read_validating_webhook_configuration,
                                   adm.patch_validating_webhook_configuration),
                                  (self.mutating, adm.read_mutating_webhook_configuration,
                                   adm.patch_mutating_webhook_configuration)):
            if not name:
                continue
            try:
                cfg = json.loads(read(name, _preload_content=False).data)
            except ApiException as exc:
                if exc.status == 404:
                    log_event(log, logging.WARNING, "webhook configuration not found", name=name)
                    continue
                raise
            ops = [{"op": "replace" if (w.get("clientConfig") or {}).get("caBundle") else "add",
                    "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
                   for i, w in enumerate(cfg.get("webhooks") or [])
                   if (w.get("clientConfig") or {}).get("caBundle") != bundle]
            if not ops:
                continue
            # The test op makes the patch fail (422) if the list changed under us: we read and retry then.
            ops.insert(0, {"op": "test", "path": "/metadata/resourceVersion",
                           "value": cfg["metadata"]["resourceVersion"]})
            patch(name, ops, _preload_content=False)
            changed += 1
            log_event(log, logging.INFO, "patched caBundle", configuration=name, webhooks=len(ops) - 1)
        return changed

    def bootstrap(self) -> tuple[str, str]:
        secret = self.ensure_secret()
        files = self.write_files(secret)
        self.patch_ca_bundles(self._decode(secret, "ca.crt"))
        return files

    def renew_forever(self, stop: threading.Event, interval: float = 60.0) -> None:
        """Every ``interval``: renew the certificate when due (the server reloads rewritten files by itself), and
        put the caBundle back into our webhook configurations when something replaced them without it (a GitOps
        tool applying them from Git, a helm rollback): with failurePolicy Fail, a configuration without our CA
        refuses every GPU object until it is patched again. Three GETs a minute per replica."""
        while not stop.wait(interval):
            try:
                self.bootstrap()
            except Exception as exc:  # keep serving the current certificate; try again next round
                log_event(log, logging.WARNING, "certificate renewal failed", error=str(exc))
