"""Kubernetes resource quantities (``1``, ``500m``, ``2Ki``, ``1e3``) as exact fractions. Pure.

Parsed as ``resource.ParseQuantity`` parses them (k8s.io/apimachinery/pkg/api/resource/quantity.go,
``parseQuantityString``, and suffix.go, ``interpret``), by a scanner rather than a regular expression, so that the
work is linear in the text whatever it holds:

- an optional sign, ASCII digits, optionally '.' and more ASCII digits (``1.``, ``.5`` and even ``+``, ``-`` and
  ``.``, which Go reads as zero), then a suffix made of the characters ``eEinumkKMGTP``, an optional sign and
  ASCII digits. Other digits (``²``, ``٣``) are not digits there;
- the suffix is one of ``n u m "" k M G T P E`` (powers of ten), ``Ki Mi Gi Ti Pi Ei`` (powers of two), or ``e``/``E``
  and a base-10 integer that ``strconv.ParseInt`` reads as an int64 and Go then truncates to an int32;
- a value finer than a nano is rounded away from zero to the next nano (``0.1n`` is ``1n``), and a binary-suffixed
  value is capped, silently, at 2^63-1 (``8Ei``).

compatcheck's own bound on top: a value past 2^63 in magnitude is "out of range" (an input problem), as no count
or size of a container, node or device is that large; it is found from the number of digits before any arithmetic,
so a thousand-digit quantity costs no more than a short one. JSON and YAML numbers are read as Go's
``Quantity.UnmarshalJSON`` reads them: as the text of the number.
"""

from __future__ import annotations

import decimal
from fractions import Fraction

from compatcheck.core.jsonutil import Json

MAX_QUANTITY = Fraction(2**63)
_BINARY_CAP = 2**63 - 1
_DIGITS = frozenset("0123456789")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DECIMAL_SUFFIX = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIX = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_NANO = Fraction(1, 10**9)
_INT64 = 1 << 63


class QuantityError(ValueError):
    pass


class QuantityOutOfRange(QuantityError):
    """A well-formed quantity past 2^63 in magnitude. The API server parses it, and whether its validation then
    accepts it depends on how its int64 arithmetic overflows (``1e32`` passes the integer check of an extended
    resource, forty 1s fail it): compatcheck does not model that, it says the value is out of range."""


def _scan(text: str) -> tuple[bool, str, str, str] | None:
    """``parseQuantityString``: (positive, numerator digits without leading zeros, denominator digits, suffix), or
    None where Go answers ErrFormatWrong."""
    end = len(text)
    pos = 0
    positive = True
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    if pos >= end:
        return positive, num, "", ""
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return positive, num, denom, ""
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        return None  # a character no quantity holds
    return positive, num, denom, text[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int] | None:
    """suffix.go ``interpret``: (base, exponent), or None (ErrSuffix)."""
    if suffix in _DECIMAL_SUFFIX:
        return 10, _DECIMAL_SUFFIX[suffix]
    if suffix in _BINARY_SUFFIX:
        return 2, _BINARY_SUFFIX[suffix]
    if len(suffix) > 1 and suffix[0] in "eE":
        body = suffix[1:]
        digits = body.lstrip("+-") if body[:1] in "+-" else body
        if not digits or len(body) - len(digits) > 1 or not set(digits) <= _DIGITS:
            return None
        significant = digits.lstrip("0")
        if len(significant) > 19:  # strconv.ParseInt: out of the int64 range
            return None
        exponent = int(significant or "0") * (-1 if body[0] == "-" else 1)
        if not -_INT64 <= exponent < _INT64:
            return None
        exponent = (exponent + (1 << 31)) % (1 << 32) - (1 << 31)  # Go's int32(parsed)
        return 10, exponent
    return None


def _value(positive: bool, num: str, denom: str, base: int, exponent: int, shown: Json) -> Fraction:
    significant_denom = denom.lstrip("0")
    if num == "0" and not significant_denom.rstrip("0"):
        return Fraction(0)
    sign = 1 if positive else -1
    # The decimal magnitude: the position of the leading significant digit (10**magnitude > |value| >= 10**(m-1)).
    lead = len(num) if num != "0" else -(len(denom) - len(significant_denom))
    if base == 10:
        magnitude = lead + exponent
        if magnitude > 20:
            raise QuantityOutOfRange(f"{_short(shown)} is out of range")
        if magnitude < -9:  # nonzero, finer than a nano: rounded up to one
            return sign * _NANO
    elif lead > 20:  # at least 10**19 * 2**10: capped
        return sign * Fraction(_BINARY_CAP)
    # Now exact arithmetic on at most a few dozen significant digits above the nano (what is below it only rounds up).
    scale = exponent - len(denom)
    if base == 10 and scale >= -9:  # on the nano grid already (500m, 1.5, 2G): no rounding
        digits = int((num + denom).lstrip("0") or "0")
        return sign * (Fraction(digits * 10**scale) if scale >= 0 else Fraction(digits, 10**-scale))
    if base == 2 and not denom:  # 2Gi
        return sign * Fraction(min(int(num) << exponent, _BINARY_CAP))
    context = decimal.Context(prec=len(num) + len(denom) + 64, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN,
                              rounding=decimal.ROUND_UP, traps=[decimal.InvalidOperation])
    amount = decimal.Decimal(f"{num}.{denom or '0'}")
    if base == 10:
        amount = amount.scaleb(exponent, context=context)
    else:
        amount = context.multiply(amount, decimal.Decimal(2) ** exponent)
    amount = amount.quantize(decimal.Decimal("1e-9"), context=context)  # away from zero, to the nano
    result = Fraction(amount)
    if base == 2 and result > _BINARY_CAP:
        result = Fraction(_BINARY_CAP)
    return sign * result


def _short(value: Json) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}...' ({len(str(value))} characters)"


def parse_text(text: str, shown: Json = None) -> Fraction:
    """A quantity's text exactly as ``resource.ParseQuantity`` reads it (no spaces trimmed)."""
    shown = text if shown is None else shown
    if not text:
        raise QuantityError(f"{_short(shown)} is not a quantity")
    if text == "0":
        return Fraction(0)
    scanned = _scan(text)
    if scanned is None:
        raise QuantityError(f"{_short(shown)} is not a quantity")
    positive, num, denom, suffix = scanned
    interpreted = _interpret(suffix)
    if interpreted is None:
        raise QuantityError(f"{_short(shown)} is not a quantity")
    base, exponent = interpreted
    result = _value(positive, num, denom, base, exponent, shown)
    if abs(result) > MAX_QUANTITY:
        raise QuantityOutOfRange(f"{_short(shown)} is out of range")
    return result


def parse_quantity(value: Json) -> Fraction:
    """A quantity from a manifest: a string (spaces around it trimmed, as ``Quantity.UnmarshalJSON`` trims them) or
    a JSON/YAML number (read as its text)."""
    if type(value) is str and len(value) < 19 and value.isascii() and value.isdigit():  # "1", "8", "100"
        return Fraction(int(value))
    if isinstance(value, bool) or value is None:
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        if value.bit_length() > 64:
            raise QuantityOutOfRange(f"{_short(value) if value.bit_length() < 10000 else 'an integer'} is out of range")
        result = Fraction(value)
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(f"{value!r} is not a quantity")
        return parse_text(repr(value), value)
    elif isinstance(value, str):
        return parse_text(value.strip(), value)
    else:
        raise QuantityError(f"{_short(value)} is not a quantity")
    if abs(result) > MAX_QUANTITY:
        raise QuantityOutOfRange(f"{value!r} is out of range")
    return result
