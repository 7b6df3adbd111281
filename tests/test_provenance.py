"""No third-party file in the repository (issue #19): files taken from public repositories stay in ``../shared`` and
tests read them there. Facts may be cited (a rule's or data row's ``source`` URL), text and files are not copied: no
fixture, test, example, chart or doc says it was adapted or copied from elsewhere, and no file in the repository is
a copy of a file in ``../shared/corpus`` or ``../shared/corpus-reading``."""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, SHARED

# The folders whose files are the team's own manifests, tests and texts.
OWN = ("fixtures", "tests", "examples", "docs", "charts", "benchmarks")
# What a copied or adapted file says about itself. Written as patterns so that this file does not match itself.
SAYS_COPIED = re.compile(
    r"\b(adapted|copied|taken|reproduced|excerpted) from\b(?! (fixtures|tests|examples|docs|rules|charts)/)"
    r"|\bverbatim\b"
    r"|\bunchanged below\b"
    r"|\b(based on|after) [\w.-]+/[\w.-]+ [\w./-]+\.(ya?ml|json)\b"  # "based on owner/repo path/file.yaml"
    r"|\b(based on|after) [\w.-]+'s [\w./-]+\.(ya?ml|json)\b"  # "after NVIDIA's demo/specs/gpu-full.yaml"
    r"|^# ?[\w.-]+/[\w.-]+ [\w./-]+\.(ya?ml|json)\b",  # a header naming another repository's file as its origin
    re.IGNORECASE | re.MULTILINE)
# A licence named in a manifest's comment: the licence of someone else's text.
LICENCE_IN_MANIFEST = re.compile(r"^#.*\b(Apache-2\.0|BSD-[23]-Clause|MIT License|SPDX-License-Identifier)\b",
                                 re.MULTILINE)
# Files shorter than this (empty files, a lone '---') are too small to be anybody's work.
SMALLEST_COPY = 64


def repository_files() -> list[Path]:
    """The files of the checkout: tracked, and untracked ones git does not ignore."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the repository's files cannot be listed")
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, check=True, timeout=60).stdout.decode()
    return [ROOT / name for name in sorted(set(out.split("\0"))) if name and (ROOT / name).is_file()]


def text_of(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None


def test_no_file_says_it_was_copied_or_adapted() -> None:
    this = Path(__file__).resolve()
    said = []
    for path in repository_files():
        rel = path.relative_to(ROOT)
        if rel.parts[0] not in OWN or path.resolve() == this:
            continue
        text = text_of(path)
        if text is None:
            continue
        for pattern in (SAYS_COPIED,) + ((LICENCE_IN_MANIFEST,) if path.suffix in {".yaml", ".yml", ".json"}
                                         else ()):
            for m in pattern.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                said.append(f"{rel}:{line}: {m.group(0)!r}")
    assert said == [], "write the team's own manifest showing the same facts, or read the file in ../shared:\n" + \
        "\n".join(said)


def test_the_patterns_catch_what_a_copied_file_says() -> None:
    # The test above can fail: each of these headers is what a copied or adapted file has said.
    for header in ("# Adapted from the operator's samples", "# copied from upstream", "# Taken from the docs",
                   "# kept verbatim", "# (Apache-2.0), unchanged below this header",
                   "# NVIDIA/k8s-dra-driver-gpu demo/specs/quickstart/v1/gpu-test4.yaml at 2240711",
                   "# based on kubeflow/trainer manifests/base/runtimes/torch_distributed.yaml",
                   "# After NVIDIA's demo/specs/extended-resources/gpu-full.yaml: no claim"):
        assert SAYS_COPIED.search(header), header
    assert LICENCE_IN_MANIFEST.search("# NVIDIA/KAI-Scheduler docs/gpu-memory.yaml (Apache-2.0): a GPU")
    # ... and not what the team's own files say.
    for own in ("# A Pod asking for one GPU on a T4 node.", "source: https://docs.nvidia.com/deploy/cuda-compat/",
                "# tests/test_corpus.py lints the files of ../shared/corpus with it.",
                "never copied into this repository", "its first failing fixture, copied from fixtures/<rule-id>/"):
        assert not SAYS_COPIED.search(own) and not LICENCE_IN_MANIFEST.search(own), own


def digests(data: bytes) -> set[str]:
    """The file's sha256, and that of its text with line ends and trailing blanks normalised (a copy saved with
    other line ends is still a copy)."""
    out = {hashlib.sha256(data).hexdigest()}
    try:
        text = data.decode("utf-8").lstrip("\ufeff")
    except UnicodeDecodeError:
        return out
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    out.add("normalised:" + hashlib.sha256("\n".join(lines).strip("\n").encode()).hexdigest())
    return out


@pytest.mark.parametrize("folder", ["corpus", "corpus-reading"])
def test_no_file_is_a_copy_of_a_shared_third_party_file(folder: str) -> None:
    root = SHARED / folder
    if not root.is_dir():
        pytest.skip(f"../shared/{folder} is not beside the checkout")
    theirs: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.name != "SOURCES.md" and path.stat().st_size >= SMALLEST_COPY:
            for d in digests(path.read_bytes()):
                theirs[d] = path.relative_to(root).as_posix()
    assert len(theirs) > 30  # the folder was read
    copies = []
    for path in repository_files():
        if path.stat().st_size < SMALLEST_COPY:
            continue
        for d in digests(path.read_bytes()):
            if d in theirs:
                copies.append(f"{path.relative_to(ROOT)} is ../shared/{folder}/{theirs[d]}")
                break
    assert copies == [], "read the file in ../shared in place instead:\n" + "\n".join(copies)
