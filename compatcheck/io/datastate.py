"""Which knowledge a command uses: the built-in rules and tables, the data bundle last pulled (``compatcheck data
pull``, the *active* bundle in the cache directory), or a directory named on the command line.

Kept small, because every lint asks: reading the choice costs one ``stat`` (and one small JSON file when a bundle
was pulled). Pulling, verifying and unpacking bundles is ``io.bundle``'s.

The cache directory's ``data/`` holds ``state.json`` (``{"active": {...}, "previous": {...}}``, written to a
temporary file and renamed over, so a reader sees the old or the new state and never half of one) and
``bundles/<digest>-<random>/``, each a verified, unpacked bundle: ``rules/`` (``rules/data/`` the tables),
``schemas/``, ``config.json`` and ``manifest.json``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from compatcheck.io.cachedir import user_cache_dir

CHOICES = ("auto", "builtin", "active")  # besides a directory
ENV = "COMPATCHECK_DATA"  # the default of --data (the config's data.use comes after the flag and this)


class DataChoiceError(Exception):
    """The knowledge asked for cannot be used (one line)."""


class NoCacheDirectory(DataChoiceError):
    """No cache directory to keep bundles in: no home directory, and no ``$COMPATCHECK_CACHE_DIR``."""


def data_root() -> Path:
    """``data/`` in ``$COMPATCHECK_CACHE_DIR``, else in compatcheck's user cache directory."""
    override = os.environ.get("COMPATCHECK_CACHE_DIR")
    try:
        base = Path(override) if override else user_cache_dir()
    except (RuntimeError, KeyError):  # a container user without a home directory
        raise NoCacheDirectory("no cache directory for data bundles: set $COMPATCHECK_CACHE_DIR (or $HOME)") from None
    return base / "data"


def read_state(root: Path | None = None) -> dict[str, Any]:
    """``state.json`` ({} when nothing was pulled). A file that is not the state is an error, not "nothing"."""
    path = (root or data_root()) / "state.json"
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise DataChoiceError(f"{path}: cannot read the data bundle state: {exc.strerror or exc}") from None
    try:
        state = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        state = None
    if not isinstance(state, dict) or not all(isinstance(state.get(k), dict | None) for k in ("active", "previous")):
        raise DataChoiceError(f"{path}: not a data bundle state file (remove it, or pull again)")
    return state


def active_bundle(root: Path | None = None) -> dict[str, Any] | None:
    """The active pulled bundle's record (digest, ref, pulledAt, dir: absolute), or None."""
    root = root or data_root()
    entry = read_state(root).get("active")
    if not isinstance(entry, dict) or not isinstance(entry.get("dir"), str):
        return None
    return {**entry, "dir": str(root / "bundles" / entry["dir"])}


class Knowledge:
    """The rules directory a command loads (``rules/`` with ``data/``), and where it came from: ``builtin``,
    ``active`` (a pulled bundle: ``bundle`` is its state record) or ``dir``. ``trusted``: validated when it was
    installed or pulled, so read through the rule cache without validating each run."""

    __slots__ = ("bundle", "kind", "path", "trusted")

    def __init__(self, kind: str, path: Path, trusted: bool, bundle: dict[str, Any] | None = None) -> None:
        self.kind, self.path, self.trusted, self.bundle = kind, path, trusted, bundle

    def __repr__(self) -> str:
        return f"Knowledge({self.kind!r}, {str(self.path)!r})"


def choose(choice: str | None, config_choice: str | None = None) -> Knowledge:
    """The knowledge for ``--data`` (None: ``$COMPATCHECK_DATA``, else the config's ``data.use``, else ``auto``):
    ``auto`` the active pulled bundle when there is one, else the built-in tables; ``builtin``; ``active`` (an
    error when none was pulled); or a directory: a rules directory, or a bundle's OCI layout (``io.bundle`` opens
    it). Raises DataChoiceError."""
    from compatcheck.io.loader import builtin_rules_dir

    wanted = choice or os.environ.get(ENV) or config_choice or "auto"
    if wanted == "builtin":
        return Knowledge("builtin", builtin_rules_dir(), True)
    if wanted in ("auto", "active"):
        try:
            bundle = active_bundle()
        except NoCacheDirectory:
            if wanted == "active":
                raise
            bundle = None  # nowhere a bundle could have been pulled to
        if bundle is not None and (Path(bundle["dir"]) / "rules").is_dir():
            return Knowledge("active", Path(bundle["dir"]) / "rules", True, bundle)
        if bundle is not None:
            raise DataChoiceError(f"the active data bundle {bundle.get('digest')} is missing from "
                                  f"{bundle['dir']} (pull it again, or run compatcheck data rollback)")
        if wanted == "active":
            raise DataChoiceError("--data active: no data bundle has been pulled (compatcheck data pull REF)")
        return Knowledge("builtin", builtin_rules_dir(), True)
    path = Path(wanted)
    if not path.is_dir():
        raise DataChoiceError(f"--data {wanted}: neither builtin, active, auto nor a directory")
    if (path / "oci-layout").is_file():
        from compatcheck.io.bundle import open_layout

        return open_layout(path)
    return Knowledge("dir", path, False)
