# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""A learned veto on joining two touching regions that are two objects.

Part of :mod:`edge_loop.kernels.object_locator`. The merge rules of :func:`.merge_regions`
re-join touching objects the per-pixel cuts had separated, most often when glare washes
them alike (docs/worlds.md: with the pairs' true answer as a veto, detection on the glare-lit
training worlds rises from 83.0 to 94.2 %). Before any rule runs, each pair of touching
regions sharing at least ``merge_min_contact`` border pairs gets 12 features computed from
what :func:`.merge_regions` receives (region sums, contact, smooth contact, perimeters, hue
sums: no pixels, so both locator implementations compute the same) and a small MLP
(:mod:`.pair_veto_weights`, fitted on training-world pairs by ``tools/boundary/pair_veto.py``)
gives the probability that the two are different objects; a pair above
``LocatorParams.merge_pair_veto`` may not join (directly; it may still join through a third
region). 0 switches the veto off.
"""

from __future__ import annotations

import numpy as np

from edge_loop.kernels.camera import Intrinsics
from edge_loop.kernels.object_locator import pair_veto_weights as weights
from edge_loop.kernels.object_locator.params import LocatorParams

_MEAN = np.asarray(weights.MEAN, np.float64)
_SCALE = np.asarray(weights.SCALE, np.float64)
_W1 = np.asarray(weights.W1, np.float64)
_B1 = np.asarray(weights.B1, np.float64)
_W2 = np.asarray(weights.W2, np.float64)


def _chroma(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(v.sum(axis=-1, keepdims=True), 1e-9)


def pair_features(pairs: list[tuple[int, int]], rgb_sums: dict[int, np.ndarray],
                  linear_sums: dict[int, np.ndarray], counts: dict[int, int],
                  contact: dict[tuple[int, int], int], smooth: dict[tuple[int, int], int],
                  perimeter: dict[int, int] | None,
                  hue: tuple[dict[int, np.ndarray], dict[int, int]] | None,
                  p: LocatorParams, intr: Intrinsics) -> np.ndarray:
    """(K, 12) features of ``pairs`` (``weights.FEATURES``, in that order).

    Per pair (i, j), counts n, contact c: log c, c / sqrt(min n), c / sqrt(max n), log min n,
    log max n, 1 - smooth / c (border pairs with a height step or an unknown height), the L1
    between the mean chromaticities (display and linear light), the L1 between the
    specular-free hues and whether both are known (as ``merge_regions``' hue tests: enough
    unclipped pixels with enough light; 0 and 0 when ``hue`` is None), |log| of the ratio of
    the mean brightnesses (+1), c / the smaller perimeter (0 without perimeters).
    """
    ids = sorted(rgb_sums)
    pos = {r: k for k, r in enumerate(ids)}
    ii = np.array([pos[i] for i, _ in pairs])
    jj = np.array([pos[j] for _, j in pairs])
    rgb = np.array([np.asarray(rgb_sums[r], np.float64) for r in ids])
    lin = np.array([np.asarray(linear_sums[r], np.float64) for r in ids])
    cnt = np.array([float(counts[r]) for r in ids])
    c = np.array([float(contact[k]) for k in pairs])
    sm = np.array([float(smooth.get(k, 0)) for k in pairs])
    small, large = np.minimum(cnt[ii], cnt[jj]), np.maximum(cnt[ii], cnt[jj])
    hue_l1, known_both = np.zeros(len(pairs)), np.zeros(len(pairs))
    if hue is not None:
        hs = np.array([np.asarray(hue[0][r], np.float64) for r in ids])
        hn = np.array([float(hue[1][r]) for r in ids])
        known = (hn >= p.merge_hue_min_px_for(intr)) & (hs.sum(1) >= p.merge_hue_min_level * hn)
        known_both = (known[ii] & known[jj]).astype(np.float64)
        hue_l1 = np.where(known_both > 0, np.abs(_chroma(hs[ii]) - _chroma(hs[jj])).sum(1), 0.0)
    bright = rgb.sum(1) / np.maximum(cnt, 1)
    enclosed = np.zeros(len(pairs))
    if perimeter is not None:
        per = np.array([float(perimeter[r]) for r in ids])
        enclosed = c / np.maximum(np.minimum(per[ii], per[jj]), 1)
    return np.stack([
        np.log(c), c / np.sqrt(small), c / np.sqrt(large), np.log(small), np.log(large),
        1 - sm / c, np.abs(_chroma(rgb[ii]) - _chroma(rgb[jj])).sum(1),
        np.abs(_chroma(lin[ii]) - _chroma(lin[jj])).sum(1), hue_l1, known_both,
        np.abs(np.log((bright[ii] + 1) / (bright[jj] + 1))), enclosed], 1)


def two_objects_probability(features: np.ndarray) -> np.ndarray:
    """(K,) probability that each pair is two objects (the MLP of :mod:`.pair_veto_weights`)."""
    z = (features - _MEAN) / _SCALE
    h = np.maximum(z @ _W1 + _B1, 0.0)
    return 1.0 / (1.0 + np.exp(-(h @ _W2 + weights.B2)))


def vetoed_pairs(rgb_sums: dict[int, np.ndarray], linear_sums: dict[int, np.ndarray],
                 counts: dict[int, int], contact: dict[tuple[int, int], int],
                 smooth: dict[tuple[int, int], int], perimeter: dict[int, int] | None,
                 hue: tuple[dict[int, np.ndarray], dict[int, int]] | None,
                 p: LocatorParams, intr: Intrinsics) -> set[tuple[int, int]]:
    """The touching pairs (``i < j``, at least ``merge_min_contact``) that may not join."""
    if p.merge_pair_veto <= 0:
        return set()
    pairs = sorted(k for k, c in contact.items() if c >= p.merge_min_contact_for(intr))
    if not pairs:
        return set()
    prob = two_objects_probability(pair_features(pairs, rgb_sums, linear_sums, counts, contact,
                                                 smooth, perimeter, hue, p, intr))
    return {k for k, q in zip(pairs, prob) if q > p.merge_pair_veto}
