# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Touching objects: how often the locator merges them, per camera pose (TRAIN split only).

Renders cluttered scenes (``--objects`` objects dropped into a small region so they touch,
training objects 000-799, seeds from 300000: never the held-out objects or world
configurations) from several camera poses and scores the deployed locator, and variants of
its parameters, on each frame:

- merged: detections that cover two or more objects (at least ``COVER`` of each one's
  visible foreground pixels), per scene and in all;
- detected / false detections: greedy one-to-one match within 3 cm (x, y) of the simulator's
  visible-surface centroids (as bench/bench_vision.py), against the simulator's visibility
  and against what the sensors see (``visible_centroids(sensed=True)``: the glare score);
- centroid error p50 / p95 of the matched objects, and the locator's latency p50 / p99.

    python tools/clutter_eval.py [--scenes 20] [--seed 300000] [--objects 5]
        [--cameras down oblique30] [--lighting nominal] [--variants base ...]

Not in CI; timings are taken on whatever machine runs it (noisy on a shared one).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

import numpy as np

from edge_loop.kernels.camera import matrix_to_quat
from edge_loop.kernels.object_locator import DEFAULT_PARAMS, locate_objects
from edge_loop.sim.scoring import match_detections
from edge_loop.sim.world import SimWorld

COVER = 0.3        # a detection covers an object holding this share of its visible pixels


def look_at(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Rotation of an optical frame at ``eye`` looking at ``target`` (image x horizontal)."""
    z = target - eye
    z = z / np.linalg.norm(z)
    x = np.cross(z, [0.0, 0.0, 1.0])
    if np.linalg.norm(x) < 1e-6:     # straight down: image x along world x, as the default
        x = np.array([1.0, 0.0, 0.0])
    x = x / np.linalg.norm(x)
    return np.stack([x, np.cross(z, x), z], axis=1)


def camera(tilt_deg: float, distance: float, azimuth_deg: float = -90.0
           ) -> tuple[list[float], list[float]]:
    """(position, quaternion) of a camera ``distance`` from the tray centre, tilted."""
    t, a = np.radians(tilt_deg), np.radians(azimuth_deg)
    eye = distance * np.array([np.sin(t) * np.cos(a), np.sin(t) * np.sin(a), np.cos(t)])
    return eye.tolist(), matrix_to_quat(look_at(eye, np.zeros(3))).tolist()


CAMERAS = {
    'down': camera(0.0, 0.75),
    'oblique30': camera(30.0, 0.55),
    'oblique45': camera(45.0, 0.7, azimuth_deg=200.0),
}


def _variant(name: str):
    """LocatorParams of a variant: 'base' or 'field=value[,field=value]'."""
    if name == 'base':
        return DEFAULT_PARAMS
    changes = {}
    for item in name.split(','):
        key, value = item.split('=')
        current = getattr(DEFAULT_PARAMS, key)
        changes[key] = type(current)(value) if not isinstance(current, bool) \
            else value.lower() in ('1', 'true', 'on')
    return dataclasses.replace(DEFAULT_PARAMS, **changes)


match = match_detections


def merged_count(objects, label: np.ndarray) -> int:
    """Detections that cover two or more objects (COVER of each one's detected pixels)."""
    flat = label.reshape(-1)
    fg = np.concatenate([o.pixels for o in objects]) if objects else np.zeros(0, np.int64)
    seen = np.bincount(flat[fg], minlength=int(flat.max()) + 1)
    n = 0
    for o in objects:
        own = np.bincount(flat[o.pixels], minlength=seen.size)
        covered = [k for k in range(1, seen.size) if seen[k] and own[k] >= COVER * seen[k]]
        n += len(covered) >= 2
    return n


def _score(rows: dict, key: tuple, params, world, frame, ext) -> None:
    """Locate on one frame with ``params`` and add the counts to ``rows[key]``."""
    row = rows.setdefault(key, {
        'scenes': 0, 'visible': 0, 'sensed': 0, 'found': 0, 'found_sensed': 0, 'false': 0,
        'false_sensed': 0, 'merged': 0, 'scenes_with_merge': 0, 'errors': [], 'ms': []})
    truth = world.visible_centroids(frame)
    sensed = world.visible_centroids(frame, sensed=True)
    t0 = time.perf_counter()
    objects = locate_objects(frame.color, frame.depth_mm, frame.intrinsics, ext, params)
    row['ms'].append((time.perf_counter() - t0) * 1e3)
    errors, false, _ = match(objects, truth)
    _, false_s, found_s = match(objects, sensed)
    m = merged_count(objects, frame.label)
    row['scenes'] += 1
    row['visible'] += len(truth)
    row['sensed'] += len(sensed)
    row['found'] += len(errors)
    row['found_sensed'] += len(found_s)
    row['false'] += false
    row['false_sensed'] += false_s
    row['merged'] += m
    row['scenes_with_merge'] += m > 0
    row['errors'] += errors


def run_worlds(args) -> dict:
    """Training worlds of edge_loop.sim.worlds (seeds 500000-...), the user's parameters."""
    from edge_loop.kernels.camera import Extrinsics
    from edge_loop.sim.worlds import SEED_RANGES, build_world, sample_world

    rows = {}
    lo, hi = SEED_RANGES['train']
    for seed in range(lo + args.world_offset, lo + args.world_offset + args.scenes):
        assert seed < hi
        cfg = sample_world(seed, 'train')
        ext = Extrinsics.from_params(list(cfg.camera_position), list(cfg.camera_orientation))
        roi_x, roi_y = cfg.roi
        tilt = cfg.factors().get('camera_tilt', '?')
        with build_world(cfg) as world:
            frame = world.render()
            for vname in args.variants:
                params = dataclasses.replace(_variant(vname), min_height=cfg.floor_top + 0.004,
                                             roi_x=roi_x, roi_y=roi_y)
                for key in (('train worlds', 'all', vname), ('train worlds', tilt, vname),
                            ('train worlds', f'{len(world.objects)} objects', vname)):
                    _score(rows, key, params, world, frame, ext)
    return rows


def run(args) -> dict:
    """Every (camera, lighting, variant) over the scenes; one row each."""
    if args.worlds:
        return run_worlds(args)
    variants = {v: _variant(v) for v in args.variants}
    rows = {}
    for cam in args.cameras:
        pos, quat = CAMERAS[cam]
        for seed in range(args.seed, args.seed + args.scenes):
            # --objects 0: the shipped scenes (1-5 objects drawn from the seed, spread out)
            spread = {} if args.objects else {'spawn_region': (0.13, 0.08)}
            with SimWorld(seed, n_objects=args.objects or None, split='train',
                          camera_position=pos, camera_orientation=quat,
                          **(spread or {'spawn_region': tuple(args.spawn)})) as world:
                for light in args.lighting:
                    world.set_lighting(light)
                    frame = world.render()
                    truth = world.visible_centroids(frame)
                    sensed = world.visible_centroids(frame, sensed=True)
                    for vname, params in variants.items():
                        row = rows.setdefault((cam, light, vname), {
                            'scenes': 0, 'visible': 0, 'sensed': 0, 'found': 0,
                            'found_sensed': 0, 'false': 0, 'false_sensed': 0, 'merged': 0,
                            'scenes_with_merge': 0, 'errors': [], 'ms': []})
                        t0 = time.perf_counter()
                        objects = locate_objects(frame.color, frame.depth_mm, frame.intrinsics,
                                                 world.extrinsics, params)
                        row['ms'].append((time.perf_counter() - t0) * 1e3)
                        errors, false, _ = match(objects, truth)
                        _, false_s, found_s = match(objects, sensed)
                        m = merged_count(objects, frame.label)
                        row['scenes'] += 1
                        row['visible'] += len(truth)
                        row['sensed'] += len(sensed)
                        row['found'] += len(errors)
                        row['found_sensed'] += len(found_s)
                        row['false'] += false
                        row['false_sensed'] += false_s
                        row['merged'] += m
                        row['scenes_with_merge'] += m > 0
                        row['errors'] += errors
        print(f'# {cam} done', file=sys.stderr, flush=True)
    return rows


def summary(rows: dict) -> list[dict]:
    """Table rows (rates, p50 / p95 error in mm, latency p50 / p99 ms)."""
    out = []
    for (cam, light, vname), r in rows.items():
        e = np.array(r['errors']) * 1e3
        ms = np.array(r['ms'])
        out.append({'camera': cam, 'lighting': light, 'variant': vname, 'scenes': r['scenes'],
                    'visible': r['visible'], 'detected': r['found'] / max(r['visible'], 1),
                    'false': r['false'] / max(r['visible'], 1),
                    'sensed': r['sensed'],
                    'detected_sensed': r['found_sensed'] / max(r['sensed'], 1),
                    'false_sensed': r['false_sensed'] / max(r['sensed'], 1),
                    'merged': r['merged'], 'scenes_with_merge': r['scenes_with_merge'],
                    'err_p50_mm': float(np.median(e)) if e.size else float('nan'),
                    'err_p95_mm': float(np.percentile(e, 95)) if e.size else float('nan'),
                    'ms_p50': float(np.median(ms)), 'ms_p99': float(np.percentile(ms, 99))})
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line: print one table row per camera, lighting and variant."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--scenes', type=int, default=20)
    ap.add_argument('--seed', type=int, default=300000)
    ap.add_argument('--objects', type=int, default=5)
    ap.add_argument('--spawn', type=float, nargs=2, default=(0.05, 0.04),
                    help='half-extents (m) of the drop region: small = touching objects')
    ap.add_argument('--cameras', nargs='+', default=['down', 'oblique30'], choices=CAMERAS)
    ap.add_argument('--lighting', nargs='+', default=['nominal'])
    ap.add_argument('--variants', nargs='+', default=['base'])
    ap.add_argument('--json', default=None)
    ap.add_argument('--worlds', action='store_true',
                    help='edge_loop.sim.worlds training worlds instead of --cameras')
    ap.add_argument('--world-offset', type=int, default=0)
    args = ap.parse_args(argv)
    if args.seed < 300000 or args.seed >= 400000:
        ap.error('tune on training seeds 300000-399999 only')
    table = summary(run(args))
    print('| camera | lighting | variant | scenes | detected | false | sensed det. / false | '
          'merged (scenes) | centroid p50 / p95 mm | ms p50 / p99 |')
    print('|---|---|---|---|---|---|---|---|---|---|')
    for r in table:
        print(f"| {r['camera']} | {r['lighting']} | {r['variant']} | {r['scenes']} | "
              f"{r['detected']:.1%} of {r['visible']} | {r['false']:.1%} | "
              f"{r['detected_sensed']:.1%} / {r['false_sensed']:.1%} of {r['sensed']} | "
              f"{r['merged']} ({r['scenes_with_merge']}) | "
              f"{r['err_p50_mm']:.1f} / {r['err_p95_mm']:.1f} | "
              f"{r['ms_p50']:.1f} / {r['ms_p99']:.1f} |")
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(table, f, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
