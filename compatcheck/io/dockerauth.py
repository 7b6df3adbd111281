"""Registry credentials as docker keeps them: ``config.json`` (``$DOCKER_CONFIG/config.json``, else
``~/.docker/config.json``, or a file named by ``registry.authFile``, such as a mounted
``kubernetes.io/dockerconfigjson`` Secret), its ``auths`` (``auth``: base64 ``user:password``, or ``username`` and
``password``, or ``identitytoken``) and its credential helpers (``credHelpers`` per registry, ``credsStore`` for
the rest: ``docker-credential-<name> get`` with the registry on stdin).

Reads files and runs the helper a config names, with a timeout; never writes, never prints a secret, and never
fails a run: an unreadable file or a helper that fails means no credentials (anonymous access), and
``problems`` says why once.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HELPER_TIMEOUT = 10.0  # seconds for one docker-credential-<x> get
# Keys docker itself writes for Docker Hub.
_HUB_KEYS = ("https://index.docker.io/v1/", "index.docker.io", "docker.io", "registry-1.docker.io")


@dataclass(frozen=True)
class Credential:
    username: str | None = None
    password: str | None = None
    identity_token: str | None = None

    def __repr__(self) -> str:  # never a secret in a log or a traceback
        secret = "yes" if self.password or self.identity_token else "no"
        return f"Credential(username={self.username!r}, secret={secret})"


def docker_config_path() -> Path:
    base = os.environ.get("DOCKER_CONFIG")
    return Path(base) / "config.json" if base else Path.home() / ".docker" / "config.json"


def _host_of(key: str) -> str:
    """An ``auths`` key as a host: ``https://ghcr.io/v1/`` -> ``ghcr.io``."""
    k = key.strip()
    if "://" in k:
        k = k.split("://", 1)[1]
    return k.split("/", 1)[0].lower()


def _hub(host: str) -> bool:
    return host in ("docker.io", "index.docker.io", "registry-1.docker.io")


class Credentials:
    """Credentials per registry host from one docker config file (read once, on first use)."""

    def __init__(self, path: str | Path | None = None, *, use_helpers: bool = True) -> None:
        self.path = Path(path) if path is not None else docker_config_path()
        self.use_helpers = use_helpers
        self.problems: list[str] = []
        self._data: dict[str, Any] | None = None
        self._cache: dict[str, Credential | None] = {}
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None  # (mtime_ns, size) of the file read

    @classmethod
    def none(cls) -> Credentials:
        """No credentials at all (anonymous access only)."""
        creds = cls("/nonexistent/config.json", use_helpers=False)
        creds._data = {}
        return creds

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def reload_if_changed(self) -> bool:
        """Forget what was read when the file changed since (a mounted Secret the kubelet updated: a long-running
        webhook picks up rotated credentials without a restart). True when it did."""
        stamp = self._file_stamp()
        with self._lock:
            if self._data is None or stamp == self._stamp:
                return False
            self._data, self._cache, self._stamp = None, {}, None
            return True

    def _load(self) -> dict[str, Any]:
        if self._data is None:
            self._stamp = self._file_stamp()
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                self._data = data if isinstance(data, dict) else {}
                if not isinstance(data, dict):
                    self.problems.append(f"{self.path}: not a JSON object; no registry credentials used")
            except FileNotFoundError:
                self._data = {}
            except (OSError, ValueError) as exc:
                self.problems.append(f"{self.path}: cannot read ({exc}); no registry credentials used")
                self._data = {}
        return self._data

    def for_host(self, host: str) -> Credential | None:
        """The credential for a registry host (``registry-1.docker.io`` finds Docker Hub's), or None."""
        host = host.lower()
        with self._lock:
            if host not in self._cache:
                self._cache[host] = self._find(host)
            return self._cache[host]

    def _find(self, host: str) -> Credential | None:
        data = self._load()
        helpers = data.get("credHelpers")
        if isinstance(helpers, dict):
            for key, helper in helpers.items():
                if isinstance(helper, str) and (_host_of(key) == host or (_hub(host) and _hub(_host_of(key)))):
                    return self._helper(helper, key)
        auths = data.get("auths")
        if isinstance(auths, dict):
            for key, entry in auths.items():
                kh = _host_of(str(key))
                if isinstance(entry, dict) and (kh == host or (_hub(host) and _hub(kh))):
                    found = self._entry(str(key), entry)
                    if found is not None:
                        return found
        store = data.get("credsStore")
        if isinstance(store, str) and store:
            return self._helper(store, _HUB_KEYS[0] if _hub(host) else host)
        return None

    def _entry(self, key: str, entry: dict[str, Any]) -> Credential | None:
        token = entry.get("identitytoken")
        if isinstance(token, str) and token:
            return Credential(identity_token=token)
        auth = entry.get("auth")
        if isinstance(auth, str) and auth:
            try:
                user, sep, password = base64.b64decode(auth, validate=True).decode("utf-8").partition(":")
            except (binascii.Error, UnicodeDecodeError):
                self.problems.append(f"{self.path}: auths.{key}.auth is not base64 'user:password'; ignored")
                return None
            if sep:
                return Credential(user, password)
        name, secret = entry.get("username"), entry.get("password")
        if isinstance(name, str) and isinstance(secret, str):
            return Credential(name, secret)
        return None

    def _helper(self, name: str, server: str) -> Credential | None:
        if not self.use_helpers:
            return None
        program = f"docker-credential-{name}"
        try:
            out = subprocess.run([program, "get"], input=server, capture_output=True, text=True,
                                 timeout=HELPER_TIMEOUT, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.problems.append(f"credential helper {program} failed for {server}: {exc}")
            return None
        if out.returncode != 0:
            return None  # "credentials not found": anonymous access
        try:
            data = json.loads(out.stdout)
            user, secret = data.get("Username"), data.get("Secret")
        except (ValueError, AttributeError):
            self.problems.append(f"credential helper {program} answered no JSON for {server}")
            return None
        if not isinstance(secret, str) or not secret:
            return None
        if user == "<token>":
            return Credential(identity_token=secret)
        return Credential(user if isinstance(user, str) else None, secret)
