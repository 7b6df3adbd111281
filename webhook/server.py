"""Running the webhook: TLS (1.2+) with certificate reload, the HTTPS and metrics sites, signals.

Certificate rotation (cert-manager, or ``compatcheck cert generate`` again): the files are polled and, when
they change, loaded into the *same* SSLContext. New handshakes use the new certificate, and established
connections keep theirs, so nothing is dropped. SIGTERM stops accepting, lets in-flight requests finish and
exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import ssl
from dataclasses import dataclass

from aiohttp import web

from webhook.app import State, decisions, make_app, make_metrics_app
from webhook.logs import log_event
from webhook.metrics import Metrics

log = logging.getLogger("compatcheck.webhook")


@dataclass
class ServeOptions:
    cert_file: str
    key_file: str
    host: str = "0.0.0.0"
    port: int = 8443
    metrics_port: int = 9090
    reload_interval: float = 10.0
    shutdown_timeout: float = 25.0


def tls_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert_file, key_file)
    return ctx


def cert_not_after(path: str) -> float:
    """notAfter of a PEM certificate as Unix time. The ssl module's decoder avoids importing cryptography
    (~16 MiB of RSS) into the serving process; cryptography is the fallback."""
    decode = getattr(getattr(ssl, "_ssl", None), "_test_decode_cert", None)
    if decode is not None:
        return float(ssl.cert_time_to_seconds(decode(path)["notAfter"]))
    from compatcheck.certs import not_after

    with open(path, "rb") as fh:
        return not_after(fh.read()).timestamp()


class CertReloader:
    def __init__(self, ctx: ssl.SSLContext, cert_file: str, key_file: str, metrics: Metrics) -> None:
        self.ctx, self.cert_file, self.key_file, self.metrics = ctx, cert_file, key_file, metrics
        self.stamp = self._stamp()
        self._expiry()

    def _stamp(self) -> tuple[float, float, int, int]:
        c, k = os.stat(self.cert_file), os.stat(self.key_file)
        return (c.st_mtime, k.st_mtime, c.st_size, k.st_size)

    def _expiry(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.metrics.cert_expiry.set(cert_not_after(self.cert_file))

    def check(self) -> bool:
        try:
            stamp = self._stamp()
        except OSError:
            return False
        if stamp == self.stamp:
            return False
        try:
            self.ctx.load_cert_chain(self.cert_file, self.key_file)
        except (ssl.SSLError, OSError) as exc:  # a half-written pair: keep serving the old one, retry later
            log_event(log, logging.WARNING, "certificate reload failed, keeping the current one", error=str(exc))
            return False
        self.stamp = stamp
        self.metrics.cert_reloads.inc()
        self._expiry()
        log_event(log, logging.INFO, "certificate reloaded", certFile=self.cert_file)
        return True

    async def run(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            self.check()


async def serve(state: State, options: ServeOptions, started: asyncio.Event | None = None) -> int:
    ctx = tls_context(options.cert_file, options.key_file)
    reloader = CertReloader(ctx, options.cert_file, options.key_file, state.metrics)
    runner = web.AppRunner(make_app(state), access_log=None, shutdown_timeout=options.shutdown_timeout)
    metrics_runner = web.AppRunner(make_metrics_app(state), access_log=None)
    await runner.setup()
    await metrics_runner.setup()
    site = web.TCPSite(runner, options.host, options.port, ssl_context=ctx, backlog=1024)
    await site.start()
    if options.metrics_port:
        await web.TCPSite(metrics_runner, options.host, options.metrics_port).start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    reload_task = asyncio.create_task(reloader.run(options.reload_interval))
    # Rules, tables and the cluster view live for the whole process: move them out of the collector's way,
    # and collect young objects less often. Each review allocates thousands of short-lived objects, and
    # full collections over the long-lived heap were what showed up as p99 latency spikes.
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 50)
    log_event(log, logging.INFO, "serving", port=options.port, metricsPort=options.metrics_port,
              rules=len(state.ruleset), mode=state.settings.mode)
    if started is not None:
        started.set()
    await stop.wait()
    log_event(log, logging.INFO, "shutting down: no new connections, finishing in-flight requests",
              inflight=state.inflight)
    reload_task.cancel()
    # Stop accepting first, then let every request that is already in flight (even one still receiving its
    # body) complete, and only then close connections: runner.cleanup() alone would cut those bodies short.
    for server in (getattr(s, "_server", None) for s in runner.sites):
        if server is not None:
            server.close()
    deadline = loop.time() + options.shutdown_timeout
    while state.inflight and loop.time() < deadline:
        await asyncio.sleep(0.05)
    await runner.cleanup()
    await metrics_runner.cleanup()
    decisions.flush()
    log_event(log, logging.INFO, "stopped")
    return 0
