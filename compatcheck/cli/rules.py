"""``compatcheck rules list | explain | validate``: the rule reference and admin rule validation."""

from __future__ import annotations

import argparse
import os
import sys

from compatcheck.cli.common import err, suggestion
from compatcheck.io.setup import EXIT_ERROR, EXIT_OK, rules


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("rules", help="list, explain or validate rules")
    rsub = parser.add_subparsers(dest="rules_command", required=True)
    rl = rsub.add_parser("list")
    rl.add_argument("--format", choices=["text", "json", "markdown"], default="text")
    rl.add_argument("--rules-dir", action="append", default=[])
    rl.add_argument("--examples", metavar="DIR", help="markdown: show a failing and a passing manifest per rule "
                                                      "from the fixtures in DIR/<rule-id>/ (docs/rules.md uses "
                                                      "--examples fixtures)")
    rl.set_defaults(handler=list_command)
    re_ = rsub.add_parser("explain")
    re_.add_argument("rule_id", nargs="?", help="rule id (or read from stdin, e.g. piped from rules list)")
    re_.add_argument("--rules-dir", action="append", default=[])
    re_.set_defaults(handler=explain_command)
    rv = rsub.add_parser("validate", help="validate rule directories and admin files (built-ins included)")
    rv.add_argument("dirs", nargs="*")
    rv.add_argument("--files", nargs="*", default=[], help="rule or data-table files (pre-commit passes these)")
    rv.set_defaults(handler=validate_command)


def _dirs_for_files(files: list[str]) -> list[str]:
    """Rule directories holding the given files (a data table's directory is its parent's parent)."""
    out = []
    for f in files:
        d = os.path.dirname(os.path.abspath(f))
        out.append(os.path.dirname(d) if os.path.basename(d) == "data" else d)
    return out


def validate_command(args: argparse.Namespace) -> int:
    dirs = list(args.dirs)
    if args.files:
        dirs += _dirs_for_files(args.files)
    loaded = rules(sorted(set(dirs)), validate_builtin=True)
    print(f"{len(loaded.ruleset)} rules and {sum(len(v) for v in loaded.tables.values())} table rows are valid")
    return EXIT_OK


def list_command(args: argparse.Namespace) -> int:
    import json

    from compatcheck.io.examples import rule_examples
    from compatcheck.report import ruledocs

    loaded = rules(args.rules_dir)
    if args.format == "markdown":
        examples = None
        if args.examples:
            if not os.path.isdir(args.examples):
                err(f"--examples {args.examples}: not a directory")
                return EXIT_ERROR
            examples = rule_examples(args.examples)
        sys.stdout.write(ruledocs.markdown(loaded.ruleset, examples))
    elif args.format == "json":
        print(json.dumps([ruledocs.rule_json(r) for r in loaded.ruleset], indent=2))
    else:
        for r in loaded.ruleset:
            print(f"{r.id:<28} {r.severity.value:<8} {r.summary}")
    return EXIT_OK


def explain_command(args: argparse.Namespace) -> int:
    from compatcheck.report import ruledocs

    loaded = rules(args.rules_dir)
    ids = [args.rule_id] if args.rule_id else [ln.split()[0] for ln in sys.stdin.read().splitlines() if ln.strip()]
    status = EXIT_OK
    for rid in ids:
        if rid not in loaded.ruleset.rules:
            err(f"no such rule: {rid!r}{suggestion(rid, loaded.ruleset.rules) or ' (see compatcheck rules list)'}")
            status = EXIT_ERROR
            continue
        sys.stdout.write(ruledocs.explain(loaded.ruleset.get(rid)))
    return status
