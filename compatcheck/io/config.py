"""Finding and reading ``.compatcheck.yaml``: discovery, validation against its JSON Schema with located errors,
and paths made relative to the file. One file configures the linter, ``fix`` and the webhook.

Discovery follows yamllint: ``--config``, else the first ``.compatcheck.yaml``/``.compatcheck.yml`` found
walking up from the working directory (stopping at a repository root or $HOME), else ``$COMPATCHECK_CONFIG``,
else defaults. Reads files; evaluates nothing.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from compatcheck.core.config import (
    CONFIG_NAMES,
    DEFAULT_DOCS_URL,
    Config,
    ConfigError,
    DataSettings,
    Exemption,
    RegistrySettings,
    parse_duration,
)
from compatcheck.core.model import Diagnostic, Severity
from compatcheck.core.policy import DriverPolicy
from compatcheck.io import validcache
from compatcheck.io.manifests import read_file


def find_config(start: str | None = None) -> str | None:
    here = Path(start or os.getcwd()).resolve()
    home = Path.home().resolve()
    for d in (here, *here.parents):
        for name in CONFIG_NAMES:
            candidate = d / name
            if candidate.is_file():
                return str(candidate)
        if (d / ".git").exists() or d == home:
            break
    env = os.environ.get("COMPATCHECK_CONFIG")
    return env if env else None


def locate(problems: list[Diagnostic]) -> list[Diagnostic]:
    """``problems`` found after the config was read (by ``apply_to_ruleset``, which knows no lines), with the line
    of their pointer in the file they name."""
    docs: dict[str, Any] = {}
    out = []
    for p in problems:
        if p.line is not None or not p.pointer or not os.path.isfile(p.path):
            out.append(p)
            continue
        if p.path not in docs:
            parsed = read_file(p.path, strict=True)
            docs[p.path] = parsed.documents[0] if len(parsed.documents) == 1 else None
        doc = docs[p.path]
        out.append(replace(p, line=doc.locate(p.pointer)[0]) if doc is not None else p)
    return out


def load_config(path: str | None) -> Config:
    """Parse and validate a config file (None = defaults). Raises ConfigError with every located problem."""
    if path is None:
        return Config()
    parsed = read_file(path, strict=True)
    problems = [replace(e, kind="config") for e in parsed.errors]
    if problems:
        raise ConfigError(problems)
    if len(parsed.documents) != 1 or not isinstance(parsed.documents[0].data, dict):
        raise ConfigError([Diagnostic(path, "expected one YAML mapping with apiVersion: compatcheck/v1",
                                      kind="config")])
    doc = parsed.documents[0]
    data: dict[str, Any] = doc.data
    found = validcache.problems(data, "config.schema.json", path, "config")  # (a file checked before: not again)
    if found:
        raise ConfigError([replace(p, line=doc.locate(p.pointer)[0]) for p in found])
    base = Path(path).resolve().parent

    def rel(p: str) -> str:
        return str(base / p) if not os.path.isabs(p) else p

    severities: dict[str, Severity] = {}
    disabled: set[str] = set()
    params: dict[str, dict[str, Any]] = {}
    for rule_id, value in (data.get("rules") or {}).items():
        sev = value if isinstance(value, str) else value.get("severity")
        if sev == "off":
            disabled.add(rule_id)
        elif sev is not None:
            severities[rule_id] = Severity(sev)
        if isinstance(value, dict) and "params" in value:
            params[rule_id] = value["params"]
    exemptions = tuple(
        Exemption(frozenset(e["rules"]) if "rules" in e else None, tuple(e.get("namespaces", ())),
                  tuple(e.get("names", ())), tuple(e.get("kinds", ())), tuple(e.get("containers", ())),
                  tuple(e.get("paths", ())))
        for e in data.get("exemptions") or [])
    fixes = data.get("fixes") or {}
    return Config(
        path=path, severities=severities, disabled=frozenset(disabled), params=params,
        rule_dirs=tuple(rel(d) for d in data.get("ruleDirs") or ()),
        nodes=rel(data["nodes"]) if data.get("nodes") else None,
        admission_plugins=frozenset(data.get("admissionPlugins") or ()),
        crl=tuple(rel(c) for c in data.get("crl") or ()),
        fail_on=Severity(data.get("failOn", "error")), exemptions=exemptions,
        fail_on_unchecked=bool(data.get("failOnUnchecked", False)),
        warn_unchecked=bool((data.get("webhook") or {}).get("warnUnchecked", False)),
        annotation_exemptions=bool(data.get("annotationExemptions", True)),
        baseline=rel(data["baseline"]) if data.get("baseline") else None,
        docs_url=data.get("docsUrl", DEFAULT_DOCS_URL),
        fixes_enabled=frozenset(fixes["enabled"]) if "enabled" in fixes else None,
        fixes_disabled=frozenset(fixes.get("disabled", ())), allow_unsafe=frozenset(fixes.get("allowUnsafe", ())),
        webhook={k: v for k, v in (data.get("webhook") or {}).items() if k != "warnUnchecked"},
        registry=registry_settings(data.get("registry") or {}, rel),
        driver_policy=driver_policy(data.get("driverPolicy") or {}),
        data=data_settings(data.get("data") or {}, rel),
        exclude=tuple(data.get("exclude") or ()), root=str(base),
    )


def registry_settings(data: dict[str, Any], rel: Any = None) -> RegistrySettings:
    """The ``registry:`` section (schema-valid) as settings; paths relative to the config file."""
    d = RegistrySettings()

    def path(key: str) -> str | None:
        value = data.get(key)
        return (rel(value) if rel else value) if value else None

    return RegistrySettings(
        lookups=bool(data.get("lookups", d.lookups)), offline=bool(data.get("offline", d.offline)),
        allow=tuple(data["allow"]) if "allow" in data else None,
        redirect_hosts=tuple(data.get("redirectHosts", d.redirect_hosts)), platform=data.get("platform", d.platform),
        timeout=float(data.get("timeoutSeconds", d.timeout)), budget=float(data.get("budgetSeconds", d.budget)),
        webhook_budget=float(data.get("webhookBudgetSeconds", d.webhook_budget)),
        ca_file=path("caFile"), auth_file=path("authFile"),
        max_manifest_bytes=int(data.get("maxManifestBytes", d.max_manifest_bytes)),
        max_config_bytes=int(data.get("maxConfigBytes", d.max_config_bytes)),
        tag_ttl=float(data.get("tagTtlSeconds", d.tag_ttl)),
        cache_entries=int(data.get("cacheEntries", d.cache_entries)),
        concurrency=int(data.get("concurrency", d.concurrency)))


def data_settings(data: dict[str, Any], rel: Any = None) -> DataSettings:
    """The ``data:`` section (schema-valid); a directory in ``use`` is relative to the config file."""
    use = data.get("use")
    if use is not None and use not in ("auto", "builtin", "active") and rel is not None:
        use = rel(use)
    return DataSettings(use=use, source=data.get("source"),
                        refresh_interval=parse_duration(data.get("refreshInterval", DataSettings.refresh_interval)))


def driver_policy(data: dict[str, Any]) -> DriverPolicy:
    """The ``driverPolicy:`` section (schema-valid) as typed data."""
    assumed = data.get("assumedSeverity", "rule")
    return DriverPolicy(forward_compatibility=bool(data.get("forwardCompatibility", False)),
                        minor_version_compatibility=bool(data.get("minorVersionCompatibility", False)),
                        assumed_severity=None if assumed == "rule" else Severity(assumed))
