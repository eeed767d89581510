# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Randomised-world benchmark (issue 34): the locator and grasp planner in worlds never tuned in.

For every scene a world is drawn with :func:`edge_loop.sim.worlds.sample_world` (held-out
world configurations with held-out objects 800-999, and separately the training worlds with
training objects), rendered once, and the package's kernels run on the frame as the
object_locator and grasp_planner nodes do, with the parameters a user sets for that cell
(:func:`user_parameters`): camera extrinsics and intrinsics, the tray interior as ``roi_x`` /
``roi_y``, ``min_height`` 4 mm over the tray floor (the locator's and the planner's), the
hand's ``max_opening``, ``finger_width``, ``finger_thickness`` and ``pad_half_height``. The
planner's best grasp is then executed in the same world (lift 15 cm and
the shake of :mod:`edge_loop.sim.grasp_trial`: 1 s, 2 Hz, +-3 cm, +-0.15 rad).

Nothing else is set per cell: the planner's floor and obstacle heights follow its
``min_height`` (:meth:`GraspParams.for_workspace`), the locator's object sizes in pixels follow
the camera's range (:func:`sizing_intrinsics`), and a dark colour frame is brightened before
the locator as the node does (``edge_loop.kernels.exposure``, node defaults). ``--legacy``
runs the code as it was before (issue 34's hidden tuning): the planner's floor and hand at
their shipped values and object sizes scaled with fx only, no exposure step, with the
locator's ``min_height`` and ROI still set per cell.

Per split: grasp success after the shake, objects detected (of those the sensors see; overall,
in dim light, in 4-6-object clutter), false detections (share of the locator's answers that
match no visible object within 3 cm), the centroid error of every matched detection and of
the selected target (``/edge_loop/object``: distance to the nearest visible object, no
radius, so a merge of two objects counts), locator + planner latency; Wilson 95 % intervals
for rates, distribution-free order-statistic intervals for percentiles; per-factor tables
(camera tilt, lighting model, object count, camera model, hand). A third set, 'shipped', runs
the same code on the shipped world (``SimWorld(seed)``, held-out objects) in the same run as a
side-by-side reference, latency included. Latency is wall time in a worker process while the
other worker runs (2 processes): on a shared 2-core machine it is noisy; compare ratios.

    python bench/bench_worlds.py --heldout 300 --train 100 --shipped 60 --workers 2
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from edge_loop.kernels import exposure
from edge_loop.kernels.camera import Extrinsics
from edge_loop.kernels.grasp_planner import GraspParams, plan_grasp
from edge_loop.kernels.object_locator import LocatorParams, locate_objects, select_target
from edge_loop.sim.grasp_trial import execute_grasp
from edge_loop.sim.scoring import match_detections
from edge_loop.sim.world import TRAY_FLOOR, SimWorld
from edge_loop.sim.worlds import (
    DIM_MODELS,
    SEED_RANGES,
    WorldConfig,
    build_world,
    sample_world,
    touching_pairs,
)
from edge_loop.stats import wilson_interval

RESULTS = Path(__file__).resolve().parent / 'results' / 'worlds'
SHIPPED_SEED0 = 700_000
TARGETS = {'success': 0.92, 'success_per_factor': 0.85, 'detected_dim': 0.97,
           'detected_clutter': 0.97, 'false': 0.03, 'centroid_p95_mm': 5.0}
# Hidden tuning found while writing this benchmark, and what became of it.
HIDDEN_TUNING = (
    'fixed: GraspParams.floor_height / obstacle_min_height (the shipped tray floor) follow '
    "the grasp_planner's min_height parameter (GraspParams.for_workspace)",
    'fixed: GraspParams.pad_half_height / finger_thickness (the shipped hand) are '
    'grasp_planner parameters',
    'fixed: LocatorParams object sizes in pixels (min_pixels, split_pixels, merge sizes, '
    'merge_gap_px = 3 cm) scale with fx / range to the workspace centre '
    '(sizing_intrinsics), not fx alone',
    'left: sensor-effect sizes (blind_hole_px, partial_min_pixels, blur_*_px) stay image '
    'pixels by design (they are sizes of sensor effects, not of objects)',
    'left: object_locator.blind_spots.tray_view meets the rays with z = 0 (the table), not the '
    'tray floor: the blind-spot share diagnostic looks at the wrong pixels for a raised tray '
    'seen obliquely (diagnostic only; not used by this benchmark)',
)


def user_parameters(cfg: WorldConfig, legacy: bool = False
                    ) -> tuple[LocatorParams, GraspParams]:
    """The locator and planner settings from the node parameters a user sets for this cell.

    ``legacy``: as before the hidden tuning was removed (the planner's floor and hand at the
    shipped values, object sizes in pixels scaled with fx only).
    """
    roi_x, roi_y = cfg.roi
    min_height = cfg.floor_top + 0.004
    hand = cfg.hand
    if legacy:
        return (LocatorParams(min_height=min_height, roi_x=roi_x, roi_y=roi_y,
                              size_with_range=False),
                GraspParams(max_opening=hand.max_opening, finger_width=hand.finger_width))
    lp = LocatorParams(min_height=min_height, roi_x=roi_x, roi_y=roi_y)
    gp = GraspParams.for_workspace(min_height, max_opening=hand.max_opening,
                                   finger_width=hand.finger_width,
                                   finger_thickness=2 * hand.finger_half[0],
                                   pad_half_height=hand.pad_half_length)
    return lp, gp


def match(objects, truth) -> tuple[list[float], int]:
    """(3D errors of matches, false detections): edge_loop.sim.scoring's rule."""
    errors, false, _ = match_detections(objects, truth)
    return errors, false


def run_scene(seed: int, split: str, legacy: bool = False) -> dict:
    """One scene: world, frame, locator + planner (timed), matching, the grasp in physics."""
    t_scene = time.perf_counter()
    if split == 'shipped':
        cfg = None
        world = SimWorld(seed, split='heldout')
        ext = world.extrinsics
        lp, gp = LocatorParams(), GraspParams()
        factors = {'camera_tilt': '0-10 deg', 'lighting': 'nominal',
                   'objects': str(len(world.objects)), 'camera_model': 'd435_vga',
                   'hand': 'hand_a'}
    else:
        cfg = sample_world(seed, split)
        world = build_world(cfg)
        # As a user configures the nodes: the contract's camera_position / camera_orientation.
        ext = Extrinsics.from_params(list(cfg.camera_position), list(cfg.camera_orientation))
        lp, gp = user_parameters(cfg, legacy)
        factors = cfg.factors()
    with world:
        frame = world.render()
        truth = world.visible_centroids(frame, sensed=True)
        t0 = time.perf_counter()
        # As the object_locator node does: a dark frame brightened first (not in --legacy).
        color = frame.color if legacy else exposure.normalise_exposure(
            frame.color, exposure.DEFAULT_TARGET, exposure.DEFAULT_MAX_GAIN)[0]
        objects = locate_objects(color, frame.depth_mm, frame.intrinsics, ext, lp)
        t1 = time.perf_counter()
        grasps = plan_grasp(frame.depth_mm, frame.intrinsics, ext, params=gp, objects=objects)
        t2 = time.perf_counter()
        errors, false = match(objects, truth)
        target = select_target(objects)
        target_error = None
        if target is not None and truth:
            pos = objects[target].position
            target_error = float(min(np.linalg.norm(pos - c) for _, c, _ in truth))
        pairs = touching_pairs(world) if cfg is not None else 0
        if grasps:
            result = execute_grasp(world, grasps[0])
            success, reason = bool(result.success), result.reason
        else:
            success, reason = False, 'no_grasp'
    return {'seed': seed, 'split': split, 'factors': factors, 'visible': len(truth),
            'detected': len(errors), 'answers': len(objects), 'false': false,
            'errors_m': errors, 'target_error_m': target_error,
            'locate_ms': (t1 - t0) * 1e3, 'plan_ms': (t2 - t1) * 1e3,
            'success': success, 'reason': reason, 'touching_pairs': pairs,
            'floor_top': cfg.floor_top if cfg else TRAY_FLOOR,
            'scene_s': time.perf_counter() - t_scene}


def _run(args: tuple[int, str, bool]) -> dict:
    return run_scene(*args)


# --- statistics -------------------------------------------------------------------------------
def quantile_interval(values: list[float], q: float) -> tuple[float, float, float]:
    """(estimate, low, high) of the q-quantile.

    The interval is 95 % distribution-free (order statistics, normal approximation of the
    binomial rank).
    """
    x = np.sort(np.asarray(values, dtype=np.float64))
    n = len(x)
    if n == 0:
        return (math.nan, math.nan, math.nan)
    half = 1.959964 * math.sqrt(n * q * (1 - q))
    lo = int(max(0, math.floor(n * q - half) - 1))
    hi = int(min(n - 1, math.ceil(n * q + half)))
    return float(np.percentile(x, q * 100)), float(x[lo]), float(x[hi])


def rate(k: int, n: int) -> dict:
    """The rate k / n with its Wilson 95 % interval."""
    lo, hi = wilson_interval(k, n)
    return {'k': int(k), 'n': int(n), 'rate': k / n if n else math.nan, 'wilson95': [lo, hi]}


def summarise(rows: list[dict]) -> dict:
    """The headline numbers of a set of scenes."""
    vis = sum(r['visible'] for r in rows)
    det = sum(r['detected'] for r in rows)
    answers = sum(r['answers'] for r in rows)
    false = sum(r['false'] for r in rows)
    dim = [r for r in rows if r['factors']['lighting'] in DIM_MODELS]
    clutter = [r for r in rows if int(r['factors']['objects']) >= 4]
    errors = [e * 1e3 for r in rows for e in r['errors_m']]
    target = [r['target_error_m'] * 1e3 for r in rows if r['target_error_m'] is not None]
    latency = [r['locate_ms'] + r['plan_ms'] for r in rows]
    return {
        'scenes': len(rows),
        'success': rate(sum(r['success'] for r in rows), len(rows)),
        'outcomes': dict(Counter(r['reason'] for r in rows).most_common()),
        'detected': rate(det, vis),
        'detected_dim': rate(sum(r['detected'] for r in dim), sum(r['visible'] for r in dim)),
        'detected_clutter': rate(sum(r['detected'] for r in clutter),
                                 sum(r['visible'] for r in clutter)),
        'false': rate(false, answers),
        'centroid_mm': {'p50': quantile_interval(errors, 0.5),
                        'p95': quantile_interval(errors, 0.95), 'n': len(errors)},
        'target_centroid_mm': {'p50': quantile_interval(target, 0.5),
                               'p95': quantile_interval(target, 0.95), 'n': len(target)},
        'latency_ms': {'p50': quantile_interval(latency, 0.5),
                       'p99': quantile_interval(latency, 0.99), 'n': len(latency)},
    }


def per_factor(rows: list[dict], factor: str) -> dict[str, dict]:
    """Success, detection and false-detection rates per value of one factor."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[str(r['factors'][factor])].append(r)
    out = {}
    for value in sorted(groups, key=lambda v: (len(v), v)):
        g = groups[value]
        errors = [e * 1e3 for r in g for e in r['errors_m']]
        out[value] = {'success': rate(sum(r['success'] for r in g), len(g)),
                      'detected': rate(sum(r['detected'] for r in g),
                                       sum(r['visible'] for r in g)),
                      'false': rate(sum(r['false'] for r in g), sum(r['answers'] for r in g)),
                      'centroid_p95_mm': quantile_interval(errors, 0.95)[0]}
    return out


# --- report -----------------------------------------------------------------------------------
def _r(d: dict) -> str:
    lo, hi = d['wilson95']
    if not d['n']:
        return '-'
    return f"{d['k']}/{d['n']} = {d['rate']:.1%} [{lo:.1%}, {hi:.1%}]"


def _q(t: tuple[float, float, float], fmt: str = '.1f') -> str:
    est, lo, hi = t
    return f'{est:{fmt}} [{lo:{fmt}}, {hi:{fmt}}]' if np.isfinite(est) else '-'


def markdown(report: dict) -> str:
    """The report as Markdown."""
    sets = report['sets']
    names = [n for n in ('heldout', 'train', 'shipped') if n in sets]
    lines = [f"# Randomised-world benchmark ({report['date']})", '',
             f"{report['note']}", '',
             '| | ' + ' | '.join(names) + ' |', '|---|' + '---|' * len(names)]

    def row(label: str, fn) -> None:
        lines.append(f'| {label} | ' + ' | '.join(fn(sets[n]['summary']) for n in names) + ' |')

    row('scenes', lambda s: str(s['scenes']))
    row('grasp success after lift + shake', lambda s: _r(s['success']))
    row('objects detected', lambda s: _r(s['detected']))
    row('detected, dim light', lambda s: _r(s['detected_dim']))
    row('detected, 4-6 objects', lambda s: _r(s['detected_clutter']))
    row('false detections (of answers)', lambda s: _r(s['false']))
    row('centroid error median (mm)', lambda s: _q(s['centroid_mm']['p50']))
    row('centroid error p95 (mm)', lambda s: _q(s['centroid_mm']['p95']))
    row('/edge_loop/object error median (mm)', lambda s: _q(s['target_centroid_mm']['p50']))
    row('/edge_loop/object error p95 (mm)', lambda s: _q(s['target_centroid_mm']['p95']))
    row('locator + planner p50 (ms)', lambda s: _q(s['latency_ms']['p50']))
    row('locator + planner p99 (ms)', lambda s: _q(s['latency_ms']['p99']))
    row('outcomes', lambda s: ', '.join(f'{k} {v}' for k, v in s['outcomes'].items()))
    lines += ['', 'Intervals: Wilson 95 % for rates (detections are counted per object, objects '
              'of one scene are not independent: read those intervals as a little narrow); '
              '95 % order-statistic intervals for percentiles.', '']
    for name in ('heldout', 'train'):
        if name not in sets:
            continue
        for factor, table in sets[name]['factors'].items():
            lines += [f'### {name}: by {factor}', '',
                      '| value | success | detected | false | centroid p95 (mm) |',
                      '|---|---|---|---|---|']
            for value, t in table.items():
                lines.append(f"| {value} | {_r(t['success'])} | {_r(t['detected'])} | "
                             f"{_r(t['false'])} | {t['centroid_p95_mm']:.1f} |")
            lines.append('')
    lines += ['### Targets on the held-out worlds (issue 34)', '']
    if 'heldout' in sets:
        s = sets['heldout']['summary']
        worst = min((t['success']['rate'], f'{f} {v}')
                    for f in ('camera_tilt', 'lighting')
                    for v, t in sets['heldout']['factors'][f].items())
        checks = [
            ('success >= 92 %', s['success']['rate'] >= TARGETS['success']),
            (f'no lighting / tilt below 85 % (worst: {worst[1]} {worst[0]:.1%})',
             worst[0] >= TARGETS['success_per_factor']),
            ('detected in dim light >= 97 %', s['detected_dim']['rate']
             >= TARGETS['detected_dim']),
            ('detected in 4-6 clutter >= 97 %', s['detected_clutter']['rate']
             >= TARGETS['detected_clutter']),
            ('false detections <= 3 %', s['false']['rate'] <= TARGETS['false']),
            ('centroid p95 <= 5 mm', s['centroid_mm']['p95'][0] <= TARGETS['centroid_p95_mm']),
        ]
        lines += [f"- {'met' if ok else 'NOT met'}: {what}" for what, ok in checks]
    how = ('this run is --legacy: the code as it was, hidden tuning at shipped values'
           if report.get('legacy') else 'node parameters only in this run')
    lines += ['', f'Hidden tuning met while writing this benchmark ({how}):', '']
    lines += [f'- {h}' for h in HIDDEN_TUNING]
    return '\n'.join(lines) + '\n'


def build_report(rows: list[dict], note: str, legacy: bool) -> dict:
    """Summaries and per-factor tables of every set in ``rows``."""
    sets = {}
    for name in ('heldout', 'train', 'shipped'):
        mine = sorted((r for r in rows if r['split'] == name), key=lambda r: r['seed'])
        if not mine:
            continue
        sets[name] = {'summary': summarise(mine),
                      'factors': {f: per_factor(mine, f) for f in
                                  ('camera_tilt', 'lighting', 'objects', 'camera_model', 'hand')},
                      'failed_seeds': [r['seed'] for r in mine if not r['success']]}
    return {'date': time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), 'note': note,
            'legacy': legacy, 'sets': sets, 'scenes': rows}


def source_note() -> str:
    """Which code ran: the commit, and whether edge_loop/ differed from it (uncommitted)."""
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(['git', '-C', str(root), 'rev-parse', '--short', 'HEAD'],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(['git', '-C', str(root), 'status', '--porcelain', '--',
                                'edge_loop'], capture_output=True, text=True,
                               check=True).stdout.split('\n')
    except (OSError, subprocess.CalledProcessError):
        return 'code: not a git checkout (see --source)'
    changed = [line for line in dirty if line.strip()]
    return (f'code: commit {head}' + (f' with {len(changed)} uncommitted file(s) under '
                                     'edge_loop/' if changed else ', edge_loop/ clean'))


def tasks(n_heldout: int, n_train: int, n_shipped: int, legacy: bool = False,
          train_seed0: int | None = None) -> list[tuple[int, str, bool]]:
    """Scenes interleaved (held-out, train, shipped) so that a cut-short run keeps all three."""
    t0 = SEED_RANGES['train'][0] if train_seed0 is None else train_seed0
    lists = [[(SEED_RANGES['heldout'][0] + i, 'heldout', legacy) for i in range(n_heldout)],
             [(t0 + i, 'train', legacy) for i in range(n_train)],
             [(SHIPPED_SEED0 + i, 'shipped', legacy) for i in range(n_shipped)]]
    out = []
    longest = max(map(len, lists))
    total = sum(map(len, lists))
    for i in range(longest):
        for lst in lists:
            # spread the shorter lists evenly over the longer one
            lo, hi = i * len(lst) // longest, (i + 1) * len(lst) // longest
            out += lst[lo:hi]
    assert len(out) == total
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the scenes (multiprocess), write Markdown + JSON, print the Markdown."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--heldout', type=int, default=300, help='held-out world scenes')
    ap.add_argument('--train', type=int, default=100, help='training world scenes')
    ap.add_argument('--shipped', type=int, default=60, help='shipped-world reference scenes')
    ap.add_argument('--workers', type=int, default=2)
    ap.add_argument('--max-minutes', type=float, default=0.0,
                    help='stop after this long and report the scenes done (0: no limit)')
    ap.add_argument('--legacy', action='store_true',
                    help='the code as before the hidden tuning was removed: planner floor and '
                    'hand at shipped values, object pixel sizes with fx only')
    ap.add_argument('--train-seed0', type=int, default=None,
                    help='first training-world seed (default: the start of the train range)')
    ap.add_argument('--out', type=Path, default=RESULTS)
    ap.add_argument('--source', default='',
                    help='what code ran, for the report (default: from git)')
    ap.add_argument('--report-only', type=Path, default=None, metavar='JSON',
                    help='rewrite the Markdown of a JSON written before (no scenes run)')
    args = ap.parse_args(argv)
    if args.report_only is not None:
        report = json.loads(args.report_only.read_text())
        md = markdown(report)
        args.report_only.with_suffix('.md').write_text(md)
        print(md)
        return 0
    legacy = args.legacy
    todo = tasks(args.heldout, args.train, args.shipped, legacy, args.train_seed0)
    rows: list[dict] = []
    t0 = time.perf_counter()
    cut = False
    with multiprocessing.get_context('spawn').Pool(args.workers) as pool:
        for r in pool.imap_unordered(_run, todo, chunksize=1):
            rows.append(r)
            if len(rows) % 10 == 0:
                print(f'{len(rows)}/{len(todo)} scenes, {time.perf_counter() - t0:.0f} s',
                      file=sys.stderr, flush=True)
            if args.max_minutes and time.perf_counter() - t0 > args.max_minutes * 60:
                cut = True
                pool.terminate()
                break
    wall = time.perf_counter() - t0
    done = 'cut short by --max-minutes' if cut else 'all'
    which = ('--legacy: hidden tuning at shipped values' if legacy
             else 'node parameters only (no hidden tuning)')
    note = (f'{len(rows)} of {len(todo)} scenes planned ({done}), {args.workers} worker '
            f'processes, {wall / 60:.1f} min wall; {which}; {args.source or source_note()}.')
    report = build_report(rows, note, legacy)
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = '_legacy' if legacy else ''
    (args.out / f'worlds{suffix}.json').write_text(json.dumps(report, indent=1, default=float))
    md = markdown(report)
    (args.out / f'worlds{suffix}.md').write_text(md)
    print(md)
    return 0


if __name__ == '__main__':
    sys.exit(main())
