"""Output formats. Each formatter turns a ``LintReport`` into text and evaluates nothing;
``FORMATTERS`` is the single registry of format names. A format's module is imported when it is first used
(SARIF's hashlib and urllib, JUnit's xml.etree): a plain ``lint`` starts without them."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from compatcheck.report.model import LintReport


def _lazy(module: str) -> Callable[[LintReport], str]:
    """``compatcheck.report.<module>.render``, imported on the first call."""
    def render(report: LintReport) -> str:
        found: Callable[[LintReport], str] = importlib.import_module(f"compatcheck.report.{module}").render
        return found(report)
    render.__qualname__ = render.__name__ = f"{module}.render"
    return render


FORMATTERS: dict[str, Callable[[LintReport], str]] = {
    "text": _lazy("text"),
    "json": _lazy("json_report"),
    "sarif": _lazy("sarif"),
    "junit": _lazy("junit"),
    "github": _lazy("github"),
    "html": _lazy("html"),
}

__all__ = ["FORMATTERS", "LintReport"]
