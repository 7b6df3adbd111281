"""Which fixes the mutating webhook applies by default is data: a rule file says ``webhook: {mutate: default}``
(it was a constant, ``admission.DEFAULT_MUTATIONS``). The config's ``fixes`` still decide over it."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from compatcheck.core.admission import AdmissionSettings, review
from compatcheck.core.checks.base import EvalContext
from compatcheck.core.config import Config
from compatcheck.core.crl import CrlIndex
from compatcheck.core.rules import RuleSet
from compatcheck.io.loader import Loaded, RuleLoadError, load_rules
from tests.conftest import ROOT

BUILTIN_DEFAULTS = {"crl-limit-required", "crl-request-policy", "crl-default-missing", "paddle-allocator-conflict"}


def admin_rule(d: Path, rule_id: str, mutate: str | None, *, overrides: bool = True) -> Path:
    """A copy of a built-in rule, overriding it, with ``webhook: {mutate: ...}`` (or none)."""
    text = (ROOT / "rules" / f"{rule_id}.yaml").read_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith(("webhook:", "  mutate:"))]
    head = lines.index(next(ln for ln in lines if ln.startswith("docs:")))
    extra = (["overrides: " + rule_id] if overrides else []) + ([f"webhook: {{mutate: {mutate}}}"] if mutate else [])
    d.mkdir(exist_ok=True)
    path = d / f"{rule_id}.yaml"
    path.write_text("\n".join(lines[:head] + extra + lines[head:]) + "\n")
    return path


def gpu_pod_requests_only() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
                                     "resources": {"requests": {"nvidia.com/gpu": 1}}}]}}


def mutated(ruleset: RuleSet, settings: AdmissionSettings, obj: dict[str, Any]) -> list[dict[str, Any]]:
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE",
        "namespace": "default", "name": "p", "object": obj, "oldObject": None, "dryRun": False}}
    ctx = EvalContext(load_rules().kb, None, CrlIndex())
    response, _ = review(body, "mutate", ruleset, ctx, settings)
    patch = response["response"].get("patch")
    return json.loads(base64.b64decode(patch)) if patch else []


def test_the_built_in_defaults_come_from_the_rule_files(loaded: Loaded) -> None:
    assert loaded.ruleset.default_mutations == BUILTIN_DEFAULTS
    assert AdmissionSettings.from_config(Config(), loaded.ruleset).mutations == BUILTIN_DEFAULTS
    assert AdmissionSettings().mutations_in(loaded.ruleset) == BUILTIN_DEFAULTS


def test_an_admin_rule_declares_its_fix_a_default_mutation(tmp_path: Path) -> None:
    base = load_rules()
    assert mutated(base.ruleset, AdmissionSettings.from_config(Config(), base.ruleset), gpu_pod_requests_only()) == []
    admin_rule(tmp_path / "rules.d", "extended-resource-invalid", "default")
    ruleset = load_rules([str(tmp_path / "rules.d")]).ruleset
    assert ruleset.default_mutations == BUILTIN_DEFAULTS | {"extended-resource-invalid"}
    settings = AdmissionSettings.from_config(Config(), ruleset)
    assert mutated(ruleset, settings, gpu_pod_requests_only()) == [
        {"op": "add", "path": "/spec/containers/0/resources/limits", "value": {"nvidia.com/gpu": 1}}]
    # the config still decides: fixes.disabled turns it off, fixes.enabled replaces the defaults
    off = AdmissionSettings.from_config(Config(fixes_disabled=frozenset({"extended-resource-invalid"})), ruleset)
    assert "extended-resource-invalid" not in (off.mutations or ()) and mutated(ruleset, off,
                                                                               gpu_pod_requests_only()) == []
    only = AdmissionSettings.from_config(Config(fixes_enabled=frozenset({"crl-default-missing"})), ruleset)
    assert only.mutations == {"crl-default-missing"}


def test_an_admin_rule_makes_a_default_opt_in(tmp_path: Path) -> None:
    admin_rule(tmp_path / "rules.d", "crl-default-missing", "opt-in")
    ruleset = load_rules([str(tmp_path / "rules.d")]).ruleset
    assert ruleset.default_mutations == BUILTIN_DEFAULTS - {"crl-default-missing"}
    enabled = AdmissionSettings.from_config(Config(fixes_enabled=frozenset({"crl-default-missing"})), ruleset)
    assert enabled.mutations == {"crl-default-missing"}


def test_an_opt_in_fix_is_applied_when_the_config_enables_it(loaded: Loaded) -> None:
    ruleset = loaded.ruleset
    settings = AdmissionSettings.from_config(Config(fixes_enabled=frozenset({"extended-resource-invalid"})), ruleset)
    assert mutated(ruleset, settings, gpu_pod_requests_only())[0]["path"] == "/spec/containers/0/resources/limits"


@pytest.mark.parametrize(("rule_id", "mutate", "message"), [
    ("dtype-unsupported-by-gpu", "default",
     "webhook.mutate: default needs a check with a safe fix; check dtype-capability has unsafe fix here"),
    ("crl-limit-disabled", "default", "webhook.mutate: default needs a check with a safe fix"),
    ("extended-resource-invalid", "always", "/webhook/mutate: 'always' is not one of ['default', 'opt-in']"),
])
def test_a_default_mutation_needs_a_safe_fix(tmp_path: Path, rule_id: str, mutate: str, message: str) -> None:
    path = admin_rule(tmp_path / "rules.d", rule_id, mutate)
    with pytest.raises(RuleLoadError) as err:
        load_rules([str(tmp_path / "rules.d")])
    (problem,) = err.value.problems
    assert message in problem.message and problem.path == str(path)
    assert problem.line is not None and path.read_text().splitlines()[problem.line - 1].startswith("webhook:")


def test_the_rule_reference_says_what_the_webhook_applies() -> None:
    env = {**os.environ, "NO_COLOR": "1"}
    out = subprocess.run([sys.executable, "-m", "compatcheck", "rules", "list", "--format", "json"],
                         capture_output=True, text=True, cwd=ROOT, env=env, check=True).stdout
    by_id = {r["id"]: r["webhookMutate"] for r in json.loads(out)}
    assert {r for r, m in by_id.items() if m == "default"} == BUILTIN_DEFAULTS
    assert by_id["extended-resource-invalid"] == "opt-in" and by_id["crl-limit-disabled"] is None
    explained = subprocess.run([sys.executable, "-m", "compatcheck", "rules", "explain", "crl-default-missing"],
                               capture_output=True, text=True, cwd=ROOT, env=env, check=True).stdout
    assert "Webhook: The mutating webhook applies this fix by default" in explained
    assert "crl-default-missing) | info |  | safe (webhook default) |" in (ROOT / "docs" / "rules.md").read_text()
