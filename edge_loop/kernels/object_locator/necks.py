# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Cut a region at the necks of its outline: touching objects that colour and depth missed.

Part of :mod:`edge_loop.kernels.object_locator` (the method is in its docstring).

Two objects of one colour that touch side by side, seen from any camera pose, leave no colour
edge, no height step and often no crease between them; what is left is their *shape*: the
region's outline narrows where they meet. In the distance transform of the region (each
pixel's distance to the outline, i.e. the radius of the largest disc centred there) each
object is a peak and the contact a saddle between them. A region is cut when it has two peaks
of at least ``min_peak`` pixels whose saddle lies at most ``ratio`` times the lower peak:
two discs of radius r pressed together meet at a saddle of ~0 (always cut), a single convex
object has one peak (never cut), a dumbbell-shaped single object is cut only if its waist is
narrower than ``ratio`` of its smaller end. The cut itself: the distance
transform's peaks (the cores) grown back over the region at one pixel a step, so each object
keeps the pixels nearer its own core.

Small depth dropouts inside an object would look like necks, so the distance transform is
taken on the region closed by 3 x 3 (holes of one pixel filled; the pieces still list only
the region's own pixels). A cut whose pieces are not all at least ``min_pixels`` is not
made. A region whose pixels fill at least ``solidity`` of its convex hull is not searched:
most regions are one convex object, and skipping them keeps the search's cost off the common
case (on the training worlds the 0.9 used changed no answer; two touching discs fill 87-89 %
of their hull's pixels).

Shape alone also cuts single objects with a waist (a bent or lobed part). On the training
worlds the two pieces of such a wrong cut had the same mean colour (chromaticity RGB / sum,
L1 under 0.012 in 10 of 17), the pieces of two objects did not (0.013 and up, 21 of 21), so a
cut is made only where every two pieces differ by at least ``min_colour`` in mean
chromaticity; without a colour image no cut is made.

The deployed and the reference locator both call :func:`neck_pieces` on each of their
regions (same pixels, same answer); its own behaviour is pinned by
``test/kernels/test_locator_necks.py`` against shapes whose answer is known.
"""

from __future__ import annotations

import cv2
import numpy as np

from edge_loop.kernels.camera import Intrinsics
from edge_loop.kernels.object_locator.params import LocatorParams

SWEEP_STEP_PX = 0.5   # level step of the saddle search (the distance transform is exact)


def neck_markers(dist: np.ndarray, ratio: float, min_peak: float) -> np.ndarray | None:
    """Cores of the peaks of ``dist`` separated by a neck, as labels 1..k; None if none.

    Lowers a level from ``ratio`` x the highest peak: the parts of ``dist > level`` are the
    peaks still apart at that level. A part is a core when its peak is at least ``min_peak``
    and the level at most ``ratio`` x its peak (the saddle that will join it to another is
    that low or lower). The first level with two cores or more gives the markers.
    """
    top = float(dist.max()) if dist.size else 0.0
    if top < min_peak or ratio <= 0:
        return None
    order = np.argsort(-dist, axis=None, kind='stable')
    level = ratio * top
    while level > SWEEP_STEP_PX:
        above = (dist > level).astype(np.uint8)
        n, lab = cv2.connectedComponents(above, connectivity=8, ltype=cv2.CV_32S)
        if n > 2:
            # Each part's peak: its first pixel in the order of decreasing distance.
            flat = lab.reshape(-1)[order]
            ids, first = np.unique(flat, return_index=True)
            peak = np.zeros(n)
            peak[ids] = dist.reshape(-1)[order[first]]
            core = (peak >= min_peak) & (level <= ratio * peak)
            core[0] = False
            if np.count_nonzero(core) >= 2:
                relabel = np.zeros(n, np.int32)
                relabel[core] = np.arange(1, np.count_nonzero(core) + 1, dtype=np.int32)
                return relabel[lab]
        level -= SWEEP_STEP_PX
    return None


def neck_pieces(rows: np.ndarray, cols: np.ndarray, ratio: float, min_peak: float,
                min_pixels: int, solidity: float = 1.0) -> np.ndarray | None:
    """Which piece (0..k-1) each pixel of one region falls in, cut at necks; None: no cut.

    Args:
        rows, cols: (N,) pixel coordinates of the region (any order, any origin).
        ratio: a saddle at most this times the lower of its two peaks is a neck (0: never).
        min_peak: smallest peak (pixels: the half-width of the narrowest object) that counts.
        min_pixels: smallest piece; a cut that leaves a smaller one is not made.
        solidity: a region whose pixels fill at least this share of its convex hull is
            not searched (1: every region is).

    """
    rows = np.asarray(rows, np.int64)
    cols = np.asarray(cols, np.int64)
    if ratio <= 0 or rows.size < 2 * min_pixels:
        return None
    r0, c0 = int(rows.min()) - 2, int(cols.min()) - 2
    shape = (int(rows.max()) - r0 + 3, int(cols.max()) - c0 + 3)
    mask = np.zeros(shape, np.uint8)
    rr, cc = rows - r0, cols - c0
    mask[rr, cc] = 1
    closed = cv2.morphologyEx(mask, cv2.MORPH_CLOSE, np.ones((3, 3), np.uint8),
                              borderType=cv2.BORDER_CONSTANT, borderValue=0)
    if solidity < 1.0:
        # A region that fills most of its convex hull has no neck to find (and most regions
        # are one convex object): the saddle search below is skipped for it.
        # Pixels against the hull's pixels (cv2.contourArea runs through the outline's pixel
        # centres and undercounts: a disc would fill 102 % of it, two touching discs 90 %).
        contours, _ = cv2.findContours(closed, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        hull = np.zeros_like(closed)
        cv2.fillConvexPoly(hull, cv2.convexHull(np.concatenate(contours)), 1)
        if np.count_nonzero(closed) >= solidity * np.count_nonzero(hull):
            return None
    dist = cv2.distanceTransform(closed, cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
    markers = neck_markers(dist, ratio, min_peak)
    if markers is None:
        return None
    k = int(markers.max())
    # The cores are the objects shrunk by the same level: grown back over the region at
    # one pixel a step (8-neighbours, the higher label wins a tie), they meet at the necks.
    grown = markers.astype(np.uint16)
    inside = closed > 0
    for _ in range(shape[0] + shape[1]):
        reach = cv2.dilate(grown, np.ones((3, 3), np.uint8), borderType=cv2.BORDER_CONSTANT,
                           borderValue=0)
        new = inside & (grown == 0) & (reach > 0)
        if not new.any():
            break
        grown[new] = reach[new]
    label = grown[rr, cc].astype(np.int64)
    if (label == 0).any():      # a part of the region no core reached: not cut
        return None
    if np.bincount(label, minlength=k + 1)[1:].min() < min_pixels:
        return None
    return label - 1


def neck_settings(p: LocatorParams, sized: Intrinsics, min_pixels: int
                  ) -> tuple[float, float, int, float]:
    """(ratio, min_peak px, smallest piece px, solidity) for the camera's object sizes."""
    return (p.neck_ratio, p.neck_min_peak_for(sized),
            int(np.ceil(p.neck_min_piece * min_pixels)), p.neck_solidity)


def pieces_differ_in_colour(rgb: np.ndarray, pieces: np.ndarray, min_colour: float) -> bool:
    """True when every two pieces' mean chromaticities differ by ``min_colour`` (L1) or more.

    ``rgb`` (N, 3) the region's pixel colours, ``pieces`` (N,) their piece 0..k-1.
    """
    k = int(pieces.max()) + 1
    rgb = np.asarray(rgb, np.float64)
    sums = np.stack([np.bincount(pieces, rgb[:, ch], k) for ch in range(3)], axis=1)
    chroma = sums / np.maximum(sums.sum(axis=1, keepdims=True), 1e-9)
    diff = np.abs(chroma[:, None, :] - chroma[None, :, :]).sum(axis=2)
    return bool(diff[np.triu_indices(k, 1)].min() >= min_colour)


def cut_labels_at_necks(labels: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                        color_rgb: np.ndarray | None, p: LocatorParams, sized: Intrinsics,
                        min_pixels: int) -> np.ndarray:
    """Region labels of the foreground pixels with every region cut at its necks.

    ``labels`` (N,) int >= 0, the region of each pixel at (``rows``, ``cols``); the first piece
    of a cut region keeps its label, the others get new labels above all existing ones. The
    deployed locator's form; :func:`cut_components_at_necks` is the reference's.
    """
    if p.neck_ratio <= 0 or labels.size == 0 or color_rgb is None:
        return labels
    ratio, min_peak, piece_px, solidity = neck_settings(p, sized, min_pixels)
    counts = np.bincount(labels)
    out = labels
    next_label = counts.size
    for lbl in np.flatnonzero(counts >= 2 * piece_px):
        sel = np.flatnonzero(labels == lbl)
        pieces = neck_pieces(rows[sel], cols[sel], ratio, min_peak, piece_px, solidity)
        if pieces is None or not pieces_differ_in_colour(
                color_rgb[rows[sel], cols[sel]], pieces, p.neck_min_color):
            continue
        if out is labels:
            out = labels.copy()
        for k in range(1, int(pieces.max()) + 1):
            out[sel[pieces == k]] = next_label
            next_label += 1
    return out


def cut_components_at_necks(components: list[list[tuple[int, int]]],
                            color_rgb: np.ndarray | None, p: LocatorParams, sized: Intrinsics,
                            min_pixels: int) -> list[list[tuple[int, int]]]:
    """The reference locator's regions (lists of (row, col)) with each cut at its necks."""
    if p.neck_ratio <= 0 or color_rgb is None:
        return components
    ratio, min_peak, piece_px, solidity = neck_settings(p, sized, min_pixels)
    out = []
    for pixels in components:
        pieces = None
        if len(pixels) >= 2 * piece_px:
            rows = np.array([q[0] for q in pixels])
            cols = np.array([q[1] for q in pixels])
            pieces = neck_pieces(rows, cols, ratio, min_peak, piece_px, solidity)
            if pieces is not None and not pieces_differ_in_colour(
                    np.array([color_rgb[q] for q in pixels]), pieces, p.neck_min_color):
                pieces = None
        if pieces is None:
            out.append(pixels)
            continue
        for k in range(int(pieces.max()) + 1):
            out.append([q for q, piece in zip(pixels, pieces) if piece == k])
    return out
