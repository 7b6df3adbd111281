"""``compatcheck data build | push | pull | status | rollback``: the knowledge as a versioned, digest-addressed
OCI artifact (docs/data-bundle.md). The work is ``io.bundle``'s; this module parses, prints and exits.

Exit codes: 0 done; 1 ``status --max-age``: the knowledge in use is older than that; 2 errors (an invalid rules
directory, a registry or verification failure: then nothing in the cache has changed)."""

from __future__ import annotations

import argparse
import sys

from compatcheck.io.setup import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, CommandError

DEFAULT_TIMEOUT = 120.0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("data", help="build, push, pull and inspect data bundles (the rules and tables)",
                            epilog="exit codes: 0 done, 1 status --max-age exceeded, 2 errors (nothing changed)")
    dsub = parser.add_subparsers(dest="data_command", required=True)
    b = dsub.add_parser("build", help="validate a rules directory and write it as a bundle (an OCI image layout)")
    b.add_argument("-o", "--output", metavar="DIR", required=True, help="the OCI layout directory to write")
    b.add_argument("--rules", metavar="DIR", help="the rules directory (rules/*.yaml, rules/data/*.yaml; default: "
                                                  "the built-in one)")
    b.add_argument("--format", choices=["text", "json"], default="text")
    b.set_defaults(handler=build_command)
    p = dsub.add_parser("push", help="push a bundle layout to a registry")
    p.add_argument("layout", metavar="DIR", help="an OCI layout written by data build")
    p.add_argument("ref", metavar="REF", help="registry/repository:tag")
    _registry_options(p)
    p.set_defaults(handler=push_command)
    u = dsub.add_parser("pull", help="pull, verify and activate a bundle (the previous one is kept)")
    u.add_argument("ref", metavar="REF", help="registry/repository:tag, registry/repository@sha256:..., or a "
                                              "bundle's OCI layout directory (air-gapped sites)")
    _registry_options(u)
    u.set_defaults(handler=pull_command)
    s = dsub.add_parser("status", help="the knowledge in use: built-in or pulled, its age, each table's asOf "
                                       "date, sources and rows")
    s.add_argument("--format", choices=["text", "json"], default="text")
    s.add_argument("--data", metavar="builtin|active|auto|DIR", help="as lint's --data (default: auto)")
    s.add_argument("--config", metavar="FILE", help="config file (its data.use)")
    s.add_argument("--max-age", metavar="DURATION", help="exit 1 when the knowledge was built longer ago than "
                                                         "this (90s, 15m, 6h, 30d)")
    s.set_defaults(handler=status_command)
    r = dsub.add_parser("rollback", help="make the previously active bundle active again")
    r.set_defaults(handler=rollback_command)


def _registry_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="config file (its registry: section: caFile, authFile, timeout)")
    p.add_argument("--registry-ca", metavar="FILE", help="CA bundle (PEM) added to the system's for the registry")
    p.add_argument("--registry-auth-file", metavar="FILE", help="docker config.json with the registry's credentials "
                                                                "(default: $DOCKER_CONFIG or ~/.docker/config.json)")
    p.add_argument("--plain-http", action="store_true",
                   help="speak plain HTTP to the registry: only for a registry on this machine (localhost, 127.0.0.1, "
                        "::1); TLS is verified otherwise, always")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help=f"the whole transfer's deadline (default {DEFAULT_TIMEOUT:g})")


def _settings(args: argparse.Namespace) -> object:
    import os
    from dataclasses import replace

    from compatcheck.io.config import find_config
    from compatcheck.io.setup import configure_only

    settings = configure_only(args.config or find_config()).registry
    for flag, key in (("registry_ca", "ca_file"), ("registry_auth_file", "auth_file")):
        value = getattr(args, flag)
        if value:
            if not os.path.isfile(value):
                raise CommandError(f"--{flag.replace('_', '-')} {value}: no such file")
            settings = replace(settings, **{key: value})
    return settings


def build_command(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from compatcheck.io import bundle
    from compatcheck.io.loader import builtin_rules_dir

    rules_dir = Path(args.rules) if args.rules else builtin_rules_dir()
    try:
        built = bundle.build(rules_dir)
        bundle.write_layout(built, Path(args.output))
    except bundle.BundleError as exc:
        raise CommandError(exc.message, problems=exc.problems) from None
    except OSError as exc:
        raise CommandError(f"{args.output}: {exc.strerror or exc}") from None
    if args.format == "json":
        print(json.dumps({"digest": built.digest, "output": args.output, "created": built.config["created"],
                          "rules": built.config["rules"],
                          "tables": {t["name"]: t["rows"] for t in built.config["tables"]}}, indent=2))
    else:
        rows = sum(t["rows"] for t in built.config["tables"])
        print(f"{args.output}: {built.digest} ({built.config['rules']} rules, {len(built.config['tables'])} "
              f"tables, {rows} rows; created {built.config['created']})")
    return EXIT_OK


def push_command(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from compatcheck.io import bundle

    settings = _settings(args)
    try:
        ref = bundle.parse_ref(args.ref)
        client = bundle.registry_client(settings, ref.registry, plain_http=args.plain_http)
        try:
            digest = bundle.push(Path(args.layout), client, ref, time.monotonic() + args.timeout)
        finally:
            client.close()
    except bundle.BundleError as exc:
        raise CommandError(f"push {args.ref}: {exc.message}") from None
    print(f"{ref.name}@{digest}")
    return EXIT_OK


def pull_command(args: argparse.Namespace) -> int:
    from compatcheck.io import bundle
    from compatcheck.io.datastate import DataChoiceError

    settings = _settings(args)
    try:
        record = bundle.pull(args.ref, settings, args.timeout, plain_http=args.plain_http)
    except bundle.BundleError as exc:
        raise CommandError(f"pull {args.ref}: {exc.message}; the active data is unchanged",
                           problems=exc.problems) from None
    except DataChoiceError as exc:
        raise CommandError(f"pull {args.ref}: {exc}; the active data is unchanged") from None
    except OSError as exc:
        raise CommandError(f"pull {args.ref}: {exc.strerror or exc}; the active data is unchanged") from None
    print(f"active: {record['digest']} ({args.ref}, created {record['created']})")
    return EXIT_OK


def rollback_command(args: argparse.Namespace) -> int:
    from compatcheck.io import bundle
    from compatcheck.io.datastate import DataChoiceError

    try:
        record = bundle.rollback()
    except (bundle.BundleError, DataChoiceError) as exc:
        raise CommandError(f"rollback: {exc}") from None
    print(f"active: {record['digest']} ({record['ref']}, created {record['created']})")
    return EXIT_OK


def status_command(args: argparse.Namespace) -> int:
    import json

    from compatcheck.core.config import parse_duration
    from compatcheck.io import bundle
    from compatcheck.io.config import find_config
    from compatcheck.io.datastate import DataChoiceError
    from compatcheck.io.setup import configure_only, knowledge

    max_age = None
    if args.max_age:
        try:
            max_age = parse_duration(args.max_age)
        except (ValueError, KeyError, IndexError):
            raise CommandError(f"--max-age {args.max_age!r}: expected seconds or a number with s, m, h or d") from None
    config = configure_only(args.config or find_config())
    try:
        found = bundle.status(knowledge(args.data, config.data.use))
    except (bundle.BundleError, DataChoiceError) as exc:
        raise CommandError(f"status: {exc}") from None
    except (OSError, ValueError, KeyError) as exc:
        raise CommandError(f"status: the active bundle cannot be read ({exc}); pull it again or roll back") from None
    if args.format == "json":
        print(json.dumps(found, indent=2))
    else:
        sys.stdout.write(_status_text(found))
    stale = max_age is not None and (found["ageSeconds"] is None or found["ageSeconds"] > max_age)
    return EXIT_FINDINGS if stale else EXIT_OK


def _status_text(found: dict[str, object]) -> str:
    bundle = found["bundle"]
    lines = []
    if found["source"] == "builtin":
        lines.append(f"data: built-in ({found['path']})")
    elif isinstance(bundle, dict):
        pulled = f", pulled {bundle['pulledAt']}" if bundle.get("pulledAt") else ""
        lines.append(f"data: {found['source']} {bundle['ref']} {bundle['digest']}{pulled}")
    else:
        lines.append(f"data: directory {found['path']}")
    age = found["ageSeconds"]
    lines.append(f"created: {found['created']}" + (f" ({_days(age)} old)" if isinstance(age, int) else ""))
    previous = found["previous"]
    if isinstance(previous, dict):
        lines.append(f"previous: {previous['ref']} {previous['digest']} (compatcheck data rollback)")
    tables = found["tables"]
    assert isinstance(tables, list)
    width = max((len(t["name"]) for t in tables), default=0)
    for t in tables:
        lines.append(f"  {t['name']:<{width}}  asOf {t['asOf'] or 'unknown':<10}  {t['rows']:>5} rows  "
                     f"sources: {', '.join(t['sources']) or 'none'}")
    return "\n".join(lines) + "\n"


def _days(seconds: int) -> str:
    return f"{seconds // 86400} days" if seconds >= 86400 else f"{seconds // 3600} hours"


__all__ = ["EXIT_ERROR", "register"]
