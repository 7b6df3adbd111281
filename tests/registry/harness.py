"""A real CNCF distribution registry (Debian's ``docker-registry``) on loopback for tests and the benchmark: TLS from
a test CA, htpasswd (bcrypt) Basic auth or token auth against a real token server issuing ES256 JWTs (x5c-signed,
the registry trusting the signing certificate through ``rootcertbundle``), images pushed through the distribution
API (config blob, an empty layer, a manifest; multi-platform indexes), and the misbehaving peers the failure tests
need: a socket that accepts and never answers, a slow TCP relay, a listener that records connections.

``find_registry`` names the binary or says why there is none: the tests skip with that reason, unless
``COMPATCHECK_REGISTRY_REQUIRED`` (``.ci/run``) or ``COMPATCHECK_E2E_REQUIRED`` is set, where a missing
registry is a failure."""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import hashlib
import http.client
import http.server
import ipaddress
import json
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EMPTY_LAYER = b""  # an empty tar stream is no valid layer, but registries store any blob: the config is what counts
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
USERS = {"pusher": "push-secret", "reader": "read-secret"}
REFRESH_TOKENS = {"refresh-ok": "reader"}  # identity tokens the token server takes (OAuth2 refresh grant)


def find_registry() -> str:
    """The ``docker-registry`` binary, or a reason it is missing (a string starting with "no ")."""
    found = shutil.which("docker-registry") or ("/usr/bin/docker-registry"
                                                if os.path.exists("/usr/bin/docker-registry") else None)
    return found or ("no docker-registry binary: install Debian's docker-registry package "
                     "(apt-get install docker-registry), the CNCF distribution registry")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------------------------------------- PKI


@dataclass
class RegistryCA:
    """A CA with a serving certificate for 127.0.0.1/localhost, and a self-signed token-signing certificate."""

    directory: Path
    ca_file: Path = field(init=False)
    cert_file: Path = field(init=False)
    key_file: Path = field(init=False)
    token_cert: Path = field(init=False)
    token_key: Any = field(init=False, repr=False)
    token_cert_der: bytes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        d = self.directory
        d.mkdir(parents=True, exist_ok=True)
        now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)

        def build(cn: str, key: Any, issuer: Any, signer: Any, *, ca: bool, sans: list[Any] | None = None) -> Any:
            b = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
                 .issuer_name(issuer).public_key(key.public_key()).serial_number(x509.random_serial_number())
                 .not_valid_before(now).not_valid_after(now + dt.timedelta(days=7))
                 .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
            if sans:
                b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
            return b.sign(signer, hashes.SHA256())

        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "compatcheck-test-registry-ca")])
        ca = build("compatcheck-test-registry-ca", ca_key, ca_name, ca_key, ca=True)
        key = ec.generate_private_key(ec.SECP256R1())
        srv = build("registry", key, ca_name, ca_key, ca=False,
                    sans=[x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")])
        self.ca_file, self.cert_file, self.key_file = d / "ca.crt", d / "tls.crt", d / "tls.key"
        self.ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        # The chain, leaf first: the registry (Go) sends it whole.
        self.cert_file.write_bytes(srv.public_bytes(serialization.Encoding.PEM))
        self.key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                    serialization.NoEncryption()))
        self.key_file.chmod(0o600)
        self.token_key = ec.generate_private_key(ec.SECP256R1())
        tname = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "compatcheck-test-token-signer")])
        tcert = build("compatcheck-test-token-signer", self.token_key, tname, self.token_key, ca=True)
        self.token_cert = d / "token.crt"
        self.token_cert.write_bytes(tcert.public_bytes(serialization.Encoding.PEM))
        self.token_cert_der = tcert.public_bytes(serialization.Encoding.DER)

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(str(self.cert_file), str(self.key_file))
        return ctx

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def issue_token(ca: RegistryCA, *, issuer: str, service: str, subject: str, access: list[dict[str, Any]],
                ttl: int = 300) -> str:
    """A JWT the distribution registry accepts: ES256 over header.claims, r||s, with the signer in x5c."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    now = int(time.time())
    header = {"typ": "JWT", "alg": "ES256", "x5c": [base64.b64encode(ca.token_cert_der).decode()]}
    claims = {"iss": issuer, "sub": subject, "aud": service, "exp": now + ttl, "nbf": now - 10, "iat": now,
              "jti": hashlib.sha256(os.urandom(16)).hexdigest()[:16], "access": access}
    signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
    r, s = decode_dss_signature(ca.token_key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
    return f"{signing_input}.{_b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


# ---------------------------------------------------------------------------------------------- token server


class TokenServer:
    """The registry's token service: ``GET /token?service=&scope=`` with Basic credentials (pusher: pull+push,
    reader: pull; anonymous: pull on ``public/*`` only; a wrong password: 401), ``POST /token`` with an OAuth2
    refresh-token grant (identity tokens). Counts requests."""

    def __init__(self, ca: RegistryCA, issuer: str = "compatcheck-test-issuer", service: str = "compatcheck-registry"):
        self.ca, self.issuer, self.service = ca, issuer, service
        self.port = free_port()
        self.requests = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, user: str | None, scope: str) -> None:
                outer.requests += 1
                access = []
                if scope:
                    kind, name, actions = scope.split(":")
                    allowed = {"pusher": {"pull", "push"}, "reader": {"pull"}}.get(user or "", set())
                    if user is None and name.startswith("public/"):
                        allowed = {"pull"}
                    granted = sorted(set(actions.split(",")) & allowed)
                    if granted:
                        access.append({"type": kind, "name": name, "actions": granted})
                token = issue_token(outer.ca, issuer=outer.issuer, service=outer.service, subject=user or "",
                                    access=access)
                body = json.dumps({"token": token, "expires_in": 300}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _deny(self) -> None:
                outer.requests += 1
                self.send_response(401)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                user = None
                auth = self.headers.get("Authorization", "")
                if auth.startswith("Basic "):
                    name, _, password = base64.b64decode(auth[6:]).decode().partition(":")
                    if USERS.get(name) != password:
                        return self._deny()
                    user = name
                self._answer(user, (q.get("scope") or [""])[0])

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                user = REFRESH_TOKENS.get((form.get("refresh_token") or [""])[0])
                if (form.get("grant_type") or [""])[0] != "refresh_token" or user is None:
                    return self._deny()
                self._answer(user, (form.get("scope") or [""])[0])

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.httpd.socket = ca.server_context().wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def realm(self) -> str:
        return f"https://127.0.0.1:{self.port}/token"

    def start(self) -> TokenServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# ---------------------------------------------------------------------------------------------- the registry


class Registry:
    """``docker-registry serve`` on a free loopback port with TLS, and ``auth`` "htpasswd" or "token"."""

    def __init__(self, binary: str, home: Path, ca: RegistryCA, auth: str = "htpasswd",
                 token: TokenServer | None = None) -> None:
        self.binary, self.home, self.ca, self.auth, self.token = binary, home, ca, auth, token
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        home.mkdir(parents=True, exist_ok=True)
        self._tokens: dict[str, str] = {}

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _config(self) -> Path:
        import bcrypt

        lines = ["version: 0.1", "log:", "  level: error", "  accesslog:", "    disabled: true", "storage:",
                 "  filesystem:", f"    rootdirectory: {self.home / 'data'}", "  delete:", "    enabled: true",
                 "http:", f"  addr: 127.0.0.1:{self.port}", "  tls:", f"    certificate: {self.ca.cert_file}",
                 f"    key: {self.ca.key_file}"]
        if self.auth == "htpasswd":
            htpasswd = self.home / "htpasswd"
            htpasswd.write_text("".join(f"{u}:{bcrypt.hashpw(p.encode(), bcrypt.gensalt(rounds=5)).decode()}\n"
                                        for u, p in USERS.items()))
            lines += ["auth:", "  htpasswd:", "    realm: compatcheck-test", f"    path: {htpasswd}"]
        elif self.auth == "token":
            assert self.token is not None
            lines += ["auth:", "  token:", f"    realm: {self.token.realm}", f"    service: {self.token.service}",
                      f"    issuer: {self.token.issuer}", f"    rootcertbundle: {self.ca.token_cert}"]
        path = self.home / "config.yml"
        path.write_text("\n".join(lines) + "\n")
        return path

    def start(self, timeout: float = 20.0) -> Registry:
        config = self._config()
        log = open(self.home / "registry.log", "ab")  # noqa: SIM115 - the process writes it until stop()
        self.proc = subprocess.Popen([self.binary, "serve", str(config)], stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"docker-registry exited with {self.proc.returncode}: {self.logs()}")
            try:
                urllib.request.urlopen(f"https://{self.host}/v2/", context=self.ca.client_context(), timeout=2)
                return self
            except urllib.error.HTTPError as exc:
                if exc.code == 401:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"docker-registry did not come up: {self.logs()}")

    def logs(self) -> str:
        try:
            return (self.home / "registry.log").read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    # -------------------------------------------------------------- pushing through the distribution API
    def _auth_header(self, repo: str, challenge: str) -> str:
        if self.auth == "htpasswd":
            return "Basic " + base64.b64encode(b"pusher:" + USERS["pusher"].encode()).decode()
        assert self.token is not None
        scope = f"repository:{repo}:pull,push"
        if scope not in self._tokens:
            url = f"{self.token.realm}?service={self.token.service}&scope={urllib.parse.quote(scope)}"
            req = urllib.request.Request(url, headers={"Authorization": "Basic " + base64.b64encode(
                b"pusher:" + USERS["pusher"].encode()).decode()})
            with urllib.request.urlopen(req, context=self.ca.client_context(), timeout=10) as r:
                self._tokens[scope] = json.loads(r.read())["token"]
            self.token.requests -= 1  # the pusher's own token requests are not the lookups under test
        return f"Bearer {self._tokens[scope]}"

    def _call(self, method: str, url: str, repo: str, body: bytes | None = None,
              headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        hdrs = dict(headers or {})
        for attempt in range(2):
            if attempt or self.auth:
                hdrs["Authorization"] = self._auth_header(repo, "")
            req = urllib.request.Request(url if url.startswith("https") else f"https://{self.host}{url}", data=body,
                                         method=method, headers=hdrs)
            try:
                with urllib.request.urlopen(req, context=self.ca.client_context(), timeout=30) as r:
                    return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
            except urllib.error.HTTPError as exc:
                if exc.code == 401 and attempt == 0:
                    continue
                raise AssertionError(f"{method} {url}: {exc.code} {exc.read()[:300]!r}") from None
        raise AssertionError("unreachable")

    def push_blob(self, repo: str, data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        _s, headers, _b = self._call("POST", f"/v2/{repo}/blobs/uploads/", repo, b"")
        location = headers["location"]
        sep = "&" if "?" in location else "?"
        self._call("PUT", f"{location}{sep}digest={digest}", repo, data,
                   {"Content-Type": "application/octet-stream"})
        return digest

    def push_manifest(self, repo: str, ref: str, manifest: dict[str, Any], media_type: str) -> str:
        raw = json.dumps(manifest).encode()
        self._call("PUT", f"/v2/{repo}/manifests/{ref}", repo, raw, {"Content-Type": media_type})
        return "sha256:" + hashlib.sha256(raw).hexdigest()

    def push_image(self, repo: str, tag: str, env: list[str], *, labels: dict[str, str] | None = None,
                   docker: bool = False, arch: str = "amd64", config_bytes: bytes | None = None,
                   declared_config_size: int | None = None) -> Pushed:
        """An image whose config has ``env`` and ``labels`` (or exactly ``config_bytes``), an empty layer, and an
        OCI (or Docker v2) manifest tagged ``tag``."""
        config = config_bytes if config_bytes is not None else json.dumps({
            "architecture": arch, "os": "linux", "config": {"Env": env, "Labels": labels or {}},
            "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(EMPTY_LAYER).hexdigest()]},
        }).encode()
        config_digest = self.push_blob(repo, config)
        layer = self.push_blob(repo, EMPTY_LAYER)
        manifest = {"schemaVersion": 2, "mediaType": DOCKER_MANIFEST if docker else OCI_MANIFEST,
                    "config": {"mediaType": DOCKER_CONFIG if docker else OCI_CONFIG, "digest": config_digest,
                               "size": declared_config_size if declared_config_size is not None else len(config)},
                    "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer,
                                "size": len(EMPTY_LAYER)}]}
        media = DOCKER_MANIFEST if docker else OCI_MANIFEST
        raw = json.dumps(manifest).encode()
        digest = self.push_manifest(repo, tag, manifest, media)
        return Pushed(repo, tag, digest, config_digest, len(raw))

    def push_index(self, repo: str, tag: str, images: dict[str, list[str]], *, docker: bool = False) -> Pushed:
        """A multi-platform image: per ``os/arch`` a manifest with its own env, under one index tagged ``tag``."""
        entries = []
        for platform, env in images.items():
            os_, arch = platform.split("/")[:2]
            one = self.push_image(repo, f"{tag}-{arch}", env, arch=arch, docker=docker)
            entries.append({"mediaType": DOCKER_MANIFEST if docker else OCI_MANIFEST, "digest": one.digest,
                            "size": one.size, "platform": {"os": os_, "architecture": arch}})
        # An attestation manifest as BuildKit adds one: platform unknown/unknown, never picked.
        entries.append({**entries[0], "platform": {"os": "unknown", "architecture": "unknown"}})
        index = {"schemaVersion": 2, "mediaType": DOCKER_LIST if docker else OCI_INDEX, "manifests": entries}
        digest = self.push_manifest(repo, tag, index, DOCKER_LIST if docker else OCI_INDEX)
        return Pushed(repo, tag, digest, None, len(json.dumps(index)))


@dataclass(frozen=True)
class Pushed:
    repo: str
    tag: str
    digest: str
    config_digest: str | None
    size: int


# ---------------------------------------------------------------------------------------------- bad peers


class Listener:
    """A TCP listener on loopback. ``mode`` "hang": accepts and never answers (holds every connection);
    "record": counts connections and closes them. ``connections`` counts accepts; subclasses handle an accepted
    connection in ``_accepted``."""

    def __init__(self, mode: str = "hang") -> None:
        self.mode = mode
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.held: list[socket.socket] = []
        self._stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.sock.settimeout(0.1)
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            self._accepted(conn)

    def _accepted(self, conn: socket.socket) -> None:
        if self.mode == "hang":
            self.held.append(conn)
        else:
            conn.close()

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self._stop = True
        self.thread.join(2)
        for c in self.held:
            c.close()
        self.sock.close()


class SlowRelay(Listener):
    """A TCP relay to ``target`` that waits ``delay`` seconds after each accept before relaying (TLS passes
    through untouched): the real registry behind a slow link."""

    def __init__(self, target_port: int, delay: float) -> None:
        self.target_port, self.delay = target_port, delay
        super().__init__(mode="relay")

    def _accepted(self, conn: socket.socket) -> None:
        threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn: socket.socket) -> None:
        time.sleep(self.delay)
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=10)
        except OSError:
            conn.close()
            return

        def pipe(a: socket.socket, b: socket.socket) -> None:
            try:
                while data := a.recv(65536):
                    b.sendall(data)
            except OSError:
                pass
            finally:
                for s in (a, b):
                    with contextlib.suppress(OSError):
                        s.shutdown(socket.SHUT_RDWR)

        threading.Thread(target=pipe, args=(conn, upstream), daemon=True).start()
        pipe(upstream, conn)


class Front:
    """An HTTPS front (the test CA's certificate) to the real registry at ``target``: it relays requests as they
    come (the Authorization header included) and relays the answers, except where a script says otherwise. The
    one part of these tests that is not the real registry: distribution answers neither 429 nor 5xx on demand, and
    its filesystem storage never redirects blob reads to another host, so the front plays those answers around it.

    ``failures``: statuses answered, in order, to the next manifest requests before relaying (with ``retry_after``
    as a Retry-After header when set); ``always``: a status answered to every manifest request; ``redirect_blobs``:
    blob reads are answered ``307`` to ``https://<that host>/blob``. ``log``: (method, path, status) per request."""

    def __init__(self, ca: RegistryCA, target: str, *, failures: list[int] | None = None,
                 retry_after: str | None = None, always: int | None = None,
                 redirect_blobs: str | None = None) -> None:
        self.target, self.failures = target, list(failures or [])
        self.retry_after, self.always, self.redirect_blobs = retry_after, always, redirect_blobs
        self.log: list[tuple[str, str, int, float]] = []
        outer = self
        client_ctx = ca.client_context()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
                outer.log.append((self.command, self.path.split("?")[0], status, time.monotonic()))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                if "/manifests/" in path and outer.always is not None:
                    return self._send(outer.always, {"Content-Type": "text/plain"}, b"unavailable")
                if "/manifests/" in path and outer.failures:
                    status = outer.failures.pop(0)
                    headers = {"Content-Type": "text/plain"}
                    if outer.retry_after is not None:
                        headers["Retry-After"] = outer.retry_after
                    return self._send(status, headers, b"slow down")
                if "/blobs/" in path and outer.redirect_blobs:
                    return self._send(307, {"Location": f"https://{outer.redirect_blobs}/blob"})
                conn = http.client.HTTPSConnection(outer.target, context=client_ctx, timeout=10)
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "accept")}
                conn.request("GET", self.path, headers=headers)
                resp = conn.getresponse()
                body = resp.read()
                keep = ("content-type", "docker-content-digest", "www-authenticate", "location",
                        "docker-distribution-api-version")
                self._send(resp.status, {k: v for k, v in resp.getheaders() if k.lower() in keep}, body)
                conn.close()

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.socket = ca.server_context().wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def statuses(self, kind: str) -> list[int]:
        return [status for _m, path, status, _t in self.log if f"/{kind}/" in path]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
