"""Certificates for the webhook (cryptography): a CA and a serving certificate, keys written 0600.

ECDSA P-256 by default (RSA 2048 on request), CA valid 10 years, serving certificate 1 year, as the
self-bootstrapping admission controllers do. The CA key is not written: nothing else may be signed by it.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CA_DAYS = 3650
CERT_DAYS = 365


@dataclass(frozen=True)
class Generated:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca_pem).decode()


def _key(algorithm: str) -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    if algorithm == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return ec.generate_private_key(ec.SECP256R1())


def generate(dns_names: list[str], *, algorithm: str = "ecdsa", common_name: str | None = None,
             ca_days: int = CA_DAYS, cert_days: int = CERT_DAYS) -> Generated:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    if not dns_names:
        raise ValueError("at least one --dns name is needed (e.g. compatcheck.compatcheck.svc)")
    now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)  # tolerate small clock skew
    ca_key = _key(algorithm)
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "compatcheck webhook CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now)
          .not_valid_after(now + dt.timedelta(days=ca_days))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = _key(algorithm)
    sans: list[x509.GeneralName] = []
    for name in dns_names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            sans.append(x509.DNSName(name))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name or dns_names[0])]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + dt.timedelta(days=cert_days))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return Generated(ca.public_bytes(pem), cert.public_bytes(pem), key_pem)


def write_secret_file(path: Path, data: bytes) -> None:
    """Write a private key readable by its owner only (0600 from creation, no window with looser modes)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def write(out_dir: str, generated: Generated) -> list[Path]:
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    (d / "ca.crt").write_bytes(generated.ca_pem)
    # The key goes in before the certificate: a reloader that sees the new certificate finds its key.
    write_secret_file(d / "tls.key", generated.key_pem)
    (d / "tls.crt").write_bytes(generated.cert_pem)
    return [d / "ca.crt", d / "tls.crt", d / "tls.key"]


def not_after(cert_pem: bytes) -> dt.datetime:
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(cert_pem)
    return cert.not_valid_after_utc
