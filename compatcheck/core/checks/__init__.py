"""The closed set of check types, and their registry.

A rule file names a check type (``check.type``) and gives it params; the type's ``params_schema``
validates them. ``register`` refuses duplicates and ``get`` refuses unknown names, loudly: there is
exactly one list of check types, this registry, filled by importing the modules below.
"""

from __future__ import annotations

import inspect
from typing import Any, TypeVar

from compatcheck.core.checks.base import CheckType, ObjectCheck, PodCheck, UnknownCheckType

# Check types of every target and params type side by side: the registry is where the static types meet, so they
# are erased here. Each rule pairs a type with the params its own ``prepare`` made (core.rules.Rule), which is
# what keeps ``evaluate``'s params of the type it declares.
AnyCheckType = CheckType[Any, Any]
C = TypeVar("C", bound=AnyCheckType)

_REGISTRY: dict[str, AnyCheckType] = {}


def register(check_type: C) -> C:
    """Add a check type; refuses, loudly, one that breaks the contract where mypy cannot see it (an untyped
    caller): a duplicate name, no target, or a ``prepare``/``evaluate`` that cannot take the contract's
    arguments."""
    name = getattr(check_type, "name", None)
    if not isinstance(check_type, (PodCheck, ObjectCheck)):
        raise TypeError(f"check type {name!r}: declare it as a PodCheck or an ObjectCheck")
    if check_type.name in _REGISTRY:
        raise RuntimeError(f"check type {check_type.name!r} registered twice")
    for what, arity in (("prepare", 1), ("evaluate", 3)):
        fn = getattr(check_type, what)
        if not callable(fn):
            raise TypeError(f"check type {check_type.name!r} has no {what} (every type has one: "
                            "base.no_params for a type without params)")
        try:
            inspect.signature(fn).bind(*[None] * arity)
        except TypeError:
            raise TypeError(f"check type {check_type.name!r}: {what} must take {arity} positional "
                            f"argument(s)") from None
    _REGISTRY[check_type.name] = check_type
    return check_type


def get(name: str) -> AnyCheckType:
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownCheckType(f'no such check type: "{name}" (known: {", ".join(sorted(_REGISTRY))})') from None


def all_types() -> list[AnyCheckType]:
    _load()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


_loaded = False


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    from compatcheck.core.checks import (  # noqa: F401  (imported for their register() calls)
        crl,
        dra,
        driver,
        hardware,
        meta,
        resources,
        source,
        vgpu,
    )
