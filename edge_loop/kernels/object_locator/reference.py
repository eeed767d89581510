# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The plain reference locator: float64 geometry, explicit neighbour loops and flood fill.

Part of :mod:`edge_loop.kernels.object_locator` (the method is in its docstring).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from edge_loop.kernels.camera import Extrinsics, Intrinsics
from edge_loop.kernels.object_locator.blur import blur_leak_reference, blur_smear_sums_reference
from edge_loop.kernels.object_locator.colour import (
    chromaticity_reference,
    crease_reference,
    hue_reference,
    linear_light,
)
from edge_loop.kernels.object_locator.merging import gap_candidates, merge_regions
from edge_loop.kernels.object_locator.necks import cut_components_at_necks
from edge_loop.kernels.object_locator.objects import (
    DetectedObject,
    _score,
    check_fill,
    check_inputs,
    depth_in_metres,
)
from edge_loop.kernels.object_locator.params import (
    DEFAULT_PARAMS,
    LocatorParams,
    sizing_intrinsics,
)
from edge_loop.kernels.object_locator.scene import _foreground, world_points_reference


def _flood_fill(pixels: list[tuple[int, int]], mask: np.ndarray) -> list[list[tuple[int, int]]]:
    """4-connected components of ``mask`` seeded in raster order (breadth-first)."""
    h, w = mask.shape
    seen = np.zeros((h, w), bool)
    out = []
    for r, c in pixels:
        if seen[r, c]:
            continue
        seen[r, c] = True
        out.append([])
        queue = deque([(r, c)])
        while queue:
            pr, pc = queue.popleft()
            out[-1].append((int(pr), int(pc)))
            for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
                rr, cc = pr + dr, pc + dc
                if 0 <= rr < h and 0 <= cc < w and mask[rr, cc] and not seen[rr, cc]:
                    seen[rr, cc] = True
                    queue.append((rr, cc))
    return out


def near_blind_spot_reference(no_depth: np.ndarray, p: LocatorParams,
                              intr: Intrinsics) -> np.ndarray:
    """(H, W) bool: within ``bridge_px`` (Chebyshev) of a 4-connected hole of ``blind_hole_px``."""
    h, w = no_depth.shape
    large = np.zeros((h, w), bool)
    for hole in _flood_fill([(int(r), int(c)) for r, c in zip(*np.nonzero(no_depth))], no_depth):
        if len(hole) >= p.blind_hole_px_for(intr):
            for q in hole:
                large[q] = True
    b = p.bridge_px
    padded = np.pad(large, b)
    out = np.zeros((h, w), bool)
    for dr in range(2 * b + 1):
        for dc in range(2 * b + 1):
            out |= padded[dr:dr + h, dc:dc + w]
    return out


def locate_objects_reference(color_rgb: np.ndarray | None, depth_m: np.ndarray,
                             intrinsics: Intrinsics, extrinsics: Extrinsics,
                             params: LocatorParams | None = None,
                             fill: np.ndarray | None = None) -> list[DetectedObject]:
    """Plain version: float64 geometry, explicit neighbour loops and flood fill.

    ``fill`` (optional (H, W) bool): pixels that connect the foreground like the depth holes
    next to it do (only where depth is missing; see :func:`locate_objects_fused`).
    """
    p = params or DEFAULT_PARAMS
    check_inputs(color_rgb, depth_m, intrinsics)
    check_fill(fill, intrinsics)
    world = world_points_reference(depth_in_metres(depth_m), intrinsics, extrinsics)
    fg = _foreground(world, p)
    h, w = fg.shape
    chroma = None if color_rgb is None else chromaticity_reference(color_rgb)
    fg_pixels = [(int(r), int(c)) for r, c in zip(*np.nonzero(fg))]
    keep = fg.copy()
    if chroma is not None:
        hue, hue_known = hue_reference(color_rgb, p) if p.hue_step > 0 \
            else (None, np.zeros((h, w), bool))
        normal, normal_known = crease_reference(world, fg, extrinsics.translation, p) \
            if p.crease_deg > 0 else (None, np.zeros((h, w), bool))
        crease_cos = np.cos(np.radians(p.crease_deg))
        for r, c in fg_pixels:
            for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1)):
                rr, cc = r + dr, c + dc
                if 0 <= rr < h and 0 <= cc < w and fg[rr, cc] and (
                        np.abs(chroma[rr, cc] - chroma[r, c]).sum() > p.color_step
                        or abs(world[rr, cc, 2] - world[r, c, 2]) > p.depth_step
                        or (hue_known[rr, cc] and hue_known[r, c]
                            and np.abs(hue[rr, cc] - hue[r, c]).sum() > p.hue_step)
                        # a concave crease: the normals turn towards each other
                        or (normal_known[rr, cc] and normal_known[r, c]
                            and float(normal[rr, cc] @ normal[r, c]) < crease_cos
                            and float((normal[rr, cc] - normal[r, c])
                                      @ (world[rr, cc] - world[r, c])) < 0)):
                    keep[r, c] = False
                    break
    # Pixels without depth within bridge_px of the foreground connect it (holes at edges).
    no_depth = ~np.isfinite(world[..., 2])
    near_fg = np.zeros_like(fg)
    b = p.bridge_px
    padded = np.pad(fg, b)
    for dr in range(2 * b + 1):
        for dc in range(2 * b + 1):
            near_fg |= padded[dr:dr + h, dc:dc + w]
    # Floor around the objects: the colour a region blends into at its edges.
    background_sum = np.zeros(3)
    linear_background = np.zeros(3)
    if color_rgb is not None:
        for r, c in zip(*np.nonzero(near_fg & ~fg & ~no_depth)):
            background_sum += np.asarray(color_rgb[r, c], np.float64)
            linear_background += linear_light(color_rgb[r, c])
    if fill is not None:
        near_fg = near_fg | fill
    conn = fg | (no_depth & near_fg)
    depth_parts = _flood_fill([(int(r), int(c)) for r, c in zip(*np.nonzero(conn))], conn)
    pieces = _flood_fill([q for q in fg_pixels if keep[q]], keep)
    sized = sizing_intrinsics(intrinsics, extrinsics, p)   # object sizes in pixels
    min_pixels = p.min_pixels_for(sized)
    split_pixels = p.split_pixels_for(sized)
    piece_of = {q: i for i, piece in enumerate(pieces) for q in piece}
    components = []
    # Major pieces are regions, ranked in raster order of their first pixel over the image.
    rank_of = {} if chroma is None else {
        i: rank for rank, i in enumerate(
            (i for i, piece in enumerate(pieces) if len(piece) >= split_pixels), start=1)}
    grown: dict[tuple[int, int], int] = {}
    for part in depth_parts:
        majors = sorted({piece_of[q] for q in part if q in piece_of} & set(rank_of))
        if not majors:
            components.append([q for q in part if fg[q]])   # colour did not split it
            continue
        # Major pieces grow over the rest of the part one 4-neighbour step at a time; a pixel
        # reached by several in the same step joins the highest-ranked.
        grown.update({q: rank_of[i] for i in majors for q in pieces[i]})
        todo = [q for q in part if q not in grown]
        while todo:
            step = {}
            for r, c in todo:
                near = [grown[n] for n in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1))
                        if n in grown]
                if near:
                    step[(r, c)] = max(near)
            if not step:
                break
            grown.update(step)
            todo = [q for q in todo if q not in step]
    if grown:
        # Regions of one object (split by shading, a shadow, blur or an occluder) join again.
        sums = {rank: np.zeros(3) for rank in range(1, len(rank_of) + 1)}
        linear_sums = {rank: np.zeros(3) for rank in sums}
        hue_sums = {rank: np.zeros(3) for rank in sums}   # specular-free, unclipped pixels
        hue_counts = dict.fromkeys(sums, 0)
        counts = dict.fromkeys(sums, 0)
        contact: dict[tuple[int, int], int] = {}
        smooth: dict[tuple[int, int], int] = {}     # contact pairs without a height step
        perimeter = dict.fromkeys(sums, 0)   # pairs with a 4-neighbour not in the region
        for (r, c), rank in grown.items():
            if fg[r, c]:
                sums[rank] += np.asarray(color_rgb[r, c], np.float64)
                lin = linear_light(color_rgb[r, c])
                linear_sums[rank] += lin
                counts[rank] += 1
                if max(color_rgb[r, c]) < p.merge_clip_level:   # no channel clipped
                    hue_sums[rank] += lin - lin.min()
                    hue_counts[rank] += 1
            perimeter[rank] += sum(grown.get(q) != rank for q in (
                (r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)))
            for n in ((r + 1, c), (r, c + 1)):
                other = grown.get(n, rank)
                if other != rank:
                    key = (min(rank, other), max(rank, other))
                    contact[key] = contact.get(key, 0) + 1
                    if abs(world[n][2] - world[r, c, 2]) <= p.depth_step:   # False if NaN
                        smooth[key] = smooth.get(key, 0) + 1
        cells = {rank: [] for rank in sums}
        for q, rank in grown.items():
            if fg[q]:
                cells[rank].append(q)
        gap = p.merge_gap_px_for(sized)
        near = set()
        for i, j in gap_candidates(sums, background_sum, p):
            if cells[i] and cells[j]:
                a, b = np.array(cells[i]), np.array(cells[j])
                step = np.abs(a[:, None, :] - b[None, :, :]).max(axis=2)   # Chebyshev
                if step.min() <= gap:
                    near.add((i, j))
        restored = None
        if contact and p.blur_leak_px > 0 and blur_leak_reference(
                color_rgb, world[..., 2], p, intrinsics) > p.blur_leak_threshold:
            # The same window as the deployed crop: the foreground's box (and fill's) + bridge.
            fr, fc = np.nonzero(fg)
            m = p.bridge_px
            r0, r1 = max(int(fr.min()) - m, 0), min(int(fr.max()) + 1 + m, h)
            c0, c1 = max(int(fc.min()) - m, 0), min(int(fc.max()) + 1 + m, w)
            if fill is not None and fill.any():
                fr, fc = np.nonzero(fill)
                r0, r1 = min(r0, int(fr.min())), max(r1, int(fr.max()) + 1)
                c0, c1 = min(c0, int(fc.min())), max(c1, int(fc.max()) + 1)
            labels = np.zeros((r1 - r0, c1 - c0), np.int64)
            for rank, pixels in cells.items():
                for r, c in pixels:
                    labels[r - r0, c - c0] = rank
            smear = blur_smear_sums_reference(labels, color_rgb, world[..., 2], r0, c0,
                                              len(sums), p, intrinsics)
            if smear is not None:
                restored = {rank: np.clip(linear_sums[rank] + smear[rank], 0.0,
                                          float(counts[rank])) for rank in sums}
        root = merge_regions(sums, counts, contact, background_sum, p, sized, near,
                             smooth, linear_sums, linear_background, perimeter, restored,
                             (hue_sums, hue_counts)
                             if p.merge_hue_veto > 0 or p.merge_hue_join > 0 else None)
        groups: dict[int, list[tuple[int, int]]] = {rank: [] for rank in set(root.values())}
        for rank, pixels in cells.items():
            groups[root[rank]] += pixels
        components += list(groups.values())
    # Touching objects that no cut separated: their region's outline narrows between them.
    components = cut_components_at_necks(components, color_rgb, p, sized, min_pixels)
    # A component at a blind spot of the depth camera is cut off by it, not small.
    partial = p.partial_min_pixels_for(intrinsics)
    blind = None
    if partial < min_pixels and any(partial <= len(c) < min_pixels for c in components):
        blind = near_blind_spot_reference(no_depth, p, intrinsics)
    components = sorted((c for c in components if len(c) >= min_pixels or (
        blind is not None and len(c) >= partial and any(blind[q] for q in c))), key=min)
    objects = []
    for pixels in components:
        pixels = sorted(pixels)   # raster order, as the deployed path lists them
        rows = np.array([q[0] for q in pixels])
        cols = np.array([q[1] for q in pixels])
        pts = world[rows, cols]
        centre = pts.mean(axis=0)
        cov = np.cov(pts[:, :2].T, bias=True)
        evals, evecs = np.linalg.eigh(cov)
        major = evecs[:, 1]
        yaw = float(np.arctan2(major[1], major[0]))
        if yaw <= -np.pi / 2:
            yaw += np.pi
        elif yaw > np.pi / 2:
            yaw -= np.pi
        elong = float(np.sqrt(max(evals[1], 1e-12) / max(evals[0], 1e-12)))
        objects.append(DetectedObject(
            position=centre, yaw=yaw, pixel_count=len(pixels),
            mask_bbox=(int(cols.min()), int(rows.min()), int(cols.max()), int(rows.max())),
            score=_score(len(pixels), min_pixels), top=float(pts[:, 2].max()),
            elongation=elong, points=pts.astype(np.float32), pixels=rows * w + cols))
    return objects
