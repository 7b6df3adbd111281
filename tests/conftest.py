"""Shared test helpers: the loaded built-in rules (validated once), paths, AdmissionReviews as the API server
builds them, and what comes from ``../shared`` beside the checkout (tests that need it skip, naming the path)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from compatcheck.io.loader import Loaded, load_rules

# The tests judge the built-in tables, whatever data bundle the machine running them has pulled (compatcheck data
# pull, docs/data-bundle.md); the data-bundle tests choose their knowledge themselves.
os.environ.setdefault("COMPATCHECK_DATA", "builtin")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SHARED = ROOT.parent / "shared"


def shared(rel: str) -> Path:
    """``../shared/<rel>``, or a skip that names it (docs/development.md lists these tests)."""
    path = SHARED / rel
    if not path.exists():
        pytest.skip(f"../shared/{rel} is not beside the checkout")
    return path


def shared_files(rel: str, pattern: str) -> list[Any]:
    """Parameters for each file of ``../shared/<rel>`` matching ``pattern``; one skipped parameter naming the
    directory when it is not there (an empty parameter set would skip without saying what is missing)."""
    directory = SHARED / rel
    if not directory.is_dir():
        return [pytest.param(None, id="missing", marks=pytest.mark.skip(
            reason=f"../shared/{rel} is not beside the checkout"))]
    return [pytest.param(p, id=p.name) for p in sorted(directory.glob(pattern))]


def admission_review(obj: dict[str, Any], uid: str = "u-1", operation: str = "CREATE") -> dict[str, Any]:
    """The AdmissionReview the API server sends for ``obj`` (its kind and resource, the lower-case plural)."""
    group, _, version = obj["apiVersion"].rpartition("/")
    meta = obj.get("metadata", {})
    kind = {"group": group, "version": version, "kind": obj["kind"]}
    resource = {"group": group, "version": version, "resource": obj["kind"].lower() + "s"}
    request: dict[str, Any] = {
        "uid": uid, "kind": kind, "resource": resource, "requestKind": kind, "name": meta.get("name"),
        "operation": operation, "userInfo": {"username": "kubernetes-admin"}, "object": obj, "oldObject": None,
        "dryRun": False, "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}}
    if "namespace" in meta:
        request["namespace"] = meta["namespace"]
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


@pytest.fixture(scope="session")
def loaded() -> Loaded:
    return load_rules(validate_builtin=True)


@pytest.fixture(scope="session")
def helm_dir() -> str:
    """A real helm binary (../shared/tools/get-helm), installed once into the ignored .tools/ directory."""
    import subprocess

    tool = shared("tools/get-helm")
    dest = ROOT / ".tools"
    out = subprocess.run(["bash", str(tool), str(dest)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return str(dest)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One line on the end-to-end suite: how many of its tests ran, and why the others were skipped (CI has no
    kube-apiserver; ``KUBEBUILDER_ASSETS`` pointing at envtest binaries runs them)."""
    reports = [r for r in terminalreporter.getreports("") if "tests/e2e/" in getattr(r, "nodeid", "")
               and "test_harness.py" not in r.nodeid and r.when in ("setup", "call")]
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if "tests/e2e/" in r.nodeid
               and "test_harness.py" not in r.nodeid]
    if not reports and not skipped:
        return
    reasons: dict[str, int] = {}
    for r in skipped:
        reason = r.longrepr[2] if isinstance(r.longrepr, tuple) else str(r.longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    total = len({r.nodeid for r in reports} | {r.nodeid for r in skipped})
    line = f"end-to-end suite (tests/e2e): {total - len(skipped)} of {total} tests ran"
    if reasons:
        line += "; skipped: " + "; ".join(f"{n} because {reason}" for reason, n in sorted(reasons.items()))
    terminalreporter.write_line(line)


def image_table_as_of() -> str:
    """The ``asOf`` date of the shipped image table, which findings about assumed releases quote ("table dated D")."""
    import re

    text = (ROOT / "rules" / "data" / "image-profiles.yaml").read_text()
    found = re.search(r'^asOf: "?([0-9-]+)"?$', text, re.M)
    assert found, "rules/data/image-profiles.yaml has no asOf"
    return found.group(1)
