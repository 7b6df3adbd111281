"""quantities: resource.ParseQuantity's reading of every suffix, sign and fraction, its rounding to the nano and its
caps, compatcheck's range bound, and the values of a manifest (strings, numbers, what is neither)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from compatcheck.core.quantities import MAX_QUANTITY, QuantityError, parse_quantity, parse_text

F = Fraction
NANO = F(1, 10**9)


@pytest.mark.parametrize(("text", "value"), [
    ("0", F(0)), ("00", F(0)), ("+5", F(5)), ("-5", F(-5)), ("007", F(7)), ("1.5", F(3, 2)), ("-0.5", F(-1, 2)),
    ("1.25k", F(1250)), ("0.5Ki", F(512)), ("1.5Gi", F(3 * 2**29)), ("1Mi", F(2**20)), ("1Ti", F(2**40)),
    ("1Pi", F(2**50)), ("1Ei", F(2**60)), ("9Ei", F(2**63 - 1)), ("0.1Ki", F(512, 5)), ("0.000Ki", F(0)),
    ("1n", NANO), ("1u", F(1, 10**6)), ("1m", F(1, 1000)), ("1k", F(1000)), ("1M", F(10**6)), ("1G", F(10**9)),
    ("1T", F(10**12)), ("1P", F(10**15)), ("1E", F(10**18)), ("9.2e18", F(92 * 10**17)),
    ("1e3", F(1000)), ("1E3", F(1000)), ("1e+3", F(1000)), ("1e-3", F(1, 1000)), ("1e0", F(1)), ("0e99", F(0)),
    ("1e-9", NANO), ("1e-10", NANO), ("5e-10", NANO), ("-5e-10", -NANO), ("0.5n", NANO), ("1.5e-9", 2 * NANO),
    ("1.1e-9", 2 * NANO), ("0.0000000001", NANO), ("1.0000000001", F(1000000001, 10**9)),
    ("123456789.123456789123", F(12345678912345679, 10**8)), ("1.0000000001Ki", F(1024000000103, 10**9)),
    ("0.000001e24", F(10**18)),  # the leading zeros of the fraction count toward the magnitude
    ("0.001234567e-6", 2 * NANO),  # 1.234567n: above a nano, rounded up to the next
    ("1." + "0" * 80 + "1", F(1000000001, 10**9)),  # more fraction digits than the decimal default precision
    ("1e2147483648", NANO),
    ("1e1000000000000000000", NANO),  # 19 exponent digits: an int64, truncated to int32 (-1486618624)
    ("1e-9223372036854775808", F(1)),  # the least int64, whose int32 is 0
    ("1e" + "0" * 20 + "3", F(1000)),  # leading zeros do not count toward the int64's digits
    ("0" * 20 + "1", F(1)),  # nor toward the magnitude
 ("1e4294967297", F(10)), ("1e-4294967295", F(10)), ("1e0000000000000000003", F(1000)),
])
def test_quantities_as_parse_quantity_reads_them(text: str, value: Fraction) -> None:
    assert parse_text(text) == value
    assert parse_quantity(text) == value


@pytest.mark.parametrize(("text", "message"), [
    ("", "'' is not a quantity"), ("1e", "'1e' is not a quantity"), ("1e+", "'1e+' is not a quantity"),
    ("1e--3", "'1e--3' is not a quantity"), ("1e+-3", "'1e+-3' is not a quantity"),
    ("1e3x", "'1e3x' is not a quantity"),
    ("1x", "'1x' is not a quantity"), ("1.2.3", "'1.2.3' is not a quantity"), ("1Gi5", "'1Gi5' is not a quantity"),
    ("1K", "'1K' is not a quantity"), ("1ki", "'1ki' is not a quantity"), ("1mi", "'1mi' is not a quantity"),
    ("1e-3Mi", "'1e-3Mi' is not a quantity"),
    ("1k5", "'1k5' is not a quantity"), ("1m+3", "'1m+3' is not a quantity"), ("1Ki-", "'1Ki-' is not a quantity"),
    (" 2", "' 2' is not a quantity"), ("X1", "'X1' is not a quantity"),
    ("1e9223372036854775808", "'1e9223372036854775808' is not a quantity"),  # past int64: ErrSuffix
    ("1e0123456789", "'1e0123456789' is out of range"),  # every digit in the exponent
    ("1e12345678901234567890", "'1e12345678901234567890' is not a quantity"),
    ("9.3E", "'9.3E' is out of range"), ("9.3e18", "'9.3e18' is out of range"), ("1e19", "'1e19' is out of range"),
    ("-1e20", "'-1e20' is out of range"), ("99999999999999999999", "'99999999999999999999' is out of range"),
    ("12345678901234567890123", "'12345678901234567890123' is out of range"),
    ("9223372036854775809", "'9223372036854775809' is out of range"),
    # 20 integer digits and a fraction finer than a nano: 29 digits at the nano, past decimal's default precision
    ("12345678901234567890.0000000001", "'12345678901234567890.0000000001' is out of range"),
])
def test_what_is_not_a_quantity_or_out_of_range(text: str, message: str) -> None:
    with pytest.raises(QuantityError) as exc:
        parse_text(text)
    assert str(exc.value) == message


def test_the_range_bound_is_two_to_the_63() -> None:
    assert MAX_QUANTITY == 2**63
    assert parse_text("9223372036854775808") == 2**63
    assert parse_text("-9223372036854775808") == -(2**63)
    assert parse_text("8Ei") == 2**63 - 1  # binary values are capped, not refused
    assert parse_text("8.5Ei") == 2**63 - 1  # a fraction too (the decimal path)
    assert parse_text("100000000000000000000Ki") == 2**63 - 1


@pytest.mark.parametrize(("value", "expected"), [
    ("8", F(8)), (" 2Gi ", F(2 * 2**30)), ("\t500m\n", F(1, 2)), (3, F(3)), (-3, F(-3)), (1.5, F(3, 2)),
    (2**63, F(2**63)), (-(2**63), F(-(2**63))), (1e18, F(10**18)), ("٣", None), ("1" * 18, F(int("1" * 18))),
    ("1" * 19, F(int("1" * 19))),
])
def test_a_manifests_values(value: Any, expected: Fraction | None) -> None:
    if expected is None:
        with pytest.raises(QuantityError) as exc:
            parse_quantity(value)
        assert str(exc.value) == f"{value!r} is not a quantity"
    else:
        assert parse_quantity(value) == expected


@pytest.mark.parametrize(("value", "message"), [
    (True, "True is not a quantity"), (False, "False is not a quantity"), (None, "None is not a quantity"),
    (float("nan"), "nan is not a quantity"), (float("inf"), "inf is not a quantity"),
    (float("-inf"), "-inf is not a quantity"), ([1], "[1] is not a quantity"), ({"a": 1}, "{'a': 1} is not a quantity"),
    (2**64, "18446744073709551616 is out of range"), (2**63 + 1, "9223372036854775809 is out of range"),
    (-(2**64), "-18446744073709551616 is out of range"), (1e300, "1e+300 is out of range"),
    (2**10001, "an integer is out of range"), (2**9999, "an integer is out of range"),  # 10,000 bits: not written
    (2**9998, str(2**9998)[:40] + "...' (3010 characters) is out of range"),
    ("18446744073709551616", "'18446744073709551616' is out of range"),
    ("9" * 19, "'9999999999999999999' is out of range"),  # 19 digits: past the shortcut for short digit strings
    ("a" * 61, "'" + "a" * 39 + "...' (61 characters) is not a quantity"),
    ("a" * 58, "'" + "a" * 58 + "' is not a quantity"),
    ("a" * 59, "'" + "a" * 39 + "...' (59 characters) is not a quantity"),  # its repr: 61 characters
    (" " + "1" * 70, "' " + "1" * 38 + "...' (71 characters) is out of range"),
])
def test_what_a_manifest_holds_that_is_no_quantity(value: Any, message: str) -> None:
    with pytest.raises(QuantityError) as exc:
        parse_quantity(value)
    assert str(exc.value) == message
