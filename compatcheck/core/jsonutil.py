"""Typed access to untrusted JSON/YAML values (a wrong type reads as empty, never raises), and fast JSON
encoding and decoding for the admission path. Pure.

orjson (installed with the webhook extra) decodes 2x and encodes 15x faster than the json module, which
matters when every admission request is decoded once and encoded three times (cache key, answer, log
line). Where orjson refuses what the json module accepts (integers past 64 bits, NaN literals, lone
surrogates), the json module answers, so the result never depends on which one is installed.

orjson is imported by the first ``loads`` or ``dumps`` (``fast_json``), not with this module: importing it brings
``datetime``, ``uuid`` and ``platform``, which a lint without ``--nodes`` never needs (start-up, issue #25).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

# A JSON value decoded from a manifest, an AdmissionReview or a rule file: dict, list, str, int, float, bool or None,
# nested. ``Any`` rather than a recursive union, on purpose: these values are untrusted, so every read narrows them
# (isinstance, or ``mapping``/``sequence``/``text`` below) before use, and a union would only add casts where a value
# has already been checked. Signatures say ``Json``/``JsonObject`` so that this is the only reason ``Any`` appears.
Json = Any
JsonObject = dict[str, Json]

orjson: Any = None  # the module once ``fast_json`` has looked (None on an install without it): one name for both
_looked = False


def fast_json() -> Any:
    """orjson, imported on first use; None on a core install (the linter does not need it)."""
    global orjson, _looked
    if not _looked:
        found: Any = None
        try:
            import orjson as module
        except ImportError:
            pass
        else:
            found = module
        orjson, _looked = found, True
    return orjson


def loads_trusted(body: bytes) -> Json:
    """A body the Kubernetes API server itself sent (a LIST page of Nodes or Pods): orjson where installed (the
    webhook and audit extras bring it; 2x the json module on a page of Nodes, 10 % on a page of Pods), the json
    module for whatever orjson refuses. No depth pre-scan, unlike what a client sends the webhook: the scan would
    cost 70 % of decoding each page."""
    fast = fast_json()
    if fast is not None:
        try:
            return fast.loads(body)
        except fast.JSONDecodeError:
            pass
    return json.loads(body)


def mapping(value: Json) -> JsonObject:
    return value if isinstance(value, dict) else {}


def sequence(value: Json) -> list[Json]:
    return value if isinstance(value, list) else []


def text(value: Json) -> str | None:
    return value if isinstance(value, str) else None


def in_group(obj: JsonObject, group: str, kinds: Collection[str]) -> bool:
    """Whether an object is one of ``kinds`` of the API group ``group``, in any version of it."""
    api_version = obj.get("apiVersion")
    return isinstance(api_version, str) and api_version.startswith(group + "/") and obj.get("kind") in kinds


# How deep JSON (and YAML) values may nest. The API server's decoder accepts 10,000 levels (Go's encoding/json); no
# Kubernetes object needs more than a few dozen, and every reader here (json, the YAML composer, the value builder,
# rules walking a value) recurses per level, so compatcheck refuses more than this, before decoding.
MAX_DEPTH = 128
# Integers with more digits than this are refused (Python's own int() stops at 4300 digits, with a ValueError); the
# API server reads no integer field past 64 bits either.
MAX_INT_DIGITS = 1000
_KEEP = b'"[]{}'
_DELETE = bytes(b for b in range(256) if b not in _KEEP)


def json_too_deep(raw: bytes | str, limit: int = MAX_DEPTH) -> bool:
    """Whether the brackets of a JSON text (or a YAML flow collection) nest more than ``limit`` deep, strings left
    out. C-speed passes only: bytes.replace, translate and split, then a pass of bytes.replace per level on the
    brackets alone; none at all when the text has fewer brackets than the limit. Unclosed brackets count as
    levels too (a decoder recurses into them before it finds them unclosed)."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    # Escaped backslashes, then escaped quotes, go first: what is left between quotes is a string's body.
    data = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _DELETE)
    data = b"".join(data.split(b'"')[::2])  # what is outside strings
    for passes in range(limit + 1):  # each pass takes the innermost pairs away: a level (two, where [ and { nest
        if not data:                 # alternately: a bound within a factor of two, which is all this is for)
            return False
        shorter = data.replace(b"[]", b"").replace(b"{}", b"")
        if len(shorter) == len(data):  # only unmatched brackets are left: each opener is one more level
            return passes + data.count(b"[") + data.count(b"{") > limit
        data = shorter
    return True


def refuse_huge_int(digits: str) -> int:
    """The json module's ``parse_int``: an integer, unless it has more than ``MAX_INT_DIGITS`` digits (a ValueError
    with a message to show, rather than Python's conversion-limit error)."""
    if len(digits) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(digits.lstrip('-'))} digits (more than {MAX_INT_DIGITS})")
    return int(digits)


def loads(raw: bytes | str) -> Json:
    """Parse JSON; raises json.JSONDecodeError (or UnicodeDecodeError) with the json module's message, and for what
    no decoder should take: nesting past ``MAX_DEPTH``, an integer past ``MAX_INT_DIGITS`` digits."""
    if json_too_deep(raw):
        raise json.JSONDecodeError(f"nested more than {MAX_DEPTH} levels deep", "", 0)
    fast = orjson if _looked else fast_json()
    if fast is not None:
        try:
            return fast.loads(raw)
        except fast.JSONDecodeError:
            pass  # let the json module decide, and word the error
    try:
        return json.loads(raw, parse_int=refuse_huge_int)
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError) as exc:  # a huge integer; nesting (a last resort: json_too_deep saw it)
        message = str(exc) if isinstance(exc, ValueError) else "nested too deep"
        raise json.JSONDecodeError(message, "", 0) from None


def dumps(value: Json) -> bytes:
    """Compact JSON as UTF-8 bytes; values that are not JSON types are written as str()."""
    fast = orjson if _looked else fast_json()
    if fast is not None:
        try:
            encoded: bytes = fast.dumps(value, default=str)
            return encoded
        except TypeError:  # an integer past 64 bits, a lone surrogate
            pass
    # ASCII with \u escapes: a lone surrogate (valid in JSON text, not in UTF-8) stays encodable.
    return json.dumps(value, separators=(",", ":"), default=str).encode()
