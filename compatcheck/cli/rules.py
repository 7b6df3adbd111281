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
    rk = rsub.add_parser("kinds", help="the workload kinds compatcheck reads (built-in and --rules-dir rows)")
    rk.add_argument("--rules-dir", action="append", default=[])
    rk.add_argument("--format", choices=["text", "json", "chart-values"], default="text",
                    help="chart-values: the webhook.customResources of the Helm chart for these kinds")
    rk.set_defaults(handler=kinds_command)
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


def kinds_command(args: argparse.Namespace) -> int:
    import json

    from compatcheck.core.workloads import custom_resource_routes
    from compatcheck.io.loader import builtin_kinds

    loaded = rules(args.rules_dir)
    kinds = loaded.kb.kinds or builtin_kinds()
    if args.format == "chart-values":
        print("customResources:")
        for rule in custom_resource_routes(kinds):
            fields = ", ".join(f"{k}: [{', '.join(v)}]" if isinstance(v, list) else f"{k}: {v}"
                               for k, v in rule.items())
            print(f"  - {{{fields}}}")
    elif args.format == "json":
        print(json.dumps([{"groups": list(wk.groups), "kind": wk.kind, "versions": list(wk.versions),
                           "resource": wk.plural, "scope": wk.scope,
                           "locations": [{"path": loc.pattern, "shape": loc.shape} for loc in wk.locations],
                           "source": wk.source} for wk in kinds.kinds], indent=2))
    else:
        for wk in kinds.kinds:
            groups = ", ".join(g or "core" for g in wk.groups)
            where = ", ".join(loc.pattern or "(the object)" for loc in wk.locations) or "(no pod spec)"
            print(f"{wk.kind} ({groups}) {'/'.join(wk.versions) or '*'}: {where}")
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
