"""The webhook's transport limits against the real server (``compatcheck.webhook.server.start``, as ``serve`` runs
it) over real TLS sockets: slow request heads, slow bodies, stalled handshakes, idle keep-alive, the connection cap, the
TLS floor of the context the listener really uses, and where the metrics port listens.

The server runs in a thread with its own event loop; the clients are plain blocking sockets in the test thread.
Timeouts are passed short so that each test takes seconds.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import selectors
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from compatcheck.core.admission import AdmissionSettings
from compatcheck.io.loader import Loaded
from compatcheck.webhook import certs
from compatcheck.webhook.app import State
from compatcheck.webhook.clusterview import StaticView
from compatcheck.webhook.metrics import Metrics
from compatcheck.webhook.server import Running, ServeOptions, start

REVIEW = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
    "uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE",
    "namespace": "default", "name": "p", "dryRun": False, "object": {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}).encode()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class Served:
    running: Running
    state: State
    certs: Path

    @property
    def port(self) -> int:
        return int(self.running.admission.sockets[0].getsockname()[1])

    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.certs / "ca.crt"))

    def tls(self, ctx: ssl.SSLContext | None = None) -> ssl.SSLSocket:
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        return (ctx or self.context()).wrap_socket(raw, server_hostname="localhost")

    def conn(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("localhost", self.port, context=self.context(), timeout=10)

    def validate(self, conn: http.client.HTTPSConnection | None = None) -> tuple[int, dict[str, Any]]:
        c = conn or self.conn()
        c.request("POST", "/validate", body=REVIEW, headers={"Content-Type": "application/json"})
        resp = c.getresponse()
        body = json.loads(resp.read())
        if conn is None:
            c.close()
        return resp.status, body

    def metric(self, name: str, **labels: str) -> float:
        return self.state.metrics.registry.get_sample_value(name, labels) or 0.0


@contextmanager
def serving(tmp_path: Path, loaded: Loaded, **options: Any) -> Iterator[Served]:
    directory = tmp_path / "certs"
    certs.write(str(directory), certs.generate(["localhost", "127.0.0.1"]))
    opts = replace(ServeOptions(str(directory / "tls.crt"), str(directory / "tls.key"), host="127.0.0.1", port=0,
                                metrics_port=0), **options)
    state = State(loaded.ruleset, AdmissionSettings(), StaticView(loaded.kb, None, []), Metrics())
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    box: dict[str, Any] = {}

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            box["running"] = loop.run_until_complete(start(state, opts))
        except BaseException as exc:
            box["error"] = exc
            ready.set()
            return
        ready.set()
        loop.run_forever()
        loop.run_until_complete(box["running"].shutdown())
        loop.close()

    thread = threading.Thread(target=run, name="webhook", daemon=True)
    thread.start()
    assert ready.wait(30), "the server did not start"
    if "error" in box:
        raise box["error"]
    try:
        yield Served(box["running"], state, directory)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)


def closed(sock: socket.socket) -> bool:
    """True once the server has closed the connection (EOF or reset); False while it is open."""
    try:
        return not sock.recv(1024)
    except (TimeoutError, ssl.SSLWantReadError, BlockingIOError):
        return False
    except OSError:
        return True


def eof(sock: socket.socket) -> bytes:
    """What a blocking socket reads once the server has closed it: b"" (a close or a reset)."""
    try:
        return sock.recv(1024)
    except ConnectionResetError:
        return b""


def wait_closed(socks: list[ssl.SSLSocket], until: float, trickle: bytes = b"",
                count: int | None = None) -> dict[ssl.SSLSocket, float]:
    """When each socket was closed by the server (monotonic time), waiting until all (or ``count``) are closed
    or ``until``; ``trickle`` is sent to the open ones every 0.2 s, as a slow client would."""
    sel = selectors.DefaultSelector()
    for s in socks:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
    when: dict[ssl.SSLSocket, float] = {}
    next_trickle = time.monotonic()
    while len(when) < (count or len(socks)) and time.monotonic() < until:
        for key, _ in sel.select(0.05):
            ready = key.fileobj
            assert isinstance(ready, ssl.SSLSocket)
            if closed(ready):
                when[ready] = time.monotonic()
                sel.unregister(ready)
        if trickle and time.monotonic() >= next_trickle:
            next_trickle += 0.2
            for s in socks:
                if s not in when:
                    try:
                        s.send(trickle)
                    except (ssl.SSLWantWriteError, BlockingIOError):
                        pass
                    except OSError:
                        when[s] = time.monotonic()
                        sel.unregister(s)
    sel.close()
    return when


def test_slow_request_heads_are_closed_while_admission_goes_on(tmp_path: Path, loaded: Loaded) -> None:
    """Slowloris: 300 TLS connections trickle a request head (one header line every 0.2 s). Each is closed
    within --header-timeout (plus a margin for 300 handshakes on a busy CI machine), and a normal /validate is
    answered promptly while they are open."""
    header_timeout, margin = 3.0, 2.0
    with serving(tmp_path, loaded, header_timeout=header_timeout, idle_timeout=60.0) as srv:
        ctx = srv.context()
        opened: dict[ssl.SSLSocket, float] = {}
        for _ in range(300):
            s = srv.tls(ctx)
            s.sendall(b"POST /validate HTTP/1.1\r\nHost: localhost\r\n")
            opened[s] = time.monotonic()
        assert srv.metric("compatcheck_connections", listener="admission") >= 250  # the attack is on
        t0 = time.monotonic()
        status, body = srv.validate()
        assert status == 200 and body["response"]["uid"] == "u-1"
        assert time.monotonic() - t0 < 2.0, "a normal request must not wait behind the slow ones"
        when = wait_closed(list(opened), time.monotonic() + header_timeout + margin + 5, trickle=b"X-Slow: 1\r\n")
        try:
            assert len(when) == 300, f"{300 - len(when)} slow connections still open"
            late = [round(when[s] - opened[s], 2) for s in opened if when[s] - opened[s] > header_timeout + margin]
            assert not late, f"closed later than {header_timeout} s + {margin} s: {late[:10]}"
            early = [round(when[s] - opened[s], 2) for s in opened if when[s] - opened[s] < header_timeout - 0.5]
            assert not early, f"closed before the header timeout: {early[:10]}"
        finally:
            for s in opened:
                s.close()
        assert srv.metric("compatcheck_connections_closed_total", listener="admission",
                          reason="header-timeout") == 300
        assert srv.validate()[0] == 200  # and the server is still fine


def test_slow_body_gets_408(tmp_path: Path, loaded: Loaded) -> None:
    with serving(tmp_path, loaded, body_timeout=1.0) as srv, srv.tls() as s:
        s.sendall(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(REVIEW) + REVIEW[:20])
        t0 = time.monotonic()
        s.settimeout(10)
        response = b""
        while b"\r\n\r\n" not in response or not response.rstrip().endswith(b"}"):
            chunk = s.recv(4096)
            if not chunk:
                break
            response += chunk
        elapsed = time.monotonic() - t0
        head, _, body = response.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408"), response
        assert b"Connection: close" in head
        assert json.loads(body) == {"error": "request body not received within 1 s"}
        assert 0.9 <= elapsed < 4.0
        assert srv.metric("compatcheck_bad_requests_total", endpoint="validate", reason="timeout") == 1


def test_a_stalled_tls_handshake_is_closed(tmp_path: Path, loaded: Loaded) -> None:
    with serving(tmp_path, loaded, handshake_timeout=1.0, header_timeout=30.0) as srv:
        idle = socket.create_connection(("127.0.0.1", srv.port), timeout=10)  # connects, never says hello
        partial = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        partial.sendall(b"\x16\x03\x01\x02\x00\x01")  # the start of a ClientHello, and no more
        t0 = time.monotonic()
        for s in (idle, partial):
            assert eof(s) == b""
            s.close()
        assert 0.8 <= time.monotonic() - t0 < 4.0


def test_an_idle_keep_alive_connection_is_closed(tmp_path: Path, loaded: Loaded) -> None:
    """After a response, the connection may wait --idle-timeout for the next request, and no longer."""
    with serving(tmp_path, loaded, idle_timeout=1.0, header_timeout=30.0) as srv:
        conn = srv.conn()
        conn.request("GET", "/healthz")
        assert conn.getresponse().read() == b"ok\n"
        assert conn.sock is not None
        sock = conn.sock
        t0 = time.monotonic()
        assert eof(sock) == b""
        assert 0.8 <= time.monotonic() - t0 < 4.0
        conn.close()


def test_at_the_cap_slow_connections_make_room_for_real_requests(tmp_path: Path, loaded: Loaded) -> None:
    """max_connections slow clients do not lock the API server out: the oldest connection still waiting for its
    first request is closed to make room. When every connection has had a request, a new one is refused."""
    with serving(tmp_path, loaded, max_connections=8, header_timeout=30.0) as srv:
        slow = [srv.tls() for _ in range(8)]
        for s in slow:
            s.sendall(b"GET /healthz HTTP/1.1\r\n")
        api_server = [srv.conn() for _ in range(3)]
        for conn in api_server:
            assert srv.validate(conn)[0] == 200  # kept alive, as the API server keeps its connections
        evicted = wait_closed(slow, time.monotonic() + 5, count=3)
        assert sorted(slow.index(s) for s in evicted) == [0, 1, 2]  # the oldest ones, one per new connection
        assert srv.metric("compatcheck_connections_closed_total", listener="admission", reason="evicted") == 3
        for conn in api_server:
            assert srv.validate(conn)[0] == 200
            conn.close()
        for s in slow:
            s.close()

    with serving(tmp_path, loaded, max_connections=2, header_timeout=30.0) as srv:
        kept = []
        for _ in range(2):
            conn = srv.conn()
            conn.request("GET", "/healthz")
            assert conn.getresponse().read() == b"ok\n"
            kept.append(conn)  # kept alive, each has had its request
        extra = srv.tls()
        extra.settimeout(5)
        assert eof(extra) == b""
        assert srv.metric("compatcheck_connections_closed_total", listener="admission", reason="rejected") == 1
        for conn in kept:
            conn.close()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_listening_context_refuses_tls_below_1_2(tmp_path: Path, loaded: Loaded) -> None:
    """The floor is asserted on the SSLContext the admission listener hands its handshakes, not on a context
    built for the test: OpenSSL's own security level may refuse old clients anyway, and hide a lowered floor."""
    with serving(tmp_path, loaded) as srv:
        assert srv.running.ssl_context.minimum_version == ssl.TLSVersion.TLSv1_2
        for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            ctx = srv.context()
            ctx.minimum_version = ctx.maximum_version = version
            with srv.tls(ctx) as s:
                assert s.version() == {ssl.TLSVersion.TLSv1_2: "TLSv1.2", ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[version]
        old = srv.context()
        old.minimum_version = ssl.TLSVersion.TLSv1
        old.maximum_version = ssl.TLSVersion.TLSv1_1
        with pytest.raises((ssl.SSLError, OSError)):
            srv.tls(old).close()


def test_metrics_listen_on_the_metrics_host_only(tmp_path: Path, loaded: Loaded) -> None:
    """--metrics-host, not --host: admission on 127.0.0.2 here, metrics on 127.0.0.1 and nowhere else."""
    try:
        other = free_port("127.0.0.2")
    except OSError:
        pytest.skip("127.0.0.2 is not a loopback address here")
    mport = free_port()
    with serving(tmp_path, loaded, host="127.0.0.2", port=other, metrics_host="127.0.0.1", metrics_port=mport) as srv:
        assert srv.running.metrics is not None
        assert {s.getsockname()[:2] for s in srv.running.metrics.sockets} == {("127.0.0.1", mport)}
        assert urllib.request.urlopen(f"http://127.0.0.1:{mport}/healthz", timeout=5).read() == b"ok\n"
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.2", mport), timeout=5).close()


def test_serve_options_from_the_command_line() -> None:
    from compatcheck.cli.entry import parser
    from compatcheck.webhook.run import serve_options

    default = serve_options(parser().parse_args(["webhook", "serve"]))
    assert (default.host, default.metrics_host) == ("0.0.0.0", "127.0.0.1")  # metrics: loopback unless asked
    assert (default.handshake_timeout, default.header_timeout, default.body_timeout, default.idle_timeout,
            default.max_connections) == (10.0, 10.0, 10.0, 120.0, 400)
    assert default == ServeOptions(None, None)  # type: ignore[arg-type]  # the CLI and the library agree
    given = serve_options(parser().parse_args([
        "webhook", "serve", "--metrics-host=0.0.0.0", "--handshake-timeout=4", "--header-timeout=2.5",
        "--body-timeout=3", "--idle-timeout=30", "--max-connections=50"]))
    assert (given.metrics_host, given.handshake_timeout, given.header_timeout, given.body_timeout,
            given.idle_timeout, given.max_connections) == ("0.0.0.0", 4.0, 2.5, 3.0, 30.0, 50)


@pytest.mark.parametrize(("arg", "message"), [
    ("--header-timeout=0", "must be a positive number of seconds: '0'"),
    ("--body-timeout=-1", "must be a positive number of seconds: '-1'"),
    ("--handshake-timeout=nan", "must be a positive number of seconds: 'nan'"),
    ("--idle-timeout=soon", "not a number of seconds: 'soon'"),
    ("--max-connections=0", "must be at least 1: '0'"),
    ("--max-connections=lots", "not a whole number: 'lots'"),
])
def test_bad_limits_are_one_line_usage_errors(capsys: pytest.CaptureFixture[str], arg: str, message: str) -> None:
    from compatcheck.cli.entry import parser

    with pytest.raises(SystemExit) as exit_info:
        parser().parse_args(["webhook", "serve", arg])
    assert exit_info.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.endswith(f"argument {arg.split('=')[0]}: {message}"), last
