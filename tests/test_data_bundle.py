"""Data bundles without a registry (``compatcheck data``, ``compatcheck.io.bundle``): a reproducible build,
an invalid rules directory refused, pulls from a bundle's OCI layout verified (tampered blobs, wrong sizes, foreign
artifacts, other formats and version ranges refused with nothing changed), the atomic swap and rollback, the
status JSON, and lint's --data / data.use choosing the knowledge. tests/registry/test_data_bundle.py does the same
against the real registry."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest

from compatcheck.cli import main
from compatcheck.io import bundle
from compatcheck.io.loader import builtin_rules_dir

POD = """apiVersion: v1
kind: Pod
metadata: {name: serve}
spec:
  containers:
  - name: main
    image: nvidia/cuda:12.4.1-base-ubuntu22.04
    resources: {limits: {nvidia.com/gpu: 1}}
"""
NODES = """apiVersion: compatcheck/v1
kind: ClusterProfile
nodePools:
- name: t4
  count: 1
  gpu: Tesla-T4
  driver: "550.90.07"
  gpusPerNode: 1
"""
# The row the modified bundle changes: R550's newest CUDA, 12.4 in the built-in table, 12.3 in the bundle.
ROW = '{branch: 550, maxCuda: "12.4", source: RN}'
CHANGED_ROW = '{branch: 550, maxCuda: "12.3", source: RN}'
CHANGED_FINDING = ("cuda-driver-too-old", "/spec/containers/0/image",
                   "eligible nodes run 550.90.07 (CUDA 12.3) on t4-0")


def modified_rules(tmp: Path) -> Path:
    """A copy of the built-in rules with R550's maxCuda lowered to 12.3."""
    rules = tmp / "rules"
    shutil.copytree(builtin_rules_dir(), rules)
    table = rules / "data" / "driver-branches.yaml"
    text = table.read_text()
    assert text.count(ROW) == 1
    table.write_text(text.replace(ROW, CHANGED_ROW))
    return rules


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The built-in bundle's layout (built twice, and once from a copy elsewhere) and the modified bundle's."""
    base = tmp_path_factory.mktemp("layouts")
    out = {}
    for name, rules in (("builtin", builtin_rules_dir()), ("modified", modified_rules(base / "src"))):
        built = bundle.build(rules)
        bundle.write_layout(built, base / name)
        out[name] = base / name
    return out


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COMPATCHECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("COMPATCHECK_DATA", raising=False)
    return tmp_path / "cache" / "data"


def manifest_of(layout: Path) -> tuple[dict[str, Any], str]:
    index = json.loads((layout / "index.json").read_bytes())
    digest = index["manifests"][0]["digest"]
    return json.loads(blob_path(layout, digest).read_bytes()), digest


def blob_path(layout: Path, digest: str) -> Path:
    return layout / "blobs" / "sha256" / digest.removeprefix("sha256:")


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` and its bytes: what "nothing changed" compares."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()} \
        if directory.exists() else {}


def lint(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[tuple[str, str, str]]]:
    (tmp_path / "pod.yaml").write_text(POD)
    (tmp_path / "nodes.yaml").write_text(NODES)
    capsys.readouterr()
    code = main(["lint", str(tmp_path / "pod.yaml"), "--nodes", str(tmp_path / "nodes.yaml"), "--format", "json",
                 *args])
    out = capsys.readouterr().out
    return code, [(f["rule"], f["pointer"], f["message"]) for f in json.loads(out)["findings"]]


def changed(findings: list[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """The findings that carry the changed row: (rule, pointer) of those whose message says CUDA 12.3 for R550."""
    return [(r, p) for r, p, m in findings if CHANGED_FINDING[2] in m]


# ---------------------------------------------------------------------------------------------- build


def test_the_build_is_reproducible_and_an_oci_layout(layouts: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / "elsewhere" / "rules"
    shutil.copytree(builtin_rules_dir(), copy)
    again = bundle.build(copy)  # other paths, other mtimes: the same bytes
    manifest, digest = manifest_of(layouts["builtin"])
    assert again.digest == digest
    assert json.loads((layouts["builtin"] / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    assert manifest["artifactType"] == "application/vnd.compatcheck.data.v1"
    assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert manifest["config"]["mediaType"] == "application/vnd.compatcheck.data.config.v1+json"
    assert [layer["mediaType"] for layer in manifest["layers"]] == [
        "application/vnd.compatcheck.data.layer.v1.tar+gzip"]
    for d in (manifest["config"], manifest["layers"][0]):
        data = blob_path(layouts["builtin"], d["digest"]).read_bytes()
        assert (len(data), "sha256:" + hashlib.sha256(data).hexdigest()) == (d["size"], d["digest"])
    layer = blob_path(layouts["builtin"], manifest["layers"][0]["digest"]).read_bytes()
    assert layer[4:8] == b"\0\0\0\0"  # gzip MTIME 0
    with tarfile.open(fileobj=io.BytesIO(layer), mode="r:gz") as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names, key=lambda n: (not any(x.name == n and x.isdir() for x in members), n))
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, 0, "", "")}
    assert "rules/data/driver-branches.yaml" in names and "schemas/table.schema.json" in names
    assert "rules/cuda-driver-too-old.yaml" in names


def test_the_config_describes_each_table(layouts: dict[str, Path]) -> None:
    from compatcheck.io.manifests import load_data

    manifest, _ = manifest_of(layouts["builtin"])
    config = json.loads(blob_path(layouts["builtin"], manifest["config"]["digest"]).read_bytes())
    table = next(t for t in config["tables"] if t["name"] == "driver-branches")
    raw = (builtin_rules_dir() / "data" / "driver-branches.yaml").read_bytes()
    (data,) = load_data(raw.decode())
    assert table == {"name": "driver-branches", "file": "data/driver-branches.yaml", "asOf": str(data["asOf"]),
                     "sources": data["sources"], "rows": len(data["rows"]), "sha256": hashlib.sha256(raw).hexdigest()}
    assert config["formatVersion"] == 1
    assert config["compatcheck"] == {"builtWith": "0.1.0", "minVersion": "0.1.0", "beforeVersion": "0.2.0"}
    newest = max(t["asOf"] for t in config["tables"])
    assert config["created"] == f"{newest}T00:00:00Z"  # no SOURCE_DATE_EPOCH: the newest table's date
    assert len(config["tables"]) == len(list((builtin_rules_dir() / "data").glob("*.yaml")))


def test_source_date_epoch_sets_the_build_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    assert main(["data", "build", "-o", str(tmp_path / "out"), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["created"] == "2026-01-01T00:00:00Z"
    assert out["digest"] == manifest_of(tmp_path / "out")[1]


def test_an_invalid_rules_directory_is_never_built(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rules = modified_rules(tmp_path)
    table = rules / "data" / "driver-branches.yaml"
    table.write_text(table.read_text().replace(CHANGED_ROW, '{branch: 550, maxCuda: "12.3"}'))  # no source
    code = main(["data", "build", "--rules", str(rules), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    from compatcheck.io.manifests import load_data

    line = next(n for n, text in enumerate(table.read_text().splitlines(), 1) if "branch: 550," in text)
    index = next(i for i, row in enumerate(load_data(table.read_text())[0]["rows"]) if row["branch"] == 550)
    assert err == (f"compatcheck: error: {rules}: 1 problem(s); nothing was written\n"
                   f"{table}:{line}: error: /rows/{index}: 'source' is a required property\n")
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------- pull


def test_pull_activates_and_lint_uses_the_pulled_bundle(layouts: dict[str, Path], cache: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert changed(lint(tmp_path, capsys)[1]) == []  # auto, nothing pulled: the built-in tables
    assert main(["data", "pull", str(layouts["modified"])]) == 0
    _, digest = manifest_of(layouts["modified"])
    assert capsys.readouterr().out.startswith(f"active: {digest} (")
    code, findings = lint(tmp_path, capsys)
    assert (code, changed(findings)) == (1, [CHANGED_FINDING[:2]])
    assert changed(lint(tmp_path, capsys, "--data", "builtin")[1]) == []
    assert changed(lint(tmp_path, capsys, "--data", "active")[1]) == [CHANGED_FINDING[:2]]


def test_lint_reads_a_bundle_layout_or_rules_directory_given_as_data(layouts: dict[str, Path], cache: Path,
                                                                    tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert changed(lint(tmp_path, capsys, "--data", str(layouts["modified"]))[1]) == [CHANGED_FINDING[:2]]
    rules = modified_rules(tmp_path / "dir")
    assert changed(lint(tmp_path, capsys, "--data", str(rules))[1]) == [CHANGED_FINDING[:2]]
    config = tmp_path / "cfg.yaml"
    config.write_text(f"apiVersion: compatcheck/v1\ndata: {{use: {rules}}}\n")
    assert changed(lint(tmp_path, capsys, "--config", str(config))[1]) == [CHANGED_FINDING[:2]]
    assert changed(lint(tmp_path, capsys, "--config", str(config), "--data", "builtin")[1]) == []
    assert snapshot(cache) == {}  # --data never writes to the cache
    code = main(["lint", str(tmp_path / "pod.yaml"), "--data", "active"])
    assert code == 2
    assert capsys.readouterr().err == ("compatcheck: error: --data active: no data bundle has been pulled "
                                       "(compatcheck data pull REF)\n")


def test_swap_keeps_the_previous_bundle_and_rollback_restores_it(layouts: dict[str, Path], cache: Path,
                                                                 tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    builtin_digest, modified_digest = manifest_of(layouts["builtin"])[1], manifest_of(layouts["modified"])[1]
    assert main(["data", "rollback"]) == 2
    assert capsys.readouterr().err == "compatcheck: error: rollback: no previous data bundle to roll back to\n"
    assert main(["data", "pull", str(layouts["builtin"])]) == 0
    assert main(["data", "pull", str(layouts["modified"])]) == 0
    state = json.loads((cache / "state.json").read_text())
    assert (state["active"]["digest"], state["previous"]["digest"]) == (modified_digest, builtin_digest)
    assert sorted(p.name.split("-")[0] for p in (cache / "bundles").iterdir()) == sorted(
        d.removeprefix("sha256:")[:32] for d in (builtin_digest, modified_digest))
    assert changed(lint(tmp_path, capsys)[1]) == [CHANGED_FINDING[:2]]
    capsys.readouterr()
    assert main(["data", "rollback"]) == 0
    assert capsys.readouterr().out == f"active: {builtin_digest} ({layouts['builtin']}, created " \
                                      f"{json.loads((cache / 'state.json').read_text())['active']['created']})\n"
    assert changed(lint(tmp_path, capsys)[1]) == []
    assert main(["data", "rollback"]) == 0  # and back: the two swap
    assert json.loads((cache / "state.json").read_text())["active"]["digest"] == modified_digest
    # pulling the active bundle again keeps the one before it for rollback
    assert main(["data", "pull", str(layouts["modified"])]) == 0
    assert json.loads((cache / "state.json").read_text())["previous"]["digest"] == builtin_digest


def _rewrite(layout: Path, dest: Path, *, config: Any = None, manifest: Any = None) -> Path:
    """A copy of ``layout`` whose config and/or manifest were changed by the callables given, re-digested
    consistently (a bundle that is well formed, only different)."""
    shutil.copytree(layout, dest)
    man, _ = manifest_of(dest)
    if config is not None:
        data = json.loads(blob_path(dest, man["config"]["digest"]).read_bytes())
        config(data)
        raw = json.dumps(data).encode()
        new = "sha256:" + hashlib.sha256(raw).hexdigest()
        blob_path(dest, new).write_bytes(raw)
        man["config"] = {**man["config"], "digest": new, "size": len(raw)}
    if manifest is not None:
        manifest(man)
    raw = json.dumps(man).encode()
    new = "sha256:" + hashlib.sha256(raw).hexdigest()
    blob_path(dest, new).write_bytes(raw)
    index = json.loads((dest / "index.json").read_text())
    index["manifests"][0].update(digest=new, size=len(raw))
    (dest / "index.json").write_text(json.dumps(index))
    return dest


def _flip_layer_byte(layout: Path) -> None:
    man, _ = manifest_of(layout)
    path = blob_path(layout, man["layers"][0]["digest"])
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _tar_layer(entries: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data else None)
    return gzip.compress(raw.getvalue(), mtime=0)


def _with_layer(layout: Path, dest: Path, layer: bytes) -> Path:
    def swap(man: dict[str, Any]) -> None:
        digest = "sha256:" + hashlib.sha256(layer).hexdigest()
        (dest / "blobs" / "sha256" / digest.removeprefix("sha256:")).write_bytes(layer)
        man["layers"][0].update(digest=digest, size=len(layer))

    return _rewrite(layout, dest, manifest=swap)


def _symlink_layer() -> bytes:
    info = tarfile.TarInfo("rules/data/x.yaml")
    info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
    return _tar_layer([(info, b"")])


def _escaping_layer() -> bytes:
    info = tarfile.TarInfo("../evil.yaml")
    info.size = 3
    return _tar_layer([(info, b"x: 1")])


TAMPERED = [
    ("layer-byte", lambda src, dst: (shutil.copytree(src, dst), _flip_layer_byte(dst)),
     r"blob sha256:[0-9a-f]{64} does not match its bytes \(sha256 sha256:[0-9a-f]{64}\): tampered or corrupt"),
    ("layer-size", lambda src, dst: _rewrite(src, dst, manifest=lambda m: m["layers"][0].update(
        size=m["layers"][0]["size"] - 1)), r"blob sha256:[0-9a-f]{64} is \d+ bytes, not the \d+ its descriptor says"),
    ("foreign-artifact", lambda src, dst: _rewrite(src, dst, manifest=lambda m: m.update(
        artifactType="application/vnd.example.other")),
     r"not a compatcheck data bundle \(artifactType 'application/vnd.example.other'"),
    ("format-2", lambda src, dst: _rewrite(src, dst, config=lambda c: c.update(formatVersion=2)),
     r"bundle format 2; this compatcheck 0\.1\.0 reads format 1 \(upgrade compatcheck"),
    ("version-range", lambda src, dst: _rewrite(src, dst, config=lambda c: c["compatcheck"].update(
        minVersion="0.2.0", beforeVersion="0.3.0")),
     r"the bundle works with compatcheck >= 0\.2\.0, < 0\.3\.0; this is 0\.1\.0"),
    ("config-file-list", lambda src, dst: _rewrite(src, dst, config=lambda c: c["files"][0].update(
        sha256="0" * 64)), r"does not match its sha256 in the config"),
    ("symlink", lambda src, dst: _with_layer(src, dst, _symlink_layer()),
     r"unexpected entry 'rules/data/x.yaml' in the layer"),
    ("path-escape", lambda src, dst: _with_layer(src, dst, _escaping_layer()),
     r"unexpected entry '\.\./evil\.yaml' in the layer"),
    ("not-gzip", lambda src, dst: _with_layer(src, dst, b"not a tar at all"), r"the layer is not a gzipped tar"),
]


@pytest.mark.parametrize("make, error", [pytest.param(m, e, id=i) for i, m, e in TAMPERED])
def test_a_tampered_or_foreign_bundle_changes_nothing(layouts: dict[str, Path], cache: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str], make: Any,
                                                     error: str) -> None:
    assert main(["data", "pull", str(layouts["builtin"])]) == 0
    before = snapshot(cache)
    bad = tmp_path / "bad"
    make(layouts["modified"], bad)
    capsys.readouterr()
    assert main(["data", "pull", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line
    assert re.fullmatch(rf"compatcheck: error: pull {re.escape(str(bad))}: .*{error}.*; the active data is "
                        r"unchanged\n", err), err
    assert snapshot(cache) == before  # no staging directory left, state.json as it was


def test_a_bundle_whose_tables_are_invalid_is_refused_at_pull(layouts: dict[str, Path], cache: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A consistent bundle (digests, file list) of an invalid table, as a build that skipped validation would make:
    the pull validates the tables itself."""
    rules = modified_rules(tmp_path)
    table = rules / "data" / "driver-branches.yaml"
    table.write_text(table.read_text().replace(CHANGED_ROW, '{branch: 550, maxCuda: "12.3"}'))
    files = bundle.bundle_files(rules)
    layer = bundle.layer_bytes(files)

    def config(c: dict[str, Any]) -> None:
        c["files"] = [{"name": n, "size": len(b), "sha256": hashlib.sha256(b).hexdigest()}
                      for n, b in sorted(files.items())]

    bad = _rewrite(_with_layer(layouts["modified"], tmp_path / "step", layer), tmp_path / "bad", config=config)
    before = snapshot(cache)
    assert main(["data", "pull", str(bad)]) == 2
    err = capsys.readouterr().err
    line = next(n for n, text in enumerate(table.read_text().splitlines(), 1) if "branch: 550," in text)
    assert re.fullmatch(rf"compatcheck: error: pull {re.escape(str(bad))}: {re.escape(str(bad))}: invalid rules or "
                        rf"tables: rules/data/driver-branches.yaml:{line}: /rows/\d+: 'source' is a required "
                        r"property; the active data is unchanged\n", err), err
    assert snapshot(cache) == before


# ---------------------------------------------------------------------------------------------- status


def test_status_json(layouts: dict[str, Path], cache: Path, monkeypatch: pytest.MonkeyPatch,
                     capsys: pytest.CaptureFixture[str]) -> None:
    from compatcheck.io.manifests import load_data

    def expected_tables(rules: Path) -> list[dict[str, Any]]:
        out = []
        for path in sorted((rules / "data").glob("*.yaml")):
            (data,) = load_data(path.read_text())
            out.append({"name": data["table"], "asOf": str(data["asOf"]), "rows": len(data["rows"]),
                        "sources": data["sources"], "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
        return out

    monkeypatch.setattr(bundle.time, "time", lambda: 1798761600.0)  # 2027-01-01T00:00:00Z
    assert main(["data", "status", "--format", "json"]) == 0
    found = json.loads(capsys.readouterr().out)
    tables = expected_tables(builtin_rules_dir())
    newest = max(t["asOf"] for t in tables)
    age = 1798761600 - int(__import__("datetime").datetime.fromisoformat(f"{newest}T00:00:00+00:00").timestamp())
    assert found == {"source": "builtin", "path": str(builtin_rules_dir()), "bundle": None,
                     "created": f"{newest}T00:00:00Z", "ageSeconds": age, "compatcheck": None, "previous": None,
                     "tables": tables}
    assert main(["data", "pull", str(layouts["modified"])]) == 0
    capsys.readouterr()
    state = json.loads((cache / "state.json").read_text())["active"]
    assert main(["data", "status", "--format", "json"]) == 0
    found = json.loads(capsys.readouterr().out)
    rules = cache / "bundles" / state["dir"] / "rules"
    assert found == {"source": "pulled", "path": str(rules),
                     "bundle": {"ref": str(layouts["modified"]), "digest": manifest_of(layouts["modified"])[1],
                                "pulledAt": state["pulledAt"]},
                     "created": f"{newest}T00:00:00Z", "ageSeconds": age,
                     "compatcheck": {"builtWith": "0.1.0", "minVersion": "0.1.0", "beforeVersion": "0.2.0"},
                     "previous": None, "tables": expected_tables(rules)}
    assert next(t for t in found["tables"] if t["name"] == "driver-branches")["sha256"] != next(
        t for t in tables if t["name"] == "driver-branches")["sha256"]
    # --max-age: exit 1 when the knowledge is older
    assert main(["data", "status", "--max-age", f"{age - 1}s"]) == 1
    assert main(["data", "status", "--max-age", f"{age + 1}s"]) == 0
    capsys.readouterr()
    assert main(["data", "status", "--max-age", "soon"]) == 2
    assert capsys.readouterr().err == ("compatcheck: error: --max-age 'soon': expected seconds or a number with s, m, "
                                       "h or d\n")


def test_a_damaged_state_file_is_one_line_error(cache: Path, capsys: pytest.CaptureFixture[str],
                                               tmp_path: Path) -> None:
    cache.mkdir(parents=True)
    (cache / "state.json").write_text("[]")
    assert main(["data", "status"]) == 2
    assert capsys.readouterr().err == (f"compatcheck: error: {cache / 'state.json'}: not a data bundle state "
                                       "file (remove it, or pull again)\n")
    (tmp_path / "pod.yaml").write_text(POD)
    assert main(["lint", str(tmp_path / "pod.yaml")]) == 2
    assert capsys.readouterr().err.endswith("not a data bundle state file (remove it, or pull again)\n")


def test_without_a_home_directory_auto_means_builtin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A container user with no home directory (and no $COMPATCHECK_CACHE_DIR) lints with the built-in tables;
    asking for a pulled bundle there is a one-line error."""
    from compatcheck.io import cachedir

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv("COMPATCHECK_CACHE_DIR", raising=False)
    monkeypatch.delenv("COMPATCHECK_DATA", raising=False)
    monkeypatch.setattr("compatcheck.io.datastate.user_cache_dir", no_home)
    monkeypatch.setattr(cachedir, "user_cache_dir", no_home)
    code, findings = lint(tmp_path, capsys)
    assert code == 0 and changed(findings) == []
    assert main(["data", "status", "--format", "json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert (found["source"], found["bundle"], found["previous"]) == ("builtin", None, None)
    assert main(["data", "rollback"]) == 2
    assert capsys.readouterr().err == ("compatcheck: error: rollback: no cache directory for data bundles: set "
                                       "$COMPATCHECK_CACHE_DIR (or $HOME)\n")


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1:5000", True), ("127.3.2.1", True), ("localhost:5000", True), ("[::1]:5000", True), ("::1", True),
    ("10.0.0.1:5000", False), ("registry.example.com", False), ("localhost.example.com", False),
    ("[2001:db8::1]:443", False),
])
def test_plain_http_is_for_loopback_hosts_only(host: str, loopback: bool) -> None:
    from compatcheck.io.dockerauth import Credentials
    from compatcheck.io.oci import HostPolicy, RegistryClient, is_loopback

    assert is_loopback(host) is loopback
    if loopback:
        assert host.lower() in RegistryClient(Credentials(None), HostPolicy(), plain_http=(host,)).plain_http
    else:
        with pytest.raises(ValueError, match=re.escape(f"not {host}")):
            RegistryClient(Credentials(None), HostPolicy(), plain_http=(host,))
