"""The Helm template walker (``compatcheck.io.templatemap``) on templates cut, re-indented and spliced at random:
a template that is not even YAML-shaped never raises and never names a line outside the file (the mappings
themselves are tested on real helm output in tests/test_integrations.py)."""

from __future__ import annotations

import random
from typing import Any

from compatcheck.io.templatemap import TemplateWalker
from tests.conftest import ROOT

OBJ: dict[str, Any] = {"kind": "Deployment", "metadata": {"name": "x", "labels": {"a": "b"}}, "spec": {"template": {
    "spec": {"containers": [{"name": "webhook", "args": ["--port=1", "x", {"k": 1}], "env": [{"name": "A"}]},
                            {"name": "b"}], "volumes": [1, 2, 3]}}}}
POINTERS = ["", "/kind", "/metadata/labels/a", "/spec/template/spec/containers/0/args/2/k",
            "/spec/template/spec/containers/1/name", "/spec/template/spec/volumes/2",
            "/spec/template/spec/containers/0/env/0/name"]
SPLICES = ["---", "- ", "-", "  - - x", "{{- end }}", "a: |", "key:", '"q": 1', "- {{ . }}", "'a': b", ":", "- :",
           "{{- range .Values.x }}", "  {{ toYaml . | nindent 2 }}", "args: [a,", "  {k: [v, {{ .x }}", "]}",
           "  {{- include \"x\" (dict", "- [1, {a: b}]", "k: {a: 'q''", "r: {{ .x }"]


def test_mangled_templates_never_raise() -> None:
    rng = random.Random(15)
    texts = [p.read_text().splitlines() for p in sorted((ROOT / "charts").glob("*/templates/*.yaml")) +
             sorted((ROOT / "fixtures" / "_charts").glob("*/templates/*.yaml"))]
    assert len(texts) > 5
    for _ in range(3000):
        lines = list(rng.choice(texts))
        for _ in range(rng.randint(0, 6)):
            if not lines:
                break
            i, op = rng.randrange(len(lines)), rng.random()
            if op < 0.3:
                del lines[i]
            elif op < 0.6:
                lines[i] = " " * rng.randint(0, 12) + lines[i].lstrip()
            elif op < 0.8:
                lines.insert(i, rng.choice(SPLICES))
            else:
                lines[i] = lines[i][:rng.randint(0, len(lines[i]))]
        walker = TemplateWalker.of(lines, OBJ, rng.randint(0, 3))
        assert walker.lines is lines
        for pointer in POINTERS:
            _path, line, column = walker.where_column(pointer, OBJ)
            assert line is None or 1 <= line <= len(lines)
            assert column is None or (line is not None and 1 <= column <= len(lines[line - 1]))
