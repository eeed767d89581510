# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Locator with and without the learned boundary cut, side by side (issue 34 experiment).

Per frame (training worlds only, as ``tools/locator_worlds.py`` runs them): the exposure step,
then the deployed ``locate_objects``

- ``base``: as shipped (no ``masks``);
- ``masks``: with its own foreground / cut masks passed in (:func:`boundary_common.cpu_masks`);
  must give the same answers as ``base`` (checked per frame, counted as 'mask mismatches');
- ``bnd>T`` (``+dN``): the cut mask OR (net probability > T) [dilated by N px], for each
  ``--thresholds`` T;
- ``bnd>T+vetoF`` (``--veto F``): that cut, and two grown regions whose shared border has at
  least F of its 4-neighbour pairs on a predicted boundary pixel may not merge (done by
  wrapping ``deployed._merge_grown`` / ``merging.merge_regions`` in this process only: the
  package is not changed; without a veto mask set the wrappers pass everything through);
- ``oracle``, ``oracle+d1``, ``oracle+vetoF`` (``--oracle``): the same with the TRUE boundary
  (from the labels): the ceiling of any boundary predictor, not deployable.

Prints a markdown table (detected, 4-6 objects, false, merged, centroid p50 / p95, locator
ms p50 / p99, the net's ms p50 / p99 on the foreground box) and with ``--misses`` the miss
classes of ``classify_misses``. Choose thresholds on 500400-500499 (the training script's
threshold set) and report on 500500-500799 (never used for training or for choosing):

    .venv-jazzy/bin/python tools/boundary/eval_boundary.py --seed0 500400 --scenes 100 \
        --thresholds 0.3 0.5 0.7 [--relight glare:1.0]
    .venv-jazzy/bin/python tools/boundary/eval_boundary.py --seed0 500500 --scenes 300 \
        --thresholds 0.5 --misses [--relight glare:1.0]
    .venv-jazzy/bin/python tools/boundary/eval_boundary.py --seed0 500500 --scenes 300 \
        --thresholds 0.3 0.5 0.7 0.8 --veto 0.7 0.9 --oracle --misses [--relight glare:1.0]
    .venv-jazzy/bin/python tools/boundary/eval_boundary.py --latency 50   # net ms, full frame
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import boundary_common as bc  # noqa: E402
from clutter_eval import merged_count  # noqa: E402
from locator_worlds import changes_of, classify_misses  # noqa: E402

from edge_loop.kernels.object_locator import (  # noqa: E402
    deployed,
    locate_objects,
    merging,
)
from edge_loop.sim.scoring import match_detections  # noqa: E402

# --- boundary veto on merging (experiment only; patched in this process, package unchanged) --
# While VETO['boundary'] is set (a full-frame bool mask), two grown regions whose shared
# 4-neighbour border has at least VETO['frac'] of its pairs on a predicted boundary pixel
# (either side) lose that contact (and their gap candidacy) before merge_regions runs.
VETO: dict = {'boundary': None, 'frac': 0.5, 'ctx': None}
_merge_grown_orig = deployed._merge_grown
_merge_regions_orig = merging.merge_regions


def _merge_grown_veto(grown, color_rgb, mask, rows, cols, crop_idx, near_fg, no_depth, height,
                      r0, c0, *rest):
    VETO['ctx'] = (grown, r0, c0)
    try:
        return _merge_grown_orig(grown, color_rgb, mask, rows, cols, crop_idx, near_fg,
                                 no_depth, height, r0, c0, *rest)
    finally:
        VETO['ctx'] = None


def _merge_regions_veto(rgb_sums, counts, contact, background_sum, p, intr, near=None,
                        smooth=None, *rest, **kw):
    if VETO['boundary'] is not None and VETO['ctx'] is not None and contact:
        grown, r0, c0 = VETO['ctx']
        bnd = VETO['boundary'][r0:r0 + grown.shape[0], c0:c0 + grown.shape[1]]
        hit, tot = collections.Counter(), collections.Counter()
        for a, b, ba, bb in ((grown[:-1], grown[1:], bnd[:-1], bnd[1:]),
                             (grown[:, :-1], grown[:, 1:], bnd[:, :-1], bnd[:, 1:])):
            m = (a != b) & (a > 0) & (b > 0)
            lo, hi = np.minimum(a[m], b[m]).astype(int), np.maximum(a[m], b[m]).astype(int)
            on = (ba[m] | bb[m])
            for i, j, o in zip(lo.tolist(), hi.tolist(), on.tolist()):
                tot[(i, j)] += 1
                hit[(i, j)] += o
        vetoed = {k for k, n in tot.items() if hit[k] >= VETO['frac'] * n}
        contact = {k: v for k, v in contact.items() if k not in vetoed}
        if smooth is not None:
            smooth = {k: v for k, v in smooth.items() if k not in vetoed}
        if near is not None:
            near = {k for k in near if k not in vetoed}
    return _merge_regions_orig(rgb_sums, counts, contact, background_sum, p, intr, near,
                               smooth, *rest, **kw)


deployed._merge_grown = _merge_grown_veto
merging.merge_regions = _merge_regions_veto


def same(a: list, b: list) -> bool:
    """Whether two answer lists are identical (positions and pixel counts)."""
    return len(a) == len(b) and all(
        np.array_equal(x.position, y.position) and x.pixel_count == y.pixel_count
        for x, y in zip(a, b))


def latency(net, n: int, seed0: int) -> None:
    """Net ms on the full frame and on the foreground box, 1 thread, over n frames."""
    full, box = [], []
    for seed in range(seed0, seed0 + n):
        d = bc.frame(seed, bc.CACHE)
        color = bc.normalised(d)
        scene, fg, cut = bc.cpu_masks(color, d['depth_mm'], d['intr'], d['ext'], d['lp'])
        x = torch.from_numpy(bc.features(color, scene.height, fg, cut))[None]
        with torch.inference_mode():
            net(x)
            t0 = time.perf_counter()
            net(x)
            full.append((time.perf_counter() - t0) * 1e3)
        bc.predict(net, color, scene.height, fg, cut)
        t0 = time.perf_counter()
        bc.predict(net, color, scene.height, fg, cut)
        box.append((time.perf_counter() - t0) * 1e3)
    print(f'net latency over {n} frames ({d["intr"].width}x{d["intr"].height}), 1 thread: '
          f'full frame p50 {np.percentile(full, 50):.1f} / p99 {np.percentile(full, 99):.1f} ms; '
          f'foreground box (as used) p50 {np.percentile(box, 50):.1f} / '
          f'p99 {np.percentile(box, 99):.1f} ms')


def main(argv: list[str] | None = None) -> int:
    """Command line: one table row per variant."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--seed0', type=int, default=500500)
    ap.add_argument('--scenes', type=int, default=300)
    ap.add_argument('--relight', default='')
    ap.add_argument('--weights', type=Path, default=bc.WEIGHTS)
    ap.add_argument('--thresholds', type=float, nargs='*', default=[0.5])
    ap.add_argument('--dilate', type=int, nargs='*', default=[0],
                    help='also dilate the predicted boundary by these radii (px)')
    ap.add_argument('--misses', action='store_true')
    ap.add_argument('--veto', type=float, nargs='*', default=[],
                    help='also bnd>T+vetoF: the boundary cut and no merge of two regions whose '
                    'shared border is at least F on predicted boundary (experiment)')
    ap.add_argument('--changes', default='base',
                    help="LocatorParams changes for every variant (diagnostics), e.g. "
                    "'merge_min_contact=1000000,merge_gap_px=0' (no merging)")
    ap.add_argument('--oracle', action='store_true',
                    help="also 'oracle': the cut OR the TRUE boundary target (uses the labels; "
                    'a ceiling for any boundary predictor, not deployable)')
    ap.add_argument('--latency', type=int, default=0,
                    help='only time the net over this many frames from --seed0')
    args = ap.parse_args(argv)
    bc.single_thread()
    bc.check_seed(args.seed0 + args.scenes - 1)
    if args.seed0 < 500000:
        ap.error('training worlds 500000-599999 only')
    net = bc.load_net(args.weights)
    nparams = sum(p.numel() for p in net.parameters())
    if args.latency:
        print(f'net parameters: {nparams}')
        latency(net, args.latency, args.seed0)
        return 0
    variants = ['base', 'masks'] + [f'bnd>{t:g}' + (f'+d{r}' if r else '')
                                    for t in args.thresholds for r in args.dilate]
    variants += [f'bnd>{t:g}+veto{f:g}' for t in args.thresholds for f in args.veto]
    if args.oracle:
        variants += ['oracle', 'oracle+d1'] + [f'oracle+veto{f:g}' for f in args.veto]
    rows = {v: [] for v in variants}
    net_ms, mismatches = [], 0
    for i, seed in enumerate(range(args.seed0, args.seed0 + args.scenes)):
        d = bc.frame(seed, bc.CACHE, args.relight)
        color = bc.normalised(d)
        lp = dataclasses.replace(d['lp'], **changes_of(args.changes))
        scene, fg, cut = bc.cpu_masks(color, d['depth_mm'], d['intr'], d['ext'], lp)
        t0 = time.perf_counter()
        prob = bc.predict(net, color, scene.height, fg, cut)
        net_ms.append((time.perf_counter() - t0) * 1e3)
        masks = {'masks': cut}
        for t in args.thresholds:
            for r in args.dilate:
                b = prob > t
                if r:
                    b = cv2.dilate(b.astype(np.uint8),
                                   cv2.getStructuringElement(cv2.MORPH_ELLIPSE,
                                                             (2 * r + 1, 2 * r + 1))) > 0
                masks[f'bnd>{t:g}' + (f'+d{r}' if r else '')] = cut | (b & fg)
            for f in args.veto:
                masks[f'bnd>{t:g}+veto{f:g}'] = cut | ((prob > t) & fg)
        if args.oracle:
            tgt = bc.boundary_target(d['label'])
            masks['oracle'] = cut | (tgt & fg)
            masks['oracle+d1'] = cut | ((cv2.dilate(tgt.astype(np.uint8), np.ones((3, 3), np.uint8))
                                         > 0) & fg)
            for f in args.veto:
                masks[f'oracle+veto{f:g}'] = masks['oracle']
        k = i % len(variants)
        answers = {}
        for name in variants[k:] + variants[:k]:
            VETO['boundary'] = None
            if name.startswith('oracle+veto'):
                VETO['boundary'], VETO['frac'] = tgt, float(name[len('oracle+veto'):])
            elif '+veto' in name:
                t, f = name[4:].split('+veto')
                VETO['boundary'], VETO['frac'] = prob > float(t), float(f)
            t0 = time.perf_counter()
            if name == 'base':
                objects = locate_objects(color, d['depth_mm'], d['intr'], d['ext'], lp)
            else:
                objects = locate_objects(color, d['depth_mm'], d['intr'], d['ext'], lp,
                                         masks=(fg, masks[name]))
            ms = (time.perf_counter() - t0) * 1e3
            VETO['boundary'] = None
            answers[name] = objects
            errors, false, matched = match_detections(objects, d['truth'])
            rows[name].append({
                'seed': seed, 'visible': len(d['truth']), 'detected': len(errors),
                'answers': len(objects), 'false': false, 'errors': errors, 'ms': ms,
                'objects': int(d['factors']['objects']),
                'merged': merged_count(objects, d['label']),
                'misses': classify_misses(objects, d['truth'], matched, d['label'], color,
                                          lp.merge_clip_level) if args.misses else []})
        if not same(answers['base'], answers['masks']):
            mismatches += 1
    print(f'training worlds {args.seed0}-{args.seed0 + args.scenes - 1}'
          + (f', relit {args.relight}' if args.relight else '')
          + (f', params {args.changes}' if args.changes != 'base' else '')
          + f'; net {nparams} parameters, {args.weights}; mask mismatches (masks vs base): '
          f'{mismatches}')
    print('| variant | detected | 4-6 objects | false | merged | centroid p50 / p95 mm '
          '| locator ms p50 / p99 | net ms p50 / p99 |')
    print('|---|---|---|---|---|---|---|---|')

    def share(rs, key, of):
        n = sum(r[of] for r in rs)
        return f'{sum(r[key] for r in rs) / n:.1%}' if n else '-'

    nms = np.array(net_ms)
    for name, rs in rows.items():
        clutter = [r for r in rs if r['objects'] >= 4]
        e = np.array([x for r in rs for x in r['errors']]) * 1e3
        ms = np.array([r['ms'] for r in rs])
        netcol = (f'{np.percentile(nms, 50):.1f} / {np.percentile(nms, 99):.1f}'
                  if name.startswith('bnd') else '-')
        print(f"| {name} | {share(rs, 'detected', 'visible')} "
              f"({sum(r['detected'] for r in rs)}/{sum(r['visible'] for r in rs)}) | "
              f"{share(clutter, 'detected', 'visible')} | "
              f"{share(rs, 'false', 'answers')} ({sum(r['false'] for r in rs)}) | "
              f"{sum(r['merged'] for r in rs)} | "
              f"{np.percentile(e, 50):.2f} / {np.percentile(e, 95):.2f} | "
              f"{np.percentile(ms, 50):.1f} / {np.percentile(ms, 99):.1f} | {netcol} |")
    if args.misses:
        print()
        for name, rs in rows.items():
            c = collections.Counter(m for r in rs for m in r['misses'])
            print(f'{name}: ' + ', '.join(f'{k} {v}' for k, v in c.most_common()))
    return 0


if __name__ == '__main__':
    sys.exit(main())
