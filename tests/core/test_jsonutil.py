"""jsonutil: the nesting bound (brackets in strings, escapes, unmatched brackets, the two kinds alternating), the
errors ``loads`` raises in place of a decoder's (message, document, position), and the lazy orjson import."""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

import pytest

from compatcheck.core import jsonutil
from compatcheck.core.jsonutil import (
    MAX_DEPTH,
    MAX_INT_DIGITS,
    in_group,
    json_too_deep,
    loads,
    mapping,
    refuse_huge_int,
    sequence,
    text,
)

N = MAX_DEPTH


@pytest.mark.parametrize(("raw", "deep"), [
    ("[" * N + "]" * N, False),
    ("[" * (N + 1) + "]" * (N + 1), True),
    (b"{" * (N + 1) + b"}" * (N + 1), True),
    ("[" * (N + 1), True),  # unclosed: each opener is a level
    ("{" * (N + 1), True),
    ("[" * N, False),
    ("[]" * (N + 1), False),  # many brackets, one level
    ("{}" * (N + 1), False),
    ('[{"a": 1}]' * (N + 1), False),  # what is not a bracket is left out
    ('["a"]' * (N + 1), False),  # so are strings
    ("[" * 70 + "{" * 70 + "}" * 70 + "]" * 70, True),
    ("{" * 125 + "{[{}[]]", False),  # 129 openers; the last three close three levels: 128 deep
    ("{" * 126 + "{[{}[]]", True),
    ('["' + "[" * (N + 1) + '"]', False),  # brackets inside a string are text
    ('["\\"' + "[" * (N + 1) + '"]', False),  # an escaped quote does not end the string
    ('["\\\\"' + "[" * (N + 1) + '"]', True),  # an escaped backslash does not escape the quote after it
    ("\ud800" + "[" * (N + 1), True),  # a lone surrogate (valid JSON text, not UTF-8) is no error
    ("[" * 3, False),
])
def test_nesting_past_the_limit(raw: str | bytes, deep: bool) -> None:
    assert json_too_deep(raw) is deep


@pytest.mark.parametrize(("raw", "limit", "deep"), [
    ("[[]]", 1, True), ("[[]]", 2, False), ("[[", 1, True), ("[[", 2, False), ("[][]", 1, False),
    ("[]]]", 1, False), ("[", 0, True), ("", 0, False),
])
def test_the_limit_is_a_parameter(raw: str, limit: int, deep: bool) -> None:
    assert json_too_deep(raw, limit) is deep


def decode_error(raw: str | bytes) -> json.JSONDecodeError:
    with pytest.raises(json.JSONDecodeError) as exc:
        loads(raw)
    return exc.value


def test_too_deep_is_a_json_error_at_the_start() -> None:
    err = decode_error("[" * (N + 1) + "]" * (N + 1))
    assert (str(err), err.doc, err.pos) == ("nested more than 128 levels deep: line 1 column 1 (char 0)", "", 0)


def test_a_huge_integer_is_a_json_error_at_the_start() -> None:
    err = decode_error("[1, " + "2" * (MAX_INT_DIGITS + 1) + "]")
    assert (err.msg, err.doc, err.pos) == ("an integer of 1001 digits (more than 1000)", "", 0)
    assert loads("9" * MAX_INT_DIGITS) == int("9" * MAX_INT_DIGITS)


@pytest.mark.parametrize(("digits", "message"), [
    ("1" * 1001, "an integer of 1001 digits (more than 1000)"),
    ("-" + "1" * 1000, "an integer of 1000 digits (more than 1000)"),  # the sign counts toward the limit only
])
def test_refuse_huge_int(digits: str, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        refuse_huge_int(digits)
    assert str(exc.value) == message
    assert refuse_huge_int("-" + "1" * 999) == -int("1" * 999)


def test_a_decoder_recursing_too_deep_is_a_json_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last resort behind ``json_too_deep``: a recursion limit lower than its bound (the json module alone)."""
    monkeypatch.setattr(jsonutil, "orjson", None)
    monkeypatch.setattr(jsonutil, "_looked", True)
    frames = 0
    frame: Any = sys._getframe()
    while frame is not None:
        frames, frame = frames + 1, frame.f_back
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(frames + 40)
    try:
        with pytest.raises(json.JSONDecodeError) as exc:
            loads("[" * N + "]" * N)
    finally:
        sys.setrecursionlimit(limit)
    assert (exc.value.msg, exc.value.doc, exc.value.pos) == ("nested too deep", "", 0)


def test_orjson_is_imported_once_on_first_use(monkeypatch: pytest.MonkeyPatch) -> None:
    module = importlib.import_module("orjson")
    monkeypatch.setattr(jsonutil, "orjson", None)
    monkeypatch.setattr(jsonutil, "_looked", False)
    assert jsonutil.fast_json() is module
    assert (jsonutil.orjson, jsonutil._looked) == (module, True)
    monkeypatch.setattr(jsonutil, "orjson", "cached")
    assert jsonutil.fast_json() == "cached"


def test_without_orjson_the_json_module_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonutil, "orjson", None)
    monkeypatch.setattr(jsonutil, "_looked", False)
    monkeypatch.setitem(sys.modules, "orjson", None)  # import orjson raises ImportError
    assert jsonutil.fast_json() is None
    assert (jsonutil.orjson, jsonutil._looked) == (None, True)
    assert loads(b'{"a": [1, 2.5, null]}') == {"a": [1, 2.5, None]}
    assert jsonutil.dumps({"a": [1, "\u00e9"]}) == b'{"a":[1,"\\u00e9"]}'


@pytest.mark.parametrize(("value", "as_mapping", "as_sequence", "as_text"), [
    ({"a": 1}, {"a": 1}, [], None), ([1], {}, [1], None), ("s", {}, [], "s"), (None, {}, [], None),
    (3, {}, [], None),
])
def test_typed_access(value: Any, as_mapping: Any, as_sequence: Any, as_text: Any) -> None:
    assert (mapping(value), sequence(value), text(value)) == (as_mapping, as_sequence, as_text)
    if isinstance(value, dict | list):
        assert (mapping(value) if isinstance(value, dict) else sequence(value)) is value


@pytest.mark.parametrize(("obj", "inside"), [
    ({"apiVersion": "g.io/v1", "kind": "A"}, True), ({"apiVersion": "g.io/v1beta1", "kind": "B"}, True),
    ({"apiVersion": "g.io/v1", "kind": "C"}, False), ({"apiVersion": "g.io", "kind": "A"}, False),
    ({"apiVersion": "xg.io/v1", "kind": "A"}, False), ({"apiVersion": "g.io.x/v1", "kind": "A"}, False),
    ({"apiVersion": 1, "kind": "A"}, False), ({"kind": "A"}, False),
])
def test_in_group(obj: dict[str, Any], inside: bool) -> None:
    assert in_group(obj, "g.io", ("A", "B")) is inside
