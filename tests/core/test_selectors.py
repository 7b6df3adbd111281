"""selectors: label selectors as ``kubectl -l`` writes them, parsed into exact requirements, matched as Kubernetes
matches them, and refused with the part that cannot be read."""

from __future__ import annotations

import pytest

from compatcheck.core.selectors import Requirement, Selector, SelectorError, parse_selector


def reqs(text: str) -> list[tuple[str, str, list[str]]]:
    return [(r.key, r.op, sorted(r.values)) for r in parse_selector(text).requirements]


@pytest.mark.parametrize(("text", "expected"), [
    ("pool=t4", [("pool", "=", ["t4"])]),
    ("pool==t4", [("pool", "=", ["t4"])]),
    ("pool!=t4", [("pool", "!=", ["t4"])]),
    (" pool = t4 ", [("pool", "=", ["t4"])]),
    ("pool=", [("pool", "=", [""])]),
    ("pool==", [("pool", "=", [""])]),
    ("pool in (b, a ,c)", [("pool", "in", ["a", "b", "c"])]),
    ("pool notin(a)", [("pool", "notin", ["a"])]),
    ("pool in (a,)", [("pool", "in", ["", "a"])]),
    ("pool", [("pool", "exists", [])]),
    ("!pool", [("pool", "!", [])]),
    ("! pool", [("pool", "!", [])]),
    ("a=1,b in (x,y), !c ,d", [("a", "=", ["1"]), ("b", "in", ["x", "y"]), ("c", "!", []), ("d", "exists", [])]),
    ("example.com/gpu.product=A100-SXM4_80GB.v1", [("example.com/gpu.product", "=", ["A100-SXM4_80GB.v1"])]),
    ("k=" + "v" * 63, [("k", "=", ["v" * 63])]),
    ("k" * 63, [("k" * 63, "exists", [])]),
    ("a" * 253 + "/k", [("a" * 253 + "/k", "exists", [])]),
])
def test_requirements_are_read_as_kubernetes_reads_them(text: str, expected: list[tuple[str, str, list[str]]]) -> None:
    assert reqs(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "\t"])
def test_an_empty_selector_matches_everything(text: str) -> None:
    selector = parse_selector(text)
    assert selector == Selector("", ())
    assert selector.matches({}) and selector.matches({"a": "b"})
    assert selector.keys() == frozenset()


def test_a_selector_keeps_its_text_without_surrounding_blanks() -> None:
    selector = parse_selector("  a=1, b  ")
    assert (selector.text, str(selector)) == ("a=1, b", "a=1, b")
    assert selector.keys() == frozenset({"a", "b"})


@pytest.mark.parametrize(("text", "message"), [
    ("a in (x,(y))", "selector 'a in (x,(y))': nested parentheses"),
    ("a)", "selector 'a)': ')' without '('"),
    ("a in (x))(", "selector 'a in (x))(': ')' without '('"),
    ("a in (x", "selector 'a in (x': '(' without ')'"),
    (",a", "selector ',a': an empty requirement (two commas, or one at an end)"),
    ("a,,b", "selector 'a,,b': an empty requirement (two commas, or one at an end)"),
    (" a, ", "selector ' a, ': an empty requirement (two commas, or one at an end)"),
    ("a notin ( )", "selector 'a notin ( )': notin () needs at least one value"),
    ("pool in x", "selector 'pool in x': 'pool in x' is not a label key"),
    ("Pool.Example/x", "selector 'Pool.Example/x': 'Pool.Example/x' is not a label key"),
    ("k" * 64, f"selector '{'k' * 64}': '{'k' * 64}' is not a label key"),
    ("a" * 254 + "/k", f"selector '{'a' * 254}/k': '{'a' * 254}/k' is not a label key"),
    ("-a=b", "selector '-a=b': '-a' is not a label key"),
    ("-a in (x)", "selector '-a in (x)': '-a' is not a label key"),
    ("=b", "selector '=b': '' is not a label key"),
    ("!", "selector '!': '' is not a label key"),
    ("a=-b", "selector 'a=-b': '-b' is not a label value"),
    ("a=b=c", "selector 'a=b=c': 'b=c' is not a label value"),
    ("a===b", "selector 'a===b': '=b' is not a label value"),
    ("k=" + "v" * 64, f"selector 'k={'v' * 64}': '{'v' * 64}' is not a label value"),
    ("a in (x, -y)", "selector 'a in (x, -y)': '-y' is not a label value"),
    ("a!=b c", "selector 'a!=b c': 'b c' is not a label value"),
])
def test_what_cannot_be_read_is_named(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as exc:
        parse_selector(text)
    assert str(exc.value) == message


def test_a_selector_error_is_a_value_error() -> None:
    assert issubclass(SelectorError, ValueError)


LABELS = {"pool": "t4", "empty": ""}


@pytest.mark.parametrize(("requirement", "matches"), [
    (Requirement("pool", "exists"), True), (Requirement("empty", "exists"), True),
    (Requirement("none", "exists"), False),
    (Requirement("pool", "!"), False), (Requirement("empty", "!"), False), (Requirement("none", "!"), True),
    (Requirement("pool", "=", frozenset({"t4"})), True), (Requirement("pool", "=", frozenset({"l4"})), False),
    (Requirement("none", "=", frozenset({""})), False), (Requirement("empty", "=", frozenset({""})), True),
    (Requirement("pool", "in", frozenset({"l4", "t4"})), True), (Requirement("none", "in", frozenset({"t4"})), False),
    (Requirement("pool", "!=", frozenset({"t4"})), False), (Requirement("pool", "!=", frozenset({"l4"})), True),
    (Requirement("none", "!=", frozenset({"t4"})), True),
    (Requirement("pool", "notin", frozenset({"l4", "t4"})), False),
    (Requirement("none", "notin", frozenset({""})), True), (Requirement("empty", "notin", frozenset({""})), False),
])
def test_each_operator_matches_as_kubernetes_does(requirement: Requirement, matches: bool) -> None:
    assert requirement.matches(LABELS) is matches


@pytest.mark.parametrize(("text", "matches"), [
    ("pool=t4,empty", True), ("pool=t4,!empty", False), ("pool in (t4),none notin (x)", True),
    ("pool=t4,none", False), ("none,pool=t4", False),
])
def test_a_selector_ands_its_requirements(text: str, matches: bool) -> None:
    assert parse_selector(text).matches(LABELS) is matches
