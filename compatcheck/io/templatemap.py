"""Where in a Helm template a field of a rendered object comes from, found by walking the template's own YAML
structure along the finding's JSON pointer, not by matching rendered text (two containers that both say
``- --dtype={{ ... }}`` render alike, and text matching picked the first).

A template is not YAML (``{{ }}`` actions may stand anywhere), so it is read line by line, as YAML's block
structure: indentation, ``key:`` lines, ``- `` items. Lines that are only actions (``{{- if }}``, ``{{- end }}``,
``{{- range }}``) are control flow: they are skipped, and the sequence items under a control line are matched to
the rendered items by their content (a ``name:``, a scalar's literal text) rather than by position. Where the
template cannot say more, the walk goes on in the named template that an ``{{ include "x" . }}`` writes there (its
``define``, found by ``find_defines``), or stops at the action that wrote the value (``{{ toYaml .Values.x |
nindent 8 }}``), else at the deepest line it found. A flow collection (``args: ["--dtype", {{ .Values.d }}]``,
``resources: {limits: {...}}``, over one line or several) is read by a small flow parser and walked to the line and
column of the key or item; an action spanning lines (``{{- include "x" (dict`` ... ``) }}``) is read as one line.
Reads nothing: callers pass lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from compatcheck.core.pointers import split_pointer

# (No "{{" inside an action: a scan from one "{{" stops at the next, so a line of them without "}}" stays linear.)
_ACTION = re.compile(r"\{\{(?:[^{}]|\{(?!\{)|\}(?!\}))*\}\}")
# Actions that write YAML content (not control flow).
_WRITER = re.compile(r"\b(toYaml|toJson|include|template|tpl|toPrettyJson)\b|\.Files\.")
# A named template written here ({{ include "x.podSpec" . | nindent 6 }}): the walk goes on in its define.
_INCLUDE = re.compile(r"\b(?:include|template)\s+\"(?P<name>[^\"]+)\"")
_BLOCK_ACTION = re.compile(r"\{\{-?\s*(?P<word>define|block|if|range|with|end)\b(?:\s+\"(?P<name>[^\"]*)\")?")
MAX_INCLUDE_DEPTH = 8

# A named template: the file that defines it and the lines of its body (start inclusive, end exclusive).
Define = tuple[str, list[str], int, int]


def find_defines(files: dict[str, list[str]]) -> dict[str, Define]:
    """The ``{{ define "name" }}`` blocks of a chart's template files (``_helpers.tpl`` and the others), matched
    to their own ``{{ end }}`` across nested if/range/with blocks."""
    out: dict[str, Define] = {}
    for path, lines in files.items():
        stack: list[tuple[str, str | None, int]] = []
        for number, line in enumerate(lines):
            for m in _BLOCK_ACTION.finditer(line):
                word = m.group("word")
                if word != "end":
                    stack.append((word, m.group("name"), number))
                elif stack:
                    opened, name, start = stack.pop()
                    if opened == "define" and name and name not in out:
                        out[name] = (path, lines, start + 1, number)
    return out
# (The key ends on a non-blank: a lazy key before "\s*:" rescanned the blanks at every step, quadratic.)
_KEY = re.compile(r"""^(?P<key>"[^"]*"|'[^']*'|[^\s#'"{\[](?:[^:#]*[^\s:#])?)\s*:(?:\s+(?P<value>.*))?$""")


@dataclass(frozen=True)
class _Line:
    number: int  # 1-based line of the template file
    indent: int
    text: str  # without indentation; for an item, what follows "- "
    item: bool = False  # a "- " sequence entry (its content, if any, is the next _Line at indent + 2)
    control: bool = False  # only template actions: control flow or generated content


def _logical(lines: list[str], start: int, end: int) -> list[tuple[int, str]]:
    """(0-based line, text) of ``lines[start:end]``, an action that spans lines (``{{- include "x" (dict`` ... ``}}``)
    joined into the line where it starts."""
    out: list[tuple[int, str]] = []
    i = start
    while i < end:
        text = lines[i]
        first = i
        while i + 1 < end and _ACTION.sub("", text).count("{{") > 0:
            i += 1
            text = text.rstrip() + " " + lines[i].strip()
        out.append((first, text))
        i += 1
    return out


def _records(lines: list[str], start: int, end: int) -> list[_Line]:
    """The significant lines of ``lines[start:end]``: comments and blanks dropped, "- key: v" split in two, an action
    over several lines read as one line."""
    out: list[_Line] = []
    block_indent: int | None = None  # inside a block scalar (| or >) deeper than this indent
    for i, text in _logical(lines, start, end):
        raw = text.rstrip()
        stripped = raw.lstrip(" ")
        indent = len(raw) - len(stripped)
        if not stripped or stripped.startswith("#"):
            continue
        if block_indent is not None:
            if indent > block_indent:
                continue
            block_indent = None
        if not _ACTION.sub("", stripped).strip():
            out.append(_Line(i + 1, indent, stripped, control=True))
            continue
        while stripped.startswith("- ") or stripped == "-":
            out.append(_Line(i + 1, indent, stripped[2:].lstrip(), item=True))
            rest = stripped[1:].lstrip(" ")
            indent += len(stripped) - len(rest)
            stripped = rest
        if stripped:
            out.append(_Line(i + 1, indent, stripped))
            m = _KEY.match(_ACTION.sub("x", stripped))
            value = (m.group("value") or "") if m else ""
            if value[:1] in ("|", ">"):
                block_indent = indent
    return out


def _key(text: str) -> str | None:
    """The key of a ``key: value`` line (actions inside the key are kept as they are), or None."""
    masked = _ACTION.sub(lambda m: "x" * len(m.group(0)), text)
    m = _KEY.match(masked)
    if not m:
        return None
    key = text[:len(m.group("key"))]
    return key[1:-1] if key[:1] in "\"'" and key[-1:] == key[:1] else key


def _inline(text: str) -> str:
    """What follows ``key:`` on its line."""
    masked = _ACTION.sub(lambda m: "x" * len(m.group(0)), text)
    m = _KEY.match(masked)
    return text[m.start("value"):].strip() if m and m.group("value") is not None else ""


class TemplateWalker:
    """Maps JSON pointers of one rendered object to lines of the template document it was rendered from (and of
    the named templates it includes, given ``defines``)."""

    def __init__(self, records: list[_Line], path: str = "", defines: dict[str, Define] | None = None,
                 lines: list[str] | None = None) -> None:
        self.records = records
        self.path = path
        self.defines = defines or {}
        self.lines = lines or []  # the file's lines: flow collections are read from them

    @classmethod
    def of(cls, lines: list[str], obj: Any, ordinal: int = 0, path: str = "",
           defines: dict[str, Define] | None = None) -> TemplateWalker:
        """The walker over the template document that rendered ``obj``: the file's documents (split at ``---``)
        whose literal ``kind:`` is the object's; among several, the one whose literal ``name:`` is its name, else
        the ``ordinal``-th (the object's rank among the documents this template rendered)."""
        bounds, start = [], 0
        for i, line in enumerate(lines):
            if line.startswith("---"):
                bounds.append((start, i))
                start = i + 1
        bounds.append((start, len(lines)))
        docs = [r for r in (_records(lines, a, b) for a, b in bounds)
                if any(not x.control or _WRITER.search(x.text) for x in r)]
        if not docs:
            return cls([], path, defines, lines)
        kind = obj.get("kind") if isinstance(obj, dict) else None
        name = (obj.get("metadata") or {}).get("name") if isinstance(obj, dict) else None

        def top(doc: list[_Line], key: str) -> str | None:
            indent = min((r.indent for r in doc if not r.control), default=0)
            for r in doc:
                if r.indent == indent and not r.control and _key(r.text) == key:
                    return _inline(r.text)
            return None

        def literal_name(doc: list[_Line]) -> str | None:
            line = cls(doc)._find(["metadata", "name"], obj)[1]
            rec = next((r for r in doc if r.number == line and _key(r.text) == "name"), None)
            return _inline(rec.text).strip("\"'") if rec is not None else None

        same_kind = [d for d in docs if top(d, "kind") in (kind, None)] or docs
        if len(same_kind) > 1 and name:
            named = [d for d in same_kind if literal_name(d) == name]
            if len(named) == 1:
                return cls(named[0], path, defines, lines)
        return cls(same_kind[min(ordinal, len(same_kind) - 1)], path, defines, lines)

    def line(self, pointer: str, obj: Any) -> int | None:
        """The line of the deepest node of ``pointer`` the template spells out (None: not even the first key)."""
        return self.where(pointer, obj)[1]

    def where(self, pointer: str, obj: Any) -> tuple[str, int | None]:
        """The file and line of the deepest node of ``pointer`` the template, or a named template it includes,
        spells out; (this template's path, None) when not even the first key is."""
        path, line, _column = self._find(split_pointer(pointer), obj)
        return path, line

    def where_column(self, pointer: str, obj: Any) -> tuple[str, int | None, int | None]:
        """``where`` with the column where it is known (inside a flow collection: the key's or item's own column);
        None: the line's content starts it."""
        return self._find(split_pointer(pointer), obj)

    # ------------------------------------------------------------------------------------------------ walking

    def _find(self, tokens: list[str], obj: Any, depth: int = 0) -> tuple[str, int | None, int | None]:
        region = list(range(len(self.records)))
        best: tuple[str, int | None, int | None] = (self.path, None, None)
        node = obj
        for k, token in enumerate(tokens):
            if not region:
                break
            if isinstance(node, list):
                if not token.isdigit() or int(token) >= len(node):
                    break
                found = self._item(region, int(token), node)
                child = node[int(token)]
            elif isinstance(node, dict):
                if token not in node:
                    break
                found = self._entry(region, token)
                child = node[token]
            else:
                break
            if found is None:
                # Not spelled out here: the action that writes this part of the object ({{ toYaml ... }},
                # {{ include ... }}) is the line that wrote the value, when there is exactly one; an included
                # named template is walked on.
                writers = [self.records[i] for i in region if self.records[i].control
                           and _WRITER.search(self.records[i].text)]
                if len(writers) == 1:
                    best = (self.path, writers[0].number, None)
                    m = _INCLUDE.search(writers[0].text)
                    if m and m.group("name") in self.defines and depth < MAX_INCLUDE_DEPTH:
                        path, lines, start, end = self.defines[m.group("name")]
                        inner = TemplateWalker(_records(lines, start, end), path, self.defines, lines)
                        deeper = inner._find(tokens[k:], node, depth + 1)
                        if deeper[1] is not None:
                            best = deeper
                break
            best, region = (self.path, found[0], None), found[1]
            flow = self._flow_at(found[0], token if isinstance(node, dict) else None)
            node = child
            if flow is not None:  # a flow collection ({...} or [...], over one line or several): walked in it
                line, column = _walk_flow(flow, tokens[k + 1:], node)
                return (self.path, line, column) if line is not None else best
        return best

    def _flow_at(self, number: int, key: str | None) -> Flow | None:
        """The flow collection ({...} or [...], over one line or several) that is the value of ``key`` (None: of the
        item) on line ``number`` (1-based), if that value is one."""
        if not 0 < number <= len(self.lines):
            return None
        raw = self.lines[number - 1]
        at = len(raw) - len(raw.lstrip(" "))
        while raw.startswith("- ", at) or raw.startswith("-\t", at):
            at += 1
            at += len(raw[at:]) - len(raw[at:].lstrip(" \t"))
        if key is not None:
            rest = raw[at:]
            if _key(rest) != key:
                return None
            value = _inline(rest)
            if not value:
                return None
            at = raw.index(value, at)
        if raw[at:at + 1] not in ("[", "{") or raw.startswith("{{", at):
            return None
        return _FlowParser(self.lines, number - 1, at).collection()

    def _children(self, region: list[int]) -> tuple[int | None, list[int]]:
        """The indent of ``region``'s top level and its (non-control) records there."""
        first = next((i for i in region if not self.records[i].control), None)
        if first is None:
            return None, []
        indent = self.records[first].indent
        return indent, [i for i in region if self.records[i].indent == indent and not self.records[i].control]

    def _block(self, region: list[int], at: int) -> list[int]:
        """The records under the record at position ``at`` of ``region`` (deeper-indented, up to a dedent)."""
        rec = self.records[region[at]]
        out = []
        for i in region[at + 1:]:
            r = self.records[i]
            if r.indent < rec.indent:
                break
            # At the record's own indent: control lines may open its block ({{- if }}); a key's sequence may sit
            # at the key's own indent ("containers:\n- name: x"); anything else is a sibling.
            if r.indent == rec.indent and not r.control and (rec.item or not r.item):
                break
            out.append(i)
        # Trailing control lines at the record's own indent belong to what follows.
        while out and self.records[out[-1]].control and self.records[out[-1]].indent <= rec.indent:
            out.pop()
        return out

    def _entry(self, region: list[int], key: str) -> tuple[int, list[int]] | None:
        _indent, tops = self._children(region)
        for i in tops:
            rec = self.records[i]
            if rec.item:
                continue
            if _key(rec.text) == key:
                at = region.index(i)
                return rec.number, self._block(region, at)
        return None

    def _item(self, region: list[int], index: int, items: list[Any]) -> tuple[int, list[int]] | None:
        _indent, tops = self._children(region)
        entries = [i for i in tops if self.records[i].item]
        if not entries:
            return None
        controlled = any(self.records[i].control for i in region if self.records[i].indent <= self.records[
            entries[0]].indent)
        blocks = {i: self._block(region, region.index(i)) for i in entries}
        if not controlled and len(entries) == len(items):
            i = entries[index]
            return self.records[i].number, self._content(i, blocks[i])
        # Items are generated or conditional: match the rendered item by what the template spells out (ties go
        # to the item nearest the rendered position).
        wanted = items[index]
        scored = [(self._score(i, blocks[i], wanted), -abs(n - index), i) for n, i in enumerate(entries)]
        score, _distance, i = max(scored)
        if score <= 0:
            tops_controls = [j for j in region if self.records[j].control and self.records[j].indent <= self.records[
                entries[0]].indent]
            if any(_WRITER.search(self.records[j].text) for j in tops_controls):
                return None  # an action beside the items writes this one ({{ include "x.sidecar" . }}): walk on there
            if len(entries) == 1 and controlled:  # a range over one item template
                return self.records[entries[0]].number, self._content(entries[0], blocks[entries[0]])
            return None
        return self.records[i].number, self._content(i, blocks[i])

    def _content(self, item: int, block: list[int]) -> list[int]:
        """The region of an item's content: the mapping that starts on its "- " line and what is under it."""
        return block

    def _score(self, item: int, block: list[int], wanted: Any) -> int:
        """How well a template item matches a rendered item (0: not at all)."""
        if isinstance(wanted, dict):
            score = 0
            _indent, tops = self._children(block)
            for i in tops:
                rec = self.records[i]
                key = _key(rec.text) if not rec.item else None
                if key is None or key not in wanted:
                    continue
                value = _inline(rec.text).strip("\"'")
                got = wanted[key]
                if isinstance(got, (dict, list)):
                    score += 1
                elif _literal_matches(value, str(got)):
                    score += 10 if key == "name" else 2
                elif key == "name" and "{{" not in value:
                    return 0  # another item: its name is written out and is not this one's
            return score
        first = next((self.records[i] for i in block if not self.records[i].control), None)
        text = self.records[item].text or (first.text if first else "")
        return len(_literal(text)) + 1 if _literal_matches(text.strip("\"'"), str(wanted)) else 0


def _literal(text: str) -> str:
    return text.strip("\"'").split("{{", 1)[0]


def _literal_matches(template: str, rendered: str) -> bool:
    """Whether a template scalar can render as ``rendered``: equal when it has no action, else the literal text
    between its actions appears in order."""
    if "{{" not in template:
        return template == rendered
    parts = [p for p in _ACTION.split(template.strip("\"'"))]
    pos = 0
    for n, part in enumerate(parts):
        if not part:
            continue
        found = rendered.find(part, pos)
        if found < 0 or (n == 0 and found != 0):
            return False
        pos = found + len(part)
    return not parts[-1] or rendered.endswith(parts[-1])


# ---------------------------------------------------------------------------------------------- flow collections

# A flow collection read from the template text: ("map", [(key, line, column, child)]), ("seq", [(line, column,
# child)]) or ("scalar", text); lines and columns 1-based.
Flow = tuple[str, Any]


class _FlowParser:
    """Reads the flow collection starting at ``lines[line][column]`` (``{`` or ``[``), over as many lines as it
    takes; template actions ({{ ... }}) are part of the scalars they stand in. None where it is not one."""

    def __init__(self, lines: list[str], line: int, column: int) -> None:
        self.lines = lines
        self.line = line
        self.col = column

    def _char(self) -> str:
        while self.line < len(self.lines):
            text = self.lines[self.line]
            if self.col < len(text):
                return text[self.col]
            self.line += 1
            self.col = 0
            if self.line < len(self.lines):
                return "\n"
        return ""

    def _skip_blanks(self) -> None:
        while True:
            c = self._char()
            if c in (" ", "\t", "\n"):
                if c == "\n":
                    continue
                self.col += 1
            elif c == "#" and (self.col == 0 or self.lines[self.line][self.col - 1] in " \t"):
                self.col = len(self.lines[self.line])
            else:
                return

    def collection(self) -> Flow | None:
        try:
            return self._node()
        except (ValueError, IndexError):
            return None

    def _node(self) -> Flow:
        self._skip_blanks()
        c = self._char()
        if c == "[" and not self._at("{{"):
            return self._sequence()
        if c == "{" and not self._at("{{"):
            return self._mapping()
        return ("scalar", self._scalar())

    def _at(self, text: str) -> bool:
        return self.lines[self.line].startswith(text, self.col) if self.line < len(self.lines) else False

    def _sequence(self) -> Flow:
        self.col += 1
        items: list[tuple[int, int, Flow]] = []
        while True:
            self._skip_blanks()
            c = self._char()
            if c == "]":
                self.col += 1
                return ("seq", items)
            if not c:
                raise ValueError("unclosed [")
            at = (self.line + 1, self.col + 1)
            items.append((*at, self._node()))
            self._skip_blanks()
            if self._char() == ",":
                self.col += 1
            elif self._char() != "]":
                raise ValueError("expected , or ]")

    def _mapping(self) -> Flow:
        self.col += 1
        entries: list[tuple[str, int, int, Flow]] = []
        while True:
            self._skip_blanks()
            c = self._char()
            if c == "}":
                self.col += 1
                return ("map", entries)
            if not c:
                raise ValueError("unclosed {")
            at = (self.line + 1, self.col + 1)
            key = self._scalar(key=True)
            self._skip_blanks()
            value: Flow = ("scalar", "")
            if self._char() == ":":
                self.col += 1
                value = self._node()
            entries.append((key.strip("\"'"), *at, value))
            self._skip_blanks()
            if self._char() == ",":
                self.col += 1
            elif self._char() != "}":
                raise ValueError("expected , or }")

    def _scalar(self, key: bool = False) -> str:
        """A quoted or plain scalar (with its actions), up to the ',' ']' '}' (or a key's ':') that ends it."""
        self._skip_blanks()
        text = self.lines[self.line]
        start = self.col
        if text[start:start + 1] in ("\"", "'"):
            quote = text[start]
            i = start + 1
            while i < len(text):
                if quote == '"' and text[i] == "\\":
                    i += 2
                    continue
                if text[i] == quote:
                    if quote == "'" and text[i + 1:i + 2] == "'":
                        i += 2
                        continue
                    break
                i += 1
            self.col = i + 1
            return text[start:self.col]
        i = start
        while i < len(text):
            if text.startswith("{{", i):
                end = text.find("}}", i)
                if end < 0:
                    raise ValueError("an action over several lines inside a flow collection")
                i = end + 2
                continue
            c = text[i]
            if c in ",]}" or (c == ":" and (i + 1 == len(text) or text[i + 1] in " ,]}")) or (
                    c == "#" and i > start and text[i - 1] in " \t"):
                break
            if c in "[{":
                raise ValueError("a bracket inside a plain scalar")
            i += 1
        self.col = i
        return text[start:i].strip()


def _walk_flow(flow: Flow, tokens: list[str], node: Any) -> tuple[int | None, int | None]:
    """The line and column of the deepest node of ``tokens`` in a flow collection (None, None: the collection's own
    key or item line is the deepest)."""
    best: tuple[int | None, int | None] = (None, None)
    for token in tokens:
        kind, content = flow
        if kind == "map" and isinstance(node, dict) and token in node:
            matches = [e for e in content if e[0] == token]
            if len(matches) != 1:
                break
            _key, line, column, flow = matches[0]
            node = node[token]
        elif kind == "seq" and isinstance(node, list) and token.isdigit() and int(token) < len(node):
            index = int(token)
            if len(content) == len(node):
                line, column, flow = content[index]
            else:  # items written by actions: the one whose literal text matches
                wanted = str(node[index])
                hits = [c for c in content if c[2][0] == "scalar" and "{{" not in c[2][1]
                        and c[2][1].strip("\"'") == wanted]
                if len(hits) != 1:
                    break
                line, column, flow = hits[0]
            node = node[index]
        else:
            break
        best = (line, column)
    return best
