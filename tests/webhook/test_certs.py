"""Writing certificates and keys (``compatcheck.webhook.certs.write``, behind ``compatcheck cert generate`` and the
self-managed TLS files) where someone else may have planted links or directories first."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from compatcheck.webhook import certs
from tests.conftest import ROOT

NAMES = {"ca.crt", "tls.crt", "tls.key"}


@pytest.fixture(scope="module")
def generated() -> certs.Generated:
    return certs.generate(["localhost", "127.0.0.1"])


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return path.lstat().st_mode & 0o777


@pytest.mark.parametrize("planted", ["tls.key.tmp", "ca.crt.tmp", "tls.crt.tmp", "tls.key", "tls.crt"])
def test_a_planted_symlink_does_not_redirect_the_write(tmp_path: Path, generated: certs.Generated,
                                                       planted: str) -> None:
    """A link at a file name, or at the temporary name the writer once used, is replaced, never written
    through: the file it points to keeps its content."""
    out = tmp_path / "out"
    out.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_bytes(b"untouched")
    (out / planted).symlink_to(victim)
    certs.write(str(out), generated)
    assert victim.read_bytes() == b"untouched"
    assert (out / "tls.key").read_bytes() == generated.key_pem and not (out / "tls.key").is_symlink()
    assert mode(out / "tls.key") == 0o600
    assert {p.name for p in out.iterdir()} == NAMES | {planted}  # nothing else: no temporary file left


@pytest.mark.parametrize("kind", ["symlink", "world-writable", "group-writable", "not-a-directory", "other-owner"])
def test_an_unsafe_output_directory_is_refused(tmp_path: Path, generated: certs.Generated, kind: str) -> None:
    out = tmp_path / "out"
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    if kind == "symlink":
        out.symlink_to(target)
        message = "is a symbolic link"
    elif kind == "not-a-directory":
        out.write_text("x")
        message = "is not a directory"
    else:
        out.mkdir()
        if kind == "other-owner":
            if os.geteuid() != 0:
                pytest.skip("only root can make a directory someone else's")
            os.chown(out, 65534, -1)
            message = "owned by uid 65534"
        else:
            out.chmod(0o777 if kind == "world-writable" else 0o770)
            message = "writable by group or others"
    with pytest.raises(certs.UnsafeDirectoryError, match=message):
        certs.write(str(out), generated)
    assert list(target.iterdir()) == []
    if out.is_dir() and not out.is_symlink():
        assert list(out.iterdir()) == []


@pytest.mark.parametrize("mask", [0o000, 0o022, 0o077])
def test_modes_do_not_depend_on_the_umask(tmp_path: Path, generated: certs.Generated, umask: None, mask: int) -> None:
    os.umask(mask)
    out = tmp_path / "new" / "out"
    written = certs.write(str(out), generated)
    assert mode(out) == 0o700
    assert {p.name: mode(p) for p in written} == {"ca.crt": 0o644, "tls.crt": 0o644, "tls.key": 0o600}
    assert {p.name for p in out.iterdir()} == NAMES
    # Written again (a renewal, a rotation) into the directory it made: the same modes.
    certs.write(str(out), generated)
    assert {p.name: mode(p) for p in written} == {"ca.crt": 0o644, "tls.crt": 0o644, "tls.key": 0o600}


def test_an_existing_private_directory_is_used_as_it_is(tmp_path: Path, generated: certs.Generated) -> None:
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o750)  # not writable by others: fine, and left alone
    certs.write(str(out), generated)
    assert mode(out) == 0o750 and {p.name for p in out.iterdir()} == NAMES


def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path, generated: certs.Generated) -> None:
    out = tmp_path / "out"
    out.mkdir(mode=0o700)
    (out / "tls.crt").mkdir()  # rename() cannot replace a non-empty directory
    (out / "tls.crt" / "keep").write_text("x")
    with pytest.raises(OSError):
        certs.write(str(out), generated)
    assert {p.name for p in out.iterdir()} == NAMES


def test_cert_generate_refuses_an_unsafe_directory_in_one_line(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (tmp_path / "out").symlink_to(target)
    proc = subprocess.run([sys.executable, "-m", "compatcheck", "cert", "generate", "--out-dir",
                           str(tmp_path / "out"), "--dns", "localhost"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "is a symbolic link" in proc.stderr and "Traceback" not in proc.stderr
    assert list(target.iterdir()) == []


def test_san_names_cover_dns_and_ip_sans() -> None:
    cert, _key = certs.issue(*certs.make_ca(), ["Compatcheck.ns.svc", "127.0.0.1", "0:0::1"])
    assert certs.san_names_of(cert) == {"compatcheck.ns.svc", "127.0.0.1", "::1"}
    assert certs.dns_names_of(cert) == ["Compatcheck.ns.svc"]
