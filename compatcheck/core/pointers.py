"""RFC 6901 JSON pointers: split, escape, resolve. Every finding, fix and suppression addresses a field this way,
in files (mapped to lines by ``compatcheck.io.manifests``) and in admitted objects alike. Pure."""

from __future__ import annotations

from compatcheck.core.jsonutil import Json

_MISSING = object()


def split_pointer(pointer: str) -> list[str]:
    """The reference tokens of ``pointer``, unescaped ("" and "/" are the whole document)."""
    if pointer in ("", "/"):
        return []
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.lstrip("/").split("/")]


def escape_token(token: str | int) -> str:
    return str(token).replace("~", "~0").replace("/", "~1")


def value_at(doc: Json, pointer: str, default: Json = None) -> Json:
    """The value at ``pointer`` in ``doc``, or ``default`` when there is none."""
    node: Json = doc
    for t in split_pointer(pointer):
        if isinstance(node, dict):
            node = node.get(t, _MISSING)
        elif isinstance(node, list) and t.isdigit() and int(t) < len(node):
            node = node[int(t)]
        else:
            return default
        if node is _MISSING:
            return default
    return node
