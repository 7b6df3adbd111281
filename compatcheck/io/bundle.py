"""Data bundles: compatcheck's knowledge (the rules and the ``rules/data`` tables) as a versioned, digest-addressed
OCI artifact, built from a rules directory, pushed to and pulled from any OCI registry, verified, and installed
in the cache directory as the *active* bundle (``io.datastate`` reads which one is). docs/data-bundle.md
describes the formats and the workflow.

* ``build``: validates the directory as ``compatcheck rules validate`` does (an invalid bundle is never written),
  then writes an OCI image layout (``oci-layout``, ``index.json``, ``blobs/sha256/...``) holding one OCI 1.1
  artifact manifest (``artifactType`` ``application/vnd.compatcheck.data.v1``), a config blob (format version,
  the compatcheck versions it works with, the build time, and per table its name, asOf date, sources, row count
  and sha256) and one layer, a gzipped tar of ``rules/``, ``rules/data/`` and the schemas. Reproducible: entries
  sorted, owner 0, fixed modes and mtimes, gzip without a name or time, and a build time taken from
  ``SOURCE_DATE_EPOCH`` or the newest table's asOf date, so the same files give the same digest.
* ``fetch``: from a registry (``io.oci``) or a layout directory, the manifest, the config and the layer, each
  within a size cap and verified by sha256 and size, the manifest checked for the artifact type and the config for
  the format version and the compatcheck version range.
* ``install``: unpacks into a staging directory (regular files of the expected names only, bounded in number and
  size), checks every file against the config's list, validates the rules and tables, and only then renames the
  staging directory into place and replaces ``state.json`` (atomic), the previous bundle kept for ``rollback``.
  Anything that fails leaves the cache as it was.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from compatcheck import __version__
from compatcheck.core.model import Diagnostic
from compatcheck.io.datastate import Knowledge, data_root, read_state

ARTIFACT_TYPE = "application/vnd.compatcheck.data.v1"
CONFIG_TYPE = "application/vnd.compatcheck.data.config.v1+json"
LAYER_TYPE = "application/vnd.compatcheck.data.layer.v1.tar+gzip"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
FORMAT_VERSION = 1  # the bundle format this compatcheck reads and writes
LAYER_NAME = "compatcheck-data.tar.gz"

# Caps: a bundle is ~100 KB gzipped today; these leave room for years of rows and stop a hostile registry early.
MAX_MANIFEST_BYTES = 256 * 1024
MAX_CONFIG_BYTES = 1024 * 1024
MAX_LAYER_BYTES = 32 * 1024 * 1024
MAX_UNPACKED_BYTES = 64 * 1024 * 1024
MAX_FILES = 4096
KEEP_UNREFERENCED_SECONDS = 60.0  # an unreferenced bundle directory younger than this may be in use by a reader

_DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")
_MEMBER = re.compile(r"^(rules/[a-z0-9][a-z0-9._-]*\.ya?ml|rules/data/[a-z0-9][a-z0-9._-]*\.ya?ml|"
                     r"schemas/[a-z0-9][a-z0-9._-]*\.json)$")
BUNDLED_SCHEMAS = ("rule.schema.json", "table.schema.json")


class BundleError(Exception):
    """A bundle that cannot be built, read, verified or installed: one line, and located problems where the
    rules or tables are invalid."""

    def __init__(self, message: str, problems: list[Diagnostic] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.problems = problems or []


# ---------------------------------------------------------------------------------------------- versions


def _version_tuple(text: str) -> tuple[int, int, int]:
    m = re.match(r"^(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not m:
        raise ValueError(f"unreadable version {text!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def compat_range(version: str = __version__) -> dict[str, str]:
    """The compatcheck versions a bundle built by ``version`` works with: from its minor release up to the next
    minor before 1.0 (where check types and table schemas may change in a minor), the next major after."""
    major, minor, _ = _version_tuple(version)
    before = f"{major}.{minor + 1}.0" if major == 0 else f"{major + 1}.0.0"
    return {"builtWith": version, "minVersion": f"{major}.{minor}.0", "beforeVersion": before}


def compatible(config: dict[str, Any], version: str = __version__) -> str | None:
    """Why this compatcheck cannot use a bundle of ``config`` (None: it can)."""
    if config.get("formatVersion") != FORMAT_VERSION:
        return (f"bundle format {config.get('formatVersion')!r}; this compatcheck {version} reads format "
                f"{FORMAT_VERSION} (upgrade compatcheck, or pull a bundle built for it)")
    rng = config["compatcheck"]
    mine = _version_tuple(version)
    if not _version_tuple(rng["minVersion"]) <= mine < _version_tuple(rng["beforeVersion"]):
        return (f"the bundle works with compatcheck >= {rng['minVersion']}, < {rng['beforeVersion']}; this is "
                f"{version}")
    return None


# ---------------------------------------------------------------------------------------------- build


def bundle_files(rules_dir: Path) -> dict[str, bytes]:
    """What a bundle of ``rules_dir`` holds, by name in the layer: its rules, its tables and the schemas."""
    from importlib import resources

    files: dict[str, bytes] = {}
    for sub, prefix in ((rules_dir, "rules/"), (rules_dir / "data", "rules/data/")):
        if sub.is_dir():
            for p in sorted(sub.iterdir()):
                if p.suffix in (".yaml", ".yml") and p.is_file():
                    files[prefix + p.name] = p.read_bytes()
    for name in BUNDLED_SCHEMAS:
        files[f"schemas/{name}"] = resources.files("compatcheck.schemas").joinpath(name).read_bytes()
    return files


def layer_bytes(files: dict[str, bytes]) -> bytes:
    """A gzipped tar of ``files`` that depends on nothing but their names and bytes."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = sorted({name.rsplit("/", i)[0] for name in files for i in range(1, name.count("/") + 1)})
        for d in dirs:
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            _fixed(info)
            tar.addfile(info)
        for name in sorted(files):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(files[name]), 0o644
            _fixed(info)
            tar.addfile(info, io.BytesIO(files[name]))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, compresslevel=9, mtime=0) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def _fixed(info: tarfile.TarInfo) -> None:
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""


def table_info(files: dict[str, bytes]) -> list[dict[str, Any]]:
    """Per table file: its table name, file, asOf date, sources, row count and sha256."""
    from compatcheck.io.manifests import load_data

    out = []
    for name in sorted(files):
        if not name.startswith("rules/data/"):
            continue
        docs = load_data(files[name].decode("utf-8"))
        data = docs[0] if len(docs) == 1 and isinstance(docs[0], dict) else {}
        sources = data["sources"] if isinstance(data.get("sources"), dict) else {}
        out.append({"name": str(data.get("table", "")), "file": name.removeprefix("rules/"),
                    "asOf": str(data["asOf"]) if data.get("asOf") else None,
                    "sources": {str(k): str(v) for k, v in sorted(sources.items())},
                    "rows": len(data["rows"]) if isinstance(data.get("rows"), list) else 0,
                    "sha256": hashlib.sha256(files[name]).hexdigest()})
    return out


def _created(tables: list[dict[str, Any]]) -> str:
    """The build time: ``SOURCE_DATE_EPOCH`` (reproducible-builds.org), else the newest table's asOf date."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and epoch.strip().isdigit():
        when = dt.datetime.fromtimestamp(int(epoch), dt.timezone.utc)
    else:
        dates = sorted(t["asOf"] for t in tables if t["asOf"])
        when = dt.datetime.fromisoformat(dates[-1]).replace(tzinfo=dt.timezone.utc) if dates else \
            dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def validate_rules_dir(rules_dir: Path) -> int:
    """Validate ``rules_dir`` as the built-in rules (schemas, sources, the knowledge base); the number of rules.
    Raises BundleError with every located problem."""
    from compatcheck.io.loader import RuleLoadError, load_rules

    try:
        loaded = load_rules([], validate_builtin=True, base=rules_dir)
    except RuleLoadError as exc:
        raise BundleError(f"{rules_dir}: {len(exc.problems)} problem(s); nothing was written",
                          exc.problems) from None
    return len(loaded.ruleset)


@dataclass(frozen=True)
class Built:
    digest: str  # the manifest's
    config: dict[str, Any]
    manifest: bytes
    config_bytes: bytes
    layer: bytes


def build(rules_dir: Path) -> Built:
    """The bundle of ``rules_dir`` (validated first). Raises BundleError."""
    if not (rules_dir / "data").is_dir():
        raise BundleError(f"{rules_dir}: not a rules directory (no data/ tables)")
    rules = validate_rules_dir(rules_dir)
    files = bundle_files(rules_dir)
    layer = layer_bytes(files)
    tables = table_info(files)
    created = _created(tables)
    config = {
        "formatVersion": FORMAT_VERSION, "compatcheck": compat_range(), "created": created, "rules": rules,
        "tables": tables,
        "files": [{"name": n, "size": len(b), "sha256": hashlib.sha256(b).hexdigest()}
                  for n, b in sorted(files.items())],
    }
    config_bytes = _canonical(config)
    manifest = _canonical({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST, "artifactType": ARTIFACT_TYPE,
        "config": _descriptor(CONFIG_TYPE, config_bytes),
        "layers": [{**_descriptor(LAYER_TYPE, layer), "annotations": {"org.opencontainers.image.title": LAYER_NAME}}],
        "annotations": {"org.opencontainers.image.created": created,
                        "org.opencontainers.image.title": "compatcheck data",
                        "io.compatcheck.data.format": str(FORMAT_VERSION)},
    })
    return Built(_digest(manifest), config, manifest, config_bytes, layer)


def write_layout(built: Built, out: Path) -> None:
    """Write ``built`` as an OCI image layout in ``out`` (new or empty, or a layout written before)."""
    if out.exists() and any(out.iterdir()) and not (out / "oci-layout").is_file():
        raise BundleError(f"{out}: exists and is not an OCI layout; give a new or empty directory")
    blobs = out / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    for data in (built.layer, built.config_bytes, built.manifest):
        _write_atomic(blobs / _digest(data).removeprefix("sha256:"), data)
    _write_atomic(out / "oci-layout", _canonical({"imageLayoutVersion": "1.0.0"}))
    _write_atomic(out / "index.json", _canonical({
        "schemaVersion": 2, "mediaType": OCI_INDEX,
        "manifests": [{"mediaType": OCI_MANIFEST, "digest": built.digest, "size": len(built.manifest),
                       "artifactType": ARTIFACT_TYPE,
                       "annotations": {"org.opencontainers.image.created": built.config["created"]}}]}))


def _descriptor(media: str, data: bytes) -> dict[str, Any]:
    return {"mediaType": media, "digest": _digest(data), "size": len(data)}


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


# ---------------------------------------------------------------------------------------------- sources


class Source(Protocol):
    """Where a bundle is read from: a registry or a layout directory."""

    where: str

    def manifest(self) -> tuple[bytes, str]: ...

    def blob(self, digest: str, size: int, cap: int) -> bytes: ...


class LayoutSource:
    """An OCI image layout directory (``compatcheck data build -o DIR``, or one copied into an air-gapped site):
    the one compatcheck data manifest its ``index.json`` names."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)

    def manifest(self) -> tuple[bytes, str]:
        index = _json(_read_capped(self.path / "index.json", MAX_MANIFEST_BYTES, "index.json"), "index.json")
        entries = [m for m in index.get("manifests") or [] if isinstance(m, dict)
                   and (m.get("artifactType") == ARTIFACT_TYPE or m.get("mediaType") == OCI_MANIFEST)]
        if len(entries) != 1:
            raise BundleError(f"{self.path}/index.json: expected one compatcheck data manifest, found "
                              f"{len(entries)}")
        digest, size = entries[0].get("digest"), entries[0].get("size")
        if not isinstance(digest, str) or not isinstance(size, int):
            raise BundleError(f"{self.path}/index.json: the manifest descriptor has no digest or size")
        return self.blob(digest, size, MAX_MANIFEST_BYTES), digest

    def blob(self, digest: str, size: int, cap: int) -> bytes:
        if not _DIGEST.match(digest):
            raise BundleError(f"{self.path}: unsupported digest {digest!r}")
        if size > cap:
            raise BundleError(f"blob {digest} is {size} bytes, over the {cap} byte cap")
        data = _read_capped(self.path / "blobs" / "sha256" / digest.removeprefix("sha256:"), cap, digest)
        _check(data, digest, size)
        return data


class RegistrySource:
    """A registry reference (a tag or ``@sha256:`` digest), read with compatcheck's OCI client."""

    def __init__(self, client: Any, ref: Any, deadline: float) -> None:
        self.client, self.ref, self.deadline = client, ref, deadline
        from compatcheck.core.images import canonical

        self.where = canonical(ref)

    def manifest(self) -> tuple[bytes, str]:
        raw, digest = self.client.artifact_manifest(self.ref, self.deadline)
        if len(raw) > MAX_MANIFEST_BYTES:
            raise BundleError(f"manifest of {self.where} is {len(raw)} bytes, over the {MAX_MANIFEST_BYTES} byte cap")
        return raw, digest

    def blob(self, digest: str, size: int, cap: int) -> bytes:
        if size > cap:
            raise BundleError(f"blob {digest} is {size} bytes, over the {cap} byte cap")
        data: bytes = self.client.blob(self.ref, digest, size, cap, self.deadline)
        _check(data, digest, size)
        return data


def _read_capped(path: Path, cap: int, what: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            data = fh.read(cap + 1)
    except OSError as exc:
        raise BundleError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    if len(data) > cap:
        raise BundleError(f"{path}: {what} is over the {cap} byte cap")
    return data


def _check(data: bytes, digest: str, size: int) -> None:
    if len(data) != size:
        raise BundleError(f"blob {digest} is {len(data)} bytes, not the {size} its descriptor says")
    got = _digest(data)
    if got != digest:
        raise BundleError(f"blob {digest} does not match its bytes (sha256 {got}): tampered or corrupt")


def _json(data: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BundleError(f"{what} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise BundleError(f"{what} is not a JSON object")
    return value


# ---------------------------------------------------------------------------------------------- fetch & verify


@dataclass(frozen=True)
class Fetched:
    digest: str
    manifest: bytes
    config: dict[str, Any]
    config_bytes: bytes
    layer: bytes
    where: str


class Unchanged(Exception):
    """The source's manifest is the bundle already in use (``fetch``'s ``current``): nothing more to read."""


def fetch(source: Source, expect_digest: str | None = None, current: str | None = None) -> Fetched:
    """The manifest, config and layer of ``source``, each verified (sha256, size, caps), the manifest an
    artifact of ours, the config valid and of a format and version range this compatcheck reads. Raises
    Unchanged when the manifest's digest is ``current`` (one request: the webhook's refresh of an unchanged tag)."""
    raw, digest = source.manifest()
    if expect_digest is not None and digest != expect_digest:
        raise BundleError(f"{source.where}: manifest is {digest}, not the {expect_digest} asked for")
    if current is not None and digest == current:
        raise Unchanged(digest)
    manifest = _json(raw, f"manifest {digest}")
    if manifest.get("mediaType") != OCI_MANIFEST or manifest.get("schemaVersion") != 2:
        raise BundleError(f"{source.where}: {manifest.get('mediaType') or 'a manifest of no media type'} is not an "
                          "OCI image manifest")
    config_d, layers = manifest.get("config"), manifest.get("layers")
    if manifest.get("artifactType") != ARTIFACT_TYPE or not isinstance(config_d, dict) or \
            config_d.get("mediaType") != CONFIG_TYPE:
        raise BundleError(f"{source.where}: not a compatcheck data bundle (artifactType "
                          f"{manifest.get('artifactType')!r}, config {_get(config_d, 'mediaType')!r}; expected "
                          f"{ARTIFACT_TYPE})")
    if not isinstance(layers, list) or len(layers) != 1 or not isinstance(layers[0], dict) or \
            layers[0].get("mediaType") != LAYER_TYPE:
        raise BundleError(f"{source.where}: a data bundle has exactly one {LAYER_TYPE} layer")
    for d in (config_d, layers[0]):
        if not isinstance(d.get("digest"), str) or not _DIGEST.match(d["digest"]) or \
                not isinstance(d.get("size"), int) or d["size"] < 0:
            raise BundleError(f"{source.where}: a descriptor without a sha256 digest and a size")
    config_bytes = source.blob(config_d["digest"], config_d["size"], MAX_CONFIG_BYTES)
    config = _json(config_bytes, f"config {config_d['digest']}")
    from compatcheck.core.rules import schema_problems
    from compatcheck.io.loader import packaged_schema

    if config.get("formatVersion") != FORMAT_VERSION and isinstance(config.get("formatVersion"), int):
        raise BundleError(f"{source.where}: {compatible(config)}")
    problems = schema_problems(config, packaged_schema("bundle-config.schema.json"), f"config {config_d['digest']}")
    if problems:
        raise BundleError(f"{source.where}: invalid bundle config: {problems[0].pointer or '/'}: "
                          f"{problems[0].message}")
    why = compatible(config)
    if why:
        raise BundleError(f"{source.where}: {why}")
    layer = source.blob(layers[0]["digest"], layers[0]["size"], MAX_LAYER_BYTES)
    return Fetched(digest, raw, config, config_bytes, layer, source.where)


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None


def unpack(fetched: Fetched, dest: Path) -> None:
    """The layer's files into ``dest`` (which must not exist): regular files of the expected names only, within
    the caps, and exactly the files the config lists, with their sizes and sha256."""
    expected = {f["name"]: f for f in fetched.config["files"]}
    seen: set[str] = set()
    total = 0
    dest.mkdir(parents=True)
    try:
        tar = tarfile.open(fileobj=io.BytesIO(fetched.layer), mode="r:gz")  # noqa: SIM115 - closed by the with
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise BundleError(f"{fetched.where}: the layer is not a gzipped tar: {exc}") from None
    with tar:
        try:
            for count, member in enumerate(tar):
                if count >= MAX_FILES:
                    raise BundleError(f"{fetched.where}: the layer has more than {MAX_FILES} entries")
                if member.isdir() and member.name in ("rules", "rules/data", "schemas"):
                    continue
                if not member.isreg() or not _MEMBER.match(member.name):
                    raise BundleError(f"{fetched.where}: unexpected entry {member.name!r} in the layer (only rule, "
                                      "table and schema files)")
                if member.name in seen or member.name not in expected:
                    raise BundleError(f"{fetched.where}: {member.name} is not in the bundle's file list")
                total += member.size
                if total > MAX_UNPACKED_BYTES:
                    raise BundleError(f"{fetched.where}: the layer unpacks to more than {MAX_UNPACKED_BYTES} bytes")
                fh = tar.extractfile(member)
                data = fh.read(member.size + 1) if fh is not None else b""
                want = expected[member.name]
                if len(data) != want["size"] or hashlib.sha256(data).hexdigest() != want["sha256"]:
                    raise BundleError(f"{fetched.where}: {member.name} does not match its sha256 in the config")
                seen.add(member.name)
                target = dest / member.name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
            raise BundleError(f"{fetched.where}: cannot read the layer: {exc}") from None
    missing = sorted(set(expected) - seen)
    if missing:
        raise BundleError(f"{fetched.where}: the layer lacks {', '.join(missing[:3])}")


# ---------------------------------------------------------------------------------------------- install


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def install(fetched: Fetched, ref: str, root: Path | None = None, now: Callable[[], str] = _now) -> dict[str, Any]:
    """Unpack, validate and activate ``fetched`` (see the module docstring); its state record. Raises
    BundleError, and then nothing in ``root`` has changed but a staging directory that is removed."""
    root = root or data_root()
    read_state(root)  # a damaged state file is an error before any work
    bundles = root / "bundles"
    bundles.mkdir(parents=True, exist_ok=True)
    name = f"{fetched.digest.removeprefix('sha256:')[:32]}-{os.urandom(4).hex()}"
    staging = bundles / f".staging-{name}"
    try:
        unpack(fetched, staging)
        try:
            validate_rules_dir(staging / "rules")
        except BundleError as exc:  # said of the bundle's files, not of a staging directory that goes away
            first = exc.problems[0] if exc.problems else None
            where = first.path.replace(str(staging) + os.sep, "") if first else "?"
            more = f" (and {len(exc.problems) - 1} more)" if len(exc.problems) > 1 else ""
            raise BundleError(f"{fetched.where}: invalid rules or tables: {where}"
                              f"{f':{first.line}' if first and first.line else ''}: "
                              f"{first.message if first else exc.message}{more}") from None
        (staging / "config.json").write_bytes(fetched.config_bytes)
        (staging / "manifest.json").write_bytes(fetched.manifest)
        os.rename(staging, bundles / name)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    record = {"digest": fetched.digest, "ref": ref, "pulledAt": now(), "created": fetched.config["created"],
              "dir": name}
    with _locked(root):  # concurrent pulls (two lint jobs, two containers on one volume) each keep a consistent state
        state = read_state(root)
        previous = state.get("active")
        if isinstance(previous, dict) and previous.get("digest") == fetched.digest:
            previous = state.get("previous")  # the same bundle again: keep the one before it for rollback
        try:
            _write_state(root, {"active": record, "previous": previous})
        except OSError:
            shutil.rmtree(bundles / name, ignore_errors=True)
            raise
        prune(root)
    return record


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """An exclusive lock on ``root`` for a read-modify-write of the state (POSIX ``flock``; elsewhere none)."""
    root.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: renames stay atomic, a concurrent pull may drop a rollback
        yield
        return
    with open(root / ".lock", "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def rollback(root: Path | None = None) -> dict[str, Any]:
    """Make the previous bundle active again (and the active one previous); its record. Raises BundleError."""
    root = root or data_root()
    if not (root / "state.json").exists():
        raise BundleError("no previous data bundle to roll back to")
    with _locked(root):
        state = read_state(root)
        previous = state.get("previous")
        if not isinstance(previous, dict):
            raise BundleError("no previous data bundle to roll back to")
        if not (root / "bundles" / str(previous.get("dir")) / "rules").is_dir():
            raise BundleError(f"the previous data bundle {previous.get('digest')} is missing from the cache")
        _write_state(root, {"active": previous, "previous": state.get("active")})
    return previous


def _write_state(root: Path, state: dict[str, Any]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    _write_atomic(root / "state.json", (json.dumps(state, indent=2, sort_keys=True) + "\n").encode())


def prune(root: Path) -> None:
    """Remove bundle directories the state no longer names (and left-over staging directories), once old enough
    that no reader that read the state before can still be loading them."""
    state = read_state(root)
    keep = {e.get("dir") for e in (state.get("active"), state.get("previous")) if isinstance(e, dict)}
    bundles = root / "bundles"
    for d in bundles.iterdir() if bundles.is_dir() else ():
        with contextlib.suppress(OSError):
            if d.name not in keep and time.time() - d.stat().st_mtime > KEEP_UNREFERENCED_SECONDS:
                shutil.rmtree(d, ignore_errors=True)


# ---------------------------------------------------------------------------------------------- layouts as --data


_opened: dict[Path, Knowledge] = {}


def open_layout(path: Path) -> Knowledge:
    """``--data DIR`` naming a bundle's OCI layout: verified and unpacked into a temporary directory (removed at
    exit), then loaded like a rules directory, validated."""
    import atexit
    import tempfile

    key = path.resolve()
    if key in _opened:
        return _opened[key]
    from compatcheck.io.datastate import DataChoiceError

    try:
        fetched = fetch(LayoutSource(path))
        tmp = Path(tempfile.mkdtemp(prefix="compatcheck-data-"))
        atexit.register(shutil.rmtree, tmp, True)
        unpack(fetched, tmp / "bundle")
    except BundleError as exc:
        raise DataChoiceError(f"--data {path}: {exc.message}") from None
    found = Knowledge("dir", tmp / "bundle" / "rules", False,
                      {"digest": fetched.digest, "ref": str(path), "created": fetched.config["created"]})
    _opened[key] = found
    return found


# ---------------------------------------------------------------------------------------------- status


def _age(created: str | None, now: float) -> int | None:
    if not created:
        return None
    when = dt.datetime.fromisoformat(created.replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return max(0, int(now - when.timestamp()))


def status(knowledge: Knowledge, now: float | None = None) -> dict[str, Any]:
    """What ``compatcheck data status --format json`` prints: the knowledge in use and each of its tables."""
    from compatcheck.io.datastate import NoCacheDirectory

    now = time.time() if now is None else now
    try:
        state = read_state(data_root())
    except NoCacheDirectory:  # nowhere a bundle could have been pulled to: the built-in tables, no previous
        state = {}
    if knowledge.kind == "active" and knowledge.bundle is not None:
        config = _json((Path(knowledge.bundle["dir"]) / "config.json").read_bytes(), "the active bundle's config")
        tables, created = config["tables"], config["created"]
        bundle: dict[str, Any] | None = {k: knowledge.bundle.get(k) for k in ("ref", "digest", "pulledAt")}
        compat = config["compatcheck"]
    else:
        files = bundle_files(knowledge.path)
        tables = table_info(files)
        created = knowledge.bundle.get("created") if knowledge.bundle else None
        bundle = {k: knowledge.bundle.get(k) for k in ("ref", "digest")} if knowledge.bundle else None
        compat = None
    dates = sorted(t["asOf"] for t in tables if t["asOf"])
    if created is None and dates:
        created = f"{dates[-1]}T00:00:00Z"
    previous = state.get("previous")
    return {
        "source": {"builtin": "builtin", "active": "pulled", "dir": "directory"}[knowledge.kind],
        "path": str(knowledge.path),
        "bundle": bundle,
        "created": created,
        "ageSeconds": _age(created, now),
        "compatcheck": compat,
        "previous": {k: previous.get(k) for k in ("ref", "digest", "pulledAt")} if isinstance(previous, dict)
        else None,
        "tables": [{"name": t["name"], "asOf": t["asOf"], "rows": t["rows"], "sources": t["sources"],
                    "sha256": t["sha256"]} for t in tables],
    }


# ---------------------------------------------------------------------------------------------- push


def push(layout: Path, client: Any, ref: Any, deadline: float) -> str:
    """Push the bundle in ``layout`` (verified first: a tampered layout is never pushed) to ``ref``; its digest.
    Raises BundleError."""
    from compatcheck.io.oci import FetchError

    fetched = fetch(LayoutSource(layout))
    manifest = json.loads(fetched.manifest)
    try:
        for blob in (fetched.config_bytes, fetched.layer):
            client.push_blob(ref, blob, deadline)
        digest: str = client.push_manifest(ref, fetched.manifest, manifest["mediaType"], deadline)
    except FetchError as exc:
        raise BundleError(exc.message) from None
    return digest


# ---------------------------------------------------------------------------------------------- registries


def registry_client(settings: Any, registry: str, webhook: bool = False, plain_http: bool = False) -> Any:
    """compatcheck's OCI client for the bundle's registry (the reference names it, so it is allowed whatever
    ``registry.allow`` says), with the ``registry`` settings' CA bundle, credentials, timeout and host policy: token
    realms and redirects go to the allowed registries (any host for the command line, as lint's lookups) and
    ``registry.redirectHosts``."""
    from compatcheck.io.dockerauth import Credentials
    from compatcheck.io.oci import HostPolicy, Limits, RegistryClient

    allowed = (*settings.allowed(webhook), registry)
    try:
        return RegistryClient(Credentials(settings.auth_file), HostPolicy(allowed, settings.redirect_hosts),
                              Limits(settings.timeout, MAX_MANIFEST_BYTES, MAX_CONFIG_BYTES), settings.ca_file,
                              plain_http=(registry,) if plain_http else ())
    except ValueError as exc:
        raise BundleError(f"--plain-http: {exc}") from None
    except OSError as exc:  # an unreadable CA bundle
        raise BundleError(f"registry CA bundle {settings.ca_file}: {exc.strerror or exc}") from None


def parse_ref(text: str) -> Any:
    """An OCI reference (``registry/repository:tag`` or ``@sha256:...``); BundleError when it is none."""
    from compatcheck.core.images import parse_reference

    ref = parse_reference(text)
    if ref is None or "/" not in text:
        raise BundleError(f"{text!r} is not a registry reference (registry/repository:tag or @sha256:digest)")
    return ref


def pull(text: str, settings: Any, timeout: float, root: Path | None = None, *,
         webhook: bool = False, plain_http: bool = False, current: str | None = None) -> dict[str, Any]:
    """Pull ``text`` (a registry reference, or a bundle's OCI layout directory for air-gapped sites), verify,
    validate and activate it; its state record. Raises BundleError (then nothing changed), or Unchanged when
    the manifest is ``current``."""
    from compatcheck.io.oci import FetchError

    path = Path(text)
    if path.is_dir():
        return install(fetch(LayoutSource(path), current=current), str(path.resolve()), root)
    ref = parse_ref(text)
    client = registry_client(settings, ref.registry, webhook, plain_http)
    try:
        fetched = fetch(RegistrySource(client, ref, time.monotonic() + timeout), ref.digest, current)
    except FetchError as exc:
        raise BundleError(exc.message) from None
    finally:
        client.close()
    return install(fetched, text, root)
