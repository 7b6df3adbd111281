"""A small, bounded client of the OCI distribution API: from an image reference to its config, without layers.

``RegistryClient.fetch`` resolves a reference (a tag or a digest) to a manifest, picks the platform's manifest
out of an image index or Docker manifest list, and reads the config blob it names. It speaks to Docker Hub
(``docker.io`` is served by ``registry-1.docker.io``), GHCR, nvcr.io, Quay, ECR/GCR/Artifact Registry and the CNCF
distribution registry alike: OCI and Docker v2 media types, anonymous and credentialed Bearer tokens (the
``WWW-Authenticate: Bearer realm=...,service=...,scope=...`` exchange, with an identity token as an OAuth2 refresh
token), and Basic auth.

Bounded and safe, because it runs inside a lint run and inside an admission webhook:

* every request has a timeout, and the whole lookup a deadline (socket timeouts are set to what is left before
  each read, so a registry that trickles bytes cannot stretch it);
* 429 and 5xx are retried with exponential backoff, honouring ``Retry-After`` when it fits in the deadline;
* manifests and configs have size caps: a ``Content-Length`` or a descriptor size over the cap is refused
  before anything is read, and a body without one is read up to the cap and no further;
* what is fetched by digest is verified (sha256 of the bytes), and a tag's manifest against
  ``Docker-Content-Digest``;
* TLS is verified (a custom CA bundle may be added for private registries; verification is never turned off);
* hosts: a request goes only to a host ``HostPolicy`` allows. A pod spec names the registry, and the registry
  names its token realm and its redirects (Docker Hub sends blobs to a CDN), so each of those hosts is checked
  before any connection is made; a redirect never carries the registry's credentials to another host, and
  plain HTTP is never followed.

For data bundles (``io.bundle``, ``compatcheck data push/pull``) it also reads an artifact's manifest and blobs by
digest (each verified: sha256 and the size its descriptor names) and uploads blobs (``HEAD``, then a monolithic
``POST``/``PUT``) and manifests, with a token scoped ``pull,push``; the same auth, host policy, TLS, timeouts
and retries apply.

Reads and speaks HTTPS (stdlib ``http.client``); evaluates nothing. Failures are ``FetchError``s with a ``kind``
the callers turn into one note each, never a traceback.
"""

from __future__ import annotations

import base64
import email.utils
import fnmatch
import hashlib
import http.client
import json
import re
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from compatcheck.core.imageconfig import RegistryFacts
from compatcheck.core.images import ImageRef, canonical
from compatcheck.io.dockerauth import Credential, Credentials

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
CONFIG_TYPES = ("application/vnd.oci.image.config.v1+json", "application/vnd.docker.container.image.v1+json")
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
ACCEPT = ", ".join((OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST))
USER_AGENT = "compatcheck-registry/1"
# Docker Hub's registry is not at docker.io; old configs name it index.docker.io.
HOST_ALIASES = {"docker.io": "registry-1.docker.io", "index.docker.io": "registry-1.docker.io"}
MAX_REDIRECTS = 3
MAX_TOKEN_BYTES = 256 * 1024
_DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")
_CHALLENGE = re.compile(r'(?<!\w)(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')


class FetchError(Exception):
    """A lookup that failed. ``kind``: ``denied`` (401/403, bad credentials), ``not-found`` (404), ``timeout``
    (a request or the deadline), ``tls``, ``network`` (DNS, refused, reset), ``too-large`` (a size cap),
    ``digest`` (bytes not matching their digest), ``protocol`` (an answer that is not the API's), ``not-allowed``
    (a host outside the policy), ``status`` (another HTTP status). ``host_level`` kinds say the registry as a
    whole could not be used, so callers report them once per registry."""

    HOST_LEVEL = frozenset({"timeout", "tls", "network", "denied", "not-allowed"})

    def __init__(self, kind: str, host: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.host, self.message = kind, host, message

    @property
    def host_level(self) -> bool:
        return self.kind in self.HOST_LEVEL


def is_loopback(host: str) -> bool:
    """Whether ``host`` (with its port, if any) names this machine: localhost, 127.0.0.0/8 or ::1."""
    import ipaddress

    name = host.lower()
    if name.startswith("["):
        name = name[1:].split("]", 1)[0]
    elif re.search(r":\d+$", name) and name.count(":") == 1:
        name = name.rsplit(":", 1)[0]
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_matches(host: str, patterns: tuple[str, ...]) -> bool:
    """``host`` (with its port, if any) against ``patterns``: exact names, ``*.example.com`` for subdomains, or
    ``*`` for any host. Case-insensitive; a pattern without a port matches the host on any port."""
    host = host.lower()
    bare = host.rsplit(":", 1)[0] if re.search(r":\d+$", host) else host
    for p in patterns:
        p = p.lower()
        if p == "*" or p in (host, bare):
            return True
        if p.startswith("*.") and (fnmatch.fnmatchcase(host, p) or fnmatch.fnmatchcase(bare, p)):
            return True
    return False


@dataclass(frozen=True)
class HostPolicy:
    """Which hosts requests may go to: ``registries`` (those an image may name) and ``auxiliary`` (token realms
    and redirect targets: CDNs, auth services), on top of the image's own registry host."""

    registries: tuple[str, ...] = ("*",)
    auxiliary: tuple[str, ...] = ()

    def registry_allowed(self, registry: str) -> bool:
        return host_matches(registry, self.registries) or host_matches(HOST_ALIASES.get(registry, registry),
                                                                       self.registries)

    def auxiliary_allowed(self, host: str, registry_host: str) -> bool:
        return host.lower() == registry_host.lower() or host_matches(host, self.registries) \
            or host_matches(host, self.auxiliary)


@dataclass
class Limits:
    timeout: float = 5.0  # seconds, one request (connect + every read)
    max_manifest_bytes: int = 4 * 1024 * 1024  # the OCI distribution spec's suggested manifest limit
    max_config_bytes: int = 2 * 1024 * 1024
    attempts: int = 3  # tries of one request on 429/5xx/connection reset


@dataclass
class Fetched:
    """A fetch: the facts of the platform's manifest, and the digest the reference resolved to (the index's,
    when it names one: a tag is cached as tag -> that digest)."""

    facts: RegistryFacts
    resolved: str
    requests: int


@dataclass
class _Token:
    value: str
    expires: float


@dataclass
class _Response:
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class _Target:
    scheme: str
    host: str  # host[:port]
    path: str


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    """``Bearer realm="...",service="...",scope="..."`` -> ("bearer", {realm, service, scope})."""
    scheme, _, rest = header.strip().partition(" ")
    params = {m.group(1).lower(): (m.group(2) if m.group(2) is not None else m.group(3)).replace('\\"', '"')
              for m in _CHALLENGE.finditer(rest)}
    return scheme.lower(), params


def platform_parts(platform: str) -> tuple[str, str, str | None]:
    os_, _, rest = platform.partition("/")
    arch, _, variant = rest.partition("/")
    return os_, arch, variant or None


def _platform_matches(entry: dict[str, Any], platform: str) -> bool:
    os_, arch, variant = platform_parts(platform)
    p = entry.get("platform")
    if not isinstance(p, dict) or p.get("os") != os_ or p.get("architecture") != arch:
        return False
    return variant is None or p.get("variant") in (None, variant)


class RegistryClient:
    """One client for a lint run or a webhook process: it keeps tokens (per realm, service and scope) and one
    connection per host per thread. Thread-safe: ``fetch`` may run on many threads at once."""

    def __init__(self, credentials: Credentials, policy: HostPolicy, limits: Limits | None = None,
                 ca_file: str | None = None, clock: Callable[[], float] = time.monotonic,
                 plain_http: tuple[str, ...] = ()) -> None:
        bad = [h for h in plain_http if not is_loopback(h)]
        if bad:
            raise ValueError(f"plain HTTP is only for a registry on this machine (loopback), not {', '.join(bad)}")
        self.plain_http = frozenset(h.lower() for h in plain_http)  # hosts spoken to without TLS (loopback only)
        self.credentials = credentials
        self.policy = policy
        self.limits = limits or Limits()
        self.clock = clock
        self.ssl = ssl.create_default_context()
        if ca_file:
            self.ssl.load_verify_locations(cafile=ca_file)  # added to the system's roots, never instead
        self._tokens: dict[tuple[str, str, str, str], _Token] = {}
        self._basic: dict[str, str] = {}
        self._lock = threading.Lock()
        self._local = threading.local()

    # ------------------------------------------------------------------ the lookup
    def fetch(self, ref: ImageRef, platform: str, deadline: float) -> Fetched:
        """The config facts of ``ref`` for ``platform``, before ``deadline`` (``clock`` time). Raises FetchError."""
        if not self.policy.registry_allowed(ref.registry):
            raise FetchError("not-allowed", ref.registry, f"registry {ref.registry} is not allowed")
        host = HOST_ALIASES.get(ref.registry, ref.registry)
        state = {"requests": 0}
        wanted = ref.digest or ref.tag or "latest"
        body, media, digest = self._manifest(host, ref, wanted, deadline, state)
        resolved = digest
        if media in INDEX_TYPES:
            entries = [m for m in _list(body, "manifests") if isinstance(m, dict) and _platform_matches(m, platform)]
            if not entries:
                found = sorted({"/".join(str(x) for x in (p.get("os"), p.get("architecture"), p.get("variant")) if x)
                                for m in _list(body, "manifests") if isinstance(p := m.get("platform"), dict)})
                raise FetchError("not-found", host, f"{ref.name}@{digest} has no {platform} manifest (it has "
                                                    f"{', '.join(found) or 'none'})")
            child = entries[0].get("digest")
            if not isinstance(child, str) or not _DIGEST.match(child):
                raise FetchError("protocol", host, f"index of {ref.name} names an unreadable digest {child!r}")
            size = entries[0].get("size")
            if isinstance(size, int) and size > self.limits.max_manifest_bytes:
                raise FetchError("too-large", host, f"manifest {child} is {size} bytes, over the "
                                                    f"{self.limits.max_manifest_bytes} byte cap")
            body, media, digest = self._manifest(host, ref, child, deadline, state)
            if media not in MANIFEST_TYPES:
                raise FetchError("protocol", host, f"{ref.name}@{child} is a {media}, not an image manifest")
        elif media not in MANIFEST_TYPES:
            raise FetchError("protocol", host, f"{ref.name}:{wanted} is a {media or 'manifest of no media type'}, "
                                               "not an image index or manifest (schema 1 manifests are not read)")
        config = body.get("config")
        if not isinstance(config, dict) or not isinstance(config.get("digest"), str):
            raise FetchError("protocol", host, f"manifest {digest} of {ref.name} has no config descriptor")
        config_digest = str(config["digest"])
        if not _DIGEST.match(config_digest):
            raise FetchError("protocol", host, f"manifest {digest} names an unsupported config digest {config_digest}")
        size = config.get("size")
        cap = self.limits.max_config_bytes
        if isinstance(size, int) and size > cap:
            raise FetchError("too-large", host, f"config {config_digest} of {ref.name} is {size} bytes, over the "
                                                f"{cap} byte cap")
        raw = self._get(host, ref, f"/v2/{ref.repository}/blobs/{config_digest}", "*/*", cap, deadline, state,
                        follow=True).body
        _verify(raw, config_digest, host, "config")
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise FetchError("protocol", host, f"config {config_digest} is not JSON: {exc}") from None
        env, labels = config_env_labels(data)
        facts = RegistryFacts(reference=canonical(ref), digest=digest, platform=platform, env=env, labels=labels,
                              config_digest=config_digest, source=f"registry {ref.registry}")
        return Fetched(facts, resolved, state["requests"])

    def _manifest(self, host: str, ref: ImageRef, wanted: str, deadline: float,
                  state: dict[str, int]) -> tuple[dict[str, Any], str, str]:
        resp = self._get(host, ref, f"/v2/{ref.repository}/manifests/{wanted}", ACCEPT,
                         self.limits.max_manifest_bytes, deadline, state)
        digest = _manifest_digest(resp, wanted, host, ref)
        try:
            body = json.loads(resp.body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise FetchError("protocol", host, f"manifest of {ref.name}:{wanted} is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise FetchError("protocol", host, f"manifest of {ref.name}:{wanted} is not a JSON object")
        media = body.get("mediaType") or resp.headers.get("content-type", "").split(";")[0].strip()
        return body, str(media), digest

    # ------------------------------------------------------------------ artifacts (compatcheck data bundles)
    def artifact_manifest(self, ref: ImageRef, deadline: float) -> tuple[bytes, str]:
        """The raw bytes of the OCI manifest ``ref`` names and their digest, verified against a digest reference or
        the registry's ``Docker-Content-Digest``. Raises FetchError."""
        host = self._host(ref)
        state = {"requests": 0}
        wanted = ref.digest or ref.tag or "latest"
        resp = self._get(host, ref, f"/v2/{ref.repository}/manifests/{wanted}", OCI_MANIFEST,
                         self.limits.max_manifest_bytes, deadline, state)
        digest = _manifest_digest(resp, wanted, host, ref)
        return resp.body, digest

    def blob(self, ref: ImageRef, digest: str, size: int, cap: int, deadline: float) -> bytes:
        """The blob ``digest`` of ``ref``'s repository, exactly ``size`` bytes (at most ``cap``), verified."""
        host = self._host(ref)
        if not _DIGEST.match(digest):
            raise FetchError("protocol", host, f"unsupported digest {digest!r}")
        if size > cap:
            raise FetchError("too-large", host, f"blob {digest} is {size} bytes, over the {cap} byte cap")
        raw = self._get(host, ref, f"/v2/{ref.repository}/blobs/{digest}", "*/*", size, deadline, {"requests": 0},
                        follow=True).body
        if len(raw) != size:
            raise FetchError("digest", host, f"blob {digest} is {len(raw)} bytes, not the {size} its descriptor "
                                             "says")
        _verify(raw, digest, host, "blob")
        return raw

    def push_blob(self, ref: ImageRef, data: bytes, deadline: float) -> str:
        """Upload ``data`` to ``ref``'s repository (a monolithic upload: POST, then PUT with the digest), unless the
        registry has it already (HEAD). Returns its digest. Raises FetchError."""
        host = self._host(ref)
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        state = {"requests": 0}
        head = self._send(host, ref, f"/v2/{ref.repository}/blobs/{digest}", "*/*", 0, deadline, state,
                          method="HEAD", ok=(200, 404), push=True)
        if head.status == 200:
            return digest
        started = self._send(host, ref, f"/v2/{ref.repository}/blobs/uploads/", "*/*", 64 * 1024, deadline, state,
                             method="POST", body=b"", ok=(202,), push=True)
        location = started.headers.get("location", "")
        base = f"{'http' if host.lower() in self.plain_http else 'https'}://{host}/v2/{ref.repository}/blobs/uploads/"
        url = urllib.parse.urlsplit(urllib.parse.urljoin(base, location))
        scheme = "http" if host.lower() in self.plain_http else "https"
        if not location or url.netloc.lower() != host.lower() or url.scheme != scheme:
            raise FetchError("protocol", host, f"upload location {location!r} is not on {host}")
        query = f"{url.query}&" if url.query else ""
        path = f"{url.path}?{query}{urllib.parse.urlencode({'digest': digest})}"
        self._send(host, ref, path, "*/*", 64 * 1024, deadline, state, method="PUT", body=data,
                   content_type="application/octet-stream", ok=(201, 204), push=True)
        return digest

    def push_manifest(self, ref: ImageRef, raw: bytes, media_type: str, deadline: float) -> str:
        """PUT the manifest ``raw`` under ``ref``'s tag (or its digest); returns the manifest's digest, checked
        against the registry's ``Docker-Content-Digest``. Raises FetchError."""
        host = self._host(ref)
        digest = "sha256:" + hashlib.sha256(raw).hexdigest()
        wanted = ref.tag or ref.digest or "latest"
        if ref.digest and ref.digest != digest:
            raise FetchError("digest", host, f"the manifest is {digest}, not the {ref.digest} the reference names")
        resp = self._send(host, ref, f"/v2/{ref.repository}/manifests/{wanted}", "*/*", 64 * 1024, deadline,
                          {"requests": 0}, method="PUT", body=raw, content_type=media_type, ok=(201, 204), push=True)
        header = resp.headers.get("docker-content-digest")
        if header and header != digest:
            raise FetchError("digest", host, f"{host} stored the manifest as {header}, not {digest}")
        return digest

    def _host(self, ref: ImageRef) -> str:
        if not self.policy.registry_allowed(ref.registry):
            raise FetchError("not-allowed", ref.registry, f"registry {ref.registry} is not allowed")
        return HOST_ALIASES.get(ref.registry, ref.registry)

    # ------------------------------------------------------------------ HTTP with auth, redirects, retries
    def _get(self, host: str, ref: ImageRef, path: str, accept: str, cap: int, deadline: float,
             state: dict[str, int], *, follow: bool = False) -> _Response:
        return self._send(host, ref, path, accept, cap, deadline, state, follow=follow)

    def _send(self, host: str, ref: ImageRef, path: str, accept: str, cap: int, deadline: float,
              state: dict[str, int], *, follow: bool = False, method: str = "GET", body: bytes | None = None,
              content_type: str | None = None, ok: tuple[int, ...] = (200,), push: bool = False) -> _Response:
        """One API request with auth (``push``: a token scoped ``pull,push``), redirects (GET only) and retries;
        a status outside ``ok`` is a FetchError."""
        target = _Target("https", host, path)
        scope = f"repository:{ref.repository}:{'pull,push' if push else 'pull'}"
        auth: str | None = self._cached_auth(host, ref, scope)
        tried_auth = False
        redirects = 0
        attempt = 0
        while True:
            same_host = target.host.lower() == host.lower()
            headers = {"Accept": accept, "User-Agent": USER_AGENT}
            if content_type is not None:
                headers["Content-Type"] = content_type
            if auth and same_host:  # credentials go to the registry only, never to a CDN it redirects to
                headers["Authorization"] = auth
            state["requests"] += 1
            resp = self._request(target, headers, cap, deadline, method=method, body=body)
            if resp.status == 401 and same_host and not tried_auth:
                tried_auth = True
                if auth:  # a token the registry no longer takes
                    self._forget(host)
                auth = self._authenticate(host, ref, resp.headers.get("www-authenticate", ""), deadline, state,
                                          scope)
                continue
            if resp.status in (301, 302, 303, 307, 308) and method in ("GET", "HEAD"):
                redirects += 1
                location = resp.headers.get("location", "")
                if not follow and not same_host:
                    raise FetchError("protocol", host, f"unexpected redirect to {location}")
                target = self._redirect(host, target, location, redirects)
                continue
            if resp.status == 429 or resp.status >= 500:
                attempt += 1
                if attempt >= self.limits.attempts:
                    raise FetchError("status", host, f"{target.host} answered {resp.status} {attempt} times")
                self._backoff(attempt, resp.headers.get("retry-after"), deadline, host)
                continue
            if resp.status in (401, 403):
                who = "anonymous access" if self.credentials.for_host(host) is None else "the credentials given"
                raise FetchError("denied", host, f"{host} refused {who} ({resp.status}) for {ref.name}")
            if resp.status == 404 and 404 not in ok:
                raise FetchError("not-found", host, f"{ref.name}: {path.split('?')[0].rsplit('/', 1)[-1]} not "
                                                    "found (404)")
            if resp.status not in ok:
                detail = _error_detail(resp.body)
                raise FetchError("status", host, f"{target.host} answered {resp.status} for {method} "
                                                 f"{path.split('?')[0]}{f' ({detail})' if detail else ''}")
            return resp

    def _redirect(self, host: str, current: _Target, location: str, count: int) -> _Target:
        if count > MAX_REDIRECTS:
            raise FetchError("protocol", host, f"more than {MAX_REDIRECTS} redirects")
        url = urllib.parse.urlsplit(urllib.parse.urljoin(f"{current.scheme}://{current.host}{current.path}",
                                                         location))
        if url.scheme != "https":
            raise FetchError("not-allowed", host, f"redirect to a non-HTTPS URL ({url.scheme}://{url.netloc})")
        if not url.netloc or "@" in url.netloc:
            raise FetchError("protocol", host, f"unreadable redirect {location!r}")
        if not self.policy.auxiliary_allowed(url.netloc, host):
            raise FetchError("not-allowed", host, f"{host} redirected to {url.netloc}, which is not an allowed host "
                                                  "(registry.redirectHosts)")
        return _Target("https", url.netloc, url.path + (f"?{url.query}" if url.query else ""))

    def _backoff(self, attempt: int, retry_after: str | None, deadline: float, host: str) -> None:
        wait = 0.2 * (2 ** (attempt - 1))
        if retry_after:
            if retry_after.strip().isdigit():
                wait = float(retry_after.strip())
            else:
                when = email.utils.parsedate_to_datetime(retry_after) if retry_after else None
                if when is not None:
                    wait = max(0.0, when.timestamp() - time.time())
        if self.clock() + wait >= deadline:
            raise FetchError("timeout", host, f"{host} asked to retry after {wait:g} s, past the lookup budget")
        time.sleep(wait)

    # ------------------------------------------------------------------ tokens
    def _cached_auth(self, host: str, ref: ImageRef, wanted: str | None = None) -> str | None:
        wanted = wanted or f"repository:{ref.repository}:pull"
        with self._lock:
            basic = self._basic.get(host)
            if basic is not None:  # a Basic registry: no need to be refused first on every request
                return basic
            for (h, _realm, _service, scope), tok in self._tokens.items():
                if h == host and scope == wanted and tok.expires > self.clock():
                    return f"Bearer {tok.value}"
        return None

    def forget_tokens(self) -> None:
        """Drop every token and Basic header (the credentials they came from changed)."""
        with self._lock:
            self._basic.clear()
            self._tokens.clear()

    def _forget(self, host: str) -> None:
        with self._lock:
            self._basic.pop(host, None)
            for key in [k for k in self._tokens if k[0] == host]:
                del self._tokens[key]

    def _authenticate(self, host: str, ref: ImageRef, challenge: str, deadline: float,
                      state: dict[str, int], wanted: str | None = None) -> str:
        scheme, params = parse_challenge(challenge)
        cred = self.credentials.for_host(host)
        if scheme == "basic":
            if cred is None or cred.username is None or cred.password is None:
                raise FetchError("denied", host, f"{host} asks for credentials (Basic) and none are configured "
                                                 "(docker login, or registry.authFile)")
            basic = "Basic " + base64.b64encode(f"{cred.username}:{cred.password}".encode()).decode()
            with self._lock:
                self._basic[host] = basic
            return basic
        if scheme != "bearer" or not params.get("realm"):
            raise FetchError("protocol", host, f"{host} answered 401 without a usable challenge ({challenge[:80]!r})")
        realm = urllib.parse.urlsplit(params["realm"])
        if realm.scheme != "https" or not realm.netloc:
            raise FetchError("not-allowed", host, f"token realm {params['realm']!r} is not an HTTPS URL")
        if not self.policy.auxiliary_allowed(realm.netloc, host):
            raise FetchError("not-allowed", host, f"{host} names a token realm on {realm.netloc}, which is not an "
                                                  "allowed host (registry.redirectHosts)")
        scope = params.get("scope") or wanted or f"repository:{ref.repository}:pull"
        service = params.get("service", "")
        key = (host, params["realm"], service, scope)
        with self._lock:
            tok = self._tokens.get(key)
        if tok is not None and tok.expires > self.clock():
            return f"Bearer {tok.value}"
        token = self._token(host, realm, service, scope, cred, deadline, state)
        return f"Bearer {token}"

    def _token(self, host: str, realm: urllib.parse.SplitResult, service: str, scope: str, cred: Credential | None,
               deadline: float, state: dict[str, int]) -> str:
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        query = {"service": service, "scope": scope} if service else {"scope": scope}
        method, body = "GET", None
        if cred is not None and cred.identity_token:
            # An identity token is an OAuth2 refresh token (docker login with a token-issuing registry).
            method = "POST"
            body = urllib.parse.urlencode({"grant_type": "refresh_token", "refresh_token": cred.identity_token,
                                           "service": service, "scope": scope, "client_id": "compatcheck"}).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            path = realm.path or "/"
        else:
            if cred is not None and cred.username is not None and cred.password is not None:
                headers["Authorization"] = "Basic " + base64.b64encode(
                    f"{cred.username}:{cred.password}".encode()).decode()
            sep = "&" if realm.query else ""
            path = f"{realm.path or '/'}?{realm.query}{sep}{urllib.parse.urlencode(query)}"
        state["requests"] += 1
        resp = self._request(_Target("https", realm.netloc, path), headers, MAX_TOKEN_BYTES, deadline,
                             method=method, body=body)
        if resp.status in (401, 403):
            raise FetchError("denied", host, f"token service {realm.netloc} refused "
                                             f"{'the credentials given' if cred else 'anonymous access'} "
                                             f"({resp.status})")
        if resp.status != 200:
            raise FetchError("status", host, f"token service {realm.netloc} answered {resp.status}")
        try:
            data = json.loads(resp.body)
            token = data.get("token") or data.get("access_token")
            ttl = float(data.get("expires_in") or 60)
        except (ValueError, AttributeError, TypeError):
            raise FetchError("protocol", host, f"token service {realm.netloc} answered no JSON token") from None
        if not isinstance(token, str) or not token:
            raise FetchError("protocol", host, f"token service {realm.netloc} answered no token")
        with self._lock:
            self._tokens[(host, urllib.parse.urlunsplit(realm), service, scope)] = _Token(
                token, self.clock() + max(1.0, ttl - 5))
        return token

    # ------------------------------------------------------------------ one HTTPS request
    def _connection(self, host: str, timeout: float) -> http.client.HTTPConnection:
        conns: dict[str, http.client.HTTPConnection] | None = getattr(self._local, "conns", None)
        if conns is None:
            conns = self._local.conns = {}
        conn = conns.get(host)
        if conn is None:
            name, _, port = host.rpartition(":") if re.search(r":\d+$", host) else (host, "", "")
            if host.lower() in self.plain_http:  # asked for, and on loopback only (checked at construction)
                conn = http.client.HTTPConnection(name, int(port) if port else 80, timeout=timeout)
            else:
                conn = http.client.HTTPSConnection(name, int(port) if port else 443, timeout=timeout,
                                                   context=self.ssl)
            conns[host] = conn
        return conn

    def _drop(self, host: str) -> None:
        conns = getattr(self._local, "conns", {})
        conn = conns.pop(host, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Close this thread's connections."""
        for host in list(getattr(self._local, "conns", {})):
            self._drop(host)

    def _request(self, target: _Target, headers: dict[str, str], cap: int, deadline: float, *,
                 method: str = "GET", body: bytes | None = None, retried: bool = False) -> _Response:
        remaining = deadline - self.clock()
        if remaining <= 0:
            raise FetchError("timeout", target.host, f"lookup budget spent before a request to {target.host}")
        timeout = min(self.limits.timeout, remaining)
        conn = self._connection(target.host, timeout)
        try:
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            conn.request(method, target.path, body=body, headers=headers)
            resp = conn.getresponse()
            status = resp.status
            hdrs = {k.lower(): v for k, v in resp.getheaders()}
            if method == "HEAD":
                data = resp.read()  # no body; reading closes the response, so the connection is reused
            elif status in (301, 302, 303, 307, 308) or status >= 400:
                data = self._read(resp, conn, 64 * 1024, deadline, target.host, keep=False)
            else:
                length = hdrs.get("content-length")
                if length is not None and length.isdigit() and int(length) > cap:
                    self._drop(target.host)  # the body is never read: the connection cannot carry another request
                    raise FetchError("too-large", target.host, f"{target.path.split('?')[0].rsplit('/', 1)[-1]} "
                                                               f"is {length} bytes, over the {cap} byte cap")
                data = self._read(resp, conn, cap, deadline, target.host, keep=True)
            if resp.will_close or not resp.isclosed():  # closing, or a body left unread: no reuse
                self._drop(target.host)
            return _Response(status, hdrs, data)
        except FetchError:
            self._drop(target.host)
            raise
        except ssl.SSLError as exc:
            self._drop(target.host)
            raise FetchError("tls", target.host, f"TLS with {target.host} failed: {exc.reason or exc}") from None
        except TimeoutError:
            self._drop(target.host)
            raise FetchError("timeout", target.host, f"{target.host} did not answer within {timeout:.3g} s") from None
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
            self._drop(target.host)
            if not retried:  # a kept-alive connection the server closed meanwhile: once more, on a new one
                return self._request(target, headers, cap, deadline, method=method, body=body, retried=True)
            raise FetchError("network", target.host, f"{target.host} closed the connection: {exc}") from None
        except (OSError, http.client.HTTPException) as exc:
            self._drop(target.host)
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
            raise FetchError("network", target.host, f"cannot reach {target.host}: {reason}") from None

    def _read(self, resp: http.client.HTTPResponse, conn: http.client.HTTPConnection, cap: int, deadline: float,
              host: str, *, keep: bool) -> bytes:
        chunks: list[bytes] = []
        total = 0
        while True:
            remaining = deadline - self.clock()
            if remaining <= 0:
                raise FetchError("timeout", host, f"lookup budget spent while reading from {host}")
            if conn.sock is not None:
                conn.sock.settimeout(min(self.limits.timeout, remaining))
            chunk = resp.read1(65536)
            if not chunk:
                break
            total += len(chunk)
            if total > cap:
                if keep:
                    raise FetchError("too-large", host, f"a body from {host} is over the {cap} byte cap")
                break  # an error body: what was read is enough to report
            chunks.append(chunk)
        return b"".join(chunks)


def _error_detail(body: bytes) -> str:
    """The first ``errors[].message`` of a distribution API error body ("" when there is none)."""
    try:
        errors = json.loads(body).get("errors")
        first = errors[0] if isinstance(errors, list) and errors else {}
        return str(first.get("code", "")) + (f": {first['message']}" if first.get("message") else "")
    except (ValueError, AttributeError, TypeError, KeyError, UnicodeDecodeError):
        return ""


def _verify(data: bytes, digest: str, host: str, what: str) -> None:
    got = "sha256:" + hashlib.sha256(data).hexdigest()
    if got != digest:
        raise FetchError("digest", host, f"{what} {digest} does not match its bytes (got {got})")


def _list(body: dict[str, Any], key: str) -> list[Any]:
    value = body.get(key)
    return value if isinstance(value, list) else []


def config_env_labels(data: Any) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """``config.Env`` (``NAME=value`` strings) and ``config.Labels`` of an OCI/Docker image config."""
    cfg = data.get("config") if isinstance(data, dict) else None
    if not isinstance(cfg, dict):
        return (), ()
    env: list[tuple[str, str]] = []
    for item in cfg.get("Env") or []:
        if isinstance(item, str) and "=" in item:
            name, _, value = item.partition("=")
            env.append((name, value))
    labels = cfg.get("Labels") or {}
    pairs = tuple(sorted((str(k), str(v)) for k, v in labels.items())) if isinstance(labels, dict) else ()
    return tuple(env), pairs


def _manifest_digest(resp: _Response, wanted: str, host: str, ref: ImageRef) -> str:
    """The digest of a manifest's bytes, verified against the digest asked for, or else against the registry's
    ``Docker-Content-Digest`` where it sends one. Raises FetchError."""
    digest = "sha256:" + hashlib.sha256(resp.body).hexdigest()
    if wanted.startswith("sha256:"):
        _verify(resp.body, wanted, host, "manifest")
    else:
        header = resp.headers.get("docker-content-digest")
        if header and header.startswith("sha256:") and header != digest:
            raise FetchError("digest", host, f"manifest of {ref.name}:{wanted} does not match its "
                                             f"Docker-Content-Digest {header} (got {digest})")
    return digest
