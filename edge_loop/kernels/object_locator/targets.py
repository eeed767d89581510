# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Target choice and the hand-off: picking order, label image and segments.

Part of :mod:`edge_loop.kernels.object_locator` (the method is in its docstring).
"""

from __future__ import annotations

import numpy as np

from edge_loop.kernels.object_locator.objects import DetectedObject

# --- selection --------------------------------------------------------------------------------

def rank_targets(objects: list[DetectedObject], tie_height: float = 0.01) -> list[int]:
    """Indices of ``objects`` in picking order (see the module docstring)."""
    if not objects:
        return []
    return rank_positions(np.array([o.position[:2] for o in objects]),
                          np.array([o.top for o in objects]), tie_height)


def rank_positions(xy: np.ndarray, tops: np.ndarray, tie_height: float = 0.01) -> list[int]:
    """Picking order from (K, 2) world centroids and (K,) tops: what :func:`rank_targets` uses.

    A consumer of the locator's result (the grasp planner) ranks with this from the published
    centroids and the segments' tops, without the :class:`DetectedObject` records.
    """
    n = len(xy)
    if n == 0:
        return []
    pos = np.asarray(xy, np.float64)
    if n > 1:
        dist = np.linalg.norm(pos[:, None, :] - pos[None, :, :], axis=-1)
        np.fill_diagonal(dist, np.inf)
        isolation = dist.min(axis=1)
    else:
        isolation = np.array([np.inf])
    tops = np.asarray(tops, np.float64)
    # Quantise heights to tie_height bands measured down from the highest object.
    band = np.floor((tops.max() - tops) / tie_height).astype(int)
    return sorted(range(n), key=lambda i: (band[i], -isolation[i], i))


def label_image(objects: list[DetectedObject], height: int, width: int) -> np.ndarray:
    """(H, W) label image: 0 = background, k = ``objects[k - 1]`` (uint8; uint16 past 255).

    The segmentation the locator hands on with ``/edge_loop/objects`` (its poses in the same
    order), so the grasp planner uses this frame's one perception result.
    """
    dtype = np.uint8 if len(objects) <= np.iinfo(np.uint8).max else np.uint16
    labels = np.zeros(height * width, dtype)
    for k, obj in enumerate(objects, 1):
        labels[obj.pixels] = k
    return labels.reshape(height, width)


def segments_from_labels(labels: np.ndarray, count: int) -> list[np.ndarray]:
    """Flat pixel indices of labels 1..``count``, each in raster order (see :func:`label_image`).

    Raster order is the order of :attr:`DetectedObject.pixels` for every object the depth
    locator finds, so points taken at these indices are those of the locator's objects.
    """
    flat = np.asarray(labels).reshape(-1)
    idx = np.flatnonzero(flat)
    lab = flat[idx]
    order = np.argsort(lab, kind='stable')
    idx, lab = idx[order], lab[order]
    bounds = np.searchsorted(lab, np.arange(1, count + 2))
    return [idx[bounds[k]:bounds[k + 1]] for k in range(count)]


def select_target(objects: list[DetectedObject], tie_height: float = 0.01) -> int | None:
    """Index of the object to pick next, or None when there is none."""
    order = rank_targets(objects, tie_height)
    return order[0] if order else None
