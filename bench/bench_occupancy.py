# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Occupancy kernel: reference vs deployed latency per 640x480 frame, IoU on held-out scenes.

Usage: python bench/bench_occupancy.py [--scenes 20] [--frames 5] [--repeat 200]

Latency runs pinned to one CPU core where the OS allows it (``os.sched_setaffinity``). IoU is
measured against ``SimWorld.gt_occupancy`` (geometry above 0.015 m at each cell centre) on
held-out scenes (objects 800-999) under every lighting condition in turn, fusing ``--frames``
frames per scene.
"""

from __future__ import annotations

import argparse
import contextlib
import os

import numpy as np
from measure import call_times_ms

from edge_loop.kernels import occupancy as occ
from edge_loop.verify import ops_occupancy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--scenes', type=int, default=20)
    parser.add_argument('--frames', type=int, default=5)
    parser.add_argument('--repeat', type=int, default=200)
    parser.add_argument('--reference-repeat', type=int, default=3)
    args = parser.parse_args()
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    case = ops_occupancy.perf_case()
    ref = call_times_ms(occ.integrate_reference, case.args, args.reference_repeat)
    dep = call_times_ms(occ.integrate, case.args, args.repeat)
    print('## occupancy.integrate, one 640x480 uint16 frame, one core\n')
    print('| implementation | p50 ms | p99 ms | runs |')
    print('|---|---|---|---|')
    print(f'| reference (per-pixel loop) | {np.median(ref):.1f} | {np.percentile(ref, 99):.1f} '
          f'| {len(ref)} |')
    print(f'| deployed (numpy, cached rays) | {np.median(dep):.2f} | '
          f'{np.percentile(dep, 99):.2f} | {len(dep)} |')
    print(f'\nspeed-up (p50): {np.median(ref) / np.median(dep):.0f}x; target: deployed p50 '
          '<= 3 ms\n')
    try:
        from edge_loop.sim.lighting import CONDITION_NAMES
        from edge_loop.sim.world import SimWorld
    except ImportError as exc:  # pragma: no cover - the simulator is part of the package
        print(f'simulator not available ({exc}); IoU skipped')
        return
    rows = []
    for i in range(args.scenes):
        seed = 900 + i
        lighting = CONDITION_NAMES[i % len(CONDITION_NAMES)]
        with SimWorld(seed, split='heldout', lighting=lighting) as world:
            mapper = occ.OccupancyMapper()
            truth = np.where(world.gt_occupancy(), occ.OCC_OCCUPIED, 0).astype(np.int8)
            ious = []
            for _ in range(args.frames):
                frame = world.render()
                grid = mapper.update(frame.depth_mm, frame.intrinsics, world.extrinsics)
                ious.append(occ.occupancy_iou(grid, truth))
            fp = int(np.count_nonzero((grid == 100) & (truth == 0)))
            fn = int(np.count_nonzero((grid != 100) & (truth == 100)))
            rows.append((seed, lighting, len(world.objects), ious[0], ious[-1], fp, fn,
                         int(np.count_nonzero(grid == occ.OCC_UNKNOWN))))
    print(f'## IoU vs SimWorld.gt_occupancy, held-out scenes, {args.frames} fused frames\n')
    print('| seed | lighting | objects | IoU 1st frame | IoU fused | false occ. | missed | '
          'unknown |')
    print('|---|---|---|---|---|---|---|---|')
    for r in rows:
        print(f'| {r[0]} | {r[1]} | {r[2]} | {r[3]:.3f} | {r[4]:.3f} | {r[5]} | {r[6]} | '
              f'{r[7]} |')
    fused = np.array([r[4] for r in rows])
    print(f'\nIoU fused: mean {fused.mean():.3f}, min {fused.min():.3f}, '
          f'p10 {np.percentile(fused, 10):.3f} over {len(rows)} scenes; target mean >= 0.90')


if __name__ == '__main__':
    main()
