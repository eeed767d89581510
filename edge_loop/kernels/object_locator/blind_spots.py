# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Depth blind spots (glare): where the depth camera sees nothing, and how much of the tray that is.

Part of :mod:`edge_loop.kernels.object_locator` (the method is in its docstring).
"""

from __future__ import annotations

import cv2
import numpy as np

from edge_loop.kernels.camera import Extrinsics, Intrinsics
from edge_loop.kernels.object_locator.objects import check_inputs, depth_in_metres
from edge_loop.kernels.object_locator.params import DEFAULT_PARAMS, LocatorParams
from edge_loop.kernels.object_locator.scene import world_rays


def large_regions(mask: np.ndarray, min_area: int) -> np.ndarray | None:
    """Bool mask of ``mask``'s 4-connected components of at least ``min_area``; None if none.

    Shared by the blind-spot tests here and the pick policy's unobserved-region check.
    """
    if np.count_nonzero(mask) < min_area:
        return None
    n, lab, stats, _ = cv2.connectedComponentsWithStats(
        np.ascontiguousarray(mask, dtype=bool).view(np.uint8), connectivity=4,
        ltype=cv2.CV_32S)
    large = stats[:, cv2.CC_STAT_AREA] >= min_area
    large[0] = False      # label 0: outside the mask
    return large[lab] if large.any() else None


def near_blind_spot(depth: np.ndarray, p: LocatorParams, intr: Intrinsics) -> np.ndarray:
    """(H, W) bool: within ``bridge_px`` of a 4-connected depth hole of ``blind_hole_px``."""
    large = large_regions(~np.isfinite(depth), p.blind_hole_px_for(intr))
    if large is None:
        return np.zeros(depth.shape, bool)
    b = p.bridge_px
    return cv2.dilate(large.view(np.uint8), np.ones((2 * b + 1, 2 * b + 1), np.uint8),
                      borderType=cv2.BORDER_CONSTANT, borderValue=0) > 0


_TRAY_CACHE: dict[tuple, np.ndarray] = {}


def tray_view(intr: Intrinsics, ext: Extrinsics, p: LocatorParams) -> np.ndarray:
    """Cached half-resolution flat indices of the pixels that look at the tray interior.

    One entry per full-resolution pixel whose ray meets the table plane (z = 0) inside
    ``roi_x`` x ``roi_y`` (what the camera would see of the tray floor with nothing on it),
    as the index of its 2x2 block in the grid of :func:`blind_spot_share`.
    """
    key = (intr, ext.rotation.tobytes(), ext.translation.tobytes(), p.roi_x, p.roi_y)
    hit = _TRAY_CACHE.get(key)
    if hit is not None:
        return hit
    rays, origin = world_rays(intr, ext)
    rz = rays[:, 2].astype(np.float64)
    with np.errstate(divide='ignore', invalid='ignore'):
        t = np.where(rz < 0, -float(origin[2]) / rz, np.nan)   # looking down at z = 0
        x = origin[0] + t * rays[:, 0]
        y = origin[1] + t * rays[:, 1]
        inside = (x > p.roi_x[0]) & (x < p.roi_x[1]) & (y > p.roi_y[0]) & (y < p.roi_y[1])
    rows, cols = np.divmod(np.flatnonzero(inside), intr.width)
    h2, w2 = intr.height // 2, intr.width // 2
    keep = (rows < 2 * h2) & (cols < 2 * w2)     # an odd last row or column has no block
    half = (rows[keep] // 2) * w2 + cols[keep] // 2
    if len(_TRAY_CACHE) > 8:
        _TRAY_CACHE.clear()
    _TRAY_CACHE[key] = half
    return half


def blind_spot_share(depth: np.ndarray, intr: Intrinsics, ext: Extrinsics,
                     p: LocatorParams | None = None) -> float:
    """Share (0..1) of the tray interior's pixels inside a depth blind spot.

    A blind spot is a 4-connected hole (0 or NaN depth) of at least ``blind_hole_px`` (VGA
    pixels, scaled with the focal length): glare saturating the depth camera's IR, say. The
    locator cannot find an object in it, so an empty object list then does not mean an empty
    tray. Scattered holes (edges, dark or shiny spots) do not count. Found on 2x2 blocks that
    are holes throughout (a quarter of the labelling, which takes ~2 ms at VGA): a diagnostic,
    exact to a pixel or two along each hole's edge (an odd last row or column is left out).
    ``depth``: ``(H, W)`` float metres or uint16 millimetres, as the locator takes it.
    """
    p = p or DEFAULT_PARAMS
    check_inputs(None, depth, intr)
    holes = np.isnan(depth_in_metres(depth))
    min_px = p.blind_hole_px_for(intr)
    inside = tray_view(intr, ext, p)
    if inside.size == 0 or np.count_nonzero(holes) < min_px:   # the common case: no big hole
        return 0.0
    h2, w2 = intr.height // 2, intr.width // 2
    q = holes[:2 * h2, :2 * w2]
    blocks = q[0::2, 0::2] & q[1::2, 0::2] & q[0::2, 1::2] & q[1::2, 1::2]
    blind = large_regions(blocks, -(-min_px // 4))      # 4 pixels a block
    if blind is None:
        return 0.0
    return float(np.count_nonzero(blind.reshape(-1)[inside])) / inside.size
