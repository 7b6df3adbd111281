"""Running the webhook: TLS (1.2+) with certificate reload, the HTTPS and metrics listeners, connection limits,
signals.

Certificate rotation (cert-manager, or ``compatcheck cert generate`` again): the files are polled and, when
they change, loaded into the *same* SSLContext. New handshakes use the new certificate, and established
connections keep theirs, so nothing is dropped. SIGTERM stops accepting, lets in-flight requests finish and
exits 0.

Slow or idle clients must not be able to hold the process's connections (file descriptors, and the 256 KiB
buffer asyncio keeps per TLS connection): every phase of a connection has a deadline (TLS handshake, the first
request's headers, the body, keep-alive idleness), and the number of open connections is capped. This module
must not decide admission (``compatcheck.webhook.app`` and ``compatcheck.core.admission`` do) and must not serve an
admission endpoint without TLS.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import ssl
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from compatcheck.webhook.app import State, decisions, make_app, make_metrics_app
from compatcheck.webhook.logs import log_event
from compatcheck.webhook.metrics import Metrics

log = logging.getLogger("compatcheck.webhook")
# Prometheus scrapes over one connection; a few more cover a person with curl. The metrics listener shares the
# process's file descriptors and memory with admission, so it gets a small cap of its own.
METRICS_MAX_CONNECTIONS = 16
# Descriptors kept out of the connection cap: the listeners, certificate reloads, the API server watches, logs.
RESERVED_FDS = 64
# How long a response is given to reach a client whose request body was not read to the end (a 413, a 408)
# before the connection is closed. aiohttp's 10 s default would let a slow body hold its connection that much
# longer past --body-timeout.
LINGER = 2.0


@dataclass
class ServeOptions:
    cert_file: str
    key_file: str
    host: str = "0.0.0.0"
    port: int = 8443
    metrics_port: int = 9090
    reload_interval: float = 10.0
    shutdown_timeout: float = 25.0
    # Plain-HTTP metrics stay on the loopback unless asked (the chart asks: Prometheus scrapes the pod IP).
    metrics_host: str = "127.0.0.1"
    handshake_timeout: float = 10.0  # accept → TLS handshake done
    header_timeout: float = 10.0  # handshake done → the first request's headers parsed
    body_timeout: float = 10.0  # headers parsed → the whole admission body read (else 408)
    # Keep-alive: from the end of a response to the next request's headers. Longer than the 90 s after which
    # the API server's Go client drops idle connections itself: when the server closes first, a request the
    # client is just sending on that connection fails, and a validating webhook with failurePolicy Fail denies.
    idle_timeout: float = 120.0
    # Each open TLS connection costs about 300 KiB (asyncio keeps a 256 KiB read buffer per TLS connection):
    # 400 of them, about 120 MiB, plus the ~90 MiB of a webhook with 5,000 Nodes fit the chart's 256 MiB limit.
    max_connections: int = 400


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
    from compatcheck.webhook.certs import not_after

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


class _Connections:
    """The protocol factory of one listener: every connection is aiohttp's own RequestHandler inside a
    ``_Guarded`` protocol, which closes it when no request head arrives in time and keeps the listener under
    its connection cap.

    Why this way: aiohttp 3.14 has no header-read timeout. Its only per-connection timer is the keep-alive one,
    and a connection trickling a request line is "idle" to it for the whole keep-alive time. Public pieces are
    enough to add one, with no subclass of aiohttp's classes and none of their private attributes:
    ``web.Server`` is the documented protocol factory for ``loop.create_server``, so each handler can be
    wrapped, and the server calls its public ``request_factory`` once per parsed request head, which is the
    moment the deadline is met. Owning ``loop.create_server`` also gives ``ssl_handshake_timeout``, which
    ``web.TCPSite`` does not pass on. A periodic sweep of ``Server.connections`` was the alternative: it would
    need aiohttp's private state to tell a connection that is reading headers from one handling a request.
    """

    def __init__(self, server: web.Server, listener: str, header_timeout: float, max_connections: int,
                 metrics: Metrics) -> None:
        self.server = server
        self.header_timeout = header_timeout
        self.max_connections = max_connections
        self.open = 0
        # Connections with no request head yet, oldest first (dicts keep insertion order).
        self.waiting: dict[web.RequestHandler, _Guarded] = {}
        self.closed = {reason: metrics.connections_closed.labels(listener, reason)
                       for reason in ("header-timeout", "evicted", "rejected")}
        metrics.connections.labels(listener).set_function(lambda: self.open)
        make_request = server.request_factory
        waiting = self.waiting

        def request_factory(message: Any, payload: Any, protocol: web.RequestHandler, writer: Any,
                            task: Any) -> web.BaseRequest:
            guard = waiting.pop(protocol, None)  # only a connection's first request finds itself here
            if guard is not None:
                guard.headers_received()
            return make_request(message, payload, protocol, writer, task)

        server.request_factory = request_factory  # read by each RequestHandler when it is created

    def __call__(self) -> _Guarded:
        return _Guarded(self, self.server())

    def make_room(self) -> bool:
        """At the cap: close the oldest connection that has not sent a request head yet (a slow client, most
        likely; the API server sends its request at once), so that slow clients cannot lock out the API server.
        False when every open connection has had a request: the new one is refused then."""
        for guard in self.waiting.values():
            guard.close("evicted")
            return True
        return False


class _Guarded(asyncio.Protocol):
    """One connection: aiohttp's RequestHandler does all the HTTP; this adds the deadline for the first request
    head (later requests are bounded by aiohttp's keep-alive timer, which runs from the end of the previous
    response) and counts the connection against the cap."""

    __slots__ = ("_conns", "_deadline", "_handler", "_transport")

    def __init__(self, conns: _Connections, handler: web.RequestHandler) -> None:
        self._conns = conns
        self._handler = handler
        self._transport: asyncio.Transport | None = None
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:  # after the TLS handshake
        conns = self._conns
        assert isinstance(transport, asyncio.Transport)
        if conns.open >= conns.max_connections and not conns.make_room():
            conns.closed["rejected"].inc()
            transport.abort()  # aiohttp never sees this connection; connection_lost below ignores it
            return
        conns.open += 1
        self._transport = transport
        conns.waiting[self._handler] = self
        self._deadline = asyncio.get_running_loop().call_later(conns.header_timeout, self.close, "header-timeout")
        self._handler.connection_made(transport)

    def headers_received(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def close(self, reason: str) -> None:
        self._conns.waiting.pop(self._handler, None)
        if self._transport is not None:
            self._conns.closed[reason].inc()
            # abort, not close: no TLS close_notify and no flushing towards a client that is not reading.
            self._transport.abort()

    def data_received(self, data: bytes) -> None:
        self._handler.data_received(data)

    def eof_received(self) -> None:
        # aiohttp's handler returns None too: on a half-close, the transport closes the connection.
        self._handler.eof_received()

    def pause_writing(self) -> None:
        self._handler.pause_writing()

    def resume_writing(self) -> None:
        self._handler.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._transport is None:  # refused in connection_made, or already lost
            return
        self._transport = None
        self.headers_received()  # cancels the deadline
        self._conns.waiting.pop(self._handler, None)
        self._conns.open -= 1
        self._handler.connection_lost(exc)


def _connection_cap(wanted: int) -> int:
    """--max-connections, lowered to fit under the soft limit on open files: at that limit accept() fails
    (EMFILE), and so would the API server watches and the certificate reloads."""
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):  # pragma: no cover - no resource module (Windows)
        return wanted
    if soft == resource.RLIM_INFINITY or wanted <= soft - RESERVED_FDS - METRICS_MAX_CONNECTIONS:
        return wanted
    cap = max(1, soft - RESERVED_FDS - METRICS_MAX_CONNECTIONS)
    log_event(log, logging.WARNING, "open-file limit too low for --max-connections; capping connections",
              maxConnections=wanted, nofile=soft, cap=cap)
    return cap


# asyncio's TLS transport (sslproto.SSLProtocol) gives every connection a 256 KiB read buffer, zero-filled at once:
# 256 open connections (an API server's pool under load, or a slow client flood up to --max-connections) cost the
# webhook 70 MiB of RSS, which the allocator kept after they closed. An AdmissionReview is a few KiB and a TLS record
# at most 16 KiB, so 64 KiB reads as many records per call as matter here. Python-version specific (a class
# attribute of CPython's asyncio since 3.11): where it is absent, nothing changes.
TLS_READ_BUFFER = 64 * 1024


def _smaller_tls_buffers() -> None:
    from asyncio import sslproto

    proto = getattr(sslproto, "SSLProtocol", None)
    if proto is not None and isinstance(getattr(proto, "max_size", None), int) and proto.max_size > TLS_READ_BUFFER:
        proto.max_size = TLS_READ_BUFFER


async def _listen(conns: _Connections, host: str, port: int, ctx: ssl.SSLContext | None,
                  handshake_timeout: float) -> asyncio.Server:
    loop = asyncio.get_running_loop()
    if ctx is not None:
        _smaller_tls_buffers()
    return await loop.create_server(conns, host, port, ssl=ctx, backlog=1024,
                                    ssl_handshake_timeout=handshake_timeout if ctx is not None else None)


@dataclass
class Running:
    """A started webhook (``start``). ``serve`` runs one until SIGTERM; tests read what it listens with."""

    state: State
    options: ServeOptions
    ssl_context: ssl.SSLContext  # the context the admission listener hands every handshake
    admission: asyncio.Server
    metrics: asyncio.Server | None
    _runners: list[web.AppRunner] = field(repr=False)
    _reload_task: asyncio.Task[None] = field(repr=False)

    async def shutdown(self) -> None:
        """Stop accepting, let every admission request in flight finish (even one still receiving its body),
        then close the connections."""
        self._reload_task.cancel()
        # Stop accepting first and only then wait: runner.cleanup() alone would cut in-flight bodies short.
        self.admission.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.shutdown_timeout
        while self.state.inflight and loop.time() < deadline:
            await asyncio.sleep(0.05)
        if self.metrics is not None:
            self.metrics.close()
        for runner in self._runners:
            await runner.cleanup()


async def start(state: State, options: ServeOptions) -> Running:
    """Listen on the admission (HTTPS) and metrics (HTTP) ports; ``Running.shutdown`` undoes it."""
    ctx = tls_context(options.cert_file, options.key_file)
    reloader = CertReloader(ctx, options.cert_file, options.key_file, state.metrics)
    limits: dict[str, Any] = {"access_log": None, "keepalive_timeout": options.idle_timeout,
                              "lingering_time": LINGER}
    runner = web.AppRunner(make_app(state, body_timeout=options.body_timeout),
                           shutdown_timeout=options.shutdown_timeout, **limits)
    metrics_runner = web.AppRunner(make_metrics_app(state), **limits)
    await runner.setup()
    await metrics_runner.setup()
    assert runner.server is not None and metrics_runner.server is not None
    try:
        admission = await _listen(
            _Connections(runner.server, "admission", options.header_timeout,
                         _connection_cap(options.max_connections), state.metrics),
            options.host, options.port, ctx, options.handshake_timeout)
        metrics = None
        if options.metrics_port:
            try:
                metrics = await _listen(
                    _Connections(metrics_runner.server, "metrics", options.header_timeout, METRICS_MAX_CONNECTIONS,
                                 state.metrics),
                    options.metrics_host, options.metrics_port, None, options.handshake_timeout)
            except BaseException:
                admission.close()
                raise
    except BaseException:
        await runner.cleanup()
        await metrics_runner.cleanup()
        raise
    reload_task = asyncio.create_task(reloader.run(options.reload_interval))
    return Running(state, options, ctx, admission, metrics, [runner, metrics_runner], reload_task)


async def serve(state: State, options: ServeOptions, started: asyncio.Event | None = None) -> int:
    running = await start(state, options)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
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
    await running.shutdown()
    decisions.flush()
    log_event(log, logging.INFO, "stopped")
    return 0
