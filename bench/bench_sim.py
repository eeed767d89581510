# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Simulator benchmark: render and physics speed, grasp-trial time, bag size, baselines.

Prints two tables. Speed: render time per RGB-D frame (TinyRenderer alone and with lighting
and depth artefacts), physics steps per second, time per grasp trial, bag bytes per frame.
Baselines: success of a random grasp inside the tray and of the ground-truth mask-centroid
heuristic over ``--trials`` held-out scenes each, with Wilson 95 % intervals: the floor a
grasp planner must beat.

    python bench/bench_sim.py --trials 200
"""

from __future__ import annotations

import argparse
import collections
import tempfile
import time
from pathlib import Path

import numpy as np

from edge_loop.sim.baselines import mask_centroid_grasp, random_grasp
from edge_loop.sim.grasp_trial import execute_grasp
from edge_loop.sim.lighting import CONDITION_NAMES
from edge_loop.sim.record import record
from edge_loop.sim.world import SimWorld
from edge_loop.stats import wilson_interval

SEED_BASE = 100_000   # scene seeds of the baseline trials (objects from the held-out split)


def pct(values: list[float], q: float) -> float:
    """Percentile in milliseconds of values in seconds."""
    return float(np.percentile(np.asarray(values), q) * 1000.0)


def bench_render(frames: int) -> dict[str, list[float]]:
    """Time raw TinyRenderer frames and full frames (lighting + artefacts + labels)."""
    raw, full = [], []
    with SimWorld(SEED_BASE - 1, n_objects=5, split='heldout') as w:
        w.render()  # warm-up
        for i in range(frames):
            w.set_lighting(CONDITION_NAMES[i % len(CONDITION_NAMES)])
            t0 = time.perf_counter()
            w.camera.render(w.light.renderer_args())
            raw.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            w.render()
            full.append(time.perf_counter() - t0)
    return {'raw': raw, 'full': full}


def bench_physics(steps: int) -> float:
    """Physics steps per second with 5 objects and the gripper (incl. force sensing)."""
    with SimWorld(SEED_BASE - 2, n_objects=5, split='heldout') as w:
        t0 = time.perf_counter()
        w.step(steps)
        return steps / (time.perf_counter() - t0)


def bench_bag(frames: int) -> tuple[float, float]:
    """(bytes per frame, seconds per frame) of a recorded nominal scenario."""
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        s = record('nominal', SEED_BASE - 3, frames, Path(tmp) / 'bag')
        return s['bytes'] / frames, (time.perf_counter() - t0) / frames


def run_baselines(trials: int, n_objects: int) -> dict[str, dict]:
    """Success counts, failure reasons and trial times of both baselines."""
    out = {}
    for name in ('random', 'mask_centroid'):
        ok, times, reasons = 0, [], collections.Counter()
        for i in range(trials):
            seed = SEED_BASE + 1000 * n_objects + i
            t0 = time.perf_counter()
            with SimWorld(seed, n_objects=n_objects, split='heldout') as w:
                if name == 'random':
                    grasp = random_grasp(np.random.default_rng(seed))
                else:
                    grasp = mask_centroid_grasp(w, w.render())
                if grasp is None:
                    reasons['nothing_visible'] += 1
                    continue
                result = execute_grasp(w, grasp)
            times.append(time.perf_counter() - t0)
            ok += int(result.success)
            reasons[result.reason] += 1
        out[name] = {'ok': ok, 'n': trials, 'times': times, 'reasons': reasons}
    return out


def main() -> None:
    """Run and print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--trials', type=int, default=200, help='grasp trials per baseline')
    ap.add_argument('--objects', default='1,3',
                    help='comma-separated object counts of the baseline scenes')
    ap.add_argument('--frames', type=int, default=40, help='frames for render timing')
    ap.add_argument('--steps', type=int, default=4800, help='physics steps for timing')
    args = ap.parse_args()

    render = bench_render(args.frames)
    steps_per_s = bench_physics(args.steps)
    bag_bytes, bag_s = bench_bag(10)
    baselines = {n: run_baselines(args.trials, int(n)) for n in args.objects.split(',')} \
        if args.trials > 0 else {}
    trial_times = [t for per_n in baselines.values() for b in per_n.values() for t in b['times']]

    print('\n## Simulator speed (this machine)\n')
    print('| measure | p50 | p99 | n |')
    print('|---|---|---|---|')
    print(f"| render RGB-D frame, TinyRenderer only (ms) | {pct(render['raw'], 50):.1f} | "
          f"{pct(render['raw'], 99):.1f} | {len(render['raw'])} |")
    print(f"| render RGB-D frame + lighting + depth artefacts + labels (ms) | "
          f"{pct(render['full'], 50):.1f} | {pct(render['full'], 99):.1f} | "
          f"{len(render['full'])} |")
    if trial_times:
        print(f'| grasp trial incl. scene build (+ render for mask_centroid) (ms) | '
              f'{pct(trial_times, 50):.0f} | {pct(trial_times, 99):.0f} | {len(trial_times)} |')
    print(f'| physics steps/s (5 objects + gripper, 240 Hz) | {steps_per_s:.0f} | | '
          f'{args.steps} |')
    print(f'| bag bytes per frame (VGA RGB-D + GT + 16 state steps, zstd MCAP) | '
          f'{bag_bytes / 1e3:.0f} kB | | 10 |')
    print(f'| record time per frame (ms) | {bag_s * 1000:.0f} | | 10 |')

    if not baselines:
        return
    print(f'\n## Baseline grasp success on held-out objects ({args.trials} trials each)\n')
    print('| scene | baseline | success | 95% Wilson interval | failures |')
    print('|---|---|---|---|---|')
    for n_obj, per_n in baselines.items():
        for name, b in per_n.items():
            lo, hi = wilson_interval(b['ok'], b['n'])
            fails = ', '.join(f'{k} {v}' for k, v in b['reasons'].most_common() if k != 'held')
            print(f"| {n_obj} object(s) | {name} | {b['ok']}/{b['n']} = "
                  f"{b['ok'] / b['n']:.1%} | [{lo:.1%}, {hi:.1%}] | {fails} |")


if __name__ == '__main__':
    main()
