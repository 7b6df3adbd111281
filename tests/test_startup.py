"""Start-up budget (issue #25): the cheap paths a pre-commit hook takes must not import heavy modules. Checked by
what a fresh interpreter has in ``sys.modules`` after the command, never by timing (``benchmarks/startup.py``
measures the time). Also the cache of the built-in rule files' parse (``compatcheck.io.rulecache``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from compatcheck.io import loader, rulecache

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "manifests" / "paddle-gpu-manager.yaml"  # a Deployment, no DRA object

# Imported by no cheap path: the webhook and its extra, the registry client, the DRA allocator and its CEL
# compiler, schema validation, rendering, the other report formats, orjson (only placement with --nodes and the
# webhook encode JSON; importing it brings datetime, uuid and platform).
HEAVY = (
    "aiohttp", "kubernetes", "cryptography", "prometheus_client", "jsonpatch", "celpy", "jsonschema", "orjson",
    "ssl", "socket", "http.client", "concurrent.futures", "subprocess", "xml.etree.ElementTree",
    "compatcheck.webhook", "compatcheck.core.dra", "compatcheck.core.cel", "compatcheck.io.oci",
    "compatcheck.io.imagefacts", "compatcheck.io.dockerauth", "compatcheck.io.render", "compatcheck.io.templatemap",
    "compatcheck.io.baseline", "compatcheck.io.fixer", "compatcheck.report.sarif", "compatcheck.report.junit",
    "compatcheck.report.ruledocs",
)
# ``--version`` answers before the parser is built: not even argparse, nor any of the engine.
VERSION_HEAVY = (*HEAVY, "argparse", "dataclasses", "json", "ruamel", "compatcheck.core.model",
                 "compatcheck.core.knowledge", "compatcheck.core.checks", "compatcheck.io.loader",
                 "compatcheck.io.manifests", "compatcheck.report")

# The command's modules are listed before ``json`` is imported for the listing: json counts only if the command
# imported it.
_PROBE = """
import sys
from compatcheck.cli.entry import main
code = main(sys.argv[1:])
sys.stdout.flush()
modules = sorted(sys.modules)
import json
print("@@MODULES@@" + json.dumps(modules), file=sys.stderr)
raise SystemExit(code)
"""


def _env(tmp_path: Path) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path),
            "PYTHONPATH": str(ROOT)}


def _modules_after(args: list[str], tmp_path: Path) -> tuple[int, str, set[str]]:
    """Run ``compatcheck ARGS`` in a fresh interpreter (its own cache directory, no config file above its working
    directory) and return its exit code, stdout and the modules it imported: those a bare interpreter of the
    same environment has too (a site's ``sitecustomize`` may import anything) are not the command's."""
    bare = subprocess.run([sys.executable, "-c", "import sys; print(' '.join(sys.modules))"], capture_output=True,
                          text=True, env=_env(tmp_path), cwd=tmp_path, timeout=60, check=True).stdout.split()
    proc = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True,
                          env=_env(tmp_path), cwd=tmp_path, timeout=120)
    _head, sep, tail = proc.stderr.rpartition("@@MODULES@@")
    assert sep, proc.stderr
    return proc.returncode, proc.stdout, set(json.loads(tail)) - set(bare)


def _imported(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if n in modules or any(m.startswith(n + ".") for m in modules))


def test_version_imports_nothing_of_the_engine(tmp_path: Path) -> None:
    from compatcheck import __version__

    code, out, modules = _modules_after(["--version"], tmp_path)
    assert (code, out) == (0, f"compatcheck {__version__}\n")
    assert _imported(modules, VERSION_HEAVY) == []


def test_lint_of_one_file_without_nodes_imports_no_heavy_module(tmp_path: Path) -> None:
    code, out, modules = _modules_after(["lint", str(EXAMPLE)], tmp_path)
    assert code == 1  # paddle-allocator-conflict, an error
    assert "(paddle-allocator-conflict; Deployment paddle-vcuda [paddle])" in out
    assert _imported(modules, HEAVY) == []
    assert "compatcheck.core.drakinds" in modules  # what reading the file needs of DRA, without the allocator


def test_lint_of_a_pod_with_claims_loads_the_allocator(tmp_path: Path) -> None:
    """The other side of the budget: a manifest with DRA objects gets the DRA model (the checks still run)."""
    manifest = tmp_path / "claim.yaml"
    manifest.write_text(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: gpu}\n"
        "spec:\n  spec:\n    devices:\n      requests:\n      - name: gpu\n        exactly:\n"
        "          deviceClassName: gpu.nvidia.com\n          selectors:\n"
        "          - cel: {expression: \"device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100'\"}\n"
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
        "  resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu}]\n"
        "  containers:\n  - name: c\n    image: nvidia/cuda:12.4.1-base-ubuntu22.04\n"
        "    resources: {claims: [{name: gpu}]}\n", encoding="utf-8")
    code, _out, modules = _modules_after(["lint", str(manifest), "--format", "json"], tmp_path)
    assert code in (0, 1)
    assert "compatcheck.core.dra" in modules
    assert _imported(modules, ("aiohttp", "kubernetes", "cryptography", "compatcheck.webhook")) == []


@pytest.mark.parametrize("fmt, module", [("sarif", "compatcheck.report.sarif"), ("junit", "compatcheck.report.junit")])
def test_a_report_format_is_imported_when_asked_for(tmp_path: Path, fmt: str, module: str) -> None:
    code, out, modules = _modules_after(["lint", str(EXAMPLE), "--format", fmt], tmp_path)
    assert code == 1 and out.strip()
    assert module in modules


# ---------------------------------------------------------------------------------------------- the rule cache

def _builtin_paths() -> list[Path]:
    d = loader.builtin_rules_dir()
    return [*loader._yaml_files(d / "data"), *loader._yaml_files(d)]


def test_rule_cache_gives_back_what_the_parse_gives(tmp_path: Path) -> None:
    paths = _builtin_paths()
    calls: list[str] = []

    def parse(text: str) -> list[object]:
        calls.append(text)
        return loader._trusted_parse(text)

    first = rulecache.parsed_files(paths, parse, tmp_path)
    assert len(calls) == len(paths)
    entries = list(tmp_path.glob("builtin-*.json"))
    assert len(entries) == 1
    second = rulecache.parsed_files(paths, parse, tmp_path)
    assert len(calls) == len(paths)  # a hit: nothing parsed again
    assert second == first == {p: loader._trusted_parse(p.read_text("utf-8")) for p in paths}


def test_rule_cache_misses_when_a_file_changes_and_ignores_a_corrupt_entry(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    (rules / "data").mkdir(parents=True)
    table = rules / "data" / "t.yaml"
    table.write_text("table: features\nrows:\n- {feature: x, minComputeCapability: '8.0', source: s}\n")
    rule = rules / "r.yaml"
    rule.write_text("id: r\nsummary: one\n")
    cache = tmp_path / "cache"
    got = rulecache.parsed_files([table, rule], loader._trusted_parse, cache)
    assert got[rule] == [{"id": "r", "summary": "one"}]
    rule.write_text("id: r\nsummary: two\n")  # same size, other content: another key
    got = rulecache.parsed_files([table, rule], loader._trusted_parse, cache)
    assert got[rule] == [{"id": "r", "summary": "two"}]
    assert len(list(cache.glob("builtin-*.json"))) == 2
    for entry in cache.glob("builtin-*.json"):
        entry.write_text('{"r.yaml": [{"id": "forged"}]}')  # not this key's file set: a miss
    got = rulecache.parsed_files([table, rule], loader._trusted_parse, cache)
    assert got[rule] == [{"id": "r", "summary": "two"}]
    for entry in cache.glob("builtin-*.json"):
        entry.write_text("{not json")
    assert rulecache.parsed_files([table, rule], loader._trusted_parse, cache)[rule] == [{"id": "r", "summary": "two"}]


def test_rule_cache_does_not_store_what_json_would_change(tmp_path: Path) -> None:
    f = tmp_path / "r.yaml"
    f.write_text("limit: .inf\n")
    cache = tmp_path / "cache"
    got = rulecache.parsed_files([f], loader._trusted_parse, cache)
    assert got[f] == [{"limit": float("inf")}]
    assert not list(cache.glob("builtin-*.json"))  # not JSON (the json module would write Infinity): not cached


def test_rule_cache_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPATCHECK_RULES_CACHE", "0")
    rulecache.parsed_files(_builtin_paths(), loader._trusted_parse, tmp_path)
    assert not list(tmp_path.iterdir())


def test_rule_cache_without_a_home_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no cache directory can be found (no $HOME, no passwd entry: some CI containers), rules still load."""
    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    paths = _builtin_paths()
    assert rulecache.parsed_files(paths, loader._trusted_parse) == {
        p: loader._trusted_parse(p.read_text("utf-8")) for p in paths}


def test_cached_rules_load_as_the_parsed_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same rules and tables with the cache cold, warm and off (and admin directories never cached)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("COMPATCHECK_CACHE_DIR", raising=False)
    cold = loader.load_rules()
    assert list((tmp_path / "compatcheck" / "rules").glob("builtin-*.json"))
    warm = loader.load_rules()
    monkeypatch.setenv("COMPATCHECK_RULES_CACHE", "0")
    off = loader.load_rules()
    assert cold.tables == warm.tables == off.tables
    assert [(r.id, r.severity, r.params) for r in cold.ruleset] == [(r.id, r.severity, r.params) for r in warm.ruleset]
