# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""The segnet input the fused locator builds from a frame (its layout is the model's contract).

Kernel code: the locator (:mod:`.fused`) and the model package (:mod:`edge_loop.models.segnet`,
training, export) both use it from here, so no kernel imports from ``edge_loop.models``.
"""

from __future__ import annotations

import cv2
import numpy as np

INPUT_W, INPUT_H = 160, 120
HEIGHT_SCALE = 0.05          # m per unit of the height channel
HEIGHT_CLIP = (-1.0, 4.0)    # -5 cm .. 20 cm (taller objects saturate, they are obvious)


def prepare_inputs(color_rgb: np.ndarray | None, height: np.ndarray) -> np.ndarray:
    """The net's ``(1, 5, 120, 160)`` float32 input from RGB and a world-height image.

    Args:
        color_rgb: (H, W, 3) uint8 RGB or None (then the colour channels are 0 = mid-grey).
        height: (H, W) world z of every pixel, NaN where depth is invalid.

    """
    height = np.asarray(height, dtype=np.float32)
    valid = np.isfinite(height)
    # in place on one new array: the same values as where(valid, clip(h / scale), 0)
    h_scaled = height / np.float32(HEIGHT_SCALE)
    np.clip(h_scaled, *HEIGHT_CLIP, out=h_scaled)
    h_scaled[~valid] = 0.0
    size = (INPUT_W, INPUT_H)
    valid_lr = cv2.resize(valid.astype(np.float32), size, interpolation=cv2.INTER_AREA)
    hsum_lr = cv2.resize(h_scaled, size, interpolation=cv2.INTER_AREA)
    with np.errstate(invalid='ignore', divide='ignore'):
        h_lr = np.where(valid_lr > 1e-6, hsum_lr / valid_lr, 0.0)
    out = np.empty((1, 5, INPUT_H, INPUT_W), np.float32)
    if color_rgb is None:
        out[0, :3] = 0.0
    else:
        rgb = cv2.resize(np.ascontiguousarray(color_rgb), size, interpolation=cv2.INTER_AREA)
        out[0, :3] = rgb.transpose(2, 0, 1).astype(np.float32) * np.float32(1 / 255) - 0.5
    out[0, 3] = h_lr
    out[0, 4] = valid_lr
    return out
