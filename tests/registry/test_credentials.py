"""Docker credentials as the webhook reads them from a mounted pull Secret: a Secret the kubelet updates (it swaps a
symlink to a new directory) is read again on the next lookup, without a restart."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

from compatcheck.io.dockerauth import Credential, Credentials


def _secret_dir(root: Path, name: str, password: str) -> Path:
    d = root / name
    d.mkdir()
    auth = base64.b64encode(f"reader:{password}".encode()).decode()
    (d / "config.json").write_text(json.dumps({"auths": {"registry.corp": {"auth": auth}}}))
    return d


def test_a_rotated_mounted_secret_is_read_again(tmp_path: Path) -> None:
    # The kubelet's layout: config.json -> ..data/config.json, ..data -> ..<timestamp> (swapped atomically).
    _secret_dir(tmp_path, "..2026_01", "old-secret")
    os.symlink("..2026_01", tmp_path / "..data")
    os.symlink("..data/config.json", tmp_path / "config.json")
    creds = Credentials(tmp_path / "config.json")
    assert creds.for_host("registry.corp") == Credential("reader", "old-secret")
    assert creds.reload_if_changed() is False  # nothing changed: nothing re-read
    _secret_dir(tmp_path, "..2026_02", "new-secret-longer")
    os.symlink("..2026_02", tmp_path / "..data_tmp")
    os.replace(tmp_path / "..data_tmp", tmp_path / "..data")
    assert creds.reload_if_changed() is True
    assert creds.for_host("registry.corp") == Credential("reader", "new-secret-longer")
    assert creds.reload_if_changed() is False
