"""The YAML/JSON reader and the lint pipeline on damaged input: truncated, spliced and byte-flipped versions of
real manifests. Never an exception: documents, errors or notes only. Deterministic seeds."""

from __future__ import annotations

import random
import re

import pytest

from compatcheck.io.lint import LintOptions, may_matter, run_lint
from compatcheck.io.loader import Loaded
from compatcheck.io.manifests import decode, parse_text
from tests.conftest import FIXTURES, SHARED

SOURCES = sorted(FIXTURES.glob("*/fail.*.yaml"))[:40] + sorted((SHARED / "corpus").glob("*/*.y*ml"))[:40]
NOISE = [b"\x00", b"\xff", b"{{", b"}}", b"- ", b": ", b"\t", b"&a ", b"*a", b"<<: ", b"---\n", b"'", b'"',
         b"!!binary ", b"%YAML 1.1\n", b"[", b"]", b"\xe2\x80\xa8", b"\r", b"? ", b"\n---#x\n", b"\n--- |\n",
         b"\n...\n", b"\n---\n\xef\xbb\xbf", b"]: ", b"~: ", b"\nkind: CustomResourceDefinition\n"]


def damage(raw: bytes, rng: random.Random) -> bytes:
    data = bytearray(raw)
    for _ in range(rng.randint(1, 6)):
        op = rng.random()
        pos = rng.randrange(len(data) + 1)
        if op < 0.3:
            data[pos:pos] = rng.choice(NOISE)
        elif op < 0.6 and data:
            del data[pos:pos + rng.randint(1, 40)]
        elif op < 0.8:
            data = data[:pos]
        else:
            other = rng.choice(SOURCES).read_bytes()
            at = rng.randrange(len(other) + 1)
            data[pos:pos] = other[at:at + rng.randint(1, 200)]
    return bytes(data)


@pytest.mark.parametrize("seed", range(8))
def test_damaged_files_never_raise(loaded: Loaded, seed: int) -> None:
    rng = random.Random(seed)
    texts: dict[str, str] = {}
    for i, src in enumerate(SOURCES):
        raw = damage(src.read_bytes(), rng)
        text, err = decode(f"f{i}.yaml", raw)
        if text is None:
            assert err is not None and "\n" not in err.message
            continue
        parsed = parse_text(f"f{i}.yaml", text)  # must not raise
        for e in parsed.errors + parsed.notes:
            assert "\n" not in e.message and (e.line is None or e.line >= 1)
        # As the lint reads it (documents skipped unparsed, kubectl's '---' cuts): errors and notes inside the file.
        lines = len(re.split("\r\n|[\r\n\x85\u2028\u2029]", text))  # the line breaks YAML counts (a lone CR too)
        for e in (read := parse_text(f"f{i}.yaml", text, wanted=may_matter)).errors + read.notes:
            assert "\n" not in e.message and (e.line is None or 1 <= e.line <= lines), (e, lines)
        texts[f"f{i}.yaml"] = text
    report = run_lint([], loaded, LintOptions(), texts=texts)  # the whole pipeline, same inputs
    assert not any("internal error" in e.message for e in report.errors)
