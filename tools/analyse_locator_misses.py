# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Categorise the deployed object locator's misses and false detections (training scenes).

Runs :func:`locate_objects` on every lighting condition of training scenes (objects
000-799; never the held-out seeds or objects), matches as bench/bench_vision.py does (greedy,
3 cm in x, y) and records, per missed visible object and per false detection, the facts to
categorise it: object, size, height, visible and foreground pixels, contact with other
objects, which detection covers it (merge, centroid pulled off, not segmented), and for a
false detection which truth label it lies on (split of an object, floor, an invisible
object). Optionally saves PNG crops (colour | truth | detections).

    python tools/analyse_locator_misses.py --seed 300000 --scenes 200 [--crops DIR]
        [--json out.json] [--param name=value ...] [--truth sensed]
        [--oracle cuts|merges|both]

``--oracle`` takes the segmentation's cuts and/or merges from the simulator's labels
(tools/locator_oracle.py): what better segmentation could still gain.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import time
from collections import Counter
from pathlib import Path

import cv2
import numpy as np

from edge_loop.kernels.camera import camera_to_world, deproject
from edge_loop.kernels.object_locator import (
    DEFAULT_PARAMS,
    LocatorParams,
    locate_objects,
    object_pixels,
)
from edge_loop.sim.lighting import CONDITION_NAMES
from edge_loop.sim.world import SimWorld

# bench_vision (the benchmark's matching radius) lives in bench/, the oracle beside this file.
sys.path[:0] = [str(Path(__file__).resolve().parent),
                str(Path(__file__).resolve().parents[1] / 'bench')]
from bench_vision import MATCH_RADIUS  # noqa: E402
from locator_oracle import MODES as ORACLE_MODES  # noqa: E402
from locator_oracle import oracle, set_frame_label  # noqa: E402


def greedy_match(objects, truth):
    """Greedy one-to-one (x, y) matching as bench_vision.match; returns det index -> truth k."""
    pairs = sorted((np.hypot(*(o.position[:2] - c[:2])), i, j)
                   for i, o in enumerate(objects) for j, (_, c, _) in enumerate(truth))
    used_o, used_t, out = set(), set(), {}
    for d, i, j in pairs:
        if d > MATCH_RADIUS or i in used_o or j in used_t:
            continue
        used_o.add(i)
        used_t.add(j)
        out[i] = truth[j][0]
    return out


def detection_labels(objects, intr, ext) -> np.ndarray:
    """Label image of the detections' pixels (detection index + 1, 0 elsewhere)."""
    lab = np.zeros((intr.height, intr.width), np.int32)
    for i, o in enumerate(objects):
        lab[object_pixels(o, intr, ext)] = i + 1
    return lab


def touching(label: np.ndarray, k: int) -> list[int]:
    """Other object labels 4-adjacent (within 2 px) to object k's pixels."""
    m = (label == k).astype(np.uint8)
    reach = cv2.dilate(m, np.ones((5, 5), np.uint8)) > 0
    others = np.unique(label[reach & (label != k) & (label > 0)])
    return [int(v) for v in others]


def crop_png(path: Path, frame, det_lab, bbox, pad=30):
    """Save colour | truth | detections around ``bbox`` as one PNG."""
    h, w = det_lab.shape
    u0, v0, u1, v1 = bbox
    u0, v0 = max(u0 - pad, 0), max(v0 - pad, 0)
    u1, v1 = min(u1 + pad, w - 1), min(v1 + pad, h - 1)
    rng = np.random.default_rng(0)
    pal = rng.integers(60, 255, (256, 3)).astype(np.uint8)
    pal[0] = 0
    col = frame.color[v0:v1 + 1, u0:u1 + 1]
    tl = pal[frame.label[v0:v1 + 1, u0:u1 + 1] % 256]
    dl = pal[(det_lab[v0:v1 + 1, u0:u1 + 1] * 7) % 256]
    dl[det_lab[v0:v1 + 1, u0:u1 + 1] == 0] = 0
    img = np.concatenate([col, tl, dl], axis=1)
    scale = max(1, int(300 / max(img.shape[0], 1)))
    img = cv2.resize(img, None, fx=scale, fy=scale, interpolation=cv2.INTER_NEAREST)
    cv2.imwrite(str(path), cv2.cvtColor(img, cv2.COLOR_RGB2BGR))


def analyse(seeds, params: LocatorParams, crops: Path | None, conditions=CONDITION_NAMES,
            sensed: bool = False):
    """``sensed``: score against what the sensors can see (``visible_centroids(sensed=True)``)."""
    events = []
    totals = {c: Counter() for c in conditions}
    errors = {c: [] for c in conditions}
    for seed in seeds:
        with SimWorld(seed, split='train') as world:
            names = {o.k: o.name for o in world.objects}
            sizes = {o.k: [float(s) for s in o.size] for o in world.objects}
            for cond in conditions:
                world.set_lighting(cond)
                frame = world.render()
                truth = world.visible_centroids(frame, sensed=sensed)
                intr, ext = frame.intrinsics, world.extrinsics
                set_frame_label(frame.label)    # (used only under --oracle)
                objs = locate_objects(frame.color, frame.depth_mm, intr, ext, params)
                m = greedy_match(objs, truth)
                tot = totals[cond]
                tot['visible'] += len(truth)
                tot['found'] += len(m)
                tot['false'] += len(objs) - len(m)
                tpos = {k: c for k, c, _ in truth}
                for i, k in m.items():
                    errors[cond].append(float(np.linalg.norm(objs[i].position - tpos[k])))
                if len(m) == len(truth) == len(objs):
                    continue
                det_lab = detection_labels(objs, intr, ext)
                pts_cam = deproject(frame.depth_true_m, intr)
                height_meas = None
                with np.errstate(invalid='ignore', divide='ignore'):
                    dm = frame.depth_mm.astype(np.float32) * 0.001
                    dm[frame.depth_mm == 0] = np.nan
                    pc = deproject(dm, intr)
                    wm = camera_to_world(pc.reshape(-1, 3), ext).reshape(pc.shape)
                    height_meas = wm[..., 2]
                    fg = ((height_meas > params.min_height) & (height_meas < params.max_height)
                          & (wm[..., 0] > params.roi_x[0]) & (wm[..., 0] < params.roi_x[1])
                          & (wm[..., 1] > params.roi_y[0]) & (wm[..., 1] < params.roi_y[1]))
                matched_k = set(m.values())
                k_to_det = {k: i for i, k in m.items()}
                for k, c, _ in truth:
                    if k in matched_k:
                        continue
                    mask = (frame.label == k) & (frame.depth_true_m > 0)
                    wpts = camera_to_world(pts_cam[mask], ext)
                    cover = Counter(det_lab[mask].tolist())
                    n_vis = int(mask.sum())
                    n_fg = int((mask & fg).sum())
                    best_det, best_n = None, 0
                    for d, n in cover.items():
                        if d > 0 and n > best_n:
                            best_det, best_n = d - 1, n
                    ev = {'kind': 'miss', 'seed': seed, 'cond': cond, 'k': k,
                          'name': names[k], 'size': sizes[k], 'n_vis': n_vis, 'n_fg': n_fg,
                          'top': float(wpts[:, 2].max()), 'centroid': c.tolist(),
                          'touching': touching(frame.label, k),
                          'n_truth': len(truth), 'n_det': len(objs)}
                    if best_det is not None:
                        o = objs[best_det]
                        ev['det_cover'] = best_n
                        ev['det_px'] = int(o.pixel_count)
                        ev['det_dist'] = float(np.hypot(*(o.position[:2] - c[:2])))
                        ev['det_matched_to'] = m.get(best_det)
                        # truth labels under this detection
                        dm_ = det_lab == best_det + 1
                        ev['det_labels'] = {int(a): int(b) for a, b in
                                            Counter(frame.label[dm_].tolist()).items()}
                    others = [np.hypot(*(c2[:2] - c[:2])) for k2, c2, _ in truth if k2 != k]
                    ev['nearest_obj_m'] = float(min(others)) if others else None
                    # categorise
                    if best_det is None or best_n < 0.2 * n_fg:
                        if n_fg < params.min_pixels_for(intr):
                            cat = 'too few foreground px (small/flat/edge)'
                        else:
                            cat = 'foreground but no detection'
                    elif ev['det_matched_to'] is not None:
                        cat = 'merged into a matched detection'
                    else:
                        cat = 'detected, centroid > 3 cm off'
                    ev['category'] = cat
                    events.append(ev)
                    if crops:
                        v, u = np.nonzero(frame.label == k)
                        crop_png(crops / f'miss_{cond}_{seed}_k{k}.png', frame, det_lab,
                                 (u.min(), v.min(), u.max(), v.max()))
                for i, o in enumerate(objs):
                    if i in m:
                        continue
                    dm_ = det_lab == i + 1
                    under = Counter(frame.label[dm_].tolist())
                    n = int(dm_.sum())
                    main_k, main_n = under.most_common(1)[0] if under else (0, 0)
                    ev = {'kind': 'false', 'seed': seed, 'cond': cond, 'pixels': int(o.pixel_count),
                          'top': float(o.top), 'position': o.position.tolist(),
                          'labels': {int(a): int(b) for a, b in under.items()},
                          'main_k': int(main_k), 'main_frac': main_n / max(n, 1),
                          'n_truth': len(truth), 'n_det': len(objs)}
                    if main_k == 0:
                        cat = 'on floor/tray (no object)'
                    elif main_k not in tpos:
                        cat = 'object not visible by the sim definition'
                    elif main_k in k_to_det:
                        cat = 'split: object already matched'
                        ev['name'] = names[main_k]
                    else:
                        cat = 'object unmatched (centroid off / pairs with a miss)'
                        ev['name'] = names[main_k]
                    if main_k:
                        ev['obj_dist'] = float(np.hypot(*(o.position[:2] - tpos[main_k][:2]))) \
                            if main_k in tpos else None
                    ev['category'] = cat
                    events.append(ev)
                    if crops:
                        crop_png(crops / f'false_{cond}_{seed}_d{i}.png', frame, det_lab,
                                 o.mask_bbox)
    return events, totals, errors


def main(argv=None) -> int:
    """Run the analysis over the training scenes and print the categories."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--seed', type=int, default=300000)
    ap.add_argument('--scenes', type=int, default=200)
    ap.add_argument('--crops', type=Path)
    ap.add_argument('--json', type=Path)
    ap.add_argument('--param', nargs='*', default=[], help='LocatorParams overrides name=value')
    ap.add_argument('--conditions', nargs='*', default=list(CONDITION_NAMES),
                    help='rendered in this order per scene; the sensor noise of a frame depends '
                         'on the frames before it, so compare runs with the same list')
    ap.add_argument('--truth', choices=('sim', 'sensed'), default='sim',
                    help="visible objects: the sim's definition or what the sensors can see")
    ap.add_argument('--oracle', choices=ORACLE_MODES,
                    help="take the segmentation's cuts and/or merges from the sim's labels")
    args = ap.parse_args(argv)
    if args.seed >= 100000 and args.seed < 200000:
        raise SystemExit('held-out seeds (100000+) are not for analysis/tuning')
    over = {}
    for kv in args.param:
        k, v = kv.split('=')
        cur = getattr(DEFAULT_PARAMS, k)
        over[k] = type(cur)(float(v)) if not isinstance(cur, tuple) else eval(v)
    params = dataclasses.replace(DEFAULT_PARAMS, **over)
    if args.crops:
        args.crops.mkdir(parents=True, exist_ok=True)
    t = time.time()
    with oracle(args.oracle) if args.oracle else contextlib.nullcontext():
        events, totals, errors = analyse(range(args.seed, args.seed + args.scenes), params,
                                         args.crops, args.conditions, args.truth == 'sensed')
    print(f'# {args.scenes} training scenes from seed {args.seed}, params {over or "default"}, '
          f'truth {args.truth}, oracle {args.oracle or "none"}, {time.time() - t:.0f} s\n')
    print('| lighting | visible | missed | false | detected | false % | med mm | p95 mm |')
    print('|---|---|---|---|---|---|---|---|')
    for c, tot in totals.items():
        e = np.array(errors[c]) * 1000
        print(f'| {c} | {tot["visible"]} | {tot["visible"] - tot["found"]} | {tot["false"]} | '
              f'{tot["found"] / max(tot["visible"], 1):.1%} | '
              f'{tot["false"] / max(tot["visible"], 1):.1%} | {np.median(e):.1f} | '
              f'{np.percentile(e, 95):.1f} |')
    for kind in ('miss', 'false'):
        print(f'\n## {kind} categories (all conditions / excluding glare)')
        cats = Counter(e['category'] for e in events if e['kind'] == kind)
        cats_ng = Counter(e['category'] for e in events if e['kind'] == kind
                          and e['cond'] != 'glare')
        for cat, n in cats.most_common():
            print(f'- {cat}: {n} / {cats_ng[cat]}')
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({'events': events,
                                         'totals': {c: dict(t) for c, t in totals.items()}},
                                        indent=1))
    return 0


if __name__ == '__main__':
    sys.exit(main())
