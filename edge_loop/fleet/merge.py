# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Per-bag results merged into one report dict, and its comparison with a baseline run.

The report depends only on the set of bag results, never on the order they arrived in or on
how many workers made them: bags sorted by id, frames by index, groups by name, ties broken
by (bag, frame). Fields that measure time (:data:`TIMING_KEYS`) are the only ones that
differ between two runs of the same bags; :func:`without_timing` drops them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from edge_loop.stats import percentiles

TIMING_KEYS = ('timing', 'latency', 'run')
STAGES = ('locator_ms', 'grasp_ms', 'occupancy_ms', 'total_ms')


def without_timing(data: Any) -> Any:
    """``data`` with every :data:`TIMING_KEYS` entry removed, at any depth."""
    if isinstance(data, dict):
        return {k: without_timing(v) for k, v in data.items() if k not in TIMING_KEYS}
    if isinstance(data, list):
        return [without_timing(v) for v in data]
    return data


def frame_badness(frame: dict[str, Any]) -> float:
    """How bad a frame is, to rank the worst frames (0 for a perfect frame).

    Missed + false objects + grasp issues + worst centroid error / 15 mm + (1 - occupancy IoU).
    """
    if not frame.get('truth'):
        return 0.0
    errors = frame.get('errors_mm') or [0.0]
    iou = frame.get('occupancy_iou')
    return round(frame['missed'] + frame['false'] + len(frame.get('grasp_issues', []))
                 + max(errors) / 15.0 + (1.0 - iou if iou is not None else 0.0), 6)


def bag_summary(result: dict[str, Any]) -> dict[str, Any]:
    """Metrics of one bag from its frames."""
    frames = [f for f in result['frames'] if f.get('truth')]
    errors = [e for f in frames for e in f['errors_mm']]
    visible = sum(f['n_truth'] for f in frames)
    missed = sum(f['missed'] for f in frames)
    ious = [f['occupancy_iou'] for f in frames if f.get('occupancy_iou') is not None]
    return {
        'frames': len(result['frames']), 'judged_frames': len(frames), 'visible': visible,
        'missed': missed, 'false': sum(f['false'] for f in frames),
        'detection_rate': round(1.0 - missed / visible, 6) if visible else None,
        'median_error_mm': round(float(np.median(errors)), 3) if errors else None,
        'max_error_mm': round(max(errors), 3) if errors else None,
        'grasp_ok': sum(1 for f in frames if not f['grasp_issues']),
        'occupancy_iou_last': ious[-1] if ious else None,
    }


def _group(results: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault(r[key], []).append(r)
    rows = []
    for name in sorted(groups):
        members = groups[name]
        frames = [f for r in members for f in r['frames'] if f.get('truth')]
        errors = [e for f in frames for e in f['errors_mm']]
        visible = sum(f['n_truth'] for f in frames)
        missed = sum(f['missed'] for f in frames)
        ious = [r['summary']['occupancy_iou_last'] for r in members
                if r['summary']['occupancy_iou_last'] is not None]
        rows.append({
            key: name, 'bags': len(members), 'frames': sum(len(r['frames']) for r in members),
            'detection_rate': round(1.0 - missed / visible, 6) if visible else None,
            'false': sum(f['false'] for f in frames),
            'median_error_mm': round(float(np.median(errors)), 3) if errors else None,
            'p95_error_mm': round(percentiles(errors, (95,))[0], 3) if errors else None,
            'grasp_ok_rate': (round(sum(1 for f in frames if not f['grasp_issues'])
                                    / len(frames), 6) if frames else None),
            'occupancy_iou_mean': round(float(np.mean(ious)), 6) if ious else None,
        })
    return rows


def merge(results: dict[str, dict[str, Any]], worst: int = 10) -> dict[str, Any]:
    """The report of a run from its per-bag results (``bag id -> result``)."""
    good = []
    bad = []
    bags: dict[str, Any] = {}
    for bag_id in sorted(results):
        r = results[bag_id]
        entry = {k: r[k] for k in ('bag', 'hash', 'scenario', 'lighting', 'status')}
        if r['status'] == 'ok':
            frames = sorted(r['frames'], key=lambda f: f['index'])
            entry.update(frames=frames, summary=bag_summary({'frames': frames}))
            good.append(entry)
        else:
            entry.update(kind=r['kind'], reason=r['reason'])
            bad.append({'bag': bag_id, 'kind': r['kind'], 'reason': r['reason']})
        bags[bag_id] = entry
    ranked = sorted(((frame_badness(f), r['bag'], f['index'], r) for r in good
                     for f in r['frames']), key=lambda t: (-t[0], t[1], t[2]))
    worst_frames = [{'bag': bag, 'index': index, 'badness': score,
                     'detail': _frame_detail(r['frames'][index])}
                    for score, bag, index, r in ranked[:worst] if score > 0]
    all_frames = [f for r in good for f in r['frames']]
    latency = {}
    for stage in STAGES:
        # graph mode times the lock-step cycle only (total_ms), not every kernel
        values = [f['timing'][stage] for f in all_frames if stage in f.get('timing', {})]
        if values:
            p50, p90, p99 = percentiles(values, (50, 90, 99))
            latency[stage] = {'p50': round(p50, 3), 'p90': round(p90, 3), 'p99': round(p99, 3),
                              'max': round(max(values), 3), 'values': values}
    totals = _group([{**r, 'all': 'all'} for r in good], 'all')
    return {
        'schema': 1,
        'summary': {'bags': len(results), 'replayed': len(good), 'bad': len(bad),
                    'frames': len(all_frames), **(totals[0] if totals else {})},
        'by_scenario': _group(good, 'scenario'), 'by_lighting': _group(good, 'lighting'),
        'worst_frames': worst_frames, 'bad_bags': bad, 'bags': bags, 'latency': latency,
    }


def _frame_detail(frame: dict[str, Any]) -> str:
    if not frame.get('truth'):
        return 'no ground truth'
    parts = [f"{frame['n_truth']} objects: {frame['missed']} missed, {frame['false']} false"]
    if frame['errors_mm']:
        parts.append(f"worst centroid error {max(frame['errors_mm']):.1f} mm")
    if frame.get('occupancy_iou') is not None:
        parts.append(f"occupancy IoU {frame['occupancy_iou']:.3f}")
    parts += frame['grasp_issues']
    return '; '.join(parts)


def compare(report: dict[str, Any], baseline: dict[str, Any], tol: dict[str, Any]
            ) -> dict[str, Any]:
    """Which bags and frames got worse than in ``baseline``, and by how much.

    ``regressions`` lists those beyond the tolerances (config/fleet.yaml ``tolerances``).
    """
    worse_bags, worse_frames, regressions, missing = [], [], [], []
    for bag_id, old in sorted(baseline['bags'].items()):
        new = report['bags'].get(bag_id)
        if new is None:
            missing.append(bag_id)
            continue
        if old['status'] == 'ok' and new['status'] != 'ok':
            worse_bags.append({'bag': bag_id, 'what': f"now {new['kind']}: {new['reason']}"})
            regressions.append(f"{bag_id}: replayed in the baseline, now {new['kind']}: "
                               f"{new['reason']}")
            continue
        if old['status'] != 'ok' or new['status'] != 'ok':
            continue
        for what, delta, limit in _bag_deltas(old['summary'], new['summary'], tol):
            worse_bags.append({'bag': bag_id, 'what': what, 'delta': delta, 'limit': limit})
            if delta > limit:
                regressions.append(f'{bag_id}: {what} worse by {delta:g} (tolerance {limit:g})')
        old_frames = {f['index']: f for f in old['frames']}
        for frame in new['frames']:
            before = old_frames.get(frame['index'])
            if before is None:
                continue
            change = round(frame_badness(frame) - frame_badness(before), 6)
            if change > 0:
                worse_frames.append({'bag': bag_id, 'index': frame['index'], 'change': change,
                                     'before': _frame_detail(before),
                                     'after': _frame_detail(frame)})
                if change > tol['frame_badness_increase']:
                    regressions.append(f"{bag_id} frame {frame['index']}: badness +{change:g} "
                                       f"(tolerance {tol['frame_badness_increase']:g}): "
                                       f"{_frame_detail(frame)}")
    worse_frames.sort(key=lambda w: (-w['change'], w['bag'], w['index']))
    return {'worse_bags': worse_bags, 'worse_frames': worse_frames,
            'missing_bags': missing, 'regressions': regressions}


def _bag_deltas(old: dict[str, Any], new: dict[str, Any], tol: dict[str, Any]
                ) -> list[tuple[str, float, float]]:
    """(metric, how much worse, tolerance) for each metric that got worse."""
    out = []

    def worse(what: str, before: Any, after: Any, sign: float, limit: float) -> None:
        if before is None or after is None:
            return
        delta = round(sign * (after - before), 6)
        if delta > 0:
            out.append((what, delta, limit))

    worse('detection rate', old['detection_rate'], new['detection_rate'], -1.0,
          tol['detection_rate_drop'])
    worse('false detections', old['false'], new['false'], 1.0, tol['false_increase'])
    worse('median centroid error (mm)', old['median_error_mm'], new['median_error_mm'], 1.0,
          tol['median_error_increase_mm'])
    worse('frames with a good grasp', old['grasp_ok'], new['grasp_ok'], -1.0,
          tol['grasp_ok_drop'])
    worse('occupancy IoU (last frame)', old['occupancy_iou_last'], new['occupancy_iou_last'],
          -1.0, tol['occupancy_iou_drop'])
    return out
