# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Locator variants side by side on training worlds (issue 34; never the held-out split).

Renders each training world of :mod:`edge_loop.sim.worlds` once (cached as a pickle under
``--cache``), then runs the deployed locator with every variant of its parameters on the same
frame, as ``bench/bench_worlds.py`` runs it (the exposure step at ``--exposure-target``, the
user's parameters for that cell, truth = the sensor-visible centroids, its matching), the
variants interleaved per frame in a rotating order, best of ``--reps`` timings each. Prints
per variant: detected (overall, dim light, 4-6 objects), false detections (of answers),
merges (detections covering >= 30 % of two objects' pixels), centroid error p50 / p95 and
the locator's p50 / p99.

    python tools/locator_worlds.py --seed0 500500 --scenes 300 \
        --variants base crease_deg=0 crease_deg=10 [--reps 3] [--json out.json]
    python tools/locator_worlds.py --relight dim:0.5 ...   # stress: darker than any train world
    python tools/locator_worlds.py --relight glare:1 --misses   # what the misses are

``--relight NAME:SCALE`` renders every world under the shipped condition NAME with its exposure
scaled by SCALE (light direction still the world's): the training worlds' cameras, trays and
clutter under light their own draw never reaches (e.g. ``dim:0.5``, half the shipped dim
exposure), so a darker room can be studied without touching the held-out lighting models.

docs/clutter.md ("Concave crease cut") was measured this way.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pickle
import sys
import time
from pathlib import Path

import numpy as np

from edge_loop.kernels import exposure
from edge_loop.kernels.camera import Extrinsics
from edge_loop.kernels.object_locator import locate_objects
from edge_loop.sim import lighting as lighting_mod
from edge_loop.sim.scoring import match_detections
from edge_loop.sim.worlds import (
    DIM_MODELS,
    SEED_RANGES,
    WorldConfig,
    build_world,
    sample_world,
    world_lighting,
)

sys.path[:0] = [str(Path(__file__).resolve().parent),
                str(Path(__file__).resolve().parents[1] / 'bench')]
from bench_worlds import user_parameters  # noqa: E402
from clutter_eval import COVER, merged_count  # noqa: E402

# A missed object whose pixels are this share or more clipped (every channel at the locator's
# merge_clip_level) is 'white': its colour says nothing, only depth can find or separate it.
WHITE_SHARE = 0.9
PART_WHITE_SHARE = 0.3


def relit(cfg: WorldConfig, relight: str) -> WorldConfig:
    """``cfg`` under the shipped condition of ``relight`` ('NAME:SCALE'), exposure x SCALE."""
    name, _, scale = relight.partition(':')
    if name not in lighting_mod.CONDITION_NAMES:
        raise ValueError(f'--relight {relight!r}: {name!r} is not one of the shipped conditions '
                         f'{", ".join(lighting_mod.CONDITION_NAMES)}')
    base = lighting_mod.get(name)
    light = world_lighting(base, light_direction=cfg.lighting.light_direction,
                           exposure=base.exposure * float(scale or 1.0))
    return dataclasses.replace(cfg, lighting_model=name, lighting=light)


def frame(seed: int, cache: Path, relight: str = '') -> dict:
    """The rendered frame, extrinsics, user parameters and truth of training world ``seed``."""
    path = cache / (f'{seed}.pkl' if not relight else f'{seed}_{relight.replace(":", "x")}.pkl')
    if path.exists():
        return pickle.loads(path.read_bytes())
    cfg = sample_world(seed, 'train')
    if relight:
        cfg = relit(cfg, relight)
    ext = Extrinsics.from_params(list(cfg.camera_position), list(cfg.camera_orientation))
    lp, _ = user_parameters(cfg)
    with build_world(cfg) as world:
        f = world.render()
        truth = world.visible_centroids(f, sensed=True)
    d = {'seed': seed, 'color': f.color, 'depth_mm': f.depth_mm, 'label': f.label,
         'intr': f.intrinsics, 'ext': ext, 'lp': lp, 'factors': cfg.factors(),
         'truth': [(int(k), np.asarray(c)) for k, c, *_ in truth]}
    cache.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(d))
    return d


def classify_misses(objects, truth: list, matched: set, label: np.ndarray,
                    color: np.ndarray, clip_level: float) -> list[str]:
    """One 'how/colour' class per visible object no answer matched.

    how: ``merged`` (an answer holds ``COVER`` of its pixels and of another object's),
    ``offset`` (an answer holds them alone but its centroid is too far), ``not found``.
    colour: ``white`` / ``part white`` / ``coloured`` by the share of its pixels clipped in
    every channel (``color`` as given to the locator).
    """
    flat = label.reshape(-1)
    sizes = np.bincount(flat, minlength=int(flat.max()) + 1)
    clipped = (color >= clip_level).all(axis=-1).reshape(-1)
    out = []
    for k, _centroid in truth:
        if k in matched:
            continue
        own = [(int(np.count_nonzero(flat[o.pixels] == k)), i) for i, o in enumerate(objects)]
        held, i = max(own) if own else (0, -1)
        if held >= COVER * sizes[k]:
            counts = np.bincount(flat[objects[i].pixels], minlength=sizes.size)
            counts[[0, k]] = 0
            how = 'merged' if (counts >= COVER * np.maximum(sizes, 1)).any() else 'offset'
        else:
            how = 'not found'
        white = float(clipped[flat == k].mean()) if sizes[k] else 0.0
        tone = ('white' if white >= WHITE_SHARE else
                'part white' if white >= PART_WHITE_SHARE else 'coloured')
        out.append(f'{how} / {tone}')
    return out


def changes_of(name: str) -> dict:
    """LocatorParams changes of a variant: 'base' or 'field=value[,field=value]'."""
    if name == 'base':
        return {}
    out = {}
    for item in name.split(','):
        key, value = item.split('=')
        out[key] = float(value) if '.' in value or 'e' in value else int(value)
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line: one table row per variant."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--seed0', type=int, default=SEED_RANGES['train'][0] + 500)
    ap.add_argument('--scenes', type=int, default=300)
    ap.add_argument('--variants', nargs='+', default=['base'])
    ap.add_argument('--reps', type=int, default=1)
    ap.add_argument('--cache', type=Path, default=Path('/tmp/edge_loop_locator_worlds'))
    ap.add_argument('--json', type=Path, default=None)
    ap.add_argument('--exposure-target', type=float, default=exposure.DEFAULT_TARGET,
                    help='as the object_locator node parameter (0: no exposure step)')
    ap.add_argument('--relight', default='',
                    help='NAME:SCALE: every world under shipped condition NAME, exposure x SCALE')
    ap.add_argument('--misses', action='store_true',
                    help="also count each variant's missed objects by how (merged / offset / "
                    'not found) and colour (white: clipped in every channel / part / coloured)')
    args = ap.parse_args(argv)
    lo, hi = SEED_RANGES['train']
    if not (lo <= args.seed0 and args.seed0 + args.scenes <= hi):
        ap.error(f'training worlds only: seeds {lo}-{hi - 1}')
    variants = [(v, changes_of(v)) for v in args.variants]
    rows: dict[str, list[dict]] = {v: [] for v, _ in variants}
    for i, seed in enumerate(range(args.seed0, args.seed0 + args.scenes)):
        d = frame(seed, args.cache, args.relight)
        color, _ = exposure.normalise_exposure(d['color'], args.exposure_target,
                                               exposure.DEFAULT_MAX_GAIN)
        k = i % len(variants)
        for name, change in variants[k:] + variants[:k]:
            lp = dataclasses.replace(d['lp'], **change)
            ms = []
            for _ in range(max(1, args.reps)):
                t0 = time.perf_counter()
                objects = locate_objects(color, d['depth_mm'], d['intr'], d['ext'], lp)
                ms.append((time.perf_counter() - t0) * 1e3)
            errors, false, matched = match_detections(objects, d['truth'])
            rows[name].append({'seed': seed, 'factors': d['factors'], 'visible': len(d['truth']),
                               'detected': len(errors), 'answers': len(objects),
                               'false': false, 'errors': errors, 'ms': min(ms),
                               'merged': merged_count(objects, d['label']),
                               'misses': classify_misses(objects, d['truth'], matched,
                                                         d['label'], color,
                                                         lp.merge_clip_level)
                               if args.misses else []})
    print(f'training worlds {args.seed0}-{args.seed0 + args.scenes - 1}'
          + (f', relit {args.relight}' if args.relight else ''))
    print('| variant | detected | dim | 4-6 objects | false | merged | centroid p50 / p95 mm '
          '| ms p50 / p99 |')
    print('|---|---|---|---|---|---|---|---|')

    def share(rs: list[dict], key: str, of: str) -> str:
        n = sum(r[of] for r in rs)
        return f'{sum(r[key] for r in rs) / n:.1%}' if n else '-'

    for name, rs in rows.items():
        dim = [r for r in rs if r['factors']['lighting'] in DIM_MODELS]
        clutter = [r for r in rs if int(r['factors']['objects']) >= 4]
        e = np.array([x for r in rs for x in r['errors']]) * 1e3
        ms = np.array([r['ms'] for r in rs])
        print(f"| {name} | {share(rs, 'detected', 'visible')} "
              f"({sum(r['detected'] for r in rs)}/{sum(r['visible'] for r in rs)}) | "
              f"{share(dim, 'detected', 'visible')} | {share(clutter, 'detected', 'visible')} | "
              f"{share(rs, 'false', 'answers')} ({sum(r['false'] for r in rs)}) | "
              f"{sum(r['merged'] for r in rs)} | {np.median(e):.2f} / {np.percentile(e, 95):.2f}"
              f" | {np.median(ms):.1f} / {np.percentile(ms, 99):.1f} |")
    if args.misses:
        classes = sorted({c for rs in rows.values() for r in rs for c in r['misses']})
        print('\nmissed objects | ' + ' | '.join(classes))
        for name, rs in rows.items():
            print(f'{name} | ' + ' | '.join(
                str(sum(r['misses'].count(c) for r in rs)) for c in classes))
    if args.json:
        args.json.write_text(json.dumps(rows, default=float))
    return 0


if __name__ == '__main__':
    sys.exit(main())
