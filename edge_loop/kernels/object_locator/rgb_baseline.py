# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The RGB-only baseline locator (for the benchmarks: what colour alone finds).

Part of :mod:`edge_loop.kernels.object_locator` (the method is in its docstring).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from edge_loop.kernels.camera import Extrinsics, Intrinsics
from edge_loop.kernels.object_locator.objects import (
    DetectedObject,
    _score,
    _yaw_and_elongation,
    check_inputs,
)
from edge_loop.kernels.object_locator.params import DEFAULT_PARAMS, LocatorParams
from edge_loop.kernels.object_locator.scene import height_scene

# --- RGB-only baseline ------------------------------------------------------------------------

@dataclass(frozen=True)
class RgbBaselineParams:
    """Fixed colour thresholds of the baseline, tuned once under nominal light."""

    table_rgb: tuple[int, int, int] = (150, 140, 120)
    min_distance: float = 45.0    # colour distance from the table colour that marks an object
    min_pixels: int = 80


def locate_objects_rgb_baseline(color_rgb: np.ndarray, depth_m: np.ndarray,
                                intrinsics: Intrinsics, extrinsics: Extrinsics,
                                params: RgbBaselineParams | None = None,
                                roi: LocatorParams | None = None) -> list[DetectedObject]:
    """RGB-only segmentation (colour distance from the table colour, connected components).

    Depth is used only to place the segmented pixels in 3D (so the comparison isolates the
    segmentation); pixels without depth are dropped from the centroid.
    """
    p = params or RgbBaselineParams()
    roi = roi or DEFAULT_PARAMS
    check_inputs(color_rgb, depth_m, intrinsics)
    c = np.asarray(color_rgb, dtype=np.float32)
    dist = np.linalg.norm(c - np.asarray(p.table_rgb, np.float32), axis=-1)
    mask = (dist > p.min_distance).astype(np.uint8)
    scene = height_scene(depth_m, intrinsics, extrinsics)
    n, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=4)
    objects = []
    flat = labels.reshape(-1)
    order = np.argsort(flat, kind='stable')
    bounds = np.searchsorted(flat[order], np.arange(n + 1))
    for lbl in range(1, n):
        if stats[lbl, cv2.CC_STAT_AREA] < p.min_pixels:
            continue
        idx = order[bounds[lbl]:bounds[lbl + 1]]
        idx = idx[np.isfinite(scene.depth[idx])]
        if idx.size < p.min_pixels:
            continue
        pts = scene.points(idx)
        centre = pts.mean(axis=0).astype(np.float64)
        if not (roi.roi_x[0] < centre[0] < roi.roi_x[1]
                and roi.roi_y[0] < centre[1] < roi.roi_y[1]):
            continue
        d = pts[:, :2] - centre[:2]
        cov = (d.T @ d) / len(d)
        yaw, elong = _yaw_and_elongation(cov[0, 0], cov[0, 1], cov[1, 1])
        left, top, width, hgt = (int(v) for v in stats[lbl, :4])
        objects.append(DetectedObject(centre, yaw, int(idx.size),
                                      (left, top, left + width - 1, top + hgt - 1),
                                      _score(int(idx.size), p.min_pixels),
                                      float(pts[:, 2].max()), elong, pts))
    return objects
