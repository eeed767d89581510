# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Colour: linear light, chromaticity, specular-free hue, and the cuts between touching objects.

Part of :mod:`edge_loop.kernels.object_locator` (the method is in its docstring).
"""

from __future__ import annotations

import cv2
import numpy as np

from edge_loop.kernels.object_locator.params import LocatorParams

CHROMA_OFFSET = 30.0  # added to R + G + B: keeps dark, noisy pixels from making false edges
# 8-bit display value -> linear light (gamma 2.2, the camera model's encoding).
LINEAR_LUT = (np.arange(256, dtype=np.float64) / 255.0) ** 2.2
LINEAR_LUT32 = LINEAR_LUT.astype(np.float32)


def linear_light(rgb: np.ndarray) -> np.ndarray:
    """float64 linear light of 8-bit display values (uint8 by table; others clipped to 0-255)."""
    rgb = np.asarray(rgb)
    if rgb.dtype == np.uint8:
        return LINEAR_LUT[rgb]
    return (np.clip(rgb.astype(np.float64), 0.0, 255.0) / 255.0) ** 2.2


def _chroma(rgb_sum: np.ndarray) -> np.ndarray:
    return rgb_sum / max(float(rgb_sum.sum()), 1e-9)


def _chroma_px(rgb: np.ndarray) -> np.ndarray:
    """(N, 3) float32 RGB / (R + G + B + 30) of (N, 3) pixels (the colour cut's, unblurred)."""
    rgb = np.asarray(rgb, np.float32)
    return rgb / (rgb.sum(axis=-1) + np.float32(CHROMA_OFFSET))[:, None]


def _floor_chroma(background_sum: np.ndarray) -> np.ndarray:
    total = float(np.sum(background_sum))
    return _chroma(np.asarray(background_sum, np.float64)) if total > 0 \
        else np.full(3, 1.0 / 3.0)


def _clip_distance(a: np.ndarray, na: int, b: np.ndarray, nb: int, level: float) -> float:
    """L1 between two regions' chromaticities over the channels neither has clipped.

    ``a``, ``b``: RGB sums of ``na``, ``nb`` pixels; a channel is clipped in a region when
    its mean is at least ``level``. Infinite (no evidence) unless some channel is clipped,
    at least two are not, and in each region every clipped channel is at least as bright as
    every unclipped one (the dominant channel saturates first: faces of one object).
    """
    clipped = (a >= level * na) | (b >= level * nb)
    keep = ~clipped
    if not clipped.any() or int(keep.sum()) < 2 \
            or a[clipped].min() < a[keep].max() or b[clipped].min() < b[keep].max():
        return float('inf')
    return float(np.abs(_chroma(a[keep]) - _chroma(b[keep])).sum())


def _blend_distance(small: np.ndarray, large: np.ndarray, other: np.ndarray,
                    max_blend: float) -> float:
    """L1 distance from ``small`` to ``large`` blended with up to ``max_blend`` of ``other``."""
    ab = other - large
    t = float(np.clip(np.dot(small - large, ab) / max(float(np.dot(ab, ab)), 1e-12), 0.0,
                      max_blend))
    return float(np.abs(small - (large + t * ab)).sum())


def _hue_distance(hs_i: np.ndarray, hn_i: int, hs_j: np.ndarray, hn_j: int, p: LocatorParams,
                  min_px: int) -> float:
    """L1 between two regions' mean specular-free hues; NaN (never near, never far) if unknown.

    A hue is known from ``min_px`` unclipped pixels carrying at least ``merge_hue_min_level``
    of specular-free light a pixel on average (greys and clipped whites have none).
    """
    if hn_i < min_px or hn_j < min_px:
        return np.nan
    if hs_i.sum() < p.merge_hue_min_level * hn_i or hs_j.sum() < p.merge_hue_min_level * hn_j:
        return np.nan
    return float(np.abs(_chroma(hs_i) - _chroma(hs_j)).sum())


def _hue_vetoed(hs_i: np.ndarray, hn_i: int, hs_j: np.ndarray, hn_j: int, p: LocatorParams,
                min_px: int) -> bool:
    """True when two regions' specular-free hues are both known and differ by the veto."""
    return p.merge_hue_veto > 0 \
        and _hue_distance(hs_i, hn_i, hs_j, hn_j, p, min_px) > p.merge_hue_veto


def _mean3x3_reference(image: np.ndarray) -> np.ndarray:
    """(H, W, 3) float64 3x3 mean of ``image`` (edges mirrored, no repeat)."""
    c = np.asarray(image, dtype=np.float64)
    h, w = c.shape[:2]
    padded = np.pad(c, ((1, 1), (1, 1), (0, 0)), mode='reflect')
    return sum(padded[dr:dr + h, dc:dc + w] for dr in range(3) for dc in range(3)) / 9.0


def chromaticity_reference(color_rgb: np.ndarray) -> np.ndarray:
    """(H, W, 3) float64 RGB / (R + G + B + 30) after a 3x3 mean (edges mirrored, no repeat)."""
    mean = _mean3x3_reference(color_rgb)
    return mean / (mean.sum(axis=-1, keepdims=True) + CHROMA_OFFSET)


def hue_reference(color_rgb: np.ndarray, p: LocatorParams) -> tuple[np.ndarray, np.ndarray]:
    """(H, W, 3) float64 specular-free hue and (H, W) bool "hue known" of every pixel.

    Hue: the 3x3 mean of linear light (edges mirrored, no repeat) less its smallest channel,
    divided by its sum; known where that mean has no channel at ``merge_clip_level`` and the
    sum is at least ``hue_min_level``.
    """
    mean = _mean3x3_reference(linear_light(color_rgb))
    sf = mean - mean.min(axis=-1, keepdims=True)
    level = sf.sum(axis=-1)
    known = (mean.max(axis=-1) < linear_light(p.merge_clip_level)) & (level >= p.hue_min_level)
    return sf / np.where(level > 0, level, 1.0)[..., None], known


def color_cut(color_rgb: np.ndarray, fg: np.ndarray, r0: int, c0: int,
              step: float) -> np.ndarray:
    """Bool mask (shape of ``fg``): foreground pixels whose chromaticity differs from a neighbour.

    ``fg`` is the foreground of the crop whose top-left pixel is (``r0``, ``c0``) in
    ``color_rgb``; the neighbour is a foreground 4-neighbour; the difference is L1 and must
    exceed ``step``.
    """
    r1, c1 = r0 + fg.shape[0], c0 + fg.shape[1]
    mean = _blur_in_place(color_rgb, r0, r1, c0, c1)
    total = mean[..., 0] + mean[..., 1] + mean[..., 2] + np.float32(CHROMA_OFFSET)
    chroma = mean / total[..., None]
    f = fg.astype(bool)
    d = np.abs(chroma[:, 1:] - chroma[:, :-1])
    dx = ((d[..., 0] + d[..., 1] + d[..., 2]) > step) & f[:, 1:] & f[:, :-1]
    d = np.abs(chroma[1:] - chroma[:-1])
    dy = ((d[..., 0] + d[..., 1] + d[..., 2]) > step) & f[1:] & f[:-1]
    return _both_sides(dx, dy, f.shape)


def hue_cut(color_rgb: np.ndarray, fg: np.ndarray, r0: int, c0: int,
            p: LocatorParams) -> np.ndarray:
    """Bool mask (shape of ``fg``): foreground pixels whose hue differs from a neighbour's.

    The hue is specular-free, as :func:`hue_reference` (float32 here); the neighbour is a
    foreground 4-neighbour, both hues must be known and their L1 must exceed ``hue_step``.
    The crop of ``fg`` starts at (``r0``, ``c0``) in ``color_rgb``.
    """
    r1, c1 = r0 + fg.shape[0], c0 + fg.shape[1]
    # Channel planes: numpy reduces a last axis of 3 slowly.
    red, green, blue = cv2.split(_blur_in_place(color_rgb, r0, r1, c0, c1, linear=True))
    low = np.minimum(np.minimum(red, green), blue)
    free = [c - low for c in (red, green, blue)]     # specular-free light
    level = free[0] + free[1] + free[2]
    clip = np.float32(linear_light(p.merge_clip_level))
    known = (np.maximum(np.maximum(red, green), blue) < clip) & (
        level >= np.float32(p.hue_min_level)) & fg.astype(bool)
    level = np.where(known, level, np.float32(1.0))
    hues = [c / level for c in free]
    step = np.float32(p.hue_step)
    dx = (sum(np.abs(h[:, 1:] - h[:, :-1]) for h in hues) > step) & known[:, 1:] & known[:, :-1]
    dy = (sum(np.abs(h[1:] - h[:-1]) for h in hues) > step) & known[1:] & known[:-1]
    return _both_sides(dx, dy, fg.shape)


def _both_sides(dx: np.ndarray, dy: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Bool mask of the pixels on either side of each marked horizontal/vertical pair."""
    cut = np.zeros(shape, bool)
    cut[:, 1:] |= dx
    cut[:, :-1] |= dx
    cut[1:] |= dy
    cut[:-1] |= dy
    return cut


def depth_cut(height: np.ndarray, fg: np.ndarray, step: float) -> np.ndarray:
    """Bool mask: foreground pixels more than ``step`` above or below a foreground 4-neighbour.

    Such a jump is the edge of an object lying on or against another (or a step within one).
    """
    f = fg.astype(bool)
    with np.errstate(invalid='ignore'):
        dx = (np.abs(height[:, 1:] - height[:, :-1]) > step) & f[:, 1:] & f[:, :-1]
        dy = (np.abs(height[1:] - height[:-1]) > step) & f[1:] & f[:-1]
    return _both_sides(dx, dy, f.shape)


def _blur_in_place(color_rgb: np.ndarray, r0: int, r1: int, c0: int, c1: int,
                   linear: bool = False) -> np.ndarray:
    """3x3 mean (float32) of a crop, of its linear light if ``linear``, with real neighbours.

    cv2.blur's default border (reflect-101) is what the reference's np.pad 'reflect' does at
    the image border; elsewhere the 1 px margin supplies the real neighbours.
    """
    h, w = color_rgb.shape[:2]
    pr0, pr1 = max(r0 - 1, 0), min(r1 + 1, h)
    pc0, pc1 = max(c0 - 1, 0), min(c1 + 1, w)
    crop = color_rgb[pr0:pr1, pc0:pc1]
    if linear:
        crop = cv2.LUT(np.ascontiguousarray(crop), LINEAR_LUT32) if crop.dtype == np.uint8 \
            else linear_light(crop)
    big = cv2.blur(np.ascontiguousarray(crop, dtype=np.float32), (3, 3))
    return big[r0 - pr0:r0 - pr0 + (r1 - r0), c0 - pc0:c0 - pc0 + (c1 - c0)]
