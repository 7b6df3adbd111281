"""The harness itself, without a kube-apiserver: where the binaries are looked for (``kapi.find_binaries``, the
order of ``../shared/tools/kapi/start.sh``), the one-line reasons the suite skips with, and etcd started alone
the way the suite starts it. These run in CI, which has etcd (Debian's etcd-server) but no kube-apiserver."""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path

import pytest

from tests.e2e import kapi


def _exe(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No lookup variable set and a PATH holding only an empty directory of the test's own."""
    for name in ("KAPI_APISERVER_BIN", "KUBEBUILDER_ASSETS", "KAPI_ETCD_BIN"):
        monkeypatch.delenv(name, raising=False)
    empty = tmp_path / "path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(kapi, "_which_here", lambda name: shutil.which(name))
    return empty


def test_no_apiserver_anywhere_is_a_one_line_reason(clean_env: Path) -> None:
    reason = kapi.find_binaries()
    assert reason == ("no kube-apiserver on this machine: set KUBEBUILDER_ASSETS to a directory with kube-apiserver "
                      "and etcd (envtest: setup-envtest use -p path), or KAPI_APISERVER_BIN")
    assert "\n" not in reason


def test_assets_without_apiserver_name_the_directory(clean_env: Path, monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    assets = tmp_path / "assets"
    _exe(assets / "etcd")
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets))
    reason = kapi.find_binaries()
    assert isinstance(reason, str)
    assert reason.startswith(f"no kube-apiserver: KUBEBUILDER_ASSETS={assets} holds no kube-apiserver")


def test_envtest_assets_give_all_three(clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assets = tmp_path / "assets"
    api, etcd, kubectl = (_exe(assets / n) for n in ("kube-apiserver", "etcd", "kubectl"))
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets))
    assert kapi.find_binaries() == kapi.Binaries(str(api), str(etcd), str(kubectl))


def test_explicit_binaries_win_over_assets_and_path(clean_env: Path, monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    assets = tmp_path / "assets"
    for n in ("kube-apiserver", "etcd"):
        _exe(assets / n)
    _exe(clean_env / "kube-apiserver")
    api, etcd = _exe(tmp_path / "mine" / "apiserver"), _exe(tmp_path / "mine" / "etcd")
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets))
    monkeypatch.setenv("KAPI_APISERVER_BIN", str(api))
    monkeypatch.setenv("KAPI_ETCD_BIN", str(etcd))
    found = kapi.find_binaries()
    assert isinstance(found, kapi.Binaries)
    assert (found.apiserver, found.etcd) == (str(api), str(etcd))


def test_path_lookup_and_missing_etcd(clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    api = _exe(clean_env / "kube-apiserver")
    assert kapi.find_binaries() == ("no etcd: set KAPI_ETCD_BIN or KUBEBUILDER_ASSETS, or apt-get install "
                                    "etcd-server")
    etcd = _exe(clean_env / "etcd")
    assert kapi.find_binaries() == kapi.Binaries(str(api), str(etcd), None)
    monkeypatch.setenv("KAPI_APISERVER_BIN", str(tmp_path / "nowhere"))
    assert kapi.find_binaries() == (f"no kube-apiserver: KAPI_APISERVER_BIN={tmp_path / 'nowhere'} is not an "
                                    "executable file")


def test_etcd_starts_alone_as_the_suite_starts_it(tmp_path: Path) -> None:
    """The etcd half of the harness, where etcd exists (CI installs it; ``COMPATCHECK_ETCD_REQUIRED`` makes a
    missing one a failure there)."""
    etcd = kapi.find_etcd()
    if etcd.startswith("no "):
        if os.environ.get("COMPATCHECK_ETCD_REQUIRED") or os.environ.get("COMPATCHECK_E2E_REQUIRED"):
            pytest.fail(f"etcd required but {etcd}")
        pytest.skip(etcd)
    server = kapi.KubeAPIServer(kapi.Binaries("unused", etcd, None), tmp_path)
    for d in (server.logs, tmp_path / "etcd"):
        d.mkdir(parents=True)
    (tmp_path / "etcd").chmod(0o700)
    try:
        server._start_etcd()
        with urllib.request.urlopen(f"http://127.0.0.1:{server.etcd_port}/health", timeout=5) as r:
            assert json.loads(r.read())["health"] == "true"
    finally:
        server.stop()
