# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Verified ops of the vision stages: object_locator and grasp_planner.

Both are geometric outputs, so their tolerances are task-level (config/tolerances.yaml):
the same objects in the same order, centroids within 2 mm, principal-axis yaw within 2 deg
(only where the object is elongated enough for yaw to be defined), pixel counts within 1%;
the same best grasp within 2 mm / 2 deg (modulo 180 deg: the jaw is symmetric) / 2 mm opening.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from edge_loop.kernels.grasp_planner import plan_grasp, plan_grasp_reference
from edge_loop.kernels.object_locator import locate_objects, locate_objects_reference
from edge_loop.verify.compare import angle_diff_mod
from edge_loop.verify.spec import Case, OpSpec
from edge_loop.verify.sweeps import rgbd_inputs, scene


def _locator_cases() -> Iterator[Case]:
    for f in rgbd_inputs():
        yield Case(f.name, (f.color, f.depth, f.intrinsics, f.extrinsics))


def _locator_perf() -> Case:
    f = scene(640, 480, seed=7, n_boxes=5, depth_encoding='16UC1')
    return Case('640x480 16UC1, 5 boxes', (f.color, f.depth, f.intrinsics, f.extrinsics))


def compare_objects(ref: list[Any], dep: list[Any], tol: dict[str, Any]) -> tuple[float, bool,
                                                                                   str]:
    """Same count and order; position, yaw (elongated objects), pixel count within tol."""
    if len(ref) != len(dep):
        return float('inf'), False, f'{len(dep)} objects, reference found {len(ref)}'
    if not ref:
        return 0.0, True, 'both found nothing'
    pos_tol, yaw_tol = float(tol['position_m']), np.radians(float(tol['yaw_deg']))
    count_tol = float(tol['pixel_count_rel'])
    min_elong = float(tol.get('yaw_min_elongation', 1.2))
    worst_ratio, worst_what, problems = 0.0, '', []
    for i, (r, d) in enumerate(zip(ref, dep)):
        errs = {
            'position_m': (float(np.linalg.norm(np.asarray(r.position) - d.position)), pos_tol),
            'pixel_count_rel': (abs(r.pixel_count - d.pixel_count) / max(r.pixel_count, 1),
                                count_tol),
            'bbox_px': (float(np.max(np.abs(np.subtract(r.mask_bbox, d.mask_bbox)))),
                        float(tol.get('bbox_px', 1))),
        }
        if min(r.elongation, d.elongation) >= min_elong:
            errs['yaw_rad'] = (angle_diff_mod(r.yaw, d.yaw, np.pi), yaw_tol)
        for what, (err, lim) in errs.items():
            ratio = err / lim if lim > 0 else (0.0 if err == 0 else float('inf'))
            if ratio > worst_ratio:
                worst_ratio, worst_what = ratio, f'object {i} {what} {err:.3g} (limit {lim:g})'
            if err > lim:
                problems.append(f'object {i} {what} {err:.3g} > {lim:g}')
    detail = '; '.join(problems) if problems else f'{len(ref)} objects, worst {worst_what}'
    return worst_ratio, not problems, detail


def _grasp_cases() -> Iterator[Case]:
    for f in rgbd_inputs():
        yield Case(f.name, (f.depth, f.intrinsics, f.extrinsics))


def _grasp_perf() -> Case:
    f = scene(640, 480, seed=7, n_boxes=5, depth_encoding='16UC1')
    return Case('640x480 16UC1, 5 boxes', (f.depth, f.intrinsics, f.extrinsics))


def compare_grasps(ref: list[Any], dep: list[Any], tol: dict[str, Any]) -> tuple[float, bool,
                                                                                  str]:
    """Both empty, or the best grasps agree in centre, yaw (mod pi) and opening."""
    if not ref or not dep:
        ok = not ref and not dep
        return (0.0 if ok else float('inf')), ok, (
            'both found no grasp' if ok else f'reference {len(ref)} vs deployed {len(dep)} '
            'candidates')
    r, d = ref[0], dep[0]
    errs = {
        'center_m': (float(np.linalg.norm(r.center - d.center)), float(tol['center_m'])),
        'yaw_rad': (angle_diff_mod(r.yaw, d.yaw, np.pi), np.radians(float(tol['yaw_deg']))),
        'opening_m': (abs(r.opening - d.opening), float(tol['opening_m'])),
    }
    ratios = {k: e / lim for k, (e, lim) in errs.items()}
    worst = max(ratios, key=ratios.get)
    problems = [f'{k} {e:.3g} > {lim:g}' for k, (e, lim) in errs.items() if e > lim]
    detail = '; '.join(problems) if problems else (
        f'{len(ref)}/{len(dep)} candidates, worst {worst} {errs[worst][0]:.3g}')
    return ratios[worst], not problems, detail


OPS = [
    OpSpec(name='object_locator', reference=locate_objects_reference, deployed=locate_objects,
           cases=_locator_cases, compare=compare_objects, perf_case=_locator_perf,
           min_speedup=3.0),
    OpSpec(name='grasp_planner', reference=plan_grasp_reference, deployed=plan_grasp,
           cases=_grasp_cases, compare=compare_grasps, perf_case=_grasp_perf,
           min_speedup=3.0),
]
