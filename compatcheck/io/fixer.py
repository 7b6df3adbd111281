"""``compatcheck fix``: apply fixes to manifest files in place, keeping comments, key order, quoting and the
indentation of untouched lines (ruamel.yaml round-trip).

Only documents that change are re-emitted; every other document keeps its original text byte for byte. Each
fix is applied whole or not at all (a skipped fix is reported, never half-applied), with the same RFC 6902
code the webhook uses (``fixes.apply_ops``). Running it twice is a no-op.
"""

from __future__ import annotations

import difflib
import io
import itertools
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from compatcheck.core.model import Applicability, Finding, PatchOp
from compatcheck.core.patches import FixError, apply_ops, select_fixes
from compatcheck.io.lint import LintedObject

_SEPARATOR = re.compile(r"^(?:---|\.\.\.)(?:\s.*)?$")


@dataclass
class FileFix:
    path: str
    original: str
    fixed: str
    applied: list[Finding] = field(default_factory=list)
    skipped: list[tuple[Finding, str]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.fixed != self.original

    def diff(self) -> str:
        return "".join(difflib.unified_diff(self.original.splitlines(keepends=True),
                                            self.fixed.splitlines(keepends=True),
                                            fromfile=f"a/{self.path}", tofile=f"b/{self.path}"))


def detect_indent(text: str) -> tuple[int, int, int]:
    """(mapping, sequence, offset) as ruamel.yaml wants them: the most common block styles of the file.

    ruamel applies one style to a whole emitted document, so a document that mixes styles is normalised
    to its dominant one; documents that are not changed keep their text exactly."""
    mappings: Counter[int] = Counter()
    offsets: Counter[int] = Counter()
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    for a, b in itertools.pairwise(lines):
        if not re.match(r"^\s*(?:- )?[^\s#-][^:]*:\s*$", a):
            continue
        ia = len(a) - len(a.lstrip()) + (2 if a.lstrip().startswith("- ") else 0)
        ib = len(b) - len(b.lstrip())
        if b.lstrip().startswith("- "):
            if ib >= ia:
                offsets[ib - ia] += 1
        elif ib > ia:
            mappings[ib - ia] += 1
    m = mappings.most_common(1)[0][0] if mappings else 2
    o = offsets.most_common(1)[0][0] if offsets else 2
    return m, o + 2, o


def _rt_yaml(text: str) -> Any:
    from ruamel.yaml import YAML

    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 4096
    m, s, o = detect_indent(text)
    y.indent(mapping=m, sequence=s, offset=o)
    return y


def _styled(value: Any, quote: str) -> Any:
    """Inserted strings that YAML would otherwise read as numbers/bools get the file's usual quote style."""
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString, SingleQuotedScalarString

    from compatcheck.io.manifests import resolve_plain

    if isinstance(value, str) and value and not isinstance(resolve_plain(value), str):
        return DoubleQuotedScalarString(value) if quote == '"' else SingleQuotedScalarString(value)
    if isinstance(value, dict):
        return {k: _styled(v, quote) for k, v in value.items()}
    if isinstance(value, list):
        return [_styled(v, quote) for v in value]
    return value


def fix_file(path: str, text: str, objects: Iterable[LintedObject], allow: set[Applicability],
             allowed_rule: Any = None) -> FileFix:
    """Apply the allowed fixes of ``objects`` (all from ``path``) to ``text``."""
    result = FileFix(path, text, text)
    per_doc: dict[int, list[tuple[str, Finding]]] = {}
    for lo in objects:
        candidates = [f for f in lo.findings if allowed_rule is None or allowed_rule(f.rule_id)]
        for f in select_fixes(candidates, allow):
            per_doc.setdefault(lo.doc.index, []).append((lo.prefix, f))
    if not per_doc:
        return result
    yaml = _rt_yaml(text)
    try:
        docs = list(yaml.load_all(text))
    except Exception as exc:  # the linter parsed it; ruamel's round-trip loader may still disagree
        # A duplicate key (yaml-duplicate-key) stops ruamel's round-trip loader, which could only keep the first
        # value where kubectl keeps the last: no fix is written into such a file.
        why = ("a key is written twice in it (yaml-duplicate-key): remove the duplicate first"
               if type(exc).__name__ == "DuplicateKeyError" else
               "cannot round-trip the file: " + (str(exc).splitlines() or [type(exc).__name__])[0])
        result.skipped.extend((f, why) for v in per_doc.values() for _p, f in v)
        return result
    changed: set[int] = set()
    quote = '"' if text.count('"') >= text.count("'") else "'"
    for index, items in per_doc.items():
        for prefix, f in items:
            assert f.fix is not None
            ops = [PatchOp(op.op, prefix + op.path, _styled(op.value, quote)) for op in f.fix.ops]
            try:
                # On a copy (ruamel's round-trip containers copy with their comments): a fix whose last op
                # fails leaves the document as it was.
                docs[index] = apply_ops(docs[index], ops)
            except FixError as exc:
                result.skipped.append((f, str(exc)))
                continue
            result.applied.append(f)
            changed.add(index)
    if not changed:
        return result
    chunks = _split_documents(text)
    if len(chunks) == len(docs):
        out = []
        for i, (header, body) in enumerate(chunks):
            if i in changed:
                buf = io.StringIO()
                yaml.dump(docs[i], buf)
                body = buf.getvalue()
            out.append(header + body)
        result.fixed = "".join(out)
    else:  # document boundaries are ambiguous (e.g. '---' inside a block scalar): re-emit the whole stream
        buf = io.StringIO()
        yaml.dump_all(docs, buf)
        result.fixed = buf.getvalue()
    return result


def _has_content(lines: list[str]) -> bool:
    return any(ln.strip() and not ln.lstrip().startswith("#") for ln in lines)


def _split_documents(text: str) -> list[tuple[str, str]]:
    """[(text before the document: separators and leading comments, document text)], one per document as
    ruamel.yaml counts them: a '---' opens a document; text before the first '---' is one only if it has content."""
    segments: list[tuple[list[str], list[str]]] = []
    header: list[str] = []
    body: list[str] = []
    seen_separator = False
    for line in text.splitlines(keepends=True):
        if _SEPARATOR.match(line.rstrip("\r\n")):
            if seen_separator or _has_content(body):
                segments.append((header, body))
                header, body = [line], []
            else:
                header, body = header + body + [line], []
            seen_separator = True
        else:
            body.append(line)
    if seen_separator or _has_content(body):
        segments.append((header, body))
    return [("".join(h), "".join(b)) for h, b in segments]
