"""Kubernetes label selectors as ``kubectl -l`` and the API's ``labelSelector`` parameter write them.

The grammar (k8s.io/apimachinery/pkg/labels/selector.go, ``Parse``): requirements separated by commas and ANDed;
each is ``key=value``, ``key==value``, ``key!=value``, ``key in (v1,v2)``, ``key notin (v1,v2)``, ``key`` (exists)
or ``!key`` (does not exist). ``!=`` and ``notin`` also match a node without the key, as Kubernetes does. An empty
selector matches everything. Keys and values are checked against Kubernetes' syntax for label keys and values.

Pure: strings in, a ``Selector`` out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

# A label key: an optional DNS-subdomain prefix and '/', then a name of at most 63 characters; a value: at most 63
# characters, alphanumeric at both ends, '-', '_' and '.' inside (or empty).
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_NAME}$")
_VALUE = re.compile(rf"^({_NAME})?$")
_SET = re.compile(r"^(?P<key>\S+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)$")


class SelectorError(ValueError):
    """A selector that does not parse; the message says which part and why."""


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.op == "exists":
            return value is not None
        if self.op == "!":
            return value is None
        if self.op in ("=", "in"):
            return value is not None and value in self.values
        return value is None or value not in self.values  # != and notin


@dataclass(frozen=True)
class Selector:
    text: str
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def keys(self) -> frozenset[str]:
        return frozenset(r.key for r in self.requirements)

    def __str__(self) -> str:
        return self.text


def _split(text: str) -> list[str]:
    """The requirements: commas outside parentheses separate them."""
    out: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
            if depth > 1:
                raise SelectorError(f"selector {text!r}: nested parentheses")
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"selector {text!r}: ')' without '('")
        elif ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    if depth:
        raise SelectorError(f"selector {text!r}: '(' without ')'")
    out.append(text[start:])
    return out


def _key(text: str, key: str) -> str:
    if not _KEY.match(key) or len(key.rsplit("/", 1)[0]) > 253:
        raise SelectorError(f"selector {text!r}: {key!r} is not a label key")
    return key


def _value(text: str, value: str) -> str:
    if not _VALUE.match(value):
        raise SelectorError(f"selector {text!r}: {value!r} is not a label value")
    return value


def parse_selector(text: str) -> Selector:
    """Parse a label selector; raise SelectorError naming the requirement that cannot be read."""
    stripped = text.strip()
    if not stripped:
        return Selector("", ())
    reqs: list[Requirement] = []
    for part in _split(stripped):
        part = part.strip()
        if not part:
            raise SelectorError(f"selector {text!r}: an empty requirement (two commas, or one at an end)")
        m = _SET.match(part)
        if m:
            values = [v.strip() for v in m.group("values").split(",")]
            if values == [""]:
                raise SelectorError(f"selector {text!r}: {m.group('op')} () needs at least one value")
            reqs.append(Requirement(_key(text, m.group("key")), m.group("op"),
                                    frozenset(_value(text, v) for v in values)))
            continue
        for op in ("!=", "==", "="):
            if op in part:
                key, _, value = part.partition(op)
                reqs.append(Requirement(_key(text, key.strip()), "!=" if op == "!=" else "=",
                                        frozenset({_value(text, value.strip())})))
                break
        else:
            if part.startswith("!"):
                reqs.append(Requirement(_key(text, part[1:].strip()), "!"))
            else:
                reqs.append(Requirement(_key(text, part), "exists"))
    return Selector(stripped, tuple(reqs))
