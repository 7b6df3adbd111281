"""Rendering chart and kustomize input with the user's own tools (``helm template``, ``kubectl kustomize``),
and mapping rendered documents back to their template files through the ``# Source:`` comments.

A missing tool is a clear error, never a silent skip.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

from compatcheck.io.manifests import Document
from compatcheck.io.templatemap import Define, TemplateWalker, find_defines

_SOURCE = re.compile(r"^# Source: (?P<path>\S(?:[^\n]*\S)?)[ \t\r]*$", re.MULTILINE)  # no lazy scan: linear


class RenderError(Exception):
    pass


@dataclass
class Rendered:
    name: str  # pseudo path of the rendered stream
    text: str
    chart_dir: str | None = None
    # document index -> (template file path, first line of the document in the rendered text, rank of the document
    # among those rendered from the same template)
    sources: dict[int, tuple[str, int, int]] = field(default_factory=dict)
    template_lines: dict[str, list[str]] = field(default_factory=dict)
    _walkers: dict[int, TemplateWalker] = field(default_factory=dict)
    _defines: dict[str, Define] | None = None

    def locate(self, doc: Document, pointer: str, line: int) -> tuple[str, int, int | None]:
        """Where a field of a rendered document was written: its template file and the template line found by
        walking the template's structure along ``pointer`` (``compatcheck.io.templatemap``); the rendered
        stream and ``line`` when the document names no template (kustomize)."""
        src = self.sources.get(doc.index)
        if src is None:
            return self.name, line, None
        template, _first, ordinal = src
        walker = self._walkers.get(doc.index)
        if walker is None:
            walker = self._walkers[doc.index] = TemplateWalker.of(self._lines(template), doc.data, ordinal, template,
                                                                  self.defines())
        path, line_found, column = walker.where_column(pointer, doc.data)
        found = line_found or 1
        if column is not None:  # inside a flow collection: the key's or item's own column
            return path, found, column
        lines = self._lines(path)
        text = lines[found - 1] if 0 < found <= len(lines) else ""
        rest = text.lstrip(" ")
        while rest.startswith("- "):  # the item's content, as the linter's own columns point at it
            rest = rest[2:].lstrip(" ")
        return path, found, len(text) - len(rest) + 1

    def _lines(self, path: str) -> list[str]:
        lines = self.template_lines.get(path)
        if lines is None:
            try:
                with open(path, encoding="utf-8") as fh:
                    lines = fh.read().splitlines()
            except (OSError, UnicodeDecodeError):
                lines = []
            self.template_lines[path] = lines
        return lines

    def defines(self) -> dict[str, Define]:
        """The chart's named templates (its own and its subcharts' templates/), read once."""
        if self._defines is None:
            files: dict[str, list[str]] = {}
            if self.chart_dir is not None:
                for root, dirs, names in os.walk(self.chart_dir):
                    dirs.sort()
                    if os.path.basename(root) != "templates" and "templates" not in root.split(os.sep):
                        continue
                    for name in sorted(names):
                        if name.endswith((".tpl", ".yaml", ".yml", ".txt")):
                            path = os.path.relpath(os.path.join(root, name))
                            files[path] = self._lines(path)
            self._defines = find_defines(files)
        return self._defines


def _run(cmd: list[str], what: str) -> str:
    exe = shutil.which(cmd[0])
    if exe is None:
        raise RenderError(f"{what} needs `{cmd[0]}` on PATH, and it was not found (install it, or render the "
                          f"manifests yourself and pipe them to `compatcheck lint -`)")
    try:
        proc = subprocess.run([exe, *cmd[1:]], capture_output=True, text=True, timeout=300, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RenderError(f"{' '.join(cmd[:2])} failed: {exc}") from None
    if proc.returncode != 0:
        # The tool's own output, whole: helm's errors span lines (a values schema lists every violation).
        output = (proc.stderr.strip() or proc.stdout.strip() or "no output")
        raise RenderError(f"{' '.join(cmd[:2])} failed (exit {proc.returncode}):\n{output}")
    return proc.stdout


def helm_template(chart: str, values: list[str], sets: list[str], release: str, namespace: str | None) -> Rendered:
    if not os.path.isdir(chart):
        raise RenderError(f"{chart}: not a chart directory")
    cmd = ["helm", "template", release, chart]
    for v in values:
        cmd += ["-f", v]
    for s in sets:
        cmd += ["--set", s]
    if namespace:
        cmd += ["--namespace", namespace]
    text = _run(cmd, "--helm-chart")
    rendered = Rendered(f"{chart} (helm template)", text, chart)
    _index_sources(rendered, os.path.dirname(os.path.abspath(chart)))
    return rendered


def kustomize(directory: str) -> Rendered:
    if shutil.which("kubectl") is not None:
        text = _run(["kubectl", "kustomize", directory], "--kustomize")
    else:
        text = _run(["kustomize", "build", directory], "--kustomize (kubectl or kustomize)")
    return Rendered(f"{directory} (kustomize)", text)


def _index_sources(rendered: Rendered, charts_parent: str) -> None:
    """Map each rendered document to the template named by its ``# Source:`` comment."""
    index = -1
    started = False
    found: dict[int, tuple[str, int]] = {}
    kinds: dict[int, str] = {}
    for lineno, line in enumerate(rendered.text.splitlines(), 1):
        if line.startswith("---"):
            index += 1
            started = True
            continue
        if not started:
            index, started = 0, True
        m = _SOURCE.match(line)
        if m:
            # "# Source: <chart name>/templates/x.yaml": relative to the directory holding the chart.
            rel = m.group("path")
            found[index] = (os.path.relpath(os.path.join(charts_parent, _chart_relative(rel, rendered.chart_dir))),
                            lineno)
        elif line.startswith("kind:"):
            kinds.setdefault(index, line[5:].strip())
    # The rank of each document among those of the same kind rendered from the same template (helm sorts its
    # output by kind, so a template's documents are not in the template's order across kinds).
    seen: dict[tuple[str, str], int] = {}
    for index, (template, lineno) in found.items():
        key = (template, kinds.get(index, ""))
        rendered.sources[index] = (template, lineno, seen.get(key, 0))
        seen[key] = seen.get(key, 0) + 1


def _chart_relative(rel: str, chart_dir: str | None) -> str:
    if chart_dir is None:
        return rel
    name = os.path.basename(os.path.normpath(chart_dir))
    parts = rel.split("/", 1)
    return os.path.join(name, parts[1]) if len(parts) == 2 else rel


__all__ = ["RenderError", "Rendered", "helm_template", "kustomize"]
