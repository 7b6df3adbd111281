"""The webhook as it runs: a ``compatcheck webhook serve`` subprocess over real TLS."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
from ruamel.yaml import YAML

from tests.conftest import FIXTURES, ROOT, admission_review, shared_files


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gen_certs(directory: Path) -> None:
    subprocess.run([sys.executable, "-m", "compatcheck", "cert", "generate", "--out-dir", str(directory),
                    "--dns", "localhost", "--dns", "127.0.0.1"], check=True, capture_output=True, cwd=ROOT)


@dataclass
class Server:
    proc: subprocess.Popen[str]
    port: int
    metrics_port: int
    certs: Path
    log: Path

    def context(self, *cas: Path) -> ssl.SSLContext:
        ctx = ssl.create_default_context()
        for ca in cas or (self.certs / "ca.crt",):
            ctx.load_verify_locations(str(ca))
        return ctx

    def conn(self, ctx: ssl.SSLContext | None = None) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("localhost", self.port, context=ctx or self.context(), timeout=10)

    def post(self, path: str, body: bytes, conn: http.client.HTTPSConnection | None = None) -> tuple[int, Any]:
        c = conn or self.conn()
        c.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        try:
            return r.status, json.loads(data)
        except json.JSONDecodeError:
            return r.status, data.decode()


def start(tmp: Path, *extra: str) -> Server:
    certs = tmp / "certs"
    gen_certs(certs)
    port, mport = free_port(), free_port()
    log = tmp / "server.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "compatcheck", "webhook", "serve", "--cert-file", str(certs / "tls.crt"),
         "--key-file", str(certs / "tls.key"), "--host", "127.0.0.1", "--port", str(port), "--metrics-port", str(mport),
         "--nodes", "examples/cluster-profile.yaml", "--crl", str(FIXTURES / "crl-default-missing" / "crl.yaml"),
         "--reload-interval", "0.2", *extra],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log.open("w"), text=True)
    server = Server(proc, port, mport, certs, log)
    deadline = time.time() + 30
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited: {log.read_text()}")
        try:
            c = server.conn()
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                return server
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("server did not become ready")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = start(tmp_path_factory.mktemp("wh"))
    yield s
    s.proc.send_signal(signal.SIGTERM)
    s.proc.wait(timeout=30)


def example_review(name: str) -> bytes:
    """examples/manifests/<name> as the API server sends it for creation (in ``default`` when it names no
    namespace): the server runs with examples/cluster-profile.yaml and the CRLs of crl-default-missing."""
    obj = YAML(typ="safe").load((ROOT / "examples" / "manifests" / name).read_text())
    obj["metadata"].setdefault("namespace", "default")
    return json.dumps(admission_review(obj)).encode()


def _gpu_pod_review() -> bytes:
    """A GPU Pod's AdmissionReview, for tests where any valid review will do."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "rot", "namespace": "default"},
           "spec": {"containers": [{"name": "main", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
                                    "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    return json.dumps(admission_review(pod, uid="rotation")).encode()


DENIED = "vllm-bf16-on-t4.yaml"  # --dtype=bfloat16 on the T4 pool: denied (dtype-unsupported-by-gpu)
PATCHED = "paddle-gpu-manager.yaml"  # Paddle on GPU-Manager vGPU: allocator env and CRL default patched in


@pytest.mark.parametrize("path", shared_files("fixtures/admission", "*.json"))
def test_recorded_requests_over_https(server: Server, path: Path) -> None:
    body = json.loads(path.read_text())
    for endpoint in ("/validate", "/mutate"):
        status, resp = server.post(endpoint, path.read_bytes())
        assert status == 200
        assert resp["apiVersion"] == body["apiVersion"] and resp["kind"] == "AdmissionReview"
        assert resp["response"]["uid"] == body["request"]["uid"]
        if "patch" in resp["response"]:
            ops = json.loads(base64.b64decode(resp["response"]["patch"]))
            jsonpatch.apply_patch(body["request"]["object"], ops)


def test_deny_warn_and_patch_over_https(server: Server) -> None:
    status, resp = server.post("/validate", example_review(DENIED))
    assert status == 200 and resp["response"]["allowed"] is False
    assert resp["response"]["status"]["code"] == 403
    status, resp = server.post("/mutate", example_review(PATCHED))
    ops = json.loads(base64.b64decode(resp["response"]["patch"]))
    assert resp["response"]["patchType"] == "JSONPatch"
    assert {"op": "add", "path": "/spec/template/spec/containers/0/env",
            "value": [{"name": "FLAGS_allocator_strategy", "value": "naive_best_fit"}]} in ops
    # the CRL group in the server's view (gpu-manager) has an optional key with a default: filled in too
    assert {"op": "add", "path": "/spec/template/spec/containers/0/resources/limits/example.com~1vcuda-priority",
            "value": "1"} in ops


@pytest.mark.parametrize(("body", "status", "message"), [
    (b"{not json", 400, "not JSON"),
    (b'{"apiVersion": "v1", "kind": "Pod"}', 400, "expected kind AdmissionReview"),
    (b"[]", 400, "must be a JSON object"),
])
def test_malformed_bodies_get_400(server: Server, body: bytes, status: int, message: str) -> None:
    got, resp = server.post("/validate", body)
    assert got == status and message in resp["error"]


@pytest.mark.parametrize("endpoint", ["/validate", "/mutate"])
def test_json_that_orjson_refuses_is_still_answered(server: Server, endpoint: str) -> None:
    """Integers past 64 bits, NaN and lone surrogates: valid for the json module, refused by orjson. The fast
    path falls back, so such a body gets the same AdmissionReview answer, never a 400 or a 500."""
    body = json.loads(example_review(DENIED))
    body["request"]["object"]["metadata"]["annotations"] = {"huge": 2**70, "nan": float("nan"), "s": "\ud800"}
    body["request"]["object"]["spec"]["revisionHistoryLimit"] = 2**70
    got, resp = server.post(endpoint, json.dumps(body).encode())
    assert got == 200 and resp["response"]["uid"] == body["request"]["uid"], resp
    if endpoint == "/validate":
        assert resp["response"]["allowed"] is False, resp  # the same verdict as the plain recorded body


def test_oversized_body_is_refused(server: Server) -> None:
    big = b'{"pad": "' + b"x" * (3 * 1024 * 1024 + 10) + b'"}'
    got, _resp = server.post("/validate", big)
    assert got == 413
    got, _ = server.post("/validate", _gpu_pod_review())
    assert got == 200


def test_wrong_method_and_path(server: Server) -> None:
    c = server.conn()
    c.request("GET", "/validate")
    assert c.getresponse().status == 405
    c = server.conn()
    c.request("POST", "/nope", body=b"{}")
    assert c.getresponse().status == 404


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_no_plaintext_and_no_old_tls(server: Server) -> None:
    with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
        c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        c.request("POST", "/validate", body=b"{}")
        r = c.getresponse()
        r.read()
        if r.status:  # a TLS server answering plaintext must not produce an HTTP response
            raise ConnectionError("no HTTP over the TLS port")
    old = server.context()
    old.minimum_version = ssl.TLSVersion.TLSv1
    old.maximum_version = ssl.TLSVersion.TLSv1_1
    with pytest.raises((ssl.SSLError, OSError)):
        c = server.conn(old)
        c.request("GET", "/healthz")
        c.getresponse()


def test_health_ready_and_metrics(server: Server) -> None:
    for path in ("/healthz", "/readyz"):
        c = server.conn()
        c.request("GET", path)
        r = c.getresponse()
        assert r.status == 200 and r.read().startswith(b"ok")
    server.post("/validate", example_review(DENIED))
    odd = json.loads(example_review(DENIED))
    odd["request"]["kind"]["kind"] = odd["request"]["object"]["kind"] = "Made-Up-Kind-" + "x" * 40
    server.post("/validate", json.dumps(odd).encode())
    text = urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=5).read().decode()
    assert 'compatcheck_admission_requests_total{endpoint="validate",kind="Deployment",operation="CREATE",' \
           'result="denied"}' in text
    assert 'kind="other"' in text and "Made-Up-Kind" not in text  # callers cannot grow the label set
    assert "compatcheck_admission_duration_seconds_bucket" in text
    assert 'compatcheck_findings_total{endpoint="validate",rule="dtype-unsupported-by-gpu",severity="error"}' in text
    assert "compatcheck_certificate_expiry_timestamp_seconds" in text
    assert "compatcheck_crl_configmaps_loaded 4.0" in text
    with pytest.raises(OSError):  # the admission endpoints are not on the plain metrics port
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{server.metrics_port}/validate",
                                                      data=b"{}"), timeout=5)


def test_open_connections_cost_little_memory(server: Server) -> None:
    """Each TLS connection holds a 64 KiB read buffer (server.TLS_READ_BUFFER), not asyncio's 256 KiB: 64 open
    connections, each with a request answered on it, grow the webhook's RSS by well under the 16 MiB that asyncio's
    buffers alone would take (measured: ~5 MiB, against ~18 MiB before)."""

    def rss_kib() -> int:
        status = Path(f"/proc/{server.proc.pid}/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")))

    body = example_review(DENIED)
    server.post("/validate", body)  # warm: the review's caches
    before = rss_kib()
    conns = [server.conn() for _ in range(64)]
    try:
        for c in conns:
            assert server.post("/validate", body, c)[0] == 200
        grown = rss_kib() - before
    finally:
        for c in conns:
            c.close()
    assert grown < 10 * 1024, f"64 connections grew the RSS by {grown} KiB"


def test_private_key_is_0600(server: Server) -> None:
    assert (server.certs / "tls.key").stat().st_mode & 0o777 == 0o600


def _fingerprint(der: bytes | None) -> str:
    return hashlib.sha256(der or b"").hexdigest()


def _wait(cond: Any, what: str, timeout: float = 20.0) -> None:
    """Until ``cond()`` holds: a condition that the test waits for, never a fixed sleep."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.01)


def _reloads(s: Server) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{s.metrics_port}/metrics", timeout=5).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("compatcheck_certificate_reloads_total "))


def _served(s: Server, ctx: ssl.SSLContext) -> str:
    with socket.create_connection(("127.0.0.1", s.port)) as raw, \
            ctx.wrap_socket(raw, server_hostname="localhost") as tls:
        return _fingerprint(tls.getpeercert(binary_form=True))


def test_certificate_rotation_under_load(tmp_path: Path) -> None:
    """Certificate files replaced in place (key, then certificate, each by an atomic rename, as ``cert
    generate``, self-managed TLS and the kubelet's Secret volumes do) while three clients post without a pause:
    two on keep-alive connections opened before the rotation, one on a new connection per request. No request
    fails, and once the server has reloaded every new connection gets the new certificate.

    Deterministic by construction. The clients trust both CAs from the start: the new pair is generated before
    the load begins, into a staging directory, and only moved into place during it. (The old version read
    ``ca.crt`` anew for each connection: a client that read it just before the rotation and shook hands just
    after the reload failed verification, about one run in ten.) Each step waits for what it needs (requests
    made, the reload counted on /metrics), not for a fixed time."""
    s = start(tmp_path)
    staging = tmp_path / "staging"
    gen_certs(staging)
    trust = s.context(s.certs / "ca.crt", staging / "ca.crt")
    old = _fingerprint(ssl.PEM_cert_to_DER_cert((s.certs / "tls.crt").read_text()))
    new = _fingerprint(ssl.PEM_cert_to_DER_cert((staging / "tls.crt").read_text()))
    assert old != new
    body = _gpu_pod_review()
    failures: list[str] = []
    done = threading.Event()
    counts = [0, 0, 0]

    def load(i: int, new_connections: bool) -> None:
        conn = None
        while not done.is_set():
            try:
                if conn is None or new_connections:
                    conn = s.conn(trust)
                status, _ = s.post("/validate", body, conn)
                if status != 200:
                    failures.append(f"status {status}")
                counts[i] += 1
            except Exception as exc:
                failures.append(f"{type(exc).__name__}: {exc}")
                conn = None

    threads = [threading.Thread(target=load, args=(i, flag)) for i, flag in enumerate((False, True, False))]
    for t in threads:
        t.start()
    try:
        _wait(lambda: min(counts) >= 5, "every client has posted before the rotation")
        assert _served(s, trust) == old and _reloads(s) == 0
        for name in ("ca.crt", "tls.key", "tls.crt"):  # the key before the certificate, as certs.write does
            os.replace(staging / name, s.certs / name)
        _wait(lambda: _reloads(s) >= 1, "the server reloads the rotated pair")
        assert _served(s, trust) == new, "new connections must get the rotated certificate"
        after = list(counts)
        _wait(lambda: all(c >= a + 5 for c, a in zip(counts, after, strict=True)),
              "every client has posted after the reload (keep-alive connections opened before it included)")
    finally:
        done.set()
        for t in threads:
            t.join()
        s.proc.send_signal(signal.SIGTERM)
        s.proc.wait(timeout=30)
    assert failures == []
    # At least once: a poll between the key's rename and the certificate's may load the new pair and keep the
    # half-old stamp, and reload the same pair once more at the next poll (harmless).
    assert "certificate reloaded" in [json.loads(line)["msg"] for line in s.log.read_text().splitlines()
                                      if line.startswith("{")]


def test_sigterm_drains_in_flight_requests_and_exits_zero(tmp_path: Path) -> None:
    s = start(tmp_path)
    body = example_review(DENIED)
    ctx = s.context()
    raw = socket.create_connection(("127.0.0.1", s.port))
    tls = ctx.wrap_socket(raw, server_hostname="localhost")
    head = (f"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    tls.sendall(head + body[:100])  # the request is now in flight: the handler waits for the rest of the body
    time.sleep(0.3)
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    with pytest.raises(OSError):  # no new connections once draining
        socket.create_connection(("127.0.0.1", s.port), timeout=2).close()
        raise OSError("listener still open")  # pragma: no cover - only reached if the port is still bound
    tls.sendall(body[100:])
    response = b""
    while b"\r\n\r\n" not in response or len(response.split(b"\r\n\r\n", 1)[1]) < 10:
        chunk = tls.recv(65536)
        if not chunk:
            break
        response += chunk
    tls.close()
    assert response.startswith(b"HTTP/1.1 200")
    assert b'"allowed": false' in response or b'"allowed":false' in response
    assert s.proc.wait(timeout=30) == 0
    logs = [json.loads(line) for line in s.log.read_text().splitlines() if line.startswith("{")]
    decisions = [entry for entry in logs if entry.get("msg") == "admission"]
    assert decisions and {"uid", "kind", "namespace", "name", "operation", "allowed", "rules",
                          "durationMs"} <= decisions[-1].keys()
    assert logs[-1]["msg"] == "stopped"
