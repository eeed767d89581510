# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The GPU-placed stages as one step against the deployed CPU kernels, side by side.

Issue 31's target is per frame: the GPU-placed stages (occupancy update, the locator's
per-pixel masks, grasp-candidate scoring for the chosen target, segnet) take at least 5x less
time than the deployed CPU kernels of the same work on the same host, handoff included,
measured side by side in one run. This bench interleaves, frame after frame and in rotated
order:

- ``cpu``: the deployed kernels one after the other on one core, as the nodes run them
  (``OccupancyMapper.update``, the locator's per-pixel part as ``bench/placement.py``'s
  ``cpu_pixel_part``, ``plan_grasp`` for the target, ``prepare_inputs`` + segnet through ONNX
  Runtime);
- ``step graph``: :class:`~edge_loop.kernels.gpu.loop.GraphedLoopStep` (frame written into its
  pinned slot, one upload per input, four graph replays, the small results back, the grasps
  ranked on the host), host wall clock;
- ``step compile <mode> + graph``: the same with the occupancy and grasp stages compiled by
  ``torch.compile`` before their capture.

Every frame's depth changes a little (a few pixels, as a live camera's do) so nothing is
cached across frames. Reported: p50/p99 of each arm, the median of the per-frame ratios
cpu/gpu with its 2.5-97.5 % range, and whether the GPU step's results equal the CPU's (the
occupancy grid after every frame; the best grasp within the gates' tolerance).

    python bench/placement_step.py [--frames 300] [--compile default] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.placement import cpu_pixel_part, environment, sync  # noqa: E402
from edge_loop.kernels import occupancy as occ  # noqa: E402
from edge_loop.kernels.gpu.loop import GraphedLoopStep  # noqa: E402
from edge_loop.kernels.gpu.segnet import torch_segnet  # noqa: E402
from edge_loop.kernels.grasp_planner import plan_grasp  # noqa: E402
from edge_loop.kernels.object_locator import (  # noqa: E402
    height_scene,
    locate_objects,
    rank_targets,
)
from edge_loop.models import segnet  # noqa: E402
from edge_loop.verify.sweeps import scene  # noqa: E402


def same_best_grasp(ref: list, out: list, mm: float = 2.0, deg: float = 2.0) -> bool:
    """The best grasps agree within the gates' fp32 tolerance (2 mm, 2 degrees)."""
    if not ref or not out:
        return not ref and not out
    a, b = ref[0], out[0]
    dyaw = abs((a.yaw - b.yaw + np.pi / 2) % np.pi - np.pi / 2)
    return (float(np.max(np.abs(np.subtract(a.center, b.center)))) * 1e3 <= mm
            and np.degrees(dyaw) <= deg)


def run(device: torch.device, frames: int, compile_modes: tuple[str, ...]) -> dict:
    """The side-by-side run; returns rows and checks."""
    base = scene(640, 480, seed=7, n_boxes=5, depth_encoding='16UC1')
    intr, ext = base.intrinsics, base.extrinsics
    color, depth0 = base.color, base.depth.copy()
    objs = locate_objects(color, depth0, intr, ext)
    target = objs[rank_targets(objs)[0]]
    seg_dtype = torch.float16 if device.type == 'cuda' else torch.float32
    model = torch_segnet(device, seg_dtype)
    mapper = occ.OccupancyMapper()
    ort = segnet.load_segnet()
    steps = {'step graph': GraphedLoopStep(device, intr, ext, segnet_model=model)}
    errors = {}
    for mode in compile_modes:
        t = time.perf_counter()
        try:
            steps[f'step compile {mode} + graph'] = GraphedLoopStep(
                device, intr, ext, segnet_model=model, compile_mode=mode)
            print(f'compile {mode}: built in {time.perf_counter() - t:.1f} s', flush=True)
        except Exception as exc:  # noqa: BLE001 - a variant that fails to compile is reported
            errors[mode] = f'{type(exc).__name__}: {str(exc)[:300]}'
            print(f'compile {mode} failed: {errors[mode]}', flush=True)
    depth = depth0.copy()
    out: dict[str, object] = {}

    def cpu() -> object:
        grid = mapper.update(depth, intr, ext)
        cpu_pixel_part(color, depth, intr, ext)
        grasps = plan_grasp(depth, intr, ext, target=target)
        x = segnet.prepare_inputs(color, height_scene(depth, intr, ext).height)
        ort.logits(x)
        out['cpu'] = (grid.copy(), grasps)

    def gpu(name: str):
        step = steps[name]

        def call() -> None:
            step.load(color, depth, target.points)
            grasps = step()
            out[name] = (step.host_out['grid'].numpy().copy(), grasps)
        return call

    arms = {'cpu': cpu, **{name: gpu(name) for name in steps}}
    times: dict[str, list[float]] = {name: [] for name in arms}
    grid_equal = {name: 0 for name in steps}
    grasp_equal = {name: 0 for name in steps}
    rng = np.random.default_rng(0)
    order = list(arms)
    with torch.inference_mode():
        for i in range(frames + 3):
            # a few pixels change per frame (every arm sees the same frame)
            depth[...] = depth0
            k = int(rng.integers(1, 8))
            depth[0, :k] = 700 + k
            for name in order[i % len(order):] + order[:i % len(order)]:
                t = time.perf_counter()
                arms[name]()
                sync(device)
                if i >= 3:   # the first frames warm caches up
                    times[name].append((time.perf_counter() - t) * 1e3)
            for name in steps:
                grid_equal[name] += int(np.array_equal(out[name][0], out['cpu'][0]))
                grasp_equal[name] += int(same_best_grasp(out['cpu'][1], out[name][1]))
    rows = []
    for name, ms in times.items():
        row = {'arm': name, 'p50_ms': statistics.median(ms),
               'p99_ms': float(np.percentile(ms, 99)), 'frames': len(ms)}
        if name != 'cpu':
            ratios = [c / g for c, g in zip(times['cpu'], ms, strict=True)]
            q = np.percentile(ratios, [2.5, 97.5])
            row.update({'speedup_median': statistics.median(ratios),
                        'speedup_p2.5': float(q[0]), 'speedup_p97.5': float(q[1]),
                        'same_grid_frames': grid_equal[name],
                        'same_best_grasp_frames': grasp_equal[name],
                        'checked_frames': frames + 3,
                        'transfers_per_frame': steps[name].ledger.per_frame(frames + 3)})
        rows.append(row)
    return {'device': str(device), 'frames': frames, 'rows': rows, 'compile_errors': errors}


def table(result: dict, env: dict) -> str:
    """Markdown table of one run."""
    lines = [f"# GPU-placed stages as one step vs the deployed CPU kernels ({result['device']})",
             '', f"{env.get('gpu', 'no GPU')}, torch {env.get('torch')}, "
             f"{result['frames']} VGA frames interleaved (rotated order), host wall clock", '',
             '| arm | p50 ms | p99 ms | cpu/gpu per frame, median (2.5-97.5 %) | same grid '
             '| same best grasp |', '|---|---|---|---|---|---|']
    for r in result['rows']:
        if r['arm'] == 'cpu':
            lines.append(f"| cpu (deployed kernels, one core) | {r['p50_ms']:.3f} | "
                         f"{r['p99_ms']:.3f} | - | - | - |")
            continue
        lines.append(f"| {r['arm']} | {r['p50_ms']:.3f} | {r['p99_ms']:.3f} | "
                     f"**{r['speedup_median']:.2f}x** ({r['speedup_p2.5']:.2f}-"
                     f"{r['speedup_p97.5']:.2f}) | {r['same_grid_frames']}/{r['checked_frames']}"
                     f" | {r['same_best_grasp_frames']}/{r['checked_frames']} |")
    for r in result['rows']:
        if 'transfers_per_frame' in r:
            lines.append('')
            lines.append(f"{r['arm']}: transfers per frame " + ', '.join(
                f'{k} {v:g}' for k, v in r['transfers_per_frame'].items()))
            break
    for mode, err in result['compile_errors'].items():
        lines.append(f'\ncompile {mode} failed: {err}')
    return '\n'.join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run, print the table, write it (and JSON) to --out when given."""
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--frames', type=int, default=300)
    ap.add_argument('--compile', default='',
                    help='comma-separated torch.compile modes to add (default, '
                         'max-autotune-no-cudagraphs)')
    ap.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    ap.add_argument('--out', type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)   # the CPU arm is per core, as the nodes run
    result = run(torch.device(args.device), args.frames,
                 tuple(m for m in args.compile.split(',') if m))
    env = environment()
    text = table(result, env)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / 'placement_step.md').write_text(text + '\n')
        (args.out / 'placement_step.json').write_text(json.dumps(
            {'environment': env, **result}, indent=2, default=str))
    return 0


if __name__ == '__main__':
    sys.exit(main())
