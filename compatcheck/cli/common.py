"""How the command line prints what stops a command and the diagnostics of a run, and its argparse value types."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable

from compatcheck.core.model import Diagnostic
from compatcheck.report.text import diagnostic_line


def err(msg: str) -> None:
    print(f"compatcheck: error: {msg}", file=sys.stderr)


def print_diagnostics(diagnostics: Iterable[Diagnostic]) -> None:
    """One ``file:line: error|warning|note: message`` line each, on stderr (as the text report lists them)."""
    for d in diagnostics:
        print(diagnostic_line(d), file=sys.stderr)


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value


def count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value
