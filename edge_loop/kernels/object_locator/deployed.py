# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The deployed locator: vectorised, on the foreground's bounding box (see the package docstring).

Part of :mod:`edge_loop.kernels.object_locator` (the method is in its docstring).
"""

from __future__ import annotations

import cv2
import numpy as np

from edge_loop.kernels.camera import Extrinsics, Intrinsics
from edge_loop.kernels.object_locator.blind_spots import near_blind_spot
from edge_loop.kernels.object_locator.colour import color_cut, crease_cut, depth_cut, hue_cut
from edge_loop.kernels.object_locator.merging import _merge_grown
from edge_loop.kernels.object_locator.necks import cut_labels_at_necks
from edge_loop.kernels.object_locator.objects import (
    DetectedObject,
    _score,
    _yaw_and_elongation,
    check_fill,
    check_inputs,
)
from edge_loop.kernels.object_locator.params import (
    DEFAULT_PARAMS,
    LocatorParams,
    sizing_intrinsics,
)
from edge_loop.kernels.object_locator.scene import HeightScene, height_scene


def locate_objects(color_rgb: np.ndarray | None, depth_m: np.ndarray, intrinsics: Intrinsics,
                   extrinsics: Extrinsics, params: LocatorParams | None = None,
                   scene: HeightScene | None = None,
                   fill: np.ndarray | None = None,
                   masks: tuple[np.ndarray, np.ndarray] | None = None) -> list[DetectedObject]:
    """Deployed version (vectorised; see the module docstring for the method).

    ``fill``: as in :func:`locate_objects_reference`. ``masks``: the per-pixel part computed
    elsewhere (a GPU, :class:`edge_loop.kernels.gpu.locator.LocatorMasks`): (H, W) bool
    foreground (height window and tray ROI) and (H, W) bool cut (colour, hue and depth steps),
    as :func:`edge_loop.kernels.gpu.locator.pixel_masks` defines them; everything after them
    (labelling, growing, merging, moments) runs here as without them.
    """
    p = params or DEFAULT_PARAMS
    check_inputs(color_rgb, depth_m, intrinsics)
    check_fill(fill, intrinsics)
    scene = scene or height_scene(depth_m, intrinsics, extrinsics)
    sized = sizing_intrinsics(intrinsics, extrinsics, p)   # object sizes in pixels
    w = intrinsics.width
    height = scene.height
    if masks is not None:
        fg_mask, cut_mask = masks
        for name, m in (('foreground', fg_mask), ('cut', cut_mask)):
            if np.shape(m) != height.shape:
                raise ValueError(f'{name} mask is {np.shape(m)} but camera_info says '
                                 f'{intrinsics.width}x{intrinsics.height}')
        fg_idx = np.flatnonzero(fg_mask)
        pts = scene.points(fg_idx)
    else:
        with np.errstate(invalid='ignore'):
            cand = np.flatnonzero((height > p.min_height) & (height < p.max_height))
        if cand.size == 0:
            return []
        pts = scene.points(cand)
        in_roi = ((pts[:, 0] > p.roi_x[0]) & (pts[:, 0] < p.roi_x[1])
                  & (pts[:, 1] > p.roi_y[0]) & (pts[:, 1] < p.roi_y[1]))
        fg_idx = cand[in_roi]
        pts = pts[in_roi]
    if fg_idx.size == 0:
        return []
    # Everything below works on the foreground's bounding box only.
    rows, cols = np.divmod(fg_idx, w)
    b = p.bridge_px
    h = intrinsics.height
    r0, r1 = max(int(rows[0]) - b, 0), min(int(rows[-1]) + 1 + b, h)   # fg_idx is sorted
    c0, c1 = max(int(cols.min()) - b, 0), min(int(cols.max()) + 1 + b, w)
    if fill is not None and fill.any():
        # Fill pixels may connect foreground parts through pixels outside their box.
        fr = np.flatnonzero(fill.any(axis=1))
        fc = np.flatnonzero(fill.any(axis=0))
        r0, r1 = min(r0, int(fr[0])), max(r1, int(fr[-1]) + 1)
        c0, c1 = min(c0, int(fc[0])), max(c1, int(fc[-1]) + 1)
    cw = c1 - c0
    crop_idx = (rows - r0) * cw + (cols - c0)
    mask = np.zeros((r1 - r0) * cw, np.uint8)
    mask[crop_idx] = 1
    mask = mask.reshape(r1 - r0, cw)
    # Pixels without depth next to the foreground connect it (depth holes at edges).
    no_depth = ~np.isfinite(scene.depth.reshape(h, w)[r0:r1, c0:c1])
    near_fg = cv2.dilate(mask, np.ones((2 * b + 1, 2 * b + 1), np.uint8),
                         borderType=cv2.BORDER_CONSTANT, borderValue=0)
    near = near_fg > 0
    if fill is not None:
        near |= fill[r0:r1, c0:c1]
    conn = mask | (no_depth & near).astype(np.uint8)
    n_parts, parts = cv2.connectedComponents(conn, connectivity=4, ltype=cv2.CV_32S)
    obj = parts.reshape(-1)[crop_idx].astype(np.int64)   # depth part of each pixel (1..)
    if color_rgb is not None:
        kept = mask.copy()
        if masks is not None:
            kept[masks[1][r0:r1, c0:c1]] = 0
        else:
            kept[color_cut(color_rgb, mask, r0, c0, p.color_step)] = 0
            if p.hue_step > 0:
                kept[hue_cut(color_rgb, mask, r0, c0, p)] = 0
            kept[depth_cut(height[r0:r1, c0:c1], mask, p.depth_step)] = 0
        if p.crease_deg > 0:    # on the CPU, after the per-pixel cuts wherever they ran
            kept[crease_cut(scene.depth.reshape(h, w), height, scene.rays.reshape(h, w, 3),
                            mask, r0, c0, p)] = 0
        n_pieces, pieces, stats, _ = cv2.connectedComponentsWithStats(
            kept, connectivity=4, ltype=cv2.CV_32S)
        piece = pieces.reshape(-1)[crop_idx].astype(np.int64)   # 0 = cut pixel
        size = stats[:, cv2.CC_STAT_AREA]
        major = size >= p.split_pixels_for(sized)
        major[0] = False
        if major.any():
            # Major pieces grow (4-neighbour steps, the higher rank wins a tie) over the rest
            # of their depth part: cut borders and small colour fragments.
            majors = np.flatnonzero(major)
            # piece lists the foreground in raster order: first occurrence = first pixel.
            if majors.size <= 16:
                first = np.array([int(np.argmax(piece == lbl)) for lbl in majors])
            else:
                present, first_at = np.unique(piece, return_index=True)
                first_of = np.zeros(n_pieces, np.int64)
                first_of[present] = first_at
                first = first_of[majors]
            rank = np.zeros(n_pieces, np.uint16)
            rank[majors[np.argsort(first)]] = np.arange(1, majors.size + 1, dtype=np.uint16)
            parts_with_major = np.zeros(n_parts, bool)
            parts_with_major[obj[major[piece]]] = True
            grown = np.zeros(mask.shape, np.uint16)
            grown.reshape(-1)[crop_idx] = rank[piece]
            allowed = (conn > 0) & parts_with_major[parts]
            cross = cv2.getStructuringElement(cv2.MORPH_CROSS, (3, 3))
            for _ in range(mask.shape[0] + mask.shape[1]):
                reach = cv2.dilate(grown, cross, borderType=cv2.BORDER_CONSTANT, borderValue=0)
                new = allowed & (grown == 0) & (reach > 0)
                if not new.any():
                    break
                grown[new] = reach[new]
            if majors.size > 1:
                grown = _merge_grown(grown, color_rgb, mask, rows, cols, crop_idx,
                                     near_fg > 0, no_depth, height[r0:r1, c0:c1], r0, c0,
                                     majors.size, p, intrinsics, height, sized)
            g = grown.reshape(-1)[crop_idx].astype(np.int64)
            obj = np.where(g > 0, n_parts + g, obj)
    min_pixels = p.min_pixels_for(sized)
    # Touching objects that no cut separated: their region's outline narrows between them.
    obj = cut_labels_at_necks(obj, rows, cols, color_rgb, p, sized, min_pixels)
    counts = np.bincount(obj)
    big = counts[obj] >= min_pixels
    partial = p.partial_min_pixels_for(intrinsics)
    if partial < min_pixels:
        maybe = (counts >= partial) & (counts < min_pixels)
        if maybe[obj].any():
            at_hole = near_blind_spot(scene.depth.reshape(h, w), p, intrinsics)[rows, cols]
            touches = np.bincount(obj, at_hole, counts.size) > 0
            big |= (maybe & touches)[obj]
    if not big.any():
        return []
    ids, first_idx = np.unique(obj[big], return_index=True)
    order = ids[np.argsort(first_idx)]      # by first pixel in raster order
    m = order.size
    remap = np.zeros(counts.size, np.int64)
    remap[order] = np.arange(1, m + 1)
    lab = np.where(big, remap[obj], 0)
    sel = np.flatnonzero(lab > 0)
    sel = sel[np.argsort(lab[sel], kind='stable')]
    lab, obj_pts, rows, cols = lab[sel] - 1, pts[sel], rows[sel], cols[sel]
    obj_idx = fg_idx[sel]
    count_i = np.bincount(lab, minlength=m)
    starts = np.concatenate([[0], np.cumsum(count_i)[:-1]])
    count = count_i.astype(np.float64)
    x = obj_pts[:, 0].astype(np.float64)
    y = obj_pts[:, 1].astype(np.float64)
    z = obj_pts[:, 2].astype(np.float64)
    mx = np.bincount(lab, x, m) / count
    my = np.bincount(lab, y, m) / count
    mz = np.bincount(lab, z, m) / count
    dx, dy = x - mx[lab], y - my[lab]
    sxx = np.bincount(lab, dx * dx, m) / count
    sxy = np.bincount(lab, dx * dy, m) / count
    syy = np.bincount(lab, dy * dy, m) / count
    top = np.maximum.reduceat(z, starts)
    u0, u1 = np.minimum.reduceat(cols, starts), np.maximum.reduceat(cols, starts)
    v0, v1 = np.minimum.reduceat(rows, starts), np.maximum.reduceat(rows, starts)
    objects = []
    for k in range(m):
        yaw, elong = _yaw_and_elongation(sxx[k], sxy[k], syy[k])
        n = int(count_i[k])
        objects.append(DetectedObject(
            position=np.array([mx[k], my[k], mz[k]]), yaw=yaw, pixel_count=n,
            mask_bbox=(int(u0[k]), int(v0[k]), int(u1[k]), int(v1[k])),
            score=_score(n, min_pixels), top=float(top[k]), elongation=elong,
            points=obj_pts[starts[k]:starts[k] + n], pixels=obj_idx[starts[k]:starts[k] + n]))
    return objects
