"""Typed access to untrusted JSON/YAML values: a wrong type reads as empty, never raises. Pure."""

from __future__ import annotations

from typing import Any


def mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def sequence(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
