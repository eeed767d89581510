# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Region merging: which touching (or nearly touching) colour regions are one object.

Part of :mod:`edge_loop.kernels.object_locator` (the method is in its docstring).
"""

from __future__ import annotations

import cv2
import numpy as np

from edge_loop.kernels.camera import Intrinsics
from edge_loop.kernels.object_locator.blur import blur_leak, blur_smear_sums
from edge_loop.kernels.object_locator.colour import (
    _blend_distance,
    _chroma,
    _clip_distance,
    _floor_chroma,
    _hue_distance,
    _hue_vetoed,
    linear_light,
)
from edge_loop.kernels.object_locator.pair_veto import vetoed_pairs
from edge_loop.kernels.object_locator.params import LocatorParams


def gap_candidates(rgb_sums: dict[int, np.ndarray], background_sum: np.ndarray,
                   p: LocatorParams, vivid_only: bool = True) -> list[tuple[int, int]]:
    """Pairs ``(i, j)``, ``i < j``, of regions that may join across a gap.

    Their mean chromaticities are within ``merge_color`` and (``vivid_only``) both differ
    from the floor's by at least ``merge_gap_min_colour``.
    """
    bg = _floor_chroma(background_sum)
    chroma = {i: _chroma(np.asarray(v, np.float64)) for i, v in rgb_sums.items()}
    vivid = sorted(i for i, c in chroma.items()
                   if not vivid_only or float(np.abs(c - bg).sum()) >= p.merge_gap_min_colour)
    return [(i, j) for k, i in enumerate(vivid) for j in vivid[k + 1:]
            if float(np.abs(chroma[i] - chroma[j]).sum()) < p.merge_color]


def merge_regions(rgb_sums: dict[int, np.ndarray], counts: dict[int, int],
                  contact: dict[tuple[int, int], int], background_sum: np.ndarray,
                  p: LocatorParams, intr: Intrinsics,
                  near: set[tuple[int, int]] | None = None,
                  smooth: dict[tuple[int, int], int] | None = None,
                  linear_sums: dict[int, np.ndarray] | None = None,
                  linear_background: np.ndarray | None = None,
                  perimeter: dict[int, int] | None = None,
                  restored: dict[int, np.ndarray] | None = None,
                  hue: tuple[dict[int, np.ndarray], dict[int, int]] | None = None
                  ) -> dict[int, int]:
    """Join touching regions of one object; returns region -> surviving region (the lowest id).

    Shared by both implementations (it works on per-region sums, not on pixels). Each region
    has the float64 sum of its foreground pixels' RGB (``rgb_sums``), its pixel count and,
    per pair ``(i, j)``, ``i < j``, the 4-neighbour pixel pairs it shares with the other
    (``contact``). Mean chromaticity (RGB / (R + G + B)) is unchanged by exposure and
    shading, unlike the per-pixel cut that made the regions. Repeatedly the closest pair
    sharing at least ``merge_min_contact`` pairs and at least ``merge_contact_len`` x
    sqrt(smaller count) pairs (not two objects touching at a corner) is joined while its
    distance is below
    ``merge_color`` (``merge_small_color`` when one region has fewer than
    ``merge_small_pixels``). The distance of a pair is the smaller of the L1 between their
    mean chromaticities and the blend distance: the L1 from the linear-light mean
    chromaticity (``linear_sums``: sums of the pixels' :func:`linear_light`; the
    display sums when None) of the region nearer the floor's to the other's blended with up
    to ``merge_max_blend`` of the floor around the objects (``background_sum``, in linear
    light ``linear_background``): a piece whose colour is one region blended with the floor
    (motion blur, a soft edge) belongs to that region, if they share at least
    ``merge_blend_len`` x sqrt(smaller count) pairs and, when the blended piece is the larger
    region, it has at most ``merge_blend_width`` (VGA) pixels per shared pair (a band along
    the other, not a pale object beside it). (Blends with another neighbour's colour were
    tried too: on validation scenes they joined different objects.) A pair whose shared
    pairs without a height step over ``depth_step`` (``smooth``, per pair ``(i, j)``, both
    heights known) number at least ``merge_smooth_frac`` of its contact and at least
    ``merge_smooth_len`` x sqrt(smaller count) joins when the L1 between their mean
    chromaticities is below ``merge_smooth_color`` (one continuous surface). Pairs in
    ``near`` (``i < j``, from :func:`gap_candidates`, whose pixels come within
    ``merge_gap_px``, Chebyshev: parts of one object separated by an occluder or by a part
    too low or thin for depth) join when their mean chromaticities are within
    ``merge_color`` and both differ from the floor's by at least ``merge_gap_min_colour``
    (washed-out colours, under glare or overexposure, all look alike). Touching regions whose
    dominant channel is clipped (mean at least ``merge_clip_level``) are also compared over
    their unclipped channels only (:func:`_clip_distance`) and join when that L1 is below
    ``merge_clip_color`` (that L1 is then the pair's distance, when smaller): the
    overexposed lit and shaded faces of one object, split at its own occluding edge. A
    region whose shared border with the other is at least ``merge_enclosed_frac`` of its
    ``perimeter`` (4-neighbour pairs with anything not in it; no test when None), at least
    ``merge_enclosed_smooth`` of it smooth as above, lies inside the other's outline on one
    surface and joins up to ``merge_enclosed_color``. In a frame blurred along its rows,
    ``restored`` holds each region's linear-light sum with the light it smeared over the
    floor summed back (:func:`blur_smear_sums`); a pair whose plain and blend tests fail
    joins when the L1 between those restored mean chromaticities is below
    ``merge_blur_color`` or the L1 between the restored mean linear colours is below
    ``merge_blur_linear`` (dark objects, whose chromaticity is noise). ``hue`` holds per
    region the sum of its unclipped pixels' specular-free colour (linear light less its
    smallest channel) and their count; no pair whose hues differ by more than
    ``merge_hue_veto`` joins (:func:`_hue_vetoed`), except in a blurred frame (``restored``
    given) and a region inside the other's outline (the enclosure test); a pair whose hues
    are within ``merge_hue_join`` joins (:func:`_hue_distance`: one surface, washed unevenly
    by added white light). Before any of this, a touching pair that the learned veto
    (:mod:`.pair_veto`, ``merge_pair_veto``) finds to be two objects loses its contact, smooth
    contact and gap candidacy: it never joins directly.
    """
    sums = {i: np.asarray(v, np.float64) for i, v in rgb_sums.items()}
    counts = dict(counts)
    contact = dict(contact)
    smooth = dict(smooth or {})
    near = set(near or ())
    # Pairs the learned veto finds to be two objects never join directly (.pair_veto); the hue
    # is unknown to it in a blurred frame, as to the rules below.
    vetoed = vetoed_pairs(rgb_sums, rgb_sums if linear_sums is None else linear_sums, counts,
                          contact, smooth, perimeter, hue if restored is None else None, p, intr)
    if vetoed:
        contact = {k: v for k, v in contact.items() if k not in vetoed}
        smooth = {k: v for k, v in smooth.items() if k not in vetoed}
        near -= vetoed
    perimeter = dict(perimeter) if perimeter is not None and p.merge_enclosed_frac > 0 \
        else None
    bg = _floor_chroma(background_sum)
    if linear_sums is None:     # no linear-light sums given: blend in display values
        linear_sums, linear_background = rgb_sums, background_sum
    lsums = {i: np.asarray(v, np.float64) for i, v in linear_sums.items()}
    lbg = _floor_chroma(np.asarray(linear_background, np.float64))
    min_contact = p.merge_min_contact_for(intr)
    small_px = p.merge_small_pixels_for(intr)
    root = {i: i for i in sums}
    rsums = None if restored is None else {
        i: np.asarray(v, np.float64) for i, v in restored.items()}
    hue_px = p.merge_hue_min_px_for(intr)
    # No hue veto in a blurred frame (restored given): blur mixes the floor's hue in.
    hsums, hcounts = ({i: np.asarray(v, np.float64) for i, v in hue[0].items()},
                      dict(hue[1])) if hue is not None and rsums is None else (None, None)

    def vetoed(i: int, j: int) -> bool:
        return hsums is not None and _hue_vetoed(hsums[i], hcounts[i], hsums[j], hcounts[j],
                                                 p, hue_px)

    def hue_distance(i: int, j: int) -> float:
        return _hue_distance(hsums[i], hcounts[i], hsums[j], hcounts[j], p, hue_px) \
            if hsums is not None and p.merge_hue_join > 0 else np.nan

    while True:
        chroma = {i: _chroma(v) for i, v in sums.items()}
        lchroma = {i: _chroma(v) for i, v in lsums.items()}
        best = None
        for i, j in sorted(set(contact) | near):
            plain = float(np.abs(chroma[i] - chroma[j]).sum())
            if (i, j) in near and plain < p.merge_color and (best is None or plain < best[0]) \
                    and min(np.abs(chroma[i] - bg).sum(),
                            np.abs(chroma[j] - bg).sum()) >= p.merge_gap_min_colour \
                    and not vetoed(i, j):
                best = (plain, i, j)
            if contact.get((i, j), 0) < min_contact:
                continue
            s, lg = (i, j) if counts[i] < counts[j] else (j, i)
            if contact[(i, j)] < p.merge_contact_len * np.sqrt(counts[s]):
                continue
            d = plain
            # The blended candidate: the region nearer the floor's colour.
            b, o = (lg, s) if np.abs(lchroma[lg] - lbg).sum() < np.abs(lchroma[s] - lbg).sum() \
                else (s, lg)
            if contact[(i, j)] >= p.merge_blend_len * np.sqrt(counts[s]) and (
                    b == s or counts[b] <= p.merge_blend_width_for(intr) * contact[(i, j)]):
                d = min(d, _blend_distance(lchroma[b], lchroma[o], lbg, p.merge_max_blend))
            limit = p.merge_small_color if counts[s] < small_px else p.merge_color
            if rsums is not None and d >= limit:
                smear = float(np.abs(_chroma(rsums[i]) - _chroma(rsums[j])).sum())
                if smear < p.merge_blur_color:
                    d, limit = smear, p.merge_blur_color   # one object, blurred unevenly
                else:
                    dark = float(np.abs(rsums[i] / counts[i] - rsums[j] / counts[j]).sum())
                    if dark < p.merge_blur_linear:
                        d, limit = dark, p.merge_blur_linear
            sm = smooth.get((i, j), 0)
            if plain < p.merge_smooth_color and sm >= p.merge_smooth_frac * contact[(i, j)] \
                    and sm >= p.merge_smooth_len * np.sqrt(counts[s]):
                limit = p.merge_smooth_color    # (not for blends: a floor-coloured object)
            enclosed = (perimeter is not None and sm >= p.merge_enclosed_smooth * contact[(i, j)]
                        and contact[(i, j)] >= p.merge_enclosed_frac
                        * min(perimeter[i], perimeter[j]))
            if enclosed:
                limit = max(limit, p.merge_enclosed_color)   # inside the other's outline
            hd = hue_distance(i, j)
            if hd < p.merge_hue_join and d >= limit \
                    and contact[(i, j)] >= p.merge_hue_join_len * np.sqrt(counts[s]) \
                    and abs(lsums[i].min() / counts[i] - lsums[j].min() / counts[j]) \
                    >= p.merge_hue_join_white:
                d, limit = hd, p.merge_hue_join     # one hue, washed unevenly (glare)
            clip = _clip_distance(sums[i], counts[i], sums[j], counts[j], p.merge_clip_level)
            if clip < p.merge_clip_color and (d >= limit or clip < d):
                d, limit = clip, p.merge_clip_color     # an overexposed object's faces
            # A region inside the other's outline is part of it whatever its hue (a print).
            if d < limit and (best is None or d < best[0]) and (enclosed or not vetoed(i, j)):
                best = (d, i, j)
        if best is None:
            break
        _, i, j = best
        sums[i] = sums[i] + sums.pop(j)
        lsums[i] = lsums[i] + lsums.pop(j)
        if rsums is not None:
            rsums[i] = rsums[i] + rsums.pop(j)
        if hsums is not None:
            hsums[i] = hsums[i] + hsums.pop(j)
            hcounts[i] += hcounts.pop(j)
        counts[i] += counts.pop(j)
        if perimeter is not None:
            perimeter[i] += perimeter.pop(j) - 2 * contact.get((i, j), 0)
        for k, v in root.items():
            if v == j:
                root[k] = i
        contact = _relabel_pairs(contact, i, j)
        smooth = _relabel_pairs(smooth, i, j)
        near = {(min(a, b), max(a, b)) for a, b in
                ((i if a == j else a, i if b == j else b) for a, b in near) if a != b}
    return root


def _relabel_pairs(pairs: dict[tuple[int, int], int], i: int, j: int
                   ) -> dict[tuple[int, int], int]:
    """Pair counts after region ``j`` joined region ``i`` (pairs inside ``i`` dropped)."""
    merged: dict[tuple[int, int], int] = {}
    for (a, b), n in pairs.items():
        a, b = (i if a == j else a), (i if b == j else b)
        if a != b:
            key = (min(a, b), max(a, b))
            merged[key] = merged.get(key, 0) + n
    return merged


def _merge_grown(grown: np.ndarray, color_rgb: np.ndarray, mask: np.ndarray,
                 rows: np.ndarray, cols: np.ndarray, crop_idx: np.ndarray,
                 near_fg: np.ndarray, no_depth: np.ndarray, height: np.ndarray, r0: int,
                 c0: int, n: int, p: LocatorParams, intr: Intrinsics,
                 frame_height: np.ndarray, sized: Intrinsics | None = None) -> np.ndarray:
    """Region statistics of the grown labels (crop) and :func:`merge_regions` applied.

    ``sized``: the intrinsics object sizes scale with (:func:`sizing_intrinsics`; ``intr``
    when None); ``intr`` sizes the blur probes (image pixels).
    """
    sized = sized or intr
    f = mask.astype(bool)
    lab = grown.reshape(-1)[crop_idx].astype(np.intp)      # region of each foreground pixel
    px = color_rgb[rows, cols]                             # gathered: any strides
    sums = np.stack([np.bincount(lab, px[:, k], n + 1) for k in range(3)], axis=1)
    px_linear = linear_light(px)
    linear = np.stack([np.bincount(lab, px_linear[:, k], n + 1) for k in range(3)], axis=1)
    counts = np.bincount(lab, None, n + 1)
    keys, flat = [], []
    # Perimeter: pairs of a region's pixel with a 4-neighbour outside it, the crop's edge
    # included (the foreground reaches it only at the image edge).
    perimeter_px = sum(np.bincount(edge, None, n + 1) for edge in (
        grown[0], grown[-1], grown[:, 0], grown[:, -1])).astype(np.int64)
    for a, b, ha, hb in ((grown[:-1], grown[1:], height[:-1], height[1:]),
                         (grown[:, :-1], grown[:, 1:], height[:, :-1], height[:, 1:])):
        differ = a != b
        perimeter_px += np.bincount(a[differ], None, n + 1).astype(np.int64)
        perimeter_px += np.bincount(b[differ], None, n + 1).astype(np.int64)
        m = differ & (a > 0) & (b > 0)
        a, b = a[m].astype(np.int64), b[m].astype(np.int64)
        keys.append(np.minimum(a, b) * (n + 1) + np.maximum(a, b))
        with np.errstate(invalid='ignore'):
            flat.append(np.abs(ha[m] - hb[m]) <= p.depth_step)    # False where NaN
    key = np.concatenate(keys)
    flat_key = key[np.concatenate(flat)]
    if n < 512:     # a dense table is faster than sorting; too big for many regions
        pair_count = np.bincount(key, minlength=(n + 1) * (n + 1))
        pair = np.flatnonzero(pair_count)
        pair_count = pair_count[pair]
        smooth_count = np.bincount(flat_key, minlength=(n + 1) * (n + 1))[pair]
    else:
        pair, pair_count = np.unique(key, return_counts=True)
        flat_key = np.sort(flat_key)
        smooth_count = np.searchsorted(flat_key, pair, side='right') \
            - np.searchsorted(flat_key, pair, side='left')
    contact = {divmod(int(k), n + 1): int(c) for k, c in zip(pair, pair_count)}
    smooth = {divmod(int(k), n + 1): int(c) for k, c in zip(pair, smooth_count) if c}
    region_sums = {i: sums[i] for i in range(1, n + 1)}
    if not contact and not gap_candidates(region_sums, np.zeros(3), p,
                                          vivid_only=False):
        return grown            # nothing could join (no contact, no two alike in colour)
    floor_r, floor_c = np.nonzero(near_fg & ~f & ~no_depth)
    floor_px = color_rgb[floor_r + r0, floor_c + c0]
    background_sum = floor_px.sum(axis=0, dtype=np.float64)
    linear_background = linear_light(floor_px).sum(axis=0)
    near = set()
    candidates = gap_candidates(region_sums, background_sum, p)
    if candidates:
        gap = p.merge_gap_px_for(sized)
        cells = np.where(f, grown, 0)
        square = np.ones((2 * gap + 1, 2 * gap + 1), np.uint8)
        for i in sorted({i for i, _ in candidates}):
            others = np.array([j for a, j in candidates if a == i])
            reach = cv2.dilate((cells == i).astype(np.uint8), square,
                               borderType=cv2.BORDER_CONSTANT, borderValue=0)
            hit = np.unique(cells[reach > 0])
            near |= {(i, int(j)) for j in others[np.isin(others, hit)]}
    restored = None
    if contact and p.blur_leak_px > 0:
        if blur_leak(color_rgb, frame_height, p, intr) > p.blur_leak_threshold:
            smear = blur_smear_sums(np.where(f, grown, 0), color_rgb, frame_height, r0, c0, n,
                                    p, intr)
            if smear is not None:
                restored = {i: np.clip(linear[i] + smear[i], 0.0, float(counts[i]))
                            for i in range(1, n + 1)}
    hue = None
    if (p.merge_hue_veto > 0 or p.merge_hue_join > 0) and restored is None:
        # (merge_regions ignores the hues when blurred)
        unclipped = px.max(axis=1) < p.merge_clip_level
        sf = np.where(unclipped[:, None], px_linear - px_linear.min(axis=1, keepdims=True), 0.0)
        hsum = np.stack([np.bincount(lab, sf[:, k], n + 1) for k in range(3)], axis=1)
        hn = np.bincount(lab, unclipped, n + 1)
        hue = ({i: hsum[i] for i in range(1, n + 1)}, {i: int(hn[i]) for i in range(1, n + 1)})
    root = merge_regions(region_sums, {i: int(counts[i]) for i in range(1, n + 1)}, contact,
                         background_sum, p, sized, near, smooth,
                         {i: linear[i] for i in range(1, n + 1)}, linear_background,
                         {i: int(perimeter_px[i]) for i in range(1, n + 1)}, restored, hue)
    lut = np.zeros(n + 1, grown.dtype)
    for i, r in root.items():
        lut[i] = r
    return lut[grown]
