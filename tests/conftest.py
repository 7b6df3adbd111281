"""Shared test helpers: the loaded built-in rules (validated once) and paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from compatcheck.io.loader import Loaded, load_rules

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="session")
def loaded() -> Loaded:
    return load_rules(validate_builtin=True)


@pytest.fixture(scope="session")
def helm_dir() -> str:
    """A real helm binary (../shared/tools/get-helm), installed once into the ignored .tools/ directory."""
    import subprocess

    tool = SHARED / "tools" / "get-helm"
    if not tool.exists():
        pytest.skip("../shared/tools/get-helm is not beside the checkout")
    dest = ROOT / ".tools"
    out = subprocess.run(["bash", str(tool), str(dest)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return str(dest)
