"""jsonutil: the fast JSON path gives the json module's answers, with or without orjson."""

from __future__ import annotations

import json
import math

import pytest

from compatcheck.core import jsonutil

CASES = [
    {"a": [1, 2.5, None, True, "é"], "b": {"c": "x"}},
    {"big": 2**70},  # past 64 bits: orjson refuses, the json module does not
    [1, -2**65, "\u2603"],
    {"lone surrogate": "\ud800", "big": 2**70},  # valid JSON text, not encodable as UTF-8
]


@pytest.fixture(params=["orjson", "json-module"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    jsonutil.fast_json()  # imported on first use: look now, so that the patch below is what the calls see
    if request.param == "json-module":
        monkeypatch.setattr(jsonutil, "orjson", None)
    elif jsonutil.orjson is None:
        pytest.skip("orjson is not installed")
    return str(request.param)


@pytest.mark.parametrize("value", CASES)
def test_round_trip_matches_the_json_module(backend: str, value: object) -> None:
    encoded = jsonutil.dumps(value)
    assert json.loads(encoded) == value
    assert jsonutil.loads(encoded) == value
    assert jsonutil.loads(json.dumps(value)) == value


def test_nan_literal_and_non_json_values(backend: str) -> None:
    assert math.isnan(jsonutil.loads(b'{"x": NaN}')["x"])  # accepted by the json module, so by us
    assert json.loads(jsonutil.dumps({"when": object.__new__(type("T", (), {"__str__": lambda s: "t"}))})) == {
        "when": "t"}


@pytest.mark.parametrize("raw", [b"{", b'{"a": 1,}', b"\xff\xfe", b""])
def test_errors_are_the_json_module_errors(backend: str, raw: bytes) -> None:
    with pytest.raises((json.JSONDecodeError, UnicodeDecodeError)) as caught:
        jsonutil.loads(raw)
    try:
        json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        assert str(caught.value) == str(exc)
