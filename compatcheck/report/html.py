"""``--format html``: one self-contained page (inline CSS, no script, no external URL or font) with the
compatibility matrix (GPU workloads x node pools; ``compatcheck.core.matrix``), each cell ok / warning / error /
n/a with the rules and messages on hover (``title``), a legend, and for a what-if run the difference: each row
marked newly broken, newly fixed or still failing, and the changes listed. Then the findings, as in the text
format. It evaluates nothing."""

from __future__ import annotations

from html import escape

from compatcheck.report.model import LintReport

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1b1f24;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px}
.sub{color:#57606a;margin:0 0 16px}
table{border-collapse:collapse}th,td{border:1px solid #d0d7de;padding:6px 10px;text-align:left;vertical-align:top}
th.pool{min-width:120px}th .d{display:block;font-weight:normal;color:#57606a;font-size:12px}
td.cell{text-align:center;font-weight:600;min-width:70px}
.ok{background:#dafbe1;color:#116329}.warning{background:#fff8c5;color:#7d4e00}
.error{background:#ffebe9;color:#a40e26}.na{background:#f6f8fa;color:#8c959f}
tr.newly-broken th{box-shadow:inset 6px 0 0 #cf222e}tr.newly-fixed th{box-shadow:inset 6px 0 0 #1a7f37}
tr.still-failing th{box-shadow:inset 6px 0 0 #9a6700}
.tag{display:inline-block;font-size:11px;font-weight:600;border-radius:10px;padding:1px 8px;margin-left:6px}
.tag.newly-broken{background:#cf222e;color:#fff}.tag.newly-fixed{background:#1a7f37;color:#fff}
.tag.still-failing{background:#9a6700;color:#fff}
.legend span{display:inline-block;padding:2px 10px;margin-right:8px;border-radius:4px}
ul{margin:4px 0;padding-left:20px}code{font-size:12px}
"""
_LABEL = {"ok": "ok", "warning": "warning", "error": "error", "n/a": "n/a"}
_CLASS = {"ok": "ok", "warning": "warning", "error": "error", "n/a": "na"}
_CHANGE = {"newly-broken": "newly broken", "newly-fixed": "newly fixed", "still-failing": "still failing"}


def _workload(key: tuple[str, str, str]) -> str:
    kind, namespace, name = key
    return f"{kind} {namespace + '/' if namespace else ''}{name}"


def render(report: LintReport) -> str:
    out: list[str] = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
                      "<title>compatcheck: compatibility matrix</title>", f"<style>{_CSS}</style></head><body>",
                      "<h1>CUDA compatibility matrix</h1>"]
    c = report.counts()
    out.append(f'<p class="sub">{c["error"]} errors, {c["warning"]} warnings, {c["info"]} info'
               f"{f'; {len(report.errors)} input errors' if report.errors else ''}"
               f"{f' &middot; compatcheck {escape(report.tool_version)}' if report.tool_version else ''}</p>")
    if report.what_if_changes:
        out.append('<h2>What-if</h2><ul id="changes">')
        out.extend(f"<li><code>{escape(t)}</code> ({n} node{'s' if n != 1 else ''})</li>"
                   for t, n in report.what_if_changes)
        out.append("</ul>")
    m = report.matrix
    if m is None:
        out.append("<p>No matrix: no cluster view was given (--nodes, or audit).</p>")
    elif not m.rows:
        out.append("<p>No GPU workload in the input.</p>")
    else:
        after = " (after the changes)" if report.what_if_changes else ""
        out.append(f"<h2>GPU workloads &times; node pools{after}</h2>")
        out.append('<table id="matrix"><thead><tr><th>workload</th>')
        for i, pool in enumerate(m.pools):
            out.append(f'<th class="pool" data-pool="{i}">{escape(pool.name)}'
                       f'<span class="d">{escape(pool.describe())}</span></th>')
        out.append("</tr></thead><tbody>")
        for row in m.rows:
            change = m.changes.get(row, "")
            tag = f'<span class="tag {change}">{_CHANGE[change]}</span>' if change else ""
            out.append(f'<tr class="{change}" data-workload="{escape(_workload(row))}">'
                       f"<th>{escape(_workload(row))}{tag}</th>")
            for i in range(len(m.pools)):
                cell = m.cells[(row, i)]
                hover = "\n".join(f"{rule} ({sev}): {msg}" for rule, sev, msg in cell.findings) or "no finding"
                out.append(f'<td class="cell {_CLASS[cell.status]}" data-status="{cell.status}" '
                           f'title="{escape(hover)}">{_LABEL[cell.status]}</td>')
            out.append("</tr>")
        out.append("</tbody></table>")
        out.append('<p class="legend"><span class="ok">ok: no finding</span>'
                   '<span class="warning">warning: runs, with a caveat</span>'
                   '<span class="error">error: fails on this pool</span>'
                   '<span class="na">n/a: cannot land on this pool</span></p>')
        if report.what_if_changes:
            out.append('<p class="legend"><span class="tag newly-broken">newly broken</span>'
                       '<span class="tag newly-fixed">newly fixed</span>'
                       '<span class="tag still-failing">still failing</span> (hover a cell for its rules)</p>')
    if report.findings:
        out.append('<h2>Findings</h2><ul id="findings">')
        for f in report.findings:
            where = f"{f.source.path}:{f.source.line}" if f.source and f.source.line else (
                f.source.path if f.source else "")
            out.append(f'<li class="{f.severity.value}"><b>{escape(f.rule_id)}</b> ({f.severity.value}) '
                       f"{escape(f.obj.describe())} <code>{escape(where)}</code>: {escape(f.message)}</li>")
        out.append("</ul>")
    if report.errors:
        out.append("<h2>Input errors</h2><ul>")
        out.extend(f"<li>{escape(d.path)}{f':{d.line}' if d.line else ''}: {escape(d.message)}</li>"
                   for d in report.errors)
        out.append("</ul>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
