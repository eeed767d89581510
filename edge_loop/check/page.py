# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The checklist page: a terminal table, Markdown and HTML with plots.

The header says where and how the page was measured; with ``--calibrate`` it says, before
anything else, that the latency budgets were scaled by a calibration of this machine and are
not the target's. Plots (matplotlib, imported only here) are PNG files next to the page.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge_loop.check.items import ItemResult, Status, failing, page_passes


@dataclass
class PageHeader:
    """Where, when and how the page was measured."""

    host: str
    when: str
    mode: str                     # 'quick' or 'full'
    source: str                   # the bag replayed, or 'live camera'
    revision: str
    calibration: str = ''         # non-empty: the budgets were scaled (says by what)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The header as lines of text (the calibration first when there is one)."""
        out = []
        if self.calibration:
            out.append(f'CALIBRATED, NOT THE TARGET: {self.calibration}')
        out += [f'host {self.host}, {self.when}, {self.mode} mode, source {self.source}',
                f'edge_loop {self.revision}', *self.notes]
        return out


def verdict(items: list[ItemResult]) -> str:
    """One line: PASS, or FAIL with the items that fail."""
    if page_passes(items):
        return 'PASS: every required item passed'
    return 'FAIL: ' + ', '.join(f'item {i.number} ({i.title}) {i.status.value}'
                                for i in failing(items))


def _cell(text: str, width: int) -> str:
    text = ' '.join(str(text).split())
    return text if len(text) <= width else text[:width - 1] + '~'


def text_table(items: list[ItemResult], header: PageHeader) -> str:
    """The page for a terminal: header, one row per item, the fix under a failing one."""
    lines = header.lines() + ['']
    lines.append(f'{"#":>2} {"item":<30} {"status":<8} {"measured":<62} limit')
    for item in sorted(items, key=lambda i: i.number):
        status = item.status.value + ('' if item.required else '*')
        lines.append(f'{item.number:>2} {_cell(item.title, 30):<30} {status:<8} '
                     f'{_cell(item.measured, 62):<62} {_cell(item.limit, 40)}')
        if item.status is not Status.PASS and item.fix:
            lines.append(f'{"":>3}-> {item.fix}')
    lines += ['', '* not required for this deployment (does not fail the page)',
              verdict(items)]
    return '\n'.join(lines)


def _md(text: Any) -> str:
    return str(text).replace('|', '\\|').replace('\n', ' ')


def markdown(items: list[ItemResult], header: PageHeader, plots: dict[int, str]) -> str:
    """The page as Markdown (plots linked by file name)."""
    out = ['# edge_loop deployment checklist', '']
    out += [f'**{line}**' if line.startswith('CALIBRATED') else line
            for line in header.lines()]
    out += ['', f'**{verdict(items)}**', '',
            '| # | item | status | measured | limit | what to do |',
            '|---|---|---|---|---|---|']
    for item in sorted(items, key=lambda i: i.number):
        status = item.status.value + ('' if item.required else ' (not required)')
        fix = item.fix if item.status is not Status.PASS else ''
        out.append(f'| {item.number} | {_md(item.title)} | {status} | {_md(item.measured)} | '
                   f'{_md(item.limit)} | {_md(fix)} |')
    for item in sorted(items, key=lambda i: i.number):
        out += ['', f'## {item.number}. {item.title}: {item.status.value}', '']
        if item.rows:
            out += ['| what | measured | limit | ok |', '|---|---|---|---|']
            out += [f'| {_md(a)} | {_md(b)} | {_md(c)} | {_md(d)} |' for a, b, c, d in item.rows]
        if item.number in plots:
            out += ['', f'![item {item.number}]({plots[item.number]})']
    return '\n'.join(out) + '\n'


def html_page(items: list[ItemResult], header: PageHeader, plots: dict[int, str]) -> str:
    """The page as one HTML file (plots as <img> next to it)."""
    e = html.escape
    colour = {Status.PASS: '#1a7f37', Status.FAIL: '#cf222e', Status.NOT_RUN: '#9a6700'}
    out = ['<!DOCTYPE html><html><head><meta charset="utf-8">',
           '<title>edge_loop deployment checklist</title><style>',
           'body{font-family:sans-serif;max-width:1100px;margin:2em auto}',
           'td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top}',
           'table{border-collapse:collapse}.cal{background:#fff3cd;padding:6px}',
           '</style></head><body><h1>edge_loop deployment checklist</h1>']
    for line in header.lines():
        cls = ' class="cal"' if line.startswith('CALIBRATED') else ''
        out.append(f'<p{cls}>{e(line)}</p>')
    ok = page_passes(items)
    out.append(f'<h2 style="color:{"#1a7f37" if ok else "#cf222e"}">{e(verdict(items))}</h2>')
    out.append('<table><tr><th>#</th><th>item</th><th>status</th><th>measured</th>'
               '<th>limit</th><th>what to do</th></tr>')
    for item in sorted(items, key=lambda i: i.number):
        status = item.status.value + ('' if item.required else ' (not required)')
        fix = item.fix if item.status is not Status.PASS else ''
        out.append(f'<tr><td>{item.number}</td><td><a href="#item{item.number}">'
                   f'{e(item.title)}</a></td><td style="color:{colour[item.status]}">'
                   f'<b>{e(status)}</b></td><td>{e(item.measured)}</td><td>{e(item.limit)}'
                   f'</td><td>{e(fix)}</td></tr>')
    out.append('</table>')
    for item in sorted(items, key=lambda i: i.number):
        out.append(f'<h3 id="item{item.number}">{item.number}. {e(item.title)}: '
                   f'{e(item.status.value)}</h3>')
        if item.rows:
            out.append('<table><tr><th>what</th><th>measured</th><th>limit</th><th>ok</th>'
                       '</tr>')
            out += [f'<tr><td>{e(a)}</td><td>{e(b)}</td><td>{e(c)}</td><td>{e(d)}</td></tr>'
                    for a, b, c, d in item.rows]
            out.append('</table>')
        if item.number in plots:
            out.append(f'<p><img src="{e(plots[item.number])}" style="max-width:100%"></p>')
    out.append('</body></html>')
    return '\n'.join(out) + '\n'


def _plt() -> Any:
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    return plt


def draw_plots(items: list[ItemResult], folder: Path) -> dict[int, str]:
    """PNG per item that has plot data: {item number: file name}."""
    plt = _plt()
    out = {}
    for item in items:
        kind = item.plot.get('kind')
        if kind == 'latency':
            fig = _latency_figure(plt, item.plot)
        elif kind == 'fault':
            fig = _fault_figure(plt, item.plot)
        elif kind == 'lifecycle':
            fig = _lifecycle_figure(plt, item.plot)
        else:
            continue
        name = f'item{item.number}_{kind}.png'
        fig.savefig(folder / name, dpi=90)
        plt.close(fig)
        out[item.number] = name
    return out


def _latency_figure(plt: Any, plot: dict) -> Any:
    series = {k: v for k, v in plot['stages'].items() if v}
    series['end-to-end'] = plot['end_to_end']
    fig, axes = plt.subplots(1, len(series), figsize=(3.2 * len(series), 2.8), squeeze=False)
    for ax, (name, values) in zip(axes[0], series.items()):
        if values:
            ax.hist(values, bins=30, color='#4c72b0')
        budget = plot['budgets'].get(name)
        if budget is not None:
            ax.axvline(budget, color='#cf222e', linestyle='--', label='budget')
        ax.set_title(f'{name} (n={len(values)})', fontsize=9)
        ax.set_xlabel('ms')
    fig.tight_layout()
    return fig


def _fault_figure(plt: Any, plot: dict) -> Any:
    fig, ax = plt.subplots(figsize=(8, 1.8))
    stops = [t / 1e3 for t in plot['stops_ms']]
    ax.eventplot(stops, colors='#cf222e', lineoffsets=0.5, linelengths=0.8)
    ax.axvline(0.0, color='k', label='stage slowed')
    ax.axvline(plot['cleared_ms'] / 1e3, color='#9a6700', label='fault cleared')
    ax.axvline(plot['recovered_ms'] / 1e3, color='#1a7f37', label='reactivated')
    ax.set_yticks([])
    ax.set_xlabel('s after the fault (red: safe stops)')
    ax.legend(fontsize=7, loc='upper right')
    fig.tight_layout()
    return fig


def _lifecycle_figure(plt: Any, plot: dict) -> Any:
    fig, ax = plt.subplots(figsize=(6, 2.4))
    steps = plot['steps']
    ax.bar(range(len(steps)), [s[1] for s in steps],
           color=['#1a7f37' if s[2] else '#cf222e' for s in steps])
    ax.set_xticks(range(len(steps)), [s[0] for s in steps], fontsize=8)
    ax.set_ylabel('s (whole graph)')
    fig.tight_layout()
    return fig


def write_page(items: list[ItemResult], header: PageHeader, folder: Path) -> dict[str, Path]:
    """Write check.md, check.html and the plots into ``folder``; their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    plots = draw_plots(items, folder)
    md = folder / 'check.md'
    page = folder / 'check.html'
    md.write_text(markdown(items, header, plots))
    page.write_text(html_page(items, header, plots))
    return {'markdown': md, 'html': page}
