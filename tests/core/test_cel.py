"""cel: the Kubernetes CEL libraries a device selector uses (semver, quantity, the strings extension) with exact
results, semver precedence and normalisation, the nesting scan, and the errors a selector raises by kind."""

from __future__ import annotations

from fractions import Fraction

import pytest

from compatcheck.core.cel import (
    MAX_NESTING,
    CelError,
    CelTooCostly,
    CelUnsupported,
    DeviceInput,
    Quantity,
    Semver,
    compile_selector,
    nesting,
    normalise_semver,
)

DEVICE = DeviceInput("gpu.nvidia.com", {"gpu.nvidia.com": {"productName": "A100 SXM", "index": 3, "mig": True,
                                                           "driverVersion": Semver("550.54.15")}},
                     {"gpu.nvidia.com": {"memory": Fraction(80 * 2**30)}})


def matches(expression: str) -> bool:
    return compile_selector(expression).matches(DEVICE)


@pytest.mark.parametrize("expression", [
    # the strings extension: ASCII case only, as cel-go's
    "'ÀB'.lowerAscii() == 'Àb'", "'àb'.upperAscii() == 'àB'", "'AbC'.lowerAscii() == 'abc'",
    "'aBc'.upperAscii() == 'ABC'", "' a b '.trim() == 'a b'",
    "'a,b,c'.split(',') == ['a', 'b', 'c']", "'a,b,c'.split(',', 2) == ['a', 'b,c']",
    "'a,b,c'.split(',', 1) == ['a,b,c']", "'a,b,c'.split(',', 0) == []", "'a,b,c'.split(',', -1).size() == 3",
    "'abcabc'.indexOf('c') == 2", "'abcabc'.indexOf('c', 3) == 5", "'abc'.indexOf('x') == -1",
    "'abc'.substring(1) == 'bc'", "'abc'.substring(1, 2) == 'b'", "['a', 'b'].join('-') == 'a-b'",
    "['a', 'b'].join() == 'ab'", "'aaa'.replace('a', 'b') == 'bbb'", "'aaa'.replace('a', 'b', 2) == 'bba'",
    # quantity
    "quantity('1').sign() == 1", "quantity('-1m').sign() == -1", "quantity('0').sign() == 0",
    "quantity('1.5').asApproximateFloat() == 1.5", "quantity('1').sub(quantity('3')).sign() == -1",
    "quantity('1').sub(3) == quantity('-2')", "quantity('2').mul(3) == quantity('6')",
    "quantity('1k').add(quantity('24')).asInteger() == 1024", "quantity('1').add(1) == quantity('2')",
    "quantity('1.5').isInteger() == false", "quantity('1Ki').isInteger()", "quantity('8Ei').isInteger()",
    "quantity('1').compareTo(quantity('2')) == -1", "quantity('2').compareTo(quantity('1')) == 1",
    "quantity('1000m').compareTo(quantity('1')) == 0", "quantity('1') == quantity('1000m')",
    "quantity('1') != quantity('2')", "quantity('2').isGreaterThan(quantity('1'))",
    "quantity('1').isLessThan(quantity('2'))", "!quantity('1').isLessThan(quantity('1'))",
    "isQuantity('1Gi') && !isQuantity('1 Gi') && !isQuantity('')",
    "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('79Gi'))",
    # semver
    "semver('1.2.3').major() == 1", "semver('1.2.3').minor() == 2", "semver('1.2.3').patch() == 3",
    "semver('1.0.0-alpha.1').isLessThan(semver('1.0.0-alpha.beta'))",
    "semver('1.0.0-2').isLessThan(semver('1.0.0-10'))", "semver('1.0.0-a').compareTo(semver('1.0.0-a.1')) == -1",
    "semver('1.0.0-a.1').compareTo(semver('1.0.0-a')) == 1", "semver('1.0.0-b').isGreaterThan(semver('1.0.0-a'))",
    "semver('1.0.0').compareTo(semver('1.0.0+x')) == 0", "semver('1.0.0') != semver('1.0.1')",
    "semver('2.0.0').isGreaterThan(semver('1.9.9'))", "semver('1.0.0').isGreaterThan(semver('1.0.0-rc.1'))",
    "!semver('1.0.0-rc.1').isGreaterThan(semver('1.0.0'))", "semver('1.0.0-1').isLessThan(semver('1.0.0-a'))",
    "semver('v1.2', true) == semver('1.2.0')", "semver('01.002.0003', true) == semver('1.2.3')",
    "isSemver('v1', true) && !isSemver('v1')",
    "device.attributes['gpu.nvidia.com'].driverVersion.isLessThan(semver('560.0.0'))",
    # the device
    "device.allowMultipleAllocations == false", "device.attributes['gpu.nvidia.com'].mig",
    "device.attributes['gpu.nvidia.com'].index == 3", "device.attributes['gpu.nvidia.com'].productName == 'A100 SXM'",
    "device.attributes['example.com'].size() == 0", "!('example.com' in device.attributes)",
    "'gpu.nvidia.com' in device.capacity",
])
def test_library_functions_give_exact_results(expression: str) -> None:
    assert matches(expression) is True


@pytest.mark.parametrize(("expression", "kind", "message"), [
    ("quantity('1.5').asInteger() == 1", "runtime", "cannot convert value to integer"),
    ("quantity('1').isLessThan(semver('1.0.0'))", "runtime", "no such overload: compare Quantity with Semver"),
    ("semver(1) == semver('1.0.0')", "runtime", "no such overload: semver"),
    ("quantity(1) == quantity('1')", "runtime", "no such overload: quantity"),
    ("quantity('1').add('1') == quantity('2')", "runtime", "no such overload"),
    ("quantity('1').add(1.5) == quantity('2')", "runtime", "no such overload"),
    ("semver('1.0.0') == '1.0.0'", "runtime", "no such overload: Semver == StringType"),
    ("quantity('1') == 1", "runtime", "no such overload: Quantity == IntType"),
    ("semver('1.2', true) == semver('x', true)", "runtime", "'x.0.0' is not a semantic version"),
    ("semver('1-rc', true).major() == 1", "runtime", "short version cannot contain PreRelease/Build meta data"),
    ("device.attributes['gpu.nvidia.com'].zzz == 1", "runtime", "no such key: 'zzz'"),
    ("device.foo == 1", "syntax", "undefined field 'foo'"),
    ("device.driver ==", "syntax", "syntax error"),
    ("undefined_fn(1)", "unsupported", "undefined_fn() is not supported by compatcheck's CEL evaluator"),
    ("cel.bind(x, 1, x == 1)", "unsupported", "cel.bind() is not supported by compatcheck's CEL evaluator"),
    ("device.attributes['gpu.nvidia.com'].productName", "runtime", "the expression evaluated to string, not bool"),
])
def test_errors_by_kind(expression: str, kind: str, message: str) -> None:
    with pytest.raises(CelError) as exc:
        matches(expression)
    assert exc.value.kind == kind
    assert message in str(exc.value)


@pytest.mark.parametrize(("text", "normal"), [
    ("v01.002", "1.2.0"), ("1", "1.0.0"), ("v1.2.3", "1.2.3"), ("00.0a.1", "0.0a.1"), ("1.0.0-01", "1.0.0-01"),
    ("0.0.0", "0.0.0"), ("v", ".0.0"), ("10.20", "10.20.0"), ("1.2.3.4", "1.2.3.4"), ("1.00", "1.0.0"),
])
def test_normalise_semver(text: str, normal: str) -> None:
    assert normalise_semver(text) == normal


def test_semver_values() -> None:
    v = Semver("1.2.3-rc.1+build.5")
    assert (v.major, v.minor, v.patch, v.build, v.text, repr(v)) == (1, 2, 3, "build.5", "1.2.3-rc.1+build.5",
                                                                     "semver('1.2.3-rc.1+build.5')")
    assert v == Semver("1.2.3-rc.1") and hash(v) == hash(Semver("1.2.3-rc.1"))
    assert v != Semver("1.2.3") and Semver("1.2.3").build == ""
    assert (v.compare(Semver("1.2.3")), Semver("1.2.3").compare(v), v.compare(v)) == (-1, 1, 0)
    with pytest.raises(TypeError, match="no such overload: Semver == str"):
        _ = v == "1.2.3"
    with pytest.raises(CelError, match=r"'1\.02\.3' is not a semantic version"):
        Semver("1.02.3")


def test_quantity_values() -> None:
    q = Quantity.parse("1500m")
    assert (q.value, repr(q), q == Quantity(Fraction(3, 2)), q != Quantity(Fraction(1))) == (
        Fraction(3, 2), "quantity(3/2)", True, True)
    assert hash(q) == hash(Fraction(3, 2))
    with pytest.raises(TypeError, match="no such overload: Quantity == int"):
        _ = q == 1
    with pytest.raises(CelError, match="' 1' is not a quantity"):
        Quantity.parse(" 1")


@pytest.mark.parametrize(("expression", "depth"), [
    ("((a))", 2), ("!!!x", 3), ("'((('", 0), ('"[[["', 0), ("(!x)", 2), ("a-b", 1), (")))(", 1), ("-(-x)", 2),
    ("[{(x)}]", 3), ("!(x) && !y", 1), ("!!(!x)", 2), ("a", 0), ("", 0),
])
def test_nesting(expression: str, depth: int) -> None:
    assert nesting(expression) == depth


def test_nesting_over_the_limit_is_too_costly() -> None:
    assert MAX_NESTING == 32
    compile_selector("(" * 32 + "true" + ")" * 32)
    with pytest.raises(CelTooCostly) as exc:
        compile_selector("(" * 33 + "true" + ")" * 33)
    assert str(exc.value) == "not checked: selector too costly (nested 33 deep, over compatcheck's limit of 32)"
    assert isinstance(exc.value, CelUnsupported) and exc.value.kind == "unsupported"


def test_a_selector_over_the_length_limit_is_a_syntax_error() -> None:
    expression = "device.driver == '" + "a" * 10230 + "'"
    assert len(expression) == 10249
    with pytest.raises(CelError) as exc:
        compile_selector(expression)
    assert (exc.value.kind, str(exc.value)) == ("syntax", "10249 characters, over the API server's limit of 10240")
    assert matches("device.driver != '" + "a" * 10220 + "'")  # 10239 characters
