# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Exposure normalisation of a dark colour frame before the locator (issue 34).

A camera in a dark room delivers a frame whose brightest pixels sit far below full scale (the
shipped ``dim`` condition: 72-110 of 255 over 42 training worlds; half its exposure: 38-76).
The locator's colour rules hold absolute levels that were set on frames that use the range:
the chromaticity offset that keeps dark noise from making edges (``CHROMA_OFFSET``, 30 of R +
G + B) and the minimum light a hue needs (``hue_min_level``). In a frame that dark, the offset
flattens the colour differences between touching objects and the hue is unknown everywhere, so
touching objects of different colours stay one region. A digital gain that brings the frame's
bright end up to ``target`` puts those levels back where they were chosen; a frame already at
or above it is returned as it came (the same array, no copy).

The gain is the ratio of ``target`` to the 99th percentile of each pixel's brightest channel
(on every fourth row and column: the percentile of a VGA frame from 19,200 pixels),
at most ``max_gain`` (noise grows with it), and applied through a 256-entry table so that
every implementation (OpenCV here, an indexing on a GPU) gives the same bytes.

Pure numpy / OpenCV, no ROS; the node (``object_locator``) applies it to the frame before
the locator's kernels (CPU or GPU masks), so the kernels themselves are unchanged.
"""

from __future__ import annotations

import cv2
import numpy as np

SAMPLE_STRIDE = 4      # every 4th row and column for the percentile
PERCENTILE = 99.0
# The object_locator node's defaults. 100: the other shipped conditions' bright ends are above
# it (the shipped dim one's median is 97: at most 1.4x); chosen on training worlds relit
# darker than any of their own (tools/locator_worlds.py --relight, docs/worlds.md): 140 and
# 200 found as many objects but moved more centroids (noise made partial splits).
DEFAULT_TARGET = 100.0
DEFAULT_MAX_GAIN = 8.0


def bright_level(color_rgb: np.ndarray) -> float:
    """99th percentile of each pixel's brightest channel (uint8 (H, W, 3), sampled)."""
    sample = color_rgb[::SAMPLE_STRIDE, ::SAMPLE_STRIDE]   # a view: copying it costs 5x more
    brightest = np.maximum(np.maximum(sample[..., 0], sample[..., 1]), sample[..., 2])
    counts = np.bincount(brightest.ravel(), minlength=256)
    # The smallest level at or below which at least PERCENTILE % of the samples lie.
    rank = PERCENTILE / 100.0 * brightest.size
    return float(np.searchsorted(np.cumsum(counts), rank))


def exposure_gain(color_rgb: np.ndarray, target: float, max_gain: float) -> float:
    """The gain that brings the frame's bright end to ``target`` (1.0 when it is there)."""
    if target <= 0:
        return 1.0
    level = bright_level(color_rgb)
    return float(np.clip(target / max(level, 1.0), 1.0, max(max_gain, 1.0)))


def gain_table(gain: float) -> np.ndarray:
    """uint8 (256,) table: each 8-bit level times ``gain``, rounded, clipped to 255."""
    levels = np.arange(256, dtype=np.float64) * float(gain)
    return np.clip(np.floor(levels + 0.5), 0, 255).astype(np.uint8)


def normalise_exposure(color_rgb: np.ndarray | None, target: float, max_gain: float
                       ) -> tuple[np.ndarray | None, float]:
    """``(frame, gain)``: a dark frame brightened by ``gain``, any other frame as it came.

    ``color_rgb``: uint8 (H, W, 3) or None (a depth-only frame: returned as it came).
    ``target`` <= 0 turns the normalisation off.
    """
    if color_rgb is None:
        return None, 1.0
    if color_rgb.dtype != np.uint8 or color_rgb.ndim != 3 or color_rgb.shape[2] != 3:
        raise ValueError(f'exposure: expected a uint8 (H, W, 3) colour frame, got '
                         f'{color_rgb.dtype} {color_rgb.shape}')
    gain = exposure_gain(color_rgb, target, max_gain)
    if gain == 1.0:
        return color_rgb, 1.0
    return cv2.LUT(color_rgb, gain_table(gain)), gain
