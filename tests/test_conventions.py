"""Conventions users expect (issue #15): "did you mean ...?" for unknown options, subcommands, choices, rule ids and
config keys (with the file and line); an empty input set is an error; ``fix --diff`` fails when fixes are pending
(tests/test_fix.py). Through the real CLI, asserting the exact message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_cli import run

VLLM = "examples/manifests/vllm-bf16-on-t4.yaml"


@pytest.mark.parametrize(("args", "message"), [
    (["lnt", VLLM], "compatcheck: error: argument command: invalid choice: 'lnt' (choose from 'lint', 'fix', 'audit', "
                    "'cert', 'webhook', 'review', 'versions', 'rules', 'images', 'data') (did you mean 'lint'?)"),
    (["rules", "explian"], "compatcheck rules: error: argument rules_command: invalid choice: 'explian' (choose "
                           "from 'list', 'explain', 'kinds', 'validate') (did you mean 'explain'?)"),
    (["lint", VLLM, "--nodse", "examples/cluster-profile.yaml"],
     "compatcheck lint: error: unrecognized arguments: --nodse (did you mean '--nodes'?) "
     "examples/cluster-profile.yaml"),
    (["lint", VLLM, "--frmat=json"], "compatcheck lint: error: unrecognized arguments: --frmat=json (did you mean "
                                     "'--format'?)"),
    (["lint", VLLM, "--format", "sarf"], "compatcheck lint: error: argument --format: invalid choice: 'sarf' "
                                         "(choose from 'text', 'json', 'sarif', 'junit', 'github', 'html') "
                                         "(did you mean 'sarif'?)"),
    (["webhook", "serve", "--prot", "8443"], "compatcheck webhook serve: error: unrecognized arguments: --prot "
                                             "(did you mean '--port'?) 8443"),
    (["lint", VLLM, "--zzz"], "compatcheck lint: error: unrecognized arguments: --zzz"),
    (["lint", VLLM, "--rule", "dtype-unsuported-by-gpu"],
     "compatcheck: error: unknown or disabled rule(s): dtype-unsuported-by-gpu (did you mean "
     "'dtype-unsupported-by-gpu'?)"),
    (["rules", "explain", "gpu-toleration-mising"],
     "compatcheck: error: no such rule: 'gpu-toleration-mising' (did you mean 'gpu-toleration-missing'?)"),
    (["rules", "explain", "zzz"], "compatcheck: error: no such rule: 'zzz' (see compatcheck rules list)"),
])
def test_did_you_mean(args: list[str], message: str) -> None:
    proc = run(*args)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == message


def test_did_you_mean_in_the_config_with_file_and_line(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "m.yaml").write_text((Path(__file__).parent.parent / VLLM).read_text())
    (tmp_path / ".compatcheck.yaml").write_text(
        "apiVersion: compatcheck/v1\nrules:\n  cuda-driver-to-old: warning\nexemptions:\n"
        "  - rules: [gpu-tolleration-missing]\n")
    proc = run("lint", "m.yaml", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"{tmp_path}/.compatcheck.yaml:3: error: unknown rule 'cuda-driver-to-old' (did you mean "
        "'cuda-driver-too-old'?)",
        f"{tmp_path}/.compatcheck.yaml:5: error: unknown rule 'gpu-tolleration-missing' (did you mean "
        "'gpu-toleration-missing'?)"]
    (tmp_path / ".compatcheck.yaml").write_text("apiVersion: compatcheck/v1\nfailon: warning\n")
    proc = run("lint", "m.yaml", cwd=tmp_path)
    assert proc.stderr.splitlines() == [
        f"{tmp_path}/.compatcheck.yaml:2: error: /failon: Additional properties are not allowed ('failon' was "
        "unexpected) (did you mean 'failOn'?)"]


def test_empty_input_set_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "README.md").write_text("# not a manifest\n")
    for cmd in ("lint", "fix"):
        proc = run(cmd, "empty", cwd=tmp_path)
        assert (proc.returncode, proc.stdout) == (2, "")
        assert proc.stderr == "compatcheck: error: no files to lint: empty holds no *.yaml, *.yml or *.json file\n"
    both = run("lint", "empty", "docs", "--format", "json", cwd=tmp_path)
    assert (both.returncode, both.stdout) == (2, "")
    assert both.stderr == "compatcheck: error: no files to lint: empty, docs hold no *.yaml, *.yml or *.json file\n"
    # A file that is there but holds no Kubernetes object is input: linted (and skipped quietly), exit 0.
    (tmp_path / "empty" / "values.yaml").write_text("replicas: 1\n")
    assert run("lint", "empty", cwd=tmp_path).returncode == 0


def test_rule_docs_show_a_failing_and_a_passing_fixture_per_rule() -> None:
    """docs/rules.md (drift-checked in tests/test_cli.py) shows, for every built-in rule, its first failing fixture
    with what compatcheck says about it and its first passing fixture, copied from fixtures/<rule-id>/."""
    root = Path(__file__).parent.parent
    docs = (root / "docs" / "rules.md").read_text()
    sections = {s.split("\n", 1)[0]: s for s in docs.split("\n## ")[1:]}
    rule_ids = sorted(p.stem for p in (root / "rules").glob("*.yaml"))
    assert sorted(sections) == rule_ids
    for rule_id in rule_ids:
        fixtures = root / "fixtures" / rule_id
        fail = min(p.name for p in fixtures.glob("fail.*.yaml"))
        good = min(p.name for p in fixtures.glob("pass.*.yaml"))
        section = sections[rule_id]
        assert f"Fails (`fixtures/{rule_id}/{fail}`" in section, rule_id
        assert f"Passes (`fixtures/{rule_id}/{good}`" in section, rule_id
        body = (fixtures / good).read_text().replace("# yaml-language-server", "")
        assert body.strip().splitlines()[-1] in section
        golden = (fixtures / fail.replace(".yaml", ".findings.json")).read_text()
        first = json.loads(golden)[0]["message"]
        assert f"> {first}" in section, rule_id
