"""Hostile input (issue #24): one regression test per class, each with the smallest input that showed it, and an
audit of every regular expression that reads input against adversarial strings. Inputs are written here."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import pkgutil
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any

import pytest

import compatcheck
from compatcheck.core.cel import CelError, CelTooCostly, compile_selector
from compatcheck.core.jsonutil import loads
from compatcheck.core.quantities import QuantityError, parse_quantity
from compatcheck.io.lint import LintOptions, may_matter, run_lint
from compatcheck.io.loader import Loaded
from compatcheck.io.manifests import parse_text
from tests.conftest import ROOT


class _Slow(Exception):
    pass


def _bounded(seconds: float, call: Callable[[], Any]) -> Any:
    """``call()``, failing the test (not hanging it) past ``seconds``: the regular-expression engine checks signals."""
    def alarm(*_: Any) -> None:
        raise _Slow(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return call()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ---------------------------------------------------------------------------------------------- regular expressions

def test_a_crlf_file_headed_by_comment_lines_is_split_in_linear_time() -> None:
    # Before: two alternatives of the document-splitting pattern both took the '\r', 2**lines ways to fail.
    text = "# c\r\n" * 40 + "a: b\r\n---\r\napiVersion: v1\r\nkind: Pod\r\nmetadata: {name: p}\r\n"
    parsed = _bounded(5, lambda: parse_text("crlf.yaml", text, wanted=may_matter))
    assert not parsed.errors
    assert [(d.line, d.data.get("kind")) for d in parsed.documents] == [(41, None), (43, "Pod")]


def test_a_long_digit_run_before_a_letter_is_no_quantity_found_fast() -> None:
    # Before: '\d+\.?\d*' split the digits every way before the letter failed (18 s for 5,000 digits).
    with pytest.raises(QuantityError, match=r"is not a quantity"):
        _bounded(2, lambda: parse_quantity("1" * 20_000 + "x"))


# ---------------------------------------------------------------------------------------------- numbers

@pytest.mark.parametrize(("text", "value"), [
    ("1", Fraction(1)), ("500m", Fraction(1, 2)), ("2Ki", Fraction(2048)), ("1e3", Fraction(1000)),
    ("1.5Gi", Fraction(3 * 2**29)), ("1.", Fraction(1)), (".5", Fraction(1, 2)), ("1.G", Fraction(10**9)),
    # Go reads a bare sign or point as zero, rounds finer than a nano away from zero, caps binary values at 2^63-1
    # and truncates an exponent to an int32.
    ("+", Fraction(0)), ("-", Fraction(0)), (".", Fraction(0)), ("0.1n", Fraction(1, 10**9)),
    ("-0.1n", Fraction(-1, 10**9)), ("8Ei", Fraction(2**63 - 1)), ("1e4294967296", Fraction(1)),
    ("1" * 5000 + "e-4990", Fraction(138888888888888889, 125000000)), (" 2 ", Fraction(2)), (1.5, Fraction(3, 2)),
])
def test_quantities_are_read_as_resource_parse_quantity_reads_them(text: Any, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(("text", "message"), [
    ("²", "'²' is not a quantity"),  # '²'.isdigit() is True, and int('²') raised ValueError
    ("\u0661", "'\u0661' is not a quantity"),  # an Arabic-Indic digit: \d took it
    ("1e", "'1e' is not a quantity"), ("1ee5", "'1ee5' is not a quantity"),
    ("1e99999999999999999999", "'1e99999999999999999999' is not a quantity"),  # past int64: ErrSuffix
    ("1e21", "'1e21' is out of range"), ("1" * 5000, "(5000 characters) is out of range"),
    (10**30, "1000000000000000000000000000000 is out of range"),
])
def test_what_is_no_quantity_is_a_quantity_error(text: Any, message: str) -> None:
    with pytest.raises(QuantityError) as exc:
        parse_quantity(text)
    assert str(exc.value).endswith(message)


def _pod(gpu: str, extra: str = "") -> str:
    return ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n" + extra + "  containers:\n  - name: c\n"
            f"    image: nvcr.io/nvidia/pytorch:24.01-py3\n    resources: {{limits: {{nvidia.com/gpu: {gpu}}}}}\n")


def test_unicode_digits_and_huge_numbers_in_a_manifest_are_no_traceback(loaded: Loaded) -> None:
    texts = {"sup.yaml": _pod('"²"'), "big.yaml": _pod("1" * 5000), "bigq.yaml": _pod('"' + "9" * 5000 + '"'),
             "big.json": '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},\n "spec": ' + "9" * 5000 + "}"}
    report = run_lint([], loaded, LintOptions(), texts=texts)
    assert not [e for e in report.errors if e.kind == "internal"], report.errors
    assert [(e.path, e.line, e.message) for e in report.errors if e.path == "big.json"] == [
        ("big.json", 2, "invalid JSON: an integer of 5000 digits (more than 1000)")]


def test_a_huge_json_integer_is_a_json_error_for_the_webhook() -> None:
    with pytest.raises(json.JSONDecodeError, match="an integer of 5000 digits"):
        loads(b'{"a": ' + b"9" * 5000 + b"}")


# ---------------------------------------------------------------------------------------------- depth

_DEEP = {
    # Before: the C composer recursed once per '[' and the process died with SIGSEGV.
    "flow.yaml": "[" * 100_000,
    "deep.json": '{"apiVersion": "v1", "kind": "Pod", "spec": ' + "[" * 100_000 + "]" * 100_000 + "}",
}


@pytest.mark.parametrize("name", sorted(_DEEP))
def test_deep_nesting_is_a_located_error_not_a_crash(name: str) -> None:
    code = ("import sys; from compatcheck.io.manifests import parse_text; from compatcheck.io.lint import may_matter;"
            f"r = parse_text({name!r}, sys.stdin.read(), wanted=may_matter);"
            "print([(e.line, e.message) for e in r.errors])")
    proc = subprocess.run([sys.executable, "-c", code], input=_DEEP[name], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    kind = "JSON" if name.endswith(".json") else "YAML"
    assert proc.stdout.strip() == str([(1, f"invalid {kind}: nested more than 128 levels deep (compatcheck's limit; "
                                           "the API server's is 10000)")])


def test_aliases_cannot_nest_past_the_limit() -> None:
    text = "a0: &a0 [1]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 200))
    parsed = parse_text("alias.yaml", text)
    assert [e.message for e in parsed.errors] == ["document 1: nested more than 128 levels deep"]


def test_deep_json_is_a_json_error_for_the_webhook() -> None:
    # Before: orjson gave up at 1024 levels and the json module raised RecursionError (a 500).
    with pytest.raises(json.JSONDecodeError, match="nested more than 128 levels deep"):
        loads(b"[" * 100_000 + b"]" * 100_000)
    assert loads(b'{"a": ' * 100 + b"1" + b"}" * 100) is not None


# ---------------------------------------------------------------------------------------------- CEL

@pytest.mark.parametrize(("expression", "message"), [
    ("(" * 200 + "true" + ")" * 200, "not checked: selector too costly (nested 200 deep, over compatcheck's limit "
                                     "of 32)"),
    ("!" * 300 + "true", "not checked: selector too costly (nested 300 deep, over compatcheck's limit of 32)"),
    (" + ".join(["1"] * 2000) + " == 1", "not checked: selector too costly (too deeply nested to evaluate)"),
])
def test_deep_selectors_are_too_costly_not_a_recursion_error(expression: str, message: str) -> None:
    from compatcheck.core.cel import DeviceInput

    with pytest.raises(CelTooCostly) as exc:
        compile_selector(expression).matches(DeviceInput("gpu.nvidia.com", {}, {}))
    assert str(exc.value) == message


def test_a_selector_over_the_estimated_cost_is_not_evaluated() -> None:
    items = "[" + ",".join(str(i) for i in range(600)) + "]"
    with pytest.raises(CelTooCostly, match=r"estimated cost \d+ is over the limit of 1000000"):
        compile_selector(f"{items}.all(x, {items}.all(y, {items}.all(z, z >= 0)))")
    with pytest.raises(CelError, match="10241 characters, over the API server's limit of 10240"):
        compile_selector("a" * 10241)
    assert compile_selector("[1, 2, 3].all(x, x > 0)") is not None


# ---------------------------------------------------------------------------------------------- types

@pytest.mark.parametrize(("extra", "message"), [
    ("  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
     "[{matchExpressions: [{key: [a], operator: In, values: [x]}]}]}}}\n",
     "key: expected a string, found a list"),  # before: TypeError: unhashable type: 'list'
    ("  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
     "[{matchExpressions: true}]}}}\n", "matchExpressions: expected a list, found a boolean"),
    ("  tolerations: [{key: nvidia.com/gpu, operator: [Exists]}]\n", "operator: expected a string, found a list"),
    ("  tolerations: [5]\n", "tolerations[0]: expected a mapping, found an integer"),
    ("  nodeSelector: [a]\n", "nodeSelector: expected a mapping, found a list"),
])
def test_wrong_types_are_input_problems_at_their_line(loaded: Loaded, extra: str, message: str) -> None:
    report = run_lint([], loaded, LintOptions(), texts={"t.yaml": _pod("1", extra)})
    assert [(e.line, e.kind, e.message) for e in report.errors] == [
        (5, "input", f"{message} (the API server refuses the object; its pod spec was not checked)")]


# ---------------------------------------------------------------------------------------------- time

def test_an_object_over_its_time_budget_is_said_to_be_unchecked(loaded: Loaded) -> None:
    report = run_lint([], loaded, LintOptions(object_budget=-1.0), texts={"t.yaml": _pod("1")})
    assert not report.errors
    assert [(e.path, e.line, e.severity.value, e.message) for e in report.warnings] == [
        ("t.yaml", 1, "warning", "not checked: the object took more than -1 s to check (compatcheck's time budget "
                                 "per object)")]
    assert not report.findings


# ---------------------------------------------------------------------------------------------- the regex audit

def _modules() -> Iterator[Any]:
    for info in pkgutil.walk_packages(compatcheck.__path__, "compatcheck."):
        if not info.name.endswith("__main__"):  # (importing it runs the command line)
            yield importlib.import_module(info.name)


def _patterns_in(value: Any, seen: set[int], depth: int = 0) -> Iterator[re.Pattern[str]]:
    if id(value) in seen or depth > 6:
        return
    seen.add(id(value))
    if isinstance(value, re.Pattern):
        if isinstance(value.pattern, str):
            yield value
    elif isinstance(value, (tuple, list, frozenset, set)):
        for v in value:
            yield from _patterns_in(v, seen, depth + 1)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _patterns_in(v, seen, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _patterns_in(getattr(value, f.name), seen, depth + 1)


# Repeated to 20,000 characters: what backtracks in the patterns here (digits, blanks, comments and line ends,
# braces, quotes, separators, keys), each followed by nothing and by a character no pattern expects.
UNITS = ["1", "1.", "a", " ", "\t", "# c\r\n", "#\n", "\r\n", "\n", "-", "- ", "a:", "a: ", "{{a", "${a-", "'a'==",
         '"a', "\\", "[", "{", ".", "e1", "1e", "a=", ",a", "kind: x ", "\n---", "%a\n", "-MIG-1g.", "cuda>=1.", "a b",
         "0", "aa-", "a/", "a@", "a:1", "x.profile == ", "'", '"', "::", "1=1"]
TAILS = ["", "\x00!"]
SIZE = 20_000


def _linear_baseline(text: str) -> float:
    started = time.perf_counter()
    re.compile(r"(?:.|\n)*?\Z").match(text)  # one step of the engine per character
    return time.perf_counter() - started


def test_no_regular_expression_backtracks_catastrophically(loaded: Loaded) -> None:
    seen: set[int] = set()
    patterns = {p.pattern: p for m in _modules() for v in vars(m).values() for p in _patterns_in(v, seen)}
    patterns.update({p.pattern: p for rule in loaded.ruleset for p in _patterns_in(rule.params, seen)})
    assert len(patterns) > 60  # the audit sees the modules' patterns and the rules' own
    slow: list[str] = []
    for unit in UNITS:
        body = (unit * (SIZE // len(unit) + 1))[:SIZE]
        for tail in TAILS:
            text = body + tail
            bound = max(500 * _linear_baseline(text), 1.0)
            for source, pattern in patterns.items():
                for op in ("search", "fullmatch"):
                    def run(pattern: re.Pattern[str] = pattern, op: str = op, text: str = text) -> Any:
                        return list(pattern.finditer(text)) if op == "finditer" else getattr(pattern, op)(text)

                    started = time.perf_counter()
                    with contextlib.suppress(_Slow):
                        _bounded(max(bound * 4, 2.0), run)
                    took = time.perf_counter() - started
                    if took > bound:
                        slow.append(f"{source!r}.{op}({unit!r} * n + {tail!r}): {took:.2f} s (bound {bound:.2f} s)")
    assert not slow, "\n".join(slow[:20])
