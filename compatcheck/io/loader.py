"""Loading what the engine needs from disk: rule files, data tables, node lists, cluster profiles and
CRL ConfigMaps. The only module besides ``manifests`` and ``cli`` that touches the filesystem.

Built-in rules are read from the package (``compatcheck/_rules`` in a wheel, the repository's
``rules/`` in a checkout) and trusted: the test-suite validates them. Admin rule directories are
always validated against the schemas, and every problem is reported before anything is used.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compatcheck.core.cluster import (
    Cluster,
    about_node,
    build_cluster,
    node_problems,
    node_record,
)
from compatcheck.core.crl import CRL_TYPE, CrlIndex, build_index, claims_crl
from compatcheck.core.drakinds import INVENTORY_KINDS
from compatcheck.core.knowledge import KnowledgeBase, KnowledgeError
from compatcheck.core.model import Applicability, Diagnostic
from compatcheck.core.profiles import PROVIDER_LABELS, profile_to_nodes
from compatcheck.core.rules import Rule, RuleSet, build_rule, schema_problems
from compatcheck.core.workloads import KindTable, build_kind_table, install_default_kinds
from compatcheck.io.datastate import Knowledge
from compatcheck.io.manifests import (
    Document,
    expand_paths,
    iter_objects,
    list_items,
    load_data,
    parse_text,
    read_file,
)

if TYPE_CHECKING:
    from compatcheck.io import rulecache

# Former table names an admin's files may still use: their rows join the table's (admin rows first).
TABLE_ALIASES = {"image-patterns": "image-profiles"}


def builtin_rules_dir() -> Path:
    """``compatcheck/_rules`` in an installed wheel, else a source checkout's top-level ``rules/``. Found from this
    file's path, as ``importlib.resources.files`` finds a package installed in a directory (importing
    ``importlib.resources`` costs a lint's start-up more than reading the rules from the cache does)."""
    package = Path(__file__).resolve().parents[1]
    packaged = package / "_rules"
    if packaged.is_dir():
        return packaged
    return package.parent / "rules"  # a source checkout: the top-level rules/


@cache
def packaged_schema(name: str) -> dict[str, Any]:
    from importlib import resources

    text = resources.files("compatcheck.schemas").joinpath(name).read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


@cache
def builtin_kinds() -> KindTable:
    """The built-in workload-kinds table (``rules/data/workload-kinds.yaml``; the test-suite validates it), the
    default of ``compatcheck.core.workloads.pod_targets``."""
    path = builtin_rules_dir() / "data" / "workload-kinds.yaml"
    (data,) = load_data(path.read_text("utf-8"))
    return build_kind_table(data["rows"])


install_default_kinds(builtin_kinds)


class RuleLoadError(Exception):
    """Invalid rule or data-table files: every problem, as diagnostics of kind ``rules``."""

    def __init__(self, problems: list[Diagnostic]) -> None:
        super().__init__(f"{len(problems)} problem(s) in rule files")
        self.problems = problems


@dataclass
class Loaded:
    ruleset: RuleSet
    kb: KnowledgeBase
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    knowledge: Knowledge | None = None  # where the built-in part came from (None: the installed package)


def _yaml_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


def _trusted_parse(text: str) -> list[Any]:
    try:
        return load_data(text)
    except Exception:  # any parser failure: the careful read in _parse_one says what and where
        return []


def _parse_one(path: Path, problems: list[Diagnostic], *, trusted: bool = False,
               cached: dict[Path, list[Any]] | None = None) -> dict[str, Any] | None:
    if trusted:
        # Built-in files are validated by the test-suite: skip position tracking (cold start matters), and take
        # the parse from the cache of built-in files (``io.rulecache``) when ``cached`` has it. One that does
        # not parse as a mapping (an edited or damaged install) is read again the careful way, for file:line.
        docs = cached[path] if cached is not None and path in cached else _trusted_parse(path.read_text("utf-8"))
        if len(docs) == 1 and isinstance(docs[0], dict):
            data: dict[str, Any] = docs[0]
            data["__doc__"] = None
            return data
    parsed = read_file(str(path), strict=True)
    problems.extend(replace(err, kind="rules") for err in parsed.errors)
    if parsed.errors:
        return None
    if len(parsed.documents) != 1 or not isinstance(parsed.documents[0].data, dict):
        problems.append(Diagnostic(str(path), "expected exactly one YAML mapping", kind="rules"))
        return None
    doc = parsed.documents[0]
    data = doc.data
    data["__doc__"] = doc
    return data


def _with_lines(problems: list[Diagnostic], doc: Any) -> list[Diagnostic]:
    return [replace(p, line=_line(doc, p.pointer) or p.line) for p in problems]


def _line(doc: Any, pointer: str) -> int | None:
    return doc.locate(pointer)[0] if doc is not None else None


def load_rules(extra_dirs: list[str] | None = None, *, validate_builtin: bool = False,
               base: Path | None = None) -> Loaded:
    """Built-in rules and tables plus admin directories (``<dir>/*.yaml`` rules, ``<dir>/data/*.yaml``
    tables). ``base``: the rules directory that stands for the built-in one (a data bundle's, see
    ``io.datastate``; read as trusted unless ``validate_builtin``). Raises RuleLoadError listing every problem."""
    problems: list[Diagnostic] = []
    rules: dict[str, Rule] = {}
    builtin_tables: dict[str, list[dict[str, Any]]] = {}
    admin_tables: dict[str, list[dict[str, Any]]] = {}
    builtin_dir = base or builtin_rules_dir()
    if not _yaml_files(builtin_dir):  # a broken install or checkout: never lint with no rules at all
        raise RuleLoadError([Diagnostic(str(builtin_dir), "the built-in rules are missing (a broken install?)",
                                        kind="rules")])
    dirs: list[tuple[Path, bool]] = [(builtin_dir, True)]
    for d in extra_dirs or []:
        if not os.path.isdir(d):
            problems.append(Diagnostic(d, "rules directory does not exist", kind="rules"))
            continue
        dirs.append((Path(d), False))
    read: rulecache.Read | None = None
    for directory, builtin in dirs:
        validate = validate_builtin or not builtin
        cached: dict[Path, list[Any]] | None = None
        if not validate:  # the built-in files, read as trusted: their parse comes from the cache
            from compatcheck.io import rulecache

            read = rulecache.read([*_yaml_files(directory / "data"), *_yaml_files(directory)], _trusted_parse)
            cached = read.files
        for path in _yaml_files(directory / "data"):
            data = _parse_one(path, problems, trusted=not validate, cached=cached)
            if data is None:
                continue
            doc = data.pop("__doc__")
            if validate or not isinstance(data.get("table"), str) or not isinstance(data.get("rows"), list):
                found = _table_problems(data, packaged_schema("table.schema.json"), str(path))
                if found:
                    problems.extend(_with_lines(found, doc))
                    continue
            target = builtin_tables if builtin else admin_tables
            name = TABLE_ALIASES.get(data["table"], data["table"])
            rows = data["rows"]
            if name == "image-profiles" and data.get("asOf"):  # findings assumed from a row say the table's date
                rows = [{**row, "asOf": str(data["asOf"])} if isinstance(row, dict) else row for row in rows]
            target.setdefault(name, []).extend(rows)
        for path in _yaml_files(directory):
            data = _parse_one(path, problems, trusted=not validate, cached=cached)
            if data is None:
                continue
            doc = data.pop("__doc__")
            try:
                rule, found = build_rule(data, str(path), builtin=builtin, validate=validate,
                                         rule_schema=packaged_schema("rule.schema.json") if validate else None)
            except Exception:  # an unvalidated built-in file that does not fit: validate it
                data = _parse_one(path, problems) or {"__doc__": None}
                doc = data.pop("__doc__")
                rule, found = build_rule(data, str(path), builtin=builtin, validate=True,
                                         rule_schema=packaged_schema("rule.schema.json"))
            if found:
                problems.extend(_with_lines(found, doc))
                continue
            assert rule is not None
            if validate and rule.mutate_by_default and rule.fix_applicability is not Applicability.SAFE:
                fix = rule.fix_applicability.value if rule.fix_applicability else "no"
                problems.append(Diagnostic(str(path), f"webhook.mutate: default needs a check with a safe fix; "
                                                      f"check {rule.check.name} has {fix} fix here",
                                           _line(doc, "/webhook/mutate"), pointer="/webhook/mutate", kind="rules"))
                continue
            if rule.id != path.stem:
                problems.append(Diagnostic(str(path), f"rule id {rule.id!r} must equal the file name {path.stem!r}",
                                           _line(doc, "/id"), pointer="/id", kind="rules"))
                continue
            if rule.id in rules:
                if builtin or data.get("overrides") != rule.id:
                    problems.append(Diagnostic(str(path), f"rule {rule.id!r} is already defined by "
                                               f"{rules[rule.id].origin}; add 'overrides: {rule.id}' to replace it",
                                               _line(doc, "/id"), pointer="/id", kind="rules"))
                    continue
            elif data.get("overrides"):
                problems.append(Diagnostic(str(path),
                                           f"overrides names {data['overrides']!r}, which is not a built-in rule",
                                           _line(doc, "/overrides"), pointer="/overrides", kind="rules"))
                continue
            rules[rule.id] = rule
    tables = {name: admin_tables.get(name, []) + builtin_tables.get(name, [])
              for name in set(builtin_tables) | set(admin_tables)}
    # Built-in rows read from a cache entry passed every check of this build when the entry was written
    # (``rulecache.Read.store`` below): their regular expressions are compiled when first used.
    trusted = {id(row) for rows in builtin_tables.values() for row in rows} if read is not None and read.hit else None
    kb = KnowledgeBase()
    try:
        kb = KnowledgeBase.from_tables(tables, (lambda row: id(row) in trusted) if trusted else None)
    except (KnowledgeError, KeyError, TypeError, ValueError) as exc:
        if not validate_builtin and not problems:  # say which built-in row, with its file and line
            return load_rules(extra_dirs, validate_builtin=True, base=base)
        problems.append(Diagnostic(str(builtin_dir / "data") if base else "rules/data", f"data tables: {exc}",
                                   kind="rules"))
    if problems:
        raise RuleLoadError(problems)
    if read is not None:
        read.store()
    return Loaded(RuleSet(rules), kb, tables)


def _table_problems(data: dict[str, Any], schema: dict[str, Any], path: str) -> list[Diagnostic]:
    found = schema_problems(data, schema, path)
    if found:
        return found
    row_schema = dict(schema["$defs"]["rows"][data["table"]])
    row_schema["$defs"] = schema["$defs"]
    sources = data["sources"]
    for i, row in enumerate(data["rows"]):
        for p in schema_problems(row, row_schema, path):
            found.append(Diagnostic(path, f"rows[{i}]: {p.message}", pointer=f"/rows/{i}{p.pointer}", kind="rules"))
        for pointer, ref in _sources_in(row, f"/rows/{i}"):
            if isinstance(ref, str) and ref not in sources and "://" not in ref:
                found.append(Diagnostic(path, f"rows[{i}]: source {ref!r} is neither a key of sources nor a URL",
                                        pointer=pointer, kind="rules"))
        found.extend(Diagnostic(path, f"rows[{i}]: {what} depends on the version but has no version range "
                                      f"(equals, from or before): say which releases the source covers",
                                pointer=pointer, kind="rules")
                     for pointer, what in _unranged(data["table"], row, f"/rows/{i}"))
    return found


_RANGE_KEYS = ("equals", "from", "before")
# Tables whose every row is about some versions of a framework or wheel (an unranged row would claim every release,
# past and future, although a source covers only those it was read at).
_VERSIONED_TABLES = ("framework-features", "torch-wheels")


def _unranged(table: str, row: Any, pointer: str) -> list[tuple[str, str]]:
    """Where a version-dependent row (or release of an image family whose tags carry a version) lacks a version
    range: (pointer, what) pairs."""
    if not isinstance(row, dict):
        return []
    if table in _VERSIONED_TABLES:
        return [] if any(k in row for k in _RANGE_KEYS) else [(pointer, "the row")]
    if table in ("image-profiles", "image-patterns") and "(?P<version>" in str(row.get("pattern", "")):
        return [(f"{pointer}/versions/{j}", f"release {j} of {row.get('name')!r}")
                for j, rel in enumerate(row.get("versions") or [])
                if isinstance(rel, dict) and not any(k in rel for k in _RANGE_KEYS)]
    return []


def _sources_in(value: Any, pointer: str) -> list[tuple[str, Any]]:
    """Every ``source`` inside a row (its versions, binaries, forward-compat entries), with its pointer."""
    out: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            here = f"{pointer}/{k}"
            if k == "source":
                out.append((here, v))
            else:
                out.extend(_sources_in(v, here))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_sources_in(v, f"{pointer}/{i}"))
    return out


# ------------------------------------------------------------------------------------------ nodes


def load_nodes(path: str, kb: KnowledgeBase, max_bytes: int) -> tuple[Cluster | None, list[Diagnostic]]:
    """``kubectl get nodes -o yaml|json`` output, Node documents, or a ClusterProfile: the cluster (None when the
    file has errors) and its diagnostics. Errors are of kind ``nodes``; what a node's labels or allocatable say
    that cannot be read is a warning, once per node class, naming a node and located at its label.

    ResourceSlices and DeviceClasses (``kubectl get resourceslices,deviceclasses -o yaml``), alone or beside the
    Nodes, are the cluster's DRA inventory; a profile's DRA pools become ResourceSlices too."""
    from ruamel.yaml.error import YAMLError

    try:
        size = os.path.getsize(path)
        if size > max_bytes:
            return None, [Diagnostic(path, f"node file is {size / 1e6:.1f} MB, over the limit (--max-file-size)",
                                     kind="nodes")]
        text = Path(path).read_text("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [Diagnostic(path, f"cannot read node file: {exc}", kind="nodes")]
    try:
        docs = load_data(text)
    except json.JSONDecodeError as exc:
        return None, [Diagnostic(path, f"invalid JSON: {exc.msg}", exc.lineno, kind="nodes")]
    except ValueError as exc:
        return None, [Diagnostic(path, f"invalid node file: {exc}", kind="nodes")]
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        return None, [Diagnostic(path, f"invalid YAML: {problem}", mark.line + 1 if mark else None,
                                 kind="nodes")]
    except RecursionError:
        return None, [Diagnostic(path, "invalid node file: nesting too deep", kind="nodes")]
    nodes: list[dict[str, Any]] = []
    dra: list[dict[str, Any]] = []  # ResourceSlices and DeviceClasses
    # Where each DeviceClass (and ResourceSlice) written in the file is: (object, document index, pointer).
    class_sources: list[tuple[dict[str, Any], int, str]] = []
    # Where each node came from: (document index, pointer of the Node or of the profile's pool, from a profile?).
    sources: list[tuple[int, str, bool]] = []
    errors: list[Diagnostic] = []
    lines = _Lines(path, text)
    for index, doc in enumerate(docs):
        if not isinstance(doc, dict):
            errors.append(Diagnostic(path, "expected a Node, a List of Nodes or a ClusterProfile", kind="nodes"))
            continue
        kind = doc.get("kind")
        if kind == "ClusterProfile":
            # The schema first (types, enums, unknown keys), then what it cannot see; both located.
            from compatcheck.io import validcache

            problems = validcache.problems(doc, "clusterprofile.schema.json", path, "nodes")
            found: list[dict[str, Any]] = []
            if not problems:
                found, problems = profile_to_nodes(doc, kb)
            dra.extend(n for n in found if n.get("kind") != "Node")
            found = [n for n in found if n.get("kind") == "Node"]
            nodes.extend(found)
            if not problems:  # each pool became ``count`` nodes, in order
                sources.extend((index, f"/nodePools/{i}", True) for i, pool in enumerate(doc["nodePools"])
                               for _ in range(pool.get("count", 1)))
            errors.extend(replace(p, path=path, message=f"ClusterProfile {p.message}",
                                  line=lines.line(index, p.pointer)) for p in problems)
        elif kind in ("List", "NodeList", "ResourceSliceList", "DeviceClassList", "DeviceTaintRuleList") and \
                isinstance(doc.get("items"), list):
            default = {"ResourceSliceList": "ResourceSlice", "DeviceClassList": "DeviceClass",
                       "DeviceTaintRuleList": "DeviceTaintRule"}.get(kind, "Node")
            for i, n in enumerate(doc["items"]):
                if isinstance(n, dict) and n.get("kind", default) == "Node":
                    nodes.append(n)
                    sources.append((index, f"/items/{i}", False))
                elif isinstance(n, dict) and n.get("kind", default) in INVENTORY_KINDS:
                    dra.append({**n, "kind": n.get("kind", default)})
                    class_sources.append((dra[-1], index, f"/items/{i}"))
        elif kind == "Node":
            nodes.append(doc)
            sources.append((index, "", False))
        elif kind in INVENTORY_KINDS:
            dra.append(doc)
            class_sources.append((doc, index, ""))
        else:
            errors.append(Diagnostic(path, f"expected Node, List of Nodes, ResourceSlice, DeviceClass, "
                                           f"DeviceTaintRule or ClusterProfile, found kind {kind!r}", kind="nodes"))
    if errors:
        return None, errors
    if not nodes and not any(o.get("kind") == "ResourceSlice" for o in dra):
        return None, [Diagnostic(path, "the node file contains no nodes", kind="nodes")]
    cluster = build_cluster(nodes, kb)
    if any(o.get("kind") == "ResourceSlice" for o in dra):
        from compatcheck.core.dra import build_inventory

        cluster.dra = build_inventory(dra)
    for obj, index, pointer in class_sources:
        name = (obj.get("metadata") or {}).get("name") if isinstance(obj.get("metadata"), dict) else None
        if obj.get("kind") == "DeviceClass" and isinstance(name, str):
            cluster.device_class_origins[name] = (obj.get("spec"), path,
                                                  lines.line(index, f"{pointer}/metadata/name"))
    cluster.admission_plugins = frozenset(p for doc in docs if isinstance(doc, dict) and doc.get("kind") ==
                                          "ClusterProfile" for p in doc.get("admissionPlugins") or ())
    if all(from_profile for _i, _p, from_profile in sources):  # a hand-written cluster: silent about some labels
        cluster.unknown_keys = frozenset(k for k in PROVIDER_LABELS
                                         if not any(k in (n["metadata"].get("labels") or {}) for n in nodes))
    return cluster, _node_warnings(cluster, nodes, sources, lines)


class _Lines:
    """Lines of pointers in a file read without positions (the fast path): parsed again, with positions, only
    when something must be located."""

    def __init__(self, path: str, text: str) -> None:
        self.path, self.text = path, text
        self._docs: list[Document] | None = None

    def line(self, index: int, pointer: str) -> int | None:
        if self._docs is None:
            self._docs = parse_text(self.path, self.text, strict=True).documents  # read as load_data read it
        return self._docs[index].locate(pointer)[0] if index < len(self._docs) else None


def _node_warnings(cluster: Cluster, nodes: list[dict[str, Any]], sources: list[tuple[int, str, bool]],
                   lines: _Lines) -> list[Diagnostic]:
    problems = list(node_problems(cluster))
    if not problems:
        return []
    where: dict[str, tuple[int, str, bool]] = {}
    if len(sources) == len(nodes):
        for node, source in zip(nodes, sources, strict=True):
            where.setdefault(node_record(node).name, source)
    out = []
    for cls, problem in problems:
        d = about_node(cls, problem)
        found = where.get(cls.members[0].name)
        if found is None:
            out.append(replace(d, path=lines.path))
            continue
        index, prefix, pool = found
        pointer = prefix + problem.pointer
        if pool:  # a profile's pool: its labels and resources become the synthetic Nodes'
            pointer = prefix + problem.pointer.replace("/metadata/labels/", "/labels/", 1).replace(
                "/status/allocatable/", "/resources/", 1)
        out.append(replace(d, path=lines.path, line=lines.line(index, pointer), pointer=pointer))
    return out


# ------------------------------------------------------------------------------------------ CRLs


@dataclass(frozen=True)
class CrlSource:
    """A ConfigMap that claims to be a CRL, and where it was read (for the lines of its problems)."""

    path: str
    obj: dict[str, Any]
    doc: Document | None = None
    prefix: str = ""  # the object's pointer in ``doc`` (a List's item)

    def line(self, pointer: str) -> int | None:
        return self.doc.locate(self.prefix + pointer)[0] if self.doc is not None else None


def may_hold_crl(kind: str, text: str) -> bool:
    """Whether a document of ``kind`` (its text: ``text``) may be, or hold, a cf-crl CRL ConfigMap: the cheap test
    that lets every other document be skipped before the position-tracking parse."""
    if kind.endswith("List"):
        items = list_items(text)
        return items is None or any(k.endswith("List") or may_hold_crl(k, t) for k, t in items)
    return kind == "ConfigMap" and (CRL_TYPE in text or "cf-crl-" in text)


def load_crl_objects(paths: list[str], max_bytes: int) -> tuple[list[CrlSource], list[Diagnostic]]:
    files, missing = expand_paths(paths)
    errors = [replace(e, kind="crl") for e in missing]
    found: list[CrlSource] = []
    for f in files:
        # read one '---' part at a time, as lint inputs are: a broken document loses no CRL after it
        parsed = read_file(f, max_bytes, wanted=may_hold_crl)
        errors.extend(replace(e, kind="crl") for e in parsed.errors)
        for doc in parsed.documents:
            for prefix, obj in iter_objects(doc):
                if claims_crl(obj):
                    found.append(CrlSource(f, obj, doc, prefix))
    return found, errors


def crl_index(objects: list[CrlSource]) -> tuple[CrlIndex, list[Diagnostic]]:
    """The index of the valid, enabled CRLs, and an error for each invalid one (ignored whole), at the line of
    its first problem."""
    index, invalid = build_index([src.obj for src in objects])
    source = {id(src.obj): src for src in objects}
    errors = []
    for obj, problems in invalid:
        src, first = source[id(obj)], problems[0]
        name = obj.get("metadata", {}).get("name")
        errors.append(Diagnostic(src.path, f"invalid CRL ConfigMap {name!r} ignored: {first.message}",
                                 src.line(first.pointer), pointer=src.prefix + first.pointer, kind="crl"))
    return index, errors


__all__ = ["CrlSource", "Loaded", "RuleLoadError", "builtin_rules_dir", "crl_index", "load_crl_objects", "load_nodes",
           "load_rules", "may_hold_crl"]
