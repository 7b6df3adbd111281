"""Fixtures of the registry tests: one real distribution registry per auth kind (htpasswd Basic auth, and token
auth against ``harness.TokenServer``), with the images every test reads pushed once, and a docker config for each.
A missing ``docker-registry`` binary skips them with the package to install, or fails them where
``COMPATCHECK_REGISTRY_REQUIRED`` (``.ci/run``, which installs Debian's docker-registry) or
``COMPATCHECK_E2E_REQUIRED`` is set: CI must not go green by skipping them."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from compatcheck.cli import main
from tests.registry.harness import USERS, Pushed, Registry, RegistryCA, TokenServer, find_registry

# What an image built FROM nvidia/cuda:13.0.0 carries in its config (gitlab.com/nvidia/container-images/cuda
# dist/13.0.0/ubuntu2404/base/Dockerfile; ../shared/reference/cuda-facts.md section 7.1): forward-compatibility
# alternatives for branches 535, 550, 565, 570 and 575 on brand set B. A R560 driver is in none of them, so it is
# too old; a R535 driver on a data-center GPU runs it through forward compatibility.
_BRANDS = ("unknown", "grid", "tesla", "nvidia", "quadro", "quadrortx", "nvidiartx", "vapps", "vpc", "vcs", "vws",
           "cloudgaming")
REQUIRE_13_0 = "cuda>=13.0 " + " ".join(f"brand={b},driver>={n},driver<{n + 1}" for n in (535, 550, 565, 570, 575)
                                       for b in _BRANDS)
CUDA13_ENV = ["PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin",
              "NVARCH=x86_64", f"NVIDIA_REQUIRE_CUDA={REQUIRE_13_0}", "NV_CUDA_CUDART_VERSION=13.0.48-1",
              "CUDA_VERSION=13.0.0", "LD_LIBRARY_PATH=/usr/local/nvidia/lib:/usr/local/nvidia/lib64",
              "NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility"]
# A CUDA 12.4 base whose NVIDIA_REQUIRE_CUDA lists R535 on data-center GPUs: forward compatibility bridges R535.
CUDA124_FWD_ENV = ["CUDA_VERSION=12.4.1",
                   "NVIDIA_REQUIRE_CUDA=cuda>=12.4 brand=tesla,driver>=535,driver<536 brand=unknown,driver>=535,"
                   "driver<536"]


def registry_binary() -> str:
    found = find_registry()
    try:
        import bcrypt  # noqa: F401  (writes the htpasswd file)
    except ImportError:
        found = "no bcrypt module for the registry's htpasswd file: pip install -e '.[test]'"
    if found.startswith("no "):
        if os.environ.get("COMPATCHECK_REGISTRY_REQUIRED") or os.environ.get("COMPATCHECK_E2E_REQUIRED"):
            pytest.fail(f"registry tests required but {found}")
        pytest.skip(found)
    return found


@dataclass
class Images:
    registry: Registry
    serving: Pushed  # ml/serving:2025-10-14, CUDA 13.0.0 (OCI manifest)
    fwd: Pushed  # ml/fwd:1.0, CUDA 12.4.1 with R535 forward compatibility (Docker v2 manifest)
    multi: Pushed  # ml/multi:v1, index: amd64 CUDA 12.4.1, arm64 CUDA 12.6.0
    plain: Pushed  # ml/plain:1, no CUDA env at all
    docker_config: Path  # a DOCKER_CONFIG directory with the reader's credentials

    def ref(self, repo_tag: str) -> str:
        return f"{self.registry.host}/{repo_tag}"


def _push_all(reg: Registry, home: Path, auth: dict[str, object]) -> Images:
    serving = reg.push_image("ml/serving", "2025-10-14", CUDA13_ENV,
                             labels={"org.opencontainers.image.source": "https://git.corp/ml/serving"})
    fwd = reg.push_image("ml/fwd", "1.0", CUDA124_FWD_ENV, docker=True)
    multi = reg.push_index("ml/multi", "v1", {"linux/amd64": ["CUDA_VERSION=12.4.1"],
                                              "linux/arm64": ["CUDA_VERSION=12.6.0"]})
    plain = reg.push_image("ml/plain", "1", ["PATH=/usr/bin"])
    cfg = home / "docker"
    cfg.mkdir(parents=True, exist_ok=True)
    (cfg / "config.json").write_text(json.dumps({"auths": {reg.host: auth}}))
    return Images(reg, serving, fwd, multi, plain, cfg)


@pytest.fixture(scope="session")
def ca(tmp_path_factory: pytest.TempPathFactory) -> RegistryCA:
    return RegistryCA(tmp_path_factory.mktemp("registry-pki"))


@pytest.fixture(scope="session")
def token_server(ca: RegistryCA) -> Iterator[TokenServer]:
    server = TokenServer(ca).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def basic(ca: RegistryCA, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Images]:
    """A registry with htpasswd (bcrypt) Basic auth; credentials in config.json as base64 ``auth``."""
    home = tmp_path_factory.mktemp("registry-basic")
    reg = Registry(registry_binary(), home, ca, "htpasswd").start()
    yield _push_all(reg, home, {"auth": base64.b64encode(f"reader:{USERS['reader']}".encode()).decode()})
    reg.stop()


@pytest.fixture(scope="session")
def token(ca: RegistryCA, token_server: TokenServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Images]:
    """A registry with token auth; credentials in config.json as ``username``/``password``."""
    home = tmp_path_factory.mktemp("registry-token")
    reg = Registry(registry_binary(), home, ca, "token", token_server).start()
    yield _push_all(reg, home, {"username": "reader", "password": USERS["reader"]})
    reg.stop()


# ---------------------------------------------------------------------------------------------- lint runs

R560, R535 = "560.35.03", "535.104.05"
# Two data-center (Tesla T4) nodes; the driver and the architecture vary by test.
NODES = """apiVersion: compatcheck/v1
kind: ClusterProfile
nodePools:
- name: t4
  count: 2
  gpu: Tesla-T4
  driver: "DRIVER"
  gpusPerNode: 4
  labels: {kubernetes.io/arch: ARCH}
"""
TOO_OLD_13 = ("image CUDA 13.0 (image {image} (manifest {digest}), whose config sets CUDA_VERSION=13.0.0) needs a "
              "driver from branch >= 580; eligible nodes run 560.35.03 (CUDA 12.6) on t4-0, t4-1; the image's "
              "forward compatibility lists driver branches 535, 550, 565, 570, 575 only")
UNKNOWN = ("CUDA runtime of container 'main' is unknown (no image pattern recognises {image!r}); declare it with the "
           'annotation compatcheck.io/cuda-runtime.main: "12.4" (or without .main for every container), set env '
           "CUDA_VERSION, or add an image pattern in your rules data directory")


def pod(image: str) -> str:
    return (f"apiVersion: v1\nkind: Pod\nmetadata: {{name: serve}}\nspec:\n  containers:\n  - name: main\n"
            f"    image: {image}\n    resources: {{limits: {{nvidia.com/gpu: 1}}}}\n")


def short(digest: str) -> str:
    return digest[: len("sha256:") + 12]


class Run:
    """One lint run in-process: exit code, the JSON report, stderr."""

    def __init__(self, code: int, report: dict[str, Any], err: str) -> None:
        self.code, self.report, self.err = code, report, err

    @property
    def findings(self) -> list[tuple[str, str, str]]:
        return [(f["rule"], f["pointer"], f["message"]) for f in self.report["findings"]]

    @property
    def notes(self) -> list[str]:
        return [s["reason"] for s in self.report["skipped"]]


@pytest.fixture
def lint(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
         ca: RegistryCA) -> Any:
    monkeypatch.setenv("COMPATCHECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)

    def run(image: str, *args: str, images: Images | None = None, arch: str = "amd64", driver: str = R560,
            config: dict[str, Any] | None = None, policy: dict[str, Any] | None = None) -> Run:
        manifest = tmp_path / "pod.yaml"
        manifest.write_text(pod(image))
        nodes = tmp_path / "nodes.yaml"
        nodes.write_text(NODES.replace("ARCH", arch).replace("DRIVER", driver))
        if images is not None:
            monkeypatch.setenv("DOCKER_CONFIG", str(images.docker_config))
        cfg = tmp_path / ".compatcheck.yaml"
        cfg.write_text(json.dumps({"apiVersion": "compatcheck/v1", **({"registry": config} if config else {}),
                                   **({"driverPolicy": policy} if policy else {})}))
        code = main(["lint", str(manifest), "--nodes", str(nodes), "--format", "json", "--config", str(cfg),
                     "--registry-ca", str(ca.ca_file), *args])
        out, err = capsys.readouterr()
        return Run(code, json.loads(out), err)

    return run


