# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The verification report: one folder with ``index.md``, ``index.html`` (with plots) and JSON.

Layout of ``reports/verify/`` (``--output``)::

    index.md / index.html   summary table, host, per-op category tables, gate details
    summary.json            verdict per op and overall (machines read this)
    <op>.json               everything measured for one op (cases, timings, categories)
    plots/*.png             per-op speed-up pairs against the claim; error/tolerance per category
    repro/*.npz             one reproducer per failing case (edge-loop verify --repro FILE)
"""

from __future__ import annotations

import base64
import datetime
import html
import json
import math
import platform
from dataclasses import asdict
from pathlib import Path
from typing import Any

from edge_loop.verify import host


def _fmt(x: Any, digits: int = 3) -> str:
    if isinstance(x, float):
        if math.isnan(x):
            return '-'
        return f'{x:.{digits}g}'
    return str(x)


def console_line(r: Any, seconds: float) -> str:
    """One progress line per op (and its failing cases)."""
    lines = [f'{r.name:28s} {r.verdict.upper():5s} ({seconds:5.1f} s) {r.reason}']
    for c in r.cases:
        if not c.ok:
            lines.append(f'    [{c.category}] {c.name}: {c.detail}'
                         + (f'\n      reproducer: {c.repro}' if c.repro else ''))
    claim = r.gates.get('claim')
    if claim:
        lines.append(f'    speed: reference {claim["reference_ms_p50"]:.2f} ms, deployed '
                     f'{claim["deployed_ms_p50"]:.3f} ms (p50, this host); {claim["detail"]}')
    reg = r.gates.get('regression')
    if reg:
        lines.append(f'    regression: {reg["detail"]}')
    return '\n'.join(lines)


def _speed_cells(r: Any) -> tuple[str, str, str]:
    claim = r.gates.get('claim')
    if not claim:
        return '-', '-', '-'
    speed = (f'{claim["speedup"]:.3g}x [{claim["speedup_low"]:.3g}, '
             f'{claim["speedup_high"]:.3g}]')
    reg = r.gates.get('regression', {})
    return speed, (f'{claim["claim"]:g}x' if claim['claim'] else 'none'), reg.get('category',
                                                                                  '-')


def console_table(results: list[Any]) -> str:
    """The short table ``make verify`` prints."""
    rows = [('op', 'verdict', 'cases', 'speed-up [95%]', 'claim', 'regression', 'failed')]
    for r in results:
        eq = r.gates.get('equivalence', {})
        speed, claim, reg = _speed_cells(r)
        failed = ', '.join(f'{g}:{c}' for g, c in r.failures) or (
            r.reason if r.verdict == 'skip' else '-')
        rows.append((r.name, r.verdict.upper(), str(eq.get('cases', '-')), speed, claim, reg,
                     failed))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    out = []
    for row in rows:
        out.append('  '.join(cell.ljust(w) for cell, w in zip(row, widths)) + '  ' + row[-1])
    return '\n'.join(out)


def _category_md(r: Any) -> list[str]:
    reason = ' '.join(str(r.tolerance.get('reason', '')).split())
    lines = ['| input category | result | cases | max abs error (tol) | max rel error (tol) | '
             'note |', '|---|---|---|---|---|---|']
    for category, row in r.categories.items():
        status = row['status']
        if status in ('pass', 'FAIL', 'FAIL (known)'):
            unit = f' {row["unit"]}' if row.get('unit') else ''
            abs_cell = f'{_fmt(row["max_abs"])} ({_fmt(row["abs_tol"])}){unit}'
            rel_cell = f'{_fmt(row["max_rel"])} ({_fmt(row["rel_tol"])})'
            note = ('failed: ' + '; '.join(row['failed']) + (
                ' - reproducers: ' + ', '.join(f'`{p}`' for p in row['repro'])
                if row['repro'] else '')) if row['failed'] else ''
            if row.get('known'):
                note += ' - accepted: ' + '; '.join(row['known'])
            shown = {'FAIL': '**FAIL**', 'FAIL (known)': '**FAIL** (known)'}.get(status, status)
            lines.append(f'| {category} | {shown} | '
                         f'{row["cases"]} | {abs_cell} | {rel_cell} | {note} |')
        else:
            lines.append(f'| {category} | {status} | 0 | - | - | {row.get("note", "")} |')
    limits = ', '.join(f'{k}={v}' for k, v in r.tolerance.items() if k != 'reason')
    lines += ['', f'Tolerance ({limits}): {reason}', '']
    return lines


def op_markdown(r: Any) -> str:
    """Markdown section of one op."""
    lines = [f'## {r.name}: **{r.verdict.upper()}**', '', r.reason, '']
    if r.categories:
        lines += _category_md(r)
    eq = r.gates.get('equivalence')
    if eq:
        lines += [f'Equivalence: {eq["verdict"]}, {eq.get("cases", 0)} inputs, worst '
                  f'{_fmt(eq.get("worst_error"))} on "{eq.get("worst_case", "")}"' + (
                      f'; left out by --quick: {", ".join(eq["left_out_quick"])}'
                      if eq.get('left_out_quick') else ''), '',
                  '<details><summary>every input</summary>', '',
                  '| input | category | ok | worst | detail |', '|---|---|---|---|---|']
        lines += [f'| {c.name} | {c.category} | {"yes" if c.ok else "**NO**"} | '
                  f'{_fmt(c.worst_error)} | {c.detail.replace("|", "/")} |' for c in r.cases]
        lines += ['', '</details>', '']
    claim = r.gates.get('claim')
    if claim:
        lines += [f'Claim: {claim["verdict"]} ({claim["category"]}) on "{claim["case"]}", '
                  f'{claim["pairs"]} interleaved pairs: {claim["detail"]}. Times on this host '
                  f'(shown, never gated): reference p50 {claim["reference_ms_p50"]:.2f} ms '
                  f'(p90 {claim["reference_ms_p90"]:.2f}), deployed p50 '
                  f'{claim["deployed_ms_p50"]:.3f} ms (p90 {claim["deployed_ms_p90"]:.3f}).', '']
    reg = r.gates.get('regression')
    if reg:
        lines += [f'Regression (same host fingerprint): {reg["verdict"]} '
                  f'({reg["category"]}): {reg["detail"]}', '']
    if r.environment:
        lines += ['Environment: ' + ', '.join(f'{k} {v}' for k, v in r.environment.items()),
                  '']
    if 'error' in r.gates:
        lines += ['```', r.gates['error']['detail'], '```', '']
    return '\n'.join(lines)


def _plots(results: list[Any], plot_dir: Path) -> dict[str, list[Path]]:
    """Speed-up pairs against the claim, and error / tolerance per category (PNG per op)."""
    try:
        import matplotlib

        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return {}
    plot_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, list[Path]] = {}
    for r in results:
        paths = []
        claim = r.gates.get('claim')
        if claim and claim.get('speedups'):
            fig, ax = plt.subplots(figsize=(6, 2.6))
            s = claim['speedups']
            ax.plot(range(len(s)), s, '.', color='tab:blue', label='per-pair speed-up')
            ax.axhspan(claim['speedup_low'], claim['speedup_high'], color='tab:blue',
                       alpha=0.2, label='95% interval of the median')
            if claim['claim']:
                ax.axhline(claim['claim'], color='tab:red', label=f'claim {claim["claim"]:g}x')
            ax.set_yscale('log')
            ax.set_xlabel('pair')
            ax.set_ylabel('reference / deployed')
            ax.set_title(f'{r.name}: {claim["verdict"]}')
            ax.legend(fontsize=7, loc='best')
            fig.tight_layout()
            path = plot_dir / f'{r.name}.speed.png'
            fig.savefig(path, dpi=90)
            plt.close(fig)
            paths.append(path)
        cats = [(k, v) for k, v in r.categories.items() if 'max_abs' in v]
        ratios = []
        for k, v in cats:
            ratio = v['max_abs'] / v['abs_tol'] if v['abs_tol'] and not math.isnan(
                v['abs_tol']) and not math.isnan(v['max_abs']) else float('nan')
            ratios.append((k, ratio, v['status']))
        ratios = [x for x in ratios if not math.isnan(x[1])]
        if ratios:
            fig, ax = plt.subplots(figsize=(6, 0.3 * len(ratios) + 1.0))
            vals = [max(x[1], 1e-6) if math.isfinite(x[1]) else 1e3 for x in ratios]
            ax.barh([x[0] for x in ratios], vals,
                    color=['tab:red' if x[2].startswith('FAIL') else 'tab:green'
                           for x in ratios])
            ax.axvline(1.0, color='k', lw=1)
            ax.set_xscale('log')
            ax.set_xlabel('max abs error / tolerance (1 = the limit)')
            ax.set_title(r.name)
            fig.tight_layout()
            path = plot_dir / f'{r.name}.errors.png'
            fig.savefig(path, dpi=90)
            plt.close(fig)
            paths.append(path)
        out[r.name] = paths
    return out


def _summary_md(results: list[Any], fingerprint: dict[str, Any], fp_id: str, quick: bool,
                seconds: float) -> list[str]:
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')
    lines = ['# Verification report', '',
             f'{now} on {platform.node()}: {host.describe(fingerprint)} (fingerprint '
             f'`{fp_id}`); mode {"--quick" if quick else "full"}; {seconds:.0f} s.', '',
             '| op | verdict | inputs | speed-up [95% interval] | claim | regression | '
             'failed (gate: category) |', '|---|---|---|---|---|---|---|']
    for r in results:
        eq = r.gates.get('equivalence', {})
        speed, claim, reg = _speed_cells(r)
        failed = ', '.join(f'{g}: {c}' for g, c in r.failures) or (
            r.reason if r.verdict == 'skip' else '')
        lines.append(f'| {r.name} | {r.verdict} | {eq.get("cases", "-")} | {speed} | {claim} '
                     f'| {reg} | {failed} |')
    lines.append('')
    return lines


def write_report(results: list[Any], out_dir: Path, *, fingerprint: dict[str, Any],
                 fingerprint_id: str, quick: bool, seconds: float) -> Path:
    """Write the report folder; return the path of ``index.md``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for r in results:
        (out_dir / f'{r.name}.json').write_text(json.dumps(asdict(r), indent=2, default=str))
    plots = _plots(results, out_dir / 'plots')
    md = _summary_md(results, fingerprint, fingerprint_id, quick, seconds)
    for r in results:
        md.append(op_markdown(r))
        md += [f'![{p.name}](plots/{p.name})' for p in plots.get(r.name, [])] + ['']
    index = out_dir / 'index.md'
    index.write_text('\n'.join(md) + '\n')
    (out_dir / 'summary.md').write_text('\n'.join(md) + '\n')   # the old name
    (out_dir / 'summary.json').write_text(json.dumps({
        'ops': {r.name: {'verdict': r.verdict, 'reason': r.reason,
                         'failures': [list(f) for f in r.failures]} for r in results},
        'passed': all(r.verdict != 'fail' for r in results),
        'fingerprint': fingerprint, 'fingerprint_id': fingerprint_id, 'quick': quick},
        indent=2))
    (out_dir / 'index.html').write_text(_html(md, plots, out_dir))
    return index


def _html(md_lines: list[str], plots: dict[str, list[Path]], out_dir: Path) -> str:
    """A self-contained HTML page: the Markdown's tables as tables, plots inlined."""
    body: list[str] = []
    table: list[list[str]] = []

    def flush() -> None:
        if not table:
            return
        head, rows = table[0], table[2:]
        body.append('<table><tr>' + ''.join(f'<th>{c}</th>' for c in head) + '</tr>' + ''.join(
            '<tr>' + ''.join(f'<td class="{_cls(c)}">{c}</td>' for c in row) + '</tr>'
            for row in rows) + '</table>')
        table.clear()

    for block in md_lines:
        for line in block.split('\n'):
            if line.startswith('|'):
                table.append([_inline(c.strip()) for c in line.strip('|').split('|')])
                continue
            flush()
            if line.startswith('!['):
                name = line[line.index('(') + 1:-1]
                data = base64.b64encode((out_dir / name).read_bytes()).decode()
                body.append(f'<img src="data:image/png;base64,{data}" alt="{name}">')
            elif line.startswith('## '):
                body.append(f'<h2>{_inline(line[3:])}</h2>')
            elif line.startswith('# '):
                body.append(f'<h1>{_inline(line[2:])}</h1>')
            elif line.startswith('<details') or line.startswith('</details'):
                body.append(line)
            elif line.strip() and not line.startswith('```'):
                body.append(f'<p>{_inline(line)}</p>')
    flush()
    style = ('body{font-family:sans-serif;max-width:1200px;margin:auto}table{border-collapse:'
             'collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}'
             '.fail{background:#fdd}.pass{background:#dfd}.na{color:#888}')
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>Verification report'
            f'</title><style>{style}</style></head><body>{"".join(body)}</body></html>\n')


def _inline(text: str) -> str:
    out = html.escape(text)
    while out.count('**') >= 2:
        out = out.replace('**', '<b>', 1).replace('**', '</b>', 1)
    while out.count('`') >= 2:
        out = out.replace('`', '<code>', 1).replace('`', '</code>', 1)
    return out


def _cls(cell: str) -> str:
    low = cell.lower()
    if 'fail' in low:
        return 'fail'
    if low in ('pass', 'claim met', 'no regression', 'baseline recorded'):
        return 'pass'
    if low in ('n/a', 'not covered', '--full', 'skip'):
        return 'na'
    return ''
