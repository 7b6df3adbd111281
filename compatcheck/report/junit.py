"""JUnit XML (GitLab, Jenkins): one testcase per object per failing rule, one passing testcase per clean object,
and an errored testcase per input error."""

from __future__ import annotations

from collections import defaultdict
from xml.etree import ElementTree as ET

from compatcheck.core.model import Finding
from compatcheck.report.model import LintReport


def render(report: LintReport) -> str:
    grouped: dict[tuple[str, str, str], list[Finding]] = defaultdict(list)
    for f in report.findings:
        grouped[(f.source.path if f.source else "-", f.obj.describe(), f.rule_id)].append(f)
    failing_objects = {(path, obj) for path, obj, _rule in grouped}
    suite = ET.Element("testsuite", name="compatcheck")
    tests = failures = errors = 0
    for (path, obj, rule), items in sorted(grouped.items()):
        case = ET.SubElement(suite, "testcase", classname=path, name=f"{rule}: {obj}")
        worst = max(items, key=lambda f: f.severity.rank).severity.value
        failure = ET.SubElement(case, "failure", type=worst, message=items[0].message)
        failure.text = "\n".join(f"{f.source.path if f.source else '-'}:{f.source.line if f.source else '-'}:"
                                 f"{f.source.column if f.source else '-'} {f.severity.value} {f.message}"
                                 + (f" [{f.container}]" if f.container else "") for f in items)
        tests += 1
        failures += 1
    seen = set()
    for path, ref in report.objects_seen:
        obj = ref.describe()
        if (path, obj) in failing_objects or (path, obj) in seen:
            continue
        seen.add((path, obj))
        ET.SubElement(suite, "testcase", classname=path, name=f"compatcheck: {obj}")
        tests += 1
    for e in report.errors:
        case = ET.SubElement(suite, "testcase", classname=e.path, name="input")
        err = ET.SubElement(case, "error", type="input-error", message=e.message)
        err.text = f"{e.path}:{e.line or '-'} {e.message}"
        tests += 1
        errors += 1
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    root = ET.Element("testsuites", name="compatcheck", tests=str(tests), failures=str(failures), errors=str(errors))
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
