"""A cache of the parsed built-in rule and data-table files, so that a ``lint`` does not parse 270 KB of YAML on
every start (a pre-commit hook starts compatcheck on every commit; the parse was a fifth of a one-file lint).

Keyed by content: the key hashes compatcheck's version, the Python version, a format number and every built-in
file's name and bytes, so an edited, upgraded or damaged install is a miss and is parsed again. An entry holds
exactly what the YAML parse returned, as JSON, and is written only when JSON gives back the same data (``==``,
types included: an integer key or a tuple would not come back, and such a file is simply not cached). JSON, not
pickle or marshal: a file in the cache directory is never more than data, whoever wrote it.

What it caches is the *trusted* read of built-in files, which is not validated against the schemas at run time
(the test suite and ``compatcheck rules validate`` validate them; see ``io.loader``). Admin rule directories
are never cached: they are parsed with positions and validated on every run. ``COMPATCHECK_RULES_CACHE=0``
turns the cache off.

Where: ``rules/`` in the user cache directory (``compatcheck.io.cachedir.user_cache_dir``). Safe under
concurrent runs: an entry is written to a temporary file and renamed over (atomic), a corrupt or foreign file
is a miss, and only the newest few entries are kept.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from compatcheck import __version__

try:  # importing hashlib loads OpenSSL's bindings first (5 ms of a lint's start-up); BLAKE2 is CPython's own
    from _blake2 import blake2b
except ImportError:  # an interpreter built without it
    from hashlib import blake2b
from compatcheck.io.cachedir import user_cache_dir

FORMAT = 2  # bumped when an entry's shape or what it vouches for changes (2: written after a clean build)
KEEP = 4  # entries kept (several installs of different versions share a user's cache)


def cache_dir() -> Path:
    return user_cache_dir() / "rules"


def enabled() -> bool:
    return os.environ.get("COMPATCHECK_RULES_CACHE", "1") not in ("0", "false", "no", "off")


def _key(texts: dict[str, bytes]) -> str:
    h = blake2b(digest_size=16)
    h.update(f"{FORMAT}\0{__version__}\0{sys.version}\0".encode())
    for name in sorted(texts):
        h.update(name.encode() + b"\0" + str(len(texts[name])).encode() + b"\0" + texts[name])
    return h.hexdigest()


class Read:
    """The parse of the built-in files, from the cache (``hit``) or just made. ``store`` writes a miss's entry: the
    loader calls it once the files have built the rules and the knowledge base without a problem, so an entry
    always holds files that passed the checks a build makes (a hit may skip some of them: ``io.loader``)."""

    __slots__ = ("_directory", "_entry", "_names", "files", "hit")

    def __init__(self, files: dict[Path, list[Any]], hit: bool, directory: Path | None = None,
                 entry: Path | None = None, names: dict[Path, str] | None = None) -> None:
        self.files, self.hit = files, hit
        self._directory, self._entry, self._names = directory, entry, names or {}

    def store(self) -> None:
        if self.hit or self._directory is None or self._entry is None:
            return
        _write(self._directory, self._entry, {self._names[p]: docs for p, docs in self.files.items()})


def read(paths: list[Path], parse: Callable[[str], list[Any]], root: Path | None = None) -> Read:
    """``parse`` of each file's text (its documents), from the cache when an entry has this content's key; a miss
    is parsed and written only by ``Read.store``. ``parse`` must not raise: it returns what a failed parse means
    to its caller (an empty list)."""
    texts = {p: p.read_bytes() for p in paths}
    names = {p: p.name if p.parent.name != "data" else f"data/{p.name}" for p in paths}
    if not enabled():
        return Read({p: parse(t.decode("utf-8")) for p, t in texts.items()}, False)
    try:
        directory = root or cache_dir()
    except (RuntimeError, KeyError, OSError):  # no home directory to find a cache in: parse, as without one
        return Read({p: parse(t.decode("utf-8")) for p, t in texts.items()}, False)
    key = _key({names[p]: t for p, t in texts.items()})
    entry = directory / f"builtin-{key}.json"
    cached = _read(entry, set(names.values()))
    if cached is not None:
        return Read({p: cached[names[p]] for p in paths}, True)
    return Read({p: parse(t.decode("utf-8")) for p, t in texts.items()}, False, directory, entry, names)


def parsed_files(paths: list[Path], parse: Callable[[str], list[Any]],
                 root: Path | None = None) -> dict[Path, list[Any]]:
    """``read`` and, on a miss, ``store`` at once."""
    found = read(paths, parse, root)
    found.store()
    return found.files


def _read(entry: Path, names: set[str]) -> dict[str, list[Any]] | None:
    try:
        data = json.loads(entry.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or set(data) != names or not all(isinstance(v, list) for v in data.values()):
        return None
    return data


def _write(directory: Path, entry: Path, data: dict[str, list[Any]]) -> None:
    """Write ``entry`` when JSON gives ``data`` back unchanged; any failure leaves the cache as it was."""
    try:
        text = json.dumps(data, separators=(",", ":"), allow_nan=False)
        if json.loads(text) != data:
            return
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".{entry.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, entry)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
        entries = sorted(directory.glob("builtin-*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in entries[KEEP:]:
            with contextlib.suppress(OSError):
                old.unlink()
    except (OSError, ValueError, TypeError, RecursionError):
        return
