# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The run's folder: report.json, report.md, report.html (plots inlined), overlays, progress.

Plots and overlays reuse the demo report's helpers (:mod:`edge_loop.report`: latency
histograms, objects and grasp drawn on the colour frame); the HTML page is the verification
report's Markdown-to-HTML (:func:`edge_loop.verify.report._html`).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TextIO

from edge_loop.fleet.cache import write_json_atomic

_COLUMNS = (('bags', 'bags', '{}'), ('frames', 'frames', '{}'),
            ('detection_rate', 'detected', '{:.1%}'), ('false', 'false', '{}'),
            ('median_error_mm', 'median err mm', '{:.2f}'),
            ('p95_error_mm', 'p95 err mm', '{:.2f}'), ('grasp_ok_rate', 'grasp ok', '{:.1%}'),
            ('occupancy_iou_mean', 'occupancy IoU', '{:.3f}'))


class Progress:
    """A one-line progress bar with an ETA on stderr.

    Redrawn on a terminal, else a line every ``every_s`` seconds; the ETA is from the replay
    rate of this run's bags (cached ones excluded).
    """

    def __init__(self, total: int, cached: int = 0, stream: TextIO | None = None,
                 every_s: float = 10.0) -> None:
        self.total, self.done, self.cached = total, cached, cached
        self.bad = 0
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, 'isatty', lambda: False)())
        self.every_s = every_s
        self.t0 = time.monotonic()
        self._last = 0.0

    def bag(self, result: dict[str, Any]) -> None:
        """One more bag finished (or listed bad)."""
        self.done += 1
        self.bad += result['status'] != 'ok'
        now = time.monotonic()
        if self.tty or now - self._last >= self.every_s or self.done == self.total:
            self._last = now
            self.stream.write(('\r' if self.tty else '') + self.line()
                              + ('' if self.tty else '\n'))
            self.stream.flush()

    def line(self) -> str:
        """The bar, counts, rate and ETA."""
        width = 30
        filled = int(width * self.done / self.total) if self.total else width
        elapsed = time.monotonic() - self.t0
        fresh = self.done - self.cached
        rate = fresh / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else float('nan')
        eta_text = f'{eta:5.0f} s' if eta == eta else '    ?'
        return (f'[{"#" * filled}{"." * (width - filled)}] {self.done}/{self.total} bags '
                f'({self.cached} cached, {self.bad} bad) {rate:5.1f} bags/s ETA {eta_text}')

    def close(self) -> None:
        """End the line on a terminal."""
        if self.tty:
            self.stream.write('\n')
            self.stream.flush()


def _cell(value: Any, fmt: str) -> str:
    return '-' if value is None else fmt.format(value)


def _table(rows: list[dict[str, Any]], key: str) -> list[str]:
    head = [key] + [title for _, title, _ in _COLUMNS]
    lines = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
    for row in rows:
        lines.append('| ' + ' | '.join([str(row[key])] + [_cell(row.get(k), f)
                                                         for k, _, f in _COLUMNS]) + ' |')
    return lines


def _overlay(path: str | None, frame: dict[str, Any], out: Path) -> bool:
    """The frame's colour image with detections, truth and grasp drawn (False: bag gone)."""
    import cv2
    import numpy as np

    from edge_loop.fleet.replay import bag_frame
    from edge_loop.report import draw_example

    got = bag_frame(path, frame['index']) if path else None
    if got is None:
        return False
    rgb, _ = got

    def point(p: list[float]) -> Any:
        return SimpleNamespace(position=SimpleNamespace(x=p[0], y=p[1], z=p[2]))

    outputs: dict[str, Any] = {'object_locator': SimpleNamespace(
        poses=[point(p) for p in frame['detected']])}
    if frame.get('grasp'):
        outputs['grasp_planner'] = SimpleNamespace(polygon=SimpleNamespace(
            points=[SimpleNamespace(x=c[0], y=c[1], z=c[2]) for c in frame['grasp']]))
    img = draw_example(np.ascontiguousarray(rgb), outputs)
    cv2.putText(img, f"frame {frame['index']}", (6, img.shape[0] - 8),
                cv2.FONT_HERSHEY_SIMPLEX, 0.5, (255, 255, 255), 1)
    return bool(cv2.imwrite(str(out), img))


def _latency_plot(report: dict[str, Any], out: Path) -> bool:
    from edge_loop.report import latency_histograms

    values = {stage: data['values'] for stage, data in report['latency'].items()}
    if not values:
        return False
    latency_histograms(out, values, 0.0, {})
    return out.is_file()


def write(folder: Path, report: dict[str, Any], results: dict[str, dict[str, Any]]
          ) -> dict[str, Path]:
    """report.json, report.md, report.html and the PNGs into ``folder``; their paths."""
    from edge_loop.verify.report import _html

    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(folder / 'report.json', report)
    s, run = report['summary'], report.get('run', {})
    md = ['# Fleet replay regression', '',
          f"{s['bags']} bags: {s['replayed']} replayed ({s['frames']} frames), {s['bad']} bad. "
          f"Mode {run.get('mode', '?')}, revision `{run.get('revision', '?')}`, "
          f"{run.get('fresh', '?')} replayed now, {run.get('cached', '?')} from the cache, "
          f"{run.get('workers', '?')} workers, {run.get('wall_s', 0):.1f} s.", '']
    comparison = report.get('comparison')
    if comparison is not None:
        md += ['## Against the baseline', '',
               f"Baseline `{run.get('baseline', '?')}`: {len(comparison['regressions'])} "
               f"regressions beyond the tolerances, {len(comparison['worse_bags'])} bag "
               f"metrics and {len(comparison['worse_frames'])} frames worse in any amount, "
               f"{len(comparison['missing_bags'])} baseline bags not in this run.", '']
        if comparison['regressions']:
            md += ['| regression |', '|---|'] + [f'| FAIL {r} |'
                                                 for r in comparison['regressions'][:50]]
            md.append('')
        if comparison['worse_frames']:
            md += ['| bag | frame | badness + | before | after |', '|---|---|---|---|---|']
            md += [f"| {w['bag']} | {w['index']} | {w['change']:.3f} | {w['before']} | "
                   f"{w['after']} |" for w in comparison['worse_frames'][:30]]
            md.append('')
    md += ['## Per scenario', ''] + _table(report['by_scenario'], 'scenario') + ['']
    md += ['## Per lighting', ''] + _table(report['by_lighting'], 'lighting') + ['']
    if report['latency']:
        md += ['## Kernel latency per frame (this run, this machine)', '',
               '| stage | p50 ms | p90 ms | p99 ms | max ms |', '|---|---|---|---|---|']
        md += [f"| {stage} | {d['p50']:.2f} | {d['p90']:.2f} | {d['p99']:.2f} | "
               f"{d['max']:.2f} |" for stage, d in report['latency'].items()]
        md.append('')
        if _latency_plot(report, folder / 'latency.png'):
            md += ['![latency](latency.png)', '']
    if report['bad_bags']:
        md += ['## Bad bags (not replayed)', '', '| bag | kind | reason |', '|---|---|---|']
        md += [f"| {b['bag']} | {b['kind']} | {b['reason']} |" for b in report['bad_bags']]
        md.append('')
    if report['worst_frames']:
        md += ['## Worst frames', '', '| bag | frame | badness | what |', '|---|---|---|---|']
        md += [f"| {w['bag']} | {w['index']} | {w['badness']:.3f} | {w['detail']} |"
               for w in report['worst_frames']]
        md.append('')
        overlays = folder / 'overlays'
        overlays.mkdir(exist_ok=True)
        for n, w in enumerate(report['worst_frames']):
            name = f'overlays/worst_{n:02d}.png'
            frame = report['bags'][w['bag']]['frames'][w['index']]
            if _overlay(results.get(w['bag'], {}).get('path'), frame, folder / name):
                md += [f"{w['bag']} frame {w['index']}: {w['detail']}", '', f'![{name}]({name})',
                       '']
    (folder / 'report.md').write_text('\n'.join(md) + '\n')
    page = _html(md, {}, folder).replace('<title>Verification report</title>',
                                         '<title>Fleet replay regression</title>')
    (folder / 'report.html').write_text(page)
    return {'json': folder / 'report.json', 'md': folder / 'report.md',
            'html': folder / 'report.html'}
