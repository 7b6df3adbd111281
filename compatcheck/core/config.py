"""The frozen ``Config`` (``.compatcheck.yaml``): severities, disabled rules, params overrides, exemptions, fixes
and webhook settings, and how they apply to a RuleSet. Pure: ``compatcheck.io.config`` finds and reads the file.
"""

from __future__ import annotations

import copy
import fnmatch
import os
import re
from dataclasses import dataclass, field

from compatcheck.core.jsonutil import JsonObject
from compatcheck.core.model import Diagnostic, Finding, Severity
from compatcheck.core.pointers import escape_token
from compatcheck.core.policy import DEFAULT_POLICY, DriverPolicy
from compatcheck.core.rules import ParamsError, RuleSet, schema_problems
from compatcheck.core.suggest import did_you_mean

CONFIG_NAMES = (".compatcheck.yaml", ".compatcheck.yml")
DEFAULT_DOCS_URL = "https://github.com/compatcheck/compatcheck/blob/main/docs/rules.md"


class ConfigError(Exception):
    """An invalid configuration: every problem, as diagnostics of kind ``config``."""

    def __init__(self, problems: list[Diagnostic]) -> None:
        super().__init__(f"{len(problems)} problem(s) in the configuration")
        self.problems = problems


@dataclass(frozen=True)
class Exemption:
    rules: frozenset[str] | None
    namespaces: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    containers: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()

    def matches(self, f: Finding, path: str | None) -> bool:
        if self.rules is not None and f.rule_id not in self.rules:
            return False
        if self.namespaces and (f.obj.namespace or "default") not in self.namespaces:
            return False
        if self.names and not any(fnmatch.fnmatchcase(f.obj.name or "", n) for n in self.names):
            return False
        if self.kinds and f.obj.kind not in self.kinds:
            return False
        if self.containers and f.container not in self.containers:
            return False
        return not (self.paths and not (path and any(glob_match(path, p) for p in self.paths)))


def glob_match(path: str, pattern: str) -> bool:
    """Path glob with ``**`` for any number of directories (gitignore-like, anchored)."""
    regex = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            regex += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            regex += ".*"
            i += 2
        elif pattern[i] == "*":
            regex += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            regex += "[^/]"
            i += 1
        else:
            regex += re.escape(pattern[i])
            i += 1
    norm = os.path.normpath(path).lstrip("./") if not os.path.isabs(pattern) else os.path.normpath(path)
    return re.fullmatch(regex, norm) is not None or re.fullmatch(regex, path) is not None


# The registries the webhook reads image configs from unless the config names others: a pod spec must not be able
# to make the webhook send requests to arbitrary hosts (SSRF). The linter reads from any registry by default: it
# reads the manifests its user asked it to read.
PUBLIC_REGISTRIES = ("docker.io", "registry-1.docker.io", "ghcr.io", "nvcr.io", "quay.io", "registry.k8s.io",
                     "public.ecr.aws")
# Hosts those registries send clients to for tokens and blobs (auth services, CDNs); requests go there only after
# the registry itself named them. registry.k8s.io redirects to Artifact Registry, whose blobs live on Google
# Cloud Storage; public.ecr.aws to CloudFront; Quay to its CDN and S3.
PUBLIC_REDIRECT_HOSTS = ("auth.docker.io", "production.cloudflare.docker.com", "pkg-containers.githubusercontent.com",
                         "authn.nvidia.com", "*.pkg.dev", "storage.googleapis.com", "*.cloudfront.net",
                         "cdn.quay.io", "cdn01.quay.io", "cdn02.quay.io", "cdn03.quay.io",
                         "quay-registry.s3.amazonaws.com", "*.s3.amazonaws.com", "*.r2.cloudflarestorage.com")


@dataclass(frozen=True)
class RegistrySettings:
    """``registry:`` in ``.compatcheck.yaml``: reading image configs from registries. See
    docs/knowledge-base.md, "Reading the image itself", for the reasons behind each default."""

    lookups: bool = False  # lint: opt-in (--registry-lookups); the chart turns it on for the webhook
    offline: bool = False  # only the cache (and --image-facts files): no request at all
    allow: tuple[str, ...] | None = None  # None: any registry in lint, PUBLIC_REGISTRIES in the webhook
    redirect_hosts: tuple[str, ...] = PUBLIC_REDIRECT_HOSTS
    platform: str = "auto"  # auto: the GPU nodes' kubernetes.io/arch when they agree, else linux/amd64
    timeout: float = 5.0  # seconds, one request
    budget: float = 20.0  # seconds, every lookup of one lint run together
    webhook_budget: float = 0.15  # seconds an admission request may wait for lookups
    ca_file: str | None = None  # a CA bundle added to the system's, for private registries
    auth_file: str | None = None  # a docker config.json (default: $DOCKER_CONFIG or ~/.docker/config.json)
    max_manifest_bytes: int = 4 * 1024 * 1024
    max_config_bytes: int = 2 * 1024 * 1024
    tag_ttl: float = 24 * 3600.0  # seconds a tag -> digest entry is trusted (the webhook's memory cache too)
    cache_entries: int = 5000  # on-disk cache entries (lint) / in-memory images (webhook)
    concurrency: int = 8  # lookups at once

    def allowed(self, webhook: bool) -> tuple[str, ...]:
        if self.allow is not None:
            return self.allow
        return PUBLIC_REGISTRIES if webhook else ("*",)


@dataclass(frozen=True)
class DataSettings:
    """``data:`` in ``.compatcheck.yaml``: which knowledge to use, and the data bundle the webhook keeps current
    (docs/data-bundle.md)."""

    use: str | None = None  # auto | builtin | active | a directory (None: --data, $COMPATCHECK_DATA, else auto)
    source: str | None = None  # an OCI reference of a data bundle (the webhook pulls it on a schedule)
    refresh_interval: float = 6 * 3600.0  # seconds between the webhook's pulls of ``source``


def parse_duration(text: str | int | float) -> float:
    """``90``, ``"90s"``, ``"15m"``, ``"6h"``, ``"1d"`` -> seconds (the schema has checked the form)."""
    if isinstance(text, int | float):
        return float(text)
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    return float(text[:-1]) * units[text[-1]] if text[-1] in units else float(text)


@dataclass(frozen=True)
class Config:
    path: str | None = None
    severities: dict[str, Severity] = field(default_factory=dict)
    disabled: frozenset[str] = frozenset()
    params: dict[str, JsonObject] = field(default_factory=dict)
    rule_dirs: tuple[str, ...] = ()
    nodes: str | None = None
    admission_plugins: frozenset[str] = frozenset()  # see compatcheck.core.cluster.ADMISSION_PLUGINS
    crl: tuple[str, ...] = ()
    fail_on: Severity = Severity.ERROR
    fail_on_unchecked: bool = False  # exit 1 when a GPU workload was not checked (failOnUnchecked)
    warn_unchecked: bool = False  # the webhook warns on a GPU object's blind spots (webhook.warnUnchecked)
    exemptions: tuple[Exemption, ...] = ()
    annotation_exemptions: bool = True
    baseline: str | None = None
    docs_url: str = DEFAULT_DOCS_URL
    fixes_enabled: frozenset[str] | None = None
    fixes_disabled: frozenset[str] = frozenset()
    allow_unsafe: frozenset[str] = frozenset()
    webhook: dict[str, str] = field(default_factory=dict)
    registry: RegistrySettings = field(default_factory=RegistrySettings)
    driver_policy: DriverPolicy = DEFAULT_POLICY  # ``driverPolicy``: the relaxations the cluster declares
    data: DataSettings = field(default_factory=DataSettings)
    # Input paths to leave out (.gitignore patterns), relative to ``root``, the config file's directory, which
    # exemption ``paths`` are relative to as well (None: no config file, the working directory).
    exclude: tuple[str, ...] = ()
    root: str | None = None

    def exempt(self, f: Finding, path: str | None) -> bool:
        return any(e.matches(f, path) for e in self.exemptions)

    def fix_allowed(self, rule_id: str) -> bool:
        if rule_id in self.fixes_disabled:
            return False
        return self.fixes_enabled is None or rule_id in self.fixes_enabled


def apply_to_ruleset(config: Config, ruleset: RuleSet) -> RuleSet:
    """Rules with params overrides merged and re-validated; unknown rule ids are errors."""
    from dataclasses import replace

    problems: list[Diagnostic] = []
    path = config.path or "<config>"
    names = set(config.severities) | config.disabled | set(config.params)
    for e in config.exemptions:
        names |= set(e.rules or ())
    names |= set(config.fixes_enabled or ()) | config.fixes_disabled | config.allow_unsafe
    for rule_id in sorted(names - set(ruleset.rules)):
        hint = did_you_mean(rule_id, ruleset.rules) or " (see compatcheck rules list)"
        problems.append(Diagnostic(path, f"unknown rule {rule_id!r}{hint}",
                                   pointer=_naming(config, rule_id), kind="config"))
    rules = dict(ruleset.rules)
    for rule_id, override in config.params.items():
        if rule_id not in rules:
            continue
        merged = _deep_merge(rules[rule_id].params, override)
        invalid = schema_problems(merged, rules[rule_id].check.params_schema, path, "config")
        for p in invalid:
            problems.append(Diagnostic(path, f"rules.{rule_id}.params: {p.message}",
                                       pointer=f"/rules/{rule_id}/params{p.pointer}", kind="config"))
        if invalid:
            continue
        try:
            rules[rule_id] = replace(rules[rule_id], params=merged)
        except ParamsError as exc:
            problems.append(Diagnostic(path, f"rules.{rule_id}.params: {exc}", pointer=f"/rules/{rule_id}/params",
                                       kind="config"))
    if problems:
        raise ConfigError(problems)
    return RuleSet({k: v for k, v in rules.items() if k not in config.disabled})


def _naming(config: Config, rule_id: str) -> str:
    """Where the config names ``rule_id`` (a pointer for the file's reader to turn into a line)."""
    if rule_id in config.severities or rule_id in config.disabled or rule_id in config.params:
        return f"/rules/{escape_token(rule_id)}"
    for i, e in enumerate(config.exemptions):
        if rule_id in (e.rules or ()):
            return f"/exemptions/{i}/rules"
    for key, names in (("enabled", config.fixes_enabled or ()), ("disabled", config.fixes_disabled),
                       ("allowUnsafe", config.allow_unsafe)):
        if rule_id in names:
            return f"/fixes/{key}"
    return ""


def _deep_merge(base: JsonObject, over: JsonObject) -> JsonObject:
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out
