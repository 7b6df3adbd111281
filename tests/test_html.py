"""``--format html``: the self-contained compatibility matrix (GPU workloads x node pools), its cells exactly, the
what-if difference highlighted; rendered in a real headless Chromium (Debian's ``chromium``): the DOM it builds
and a screenshot whose pixels show the cell colours. The browser tests skip, saying so, where it is absent."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from compatcheck.cli.entry import main
from tests.test_whatif import NODES, WORKLOADS

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# .ci/run installs Debian's chromium and sets COMPATCHECK_BROWSER_REQUIRED: there a missing browser fails, not skips.
needs_chromium = pytest.mark.skipif(CHROMIUM is None and not os.environ.get("COMPATCHECK_BROWSER_REQUIRED"),
                                    reason="no chromium (apt-get install -y chromium)")


class Cells(HTMLParser):
    """The matrix as (workload, pool index) -> status, the pools' names and each row's what-if class."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[tuple[str, int], str] = {}
        self.rows: dict[str, str] = {}
        self.pools: list[str] = []
        self._row: str | None = None
        self._col = 0
        self._in_pool = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "tr" and a.get("data-workload"):
            self._row, self._col = a["data-workload"], 0
            self.rows[self._row or ""] = a.get("class") or ""
        elif tag == "td" and self._row and a.get("data-status"):
            self.cells[(self._row, self._col)] = a["data-status"] or ""
            self._col += 1
        elif tag == "th" and a.get("data-pool") is not None:
            self._in_pool = True
            self.pools.append("")
        elif tag == "span":
            self._in_pool = False

    def handle_data(self, data: str) -> None:
        if self._in_pool:
            self.pools[-1] += data.strip()


def _lint_html(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["lint", "--nodes", NODES, WORKLOADS, "--format", "html", *args])
    return code, capsys.readouterr().out


EXPECTED = {  # pools sorted by name: a100, t4
    ("Deployment ml/big-cu124", 0): "ok", ("Deployment ml/big-cu124", 1): "n/a",
    ("Deployment ml/serve-cu122", 0): "n/a", ("Deployment ml/serve-cu122", 1): "warning",
    ("Job ml/train-cu128", 0): "n/a", ("Job ml/train-cu128", 1): "error",
    ("Pod research/legacy-cu117", 0): "n/a", ("Pod research/legacy-cu117", 1): "ok"}


def test_the_matrix_cells(capsys: pytest.CaptureFixture[str]) -> None:
    code, page = _lint_html(capsys)
    assert code == 1
    parsed = Cells()
    parsed.feed(page)
    assert parsed.pools == ["a100", "t4"]
    assert parsed.cells == EXPECTED
    assert 'title="cuda-driver-too-old (error): image CUDA 12.8' in page  # the rule and message on hover


def test_the_page_is_self_contained(capsys: pytest.CaptureFixture[str]) -> None:
    _code, page = _lint_html(capsys)
    for outside in ("http://", "https://", "<script", "<link", "src=", "@import", "url(", "@font-face"):
        assert outside not in page, outside


def test_a_what_if_page_marks_the_difference(capsys: pytest.CaptureFixture[str]) -> None:
    code, page = _lint_html(capsys, "--what-if", "pool=t4:driver=580.65.06")
    assert code == 0
    parsed = Cells()
    parsed.feed(page)
    assert parsed.rows == {"Deployment ml/big-cu124": "", "Deployment ml/serve-cu122": "",
                           "Job ml/train-cu128": "newly-fixed", "Pod research/legacy-cu117": ""}
    assert parsed.cells[("Job ml/train-cu128", 1)] == "ok"
    assert '<li><code>pool=t4:driver=580.65.06</code> (2 nodes)</li>' in page


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120)


def _pixels(png: bytes) -> set[tuple[int, int, int]]:
    """The distinct colours of an 8-bit RGB or RGBA PNG (what Chromium writes), with the PNG filters undone."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(png):
        length, ctype = struct.unpack(">I4s", png[pos:pos + 8])
        data = png[pos + 8:pos + 8 + length]
        if ctype == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", data[:10])
            assert depth == 8 and color in (2, 6)
            channels = 3 if color == 2 else 4
        elif ctype == b"IDAT":
            idat += data
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    prev = bytearray(stride)
    colours: set[tuple[int, int, int]] = set()
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = prev[i], prev[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        colours.update(tuple(line[x:x + 3]) for x in range(0, stride, channels))  # type: ignore[misc]
        prev = line
    return colours


@needs_chromium
def test_chromium_renders_the_matrix(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    _code, page = _lint_html(capsys, "--what-if", "pool=t4:product=NVIDIA-H100-80GB-HBM3")
    html = tmp_path / "matrix.html"
    html.write_text(page)
    dom = _chromium(tmp_path, "--dump-dom", html.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    parsed = Cells()
    parsed.feed(dom.stdout)  # what the browser built from the page
    assert parsed.pools == ["a100", "t4"]
    assert parsed.cells[("Pod research/legacy-cu117", 1)] == "error"
    assert parsed.cells[("Job ml/train-cu128", 1)] == "error"
    assert parsed.rows["Pod research/legacy-cu117"] == "newly-broken"
    assert parsed.rows["Job ml/train-cu128"] == "still-failing"
    shot = tmp_path / "matrix.png"
    run = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,900", "--hide-scrollbars", html.as_uri())
    assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    colours = _pixels(shot.read_bytes())
    for name, rgb in (("error cell", (0xFF, 0xEB, 0xE9)), ("ok cell", (0xDA, 0xFB, 0xE1)),
                      ("n/a cell", (0xF6, 0xF8, 0xFA)), ("newly broken mark", (0xCF, 0x22, 0x2E))):
        assert rgb in colours, f"no {name} colour in the screenshot"


def test_without_a_cluster_view_the_page_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["lint", WORKLOADS, "--format", "html"])
    page = capsys.readouterr().out
    assert code == 0
    assert "<p>No matrix: no cluster view was given (--nodes, or audit).</p>" in page and 'id="matrix"' not in page
