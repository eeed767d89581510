# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Why slips are decided late: per slip event, which cue fires first and what the signals do.

Usage: python tools/analyse_grasp_slips.py traces.pkl [--late-ms 20] [--worst 10] [--verbose]

Loads traces saved by ``bench/bench_grasp_state.py --save`` (use the training split for
development), classifies them with the shear channel, and for every sustained slip event
(>= 25 ms, as in the bench's table) prints the latency from the motion onset and when each of
the kernel's slip cues first fired after the onset; for late (> ``--late-ms``) and missed
events the signals of the first 30 ms after the onset. Then the worst-accuracy episodes with
their confusion (true -> reported) counts.
"""

from __future__ import annotations

import argparse
import collections
import pickle
import sys
from pathlib import Path

import numpy as np

# The traces and the table's episode kinds come from the benchmark in bench/.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'bench'))

import bench_grasp_state as bench  # noqa: E402

from edge_loop.kernels import grasp_state as gs  # noqa: E402

CUES = ('drop', 'creep', 'at_limit', 'jump', 'pivot', 'fast_closing')


def cue_trace(trace, params=gs.DEFAULT_PARAMS, kernel=gs):
    """Classify with the shear channel, recording every step's inputs and slip cues."""
    rows = []
    orig = kernel._Machine.step

    def step(self, t, contact, fmin, peak, opening, closing_speed, command_delta, at_limit,
             jump, pivot_since, near_limit, *extra):
        p = self.p
        prev, hold_peak, hold_since = self.state, self.hold_peak, self.hold_since
        gripped = prev in gs._GRIPPED and t - hold_since >= p.slip_settle_s and contact
        pivot = pivot_since <= t and t - pivot_since <= p.pivot_max_s
        creep = hold_peak - fmin > p.slip_creep_drop_fraction * hold_peak
        cues = {
            'drop': peak - fmin > p.slip_drop_fraction * peak,
            'creep': closing_speed > p.slip_velocity and creep,
            'at_limit': bool(at_limit), 'jump': bool(jump), 'pivot': bool(pivot),
            'fast_closing': closing_speed > p.slip_fast_velocity and (
                near_limit or hold_peak - fmin > p.slip_fast_drop_fraction * hold_peak),
        }
        out = orig(self, t, contact, fmin, peak, opening, closing_speed, command_delta,
                   at_limit, jump, pivot_since, near_limit, *extra)
        rows.append({'gripped': gripped, 'fmin': fmin, 'peak': peak, 'hold_peak': hold_peak,
                     'closing': closing_speed, 'cues': {k: v and gripped
                                                        for k, v in cues.items()},
                     'state': out})
        return out

    kernel._Machine.step = step
    try:
        states = bench.classify(trace, 'shear', params, kernel)
    finally:
        kernel._Machine.step = orig
    return states, rows


def slip_events(trace):
    """(label start k, label end j) of each true slip run (with the lost that may follow)."""
    truth, n, out, k = trace.truth, len(trace.truth), [], 0
    while k < n:
        if truth[k] == gs.SLIPPING and (k == 0 or truth[k - 1] != gs.SLIPPING):
            j = k
            while j < n and truth[j] in (gs.SLIPPING, gs.LOST):
                j += 1
            out.append((k, j))
            k = j
        else:
            k += 1
    return out


def main() -> None:
    """Print the slip latencies, their cues and the worst episodes of a traces file."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('traces')
    ap.add_argument('--late-ms', type=float, default=20.0)
    ap.add_argument('--worst', type=int, default=10)
    ap.add_argument('--verbose', action='store_true')
    args = ap.parse_args()
    with open(args.traces, 'rb') as fh:
        traces = pickle.load(fh)
    mu = bench.ops.FRICTION
    first_cue = collections.Counter()
    late_kinds = collections.Counter()
    all_lat = []
    episodes = []
    for tr in traces:
        states, rows = cue_trace(tr)
        sc = bench.scores_with_loss_alarm(tr, states)
        episodes.append((sc['accuracy'], tr, states, sc))
        t = tr.t
        ratio_m = tr.shears / np.maximum(tr.forces, 1.0)
        tns = tr.true_normal_shear
        ratio_t = tns[:, 1, :] / np.maximum(tns[:, 0, :], 1e-6)
        for k, j in slip_events(tr):
            dur = t[j - 1] - t[k]
            if dur < 0.025:
                continue
            onset = max(k - bench.LABEL_LAG_STEPS, 0)
            end = t[j - 1] + bench.GRACE_S
            hit = next((i for i in range(k, len(t)) if t[i] <= end
                        and states[i] in (gs.SLIPPING, gs.LOST)), None)
            lat = np.inf if hit is None else (t[hit] - t[onset]) * 1e3
            all_lat.append(lat)
            # the first sample of each cue from the onset on (within the event + grace)
            fired = {}
            for i in range(onset, len(t)):
                if t[i] > end:
                    break
                for c, v in rows[i]['cues'].items():
                    if v and c not in fired:
                        fired[c] = (t[i] - t[onset]) * 1e3
            lost_at = next(((t[i] - t[onset]) * 1e3 for i in range(onset, len(t))
                            if t[i] <= end and states[i] == gs.LOST), None)
            first = min(fired, key=fired.get) if fired else ('lost' if lost_at else 'none')
            decided_by = first
            if lat < np.inf and fired and min(fired.values()) > lat + 1e-6:
                decided_by = 'lost'
            first_cue[(tr.kind, decided_by)] += 1
            late = lat > args.late_ms
            if late:
                late_kinds[tr.kind] += 1
            if late or args.verbose:
                print(f'\n{tr.kind} seed {tr.events.get("seed")} slip at t={t[k] - t[0]:.3f} s '
                      f'dur {dur * 1e3:.0f} ms latency {lat:.1f} ms; cues (ms from onset): '
                      + ', '.join(f'{c} {v:.1f}' for c, v in sorted(fired.items(),
                                                                   key=lambda x: x[1]))
                      + (f', lost {lost_at:.1f}' if lost_at is not None else ''))
                print('   ms   truth     state     speed  rT_l  rT_r  rM_l  rM_r   fL    fR  '
                      ' fmin  hpeak  close  cues')
                for i in range(max(onset - 3, 0), min(onset + 12, len(t))):
                    r = rows[i]
                    on = ','.join(c for c, v in r['cues'].items() if v)
                    print(f'{(t[i] - t[onset]) * 1e3:6.1f} {tr.truth[i]:9s} {states[i]:9s} '
                          f'{tr.rel_speed[i]:.3f} {ratio_t[i, 0] / mu:5.2f} '
                          f'{ratio_t[i, 1] / mu:5.2f} {ratio_m[i, 0]:5.2f} {ratio_m[i, 1]:5.2f} '
                          f'{tr.forces[i, 0]:5.1f} {tr.forces[i, 1]:5.1f} {r["fmin"]:5.1f} '
                          f'{r["hold_peak"]:5.1f} {r["closing"]:6.3f} {on}'
                          f'{"" if r["gripped"] else " (not armed)"}')
    arr = np.array(all_lat)
    fin = arr[np.isfinite(arr)]
    print(f'\nsustained slips {len(arr)}, found {len(fin)}, > {args.late_ms} ms: '
          f'{(fin > args.late_ms).sum()}, latency p50/p95/p99 '
          f'{np.percentile(fin, 50):.1f}/{np.percentile(fin, 95):.1f}/'
          f'{np.percentile(fin, 99):.1f} ms')
    print('late or missed by kind:', dict(late_kinds))
    print('deciding cue (first cue from the onset) by kind:')
    for (kind, cue), c in sorted(first_cue.items()):
        print(f'  {kind:10s} {cue:12s} {c}')
    print('\nworst episodes:')
    episodes.sort(key=lambda e: e[0])
    for acc, tr, states, sc in episodes[:args.worst]:
        t = tr.t
        changes = [k for k in range(1, len(t)) if tr.truth[k] != tr.truth[k - 1]]
        graced = np.zeros(len(t), dtype=bool)
        for k in changes:
            graced |= (t >= t[k]) & (t < t[k] + bench.GRACE_S)
        conf = collections.Counter((g, s) for g, s, gr in zip(tr.truth, states, graced)
                                   if g != s and not gr)
        print(f'  {acc:.4f} {tr.kind:10s} seed {tr.events.get("seed")} n={len(t)} '
              f'fs {sc["false_slipping"]:.3%}: '
              + ', '.join(f'{g}->{s} {c}' for (g, s), c in conf.most_common()))


if __name__ == '__main__':
    main()
