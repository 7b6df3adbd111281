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


def loads(raw: bytes | str) -> Json:
    """Parse JSON; raises json.JSONDecodeError (or UnicodeDecodeError) with the json module's message."""
    fast = orjson if _looked else fast_json()
    if fast is not None:
        try:
            return fast.loads(raw)
        except fast.JSONDecodeError:
            pass  # let the json module decide, and word the error
    return json.loads(raw)


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
