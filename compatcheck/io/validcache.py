"""Schema checks that passed, remembered, so that a lint with a config file (or a ClusterProfile) does not import
jsonschema to check a file it has checked before: the import costs ~100 ms of CPU, half again a one-file lint's
whole start-up, and a pre-commit hook reads the same config on every commit.

A document is remembered only when it had no problem, by a BLAKE2b hash of a format number, compatcheck's version,
the schema file's bytes and the document written as canonical JSON (keys sorted). Only a document that JSON writes
unambiguously is remembered: mappings with string keys, lists, strings, finite numbers, booleans and null; anything
else is checked every time. A document with problems is always checked: its messages come from the check.

Where: ``valid.json`` in the user cache directory (``io.cachedir``), the newest ``KEEP`` keys, written to a
temporary file and renamed over; a file that does not read back as a list of keys counts as empty.
``COMPATCHECK_RULES_CACHE=0`` turns it off, with the rule cache. A forged key could let an invalid file skip its
check, but whoever can write the cache directory can edit the checked file as well.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import Path
from typing import Any

from compatcheck import __version__
from compatcheck.core.model import Diagnostic, DiagnosticKind
from compatcheck.core.rules import schema_problems
from compatcheck.io.cachedir import user_cache_dir
from compatcheck.io.rulecache import enabled

try:  # as in io.rulecache: hashlib would load OpenSSL's bindings first
    from _blake2 import blake2b
except ImportError:
    from hashlib import blake2b

FORMAT = 1
KEEP = 256
_SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"


def problems(doc: Any, schema: str, path: str, kind: DiagnosticKind) -> list[Diagnostic]:
    """``schema_problems`` of ``doc`` against the packaged schema named ``schema``: none, without checking, when
    this document passed this schema's check before."""
    key = _key(doc, schema)
    if key is not None and key in _valid():
        return []
    from compatcheck.io.loader import packaged_schema

    found = schema_problems(doc, packaged_schema(schema), path, kind)
    if not found and key is not None:
        _remember(key)
    return found


def _file() -> Path:
    return user_cache_dir() / "valid.json"


def _key(doc: Any, schema: str) -> str | None:
    if not enabled() or not _plain(doc):
        return None
    try:
        text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        schema_bytes = (_SCHEMAS / schema).read_bytes()
    except (OSError, TypeError, ValueError, RecursionError):
        return None
    h = blake2b(digest_size=16)
    h.update(f"{FORMAT}\0{__version__}\0{schema}\0{len(schema_bytes)}\0".encode() + schema_bytes)
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether JSON writes ``value`` as exactly what it is (no key or number made into another)."""
    if depth > 100:
        return False
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(type(k) is str and _plain(v, depth + 1) for k, v in value.items())
    return False


def _valid() -> list[str]:
    try:
        data = json.loads(_file().read_bytes())
    except (OSError, ValueError, RuntimeError, KeyError, RecursionError):
        return []
    return data if isinstance(data, list) and all(isinstance(k, str) for k in data) else []


def _remember(key: str) -> None:
    """Add ``key`` (the newest ``KEEP`` are kept); any failure leaves the file as it was."""
    try:
        target = _file()
        keys = [*[k for k in _valid() if k != key][-(KEEP - 1):], key]
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        try:
            tmp.write_text(json.dumps(keys), encoding="utf-8")
            os.replace(tmp, target)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
    except (OSError, RuntimeError, KeyError):
        return
