# SPDX-FileCopyrightText: 2026 edge_loop developers
# SPDX-License-Identifier: Apache-2.0
"""Exposure normalisation before the locator (edge_loop.kernels.exposure)."""

from __future__ import annotations

import numpy as np
import pytest

from edge_loop.kernels.exposure import (
    DEFAULT_MAX_GAIN,
    DEFAULT_TARGET,
    bright_level,
    exposure_gain,
    gain_table,
    normalise_exposure,
)
from edge_loop.kernels.object_locator import locate_objects
from edge_loop.verify.sweeps import Box, scene

# Purple against blue, one height: apart in a lit frame, alike in the dark once the
# chromaticity offset (30 of R + G + B) dominates their sums.
PAIR = (Box(0.0, 0.0, 0.0, 0.05, 0.04, 0.03, rgb=(120, 60, 160)),
        Box(0.05, 0.0, 0.0, 0.05, 0.04, 0.03, rgb=(50, 60, 170)))


def test_a_lit_frame_is_returned_as_it_came():
    f = scene(640, 480, boxes=PAIR)
    assert bright_level(f.color) >= DEFAULT_TARGET
    out, gain = normalise_exposure(f.color, DEFAULT_TARGET, DEFAULT_MAX_GAIN)
    assert out is f.color and gain == 1.0


def test_a_dark_frame_is_brightened_to_the_target_through_the_table():
    rng = np.random.default_rng(3)
    dark = rng.integers(0, 41, (480, 640, 3), dtype=np.uint8)
    level = bright_level(dark)
    # the 99th percentile of the brightest channel on every 4th row and column
    sample = dark[::4, ::4].max(axis=-1)
    assert level == np.percentile(sample, 99, method='inverted_cdf')
    out, gain = normalise_exposure(dark, 100.0, 8.0)
    assert gain == pytest.approx(100.0 / level)
    plain = np.clip(np.floor(dark.astype(np.float64) * gain + 0.5), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(out, plain)
    assert out.dtype == np.uint8 and out.shape == dark.shape and out is not dark


def test_gain_limits_off_switch_and_bad_input():
    dark = np.full((48, 64, 3), 5, np.uint8)
    assert exposure_gain(dark, 100.0, 8.0) == 8.0              # capped: noise grows with it
    assert exposure_gain(np.zeros_like(dark), 100.0, 8.0) == 8.0   # black: no division by 0
    out, gain = normalise_exposure(dark, 0.0, 8.0)              # target 0: off
    assert out is dark and gain == 1.0
    assert normalise_exposure(None, 100.0, 8.0) == (None, 1.0)  # depth-only frame
    np.testing.assert_array_equal(gain_table(1.0), np.arange(256))
    assert gain_table(3.0)[100] == 255
    with pytest.raises(ValueError, match='uint8'):
        normalise_exposure(dark.astype(np.float32), 100.0, 8.0)
    with pytest.raises(ValueError, match='uint8'):
        normalise_exposure(dark[..., 0], 100.0, 8.0)


@pytest.mark.parametrize('scale', [0.3, 0.15])
def test_touching_objects_a_dark_frame_merges_are_two_once_brightened(scale):
    f = scene(640, 480, boxes=PAIR)
    rng = np.random.default_rng(7)
    noisy = f.color.astype(np.float32) * scale + rng.normal(0.0, 1.0, f.color.shape)
    dark = np.clip(noisy + 0.5, 0, 255).astype(np.uint8)
    # The failure the step is for: one region in the dark frame as it came ...
    assert len(locate_objects(dark, f.depth, f.intrinsics, f.extrinsics)) == 1
    bright, gain = normalise_exposure(dark, DEFAULT_TARGET, DEFAULT_MAX_GAIN)
    assert gain > 1.5
    # ... two objects, each where it is, once brightened.
    objects = locate_objects(bright, f.depth, f.intrinsics, f.extrinsics)
    assert len(objects) == 2
    found = sorted(o.position[0] for o in objects)
    np.testing.assert_allclose(found, [0.0, 0.05], atol=0.004)
