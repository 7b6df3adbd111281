"""How the command line prints what stops a command and the diagnostics of a run, and its argparse value types.

Building the parser imports this module, so it imports nothing of the engine at module level: ``compatcheck
--version`` and ``--help`` start fast (``tests/test_startup.py``)."""

from __future__ import annotations

import argparse
import gc
import re
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from compatcheck.core.suggest import did_you_mean

if TYPE_CHECKING:
    from compatcheck.core.model import Diagnostic

_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<word>[^']*)' \(choose from (?P<choices>.*)\)$")
_OWNER = "_compatcheck_parser"  # the (sub)parser that left arguments unrecognised


class Parser(argparse.ArgumentParser):
    """argparse that says "did you mean ...?" for an unknown option, subcommand or choice. Subparsers are of the
    same class (argparse makes them so), and an unrecognised option is reported by the subcommand it was given
    to, with that subcommand's usage."""

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        ns, extras = super().parse_known_args(args, namespace)
        if extras and not hasattr(ns, _OWNER):  # the innermost subparser sees them first
            setattr(ns, _OWNER, self)
        return ns, extras

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        ns, extras = self.parse_known_args(args, namespace)
        owner: Parser = vars(ns).pop(_OWNER, self)
        if extras:
            options = [s for a in owner._actions for s in a.option_strings]
            shown = [x + did_you_mean(x.split("=", 1)[0], options) if x.startswith("-") else x for x in extras]
            owner.error(f"unrecognized arguments: {' '.join(shown)}")
        return ns

    # Defining an argument checks its metavar by formatting it, and argparse's formatter asks the terminal for its
    # width each time (the first time importing shutil, with bz2 and lzma: ~3 ms of a lint's start-up). The width
    # plays no part in that check, so it is fixed while an argument is defined; usage, help and error messages
    # are formatted as argparse formats them.
    _defining = False

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        self._defining = True
        try:
            return super().add_argument(*args, **kwargs)
        finally:
            self._defining = False

    def _get_formatter(self) -> argparse.HelpFormatter:
        if self._defining:
            formatter_class: Any = self.formatter_class  # (every argparse formatter takes a width)
            formatter: argparse.HelpFormatter = formatter_class(prog=self.prog, width=80)
            return formatter
        return super()._get_formatter()

    def error(self, message: str) -> NoReturn:
        m = _INVALID_CHOICE.search(message)
        if m:
            message += did_you_mean(m.group("word"), re.findall(r"'([^']*)'", m.group("choices")))
        super().error(message)


def started() -> None:
    """Said by a command once it has loaded what it runs on (config, rules, tables), before it reads its input: when
    ``main`` put the garbage collector off for the start-up (``entry._process_start``), the objects made so far,
    which live until the process exits, are left out of every later collection (``gc.freeze``), and collecting
    resumes."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def suggestion(word: str, known: Iterable[Any]) -> str:
    return did_you_mean(word, (str(k) for k in known))


def err(msg: str) -> None:
    print(f"compatcheck: error: {msg}", file=sys.stderr)


def print_diagnostics(diagnostics: Iterable[Diagnostic]) -> None:
    """One ``file:line: error|warning|note: message`` line each, on stderr (as the text report lists them)."""
    from compatcheck.report.text import diagnostic_line

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
