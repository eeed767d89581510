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


def crease_cut(depth: np.ndarray, height: np.ndarray, rays: np.ndarray, fg: np.ndarray,
               r0: int, c0: int, p: LocatorParams) -> np.ndarray:
    """Bool mask (shape of ``fg``): foreground pixels on either side of a concave crease.

    ``depth``: (H, W) float32 optical depth (m, NaN = none), ``height``: (H, W) world z and
    ``rays``: (H, W, 3) world directions per unit depth of the whole frame; ``fg`` the
    foreground of the crop whose top-left pixel is (``r0``, ``c0``). Only foreground points
    count (the floor beside an object would bend its normals). A point's normal is the
    cross product of its neighbours' differences ``crease_baseline`` pixels to either side
    along rows and columns, none where a difference spans a height step (a foreground
    4-neighbour pair more than ``depth_step`` apart in height: :func:`depth_cut`'s, whose
    "normal" would be the step's, not a surface's), made unit, summed over a
    ``crease_window`` square (zero where none) and made unit again where over half the
    square has one; turned towards the camera.
    4-neighbours whose normals differ by more than ``crease_deg`` and turn towards each
    other (their normals' difference against their points' difference is negative: a
    valley, two surfaces meeting) are cut. :func:`crease_reference` is the plain version.
    Computed on coordinate planes (an (H, W, 3) array's last axis is slow in numpy).
    """
    k, win = max(1, int(p.crease_baseline)), max(1, int(p.crease_window))
    m = k + win // 2
    hh, ww = fg.shape
    f = fg.astype(bool)
    inner = (slice(m, m + hh), slice(m, m + ww))
    d = np.full((hh + 2 * m, ww + 2 * m), np.nan, np.float32)
    d[inner] = np.where(f, depth[r0:r0 + hh, c0:c0 + ww], np.float32(np.nan))
    z = np.full(d.shape, np.nan, np.float32)
    z[inner] = np.where(f, height[r0:r0 + hh, c0:c0 + ww], np.float32(np.nan))
    # Differences that span a height step (a depth_cut pair) give no normal: counts of step
    # pairs along rows and columns, differenced over the 2k pairs a difference spans.
    with np.errstate(invalid='ignore'):
        jx = np.abs(z[:, 1:] - z[:, :-1]) > p.depth_step       # False where NaN
        jy = np.abs(z[1:] - z[:-1]) > p.depth_step
    cx = np.zeros(d.shape, np.int32)
    cy = np.zeros(d.shape, np.int32)
    np.cumsum(jx, axis=1, out=cx[:, 1:])
    np.cumsum(jy, axis=0, out=cy[1:])
    spans = ((cx[k:-k, 2 * k:] - cx[k:-k, :-2 * k]) > 0) \
        | ((cy[2 * k:, k:-k] - cy[:-2 * k, k:-k]) > 0)
    ray = []
    q = []            # world point less the camera's origin: depth x ray
    for i in range(3):
        r = np.zeros(d.shape, np.float32)
        r[inner] = rays[r0:r0 + hh, c0:c0 + ww, i]
        ray.append(r[inner])
        q.append(d * r)
    du = [c[k:-k, 2 * k:] - c[k:-k, :-2 * k] for c in q]
    dv = [c[2 * k:, k:-k] - c[:-2 * k, k:-k] for c in q]
    n = (du[1] * dv[2] - du[2] * dv[1], du[2] * dv[0] - du[0] * dv[2],
         du[0] * dv[1] - du[1] * dv[0])
    with np.errstate(invalid='ignore', divide='ignore'):
        inv = np.float32(1.0) / np.sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2])
    valid = np.isfinite(inv) & ~spans
    planes = []
    for c in n + (None,):
        z = np.zeros(d.shape, np.float32)
        z[k:-k, k:-k] = valid if c is None else np.where(valid, c * inv, np.float32(0.0))
        planes.append(cv2.blur(z, (win, win), borderType=cv2.BORDER_CONSTANT)[inner])
    nx, ny, nz, count = planes
    norm = np.sqrt(nx * nx + ny * ny + nz * nz)
    ok = (count > np.float32(0.5)) & (norm > np.float32(1e-6)) & f
    s = np.where(ok, norm, np.float32(1.0))
    s = np.where(ray[0] * nx + ray[1] * ny + ray[2] * nz > 0, -s, s)    # towards the camera
    nx, ny, nz = nx / s, ny / s, nz / s
    px, py, pz = (c[inner] for c in q)
    cos = np.float32(np.cos(np.radians(p.crease_deg)))
    out = []
    for a, b in (((slice(None), slice(None, -1)), (slice(None), slice(1, None))),
                 ((slice(None, -1), slice(None)), (slice(1, None), slice(None)))):
        bend = nx[a] * nx[b] + ny[a] * ny[b] + nz[a] * nz[b] < cos
        with np.errstate(invalid='ignore'):
            valley = ((nx[b] - nx[a]) * (px[b] - px[a]) + (ny[b] - ny[a]) * (py[b] - py[a])
                      + (nz[b] - nz[a]) * (pz[b] - pz[a])) < 0
        out.append(bend & valley & ok[a] & ok[b])
    return _both_sides(out[0], out[1], f.shape)


def crease_reference(world: np.ndarray, fg: np.ndarray, origin: np.ndarray,
                     p: LocatorParams) -> tuple[np.ndarray, np.ndarray]:
    """(H, W, 3) float64 unit normals and (H, W) bool "normal known" of :func:`crease_cut`.

    ``world``: (H, W, 3) world points (NaN = no depth), ``fg``: the foreground, ``origin``:
    the camera's position. float64, whole frame, the window mean as explicit shifted sums; a
    pair of foreground 4-neighbours is a crease when both normals are known, differ by more
    than ``crease_deg`` and (n_b - n_a) . (x_b - x_a) < 0 (:func:`locate_objects_reference`).
    """
    k, win = max(1, int(p.crease_baseline)), max(1, int(p.crease_window))
    normal_full = np.zeros(world.shape)
    known_full = np.zeros(fg.shape, bool)
    if not fg.any():
        return normal_full, known_full
    # Only foreground points count: the foreground's box grown by a normal's reach is enough.
    rows, cols = np.nonzero(fg)
    m = k + win // 2
    box = (slice(max(int(rows.min()) - m, 0), int(rows.max()) + 1 + m),
           slice(max(int(cols.min()) - m, 0), int(cols.max()) + 1 + m))
    world, fg = world[box], fg[box]
    h, w = fg.shape
    q = np.where(fg[..., None], world - np.asarray(origin, np.float64), np.nan)
    # Height-step pairs (as depth_cut) and the differences that span one.
    z = world[..., 2]
    with np.errstate(invalid='ignore'):
        jx = (np.abs(z[:, 1:] - z[:, :-1]) > p.depth_step) & fg[:, 1:] & fg[:, :-1]
        jy = (np.abs(z[1:] - z[:-1]) > p.depth_step) & fg[1:] & fg[:-1]
    # pixel c's row difference spans the pairs c - k .. c + k - 1 (pair i: pixels i, i + 1)
    jxp, jyp = np.pad(jx, ((0, 0), (k, k))), np.pad(jy, ((k, k), (0, 0)))
    spans = np.zeros((h, w), bool)
    for i in range(2 * k):
        spans |= jxp[:, i:i + w] | jyp[i:i + h]
    unit = np.full((h, w, 3), np.nan)
    if h > 2 * k and w > 2 * k:
        unit[k:-k, k:-k] = np.cross(q[k:-k, 2 * k:] - q[k:-k, :-2 * k],
                                    q[2 * k:, k:-k] - q[:-2 * k, k:-k])
    with np.errstate(invalid='ignore', divide='ignore'):
        unit = unit / np.linalg.norm(unit, axis=-1, keepdims=True)
    valid = np.isfinite(unit).all(axis=-1) & ~spans
    unit[~valid] = 0.0
    # Mean over the window (nothing outside the frame): explicit shifted sums.
    lo = win // 2
    pad_u = np.pad(unit, ((lo, win - 1 - lo), (lo, win - 1 - lo), (0, 0)))
    pad_v = np.pad(valid.astype(np.float64), ((lo, win - 1 - lo), (lo, win - 1 - lo)))
    total = sum(pad_u[i:i + h, j:j + w] for i in range(win) for j in range(win)) / win ** 2
    count = sum(pad_v[i:i + h, j:j + w] for i in range(win) for j in range(win)) / win ** 2
    size = np.linalg.norm(total, axis=-1)
    known = fg & (count > 0.5) & (size > 1e-6)
    normal = total / np.where(known, size, 1.0)[..., None]
    towards = np.where(known, (np.nan_to_num(q) * normal).sum(axis=-1), 0.0) > 0
    normal[towards] *= -1.0
    normal_full[box], known_full[box] = normal, known
    return normal_full, known_full


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
