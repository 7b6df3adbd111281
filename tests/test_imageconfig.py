"""What an image's config says about its CUDA (compatcheck.core.imageconfig), and which source decides when the
config and the image table both speak: exact facts and origins for every branch of ``image_facts_with_config``,
and the resolution order (annotation, then container env, then the config, then the table) through a lint run fed
by ``--image-facts`` (no network)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compatcheck.cli import main
from compatcheck.core.imageconfig import RegistryFacts, config_cuda, image_facts_with_config, parse_require_cuda
from compatcheck.core.images import ImageFacts
from compatcheck.core.versions import parse_cuda_version

DIGEST = "sha256:" + "ab" * 32
REQ_124 = ("cuda>=12.4 brand=tesla,driver>=470,driver<471 brand=unknown,driver>=470,driver<471 "
           "brand=tesla,driver>=535,driver<536 brand=geforce,driver>=535,driver<536")


def v(text: str) -> object:
    return parse_cuda_version(text)


def rf(*env: str, labels: tuple[tuple[str, str], ...] = (), digest: str | None = DIGEST) -> RegistryFacts:
    return RegistryFacts("registry.corp/ml/serving:1", digest, "linux/amd64",
                         tuple(tuple(e.split("=", 1)) for e in env), labels)  # type: ignore[misc]


def test_require_cuda_reads_the_gate_branches_and_brands() -> None:
    req = parse_require_cuda(REQ_124)
    assert (req.cuda, req.branches, req.brands) == (v("12.4"), frozenset({470, 535}),
                                                    frozenset({"tesla", "unknown", "geforce"}))
    assert parse_require_cuda("cuda>=12.x brand=tesla").cuda is None  # unreadable terms are no floor, no branch
    assert parse_require_cuda("cuda>=12.x brand=tesla").branches == frozenset()


def test_config_cuda_from_env_then_label_and_a_disabled_gate() -> None:
    c = config_cuda(rf("CUDA_VERSION=12.4.1", f"NVIDIA_REQUIRE_CUDA={REQ_124}"))
    assert (c.cuda, c.stated, c.require) == (v("12.4.1"), "CUDA_VERSION=12.4.1", v("12.4"))
    assert c.forward is not None and c.forward.branches == frozenset({470, 535})
    assert c.forward.source == ("NVIDIA_REQUIRE_CUDA in the config of registry.corp/ml/serving:1 (manifest "
                                "sha256:abababababab)")
    label = config_cuda(rf(labels=(("com.nvidia.cuda.version", "12.8.1.012"),)))
    assert (label.cuda, label.stated) == (v("12.8.1.012"), "com.nvidia.cuda.version=12.8.1.012")
    off = config_cuda(rf("CUDA_VERSION=12.4.1", f"NVIDIA_REQUIRE_CUDA={REQ_124}", "NVIDIA_DISABLE_REQUIRE=true"))
    assert off.require is None and off.forward is not None  # no start gate; cuda-compat still bridges
    bad = config_cuda(rf("CUDA_VERSION=twelve"))
    assert (bad.cuda, bad.stated) == (None, "an unreadable CUDA_VERSION='twelve'")
    assert rf("CUDA_VERSION=12.1.0", "CUDA_VERSION=12.4.1").env_value("CUDA_VERSION") == "12.4.1"  # the last wins


IMAGE = "registry.corp/ml/serving:1"
PINNED = "image registry.corp/ml/serving:1 (manifest sha256:abababababab)"


def test_the_config_alone_decides_with_no_table_row() -> None:
    f = image_facts_with_config(IMAGE, None, rf("CUDA_VERSION=13.0.0", "NVIDIA_REQUIRE_CUDA=cuda>=13.0"))
    assert (f.cuda, f.base_cuda, f.require_cuda, f.profile) == (v("13.0.0"), v("13.0.0"), v("13.0"), None)
    assert f.origin == f"{PINNED}, whose config sets CUDA_VERSION=13.0.0"
    assert f.sources == (f"{IMAGE}@{DIGEST}",)


def test_a_config_without_cuda_leaves_the_table_or_says_why_it_is_unknown() -> None:
    table = ImageFacts(IMAGE, profile="corp", cuda=v("12.4.1"), origin="image table")
    assert image_facts_with_config(IMAGE, table, rf("PATH=/usr/bin")) is table
    f = image_facts_with_config(IMAGE, None, rf("PATH=/usr/bin", digest=None))
    assert (f.cuda, f.reason) == (None, f"its config sets no CUDA_VERSION and no image profile recognises {IMAGE!r}")


def test_agreement_keeps_the_tables_richer_facts_with_the_configs_gate() -> None:
    table = ImageFacts(IMAGE, profile="corp", cuda=v("12.4.1"), origin="image table row corp", framework="vllm",
                       sources=("T",))
    f = image_facts_with_config(IMAGE, table, rf("CUDA_VERSION=12.4.0", f"NVIDIA_REQUIRE_CUDA={REQ_124}"))
    assert (f.cuda, f.origin, f.framework, f.require_cuda) == (v("12.4.1"), "image table row corp", "vllm", v("12.4"))
    assert f.forward_compat is not None and f.sources == ("T", f"{IMAGE}@{DIGEST}")


def test_a_framework_loading_its_own_cuda_over_the_base_is_the_runtime_and_the_finding_says_why() -> None:
    # vLLM-style: cu128 wheels over a CUDA 12.4 base: the table knows the wheels' CUDA, the config the base's.
    table = ImageFacts(IMAGE, profile="vllm-openai", cuda=v("12.8"), base_cuda=v("12.4.1"), origin="t")
    f = image_facts_with_config(IMAGE, table, rf("CUDA_VERSION=12.4.1", f"NVIDIA_REQUIRE_CUDA={REQ_124}"))
    assert (f.cuda, f.base_cuda, f.require_cuda) == (v("12.8"), v("12.4.1"), v("12.4"))
    assert f.origin == (f"{PINNED}, whose framework loads CUDA 12.8 (image table: vllm-openai) over the CUDA its "
                        "config sets (CUDA_VERSION=12.4.1): the framework's runtime is the one the driver must support")


def test_a_disagreement_is_decided_by_the_config_and_said() -> None:
    table = ImageFacts(IMAGE, profile="corp", cuda=v("12.1.1"), origin="t", binaries=())
    f = image_facts_with_config(IMAGE, table, rf("CUDA_VERSION=12.6.3"))
    assert (f.cuda, f.profile) == (v("12.6.3"), "corp")
    assert f.origin == (f"{PINNED}, whose config sets CUDA_VERSION=12.6.3; the image table (corp) says CUDA 12.1 for "
                        "this tag, but the config is the image's own")
    tool = ImageFacts(IMAGE, profile="os-and-tool-images", no_cuda_runtime=True)
    g = image_facts_with_config(IMAGE, tool, rf("CUDA_VERSION=12.6.3"))
    assert g.cuda == v("12.6.3") and not g.no_cuda_runtime
    assert g.origin.endswith("; the image table (os-and-tool-images) says this image carries no CUDA, but the "
                             "config is the image's own")


NODES = """apiVersion: compatcheck/v1
kind: ClusterProfile
nodePools:
- {name: t4, count: 1, gpu: Tesla-T4, driver: "560.35.03", gpusPerNode: 4}
"""


@pytest.mark.parametrize(("annotations", "env", "expected"), [
    ({}, [], "config"),
    ({"compatcheck.io/cuda-runtime.main": "12.4"}, [], "annotation"),
    ({}, [{"name": "CUDA_VERSION", "value": "12.2.2"}], "env"),
])
def test_annotation_then_env_then_config(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch, annotations: dict[str, str],
                                         env: list[dict[str, str]], expected: str) -> None:
    monkeypatch.chdir(tmp_path)  # no .compatcheck.yaml found: lookups off, the --image-facts file alone
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": ["CUDA_VERSION=13.0.0"]}}))
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": annotations},
           "spec": {"containers": [{"name": "main", "image": IMAGE, "env": env,
                                    "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    (tmp_path / "pod.json").write_text(json.dumps(pod))
    (tmp_path / "nodes.yaml").write_text(NODES)
    code = main(["lint", str(tmp_path / "pod.json"), "--nodes", str(tmp_path / "nodes.yaml"), "--format", "json",
                 "--image-facts", f"{IMAGE}={config}"])
    findings = [(f["rule"], f["message"].split(" needs ")[0]) for f in json.loads(capsys.readouterr().out)["findings"]]
    if expected == "config":
        assert code == 1 and findings == [("cuda-driver-too-old", f"image CUDA 13.0 (image {IMAGE}, whose config sets "
                                                                  "CUDA_VERSION=13.0.0)")]
    else:  # 12.4 and 12.2 run on R560 (CUDA 12.6): the image's 13.0 is not what the container declares
        assert code == 0 and findings == []
