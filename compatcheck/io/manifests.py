"""Reading manifest files: YAML/JSON documents with line and column for every field.

This is the linter's only YAML reader for user files. It composes nodes with ruamel.yaml (the C
parser when available) and builds plain dicts/lists itself, recording where each mapping key and
list item starts, so the engine can stay position-agnostic and findings can still point at lines.
Bad input becomes a ``Diagnostic`` (one line, with the line number); nothing here raises to callers.

Manifests are read as kubectl reads them (``resolve_plain``: go-yaml v2's YAML 1.1 scalars, keys as JSON strings,
a duplicate key keeps the last value and is recorded); compatcheck's own files as YAML 1.2 (``resolve_core``,
duplicate keys are errors). The lint passes ``wanted``: documents whose top-level kind cannot matter are found by
a regular-expression scan between '---' lines and never composed (``parse_text``).

Why one module of about 1,000 lines: it is one reader, and its parts are the steps of ``parse_text`` that share
``ParsedFile`` and the positions table: the document builder, the two scalar resolvers, the chunking and kubectl's
separator rules, syntax-error location, the JSON path and the file limits. Kept together, ruamel.yaml stays inside
one module (the pure-core contract forbids it everywhere below io) and every place a position is made is in one
file. Path expansion (``PathFilter``, ``expand_paths``, about 70 lines) is the part that could leave first.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, ReusedAnchorWarning, YAMLError
from ruamel.yaml.events import CollectionEndEvent, CollectionStartEvent, StreamEndEvent
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.resolver import BaseResolver
from ruamel.yaml.tag import Tag

from compatcheck.core.jsonutil import MAX_DEPTH as MAX_JSON_DEPTH
from compatcheck.core.jsonutil import MAX_INT_DIGITS, json_too_deep, refuse_huge_int
from compatcheck.core.model import Diagnostic, DuplicateKey, Severity
from compatcheck.core.pointers import escape_token, split_pointer
from compatcheck.io.templates import TemplateGpu, gpu_request

DEFAULT_MAX_FILE_BYTES = 16 * 1024 * 1024
# Alias expansion ("billion laughs") is bounded per document.
MAX_NODES_PER_DOCUMENT = 500_000
# Nesting is bounded before any composer or decoder sees the text (``nesting_problem``): the C composer recurses once
# per level (100,000 nested '[' crashed the process), and so does building the values. The API server's JSON decoder
# stops at 10,000 levels (Go's encoding/json); no Kubernetes object comes near compatcheck's 128 (jsonutil.MAX_DEPTH).
MAX_DEPTH = MAX_JSON_DEPTH
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
    duplicates: list[DuplicateKey] = field(default_factory=list)

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
    skipped: int = 0  # documents whose kind cannot matter, skipped unparsed (see ``parse_text``'s ``wanted``)
    # Documents skipped as unrendered templates (a ${VAR} or {{ }} value): (line, the data read, the placeholder),
    # for the coverage (a GPU workload among them is "not checked: template not rendered").
    unrendered: list[tuple[int, Any, str]] = field(default_factory=list)
    # Documents skipped because they do not read as YAML before rendering (a Helm template's '{{- if }}' lines) that
    # ask for a GPU, as their text says (``compatcheck.io.templates``): GPU workloads, "not checked" too.
    unread_templates: list[TemplateGpu] = field(default_factory=list)


class _DocumentBuilder:
    """Turns composed nodes into Python values as kubectl reads them, recording positions. A duplicate key keeps
    the last value, as kubectl and the API server do, and is recorded (``strict``: rejected)."""

    def __init__(self, *, track_positions: bool = True, strict: bool = False, line_offset: int = 0) -> None:
        self.positions: dict[int, dict[Any, Position]] = {}
        self.base = line_offset + 1  # a mark's 0-based line + base = the line in the file
        self.track = track_positions
        # compatcheck's own files (``strict``): YAML 1.2 scalars and duplicate keys are errors; manifests: scalars as
        # kubectl reads them and duplicate keys recorded.
        self.strict = strict
        self.resolve = resolve_core if strict else resolve_plain
        self.budget = MAX_NODES_PER_DOCUMENT
        self.depth = 0  # containers being built (aliases can nest deeper than the text)
        self.duplicates: list[tuple[dict[str, Any], str, int, int]] = []  # (mapping, key, first line, last line)

    def build(self, node: Node) -> Any:
        self.budget -= 1
        if self.budget < 0:
            raise _BuildError("document expands to too many nodes (alias bomb?)", node)
        if isinstance(node, ScalarNode):
            return self._scalar(node)
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise _BuildError(f"nested more than {MAX_DEPTH} levels deep", node)
            return self._container(node)
        finally:
            self.depth -= 1

    def _container(self, node: Node) -> Any:
        if isinstance(node, SequenceNode):
            if not self.track:
                return [self.build(child) for child in node.value]
            items: list[Any] = []
            table: dict[Any, Position] = {}
            base = self.base
            for i, child in enumerate(node.value):
                mark = child.start_mark
                table[i] = (mark.line + base, mark.column + 1)
                items.append(self.build(child))
            self.positions[id(items)] = table
            return items
        if isinstance(node, MappingNode):
            return self._mapping(node)
        raise _BuildError(f"unsupported YAML node {type(node).__name__}", node)

    def _mapping(self, node: MappingNode) -> dict[str, Any]:
        # Hot path (every mapping of every manifest): scalar keys and values are resolved inline.
        out: dict[str, Any] = {}
        table: dict[Any, Position] = {}
        from_merge: set[str] | None = None
        track = self.track
        resolve = self.resolve
        for key_node, value_node in node.value:
            if type(key_node) is not ScalarNode:
                raise _BuildError("mapping keys must be plain scalars", key_node)
            suffix = key_node.ctag.suffix
            if suffix == _PLAIN_SUFFIX:
                if key_node.value == "<<":
                    # go-yaml v2 applies a merge where it stands: it overrides the keys before it, the keys after
                    # it override it, and of a list of mappings the first wins.
                    from_merge = from_merge if from_merge is not None else set()
                    for built, built_table in reversed(self._merge_sources(key_node, value_node)):
                        for k, v in built.items():
                            out[k] = v
                            from_merge.add(k)
                            if k in built_table:
                                table[k] = built_table[k]
                    continue
                key = resolve(key_node.value)
            elif suffix == _STR_SUFFIX:
                key = key_node.value
            else:
                key = self._tagged(suffix, key_node.value)
            if type(key) is not str:
                key = json_key(key)
                if key is None:
                    raise _BuildError("a null mapping key (kubectl cannot convert it to JSON)", key_node)
            if key in out:
                if from_merge is not None and key in from_merge:
                    from_merge.discard(key)
                elif self.strict or not track:
                    first = f" (first defined on line {table[key][0]})" if key in table else ""
                    raise _BuildError(f"duplicate key {key!r}{first}", key_node)
                else:
                    self.duplicates.append((out, key, table[key][0], key_node.start_mark.line + self.base))
            if track:
                mark = key_node.start_mark
                table[key] = (mark.line + self.base, mark.column + 1)
            if type(value_node) is ScalarNode:
                self.budget -= 1
                vs = value_node.ctag.suffix
                if vs == _PLAIN_SUFFIX:
                    out[key] = resolve(value_node.value)
                elif vs == _STR_SUFFIX:
                    out[key] = value_node.value
                else:
                    out[key] = self._tagged(vs, value_node.value)
            else:
                out[key] = self.build(value_node)
        if track:
            self.positions[id(out)] = table
        return out

    def _merge_sources(self, key_node: Node, value_node: Node) -> list[tuple[dict[str, Any], dict[Any, Position]]]:
        """YAML 1.1 merge keys (``<<: *anchor``, used in real manifests), as go-yaml v2 takes them: a mapping, an alias
        of one, or a sequence written there whose items are mappings or aliases of mappings. An alias of a sequence
        is refused, as go-yaml refuses it ("map merge requires map or sequence of maps as the value"): the composer
        hands an alias back as the node it names, which starts before the '<<' key."""
        key_at = (key_node.start_mark.line, key_node.start_mark.column)
        aliased = (value_node.start_mark.line, value_node.start_mark.column) < key_at
        if isinstance(value_node, SequenceNode) and aliased:
            raise _BuildError("merge key '<<' of an alias of a sequence: kubectl (go-yaml) takes a mapping, an "
                              "alias of one, or a sequence of them written there", key_node)
        sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
        out = []
        for src in sources:
            if not isinstance(src, MappingNode):
                raise _BuildError("merge key '<<' needs a mapping or a list of mappings", key_node)
            self.depth += 1
            try:
                if self.depth > MAX_DEPTH:
                    raise _BuildError(f"merge keys nested more than {MAX_DEPTH} levels deep", key_node)
                built = self._mapping(src)
            finally:
                self.depth -= 1
            out.append((built, self.positions.get(id(built), {})))
        return out

    def duplicate_keys(self, data: Any) -> list[DuplicateKey]:
        """The duplicate keys found while building ``data``, with their pointers (found by walking the data:
        only when there are any)."""
        if not self.duplicates:
            return []
        where: dict[int, str] = {}
        wanted = {id(m) for m, *_ in self.duplicates}
        stack: list[tuple[Any, str]] = [(data, "")]
        while stack and len(where) < len(wanted):
            value, pointer = stack.pop()
            if isinstance(value, dict):
                if id(value) in wanted:
                    where.setdefault(id(value), pointer)
                stack.extend((v, f"{pointer}/{escape_token(k)}") for k, v in value.items()
                             if isinstance(v, (dict, list)))
            elif isinstance(value, list):
                stack.extend((v, f"{pointer}/{i}") for i, v in enumerate(value) if isinstance(v, (dict, list)))
        return [DuplicateKey(f"{where[id(m)]}/{escape_token(key)}", key, first, line)
                for m, key, first, line in self.duplicates if id(m) in where]

    def _scalar(self, node: ScalarNode) -> Any:
        value: str = node.value
        suffix = node.ctag.suffix
        if suffix == _PLAIN_SUFFIX:
            return self.resolve(value)
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


# Plain scalars are resolved as kubectl reads YAML: sigs.k8s.io/yaml decodes with its fork of go-yaml v2, a YAML 1.1
# reader (https://github.com/kubernetes-sigs/yaml/blob/master/goyaml.v2/resolve.go), then converts the result to JSON
# (https://github.com/kubernetes-sigs/yaml/blob/master/yaml.go). So y/Y/yes/Yes/YES/on/On/ON are true and
# n/N/no/No/NO/off/Off/OFF false (exactly these spellings: oN and yES stay strings), 0755 is octal (493), 0b101
# binary, 1_000 is 1000, 08 is the float 8.0, there are no sexagesimal numbers (1:20 is text) and timestamps
# (2001-12-14) stay strings, as go-yaml v2 hands them to an interface{}. Mapping keys become JSON strings.
_RESOLVE_MAP: dict[str, Any] = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), None),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), float("nan")),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), float("inf")),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), float("-inf")),
}
_MAP_FIRST = frozenset("yYnNtTfFoO~")
_NUMBER_FIRST = frozenset("0123456789+-")
# Go's strconv.ParseInt(s, 0, 64) syntax: a sign, then 0x / 0o / 0b (either case) or a leading 0 for octal.
_GO_INT_RE = re.compile(r"([-+]?)(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)")
_GO_FLOAT_RE = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")  # go-yaml's yamlStyleFloat
_DOT_FLOAT_RE = re.compile(r"\.[0-9]+(?:[eE][-+]?[0-9]+)?")  # what strconv.ParseFloat accepts after a leading '.'
_INT64, _UINT64 = 1 << 63, 1 << 64
_MAX_INT_TEXT = 1000  # digits: far past go-yaml's 64-bit integers, well within Python's int() conversion limit
_NOT_FOUND = object()


def resolve_plain(value: str) -> Any:
    """A plain (unquoted, non-block) scalar as kubectl reads it: go-yaml v2's ``resolve``."""
    first = value[:1]
    if first in _MAP_FIRST or not first:
        return _RESOLVE_MAP.get(value, value)
    if first == ".":
        found = _RESOLVE_MAP.get(value, _NOT_FOUND)
        if found is not _NOT_FOUND:
            return found
        return float(value) if _DOT_FLOAT_RE.fullmatch(value) else value
    if first in _NUMBER_FIRST:
        found = _RESOLVE_MAP.get(value, _NOT_FOUND)
        return found if found is not _NOT_FOUND else _go_number(value)
    return value


def _go_number(value: str) -> Any:
    """ParseInt, then ParseUint, then the float syntax, then a big integer (unsigned only), as go-yaml v2 tries."""
    plain = value.replace("_", "")
    m = _GO_INT_RE.fullmatch(plain) if len(plain) <= _MAX_INT_TEXT else None  # longer: past any int64 and uint64
    if m is not None:
        sign, digits = m.groups()
        base = {"0x": 16, "0o": 8, "0b": 2}.get(digits[:2].lower())
        if base is not None:
            n = int(digits[2:], base)
        else:
            n = int(digits, 8) if digits[0] == "0" else int(digits)  # a leading 0 means octal
        n = -n if sign == "-" else n
        if -_INT64 <= n < _INT64 or (not sign and n < _UINT64):
            return n
        if _GO_FLOAT_RE.fullmatch(plain):
            return _go_float(plain, value)
        return value if sign else n
    if _GO_FLOAT_RE.fullmatch(plain):
        return _go_float(plain, value)
    return value


def _go_float(plain: str, value: str) -> Any:
    """strconv.ParseFloat: past the largest float64 it fails (ErrRange) and go-yaml v2 keeps the scalar as a string,
    where Python's float() would give inf (the API server then reads a 400-digit GPU count as that text)."""
    number = float(plain)
    return number if math.isfinite(number) else value


def json_key(key: Any) -> str | None:
    """A mapping key as sigs.k8s.io/yaml writes it into JSON; None for a key it refuses (null)."""
    if isinstance(key, str):
        return key
    if key is True or key is False:
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float):
        if key != key:
            return ".nan"
        if key in (float("inf"), float("-inf")):
            return ".inf" if key > 0 else "-.inf"
        return _go_float_key(key)
    return None


def _go_float_key(key: float) -> str:
    """strconv.FormatFloat(key, 'g', -1, 32) for the float keys nobody writes (float64 digits, not float32)."""
    exp_text = f"{key:e}".partition("e")[2]
    exp = int(exp_text)
    digits = repr(abs(key)).replace(".", "").lstrip("0").split("e")[0].rstrip("0") or "0"
    if -4 <= exp < 6:
        text = repr(key)
        return text[:-2] if text.endswith(".0") else text
    sign = "-" if key < 0 else ""
    body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{body}e{'-' if exp < 0 else '+'}{abs(exp):02d}"


_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_INT_RE = re.compile(r"[-+]?(?:[0-9][0-9_]*|0o[0-7_]+|0x[0-9a-fA-F_]+)")
_FLOAT_RE = re.compile(r"[-+]?(?:\.[0-9]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?")
_SPECIAL_FLOATS = {".inf": float("inf"), "+.inf": float("inf"), "-.inf": float("-inf"), ".nan": float("nan")}


def resolve_core(value: str) -> Any:
    """YAML 1.2 core schema resolution of a plain scalar: how compatcheck reads its own files (config, rules,
    cluster profiles), where `rule-id: off` means the word off."""
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


_PLAIN_SUFFIX = "tag:compatcheck.io,2024:plain"
_PLAIN = Tag(suffix=_PLAIN_SUFFIX)
_STR_SUFFIX = "tag:yaml.org,2002:str"
_STR, _SEQ, _MAP = (Tag(suffix=f"tag:yaml.org,2002:{t}") for t in ("str", "seq", "map"))


class _PlainResolver(BaseResolver):
    """Leaves plain scalars unresolved (``resolve_plain`` does it, faster than ruamel's per-scalar
    versioned regex walk, which dominated profiles) and tags everything else by node kind."""

    # Read by ruamel's Python parser only (the ``pure`` composer): a ':' with no key before it is an empty key there,
    # as it is in libyaml and go-yaml.
    processing_version = (1, 2)

    def __init__(self, version: Any = None, loader: Any = None, loadumper: Any = None) -> None:
        super().__init__(loadumper=loadumper)

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is ScalarNode:
            return _PLAIN if implicit[0] else _STR
        return _SEQ if kind is SequenceNode else _MAP


_yaml_parsers: dict[bool, YAML] = {}


def _parser(pure: bool = False) -> YAML:
    """The C composer, or (``pure``) ruamel.yaml's Python one: where a document defines an anchor twice, which
    go-yaml accepts (an alias names the latest definition) and the C composer rejects."""
    found = _yaml_parsers.get(pure)
    if found is None:
        found = _yaml_parsers[pure] = YAML(typ="safe", pure=pure)
        found.Resolver = _PlainResolver
    return found


def _reused_anchor(exc: YAMLError) -> bool:
    return "duplicate anchor" in str(getattr(exc, "context", "") or "")


def _yaml_error(path: str, exc: YAMLError, text: str | None = None) -> Diagnostic:
    """The error's line is that of ``text`` (libyaml puts the end of a text without a final newline on the line after
    it: the text's last line is named then)."""
    if isinstance(exc, MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        line = mark.line + 1 if mark is not None else None
        if line is not None and text is not None and not text.endswith("\n") and line > text.count("\n") + 1:
            line = text.count("\n") + 1
        return Diagnostic(path, f"invalid YAML: {problem}", line)
    return Diagnostic(path, f"invalid YAML: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")


def _note(path: str, message: str, line: int | None) -> Diagnostic:
    return Diagnostic(path, message, line, severity=Severity.INFO, kind="note")


HELM_MARKER = re.compile(r"\{\{-?\s*[.$a-zA-Z(]")
# Placeholders of a template that was not rendered: envsubst's ${VAR} (with the shell's :- := :? :+ forms) and
# Go templates' {{ ... }}. A scalar is a placeholder when it has one and no whitespace (an image "repo:${TAG}",
# a quantity "${GPUS}", "--model=${MODEL}"); a shell script in args (sh -c "echo ${HOME}") is not.
# (The default's text and the action are bounded: unbounded, every '${A-' or '{{a' without a closing brace scanned to
# the end of the text, quadratic in a long line of them.)
_ENV_PLACEHOLDER = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::?[-=?+][^}]{0,256})?\}")
_GO_TEMPLATE = re.compile(r"\{\{-?\s{0,64}[.$a-zA-Z(\"][^\n{}]{0,1024}\}\}")
VALUES_FILE = re.compile(r"values[^/\\]*\.ya?ml")  # Helm values files: values.yaml, values-prod.yaml, values.gpu.yml


def is_values_file(name: str) -> bool:
    """A Helm values file's name: ``VALUES_FILE``, or one with a prefix ending in "-", "_" or "." (g5-values.yaml,
    gpu_values.yaml, a flattened charts__app__values.yaml; not "myvalues.yaml"). (Found with str.find: a regular
    expression with an optional prefix before "values" backtracks quadratically when searched.)"""
    at = 0
    while (at := name.find("values", at)) >= 0:
        if at == 0 or name[at - 1] in "-_.":  # the first such "values" decides: the rest is [^/\\]* either way
            return VALUES_FILE.fullmatch(name, at) is not None
        at += 1
    return False

# Document boundaries, as the YAML scanner sees them: '---' or '...' at column 0, then a blank or the line end (no
# scalar may hold such a line, so they are safe to find with a regular expression).
# (Found after a '\n', which the regular-expression engine looks for fast; the text's first line is looked at alone.)
# A document starts at every line starting with '---', as kubectl's YAMLReader cuts them; only blanks or a comment may
# follow, else it is an error (``_kubectl_separators``). When the document is parsed, its '---' line is read as
# kubectl reads it: '---#x' as '--- #x' (YAML alone would read a scalar), '--- |' or '---foo' as '---'.
_DOC_START = re.compile(r"\n---")
_DOC_END = re.compile(r"\n\.\.\.(?=[ \t\r\n]|$)")


def _line_starts(pattern: re.Pattern[str], text: str, start: int = 0, end: int | None = None) -> Iterator[int]:
    """Where ``pattern`` (which starts with a '\n') matches a line of text[start:end], as the line's offset."""
    end = len(text) if end is None else end
    if pattern.match("\n" + text[start:start + 64]) and (start == 0 or text[start - 1] == "\n"):
        yield start
    for m in pattern.finditer(text, start, end):
        yield m.start() + 1
# A top-level 'kind:' (column 0: a key of the document's root block mapping) with a plain or quoted one-word value.
_KIND_NAME = r"[A-Za-z][A-Za-z0-9]*"
_TOP_KIND = re.compile(rf"""^kind:[ \t]*(?:"({_KIND_NAME})"|'({_KIND_NAME})'|({_KIND_NAME}))[ \t]*(?:#.*)?\r?$""", re.M)
_TOP_API_VERSION = re.compile(r"^apiVersion:", re.M)
# Each line: blanks, then a directive or comment (which runs to the '\n', a '\r' included) or a lone '\r' before it.
# One way only to match a line: a '\r?' after the comment, as before, let two alternatives take a CRLF line's '\r',
# and a failed match then backtracked 2**lines ways (a CRLF file headed by a few dozen comment lines).
_ONLY_DIRECTIVES = re.compile(r"(?:[ \t]*(?:[%#][^\n]*|\r)?\n)*[ \t]*(?:[%#][^\n]*)?")

# Whether a document of this kind can matter to the lint (hold a pod spec, be a List, be a CRL ConfigMap), given
# the kind and the document's text. Documents of other kinds are skipped before the position-tracking parse.
KindFilter = Callable[[str, str], bool]


def parse_text(path: str, text: str, *, strict: bool = False, wanted: KindFilter | None = None) -> ParsedFile:
    """Parse all documents of a YAML or JSON text. Documents before a syntax error are kept. ``strict``: a duplicate
    key is an error (compatcheck's own files), not a recorded duplicate (manifests, read as kubectl does).
    ``wanted``: read the documents as kubectl does, one '---' chunk at a time (a syntax error in one loses no other
    document), and skip those whose top-level kind it refuses without composing them (counted in ``skipped``; their
    syntax is still checked by the C parser, which builds nothing)."""
    result = ParsedFile(path=path, documents=[], errors=[], notes=[], text=text)
    if path.endswith(".json") and _after_json_comments(text).startswith(("{", "[")):
        return _parse_json(path, text, result, strict, wanted)
    if wanted is not None and is_values_file(os.path.basename(path)) and not (
            _TOP_KIND.search(text) and _TOP_API_VERSION.search(text)):
        result.notes.append(_note(path, "a Helm values file, not a manifest: skipped (lint the chart with "
                                        f"--helm-chart DIR -f {os.path.basename(path)})", None))
        return result
    if wanted is None:
        _compose(path, text, 0, 0, result, strict, check_templates=False)
        return result
    if "\ufeff" in text:  # a BOM starting a later document (files joined with cat): kubectl decodes each '---' part
        text = _BOM_AFTER_SEPARATOR.sub(r"\1", text)  # on its own, where a leading BOM is skipped
    _kubectl_separators(path, text, result)
    index = 0
    for start, end, chunk_line in _chunks(text):
        chunk = text[start:end]
        if chunk.startswith("---") and not _GOOD_SEPARATOR.match(chunk):
            newline = chunk.find("\n")
            rest = chunk[3:newline if newline >= 0 else len(chunk)].strip()
            chunk = ("--- " + rest if rest.startswith("#") else "---") + (chunk[newline:] if newline >= 0 else "")
        kind = _skippable_kind(text, start, end)
        if kind is not None and not wanted(kind, chunk):
            if not _syntax_error(path, chunk, chunk_line, result):
                result.skipped += 1
                if "{{" in chunk and HELM_MARKER.search(chunk) and not _reads_as_yaml(chunk):
                    _template_gpu(chunk, chunk_line, result)  # a template of a kind not read: GPUs said, not silent
            index += 1
            continue
        index = _compose(path, chunk, chunk_line, index, result, strict, check_templates=True, first_only=True)
    return result


def _chunks(text: str) -> Iterator[tuple[int, int, int]]:
    """(start, end, 0-based line of start) of each document: cut before every '---' line; a part holding only
    directives and comments stays with the document after it."""
    cuts = list(_line_starts(_DOC_START, text))
    starts = [0]
    for c in cuts:
        if c == 0:
            continue
        if _ONLY_DIRECTIVES.fullmatch(text, starts[-1], c):
            continue  # '%YAML 1.1' (or nothing but comments) before this marker: one document with it
        starts.append(c)
    line = 0
    prev = 0
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        line += text.count("\n", prev, start)
        prev = start
        yield start, end, line


# kubectl splits a file into documents itself, line by line, before any YAML parser sees it
# (k8s.io/apimachinery/pkg/util/yaml YAMLReader): a line starting with '---' ends a document and may be followed by
# blanks and a comment only, else the file is rejected ("invalid Yaml document separator"); a directive (%YAML) ends
# up alone in a document of its own, which is rejected too ("did not find expected <document start>"). Both stop
# kubectl for the whole file: compatcheck reports them as errors on their line (and still lints the documents).
_GOOD_SEPARATOR = re.compile(r"---(?:[ \t]+(?:#[^\n]*)?)?\r?(?:\n|$)")
_BOM_AFTER_SEPARATOR = re.compile(r"(?m)^(---[ \t]*(?:#[^\n]*)?\r?\n)\ufeff")
_BAD_SEPARATOR = re.compile(r"\n---(?![ \t]*(?:#[^\n]*)?\r?(?:\n|$))[^\n\r]*")
_DIRECTIVE = re.compile(r"\n%[^\n]*")


def _kubectl_separators(path: str, text: str, result: ParsedFile) -> None:
    for at in _line_starts(_BAD_SEPARATOR, text):
        line = text[at:at + 200].split("\n", 1)[0].strip()
        result.errors.append(Diagnostic(path, f"{line[:40]!r}: kubectl reads a line starting with '---' as a "
                                              "document separator, and only blanks or a comment may follow it "
                                              "(invalid Yaml document separator)", text.count("\n", 0, at) + 1))
    for at in _line_starts(_DIRECTIVE, text):
        after = next(_line_starts(_DOC_START, text, at), None)
        if after is not None and _ONLY_DIRECTIVES.fullmatch(text, at, after):
            line = text[at:at + 200].split("\n", 1)[0].strip()
            result.errors.append(Diagnostic(path, f"{line[:40]!r}: kubectl cannot read a YAML directive (it splits "
                                                  "documents at '---' lines, and the directive alone is no "
                                                  "document)", text.count("\n", 0, at) + 1))


# The syntax of documents skipped unparsed is checked by libyaml's own parser loop (ruamel.yaml.clib's raw_parse: C
# only, no Python object per event, several times faster than composing), which finds every error of the YAML
# syntax with its line, as go-yaml (a port of libyaml) finds it for kubectl. What only composing finds (an alias to
# an anchor nobody defined, a merge key '<<' of no mapping, a key that kubectl cannot turn into JSON) is looked for
# where the text could hold it: an alias-like '*name', a '<<', a '?' key, a null key.
# (Each starts with a literal or a short class, which the regular-expression engine finds fast.)
_COMPOSE_SUSPECTS = tuple(re.compile(p) for p in (
    r"\*(?<=[\s\[{,]\*)[^\s,\[\]{}]",  # an alias (after a blank or a flow indicator)
    # A '?' key, a null or empty key of a block mapping ('(?=(X))\1' matches X without backtracking into it).
    r"\n(?=([ \t-]*))\1(?:\?[ \t\r\n]|(?:~|null|Null|NULL)[ \t]*:[ \t\r\n]|:[ \t\r\n])",
    r"\][ \t]*:[ \t\r\n]",  # a sequence as a key ('[a]: b', '{[a]: b}'), which kubectl cannot turn into JSON
))
# (Not looked for, as no pattern for them is cheap enough: a null key or a mapping as a key inside a flow mapping,
# 'data: {null: x}', '{{a: b}: c}'.)

try:
    from _ruamel_yaml import CParser as _CParser  # type: ignore[import-not-found]  # ruamel.yaml.clib's C parser
except ImportError:  # pragma: no cover - no C extension (PyPy): the Python parser, events only
    _CParser = None


def _raw_parse(text: str) -> None:
    if _CParser is not None:
        _CParser(text).raw_parse()
    else:  # pragma: no cover
        for _event in _parser().parse(text):
            pass


_BLOCK_PREFIX = re.compile(r"^[ \t?:-]*", re.M)  # what a line's block nesting is written with: indentation, '- ', '? '
_TOO_DEEP = f"nested more than {MAX_DEPTH} levels deep (compatcheck's limit; the API server's is 10000)"


def nesting_problem(text: str) -> int | None:
    """The 1-based line of ``text`` where YAML collections nest past ``MAX_DEPTH``, or None. Made before composing
    (the C composer recurses once per level): a count of flow brackets and of the longest run of indentation and
    '-' at a line start bounds the depth; only where that bound is over the limit are the parser's events counted
    (libyaml's parser keeps its own stack: no recursion)."""
    flow = text.count("[") + text.count("{")
    if flow <= MAX_DEPTH // 2 and max(map(len, _BLOCK_PREFIX.findall(text)), default=0) <= MAX_DEPTH // 2:
        return None
    depth = 0
    try:
        events = _CParser(text) if _CParser is not None else None
        stream = iter(events.get_event, None) if events is not None else _parser().parse(text)
        for event in stream:
            if isinstance(event, CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    return int(event.start_mark.line) + 1
            elif isinstance(event, CollectionEndEvent):
                depth -= 1
            elif isinstance(event, StreamEndEvent):
                break
    except YAMLError:
        return None  # a syntax error before the limit: the composer reports it (having recursed no deeper)
    return None


def _syntax_error(path: str, text: str, line_offset: int, result: ParsedFile) -> bool:
    """Check the syntax of a document skipped unparsed (``text`` starts at 0-based line ``line_offset`` of the file):
    whether it had an error, which goes into ``result`` (a document that looks like a template is skipped quietly,
    as its kind cannot matter)."""
    deep = nesting_problem(text)
    if deep is not None:
        result.errors.append(Diagnostic(path, f"invalid YAML: {_TOO_DEEP}", deep + line_offset))
        return True
    try:
        _raw_parse(text)
        if "<<" in text or any(p.search(text) for p in _COMPOSE_SUSPECTS):
            try:
                nodes = list(_parser().compose_all(text))
            except YAMLError as exc:
                if not _reused_anchor(exc):
                    raise
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ReusedAnchorWarning)
                    nodes = list(_parser(pure=True).compose_all(text))
            if nodes and nodes[0] is not None:  # go-yaml reads the first document of a '---' part
                _DocumentBuilder(line_offset=line_offset).build(nodes[0])
    except YAMLError as exc:
        if HELM_MARKER.search(text) or _ENV_PLACEHOLDER.search(text):
            return False
        err = _yaml_error(path, exc, text)
        result.errors.append(Diagnostic(err.path, err.message, err.line + line_offset if err.line else None))
        return True
    except _BuildError as exc:
        if HELM_MARKER.search(text) or _ENV_PLACEHOLDER.search(text):
            return False
        result.errors.append(Diagnostic(path, f"invalid YAML: {exc}", exc.line + line_offset))
        return True
    except RecursionError:
        result.errors.append(Diagnostic(path, "invalid YAML: nesting too deep", line_offset + 1))
        return True
    return False


# What the kind scan trusts: a top-level block mapping starting at column 0 with a plain key, exactly one line
# 'kind: Name' at column 0 (Name a Kubernetes kind name, plain or quoted), and no column-0 line that could hide or
# fake a top-level key: a quoted or flow line (a multi-line quoted scalar or flow collection going on at column 0,
# which libyaml and go-yaml accept), an anchor, tag, alias, '?' key or '<<' merge, or a 'kind' key written any other
# way ('kind :', 'kind:' with the value below it). Anything else is parsed: a false skip loses input, a false parse
# only costs time.
_TOP_SCAN = re.compile(r"""\n(?:kind|["']?kind["']?[ \t]*:|[!&*?"'{\[<%@`|>,\]}])""")
_FIRST_CONTENT = re.compile(r"(?<![ \t])(?:---[ \t]*(?:#[^\n]*|\r)?\n)?(?:[ \t]*(?:#[^\n]*|\r)?\n)*")  # one way a line


def _skippable_kind(text: str, start: int, end: int) -> str | None:
    """The kind of the document text[start:end] when a cheap scan can tell it for sure (see ``_TOP_SCAN``) and no
    '...' marker could start another document. None: parse it to know."""
    first = _FIRST_CONTENT.match(text, start, end)
    if first is None or not _PLAIN_TOP_KEY.match(text, first.end(), end):
        return None  # the root is no block mapping at column 0 with a plain first key (flow, indented, quoted)
    found = None
    heads = [m.start() + 1 for m in _TOP_SCAN.finditer(text, max(start - 1, 0), end)]
    if start == 0 and _TOP_SCAN.match("\n" + text[:8]):
        heads.insert(0, 0)  # the text's first line
    for at in heads:
        kind = _TOP_KIND.match(text, at, end) if text.startswith("kind", at) else None
        if kind is None:
            if text.startswith("kind", at) and not re.match(r"kind[ \t]*:", text[at:at + 40]):
                continue  # 'kinds: ...', 'kind_x: ...': another key
            return None
        if found is not None:
            return None  # twice (a duplicate key, or a scalar that fooled the scan): let the parser decide
        found = kind.group(1) if kind.group(1) is not None else kind.group(2) if kind.group(2) is not None else \
            kind.group(3)
    if found is None or next(_line_starts(_DOC_END, text, start, end), None) is not None:
        return None
    return found


_TOP_ITEMS = re.compile(r"^items:[ \t]*(?:#.*)?\r?$", re.M)
_TOP_KEY = re.compile(r"^[^\s#\-]", re.M)  # a line at column 0 that is neither blank, a comment nor a '-' entry
_PLAIN_TOP_KEY = re.compile(r"(?<![\w.\-/])[A-Za-z_][\w.\-/]*:(?:[ \t]|\r?$)", re.M)
_KIND_VALUE = rf"""kind:[ \t]*(?:"({_KIND_NAME})"|'({_KIND_NAME})'|({_KIND_NAME}))[ \t]*(?:#.*)?\r?$"""


def list_items(text: str) -> list[tuple[str, str]] | None:
    """(kind, text) of each item of a ``kind: *List`` document written in block style, when a cheap scan can tell
    every item's kind for sure: a top-level ``items:`` whose block sequence holds block mappings, each with exactly
    one ``kind:`` among its own keys. None: parse the document to know (flow style, an item without a kind, ...)."""
    heads = list(_TOP_ITEMS.finditer(text))
    if len(heads) != 1:
        return None
    start = heads[0].end()
    end_key = _TOP_KEY.search(text, start)
    if end_key is not None and not _PLAIN_TOP_KEY.match(text, end_key.start()):
        return None  # the line after the items is no top-level key (a quoted scalar's line at column 0?): parse
    region = text[start:end_key.start() if end_key is not None else len(text)]
    first = re.search(r"^([ \t]*)(\S)", region, re.M)
    if first is None:
        return []  # 'items:' with nothing under it: null, no items
    if first.group(2) != "-" or "\t" in first.group(1):
        return None
    dash = len(first.group(1))
    entries = [m.start() for m in re.finditer(rf"^ {{{dash}}}-(?=[ \t]|\r?$)", region, re.M)]
    if not entries or entries[0] != first.start():
        return None
    out: list[tuple[str, str]] = []
    for i, at in enumerate(entries):
        item = region[at:entries[i + 1] if i + 1 < len(entries) else len(region)]
        head = re.match(rf" {{{dash}}}-( +)(\S)?", item)
        if head is None or head.group(2) is None:
            return None  # '-' alone on its line (its mapping starts below), or a tab: parse it
        column = dash + 1 + len(head.group(1))  # the column of the item's own keys
        kinds = [m for m in re.finditer(rf"^(?: {{{dash}}}-{head.group(1)}| {{{column}}}){_KIND_VALUE}", item, re.M)]
        if len(kinds) != 1 or re.search(rf"^ {{{dash}}}-{head.group(1)}[{{\[\-]", item):
            return None  # no kind, two, or a flow mapping / nested sequence as the item
        m = kinds[0]
        out.append((m.group(1) if m.group(1) is not None else m.group(2) if m.group(2) is not None else m.group(3),
                    item))
    return out


_AFTER_END_MARKER = ("text after a '...' end marker and before the next '---' line: kubectl reads nothing there "
                     "(go-yaml reads the first document of each '---' part); skipped")


def _compose(path: str, text: str, line_offset: int, index: int, result: ParsedFile, strict: bool, *,
             check_templates: bool, first_only: bool = False, pure: bool = False) -> int:
    """Compose and build the documents of ``text`` (which starts at 0-based line ``line_offset`` of the file, with
    document number ``index``) into ``result``; the next document number. ``first_only``: ``text`` is one of
    kubectl's '---' chunks, of which go-yaml reads the first document only: what follows a '...' end marker there is
    ignored, with a note."""
    first_index = index
    deep = nesting_problem(text)
    if deep is not None:
        result.errors.append(Diagnostic(path, f"invalid YAML: {_TOO_DEEP}", deep + line_offset))
        return max(index, first_index + 1) if first_only else index
    try:
        for node in _parser(pure).compose_all(text):
            if first_only and index > first_index:
                if node is not None:
                    result.notes.append(_note(path, _AFTER_END_MARKER, node.start_mark.line + 1 + line_offset))
                break
            if node is None:
                index += 1
                continue
            builder = _DocumentBuilder(strict=strict, line_offset=line_offset)
            try:
                data = builder.build(node)
            except _BuildError as exc:
                line = exc.line + line_offset
                lines = text.splitlines()
                bad_line = lines[exc.line - 1] if 0 < exc.line <= len(lines) else ""
                if "{{" in bad_line:
                    result.notes.append(_note(path, f"document {index + 1} looks like an unrendered template "
                                                    "({{ ... }}); skipped", line))
                    if first_only:
                        _template_gpu(text, line_offset, result)
                else:
                    result.errors.append(Diagnostic(path, f"document {index + 1}: {exc}", line))
                index += 1
                continue
            doc_line = node.start_mark.line + 1 + line_offset
            placeholder = _placeholder(data) if check_templates and ("${" in text or "{{" in text) else None
            if placeholder is not None:
                result.unrendered.append((doc_line, data, placeholder))
                result.notes.append(_note(path, f"document {index + 1} looks like an unrendered template "
                                                f"({placeholder!r}); skipped (render it first: envsubst, helm "
                                                "template)", doc_line))
            else:
                result.documents.append(Document(path, index, data, doc_line, builder.positions,
                                                 builder.duplicate_keys(data)))
            index += 1
    except YAMLError as exc:
        if first_only and not pure and index == first_index and _reused_anchor(exc):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ReusedAnchorWarning)
                return _compose(path, text, line_offset, first_index, result, strict,
                                check_templates=check_templates, first_only=True, pure=True)
        err = _yaml_error(path, exc, text)
        if err.line is not None:
            err = Diagnostic(err.path, err.message, err.line + line_offset)
        if first_only and index > first_index and err.line is not None and any(
                at < _offset_of_line(text, err.line - line_offset) for at in _line_starts(_DOC_END, text)):
            result.notes.append(_note(path, _AFTER_END_MARKER, err.line))
        elif HELM_MARKER.search(text) or _ENV_PLACEHOLDER.search(text):
            result.notes.append(
                _note(path, "looks like an unrendered template ({{ ... }} or ${VAR}); skipped the rest of the "
                      + ("document" if first_only else "file") + " (render it first, e.g. helm template)", err.line)
            )
            if first_only and index == first_index:
                _template_gpu(text, line_offset, result)
        else:
            result.errors.append(err)
        index = max(index, first_index + 1) if first_only else index
    except RecursionError:
        result.errors.append(Diagnostic(path, "invalid YAML: nesting too deep", line_offset + 1))
        index = max(index, first_index + 1) if first_only else index
    return index


def _reads_as_yaml(text: str) -> bool:
    try:
        _raw_parse(text)
    except YAMLError:
        return False
    return True


def _template_gpu(text: str, line_offset: int, result: ParsedFile) -> None:
    """Record a document skipped as a template that does not read as YAML, if its text asks for a GPU."""
    found = gpu_request(text, line_offset)
    if found is not None:
        result.unread_templates.append(found)


def _offset_of_line(text: str, line: int) -> int:
    """Where 1-based ``line`` of ``text`` starts."""
    at = 0
    for _ in range(line - 1):
        at = text.find("\n", at) + 1
        if at == 0:
            return len(text)
    return at


# Strings that the container's shell or program expands at run time, never compatcheck: a placeholder there is
# the program's (env: [{value: "${LD_LIBRARY_PATH}:/usr/local/nvidia/lib64"}], args: [--port=${PORT}]).
_RUNTIME_STRINGS = frozenset({"env", "command", "args"})


def _placeholder(data: Any) -> str | None:
    """The first unrendered placeholder among the scalars of a Kubernetes object of a workload kind, if any."""
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str) or not isinstance(
            data.get("apiVersion"), str):
        return None
    stack: list[Any] = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for k, v in value.items():
                if "{{" in k or "${" in k:
                    return str(k)
                if k not in _RUNTIME_STRINGS:
                    stack.append(v)
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str) and ("${" in value or "{{" in value) and "\n" not in value and (
                _GO_TEMPLATE.search(value) or (_ENV_PLACEHOLDER.search(value) and not any(
                    c.isspace() for c in value.strip()))):
            return value
    return None


def load_data(text: str) -> list[Any]:
    """All documents of a YAML/JSON text as plain data, without positions (node files: fast path).
    Raises YAMLError / ValueError (with a line) on bad input."""
    if text.lstrip().startswith(("{", "[")):
        if json_too_deep(text):
            raise ValueError(_TOO_DEEP)
        try:
            return [json.loads(text, parse_int=refuse_huge_int)]
        except json.JSONDecodeError:
            pass  # flow-style YAML, not JSON
    out = []
    deep = nesting_problem(text)
    if deep is not None:
        raise ValueError(f"line {deep}: {_TOO_DEEP}")
    for node in _parser().compose_all(text):
        if node is None:
            continue
        try:
            out.append(_DocumentBuilder(track_positions=False, strict=True).build(node))
        except _BuildError as exc:
            raise ValueError(f"line {exc.line}: {exc}") from None
    return out


_KUBERNETES_JSON = re.compile(r'"apiVersion"\s*:')
# Comments before a JSON file's first '{' (JSON with comments: a devcontainer.json or tsconfig.json headed by '//'
# lines, a licence in a '/* ... */' block): such a file is read as JSON (and, when it is no Kubernetes object,
# skipped quietly as other non-Kubernetes JSON is), not as YAML, which would fail on the comment.
# (Found with str.find, one pass: no regular expression to backtrack over an unclosed '/*'.)


def _after_json_comments(text: str) -> str:
    """The first characters of ``text`` after leading blanks and JSON-with-comments comments."""
    at = 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if text.startswith("//", at):
            end = text.find("\n", at)
        elif text.startswith("/*", at):
            end = text.find("*/", at + 2)
            end = end + 1 if end >= 0 else -1
        else:
            return text[at:at + 64]
        if end < 0:
            return ""
        at = end + 1


def _parse_json(path: str, text: str, result: ParsedFile, strict: bool, wanted: KindFilter | None) -> ParsedFile:
    """A JSON file: read with the json module first (fast); non-Kubernetes JSON (tsconfig.json with comments, a
    Grafana dashboard) is skipped quietly, like non-Kubernetes YAML; Kubernetes objects of a kind ``wanted``
    refuses are skipped; the rest is composed again for positions."""
    if json_too_deep(text):
        if wanted is None or _KUBERNETES_JSON.search(text):
            result.errors.append(Diagnostic(path, f"invalid JSON: {_TOO_DEEP}", _deepest_line(text)))
        return result
    try:
        data: Any = json.loads(text, parse_int=refuse_huge_int)
    except json.JSONDecodeError as exc:
        if wanted is not None and not _KUBERNETES_JSON.search(text):
            return result  # not JSON we could lint, nor JSON that claims to be a Kubernetes object
        data = exc
    except (ValueError, RecursionError) as exc:  # an integer of too many digits (json_too_deep saw the nesting)
        if wanted is None or _KUBERNETES_JSON.search(text):
            what = str(exc) if isinstance(exc, ValueError) else "nested too deep"
            result.errors.append(Diagnostic(path, f"invalid JSON: {what}", _long_number_line(text)))
        return result
    if wanted is not None and not isinstance(data, Exception):
        if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
            return result
        kind = data["kind"]
        items = data.get("items")
        if kind.endswith("List") and isinstance(items, list):
            # A List is skipped when every item is an object whose kind the filter refuses (a List of CRDs).
            skip = all(isinstance(item, dict) and isinstance(item.get("kind"), str)
                       and not item["kind"].endswith("List") and not wanted(item["kind"], text) for item in items)
        else:
            skip = not kind.endswith("List") and not wanted(kind, text)
        if skip:
            result.skipped += 1
            return result
    try:
        # The YAML composer gives positions: JSON is (almost always) valid YAML.
        nodes = list(_parser().compose_all(text))
        if len(nodes) == 1 and nodes[0] is not None:
            builder = _DocumentBuilder(strict=strict)
            built = builder.build(nodes[0])
            result.documents.append(Document(path, 0, built, 1, builder.positions, builder.duplicate_keys(built)))
            return result
    except (YAMLError, _BuildError, RecursionError):
        pass
    if isinstance(data, json.JSONDecodeError):
        result.errors.append(Diagnostic(path, f"invalid JSON: {data.msg}", data.lineno))
        return result
    if isinstance(data, RecursionError):
        result.errors.append(Diagnostic(path, "invalid JSON: nesting too deep"))
        return result
    result.documents.append(Document(path, 0, data, 1))
    return result


_LONG_NUMBER = re.compile(rf"[0-9]{{{MAX_INT_DIGITS + 1}}}")


def _long_number_line(text: str) -> int | None:
    found = _LONG_NUMBER.search(text)
    return text.count("\n", 0, found.start()) + 1 if found else None


def _deepest_line(text: str) -> int:
    """The line where a JSON text's brackets first nest past ``MAX_DEPTH`` (strings left out): only called for a
    text known to be too deep."""
    depth = 0
    for m in _JSON_TOKENS.finditer(text):
        t = m.group()
        if t in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return text.count("\n", 0, m.start()) + 1
        elif t in "]}":
            depth -= 1
    return 1


_JSON_TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"|[\[\]{}]')


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


def read_file(path: str, max_bytes: int = DEFAULT_MAX_FILE_BYTES, *, strict: bool = False,
              wanted: KindFilter | None = None) -> ParsedFile:
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
    return parse_text(path, text, strict=strict, wanted=wanted)


class PathFilter:
    """Input paths to leave out, as .gitignore patterns say (pathspec's implementation of git's rules: ``*`` stays
    within a directory, ``**`` spans them, a leading ``/`` anchors to the base directory, a trailing ``/`` matches
    only directories, ``!`` re-includes). Each group of patterns is relative to its own base directory: the
    working directory for ``--exclude``, the config file's directory for its ``exclude:``."""

    def __init__(self) -> None:
        self._groups: list[tuple[str, Any, list[str], str]] = []  # (base, spec, patterns, where they come from)
        self.hits = 0  # paths left out so far
        self.by_pattern: dict[str, int] = {}  # "'vendor/' (--exclude)": paths it left out

    def add(self, patterns: Iterable[str], base: str, origin: str = "--exclude") -> PathFilter:
        """``origin`` names where the patterns come from in messages: ``--exclude``, ``exclude: in FILE``."""
        lines = [p for p in patterns if p.strip()]
        if lines:
            import pathspec  # lazily: only runs with exclusions pay the import

            self._groups.append((os.path.abspath(base), pathspec.GitIgnoreSpec.from_lines(lines), lines, origin))
        return self

    def __bool__(self) -> bool:
        return bool(self._groups)

    def excluded(self, path: str, *, is_dir: bool = False) -> bool:
        full = os.path.abspath(path)
        for base, spec, lines, origin in self._groups:
            rel = os.path.relpath(full, base)
            if rel == "." or rel.startswith(".." + os.sep) or rel == "..":
                continue  # outside this group's directory: its patterns say nothing about it
            rel = rel.replace(os.sep, "/")
            target = rel + "/" if is_dir else rel
            if hasattr(spec, "check_file"):  # pathspec >= 0.12: which pattern decided
                check = spec.check_file(target)
                matched, index = bool(check.include), check.index
            else:
                matched, index = spec.match_file(target), None
            if matched:
                self.hits += 1
                what = f"{lines[index]!r} ({origin})" if isinstance(index, int) and index < len(lines) else origin
                self.by_pattern[what] = self.by_pattern.get(what, 0) + 1
                return True
        return False


def expand_paths(paths: list[str], exclude: PathFilter | None = None) -> tuple[list[str], list[Diagnostic]]:
    """Files as given; directories recursively (*.yaml, *.yml, *.json), sorted, hidden dirs skipped. ``exclude``
    leaves out what it matches, in walks and among the paths given (pre-commit passes files by name)."""
    files: list[str] = []
    errors: list[Diagnostic] = []
    skip = exclude if exclude else None
    for p in paths:
        if p == "-":
            files.append(p)
        elif os.path.isdir(p):
            if skip is not None and skip.excluded(p, is_dir=True):
                continue
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not (
                    skip is not None and skip.excluded(os.path.join(root, d), is_dir=True)))
                files.extend(f for f in (os.path.join(root, n) for n in sorted(names) if n.endswith(MANIFEST_SUFFIXES))
                             if skip is None or not skip.excluded(f))
        elif os.path.exists(p):
            if skip is None or not skip.excluded(p):
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
