"""Certificates for the webhook (cryptography): a CA and a serving certificate, keys written 0600.

ECDSA P-256 by default (RSA 2048 on request), CA valid 10 years, serving certificate 1 year, as the
self-bootstrapping admission controllers do. The CA key is not written: nothing else may be signed by it.

Files are written only into a directory this user owns and nobody else can write to, through a descriptor of
that directory, so nothing planted in a shared place like /tmp (a symlink at the directory, at a file or at a
temporary name) can redirect the private key. This module must not follow links when writing, and must not
leave a temporary file or a key with looser modes behind, even for a moment.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import errno
import ipaddress
import os
import secrets
import stat
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


def san_name(name: str) -> str:
    """One spelling per name: an IP address in its compressed form (``0:0::1`` is ``::1``), a DNS name in lower
    case (DNS is case-insensitive). ``issue`` puts names that parse as IP addresses into IP SANs."""
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name.lower()


def san_names_of(cert_pem: bytes) -> set[str]:
    """The DNS and IP subject alternative names of a certificate, spelt as ``san_name`` spells them."""
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(cert_pem)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return ({san_name(n) for n in san.get_values_for_type(x509.DNSName)}
            | {str(ip) for ip in san.get_values_for_type(x509.IPAddress)})


class UnsafeDirectoryError(ValueError):
    """The output directory could let someone else read or replace the key material."""


# O_NOFOLLOW: a symlink planted at the final path component fails the open (ELOOP) instead of being followed.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_private_dir(directory: Path) -> int:
    """A descriptor of ``directory``: created with mode 0700 when missing; refused when it is a symlink, is not
    owned by this user, or is writable by group or others (someone else could swap the files in it)."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    created = False
    try:
        os.mkdir(directory, 0o700)
        created = True
    except FileExistsError:
        pass
    try:
        fd = os.open(directory, _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            what = "a symbolic link" if os.path.islink(directory) else "not a directory"
            raise UnsafeDirectoryError(f"{directory}: is {what}; refusing to write certificates there") from None
        raise
    try:
        # Checked on the open descriptor, not the path: the checks and the writes see the same directory.
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            raise UnsafeDirectoryError(f"{directory}: owned by uid {st.st_uid}, not by this user (uid "
                                       f"{os.geteuid()}); refusing to write certificates there")
        if created:
            os.fchmod(fd, 0o700)  # mkdir's mode went through the umask; the directory is private whatever it is
        elif st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise UnsafeDirectoryError(f"{directory}: writable by group or others (mode "
                                       f"{stat.S_IMODE(st.st_mode):04o}); use a private directory (chmod 700)")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_in(dir_fd: int, name: str, data: bytes, mode: int) -> None:
    """Write ``name`` in the directory ``dir_fd`` via a new temporary file and a rename: readers (the server's
    reloader, clients) never see a half-written file, and a crash leaves the old file whole."""
    for _ in range(100):
        tmp = f".{name}.{secrets.token_hex(8)}.tmp"  # unguessable, and O_EXCL: never someone else's file
        try:
            fd = os.open(tmp, _FILE_FLAGS, 0o600, dir_fd=dir_fd)  # 0600 from creation: no window for the key
            break
        except FileExistsError:
            continue
    else:  # pragma: no cover - 100 collisions of 64 random bits
        raise FileExistsError(errno.EEXIST, "no free temporary name", name)
    try:
        try:
            os.fchmod(fd, mode)  # the final mode exactly, whatever the umask
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        # rename() replaces whatever is at ``name``, a symlink included, and never writes through it.
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write one file safely (see ``write``); its directory must be private to this user."""
    dir_fd = _open_private_dir(path.parent)
    try:
        _write_in(dir_fd, path.name, data, mode)
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_secret_file(path: Path, data: bytes) -> None:
    write_atomic(path, data, 0o600)


def write(out_dir: str, generated: Generated) -> list[Path]:
    """Write ca.crt, tls.key (0600) and tls.crt (0644) into ``out_dir``, created 0700 when missing. Raises
    ``UnsafeDirectoryError`` (a ValueError) for a directory that is a symlink, someone else's, or writable by
    others, and OSError when a write fails (no temporary file is left then)."""
    d = Path(out_dir)
    dir_fd = _open_private_dir(d)
    try:
        _write_in(dir_fd, "ca.crt", generated.ca_pem, 0o644)
        # The key goes in before the certificate: a reloader that sees the new certificate finds its key.
        _write_in(dir_fd, "tls.key", generated.key_pem, 0o600)
        _write_in(dir_fd, "tls.crt", generated.cert_pem, 0o644)
        os.fsync(dir_fd)  # the renames themselves survive a crash
    finally:
        os.close(dir_fd)
    return [d / "ca.crt", d / "tls.crt", d / "tls.key"]


def not_after(cert_pem: bytes) -> dt.datetime:
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(cert_pem)
    return cert.not_valid_after_utc
