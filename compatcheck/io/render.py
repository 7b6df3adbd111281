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
from functools import cached_property

from compatcheck.io.manifests import Document

_SOURCE = re.compile(r"^# Source: (?P<path>.+?)\s*$", re.MULTILINE)


class RenderError(Exception):
    pass


@dataclass
class Rendered:
    name: str  # pseudo path of the rendered stream
    text: str
    chart_dir: str | None = None
    # document index -> (template file path, first line of the document in the rendered text)
    sources: dict[int, tuple[str, int]] = field(default_factory=dict)
    template_lines: dict[str, list[str]] = field(default_factory=dict)

    @cached_property
    def rendered_lines(self) -> list[str]:
        return self.text.splitlines()  # split once: locate runs for every finding

    def locate(self, doc: Document, line: int) -> tuple[str, int | None]:
        """Best-effort position in the template: the template file, and the line whose key matches."""
        src = self.sources.get(doc.index)
        if src is None:
            return self.name, line
        template, _ = src
        lines = self.template_lines.get(template)
        if lines is None:
            try:
                with open(template, encoding="utf-8") as fh:
                    lines = fh.read().splitlines()
            except OSError:
                lines = []
            self.template_lines[template] = lines
        rendered = self.rendered_lines
        target = rendered[line - 1].strip() if 0 < line <= len(rendered) else ""
        # The template line whose literal text (up to its first {{ action) is the longest prefix of the
        # rendered line: "- --dtype={{ .Values.dtype }}" renders as "- --dtype=bfloat16".
        best, best_len = None, 0
        for i, tl in enumerate(lines):
            literal = tl.strip().split("{{", 1)[0]
            if literal and target.startswith(literal) and len(literal) > best_len and (
                    "{{" in tl or tl.strip() == target):
                best, best_len = i + 1, len(literal)
        return template, best if best is not None else 1


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
        first = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[0]
        raise RenderError(f"{' '.join(cmd[:2])} failed (exit {proc.returncode}): {first}")
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
    current: str | None = None
    started = False
    for lineno, line in enumerate(rendered.text.splitlines(), 1):
        if line.startswith("---"):
            index += 1
            started = True
            current = None
            continue
        if not started:
            index, started = 0, True
        m = _SOURCE.match(line)
        if m:
            # "# Source: <chart name>/templates/x.yaml": relative to the directory holding the chart.
            rel = m.group("path")
            current = os.path.relpath(os.path.join(charts_parent, _chart_relative(rel, rendered.chart_dir)))
            rendered.sources[index] = (current, lineno)


def _chart_relative(rel: str, chart_dir: str | None) -> str:
    if chart_dir is None:
        return rel
    name = os.path.basename(os.path.normpath(chart_dir))
    parts = rel.split("/", 1)
    return os.path.join(name, parts[1]) if len(parts) == 2 else rel


__all__ = ["RenderError", "Rendered", "helm_template", "kustomize"]
