"""Data bundles against the real distribution registry (``harness.Registry``): build -> push -> pull -> verify ->
a lint whose finding changes because the pulled bundle differs from the built-in tables -> a blob tampered in the
registry's storage and a wrong digest rejected with nothing changed -> rollback; and the webhook's background
refresh (token auth): a new bundle is swapped in, the age and identity are metrics, a failed pull keeps the old
knowledge. tests/test_data_bundle.py covers the rest without a registry."""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from compatcheck.cli import main
from compatcheck.core.admission import review
from compatcheck.io import bundle
from compatcheck.io.loader import builtin_rules_dir
from tests.conftest import admission_review
from tests.registry.conftest import Images
from tests.registry.harness import USERS, Registry, RegistryCA
from tests.test_data_bundle import CHANGED_FINDING, NODES, POD, ROW, changed, snapshot

REPO = "compatcheck/data"


def variant(tmp: Path, max_cuda: str | None) -> Path:
    """A bundle layout of the built-in rules, with R550's maxCuda set to ``max_cuda`` (None: as built in)."""
    rules = tmp / "rules"
    shutil.copytree(builtin_rules_dir(), rules)
    if max_cuda is not None:
        table = rules / "data" / "driver-branches.yaml"
        text = table.read_text()
        assert text.count(ROW) == 1
        table.write_text(text.replace(ROW, ROW.replace('"12.4"', f'"{max_cuda}"')))
    built = bundle.build(rules)
    bundle.write_layout(built, tmp / "layout")
    return tmp / "layout"


def pusher_config(home: Path, reg: Registry) -> Path:
    cfg = home / "pusher"
    cfg.mkdir(parents=True, exist_ok=True)
    auth = base64.b64encode(f"pusher:{USERS['pusher']}".encode()).decode()
    (cfg / "config.json").write_text(json.dumps({"auths": {reg.host: {"auth": auth}}}))
    return cfg / "config.json"


def stored_blob(reg: Registry, digest: str) -> Path:
    hexa = digest.removeprefix("sha256:")
    return reg.home / "data" / "docker" / "registry" / "v2" / "blobs" / "sha256" / hexa[:2] / hexa / "data"


def layer_digest(layout: Path) -> str:
    index = json.loads((layout / "index.json").read_text())
    manifest = json.loads((layout / "blobs" / "sha256" / index["manifests"][0]["digest"][7:]).read_bytes())
    return str(manifest["layers"][0]["digest"])


def digest_of(layout: Path) -> str:
    return str(json.loads((layout / "index.json").read_text())["manifests"][0]["digest"])


def tamper(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def test_build_push_pull_lint_tamper_rollback(basic: Images, ca: RegistryCA, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    reg = basic.registry
    monkeypatch.setenv("COMPATCHECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("COMPATCHECK_DATA", raising=False)
    monkeypatch.chdir(tmp_path)
    cache = tmp_path / "cache" / "data"
    auth = pusher_config(tmp_path, reg)
    creds = ["--registry-ca", str(ca.ca_file), "--registry-auth-file", str(auth)]
    v0, v1 = variant(tmp_path / "v0", None), variant(tmp_path / "v1", "12.3")
    ref0, ref1 = f"{reg.host}/{REPO}:v0", f"{reg.host}/{REPO}:v1"
    capsys.readouterr()
    for layout, ref in ((v0, ref0), (v1, ref1)):
        assert main(["data", "push", str(layout), ref, *creds]) == 0
        assert capsys.readouterr().out == f"{reg.host}/{REPO}@{digest_of(layout)}\n"
    (tmp_path / "pod.yaml").write_text(POD)
    (tmp_path / "nodes.yaml").write_text(NODES)

    def lint() -> list[tuple[str, str]]:
        capsys.readouterr()
        main(["lint", "pod.yaml", "--nodes", "nodes.yaml", "--format", "json"])
        found = json.loads(capsys.readouterr().out)["findings"]
        return changed([(f["rule"], f["pointer"], f["message"]) for f in found])

    # anonymous pulls are refused by this registry: one line, nothing changed
    (tmp_path / "none.json").write_text('{"auths": {}}')
    assert main(["data", "pull", ref0, "--registry-ca", str(ca.ca_file), "--registry-auth-file",
                 str(tmp_path / "none.json")]) == 2
    assert capsys.readouterr().err == (f"compatcheck: error: pull {ref0}: {reg.host} asks for credentials (Basic) "
                                       "and none are configured (docker login, or registry.authFile); the active "
                                       "data is unchanged\n")
    assert snapshot(cache) == {}
    assert main(["data", "pull", ref0, *creds]) == 0
    assert capsys.readouterr().out.startswith(f"active: {digest_of(v0)} ({ref0}, created ")
    assert lint() == []
    assert main(["data", "pull", ref1, *creds]) == 0
    assert lint() == [CHANGED_FINDING[:2]]
    # by digest: verified against the reference
    assert main(["data", "pull", f"{reg.host}/{REPO}@{digest_of(v1)}", *creds]) == 0
    state = json.loads((cache / "state.json").read_text())
    assert (state["active"]["digest"], state["previous"]["digest"]) == (digest_of(v1), digest_of(v0))

    # a digest the registry does not have, and a layer tampered in the registry's storage: nothing changes
    before = snapshot(cache)
    wrong = f"{reg.host}/{REPO}@sha256:{'0' * 64}"
    capsys.readouterr()
    assert main(["data", "pull", wrong, *creds]) == 2
    assert capsys.readouterr().err == (f"compatcheck: error: pull {wrong}: {reg.host}/{REPO}: sha256:{'0' * 64} not "
                                       "found (404); the active data is unchanged\n")
    v2 = variant(tmp_path / "v2", "12.2")
    ref2 = f"{reg.host}/{REPO}:v2"
    assert main(["data", "push", str(v2), ref2, *creds]) == 0
    tamper(stored_blob(reg, layer_digest(v2)))
    capsys.readouterr()
    assert main(["data", "pull", ref2, *creds]) == 2
    err = capsys.readouterr().err
    assert err == (f"compatcheck: error: pull {ref2}: blob {layer_digest(v2)} does not match its bytes (got "
                   f"{err.split('(got ')[1].split(')')[0]}); the active data is unchanged\n")
    assert snapshot(cache) == before
    assert lint() == [CHANGED_FINDING[:2]]

    # rollback: the previous bundle, from the cache (no registry needed)
    capsys.readouterr()
    assert main(["data", "rollback"]) == 0
    assert capsys.readouterr().out.startswith(f"active: {digest_of(v0)} ({ref0}, created ")
    assert lint() == []
    assert main(["data", "status", "--format", "json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert (status["source"], status["bundle"]["ref"], status["bundle"]["digest"], status["previous"]["digest"]) == (
        "pulled", ref0, digest_of(v0), digest_of(v1))


def _sample(state: Any, name: str, labels: dict[str, str] | None = None) -> float | None:
    value: float | None = state.metrics.registry.get_sample_value(name, labels or {})
    return value


def test_the_webhook_refreshes_its_knowledge_in_the_background(token: Images, ca: RegistryCA, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from compatcheck.webhook.run import webhook_state

    reg = token.registry
    monkeypatch.setenv("COMPATCHECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("COMPATCHECK_DATA", raising=False)
    auth = tmp_path / "pusher.json"
    auth.write_text(json.dumps({"auths": {reg.host: {"username": "pusher", "password": USERS["pusher"]}}}))
    v1 = variant(tmp_path / "v1", "12.3")
    ref = f"{reg.host}/{REPO}:webhook"
    assert main(["data", "push", str(v1), ref, "--registry-ca", str(ca.ca_file), "--registry-auth-file",
                 str(auth)]) == 0
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(NODES)
    config = tmp_path / "config.yaml"
    realm = token.registry.token.realm.split("/")[2] if token.registry.token else ""
    config.write_text(f"apiVersion: compatcheck/v1\ndata: {{source: '{ref}', refreshInterval: 6h}}\n"
                      f"registry: {{redirectHosts: ['{realm}']}}\n")  # the token service: an allowed host
    args = argparse.Namespace(registry_ca=str(ca.ca_file), registry_auth_file=str(token.docker_config / "config.json"),
                              data=None, data_source=None, data_refresh_interval=None)
    state = webhook_state(str(config), [], str(nodes), [], args=args)
    assert state.data is not None and state.data.interval == 6 * 3600
    body = admission_review(_pod())

    def decision() -> tuple[bool, list[str]]:
        _response, d = review(body, "validate", state.ruleset, state.view.snapshot.ctx, state.settings)
        return d.allowed, [f.rule_id for f in d.findings]

    assert decision() == (True, [])  # the built-in tables
    assert _sample(state, "compatcheck_data_info", {"source": "builtin", "digest": "", "ref": ""}) == 1
    builtin_age = _sample(state, "compatcheck_data_age_seconds")
    assert builtin_age is not None and builtin_age > 0
    old_ruleset = state.ruleset
    state.data.start()  # the first pull at once, in the background
    deadline = time.monotonic() + 60
    while _sample(state, "compatcheck_data_refreshes_total", {"result": "updated"}) != 1.0:
        assert time.monotonic() < deadline, "the refresh did not swap the bundle in"
        time.sleep(0.05)
    state.data.stop()
    assert decision() == (False, ["cuda-driver-too-old"])
    assert state.ruleset is not old_ruleset
    assert _sample(state, "compatcheck_data_info", {"source": "pulled", "digest": digest_of(v1), "ref": ref}) == 1
    assert _sample(state, "compatcheck_data_info", {"source": "builtin", "digest": "", "ref": ""}) is None
    created = json.loads((tmp_path / "cache" / "data" / "state.json").read_text())["active"]["created"]
    expected_age = time.time() - time.mktime(time.strptime(created, "%Y-%m-%dT%H:%M:%SZ")) + time.mktime(
        time.gmtime(0))
    age = _sample(state, "compatcheck_data_age_seconds")
    assert age is not None and abs(age - expected_age) < 60
    assert state.data.refresh() == "unchanged"
    # a newer bundle whose layer was tampered in the registry's storage: refused, the old knowledge serves on
    v2 = variant(tmp_path / "v2", "12.1")
    assert main(["data", "push", str(v2), ref, "--registry-ca", str(ca.ca_file), "--registry-auth-file",
                 str(auth)]) == 0
    tamper(stored_blob(reg, layer_digest(v2)))
    serving = state.ruleset
    assert state.data.refresh() == "failed"
    assert _sample(state, "compatcheck_data_refresh_failures_total") == 1
    assert state.ruleset is serving and decision() == (False, ["cuda-driver-too-old"])
    assert _sample(state, "compatcheck_data_info", {"source": "pulled", "digest": digest_of(v1), "ref": ref}) == 1
    state.view.stop()


def _pod() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "serve", "namespace": "ml"},
            "spec": {"containers": [{"name": "main", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def test_plain_http_only_to_a_registry_on_this_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A registry without TLS on loopback (a developer's ``registry:2``): --plain-http pushes and pulls; without it
    the TLS handshake fails; to any other host it is refused before a connection is made."""
    import subprocess
    import urllib.request

    from tests.registry.conftest import registry_binary
    from tests.registry.harness import free_port

    monkeypatch.setenv("COMPATCHECK_CACHE_DIR", str(tmp_path / "cache"))
    port = free_port()
    config = tmp_path / "config.yml"
    config.write_text(f"version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n"
                      f"    rootdirectory: {tmp_path / 'data'}\nhttp:\n  addr: 127.0.0.1:{port}\n")
    with open(tmp_path / "registry.log", "ab") as log:
        proc = subprocess.Popen([registry_binary(), "serve", str(config)], stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, (tmp_path / "registry.log").read_text()
                time.sleep(0.05)
        layout = variant(tmp_path / "v1", "12.3")
        ref = f"127.0.0.1:{port}/{REPO}:dev"
        capsys.readouterr()
        assert main(["data", "push", str(layout), ref, "--plain-http"]) == 0
        assert capsys.readouterr().out == f"127.0.0.1:{port}/{REPO}@{digest_of(layout)}\n"
        assert main(["data", "pull", ref, "--plain-http"]) == 0
        assert json.loads((tmp_path / "cache" / "data" / "state.json").read_text())["active"]["digest"] == \
            digest_of(layout)
        capsys.readouterr()
        assert main(["data", "pull", ref]) == 2  # TLS, always, unless asked
        err = capsys.readouterr().err
        assert err.startswith(f"compatcheck: error: pull {ref}: TLS with 127.0.0.1:{port} failed: ") and \
            err.endswith("; the active data is unchanged\n") and err.count("\n") == 1
    finally:
        proc.terminate()
        proc.wait(10)
    assert main(["data", "pull", "registry.example.com/compatcheck/data:1", "--plain-http"]) == 2
    assert capsys.readouterr().err == ("compatcheck: error: pull registry.example.com/compatcheck/data:1: "
                                       "--plain-http: plain HTTP is only for a registry on this machine (loopback), "
                                       "not registry.example.com; the active data is unchanged\n")
