"""Output formats. Each formatter turns a ``LintReport`` into text and evaluates nothing;
``FORMATTERS`` is the single registry of format names."""

from __future__ import annotations

from collections.abc import Callable

from compatcheck.report import json_report, text
from compatcheck.report.model import LintReport

FORMATTERS: dict[str, Callable[[LintReport], str]] = {
    "text": text.render,
    "json": json_report.render,
}

__all__ = ["FORMATTERS", "LintReport"]
