"""`compatcheck rules validate` (and every load of an admin table) enforces what issue #20 asks of the knowledge
tables: every row cites a source, and every version-dependent row says which versions it covers."""
from __future__ import annotations

from pathlib import Path

import pytest

from compatcheck.io.loader import RuleLoadError, load_rules

HEAD = "apiVersion: compatcheck/v1\ntable: {table}\nsources: {{ME: internal notes}}\nrows:\n"


def _problems(tmp_path: Path, table: str, rows: str) -> list[tuple[int | None, str, str]]:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mine.yaml").write_text(HEAD.format(table=table) + rows)
    with pytest.raises(RuleLoadError) as info:
        load_rules([str(tmp_path)])
    return [(p.line, p.pointer, p.message) for p in info.value.problems]


def test_a_framework_floor_without_a_version_range_is_an_error(tmp_path: Path) -> None:
    rows = ("  - {framework: vllm, feature: 'quantization:x', from: '0.1.0', minComputeCapability: '8.0', source: ME}\n"
            "  - {framework: vllm, feature: 'quantization:y', minComputeCapability: '8.0', source: ME}\n")
    assert _problems(tmp_path, "framework-features", rows) == [
        (6, "/rows/1", "rows[1]: the row depends on the version but has no version range (equals, from or before): "
                       "say which releases the source covers")]


def test_a_torch_wheel_without_a_version_range_is_an_error(tmp_path: Path) -> None:
    rows = "  - {cuda: '12.8', sass: ['8.0'], source: ME}\n"
    assert [m for _l, _p, m in _problems(tmp_path, "torch-wheels", rows)] == [
        "rows[0]: the row depends on the version but has no version range (equals, from or before): say which "
        "releases the source covers"]


def test_a_release_of_a_versioned_image_family_without_a_range_is_an_error(tmp_path: Path) -> None:
    rows = ("  - name: corp\n"
            "    pattern: '^corp/app:(?P<version>[0-9.]+)$'\n"
            "    source: ME\n"
            "    versions:\n"
            "      - {from: '1.0', before: '2.0', cuda: '12.4', source: ME}\n"
            "      - {cuda: '12.8', source: ME}\n")
    assert _problems(tmp_path, "image-profiles", rows) == [
        (10, "/rows/0/versions/1", "rows[0]: release 1 of 'corp' depends on the version but has no version range "
                                   "(equals, from or before): say which releases the source covers")]


def test_a_family_without_a_version_in_its_tags_needs_no_range(tmp_path: Path) -> None:
    """Releases keyed by variant only (the cu<XY> convention) are not version-dependent."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mine.yaml").write_text(HEAD.format(table="image-profiles") + (
        "  - name: corp\n    pattern: '^corp/app:cu(?P<variant>1[0-3][0-9])$'\n    source: ME\n"
        "    versions:\n      - {variant: '128', cuda: '12.8', source: ME}\n"))
    assert load_rules([str(tmp_path)]).kb.image_cuda("corp/app:cu128") is not None


def test_a_row_without_a_source_is_an_error(tmp_path: Path) -> None:
    rows = "  - {framework: vllm, feature: 'quantization:x', before: '1.0', minComputeCapability: '8.0'}\n"
    assert [m for _l, _p, m in _problems(tmp_path, "framework-features", rows)] == [
        "/rows/0: 'source' is a required property"]


def test_every_built_in_row_has_a_source_and_every_versioned_row_a_range() -> None:
    load_rules(validate_builtin=True)  # raises RuleLoadError otherwise
