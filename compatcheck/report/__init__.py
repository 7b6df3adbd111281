"""Output formats. Each formatter turns a ``LintReport`` into text and evaluates nothing;
``FORMATTERS`` is the single registry of format names."""

from __future__ import annotations

from collections.abc import Callable

from compatcheck.report import github, html, json_report, junit, sarif, text
from compatcheck.report.model import LintReport

FORMATTERS: dict[str, Callable[[LintReport], str]] = {
    "text": text.render,
    "json": json_report.render,
    "sarif": sarif.render,
    "junit": junit.render,
    "github": github.render,
    "html": html.render,
}

__all__ = ["FORMATTERS", "LintReport"]
