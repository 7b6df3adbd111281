"""Shared test helpers: the loaded built-in rules (validated once) and paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from compatcheck.loader import Loaded, load_rules

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SHARED = ROOT.parent / "shared"


@pytest.fixture(scope="session")
def loaded() -> Loaded:
    return load_rules(validate_builtin=True)
