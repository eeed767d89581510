# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The demo's report folder: README.md, latency histograms, example frames, tactile trace.

Example frames show the located objects, the chosen grasp and the occupancy grid drawn on the
colour image; the tactile trace shows opening and finger forces around the last grasp.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from edge_loop.kernels.camera import (
    D435_VGA,
    DEFAULT_CAMERA_ORIENTATION,
    DEFAULT_CAMERA_POSITION,
    Extrinsics,
    project,
    world_to_camera,
)


def _plt() -> Any:
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    return plt


def latency_histograms(path: Path, latencies: dict[str, list[float]], e2e_budget: float,
                       stage_budgets: dict[str, float]) -> None:
    """One histogram per stage, budget drawn as a line."""
    plt = _plt()
    stages = [s for s in latencies if latencies[s]]
    if not stages:
        return
    fig, axes = plt.subplots(1, len(stages), figsize=(4 * len(stages), 3), squeeze=False)
    for ax, stage in zip(axes[0], stages):
        values = np.asarray(latencies[stage])
        budget = e2e_budget if stage == 'pick_controller' else stage_budgets.get(stage)
        ax.hist(values, bins=40, color='tab:blue')
        if budget:
            ax.axvline(budget, color='tab:red', label=f'budget {budget:g} ms')
            ax.legend(fontsize=7)
        ax.set_title('end-to-end' if stage == 'pick_controller' else stage, fontsize=9)
        ax.set_xlabel('ms after the frame')
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def draw_example(rgb: np.ndarray, outputs: dict[str, Any],
                 extrinsics: Extrinsics | None = None) -> np.ndarray:
    """Colour frame with objects (circles), the grasp rectangle and an occupancy inset."""
    ext = extrinsics or Extrinsics.from_params(DEFAULT_CAMERA_POSITION,
                                               DEFAULT_CAMERA_ORIENTATION)
    intr = D435_VGA.scaled(rgb.shape[1], rgb.shape[0])
    img = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2BGR)

    def to_px(points: np.ndarray) -> np.ndarray:
        return np.round(project(world_to_camera(points, ext), intr)).astype(np.int32)

    objects = outputs.get('object_locator')
    if objects is not None:
        for pose in objects.poses:
            u, v = to_px(np.array([[pose.position.x, pose.position.y, pose.position.z]]))[0]
            cv2.circle(img, (int(u), int(v)), 8, (0, 255, 255), 2)
    grasp = outputs.get('grasp_planner')
    if grasp is not None and grasp.polygon.points:
        corners = np.array([[p.x, p.y, p.z] for p in grasp.polygon.points])
        px = to_px(corners)
        cv2.polylines(img, [px.reshape(-1, 1, 2)], True, (0, 255, 0), 2)
        cv2.line(img, tuple(int(x) for x in px[0]), tuple(int(x) for x in px[1]),
                 (0, 0, 255), 2)
    grid = outputs.get('occupancy_mapper')
    if grid is not None and grid.info.width:
        cells = np.asarray(grid.data, dtype=np.int8).reshape(grid.info.height, grid.info.width)
        inset = np.full(cells.shape + (3,), 128, np.uint8)
        inset[cells == 0] = (255, 255, 255)
        inset[cells > 50] = (0, 0, 200)
        inset = cv2.resize(inset[::-1], (cells.shape[1] * 2, cells.shape[0] * 2),
                           interpolation=cv2.INTER_NEAREST)
        h, w = inset.shape[:2]
        img[4:4 + h, img.shape[1] - 4 - w:img.shape[1] - 4] = inset
    return img


def tactile_plot(path: Path, tactile: list[tuple[float, float, float, float]],
                 states: list[tuple[float, str]]) -> None:
    """Opening and finger forces around the last grasp, with the grasp-state decisions."""
    if not tactile:
        return
    plt = _plt()
    data = np.asarray(tactile)
    # The last closing of the fingers: from 1.5 s before it to 4 s after.
    closing = np.nonzero(np.diff(data[:, 1]) < -1e-4)[0]
    t_close = data[closing[-1], 0] if len(closing) else data[-1, 0] - 4.0
    t_start = max(data[0, 0], t_close - 1.5)
    sel = data[(data[:, 0] >= t_start) & (data[:, 0] <= t_close + 4.0)]
    fig, ax = plt.subplots(2, 1, figsize=(8, 4), sharex=True)
    ax[0].plot(sel[:, 0] - t_start, sel[:, 1] * 1000, label='opening (mm)')
    ax[0].legend(fontsize=7)
    ax[1].plot(sel[:, 0] - t_start, sel[:, 2], label='left force (N)')
    ax[1].plot(sel[:, 0] - t_start, sel[:, 3], label='right force (N)')
    last = None
    for t, state in states:
        if t_start <= t <= t_close + 4.0 and state != last:
            ax[1].axvline(t - t_start, color='grey', lw=0.5)
            ax[1].text(t - t_start, ax[1].get_ylim()[1] * 0.9, state, fontsize=6, rotation=90)
            last = state
    ax[1].legend(fontsize=7)
    ax[1].set_xlabel('s (simulated)')
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def check_page_line(report_folder: Path, check_dir: Path = Path('reports/check')) -> str:
    """The report's line about the deployment checklist (``make check``, docs/check.md).

    Links the newest check page with its verdict, when and on which revision it ran, and
    whether it was calibrated (not the target); where there is none, says how to make it.
    """
    page = Path(check_dir) / 'check.md'
    if not page.is_file():
        return ('No deployment checklist yet: run `make check` on the target before deploying '
                f'(docs/check.md); it writes {page}.')
    text = page.read_text().splitlines()
    verdict = next((line.strip('*') for line in text if line.startswith(('**PASS', '**FAIL'))),
                   'no verdict (an unfinished page)')
    host = next((line for line in text if line.startswith('host ')), '')
    revision = next((line.split()[1] for line in text if line.startswith('edge_loop ')), '?')
    calibrated = any(line.startswith('**CALIBRATED') for line in text)
    link = os.path.relpath(page.resolve(), Path(report_folder).resolve())
    when = host.split(', ')[1] if host.count(', ') >= 2 else 'unknown time'
    return (f'[Last `make check` page]({link}): **{verdict.split(":")[0]}** '
            f'({verdict.split(": ", 1)[-1] if ":" in verdict else verdict}), {when}, edge_loop '
            f'{revision}' + (', calibrated on a machine that is not the target' if calibrated
                             else '') + '.')


def write_report(folder: Path, table: str, episodes: list[Any], obs: Any, e2e_budget: float,
                 stage_budgets: dict[str, float]) -> Path:
    """Write README.md and the PNGs; return the README path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    latency_histograms(folder / 'latency.png', obs.latencies_ms, e2e_budget, stage_budgets)
    lines = ['# edge_loop demo report', '', '```', table, '```', '',
             '![latency per stage](latency.png)', '']
    if episodes:
        lines += ['| # | lighting | seed | result | attempts | sim s | wall s |',
                  '|---|---|---|---|---|---|---|']
        lines += [f'| {e.index} | {e.lighting} | {e.seed} | '
                  f'{"success" if e.success else e.reason} | {e.attempts} | '
                  f'{e.sim_seconds:.1f} | {e.wall_seconds:.1f} |' for e in episodes]
        lines.append('')
    for lighting, (rgb, outputs) in sorted(obs.examples.items()):
        name = f'example_{lighting}.png'
        cv2.imwrite(str(folder / name), draw_example(rgb, outputs))
        lines.append(f'![{lighting}]({name})')
    if obs.tactile:
        tactile_plot(folder / 'tactile.png', obs.tactile, obs.grasp_states)
        lines += ['', '## Tactile trace of the last grasp', '', '![tactile](tactile.png)']
    lines += ['', '## Deployment checklist', '', check_page_line(folder)]
    path = folder / 'README.md'
    path.write_text('\n'.join(lines) + '\n')
    return path
