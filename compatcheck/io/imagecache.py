"""The on-disk cache of image config facts, shared by every CLI run of a user (pre-commit hooks, CI steps).

Content-addressed: ``facts/<digest>-<platform>.json`` holds what a manifest's config says (a digest's content never
changes, so these never expire), and ``tags/<key>.json`` maps a tag to the digest it named when it was read, with
the time it was read (a tag moves: it is trusted for ``tag_ttl`` seconds, or for ever with ``--offline``).

Where: ``$COMPATCHECK_CACHE_DIR``, else the platform's user cache directory (``$XDG_CACHE_HOME/compatcheck``,
``~/.cache/compatcheck``; ``~/Library/Caches/compatcheck`` on macOS; ``%LOCALAPPDATA%\\compatcheck\\Cache`` on
Windows), under ``images/``.

Safe under concurrent runs: every write goes to a temporary file in the same directory and is renamed over the
entry (``os.replace``, atomic on POSIX and Windows), so a reader sees an old entry or a new one, never half of
one; two writers of one entry write the same content. A corrupt or foreign file is a miss. Bounded: past
``max_entries`` files the oldest (by modification time) are removed. Reads and writes files; fetches nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from compatcheck.core.imageconfig import RegistryFacts
from compatcheck.io.cachedir import user_cache_dir

FORMAT = 1  # bumped when an entry's shape changes: older entries are then misses


def default_cache_dir() -> Path:
    """``$COMPATCHECK_CACHE_DIR``, else the user cache directory of the platform, with ``images`` under it."""
    override = os.environ.get("COMPATCHECK_CACHE_DIR")
    if override:
        return Path(override)
    return user_cache_dir() / "images"


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


def facts_to_json(rf: RegistryFacts) -> dict[str, Any]:
    return {"reference": rf.reference, "digest": rf.digest, "platform": rf.platform, "configDigest": rf.config_digest,
            "env": [f"{k}={v}" for k, v in rf.env], "labels": dict(rf.labels)}


def facts_from_json(data: Any, source: str) -> RegistryFacts | None:
    """The inverse of ``facts_to_json`` for data this module wrote (validated by schema where a user wrote it)."""
    if not isinstance(data, dict):
        return None
    env = data.get("env")
    labels = data.get("labels")
    if not isinstance(env, list) or not isinstance(labels, dict) or not isinstance(data.get("platform"), str):
        return None
    pairs = tuple((k, v) for k, _, v in (str(e).partition("=") for e in env if "=" in str(e)))
    return RegistryFacts(str(data.get("reference") or ""), data.get("digest"), data["platform"], pairs,
                         tuple(sorted((str(k), str(v)) for k, v in labels.items())), data.get("configDigest"),
                         source)


class ImageCache:
    def __init__(self, root: Path | None = None, *, tag_ttl: float = 24 * 3600.0, max_entries: int = 5000,
                 clock: Any = time.time) -> None:
        self.root = root or default_cache_dir()
        self.tag_ttl = tag_ttl
        self.max_entries = max_entries
        self.clock = clock
        self.writes = 0
        self.problems: list[str] = []  # why the cache could not be written (once each), for a note

    def _facts_path(self, digest: str, platform: str) -> Path:
        return self.root / "facts" / f"{_safe(digest)}-{_safe(platform)}.json"

    def _tag_path(self, name_tag: str, platform: str) -> Path:
        key = hashlib.sha256(f"{name_tag}|{platform}".encode()).hexdigest()[:40]
        return self.root / "tags" / f"{key}.json"

    # ------------------------------------------------------------------ reads
    def _read(self, path: Path) -> Any:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and data.get("format") == FORMAT else None

    def facts(self, digest: str, platform: str, reference: str) -> RegistryFacts | None:
        data = self._read(self._facts_path(digest, platform))
        if data is None:
            return None
        origin, read_at = data.get("source"), data.get("readAt")
        source = f"the cache {self.root}"
        if isinstance(origin, str) and isinstance(read_at, (int, float)):
            when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(read_at))
            source += f" (read from {origin} at {when})"
        rf = facts_from_json(data.get("facts"), source)
        if rf is None:
            return None
        return RegistryFacts(reference, rf.digest, rf.platform, rf.env, rf.labels, rf.config_digest, rf.source)

    def tag(self, name_tag: str, platform: str, *, any_age: bool = False) -> str | None:
        """The digest ``name_tag`` named when read within ``tag_ttl`` (any time with ``any_age``), or None."""
        data = self._read(self._tag_path(name_tag, platform))
        if data is None or data.get("reference") != name_tag or not isinstance(data.get("digest"), str):
            return None
        read_at = data.get("readAt")
        if not any_age and (not isinstance(read_at, (int, float)) or self.clock() - read_at > self.tag_ttl):
            return None
        return str(data["digest"])

    def lookup(self, reference: str, digest: str | None, platform: str, *, any_age: bool = False
               ) -> RegistryFacts | None:
        """Facts for a canonical reference (``name:tag`` or ``name@digest``) from the cache alone."""
        resolved = digest or self.tag(reference, platform, any_age=any_age)
        return self.facts(resolved, platform, reference) if resolved else None

    # ------------------------------------------------------------------ writes
    def store(self, reference: str, resolved: str, facts: RegistryFacts, tagged: bool) -> None:
        """Record ``facts`` under the digest the reference resolved to, and the tag -> digest mapping."""
        entries = [(self._facts_path(resolved, facts.platform), {"format": FORMAT, "facts": facts_to_json(facts),
                                                                 "source": facts.source, "readAt": self.clock()})]
        if tagged:
            entries.append((self._tag_path(reference, facts.platform),
                            {"format": FORMAT, "reference": reference, "digest": resolved, "readAt": self.clock()}))
        for path, data in entries:
            self._write(path, data)

    def _write(self, path: Path, data: dict[str, Any]) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    json.dump(data, fh, sort_keys=True)
                os.replace(tmp, path)  # atomic: readers see the old entry or this one
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
            self.writes += 1
        except OSError as exc:
            problem = f"cannot write the image cache in {self.root}: {exc.strerror or exc}"
            if problem not in self.problems:
                self.problems.append(problem)

    def prune(self) -> int:
        """Remove the oldest entries past ``max_entries`` (and temporary files older than an hour, left by a
        killed run); the number removed. Another process pruning at the same time only makes some removals
        fail, which is harmless."""
        files: list[tuple[float, Path]] = []
        removed = 0
        now = time.time()
        for sub in ("facts", "tags"):
            d = self.root / sub
            if not d.is_dir():
                continue
            for p in d.iterdir():
                try:
                    mtime = p.stat().st_mtime
                except OSError:
                    continue
                if p.name.endswith(".tmp"):
                    if now - mtime > 3600:
                        with contextlib.suppress(OSError):
                            p.unlink()
                            removed += 1
                    continue
                files.append((mtime, p))
        excess = len(files) - self.max_entries
        if excess > 0:
            for _mtime, p in sorted(files)[:excess]:
                with contextlib.suppress(OSError):
                    p.unlink()
                    removed += 1
        return removed
