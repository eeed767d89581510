# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Motion blur: colour leaking onto the floor beside an object, and its smear in region sums.

Part of :mod:`edge_loop.kernels.object_locator` (the method is in its docstring).
"""

from __future__ import annotations

import cv2
import numpy as np

from edge_loop.kernels.camera import Intrinsics
from edge_loop.kernels.object_locator.colour import LINEAR_LUT32, _chroma_px, linear_light
from edge_loop.kernels.object_locator.objects import _scaled_px
from edge_loop.kernels.object_locator.params import LocatorParams

# blur_leak works on every LEAK_STRIDE-th pixel of every LEAK_STRIDE-th row (it averages
# thousands of pixels); the floor's colour is the median over every 8th of those.
LEAK_STRIDE = 2
LEAK_FLOOR_STRIDE = 8


def _grid_pixels(color_rgb: np.ndarray, mask: np.ndarray, step: int) -> np.ndarray:
    """(N, 3) pixels of ``color_rgb`` at the True cells of ``mask`` (a ``step`` grid of it).

    Gathered by flat index: a boolean mask over a strided view is slow.
    """
    r, c = np.divmod(np.flatnonzero(mask), mask.shape[1])
    return color_rgb[r * step, c * step]


def _leak_difference(color_rgb: np.ndarray, floor: np.ndarray, beside: np.ndarray,
                     above: np.ndarray) -> float:
    f = LEAK_FLOOR_STRIDE
    sample = np.zeros_like(floor)
    sample[::f, ::f] = floor[::f, ::f]
    if not sample.any() or not beside.any() or not above.any():
        return 0.0
    ref = np.median(_chroma_px(_grid_pixels(color_rgb, sample, LEAK_STRIDE)), axis=0)
    return float(
        np.abs(_chroma_px(_grid_pixels(color_rgb, beside, LEAK_STRIDE)) - ref).sum(axis=1).mean()
        - np.abs(_chroma_px(_grid_pixels(color_rgb, above, LEAK_STRIDE)) - ref).sum(axis=1).mean())


def _raised_and_floor(height: np.ndarray, p: LocatorParams) -> tuple[np.ndarray, np.ndarray]:
    """Raised and floor masks of the ``LEAK_STRIDE`` grid of ``height``."""
    height = height[::LEAK_STRIDE, ::LEAK_STRIDE]
    with np.errstate(invalid='ignore'):
        raised = (height > p.min_height) & (height < p.max_height)
        floor = height < p.min_height     # False where NaN
    return raised, floor


def blur_leak(color_rgb: np.ndarray, height: np.ndarray, p: LocatorParams,
              intr: Intrinsics) -> float:
    """How much more the frame's raised things smear colour over the floor beside them than above.

    Raised = height in (``min_height``, ``max_height``) anywhere in the frame (the tray's
    walls too: long straight edges whose smear shows a blur even beside no object); floor =
    height below ``min_height``. Returns the mean L1 distance of the chromaticity
    (RGB / (R + G + B + 30)) from the floor's median one over the floor pixels with a raised
    pixel within ``blur_probe_px`` on their row, minus that over those with one on their
    column, neither 8-adjacent to a raised pixel (0.0 when either set is empty). All on the
    ``LEAK_STRIDE`` grid, ``blur_probe_px`` scaled to it.
    """
    r = max(1, _scaled_px(p.blur_probe_px, intr) // LEAK_STRIDE)
    raised, floor = _raised_and_floor(height, p)
    r8 = raised.astype(np.uint8)
    clear = floor & ~(cv2.dilate(r8, np.ones((3, 3), np.uint8)) > 0)
    beside = clear & (cv2.dilate(r8, np.ones((1, 2 * r + 1), np.uint8)) > 0)
    above = clear & (cv2.dilate(r8, np.ones((2 * r + 1, 1), np.uint8)) > 0)
    return _leak_difference(color_rgb, floor, beside, above)


def blur_leak_reference(color_rgb: np.ndarray, height: np.ndarray, p: LocatorParams,
                        intr: Intrinsics) -> float:
    """:func:`blur_leak` with shifted copies instead of morphology."""
    r = max(1, _scaled_px(p.blur_probe_px, intr) // LEAK_STRIDE)
    raised, floor = _raised_and_floor(height, p)
    h, w = raised.shape
    pad = np.pad(raised, r)
    touch = np.zeros_like(raised)
    row_near = np.zeros_like(raised)
    col_near = np.zeros_like(raised)
    for d in range(-r, r + 1):
        row_near |= pad[r:r + h, r + d:r + d + w]
        col_near |= pad[r + d:r + d + h, r:r + w]
        if abs(d) <= 1:
            for e in (-1, 0, 1):
                touch |= pad[r + d:r + d + h, r + e:r + e + w]
    return _leak_difference(color_rgb, floor, floor & ~touch & row_near,
                            floor & ~touch & col_near)


def _smear_window(labels: np.ndarray, frame_width: int, c0: int, p: LocatorParams,
                  intr: Intrinsics) -> tuple[int, int, np.ndarray]:
    """Reach of the smear (px), first column of the window, and the labels widened to it."""
    leak = _scaled_px(p.blur_leak_px, intr)
    h, w = labels.shape
    a0, a1 = max(c0 - leak, 0), min(c0 + w + leak, frame_width)
    lab = np.zeros((h, a1 - a0), np.int64)
    lab[:, c0 - a0:c0 - a0 + w] = labels
    return leak, a0, lab


def blur_smear_sums(labels: np.ndarray, color_rgb: np.ndarray, height: np.ndarray, r0: int,
                    c0: int, n: int, p: LocatorParams, intr: Intrinsics) -> np.ndarray | None:
    """(n + 1, 3) linear light each region lost to the floor beside it on its rows.

    ``labels``: (h, w) region (1..n, 0 = none) of each foreground pixel of the crop whose
    top-left pixel is (``r0``, ``c0``) in the frame (``color_rgb``, ``height``: whole frame).
    A floor pixel (height below ``min_height``) within ``blur_leak_px`` of a region on its
    row, left or right, gives its light minus the floor's under it to the nearest such
    region (half to each at a tie); the floor's light is the mean of the floor pixels
    beyond that reach within a ``blur_floor_px`` square around it (the window's mean where
    there are none). The window is the crop widened by ``blur_leak_px`` on both sides.
    None when the window has no floor beyond the reach.
    """
    leak, a0, lab = _smear_window(labels, color_rgb.shape[1], c0, p, intr)
    h, cw = lab.shape
    a1 = a0 + cw
    own = lab > 0
    with np.errstate(invalid='ignore'):
        floor = (height[r0:r0 + h, a0:a1] < p.min_height) & ~own
    cols = np.arange(cw)[None, :]
    left = np.maximum.accumulate(np.where(own, cols, -1), axis=1)
    right = np.minimum.accumulate(np.where(own, cols, cw)[:, ::-1], axis=1)[:, ::-1]
    dl, dr = cols - left, right - cols       # left < 0 / right = cw: no region that side
    lok = floor & (left >= 0) & (dl <= leak)
    rok = floor & (right < cw) & (dr <= leak)
    far = floor & ~lok & ~rok
    if not far.any():
        return None
    window = color_rgb[r0:r0 + h, a0:a1]
    lin = LINEAR_LUT32[window] if window.dtype == np.uint8 \
        else linear_light(window).astype(np.float32)
    k = 2 * (_scaled_px(p.blur_floor_px, intr) // 2) + 1
    farf = far.astype(np.float32)
    on_far = lin * farf[..., None]
    den = cv2.boxFilter(farf, -1, (k, k), normalize=False, borderType=cv2.BORDER_CONSTANT)
    num = cv2.boxFilter(on_far, -1, (k, k), normalize=False, borderType=cv2.BORDER_CONSTANT)
    out = np.zeros((n + 1, 3))
    idx = np.flatnonzero(lok | rok)
    if idx.size == 0:
        return out
    d = den.reshape(-1)[idx]
    under = num.reshape(-1, 3)[idx] / np.maximum(d, 1.0)[:, None]
    if (d <= 0.5).any():
        under[d <= 0.5] = on_far.reshape(-1, 3).sum(axis=0) / farf.sum()
    smear = lin.reshape(-1, 3)[idx] - under
    lo, ro = lok.reshape(-1)[idx], rok.reshape(-1)[idx]
    dli, dri = dl.reshape(-1)[idx], dr.reshape(-1)[idx]
    wl = np.where(lo, np.where(ro, (dli < dri) + 0.5 * (dli == dri), 1.0), 0.0)
    wr = np.where(ro, np.where(lo, (dri < dli) + 0.5 * (dli == dri), 1.0), 0.0)
    row = idx // cw
    lab_l = lab[row, np.maximum(left.reshape(-1)[idx], 0)]
    lab_r = lab[row, np.minimum(right.reshape(-1)[idx], cw - 1)]
    for c in range(3):
        out[:, c] = (np.bincount(lab_l, wl * smear[:, c], n + 1)
                     + np.bincount(lab_r, wr * smear[:, c], n + 1))
    return out


def blur_smear_sums_reference(labels: np.ndarray, color_rgb: np.ndarray, height: np.ndarray,
                              r0: int, c0: int, n: int, p: LocatorParams,
                              intr: Intrinsics) -> np.ndarray | None:
    """:func:`blur_smear_sums` with a scan along each row and an integral image."""
    leak, a0, lab = _smear_window(labels, color_rgb.shape[1], c0, p, intr)
    h, cw = lab.shape
    a1 = a0 + cw
    win_h = np.asarray(height[r0:r0 + h, a0:a1], np.float64)
    floor = np.zeros((h, cw), bool)
    finite = np.isfinite(win_h)
    floor[finite] = win_h[finite] < p.min_height
    floor &= lab == 0
    owners = {}     # (r, c) -> [(region, weight)]
    for r in range(h):
        own_cols = np.flatnonzero(lab[r])
        for c in np.flatnonzero(floor[r]):
            near = []       # (distance, region) of the nearest region on each side
            before, after = own_cols[own_cols < c], own_cols[own_cols > c]
            if before.size and c - before[-1] <= leak:
                near.append((int(c - before[-1]), int(lab[r, before[-1]])))
            if after.size and after[0] - c <= leak:
                near.append((int(after[0] - c), int(lab[r, after[0]])))
            if near:
                best = min(d for d, _ in near)
                ties = [reg for d, reg in near if d == best]
                owners[(r, int(c))] = [(reg, 1.0 / len(ties)) for reg in ties]
    far = floor.copy()
    for q in owners:
        far[q] = False
    if not far.any():
        return None
    lin = linear_light(color_rgb[r0:r0 + h, a0:a1])
    half = _scaled_px(p.blur_floor_px, intr) // 2

    def integral(a: np.ndarray) -> np.ndarray:
        out = np.zeros((a.shape[0] + 1, a.shape[1] + 1) + a.shape[2:])
        out[1:, 1:] = a.cumsum(axis=0).cumsum(axis=1)
        return out

    den_i = integral(far.astype(np.float64))
    num_i = integral(lin * far[..., None])
    fallback = lin[far].mean(axis=0)
    out = np.zeros((n + 1, 3))
    for (r, c), shares in owners.items():
        ra, rb = max(r - half, 0), min(r + half + 1, h)
        ca, cb = max(c - half, 0), min(c + half + 1, cw)
        den = den_i[rb, cb] - den_i[ra, cb] - den_i[rb, ca] + den_i[ra, ca]
        num = num_i[rb, cb] - num_i[ra, cb] - num_i[rb, ca] + num_i[ra, ca]
        under = num / den if den > 0.5 else fallback
        for reg, share in shares:
            out[reg] += share * (lin[r, c] - under)
    return out
