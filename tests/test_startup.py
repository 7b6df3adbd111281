"""Start-up budget (issue #25): the cheap paths a pre-commit hook takes must not import heavy modules. Checked by
what a fresh interpreter has in ``sys.modules`` after the command, never by timing (``benchmarks/startup.py``
measures the time). Also the cache of the built-in rule files' parse (``compatcheck.io.rulecache``)."""

from __future__ import annotations

import json
import marshal
import re
import subprocess
import sys
from pathlib import Path

import pytest

from compatcheck.core.knowledge import TablePattern
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
# The modules of compatcheck a lint of one file without --nodes imports, all of them. A module that is not here fails
# the budget: import it where it is used (a function, a format, a check that needs it), or add it here when every
# lint needs it. (The matrix, what-if and its selectors, the DRA allocator, the report formats other than text,
# registry lookups, rendering and baselines load on first use.)
LINT_MODULES = frozenset({
    "compatcheck", "compatcheck.cli", "compatcheck.cli.audit", "compatcheck.cli.common", "compatcheck.cli.data",
    "compatcheck.cli.entry",
    "compatcheck.cli.images", "compatcheck.cli.lint", "compatcheck.cli.rules", "compatcheck.cli.versions",
    "compatcheck.cli.webhook", "compatcheck.core", "compatcheck.core.checks", "compatcheck.core.checks.base",
    "compatcheck.core.checks.crl", "compatcheck.core.checks.dra", "compatcheck.core.checks.driver",
    "compatcheck.core.checks.hardware", "compatcheck.core.checks.meta", "compatcheck.core.checks.resources",
    "compatcheck.core.checks.source", "compatcheck.core.checks.vgpu", "compatcheck.core.cluster",
    "compatcheck.core.config", "compatcheck.core.crl", "compatcheck.core.discovery", "compatcheck.core.drakinds",
    "compatcheck.core.engine", "compatcheck.core.imageconfig", "compatcheck.core.images", "compatcheck.core.jsonutil",
    "compatcheck.core.knowledge", "compatcheck.core.kserve", "compatcheck.core.llmaz",
    "compatcheck.core.model", "compatcheck.core.patches",
    "compatcheck.core.pointers", "compatcheck.core.policy", "compatcheck.core.profiles", "compatcheck.core.quantities",
    "compatcheck.core.rules", "compatcheck.core.shapes", "compatcheck.core.suggest", "compatcheck.core.suppress",
    "compatcheck.core.versions", "compatcheck.core.workloads", "compatcheck.io", "compatcheck.io.cachedir",
    "compatcheck.io.classcache", "compatcheck.io.config", "compatcheck.io.datastate", "compatcheck.io.lint",
    "compatcheck.io.loader",
    "compatcheck.io.manifests", "compatcheck.io.repo", "compatcheck.io.rulecache", "compatcheck.io.setup",
    "compatcheck.io.templates", "compatcheck.io.validcache",
    "compatcheck.report", "compatcheck.report.model", "compatcheck.report.text",
})
# Nor these, which no module above needs at start-up: hashlib loads OpenSSL's bindings (the rule cache's key uses
# CPython's own BLAKE2); shutil (with bz2 and lzma) is what argparse imports to ask the terminal its width while
# arguments are defined (cli.common.Parser); the others are what a registry client, a cache of images or logging
# bring.
LINT_HEAVY = (*HEAVY, "hashlib", "_hashlib", "tempfile", "random", "logging", "email", "uuid", "platform", "shutil",
              "bz2", "lzma")
# ``--version`` answers before the parser is built: not even argparse, nor any of the engine.
VERSION_HEAVY = (*HEAVY, "argparse", "dataclasses", "json", "ruamel", "compatcheck.core.model",
                 "compatcheck.core.knowledge", "compatcheck.core.checks", "compatcheck.io.loader",
                 "compatcheck.io.manifests", "compatcheck.report")

# The command's modules are listed before ``json`` is imported for the listing: json counts only if the command
# imported it. ``main()`` reads the process's own command line, as the console script's call does (the process
# set-up of ``cli.entry.main`` happens only then).
_PROBE = """
import sys
from compatcheck.cli.entry import main
sys.argv[0] = "compatcheck"
code = main()
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
    assert _imported(modules, LINT_HEAVY) == []
    assert "compatcheck.core.drakinds" in modules  # what reading the file needs of DRA, without the allocator
    assert sorted(m for m in modules if m.split(".")[0] == "compatcheck" and m not in LINT_MODULES) == []


@pytest.mark.parametrize("args", [["--format", "json"], ["--nodes", str(ROOT / "examples" / "cluster-profile.yaml")]])
def test_other_one_file_lints_import_only_what_they_add(tmp_path: Path, args: list[str]) -> None:
    """``--format json`` adds its formatter and ``--nodes`` the node file's reading; neither brings the matrix,
    what-if, the allocator, a registry client or another module of compatcheck."""
    code, out, modules = _modules_after(["lint", str(EXAMPLE), *args], tmp_path)
    assert code == 1 and out.strip()
    added = {"compatcheck.report.json_report"} if args[0] == "--format" else {"compatcheck.schemas"}
    assert sorted(m for m in modules if m.split(".")[0] == "compatcheck" and m not in LINT_MODULES | added) == []
    # A ClusterProfile is checked against its packaged schema (jsonschema; importlib.resources brings tempfile,
    # with random and shutil), and the placement memo is keyed with orjson (which brings uuid and platform).
    nodes_adds = ("orjson", "jsonschema", "uuid", "platform", "tempfile", "random", "shutil", "bz2", "lzma")
    heavy = LINT_HEAVY if args[0] == "--format" else tuple(n for n in LINT_HEAVY if n not in nodes_adds)
    assert _imported(modules, heavy) == []


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


def test_cache_entry_is_written_only_after_a_clean_build_and_a_hit_compiles_patterns_on_use(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A miss builds the knowledge base with every check (patterns compiled, groups checked) and only then writes
    the entry; a hit (files that built cleanly before) compiles the built-in patterns when first searched."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("COMPATCHECK_CACHE_DIR", raising=False)
    entries = tmp_path / "compatcheck" / "rules"
    with pytest.raises(loader.RuleLoadError):
        loader.load_rules([str(tmp_path / "no-such-dir")])  # a failed load: nothing stored
    assert not list(entries.glob("builtin-*.json"))
    cold = loader.load_rules()
    (entry,) = entries.glob("builtin-*.json")
    paths = _builtin_paths()  # what is stored is what the parse gives, not what building made of it
    stored = json.loads(entry.read_text("utf-8"))
    assert stored == {(f"data/{p.name}" if p.parent.name == "data" else p.name): loader._trusted_parse(
        p.read_text("utf-8")) for p in paths}
    assert all(p.regex._compiled is not None for p in cold.kb.products)
    warm = loader.load_rules()
    assert all(p.regex._compiled is None for p in warm.kb.products)
    assert warm.kb.products == cold.kb.products and warm.kb.images == cold.kb.images
    labels = [row["product"].replace(" ", "-") for row in warm.tables["gpu-products"]] + ["NVIDIA-A100-SXM4-80GB",
                                                                                          "Tesla-T4", "nothing"]
    assert [warm.kb.product(x) for x in labels] == [cold.kb.product(x) for x in labels]
    assert [warm.kb.mig_profiles_for(x) for x in labels] == [cold.kb.mig_profiles_for(x) for x in labels]
    images = sorted({m.group(1) for d in ("examples", "fixtures") for p in (ROOT / d).rglob("*.yaml")
                     for m in re.finditer(r"image:\s*['\"]?([^\s'\"]+)", p.read_text("utf-8"))})
    assert len(images) > 50
    assert [warm.kb.image_facts(i) for i in images] == [cold.kb.image_facts(i) for i in images]


def test_an_admin_pattern_is_checked_at_load_even_with_a_warm_cache(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    loader.load_rules()  # the entry
    admin = tmp_path / "admin"
    (admin / "data").mkdir(parents=True)
    (admin / "data" / "gpus.yaml").write_text(
        "apiVersion: compatcheck/v1\ntable: gpu-products\nsources: {s: 'https://example.com'}\n"
        "rows:\n- {match: '(', product: P, computeCapability: '8.0', source: s}\n", encoding="utf-8")
    with pytest.raises(loader.RuleLoadError) as err:
        loader.load_rules([str(admin)])
    assert [p.message for p in err.value.problems] == ["data tables: gpu-products: bad regex '(': "
                                                       "missing ), unterminated subpattern at position 0"]


def test_table_pattern() -> None:
    lazy, eager = TablePattern("^(?P<cuda>\\d+)", lazy=True), TablePattern("^(?P<cuda>\\d+)")
    assert lazy._compiled is None and eager._compiled is not None
    assert lazy == eager and hash(lazy) == hash(eager) and lazy != TablePattern("^(?P<cuda>\\d+)", re.IGNORECASE)
    found = lazy.search("12x")
    assert found is not None and found.groupdict() == {"cuda": "12"} and lazy._compiled is not None
    assert dict(lazy.groupindex) == {"cuda": 1} and lazy.search("x12") is None
    assert repr(TablePattern("a", re.IGNORECASE)) == "TablePattern('a', re.IGNORECASE)"
    with pytest.raises(re.error):
        TablePattern("(")
    assert TablePattern("(", lazy=True).pattern == "("  # a trusted row's: compiled, and so checked, on use


# ------------------------------------------------------------------------------- the parser of one command

@pytest.mark.parametrize("argv", [
    ["lint", "a.yaml", "--format", "json", "-o", "x.json", "--nodes", "n.yaml", "--rule", "r1"],
    ["fix", "a.yaml", "--diff"],
    ["rules", "list"],
    ["webhook", "serve"],
])
def test_the_parser_of_one_command_parses_as_the_whole_one(argv: list[str]) -> None:
    from compatcheck.cli.entry import parser

    assert vars(parser(argv[0]).parse_args(argv)) == vars(parser().parse_args(argv))
    assert parser(argv[0]).format_help() == parser().format_help()  # every command listed, with its help line
    assert parser(argv[0]).format_usage() == parser().format_usage()


def test_the_parser_of_a_command_that_does_not_exist_is_the_whole_one(capsys: pytest.CaptureFixture[str]) -> None:
    from compatcheck.cli.entry import main

    with pytest.raises(SystemExit) as stop:
        main(["lnit", "a.yaml"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.endswith("compatcheck: error: argument command: invalid choice: 'lnit' (choose from 'lint', 'fix', "
                        "'audit', 'cert', 'webhook', 'review', 'versions', 'rules', 'images', 'data') (did you mean "
                        "'lint'?)\n")
    with pytest.raises(SystemExit):
        main(["lint", "a.yaml", "--bogus"])
    assert capsys.readouterr().err.endswith("compatcheck lint: error: unrecognized arguments: --bogus\n")


# ------------------------------------------------------------------------- dataclass methods, compiled once

_CLASSES = """
import dataclasses, sys
from compatcheck.io import classcache
classcache.install()

@dataclasses.dataclass(frozen=True)
class P:
    a: int
    b: str = "x"

p = P(1)
try:
    p.a = 2
    frozen = False
except dataclasses.FrozenInstanceError:
    frozen = True
print(repr(p), p == P(1), p != P(2), hash(p) == hash((1, "x")), dataclasses.replace(p, b="y"), frozen)
installed = getattr(dataclasses, "exec", None) is classcache._exec
print("installed" if installed else "off", "missed" if classcache._missed else "hits" if installed else "-")
print(classcache.table_path())
"""
_CLASSES_OUT = "P(a=1, b='x') True True True P(a=1, b='y') True\n"


def _classes(tmp_path: Path, **env: str) -> tuple[str, str, Path]:
    proc = subprocess.run([sys.executable, "-c", _CLASSES], capture_output=True, text=True, timeout=60, check=True,
                          env={**_env(tmp_path), "PYTHONPYCACHEPREFIX": str(tmp_path / "pyc"), **env})
    first, second, path = proc.stdout.splitlines(keepends=True)
    return first, second.strip(), Path(path.strip())


def test_dataclass_methods_compiled_once_give_the_same_classes(tmp_path: Path) -> None:
    first, how, table = _classes(tmp_path)
    assert (first, how) == (_CLASSES_OUT, "installed missed")
    assert table.parent.is_relative_to(tmp_path / "pyc")  # beside the byte code (here: under the prefix)
    from importlib.util import MAGIC_NUMBER

    assert table.read_bytes().startswith(MAGIC_NUMBER)
    assert _classes(tmp_path)[:2] == (_CLASSES_OUT, "installed hits")  # every method from the table
    for damaged in (b"", MAGIC_NUMBER + b"\x00garbage", b"\x00\x00\x00\x00" + table.read_bytes()[4:],
                    MAGIC_NUMBER + marshal.dumps({"def f(): pass": 1})):
        table.write_bytes(damaged)  # damaged, of another interpreter, or not a table of code: not used
        assert _classes(tmp_path)[:2] == (_CLASSES_OUT, "installed missed")
        assert _classes(tmp_path)[:2] == (_CLASSES_OUT, "installed hits")  # written again


def test_dataclass_method_table_off_or_not_written(tmp_path: Path) -> None:
    first, how, table = _classes(tmp_path, COMPATCHECK_CLASS_CACHE="0")
    assert (first, how) == (_CLASSES_OUT, "off -") and not table.exists()
    first, how, table = _classes(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert (first, how) == (_CLASSES_OUT, "installed missed") and not table.exists()


def test_a_table_hit_is_the_code_compile_makes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from compatcheck.io import classcache

    source = "def __create_fn__(a):\n def f(self, x):\n  return (x, a)\n return f"
    table = tmp_path / "t.bin"
    from importlib.util import MAGIC_NUMBER

    code = compile(source, "<string>", "exec", dont_inherit=True)
    table.write_bytes(MAGIC_NUMBER + marshal.dumps({source: marshal.dumps(code)}))
    loaded = classcache._load(str(table))
    # Code objects compare by what they hold (this module's own __future__ flag left out, as dataclasses has none).
    assert classcache._code(loaded[source]) == code != compile(source, "<string>", "exec")
    assert classcache._code(b"\x00") is None and classcache._code(marshal.dumps(1)) is None
    monkeypatch.setattr(classcache, "_table", loaded)
    monkeypatch.setattr(classcache, "_used", {})
    monkeypatch.setattr(classcache, "_missed", False)
    ns: dict[str, object] = {}
    classcache._exec(source, {}, ns)
    assert classcache._missed is False and ns["__create_fn__"](1)(None, 2) == (2, 1)  # type: ignore[operator]
    classcache._exec(source + "\n", {}, ns)  # another text: compiled
    assert classcache._missed is True and set(classcache._used) == {source, source + "\n"}


@pytest.mark.parametrize("pattern, flags, needle", [
    (r"^nvcr\.io/nvidia/tritonserver:(?P<version>\d\d\.\d\d)-py3", 0, "nvcr.io/nvidia/tritonserver:"),
    (r"^(?:(?:docker\.io/)?nvidia|nvcr\.io/nvidia)/cuda:(?P<cuda>\d+)", 0, "/cuda:"),  # the alternation is inside
    (r"^(NVIDIA-)?H800(-PCIe|-NVL)?$", re.IGNORECASE, "H800"),
    (r"ab?cde", 0, "cde"),  # b may be absent
    (r"abc*de", 0, "ab"),  # (the first of two runs as long)
    (r"abc{0,2}dex", 0, "dex"),  # the quantifier's digits are no literal
    (r"abc+de", 0, "abc"),  # c at least once, maybe more: the run ends there
    (r"ab\.c\d\d", 0, "ab.c"),
    (r"ab[x)]cd(?=e|f)gh", 0, "ab"),  # a class and a look-ahead end runs
    (r"abc|def", 0, None),  # a top-level alternation: neither is required
    (r"(?i)abcd", 0, None),
    (r"x\x41yz", 0, None),  # an escape it does not read
    (r"ab\1cd", 0, None),
    (r"ab{cd", 0, None),  # a literal brace
    (r"a b c d", re.VERBOSE, None),
    (r"a.b", 0, None),  # no run of two
    (r"(ab", 0, None),
])
def test_required_literal(pattern: str, flags: int, needle: str | None) -> None:
    from compatcheck.core.knowledge import required_literal

    assert required_literal(pattern, flags) == needle


def test_lazy_patterns_match_exactly_as_compiled_ones(loaded_tables: dict[str, list[dict[str, object]]]) -> None:
    """Every built-in pattern, searched lazily (its required literal first) and compiled, over image references and
    product labels that match some of them and not others: the same matches, and never a needle a match lacks."""
    patterns = [(str(r[k]), 0) for r in loaded_tables["image-profiles"] for k in ("pattern", "floating") if k in r]
    patterns += [(str(r["match"]), re.IGNORECASE) for t in ("gpu-products", "mig-profiles") for r in loaded_tables[t]]
    images = sorted({m.group(1) for d in ("examples", "fixtures") for p in (ROOT / d).rglob("*.yaml")
                     for m in re.finditer(r"image:\s*['\"]?([^\s'\"]+)", p.read_text("utf-8"))})
    products = [str(r["product"]).replace(" ", "-") for r in loaded_tables["gpu-products"]]
    texts = [*images, *products, *(f"NVIDIA-{p}-SXM4-80GB" for p in products), *(p.lower() for p in products),
             *(p.upper() for p in images), "nvidia-a100-sxm4-40gb", "NVIDIA-H100-80GB-HBM3", "Tesla-K80", "",
             "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", "\u017f", "A\u212a100"]
    from compatcheck.core.knowledge import required_literal

    needles = 0
    for pattern, flags in patterns:
        compiled = re.compile(pattern, flags)
        needle = required_literal(pattern, flags)
        needles += needle is not None
        for text in texts:
            lazy = TablePattern(pattern, flags, lazy=True).search(text)
            want = compiled.search(text)
            assert (lazy and (lazy.span(), lazy.groupdict())) == (want and (want.span(), want.groupdict()))
            if want and needle:
                assert needle.lower() in text.lower() if flags else needle in text
    assert needles >= 60  # most patterns have one (the others compile on their first search)


@pytest.fixture(scope="module")
def loaded_tables() -> dict[str, list[dict[str, object]]]:
    return loader.load_rules().tables


def test_defining_an_argument_still_checks_its_metavar() -> None:
    """The parser defines arguments with a formatter of a fixed width (no terminal query); argparse's check of a
    metavar against nargs, which that formatter runs, still refuses a mismatch."""
    from compatcheck.cli.common import Parser

    p = Parser(prog="x")
    with pytest.raises(ValueError, match="length of metavar tuple does not match nargs"):
        p.add_argument("--pair", nargs=2, metavar=("A", "B", "C"))
    p.add_argument("--pair", nargs=2, metavar=("A", "B"))
    assert p.parse_args(["--pair", "1", "2"]).pair == ["1", "2"]
    assert "--pair A B" in p.format_usage()


# ------------------------------------------------------------------------------ schema checks that passed

def test_a_lint_with_a_config_file_checks_it_once(tmp_path: Path) -> None:
    """A pre-commit hook reads the same config on every commit: the second lint does not import jsonschema (nor
    importlib.resources for the schema) to check it again; an edited config is checked again, and its problem
    reported as before."""
    config = tmp_path / ".compatcheck.yaml"
    config.write_text("apiVersion: compatcheck/v1\nfailOn: error\n", encoding="utf-8")
    code, _out, modules = _modules_after(["lint", str(EXAMPLE)], tmp_path)
    assert code == 1 and "jsonschema" in modules
    code, _out, modules = _modules_after(["lint", str(EXAMPLE)], tmp_path)
    assert code == 1 and _imported(modules, ("jsonschema", "importlib.resources", "compatcheck.schemas")) == []
    assert sorted(m for m in modules if m.split(".")[0] == "compatcheck" and m not in LINT_MODULES) == []
    config.write_text("apiVersion: compatcheck/v1\nfailOn: eror\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "compatcheck", "lint", str(EXAMPLE)], capture_output=True, text=True,
                          env=_env(tmp_path), cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr == (f"{config}:2: error: /failOn: 'eror' is not one of ['error', 'warning', 'info'] "
                           "(did you mean 'error'?)\n")


def test_valid_documents_are_remembered_and_only_they(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from compatcheck.io import validcache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    checked: list[object] = []
    from compatcheck.core.rules import schema_problems as real

    def counting(doc: object, *args: object, **kwargs: object) -> object:
        checked.append(doc)
        return real(doc, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(validcache, "schema_problems", counting)
    good = {"apiVersion": "compatcheck/v1", "failOn": "warning", "exclude": ["a/**"]}
    assert validcache.problems(good, "config.schema.json", "c.yaml", "config") == []
    assert validcache.problems(dict(reversed(list(good.items()))), "config.schema.json", "c.yaml", "config") == []
    assert len(checked) == 1  # the same document (keys in another order): not checked again
    assert validcache.problems(good, "clusterprofile.schema.json", "c.yaml", "nodes") != []  # another schema
    bad = {"apiVersion": "compatcheck/v1", "failOn": "eror"}
    for _ in range(2):  # a document with a problem is checked every time
        assert [p.message for p in validcache.problems(bad, "config.schema.json", "c.yaml", "config")] == [
            "/failOn: 'eror' is not one of ['error', 'warning', 'info'] (did you mean 'error'?)"]
    assert len(checked) == 4
    odd_docs: list[dict[object, object]] = [{**good, "x": float("nan")}, {**good, 1: "a"}, {**good, "x": ("a",)}]
    for odd in odd_docs:
        validcache.problems(odd, "config.schema.json", "c.yaml", "config")
        validcache.problems(odd, "config.schema.json", "c.yaml", "config")
    assert len(checked) == 10  # what JSON would not write as it is: never remembered
    assert validcache.problems({**good, "failOn": "error"}, "config.schema.json", "c.yaml", "config") == []
    assert len(checked) == 11  # another document
    (tmp_path / "compatcheck" / "valid.json").write_text("{not json", encoding="utf-8")
    assert validcache.problems(good, "config.schema.json", "c.yaml", "config") == [] and len(checked) == 12
    monkeypatch.setenv("COMPATCHECK_RULES_CACHE", "0")
    assert validcache.problems(good, "config.schema.json", "c.yaml", "config") == [] and len(checked) == 13
