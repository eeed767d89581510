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
from edge_loop.verify.compare import Comparison, angle_diff_mod
from edge_loop.verify.spec import Case, OpSpec
from edge_loop.verify.sweeps import category_inputs, rgbd_inputs, scene


def _frames() -> Iterator[Any]:
    yield from rgbd_inputs()
    yield from category_inputs()


def _locator_cases() -> Iterator[Case]:
    for f in _frames():
        yield Case(f.name, (f.color, f.depth, f.intrinsics, f.extrinsics),
                   full_only='3840x2160' in f.name)


def _locator_perf() -> Case:
    f = scene(640, 480, seed=7, n_boxes=5, depth_encoding='16UC1')
    return Case('640x480 16UC1, 5 boxes', (f.color, f.depth, f.intrinsics, f.extrinsics))


def compare_objects(ref: list[Any], dep: list[Any], tol: dict[str, Any]) -> tuple[float, bool,
                                                                                   str]:
    """Same count and order; position, yaw (elongated objects), pixel count within tol."""
    pos_tol, yaw_tol = float(tol['position_m']), np.radians(float(tol['yaw_deg']))
    count_tol = float(tol['pixel_count_rel'])
    tols = {'abs_tol': pos_tol, 'rel_tol': count_tol, 'unit': 'm'}
    if len(ref) != len(dep):
        return Comparison(float('inf'), False, f'{len(dep)} objects, reference found '
                          f'{len(ref)}', max_abs=float('inf'), max_rel=float('inf'), **tols)
    if not ref:
        return Comparison(0.0, True, 'both found nothing', max_abs=0.0, max_rel=0.0, **tols)
    min_elong = float(tol.get('yaw_min_elongation', 1.2))
    worst_ratio, worst_what, problems = 0.0, '', []
    max_pos = max_count = 0.0
    for i, (r, d) in enumerate(zip(ref, dep)):
        errs = {
            'position_m': (float(np.linalg.norm(np.asarray(r.position) - d.position)), pos_tol),
            'pixel_count_rel': (abs(r.pixel_count - d.pixel_count) / max(r.pixel_count, 1),
                                count_tol),
            'bbox_px': (float(np.max(np.abs(np.subtract(r.mask_bbox, d.mask_bbox)))),
                        float(tol.get('bbox_px', 1))),
        }
        max_pos = max(max_pos, errs['position_m'][0])
        max_count = max(max_count, errs['pixel_count_rel'][0])
        if min(r.elongation, d.elongation) >= min_elong:
            errs['yaw_rad'] = (angle_diff_mod(r.yaw, d.yaw, np.pi), yaw_tol)
        for what, (err, lim) in errs.items():
            ratio = err / lim if lim > 0 else (0.0 if err == 0 else float('inf'))
            if ratio > worst_ratio:
                worst_ratio, worst_what = ratio, f'object {i} {what} {err:.3g} (limit {lim:g})'
            if err > lim:
                problems.append(f'object {i} {what} {err:.3g} > {lim:g}')
    detail = '; '.join(problems) if problems else f'{len(ref)} objects, worst {worst_what}'
    return Comparison(worst_ratio, not problems, detail, max_abs=max_pos, max_rel=max_count,
                      **tols)


def _grasp_cases() -> Iterator[Case]:
    for f in _frames():
        yield Case(f.name, (f.depth, f.intrinsics, f.extrinsics),
                   full_only='3840x2160' in f.name)


def _grasp_perf() -> Case:
    f = scene(640, 480, seed=7, n_boxes=5, depth_encoding='16UC1')
    return Case('640x480 16UC1, 5 boxes', (f.depth, f.intrinsics, f.extrinsics))


def compare_grasps(ref: list[Any], dep: list[Any], tol: dict[str, Any]) -> tuple[float, bool,
                                                                                  str]:
    """Both empty, or the best grasps agree in centre, yaw (mod pi) and opening."""
    tols = {'abs_tol': float(tol['center_m']), 'unit': 'm'}
    if not ref or not dep:
        ok = not ref and not dep
        err = 0.0 if ok else float('inf')
        return Comparison(err, ok, 'both found no grasp' if ok else
                          f'reference {len(ref)} vs deployed {len(dep)} candidates',
                          max_abs=err, **tols)
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
    return Comparison(ratios[worst], not problems, detail, max_abs=errs['center_m'][0],
                      max_rel=errs['opening_m'][0] / max(float(r.opening), 1e-9), **tols)


# Claims: a third of the lowest per-run median speed-up measured on a loaded 2-core VM
# (docs/verification.md, "Claims"), rounded down.
DTYPES = ('uint8', 'uint16', 'float32')
EMPTY_FRAME = ('the node rejects a frame without a valid depth pixel before the kernel '
               '(vision_common.frame_inputs), so a 0x0 frame never reaches it; the reference '
               "raises (np.pad 'reflect' on an empty axis) where the deployed kernel returns []")

OPS = [
    OpSpec(name='object_locator', reference=locate_objects_reference, deployed=locate_objects,
           cases=_locator_cases, compare=compare_objects, perf_case=_locator_perf,
           claimed_speedup=10.0, dtypes=DTYPES, libraries=('numpy', 'opencv'),
           known_failures={'0x0 16UC1 empty frame': EMPTY_FRAME,
                           '0x0 32FC1 empty frame': EMPTY_FRAME}),
    OpSpec(name='grasp_planner', reference=plan_grasp_reference, deployed=plan_grasp,
           cases=_grasp_cases, compare=compare_grasps, perf_case=_grasp_perf,
           claimed_speedup=4.0, dtypes=('uint16', 'float32'), libraries=('numpy', 'opencv'),
           not_applicable={'saturated/black colour': 'plans on depth only'}),
]
