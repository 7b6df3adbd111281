"""What the webhook's subcommands do (``compatcheck.cli.webhook`` describes their arguments): generate
certificates, serve (self-managed TLS, the cluster view, the HTTPS server) and answer one AdmissionReview offline.
Imported only when one of those commands runs; the webhook extra must be installed."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import sys
import tempfile
import threading
from dataclasses import replace
from typing import Any

from compatcheck.core.admission import AdmissionSettings, ReviewError, review
from compatcheck.core.config import RegistrySettings
from compatcheck.io.setup import EXIT_FINDINGS, EXIT_OK, CommandError, configure
from compatcheck.webhook import certs
from compatcheck.webhook.app import State, View
from compatcheck.webhook.clusterview import LiveView, StaticView, ViewError
from compatcheck.webhook.datarefresh import DataRefresher
from compatcheck.webhook.logs import json_logging
from compatcheck.webhook.metrics import Metrics
from compatcheck.webhook.registry import AdmissionLookups
from compatcheck.webhook.selftls import SelfManagedTLS
from compatcheck.webhook.server import ServeOptions, serve


def cert_command(args: argparse.Namespace) -> int:
    try:
        generated = certs.generate(args.dns, algorithm=args.algorithm, cert_days=args.days)
        written = certs.write(args.out_dir, generated)
    except (ValueError, OSError) as exc:
        raise CommandError(str(exc)) from None
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    print(generated.ca_bundle)
    return EXIT_OK


def kube_client(kubeconfig: str | None, in_cluster: bool) -> Any:
    """A kubernetes ApiClient (untyped: the client ships no type hints)."""
    from kubernetes import client as kclient
    from kubernetes import config as kconfig

    if in_cluster or not kubeconfig:
        kconfig.load_incluster_config()
        return kclient.ApiClient()
    return kconfig.new_client_from_config(config_file=kubeconfig)


def registry_settings(args: argparse.Namespace | None, settings: RegistrySettings) -> RegistrySettings:
    """The config's registry settings with ``webhook serve``'s flags over them."""
    if args is None:
        return settings
    changes: dict[str, Any] = {}
    if getattr(args, "registry_lookups", None) is not None:
        changes["lookups"] = args.registry_lookups
    if getattr(args, "registry_allow", None):
        changes["allow"] = tuple(args.registry_allow)
    if getattr(args, "registry_redirect_host", None):
        changes["redirect_hosts"] = tuple(args.registry_redirect_host)
    if getattr(args, "registry_budget", None):
        changes["webhook_budget"] = args.registry_budget
    for flag, key in (("registry_ca", "ca_file"), ("registry_auth_file", "auth_file")):
        value = getattr(args, flag, None)
        if value:
            if not os.path.isfile(value):
                raise CommandError(f"--{flag.replace('_', '-')} {value}: no such file")
            changes[key] = value
    return replace(settings, **changes)


def webhook_state(config_path: str | None, rules_dirs: list[str], nodes: str | None, crl: list[str],
                  kubeconfig: str | None = None, in_cluster: bool = False,
                  args: argparse.Namespace | None = None) -> State:
    """Rules, settings and the cluster view; CommandError when the webhook must refuse to start."""
    configured = configure(config_path, rules_dirs, getattr(args, "data", None))
    config, loaded = configured.config, configured.loaded
    metrics = Metrics()
    registry = registry_settings(args, config.registry)
    lookups = None
    if args is not None and registry.lookups and not registry.offline:  # serving (not the offline review)
        try:
            lookups = AdmissionLookups(registry, metrics)
        except (OSError, ValueError) as exc:  # an unreadable CA bundle
            raise CommandError(f"registry lookups: {exc}") from None
    view: View
    if kubeconfig or in_cluster:
        try:
            api = kube_client(kubeconfig, in_cluster)
        except Exception as exc:
            raise CommandError(f"cannot set up the Kubernetes client: {exc}") from None
        view = LiveView(loaded.kb, api, metrics, admission_plugins=config.admission_plugins,
                        driver_policy=config.driver_policy)
    else:
        try:
            static = StaticView(loaded.kb, nodes or config.nodes, [*config.crl, *crl], metrics=metrics,
                                admission_plugins=config.admission_plugins, driver_policy=config.driver_policy)
        except ViewError as exc:
            raise CommandError(str(exc)) from None
        static.snapshot.publish(metrics)
        view = static
    state = State(loaded.ruleset, AdmissionSettings.from_config(config, loaded.ruleset), view, metrics,
                  registry=lookups)
    if args is not None:  # serving: the knowledge's age and identity as metrics, and data.source kept current
        source = getattr(args, "data_source", None) or config.data.source
        interval = getattr(args, "data_refresh_interval", None) or config.data.refresh_interval
        state.data = DataRefresher(state, config, [*config.rule_dirs, *rules_dirs], source, interval, registry,
                                   loaded.knowledge)
    return state


def serve_options(args: argparse.Namespace) -> ServeOptions:
    return ServeOptions(args.cert_file, args.key_file, host=args.host, port=args.port, metrics_port=args.metrics_port,
                        reload_interval=args.reload_interval, metrics_host=args.metrics_host,
                        handshake_timeout=args.handshake_timeout, header_timeout=args.header_timeout,
                        body_timeout=args.body_timeout, idle_timeout=args.idle_timeout,
                        max_connections=args.max_connections)


def _self_managed_tls(args: argparse.Namespace, stop: threading.Event) -> tuple[str, str]:
    if not args.tls_namespace or not args.tls_dns:
        raise CommandError("--tls-secret needs --tls-namespace (or $POD_NAMESPACE) and at least one --tls-dns")
    try:
        api = kube_client(args.kubeconfig, args.in_cluster)
        tls = SelfManagedTLS(api, args.tls_namespace, args.tls_secret, args.tls_dns, args.validating_config,
                             args.mutating_config, args.tls_dir)
        files = tls.bootstrap()
    except Exception as exc:
        raise CommandError(f"self-managed TLS failed: {exc}") from None
    threading.Thread(target=tls.renew_forever, args=(stop, args.tls_check_interval), name="tls-renewal",
                     daemon=True).start()
    return files


def serve_command(args: argparse.Namespace) -> int:
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
                    raise CommandError(f"cannot create a directory for the TLS files (give --tls-dir): {exc}") from None
            args.cert_file, args.key_file = _self_managed_tls(args, stop_renewal)
        if not args.cert_file or not args.key_file:
            raise CommandError("give --cert-file and --key-file, or --tls-secret for self-managed TLS")
        for path in (args.cert_file, args.key_file):
            if not os.path.isfile(path):
                raise CommandError(f"{path}: no such file")
        if args.max_staleness < 0:
            raise CommandError("--max-staleness must be 0 (never) or positive")
        state = webhook_state(args.config, args.rules_dir, args.nodes, args.crl, args.kubeconfig, args.in_cluster,
                              args)
        state.max_staleness = args.max_staleness
        state.view.start()
        if state.data is not None:
            state.data.start()
        try:
            return asyncio.run(serve(state, serve_options(args)))
        except OSError as exc:
            raise CommandError(f"cannot serve: {exc}") from None
        finally:
            if state.data is not None:
                state.data.stop()
            state.view.stop()
            if state.registry is not None:
                state.registry.close()
    finally:
        stop_renewal.set()
        if own_tls_dir is not None:  # the key material goes with the process
            shutil.rmtree(own_tls_dir, ignore_errors=True)


def review_command(args: argparse.Namespace) -> int:
    state = webhook_state(args.config, [], args.nodes, args.crl)
    try:
        if args.file == "-":
            text = sys.stdin.read()
        else:
            with open(args.file, encoding="utf-8") as fh:
                text = fh.read()
        body = json.loads(text)
        response, _decision = review(body, args.endpoint, state.ruleset, state.view.snapshot.ctx, state.settings)
    except (OSError, json.JSONDecodeError, ReviewError) as exc:
        raise CommandError(f"{args.file}: {exc}") from None
    print(json.dumps(response, indent=2))
    return EXIT_OK if response["response"]["allowed"] else EXIT_FINDINGS
