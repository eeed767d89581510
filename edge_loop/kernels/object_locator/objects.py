# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""What the locator returns (:class:`DetectedObject`), input checks and per-object statistics.

Part of :mod:`edge_loop.kernels.object_locator` (the method is in its docstring).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edge_loop.kernels.camera import Intrinsics
from edge_loop.kernels.object_locator.params import NOMINAL_FX


@dataclass
class DetectedObject:
    """One object found in a frame.

    Attributes:
        position: (3,) world centroid of the visible surface points, m.
        yaw: major principal axis of those points in the world horizontal plane, rad.
        pixel_count: number of depth pixels of the object.
        mask_bbox: (u_min, v_min, u_max, v_max) inclusive pixel bounds.
        score: confidence in [0, 1) growing with the pixel count.
        top: height of the highest point above the table, m.
        elongation: sqrt of the ratio of the principal variances (1 = round; yaw is
            meaningless near 1).
        points: (N, 3) world points of the object.
        pixels: (N,) flat pixel indices (row * width + col) of those points, in raster order
            for one segment (the label image the locator hands to the grasp planner).

    """

    position: np.ndarray
    yaw: float
    pixel_count: int
    mask_bbox: tuple[int, int, int, int]
    score: float
    top: float = 0.0
    elongation: float = 1.0
    points: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.float32),
                               repr=False, compare=False)
    pixels: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False,
                               compare=False)


# --- input handling ---------------------------------------------------------------------------

def depth_in_metres(depth: np.ndarray) -> np.ndarray:
    """float32 metres with NaN for no data from uint16 millimetres or float metres."""
    depth = np.asarray(depth)
    if depth.ndim != 2:
        raise ValueError(f'depth must be (H, W), got shape {depth.shape}')
    if depth.dtype == np.uint16:
        out = depth.astype(np.float32) * np.float32(0.001)
        out[depth == 0] = np.nan
        return out
    if depth.dtype.kind != 'f':
        raise ValueError(f'depth must be uint16 mm or float m, got dtype {depth.dtype}')
    out = depth.astype(np.float32, copy=True)
    with np.errstate(invalid='ignore'):
        out[~(out > 0)] = np.nan
    return out


def check_inputs(color_rgb: np.ndarray | None, depth: np.ndarray, intr: Intrinsics) -> None:
    """Raise ValueError on a size mismatch between colour, depth and intrinsics."""
    h, w = np.shape(depth)[:2]
    if (w, h) != (intr.width, intr.height):
        raise ValueError(f'depth is {w}x{h} but camera_info says {intr.width}x{intr.height}')
    if color_rgb is not None:
        c = np.asarray(color_rgb)
        if c.ndim != 3 or c.shape[2] != 3 or c.shape[:2] != (h, w):
            raise ValueError(f'colour image shape {c.shape} does not match depth {w}x{h}x3')


def check_fill(fill: np.ndarray | None, intr: Intrinsics) -> None:
    """Raise ValueError unless ``fill`` is None or an (H, W) bool mask of the image size."""
    if fill is not None and (np.shape(fill) != (intr.height, intr.width)
                             or np.asarray(fill).dtype != bool):
        raise ValueError(f'fill must be a ({intr.height}, {intr.width}) bool mask, got '
                         f'{np.shape(fill)} {np.asarray(fill).dtype}')


def _yaw_and_elongation(sxx: float, sxy: float, syy: float) -> tuple[float, float]:
    yaw = 0.5 * np.arctan2(2.0 * sxy, sxx - syy)
    tr, det = sxx + syy, sxx * syy - sxy * sxy
    disc = np.sqrt(max(tr * tr / 4.0 - det, 0.0))
    lo, hi = max(tr / 2.0 - disc, 1e-12), max(tr / 2.0 + disc, 1e-12)
    return float(yaw), float(np.sqrt(hi / lo))


def _score(n: int, min_pixels: int) -> float:
    return float(n / (n + 2.0 * min_pixels))


def _scaled_px(px: int, intr: Intrinsics) -> int:
    return max(1, int(round(px * intr.fx / NOMINAL_FX)))
