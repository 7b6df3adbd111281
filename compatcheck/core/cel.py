"""CEL for Dynamic Resource Allocation device selectors, as the API server and the scheduler evaluate them.

A selector (``DeviceClass.spec.selectors[].cel.expression``, a request's ``selectors``) is evaluated once per
device, with one variable, ``device``:

- ``device.driver`` (string), ``device.allowMultipleAllocations`` (bool);
- ``device.attributes[domain].id``: the device's attributes grouped by domain (an attribute written without a
  domain belongs to the driver's); string, int, bool, or a semantic version for ``version`` attributes;
- ``device.capacity[domain].id``: quantities.

An unknown domain gives an empty map; an unknown attribute in it is an evaluation error, which makes the scheduler
abort the allocation (not merely skip the device). Source: ``k8s.io/dynamic-resource-allocation/cel/compile.go``
(``DeviceMatches``, ``newStringInterfaceMapWithDefault``) and the ``CELDeviceSelector`` API documentation.

The Kubernetes CEL libraries selectors use are implemented here after their Go sources in
``k8s.io/apiserver/pkg/cel/library``: ``semver`` (``semver(s)``, ``semver(s, normalize)``, ``isSemver``,
``major/minor/patch``, ``isGreaterThan``, ``isLessThan``, ``compareTo``; a Semver equals only a Semver, and has no
``<`` operator), ``quantity`` (``quantity``, ``isQuantity``, ``isGreaterThan``, ``isLessThan``, ``compareTo``,
``add``, ``sub``, ``mul``, ``sign``, ``asInteger``, ``isInteger``, ``asApproximateFloat``), and from the strings
extension ``lowerAscii``, ``upperAscii``, ``trim``, ``replace``, ``split``, ``indexOf``, ``substring``, ``join``.

The language itself is cel-python (``celpy``), a pure-Python CEL implementation: no I/O, imported on first use
(~100 ms), and the only module that imports it (an import-linter contract). What it does not implement
(``cel.bind``, the optional-types syntax) is reported as ``CelUnsupported``, never guessed.

Pure: no I/O.
"""

from __future__ import annotations

import re
import string
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import total_ordering
from typing import Any

from compatcheck.core.quantities import QuantityError
from compatcheck.core.quantities import parse_text as parse_quantity_text

AttributeValue = str | int | bool  # or Semver: version attributes


class CelError(Exception):
    """A selector that cannot be compiled (``kind`` "syntax"), or that fails on a device at run time ("runtime":
    an unknown attribute, a type mismatch, a result that is not a bool; the scheduler aborts the allocation)."""

    def __init__(self, message: str, kind: str = "runtime") -> None:
        super().__init__(message)
        self.kind = kind


class CelUnsupported(CelError):
    """The expression uses CEL that compatcheck's evaluator lacks: nothing can be said about it."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "unsupported")


class CelTooCostly(CelUnsupported):
    """The expression is over compatcheck's cost limit (see ``estimate_cost``): it is not evaluated, and nothing is
    said about it but that."""

    def __init__(self, message: str) -> None:
        super().__init__(f"not checked: selector too costly ({message})")


# The API server's limits on a selector (k8s.io/api/resource/v1: CELSelectorExpressionMaxLength = 10240 characters,
# CELSelectorExpressionMaxCost = 1000000; validateCELSelector refuses a longer or costlier expression, and the
# scheduler evaluates with that cost as its runtime limit, k8s.io/dynamic-resource-allocation/cel). compatcheck's
# estimate is not cel-go's (no type-checker here): one unit per syntax node, a comprehension's body counted once per
# element of its range (the elements of a list literal, 32 for a map of the device, as a device has at most 32
# attributes and capacities, and the expression's length for anything else), so it only ever says more than cel-go.
MAX_EXPRESSION_LENGTH = 10240
MAX_COST = 1_000_000
# Nesting of brackets and unary operators: each level is a dozen frames of the pure-Python parser and evaluator, so
# deeper expressions would end in RecursionError (cel-go's parser stops at a recursion depth of 250 by default).
MAX_NESTING = 32
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})


# ---------------------------------------------------------------------------------------------- semver

_NUM = r"0|[1-9]\d*"
_PRE_ID = r"(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)"
_SEMVER_RE = re.compile(rf"^(?P<major>{_NUM})\.(?P<minor>{_NUM})\.(?P<patch>{_NUM})"
                        rf"(?:-(?P<pre>{_PRE_ID}(?:\.{_PRE_ID})*))?(?:\+(?P<build>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$",
                        re.ASCII)


@total_ordering
@dataclass(frozen=True)
class SemverKey:
    """Precedence of a semantic version (semver.org 2.0.0, section 11; build metadata does not count)."""

    core: tuple[int, int, int]
    pre: tuple[tuple[int, int | str], ...]

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, SemverKey):
            return NotImplemented
        if self.core != other.core:
            return self.core < other.core
        if not self.pre or not other.pre:
            return bool(self.pre) and not other.pre  # a pre-release sorts before its release
        for a, b in zip(self.pre, other.pre, strict=False):
            if a != b:
                if a[0] != b[0]:
                    return a[0] < b[0]  # numeric identifiers sort before alphanumeric ones
                return a[1] < b[1]  # type: ignore[operator]  # same kind of identifier on both sides
        return len(self.pre) < len(other.pre)


class Semver:
    """A CEL ``kubernetes.Semver``: equality and ordering only through its methods (no ``<`` operator)."""

    __slots__ = ("build", "key", "text")

    def __init__(self, text: str) -> None:
        m = _SEMVER_RE.match(text)
        if not m:
            raise CelError(f"{text!r} is not a semantic version (MAJOR.MINOR.PATCH)")
        pre = tuple((0, int(p)) if p.isdigit() else (1, p) for p in m.group("pre").split(".")) if m.group(
            "pre") else ()
        self.key = SemverKey((int(m.group("major")), int(m.group("minor")), int(m.group("patch"))), pre)
        self.build = m.group("build") or ""
        self.text = text

    @property
    def major(self) -> int:
        return self.key.core[0]

    @property
    def minor(self) -> int:
        return self.key.core[1]

    @property
    def patch(self) -> int:
        return self.key.core[2]

    def compare(self, other: Semver) -> int:
        return (self.key > other.key) - (self.key < other.key)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Semver):
            raise TypeError(f"no such overload: Semver == {type(other).__name__}")
        return self.key == other.key

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"semver({self.text!r})"


def normalise_semver(text: str) -> str:
    """``semver(s, true)``: drop a leading "v", leading zeros, and fill a missing minor and patch with 0."""
    s = text[1:] if text.startswith("v") else text
    parts = s.split(".", 2)
    for i, p in enumerate(parts):
        if len(p) > 1:
            p = p.lstrip("0")
            if not p or not p[0].isdigit():
                p = "0" + p
            parts[i] = p
    if len(parts) < 3:
        if any(ch in parts[-1] for ch in "+-"):
            raise CelError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


# ---------------------------------------------------------------------------------------------- quantity

class Quantity:
    """A CEL ``kubernetes.Quantity`` (exact, as a fraction)."""

    __slots__ = ("value",)

    def __init__(self, value: Fraction) -> None:
        self.value = value

    @classmethod
    def parse(cls, text: str) -> Quantity:
        try:  # resource.ParseQuantity, as the quantity() library function calls it (no spaces trimmed)
            return cls(parse_quantity_text(text))
        except QuantityError as exc:
            raise CelError(str(exc)) from None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            raise TypeError(f"no such overload: Quantity == {type(other).__name__}")
        return self.value == other.value

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"quantity({self.value})"


# ---------------------------------------------------------------------------------------------- the environment


def _celpy() -> Any:
    import celpy  # cel-python: imported on first use, here only

    return celpy


@dataclass(frozen=True)
class DeviceInput:
    """What a selector sees of a device."""

    driver: str
    attributes: Mapping[str, Mapping[str, AttributeValue | Semver]]  # domain -> id -> value
    capacity: Mapping[str, Mapping[str, Fraction]]  # domain -> id -> quantity
    allow_multiple_allocations: bool = False


_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_ASCII_UPPER = str.maketrans(string.ascii_lowercase, string.ascii_uppercase)


def _functions() -> dict[str, Callable[..., Any]]:
    ct = _celpy().celtypes

    def parse_semver(text: Any, normalize: Any = False) -> Semver:
        if not isinstance(text, str):
            raise TypeError("no such overload: semver")
        return Semver(normalise_semver(text) if normalize else text)

    def parse_quantity_(text: Any) -> Quantity:
        if not isinstance(text, str):
            raise TypeError("no such overload: quantity")
        return Quantity.parse(str(text))

    def as_value(parse: Callable[..., Any]) -> Callable[..., Any]:
        """A parse error as CEL's error value, not an exception: ``&&`` and ``||`` absorb it as the API server's
        do (``isSemver(s) && semver(s) ...`` is false, not an error, for an ``s`` that is no version)."""
        def call(*args: Any) -> Any:
            try:
                return parse(*args)
            except CelError as exc:
                return _celpy().CELEvalError(str(exc))
        return call

    def is_valid(parse: Callable[..., Any]) -> Callable[..., Any]:
        def check(*args: Any) -> Any:
            try:
                parse(*args)
            except CelError:
                return ct.BoolType(False)
            return ct.BoolType(True)
        return check

    def compare(a: Any, b: Any) -> int:
        if isinstance(a, Semver) and isinstance(b, Semver):
            return a.compare(b)
        if isinstance(a, Quantity) and isinstance(b, Quantity):
            return (a.value > b.value) - (a.value < b.value)
        raise TypeError(f"no such overload: compare {type(a).__name__} with {type(b).__name__}")

    def semver_part(index: int) -> Callable[[Any], Any]:
        def part(v: Any) -> Any:
            if not isinstance(v, Semver):
                raise TypeError("no such overload")
            return ct.IntType(v.key.core[index])
        return part

    def q(v: Any) -> Fraction:
        if not isinstance(v, Quantity):
            raise TypeError("no such overload")
        return v.value

    def arith(sign: int) -> Callable[[Any, Any], Quantity]:
        def op(a: Any, b: Any) -> Quantity:
            other = b.value if isinstance(b, Quantity) else Fraction(int(b)) if isinstance(b, int) and not isinstance(
                b, bool) else None
            if other is None:
                raise TypeError("no such overload")
            return Quantity(q(a) + sign * other)
        return op

    def as_integer(v: Any) -> Any:
        value = q(v)
        if value.denominator != 1 or not -(2**63) <= value < 2**63:
            raise ValueError("cannot convert value to integer")
        return ct.IntType(int(value))

    def text(fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(s: Any, *args: Any) -> Any:
            if not isinstance(s, str):
                raise TypeError("no such overload")
            return fn(str(s), *args)
        return wrapped

    return {
        "semver": as_value(parse_semver), "isSemver": is_valid(parse_semver), "quantity": as_value(parse_quantity_),
        "isQuantity": is_valid(parse_quantity_),
        "isGreaterThan": lambda a, b: ct.BoolType(compare(a, b) == 1),
        "isLessThan": lambda a, b: ct.BoolType(compare(a, b) == -1),
        "compareTo": lambda a, b: ct.IntType(compare(a, b)),
        "major": semver_part(0), "minor": semver_part(1), "patch": semver_part(2),
        "sign": lambda v: ct.IntType((q(v) > 0) - (q(v) < 0)),
        "isInteger": lambda v: ct.BoolType(q(v).denominator == 1 and -(2**63) <= q(v) < 2**63),
        "asInteger": as_integer,
        "asApproximateFloat": lambda v: ct.DoubleType(float(q(v))),
        "add": arith(1), "sub": arith(-1),
        "mul": lambda a, b: Quantity(q(a) * int(b)),
        # ASCII letters only, as cel-go's strings extension: "ÀB".lowerAscii() is "Àb" (str.lower() would give "àb")
        "lowerAscii": text(lambda s: ct.StringType(s.translate(_ASCII_LOWER))),
        "upperAscii": text(lambda s: ct.StringType(s.translate(_ASCII_UPPER))),
        "trim": text(lambda s: ct.StringType(s.strip())),
        "replace": text(lambda s, a, b, n=-1: ct.StringType(s.replace(str(a), str(b), int(n)))),
        "split": text(lambda s, sep, n=-1: ct.ListType([ct.StringType(x) for x in (
            s.split(str(sep)) if int(n) < 0 else s.split(str(sep), max(int(n) - 1, 0)) if int(n) else [])])),
        "indexOf": text(lambda s, sub, start=0: ct.IntType(s.find(str(sub), int(start)))),
        "substring": text(lambda s, a, b=None: ct.StringType(s[int(a):] if b is None else s[int(a):int(b)])),
        "join": lambda items, sep="": ct.StringType(str(sep).join(str(x) for x in items)),
    }


def _to_cel(value: Any) -> Any:
    ct = _celpy().celtypes
    if isinstance(value, bool):
        return ct.BoolType(value)
    if isinstance(value, int):
        return ct.IntType(value)
    if isinstance(value, str):
        return ct.StringType(value)
    return value  # Semver, Quantity


_DEFAULT_MAP: list[Any] = []


def _default_map(items: dict[Any, Any]) -> Any:
    """``device.attributes`` / ``device.capacity``: a celpy map in which an unknown domain gives an empty map
    (``in`` still says it is absent), as the scheduler's map with a default does."""
    if not _DEFAULT_MAP:
        ct = _celpy().celtypes

        class DefaultMapType(ct.MapType):  # type: ignore[misc,name-defined]
            def __getitem__(self, key: Any) -> Any:
                try:
                    return super().__getitem__(key)
                except KeyError:
                    return ct.MapType({})

        _DEFAULT_MAP.append(DefaultMapType)
    return _DEFAULT_MAP[0](items)


def device_activation(device: DeviceInput) -> dict[str, Any]:
    """The ``device`` variable of a selector."""
    ct = _celpy().celtypes
    attributes = {ct.StringType(domain): ct.MapType({ct.StringType(k): _to_cel(v) for k, v in ids.items()})
                  for domain, ids in device.attributes.items()}
    capacity = {ct.StringType(domain): ct.MapType({ct.StringType(k): Quantity(v) for k, v in ids.items()})
                for domain, ids in device.capacity.items()}
    return {"device": ct.MapType({
        ct.StringType("driver"): ct.StringType(device.driver),
        ct.StringType("allowMultipleAllocations"): ct.BoolType(device.allow_multiple_allocations),
        ct.StringType("attributes"): _default_map(attributes),
        ct.StringType("capacity"): _default_map(capacity),
    })}


_UNSUPPORTED = re.compile(r"undeclared reference to '(?P<name>[^']+)'")


# The fields of the ``device`` variable (k8s.io/dynamic-resource-allocation/cel: a declared object type, so the API
# server refuses a selector that names another one when the DeviceClass or claim is created).
DEVICE_FIELDS = frozenset({"driver", "attributes", "capacity", "allowMultipleAllocations"})
_LITERALS = re.compile(r"""'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*\"""")
_DEVICE_FIELD = re.compile(r"\bdevice\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")


class Selector:
    """A compiled selector expression."""

    def __init__(self, expression: str) -> None:
        celpy = _celpy()
        self.expression = expression
        if "cel.bind(" in expression.replace(" ", ""):
            raise CelUnsupported("cel.bind() is not supported by compatcheck's CEL evaluator")
        if len(expression) > MAX_EXPRESSION_LENGTH:
            raise CelError(f"{len(expression)} characters, over the API server's limit of {MAX_EXPRESSION_LENGTH}",
                           "syntax")
        depth = nesting(expression)
        if depth > MAX_NESTING:
            raise CelTooCostly(f"nested {depth} deep, over compatcheck's limit of {MAX_NESTING}")
        env = celpy.Environment()
        try:
            ast = env.compile(expression)
        except celpy.CELParseError as exc:
            where = f" at line {exc.line}, column {exc.column}" if getattr(exc, "line", None) else ""
            raise CelError(f"syntax error{where}", "syntax") from None
        except RecursionError:
            raise CelTooCostly("too deeply nested to parse") from None
        cost = estimate_cost(ast, len(expression))
        if cost > MAX_COST:
            raise CelTooCostly(f"estimated cost {cost} is over the limit of {MAX_COST}")
        for m in _DEVICE_FIELD.finditer(_LITERALS.sub('""', expression)):
            if m.group(1) not in DEVICE_FIELDS:  # the API server type-checks the device object's fields
                raise CelError(f"undefined field '{m.group(1)}'", "syntax")
        self._program = env.program(ast, functions=_functions())

    def matches(self, device: DeviceInput) -> bool:
        """Whether the device satisfies the selector. Raises ``CelError`` (the scheduler would abort the
        allocation) or ``CelUnsupported`` (compatcheck cannot tell)."""
        celpy = _celpy()
        try:
            result = self._program.evaluate(device_activation(device))
        except celpy.CELEvalError as exc:
            raise _eval_error(exc) from None
        except CelError:
            raise
        except RecursionError:
            raise CelTooCostly("too deeply nested to evaluate") from None
        except (TypeError, ValueError, KeyError, ZeroDivisionError) as exc:
            raise CelError(f"{type(exc).__name__}: {exc}") from None
        if isinstance(result, celpy.CELEvalError):
            raise _eval_error(result)
        if not isinstance(result, celpy.celtypes.BoolType):
            raise CelError(f"the expression evaluated to {type(result).__name__.removesuffix('Type').lower()}, "
                           "not bool")
        return bool(result)


def nesting(expression: str) -> int:
    """How deep brackets and prefix operators nest in ``expression`` (outside string literals): a linear scan, made
    before the recursive parser sees the text."""
    deepest = depth = 0
    unary = 0  # a run of prefix operators ('!!!!x', '- - -x')
    for token in _NESTING_TOKENS.finditer(_LITERALS.sub('""', expression)):
        t = token.group()
        if t in "([{":
            depth += 1
            unary = 0
        elif t in ")]}":
            depth = max(depth - 1, 0)
            unary = 0
        elif t in "!-":
            unary += 1
        else:
            unary = 0
        deepest = max(deepest, depth + unary)
    return deepest


_NESTING_TOKENS = re.compile(r"[()\[\]{}!-]|[^()\[\]{}!\s-]+")


def estimate_cost(ast: Any, length: int) -> int:
    """An upper bound of the steps of evaluating ``ast`` (celpy's parse tree) once: one per node, and a
    comprehension's arguments once per element of its range (see ``MAX_COST``). Iterative: the tree may be deep."""
    # (node, multiplier): post-order sums would need recursion; a multiplier pushed down is the same bound.
    total = 0
    stack: list[tuple[Any, int]] = [(ast, 1)]
    while stack:
        node, times = stack.pop()
        total += times
        if total > MAX_COST:
            return total
        children = getattr(node, "children", None)
        if not children:
            continue
        if getattr(node, "data", None) == "member_dot_arg" and len(children) >= 2 and \
                str(children[1]) in _MACROS:
            target, *args = children
            stack.append((target, times))
            size = _range_size(target, length)
            stack.extend((arg, times * size) for arg in args)
            continue
        stack.extend((child, times) for child in children)
    return total


def _range_size(node: Any, length: int) -> int:
    """How many elements a comprehension's range can have: a list or map literal's own, a map of the device's 32,
    else as many as the expression has characters."""
    while getattr(node, "data", None) in ("member", "primary") and len(node.children) == 1:
        node = node.children[0]
    data = getattr(node, "data", None)
    if data in ("list_lit", "map_lit"):
        items = node.children[0] if node.children else None
        return max(len(getattr(items, "children", ()) or ()), 1)
    if data in ("member_dot", "member_index"):
        leftmost = node
        while getattr(leftmost, "children", None):
            leftmost = leftmost.children[0]
        if str(leftmost) == "device":
            return 32
    return max(length, 1)


def _eval_error(exc: Any) -> CelError:
    message = str(exc.args[0]) if getattr(exc, "args", None) else str(exc)
    m = _UNSUPPORTED.search(message)
    if m and m.group("name") != "device":
        return CelUnsupported(f"{m.group('name')}() is not supported by compatcheck's CEL evaluator")
    args = exc.args[2] if len(exc.args) > 2 and exc.args[2] else ()
    if message.startswith("no such member in mapping"):
        return CelError(message.replace("no such member in mapping", "no such key"))
    if message == "no such key" and args:
        return CelError(f"no such key: {args[0]}")
    inner = exc.args[2][0] if len(exc.args) > 2 and exc.args[2] else None
    return CelError(str(inner) if isinstance(inner, str) else message)


_CACHE: dict[str, Selector | CelError] = {}
_LOCK = threading.Lock()
MAX_CACHED = 4096


def compile_selector(expression: str) -> Selector:
    """The compiled selector (cached per expression: a cluster has few). Raises ``CelError``."""
    found = _CACHE.get(expression)
    if found is None:
        try:
            found = Selector(expression)
        except CelError as exc:
            found = exc
        with _LOCK:
            if len(_CACHE) >= MAX_CACHED:
                _CACHE.clear()
            _CACHE[expression] = found
    if isinstance(found, CelError):
        raise found
    return found


def warm() -> None:
    """Load the CEL parser (~0.5 s, once per process), so that the first selector a request needs does not pay it."""
    compile_selector("device.driver == ''")
