"""The lint pipeline shared by ``compatcheck lint`` and ``compatcheck fix``: read files, build the context,
evaluate every object, attach file/line/column, then apply config exemptions, suppression annotations and
the baseline. I/O lives in ``manifests``/``loader``; this module orchestrates and never prints."""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from compatcheck.core.checks.base import EvalContext, PodAnalysis, lookup_images
from compatcheck.core.cluster import Cluster
from compatcheck.core.config import Config
from compatcheck.core.crl import CrlIndex, claims_crl
from compatcheck.core.drakinds import KINDS as DRA_KINDS
from compatcheck.core.drakinds import V1ALPHA2_KINDS, api_version_note, is_dra
from compatcheck.core.engine import OBJECT_BUDGET, OverBudget, asks_for_gpu, evaluate
from compatcheck.core.imageconfig import RegistryFacts
from compatcheck.core.kserve import build_runtime_index
from compatcheck.core.llmaz import KINDS as LLMAZ_KINDS
from compatcheck.core.llmaz import build_index as build_llmaz_index
from compatcheck.core.model import Diagnostic, DuplicateKey, Finding, Severity, SourceRef
from compatcheck.core.suppress import split_suppressed
from compatcheck.core.workloads import KindTable, default_kinds, object_ref, pod_targets
from compatcheck.io.loader import CrlSource, Loaded, crl_index, load_crl_objects, load_nodes, may_hold_crl
from compatcheck.io.manifests import (
    DEFAULT_MAX_FILE_BYTES,
    Document,
    ParsedFile,
    PathFilter,
    expand_paths,
    iter_objects,
    list_items,
    parse_text,
    read_file,
)
from compatcheck.report.model import LintReport, NotChecked, Silenced

if TYPE_CHECKING:  # registry lookups, baselines and the matrix: imported when used (a plain lint starts without them)
    from compatcheck.core.matrix import Matrix
    from compatcheck.io import baseline as baseline_mod
    from compatcheck.io import imagefacts
    from compatcheck.io.imagecache import ImageCache


@dataclass
class LintOptions:
    nodes: str | None = None
    crl: list[str] = field(default_factory=list)
    max_bytes: int = DEFAULT_MAX_FILE_BYTES
    only: set[str] | None = None
    config: Config = field(default_factory=Config)
    baseline: Counter[baseline_mod.Key] | None = None
    baseline_root: str | None = None  # the directory the baseline's file paths are relative to (its own)
    # Input paths to leave out of directory walks (.gitignore-style patterns, see ``expand_paths``).
    exclude: PathFilter | None = None
    # Rendered files (helm template): maps a parsed file to the path findings should name.
    # (document, pointer, line in the rendered text) -> (file, line, column or None)
    source_map: Callable[[Document, str, int], tuple[str, int, int | None]] | None = None
    # Image configs: from registries (config registry.lookups, --registry-lookups), only the cache (--offline),
    # and facts files made elsewhere (--image-facts FILE or IMAGE=FILE), which are read whatever the mode.
    image_facts: list[str] = field(default_factory=list)
    cache: ImageCache | None = None
    lookup_stats: imagefacts.LookupStats | None = None
    object_budget: float = OBJECT_BUDGET  # seconds per object (engine.OBJECT_BUDGET)


# Kinds the pods' evaluation reads beside them: DRA DeviceClasses, ResourceClaims and templates (what the pods' claims
# resolve to; ServingRuntimes hold pod specs already), llmaz's OpenModels and BackendRuntimes (a Playground's GPUs and
# image).
_READ_KINDS = frozenset(DRA_KINDS) | frozenset(V1ALPHA2_KINDS) | frozenset(LLMAZ_KINDS)


def may_matter(kind: str, text: str, kinds: KindTable | None = None) -> bool:
    """Whether a document of ``kind`` (its text: ``text``) can matter to a lint: a kind that holds pod specs
    (the workload-kinds table, ``kinds`` or the built-in one), one that they read (DRA claims, templates and
    classes), a document of another kind that has containers and mentions GPUs (structural discovery reads it), a
    List, or a ConfigMap that may be a cf-crl CRL. Every other document (CRDs, dashboards in ConfigMaps, Services,
    RBAC) is skipped before the position-tracking parse, and so is a List whose items a cheap scan finds to be all of
    such kinds (a List of CRDs): a List whose items it cannot tell, or that holds a List, is parsed."""
    if kind in (kinds or default_kinds()).names or kind in _READ_KINDS:
        return True
    if kind.endswith("List"):
        items = list_items(text)
        return items is None or any(k.endswith("List") or may_matter(k, t, kinds) for k, t in items)
    if kind not in _NEVER_WORKLOADS and "containers" in text and "image" in text and _GPU_TOKEN.search(text):
        return True
    return may_hold_crl(kind, text)


# Built-in kinds that never hold a pod spec, however much their text says "containers" (structural discovery
# looks into custom resources only).
_NEVER_WORKLOADS = frozenset({"CustomResourceDefinition", "ConfigMap", "Secret", "Service", "Node", "Namespace",
                              "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "ServiceAccount",
                              "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "Ingress",
                              "NetworkPolicy", "HorizontalPodAutoscaler", "PodDisruptionBudget", "Endpoints",
                              "PersistentVolumeClaim", "PersistentVolume", "StorageClass", "LimitRange",
                              "ResourceQuota", "PriorityClass", "RuntimeClass"})


# What a document's text must mention for structural discovery to parse a kind the table does not know: a GPU
# resource or annotation (nvidia.com/gpu, nvidia.com/mig-*, amd.com/gpu, gpu-fraction, ...).
_GPU_TOKEN = re.compile(r"gpu|nvidia\.com/|amd\.com/|\bmig-", re.IGNORECASE)


def _wanted(kinds: KindTable | None) -> Callable[[str, str], bool]:
    if kinds is None:
        return may_matter
    return lambda kind, text: may_matter(kind, text, kinds)


@dataclass
class LintedObject:
    """One object with its findings (after filtering), for ``fix``."""

    parsed: ParsedFile
    doc: Document
    prefix: str
    obj: dict[str, Any]
    findings: list[Finding]


def prepare(paths: list[str], loaded: Loaded, options: LintOptions, report: LintReport,
            texts: dict[str, str] | None = None, *, keep_text: bool = False) -> tuple[list[ParsedFile], EvalContext]:
    """Read and parse every input (the files' texts are dropped unless ``keep_text``: memory then holds only the
    documents that can matter), load the nodes and CRLs."""
    cluster = None
    if options.nodes:
        cluster, diagnostics = load_nodes(options.nodes, loaded.kb, options.max_bytes)
        report.add(diagnostics)
    parsed: list[ParsedFile] = []
    if texts is not None:
        files = list(texts)
        for name, text in texts.items():
            parsed.append(parse_text(name, text, wanted=_wanted(loaded.kb.kinds)))
    else:
        files, errors = expand_paths(paths, options.exclude)
        report.add(errors)
        for f in files:
            pf = read_file(f, options.max_bytes, wanted=_wanted(loaded.kb.kinds))
            if not keep_text:
                pf.text = None
            parsed.append(pf)
    for pf in parsed:
        report.add(pf.errors)
        report.add(pf.notes)
        report.skipped += pf.skipped
    report.files = len(files)
    crl_objects, crl_errors = load_crl_objects(options.crl, options.max_bytes) if options.crl else ([], [])
    report.add(crl_errors)
    for pf in parsed:
        for doc in pf.documents:
            for prefix, obj in iter_objects(doc):
                if claims_crl(obj):
                    crl_objects.append(CrlSource(pf.path, obj, doc, prefix))
    index, invalid = crl_index(crl_objects) if crl_objects else (CrlIndex(), [])
    # Invalid CRLs among the linted files are findings (crl-configmap-invalid); only --crl ones are errors.
    linted = {pf.path for pf in parsed}
    report.add(e for e in invalid if e.path not in linted)
    # DRA: the DeviceClasses, ResourceClaims and templates linted together are what the pods' claims resolve to.
    objects = [obj for pf in parsed for doc in pf.documents for _prefix, obj in iter_objects(doc)]
    dra_objects = [obj for obj in objects if is_dra(obj)]
    dra = None
    if dra_objects:  # only then is core.dra (claims, CEL, the allocator) imported
        from compatcheck.core.dra import build_index as build_dra_index

        dra = build_dra_index(dra_objects)
    report.add(_dra_redefinitions(parsed, options, cluster))
    report.add(_dra_api_versions(parsed, options))
    # KServe: the ServingRuntimes linted together are what InferenceServices naming a model format run on.
    runtimes = build_runtime_index(objects)
    ctx = EvalContext(loaded.kb, cluster, index, dra=dra, serving_runtimes=runtimes, llmaz=build_llmaz_index(objects),
                      admission_plugins=options.config.admission_plugins, driver_policy=options.config.driver_policy)
    registry = options.config.registry
    if registry.lookups or registry.offline or options.image_facts:
        ctx = ctx.with_registry(_image_configs(parsed, cluster, options, report, loaded.kb.kinds))
    return parsed, ctx


DRA_INDEXED = ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate")


def _dra_redefinitions(parsed: list[ParsedFile], options: LintOptions, cluster: Cluster | None) -> list[Diagnostic]:
    """A DeviceClass, ResourceClaim or ResourceClaimTemplate defined again, differently, under the same name (and
    namespace) in the files linted together: the last one is what claims resolve to, as applying the files in order
    would leave it, so a warning at it names the other place (never silence about which one was checked). A
    DeviceClass of the input that the --nodes file (the cluster as it is) defines differently: the input's is the
    one checked, as applying it would replace the cluster's; a warning at it names the --nodes place."""
    first: dict[tuple[str, str | None, str], tuple[dict[str, Any], str, int]] = {}
    last: dict[str, tuple[dict[str, Any], str, int, int, str]] = {}  # DeviceClass name -> where it is last
    out: list[Diagnostic] = []
    for pf in parsed:
        for doc in pf.documents:
            for prefix, obj in iter_objects(doc):
                kind = obj.get("kind")
                if kind not in DRA_INDEXED or not is_dra(obj):
                    continue
                meta = obj.get("metadata")
                name = meta.get("name") if isinstance(meta, dict) else None
                if not isinstance(name, str):
                    continue
                namespace = meta.get("namespace") if isinstance(meta, dict) and kind != "DeviceClass" else None
                key = (str(kind), namespace if isinstance(namespace, str) else None, name)
                pointer = f"{prefix}/metadata/name"
                path, line, col = _where(doc, pointer, options)
                seen = first.get(key)
                first[key] = (obj, path, line)
                if kind == "DeviceClass":
                    last[name] = (obj, path, line, col, pointer)
                if seen is None or seen[0] == obj:
                    continue
                shown = f"{key[1]}/{name}" if key[1] else name
                out.append(Diagnostic(path, f"{kind} {shown} is defined again here, differently (also at "
                                            f"{seen[1]}:{seen[2]}): the claims that name it are checked against "
                                            "this last definition, as applying the files in this order would "
                                            "leave it", line, col, pointer, severity=Severity.WARNING))
    origins = cluster.device_class_origins if cluster is not None else {}
    for name, (obj, path, line, col, pointer) in last.items():
        origin = origins.get(name)
        if origin is None or origin[0] == obj.get("spec"):
            continue
        where = f"{origin[1]}:{origin[2]}" if origin[2] is not None else origin[1]
        out.append(Diagnostic(path, f"DeviceClass {name} is defined here differently from the cluster's (--nodes "
                                    f"{where}): the claims that name it are checked against this definition, as "
                                    "applying it would replace the cluster's", line, col, pointer,
                              severity=Severity.WARNING))
    return out


def _dra_api_versions(parsed: list[ParsedFile], options: LintOptions) -> list[Diagnostic]:
    """A note at each resource.k8s.io object of an API version Kubernetes 1.36 does not serve by default (v1beta2,
    v1beta1: deprecated, read as v1; v1alpha3: read as v1beta1; v1alpha2: not checked), never silence."""
    out: list[Diagnostic] = []
    for pf in parsed:
        for doc in pf.documents:
            for prefix, obj in iter_objects(doc):
                note = api_version_note(obj)
                if note is not None:
                    path, line, col = _where(doc, f"{prefix}/apiVersion", options)
                    out.append(Diagnostic(path, note, line, col, f"{prefix}/apiVersion", severity=Severity.INFO,
                                          kind="note"))
    return out


def _image_configs(parsed: list[ParsedFile], cluster: Cluster | None, options: LintOptions,
                   report: LintReport, kinds: KindTable | None = None) -> dict[str, RegistryFacts]:
    """What the configs of the GPU containers' images say: from --image-facts files, the cache and, with lookups
    on, their registries. Problems are notes (or errors, for an invalid --image-facts file)."""
    from compatcheck.io import imagefacts
    from compatcheck.io.imagecache import ImageCache

    wanted: dict[str, imagefacts.Where] = {}
    for pf in parsed:
        for doc in pf.documents:
            for prefix, obj in iter_objects(doc):
                for image, pointer in lookup_images(obj, kinds).items():
                    if image not in wanted:
                        path, line, _col = _where(doc, prefix + pointer, options)
                        wanted[image] = imagefacts.Where(path, line)
    files: list[imagefacts.FileEntry] = []
    for spec in options.image_facts:
        try:
            files.extend(imagefacts.load_facts_file(spec))
        except imagefacts.FactsFileError as exc:
            report.add(exc.problems)
    if not wanted:
        return {}
    settings = options.config.registry
    archs = ({rec.placement_labels().get("kubernetes.io/arch", "") for c in cluster.classes if c.facts.has_gpu
              for rec in c.members} - {""}) if cluster is not None else set()
    platform = imagefacts.choose_platform(settings.platform, archs)
    network = settings.lookups and not settings.offline
    cache = options.cache
    if cache is None and (settings.lookups or settings.offline):
        cache = ImageCache(tag_ttl=settings.tag_ttl, max_entries=settings.cache_entries)
    result = imagefacts.lookup(wanted, settings, platform=platform, files=files, cache=cache, network=network)
    options.lookup_stats = result.stats
    report.add(result.notes)
    return result.facts


def run_lint(paths: list[str], loaded: Loaded, options: LintOptions, *, texts: dict[str, str] | None = None,
             keep: list[LintedObject] | None = None) -> LintReport:
    report = LintReport()
    parsed, ctx = prepare(paths, loaded, options, report, texts, keep_text=keep is not None)
    _evaluate_all(parsed, ctx, loaded, options, report, keep)
    return report


ClusterChange = Callable[[Cluster], Cluster]


def run_lint_variants(paths: list[str], loaded: Loaded, options: LintOptions,
                      variants: list[ClusterChange | None], *,
                      texts: dict[str, str] | None = None, matrix: bool = False) -> list[LintReport]:
    """One lint of the same input per variant of the --nodes cluster view (None: the view as read; a function:
    the view it returns, see ``compatcheck.core.whatif``), reading and parsing the input once. Each report has
    the reading's diagnostics; a variant's own (what its change says) go to the caller. ``matrix``: the last
    report also gets the compatibility matrix of its view (``compatcheck.core.matrix``)."""
    base = LintReport()
    parsed, ctx = prepare(paths, loaded, options, base, texts)
    reports: list[LintReport] = []
    for change in variants:
        report = LintReport(errors=list(base.errors), warnings=list(base.warnings), notes=list(base.notes),
                            files=base.files, skipped=base.skipped)
        vctx = ctx
        if change is not None and ctx.cluster is not None:
            vctx = ctx.with_cluster(change(ctx.cluster))
        _evaluate_all(parsed, vctx, loaded, options, report, None)
        reports.append(report)
        if matrix and change is variants[-1] and vctx.cluster is not None:
            report.matrix = _matrix(parsed, vctx, loaded, options)
    return reports


def _matrix(parsed: list[ParsedFile], ctx: EvalContext, loaded: Loaded, options: LintOptions) -> Matrix:
    """Each GPU workload of ``parsed`` evaluated on each node class of ``ctx``'s cluster alone."""
    from compatcheck.core.matrix import build_matrix, pool_of, restrict
    from compatcheck.core.whatif import workload_key

    assert ctx.cluster is not None
    per_pool = []
    for i in range(len(ctx.cluster.classes)):
        pctx = ctx.with_cluster(restrict(ctx.cluster, i, ctx.kb))
        pool_report = LintReport()
        _evaluate_all(parsed, pctx, loaded, replace(options, baseline=None), pool_report, None)
        per_pool.append(pool_report.findings)
    rows = [workload_key(object_ref(obj)) for pf in parsed for doc in pf.documents for _p, obj in iter_objects(doc)
            if any(PodAnalysis(pod, ctx).is_gpu_pod for pod in pod_targets(obj, loaded.kb.kinds))]
    return build_matrix([pool_of(c) for c in ctx.cluster.classes], rows, per_pool)


def _evaluate_all(parsed: list[ParsedFile], ctx: EvalContext, loaded: Loaded, options: LintOptions,
                  report: LintReport, keep: list[LintedObject] | None) -> None:
    only = options.only
    rules = loaded.ruleset if only is None else loaded.ruleset.subset(lambda r: r.id in only)
    report.rules = list(rules)
    config = options.config
    remaining = Counter(options.baseline) if options.baseline else None
    for pf in parsed:
        for doc in pf.documents:
            for prefix, obj in iter_objects(doc):
                report.objects += 1
                try:
                    result = evaluate(obj, rules, ctx, severities=config.severities,
                                      duplicates=duplicates_in(doc, prefix),
                                      deadline=time.monotonic() + options.object_budget)
                except OverBudget:
                    path, line, _col = _where(doc, prefix, options)
                    report.add([Diagnostic(path, f"not checked: the object took more than {options.object_budget:g} s "
                                                 "to check (compatcheck's time budget per object)", line,
                                           severity=Severity.WARNING, kind="input")])
                    continue
                located: list[Finding] = []
                for finding in result.findings:
                    path, line, col = _where(doc, prefix + finding.pointer, options)
                    located.append(replace(finding, source=SourceRef(path, line, col)))
                report.objects_seen.append((_path(doc, options), object_ref(obj)))
                for problem in result.problems:
                    path, line, col = _where(doc, prefix + problem.pointer, options)
                    report.add([replace(problem, path=path, line=line, column=col, pointer=prefix + problem.pointer)])
                for pointer, message in result.assumed_classes:  # a note per DRA pod naming a class not in the input
                    path, line, col = _where(doc, prefix + pointer, options)
                    report.add([Diagnostic(path, message, line, col, prefix + pointer, severity=Severity.INFO,
                                           kind="note")])
                if result.gpu:
                    report.gpu_workloads += 1
                    if not result.checked:
                        ref = object_ref(obj)
                        for pointer, reason in dict.fromkeys(result.unchecked):
                            path, line, _col = _where(doc, prefix + pointer, options)
                            report.not_checked.append(NotChecked(ref, path, line, reason))
                kept = _filter(located, obj, config, remaining, report, result.pods, options.baseline_root)
                report.findings.extend(kept)
                if keep is not None:
                    keep.append(LintedObject(pf, doc, prefix, obj, kept))
        _unrendered(pf, loaded, report, options)
        _unread_templates(pf, loaded, report, options)


def _unrendered(pf: ParsedFile, loaded: Loaded, report: LintReport, options: LintOptions) -> None:
    """Documents skipped as unrendered templates that ask for a GPU: GPU workloads, not checked (said, not
    silent)."""
    for line, data, placeholder in pf.unrendered:
        items: list[Any] = [data]
        if isinstance(data, dict) and isinstance(data.get("items"), list):
            items = data["items"]
        for obj in items:
            if isinstance(obj, dict) and asks_for_gpu(obj, loaded.kb.kinds):
                report.gpu_workloads += 1
                path = _template_path(pf, obj, line, options)
                what = "placeholder in a quantity" if _in_quantity(obj, placeholder) else "template not rendered"
                report.not_checked.append(NotChecked(object_ref(obj), path, line, f"{what}: {placeholder!r} (render "
                                                     "it first: envsubst, helm template)"))


def _template_path(pf: ParsedFile, obj: Any, line: int, options: LintOptions) -> str:
    """The file a skipped template's record names: the chart's source file where a Helm render maps it back."""
    if options.source_map is None:
        return pf.path
    return options.source_map(Document(pf.path, 0, obj, line, {}, []), "", line)[0]


# Kinds whose GPU quantities are not a container's request (quotas, queues, autoscalers' node pools, nodes):
# a template of one of them that does not read as YAML is no GPU workload.
_GPU_LIMIT_KINDS = frozenset({"ResourceQuota", "LimitRange", "ElasticQuota", "ClusterQueue", "LocalQueue", "Queue",
                              "ResourceFlavor", "NodePool", "Provisioner", "NodeClass", "EC2NodeClass",
                              "ClusterPolicy", "Cohort"})


def _unread_templates(pf: ParsedFile, loaded: Loaded, report: LintReport, options: LintOptions) -> None:
    """Documents skipped because they do not read as YAML before rendering (``compatcheck.io.templates``) whose text
    asks for a GPU in a container's limits or requests: GPU workloads, not checked, at the line of the request."""
    kinds = loaded.kb.kinds or default_kinds()
    for t in pf.unread_templates:
        if t.kind in _NEVER_WORKLOADS or t.kind in _GPU_LIMIT_KINDS or t.kind in _READ_KINDS:
            continue
        if not t.has_container and (t.kind is None or t.kind not in kinds.names):
            continue  # no container of its own and no kind that has one: not read as a workload
        report.gpu_workloads += 1
        path = _template_path(pf, {}, t.line, options)
        render = "render it first: helm template, or lint the chart with --helm-chart DIR"
        if t.placeholder:
            reason = (f"placeholder in a quantity: {t.resource}: {t.value!r} in a template that does not read as "
                      f"YAML ({render})")
        else:
            reason = (f"template not rendered: the document does not read as YAML before rendering; it asks for "
                      f"{t.resource}: {t.value} ({render})")
        meta = {k: v for k, v in (("name", t.name), ("namespace", t.namespace)) if v is not None}
        ref = object_ref({"apiVersion": t.api_version, "kind": t.kind, "metadata": meta})
        report.not_checked.append(NotChecked(ref, path, t.line, reason))


def _in_quantity(node: Any, placeholder: str, quantities: bool = False) -> bool:
    """Whether ``placeholder`` is a value of a ``limits`` or ``requests`` mapping inside ``node``."""
    if isinstance(node, dict):
        return any((quantities and isinstance(v, str) and placeholder in v)
                   or _in_quantity(v, placeholder, k in ("limits", "requests")) for k, v in node.items())
    if isinstance(node, list):
        return any(_in_quantity(v, placeholder) for v in node)
    return False


def duplicates_in(doc: Document, prefix: str) -> list[DuplicateKey]:
    """The document's duplicate keys inside the object at ``prefix``, with pointers relative to the object."""
    if not doc.duplicates:
        return []
    if not prefix:
        return doc.duplicates
    return [replace(d, pointer=d.pointer[len(prefix):]) for d in doc.duplicates if d.pointer.startswith(prefix + "/")]


def _path(doc: Document, options: LintOptions) -> str:
    """The file findings in ``doc`` name: the document's own, or the template it was rendered from."""
    return options.source_map(doc, "", doc.line)[0] if options.source_map is not None else doc.path


def _where(doc: Document, pointer: str, options: LintOptions) -> tuple[str, int, int]:
    line, col = doc.locate(pointer)
    if options.source_map is not None:
        path, mapped, mapped_col = options.source_map(doc, pointer, line)
        return path, mapped, mapped_col or col
    return doc.path, line, col


def _config_relative(path: str, config: Config) -> str:
    """A file's path as the config file's exemption ``paths`` see it: relative to the config file's directory, so
    they apply wherever compatcheck runs from (the path as given without a config file, or for stdin)."""
    if config.root is None or path == "-":
        return path
    return os.path.relpath(os.path.abspath(path), config.root)


def _filter(findings: list[Finding], obj: dict[str, Any], config: Config,
            remaining: Counter[baseline_mod.Key] | None, report: LintReport,
            pods: list[Any] | None = None, baseline_root: str | None = None) -> list[Finding]:
    kept = []
    for f in findings:
        if config.exempt(f, _config_relative(f.source.path, config) if f.source else None):
            report.suppressed.append(Silenced(f, "config", "exemption in " + (config.path or "config")))
        else:
            kept.append(f)
    if config.annotation_exemptions:
        kept, silenced = split_suppressed(kept, obj, pods)
        report.suppressed.extend(Silenced(f, "annotation", s.reason) for f, s in silenced)
    if remaining is not None:
        from compatcheck.io import baseline as baseline_mod

        fresh = []
        for f in kept:
            k = baseline_mod.key(f, baseline_root)
            if remaining[k] > 0:
                remaining[k] -= 1
                report.suppressed.append(Silenced(f, "baseline", "present in the baseline"))
            else:
                fresh.append(f)
        kept = fresh
    return kept
