"""The webhook's subcommands (``webhook serve``, ``cert generate``, ``review``) in the command line.

This module only describes arguments. The handlers live in ``compatcheck.webhook.run`` and are named here as
``"module:function"`` strings that the CLI imports only when such a command runs, so building the parser
(``compatcheck lint`` included) never imports aiohttp, kubernetes, cryptography or prometheus-client: a lint-only
install (no webhook extra) works, and says what to install when a webhook command is asked for.
"""

from __future__ import annotations

import argparse
import os

from compatcheck.cli.common import count, seconds

RUN = "compatcheck.webhook.run"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cert = sub.add_parser("cert", help="certificates for the webhook")
    csub = cert.add_subparsers(dest="cert_command", required=True)
    gen = csub.add_parser("generate", help="write ca.crt, tls.crt and tls.key (0600) and print the caBundle")
    gen.add_argument("--out-dir", required=True)
    gen.add_argument("--dns", action="append", required=True, help="DNS name or IP for the SAN (repeatable)")
    gen.add_argument("--algorithm", choices=["ecdsa", "rsa"], default="ecdsa", help="ECDSA P-256 (default) or RSA 2048")
    gen.add_argument("--days", type=int, default=365, help="serving certificate lifetime (CA: 10 years)")
    gen.set_defaults(handler=f"{RUN}:cert_command")

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
    serve.add_argument("--tls-check-interval", type=seconds, default=60.0, metavar="SECONDS",
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
    serve.add_argument("--handshake-timeout", type=seconds, default=10.0, metavar="S",
                       help="close a connection whose TLS handshake takes longer (default: 10)")
    serve.add_argument("--header-timeout", type=seconds, default=10.0, metavar="S",
                       help="close a connection whose first request head takes longer after the handshake "
                            "(default: 10)")
    serve.add_argument("--body-timeout", type=seconds, default=10.0, metavar="S",
                       help="answer 408 to a request whose body takes longer after its head (default: 10)")
    serve.add_argument("--idle-timeout", type=seconds, default=120.0, metavar="S",
                       help="close a keep-alive connection with no complete request head for this long after "
                            "a response (default: 120, above the API server's 90 s idle timeout)")
    serve.add_argument("--max-connections", type=count, default=400, metavar="N",
                       help="open admission connections at most; at the cap the oldest one still waiting for its "
                            "first request is closed to make room (default: 400)")
    serve.add_argument("--config", help="config file (rules, fixes, webhook: mode, failureMode, ownedPods)")
    serve.add_argument("--rules-dir", action="append", default=[])
    serve.add_argument("--data", metavar="builtin|active|auto|DIR",
                       help="the knowledge to start with, as lint's --data (default: the config's data.use, else auto: "
                            "the bundle pulled into the cache directory, else built-in)")
    serve.add_argument("--data-source", metavar="REF",
                       help="a data bundle to pull on start and every --data-refresh-interval, swapped in once "
                            "verified (default: the config's data.source; none: no pulls)")
    serve.add_argument("--data-refresh-interval", type=seconds, metavar="SECONDS",
                       help="seconds between pulls of the data source (default: the config's data.refreshInterval, "
                            "6 h)")
    serve.add_argument("--nodes", help="static cluster view: node list or ClusterProfile")
    serve.add_argument("--crl", action="append", default=[], help="static CRL ConfigMaps (file or directory)")
    live = serve.add_mutually_exclusive_group()
    live.add_argument("--kubeconfig", help="live cluster view through this kubeconfig")
    live.add_argument("--in-cluster", action="store_true", help="live cluster view with the pod's service account")
    serve.add_argument("--max-staleness", type=float, default=300.0, metavar="SECONDS",
                       help="live view: /readyz fails once the view has been unable to follow the API server this "
                            "long (it keeps answering from the last good view meanwhile); 0 never fails it")
    reg = serve.add_argument_group("image configs at admission (the config's registry: section sets defaults)")
    look = reg.add_mutually_exclusive_group()
    look.add_argument("--registry-lookups", dest="registry_lookups", action="store_true", default=None,
                      help="read GPU containers' image configs from allowlisted registries (chart default: on)")
    look.add_argument("--no-registry-lookups", dest="registry_lookups", action="store_false")
    reg.add_argument("--registry-allow", metavar="HOST", action="append", default=None,
                     help="registry host lookups may go to (exact, *.domain; repeatable; replaces the default "
                          "public list: docker.io, ghcr.io, nvcr.io, quay.io, registry.k8s.io, public.ecr.aws)")
    reg.add_argument("--registry-redirect-host", metavar="HOST", action="append", default=None,
                     help="host registries may send lookups to for tokens and blobs (repeatable; replaces the "
                          "built-in CDN and auth hosts)")
    reg.add_argument("--registry-budget", type=seconds, metavar="SECONDS", default=None,
                     help="longest an admission request waits for lookups (default 0.15); the rest finish in the "
                          "background for the next request")
    reg.add_argument("--registry-ca", metavar="FILE", help="CA bundle (PEM) added to the system's for registries")
    reg.add_argument("--registry-auth-file", metavar="FILE",
                     help="docker config.json with registry credentials (the chart mounts its pull Secret here)")
    serve.add_argument("--reload-interval", type=float, default=10.0, help="certificate file poll (seconds)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.set_defaults(handler=f"{RUN}:serve_command")

    rev = sub.add_parser("review", help="answer an AdmissionReview JSON file offline (as the webhook would)")
    rev.add_argument("file", help="AdmissionReview request (JSON), or -")
    rev.add_argument("--endpoint", choices=["validate", "mutate"], default="validate")
    rev.add_argument("--config")
    rev.add_argument("--nodes")
    rev.add_argument("--crl", action="append", default=[])
    rev.set_defaults(handler=f"{RUN}:review_command")
