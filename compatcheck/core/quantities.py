"""Kubernetes resource quantities (``1``, ``500m``, ``2Ki``, ``1e3``) as exact fractions. Pure."""

from __future__ import annotations

import re
from fractions import Fraction

from compatcheck.core.jsonutil import Json

_QTY_RE = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$")
_SUFFIX = {
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60),
}
MAX_QUANTITY = Fraction(2**63)


class QuantityError(ValueError):
    pass


def parse_quantity(value: Json) -> Fraction:
    if type(value) is str and value.isdigit() and len(value) < 19:  # the common case: "1", "8", "100"
        return Fraction(int(value))
    if isinstance(value, bool) or value is None:
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        result = Fraction(value)
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(f"{value!r} is not a quantity")
        result = Fraction(str(value))
    elif isinstance(value, str):
        m = _QTY_RE.match(value.strip())
        if not m:
            raise QuantityError(f"{value!r} is not a quantity")
        number, exponent, suffix = m.groups()
        if exponent and len(exponent) > 5:
            raise QuantityError(f"{value!r} is out of range")
        result = Fraction(number)
        result *= Fraction(10) ** int(exponent[1:]) if exponent else _SUFFIX[suffix or ""]
    else:
        raise QuantityError(f"{value!r} is not a quantity")
    if abs(result) > MAX_QUANTITY:
        raise QuantityError(f"{value!r} is out of range")
    return result
