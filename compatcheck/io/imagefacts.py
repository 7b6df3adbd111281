"""Image config facts for a lint run, before evaluation: from ``--image-facts`` files, the on-disk cache and the
registries (``compatcheck.io.oci``), in that order, within one time budget, in parallel.

``lookup`` takes the images to read (``compatcheck.core.checks.base.lookup_images`` of every object) and gives the
plain mapping the core evaluates with (``EvalContext.registry``: image as written -> ``RegistryFacts``) and one note
per failure: per registry when the registry as a whole could not be used (down, TLS, refused credentials, a
timeout), else per image. A lookup never fails a run.

Also reads and writes the facts files ``compatcheck images fetch -o`` writes (validated by
``schemas/image-facts.schema.json``), and accepts an image config as ``skopeo inspect --config`` prints it, given
as ``IMAGE=FILE``. Reads files and the network; evaluates nothing.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from compatcheck.core.config import RegistrySettings
from compatcheck.core.imageconfig import RegistryFacts
from compatcheck.core.images import ImageRef, canonical, parse_reference
from compatcheck.core.model import Diagnostic, Severity
from compatcheck.core.rules import schema_problems
from compatcheck.io.dockerauth import Credentials
from compatcheck.io.imagecache import ImageCache, facts_from_json, facts_to_json
from compatcheck.io.loader import packaged_schema
from compatcheck.io.manifests import read_file
from compatcheck.io.oci import Fetched, FetchError, HostPolicy, Limits, RegistryClient, config_env_labels

DEFAULT_PLATFORM = "linux/amd64"
FACTS_KIND = "ImageFacts"


@dataclass(frozen=True)
class Where:
    """Where an image is first named (for notes): a file and line, or nothing (the webhook, ``images``)."""

    path: str = ""
    line: int | None = None


@dataclass(frozen=True)
class FileEntry:
    """One image's facts from a facts file: the facts and the digest its reference resolved to (an index's)."""

    facts: RegistryFacts
    resolved: str | None


@dataclass
class LookupStats:
    from_files: int = 0
    cache_hits: int = 0
    fetched: int = 0
    failed: int = 0
    requests: int = 0
    seconds: float = 0.0


@dataclass
class LookupResult:
    facts: dict[str, RegistryFacts] = field(default_factory=dict)  # image as written -> its config's facts
    resolved: dict[str, str | None] = field(default_factory=dict)  # image -> the digest it named, when known
    notes: list[Diagnostic] = field(default_factory=list)
    stats: LookupStats = field(default_factory=LookupStats)


def choose_platform(setting: str, archs: Iterable[str]) -> str:
    """``registry.platform``, with ``auto`` the GPU nodes' one architecture (``kubernetes.io/arch``), else amd64."""
    if setting != "auto":
        return setting
    found = sorted(set(archs))
    return f"linux/{found[0]}" if len(found) == 1 else DEFAULT_PLATFORM


def make_client(settings: RegistrySettings, *, webhook: bool = False,
                credentials: Credentials | None = None) -> RegistryClient:
    creds = credentials or Credentials(settings.auth_file)
    return RegistryClient(creds, HostPolicy(settings.allowed(webhook), settings.redirect_hosts),
                          Limits(settings.timeout, settings.max_manifest_bytes, settings.max_config_bytes),
                          settings.ca_file)


def _note(where: Where, message: str) -> Diagnostic:
    return Diagnostic(where.path, f"registry lookup: {message}", line=where.line, severity=Severity.INFO,
                      kind="note")


def _match(ref: ImageRef, entries: list[FileEntry], platform: str) -> FileEntry | None:
    """The file entry for ``ref`` on ``platform``: the same name and tag, or the same name and a digest the entry
    has (its platform manifest's, or the index's its reference resolved to)."""
    name = canonical(ref)
    for e in entries:
        if e.facts.platform != platform:
            continue
        eref = parse_reference(e.facts.reference)
        if eref is None:
            continue
        if ref.digest:
            if eref.name == ref.name and ref.digest in (e.facts.digest, e.resolved, eref.digest):
                return e
        elif canonical(eref) == name:
            return e
    return None


def lookup(images: dict[str, Where], settings: RegistrySettings, *, platform: str,
           files: list[FileEntry] | None = None, cache: ImageCache | None = None,
           client: RegistryClient | None = None, network: bool = True) -> LookupResult:
    """Facts for ``images`` (image as written -> where it is first named). ``network`` False: files and the cache
    only (``--offline``). Every failure is a note; nothing here raises for a registry's sake."""
    started = time.monotonic()
    result = LookupResult()
    stats = result.stats
    todo: dict[str, tuple[ImageRef, Where]] = {}
    allowed = HostPolicy(settings.allowed(False), settings.redirect_hosts)
    for image, where in images.items():
        ref = parse_reference(image)
        if ref is None:
            continue
        entry = _match(ref, files or [], platform)
        if entry is not None:
            result.facts[image] = replace(entry.facts, reference=image)
            result.resolved[image] = entry.resolved
            stats.from_files += 1
            continue
        if cache is not None:
            resolved = ref.digest or cache.tag(canonical(ref), platform, any_age=not network)
            cached = cache.facts(resolved, platform, image) if resolved else None
            if cached is not None:
                result.facts[image] = cached
                result.resolved[image] = resolved
                stats.cache_hits += 1
                continue
        if not network:
            result.notes.append(_note(where, f"{image} ({platform}) is not in the cache or the --image-facts files, "
                                             "and --offline makes no request"))
            continue
        if not allowed.registry_allowed(ref.registry):
            result.notes.append(_note(where, f"{image}: registry {ref.registry} is not in registry.allow; not "
                                             "looked up"))
            continue
        todo[image] = (ref, where)
    if todo:
        _fetch_all(todo, settings, platform, cache, client or make_client(settings), result, started)
    if cache is not None:
        cache.prune()
        for problem in cache.problems:
            result.notes.append(_note(Where(), problem))
    stats.seconds = time.monotonic() - started
    return result


def _fetch_all(todo: dict[str, tuple[ImageRef, Where]], settings: RegistrySettings, platform: str,
               cache: ImageCache | None, client: RegistryClient, result: LookupResult, started: float) -> None:
    deadline = started + settings.budget
    # One fetch per canonical reference (several spellings of one image share it).
    by_ref: dict[str, list[str]] = {}
    for image, (ref, _w) in todo.items():
        by_ref.setdefault(canonical(ref), []).append(image)
    failures: dict[str, list[tuple[str, FetchError]]] = {}
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(settings.concurrency, len(by_ref))),
                                                 thread_name_prefix="registry")

    def one(ref: ImageRef) -> Fetched:
        try:
            return client.fetch(ref, platform, deadline)
        finally:
            client.close()

    futures = {pool.submit(one, todo[images[0]][0]): key for key, images in by_ref.items()}
    done, pending = concurrent.futures.wait(futures, timeout=max(0.0, deadline - time.monotonic()) + 0.5)
    pool.shutdown(wait=False, cancel_futures=True)  # a request past the budget is abandoned, not waited for
    for fut in done:
        key = futures[fut]
        images = by_ref[key]
        ref = todo[images[0]][0]
        try:
            fetched = fut.result()
        except FetchError as exc:
            failures.setdefault(exc.host if exc.host_level else "", []).append((images[0], exc))
            result.stats.failed += 1
            continue
        except Exception as exc:  # a bug must not fail the run: the image stays unknown, and the note says why
            failures.setdefault("", []).append((images[0], FetchError("internal", ref.registry,
                                                                      f"{type(exc).__name__}: {exc}")))
            result.stats.failed += 1
            continue
        result.stats.fetched += 1
        result.stats.requests += fetched.requests
        if cache is not None:
            cache.store(key, fetched.resolved, fetched.facts, tagged=ref.digest is None)
        for image in images:
            result.facts[image] = replace(fetched.facts, reference=image)
            result.resolved[image] = fetched.resolved
    for fut in pending:
        images = by_ref[futures[fut]]
        result.stats.failed += 1
        failures.setdefault(todo[images[0]][0].registry, []).append(
            (images[0], FetchError("timeout", todo[images[0]][0].registry,
                                   f"lookups did not finish within the {settings.budget:g} s budget "
                                   "(registry.budgetSeconds)")))
    for host, items in failures.items():
        if host:
            first = items[0][1]
            names = ", ".join(image for image, _e in items[:3]) + (f" and {len(items) - 3} more" if len(items) > 3
                                                                  else "")
            result.notes.append(_note(todo[items[0][0]][1], f"{first.message}; not read: {names}"))
        else:
            for image, failure in items:
                result.notes.append(_note(todo[image][1], f"{image}: {failure.message}"))


# ---------------------------------------------------------------------------------------------- facts files


class FactsFileError(Exception):
    def __init__(self, problems: list[Diagnostic]) -> None:
        super().__init__("invalid image facts file")
        self.problems = problems


def dump_facts(result: LookupResult) -> str:
    """A facts file (``compatcheck images fetch -o``): every image found, by its canonical reference, with its
    digests, platform, env and labels."""
    images = []
    for image, rf in result.facts.items():
        ref = parse_reference(image)
        images.append({**facts_to_json(replace(rf, reference=canonical(ref) if ref else image)),
                       "resolved": result.resolved.get(image)})
    return json.dumps({"apiVersion": "compatcheck/v1", "kind": FACTS_KIND, "images": images}, indent=2) + "\n"


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file renamed over it (never a half-written file)."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or Path("."))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def load_facts_file(spec: str) -> list[FileEntry]:
    """``FILE`` (a compatcheck facts file) or ``IMAGE=FILE`` (an image config, as ``skopeo inspect --config``
    prints it). Raises FactsFileError with located problems."""
    image, sep, path = spec.partition("=")
    if not sep or (Path(spec).is_file() and not Path(path).is_file()):  # a file name with "=" in it
        image, path = "", spec
    parsed = read_file(path)
    if parsed.errors:
        raise FactsFileError(list(parsed.errors))
    if len(parsed.documents) != 1 or not isinstance(parsed.documents[0].data, dict):
        raise FactsFileError([Diagnostic(path, "expected one JSON object: a compatcheck image facts file, or an "
                                               "image config (skopeo inspect --config) given as IMAGE=FILE")])
    doc = parsed.documents[0]
    data: dict[str, Any] = doc.data
    schema = packaged_schema("image-facts.schema.json")
    is_file = "apiVersion" in data or "images" in data
    if is_file and image:
        raise FactsFileError([Diagnostic(path, "a compatcheck facts file names its images: give it as FILE, "
                                               "not IMAGE=FILE")])
    if not is_file and not image:
        raise FactsFileError([Diagnostic(path, "an image config names no image: give it as IMAGE=FILE "
                                               "(e.g. registry.corp/ml/serving:1.0=config.json)")])
    sub = {"$ref": "#/$defs/factsFile" if is_file else "#/$defs/imageConfig", "$defs": schema["$defs"]}
    problems = schema_problems(data, sub, path, "input")
    if problems:
        raise FactsFileError([replace(p, line=doc.locate(p.pointer)[0]) for p in problems])
    source = f"file {path}"
    if not is_file:
        ref = parse_reference(image)
        if ref is None:
            raise FactsFileError([Diagnostic(path, f"{image!r} is not an image reference")])
        env, labels = config_env_labels(data)
        variant = data.get("variant")
        platform = f"{data.get('os', 'linux')}/{data.get('architecture', 'amd64')}" + (f"/{variant}" if variant else "")
        return [FileEntry(RegistryFacts(canonical(ref), ref.digest, platform, env, labels, None, source), ref.digest)]
    out = []
    for i, entry in enumerate(data["images"]):
        rf = facts_from_json(entry, source)
        if rf is None or parse_reference(rf.reference) is None:
            line = doc.locate(f"/images/{i}/reference")[0]
            raise FactsFileError([Diagnostic(path, f"/images/{i}/reference: not an image reference", line=line,
                                             pointer=f"/images/{i}/reference")])
        out.append(FileEntry(rf, entry.get("resolved")))
    return out
