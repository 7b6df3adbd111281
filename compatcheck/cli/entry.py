"""``compatcheck``: builds the parser from the subcommand modules and runs the chosen one.

Exit codes: 0 = nothing at or above the failure threshold, 1 = findings at or above it, 2 = usage, config, rule
or input errors. A command reports what stops it by raising ``CommandError``; nothing here evaluates anything.
"""

from __future__ import annotations

import gc
import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from compatcheck import __version__
from compatcheck.io.setup import EXIT_ERROR, EXIT_OK, CommandError

if TYPE_CHECKING:
    import argparse

# Start-up matters (a pre-commit hook runs compatcheck on every commit): this module imports only what every
# command needs. The subcommand modules describe their arguments and import the engine in their handlers;
# ``compatcheck --version`` alone answers before argparse is imported. tests/test_startup.py holds this.

# What the webhook extra brings: a webhook command run without it says what to install.
WEBHOOK_EXTRA_MODULES = {"aiohttp", "kubernetes", "cryptography", "prometheus_client", "jsonpatch"}
Handler = Callable[["argparse.Namespace"], int]
VERSION = f"compatcheck {__version__}"
# Commands that say when they have loaded what they run on (``common.started``): their process makes the objects
# of its modules, rules and tables with the garbage collector off. Those objects live until the process exits, and
# collecting among them while they were made cost a one-file lint a tenth of its instructions.
STARTED_COMMANDS = ("lint", "fix")


def parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser. Given ``command`` (the first argument of this run), only that command's
    arguments are defined: the other commands are still listed, with their help lines (argparse's usage, its
    "invalid choice" message and ``--help`` need them), but their parsers stay empty, as argparse never reaches
    them once the first argument names another command. Defining every command's options cost a one-file lint
    a tenth of its start-up."""
    from compatcheck.cli import audit, data, images, lint, rules, versions
    from compatcheck.cli import webhook as webhook_commands
    from compatcheck.cli.common import Parser

    p = Parser(
        prog="compatcheck",
        description="CUDA compatibility linter for Kubernetes GPU workloads.",
        epilog="exit codes: 0 clean, 1 findings at or above --fail-on, 2 usage/config/rule/input errors",
    )
    p.add_argument("--version", action="version", version=VERSION)
    # prog: what argparse would make of a parser with no positional argument before the commands (its prog), given
    # here so that it does not build a formatter for it (the terminal's width, shutil: see common.Parser)
    sub = p.add_subparsers(dest="command", required=True, prog=p.prog)
    only = _OnlyCommand(sub, command) if command is not None else None
    for module in (lint, audit, webhook_commands, versions, rules, images, data):
        module.register(sub if only is None else cast("argparse._SubParsersAction[argparse.ArgumentParser]", only))
    if only is not None and not only.found:  # not a command name (a typo, an option): argparse's own answer
        return parser()
    return p


class _Unreached:
    """Stands in for the parser of a command this run does not take, and for whatever defining its arguments
    returns (argument groups, nested subcommands): every call is accepted and does nothing."""

    def __getattr__(self, name: str) -> Callable[..., _Unreached]:
        return self._accept

    def _accept(self, *args: object, **kwargs: object) -> _Unreached:
        return self


class _OnlyCommand:
    """The subcommands' ``add_parser`` for a run whose first argument is ``command``: every command is added, with
    its help, but only ``command``'s parser is handed back to be filled."""

    def __init__(self, sub: argparse._SubParsersAction[Any], command: str) -> None:
        self.sub, self.command, self.found = sub, command, False

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser | _Unreached:
        added: argparse.ArgumentParser = self.sub.add_parser(name, **kwargs)
        if self.command == name or self.command in kwargs.get("aliases", ()):
            self.found = True
            return added
        return _Unreached()


def _handler(args: argparse.Namespace) -> Handler:
    """The command's function; the webhook's are named ``"module:function"`` and imported only now."""
    found: Handler | str = args.handler
    if isinstance(found, str):
        module, _, name = found.partition(":")
        handler: Handler = getattr(importlib.import_module(module), name)
        return handler
    return found


def main(argv: list[str] | None = None) -> int:
    if (sys.argv[1:] if argv is None else argv) == ["--version"]:
        print(VERSION)  # what argparse's version action prints, without building the parser
        return EXIT_OK
    from compatcheck.cli.common import err, print_diagnostics

    if argv is None:  # this process's command line (the console script, python -m), not a caller's list
        from compatcheck.io import classcache

        classcache.install()  # before the command imports the engine: its classes' methods come compiled
    given = sys.argv[1:] if argv is None else argv
    args = parser(given[0] if given and not given[0].startswith("-") else None).parse_args(argv)
    if argv is None and args.command in STARTED_COMMANDS:
        gc.disable()  # until the command has loaded what it runs on (common.started)
    try:
        return _handler(args)(args)
    except CommandError as exc:
        for message in exc.messages:
            err(message)
        print_diagnostics(exc.problems)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except ImportError as exc:
        # The webhook, cert and review commands need the extra; a core install must say so, not crash.
        missing = getattr(exc, "name", None) or str(exc)
        if str(missing).split(".")[0] in WEBHOOK_EXTRA_MODULES:
            err(f"`compatcheck {args.command}` needs the webhook extra (missing module {missing!r}): "
                "pip install 'compatcheck[webhook]'")
            return EXIT_ERROR
        raise
    finally:
        if argv is None and not gc.isenabled():  # a command that stopped before it said it had started
            gc.enable()
