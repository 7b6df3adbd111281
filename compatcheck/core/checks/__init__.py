"""The closed set of check types, and their registry.

A rule file names a check type (``check.type``) and gives it params; the type's ``params_schema``
validates them. ``register`` refuses duplicates and ``get`` refuses unknown names, loudly: there is
exactly one list of check types, this registry, filled by importing the modules below.
"""

from __future__ import annotations

from compatcheck.core.checks.base import CheckType, UnknownCheckType

_REGISTRY: dict[str, CheckType] = {}


def register(check_type: CheckType) -> CheckType:
    if check_type.name in _REGISTRY:
        raise RuntimeError(f"check type {check_type.name!r} registered twice")
    _REGISTRY[check_type.name] = check_type
    return check_type


def get(name: str) -> CheckType:
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownCheckType(f'no such check type: "{name}" (known: {", ".join(sorted(_REGISTRY))})') from None


def all_types() -> list[CheckType]:
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
        driver,
        hardware,
        meta,
        resources,
        vgpu,
    )
