"""``compatcheck lint`` reading image configs from a real distribution registry: the right CUDA runtime for a custom
image built FROM a CUDA base (by tag and by digest, Basic and token auth, OCI and Docker media types, a multi-arch
index read for the nodes' architecture), the version rules firing on it with exact findings, and every way a
lookup can fail degrading to one note and today's behaviour: a wrong password, a 404 tag, a registry that hangs, a
config blob over the size cap. The cache serves a second run without a request (the registry is stopped to prove
it), ``--offline`` reads only the cache, and ``--image-facts`` reads facts made elsewhere (``images fetch -o`` and
``skopeo inspect --config``)."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from compatcheck.cli import main
from tests.registry.conftest import (
    CUDA13_ENV,
    NODES,
    R535,
    R560,
    TOO_OLD_13,
    UNKNOWN,
    Images,
    pod,
    registry_binary,
    short,
)
from tests.registry.conftest import REQUIRE_13_0 as CUDA13_REQUIRE
from tests.registry.harness import USERS, Listener, Registry, RegistryCA


@pytest.mark.parametrize("auth", ["basic", "token"])
@pytest.mark.parametrize("by", ["tag", "digest"])
def test_a_custom_image_from_a_cuda_base_gets_its_cuda_and_the_driver_rules_fire(
        lint: Any, request: pytest.FixtureRequest, auth: str, by: str) -> None:
    images: Images = request.getfixturevalue(auth)
    image = images.ref("ml/serving:2025-10-14") if by == "tag" else images.ref(f"ml/serving@{images.serving.digest}")
    run = lint(image, "--registry-lookups", images=images)
    assert run.findings == [("cuda-driver-too-old", "/spec/containers/0/image",
                             TOO_OLD_13.format(image=image, digest=short(images.serving.digest)))]
    assert run.notes == [] and run.code == 1


def test_without_lookups_the_same_image_stays_unknown(lint: Any, basic: Images) -> None:
    image = basic.ref("ml/serving:2025-10-14")
    run = lint(image, images=basic)
    assert run.findings == [("cuda-runtime-unknown", "/spec/containers/0/image", UNKNOWN.format(image=image))]
    assert run.code == 0


HOW_FORWARD = ('declare it in the config (driverPolicy.forwardCompatibility: true) or per node pool (label '
               'compatcheck.io/forward-compatibility: "true")')
HOW_MVC = ('declare it in the config (driverPolicy.minorVersionCompatibility: true) or per node pool (label '
           'compatcheck.io/minor-version-compatibility: "true")')
FORWARD = {"forwardCompatibility": True}


def test_forward_compatibility_from_the_config_bridges_r535(lint: Any, basic: Images) -> None:
    image = basic.ref("ml/fwd:1.0")  # a Docker v2 manifest and config
    origin = f"image {image} (manifest {short(basic.fwd.digest)}), whose config sets CUDA_VERSION=12.4.1"
    # The default driver policy (driver >= runtime): an error that says what would run it
    run = lint(image, "--registry-lookups", images=basic, driver=R535)
    assert run.findings == [(
        "cuda-driver-behind-runtime", "/spec/containers/0/image",
        f"image CUDA 12.4 ({origin}) is newer than the driver's CUDA on 535.104.05 (CUDA 12.2) on t4-0, t4-1, and the "
        "platform requires a driver at least as new as the runtime; use a driver from branch >= 550; NVIDIA "
        f"minor-version compatibility would run it (no PTX JIT, no newer-driver APIs) if the platform accepts it: "
        f"{HOW_MVC}; NVIDIA forward compatibility (the image's CUDA 12.4 cuda-compat libraries, which list driver "
        f"branch 535) could bridge this on these data-center GPUs if the platform enables it: {HOW_FORWARD}")]
    assert run.code == 1
    # Declared: the branch its config's NVIDIA_REQUIRE_CUDA lists bridges it, a warning
    run = lint(image, "--registry-lookups", images=basic, driver=R535, policy=FORWARD)
    assert run.findings == [(
        "cuda-driver-needs-forward-compat", "/spec/containers/0/image",
        f"image CUDA 12.4 ({origin}) is newer than the driver on 535.104.05 (CUDA 12.2) on t4-0, t4-1: it runs "
        "through forward compatibility (the image's CUDA 12.4 cuda-compat libraries, which list driver branch 535 on "
        "data-center GPUs); without them, minor-version compatibility runs it (no PTX JIT, no newer-driver APIs); the "
        "config's driverPolicy.forwardCompatibility declares that the platform enables it")]
    assert run.code == 0


def test_the_cuda_13_base_on_a_listed_branch_runs_through_forward_compatibility(lint: Any, basic: Images) -> None:
    # The same image on R535, a branch its NVIDIA_REQUIRE_CUDA lists for data-center GPUs: denied by the default
    # driver policy, a warning where the platform declares forward compatibility.
    image = basic.ref("ml/serving:2025-10-14")
    origin = (f"image {image} (manifest {short(basic.serving.digest)}), whose config sets CUDA_VERSION=13.0.0")
    run = lint(image, "--registry-lookups", images=basic, driver=R535)
    assert run.findings == [(
        "cuda-driver-too-old", "/spec/containers/0/image",
        f"image CUDA 13.0 ({origin}) needs a driver from branch >= 580; eligible nodes run 535.104.05 (CUDA 12.2) on "
        "t4-0, t4-1; NVIDIA forward compatibility (the image's CUDA 13.0 cuda-compat libraries, which list driver "
        f"branch 535) could bridge this on these data-center GPUs if the platform enables it: {HOW_FORWARD}")]
    assert run.notes == [] and run.code == 1
    run = lint(image, "--registry-lookups", images=basic, driver=R535, policy=FORWARD)
    assert run.findings == [(
        "cuda-driver-needs-forward-compat", "/spec/containers/0/image",
        f"image CUDA 13.0 ({origin}) is newer than the driver on 535.104.05 (CUDA 12.2) on t4-0, t4-1: it runs only "
        "through forward compatibility (the image's CUDA 13.0 cuda-compat libraries, which list driver branch 535 "
        "on data-center GPUs); the config's driverPolicy.forwardCompatibility declares that the platform enables "
        "it")]
    assert run.notes == [] and run.code == 0


@pytest.mark.parametrize(("arch", "cuda"), [("amd64", "12.4.1"), ("arm64", "12.6.0")])
def test_a_multi_arch_index_is_read_for_the_nodes_architecture(lint: Any, token: Images, arch: str,
                                                               cuda: str) -> None:
    image = token.ref("ml/multi:v1")
    run = lint(image, "--registry-lookups", images=token, arch=arch, driver=R535)
    (rule, _pointer, message), = run.findings
    assert rule == "cuda-driver-behind-runtime" and f"whose config sets CUDA_VERSION={cuda})" in message


def test_a_config_without_cuda_env_says_so(lint: Any, basic: Images) -> None:
    image = basic.ref("ml/plain:1")
    run = lint(image, "--registry-lookups", images=basic)
    assert run.findings == [("cuda-runtime-unknown", "/spec/containers/0/image", UNKNOWN.format(image=image).replace(
        f"no image pattern recognises {image!r}",
        f"its config (manifest {short(basic.plain.digest)}) sets no CUDA_VERSION and no image profile recognises "
        f"{image!r}"))]


def test_a_wrong_password_is_one_note_and_the_run_goes_on(lint: Any, basic: Images, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "bad-docker"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({"auths": {basic.registry.host: {
        "username": "reader", "password": "wrong"}}}))
    image = basic.ref("ml/serving:2025-10-14")
    monkeypatch.setenv("DOCKER_CONFIG", str(bad))
    run = lint(image, "--registry-lookups")
    assert run.findings == [("cuda-runtime-unknown", "/spec/containers/0/image", UNKNOWN.format(image=image))]
    assert run.notes == [f"registry lookup: {basic.registry.host} refused the credentials given (401) for "
                         f"{basic.registry.host}/ml/serving; not read: {image}"]
    assert run.code == 0


def test_no_credentials_against_a_token_registry_is_denied_anonymous(lint: Any, token: Images, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "none"
    empty.mkdir()
    monkeypatch.setenv("DOCKER_CONFIG", str(empty))
    image = token.ref("ml/serving:2025-10-14")
    run = lint(image, "--registry-lookups")
    assert run.notes == [f"registry lookup: {token.registry.host} refused anonymous access (401) for "
                         f"{token.registry.host}/ml/serving; not read: {image}"]


def test_an_identity_token_is_exchanged_as_a_refresh_token(lint: Any, token: Images, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "idtoken"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"auths": {token.registry.host: {"identitytoken": "refresh-ok"}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(d))
    image = token.ref("ml/serving:2025-10-14")
    run = lint(image, "--registry-lookups")
    assert [r for r, _p, _m in run.findings] == ["cuda-driver-too-old"] and run.notes == []


def test_a_tag_that_is_not_there_is_a_note_naming_it(lint: Any, basic: Images) -> None:
    image = basic.ref("ml/serving:no-such-tag")
    run = lint(image, "--registry-lookups", images=basic)
    assert run.notes == [f"registry lookup: {image}: {basic.registry.host}/ml/serving: no-such-tag not found (404)"]
    assert [r for r, _p, _m in run.findings] == ["cuda-runtime-unknown"]


def test_a_registry_that_never_answers_times_out_within_the_budget(lint: Any, tmp_path: Path) -> None:
    hang = Listener("hang")
    try:
        image = f"{hang.host}/ml/serving:1"
        started = time.monotonic()
        run = lint(image, "--registry-lookups", config={"timeoutSeconds": 0.5, "budgetSeconds": 2})
        elapsed = time.monotonic() - started
    finally:
        hang.close()
    assert run.notes == [f"registry lookup: {hang.host} did not answer within 0.5 s; not read: {image}"]
    assert hang.connections == 1 and elapsed < 2.0
    assert [r for r, _p, _m in run.findings] == ["cuda-runtime-unknown"]


def test_a_config_blob_over_the_cap_is_refused_before_it_is_read(lint: Any, basic: Images) -> None:
    huge = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": CUDA13_ENV},
                       "padding": "x" * (3 * 1024 * 1024)}).encode()
    pushed = basic.registry.push_image("ml/huge", "1", [], config_bytes=huge)
    image = basic.ref("ml/huge:1")
    run = lint(image, "--registry-lookups", images=basic)
    assert run.notes == [f"registry lookup: {image}: config {pushed.config_digest} of {basic.registry.host}/ml/huge "
                         f"is {len(huge)} bytes, over the 2097152 byte cap"]


def test_a_blob_larger_than_its_descriptor_says_is_refused_by_its_content_length(lint: Any, basic: Images) -> None:
    big = json.dumps({"config": {"Env": CUDA13_ENV}, "padding": "x" * (3 * 1024 * 1024)}).encode()
    basic.registry.push_image("ml/liar", "1", [], config_bytes=big, declared_config_size=1000)
    image = basic.ref("ml/liar:1")
    run = lint(image, "--registry-lookups", images=basic)
    assert len(run.notes) == 1 and run.notes[0].startswith(f"registry lookup: {image}: sha256:")
    assert run.notes[0].endswith(f" is {len(big)} bytes, over the 2097152 byte cap")


def test_the_cache_serves_the_next_run_without_any_request(lint: Any, ca: RegistryCA, tmp_path: Path,
                                                           tmp_path_factory: pytest.TempPathFactory,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("registry-own")
    reg = Registry(registry_binary(), home, ca, "htpasswd").start()
    d = home / "docker"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"auths": {reg.host: {
        "auth": base64.b64encode(f"reader:{USERS['reader']}".encode()).decode()}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(d))
    try:
        pushed = reg.push_image("ml/serving", "2025-10-14", CUDA13_ENV)
        image = f"{reg.host}/ml/serving:2025-10-14"
        first = lint(image, "--registry-lookups")
    finally:
        reg.stop()  # from here on, any request would fail and say so in a note
    second = lint(image, "--registry-lookups")
    offline = lint(image, "--offline")
    expected = [("cuda-driver-too-old", "/spec/containers/0/image",
                 TOO_OLD_13.format(image=image, digest=short(pushed.digest)))]
    assert first.findings == second.findings == offline.findings == expected
    assert first.notes == second.notes == offline.notes == []
    entries = sorted(p.parent.name for p in (tmp_path / "cache").rglob("*.json"))
    assert entries == ["facts", "tags"]


def test_offline_with_nothing_cached_is_a_note_and_no_request(lint: Any) -> None:
    rec = Listener("record")
    try:
        image = f"{rec.host}/ml/serving:1"
        run = lint(image, "--offline")
    finally:
        rec.close()
    assert run.notes == [f"registry lookup: {image} (linux/amd64) is not in the cache or the --image-facts files, "
                         "and --offline makes no request"]
    assert rec.connections == 0


def test_image_facts_from_images_fetch_are_used_with_no_request(lint: Any, basic: Images, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    image = basic.ref("ml/serving:2025-10-14")
    monkeypatch.setenv("DOCKER_CONFIG", str(basic.docker_config))
    facts = tmp_path / "facts.json"
    assert main(["images", "fetch", image, "-o", str(facts), "--registry-ca", str(basic.registry.ca.ca_file)]) == 0
    capsys.readouterr()
    data = json.loads(facts.read_text())
    assert data["kind"] == "ImageFacts" and [i["reference"] for i in data["images"]] == [image]
    assert data["images"][0]["digest"] == basic.serving.digest and "CUDA_VERSION=13.0.0" in data["images"][0]["env"]
    # the same image by digest, linted with no lookups at all: the file alone decides
    pinned = basic.ref(f"ml/serving@{basic.serving.digest}")
    run = lint(pinned, "--no-registry-lookups", "--image-facts", str(facts))
    assert run.findings == [("cuda-driver-too-old", "/spec/containers/0/image",
                             TOO_OLD_13.format(image=pinned, digest=short(basic.serving.digest)))]


def test_a_skopeo_config_is_accepted_as_image_equals_file(lint: Any, tmp_path: Path) -> None:
    rec = Listener("record")
    config = tmp_path / "skopeo-config.json"
    config.write_text(json.dumps({"created": "2025-10-14T00:00:00Z", "architecture": "amd64", "os": "linux",
                                  "config": {"Env": CUDA13_ENV, "Labels": None},
                                  "rootfs": {"type": "layers", "diff_ids": []}}))
    image = f"{rec.host}/ml/serving:2025-10-14"
    try:
        run = lint(image, "--image-facts", f"{image}={config}")
    finally:
        rec.close()
    assert rec.connections == 0
    (rule, _p, message), = run.findings
    assert rule == "cuda-driver-too-old"
    assert message.startswith(f"image CUDA 13.0 (image {image}, whose config sets CUDA_VERSION=13.0.0) needs")


@pytest.mark.parametrize(("content", "line", "message"), [
    ('{"apiVersion": "compatcheck/v1", "kind": "ImageFacts",\n "images": [{"reference": "a/b:1",\n '
     '"platform": "linux/amd64", "env": ["CUDA_VERSION"], "labels": {}}]}', 3,
     "/images/0/env/0: 'CUDA_VERSION' does not match '^[^=]+='"),
    ('{"apiVersion": "compatcheck/v1", "kind": "ImageFacts", "images": [], "extra": 1}', 1,
     "/extra: Additional properties are not allowed ('extra' was unexpected)"),
])
def test_an_invalid_facts_file_is_a_located_error(lint: Any, tmp_path: Path, content: str, line: int,
                                                  message: str) -> None:
    bad = tmp_path / "facts.json"
    bad.write_text(content)
    run = lint("registry.corp/ml/serving:1", "--image-facts", str(bad))
    assert run.code == 2
    assert [(e["file"], e["line"], e["message"]) for e in run.report["errors"]] == [(str(bad), line, message)]


def test_concurrent_runs_share_the_cache_safely(basic: Images, tmp_path: Path) -> None:
    """Eight pre-commit-style runs at once, one cache directory: each run is right, and the cache holds whole
    entries only (written through a temporary file renamed over the entry)."""
    image = basic.ref("ml/serving:2025-10-14")
    (tmp_path / "pod.yaml").write_text(pod(image))
    (tmp_path / "nodes.yaml").write_text(NODES.replace("ARCH", "amd64").replace("DRIVER", R560))
    env = {**os.environ, "COMPATCHECK_CACHE_DIR": str(tmp_path / "cache"),
           "DOCKER_CONFIG": str(basic.docker_config)}
    cmd = [sys.executable, "-m", "compatcheck", "lint", str(tmp_path / "pod.yaml"), "--nodes",
           str(tmp_path / "nodes.yaml"), "--format", "json", "--registry-ca", str(basic.registry.ca.ca_file)]
    expected = [("cuda-driver-too-old", "/spec/containers/0/image",
                 TOO_OLD_13.format(image=image, digest=short(basic.serving.digest)))]
    for mode in ("--registry-lookups", "--offline"):  # cold, all racing to fill the cache; then from it alone
        procs = [subprocess.Popen([*cmd, mode], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(8)]
        for p in procs:
            out, err = p.communicate(timeout=60)
            assert p.returncode == 1, err.decode()
            report = json.loads(out)
            assert [(f["rule"], f["pointer"], f["message"]) for f in report["findings"]] == expected
            assert report["skipped"] == []
    files = sorted((tmp_path / "cache").rglob("*"))
    entries = [p for p in files if p.is_file()]
    assert sorted(p.parent.name for p in entries) == ["facts", "tags"]  # no temporary file left behind
    assert all(isinstance(json.loads(p.read_text()), dict) for p in entries)


def test_images_explain_shows_the_config_and_where_it_came_from(basic: Images, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPATCHECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DOCKER_CONFIG", str(basic.docker_config))
    monkeypatch.chdir(tmp_path)
    image = basic.ref("ml/serving:2025-10-14")
    ca = ["--registry-ca", str(basic.registry.ca.ca_file)]
    assert main(["images", "explain", image, "--registry-lookups", *ca]) == 0
    cold = capsys.readouterr().out
    assert main(["images", "explain", image, "--offline"]) == 0
    warm = capsys.readouterr().out
    head = (f"{image}\n  config: linux/amd64 manifest {basic.serving.digest}, config "
            f"{basic.serving.config_digest}, from ")
    assert cold.startswith(head + f"registry {basic.registry.host}\n")
    assert re.match(re.escape(head + f"the cache {tmp_path / 'cache'} (read from registry {basic.registry.host} at ")
                    + r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ\)\n", warm)
    for text in (cold, warm):
        assert "    env CUDA_VERSION=13.0.0\n" in text and f"    env NVIDIA_REQUIRE_CUDA={CUDA13_REQUIRE}\n" in text
        assert "    label org.opencontainers.image.source=https://git.corp/ml/serving\n" in text
        assert "  image table: no profile recognises it\n" in text
    assert main(["images", "explain", image, "--offline", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["cuda"], data["tableProfile"], data["config"]["digest"]) == ("13.0.0", None, basic.serving.digest)
    assert data["cudaOrigin"] == (f"image {image} (manifest {short(basic.serving.digest)}), whose config sets "
                                  "CUDA_VERSION=13.0.0")


def test_an_unwritable_cache_is_one_note_and_the_lookup_still_counts(lint: Any, basic: Images, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("COMPATCHECK_CACHE_DIR", str(blocker))
    image = basic.ref("ml/serving:2025-10-14")
    run = lint(image, "--registry-lookups", images=basic)
    assert run.findings == [("cuda-driver-too-old", "/spec/containers/0/image",
                             TOO_OLD_13.format(image=image, digest=short(basic.serving.digest)))]
    assert run.notes == [f"registry lookup: cannot write the image cache in {blocker}: Not a directory"]


def test_anonymous_token_auth_reads_a_public_repository(lint: Any, token: Images, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # The token service grants anonymous pull on public/* (as Docker Hub does for public images): no credentials.
    pushed = token.registry.push_image("public/serving", "1", CUDA13_ENV)
    empty = tmp_path / "none"
    empty.mkdir()
    monkeypatch.setenv("DOCKER_CONFIG", str(empty))
    image = token.ref("public/serving:1")
    run = lint(image, "--registry-lookups")
    assert run.findings == [("cuda-driver-too-old", "/spec/containers/0/image",
                             TOO_OLD_13.format(image=image, digest=short(pushed.digest)))]
    assert run.notes == []


@pytest.mark.parametrize("where", ["credHelpers", "credsStore"])
def test_a_credential_helper_gives_the_credentials(lint: Any, basic: Images, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """docker's credential helper protocol: ``docker-credential-<name> get`` with the server on stdin, JSON out.
    The helper here is a script, as a user's own helper would be; it records what it was asked."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    asked = tmp_path / "asked"
    helper = bin_dir / "docker-credential-corp"
    helper.write_text(f"#!{sys.executable}\nimport json, sys\nserver = sys.stdin.read().strip()\n"
                      f"open({str(asked)!r}, 'a').write(sys.argv[1] + ' ' + server + '\\n')\n"
                      f"print(json.dumps({{'ServerURL': server, 'Username': 'reader', 'Secret': "
                      f"{USERS['reader']!r}}}))\n")
    helper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    d = tmp_path / "docker"
    d.mkdir()
    config = {"credHelpers": {basic.registry.host: "corp"}} if where == "credHelpers" else {"credsStore": "corp"}
    (d / "config.json").write_text(json.dumps(config))
    monkeypatch.setenv("DOCKER_CONFIG", str(d))
    image = basic.ref("ml/serving:2025-10-14")
    run = lint(image, "--registry-lookups")
    assert [r for r, _p, _m in run.findings] == ["cuda-driver-too-old"] and run.notes == []
    assert asked.read_text() == f"get {basic.registry.host}\n"
