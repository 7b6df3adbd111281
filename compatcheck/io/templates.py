"""What a template that does not read as YAML asks for, from its text: a Helm template's ``{{- if ... }}`` lines
or a ``name: {{ .x }}`` (a flow mapping to a YAML parser) stop the reader, which skips the document with a note. If
such a document asks for a GPU, it is a GPU workload nobody checked, and the coverage must say so (never silent):
this module tells, conservatively and from the text alone, whether one does, and what the object is.

A document (one of kubectl's ``---`` parts) asks for a GPU when a line of it is a GPU resource key
(``nvidia.com/gpu``, ``nvidia.com/gpu.shared``, ``nvidia.com/mig-<profile>``, ``amd.com/gpu``,
``gpu.intel.com/<name>``) directly under a ``limits:`` or ``requests:`` key, with a value other than 0: a number,
or a template (``{{ .Values.gpus }}``, ``${GPUS}``), which is a placeholder in the quantity. The same key in a node
selector, a toleration's value, a comment, a quota (``requests.nvidia.com/gpu``) or an autoscaler's limits is not
a request of a container: the parent key, the word boundary and the kinds the caller leaves out (``lint``) tell
them apart, and a manifest embedded in a block scalar (``script: |``) is text, not a request. Lines that are only
template actions (``{{- if ... }}``, ``{{- end }}``) are ignored when looking for the parent key. A document is
one workload however many containers of it ask for GPUs (a ``{{- range }}`` that renders several objects is still
one document of the file).

The object's kind, apiVersion, name and namespace are read from the column-0 ``kind:``/``apiVersion:`` lines and
the ``metadata:`` block where they are plain values (a templated name is left unknown).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A GPU resource key as a mapping key at the start of a line (optionally a sequence entry), quoted or not.
_GPU_KEY = re.compile(r"""^([ \t]*)(?:-[ \t]+)?(["']?)(nvidia\.com/(?:gpu(?:\.shared)?|mig-[\w.-]+)|amd\.com/gpu|"""
                      r"""gpu\.intel\.com/[\w.-]+)\2[ \t]*:(?:[ \t]+(.*?))?[ \t]*\r?$""", re.M)
_ACTION_ONLY = re.compile(r"^[ \t]*(?:\{\{[^\n]*\}\}[ \t]*)+\r?$")  # a line that is only template actions
_TOP = re.compile(r"""^(kind|apiVersion):[ \t]*["']?([^"'#\r\n]*?)["']?[ \t]*(?:#.*)?\r?$""", re.M)
_META_FIELD = re.compile(r"""^([ \t]+)(name|namespace):[ \t]*["']?([^"'#\r\n]*?)["']?[ \t]*(?:#.*)?\r?$""")
TEMPLATE_MARK = re.compile(r"\{\{|\$\{[A-Za-z_]")


@dataclass(frozen=True)
class TemplateGpu:
    """A document skipped because it does not read as YAML before rendering, that asks for a GPU."""

    line: int  # 1-based line in the file of the first GPU request
    resource: str  # the GPU resource key
    value: str  # the quantity as written (a template when ``placeholder``)
    kind: str | None
    api_version: str | None
    name: str | None
    namespace: str | None
    has_container: bool  # an ``image:`` or ``containers:`` key anywhere in the document

    @property
    def placeholder(self) -> bool:
        return bool(TEMPLATE_MARK.search(self.value))


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1].strip()
    return value


def _zero(value: str) -> bool:
    try:
        return float(value) == 0
    except ValueError:
        return False


_BLOCK_SCALAR = re.compile(r":[ \t]*[|>][-+0-9]*[ \t]*(?:#.*)?\r?$")


def _ancestors(lines: list[str], index: int, indent: int) -> list[str]:
    """The lines above ``index`` that enclose it, nearest first: each indented less than the one before (blank,
    comment and action-only lines skipped)."""
    out: list[str] = []
    for i in range(index - 1, -1, -1):
        line = lines[i]
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or _ACTION_ONLY.match(line):
            continue
        own = len(line) - len(line.lstrip(" \t"))
        if own < indent:
            out.append(line)
            indent = own
            if own == 0:
                break
    return out


def _key(line: str) -> str:
    return line.strip().lstrip("-").strip().split(":", 1)[0].strip().strip("\"'")


def _plain(value: str) -> str | None:
    value = value.strip()
    return value if value and not TEMPLATE_MARK.search(value) else None


def _metadata(lines: list[str]) -> tuple[str | None, str | None]:
    """The plain name and namespace of the ``metadata:`` block at column 0."""
    name = namespace = None
    for i, line in enumerate(lines):
        if not line.startswith("metadata:"):
            continue
        indent = None
        for inner in lines[i + 1:]:
            if not inner.strip() or inner.lstrip().startswith("#") or _ACTION_ONLY.match(inner):
                continue
            if not inner[:1].isspace():
                break  # the next top-level key
            own = len(inner) - len(inner.lstrip(" \t"))
            indent = own if indent is None else indent
            m = _META_FIELD.match(inner)
            if m is not None and own == indent:
                if m.group(2) == "name" and name is None:
                    name = _plain(m.group(3))
                elif m.group(2) == "namespace" and namespace is None:
                    namespace = _plain(m.group(3))
        break
    return name, namespace


def gpu_request(text: str, line_offset: int = 0) -> TemplateGpu | None:
    """The first GPU request of the document ``text`` (which starts at 0-based line ``line_offset`` of its file),
    or None when it asks for none (see the module's docstring)."""
    if "gpu" not in text and "mig-" not in text:
        return None
    lines = text.split("\n")
    found: tuple[int, str, str] | None = None
    for m in _GPU_KEY.finditer(text):
        value = _unquote(m.group(4) or "")
        if not value or _zero(value):
            continue  # a key with its value below it, or a count of 0: no request read
        index = text.count("\n", 0, m.start())
        indent = len(m.group(1)) + (2 if m.group(0).lstrip(" \t").startswith("-") else 0)
        above = _ancestors(lines, index, indent)
        if not above or _key(above[0]) not in ("limits", "requests") or any(_BLOCK_SCALAR.search(a) for a in above):
            continue  # not a container's limits or requests, or text inside a block scalar (an embedded manifest)
        found = (index, m.group(3), value)
        break
    if found is None:
        return None
    top = {m.group(1): _plain(m.group(2)) for m in reversed(list(_TOP.finditer(text)))}
    name, namespace = _metadata(lines)
    return TemplateGpu(found[0] + 1 + line_offset, found[1], found[2], top.get("kind"), top.get("apiVersion"),
                       name, namespace, re.search(r"^[ \t]*(?:-[ \t]+)?(?:image|containers):", text, re.M) is not None)


__all__ = ["TEMPLATE_MARK", "TemplateGpu", "gpu_request"]
