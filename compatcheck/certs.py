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


def _private_pem(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    pem: bytes = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption())
    return pem


def _key(algorithm: str) -> Any:
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    if algorithm == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return ec.generate_private_key(ec.SECP256R1())


def make_ca(*, algorithm: str = "ecdsa", days: int = CA_DAYS) -> tuple[bytes, bytes]:
    """(CA certificate PEM, CA key PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)  # tolerate small clock skew
    key = _key(algorithm)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "compatcheck webhook CA")])
    ca = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now)
          .not_valid_after(now + dt.timedelta(days=days))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
          .sign(key, hashes.SHA256()))
    return ca.public_bytes(serialization.Encoding.PEM), _private_pem(key)


def issue(ca_pem: bytes, ca_key_pem: bytes, dns_names: list[str], *, algorithm: str = "ecdsa",
          days: int = CERT_DAYS, common_name: str | None = None) -> tuple[bytes, bytes]:
    """(serving certificate PEM, key PEM) signed by the given CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    if not dns_names:
        raise ValueError("at least one --dns name is needed (e.g. compatcheck.compatcheck.svc)")
    ca = x509.load_pem_x509_certificate(ca_pem)
    ca_key: Any = serialization.load_pem_private_key(ca_key_pem, password=None)
    now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)
    key = _key(algorithm)
    sans: list[x509.GeneralName] = []
    for name in dns_names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            sans.append(x509.DNSName(name))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name or dns_names[0])]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM), _private_pem(key)


def generate(dns_names: list[str], *, algorithm: str = "ecdsa", common_name: str | None = None,
             ca_days: int = CA_DAYS, cert_days: int = CERT_DAYS) -> Generated:
    """A fresh CA and a serving certificate; the CA key is dropped (nothing else can be signed)."""
    ca_pem, ca_key = make_ca(algorithm=algorithm, days=ca_days)
    cert_pem, key_pem = issue(ca_pem, ca_key, dns_names, algorithm=algorithm, days=cert_days,
                              common_name=common_name)
    return Generated(ca_pem, cert_pem, key_pem)


def dns_names_of(cert_pem: bytes) -> list[str]:
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(cert_pem)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [str(n) for n in san.get_values_for_type(x509.DNSName)]


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write via a temporary file and rename: readers (the server's reloader, clients) never see a
    half-written file. Private keys use mode 0600 from creation, with no window of looser modes."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def write_secret_file(path: Path, data: bytes) -> None:
    write_atomic(path, data, 0o600)


def write(out_dir: str, generated: Generated) -> list[Path]:
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    write_atomic(d / "ca.crt", generated.ca_pem)
    # The key goes in before the certificate: a reloader that sees the new certificate finds its key.
    write_secret_file(d / "tls.key", generated.key_pem)
    write_atomic(d / "tls.crt", generated.cert_pem)
    return [d / "ca.crt", d / "tls.crt", d / "tls.key"]


def not_after(cert_pem: bytes) -> dt.datetime:
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(cert_pem)
    return cert.not_valid_after_utc
