"""Reading manifest files: YAML/JSON documents with line and column for every field.

This is the linter's only YAML reader for user files. It composes nodes with ruamel.yaml (the C
parser when available) and builds plain dicts/lists itself, recording where each mapping key and
list item starts, so the engine can stay position-agnostic and findings can still point at lines.
Bad input becomes a ``Diagnostic`` (one line, with the line number); nothing here raises to callers.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.resolver import BaseResolver
from ruamel.yaml.tag import Tag

from compatcheck.core.model import Diagnostic, Severity
from compatcheck.core.pointers import split_pointer

DEFAULT_MAX_FILE_BYTES = 16 * 1024 * 1024
# Alias expansion ("billion laughs") is bounded per document.
MAX_NODES_PER_DOCUMENT = 500_000
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")

Position = tuple[int, int]  # 1-based line, 1-based column


@dataclass
class Document:
    """One YAML document (or JSON file) with a side table of positions keyed by container identity."""

    path: str
    index: int
    data: Any
    line: int
    positions: dict[int, dict[Any, Position]] = field(default_factory=dict, repr=False)

    def locate(self, pointer: str) -> Position:
        """Line/column of the deepest existing node on ``pointer`` (missing tails map to their parent)."""
        node: Any = self.data
        best: Position = (self.line, 1)
        for token in split_pointer(pointer):
            table = self.positions.get(id(node))
            if isinstance(node, dict):
                key: Any = token
                if key not in node:
                    break
            elif isinstance(node, list):
                if not token.isdigit() or int(token) >= len(node):
                    break
                key = int(token)
            else:
                break
            if table is not None and key in table:
                best = table[key]
            node = node[key]
        return best


@dataclass
class ParsedFile:
    path: str
    documents: list[Document]
    errors: list[Diagnostic]
    notes: list[Diagnostic]  # severity info, kind "note": what was skipped on purpose
    text: str | None = None


class _DocumentBuilder:
    """Turns composed nodes into Python values, recording positions and rejecting duplicate keys."""

    def __init__(self, *, track_positions: bool = True) -> None:
        self.positions: dict[int, dict[Any, Position]] = {}
        self.track = track_positions
        self.budget = MAX_NODES_PER_DOCUMENT

    def build(self, node: Node) -> Any:
        self.budget -= 1
        if self.budget < 0:
            raise _BuildError("document expands to too many nodes (alias bomb?)", node)
        if isinstance(node, ScalarNode):
            return self._scalar(node)
        if isinstance(node, SequenceNode):
            if not self.track:
                return [self.build(child) for child in node.value]
            items: list[Any] = []
            table: dict[Any, Position] = {}
            for i, child in enumerate(node.value):
                table[i] = _mark(child)
                items.append(self.build(child))
            self.positions[id(items)] = table
            return items
        if isinstance(node, MappingNode):
            return self._mapping(node)
        raise _BuildError(f"unsupported YAML node {type(node).__name__}", node)

    def _mapping(self, node: MappingNode) -> dict[Any, Any]:
        # Hot path (every mapping of every manifest): scalar keys and values are resolved inline.
        out: dict[Any, Any] = {}
        table: dict[Any, Position] = {}
        merged: list[tuple[dict[Any, Any], dict[Any, Position]]] = []
        track = self.track
        for key_node, value_node in node.value:
            if type(key_node) is not ScalarNode:
                raise _BuildError("mapping keys must be plain scalars", key_node)
            suffix = key_node.ctag.suffix
            if suffix == _PLAIN_SUFFIX:
                if key_node.value == "<<":
                    merged.extend(self._merge_sources(value_node))
                    continue
                key = resolve_plain(key_node.value)
            elif suffix == _STR_SUFFIX:
                key = key_node.value
            else:
                key = self._tagged(suffix, key_node.value)
            if key in out:
                first = f" (first defined on line {table[key][0]})" if key in table else ""
                raise _BuildError(f"duplicate key {key!r}{first}", key_node)
            if track:
                mark = key_node.start_mark
                table[key] = (mark.line + 1, mark.column + 1)
            if type(value_node) is ScalarNode:
                self.budget -= 1
                vs = value_node.ctag.suffix
                if vs == _PLAIN_SUFFIX:
                    out[key] = resolve_plain(value_node.value)
                elif vs == _STR_SUFFIX:
                    out[key] = value_node.value
                else:
                    out[key] = self._tagged(vs, value_node.value)
            else:
                out[key] = self.build(value_node)
        for built, built_table in merged:
            for k, v in built.items():
                if k not in out:
                    out[k] = v
                    if k in built_table:
                        table[k] = built_table[k]
        if track:
            self.positions[id(out)] = table
        return out

    def _merge_sources(self, value_node: Node) -> list[tuple[dict[Any, Any], dict[Any, Position]]]:
        """YAML 1.1 merge keys (``<<: *anchor``, used in real manifests): explicit keys win."""
        sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
        out = []
        for src in sources:
            if not isinstance(src, MappingNode):
                raise _BuildError("merge key '<<' needs a mapping or a list of mappings", src)
            built = self._mapping(src)
            out.append((built, self.positions.get(id(built), {})))
        return out

    def _scalar(self, node: ScalarNode) -> Any:
        value: str = node.value
        suffix = node.ctag.suffix
        if suffix == _PLAIN_SUFFIX:
            return resolve_plain(value)
        if suffix == _STR_SUFFIX:  # quoted and block scalars
            return value
        return self._tagged(suffix, value)

    @staticmethod
    def _tagged(tag: str, value: str) -> Any:
        if tag == "tag:yaml.org,2002:null":
            return None
        if tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool"):
            resolved = resolve_plain(value)
            return resolved if not isinstance(resolved, str) else value
        # !!str, timestamps, binary and custom tags stay as their text, as Kubernetes would read them.
        return value


_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_INT_RE = re.compile(r"[-+]?(?:[0-9][0-9_]*|0o[0-7_]+|0x[0-9a-fA-F_]+)")
_FLOAT_RE = re.compile(r"[-+]?(?:\.[0-9]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?")
_SPECIAL_FLOATS = {".inf": float("inf"), "+.inf": float("inf"), "-.inf": float("-inf"), ".nan": float("nan")}


def resolve_plain(value: str) -> Any:
    """YAML 1.2 core schema resolution of a plain scalar (what Kubernetes' YAML reader does)."""
    if value in _NULLS:
        return None
    first = value[0]
    if first in "tTfF":
        return _BOOLS.get(value, value)
    if first in "0123456789+-.":
        if _INT_RE.fullmatch(value):
            text = value.replace("_", "")
            try:
                if text.lstrip("+-").startswith(("0o", "0x")):
                    return int(text, 0)
                return int(text)
            except ValueError:
                return value
        if _FLOAT_RE.fullmatch(value):
            try:
                return float(value.replace("_", ""))
            except ValueError:
                return value
        special = _SPECIAL_FLOATS.get(value.lower())
        if special is not None:
            return special
    return value


class _BuildError(Exception):
    def __init__(self, message: str, node: Node) -> None:
        super().__init__(message)
        self.line = node.start_mark.line + 1


def _mark(node: Node) -> Position:
    return (node.start_mark.line + 1, node.start_mark.column + 1)


_PLAIN_SUFFIX = "tag:compatcheck.io,2024:plain"
_PLAIN = Tag(suffix=_PLAIN_SUFFIX)
_STR_SUFFIX = "tag:yaml.org,2002:str"
_STR, _SEQ, _MAP = (Tag(suffix=f"tag:yaml.org,2002:{t}") for t in ("str", "seq", "map"))


class _PlainResolver(BaseResolver):
    """Leaves plain scalars unresolved (``resolve_plain`` does it, faster than ruamel's per-scalar
    versioned regex walk, which dominated profiles) and tags everything else by node kind."""

    def __init__(self, version: Any = None, loader: Any = None, loadumper: Any = None) -> None:
        super().__init__(loadumper=loadumper)

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is ScalarNode:
            return _PLAIN if implicit[0] else _STR
        return _SEQ if kind is SequenceNode else _MAP


_yaml_parser: YAML | None = None


def _parser() -> YAML:
    global _yaml_parser
    if _yaml_parser is None:
        _yaml_parser = YAML(typ="safe", pure=False)
        _yaml_parser.Resolver = _PlainResolver
    return _yaml_parser


def _yaml_error(path: str, exc: YAMLError) -> Diagnostic:
    if isinstance(exc, MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        line = mark.line + 1 if mark is not None else None
        return Diagnostic(path, f"invalid YAML: {problem}", line)
    return Diagnostic(path, f"invalid YAML: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")


def _note(path: str, message: str, line: int | None) -> Diagnostic:
    return Diagnostic(path, message, line, severity=Severity.INFO, kind="note")


HELM_MARKER = re.compile(r"\{\{-?\s*[.$a-zA-Z(]")


def parse_text(path: str, text: str) -> ParsedFile:
    """Parse all documents of a YAML or JSON text. Documents before a syntax error are kept."""
    result = ParsedFile(path=path, documents=[], errors=[], notes=[], text=text)
    if path.endswith(".json") and text.lstrip().startswith(("{", "[")):
        return _parse_json(path, text, result)
    index = 0
    try:
        for node in _parser().compose_all(text):
            if node is None:
                index += 1
                continue
            builder = _DocumentBuilder()
            try:
                data = builder.build(node)
            except _BuildError as exc:
                bad_line = text.splitlines()[exc.line - 1] if 0 < exc.line <= text.count("\n") + 1 else ""
                if "{{" in bad_line:
                    result.notes.append(_note(path, f"document {index + 1} looks like an unrendered template "
                                                    "({{ ... }}); skipped", exc.line))
                else:
                    result.errors.append(Diagnostic(path, f"document {index + 1}: {exc}", exc.line))
                index += 1
                continue
            result.documents.append(Document(path, index, data, node.start_mark.line + 1, builder.positions))
            index += 1
    except YAMLError as exc:
        err = _yaml_error(path, exc)
        if HELM_MARKER.search(text):
            result.notes.append(
                _note(path, "looks like an unrendered template ({{ ... }}); skipped the rest of the file"
                      " (render it first, e.g. helm template)", err.line)
            )
        else:
            result.errors.append(err)
    except RecursionError:
        result.errors.append(Diagnostic(path, "invalid YAML: nesting too deep"))
    return result


def load_data(text: str) -> list[Any]:
    """All documents of a YAML/JSON text as plain data, without positions (node files: fast path).
    Raises YAMLError / ValueError (with a line) on bad input."""
    if text.lstrip().startswith(("{", "[")):
        try:
            return [json.loads(text)]
        except json.JSONDecodeError:
            pass  # flow-style YAML, not JSON
    out = []
    for node in _parser().compose_all(text):
        if node is None:
            continue
        try:
            out.append(_DocumentBuilder(track_positions=False).build(node))
        except _BuildError as exc:
            raise ValueError(f"line {exc.line}: {exc}") from None
    return out


def _parse_json(path: str, text: str, result: ParsedFile) -> ParsedFile:
    try:
        # Prefer the YAML composer for positions: JSON is (almost always) valid YAML 1.2.
        nodes = list(_parser().compose_all(text))
        if len(nodes) == 1 and nodes[0] is not None:
            builder = _DocumentBuilder()
            data = builder.build(nodes[0])
            result.documents.append(Document(path, 0, data, 1, builder.positions))
            return result
    except (YAMLError, _BuildError, RecursionError):
        pass
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        result.errors.append(Diagnostic(path, f"invalid JSON: {exc.msg}", exc.lineno))
        return result
    except RecursionError:
        result.errors.append(Diagnostic(path, "invalid JSON: nesting too deep"))
        return result
    result.documents.append(Document(path, 0, data, 1))
    return result


def decode(path: str, raw: bytes, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> tuple[str | None, Diagnostic | None]:
    if len(raw) > max_bytes:
        return None, Diagnostic(
            path, f"file is {len(raw) / 1e6:.1f} MB, over the {max_bytes // (1024 * 1024)} MiB limit (--max-file-size)"
        )
    if b"\x00" in raw[:8192]:
        return None, Diagnostic(path, "binary file (contains NUL bytes), not YAML or JSON")
    try:
        return raw.decode("utf-8-sig"), None
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        return None, Diagnostic(path, "not UTF-8 text (binary file?)", line)


def read_file(path: str, max_bytes: int = DEFAULT_MAX_FILE_BYTES) -> ParsedFile:
    try:
        if path == "-":
            raw = sys.stdin.buffer.read(max_bytes + 1)
        else:
            size = os.path.getsize(path)
            if size > max_bytes:
                return ParsedFile(path, [], [Diagnostic(
                    path, f"file is {size / 1e6:.1f} MB, over the {max_bytes // (1024 * 1024)} MiB limit"
                    " (--max-file-size)")], [])
            raw = Path(path).read_bytes()
    except OSError as exc:
        return ParsedFile(path, [], [Diagnostic(path, f"cannot read: {exc.strerror or exc}")], [])
    text, err = decode(path, raw, max_bytes)
    if err is not None or text is None:
        return ParsedFile(path, [], [err] if err else [], [])
    return parse_text(path, text)


def expand_paths(paths: list[str]) -> tuple[list[str], list[Diagnostic]]:
    """Files as given; directories recursively (*.yaml, *.yml, *.json), sorted, hidden dirs skipped."""
    files: list[str] = []
    errors: list[Diagnostic] = []
    for p in paths:
        if p == "-":
            files.append(p)
        elif os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                files.extend(os.path.join(root, n) for n in sorted(names) if n.endswith(MANIFEST_SUFFIXES))
        elif os.path.exists(p):
            files.append(p)
        else:
            errors.append(Diagnostic(p, "no such file or directory"))
    return files, errors


def iter_objects(doc: Document) -> Iterator[tuple[str, dict[str, Any]]]:
    """Kubernetes objects in a document with their pointer prefix; ``kind: List`` is unwrapped."""
    data = doc.data
    if not isinstance(data, dict):
        return
    if data.get("kind") == "List" or (
        isinstance(data.get("kind"), str) and data["kind"].endswith("List") and isinstance(data.get("items"), list)
    ):
        items = data.get("items")
        if isinstance(items, list):
            for i, item in enumerate(items):
                if is_kubernetes_object(item):
                    yield f"/items/{i}", item
        return
    if is_kubernetes_object(data):
        yield "", data


def is_kubernetes_object(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("kind"), str)
        and isinstance(data.get("apiVersion"), str)
    )
