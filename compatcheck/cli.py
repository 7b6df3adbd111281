"""Command line: ``compatcheck lint | versions | rules``.

Only this module knows about argv, stdout/stderr and exit codes. Exit codes: 0 = nothing at or above
the failure threshold, 1 = findings at or above it, 2 = usage, config, rule or input errors (other
files are still linted and reported).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from compatcheck import __version__
from compatcheck.model import Severity

if TYPE_CHECKING:
    from webhook.server import ServeOptions

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
WEBHOOK_EXTRA_MODULES = {"aiohttp", "kubernetes", "cryptography", "prometheus_client"}


FORMATS = ("text", "json", "sarif", "junit", "github")


def _add_input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", help="files, directories (recursive *.yaml *.yml *.json) or - for stdin")
    p.add_argument("--config", metavar="FILE", help="config file (default: .compatcheck.yaml found walking up)")
    p.add_argument("--nodes", metavar="FILE", help="kubectl get nodes -o yaml|json output, or a ClusterProfile")
    p.add_argument("--crl", metavar="PATH", action="append", default=[],
                   help="file or directory with cf-crl CustomResourceLimitation ConfigMaps (repeatable)")
    p.add_argument("--rules-dir", metavar="DIR", action="append", default=[],
                   help="extra rule directory: <dir>/*.yaml rules, <dir>/data/*.yaml tables (repeatable)")
    p.add_argument("--rule", metavar="ID", action="append", help="run only these rules (repeatable)")
    p.add_argument("--max-file-size", metavar="MIB", type=int, default=16, help="largest file read (MiB)")
    p.add_argument("--helm-chart", metavar="DIR", help="render a chart with `helm template` and lint the result")
    p.add_argument("-f", "--values", metavar="FILE", action="append", default=[], help="helm values file (repeatable)")
    p.add_argument("--set", metavar="K=V", action="append", default=[], help="helm --set (repeatable)")
    p.add_argument("--release", metavar="NAME", default="release", help="helm release name (default: release)")
    p.add_argument("--namespace", metavar="NS", help="helm --namespace")
    p.add_argument("--kustomize", metavar="DIR", help="render with `kubectl kustomize DIR` and lint the result")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="compatcheck",
        description="CUDA compatibility linter for Kubernetes GPU workloads.",
        epilog="exit codes: 0 clean, 1 findings at or above --fail-on, 2 usage/config/rule/input errors",
    )
    p.add_argument("--version", action="version", version=f"compatcheck {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    lint = sub.add_parser("lint", help="lint manifests",
                          epilog="exit codes: 0 clean, 1 findings at or above --fail-on, 2 errors")
    _add_input_options(lint)
    lint.add_argument("--format", action="append", choices=FORMATS,
                      help="output format; repeat with --output to write several (default: text, or github "
                           "when GITHUB_ACTIONS=true)")
    lint.add_argument("-o", "--output", action="append", default=[], metavar="FILE",
                      help="write the matching --format to FILE (pairs in order; '-' = stdout)")
    lint.add_argument("--fail-on", choices=["error", "warning", "info"], help="threshold for exit code 1")
    lint.add_argument("--show-suppressed", action="store_true", help="list suppressed findings and why")
    lint.add_argument("--baseline", metavar="FILE", help="report only findings not in this baseline")
    lint.add_argument("--write-baseline", metavar="FILE", help="write the current findings as a baseline and exit 0")
    lint.add_argument("--color", choices=["auto", "always", "never"], default="auto")

    fix = sub.add_parser("fix", help="apply safe fixes to the files in place (ruamel round-trip)")
    _add_input_options(fix)
    fix.add_argument("--unsafe-fixes", action="store_true", help="also apply unsafe fixes")
    fix.add_argument("--diff", action="store_true", help="print a unified diff instead of writing")

    cert = sub.add_parser("cert", help="certificates for the webhook")
    csub = cert.add_subparsers(dest="cert_command", required=True)
    gen = csub.add_parser("generate", help="write ca.crt, tls.crt and tls.key (0600) and print the caBundle")
    gen.add_argument("--out-dir", required=True)
    gen.add_argument("--dns", action="append", required=True, help="DNS name or IP for the SAN (repeatable)")
    gen.add_argument("--algorithm", choices=["ecdsa", "rsa"], default="ecdsa", help="ECDSA P-256 (default) or RSA 2048")
    gen.add_argument("--days", type=int, default=365, help="serving certificate lifetime (CA: 10 years)")

    wh = sub.add_parser("webhook", help="the admission webhook")
    wsub = wh.add_subparsers(dest="webhook_command", required=True)
    serve = wsub.add_parser("serve", help="serve /validate and /mutate over HTTPS")
    serve.add_argument("--cert-file", help="serving certificate (PEM); reloaded when it changes")
    serve.add_argument("--key-file", help="its private key (PEM)")
    serve.add_argument("--tls-secret", metavar="NAME",
                       help="self-managed TLS: keep CA and certificate in this Secret (created/renewed as needed)")
    serve.add_argument("--tls-namespace", default=os.environ.get("POD_NAMESPACE"),
                       help="namespace of --tls-secret (default: $POD_NAMESPACE)")
    serve.add_argument("--tls-dns", action="append", default=[], help="DNS names for the self-managed certificate")
    serve.add_argument("--tls-check-interval", type=float, default=60.0, metavar="SECONDS",
                       help="self-managed TLS: how often to renew the certificate when due and restore the caBundle "
                            "of the webhook configurations")
    serve.add_argument("--tls-dir", help="where self-managed certificate files go: a directory of this user's that "
                                         "no one else can write to, created 0700 if missing (default: a new "
                                         "private directory in $TMPDIR, removed at exit)")
    serve.add_argument("--validating-config", help="ValidatingWebhookConfiguration whose caBundle to keep current")
    serve.add_argument("--mutating-config", help="MutatingWebhookConfiguration whose caBundle to keep current")
    serve.add_argument("--host", default="0.0.0.0")
    serve.add_argument("--port", type=int, default=8443)
    serve.add_argument("--metrics-port", type=int, default=9090, help="plain-HTTP /metrics (0 disables)")
    serve.add_argument("--metrics-host", default="127.0.0.1",
                       help="address of the metrics port (default: 127.0.0.1; 0.0.0.0 for Prometheus in a pod)")
    serve.add_argument("--handshake-timeout", type=_seconds, default=10.0, metavar="S",
                       help="close a connection whose TLS handshake takes longer (default: 10)")
    serve.add_argument("--header-timeout", type=_seconds, default=10.0, metavar="S",
                       help="close a connection whose first request head takes longer after the handshake "
                            "(default: 10)")
    serve.add_argument("--body-timeout", type=_seconds, default=10.0, metavar="S",
                       help="answer 408 to a request whose body takes longer after its head (default: 10)")
    serve.add_argument("--idle-timeout", type=_seconds, default=120.0, metavar="S",
                       help="close a keep-alive connection with no complete request head for this long after "
                            "a response (default: 120, above the API server's 90 s idle timeout)")
    serve.add_argument("--max-connections", type=_count, default=400, metavar="N",
                       help="open admission connections at most; at the cap the oldest one still waiting for its "
                            "first request is closed to make room (default: 400)")
    serve.add_argument("--config", help="config file (rules, fixes, webhook: mode, failureMode, ownedPods)")
    serve.add_argument("--rules-dir", action="append", default=[])
    serve.add_argument("--nodes", help="static cluster view: node list or ClusterProfile")
    serve.add_argument("--crl", action="append", default=[], help="static CRL ConfigMaps (file or directory)")
    live = serve.add_mutually_exclusive_group()
    live.add_argument("--kubeconfig", help="live cluster view through this kubeconfig")
    live.add_argument("--in-cluster", action="store_true", help="live cluster view with the pod's service account")
    serve.add_argument("--max-staleness", type=float, default=300.0, metavar="SECONDS",
                       help="live view: /readyz fails once the view has been unable to follow the API server this "
                            "long (it keeps answering from the last good view meanwhile); 0 never fails it")
    serve.add_argument("--reload-interval", type=float, default=10.0, help="certificate file poll (seconds)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])

    rev = sub.add_parser("review", help="answer an AdmissionReview JSON file offline (as the webhook would)")
    rev.add_argument("file", help="AdmissionReview request (JSON), or -")
    rev.add_argument("--endpoint", choices=["validate", "mutate"], default="validate")
    rev.add_argument("--config")
    rev.add_argument("--nodes")
    rev.add_argument("--crl", action="append", default=[])

    versions = sub.add_parser("versions", help="what the driver/runtime matrix says")
    versions.add_argument("--driver", required=True, help="driver version, e.g. 535.104.05")
    versions.add_argument("--runtime", required=True, help="CUDA runtime of the image, e.g. 12.4")
    versions.add_argument("--format", choices=["text", "json"], default="text")

    rules = sub.add_parser("rules", help="list, explain or validate rules")
    rsub = rules.add_subparsers(dest="rules_command", required=True)
    rl = rsub.add_parser("list")
    rl.add_argument("--format", choices=["text", "json", "markdown"], default="text")
    rl.add_argument("--rules-dir", action="append", default=[])
    re_ = rsub.add_parser("explain")
    re_.add_argument("rule_id", nargs="?", help="rule id (or read from stdin, e.g. piped from rules list)")
    re_.add_argument("--rules-dir", action="append", default=[])
    rv = rsub.add_parser("validate", help="validate rule directories and admin files (built-ins included)")
    rv.add_argument("dirs", nargs="*")
    rv.add_argument("--files", nargs="*", default=[], help="rule or data-table files (pre-commit passes these)")
    return p


def _err(msg: str) -> None:
    print(f"compatcheck: error: {msg}", file=sys.stderr)


def _print_problems(problems: Any) -> None:
    for prob in problems:
        where = f"{prob.path}:{prob.line}" if prob.line else prob.path
        print(f"{where}: error: {prob.message}", file=sys.stderr)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def _load(rule_dirs: list[str], validate_builtin: bool = False) -> Any:
    from compatcheck.loader import RuleLoadError, load_rules

    try:
        return load_rules(rule_dirs, validate_builtin=validate_builtin)
    except RuleLoadError as exc:
        _print_problems(exc.problems)
        return None


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command in ("lint", "fix"):
            return _lint_or_fix(args)
        if args.command == "versions":
            return _versions(args)
        if args.command == "cert":
            return _cert(args)
        if args.command == "webhook":
            return _serve(args)
        if args.command == "review":
            return _review(args)
        return _rules(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except ImportError as exc:
        # The webhook, cert and review commands need the extra; a core install must say so, not crash.
        missing = getattr(exc, "name", None) or str(exc)
        if str(missing).split(".")[0] in WEBHOOK_EXTRA_MODULES:
            _err(f"`compatcheck {args.command}` needs the webhook extra (missing module {missing!r}): "
                 "pip install 'compatcheck[webhook]'")
            return EXIT_ERROR
        raise


def _configured_rules(config_path: str | None, rules_dirs: list[str]) -> Any:
    """(config, loaded rules with the config applied), or None after printing every problem."""
    from compatcheck.config import ConfigError, apply_to_ruleset, load_config

    try:
        config = load_config(config_path)
    except ConfigError as exc:
        _print_problems(exc.problems)
        return None
    loaded = _load([*config.rule_dirs, *rules_dirs])
    if loaded is None:
        return None
    try:
        loaded.ruleset = apply_to_ruleset(config, loaded.ruleset)
    except ConfigError as exc:
        _print_problems(exc.problems)
        return None
    return config, loaded


def _setup(args: argparse.Namespace) -> Any:
    """Config, rules and lint options shared by lint and fix; None after printing errors."""
    from compatcheck.config import find_config
    from compatcheck.lint import LintOptions

    configured = _configured_rules(args.config or find_config(), args.rules_dir)
    if configured is None:
        return None
    config, loaded = configured
    if args.rule:
        unknown = [r for r in args.rule if r not in loaded.ruleset.rules]
        if unknown:
            _err(f"unknown or disabled rule(s): {', '.join(unknown)}")
            return None
    if args.max_file_size <= 0:
        _err("--max-file-size must be positive")
        return None
    options = LintOptions(nodes=args.nodes or config.nodes, crl=[*config.crl, *args.crl],
                          max_bytes=args.max_file_size * 1024 * 1024, only=set(args.rule) if args.rule else None,
                          config=config)
    return config, loaded, options


def _render_input(args: argparse.Namespace, options: Any) -> Any:
    """Rendered text for --helm-chart / --kustomize (with its source map), or None for plain paths."""
    from compatcheck.render import RenderError, helm_template, kustomize

    try:
        if args.helm_chart:
            rendered = helm_template(args.helm_chart, args.values, args.set, args.release, args.namespace)
        elif args.kustomize:
            rendered = kustomize(args.kustomize)
        else:
            return None
    except RenderError as exc:
        _err(str(exc))
        return False
    options.source_map = rendered.locate
    return {rendered.name: rendered.text}


def _lint_or_fix(args: argparse.Namespace) -> int:
    from compatcheck import baseline as baseline_mod
    from compatcheck.lint import run_lint

    if not args.paths and not args.helm_chart and not args.kustomize:
        _err("give files or directories to lint (or - for stdin, --helm-chart DIR, --kustomize DIR)")
        return EXIT_ERROR
    setup = _setup(args)
    if setup is None:
        return EXIT_ERROR
    config, loaded, options = setup
    texts = _render_input(args, options)
    if texts is False:
        return EXIT_ERROR
    if args.command == "fix":
        return _fix(args, loaded, options, texts)
    baseline_file = args.baseline or (config.baseline if not args.write_baseline else None)
    if baseline_file:
        try:
            options.baseline = baseline_mod.load(baseline_file)
        except baseline_mod.BaselineError as exc:
            _err(str(exc))
            return EXIT_ERROR
    report = run_lint(args.paths, loaded, options, texts=texts)
    report.docs_url = config.docs_url
    report.tool_version = __version__
    report.show_suppressed = args.show_suppressed
    if args.write_baseline:
        with open(args.write_baseline, "w", encoding="utf-8") as fh:
            fh.write(baseline_mod.dump(report.findings))
        print(f"wrote {len(report.findings)} findings to {args.write_baseline}", file=sys.stderr)
        return EXIT_ERROR if report.errors else EXIT_OK
    status = _emit(args, report)
    if status is not None:
        return status
    threshold = Severity(args.fail_on or config.fail_on.value).rank
    if report.errors:
        return EXIT_ERROR
    if any(f.severity.rank >= threshold for f in report.findings):
        return EXIT_FINDINGS
    return EXIT_OK


def _emit(args: argparse.Namespace, report: Any) -> int | None:
    from compatcheck.report import FORMATTERS

    formats = list(args.format or [])
    if not formats:
        formats = ["github" if os.environ.get("GITHUB_ACTIONS") == "true" else "text"]
    if len(args.output) > len(formats):
        _err("each --output needs its own --format before it (e.g. --format sarif -o out.sarif --format text)")
        return EXIT_ERROR
    targets = args.output + ["-"] * (len(formats) - len(args.output))
    if targets.count("-") > 1:
        _err("only one format can go to stdout: give the others an --output FILE")
        return EXIT_ERROR
    for fmt, target in zip(formats, targets, strict=True):
        report.color = fmt == "text" and target == "-" and (
            args.color == "always" or (args.color == "auto" and sys.stdout.isatty() and not os.environ.get("NO_COLOR")))
        text = FORMATTERS[fmt](report)
        if target == "-":
            sys.stdout.write(text)
        else:
            try:
                with open(target, "w", encoding="utf-8") as fh:
                    fh.write(text)
            except OSError as exc:
                _err(f"cannot write {target}: {exc.strerror or exc}")
                return EXIT_ERROR
    return None


def _fix(args: argparse.Namespace, loaded: Any, options: Any, texts: Any) -> int:
    from compatcheck.fixer import fix_file
    from compatcheck.lint import LintedObject, run_lint
    from compatcheck.model import Applicability

    if texts is not None:
        _err("fix works on files; rendered --helm-chart/--kustomize output has no file to write back")
        return EXIT_ERROR
    keep: list[LintedObject] = []
    report = run_lint(args.paths, loaded, options, keep=keep)
    _print_problems(report.errors)
    allow = {Applicability.SAFE} | ({Applicability.UNSAFE} if args.unsafe_fixes else set())
    by_file: dict[str, list[LintedObject]] = {}
    for lo in keep:
        by_file.setdefault(lo.parsed.path, []).append(lo)
    applied = 0
    for path, objects in by_file.items():
        text = objects[0].parsed.text or ""
        result = fix_file(path, text, objects, allow, options.config.fix_allowed)
        for f, why in result.skipped:
            print(f"{path}: skipped fix for {f.rule_id}: {why}", file=sys.stderr)
        if not result.changed:
            continue
        applied += len(result.applied)
        if args.diff:
            sys.stdout.write(result.diff())
        elif path == "-":
            sys.stdout.write(result.fixed)
        else:
            tmp = f"{path}.compatcheck.tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(result.fixed)
            os.replace(tmp, path)  # atomic: never a half-written manifest
            print(f"fixed {path}: " + ", ".join(sorted({f.rule_id for f in result.applied})), file=sys.stderr)
    remaining = len(report.findings) - applied
    print(f"{applied} fixes applied{' (diff only)' if args.diff else ''}; {remaining} findings left", file=sys.stderr)
    return EXIT_ERROR if report.errors else EXIT_OK


def _cert(args: argparse.Namespace) -> int:
    from compatcheck import certs

    try:
        generated = certs.generate(args.dns, algorithm=args.algorithm, cert_days=args.days)
        written = certs.write(args.out_dir, generated)
    except (ValueError, OSError) as exc:
        _err(str(exc))
        return EXIT_ERROR
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    print(generated.ca_bundle)
    return EXIT_OK


def _webhook_state(config_path: str | None, rules_dirs: list[str], nodes: str | None, crl: list[str],
                   kubeconfig: str | None = None, in_cluster: bool = False) -> Any:
    """Rules, settings and the cluster view; None after printing errors (the webhook refuses to start)."""
    from compatcheck.admission import AdmissionSettings

    configured = _configured_rules(config_path, rules_dirs)
    if configured is None:
        return None
    config, loaded = configured
    from webhook.clusterview import LiveView, StaticView, ViewError
    from webhook.metrics import Metrics

    metrics = Metrics()
    view: Any
    if kubeconfig or in_cluster:
        try:
            api = _kube_client(kubeconfig, in_cluster)
        except Exception as exc:
            _err(f"cannot set up the Kubernetes client: {exc}")
            return None
        view = LiveView(loaded.kb, api, metrics)
    else:
        try:
            view = StaticView(loaded.kb, nodes or config.nodes, [*config.crl, *crl])
        except ViewError as exc:
            _err(str(exc))
            return None
        view.snapshot.publish(metrics)
    from webhook.app import State

    return State(loaded.ruleset, AdmissionSettings.from_config(config), view, metrics)


def _serve_options(args: argparse.Namespace) -> ServeOptions:
    from webhook.server import ServeOptions

    return ServeOptions(args.cert_file, args.key_file, host=args.host, port=args.port, metrics_port=args.metrics_port,
                        reload_interval=args.reload_interval, metrics_host=args.metrics_host,
                        handshake_timeout=args.handshake_timeout, header_timeout=args.header_timeout,
                        body_timeout=args.body_timeout, idle_timeout=args.idle_timeout,
                        max_connections=args.max_connections)


def _serve(args: argparse.Namespace) -> int:
    import asyncio
    import logging
    import shutil
    import tempfile
    import threading

    from webhook.logs import json_logging  # without the webhook extra, main() says what to install
    from webhook.server import serve

    json_logging(getattr(logging, args.log_level.upper()))
    stop_renewal = threading.Event()
    own_tls_dir = None
    try:
        if args.tls_secret:
            if not args.tls_dir:
                # A new directory (mkdtemp: a unique name, mode 0700), never a fixed name in a shared /tmp that
                # someone could have created first, or planted a symlink at, to receive the private key.
                try:
                    args.tls_dir = own_tls_dir = tempfile.mkdtemp(prefix="compatcheck-tls-")
                except OSError as exc:
                    _err(f"cannot create a directory for the TLS files (give --tls-dir): {exc}")
                    return EXIT_ERROR
            tls_files = _self_managed_tls(args, stop_renewal)
            if tls_files is None:
                return EXIT_ERROR
            args.cert_file, args.key_file = tls_files
        if not args.cert_file or not args.key_file:
            _err("give --cert-file and --key-file, or --tls-secret for self-managed TLS")
            return EXIT_ERROR
        for path in (args.cert_file, args.key_file):
            if not os.path.isfile(path):
                _err(f"{path}: no such file")
                return EXIT_ERROR
        if args.max_staleness < 0:
            _err("--max-staleness must be 0 (never) or positive")
            return EXIT_ERROR
        if args.tls_check_interval <= 0:
            _err("--tls-check-interval must be positive")
            return EXIT_ERROR
        state = _webhook_state(args.config, args.rules_dir, args.nodes, args.crl, args.kubeconfig, args.in_cluster)
        if state is None:
            return EXIT_ERROR
        state.max_staleness = args.max_staleness
        state.view.start()
        try:
            return asyncio.run(serve(state, _serve_options(args)))
        except OSError as exc:
            _err(f"cannot serve: {exc}")
            return EXIT_ERROR
        finally:
            state.view.stop()
    finally:
        stop_renewal.set()
        if own_tls_dir is not None:  # the key material goes with the process
            shutil.rmtree(own_tls_dir, ignore_errors=True)


def _kube_client(kubeconfig: str | None, in_cluster: bool) -> Any:
    from kubernetes import client as kclient
    from kubernetes import config as kconfig

    if in_cluster or not kubeconfig:
        kconfig.load_incluster_config()
        return kclient.ApiClient()
    return kconfig.new_client_from_config(config_file=kubeconfig)


def _self_managed_tls(args: argparse.Namespace, stop: Any) -> tuple[str, str] | None:
    import threading

    from webhook.selftls import SelfManagedTLS

    if not args.tls_namespace or not args.tls_dns:
        _err("--tls-secret needs --tls-namespace (or $POD_NAMESPACE) and at least one --tls-dns")
        return None
    try:
        api = _kube_client(args.kubeconfig, args.in_cluster)
        tls = SelfManagedTLS(api, args.tls_namespace, args.tls_secret, args.tls_dns, args.validating_config,
                             args.mutating_config, args.tls_dir)
        files = tls.bootstrap()
    except Exception as exc:
        _err(f"self-managed TLS failed: {exc}")
        return None
    threading.Thread(target=tls.renew_forever, args=(stop, args.tls_check_interval), name="tls-renewal",
                     daemon=True).start()
    return files


def _review(args: argparse.Namespace) -> int:
    from compatcheck.admission import ReviewError, review

    state = _webhook_state(args.config, [], args.nodes, args.crl)
    if state is None:
        return EXIT_ERROR
    try:
        if args.file == "-":
            text = sys.stdin.read()
        else:
            with open(args.file, encoding="utf-8") as fh:
                text = fh.read()
        body = json.loads(text)
        response, _decision = review(body, args.endpoint, state.ruleset, state.view.snapshot.ctx, state.settings)
    except (OSError, json.JSONDecodeError, ReviewError) as exc:
        _err(f"{args.file}: {exc}")
        return EXIT_ERROR
    print(json.dumps(response, indent=2))
    return EXIT_OK if response["response"]["allowed"] else EXIT_FINDINGS


def _versions(args: argparse.Namespace) -> int:
    from compatcheck.versions import VersionError, parse_cuda_version, parse_driver_version

    loaded = _load([])
    if loaded is None:
        return EXIT_ERROR
    try:
        driver = parse_driver_version(args.driver)
        runtime = parse_cuda_version(args.runtime)
    except VersionError as exc:
        _err(str(exc))
        return EXIT_ERROR
    v = loaded.kb.verdict(runtime, driver=driver)
    out = {"driver": str(driver), "driverCuda": str(v.driver_cuda.major_minor()) if v.driver_cuda else None,
           "runtime": str(runtime), "verdict": v.verdict, "reasons": list(v.reasons)}
    if args.format == "json":
        print(json.dumps(out, indent=2))
    else:
        print(f"driver {out['driver']} (CUDA {out['driverCuda'] or 'unknown'}) + runtime {out['runtime']}: "
              f"{out['verdict']}")
        for r in out["reasons"]:
            print(f"  - {r}")
    return EXIT_OK if v.verdict in ("compatible", "minor-version-compatibility") else EXIT_FINDINGS


def _dirs_for_files(files: list[str]) -> list[str]:
    """Rule directories holding the given files (a data table's directory is its parent's parent)."""
    out = []
    for f in files:
        d = os.path.dirname(os.path.abspath(f))
        out.append(os.path.dirname(d) if os.path.basename(d) == "data" else d)
    return out


def _rules(args: argparse.Namespace) -> int:
    from compatcheck import docs

    if args.rules_command == "validate":
        dirs = list(args.dirs)
        if args.files:
            dirs += _dirs_for_files(args.files)
        loaded = _load(sorted(set(dirs)), validate_builtin=True)
        if loaded is None:
            return EXIT_ERROR
        print(f"{len(loaded.ruleset)} rules and {sum(len(v) for v in loaded.tables.values())} table rows are valid")
        return EXIT_OK
    loaded = _load(args.rules_dir)
    if loaded is None:
        return EXIT_ERROR
    if args.rules_command == "list":
        if args.format == "markdown":
            sys.stdout.write(docs.markdown(loaded.ruleset))
        elif args.format == "json":
            print(json.dumps([docs.rule_json(r) for r in loaded.ruleset], indent=2))
        else:
            for r in loaded.ruleset:
                print(f"{r.id:<28} {r.severity.value:<8} {r.summary}")
        return EXIT_OK
    ids = [args.rule_id] if args.rule_id else [ln.split()[0] for ln in sys.stdin.read().splitlines() if ln.strip()]
    status = EXIT_OK
    for rid in ids:
        if rid not in loaded.ruleset.rules:
            _err(f"no such rule: {rid!r} (see compatcheck rules list)")
            status = EXIT_ERROR
            continue
        sys.stdout.write(docs.explain(loaded.ruleset.get(rid)))
    return status
